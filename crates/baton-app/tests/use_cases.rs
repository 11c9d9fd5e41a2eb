//! The use cases over a real SQLite store, with a host whose machine is a temporary
//! directory and a process table the test writes. Each test is one flow an edge calls:
//! what it composes (defaults, caps, checks before anything is stored, waits, the reaper's
//! pass) is what is checked here; the rules under it have their own tests in the core.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_app::{
    App, Body, Clock, Files, Hashed, Host, Layout, OrderStep, Outgoing, PathClock, PathProblem,
    Processes, Settings,
};
use baton_core::awl::{ContractMode, NoEnvironment};
use baton_core::negotiation::{
    Ended, Input, NegotiationChange, Problem, Range, Resolution, Status,
};
use baton_core::run::{ProcessRef, Registration, RunChange, RunStatus};
use baton_core::state::Subject;
use baton_core::{Field, MessageType, Millis, Passname, Record, Refusal, RefusalKind};
use baton_store::{RunQuery, SqliteStore, Store, StoreError};
use serde_json::{Value, json};
use tempfile::TempDir;

struct WallClock;

impl Clock for WallClock {
    fn now(&self) -> Millis {
        jiff::Timestamp::now().as_millisecond()
    }
}

struct NoHistory;

impl PathClock for NoHistory {
    fn changed_at(&self, _: &str) -> Option<Millis> {
        None
    }
}

/// The files under a temporary root, as the binary's host reads them (hashes are of the
/// bytes; that the hash is blake3 is the binary's business).
struct TempFiles {
    root: PathBuf,
}

impl Files for TempFiles {
    fn resolve(&self, base: &Path, path: &str) -> Result<String, PathProblem> {
        let absolute = base
            .join(path)
            .canonicalize()
            .map_err(|_| PathProblem::Missing)?;
        let root = self.root.canonicalize().unwrap();
        absolute
            .strip_prefix(&root)
            .map(|p| p.display().to_string())
            .map_err(|_| PathProblem::Outside)
    }

    fn hash(&self, base: &Path, path: &str) -> std::io::Result<Hashed> {
        let bytes = std::fs::read(base.join(path))?;
        Ok(Hashed {
            path: path.to_owned(),
            hash: format!("{:x}", bytes.iter().map(|b| u64::from(*b)).sum::<u64>()),
            size: bytes.len() as u64,
        })
    }
}

/// A process table the test writes: which processes live, which agents run unseen.
#[derive(Default)]
struct Table {
    dead: Mutex<HashSet<u32>>,
    agents: Mutex<Vec<Registration>>,
}

impl Processes for Table {
    fn host(&self) -> Option<String> {
        Some("here".into())
    }

    fn alive(&self, process: &ProcessRef) -> Option<bool> {
        Some(!self.dead.lock().unwrap().contains(&process.pid))
    }

    fn me(&self) -> u32 {
        1
    }

    fn untracked_agents(&self, tracked: &HashSet<u32>) -> Vec<Registration> {
        self.agents
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.process.is_some_and(|p| !tracked.contains(&p.pid)))
            .cloned()
            .collect()
    }
}

struct Fixture {
    app: App,
    dir: TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_owned();
    let store = SqliteStore::create(&root.join("baton.db"), Duration::from_secs(5))
        .await
        .unwrap();
    let host = Host {
        root: root.clone(),
        environment: Arc::new(NoEnvironment),
        paths: Arc::new(NoHistory),
        files: Arc::new(TempFiles { root }),
        clock: Arc::new(WallClock),
    };
    let settings = Settings {
        payload_cap: 4096,
        contract: ContractMode::Optional,
        ..Settings::default()
    };
    let app = App::new(Store::new(store), settings, host);
    for (name, role) in [
        ("planner", "planner"),
        ("impl-1", "executor"),
        ("impl-2", "executor"),
    ] {
        app.add_participant("@local", name, role, &Default::default())
            .await
            .unwrap();
    }
    Fixture { app, dir }
}

fn me(name: &str) -> Passname {
    Passname::new(name).unwrap()
}

fn message(to: &[&str], kind: MessageType, topic: Option<&str>, body: &str) -> Outgoing {
    Outgoing {
        to: to.iter().map(|s| s.to_string()).collect(),
        kind,
        topic: topic.map(str::to_owned),
        reply_to: None,
        body: Body::Text(body.into()),
        idempotency_key: None,
    }
}

