//! The review gate through real `baton` processes and real reviewer processes
//! (small `sh` scripts): every verdict, the one fix round, a second failure landing in the
//! queue, two reviewers, a reviewer killed mid-review, and the packet.

use serde_json::Value;

use crate::common::{Project, code, stderr};
use crate::orders::{TEAM, json_file, order, report_doc};

/// A project whose order `wo_1` (planner → impl-1) is submitted for review.
fn submitted() -> Project {
    let p = Project::new(TEAM);
    let order_path = json_file(&p, "order.json", &order("wo_1"));
    p.ok(Some("planner"), &["order", "create", &order_path]);
    p.ok(Some("impl-1"), &["order", "accept", "wo_1"]);
    report(&p);
    p
}

fn report(p: &Project) {
    let report = json_file(p, "report.json", &report_doc("wo_1", "impl-1", 1));
    p.ok(Some("impl-1"), &["order", "report", "wo_1", &report]);
}

/// Starts `baton review ORDER` as `who` with a reviewer that says it started and then takes
/// long enough to be killed, and kills the review (SIGKILL) while that reviewer runs; the
/// reviewer command.
pub(crate) fn killed_mid_review(p: &Project, who: &str, order: &str) -> String {
    let started = p.path().join(format!("review-started-{order}"));
    let slow = format!("touch {}; exec sleep 2", started.display());
    let mut running = p
        .cmd(Some(who), &["review", order, "--reviewer", &slow])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !started.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the reviewer never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    running.kill().unwrap();
    running.wait().unwrap();
    slow
}

/// A reviewer script in the project that reads its packet and prints `verdict`.
fn reviewer(p: &Project, name: &str, verdict: &str) -> String {
    let path = p.path().join(name);
    std::fs::write(
        &path,
        format!("#!/bin/sh\ncat > /dev/null\ncat <<'VERDICT'\n{verdict}\nVERDICT\n"),
    )
    .unwrap();
    format!("sh {}", path.display())
}

/// `baton --json review wo_1 --reviewer …` as the planner: its exit code and document.
fn review(p: &Project, reviewers: &[&str]) -> (i32, Value) {
    let mut args = vec!["--json", "review", "wo_1"];
    for r in reviewers {
        args.extend(["--reviewer", r]);
    }
    let out = p.run(Some("planner"), &args);
    let doc = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("review printed no document: {}", stderr(&out)));
    (code(&out), doc)
}

fn status(p: &Project) -> Value {
    p.json(None, &["order", "show", "wo_1"])["order"]["status"].clone()
}

