//! `cargo bench -p baton --bench cli`: how long a user waits for `baton`, measured as whole
//! processes (start, open the store, work, exit) against a store with a real history.
//!
//! The store is seeded through the `baton-store` library, because ten thousand `baton send`
//! processes would take minutes; the timed commands are the real binary. It prints a table
//! and asserts nothing about time. Run without `--bench` (as `cargo test --benches` does) it
//! only checks that it works, on a small store.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod support;
use support::baton;

use baton_core::{Draft, MessageType, Passname, Payload, Topic};
use baton_store::{Backend, SearchQuery, SqliteStore, Store, Verb};

/// The participant whose commands are timed.
const ME: &str = "impl-1";
const PARTICIPANTS: [(&str, &str); 6] = [
    ("planner", "planner"),
    ("impl-1", "executor"),
    // Leads: they send requests as well as messages (an executor may not send requests).
    ("impl-2", "planner"),
    ("impl-3", "planner"),
    ("reviewer", "reviewer"),
    ("owner", "owner"),
];
const TOPICS: usize = 20;

struct Scale {
    /// Messages in the store before timing starts.
    messages: usize,
    /// Of those, requests still pending for `ME`: its inbox.
    owed: usize,
    /// Timed runs per operation (after one untimed warm-up).
    runs: usize,
}

const FULL: Scale = Scale {
    messages: 10_000,
    owed: 100,
    runs: 30,
};
const SMOKE: Scale = Scale {
    messages: 300,
    owed: 10,
    runs: 3,
};

