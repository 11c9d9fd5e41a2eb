//! `baton mcp` and `baton serve`'s MCP endpoint with the official MCP TypeScript SDK
//! (`@modelcontextprotocol/sdk`, pinned in `tests/node/package.json`, run under Node 22 from
//! npm): one client per participant, each on its role's profile — executor, planner,
//! reviewer, owner, and every tool for a role without a profile — through a message round,
//! a reviewer's round, a Work Order round and an observer's reads (`tests/node/mcp/round.mjs`).
//! The SDK parses every `tools/list` with the protocol's own schema and validates every
//! structured result against its tool's output schema, so a schema it refuses fails here.

use std::process::Output;

use serde_json::{Value, json};

use crate::common::{Project, baton_exe};
use crate::node;

/// The team: a participant of each role with a profile, and an observer, whose role has
/// none (so it is offered every tool, and may call only those that write nothing).
const TEAM: &[(&str, &str)] = &[
    ("planner", "planner"),
    ("impl-1", "executor"),
    ("rev", "reviewer"),
    ("owner", "owner"),
    ("bot", "observer"),
];

/// Each participant's profile and the tools it declares (`baton_mcp::Profile`): what the
/// client must be offered.
fn participants(tokens: &[(&str, String)]) -> Value {
    let mut all = serde_json::Map::new();
    for (name, role) in TEAM {
        let profile = baton_mcp::Profile::for_role(role);
        let mut who = json!({"profile": profile.as_str(), "tools": profile.tools()});
        if let Some((_, token)) = tokens.iter().find(|(n, _)| n == name) {
            who["token"] = json!(token);
        }
        all.insert((*name).to_owned(), who);
    }
    Value::Object(all)
}

/// Runs the round with `config`; panics with its output unless it passed, and returns
/// its stdout.
fn round(config: &Value) -> String {
    let out: Output = node::script("mcp/round.mjs")
        .arg(config.to_string())
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "round.mjs failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    print!("{stdout}");
    stdout
}

/// Every check of the round, as `round.mjs` prints it once passed.
fn passed(stdout: &str, transport: &str) {
    let profiles = baton_mcp::Profile::ALL.map(|p| {
        format!(
            "lists the {} profile ({} tools",
            p.as_str(),
            p.tools().len()
        )
    });
    for wanted in profiles.iter().map(String::as_str).chain([
        "message round ok",
        "reviewer round ok",
        "order round ok",
        "observer round ok",
        "each result valid against its output schema",
    ]) {
        let prefix = format!("{transport}: ");
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&prefix) && l.contains(wanted)),
            "{transport}: missing {wanted:?} in:\n{stdout}"
        );
    }
}

#[test]
fn the_typescript_sdk_runs_a_round_over_stdio_on_every_profile() {
    let p = Project::new(TEAM);
    let config = json!({
        "transport": "stdio",
        "baton": baton_exe(),
        "project": p.path(),
        "participants": participants(&[]),
    });
    passed(&round(&config), "stdio");
}

#[test]
fn the_typescript_sdk_runs_a_round_over_streamable_http_on_every_profile() {
    let (_dir, url, keys) = crate::mcp::shop_keyed(TEAM, "write");
    let tokens: Vec<(&str, String)> = TEAM.iter().map(|(name, _)| *name).zip(keys).collect();
    let serving = crate::server::serve(&url);
    let config = json!({
        "transport": "http",
        "url": format!("{}/v1/projects/shop/mcp", serving.base),
        "participants": participants(&tokens),
    });
    passed(&round(&config), "http");
}