fn refusal(e: StoreError) -> Refusal {
    match e {
        StoreError::Refused(r) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The refusals on record: each security event and the repeats counted on it.
async fn refusals(app: &App) -> i64 {
    let (events, repeats) = app.security_events(None, 1000).await.unwrap();
    events.len() as i64 + repeats.iter().map(|r| r.count).sum::<i64>()
}

/// Runs `attempt`, checks it was refused and wrote nothing but, for a forbidden attempt,
/// its one security event (or a repeat counted on the one it repeats), and returns the
/// refusal.
async fn refused<T: std::fmt::Debug>(
    app: &App,
    attempt: impl std::future::Future<Output = baton_app::Result<T>>,
) -> Refusal {
    let before = app.generation().await.unwrap();
    let on_record = refusals(app).await;
    let r = refusal(attempt.await.expect_err("refused"));
    let forbidden = r.kind() == RefusalKind::Forbidden;
    let after = app.generation().await.unwrap();
    assert!(
        after == before || (forbidden && after == before + 1),
        "{r} wrote {} events",
        after - before
    );
    assert_eq!(
        refusals(app).await,
        on_record + i64::from(forbidden),
        "{r}: the refusals on record"
    );
    if after > before {
        let (newest, _) = app.security_events(None, 1).await.unwrap();
        assert_eq!(newest.first().map(|e| e.seq), Some(after), "{r}");
    }
    r
}

#[tokio::test]
async fn a_reply_goes_to_the_other_side_on_the_parents_topic() {
    let f = fixture().await;
    let request = message(
        &["impl-1", "impl-2"],
        MessageType::Request,
        Some("csv"),
        "do it",
    );
    let sent = f.app.send(&me("planner"), request).await.unwrap();
    let reply = Outgoing {
        reply_to: Some(sent.id.clone()),
        ..message(&[], MessageType::Message, None, "which file?")
    };
    let answer = f.app.send(&me("impl-1"), reply).await.unwrap();
    let (_, thread) = f.app.thread(&sent.id).await.unwrap();
    let got = thread.iter().find(|e| e.id == answer.id).unwrap();
    assert_eq!(got.recipients(), [me("planner")]);
    assert_eq!(got.topic.as_str(), "csv");
    assert_eq!(got.reply_to.as_deref(), Some(sent.id.as_str()));
    // The sender's reply goes to every recipient of the parent.
    let back = Outgoing {
        reply_to: Some(sent.id.clone()),
        ..message(&[], MessageType::Info, None, "src/export.rs")
    };
    let note = f.app.send(&me("planner"), back).await.unwrap();
    let (_, thread) = f.app.thread(&sent.id).await.unwrap();
    let got = thread.iter().find(|e| e.id == note.id).unwrap();
    assert_eq!(got.recipients(), [me("impl-1"), me("impl-2")]);
    // A reply to nothing, and a new message with no topic, are refused.
    let orphan = Outgoing {
        reply_to: Some("01JZZZZZZZZZZZZZZZZZZZZZZZ".into()),
        ..message(&[], MessageType::Message, None, "?")
    };
    let r = refused(&f.app, f.app.send(&me("impl-1"), orphan)).await;
    assert!(
        matches!(
            r,
            Refusal::NotFound {
                record: Record::Parent,
                ..
            }
        ),
        "{r:?}"
    );
    let untitled = message(&["impl-1"], MessageType::Message, None, "?");
    let r = refused(&f.app, f.app.send(&me("planner"), untitled)).await;
    assert_eq!(r, Refusal::Missing(Field::Topic));
}

#[tokio::test]
async fn an_unknown_recipient_is_refused_naming_the_registered_ones() {
    let f = fixture().await;
    let to_ghost = message(&["ghost"], MessageType::Message, Some("t"), "boo");
    let r = refused(&f.app, f.app.send(&me("planner"), to_ghost)).await;
    assert_eq!(
        r,
        Refusal::NoRecipient {
            name: "ghost".into(),
            registered: vec!["impl-1".into(), "impl-2".into(), "planner".into()],
        }
    );
    assert_eq!(r.kind(), RefusalKind::NotFound);
    let bad_name = message(&["Not A Name"], MessageType::Message, Some("t"), "boo");
    let r = refused(&f.app, f.app.send(&me("planner"), bad_name)).await;
    assert!(
        matches!(
            r,
            Refusal::Name {
                field: Field::To,
                ..
            }
        ),
        "{r:?}"
    );
}

#[tokio::test]
async fn a_payload_over_the_cap_or_not_an_object_is_refused_by_its_field() {
    let f = fixture().await;
    let big = message(
        &["impl-1"],
        MessageType::Message,
        Some("t"),
        &"x".repeat(5000),
    );
    let r = refused(&f.app, f.app.send(&me("planner"), big)).await;
    assert!(
        matches!(
            r,
            Refusal::Payload {
                field: Field::Body,
                ..
            }
        ),
        "{r:?}"
    );
    let array = Outgoing {
        body: Body::Json("[1, 2]".into()),
        ..message(&["impl-1"], MessageType::Message, Some("t"), "")
    };
    let r = refused(&f.app, f.app.send(&me("planner"), array)).await;
    assert!(
        matches!(
            r,
            Refusal::Payload {
                field: Field::Payload,
                ..
            }
        ),
        "{r:?}"
    );
}

#[tokio::test]
async fn show_cuts_the_payload_at_a_character_boundary_within_the_cap() {
    let f = fixture().await;
    let body = "é".repeat(40);
    let sent = f
        .app
        .send(
            &me("planner"),
            message(&["impl-1"], MessageType::Info, Some("t"), &body),
        )
        .await
        .unwrap();
    let reader = me("impl-1");
    let whole = f
        .app
        .show(Some(&reader), &sent.id, None, Layout::Compact)
        .await
        .unwrap();
    assert!(!whole.is_cut());
    assert_eq!(whole.text, json!({ "body": body }).to_string());
    for cap in [0, 1, 10, 11, 12, 50] {
        let cut = f
            .app
            .show(Some(&reader), &sent.id, Some(cap), Layout::Compact)
            .await
            .unwrap();
        assert!(
            cut.is_cut() && cut.text.len() <= cap,
            "cap {cap}: {}",
            cut.text
        );
        assert_eq!(cut.total_bytes, whole.text.len());
        assert!(whole.text.starts_with(&cut.text));
    }
    // The cap counts the bytes of the layout asked for.
    let pretty = f
        .app
        .show(Some(&reader), &sent.id, None, Layout::Pretty)
        .await
        .unwrap();
    assert!(pretty.total_bytes > whole.total_bytes, "{}", pretty.text);
    // The first read delivered it; reading again changes nothing.
    assert_eq!(
        pretty.fetched.status,
        Some(baton_core::DeliveryStatus::Delivered)
    );
}

#[tokio::test]
async fn a_missed_receipt_wait_alerts_once_however_often_it_misses() {
    let f = fixture().await;
    for _ in 0..2 {
        let r = refusal(
            f.app
                .wait_receipt("planner", "build", Duration::ZERO)
                .await
                .unwrap_err(),
        );
        assert!(
            matches!(&r, Refusal::NoReceipt { step, .. } if step == "build"),
            "{r:?}"
        );
    }
    assert_eq!(f.app.alerts().await.unwrap().len(), 1);
    // A URI is recorded as given; a path is hashed where it lies, relative to its base.
    std::fs::create_dir(f.dir.path().join("out")).unwrap();
    std::fs::write(f.dir.path().join("out/app"), b"binary").unwrap();
    let (record, _) = f
        .app
        .write_receipt(
            "impl-1",
            &f.dir.path().join("out"),
            "build".into(),
            "app".into(),
            None,
        )
        .await
        .unwrap();
    assert_eq!((record.size, record.hash.is_some()), (Some(6), true));
    let (uri, _) = f
        .app
        .write_receipt(
            "impl-1",
            f.dir.path(),
            "up".into(),
            "s3://b/app".into(),
            None,
        )
        .await
        .unwrap();
    assert_eq!((uri.hash, uri.size), (None, None));
    let got = f
        .app
        .wait_receipt("planner", "build", Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(got.written.actor, "impl-1");
    let r = refused(
        &f.app,
        f.app
            .write_receipt("impl-1", f.dir.path(), "x".into(), "missing".into(), None),
    )
    .await;
    assert!(matches!(r, Refusal::NoArtifact { .. }), "{r:?}");
}

#[tokio::test]
async fn a_note_is_about_a_record_or_a_path_inside_the_project() {
    let f = fixture().await;
    let sent = f
        .app
        .send(
            &me("planner"),
            message(&["impl-1"], MessageType::Info, Some("t"), "x"),
        )
        .await
        .unwrap();
    let root = f.dir.path();
    assert_eq!(
        f.app.note_subject(root, &sent.id).await.unwrap(),
        Subject::Record(sent.id.clone())
    );
    std::fs::write(root.join("parse.rs"), "fn main() {}").unwrap();
    assert_eq!(
        f.app.note_subject(root, "parse.rs").await.unwrap(),
        Subject::Path("parse.rs".into())
    );
    let r = refusal(f.app.note_subject(root, "nowhere.rs").await.unwrap_err());
    assert!(matches!(r, Refusal::NoSubject { .. }), "{r:?}");
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("x"), "x").unwrap();
    let r = refusal(f.app.note_subject(outside.path(), "x").await.unwrap_err());
    assert!(matches!(r, Refusal::Outside { .. }), "{r:?}");
}

/// The shared Work Order (`baton-core/tests/fixtures/work-order.json`) under the id `id`.
fn order_doc(id: &str) -> Value {
    let mut order: Value = serde_json::from_str(include_str!(
        "../../baton-core/tests/fixtures/work-order.json"
    ))
    .expect("the fixture is JSON");
    order["id"] = id.into();
    order
}

#[tokio::test]
async fn an_invalid_or_misdirected_document_is_refused_before_anything_is_stored() {
    let f = fixture().await;
    let mut no_criteria = order_doc("wo_1");
    no_criteria.as_object_mut().unwrap().remove("criteria");
    let r = refused(&f.app, f.app.offer(&me("planner"), no_criteria, None)).await;
    assert!(matches!(r, Refusal::Findings { .. }), "{r:?}");
    let report = json!({"spec": "awl/work-report@0.1", "order_id": "wo_1", "from": "impl-1"});
    let r = refused(&f.app, f.app.offer(&me("planner"), report, None)).await;
    assert!(matches!(r, Refusal::WrongDocument { .. }), "{r:?}");

    f.app
        .offer(&me("planner"), order_doc("wo_1"), None)
        .await
        .unwrap();
    // Whose order it is decides first: impl-2's report is forbidden whatever it holds.
    let garbage = OrderStep::Report {
        document: json!({"not": "a report"}),
    };
    let r = refused(
        &f.app,
        f.app.take_step(&me("impl-2"), "wo_1", None, garbage),
    )
    .await;
    assert!(matches!(r, Refusal::OrderRole { .. }), "{r:?}");
    assert_eq!(r.kind(), RefusalKind::Forbidden);
}

#[tokio::test]
async fn waiting_for_an_order_returns_its_newer_steps_or_says_none_came() {
    let f = fixture().await;
    let offered = f
        .app
        .offer(&me("planner"), order_doc("wo_1"), None)
        .await
        .unwrap();
    assert_eq!(offered.order.seq, 1);
    let r = refusal(
        f.app
            .wait_order("wo_1", 1, Duration::ZERO)
            .await
            .unwrap_err(),
    );
    assert!(
        matches!(
            r,
            Refusal::NoStep {
                since: 1,
                seq: 1,
                ..
            }
        ),
        "{r:?}"
    );
    // A waiter wakes when another writer takes a step: taken once the waiter has looked,
    // found nothing and blocked.
    let blocked = std::sync::Arc::new(tokio::sync::Notify::new());
    let signal = std::sync::Arc::clone(&blocked);
    let waiter = f.app.clone().on_wait(move |_| signal.notify_one());
    let waiting =
        tokio::spawn(async move { waiter.wait_order("wo_1", 1, Duration::from_secs(30)).await });
    blocked.notified().await;
    f.app
        .take_step(&me("impl-1"), "wo_1", None, OrderStep::Accept)
        .await
        .unwrap();
    let woken = waiting.await.unwrap().unwrap();
    assert_eq!(woken.order.seq, 2);
    assert_eq!(woken.events.len(), 1);
    // The request that carried the order was read once the worker acted on it.
    let (inbox, _) = f.app.inbox(&me("impl-1"), false, None, 100).await.unwrap();
    assert_eq!(
        inbox[0].status_for(&me("impl-1")),
        Some(baton_core::DeliveryStatus::Delivered)
    );
}

fn registration(run: &str, participant: &str, pid: u32) -> RunChange {
    RunChange::Registered(Box::new(Registration {
        run: run.into(),
        participant: Some(participant.into()),
        host: Some("here".into()),
        monitor: Some(ProcessRef {
            pid,
            start: Some(1),
        }),
        ..Registration::default()
    }))
}

#[tokio::test]
async fn the_reaper_loses_a_run_whose_wrapper_died_and_records_unseen_agents_once() {
    let f = fixture().await;
    let table = Table::default();
    f.app
        .record_run("impl-1", &[registration("r1", "impl-1", 100)])
        .await
        .unwrap();
    let sent = f
        .app
        .send(
            &me("planner"),
            message(&["impl-1"], MessageType::Request, Some("t"), "go"),
        )
        .await
        .unwrap();
    f.app
        .show(Some(&me("impl-1")), &sent.id, None, Layout::Compact)
        .await
        .unwrap();
    table.agents.lock().unwrap().push(Registration {
        run: "pid-7-9".into(),
        agent: Some("claude".into()),
        command: vec!["claude".into()],
        host: Some("here".into()),
        process: Some(ProcessRef {
            pid: 7,
            start: Some(9),
        }),
        ..Registration::default()
    });

    // The wrapper lives: nothing is lost; the unseen agent is recorded.
    let pass = f.app.reap(&table).await.unwrap();
    assert!(pass.lost.is_empty());
    assert_eq!(pass.untracked, ["pid-7-9"]);

    // The wrapper died: the run is lost and what its participant held is pending again.
    table.dead.lock().unwrap().insert(100);
    let pass = f.app.reap(&table).await.unwrap();
    assert_eq!(pass.lost.len(), 1);
    assert_eq!(pass.lost[0].resurfaced, std::slice::from_ref(&sent.id));
    assert!(pass.untracked.is_empty(), "an agent is recorded once");
    let (inbox, _) = f.app.inbox(&me("impl-1"), false, None, 100).await.unwrap();
    assert_eq!(
        inbox[0].status_for(&me("impl-1")),
        Some(baton_core::DeliveryStatus::Pending)
    );

    // The agent exited: gone. A second pass finds nothing.
    table.dead.lock().unwrap().insert(7);
    let pass = f.app.reap(&table).await.unwrap();
    assert_eq!(pass.gone, ["pid-7-9"]);
    assert!(f.app.reap(&table).await.unwrap().is_empty());
    let statuses: HashMap<String, RunStatus> = f
        .app
        .runs(&RunQuery::default())
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.run.id.clone(), r.run.status))
        .collect();
    assert_eq!(statuses["r1"], RunStatus::Lost);
    assert_eq!(
        f.app.alerts().await.unwrap().len(),
        2,
        "lost and resurfaced"
    );
}

