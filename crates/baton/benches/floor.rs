//! `cargo bench -p baton --bench floor`: every everyday command as a whole `baton` process
//! beside its floor — a bare `sqlite3` process doing the same database work on the same
//! store (for a write, one fsync'd insert of a 300-byte row into a table with as many rows
//! as the store has messages; for a read, the same rows) — on stores of 10,000 and 100,000
//! messages.
//!
//! The stores are seeded once through the `baton-store` library (a grouped store, so a
//! batch of writers shares one fsync) and kept under `target/bench-stores/`, reused by the
//! next run. Each command and its floor run alternately (A B A B …) after one warm-up of
//! each; the table shows the median and p90 of the command, the floor's median, their
//! ratio, and the command's peak RSS (`/usr/bin/time`). A hook is timed while another
//! process writes continuously, and every hook event is counted in the log afterwards.
//! Last, one line per store gives the peak RSS of one run of each command the table does
//! not time (status, the `--all` lists, queue, export …).
//! Resume is also timed on a small store (under 200 events) whose packet is as full as the
//! large stores' (20 of each list), and on the largest store and on a store of 10,000
//! messages and 2,000 decisions in force, each alternating with the small one (the row's
//! "floor" is then the small store's resume: the ratio is how much resume grew with the
//! log; the row gives both packets' sizes). It asserts nothing about time. Run
//! without `--bench` (as `cargo test --benches` does) it only checks that it works, on a
//! small store of its own. `BATON_FLOOR_SIZES=10000` (comma-separated) times only those
//! stores. Orders that wait on orders: `order list --ready` on a chain of 1,000 orders
//! (each waiting on the one before) beside its floor, and alternating with the same on a
//! chain of 10: how much `--ready` grows with the orders.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{baton, hook, record_runs, state_ops};

use baton_core::run::{HookCall, ProcessRef, Registration, RunChange, RunStatus};
use baton_core::{Draft, MessageType, Passname, Payload, Topic};
use baton_store::{SqliteStore, Store, Verb};

/// The participant whose commands are timed.
const ME: &str = "impl-1";
const PARTICIPANTS: [(&str, &str); 6] = [
    ("planner", "planner"),
    // A lead: it owes requests and sends its own (an executor may not send requests).
    ("impl-1", "planner"),
    ("impl-2", "executor"),
    ("impl-3", "executor"),
    ("reviewer", "reviewer"),
    ("owner", "owner"),
];
const TOPICS: usize = 20;
/// Requests owed to `ME` (its inbox) and requests `ME` keeps open (its outbox).
const OWED: usize = 100;
const OPEN: usize = 100;
/// Messages in the one long thread `thread` shows.
const THREAD: usize = 20;
/// Writers sharing one commit while seeding.
const SEED_BATCH: usize = 256;
/// The small resume store's shape, kept in its `seeded` marker.
const SMALL_SHAPE: &str = "40 owed, 25 waited for, 25 state changes";

struct Scale {
    sizes: &'static [usize],
    runs: usize,
    hooks: usize,
    /// Hook events of the one session the session store adds.
    session_hooks: usize,
    /// Orders in the chain `order list --ready` is timed on.
    chain: usize,
    /// The decisions store's messages and decisions in force.
    decisions_store: (usize, usize),
}

const FULL: Scale = Scale {
    sizes: &[10_000, 100_000],
    runs: 30,
    hooks: 300,
    session_hooks: 10_000,
    chain: 1000,
    decisions_store: (10_000, 2_000),
};
const SMOKE: Scale = Scale {
    sizes: &[400],
    runs: 2,
    hooks: 5,
    session_hooks: 200,
    chain: 20,
    decisions_store: (400, 60),
};
/// The short chain the long one is compared with.
const SHORT_CHAIN: usize = 10;
/// Helpers the session starts (each with a start, a tool use and, for half, a stop).
const SESSION_HELPERS: usize = 50;

