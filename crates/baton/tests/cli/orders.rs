//! The Work Order lifecycle through real `baton` processes: a whole round,
//! who may act, refusals that store nothing, expiry by deadline and by limit, `order wait`
//! woken by another process, and two writers racing for the same seq.

use std::process::{Child, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Project, code, stderr, until_waiting, work_order, work_report};

/// The longest any single process may take before the test gives up on it.
const PATIENCE: Duration = Duration::from_secs(60);

pub(crate) const TEAM: &[(&str, &str)] = &[
    ("planner", "planner"),
    ("impl-1", "executor"),
    ("impl-2", "executor"),
    ("owner", "owner"),
];

/// A Work Order from the planner to impl-1 that passes every rule, the `x-baton` contract
/// included (the project requires it by default).
fn order_doc(id: &str, created_at: &str, deadline: &str) -> Value {
    let mut order = work_order(id);
    order["created_at"] = created_at.into();
    order["deadline"] = deadline.into();
    order["escalate_to"] = "owner".into();
    order
}

pub(crate) fn order(id: &str) -> Value {
    order_doc(id, "2025-01-01T00:00:00Z", "2999-01-01T00:00:00Z")
}

/// A `done` report on `order_id` by `from`, with its evidence, that spent `usd`.
pub(crate) fn report_doc(order_id: &str, from: &str, usd: u32) -> Value {
    let mut report = work_report(order_id);
    report["from"] = from.into();
    report["cost"]["usd"] = usd.into();
    report
}

/// Writes `bytes` to a file in the project and returns its path.
fn file(p: &Project, name: &str, bytes: impl AsRef<[u8]>) -> String {
    let path = p.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_owned()
}

pub(crate) fn json_file(p: &Project, name: &str, doc: &Value) -> String {
    file(p, name, doc.to_string())
}

/// How many security events the log holds.
fn security_events(p: &Project) -> i64 {
    p.json(None, &["security-events", "--limit", "100"])["items"]
        .as_array()
        .map_or(0, |items| items.len() as i64)
}

/// Runs a command that must be refused with `want`, and checks that it stored nothing but
/// the security event an attempt beyond authority is.
fn refused(p: &Project, who: Option<&str>, args: &[&str], want: i32) -> String {
    let before = p.generation();
    let attempts = security_events(p);
    let out = p.run(who, args);
    assert_eq!(
        code(&out),
        want,
        "baton {args:?} as {who:?}: {}",
        stderr(&out)
    );
    let recorded = security_events(p) - attempts;
    assert!(recorded <= 1, "baton {args:?}: {recorded} security events");
    assert_eq!(
        p.generation(),
        before + recorded,
        "baton {args:?} wrote to the log"
    );
    assert!(out.stdout.is_empty(), "a refusal printed to stdout");
    stderr(&out)
}

fn show(p: &Project, id: &str) -> Value {
    p.json(None, &["order", "show", id])
}

/// The order's own seqs, oldest first.
fn seqs(p: &Project, id: &str) -> Vec<i64> {
    show(p, id)["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect()
}

/// A project with the team and one order, `wo_1`, offered to impl-1.
fn offered() -> Project {
    let p = Project::new(TEAM);
    let path = json_file(&p, "order.json", &order("wo_1"));
    p.ok(Some("planner"), &["order", "create", &path]);
    p
}

/// Waits at most [`PATIENCE`] for a child to exit.
fn finish(child: Child) -> Output {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(child.wait_with_output().expect("wait for baton"));
    });
    rx.recv_timeout(PATIENCE)
        .unwrap_or_else(|_| panic!("gave up after {PATIENCE:?} waiting for baton"))
}

