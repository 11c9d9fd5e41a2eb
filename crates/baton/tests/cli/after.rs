//! Orders that wait on orders through real `baton` processes: an order naming another in
//! `x-baton.after` is not offered (not ready, not in its worker's inbox, its accept refused
//! naming what it waits on) until that one is approved; a declined one holds it, tells its
//! sender and puts it in the queue until the sender proceeds; an `after` that cannot be
//! waited on is refused naming the field, with nothing stored.

use serde_json::Value;

use crate::common::{Project, code, stderr};
use crate::orders::{TEAM, json_file, order, report_doc};

/// A Work Order from the planner to `to` that waits on `after`.
fn waiting(id: &str, to: &str, after: Value) -> Value {
    let mut doc = order(id);
    doc["to"] = to.into();
    doc["x-baton"]["after"] = after;
    doc
}

fn create(p: &Project, doc: &Value) -> String {
    let id = doc["id"].as_str().unwrap();
    let path = json_file(p, &format!("{id}.json"), doc);
    p.ok(Some("planner"), &["order", "create", &path])
}

fn ids(doc: &Value, key: &str) -> Vec<String> {
    doc[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} in {doc}"))
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_owned())
        .collect()
}

fn status(p: &Project, id: &str) -> String {
    p.json(None, &["order", "show", id])["order"]["status"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn inbox(p: &Project, who: &str) -> Vec<Value> {
    p.json(Some(who), &["inbox"])["items"]
        .as_array()
        .unwrap()
        .clone()
}

/// Refused with `want`, writing nothing to the log; returns stderr.
fn refused(p: &Project, who: Option<&str>, args: &[&str], want: i32) -> String {
    let before = p.generation();
    let out = p.run(who, args);
    assert_eq!(code(&out), want, "baton {args:?}: {}", stderr(&out));
    assert_eq!(p.generation(), before, "baton {args:?} wrote to the log");
    stderr(&out)
}

/// impl-1 takes `id` to submitted and the planner approves it.
fn approve(p: &Project, id: &str) {
    p.ok(Some("impl-1"), &["order", "accept", id]);
    let report = json_file(
        p,
        &format!("report-{id}.json"),
        &report_doc(id, "impl-1", 1),
    );
    p.ok(Some("impl-1"), &["order", "report", id, &report]);
    p.ok(Some("planner"), &["order", "approve", id]);
}

#[test]
fn an_order_is_offered_once_what_it_waits_on_is_approved() {
    let p = Project::new(TEAM);
    create(&p, &order("wo_1"));
    let said = create(&p, &waiting("wo_2", "impl-2", serde_json::json!(["wo_1"])));
    assert!(said.contains("wo_2: waiting on wo_1"), "{said}");

    let ready = p.json(None, &["order", "list", "--ready"]);
    assert_eq!(ids(&ready, "items"), ["wo_1"]);
    assert!(ready.get("waiting").is_none(), "{ready}");
    assert!(
        ids(
            &p.json(Some("impl-2"), &["order", "list", "--ready"]),
            "items"
        )
        .is_empty()
    );
    let explained = p.json(None, &["order", "list", "--ready", "--explain"]);
    assert_eq!(ids(&explained, "waiting"), ["wo_2"]);
    let waits = &explained["waiting"][0]["waits_on"];
    assert_eq!(
        waits,
        &serde_json::json!([{"order": "wo_1", "status": "offered"}])
    );
    let text = p.ok(None, &["order", "list", "--ready", "--explain"]);
    assert!(
        text.contains("WAITS ON") && text.contains("wo_1 (offered)"),
        "{text}"
    );

    assert!(inbox(&p, "impl-2").is_empty(), "not offered yet");
    let err = refused(&p, Some("impl-2"), &["order", "accept", "wo_2"], 3);
    assert!(
        err.contains("order wo_2 is waiting: it waits on wo_1 (offered)"),
        "{err}"
    );
    assert!(err.contains("baton order list --ready --explain"), "{err}");

    approve(&p, "wo_1");
    assert_eq!(status(&p, "wo_2"), "offered");
    assert_eq!(inbox(&p, "impl-2").len(), 1);
    let ready = p.json(Some("impl-2"), &["order", "list", "--ready"]);
    assert_eq!(ids(&ready, "items"), ["wo_2"]);
    p.ok(Some("impl-2"), &["order", "accept", "wo_2"]);
    assert!(ids(&p.json(None, &["order", "list", "--ready"]), "items").is_empty());
}

#[test]
fn a_declined_order_holds_what_waits_on_it_until_its_sender_proceeds() {
    let p = Project::new(TEAM);
    create(&p, &order("wo_1"));
    create(&p, &waiting("wo_2", "impl-2", serde_json::json!(["wo_1"])));
    let told = inbox(&p, "planner").len();
    p.ok(
        Some("impl-1"),
        &["order", "decline", "wo_1", "--reason", "no fixtures"],
    );
    assert_eq!(status(&p, "wo_2"), "held");
    let planner = inbox(&p, "planner");
    assert_eq!(planner.len(), told + 1, "the sender is told: {planner:?}");
    let notice = p.ok(
        Some("planner"),
        &["show", planner.last().unwrap()["id"].as_str().unwrap()],
    );
    assert!(
        notice.contains("wo_2") && notice.contains("declined"),
        "{notice}"
    );
    let queue = p.ok(None, &["queue"]);
    assert!(queue.contains("wo_2 is held"), "{queue}");
    let explained = p.json(None, &["order", "list", "--ready", "--explain"]);
    assert_eq!(explained["waiting"][0]["status"], "held");

    let err = refused(&p, Some("impl-2"), &["order", "accept", "wo_2"], 3);
    assert!(err.contains("is held"), "{err}");
    assert!(err.contains("baton order proceed wo_2"), "{err}");
    // Only its sender decides: the worker's attempt is forbidden (and recorded as such).
    let out = p.run(Some("impl-2"), &["order", "proceed", "wo_2"]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert_eq!(status(&p, "wo_2"), "held");

    let proceeded = p.json(Some("planner"), &["order", "proceed", "wo_2"]);
    assert_eq!(proceeded["order"]["status"], "offered");
    assert_eq!(inbox(&p, "impl-2").len(), 1);
    p.ok(Some("impl-2"), &["order", "accept", "wo_2"]);
}

#[test]
fn an_after_that_cannot_be_waited_on_is_refused_naming_the_field() {
    let p = Project::new(TEAM);
    create(&p, &order("wo_1"));
    // Another project's order is not this project's to wait on.
    let other = Project::new(TEAM);
    create(&other, &order("wo_elsewhere"));
    let many: Vec<String> = (0..33).map(|i| format!("wo_{i}")).collect();
    for (after, says) in [
        (serde_json::json!(["wo_1", "wo_9"]), "/x-baton/after/1"),
        (
            serde_json::json!(["wo_elsewhere"]),
            "is no order in this project",
        ),
        (
            serde_json::json!(["wo_2"]),
            "an order cannot wait on itself",
        ),
        (serde_json::json!(["wo_1", "wo_1"]), "is named twice"),
        (serde_json::json!(many), "B11 /x-baton/after/32"),
        (serde_json::json!("wo_1"), "B8 /x-baton/after"),
    ] {
        let doc = waiting("wo_2", "impl-2", after.clone());
        let path = json_file(&p, "wo_2.json", &doc);
        let err = refused(&p, Some("planner"), &["order", "create", &path], 3);
        assert!(err.contains(says), "{after}: {err}");
    }
    let err = refused(&p, Some("planner"), &["order", "list", "--explain"], 2);
    assert!(err.contains("--ready"), "{err}");
    // Once approved it may be waited on; once declined it may not.
    create(&p, &order("wo_3"));
    p.ok(Some("impl-1"), &["order", "decline", "wo_3"]);
    let doc = waiting("wo_2", "impl-2", serde_json::json!(["wo_3"]));
    let path = json_file(&p, "wo_2.json", &doc);
    let err = refused(&p, Some("planner"), &["order", "create", &path], 3);
    assert!(
        err.contains("is declined: it will never be approved"),
        "{err}"
    );
}