fn main() {
    let started = Instant::now();
    let full = std::env::args().any(|a| a == "--bench");
    let scale = if full { FULL } else { SMOKE };
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_baton"));
    // Kept beside the build, so the next run reuses them; the smoke run uses a temp dir.
    let temp = tempfile::tempdir().expect("temp dir");
    let base = if full {
        exe.parent()
            .and_then(Path::parent)
            .expect("target/release/baton")
            .join("bench-stores")
    } else {
        temp.path().to_owned()
    };

    // `BATON_FLOOR_SIZES=10000` (comma-separated) times only those stores.
    let sizes: Vec<usize> = match std::env::var("BATON_FLOOR_SIZES") {
        Ok(list) if full => list
            .split(',')
            .map(|n| n.trim().parse().expect("BATON_FLOOR_SIZES: numbers"))
            .collect(),
        _ => scale.sizes.to_vec(),
    };
    let mut table: Vec<Row> = Vec::new();
    let mut notes = Vec::new();
    let mut memory = Vec::new();
    for &size in &sizes {
        let project = base.join(format!("floor-{size}"));
        let seeded = prepare(&exe, &project, size);
        notes.push(format!(
            "{size} messages: {} ({} events, {} runs)",
            seeded.how, seeded.events, seeded.runs
        ));
        // Warm-up, timed runs, and one more for the memory measurement.
        let fixtures = settle(fixtures(&project, scale.runs + 2));
        quiesce();
        let bench = Bench {
            exe: &exe,
            project: &project,
            runs: scale.runs,
            size,
        };
        table.extend(bench.everyday(&fixtures));
        table.push(bench.hook(scale.hooks));
        memory.push(bench.untimed_memory());
    }
    // Resume as history grows: a store of under 200 events beside the big ones.
    let small = base.join("floor-resume-100");
    let seeded = prepare_small(&exe, &small);
    notes.push(format!("resume store: {} events", seeded));
    quiesce();
    let bench = Bench {
        exe: &exe,
        project: &small,
        runs: scale.runs,
        size: 0,
    };
    table.push(bench.resume(&format!("resume ({seeded} events)")));
    // The growth goal measured like every floor: resume on the largest store alternating
    // with resume on the small store, so both see the same machine at the same time.
    if let Some(&largest) = sizes.iter().max() {
        let big = base.join(format!("floor-{largest}"));
        table.push(versus_small(
            &exe,
            ("resume, vs the small store", &big, largest),
            (&small, seeded),
            scale.runs,
            String::new(),
        ));
    }
    // The same on a store of many decisions in force: its packet lists its share of them,
    // as the small store's lists all of its own.
    let (messages, decided) = scale.decisions_store;
    let decisions = base.join(format!("floor-decisions-{messages}"));
    let events = prepare_decisions(&exe, &decisions, messages, decided);
    notes.push(format!(
        "decisions store: {messages} messages, {decided} decisions in force ({events} events)"
    ));
    quiesce();
    table.push(versus_small(
        &exe,
        ("resume, decisions vs small", &decisions, messages),
        (&small, seeded),
        scale.runs,
        format!("{decided} decisions · "),
    ));
    // A session seen through hooks: the small store again with one of `ME`'s sessions of
    // many hook events and helpers, against the small store without it.
    let session = base.join("floor-session");
    let rows = prepare_session(&small, &session, scale.session_hooks);
    notes.push(format!(
        "session store: the resume store and one session of {} hook events, {} helpers: \
         {rows} rows of the ledger",
        scale.session_hooks, SESSION_HELPERS
    ));
    quiesce();
    for (name, command) in [
        ("status, a session vs none", &["status"][..]),
        ("resume, a session vs none", &["--as", ME, "resume"][..]),
    ] {
        table.push(alternate(
            &exe,
            (name, &session, 0),
            &small,
            command,
            scale.runs,
            format!(
                "floor here: the same on the store without the session, alternating · {} \
                 hook events in {rows} rows",
                scale.session_hooks
            ),
        ));
    }
    // Orders that wait on orders: what is ready on a long chain, beside its floor and
    // against a short chain.
    let chain = base.join(format!("floor-chain-{}", scale.chain));
    let short = base.join(format!("floor-chain-{SHORT_CHAIN}"));
    notes.push(format!(
        "chains: {} and {SHORT_CHAIN} orders, each waiting on the one before",
        prepare_chain(&exe, &chain, scale.chain)
    ));
    prepare_chain(&exe, &short, SHORT_CHAIN);
    quiesce();
    let bench = Bench {
        exe: &exe,
        project: &chain,
        runs: scale.runs,
        size: 0,
    };
    let ready = ["order", "list", "--ready"];
    let mut row = bench.compare(
        &format!("order list --ready ({})", scale.chain),
        |_| args(&ready),
        "SELECT data FROM orders WHERE status = 'offered' ORDER BY log_seq;",
    );
    row.extra = format!("{} orders, 1 ready", scale.chain);
    table.push(row);
    table.push(alternate(
        &exe,
        ("--ready, vs a chain of 10", &chain, 0),
        &short,
        &ready,
        scale.runs,
        format!(
            "floor here: the same on a chain of {SHORT_CHAIN}, alternating · {} orders",
            scale.chain
        ),
    ));
    let explain = ["order", "list", "--ready", "--explain"];
    let mut row = bench.compare(
        &format!("--ready --explain ({})", scale.chain),
        |_| args(&explain),
        "SELECT o.data, a.data FROM orders o JOIN order_waits w ON w.order_id = o.id \
         JOIN orders a ON a.id = w.after_id WHERE o.status IN ('waiting', 'held') \
         ORDER BY o.log_seq;",
    );
    row.extra = format!(
        "lists the {} waiting, each with what it waits on",
        scale.chain - 1
    );
    table.push(row);

    println!(
        "baton floor bench: {} · {} runs of each command and of its floor, alternating, \
         after 1 warm-up each",
        exe.display(),
        scale.runs
    );
    for note in &notes {
        println!("  {note}");
    }
    println!("  {}", layout_found(&exe));
    println!(
        "{:<26} {:>9} {:>10} {:>8} {:>10} {:>6} {:>8}",
        "command", "messages", "median ms", "p90 ms", "floor ms", "ratio", "RSS MB"
    );
    for row in &table {
        row.print();
    }
    for line in &memory {
        println!("{line}");
    }
    println!("wall time {:.1} s", started.elapsed().as_secs_f64());
}

/// `resume` on `store` alternating with `resume` on the small store (of `events` events):
/// how much resume grows with the log. The row says what it compares and both packets'
/// sizes after `what`.
fn versus_small(
    exe: &Path,
    row: (&str, &Path, usize),
    (small, events): (&Path, i64),
    runs: usize,
    what: String,
) -> Row {
    let argv = ["--as", ME, "resume"];
    let extra = format!(
        "floor here: resume on the {events}-event store, alternating · {what}packets of {} \
         and {} bytes",
        baton(exe, row.1, &argv).stdout.len(),
        baton(exe, small, &argv).stdout.len()
    );
    alternate(exe, row, small, &argv, runs, extra)
}

/// `argv` on `store` (the row's command) alternating with `argv` on `floor`, after one
/// warm-up of each: how much the difference between the two stores costs.
fn alternate(
    exe: &Path,
    (command, store, size): (&str, &Path, usize),
    floor: &Path,
    argv: &[&str],
    runs: usize,
    extra: String,
) -> Row {
    let mut row = Row {
        command: command.to_owned(),
        size,
        times: Vec::new(),
        floor: Vec::new(),
        rss_kb: None,
        extra,
    };
    for i in 0..=runs {
        let started = Instant::now();
        baton(exe, store, argv);
        let a = started.elapsed();
        let started = Instant::now();
        baton(exe, floor, argv);
        if i > 0 {
            row.times.push(a);
            row.floor.push(started.elapsed());
        }
    }
    row
}