fn spawn(p: &Project, who: &str, args: &[&str]) -> Child {
    p.cmd(Some(who), args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn baton")
}

#[test]
fn a_whole_round_numbers_every_step_and_counts_the_reports() {
    let p = Project::new(TEAM);
    let order_path = json_file(&p, "order.json", &order("wo_1"));
    let created = p.json(Some("planner"), &["order", "create", &order_path]);
    assert_eq!(created["order"]["status"], "offered");
    assert_eq!(created["order"]["seq"], 1);
    // The order travels as a request in its worker's inbox.
    let inbox = p.json(Some("impl-1"), &["inbox"]);
    assert_eq!(inbox["items"][0]["id"], created["order"]["message"]);
    assert_eq!(inbox["items"][0]["type"], "request");

    let report = json_file(&p, "report.json", &report_doc("wo_1", "impl-1", 1));
    let round: &[(&str, &[&str], &str)] = &[
        ("impl-1", &["accept", "wo_1"], "accepted"),
        ("impl-1", &["start", "wo_1"], "working"),
        ("impl-1", &["report", "wo_1", &report], "submitted"),
        (
            "planner",
            &["rework", "wo_1", "--reason", "keep the header row"],
            "working",
        ),
        ("impl-1", &["report", "wo_1", &report], "submitted"),
        ("planner", &["approve", "wo_1"], "approved"),
    ];
    for (who, args, want) in round {
        let mut all = vec!["order"];
        all.extend_from_slice(args);
        let out = p.json(Some(who), &all);
        assert_eq!(out["order"]["status"], *want, "{who} {args:?}");
        if *want == "accepted" {
            // Acting on the order is reading its request.
            let inbox = p.json(Some("impl-1"), &["inbox"]);
            assert_eq!(inbox["items"][0]["status"], "delivered", "{inbox}");
        }
    }
    // The approved order is no longer owed: both ends of its request are closed.
    assert_eq!(p.json(Some("impl-1"), &["inbox"])["items"], json!([]));
    let outbox = p.json(Some("planner"), &["outbox", "--all"]);
    assert_eq!(
        outbox["items"][0]["status"]["impl-1"], "completed",
        "{outbox}"
    );
    assert_eq!(
        outbox["items"][0]["request_status"], "completed",
        "{outbox}"
    );
    let shown = show(&p, "wo_1");
    assert_eq!(shown["order"]["attempt"], 2);
    assert_eq!(shown["order"]["allowed"], json!([]));
    assert_eq!(shown["document"]["id"], "wo_1");
    assert_eq!(shown["report"]["from"], "impl-1");
    assert_eq!(seqs(&p, "wo_1"), (1..=7).collect::<Vec<_>>());
    let events = shown["events"].as_array().unwrap();
    let rework = &events[4];
    assert_eq!(
        (&rework["action"], &rework["actor"], &rework["note"]),
        (
            &json!("rework"),
            &json!("planner"),
            &json!("keep the header row")
        )
    );
    assert_eq!(events[5]["attempt"], 2);
    // A closed order is out of the default list, in --all.
    assert_eq!(
        p.json(Some("impl-1"), &["order", "list"])["items"],
        json!([])
    );
    assert_eq!(
        p.json(Some("impl-1"), &["order", "list", "--all"])["items"][0]["id"],
        "wo_1"
    );
}

#[test]
fn an_order_is_named_by_its_id_or_a_unique_prefix_in_either_case() {
    let p = offered();
    let path = json_file(&p, "second.json", &order("wo_release-notes"));
    p.ok(Some("planner"), &["order", "create", &path]);
    let path = json_file(&p, "third.json", &order("wo_release-plan"));
    p.ok(Some("planner"), &["order", "create", &path]);
    // A short id is named whole; a unique prefix in upper case names its order.
    assert_eq!(show(&p, "WO_1")["order"]["id"], "wo_1");
    assert_eq!(show(&p, "WO_RELEASE-N")["order"]["id"], "wo_release-notes");
    p.ok(Some("impl-1"), &["order", "accept", "wo_release-p"]);
    assert_eq!(show(&p, "wo_release-plan")["order"]["status"], "accepted");
    let why = refused(&p, None, &["order", "show", "wo_release"], 3);
    assert!(
        why.contains("wo_release-notes") && why.contains("wo_release-plan"),
        "{why}"
    );
    // A run ties itself to the order its prefix names.
    p.ok(
        Some("impl-1"),
        &["run", "--order", "WO_RELEASE-P", "--", "true"],
    );
    let runs = p.json(None, &["runs", "--all"]);
    assert_eq!(runs["items"][0]["order"], "wo_release-plan", "{runs}");
}

#[test]
fn only_the_named_parties_may_act_and_a_wrong_actor_writes_nothing() {
    let p = offered();
    for (who, args) in [
        ("impl-2", vec!["order", "accept", "wo_1"]),
        ("planner", vec!["order", "accept", "wo_1"]),
        ("impl-1", vec!["order", "cancel", "wo_1"]),
        ("owner", vec!["order", "cancel", "wo_1"]),
    ] {
        let err = refused(&p, Some(who), &args, 5);
        assert!(err.contains("only its"), "{err}");
    }
    p.ok(Some("impl-1"), &["order", "accept", "wo_1"]);
    p.ok(Some("impl-1"), &["order", "start", "wo_1"]);
    let mut blocked = report_doc("wo_1", "impl-1", 1);
    blocked["status"] = json!("blocked");
    blocked["questions"] = json!(["Which time zone?"]);
    let blocked = json_file(&p, "blocked.json", &blocked);
    p.ok(Some("impl-1"), &["order", "report", "wo_1", &blocked]);
    assert_eq!(show(&p, "wo_1")["order"]["status"], "blocked");
    // The escalation contact may answer; the other worker may not.
    refused(
        &p,
        Some("impl-2"),
        &["order", "answer", "wo_1", "--text", "UTC"],
        5,
    );
    let answered = p.json(Some("owner"), &["order", "answer", "wo_1", "--text", "UTC"]);
    assert_eq!(answered["order"]["status"], "working");
    // Without an identity nobody acts.
    refused(&p, None, &["order", "approve", "wo_1"], 2);
}

#[test]
fn an_invalid_report_is_refused_with_its_findings_and_stores_nothing() {
    let p = offered();
    p.ok(Some("impl-1"), &["order", "accept", "wo_1"]);
    let mut bad = report_doc("wo_1", "impl-1", 1);
    bad["evidence"] = json!([{"criterion": "c9", "type": "note", "note": "?"}]);
    bad["x-baton"]["evidence"]["uncertainty"] = json!([]);
    let path = json_file(&p, "bad.json", &bad);
    let err = refused(&p, Some("impl-1"), &["order", "report", "wo_1", &path], 3);
    for rule in ["R3 /evidence/0/criterion", "R4", "B7"] {
        assert!(err.contains(rule), "{rule} missing from: {err}");
    }
    let wrong_order = json_file(&p, "other.json", &report_doc("wo_2", "impl-1", 1));
    let err = refused(
        &p,
        Some("impl-1"),
        &["order", "report", "wo_1", &wrong_order],
        3,
    );
    assert!(err.contains("R2 /order_id"), "{err}");
    assert_eq!(show(&p, "wo_1")["order"]["status"], "accepted");
}

#[test]
fn bad_input_is_refused_clearly_and_stores_nothing() {
    let p = offered();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("malformed.json", b"{\"id\": ".to_vec(), "not JSON"),
        ("array.json", b"[1, 2]".to_vec(), "must be a JSON object"),
        (
            "latin1.json",
            b"{\"goal\": \"caf\xe9\"}".to_vec(),
            "not UTF-8",
        ),
        (
            "deep.json",
            format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes(),
            "nested too deeply",
        ),
    ];
    for (name, bytes, why) in cases {
        let path = file(&p, name, bytes);
        let err = refused(&p, Some("planner"), &["order", "create", &path], 3);
        assert!(err.contains(why) && err.contains("B0 /"), "{name}: {err}");
        let err = refused(&p, Some("impl-1"), &["order", "report", "wo_1", &path], 3);
        assert!(err.contains(why), "{name}: {err}");
    }
    // A missing file, an unknown order, an unknown worker.
    refused(&p, Some("planner"), &["order", "create", "nope.json"], 4);
    let report = json_file(&p, "report.json", &report_doc("wo_1", "impl-1", 1));
    refused(&p, Some("impl-1"), &["order", "report", "wo_9", &report], 4);
    let mut stranger = order("wo_2");
    stranger["to"] = json!("nobody");
    let path = json_file(&p, "stranger.json", &stranger);
    refused(&p, Some("planner"), &["order", "create", &path], 4);
    // An order in someone else's name, the same id again, a report where an order goes.
    let path = json_file(&p, "again.json", &order("wo_1"));
    refused(&p, Some("impl-2"), &["order", "create", &path], 5);
    refused(&p, Some("planner"), &["order", "create", &path], 3);
    refused(&p, Some("planner"), &["order", "create", &report], 3);
    // A report for someone else's order, and a report in someone else's name.
    p.ok(Some("impl-1"), &["order", "accept", "wo_1"]);
    let err = refused(&p, Some("impl-2"), &["order", "report", "wo_1", &report], 5);
    assert!(err.contains("only its worker (impl-1)"), "{err}");
    let forged = json_file(&p, "forged.json", &report_doc("wo_1", "impl-2", 1));
    refused(&p, Some("impl-1"), &["order", "report", "wo_1", &forged], 5);
    // An order missing the contract the project requires names what is missing.
    let mut plain = order("wo_3");
    plain.as_object_mut().unwrap().remove("x-baton");
    let path = json_file(&p, "plain.json", &plain);
    let err = refused(&p, Some("planner"), &["order", "create", &path], 3);
    assert!(
        err.contains("B9") && err.contains("/x-baton/stop_when"),
        "{err}"
    );
    // A rework needs a reason that says something.
    refused(
        &p,
        Some("planner"),
        &["order", "rework", "wo_1", "--reason", " "],
        3,
    );
}

