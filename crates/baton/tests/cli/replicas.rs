//! Three `baton serve` replicas on one PostgreSQL database are one service: a scripted
//! mixed load (sends, retried sends, order steps, long polls, webhooks) goes to all three
//! at once, and afterwards every acknowledged write is there exactly once, every webhook
//! event was told once, a key revoked through one replica is refused by all, and each
//! replica reads the same status.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{drop_postgres_schema, postgres_schema, work_order, work_report};
use crate::race::post;
use crate::server::{admin, serve_with};

const SENDERS: usize = 3;
const SENDS: usize = 30;
const ORDERS: usize = 30;

/// A webhook endpoint on loopback that answers 200 and keeps every body.
fn endpoint() -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let bodies: Arc<Mutex<Vec<Value>>> = Arc::default();
    let kept = Arc::clone(&bodies);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_ok()
                && let Ok(body) = serde_json::from_slice(&body)
            {
                kept.lock().unwrap().push(body);
            }
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (url, bodies)
}

fn get(agent: &ureq::Agent, url: &str, token: &str) -> (u16, Value) {
    let mut response = agent
        .get(url)
        .header("Authorization", &format!("Bearer {token}"))
        .call()
        .expect("the server answers");
    let status = response.status().as_u16();
    (
        status,
        response.body_mut().read_json().unwrap_or(Value::Null),
    )
}