struct Row {
    command: String,
    size: usize,
    times: Vec<Duration>,
    floor: Vec<Duration>,
    rss_kb: Option<u64>,
    /// What the row's numbers mean beyond median and p90 (a hook's p99, dropped events).
    extra: String,
}

impl Row {
    fn print(&self) {
        let mut times = self.times.clone();
        times.sort();
        let mut floor = self.floor.clone();
        floor.sort();
        let median = ms(times[times.len() / 2]);
        let p90 = ms(times[percentile(times.len(), 90)]);
        let (floor_ms, ratio) = if floor.is_empty() {
            ("-".to_owned(), "-".to_owned())
        } else {
            let f = ms(floor[floor.len() / 2]);
            (format!("{f:.1}"), format!("{:.2}", median / f))
        };
        let size = if self.size == 0 {
            "-".to_owned()
        } else {
            self.size.to_string()
        };
        let rss = self
            .rss_kb
            .map_or_else(|| "-".to_owned(), |kb| format!("{:.1}", kb as f64 / 1024.0));
        println!(
            "{:<26} {size:>9} {median:>10.1} {p90:>8.1} {floor_ms:>10} {ratio:>6} {rss:>8}{}",
            self.command,
            if self.extra.is_empty() {
                String::new()
            } else {
                format!("  {}", self.extra)
            }
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The index of the `p`th percentile in a sorted list of `len`.
fn percentile(len: usize, p: usize) -> usize {
    (len * p).div_ceil(100).max(1) - 1
}

/// What the timed commands act on, made fresh for each run of the bench (outside timing):
/// requests to `ME` not yet fetched (for `show`, then `complete`) and infos to `ME`
/// already fetched (for `ack`).
struct Fixtures {
    requests: Vec<String>,
    infos: Vec<String>,
    thread: String,
}

struct Bench<'a> {
    exe: &'a Path,
    project: &'a Path,
    runs: usize,
    size: usize,
}

/// One side of a comparison: a `baton` command line or a `sqlite3` script.
enum Side {
    Baton(Vec<String>),
    Sqlite(String),
}

impl Bench<'_> {
    fn db(&self) -> PathBuf {
        self.project.join(".baton/baton.db")
    }

    /// Runs `side` once; returns its wall time.
    fn once(&self, side: &Side) -> Duration {
        let started = Instant::now();
        match side {
            Side::Baton(argv) => {
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                baton(self.exe, self.project, &argv);
            }
            Side::Sqlite(sql) => sqlite(&self.db(), sql),
        }
        started.elapsed()
    }

    /// `runs + 1` command lines (`argv(i)`, the first a warm-up) against the floor `sql`,
    /// alternately.
    fn compare(&self, name: &str, argv: impl Fn(usize) -> Vec<String>, sql: &str) -> Row {
        let floor = Side::Sqlite(sql.to_owned());
        let mut times = Vec::new();
        let mut floors = Vec::new();
        for i in 0..=self.runs {
            let a = self.once(&Side::Baton(argv(i)));
            let b = self.once(&floor);
            if i > 0 {
                times.push(a);
                floors.push(b);
            }
        }
        Row {
            command: name.to_owned(),
            size: self.size,
            times,
            floor: floors,
            rss_kb: None,
            extra: String::new(),
        }
    }

    /// Peak resident memory of one more run of `argv`, in KiB.
    fn rss(&self, argv: &[String]) -> Option<u64> {
        let out = Command::new("/usr/bin/time")
            .args(["-f", "%M"])
            .arg(self.exe)
            .args(argv)
            .current_dir(self.project)
            .env_remove("BATON_PROJECT")
            .env_remove("BATON_AS")
            .stdout(Stdio::null())
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stderr);
        text.lines().last()?.trim().parse().ok()
    }

    /// Peak RSS of one run of each command the table does not time (the 20 MB goal is for
    /// every command), on one line; a figure over 20 MB is marked `!`.
    fn untimed_memory(&self) -> String {
        const UNTIMED: [&[&str]; 13] = [
            &["status"],
            &["status", "--json"],
            &["inbox", "--all"],
            &["outbox", "--all"],
            &["queue"],
            &["state", "show"],
            &["alerts"],
            &["runs", "--all"],
            &["order", "list", "--all"],
            &["security-events"],
            &["agent", "list"],
            &["key", "list"],
            &["export"],
        ];
        let figures: Vec<String> = UNTIMED
            .iter()
            .map(|command| {
                let mut argv = args(&["--as", ME]);
                argv.extend(args(command));
                let figure = match self.rss(&argv) {
                    Some(kb) if kb > 20 * 1024 => format!("{:.1}!", kb as f64 / 1024.0),
                    Some(kb) => format!("{:.1}", kb as f64 / 1024.0),
                    None => "-".to_owned(),
                };
                format!("{} {figure}", command.join(" "))
            })
            .collect();
        format!(
            "peak RSS MB of untimed commands, {} messages: {}",
            self.size,
            figures.join(" · ")
        )
    }

