//! Conformance with the AWL reference validator: for every document of the corpus
//! (crates/baton-core/tests/awl-corpus), `baton handoff check --json` must report the same
//! set of `(rule, kind, path)` as `agent-work-layer` 0.5.0 (Baton's own B rules aside).
//!
//! The reference runs in a virtual environment under the cargo target directory
//! (`target/tmp/awl-venv`), made with `python3 -m venv` and
//! `pip install agent-work-layer==0.5.0` the first time and reused after. Without python3,
//! venv or pip the test fails, saying what is missing: it never passes by skipping.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::baton_exe;

type Triple = (String, String, String);

const REFERENCE: &str = "agent-work-layer==0.5.0";

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../baton-core/tests/awl-corpus")
}

fn reference_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/awl/reference.py")
}

fn run(cmd: &mut Command, what: &str) -> std::process::Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: could not start {cmd:?}: {e}; install it first"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The venv's python with the reference installed, made on first use.
fn reference_python() -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("awl-venv");
    let python = venv.join("bin/python");
    let ready = python.exists()
        && Command::new(&python)
            .args([
                "-c",
                "import agent_work_layer as a; assert a.__version__ == '0.5.0'",
            ])
            .output()
            .is_ok_and(|o| o.status.success());
    if ready {
        return python;
    }
    let _ = std::fs::remove_dir_all(&venv);
    run(
        Command::new("python3").arg("-m").arg("venv").arg(&venv),
        "creating the reference's virtual environment (python3 -m venv; Debian: apt-get install python3-venv)",
    );
    run(
        Command::new(venv.join("bin/pip")).args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            REFERENCE,
        ]),
        "installing the reference validator (pip install agent-work-layer==0.5.0)",
    );
    python
}

fn triples(v: &Value) -> BTreeSet<Triple> {
    v.as_array()
        .expect("a list of findings")
        .iter()
        .map(|t| {
            let s = |i: usize| t[i].as_str().expect("string").to_owned();
            (s(0), s(1), s(2))
        })
        .collect()
}

/// Writes `doc` to a file in `dir` and returns its path.
fn file(dir: &Path, name: &str, doc: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec(doc).expect("json")).expect("write");
    path.display().to_string()
}

