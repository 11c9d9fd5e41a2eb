//! The human queue through real `baton` processes: each source, each suppression
//! rule, the per-order deduplication and the five-per-lane cap.

use serde_json::Value;

use crate::common::{Project, code};
use crate::orders::{TEAM, json_file, order, report_doc};

/// The ids in `lane`, and how many it held back.
fn lane(p: &Project, lane: &str) -> (Vec<String>, u64) {
    let q = p.json(None, &["queue", "--lane", lane]);
    let l = &q["lanes"][0];
    assert_eq!(l["lane"], lane);
    let ids = l["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect();
    (ids, l["held_back"].as_u64().unwrap())
}

fn all_ids(p: &Project) -> Vec<String> {
    let q = p.json(None, &["queue"]);
    q["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["items"].as_array().unwrap().clone())
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Runs `sh -c script` under `baton run` (optionally on `order`); returns the run id.
fn run(p: &Project, order: Option<&str>, script: &str) -> String {
    let mut args = vec!["--json", "run"];
    if let Some(o) = order {
        args.extend(["--order", o]);
    }
    args.extend(["--", "sh", "-c", script]);
    p.run(None, &args);
    let runs = p.json(None, &["runs", "--all"]);
    runs["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .max()
        .unwrap()
}

fn submitted(p: &Project) {
    let order_path = json_file(p, "order.json", &order("wo_1"));
    p.ok(Some("planner"), &["order", "create", &order_path]);
    p.ok(Some("impl-1"), &["order", "accept", "wo_1"]);
    let report = json_file(p, "report.json", &report_doc("wo_1", "impl-1", 1));
    p.ok(Some("impl-1"), &["order", "report", "wo_1", &report]);
}

#[test]
fn a_failed_run_is_in_the_failures_lane_until_the_same_command_succeeds() {
    let p = Project::new(TEAM);
    let failed = run(&p, None, "test -e flag");
    assert_eq!(lane(&p, "failures").0, [format!("run:{failed}")]);
    // A different command succeeding changes nothing.
    run(&p, None, "true");
    assert_eq!(lane(&p, "failures").0, [format!("run:{failed}")]);
    std::fs::write(p.path().join("flag"), "").unwrap();
    run(&p, None, "test -e flag");
    assert!(lane(&p, "failures").0.is_empty());
}

#[test]
fn a_later_success_for_the_same_order_suppresses_a_failed_run() {
    let p = Project::new(TEAM);
    let failed = run(&p, Some("wo_9"), "exit 3");
    run(&p, Some("wo_8"), "true");
    assert_eq!(lane(&p, "failures").0, [format!("run:{failed}")]);
    run(&p, Some("wo_9"), "echo another command");
    assert!(lane(&p, "failures").0.is_empty());
}

#[test]
fn an_acknowledgement_holds_an_item_back_until_a_newer_signal() {
    let p = Project::new(TEAM);
    submitted(&p);
    assert_eq!(lane(&p, "approvals").0, ["order:wo_1"]);
    p.ok(Some("owner"), &["queue", "ack", "order:wo_1"]);
    assert!(lane(&p, "approvals").0.is_empty());
    // A newer signal about the order (sent back, reported again) brings it back.
    p.ok(
        Some("planner"),
        &["order", "rework", "wo_1", "--reason", "keep the header"],
    );
    let report = json_file(&p, "report2.json", &report_doc("wo_1", "impl-1", 1));
    p.ok(Some("impl-1"), &["order", "report", "wo_1", &report]);
    assert_eq!(lane(&p, "approvals").0, ["order:wo_1"]);
}

#[test]
fn needs_by_hand_are_listed_and_acknowledged() {
    let p = Project::new(TEAM);
    let raised = p.json(Some("impl-1"), &["need", "which fixture is canonical?"]);
    let item = raised["item"].as_str().unwrap().to_owned();
    let q = p.json(None, &["queue", "--lane", "needs"]);
    assert_eq!(q["lanes"][0]["items"][0]["id"], item.as_str());
    assert_eq!(q["lanes"][0]["items"][0]["source"], "need_by_hand");
    assert!(
        q["lanes"][0]["items"][0]["text"]
            .as_str()
            .unwrap()
            .contains("which fixture is canonical?")
    );
    p.ok(None, &["queue", "ack", &item]);
    assert!(lane(&p, "needs").0.is_empty());
    // A need on an order that does not exist is refused.
    let out = p.run(None, &["need", "help", "--order", "wo_404"]);
    assert_eq!(code(&out), 4);
}

#[test]
fn items_about_one_order_keep_only_the_newest_signal() {
    let p = Project::new(TEAM);
    submitted(&p);
    let failed = run(&p, Some("wo_1"), "exit 1");
    // The run failed after the order was submitted: only the failure shows.
    assert_eq!(all_ids(&p), [format!("run:{failed}")]);
    // An unresolved review is newer still.
    let script = p.path().join("r.sh");
    std::fs::write(&script, "cat >/dev/null; echo 'no.'").unwrap();
    let out = p.run(
        Some("planner"),
        &[
            "review",
            "wo_1",
            "--reviewer",
            &format!("sh {}", script.display()),
        ],
    );
    assert_eq!(code(&out), 2);
    assert_eq!(all_ids(&p), ["review:wo_1"]);
}

#[test]
fn a_second_failed_review_lands_in_the_reviews_lane_with_its_disagreement() {
    let p = Project::new(TEAM);
    submitted(&p);
    let approve = p.path().join("a.sh");
    std::fs::write(&approve, "cat >/dev/null; echo APPROVE").unwrap();
    let fix = p.path().join("f.sh");
    std::fs::write(&fix, "cat >/dev/null; echo '1. rename it'").unwrap();
    let a = format!("sh {}", approve.display());
    let f = format!("sh {}", fix.display());
    let review = |p: &Project| {
        p.run(
            Some("planner"),
            &["review", "wo_1", "--reviewer", &a, "--reviewer", &f],
        )
    };
    assert_eq!(code(&review(&p)), 0);
    assert!(lane(&p, "reviews").0.is_empty());
    let report = json_file(&p, "report2.json", &report_doc("wo_1", "impl-1", 1));
    p.ok(Some("impl-1"), &["order", "report", "wo_1", &report]);
    assert_eq!(code(&review(&p)), 2);
    let q = p.json(None, &["queue", "--lane", "reviews"]);
    let item = &q["lanes"][0]["items"][0];
    assert_eq!(item["id"], "review:wo_1");
    assert_eq!(item["label"], "disagreement");
    // Once the owner decides, the review leaves the queue.
    p.ok(Some("planner"), &["order", "approve", "wo_1"]);
    assert!(lane(&p, "reviews").0.is_empty());
}

#[test]
fn a_request_open_past_its_topic_target_is_a_need() {
    let p = Project::new(TEAM);
    let config = p.path().join(".baton/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[queue.targets]\nurgent = \"0s\"\n");
    std::fs::write(&config, text).unwrap();
    let sent = p.json(
        Some("planner"),
        &[
            "send", "--to", "impl-1", "--type", "request", "--topic", "urgent", "--body", "now",
        ],
    );
    p.json(
        Some("planner"),
        &[
            "send", "--to", "impl-1", "--type", "request", "--topic", "later", "--body", "x",
        ],
    );
    let id = sent["id"].as_str().unwrap();
    assert_eq!(lane(&p, "needs").0, [format!("late:{id}")]);
}

#[test]
fn a_lane_shows_five_newest_first_and_counts_the_rest() {
    let p = Project::new(TEAM);
    let mut items = Vec::new();
    for i in 0..7 {
        let raised = p.json(Some("impl-1"), &["need", &format!("need {i}")]);
        items.push(raised["item"].as_str().unwrap().to_owned());
    }
    let (shown, held) = lane(&p, "needs");
    items.reverse();
    assert_eq!(shown, items[..5]);
    assert_eq!(held, 2);
    let _: Value = p.json(None, &["queue"]);
}

#[test]
fn a_need_raised_by_an_agent_session_through_its_hook_is_in_the_needs_lane() {
    use std::io::Write;
    let p = Project::new(TEAM);
    let mut child = p
        .cmd(Some("impl-1"), &["hook", "claude", "Notification"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            br#"{"session_id": "s1", "message": "Claude needs your permission to use Bash"}"#,
        )
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 0);
    let q = p.json(None, &["queue", "--lane", "needs"]);
    let item = &q["lanes"][0]["items"][0];
    assert_eq!(item["source"], "need_by_session", "{q}");
    assert!(
        item["text"]
            .as_str()
            .unwrap()
            .contains("Claude needs your permission to use Bash"),
        "{q}"
    );
    // Other hook events raise nothing, nor does a notice that asks nothing of a person.
    p.ok(Some("impl-1"), &["hook", "claude", "Stop", "{}"]);
    let notice = r#"{"session_id": "s1", "message": "Authentication successful", "notification_type": "auth_success"}"#;
    p.ok(Some("impl-1"), &["hook", "claude", "Notification", notice]);
    assert_eq!(lane(&p, "needs").0.len(), 1);
    // One that asks for a person by its kind does.
    let idle = r#"{"session_id": "s1", "message": "Claude is waiting for your input", "notification_type": "idle_prompt"}"#;
    p.ok(Some("impl-1"), &["hook", "claude", "Notification", idle]);
    assert_eq!(lane(&p, "needs").0.len(), 2);
}
