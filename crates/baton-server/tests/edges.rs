//! Property: random operations by random participants of every role, each through a
//! random way in — the dispatcher as the command line calls it on this machine, REST, and
//! MCP over HTTP (raw JSON-RPC to a real `baton serve`) — on SQLite and on PostgreSQL.
//! After every operation: one that was taken adds no security event; one that was refused
//! adds nothing but, when it was forbidden, exactly one more refusal on record — its own
//! security event, or a repeat counted on the one it repeats (over MCP, whose refusals
//! are text, at most one and nothing else). At the end every request delivered
//! to a participant can be closed by it, through any edge.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use baton_app::ops::{self, Operation, Typed, Who};
use baton_app::{App, Outgoing, Settings};
use baton_core::key::Scope;
use baton_core::{MessageType, Passname, ProjectName, RefusalKind};
use baton_store::{Database, StoreError};
use serde_json::{Value, json};

const CASES: u64 = 24;
const STEPS: usize = 60;
const TEAM: [(&str, &str); 5] = [
    ("planner", "planner"),
    ("impl-1", "executor"),
    ("rev", "reviewer"),
    ("own", "owner"),
    ("obs", "observer"),
];
const TOPICS: [&str; 3] = ["csv-export", "billing", "work-order"];

/// A small deterministic generator: each case is reproducible from its seed.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edge {
    Dispatch,
    Rest,
    Mcp,
}

/// How an operation ended: taken (with its answer), or refused (forbidden or not; over
/// MCP the kind is not told).
#[derive(Debug)]
enum Outcome {
    Taken(Value),
    Refused(Option<bool>),
}

