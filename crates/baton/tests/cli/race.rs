//! Several servers on one PostgreSQL behave as one: two `baton serve` processes
//! and eight clients race to accept, report on and approve the same orders. Each step
//! happens exactly once, and no order's seq has a gap or a duplicate.
//!
//! Runs when `BATON_TEST_POSTGRES` names a PostgreSQL database (CI sets it); otherwise it
//! says so and checks nothing (CI fails on that line).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use serde_json::{Value, json};

use crate::common::{drop_postgres_schema, postgres_schema, work_order, work_report};
use crate::server::{admin, serve};

const ORDERS: usize = 500;
const CLIENTS: usize = 8;

pub fn post(agent: &ureq::Agent, url: &str, token: &str, body: Value) -> (u16, Value) {
    let mut response = agent
        .post(url)
        .header("Authorization", &format!("Bearer {token}"))
        .send_json(body)
        .expect("the server answers");
    let status = response.status().as_u16();
    (
        status,
        response.body_mut().read_json().unwrap_or(Value::Null),
    )
}

#[test]
#[cfg_attr(
    not(baton_test_postgres),
    ignore = "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES"
)]
fn two_servers_on_one_postgresql_take_each_step_exactly_once() {
    let schema = format!("baton_race_{}", std::process::id());
    let url = postgres_schema(&schema);
    admin(&url, None, &["project", "add", "shop"]);
    admin(
        &url,
        Some("shop"),
        &["agent", "add", "planner", "--role", "planner"],
    );
    admin(
        &url,
        Some("shop"),
        &["agent", "add", "impl-1", "--role", "executor"],
    );
    let token = |who: &str| {
        admin(
            &url,
            Some("shop"),
            &["key", "issue", who, "--scope", "write"],
        )["token"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (planner, worker) = (token("planner"), token("impl-1"));
    let servers = [serve(&url), serve(&url)];
    let bases: Vec<String> = servers
        .iter()
        .map(|s| format!("{}/v1/projects/shop", s.base))
        .collect();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    for i in 0..ORDERS {
        let id = format!("wo_{i}");
        let (status, body) = post(
            &agent,
            &format!("{}/orders", bases[i % 2]),
            &planner,
            json!({"action": "create", "document": work_order(&id)}),
        );
        assert_eq!(status, 200, "offer {id}: {body}");
    }

    // Each step, raced by every client at once, through both servers: the clients meet at
    // a barrier before each order, so its eight requests are in flight together.
    for (step, token, body) in [
        ("accept", &worker, None),
        ("report", &worker, Some(())),
        ("approve", &planner, None),
    ] {
        let wins = Arc::new((0..ORDERS).map(|_| AtomicUsize::new(0)).collect::<Vec<_>>());
        let start = Arc::new(Barrier::new(CLIENTS));
        let threads: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let (bases, token, wins, agent, start) = (
                    bases.clone(),
                    token.clone(),
                    Arc::clone(&wins),
                    agent.clone(),
                    Arc::clone(&start),
                );
                std::thread::spawn(move || {
                    // An unexpected answer is kept, not panicked on: a client that stopped
                    // would leave the others waiting at the barrier.
                    let mut unexpected = Vec::new();
                    for i in 0..ORDERS {
                        let id = format!("wo_{i}");
                        let mut payload = json!({"action": step, "id": id});
                        if body.is_some() {
                            payload["document"] = work_report(&id);
                        }
                        let url = format!("{}/orders", bases[(c + i) % 2]);
                        start.wait();
                        let (status, answer) = post(&agent, &url, &token, payload);
                        match status {
                            200 => {
                                wins[i].fetch_add(1, Ordering::SeqCst);
                            }
                            // Lost the race: the order moved on, or the step no longer applies.
                            409 | 422 => {}
                            other => unexpected.push(format!("{step} {id}: {other} {answer}")),
                        }
                    }
                    unexpected
                })
            })
            .collect();
        for t in threads {
            let unexpected = t.join().unwrap();
            assert!(unexpected.is_empty(), "{unexpected:#?}");
        }
        for (i, won) in wins.iter().enumerate() {
            assert_eq!(
                won.load(Ordering::SeqCst),
                1,
                "{step} wo_{i} won by how many"
            );
        }
    }

    // Every order's own steps: 1 offer, accept, start, report, approve — seq 1..=5, once each.
    for i in 0..ORDERS {
        let mut response = agent
            .get(&format!("{}/orders/wo_{i}", bases[i % 2]))
            .header("Authorization", &format!("Bearer {planner}"))
            .call()
            .unwrap();
        let shown: Value = response.body_mut().read_json().unwrap();
        let seqs: Vec<i64> = shown["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_i64().unwrap())
            .collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5], "wo_{i}: {shown}");
        assert_eq!(shown["order"]["status"], "approved");
    }
    drop(servers);
    drop_postgres_schema(&schema);
}
