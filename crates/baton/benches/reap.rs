//! `cargo bench -p baton --bench reap`: `baton reap` as a whole process against a ledger
//! of 100,000 runs — 99,900 finished and 100 "running" whose `baton run` is gone — first
//! when it has those 100 to mark lost (with their alerts), then when there is nothing left
//! to do; and `baton runs` on the same ledger (every run ended within the hour, so the
//! default view lists them all). The ledger is seeded through the `baton-store` library.
//! Prints a table and asserts nothing about time. Run without `--bench` (as
//! `cargo test --benches` does) it only checks that it works, on a small ledger.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod support;
use support::{baton, record_runs};

use baton_core::run::{ProcessRef, Registration, RunChange, RunStatus};
use baton_store::{SqliteStore, Store};

/// Runs written per transaction while seeding.
const BATCH: usize = 1000;

/// `baton ARGS…` as a whole process: how long it took and its JSON output.
fn timed(exe: &Path, project: &Path, args: &[&str]) -> (Duration, serde_json::Value) {
    let started = Instant::now();
    let out = support::baton(exe, project, args);
    let took = started.elapsed();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (took, json)
}

fn registration(id: String, host: &Option<String>, monitor: ProcessRef) -> RunChange {
    RunChange::Registered(Box::new(Registration {
        run: id,
        participant: Some("impl-1".into()),
        agent: Some("claude".into()),
        command: vec!["claude".into(), "-p".into(), "fix the export".into()],
        host: host.clone(),
        monitor: Some(monitor),
        heartbeat_ms: Some(15_000),
        ..Registration::default()
    }))
}

async fn seed(db: &Path, finished: usize, stranded: usize) {
    let store = Store::new(
        SqliteStore::open(db, Duration::from_secs(30))
            .await
            .expect("open the store"),
    );
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned());
    // A pid that certainly names no live `baton run`: a process that has exited.
    let mut gone = Command::new("true").spawn().expect("spawn true");
    gone.wait().expect("reap true");
    let dead = ProcessRef {
        pid: gone.id(),
        start: Some(1),
    };
    let started = |id: &str| RunChange::Started {
        run: id.to_owned(),
        process: dead,
        pgid: dead.pid,
    };
    let mut changes = Vec::with_capacity(BATCH * 3);
    for n in 0..finished + stranded {
        let id = format!("run-{n:06}");
        changes.push(registration(id.clone(), &host, dead));
        changes.push(started(&id));
        if n < finished {
            changes.push(RunChange::Exited {
                run: id,
                status: RunStatus::Done,
                exit_code: Some(0),
                signal: None,
                reason: None,
            });
        }
        if changes.len() >= BATCH * 3 {
            record_runs(&store, &mut changes).await;
        }
    }
    record_runs(&store, &mut changes).await;
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (finished, stranded, repeats) = if full {
        (99_900, 100, 10)
    } else {
        (900, 10, 2)
    };
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_baton"));
    let dir = tempfile::tempdir().expect("temp dir");
    let project = dir.path();
    baton(&exe, project, &["init"]);
    baton(
        &exe,
        project,
        &["agent", "add", "impl-1", "--role", "executor"],
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let seeding = Instant::now();
    runtime.block_on(seed(&project.join(".baton/baton.db"), finished, stranded));
    let seeded_in = seeding.elapsed();

    let (first, report) = timed(&exe, project, &["--json", "reap"]);
    let lost = report["lost"].as_array().map_or(0, Vec::len);
    assert_eq!(
        lost, stranded,
        "the first reap should find every stranded run"
    );
    let mut again = Vec::new();
    for _ in 0..repeats {
        let (took, report) = timed(&exe, project, &["--json", "reap"]);
        assert_eq!(report["lost"].as_array().map_or(0, Vec::len), 0);
        again.push(took);
    }
    again.sort();
    let mut listing = Vec::new();
    for _ in 0..repeats {
        listing.push(timed(&exe, project, &["--json", "runs"]).0);
    }
    listing.sort();

    println!(
        "ledger: {} runs ({finished} finished, {stranded} stranded), seeded in {:.1} s",
        finished + stranded,
        seeded_in.as_secs_f64()
    );
    println!("{:<44} {:>10}", "whole process", "ms");
    println!(
        "{:<44} {:>10}",
        format!("baton reap, marking {lost} runs lost"),
        ms(first)
    );
    println!(
        "{:<44} {:>10}",
        format!("baton reap, nothing to do (median of {repeats})"),
        ms(again[again.len() / 2])
    );
    println!(
        "{:<44} {:>10}",
        format!(
            "baton runs, all {} listed (median of {repeats})",
            finished + stranded
        ),
        ms(listing[listing.len() / 2])
    );
}