/// Baton's findings for one case, B rules left out.
fn baton_findings(case: &Value, dir: &Path) -> Result<BTreeSet<Triple>, String> {
    let mut args: Vec<String> = vec![
        "--json".into(),
        "handoff".into(),
        "check".into(),
        "--contract".into(),
        "optional".into(),
        "--kind".into(),
        if case["kind"] == "report" {
            "report"
        } else {
            "order"
        }
        .into(),
        file(dir, "document.json", &case["document"]),
    ];
    let list = |key: &str| {
        case.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    match case["kind"].as_str() {
        Some("report") => {
            args.push("--order".into());
            args.push(file(dir, "order.json", &case["order"]));
            for (i, s) in list("sub_orders").iter().enumerate() {
                args.push("--sub-order".into());
                args.push(file(dir, &format!("sub-{i}.json"), s));
            }
        }
        Some("sub-order") => {
            args.push("--parent".into());
            args.push(file(dir, "parent.json", &case["parent"]));
            for (i, s) in list("siblings").iter().enumerate() {
                args.push("--sibling".into());
                args.push(file(dir, &format!("sibling-{i}.json"), s));
            }
        }
        _ => {}
    }
    let out = Command::new(baton_exe())
        .args(&args)
        .current_dir(dir)
        .env_remove("BATON_PROJECT")
        .output()
        .map_err(|e| e.to_string())?;
    let code = out.status.code();
    if code != Some(0) && code != Some(3) {
        return Err(format!(
            "baton exited {code:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let doc: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))?;
    assert_eq!(doc["schema"], "baton/handoff-check@1");
    let findings = doc["findings"].as_array().ok_or("no findings list")?;
    let invalid = findings.iter().any(|f| f["kind"] == "invalid");
    if invalid != (code == Some(3)) {
        return Err(format!("exit {code:?} does not match the findings"));
    }
    Ok(findings
        .iter()
        .filter(|f| !f["rule"].as_str().unwrap_or("").starts_with('B'))
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap_or("").to_owned();
            (s("rule"), s("kind"), s("path"))
        })
        .collect())
}

#[test]
fn findings_equal_the_reference_validator_on_the_corpus() {
    let python = reference_python();
    let corpus = corpus_dir();
    let out = run(
        Command::new(&python).arg(reference_script()).arg(&corpus),
        "running the reference validator",
    );
    let reference: BTreeMap<String, Value> =
        serde_json::from_slice(&out.stdout).expect("the reference prints JSON");
    assert!(
        reference.len() >= 80,
        "the corpus has {} documents; it needs at least 80",
        reference.len()
    );

    let mut mismatches = Vec::new();
    let mut per_rule: BTreeMap<String, usize> = BTreeMap::new();
    let mut total = 0;
    for (name, expected) in &reference {
        let case: Value = serde_json::from_slice(
            &std::fs::read(corpus.join(format!("{name}.json"))).expect("read case"),
        )
        .expect("case is JSON");
        if let Some(err) = expected.get("error") {
            mismatches.push(format!("{name}: the reference raised {err}; fix the case"));
            continue;
        }
        let expected = triples(expected);
        for (rule, _, _) in &expected {
            *per_rule.entry(rule.clone()).or_default() += 1;
        }
        total += expected.len();
        let dir = tempfile::tempdir().expect("temp dir");
        match baton_findings(&case, dir.path()) {
            Err(e) => mismatches.push(format!("{name}: {e}")),
            Ok(got) if got != expected => mismatches.push(format!(
                "{name}:\n    only the reference: {:?}\n    only baton:         {:?}",
                expected.difference(&got).collect::<Vec<_>>(),
                got.difference(&expected).collect::<Vec<_>>()
            )),
            Ok(_) => {}
        }
    }
    let rules: Vec<String> = (1..=5)
        .map(|i| format!("O{i}"))
        .chain((1..=16).map(|i| format!("R{i}")))
        .chain((1..=5).map(|i| format!("C{i}")))
        .collect();
    let uncovered: Vec<&String> = rules
        .iter()
        .filter(|r| !per_rule.contains_key(*r))
        .collect();
    println!(
        "awl conformance: {} documents, {total} reference findings, {} mismatched; per rule: {per_rule:?}",
        reference.len(),
        mismatches.len()
    );
    assert!(
        uncovered.is_empty(),
        "no corpus document triggers {uncovered:?}"
    );
    assert!(
        mismatches.is_empty(),
        "{} of {} documents differ from the reference:\n{}",
        mismatches.len(),
        reference.len(),
        mismatches.join("\n")
    );
}

#[test]
fn evidence_run_passes_output_and_exit_code_through_and_records_a_receipt() {
    let p = crate::common::Project::new(&[]);
    let out = p.run(
        None,
        &[
            "evidence",
            "run",
            "--order",
            "wo_1",
            "--",
            "sh",
            "-c",
            "echo seen; exit 7",
        ],
    );
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "seen\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let step = stderr
        .split('"')
        .find(|s| s.starts_with("evidence-"))
        .unwrap_or_else(|| panic!("no step named in {stderr}"))
        .to_owned();
    let receipt = p.json(None, &["receipt", "show", &step]);
    let artifact = receipt["receipt"]["artifact"].as_str().expect("artifact");
    let record: Value =
        serde_json::from_slice(&std::fs::read(p.path().join(artifact)).expect("record"))
            .expect("JSON record");
    assert_eq!(record["exit_code"], 7);
    assert_eq!(record["order"], "wo_1");
    assert_eq!(record["output_tail"], serde_json::json!(["seen"]));
    assert_eq!(
        record["revision"],
        Value::Null,
        "no git repository: unknown"
    );
    p.ok(None, &["receipt", "verify", &step]);
}

#[test]
fn handoff_check_exits_3_on_invalid_and_refuses_unreadable_input() {
    let p = crate::common::Project::new(&[]);
    std::fs::write(p.path().join("bad.json"), b"{\"spec\": ").expect("write");
    let out = p.run(None, &["--json", "handoff", "check", "bad.json"]);
    assert_eq!(out.status.code(), Some(3));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("findings JSON");
    assert_eq!(doc["findings"][0]["rule"], "B0");
    assert_eq!(doc["findings"][0]["path"], "/");
    let template = p.ok(None, &["handoff", "new"]);
    std::fs::write(p.path().join("template.json"), template).expect("write");
    // The template's placeholders are not a valid order, and the project requires the
    // contract by default.
    let out = p.run(None, &["handoff", "check", "template.json"]);
    assert_eq!(out.status.code(), Some(3));
    let out = p.run(None, &["handoff", "check", "missing.json"]);
    assert_eq!(out.status.code(), Some(4));
}

#[test]
fn handoff_new_fills_what_baton_knows_and_check_names_what_is_left() {
    let p = crate::common::Project::new(&[("planner", "planner"), ("impl-1", "executor")]);
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
            .args(args)
            .current_dir(p.path())
            .output()
            .expect("git")
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    std::fs::write(p.path().join("Cargo.toml"), "[package]\n").expect("write");
    git(&["init", "-q"]);
    git(&["add", "Cargo.toml"]);
    git(&["commit", "-qm", "start"]);
    let out = p.json(
        Some("planner"),
        &[
            "handoff",
            "new",
            "--to",
            "impl-1",
            "--goal",
            "Keep the filters",
            "--criterion",
            "Filtered rows only",
            "--budget",
            "usd=5",
            "--tool",
            "repo/*",
            "--deadline",
            "3d",
        ],
    );
    let mut order = out["template"].clone();
    assert_eq!(order["from"], "planner");
    assert_eq!(order["x-baton"]["execution"]["test_command"], "cargo test");
    assert_eq!(order["x-baton"]["acceptance"]["owner"], "planner");
    assert_eq!(order["budget"], serde_json::json!({"usd": 5}));
    assert_eq!(
        order["x-baton"]["context"]["base_revision"]
            .as_str()
            .map(str::len),
        Some(40),
        "HEAD: {order}"
    );
    std::fs::write(p.path().join("order.json"), order.to_string()).expect("write");
    // Exactly what a person must decide is named, and nothing else.
    let check = p.run(None, &["--json", "handoff", "check", "order.json"]);
    assert_eq!(check.status.code(), Some(3));
    let found: Value = serde_json::from_slice(&check.stdout).expect("findings");
    let mut named: Vec<(String, String)> = found["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().into(),
                f["path"].as_str().unwrap().into(),
            )
        })
        .collect();
    named.sort();
    let left = [
        "/x-baton/context/expected",
        "/x-baton/context/reproduction",
        "/x-baton/decision/resume_at",
        "/x-baton/scope/allowed/0",
        "/x-baton/stop_when/0",
    ];
    assert_eq!(
        named,
        left.iter()
            .map(|p| ("B10".to_owned(), (*p).to_owned()))
            .collect::<Vec<_>>()
    );
    // Once a person decides them, the order is accepted as written.
    for (path, value) in [
        ("/x-baton/context/expected", "only filtered rows"),
        ("/x-baton/context/reproduction", "export with a filter"),
        ("/x-baton/decision/resume_at", "run cargo test csv_filters"),
        ("/x-baton/scope/allowed/0", "src/export.rs"),
        ("/x-baton/stop_when/0", "the fixtures are missing"),
    ] {
        *order.pointer_mut(path).unwrap() = Value::from(value);
    }
    std::fs::write(p.path().join("order.json"), order.to_string()).expect("write");
    p.ok(None, &["handoff", "check", "order.json"]);
    p.ok(Some("planner"), &["order", "create", "order.json"]);

    // The worker's report starts from its evidence runs: the first is `before`, the
    // newest `after`, and each criterion cites the newest.
    let id = order["id"].as_str().unwrap().to_owned();
    p.ok(Some("impl-1"), &["order", "accept", &id]);
    let run = |script: &str| {
        let out = p.run(
            Some("impl-1"),
            &["evidence", "run", "--order", &id, "--", "sh", "-c", script],
        );
        assert!(out.status.code().is_some(), "evidence run");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    run("echo 2 rows; exit 1");
    // Its receipt's step is named once, as the ref to cite.
    let said = run("echo 1 row");
    assert!(said.starts_with("baton: evidence-"), "{said}");
    assert!(!said.contains("evidence evidence"), "{said}");
    let out = p.json(Some("impl-1"), &["handoff", "new", "--report", &id]);
    let mut report = out["template"].clone();
    let ev = &report["x-baton"]["evidence"];
    assert_eq!(
        (
            ev["before"]["exit_code"].clone(),
            ev["after"]["exit_code"].clone()
        ),
        (Value::from(1), Value::from(0)),
        "{report}"
    );
    assert_eq!(ev["before"]["output"], "2 rows");
    assert_eq!(ev["review"]["acceptance_owner"], "planner");
    std::fs::write(p.path().join("report.json"), report.to_string()).expect("write");
    let check = p.run(
        None,
        &[
            "--json",
            "handoff",
            "check",
            "report.json",
            "--order",
            "order.json",
        ],
    );
    assert_eq!(check.status.code(), Some(3));
    let found: Value = serde_json::from_slice(&check.stdout).expect("findings");
    let mut named: Vec<String> = found["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            format!(
                "{} {}",
                f["rule"].as_str().unwrap(),
                f["path"].as_str().unwrap()
            )
        })
        .collect();
    named.sort();
    let left = [
        "/cost/usd",
        "/evidence/0/note",
        "/result/summary",
        "/x-baton/evidence/change/0/file",
        "/x-baton/evidence/change/0/reason",
        "/x-baton/evidence/uncertainty/0",
    ];
    // Each placeholder is named (B10) and nothing else is wrong: the one other finding is
    // the shape rule on the same path (a placeholder stands where a number belongs).
    let mut expected: Vec<String> = left.iter().map(|p| format!("B10 {p}")).collect();
    expected.push("R1 /cost/usd".to_owned());
    expected.sort();
    assert_eq!(named, expected);
    for (path, value) in [
        ("/cost/usd", Value::from(1)),
        (
            "/evidence/0/note",
            Value::from("the filtered export has one row"),
        ),
        ("/result/summary", Value::from("Filters kept")),
        (
            "/x-baton/evidence/change/0/file",
            Value::from("src/export.rs"),
        ),
        (
            "/x-baton/evidence/change/0/reason",
            Value::from("apply the filters"),
        ),
    ] {
        *report.pointer_mut(path).unwrap() = value;
    }
    report["x-baton"]["evidence"]["uncertainty"] = serde_json::json!({"none": true});
    std::fs::write(p.path().join("report.json"), report.to_string()).expect("write");
    p.ok(
        None,
        &["handoff", "check", "report.json", "--order", "order.json"],
    );
    p.ok(Some("impl-1"), &["order", "report", &id, "report.json"]);
}