// ---- negotiations -------------------------------------------------------------------------

fn negotiation_spec(id: &str) -> String {
    json!({
        "id": id, "rounds": 50,
        "issues": [{"name": "db", "options": ["sqlite", "postgres"]},
                   {"name": "deploy", "options": ["single", "multi-region"]}],
        "constraints": [{"db": "sqlite", "deploy": "multi-region"}],
        "parties": [{"name": "planner", "position": "planner.json"},
                    {"name": "impl-1", "position": "impl-1.json"}]
    })
    .to_string()
}

fn planner_position() -> String {
    json!({"weights": {"db": 0.7, "deploy": 0.3},
           "utilities": {"db": {"sqlite": 1, "postgres": 0.2},
                         "deploy": {"single": 1, "multi-region": 0}},
           "floor": 0.5})
    .to_string()
}

fn executor_position(floor: f64) -> String {
    json!({"weights": {"db": 0.5, "deploy": 0.5},
           "utilities": {"db": {"sqlite": 0.6, "postgres": 1},
                         "deploy": {"single": 1, "multi-region": 0.8}},
           "floor": floor, "veto": [{"deploy": "multi-region"}]})
    .to_string()
}

/// The `settled` events in the log: the engine's result is recorded exactly once.
async fn settlements(f: &Fixture, id: &str) -> usize {
    let store = SqliteStore::open(&f.dir.path().join("baton.db"), Duration::from_secs(5))
        .await
        .unwrap();
    baton_store::Backend::events(&store, 0, u32::MAX)
        .await
        .unwrap()
        .iter()
        .filter(|e| {
            matches!(
                &e.change,
                baton_core::Change::Negotiation(NegotiationChange::Settled { negotiation, .. })
                    if negotiation == id
            )
        })
        .count()
}