    fn everyday(&self, fx: &Fixtures) -> Vec<Row> {
        sqlite(
            &self.db(),
            "PRAGMA busy_timeout = 10000; \
             CREATE TABLE IF NOT EXISTS bench_floor (id INTEGER PRIMARY KEY, data TEXT NOT NULL)",
        );
        // A write's floor inserts into a table of the store's size: as many rows as it has
        // messages, topped up once (a table of a few rows would be a shallower tree).
        let row = "x".repeat(300);
        let missing =
            self.size as i64 - sqlite_scalar(&self.db(), "SELECT count(*) FROM bench_floor");
        if missing > 0 {
            sqlite(
                &self.db(),
                &format!(
                    "PRAGMA busy_timeout = 10000; \
                     WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {missing}) \
                     INSERT INTO bench_floor (data) SELECT '{row}' FROM n;"
                ),
            );
        }
        let write_floor =
            format!("PRAGMA synchronous = FULL; INSERT INTO bench_floor (data) VALUES ('{row}');");
        let me = |rest: &[&str]| -> Vec<String> {
            ["--as", ME]
                .iter()
                .chain(rest)
                .map(|s| (*s).to_owned())
                .collect()
        };
        let owed = format!(
            "SELECT m.id, m.from_name, m.type, m.topic, m.excerpt, m.size, m.created_at, \
             m.depth, d.status FROM deliveries d JOIN messages m ON m.id = d.message_id \
             WHERE d.participant = '{ME}' AND d.status IN ('pending', 'delivered') \
             ORDER BY m.seq;"
        );
        let newest = "SELECT m.id, m.from_name, m.type, m.topic, m.excerpt, m.size, \
             m.created_at, m.depth, d.participant, d.status FROM (SELECT * FROM messages \
             ORDER BY seq DESC LIMIT 50) m JOIN deliveries d ON d.message_id = m.id;";
        let text = |word: &str| {
            format!(
                "SELECT m.id, m.from_name, m.type, m.topic, m.excerpt, m.size, m.created_at, \
                 m.depth, d.participant, d.status FROM (SELECT * FROM messages WHERE seq IN \
                 (SELECT rowid FROM message_text WHERE message_text MATCH '\"{word}\"*' \
                 ORDER BY rowid DESC LIMIT 50)) m JOIN deliveries d ON d.message_id = m.id;"
            )
        };
        // A send whose body an earlier send already carried within the duplicate window
        // (ten minutes) writes nothing: each run's bodies carry a nonce of its own, and the
        // sends are counted in the log afterwards.
        let nonce = nonce();
        let send = |body: &str| {
            me(&[
                "send", "--to", "planner", "--type", "info", "--topic", "topic-3", "--body", body,
            ])
        };
        let mut rows = vec![
            self.compare(
                "send",
                |i| {
                    send(&format!(
                        "bench send {nonce}-{i}: the export keeps its filters"
                    ))
                },
                &write_floor,
            ),
            self.compare(
                "show (first fetch)",
                |i| me(&["show", &fx.requests[i]]),
                &write_floor,
            ),
            self.compare("ack", |i| me(&["ack", &fx.infos[i]]), &write_floor),
            self.compare(
                "complete",
                |i| me(&["complete", &fx.requests[i]]),
                &write_floor,
            ),
            self.compare("inbox (100 owed)", |_| me(&["inbox"]), &owed),
            self.compare(
                "outbox (100 open)",
                |_| me(&["outbox"]),
                &format!(
                    "SELECT m.id, m.topic, m.excerpt, d.participant, d.status, \
                     (SELECT count(*) FROM messages r WHERE r.reply_to = m.id) \
                     FROM messages m JOIN deliveries d ON d.message_id = m.id \
                     WHERE m.from_name = '{ME}' AND m.type = 'request' \
                     AND m.request_status != 'archived' ORDER BY m.seq;"
                ),
            ),
            self.compare(
                "thread (20 messages)",
                |_| me(&["thread", &fx.thread]),
                // The root, then its replies: the index of threads holds only replies.
                &format!(
                    "WITH t AS (SELECT root_id FROM messages WHERE id = '{}') \
                     SELECT m.seq, m.id, m.from_name, m.type, m.topic, m.excerpt, m.size, \
                     m.created_at, m.depth, d.participant, d.status FROM messages m \
                     JOIN deliveries d ON d.message_id = m.id \
                     WHERE m.id = (SELECT root_id FROM t) \
                     UNION ALL \
                     SELECT m.seq, m.id, m.from_name, m.type, m.topic, m.excerpt, m.size, \
                     m.created_at, m.depth, d.participant, d.status FROM messages m \
                     JOIN deliveries d ON d.message_id = m.id \
                     WHERE m.root_id = (SELECT root_id FROM t) AND m.reply_to IS NOT NULL \
                     ORDER BY 1;",
                    fx.thread
                ),
            ),
            self.compare("search (newest page)", |_| me(&["search"]), newest),
            self.compare(
                "search TEXT (match)",
                |_| me(&["search", "filters"]),
                &text("filters"),
            ),
            self.compare(
                "search TEXT (no match)",
                |_| me(&["search", "xylophone"]),
                &text("xylophone"),
            ),
            self.resume("resume"),
            self.compare(
                "runs (live + newest 50)",
                |_| args(&["runs"]),
                "SELECT data FROM runs WHERE status IN ('registered', 'running', 'untracked') \
                 UNION ALL SELECT data FROM (SELECT data FROM runs \
                 WHERE status NOT IN ('registered', 'running', 'untracked') \
                 ORDER BY seq DESC LIMIT 50);",
            ),
        ];
        let written = sqlite_scalar(
            &self.db(),
            &format!("SELECT count(*) FROM messages WHERE excerpt LIKE 'bench send {nonce}-%';"),
        );
        assert_eq!(
            written as usize,
            self.runs + 1,
            "every timed send wrote a message"
        );
        let last = self.runs + 1;
        let rss_of: [Vec<String>; 12] = [
            send(&format!("rss {nonce}")),
            me(&["show", &fx.requests[last]]),
            me(&["ack", &fx.infos[last]]),
            me(&["complete", &fx.requests[last]]),
            me(&["inbox"]),
            me(&["outbox"]),
            me(&["thread", &fx.thread]),
            me(&["search"]),
            me(&["search", "filters"]),
            me(&["search", "xylophone"]),
            me(&["resume"]),
            args(&["runs"]),
        ];
        for (row, argv) in rows.iter_mut().zip(rss_of) {
            row.rss_kb = self.rss(&argv);
        }
        rows
    }