#[test]
fn past_its_deadline_an_order_reads_expired_and_a_limit_expires_it() {
    let p = Project::new(TEAM);
    let late = order_doc("wo_late", "2020-01-01T00:00:00Z", "2020-01-02T00:00:00Z");
    let path = json_file(&p, "late.json", &late);
    p.ok(Some("planner"), &["order", "create", &path]);
    let shown = show(&p, "wo_late");
    assert_eq!(shown["order"]["status"], "expired");
    assert_eq!(shown["order"]["recorded_status"], "offered");
    assert_eq!(seqs(&p, "wo_late"), [1], "reading wrote nothing");
    let err = refused(&p, Some("impl-1"), &["order", "accept", "wo_late"], 3);
    assert!(err.contains("its status is expired"), "{err}");
    assert_eq!(
        p.json(Some("impl-1"), &["order", "list"])["items"],
        json!([])
    );

    // A report over budget is recorded, with its limit finding, and expires the order.
    let path = json_file(&p, "order.json", &order("wo_1"));
    p.ok(Some("planner"), &["order", "create", &path]);
    p.ok(Some("impl-1"), &["order", "accept", "wo_1"]);
    let over = json_file(&p, "over.json", &report_doc("wo_1", "impl-1", 3));
    let out = p.json(Some("impl-1"), &["order", "report", "wo_1", &over]);
    assert_eq!(out["order"]["status"], "expired");
    assert_eq!(out["order"]["findings"][0]["rule"], "R7");
    assert_eq!(out["order"]["findings"][0]["kind"], "limit");
    let actions: Vec<&str> = out["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["start", "report_done", "expire"]);
    assert_eq!(seqs(&p, "wo_1"), [1, 2, 3, 4, 5]);
}

#[test]
fn wait_returns_when_another_process_steps_the_order() {
    let p = offered();
    let mut waiter = spawn(
        &p,
        "planner",
        &[
            "--json",
            "order",
            "wait",
            "wo_1",
            "--since",
            "1",
            "--timeout",
            "60s",
        ],
    );
    // The waiter says it blocks (its first look found nothing) before the step is
    // written: only the wake-up path can return it.
    until_waiting(&mut waiter);
    p.ok(Some("impl-1"), &["order", "accept", "wo_1"]);
    let out = finish(waiter);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["events"][0]["seq"], 2);
    assert_eq!(doc["events"][0]["action"], "accept");
    assert_eq!(doc["order"]["status"], "accepted");

    // Nothing after the newest seq: exit 4 at the timeout, naming the order.
    let out = p.run(
        Some("planner"),
        &["order", "wait", "wo_1", "--since", "2", "--timeout", "0s"],
    );
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no step after seq 2"),
        "{}",
        stderr(&out)
    );
    let out = p.run(None, &["order", "wait", "wo_9", "--since", "0"]);
    assert_eq!(code(&out), 4);
}