#[tokio::test]
async fn a_negotiation_settles_once_when_its_last_party_submits() {
    let f = fixture().await;
    let opened = f
        .app
        .open_negotiation("@local", &negotiation_spec("db-choice"))
        .await
        .unwrap();
    assert_eq!(opened.status(), Status::Open);
    assert_eq!(opened.waiting_for(), [&me("planner"), &me("impl-1")]);

    let before = f.app.generation().await.unwrap();
    let half = f
        .app
        .submit_position(
            &me("impl-1"),
            &me("impl-1"),
            "db-choice",
            &executor_position(0.7),
        )
        .await
        .unwrap();
    assert_eq!(half.status(), Status::Open);
    assert_eq!(half.waiting_for(), [&me("planner")]);
    assert_eq!(f.app.generation().await.unwrap(), before + 1);
    assert_eq!(settlements(&f, "db-choice").await, 0);

    // The last submission and the settlement are one write.
    let settled = f
        .app
        .submit_position(
            &me("planner"),
            &me("planner"),
            "db-choice",
            &planner_position(),
        )
        .await
        .unwrap();
    assert_eq!(f.app.generation().await.unwrap(), before + 3);
    assert_eq!(settled.status(), Status::Agreement);
    assert_eq!(f.app.negotiation("db-choice").await.unwrap(), settled);
    let s = settled.settlement.as_ref().unwrap();
    assert_eq!(
        s.resolution,
        Resolution::Agreement {
            outcome: s.trail.last().unwrap().outcome.clone()
        }
    );
    assert_eq!(
        s.trail.last().unwrap().outcome.text(),
        "db=sqlite deploy=single"
    );
    assert_eq!(settlements(&f, "db-choice").await, 1);

    // Nothing more counts: a second submission is refused and nothing is settled again.
    let r = refused(
        &f.app,
        f.app.submit_position(
            &me("impl-1"),
            &me("impl-1"),
            "db-choice",
            &executor_position(0.7),
        ),
    )
    .await;
    assert_eq!(
        r,
        Refusal::NegotiationSettled {
            id: "db-choice".into()
        }
    );
    assert_eq!(settlements(&f, "db-choice").await, 1);
}