    /// `resume` against the rows its first section reads (the owed requests, first page).
    fn resume(&self, name: &str) -> Row {
        let argv = args(&["--as", ME, "resume"]);
        let mut row = self.compare(
            name,
            |_| argv.clone(),
            &format!(
                "SELECT m.id, m.from_name, m.type, m.topic, m.excerpt FROM deliveries d \
                 JOIN messages m ON m.id = d.message_id WHERE d.participant = '{ME}' \
                 AND d.status IN ('pending', 'delivered') ORDER BY m.type != 'request', \
                 m.seq LIMIT 121;"
            ),
        );
        row.rss_kb = self.rss(&argv);
        row
    }

    /// `baton hook claude PreToolUse` while another process sends messages without pause,
    /// against the write floor under the same writer; then every hook event is looked
    /// for in the log.
    fn hook(&self, calls: usize) -> Row {
        let count = "SELECT count(*) FROM events WHERE kind = 'run.changed' \
                     AND data LIKE '%\"hook\"%';";
        let before = sqlite_scalar(&self.db(), count);
        let mut writer = Command::new("sh")
            .args(["-c", WRITER, "writer"])
            .arg(self.exe)
            .current_dir(self.project)
            .env_remove("BATON_PROJECT")
            .env_remove("BATON_AS")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the writer");
        // The writer's bodies carry its shell's pid (`$$`): counted afterwards.
        let writer_pid = writer.id();
        let floor = Side::Sqlite(format!(
            "PRAGMA busy_timeout = 5000; PRAGMA synchronous = FULL; \
             INSERT INTO bench_floor (data) VALUES ('{}');",
            "x".repeat(300)
        ));
        let mut times = Vec::new();
        let mut floors = Vec::new();
        let mut complained = 0;
        let mut complaints: Vec<String> = Vec::new();
        for i in 0..=calls {
            let (took, said) = hook(self.exe, self.project, ME);
            if !said.is_empty() {
                complained += 1;
                if !complaints.contains(&said) {
                    complaints.push(said);
                }
            }
            let b = self.once(&floor);
            if i > 0 {
                times.push(took);
                floors.push(b);
            }
        }
        let _ = writer.kill();
        let _ = writer.wait();
        // One more write folds in whatever a hook left for the next writer.
        baton(
            self.exe,
            self.project,
            &[
                "--as",
                "planner",
                "send",
                "--to",
                ME,
                "--type",
                "info",
                "--topic",
                "bench",
                "--body",
                &format!("after the hooks {}", nonce()),
            ],
        );
        let after = sqlite_scalar(&self.db(), count);
        let wrote = sqlite_scalar(
            &self.db(),
            &format!("SELECT count(*) FROM messages WHERE excerpt LIKE 'write {writer_pid}-%';"),
        );
        let recorded = after - before;
        let mut sorted = times.clone();
        sorted.sort();
        let p99 = ms(sorted[percentile(sorted.len(), 99)]);
        Row {
            command: "hook (under a writer)".to_owned(),
            size: self.size,
            times,
            floor: floors,
            rss_kb: None,
            extra: format!(
                "p99 {p99:.1} ms · {recorded} of {} events in the log · {complained} \
                 complained on stderr · the writer sent {wrote}{}",
                calls + 1,
                if complaints.is_empty() {
                    String::new()
                } else {
                    format!(": {}", complaints.join(" | "))
                }
            ),
        }
    }
}

/// A writer that never stops: one `baton send` after another, each its own process.
const WRITER: &str = r#"i=0
while :; do
  "$1" --as planner send --to impl-2 --type info --topic bench --body "write $$-$i" > /dev/null
  i=$((i + 1))
done"#;

/// A word no earlier run of the bench used: the time in milliseconds.
fn nonce() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_millis()
}

