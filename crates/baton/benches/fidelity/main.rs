//! `cargo bench -p baton --bench fidelity`: how much of what a resuming participant must
//! know its 6,000-byte `baton resume` packet tells it, beside two baselines at the same
//! budget, on histories of 1,000, 10,000 and 100,000 events.
//!
//! A seeded generator (`generate.rs`) plays a project's history through Baton's use cases
//! over a real store, and the `baton` binary where it needs the machine (hooks), in a git
//! checkout whose files it changes: seven participants; requests sent, read, completed,
//! refused, handed back and left open; Work Orders in every state, with reviews and held
//! effects; decisions, some superseded; constraints on topics and paths; notes on files
//! that later change; receipts; runs that end, fail and are lost holding work; needs
//! raised and acknowledged; sessions and helpers seen through hooks, each session handing
//! over with its first action for next time. An oracle (`oracle.rs`) says from the
//! generator's own record what the participant `lead` must know (what it owes, what it
//! waits on, the decisions in force and the constraints on its topics and paths, its stale
//! notes and lost runs, its next action) and what must never be shown to it as current.
//! The score (`score.rs`) is recall per category, exact counts, errors and bytes.
//!
//! Baselines (`baseline.rs`), at the packet's budget: the HANDOFF.md every session
//! appended to, cut to the budget by keeping its beginning (a reader with a byte limit
//! reads a file from the top), and the newest lines of `baton export` that fit.
//!
//! It prints one table (history size × category, for Baton and each baseline) and asserts
//! nothing about time. `-- --sizes 1000,10000` picks the sizes, `-- --json` prints one JSON
//! object per size and system instead. Run without `--bench` (as `cargo test --benches`
//! does) it only checks that it works, on a short history. The stores are made in the
//! system's temporary directory (`TMPDIR=/dev/shm` keeps their syncs off the disk).

mod baseline;
mod generate;
mod oracle;
mod score;

use std::path::Path;
use std::time::Instant;

use baton_core::packet::DEFAULT_MAX_BYTES;
use serde_json::json;

use generate::{Generator, ME, baton};
use score::{Recall, Score};

const SEED: u64 = 58;

/// Cuts `s` to at most `max` bytes on a character boundary.
fn clip(s: &str, max: usize) -> String {
    baton_core::packet::clip(s, max)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench");
    let json = args.iter().any(|a| a == "--json");
    let show = args.iter().any(|a| a == "--show");
    let sizes: Vec<i64> = match args.iter().position(|a| a == "--sizes") {
        Some(i) => args
            .get(i + 1)
            .expect("--sizes 1000,10000")
            .split(',')
            .map(|n| n.trim().parse().expect("--sizes: numbers"))
            .collect(),
        None if full => vec![1_000, 10_000, 100_000],
        None => vec![300],
    };
    let exe = Path::new(env!("CARGO_BIN_EXE_baton"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    if !json {
        println!(
            "baton fidelity bench: {} · seed {SEED} · budget {DEFAULT_MAX_BYTES} bytes · \
             participant {ME}",
            exe.display()
        );
    }
    let mut rows = Vec::new();
    for &size in &sizes {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path();
        let started = Instant::now();
        let (record, events) = runtime.block_on(async {
            let mut g = Generator::new(exe, root, SEED).await;
            g.run(size).await;
            let events = g.generation().await;
            (std::mem::take(&mut g.record), events)
        });
        let seconds = started.elapsed().as_secs_f64();
        let oracle = oracle::oracle(&record);
        let packet = String::from_utf8(baton(exe, root, Some(ME), &["resume"])).expect("utf-8");
        assert!(
            packet.len() <= DEFAULT_MAX_BYTES,
            "the packet is {} bytes",
            packet.len()
        );
        let export = String::from_utf8(baton(exe, root, None, &["export"])).expect("utf-8");
        let systems = [
            ("baton", packet),
            (
                "HANDOFF.md",
                baseline::head(&record.handoff, DEFAULT_MAX_BYTES),
            ),
            ("log", baseline::tail(&export, DEFAULT_MAX_BYTES)),
        ];
        if show {
            println!("{}", systems[0].1);
        }
        if !json {
            println!(
                "  {events} events, generated in {seconds:.0} s: {}",
                oracle::shape(&record)
            );
            let must: Vec<String> = oracle
                .categories
                .iter()
                .map(|c| {
                    let counts: Vec<String> =
                        c.counts.iter().map(|k| k.items.len().to_string()).collect();
                    format!("{} {} (counts {})", c.name, c.must.len(), counts.join("/"))
                })
                .collect();
            println!("  must know: {}", must.join(" · "));
        }
        for (system, text) in systems {
            let s = score::score(&text, &oracle);
            if json {
                println!("{}", row_json(events, system, &s));
            } else {
                for e in &s.error_examples {
                    println!("  {system} error: {e}");
                }
                if system == "baton" {
                    for m in &s.missed {
                        println!("  {system} missed {m}");
                    }
                }
            }
            rows.push((events, system, s));
        }
    }
    if !json {
        print_table(&rows);
    }
}

fn percent(r: Recall) -> String {
    match r.percent() {
        Some(p) => format!("{p:.0}% {}/{}", r.found, r.of),
        None => "-".into(),
    }
}

fn print_table(rows: &[(i64, &str, Score)]) {
    println!(
        "{:>7}  {:<10}  {:>12}  {:>12}  {:>12}  {:>11}  {:>9}  {:>7}  {:>6}  {:>5}",
        "events",
        "system",
        "owes",
        "waits",
        "decided",
        "stale/lost",
        "resume_at",
        "counts",
        "errors",
        "bytes"
    );
    for (events, system, s) in rows {
        let c: Vec<String> = s.categories.iter().map(|(_, r)| percent(*r)).collect();
        println!(
            "{events:>7}  {system:<10}  {:>12}  {:>12}  {:>12}  {:>11}  {:>9}  {:>7}  {:>6}  {:>5}",
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            format!("{}/{}", s.counts.found, s.counts.of),
            s.errors,
            s.bytes
        );
    }
}

fn row_json(events: i64, system: &str, s: &Score) -> serde_json::Value {
    let mut row = json!({"events": events, "system": system});
    for (name, r) in &s.categories {
        row[*name] = json!({"found": r.found, "of": r.of});
    }
    row["counts"] = json!({"exact": s.counts.found, "of": s.counts.of});
    row["errors"] = json!(s.errors);
    row["bytes"] = json!(s.bytes);
    row
}