#[tokio::test]
async fn a_submission_that_cannot_count_is_refused_and_writes_nothing() {
    let f = fixture().await;
    f.app
        .open_negotiation("@local", &negotiation_spec("db-choice"))
        .await
        .unwrap();
    f.app
        .submit_position(
            &me("impl-1"),
            &me("impl-1"),
            "db-choice",
            &executor_position(0.7),
        )
        .await
        .unwrap();
    let cases: Vec<(&str, &str, String, RefusalKind)> = vec![
        (
            "nothing-here",
            "planner",
            planner_position(),
            RefusalKind::NotFound,
        ),
        (
            "db-choice",
            "impl-2",
            planner_position(),
            RefusalKind::Forbidden,
        ),
        (
            "db-choice",
            "impl-1",
            executor_position(0.7),
            RefusalKind::Conflict,
        ),
        (
            "db-choice",
            "planner",
            "{\"weights\":".into(),
            RefusalKind::Invalid,
        ),
        (
            "db-choice",
            "planner",
            "x".repeat(5000),
            RefusalKind::Invalid,
        ),
    ];
    for (id, party, position, kind) in cases {
        let r = refused(
            &f.app,
            f.app.submit_position(&me(party), &me(party), id, &position),
        )
        .await;
        assert_eq!(r.kind(), kind, "{r}");
    }
    // A malformed position names the path of its first problem, never its values.
    let bad = json!({"weights": {"db": 0.7, "deploy": 0.3},
                     "utilities": {"db": {"sqlite": 1.25}, "deploy": {"single": 1}},
                     "floor": 0.5})
    .to_string();
    let r = refused(
        &f.app,
        f.app
            .submit_position(&me("planner"), &me("planner"), "db-choice", &bad),
    )
    .await;
    let Refusal::NegotiationInput {
        input,
        path,
        problem,
    } = &r
    else {
        panic!("{r:?}");
    };
    assert_eq!(
        input,
        &Input::Position {
            party: "planner".into()
        }
    );
    assert_eq!(path, "$.utilities.db.sqlite");
    assert_eq!(problem, &Problem::OutOfRange(Range::Utility));
    assert!(!r.to_string().contains("1.25"), "{r}");
    // Opening the same id twice is a conflict.
    let r = refused(
        &f.app,
        f.app
            .open_negotiation("@local", &negotiation_spec("db-choice")),
    )
    .await;
    assert_eq!(r.kind(), RefusalKind::Conflict);
}