/// How many of the functions `layout.txt` lists this executable has (`nm`): those the
/// linker could place side by side. When it falls, `cargo bench -p baton --bench layout`
/// writes the list again.
fn layout_found(exe: &Path) -> String {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("layout.txt");
    let Ok(listed) = std::fs::read_to_string(&file) else {
        return "code layout: no layout.txt".to_owned();
    };
    let listed: Vec<&str> = listed
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let Ok(out) = Command::new("nm").arg("--defined-only").arg(exe).output() else {
        return "code layout: nm is not installed".to_owned();
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let symbols: std::collections::HashSet<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    let found = listed.iter().filter(|n| symbols.contains(*n)).count();
    // A list the build has mostly lost costs every command faults in scattered code
    // (docs/PERFORMANCE.md, "Code layout").
    let stale = if found * 10 < listed.len() * 9 {
        " (stale: `cargo bench -p baton --bench layout` writes it again)"
    } else {
        ""
    };
    format!(
        "code layout: {found} of the {} functions layout.txt lists are in this executable{stale}",
        listed.len()
    )
}

/// Waits until the kernel has written back what seeding, migrating and the fixtures wrote:
/// its flushes would otherwise land on whichever side's fsync came next.
fn quiesce() {
    let _ = Command::new("sync").status();
}

/// Runs `work` on a runtime of its own and drops it, so every connection the work opened
/// is closed (and no write lock held) when it returns.
fn settle<T>(work: impl std::future::Future<Output = T>) -> T {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let out = runtime.block_on(work);
    drop(runtime);
    out
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// Runs `sql` in a bare `sqlite3` process on `db`, reading all it prints.
fn sqlite(db: &Path, sql: &str) {
    let out = Command::new("sqlite3")
        .arg(db)
        .arg(sql)
        .output()
        .expect("run sqlite3");
    assert!(
        out.status.success(),
        "sqlite3 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One number read with a bare `sqlite3`. It waits up to 5 s for a lock: a `baton` process
/// the bench left (the writer's last send) may still be closing, its checkpoint holding
/// the database.
fn sqlite_scalar(db: &Path, sql: &str) -> i64 {
    let out = Command::new("sqlite3")
        .args(["-cmd", ".timeout 5000"])
        .arg(db)
        .arg(sql)
        .output()
        .expect("run sqlite3");
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim().parse().unwrap_or_else(|e| {
        panic!(
            "sqlite3 gave no number for {sql} ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

struct Seeded {
    how: String,
    events: i64,
    runs: i64,
}

/// The store of `size` messages at `project`: reused when a finished one is there,
/// otherwise seeded from nothing.
fn prepare(exe: &Path, project: &Path, size: usize) -> Seeded {
    let done = project.join("seeded");
    let db = project.join(".baton/baton.db");
    let how = if done.exists() {
        "reused".to_owned()
    } else {
        let _ = std::fs::remove_dir_all(project);
        std::fs::create_dir_all(project).expect("store dir");
        baton(exe, project, &["init"]);
        for (name, role) in PARTICIPANTS {
            baton(exe, project, &["agent", "add", name, "--role", role]);
        }
        let started = Instant::now();
        settle(seed(&db, size));
        std::fs::write(&done, "").expect("mark the store seeded");
        format!("seeded in {:.0} s", started.elapsed().as_secs_f64())
    };
    // Opening through the binary brings an older store's schema up to date, untimed.
    baton(exe, project, &["--as", ME, "inbox"]);
    Seeded {
        how,
        events: sqlite_scalar(&db, "SELECT max(seq) FROM events;"),
        runs: sqlite_scalar(&db, "SELECT count(*) FROM runs;"),
    }
}

/// The session store at `project`: a copy of the small store at `small` with one session
/// of `ME` seen through `hooks` hook events (a start, tool uses, [`SESSION_HELPERS`]
/// helpers, half of them stopped), recorded as `baton hook` records them; reused when one
/// of that shape is there. Returns how many rows the ledger has.
fn prepare_session(small: &Path, project: &Path, hooks: usize) -> i64 {
    let done = project.join("seeded");
    let db = project.join(".baton/baton.db");
    let shape = format!("{SMALL_SHAPE}; a session of {hooks} hooks, {SESSION_HELPERS} helpers");
    if std::fs::read_to_string(&done).ok().as_deref() != Some(shape.as_str()) {
        let _ = std::fs::remove_dir_all(project);
        std::fs::create_dir_all(project.join(".baton")).expect("store dir");
        for entry in std::fs::read_dir(small.join(".baton")).expect("the small store") {
            let entry = entry.expect("the small store's files");
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                std::fs::copy(entry.path(), project.join(".baton").join(entry.file_name()))
                    .expect("copy the small store");
            }
        }
        settle(async {
            let store = Store::new(
                SqliteStore::open(&db, Duration::from_secs(30))
                    .await
                    .expect("open the session store"),
            );
            let call = |event: &str, helper: Option<usize>, tool: Option<&str>| {
                let agent_id = helper.map(|h| format!("helper-{h:03}"));
                RunChange::Hook(HookCall {
                    row: HookCall::row_of(None, "claude", Some("bench"), agent_id.as_deref()),
                    agent: "claude".into(),
                    event: event.into(),
                    session: Some("bench".into()),
                    tool: tool.map(str::to_owned),
                    agent_type: agent_id.as_ref().map(|_| "Explore".into()),
                    agent_id,
                    ..HookCall::default()
                })
            };
            let mut changes = vec![call("SessionStart", None, None)];
            for h in 0..SESSION_HELPERS {
                changes.push(call("SubagentStart", Some(h), None));
                changes.push(call("PostToolUse", Some(h), Some("Read")));
                if h % 2 == 0 {
                    changes.push(call("SubagentStop", Some(h), None));
                }
            }
            let tools = ["Bash", "Edit", "Read", "Grep"];
            while changes.len() < hooks {
                let tool = tools[changes.len() % tools.len()];
                changes.push(call("PostToolUse", None, Some(tool)));
            }
            for chunk in changes.chunks(3000) {
                store
                    .record_run(ME, chunk)
                    .await
                    .expect("record the session's hooks");
            }
        });
        std::fs::write(&done, &shape).expect("mark the store seeded");
    }
    sqlite_scalar(&db, "SELECT count(*) FROM runs;")
}

/// The decisions store at `project`: `messages` messages seeded as the floor stores are,
/// then state changes (each a decision, a note and a stream's status) until `decisions`
/// decisions are in force; reused when one of that shape is there. Returns how many
/// events its log holds.
fn prepare_decisions(exe: &Path, project: &Path, messages: usize, decisions: usize) -> i64 {
    let done = project.join("seeded");
    let db = project.join(".baton/baton.db");
    let shape = format!("{messages} messages, {decisions} decisions");
    if std::fs::read_to_string(&done).ok().as_deref() != Some(shape.as_str()) {
        let _ = std::fs::remove_dir_all(project);
        std::fs::create_dir_all(project).expect("store dir");
        baton(exe, project, &["init"]);
        for (name, role) in PARTICIPANTS {
            baton(exe, project, &["agent", "add", name, "--role", role]);
        }
        settle(seed(&db, messages));
        settle(async {
            let store = Store::new(
                SqliteStore::open(&db, Duration::from_secs(30))
                    .await
                    .expect("open the decisions store"),
            );
            let mut have = store
                .state_digest()
                .await
                .expect("the state")
                .decisions_total;
            // Numbered after the seed's own state changes, a hundred to a write.
            let mut i = messages + 1;
            while have < decisions {
                let ops: Vec<_> = (i..i + (decisions - have).min(100))
                    .flat_map(state_ops)
                    .collect();
                i += ops.len() / 3;
                have += ops.len() / 3;
                store.change_state("planner", &ops).await.expect("decide");
            }
        });
        std::fs::write(&done, &shape).expect("mark the store seeded");
    }
    baton(exe, project, &["--as", ME, "inbox"]);
    sqlite_scalar(&db, "SELECT max(seq) FROM events;")
}

/// The small store resume is compared with: a short log whose packet is as full as the
/// large stores' (each of its lists of owed requests, decisions and requests waited for
/// longer than its share of 20, so the packet shows 20 of each as theirs does), so the
/// comparison is the log's length alone.
fn prepare_small(exe: &Path, project: &Path) -> i64 {
    let done = project.join("seeded");
    let db = project.join(".baton/baton.db");
    // What the marker holds names the seed's shape: a store of an older shape is seeded again.
    if std::fs::read_to_string(&done).ok().as_deref() != Some(SMALL_SHAPE) {
        let _ = std::fs::remove_dir_all(project);
        std::fs::create_dir_all(project).expect("store dir");
        baton(exe, project, &["init"]);
        for (name, role) in PARTICIPANTS {
            baton(exe, project, &["agent", "add", name, "--role", role]);
        }
        settle(async {
            let store = Store::new(
                SqliteStore::open(&db, Duration::from_secs(30))
                    .await
                    .expect("open the store"),
            );
            let planner = Passname::new("planner").expect("passname");
            let me = Passname::new(ME).expect("passname");
            // More owed than the packet's first page of them (32), as on the large stores.
            for i in 0..40 {
                store
                    .send(&planner, draft(&me, MessageType::Request, i, None), 0)
                    .await
                    .expect("send");
            }
            let other = Passname::new("impl-2").expect("passname");
            for i in 0..25 {
                store
                    .send(&me, draft(&other, MessageType::Request, i, None), 0)
                    .await
                    .expect("send");
            }
            for i in 1..=25 {
                store
                    .change_state("planner", &state_ops(i))
                    .await
                    .expect("state");
            }
        });
        std::fs::write(&done, SMALL_SHAPE).expect("mark the store seeded");
    }
    baton(exe, project, &["--as", ME, "inbox"]);
    sqlite_scalar(&db, "SELECT max(seq) FROM events;")
}

/// A store of `orders` Work Orders from the planner to impl-2, each but the first waiting
/// on the one before (`x-baton.after`), made once through the store library; returns
/// `orders`.
fn prepare_chain(exe: &Path, project: &Path, orders: usize) -> usize {
    let done = project.join("seeded");
    let shape = format!("a chain of {orders}");
    if std::fs::read_to_string(&done).ok().as_deref() == Some(shape.as_str()) {
        return orders;
    }
    let _ = std::fs::remove_dir_all(project);
    std::fs::create_dir_all(project).expect("store dir");
    baton(exe, project, &["init"]);
    for (name, role) in PARTICIPANTS {
        baton(exe, project, &["agent", "add", name, "--role", role]);
    }
    let db = project.join(".baton/baton.db");
    settle(async {
        let store = Store::new(
            SqliteStore::open(&db, Duration::from_secs(30))
                .await
                .expect("open the store"),
        );
        let planner = Passname::new("planner").expect("passname");
        let fixture: serde_json::Value = serde_json::from_str(include_str!(
            "../../baton-core/tests/fixtures/work-order.json"
        ))
        .expect("the shared Work Order");
        for i in 1..=orders {
            let mut doc = fixture.clone();
            doc["id"] = format!("wo_{i}").into();
            doc["to"] = "impl-2".into();
            doc["deadline"] = "2999-01-01T00:00:00Z".into();
            if i > 1 {
                doc["x-baton"]["after"] = serde_json::json!([format!("wo_{}", i - 1)]);
            }
            let payload = Payload::from_value(doc, 1 << 20).expect("payload");
            store
                .create_order(&planner, Topic::new("work-order").expect("topic"), payload)
                .await
                .expect("an order of the chain");
        }
    });
    std::fs::write(&done, &shape).expect("mark the store seeded");
    orders
}

fn draft(to: &Passname, kind: MessageType, i: usize, reply_to: Option<String>) -> Draft {
    let words = 20 + (i * 37) % 400;
    let body = format!(
        "Message {i}: CSV export drops the active filters; {}",
        "keep status and date filters when exporting rows. ".repeat(words / 8)
    );
    Draft {
        to: vec![to.clone()],
        kind,
        topic: Topic::new(&format!("topic-{}", i % TOPICS)).expect("topic"),
        reply_to,
        payload: Payload::body(&body, 1 << 20).expect("payload"),
        idempotency_key: None,
    }
}

/// What one seeded message is for.
#[derive(Clone, Copy, PartialEq)]
enum Part {
    /// A request to `ME` left pending: its inbox.
    Owed,
    /// A request from `ME` left open: its outbox.
    Open,
    /// To `ME` and dealt with (fetched, then completed or acknowledged).
    Handled,
    /// Between the others.
    Other,
}

/// Fills the store with `size` messages shaped like a busy project (twenty lanes, payloads
/// of a few hundred bytes to a few KiB, one in five a reply, one in ten to `ME` and dealt
/// with, `OWED` requests to `ME` pending and `OPEN` requests from `ME` open, spread through
/// the history), a state change every hundred messages, one thread of `THREAD`, and `size`
/// finished runs.
async fn seed(db: &Path, size: usize) {
    let store = Store::new(
        SqliteStore::open(db, Duration::from_secs(60))
            .await
            .expect("open the store")
            .grouped()
            .expect("group commit"),
    );
    let me = Passname::new(ME).expect("passname");
    let names: Vec<Passname> = PARTICIPANTS
        .iter()
        .map(|(n, _)| Passname::new(n).expect("passname"))
        .collect();
    let others: Vec<Passname> = names.iter().filter(|n| **n != me).cloned().collect();
    let leads = [
        Passname::new("planner").expect("passname"),
        Passname::new("owner").expect("passname"),
    ];
    let mut ids: Vec<String> = Vec::with_capacity(size);
    let mut planned = 0;
    while planned < size {
        let batch: Vec<(Passname, Draft, Part)> = (planned..(planned + SEED_BATCH).min(size))
            .map(|i| {
                let part = if i % (size / OWED) == 0 {
                    Part::Owed
                } else if i % (size / OPEN) == 1 {
                    Part::Open
                } else if i % 10 == 5 {
                    Part::Handled
                } else {
                    Part::Other
                };
                let kind = match part {
                    Part::Owed | Part::Open => MessageType::Request,
                    _ if i % 3 == 0 => MessageType::Request,
                    _ if i % 3 == 1 => MessageType::Info,
                    _ => MessageType::Message,
                };
                // Requests come from those whose role may send them: the planner, the owner.
                let sender = |k: usize| {
                    if kind == MessageType::Request {
                        leads[k % leads.len()].clone()
                    } else {
                        others[k % others.len()].clone()
                    }
                };
                let (from, to) = match part {
                    Part::Owed | Part::Handled => (sender(i), me.clone()),
                    Part::Open => (me.clone(), others[i % others.len()].clone()),
                    Part::Other => {
                        let from = sender(i);
                        let to = others[(i * 7 + 1) % others.len()].clone();
                        let to = if to == from {
                            others[(i * 7 + 2) % others.len()].clone()
                        } else {
                            to
                        };
                        (from, to)
                    }
                };
                let reply_to = (part == Part::Other && i % 5 == 4 && !ids.is_empty())
                    .then(|| ids[i / 2 % ids.len()].clone());
                (from, draft(&to, kind, i, reply_to), part)
            })
            .collect();
        planned += batch.len();
        let mut tasks = Vec::with_capacity(batch.len());
        for (from, draft, part) in batch {
            let store = store.clone();
            let me = me.clone();
            tasks.push(tokio::spawn(async move {
                let kind = draft.kind;
                let id = store.send(&from, draft, 0).await.expect("seed send").id;
                if part == Part::Handled {
                    store.fetch(Some(&me), &id).await.expect("seed fetch");
                    let verb = if kind == MessageType::Request {
                        Verb::Complete
                    } else {
                        Verb::Ack
                    };
                    store.step(&me, &id, verb, None).await.expect("seed step");
                }
                id
            }));
        }
        for task in tasks {
            ids.push(task.await.expect("seed task"));
        }
        store
            .change_state("planner", &state_ops(planned))
            .await
            .expect("seed state");
    }
    // One long thread, each message a reply to the one before.
    let mut parent: Option<String> = None;
    for i in 0..THREAD {
        let (from, to) = if i % 2 == 0 {
            (&names[0], &me)
        } else {
            (&me, &names[0])
        };
        let mut message = draft(to, MessageType::Message, i, parent.clone());
        message.topic = Topic::new("bench-thread").expect("topic");
        let id = store.send(from, message, 0).await.expect("seed thread").id;
        parent = Some(id);
    }
    seed_runs(&store, size).await;
}

/// `count` runs, registered, started and exited, in batches of one transaction each.
async fn seed_runs(store: &Store, count: usize) {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned());
    let dead = ProcessRef {
        pid: 1 << 22,
        start: Some(1),
    };
    let mut changes = Vec::new();
    for n in 0..count {
        let run = format!("run-{n:07}");
        changes.push(RunChange::Registered(Box::new(Registration {
            run: run.clone(),
            participant: Some(ME.into()),
            agent: Some("claude".into()),
            command: vec!["claude".into(), "-p".into(), "fix the export".into()],
            host: host.clone(),
            monitor: Some(dead),
            heartbeat_ms: Some(15_000),
            ..Registration::default()
        })));
        changes.push(RunChange::Started {
            run: run.clone(),
            process: dead,
            pgid: dead.pid,
        });
        changes.push(RunChange::Exited {
            run,
            status: RunStatus::Done,
            exit_code: Some(0),
            signal: None,
            reason: None,
        });
        if changes.len() >= 3000 {
            record_runs(store, &mut changes).await;
        }
    }
    record_runs(store, &mut changes).await;
}

/// Fresh messages for this run's `show`, `ack` and `complete`, and the thread's newest
/// message.
async fn fixtures(project: &Path, count: usize) -> Fixtures {
    let db = project.join(".baton/baton.db");
    let store = Store::new(
        SqliteStore::open(&db, Duration::from_secs(60))
            .await
            .expect("open the store")
            .grouped()
            .expect("group commit"),
    );
    let me = Passname::new(ME).expect("passname");
    let planner = Passname::new("planner").expect("passname");
    let mut tasks = Vec::new();
    for i in 0..count * 2 {
        let store = store.clone();
        let (me, planner) = (me.clone(), planner.clone());
        tasks.push(tokio::spawn(async move {
            let kind = if i < count {
                MessageType::Request
            } else {
                MessageType::Info
            };
            let id = store
                .send(&planner, draft(&me, kind, i, None), 0)
                .await
                .expect("fixture")
                .id;
            if kind == MessageType::Info {
                store.fetch(Some(&me), &id).await.expect("fixture fetch");
            }
            id
        }));
    }
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.expect("fixture task"));
    }
    let infos = ids.split_off(count);
    let thread = sqlite_text(
        &db,
        "SELECT id FROM messages WHERE topic = 'bench-thread' ORDER BY seq DESC LIMIT 1;",
    );
    Fixtures {
        requests: ids,
        infos,
        thread,
    }
}

fn sqlite_text(db: &Path, sql: &str) -> String {
    let out = Command::new("sqlite3")
        .arg(db)
        .arg(sql)
        .output()
        .expect("run sqlite3");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