fn main() {
    let started = Instant::now();
    let scale = if std::env::args().any(|a| a == "--bench") {
        FULL
    } else {
        SMOKE
    };
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_baton"));
    let dir = tempfile::tempdir().expect("temp dir");
    let project = dir.path();
    baton(&exe, project, &["init"]);
    for (name, role) in PARTICIPANTS {
        baton(&exe, project, &["agent", "add", name, "--role", role]);
    }

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let db = project.join(".baton/baton.db");
    let seeding = Instant::now();
    let owed = runtime.block_on(seed(&db, &scale));
    let seeded_in = seeding.elapsed();

    let mut rows = Vec::new();
    rows.push(time("baton --version (process floor)", &scale, |_| {
        vec!["--version".into()]
    }));
    rows.push(time("send (info, 1 recipient)", &scale, |run| {
        let body = format!("bench send {run}: the export keeps its filters");
        args(&[
            "--as", ME, "send", "--to", "planner", "--type", "info", "--topic", "topic-3",
            "--body", &body,
        ])
    }));
    rows.push(time("inbox", &scale, |_| args(&["--as", ME, "inbox"])));
    rows.push(time("inbox --json", &scale, |_| {
        args(&["--as", ME, "--json", "inbox"])
    }));
    // Warm-up and timed runs each take a different owed message, so every one is a first
    // fetch (pending → delivered, a write); then the same ones again, now plain reads.
    rows.push(time("show ID (first fetch)", &scale, |run| {
        args(&["--as", ME, "show", &owed[run]])
    }));
    rows.push(time("show ID (again)", &scale, |run| {
        args(&["--as", ME, "show", &owed[run]])
    }));
    rows.push(time("search TEXT (newest page)", &scale, |_| {
        args(&["--as", ME, "search", "filters"])
    }));
    // No message matches, so every payload in the store is read.
    rows.push(time("search TEXT (no match)", &scale, |_| {
        args(&["--as", ME, "search", "xylophone"])
    }));
    let rows: Vec<(String, Vec<Duration>)> = rows
        .into_iter()
        .map(|(name, argv)| (name, run_all(&exe, project, argv)))
        .collect();

    let count = runtime.block_on(message_count(&db));
    println!(
        "baton CLI bench: {} · store of {count} messages ({} seeded in {:.1} s, {} pending \
         for {ME}) · {} runs each after 1 warm-up",
        exe.display(),
        scale.messages,
        seeded_in.as_secs_f64(),
        scale.owed,
        scale.runs
    );
    println!(
        "{:<34} {:>5} {:>10} {:>8} {:>8}",
        "operation", "runs", "median ms", "p90 ms", "min ms"
    );
    for (name, mut times) in rows {
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let p90 = (times.len() * 9).div_ceil(10).max(1) - 1;
        println!(
            "{name:<34} {:>5} {:>10.1} {:>8.1} {:>8.1}",
            times.len(),
            ms(times[times.len() / 2]),
            ms(times[p90]),
            ms(times[0]),
        );
    }
    println!("wall time {:.1} s", started.elapsed().as_secs_f64());
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// An operation's argument lists: index 0 is the warm-up, then `scale.runs` timed runs.
fn time(
    name: &str,
    scale: &Scale,
    argv: impl Fn(usize) -> Vec<String>,
) -> (String, Vec<Vec<String>>) {
    (name.to_owned(), (0..=scale.runs).map(argv).collect())
}

/// Runs each argument list once; returns the wall times of all but the first.
fn run_all(exe: &Path, project: &Path, argvs: Vec<Vec<String>>) -> Vec<Duration> {
    argvs
        .iter()
        .map(|argv| {
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            let start = Instant::now();
            baton(exe, project, &argv);
            start.elapsed()
        })
        .skip(1)
        .collect()
}

/// Fills the store with `scale.messages` messages, a history shaped like a busy project:
/// twenty lanes, payloads of a few hundred bytes to a few KiB, one in five a reply, one in
/// ten addressed to `ME` and already dealt with, and `scale.owed` requests to `ME` left
/// pending (its inbox). Returns the pending ones' ids, oldest first.
async fn seed(db: &Path, scale: &Scale) -> Vec<String> {
    let store = Store::new(
        SqliteStore::open(db, Duration::from_secs(5))
            .await
            .expect("open the store"),
    );
    let me = Passname::new(ME).expect("passname");
    let names: Vec<Passname> = PARTICIPANTS
        .iter()
        .map(|(n, _)| Passname::new(n).expect("passname"))
        .collect();
    let others: Vec<&Passname> = names.iter().filter(|n| **n != me).collect();
    let mut ids: Vec<String> = Vec::with_capacity(scale.messages);
    let mut owed = Vec::with_capacity(scale.owed);
    for i in 0..scale.messages {
        // The owed requests are spread through the history, not bunched at its end.
        let is_owed = i % (scale.messages / scale.owed) == 0 && owed.len() < scale.owed;
        let to_me = is_owed || i % 10 == 5;
        let from = if to_me {
            others[i % others.len()]
        } else {
            &names[i % names.len()]
        };
        let to = if to_me {
            me.clone()
        } else {
            // Anyone but the sender (and not `ME`, whose inbound mail is handled above).
            let mut k = i * 7 + 1;
            loop {
                let candidate = others[k % others.len()];
                if candidate != from {
                    break candidate.clone();
                }
                k += 1;
            }
        };
        let kind = if is_owed || i % 3 == 0 {
            MessageType::Request
        } else if i % 3 == 1 {
            MessageType::Info
        } else {
            MessageType::Message
        };
        let reply_to = (i % 5 == 4 && !is_owed).then(|| ids[i / 2].clone());
        let words = 20 + (i * 37) % 400;
        let body = format!(
            "Message {i}: CSV export drops the active filters; {}",
            "keep status and date filters when exporting rows. ".repeat(words / 8)
        );
        let draft = Draft {
            to: vec![to],
            kind,
            topic: Topic::new(&format!("topic-{}", i % TOPICS)).expect("topic"),
            reply_to,
            payload: Payload::body(&body, 1 << 20).expect("payload"),
            idempotency_key: None,
        };
        let sent = store.send(from, draft, 0).await.expect("seed send");
        if is_owed {
            owed.push(sent.id.clone());
        } else if to_me {
            // History: fetched, then completed (a request) or acknowledged.
            store.fetch(Some(&me), &sent.id).await.expect("seed fetch");
            let verb = if kind == MessageType::Request {
                Verb::Complete
            } else {
                Verb::Ack
            };
            store
                .step(&me, &sent.id, verb, None)
                .await
                .expect("seed step");
        }
        ids.push(sent.id);
    }
    assert_eq!(owed.len(), scale.owed, "seeded the whole inbox");
    owed
}

/// Every message in the store, counted a page at a time.
async fn message_count(db: &Path) -> usize {
    let store = SqliteStore::open(db, Duration::from_secs(5))
        .await
        .expect("open the store");
    let mut count = 0;
    let mut query = SearchQuery {
        limit: 100,
        ..SearchQuery::default()
    };
    loop {
        let page = store.search(None, &query).await.expect("search");
        count += page.items.len();
        let Some(next) = page.next else {
            return count;
        };
        query.cursor = Some(next);
    }
}