#[tokio::test]
async fn negotiating_in_one_go_stores_everything_or_nothing() {
    let f = fixture().await;
    let spec = negotiation_spec("in-one-go");
    let files = f.app.position_files(&spec).unwrap();
    assert_eq!(files[0], (me("planner"), "planner.json".to_owned()));

    // One malformed position: not even the opening is stored.
    let positions = vec![
        (me("planner"), planner_position()),
        (
            me("impl-1"),
            "{\"weights\": {\"db\": \"heavy\"}}".to_owned(),
        ),
    ];
    let r = refused(&f.app, f.app.negotiate("@local", &spec, &positions)).await;
    assert!(
        matches!(&r, Refusal::NegotiationInput { path, .. } if path == "$.weights.db"),
        "{r:?}"
    );
    let r = refused(&f.app, f.app.negotiation("in-one-go")).await;
    assert_eq!(r.kind(), RefusalKind::NotFound);

    // A floor nobody can meet with the veto in place: a walk-away, recorded once.
    let positions = vec![
        (me("planner"), planner_position()),
        (me("impl-1"), executor_position(0.9)),
    ];
    let n = f.app.negotiate("@local", &spec, &positions).await.unwrap();
    assert_eq!(n.status(), Status::WalkAway);
    let Some(Resolution::WalkAway {
        ended, unsettled, ..
    }) = n.settlement.as_ref().map(|s| &s.resolution)
    else {
        panic!("{n:?}");
    };
    assert_eq!(*ended, Ended::NoZone);
    assert_eq!(unsettled, &["db"]);
    assert_eq!(settlements(&f, "in-one-go").await, 1);
}

/// A run's facts from registration to exit, its command `title`.
fn ended_run(run: &str, title: &str, status: RunStatus) -> Vec<RunChange> {
    vec![
        RunChange::Registered(Box::new(Registration {
            run: run.into(),
            participant: Some("impl-1".into()),
            command: title.split(' ').map(str::to_owned).collect(),
            ..Registration::default()
        })),
        RunChange::Started {
            run: run.into(),
            process: ProcessRef {
                pid: 4242,
                start: Some(1),
            },
            pgid: 4242,
        },
        RunChange::Exited {
            run: run.into(),
            status,
            exit_code: Some(i32::from(status != RunStatus::Done)),
            signal: None,
            reason: None,
        },
    ]
}

/// The failures lane reads the window's runs a page at a time: a failure in the first
/// page is cleared by a success of the same command pages later, and a failure nothing
/// cleared stays.
#[tokio::test]
async fn a_failure_is_cleared_by_a_success_pages_of_runs_later() {
    let f = fixture().await;
    let mut changes = ended_run("first", "make test", RunStatus::Failed);
    changes.extend(ended_run("lone", "cargo build", RunStatus::Failed));
    f.app.record_run("impl-1", &changes).await.unwrap();
    // A success clears only the failures that ended before it.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let mut changes = Vec::new();
    for n in 0..1_200 {
        changes.extend(ended_run(&format!("r{n}"), "ls", RunStatus::Done));
    }
    changes.extend(ended_run("last", "make test", RunStatus::Done));
    f.app.record_run("impl-1", &changes).await.unwrap();

    let lanes = f
        .app
        .queue(Some(baton_core::queue::Lane::Failures))
        .await
        .unwrap();
    let failures: Vec<&str> = lanes
        .iter()
        .flat_map(|l| &l.items)
        .map(|i| i.id.as_str())
        .collect();
    assert_eq!(failures, ["run:lone"]);
}