#[test]
fn approve_is_recorded_with_its_ledger_row_and_the_order_waits_for_its_owner() {
    let p = submitted();
    let approve = reviewer(&p, "r.sh", "APPROVE");
    let (exit, doc) = review(&p, &[&approve]);
    assert_eq!(exit, 0);
    assert_eq!(doc["outcome"], "approved");
    assert_eq!(doc["verdicts"][0]["verdict"], "APPROVE");
    assert_eq!(status(&p), "submitted");
    // The reviewer ran under the launch wrapper: a ledger row on the order.
    let run = doc["verdicts"][0]["run"].as_str().expect("a run id");
    let runs = p.json(None, &["runs", "--all"]);
    let row = runs["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == run)
        .expect("the reviewer's run is in the ledger");
    assert_eq!(row["order"], "wo_1");
    assert_eq!(row["status"], "done");
    // It shows the reviewer command as given, and is no load of the planner's.
    assert_eq!(row["command"], serde_json::json!([approve]));
    assert_eq!(row["agent"], "sh");
    assert_eq!(row["participant"], Value::Null);
}

#[test]
fn the_reviewer_reads_the_packet_on_stdin_and_at_baton_packet() {
    let p = submitted();
    let script = p.path().join("reads.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\ngrep -q '^# Review packet for order wo_1' || exit 0\n\
         grep -q 'Filters kept' \"$BATON_PACKET\" || exit 0\necho APPROVE\n",
    )
    .unwrap();
    let (exit, doc) = review(&p, &[&format!("sh {}", script.display())]);
    assert_eq!((exit, &doc["outcome"]), (0, &Value::from("approved")));
}

#[test]
fn a_fix_goes_back_to_the_worker_once_and_a_second_failure_lands_in_the_queue() {
    let p = submitted();
    let fix = reviewer(
        &p,
        "fix.sh",
        "1. add a test for the empty filter\n2. keep the header",
    );
    let (exit, doc) = review(&p, &[&fix]);
    assert_eq!(exit, 0, "{doc}");
    assert_eq!(doc["outcome"], "rework");
    assert_eq!(doc["round"], 1);
    assert_eq!(
        doc["rework"],
        "1. add a test for the empty filter\n2. keep the header"
    );
    assert_eq!(status(&p), "working");
    let shown = p.json(None, &["order", "show", "wo_1"]);
    let steps = shown["events"].to_string();
    assert!(steps.contains("add a test for the empty filter"), "{steps}");

    // The worker reports again; the second review asks for fixes again: exit 2, queued,
    // and nothing goes back to the worker.
    report(&p);
    let (exit, doc) = review(&p, &[&fix]);
    assert_eq!(exit, 2, "{doc}");
    assert_eq!(doc["round"], 2);
    assert_eq!(doc["outcome"], "unresolved");
    assert_eq!(doc["queued"], true);
    assert_eq!(doc["rework"], Value::Null);
    assert_eq!(status(&p), "submitted");
}

#[test]
fn invalid_output_is_kept_raw_and_a_person_decides() {
    let p = submitted();
    let prose = reviewer(&p, "prose.sh", "Looks good to me.\nAPPROVE");
    let (exit, doc) = review(&p, &[&prose]);
    assert_eq!(exit, 2, "{doc}");
    assert_eq!(doc["verdicts"][0]["verdict"], "INVALID");
    assert_eq!(doc["verdicts"][0]["raw"], "Looks good to me.\nAPPROVE\n");
    assert_eq!(doc["outcome"], "unresolved");
    assert_eq!(status(&p), "submitted");
}

#[test]
fn two_reviewers_must_both_approve_and_a_disagreement_is_labelled() {
    let p = submitted();
    let approve = reviewer(&p, "a.sh", "APPROVE");
    let fix = reviewer(&p, "f.sh", "1. rename the flag");
    let (exit, doc) = review(&p, &[&approve, &fix]);
    assert_eq!(exit, 0, "{doc}");
    assert_eq!(doc["outcome"], "rework");
    assert_eq!(doc["disagreement"], true);
    assert_eq!(doc["rework"], "1. rename the flag");

    report(&p);
    let other = reviewer(&p, "b.sh", "APPROVE");
    let (exit, doc) = review(&p, &[&approve, &other]);
    assert_eq!(exit, 0, "{doc}");
    assert_eq!(doc["outcome"], "approved");
    assert_eq!(doc["disagreement"], false);
}

#[test]
fn a_reviewer_killed_mid_review_stops_the_chain() {
    let p = submitted();
    let script = p.path().join("killed.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nhead -c 10 > /dev/null\necho '1. half a verdict'\nkill -KILL 0\necho APPROVE\n",
    )
    .unwrap();
    let (exit, doc) = review(&p, &[&format!("sh {}", script.display())]);
    assert_eq!(exit, 128 + 9, "{doc}");
    assert_eq!(doc["verdicts"][0]["verdict"], "STOPPED");
    assert_eq!(doc["verdicts"][0]["signal"], 9);
    assert_eq!(doc["outcome"], "stopped");
    // No fix round, no new worker: the order stays where it was.
    assert_eq!(status(&p), "submitted");
    let run = doc["verdicts"][0]["run"].as_str().unwrap();
    let runs = p.json(None, &["runs", "--all"]);
    let row = runs["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == run)
        .unwrap();
    assert_eq!(row["status"], "stopped");
}

#[test]
fn packet_only_prints_the_packet_and_its_size_and_runs_nothing() {
    let p = submitted();
    let doc = p.json(Some("planner"), &["review", "wo_1", "--packet-only"]);
    let packet = doc["packet"].as_str().unwrap();
    assert_eq!(doc["bytes"], packet.len());
    assert_eq!(doc["max_bytes"], 256 * 1024);
    assert!(packet.contains("Brief: "), "{packet}");
    assert!(packet.contains("\"summary\": \"Filters kept\""), "{packet}");
    assert!(
        packet.contains("$ sh -c true   # after, exit 0"),
        "{packet}"
    );
    let brief = std::path::Path::new(doc["path"].as_str().unwrap()).with_file_name("brief.json");
    assert!(brief.exists());
    let runs = p.json(None, &["runs", "--all"]);
    assert_eq!(runs["items"].as_array().unwrap().len(), 0);
}

#[test]
fn an_order_not_submitted_is_refused_before_any_reviewer_runs() {
    let p = Project::new(TEAM);
    let order_path = json_file(&p, "order.json", &order("wo_1"));
    p.ok(Some("planner"), &["order", "create", &order_path]);
    let approve = reviewer(&p, "r.sh", "APPROVE");
    let out = p.run(Some("planner"), &["review", "wo_1", "--reviewer", &approve]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let runs = p.json(None, &["runs", "--all"]);
    assert_eq!(runs["items"].as_array().unwrap().len(), 0);
}

#[test]
fn the_track_record_counts_first_time_approvals_reworks_and_invalid_verdicts() {
    let p = submitted();
    let fix = reviewer(&p, "fix.sh", "1. add a test");
    let prose = reviewer(&p, "prose.sh", "fine by me");
    review(&p, &[&fix]);
    report(&p);
    review(&p, &[&prose]);
    p.ok(Some("planner"), &["order", "approve", "wo_1"]);
    let records = p.json(None, &["record"]);
    let by = |w: &str| {
        records["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["worker"] == w)
            .unwrap_or_else(|| panic!("no record for {w}: {records}"))
            .clone()
    };
    let worker = by("impl-1");
    assert_eq!(worker["orders"], 1);
    assert_eq!(worker["rework_rounds"], 1);
    assert_eq!(worker["first_time_approvals"], 0, "reworked first");
    assert_eq!(worker["usd"], 2.0);
    assert_eq!(by(&prose)["invalid_verdicts"], 1);
    // A reviewer that kept to the grammar has nothing to count.
    assert!(!records.to_string().contains("fix.sh"), "{records}");
    let one = p.json(None, &["record", "impl-1"]);
    assert_eq!(one["items"].as_array().unwrap().len(), 1);
}

/// Runs git in `dir`, insisting on success; returns trimmed stdout.
fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn the_packet_carries_the_task_local_diff_between_the_orders_base_and_the_reports_commit() {
    let p = Project::new(TEAM);
    let dir = p.path();
    git(dir, &["init", "-q"]);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/export.rs"), "fn export() {}\n").unwrap();
    std::fs::write(dir.join("untouched.rs"), "fn other() {}\n").unwrap();
    git(dir, &["add", "src", "untouched.rs"]);
    git(dir, &["commit", "-qm", "base"]);
    let base = git(dir, &["rev-parse", "HEAD"]);
    std::fs::write(dir.join("src/export.rs"), "fn export() { filter(); }\n").unwrap();
    git(dir, &["commit", "-qam", "keep the filters"]);
    let head = git(dir, &["rev-parse", "HEAD"]);
    // A change after the report's commit is not the task's.
    std::fs::write(dir.join("untouched.rs"), "fn later() {}\n").unwrap();
    git(dir, &["commit", "-qam", "later"]);

    let mut o = order("wo_1");
    o["x-baton"]["context"]["base_revision"] = base.clone().into();
    p.ok(
        Some("planner"),
        &["order", "create", &json_file(&p, "o.json", &o)],
    );
    p.ok(Some("impl-1"), &["order", "accept", "wo_1"]);
    let mut r = report_doc("wo_1", "impl-1", 1);
    r["x-baton"]["evidence"]["before"]["base_revision"] = base.clone().into();
    r["x-baton"]["evidence"]["review"]["commit"] = head.clone().into();
    p.ok(
        Some("impl-1"),
        &["order", "report", "wo_1", &json_file(&p, "r.json", &r)],
    );
    let doc = p.json(Some("planner"), &["review", "wo_1", "--packet-only"]);
    let packet = doc["packet"].as_str().unwrap();
    assert_eq!(doc["diff"], "whole");
    assert!(
        packet.contains(&format!("## Diff {base}..{head}")),
        "{packet}"
    );
    assert!(packet.contains("+fn export() { filter(); }"), "{packet}");
    assert!(!packet.contains("fn later()"), "{packet}");
}

#[test]
fn a_reviewer_killed_inside_its_shell_is_stopped_not_invalid() {
    let p = submitted();
    // The reviewer's own shell reports the kill as 128+15, which is all Baton sees of it.
    let (exit, doc) = review(&p, &["sh -c 'kill -TERM $$'; exit $?"]);
    assert_eq!(doc["verdicts"][0]["verdict"], "STOPPED", "{doc}");
    assert_eq!(doc["verdicts"][0]["signal"], 15);
    assert_eq!(doc["outcome"], "stopped");
    assert_eq!(exit, 128 + 15);
    assert_eq!(status(&p), "submitted");
}

/// The security events recorded so far.
fn security_events(p: &Project) -> Vec<Value> {
    p.json(None, &["security-events"])["items"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn the_worker_may_not_review_its_own_order_and_no_reviewer_runs() {
    let p = submitted();
    let ran = p.path().join("ran");
    let reviewer = format!("touch {}; echo APPROVE", ran.display());
    let before = p.json(None, &["status"])["generation"].clone();
    let out = p.run(Some("impl-1"), &["review", "wo_1", "--reviewer", &reviewer]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("worker of order wo_1"),
        "{}",
        stderr(&out)
    );
    assert!(
        !ran.exists(),
        "the reviewer ran before the review was refused"
    );
    // One security event, and nothing else: no round, no run, no step.
    let events = security_events(&p);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["participant"], "impl-1");
    let after = p.json(None, &["status"])["generation"].clone();
    assert_eq!(after.as_i64().unwrap(), before.as_i64().unwrap() + 1);
    assert_eq!(status(&p), "submitted");
}

#[test]
fn one_who_may_not_send_the_order_back_is_refused_before_a_fix_round_half_applies() {
    let p = submitted();
    p.ok(None, &["agent", "add", "rev", "--role", "reviewer"]);
    let fix = reviewer(&p, "fix.sh", "1. keep the header");
    let out = p.run(Some("rev"), &["review", "wo_1", "--reviewer", &fix]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    // Nothing was recorded of the round: the sender's review is still round 1.
    let (exit, doc) = review(&p, &[&fix]);
    assert_eq!((exit, &doc["round"]), (0, &Value::from(1)), "{doc}");
    assert_eq!(doc["outcome"], "rework");
    assert_eq!(status(&p), "working");
}

#[test]
fn two_reviewers_are_two_different_commands() {
    let p = submitted();
    let approve = reviewer(&p, "r.sh", "APPROVE");
    let out = p.run(
        Some("planner"),
        &[
            "review",
            "wo_1",
            "--reviewer",
            &approve,
            "--reviewer",
            &approve,
        ],
    );
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(stderr(&out).contains("different"), "{}", stderr(&out));
    assert!(
        p.json(None, &["runs", "--all"])["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_review_killed_before_its_verdict_is_named_by_status_and_the_next_one_concludes_its_round() {
    let p = submitted();
    let slow = killed_mid_review(&p, "planner", "wo_1");
    // The round began and did not conclude: the status names it.
    let status = p.json(None, &["status"]);
    let reviews = status["reviews"].as_array().unwrap();
    assert_eq!(reviews.len(), 1, "{status}");
    assert_eq!(
        (&reviews[0]["order"], &reviews[0]["round"]),
        (&Value::from("wo_1"), &Value::from(1))
    );
    assert_eq!(reviews[0]["reviewers"][0], slow.as_str());
    assert!(
        p.ok(None, &["status"])
            .contains("REVIEWS NOT CONCLUDED (1)")
    );
    // The next review is the same round, and concludes it.
    let approve = reviewer(&p, "r.sh", "APPROVE");
    let (exit, doc) = review(&p, &[&approve]);
    assert_eq!((exit, &doc["round"]), (0, &Value::from(1)), "{doc}");
    let status = p.json(None, &["status"]);
    assert_eq!(status["reviews"], serde_json::json!([]), "{status}");
}
