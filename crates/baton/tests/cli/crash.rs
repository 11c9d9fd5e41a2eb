//! Acknowledged means durable, tested with real processes: the crash harness
//! (`crates/baton-crash`) run small. For every write command a loop of `baton` processes
//! is killed with SIGKILL, process group and all, at a random instant, and `baton serve` is
//! killed under concurrent HTTP senders on SQLite (and PostgreSQL when the tests have
//! one); every acknowledged write must be stored exactly once, no rendered file torn, the
//! store sound, and no approved effect run twice. `cargo run --release -p baton-crash` runs
//! the same trials at length (docs/RELIABILITY.md).

use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::baton_exe;

const TRIALS: u32 = 2;
const SERVER_KILLS: u32 = 3;

#[test]
fn killed_writers_and_servers_lose_no_acknowledged_write() {
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    eprintln!("crash: seed {seed} (replay: baton-crash --seed {seed})");
    let options = baton_crash::Options {
        trials: TRIALS,
        server_kills: SERVER_KILLS,
        seed,
        only: None,
        baton: baton_exe(),
        postgres: postgres(),
        verbose: true,
    };
    let tallies = baton_crash::run(&options).expect("the harness runs");
    let table = baton_crash::table(&tallies);
    eprintln!("{table}");
    let mut names: Vec<&str> = tallies.iter().map(|t| t.command.as_str()).collect();
    names.sort_unstable();
    let mut want = baton_crash::names();
    if options.postgres.is_none() {
        want.retain(|n| *n != "serve-postgres");
    }
    want.sort_unstable();
    assert_eq!(names, want, "every command and backend was tried");
    for t in &tallies {
        assert!(
            t.clean(),
            "{}: a loss, duplicate or torn file:\n{table}",
            t.command
        );
        assert_eq!(
            t.trials,
            u64::from(if t.command.starts_with("serve") {
                SERVER_KILLS
            } else {
                TRIALS
            })
        );
    }
    // Without these the test would pass if the kills never landed or nothing was written.
    let mid_run: u64 = tallies.iter().map(|t| t.killed_mid_run).sum();
    let trials: u64 = tallies.iter().map(|t| t.trials).sum();
    assert!(
        mid_run * 2 >= trials,
        "only {mid_run} of {trials} kills landed mid-run:\n{table}"
    );
    let acknowledged: u64 = tallies.iter().map(|t| t.acknowledged).sum();
    assert!(
        acknowledged >= trials,
        "only {acknowledged} writes acknowledged in {trials} trials:\n{table}"
    );
}

#[cfg(baton_test_postgres)]
fn postgres() -> Option<String> {
    Some(baton_testdb::url())
}

#[cfg(not(baton_test_postgres))]
fn postgres() -> Option<String> {
    None
}