/// The inbox and the outbox come a page at a time: each page the size asked, the next
/// page's cursor on every page but the last, every entry once and in order, in the
/// default view as with `all`; a cursor that is no message gives an empty page.
#[tokio::test]
async fn the_inbox_and_the_outbox_page_through_every_entry_once() {
    let f = fixture().await;
    let mut sent = Vec::new();
    for n in 0..250 {
        let kind = if n % 50 == 25 {
            MessageType::Request
        } else {
            MessageType::Info
        };
        let out = message(&["impl-1"], kind, Some("paging"), &format!("note {n}"));
        sent.push(f.app.send(&me("planner"), out).await.unwrap().id);
    }
    for id in &sent[..10] {
        f.app
            .show(Some(&me("impl-1")), id, None, Layout::Compact)
            .await
            .unwrap();
        f.app
            .step(&me("impl-1"), id, baton_core::Verb::Ack, None)
            .await
            .unwrap_or_else(|e| panic!("ack {id}: {e}"));
    }

    let walk = |all: bool, limit: u32| {
        let app = &f.app;
        async move {
            let (mut ids, mut sizes, mut cursor) = (Vec::new(), Vec::new(), None::<String>);
            loop {
                let (page, next) = app
                    .inbox(&me("impl-1"), all, cursor.as_deref(), limit)
                    .await
                    .unwrap();
                sizes.push(page.len());
                ids.extend(page.into_iter().map(|e| e.id));
                let Some(next) = next else {
                    return (ids, sizes);
                };
                assert!(sizes.len() < 10, "the pages never end: {sizes:?}");
                cursor = Some(next);
            }
        }
    };
    let (ids, sizes) = walk(true, 100).await;
    assert_eq!(sizes, [100, 100, 50]);
    assert_eq!(ids, sent, "every message once, oldest first");
    let (ids, sizes) = walk(false, 100).await;
    assert_eq!(sizes, [100, 100, 40], "the ten acknowledged are not owed");
    assert_eq!(ids, sent[10..]);

    let (page, next) = f
        .app
        .inbox(&me("impl-1"), true, Some("not-a-message"), 100)
        .await
        .unwrap();
    assert!(page.is_empty() && next.is_none());

    // Five requests: pages of two.
    let (first, next) = f.app.outbox(&me("planner"), true, None, 2).await.unwrap();
    let (second, after) = f
        .app
        .outbox(&me("planner"), true, next.as_deref(), 2)
        .await
        .unwrap();
    let (third, last) = f
        .app
        .outbox(&me("planner"), true, after.as_deref(), 2)
        .await
        .unwrap();
    let requests: Vec<&String> = sent.iter().skip(25).step_by(50).collect();
    let paged: Vec<&String> = first
        .iter()
        .chain(&second)
        .chain(&third)
        .map(|e| &e.id)
        .collect();
    assert_eq!(paged, requests);
    assert!(last.is_none());
}

#[tokio::test]
async fn live_rows_are_counted_by_source_with_quiet_helpers_left_out() {
    use baton_core::run::{HookCall, Source};
    let f = fixture().await;
    let hook = |event: &str, helper: Option<&str>| HookCall {
        row: HookCall::row_of(None, "claude", Some("s1"), helper),
        run: None,
        agent: "claude".into(),
        event: event.into(),
        session: Some("s1".into()),
        tool: None,
        agent_id: helper.map(Into::into),
        agent_type: None,
    };
    f.app
        .hook(Some("impl-1"), hook("SessionStart", None), false)
        .await
        .unwrap();
    for helper in ["a1", "a2"] {
        f.app
            .hook(Some("impl-1"), hook("SubagentStart", Some(helper)), false)
            .await
            .unwrap();
    }
    let live = f.app.live_by_source().await.unwrap();
    let count = |source: Source| live.iter().find(|(s, _)| *s == source).unwrap().1;
    assert_eq!(
        (
            count(Source::Session),
            count(Source::Helper),
            count(Source::Wrapper)
        ),
        (1, 2, 0),
        "{live:?}"
    );
}

// ---- the resume packet ----------------------------------------------------------------------