struct Fixture {
    runtime: Arc<tokio::runtime::Runtime>,
    app: App,
    base: String,
    tokens: HashMap<&'static str, String>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn fixture(url: &str) -> Fixture {
    let runtime = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap(),
    );
    let name = ProjectName::new("shop").unwrap();
    let (db, app, listener, tokens) = runtime.block_on(async {
        let db: Arc<dyn Database> = baton_store::database(url, Duration::from_secs(5))
            .await
            .unwrap();
        db.add_project(&name).await.unwrap();
        let store = db.project(&name).await.unwrap();
        let app = App::new(store, Settings::default(), baton_server::host());
        let mut tokens = HashMap::new();
        for (who, role) in TEAM {
            app.add_participant("@local", who, role, &Default::default())
                .await
                .unwrap();
            let (_, token) = app
                .issue_key("@local", who, Scope::Write, None)
                .await
                .unwrap();
            tokens.insert(who, token);
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        (db, app, listener, tokens)
    });
    let base = format!("http://{}/v1/projects/shop", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = baton_server::Server::new(db, Settings::default());
    let rt = Arc::clone(&runtime);
    let thread = std::thread::spawn(move || {
        rt.block_on(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            baton_server::serve(listener, server, shutdown)
                .await
                .unwrap();
        });
    });
    Fixture {
        runtime,
        app,
        base,
        tokens,
        stop: Some(stop),
        thread: Some(thread),
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

impl Fixture {
    fn post(&self, who: &str, path: &str, body: &Value) -> (u16, Value) {
        let mut response = agent()
            .post(&format!("{}{path}", self.base))
            .header("Authorization", &format!("Bearer {}", self.tokens[who]))
            .header("Accept", "application/json, text/event-stream")
            .send_json(body)
            .expect("the server answers");
        let status = response.status().as_u16();
        (
            status,
            response.body_mut().read_json().unwrap_or(Value::Null),
        )
    }

    fn get(&self, who: &str, path: &str) -> (u16, Value) {
        let mut response = agent()
            .get(&format!("{}{path}", self.base))
            .header("Authorization", &format!("Bearer {}", self.tokens[who]))
            .call()
            .expect("the server answers");
        let status = response.status().as_u16();
        (
            status,
            response.body_mut().read_json().unwrap_or(Value::Null),
        )
    }

    fn rest(&self, (status, answer): (u16, Value)) -> Outcome {
        if status == 200 {
            Outcome::Taken(answer)
        } else {
            Outcome::Refused(Some(status == 403))
        }
    }

    fn mcp(&self, who: &str, tool: &str, arguments: Value) -> Outcome {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": tool, "arguments": arguments}});
        let (status, answer) = self.post(who, "/mcp", &call);
        assert_eq!(status, 200, "{answer}");
        let result = &answer["result"];
        if result["isError"] == json!(true) {
            Outcome::Refused(None)
        } else {
            Outcome::Taken(result["structuredContent"].clone())
        }
    }

    fn local<T>(&self, done: Result<T, StoreError>, answer: impl FnOnce(T) -> Value) -> Outcome {
        match done {
            Ok(value) => Outcome::Taken(answer(value)),
            Err(StoreError::Refused(r)) => {
                Outcome::Refused(Some(r.kind() == RefusalKind::Forbidden))
            }
            Err(e) => panic!("the store failed: {e}"),
        }
    }

    /// Runs typed operation `T` as `who` through `edge` (MCP only when `who`'s profile
    /// holds its tool; otherwise REST).
    fn typed<T: Typed>(&self, edge: Edge, who: &str, input: Value) -> Outcome {
        let op: &'static Operation = &T::OP;
        let role = TEAM.iter().find(|(n, _)| *n == who).unwrap().1;
        let offered = op
            .tool
            .filter(|tool| baton_mcp::Profile::for_role(role).has(tool));
        match (edge, offered) {
            (Edge::Dispatch, _) => {
                let who = Who {
                    actor: who,
                    scope: Scope::Write,
                };
                let done = self.runtime.block_on(self.app.dispatch(who, op, input));
                self.local(done, |v| v)
            }
            (Edge::Mcp, Some(tool)) => self.mcp(who, tool, input),
            (Edge::Rest | Edge::Mcp, _) => {
                let route = op.typed.unwrap().route;
                let mut body = input.as_object().unwrap().clone();
                let path = format!("/{}", route.fill(&mut body).unwrap().join("/"));
                self.rest(self.post(who, &path, &Value::Object(body)))
            }
        }
    }

    fn send(
        &self,
        edge: Edge,
        who: &str,
        to: &str,
        kind: MessageType,
        topic: &str,
        body: &str,
    ) -> Outcome {
        let input = json!({"to": [to], "type": kind.as_str(), "topic": topic, "body": body});
        match edge {
            Edge::Dispatch => {
                let me = Passname::new(who).unwrap();
                let out = Outgoing {
                    to: vec![to.to_owned()],
                    kind,
                    topic: Some(topic.to_owned()),
                    reply_to: None,
                    body: baton_app::Body::Text(body.to_owned()),
                    idempotency_key: None,
                };
                let done = self.runtime.block_on(self.app.send(&me, out));
                self.local(done, |s| json!({"id": s.id}))
            }
            Edge::Mcp if who == "planner" || who == "obs" => self.mcp(who, "send", input),
            _ => self.rest(self.post(who, "/messages", &input)),
        }
    }

    fn show(&self, edge: Edge, who: &str, id: &str) -> Outcome {
        match edge {
            Edge::Dispatch => {
                let me = Passname::new(who).unwrap();
                let done = self.runtime.block_on(self.app.show(
                    Some(&me),
                    id,
                    None,
                    baton_app::Layout::Compact,
                ));
                self.local(done, |_| Value::Null)
            }
            Edge::Mcp => self.mcp(who, "show", json!({"id": id})),
            Edge::Rest => self.rest(self.get(who, &format!("/messages/{id}"))),
        }
    }

    /// The log's generation and the refusals recorded as security events: the events,
    /// and the refusals in all (each event's count: itself and its repeats).
    fn counts(&self) -> (i64, (usize, i64)) {
        self.runtime.block_on(async {
            let generation = self.app.generation().await.unwrap();
            let (events, repeats) = self.app.security_events(None, 1000).await.unwrap();
            let refusals = events.len() as i64 + repeats.iter().map(|r| r.count).sum::<i64>();
            (generation, (events.len(), refusals))
        })
    }
}

/// Runs every case on the store `url` names (a fresh one per case from `fresh`); returns
/// (operations, forbidden refusals, other refusals, requests closed at the end).
fn cases(fresh: impl Fn(u64) -> String) -> (usize, usize, usize, usize) {
    let (mut operations, mut forbidden, mut refused, mut closed) = (0, 0, 0, 0);
    for case in 0..CASES {
        let f = fixture(&fresh(case));
        let mut dice = Dice(0x9E37_79B9_7F4A_7C15 ^ (case + 1));
        let mut sent: Vec<String> = Vec::new();
        for step in 0..STEPS {
            let who = dice.pick(&TEAM.map(|(n, _)| n));
            let edge = dice.pick(&[Edge::Dispatch, Edge::Rest, Edge::Mcp]);
            let (before, security) = f.counts();
            let id = if sent.is_empty() {
                "none".to_owned()
            } else {
                dice.pick(&sent)
            };
            let text = format!("case {case} step {step}");
            let what = dice.below(10);
            let outcome = match what {
                0..=2 => {
                    let to = dice.pick(&TEAM.map(|(n, _)| n));
                    let kind = dice.pick(&[
                        MessageType::Request,
                        MessageType::Info,
                        MessageType::Message,
                    ]);
                    f.send(edge, who, to, kind, dice.pick(&TOPICS), &text)
                }
                3 => f.show(edge, who, &id),
                4 => f.typed::<ops::Ack>(edge, who, json!({"id": id})),
                5 => f.typed::<ops::Complete>(edge, who, json!({"id": id, "note": text})),
                6 => match dice.below(3) {
                    0 => f.typed::<ops::HandBack>(edge, who, json!({"id": id, "reason": text})),
                    1 => f.typed::<ops::Refuse>(edge, who, json!({"id": id, "reason": text})),
                    _ => f.typed::<ops::Archive>(edge, who, json!({"id": id})),
                },
                7 => f.typed::<ops::Decide>(edge, who, json!({"text": text, "why": "a reason"})),
                8 => f.typed::<ops::Constrain>(
                    edge,
                    who,
                    json!({"text": text, "tried": "a try", "result": "a result"}),
                ),
                _ => match dice.below(3) {
                    0 => f.typed::<ops::Focus>(edge, who, json!({"text": text})),
                    1 => f.typed::<ops::Note>(edge, who, json!({"text": text, "subject": id})),
                    _ => {
                        f.typed::<ops::SessionEnd>(edge, who, json!({"dependency_changes": [text]}))
                    }
                },
            };
            operations += 1;
            let (after, security_after) = f.counts();
            let sends = what <= 2;
            let what = format!("case {case} step {step}: {who} through {edge:?}: {outcome:?}");
            match outcome {
                Outcome::Taken(answer) => {
                    assert_eq!(security_after, security, "{what}");
                    if sends {
                        sent.push(answer["id"].as_str().expect("a send's id").to_owned());
                    }
                }
                Outcome::Refused(Some(true)) => {
                    forbidden += 1;
                    // One more refusal on record: a new event, or a repeat counted on the
                    // one it repeats; nothing else.
                    assert_eq!(security_after.1, security.1 + 1, "{what}");
                    assert!(
                        (after, security_after.0) == (before + 1, security.0 + 1)
                            || (after, security_after.0) == (before, security.0),
                        "{what}: {before} → {after}"
                    );
                }
                Outcome::Refused(Some(false)) => {
                    refused += 1;
                    assert_eq!(after, before, "{what}: a refusal changed the log");
                }
                Outcome::Refused(None) => {
                    refused += 1;
                    assert!(
                        after == before
                            || (after, security_after.0) == (before + 1, security.0 + 1),
                        "{what}: an MCP refusal added {} events",
                        after - before
                    );
                    assert!(security_after.1 - security.1 <= 1, "{what}");
                }
            }
        }
        // Every request delivered to a participant can be closed by it, through any edge.
        for (who, _) in TEAM {
            let me = Passname::new(who).unwrap();
            let owed = f
                .runtime
                .block_on(f.app.inbox(&me, false, None, 1000))
                .unwrap()
                .0;
            for envelope in owed.into_iter().filter(|e| e.kind == MessageType::Request) {
                let edge = dice.pick(&[Edge::Dispatch, Edge::Rest, Edge::Mcp]);
                let id = envelope.id.clone();
                let shown = f.show(edge, who, &id);
                assert!(
                    matches!(shown, Outcome::Taken(_)),
                    "{who} show {id}: {shown:?}"
                );
                let done = f.typed::<ops::Complete>(edge, who, json!({"id": id}));
                assert!(
                    matches!(done, Outcome::Taken(_)),
                    "{who} complete {id}: {done:?}"
                );
                closed += 1;
            }
        }
    }
    (operations, forbidden, refused, closed)
}

fn report(backend: &str, (operations, forbidden, refused, closed): (usize, usize, usize, usize)) {
    println!(
        "{backend}: {CASES} cases, {operations} operations through random edges: {forbidden} \
         forbidden (each one more refusal on record), {refused} other refusals (nothing written), \
         {closed} requests closed by their recipients at the end"
    );
    assert!(
        forbidden > 0 && refused > 0 && closed > 0,
        "the cases exercise every outcome"
    );
}

#[test]
fn random_operations_through_random_edges_keep_the_gate_s_promises_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let counts = cases(|case| format!("sqlite:{}", dir.path().join(format!("db{case}")).display()));
    report("sqlite", counts);
}

#[test]
#[cfg_attr(
    not(baton_test_postgres),
    ignore = "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES"
)]
fn random_operations_through_random_edges_keep_the_gate_s_promises_on_postgres() {
    let base = baton_testdb::url();
    let run = std::process::id();
    let separator = if base.contains('?') { '&' } else { '?' };
    let schema = |case: u64| format!("baton_edges_{run}_{case}");
    let counts = cases(|case| format!("{base}{separator}schema={}", schema(case)));
    // The schemas are this test's own: dropped once it has passed.
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        use sqlx::Connection;
        let mut db = sqlx::PgConnection::connect(&base).await.unwrap();
        for case in 0..CASES {
            // The name is this test's own: letters, digits and underscores.
            let drop = format!("DROP SCHEMA IF EXISTS {} CASCADE", schema(case));
            sqlx::query(sqlx::AssertSqlSafe(drop))
                .execute(&mut db)
                .await
                .unwrap();
        }
    });
    report("postgres", counts);
}