#[test]
fn of_two_writers_expecting_the_same_seq_exactly_one_wins() {
    for round in 0..3 {
        let p = offered();
        let accept = spawn(
            &p,
            "impl-1",
            &["order", "accept", "wo_1", "--expect-seq", "1"],
        );
        let cancel = spawn(
            &p,
            "planner",
            &["order", "cancel", "wo_1", "--expect-seq", "1"],
        );
        let mut codes = [code(&finish(accept)), code(&finish(cancel))];
        codes.sort_unstable();
        assert_eq!(codes, [0, 6], "round {round}");
        assert_eq!(seqs(&p, "wo_1"), [1, 2], "round {round}: one step, not two");
    }
    // The loser learns why and what to do.
    let p = offered();
    p.ok(
        Some("impl-1"),
        &["order", "accept", "wo_1", "--expect-seq", "1"],
    );
    let err = refused(
        &p,
        Some("planner"),
        &["order", "cancel", "wo_1", "--expect-seq", "1"],
        6,
    );
    assert!(err.contains("expected seq 1, it is at 2"), "{err}");
}

#[test]
fn every_order_command_has_an_example() {
    let p = Project::new(&[]);
    for cmd in [
        "create", "list", "show", "accept", "decline", "start", "report", "answer", "approve",
        "rework", "cancel", "wait",
    ] {
        let help = p.ok(None, &["order", cmd, "--help"]);
        assert!(help.contains("Example"), "order {cmd} --help:\n{help}");
    }
}

#[test]
fn an_order_goes_only_to_a_worker_whose_policy_takes_work_on_its_topic() {
    let p = Project::new(TEAM);
    // The README's narrowing: impl-1 takes work on csv topics only.
    p.ok(None, &["agent", "policy", "impl-1", "--topics", "csv-*"]);
    let path = json_file(&p, "order.json", &order("wo_1"));
    let err = refused(&p, Some("planner"), &["order", "create", &path], 5);
    for words in [
        "impl-1 (executor) may not take on",
        "topic work-order",
        "--topic",
    ] {
        assert!(err.contains(words), "{words}: {err}");
    }
    // Offered on a topic it takes, it is its to take on and to report.
    p.ok(
        Some("planner"),
        &["order", "create", &path, "--topic", "csv-export"],
    );
    p.ok(Some("impl-1"), &["order", "accept", "wo_1"]);
    p.ok(Some("impl-1"), &["order", "start", "wo_1"]);
    assert_eq!(show(&p, "wo_1")["order"]["status"], "working");
}