/// The packet a planner resumes from when it owes 150 requests, waits on 5, and the
/// project holds 300 decisions (100 superseded) and 5 failed approaches on its topic: the
/// first list does not spend the budget, every count is exact, nothing superseded or
/// ended is shown, and its last session's first action heads it.
#[tokio::test]
async fn a_long_owed_list_leaves_room_for_every_other_thing_to_know() {
    use baton_core::packet::DEFAULT_MAX_BYTES;
    use baton_core::state::StateOp;
    let f = fixture().await;
    f.app
        .add_participant("@local", "owner", "owner", &Default::default())
        .await
        .unwrap();
    for i in 0..150 {
        let body = format!("Fix export case {i} before the release");
        f.app
            .send(
                &me("owner"),
                message(&["planner"], MessageType::Request, Some("export"), &body),
            )
            .await
            .unwrap();
    }
    let mut waited = Vec::new();
    for i in 0..5 {
        let body = format!("Check export fixture {i}");
        let sent = f
            .app
            .send(
                &me("planner"),
                message(&["impl-1"], MessageType::Request, Some("export"), &body),
            )
            .await
            .unwrap();
        waited.push(sent.id);
    }
    // An order that ended: its request's sending end closed with it, not waited for.
    let cancelled = f
        .app
        .offer(&me("planner"), order_doc("wo_1"), Some("export"))
        .await
        .unwrap();
    f.app
        .take_step(
            &me("planner"),
            "wo_1",
            None,
            OrderStep::Cancel { reason: None },
        )
        .await
        .unwrap();
    let decisions: Vec<StateOp> = (1..=300)
        .map(|i| StateOp::Decide {
            text: format!("decision {i}"),
            why: "fewer paths".into(),
            // Every third one replaces the one before it.
            supersedes: (i % 3 == 0).then(|| format!("D-{}", i - 1)),
        })
        .collect();
    f.app.record("planner", &decisions).await.unwrap();
    let constraints: Vec<StateOp> = (1..=5)
        .map(|i| StateOp::Constrain {
            text: format!("on export: approach {i} does not hold"),
            tried: format!("approach {i}"),
            result: "the rows come out unfiltered".into(),
        })
        .collect();
    f.app.record("impl-1", &constraints).await.unwrap();
    let next = "run cargo test -p export csv_filters";
    f.app
        .record("planner", &[StateOp::ResumeAt { text: next.into() }])
        .await
        .unwrap();

    let packet = f
        .app
        .resume(&me("planner"), DEFAULT_MAX_BYTES)
        .await
        .unwrap()
        .packet;
    let text = &packet.text;
    assert!(text.len() <= DEFAULT_MAX_BYTES, "{} bytes", text.len());
    // The first action its last session left, in the header: read before any list.
    let header = text.split("\n\n## ").next().unwrap();
    assert!(
        header.starts_with("# Resume: planner")
            && header.contains("\nWhere my last session stopped (")
            && header.ends_with(&format!("): {next}")),
        "{text}"
    );
    for count in [
        "150 open requests to me",
        "5 open requests from me",
        "0 orders from me in progress",
        "200 decisions in force",
        "5 constraints on my topics and paths, of 5",
    ] {
        assert!(text.contains(count), "{count:?} in:\n{text}");
    }
    for id in &waited {
        assert!(text.contains(id.as_str()), "{id} waited for:\n{text}");
    }
    assert!(
        !text.contains(&cancelled.order.message),
        "an ended order:\n{text}"
    );
    for i in 1..=5 {
        assert!(text.contains(&format!("- C-{i}: ")), "C-{i}:\n{text}");
    }
    // The 20 newest decisions in force, none superseded.
    let in_force: Vec<usize> = (1..=300).rev().filter(|i| (i + 1) % 3 != 0).collect();
    for i in &in_force[..20] {
        assert!(text.contains(&format!("- D-{i}: ")), "D-{i}:\n{text}");
    }
    for superseded in (2..=300).step_by(3) {
        assert!(
            !text.contains(&format!("- D-{superseded}: ")),
            "D-{superseded}:\n{text}"
        );
    }
    let owed = packet
        .sections
        .iter()
        .find(|s| s.title == "What I owe")
        .unwrap();
    // Its share first, and what room the others left.
    assert!(owed.shown >= 20 && owed.shown < 150, "{text}");
    assert_eq!(owed.total, 150);
}

#[tokio::test]
async fn work_sent_to_a_pool_is_listed_claimed_by_id_prefix_or_next_and_refused_once_taken() {
    let f = fixture().await;
    let mut doc = order_doc("wo_pool_1");
    doc["to"] = json!("role:executor");
    f.app.offer(&me("planner"), doc, None).await.unwrap();
    let sent = f
        .app
        .send(
            &me("planner"),
            message(
                &["role:executor"],
                MessageType::Request,
                Some("lane"),
                "whoever is free",
            ),
        )
        .await
        .unwrap();
    // Listed for the role, the order first: it has a deadline.
    let pool = f.app.pool(&me("impl-2"), None, None).await.unwrap();
    assert_eq!(pool.pool, "role:executor");
    let listed: Vec<Option<&str>> = pool.items.iter().map(|i| i.order.as_deref()).collect();
    assert_eq!(listed, [Some("wo_pool_1"), None]);
    assert_eq!(pool.items[1].excerpt, "whoever is free");

    // An order is claimed by its id (a prefix will do) at the seq its claimant read.
    let claimed = f
        .app
        .claim(&me("impl-1"), "wo_pool", Some(1))
        .await
        .unwrap();
    let order = claimed.order.expect("the order");
    assert_eq!((order.to.as_str(), order.seq), ("impl-1", 2));
    let r = refused(&f.app, f.app.claim(&me("impl-2"), "wo_pool_1", None)).await;
    assert!(r.is_retryable(), "{r:?}");
    // `next` takes what is left; then nothing is ready.
    let next = f.app.next(&me("impl-2"), None).await.unwrap();
    assert_eq!(next.item.message, sent.id);
    let r = refused(&f.app, f.app.next(&me("impl-2"), Some("lane"))).await;
    assert!(matches!(r, Refusal::NothingReady { .. }), "{r:?}");
    // A topic that is no topic is refused naming its field.
    let r = refused(&f.app, f.app.next(&me("impl-2"), Some("Not A Topic"))).await;
    assert!(
        matches!(
            r,
            Refusal::Name {
                field: baton_core::Field::Topic,
                ..
            }
        ),
        "{r:?}"
    );
}
