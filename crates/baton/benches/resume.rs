//! `cargo bench -p baton --bench resume`: the resume packet's size and the time of
//! `baton resume` (a whole process) with 100, 10,000 and 100,000 events in the store.
//!
//! The history is seeded through the `baton-store` library: requests to the timed agent
//! (most fetched and completed, a quarter left owed), decisions, notes and stream updates.
//! It prints a table and asserts nothing about time. Without `--bench` (as
//! `cargo test --benches` runs it) it only checks that it works, on the smallest store.

use std::path::Path;
use std::time::{Duration, Instant};

mod support;
use support::{baton, state_ops};

use baton_core::{Draft, MessageType, Passname, Payload, Topic};
use baton_store::{SqliteStore, Store, Verb};

const ME: &str = "impl-1";
const RUNS: usize = 10;

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let sizes: &[usize] = if full {
        &[100, 10_000, 100_000]
    } else {
        &[100]
    };
    let exe = Path::new(env!("CARGO_BIN_EXE_baton"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    println!(
        "baton resume bench: {} · {RUNS} runs each after 1 warm-up",
        exe.display()
    );
    println!(
        "{:>8}  {:>8}  {:>7}  {:>10}  {:>8}  {:>9}  {:>9}",
        "events", "owed", "state", "seeded s", "bytes", "median ms", "p90 ms"
    );
    for &size in sizes {
        let dir = tempfile::tempdir().expect("temp dir");
        let project = dir.path();
        baton(exe, project, &["init"]);
        for (name, role) in [("planner", "planner"), (ME, "executor")] {
            baton(exe, project, &["agent", "add", name, "--role", role]);
        }
        let seeding = Instant::now();
        let (events, owed, state_events) =
            runtime.block_on(seed(&project.join(".baton/baton.db"), size));
        let seeded = seeding.elapsed();
        let packet = baton(exe, project, &["--as", ME, "resume"]).stdout;
        let mut times: Vec<Duration> = (0..RUNS)
            .map(|_| {
                let t = Instant::now();
                baton(exe, project, &["--as", ME, "resume"]);
                t.elapsed()
            })
            .collect();
        times.sort();
        println!(
            "{events:>8}  {owed:>8}  {state_events:>7}  {:>10.1}  {:>8}  {:>9.1}  {:>9.1}",
            seeded.as_secs_f64(),
            packet.len(),
            ms(times[times.len() / 2]),
            ms(times[(times.len() * 9 / 10).min(times.len() - 1)]),
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Seeds until the log holds `target` events; returns (events, owed requests, state events).
async fn seed(db: &Path, target: usize) -> (i64, usize, usize) {
    let store = Store::new(
        SqliteStore::open(db, Duration::from_secs(5))
            .await
            .expect("open store"),
    );
    let planner = Passname::new("planner").unwrap();
    let me = Passname::new(ME).unwrap();
    let (mut owed, mut state_events) = (0, 0);
    let mut i = 0usize;
    while store.generation().await.unwrap() < target as i64 {
        i += 1;
        if i.is_multiple_of(10) {
            let ops = state_ops(i);
            state_events += store.change_state("planner", &ops).await.unwrap().len();
            continue;
        }
        let body = format!(
            "request {i}: fix the export of lane {} {}",
            i % 13,
            "x".repeat(i % 200)
        );
        let draft = Draft {
            to: vec![me.clone()],
            kind: MessageType::Request,
            topic: Topic::new(&format!("lane-{}", i % 13)).unwrap(),
            reply_to: None,
            payload: Payload::body(&body, 1 << 20).unwrap(),
            idempotency_key: None,
        };
        let id = store.send(&planner, draft, 0).await.unwrap().id;
        if i.is_multiple_of(4) {
            owed += 1;
        } else {
            store.fetch(Some(&me), &id).await.unwrap();
            store.step(&me, &id, Verb::Complete, None).await.unwrap();
        }
    }
    (store.generation().await.unwrap(), owed, state_events)
}
