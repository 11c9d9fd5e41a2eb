//! `baton demo`: the whole round runs to exit 0 with real processes, and the project it
//! keeps holds what it printed — read back through other `baton` processes and the
//! upstream server's own file, never taken from the demo's word.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::{baton_exe, code, stderr};

fn demo(args: &[&str]) -> Output {
    Command::new(baton_exe())
        .args(args)
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_AS")
        .output()
        .expect("run baton demo")
}

/// `baton --json ARGS…` in the kept project, as `who` when given; insists on exit 0.
fn kept(dir: &Path, who: Option<&str>, args: &[&str]) -> Value {
    let mut cmd = Command::new(baton_exe());
    cmd.arg("--json")
        .current_dir(dir)
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_AS");
    if let Some(who) = who {
        cmd.args(["--as", who]);
    }
    let out = cmd.args(args).output().unwrap();
    assert_eq!(code(&out), 0, "baton {args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_demo_runs_a_whole_round_and_keeps_what_it_claims() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let out = demo(&["demo", "--keep", dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(code(&out), 0, "{text}\n{}", stderr(&out));

    // It ended with the status view and left a board running on the kept project.
    assert!(text.contains("$ baton --as planner status"), "{text}");
    let board = text
        .split("The board is running at ")
        .nth(1)
        .expect("the board's address is printed");
    let (url, rest) = board.split_once(" (process ").unwrap();
    let pid: i32 = rest.split(';').next().unwrap().parse().unwrap();
    let shown: Result<Value, _> = ureq::get(&format!("{url}v1/board"))
        .call()
        .map_err(|e| e.to_string())
        .and_then(|mut r| r.body_mut().read_json().map_err(|e| e.to_string()));
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    );
    assert_eq!(
        shown.unwrap()["project"],
        "demo",
        "the board shows the kept project"
    );

    // Each step was printed as a command a person could type, the executor's own steps
    // nested under its run.
    for step in [
        "$ baton --as planner handoff new --to executor",
        "$ baton --as executor run --order wo_",
        "  $ baton --as executor evidence run --order wo_",
        "  $ baton --as executor receipt write --step release-notes",
        "  $ baton --as executor gateway --order wo_",
        "$ baton --as planner review wo_",
        "$ baton --as planner order approve wo_",
        "$ baton --as executor negotiate submit notes-format",
        "$ baton --as planner resume",
    ] {
        assert!(text.contains(step), "`{step}` not printed:\n{text}");
    }
    // A second executor's reservation in the order's scope was refused, naming who held
    // it, and taken once the order ended.
    let refused = text
        .split("$ baton --as executor-2 reserve notes/1.5.md")
        .nth(1)
        .expect("the refused reservation is printed");
    let refused = refused.split("\n$ ").next().unwrap();
    assert!(
        refused.contains("held exclusively by executor")
            && refused.contains("until order wo_")
            && refused.contains("(exit 6, as expected)"),
        "{refused}"
    );
    let order = text
        .split("order create order.json")
        .nth(1)
        .and_then(|rest| rest.split_once("wo_"))
        .map(|(_, id)| format!("wo_{}", id.split(':').next().unwrap()))
        .expect("the order's id is printed");

    // The order was approved and its one held effect ran.
    let shown = kept(&dir, None, &["order", "show", &order]);
    assert_eq!(shown["order"]["status"], "approved", "{shown}");
    let effects: Vec<(&str, &str)> = shown["effects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["ref"].as_str().unwrap(), e["status"].as_str().unwrap()))
        .collect();
    assert_eq!(effects, [("notes/publish#1", "ran")]);
    // The upstream server wrote its line exactly once, though approve ran twice.
    let published = std::fs::read_to_string(dir.join("published.txt")).unwrap();
    assert_eq!(
        published.lines().collect::<Vec<_>>(),
        ["Baton 1.4: the CSV export keeps its filters"]
    );

    // The reviewer process gave APPROVE, recorded with its run, and the order counts as
    // the executor's first-time approval.
    let export = Command::new(baton_exe())
        .arg("export")
        .current_dir(&dir)
        .env_remove("BATON_PROJECT")
        .output()
        .unwrap();
    assert_eq!(code(&export), 0, "{}", stderr(&export));
    let verdicts: Vec<Value> = String::from_utf8_lossy(&export.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == "gate.changed" && e["data"]["type"] == "reviewed")
        .map(|e| e["data"].clone())
        .collect();
    assert_eq!(verdicts.len(), 1, "{verdicts:?}");
    assert_eq!(verdicts[0]["verdict"], "APPROVE");
    assert_eq!(verdicts[0]["order"], order.as_str());
    let record = kept(&dir, None, &["record", "executor"]);
    assert_eq!(record["items"][0]["first_time_approvals"], 1, "{record}");

    // The executor and the reviewer each ran under the launch wrapper and ended done,
    // tied to the order.
    let runs = kept(&dir, None, &["runs", "--all"]);
    let runs = runs["items"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{runs:?}");
    let reviewer_run = verdicts[0]["run"].as_str().unwrap();
    for run in runs {
        assert_eq!(run["status"], "done", "{run}");
        assert_eq!(run["order"], order.as_str(), "{run}");
    }
    let executor = runs
        .iter()
        .find(|r| r["participant"] == "executor")
        .expect("the executor's run");
    assert_ne!(executor["id"], reviewer_run);
    assert!(runs.iter().any(|r| r["id"] == reviewer_run), "{runs:?}");

    // The second executor holds the 1.5 notes now, and docs/ shared by no one else.
    let held = kept(&dir, None, &["reservations"]);
    let held: Vec<(&str, &str)> = held["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["holder"].as_str().unwrap(), r["path"].as_str().unwrap()))
        .collect();
    assert_eq!(
        held,
        [("executor-2", "docs"), ("executor-2", "notes/1.5.md")]
    );

    // The negotiation settled, and the receipt still matches its file.
    let negotiation = kept(&dir, None, &["negotiate", "show", "notes-format"]);
    assert_eq!(negotiation["result"], "agreement", "{negotiation}");
    kept(&dir, None, &["receipt", "verify", "release-notes"]);
}

#[test]
fn the_demo_prints_a_document_of_its_steps_with_json() {
    let out = demo(&["--json", "demo"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["schema"], "baton/demo@1");
    assert_eq!(doc["kept"], false);
    assert!(doc["order"].as_str().unwrap().starts_with("wo_"), "{doc}");
    let steps = doc["steps"].as_array().unwrap();
    assert!(
        steps.iter().all(|s| s["exit_code"].is_i64()),
        "every step exited: {doc}"
    );
    let review = steps
        .iter()
        .find(|s| s["command"].as_str().unwrap().contains(" review wo_"))
        .expect("a review step");
    assert!(
        review["stdout"].as_str().unwrap().contains("APPROVE"),
        "{review}"
    );
    // The throwaway project is gone.
    assert!(!Path::new(doc["project"].as_str().unwrap()).exists());
}