/// `body` posted until it is answered other than 503 (a replica's retryable answer).
fn post_retried(agent: &ureq::Agent, url: &str, token: &str, body: Value) -> (u16, Value) {
    loop {
        let (status, answer) = post(agent, url, token, body.clone());
        if status != 503 {
            return (status, answer);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The status without what is computed from the clock at the moment of reading.
fn timeless(mut value: Value) -> Value {
    match &mut value {
        Value::Object(fields) => {
            fields.retain(|k, _| k != "at" && !k.starts_with("age") && !k.starts_with("idle"));
            for v in fields.values_mut() {
                *v = timeless(v.take());
            }
        }
        Value::Array(items) => {
            for v in items.iter_mut() {
                *v = timeless(v.take());
            }
        }
        _ => {}
    }
    value
}

#[test]
#[cfg_attr(
    not(baton_test_postgres),
    ignore = "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES"
)]
fn three_replicas_on_one_postgresql_are_one_service_under_a_mixed_load() {
    let schema = format!("baton_replicas_{}", std::process::id());
    let url = postgres_schema(&schema);
    admin(&url, None, &["project", "add", "shop"]);
    for (name, role) in [
        ("planner", "planner"),
        ("impl-1", "executor"),
        ("impl-2", "executor"),
        ("owner", "owner"),
    ] {
        admin(&url, Some("shop"), &["agent", "add", name, "--role", role]);
    }
    let issue = |who: &str, scope: &str| {
        admin(&url, Some("shop"), &["key", "issue", who, "--scope", scope])
    };
    let token = |key: &Value| key["token"].as_str().unwrap().to_owned();
    let (planner, worker, watcher, owner) = (
        token(&issue("planner", "write")),
        token(&issue("impl-1", "write")),
        token(&issue("impl-2", "write")),
        token(&issue("owner", "admin")),
    );
    let replicas: Vec<_> = (0..3)
        .map(|_| serve_with(&url, &["--allow-private-webhooks"]))
        .collect();
    let bases: Arc<Vec<String>> = Arc::new(
        replicas
            .iter()
            .map(|s| format!("{}/v1/projects/shop", s.base))
            .collect(),
    );
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let (hook, told) = endpoint();
    let (status, set) = post(
        &agent,
        &format!("{}/participants/impl-1/webhook", bases[0]),
        &owner,
        json!({"url": hook}),
    );
    assert_eq!(status, 200, "{set}");

    // A long poll on replica 0 wakes on a write through replica 1.
    let (_, now) = get(&agent, &format!("{}/status", bases[0]), &watcher);
    let after = now["generation"].as_i64().unwrap();
    let poll = {
        let (agent, bases, watcher) = (agent.clone(), Arc::clone(&bases), watcher.clone());
        std::thread::spawn(move || {
            let url = format!("{}/wait?after={after}&timeout_seconds=60", bases[0]);
            let answer = get(&agent, &url, &watcher);
            (answer, Instant::now())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let (status, poke) = post(
        &agent,
        &format!("{}/messages", bases[1]),
        &planner,
        json!({"to": ["impl-2"], "type": "info", "topic": "poke", "body": "wake up"}),
    );
    assert_eq!(status, 200, "{poke}");
    let sent_at = Instant::now();
    let ((status, news), woke_at) = poll.join().unwrap();
    assert_eq!(status, 200, "{news}");
    assert!(
        news.to_string().contains(poke["id"].as_str().unwrap()),
        "the poll on replica 0 is told of the send through replica 1: {news}"
    );
    eprintln!(
        "replicas: a long poll woke {} ms after a write through another replica",
        woke_at.saturating_duration_since(sent_at).as_millis()
    );

    // The mixed load: senders (each send retried through the next replica with its key),
    // and the order steps, each step through another replica than the last.
    let senders: Vec<_> = (0..SENDERS)
        .map(|t| {
            let (agent, bases, planner) = (agent.clone(), Arc::clone(&bases), planner.clone());
            std::thread::spawn(move || {
                let mut acknowledged = Vec::new();
                for i in 0..SENDS {
                    let body = json!({"to": ["impl-1"], "type": "request", "topic": "load",
                                      "body": format!("job {t}-{i}"),
                                      "idempotency_key": format!("job-{t}-{i}")});
                    let first = format!("{}/messages", bases[(t + i) % 3]);
                    let (status, sent) = post_retried(&agent, &first, &planner, body.clone());
                    assert_eq!(status, 200, "{sent}");
                    let again = format!("{}/messages", bases[(t + i + 1) % 3]);
                    let (status, resent) = post_retried(&agent, &again, &planner, body);
                    assert_eq!(status, 200, "{resent}");
                    assert_eq!(resent["id"], sent["id"], "the key holds across replicas");
                    assert_eq!(resent["duplicate"], true, "{resent}");
                    acknowledged.push(sent["id"].as_str().unwrap().to_owned());
                }
                acknowledged
            })
        })
        .collect();
    let steps = {
        let (agent, bases) = (agent.clone(), Arc::clone(&bases));
        let (planner, worker) = (planner.clone(), worker.clone());
        std::thread::spawn(move || {
            for i in 0..ORDERS {
                let id = format!("wo_{i}");
                for (n, (token, mut body)) in [
                    (
                        &planner,
                        json!({"action": "create", "document": work_order(&id)}),
                    ),
                    (&worker, json!({"action": "accept", "id": id})),
                    (
                        &worker,
                        json!({"action": "report", "id": id, "document": work_report(&id)}),
                    ),
                    (&planner, json!({"action": "approve", "id": id})),
                ]
                .into_iter()
                .enumerate()
                {
                    let url = format!("{}/orders", bases[(i + n) % 3]);
                    let (status, answer) = post_retried(&agent, &url, token, body.take());
                    assert_eq!(status, 200, "{id} step {n}: {answer}");
                }
            }
        })
    };
    let acknowledged: Vec<String> = senders
        .into_iter()
        .flat_map(|s| s.join().unwrap())
        .collect();
    steps.join().unwrap();

    // Every acknowledged send is there once: the recipient's inbox, read through each
    // replica, lists each exactly once.
    for base in bases.iter() {
        let (status, inbox) = get(
            &agent,
            &format!("{base}/inbox?all=true&limit=1000"),
            &worker,
        );
        assert_eq!(status, 200, "{inbox}");
        let mut seen: HashMap<String, usize> = HashMap::new();
        for item in inbox["items"].as_array().unwrap() {
            if item["topic"] == "load" {
                *seen
                    .entry(item["id"].as_str().unwrap().to_owned())
                    .or_default() += 1;
            }
        }
        assert_eq!(
            seen.len(),
            acknowledged.len(),
            "{base}: one message per send"
        );
        for id in &acknowledged {
            assert_eq!(seen.get(id), Some(&1), "{id} once through {base}");
        }
    }
    // Every order went round once.
    for i in 0..ORDERS {
        let (_, shown) = get(&agent, &format!("{}/orders/wo_{i}", bases[i % 3]), &planner);
        assert_eq!(shown["order"]["status"], "approved", "wo_{i}: {shown}");
        assert_eq!(
            shown["events"].as_array().unwrap().len(),
            5,
            "wo_{i}: {shown}"
        );
    }

    // Each message to impl-1 was told to its webhook, once, whichever replica told it.
    let deadline = Instant::now() + Duration::from_secs(30);
    let counts = loop {
        let mut counts: HashMap<String, usize> = HashMap::new();
        for body in told.lock().unwrap().iter() {
            for event in body["events"].as_array().into_iter().flatten() {
                if event["kind"] == "message.sent" {
                    *counts
                        .entry(event["subject"].as_str().unwrap_or("").to_owned())
                        .or_default() += 1;
                }
            }
        }
        if acknowledged.iter().all(|id| counts.contains_key(id)) || Instant::now() > deadline {
            break counts;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for id in &acknowledged {
        assert_eq!(
            counts.get(id),
            Some(&1),
            "{id} told once across the replicas"
        );
    }

    // A key revoked through one replica is refused by all three at once.
    let fresh = issue("impl-2", "read");
    let fresh_token = token(&fresh);
    for base in bases.iter() {
        assert_eq!(get(&agent, &format!("{base}/me"), &fresh_token).0, 200);
    }
    let (status, revoked) = post(
        &agent,
        &format!("{}/keys/{}/revoke", bases[1], fresh["id"].as_str().unwrap()),
        &owner,
        json!({}),
    );
    assert_eq!(status, 200, "{revoked}");
    for base in bases.iter() {
        assert_eq!(
            get(&agent, &format!("{base}/me"), &fresh_token).0,
            401,
            "refused through {base}"
        );
    }

    // Each replica reads the same status.
    let statuses: Vec<Value> = bases
        .iter()
        .map(|base| timeless(get(&agent, &format!("{base}/status"), &planner).1))
        .collect();
    assert_eq!(statuses[0], statuses[1]);
    assert_eq!(statuses[1], statuses[2]);

    drop(replicas);
    drop_postgres_schema(&schema);
}
