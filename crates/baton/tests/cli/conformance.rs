//! The MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! `tests/node/package.json`, run under Node 22 from npm): its server scenarios against
//! `baton serve` over Streamable HTTP, and against `baton mcp` over stdio through the
//! tests' bridge (`tests/node/conformance/bridge.mjs`: the suite speaks HTTP only, and
//! sends no key, so the bridge adds the key over HTTP and carries each session's lines to
//! a `baton mcp` process over stdio).
//!
//! `tests/node/conformance/not-applicable.json` lists the scenarios that do not apply to
//! Baton, per transport, and why (most call the suite's own test tools, prompts or
//! resources). Every other scenario must pass, and every listed one must fail: a listed
//! scenario that passes means the list is wrong, and fails the test too.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::common::{Project, baton_exe};
use crate::node;

/// A bridge process, killed on drop.
struct Bridge {
    child: Child,
    url: String,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        // SIGTERM first: the stdio bridge ends its `baton mcp` sessions on it.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}

/// Starts `bridge.mjs` with `args`; its URL is the first line it prints.
fn bridge(args: &[&str]) -> Bridge {
    let mut child = node::script("conformance/bridge.mjs")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the bridge");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("the bridge says where it listens");
    let url = first
        .trim()
        .strip_prefix("bridge: ")
        .unwrap_or_else(|| panic!("the bridge said {first:?}"))
        .to_owned();
    Bridge { child, url }
}

/// Whether each scenario the suite ran passed (no check failed), and the failures' words,
/// read from the results it wrote under `dir` (`server-SCENARIO-TIMESTAMP/checks.json`).
fn outcomes(dir: &Path) -> BTreeMap<String, Vec<String>> {
    let named = regex::Regex::new(r"^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$").unwrap();
    let mut outcomes = BTreeMap::new();
    for entry in std::fs::read_dir(dir).expect("the suite wrote its results") {
        let entry = entry.unwrap();
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(scenario) = named.captures(&file).map(|c| c[1].to_owned()) else {
            continue;
        };
        let checks: Value = serde_json::from_slice(
            &std::fs::read(entry.path().join("checks.json")).expect("checks.json"),
        )
        .expect("checks.json is JSON");
        let failures = checks
            .as_array()
            .expect("an array of checks")
            .iter()
            .filter(|c| c["status"] == "FAILURE")
            .map(|c| format!("{}: {}", c["id"], c["errorMessage"]))
            .collect();
        outcomes.insert(scenario, failures);
    }
    outcomes
}

/// The scenarios listed as not applicable over `transport`.
fn not_applicable(transport: &str) -> BTreeMap<String, String> {
    let path = node::dir().join("conformance/not-applicable.json");
    let list: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    list["scenarios"]
        .as_object()
        .expect("scenarios")
        .iter()
        .filter(|(_, s)| {
            s["transports"]
                .as_array()
                .expect("transports")
                .iter()
                .any(|t| t == transport)
        })
        .map(|(name, s)| (name.clone(), s["why"].as_str().expect("why").to_owned()))
        .collect()
}

/// Runs the suite's server scenarios (its default set) against `url`, and holds the
/// outcomes to the list for `transport`.
fn suite(url: &str, transport: &str) {
    let results = tempfile::tempdir().unwrap();
    let out = Command::new(node::node())
        .arg(node::bin("conformance"))
        .args(["server", "--url", url, "--output-dir"])
        .arg(results.path())
        .current_dir(node::dir())
        .output()
        .expect("run the conformance suite");
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let outcomes = outcomes(results.path());
    assert!(
        outcomes.contains_key("server-initialize") && outcomes.contains_key("tools-list"),
        "the suite ran too little ({:?}):\n{said}",
        outcomes.keys()
    );
    let listed = not_applicable(transport);
    let mut wrong = Vec::new();
    for (scenario, failures) in &outcomes {
        match (listed.get(scenario), failures.is_empty()) {
            (None, false) => wrong.push(format!("{scenario} failed: {failures:?}")),
            (Some(why), true) => wrong.push(format!(
                "{scenario} passed, but is listed as not applicable ({why}): take it off the list"
            )),
            _ => {}
        }
    }
    for scenario in listed.keys().filter(|s| !outcomes.contains_key(*s)) {
        wrong.push(format!(
            "{scenario} is listed as not applicable but the suite no longer runs it"
        ));
    }
    let passed = outcomes.values().filter(|f| f.is_empty()).count();
    println!(
        "conformance over {transport}: {passed} scenarios passed, {} not applicable failed as listed",
        outcomes.len() - passed
    );
    assert!(wrong.is_empty(), "{wrong:#?}\n{said}");
}

#[test]
fn the_conformance_suite_passes_every_applicable_scenario_over_streamable_http() {
    let (_dir, url, tokens) = crate::mcp::shop_keyed(&[("impl-1", "executor")], "write");
    let token = &tokens[0];
    let serving = crate::server::serve(&url);
    let mcp = format!("{}/v1/projects/shop/mcp", serving.base);
    let bridge = bridge(&["http", &mcp, token]);
    suite(&bridge.url, "http");
}

#[test]
fn the_conformance_suite_passes_every_applicable_scenario_over_stdio_through_a_bridge() {
    let p = Project::new(&[("impl-1", "executor")]);
    let exe = baton_exe();
    let bridge = bridge(&[
        "stdio",
        exe.to_str().unwrap(),
        p.path().to_str().unwrap(),
        "impl-1",
    ]);
    suite(&bridge.url, "stdio");
}
