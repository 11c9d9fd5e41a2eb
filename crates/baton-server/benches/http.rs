//! `cargo bench -p baton-server --bench http`: durable sends per second over HTTP, with 1,
//! 4 and 16 concurrent clients, beside the disk's limit for one writer measured in the
//! same run.
//!
//! The floor is a bare `sqlite3` process inserting one row per transaction into a WAL
//! database with `synchronous = FULL` — one fsync per row, what a writer that commits
//! alone cannot beat. A disk's fsync rate drifts from one second to the next, so each
//! row is run several times, each run right after a floor of its own (floor, run, floor,
//! run …): the row shows the median rate, the latencies of all its runs, the median
//! floor, and the median of each run's rate over the floor just before it. Both sides are
//! timed in their steady state: a log file that is rewritten from its start after each
//! checkpoint syncs faster than one still growing (its size need not be synced too), so
//! the floor's database and log outlive each floor (`no_ckpt_on_close`) and are warmed
//! once, and each backend runs once untimed before its rows, as the server's store keeps
//! its log for as long as it runs. Each client is a thread with its own keep-alive
//! connection (a minimal HTTP/1.1 client, so the clients take little of the cores they
//! share with the server) sending
//! `info` messages to one recipient (`POST /v1/projects/shop/messages`); a send is timed
//! from request to answer, and the answer comes only after the commit. Backends: SQLite
//! with group commit (what `baton serve` opens), SQLite with one commit per write (for
//! comparison), and PostgreSQL when `BATON_TEST_POSTGRES` names a database (a fresh
//! schema, dropped after; its tables analyzed after the untimed run, as autovacuum does
//! on a live database). Every body carries a nonce of its run and every answer must say
//! `"duplicate":false`: a body sent again within the duplicate window writes nothing.
//!
//! Beside each rate it prints the CPU time each send took (user and system, of every
//! thread of this process: server, log thread and clients; for PostgreSQL the database's
//! own processes are not counted) and each floor row took (the `sqlite3` process's), and
//! the bound the cores set: the rate at which every core would be busy sending, over the
//! floor. Where a disk's flush is slow, that bound is far above the floor and group
//! commit is held by the disk; where the flush costs about as much CPU as it waits, the
//! cores bind first. It prints a table and asserts nothing about time. Run without
//! `--bench` (as `cargo test --benches` does) it only checks that it works, briefly.
//!
//! Words after `--` pick rows, for a profile of one: a number keeps that many clients,
//! other words keep the backends whose name holds them (`-- group 16`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use baton_app::{App, Settings};
use baton_core::ProjectName;
use baton_core::key::Scope;
use baton_store::{Database, SqliteStore, Store};
use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::TimeVal;

const CLIENTS: [usize; 3] = [1, 4, 16];

struct Scale {
    /// Sends per run (split among the clients).
    sends: usize,
    /// Rows the floor inserts.
    floor_rows: usize,
    /// Runs of each row, each after a floor of its own.
    runs: usize,
}

const FULL: Scale = Scale {
    sends: 1600,
    floor_rows: 1000,
    runs: 5,
};
const SMOKE: Scale = Scale {
    sends: 32,
    floor_rows: 20,
    runs: 1,
};

/// A directory of SQLite projects opened without group commit: every write its own
/// transaction and fsync.
struct Ungrouped {
    dir: std::path::PathBuf,
}

#[async_trait]
impl Database for Ungrouped {
    async fn project(&self, name: &ProjectName) -> baton_store::Result<Store> {
        let file = self.dir.join(format!("{name}.db"));
        Ok(Store::new(
            SqliteStore::open(&file, Duration::from_secs(5)).await?,
        ))
    }

    async fn add_project(&self, name: &ProjectName) -> baton_store::Result<bool> {
        let file = self.dir.join(format!("{name}.db"));
        SqliteStore::create(&file, Duration::from_secs(5)).await?;
        Ok(true)
    }

    async fn projects(&self) -> baton_store::Result<Vec<ProjectName>> {
        Ok(vec![ProjectName::new("shop").expect("a project name")])
    }
}

fn main() {
    let scale = if std::env::args().any(|a| a == "--bench") {
        FULL
    } else {
        SMOKE
    };
    let runtime = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime"),
    );
    let dir = tempfile::tempdir().expect("a temporary directory");
    // Untimed: the floor's log reaches its steady size.
    floor(dir.path(), scale.floor_rows * 3 / 2);

    println!(
        "HTTP send bench · {} runs a row of {} sends each, each run after its floor: \
         sqlite3 committing {} one-row transactions (WAL, synchronous=FULL)",
        scale.runs, scale.sends, scale.floor_rows,
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "{:<30} {:>7} {:>8} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "backend",
        "clients",
        "sends/s",
        "p50 ms",
        "p99 ms",
        "send µs",
        "floor/s",
        "row µs",
        "× floor",
        "cores ×"
    );

    let mut backends: Vec<(String, Arc<dyn Database>, Option<String>)> = Vec::new();
    let grouped_dir = dir.path().join("grouped");
    let grouped = runtime.block_on(baton_store::database(
        &format!("sqlite:{}", grouped_dir.display()),
        Duration::from_secs(5),
    ));
    backends.push((
        "SQLite, group commit".into(),
        grouped.expect("a SQLite directory"),
        None,
    ));
    let single_dir = dir.path().join("single");
    std::fs::create_dir_all(&single_dir).expect("a directory");
    backends.push((
        "SQLite, one commit per write".into(),
        Arc::new(Ungrouped { dir: single_dir }),
        None,
    ));
    if let Ok(base) = std::env::var("BATON_TEST_POSTGRES") {
        let schema = format!(
            "baton_bench_{}",
            baton_store::new_id().to_string().to_lowercase()
        );
        let separator = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{separator}schema={schema}");
        let db = runtime
            .block_on(baton_store::database(&url, Duration::from_secs(5)))
            .expect("the PostgreSQL database");
        backends.push(("PostgreSQL".into(), db, Some(schema)));
    } else {
        println!("(PostgreSQL not measured: BATON_TEST_POSTGRES is not set)");
    }

    let picks: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let (counts, words): (Vec<&String>, Vec<&String>) =
        picks.iter().partition(|p| p.parse::<usize>().is_ok());
    for (name, db, schema) in &backends {
        let named = name.to_lowercase();
        if !words.iter().all(|w| named.contains(&w.to_lowercase())) {
            continue;
        }
        let mut cold = true;
        for clients in CLIENTS {
            if !counts.is_empty() && !counts.iter().any(|c| **c == clients.to_string()) {
                continue;
            }
            if std::mem::take(&mut cold) {
                // Untimed: the store's log reaches its steady size.
                run(&runtime, Arc::clone(db), clients, scale.sends);
                if let Some(schema) = schema {
                    // What autovacuum does on a live database (this machine's runs with it
                    // off): plans kept from when the tables were empty are made again.
                    on_postgres(&runtime, schema, |tables| {
                        tables
                            .iter()
                            .map(|t| format!("ANALYZE {schema}.{t};"))
                            .collect()
                    });
                }
            }
            let mut rates = Vec::new();
            let mut floors = Vec::new();
            let mut ratios = Vec::new();
            let mut latencies = Vec::new();
            let (mut cpu, mut floor_cpu, mut bounds) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..scale.runs {
                let floor = floor(dir.path(), scale.floor_rows);
                let (sent, times) = run(&runtime, Arc::clone(db), clients, scale.sends);
                rates.push(sent.rate);
                floors.push(floor.rate);
                ratios.push(sent.rate / floor.rate);
                latencies.extend(times);
                cpu.push(sent.cpu * 1e6);
                floor_cpu.push(floor.cpu * 1e6);
                bounds.push(cores as f64 / sent.cpu / floor.rate);
            }
            latencies.sort();
            let at = |q: f64| {
                let i = ((latencies.len() as f64 - 1.0) * q).round() as usize;
                latencies[i].as_secs_f64() * 1000.0
            };
            // PostgreSQL's CPU is spent in its own processes too, so this process's CPU
            // sets no bound there.
            let bound = match schema {
                None => format!("{:.2}", median(&mut bounds)),
                Some(_) => "-".to_owned(),
            };
            println!(
                "{name:<30} {clients:>7} {:>8.0} {:>7.2} {:>7.2} {:>8.0} {:>8.0} {:>8.0} {:>8.2} {bound:>8}",
                median(&mut rates),
                at(0.50),
                at(0.99),
                median(&mut cpu),
                median(&mut floors),
                median(&mut floor_cpu),
                median(&mut ratios),
            );
        }
        if let Some(schema) = schema {
            on_postgres(&runtime, schema, |_| {
                format!("DROP SCHEMA IF EXISTS {schema} CASCADE")
            });
        }
    }
}

/// The middle of `values` (the upper middle of an even number).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// How fast a run went and the CPU it took.
struct Measured {
    /// Rows or sends per second.
    rate: f64,
    /// CPU seconds per row or send.
    cpu: f64,
}

/// The CPU seconds (user and system) `who` has used: this process's threads, or its
/// children that have been waited for.
fn cpu_time(who: UsageWho) -> f64 {
    let usage = getrusage(who).expect("getrusage");
    let seconds = |t: TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    seconds(usage.user_time()) + seconds(usage.system_time())
}

/// Rows per second a bare `sqlite3` process commits, one row per transaction, into the
/// floor's database, leaving its log in place for the next floor.
fn floor(dir: &std::path::Path, rows: usize) -> Measured {
    let file = dir.join("floor.db");
    let mut script = String::from(
        ".dbconfig no_ckpt_on_close on\nPRAGMA journal_mode=WAL;\nPRAGMA synchronous=FULL;\n\
         CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT NOT NULL);\n",
    );
    for n in 0..rows {
        script.push_str(&format!(
            "INSERT INTO t (body) VALUES ('floor row {n}: the export keeps its filters');\n"
        ));
    }
    let cpu = cpu_time(UsageWho::RUSAGE_CHILDREN);
    let started = Instant::now();
    let mut child = Command::new("sqlite3")
        .arg(&file)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("the sqlite3 program (apt-get install sqlite3)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("the script");
    let status = child.wait().expect("sqlite3 ran");
    assert!(status.success(), "sqlite3 failed");
    Measured {
        rate: rows as f64 / started.elapsed().as_secs_f64(),
        cpu: (cpu_time(UsageWho::RUSAGE_CHILDREN) - cpu) / rows as f64,
    }
}

/// A server over `db` with project `shop`; `sends` sends from `clients` threads. Returns
/// their rate and CPU, and each send's latency.
fn run(
    runtime: &Arc<tokio::runtime::Runtime>,
    db: Arc<dyn Database>,
    clients: usize,
    sends: usize,
) -> (Measured, Vec<Duration>) {
    let project = ProjectName::new("shop").expect("a project name");
    let (listener, token) = runtime.block_on(async {
        db.add_project(&project).await.expect("a project");
        let store = db.project(&project).await.expect("the project");
        let app = App::new(store, Settings::default(), baton_server::host());
        for (who, role) in [("planner", "planner"), ("impl-1", "executor")] {
            app.add_participant("@bench", who, role, &Default::default())
                .await
                .expect("a participant");
        }
        let (_, token) = app
            .issue_key("@bench", "planner", Scope::Write, None)
            .await
            .expect("a key");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        (listener, token)
    });
    let addr = listener.local_addr().expect("an address");
    let path = "/v1/projects/shop/messages";
    let server = baton_server::Server::new(db, Settings::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = runtime.spawn(baton_server::serve(listener, server, async move {
        let _ = stopped.await;
    }));

    let per_client = sends / clients;
    // Every body is new: a body sent again within the duplicate window writes nothing, and
    // each row's runs share one store.
    let nonce = baton_store::new_id();
    let cpu = cpu_time(UsageWho::RUSAGE_SELF);
    let started = Instant::now();
    let latencies: Vec<Duration> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..clients)
            .map(|c| {
                let (token, nonce) = (&token, &nonce);
                s.spawn(move || {
                    let mut client = Client::connect(addr, path, token);
                    let mut times = Vec::with_capacity(per_client);
                    for n in 0..per_client {
                        let body = serde_json::json!({
                            "to": ["impl-1"], "type": "info", "topic": "bench",
                            "body": format!("{nonce} client {c} send {n}: the export keeps its filters"),
                        })
                        .to_string();
                        let sent = Instant::now();
                        let (status, answer) = client.post(body.as_bytes());
                        times.push(sent.elapsed());
                        let answer = String::from_utf8_lossy(&answer);
                        assert_eq!(status, 200, "{answer}");
                        assert!(answer.contains("\"duplicate\":false"), "{answer}");
                    }
                    times
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().expect("a client"))
            .collect()
    });
    let elapsed = started.elapsed();
    let cpu = cpu_time(UsageWho::RUSAGE_SELF) - cpu;
    let _ = stop.send(());
    let _ = runtime.block_on(serving);
    let sent = Measured {
        rate: latencies.len() as f64 / elapsed.as_secs_f64(),
        cpu: cpu / latencies.len() as f64,
    };
    (sent, latencies)
}

/// Runs on the bench's PostgreSQL database the statements `sql` makes of the names of
/// the tables in `schema`.
fn on_postgres(
    runtime: &tokio::runtime::Runtime,
    schema: &str,
    sql: impl FnOnce(&[String]) -> String,
) {
    let Ok(base) = std::env::var("BATON_TEST_POSTGRES") else {
        return;
    };
    runtime.block_on(async {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&base)
            .await
            .expect("a connection");
        let tables: Vec<String> =
            sqlx::query_scalar("SELECT tablename::text FROM pg_tables WHERE schemaname = $1")
                .bind(schema)
                .fetch_all(&mut conn)
                .await
                .expect("the schema's tables");
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql(&tables)))
            .execute(&mut conn)
            .await
            .expect("the statements ran");
    });
}

/// One keep-alive HTTP/1.1 connection that posts JSON and reads each answer whole: the
/// least a client can do a send (as a load generator such as `wrk` does), so that the
/// clients, threads of this process on the server's cores, take as little of the
/// machine from the server as they can.
struct Client {
    stream: BufReader<TcpStream>,
    head: String,
}

impl Client {
    fn connect(addr: std::net::SocketAddr, path: &str, token: &str) -> Self {
        let stream = TcpStream::connect(addr).expect("a connection");
        stream.set_nodelay(true).expect("TCP_NODELAY");
        Self {
            stream: BufReader::new(stream),
            head: format!(
                "POST {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {token}\r\n\
                 content-type: application/json\r\ncontent-length: "
            ),
        }
    }

    /// Posts `body`; the answer's status and body.
    fn post(&mut self, body: &[u8]) -> (u16, Vec<u8>) {
        let mut request = Vec::with_capacity(self.head.len() + body.len() + 16);
        request.extend_from_slice(self.head.as_bytes());
        request.extend_from_slice(format!("{}\r\n\r\n", body.len()).as_bytes());
        request.extend_from_slice(body);
        self.stream
            .get_mut()
            .write_all(&request)
            .expect("the request");
        let mut line = String::new();
        self.stream.read_line(&mut line).expect("the status line");
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("a status line: {line:?}"));
        let mut length = None;
        loop {
            line.clear();
            self.stream.read_line(&mut line).expect("a header");
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse::<usize>().ok();
            }
        }
        let mut answer = vec![0; length.expect("the answer's content-length")];
        self.stream
            .read_exact(&mut answer)
            .expect("the answer's body");
        (status, answer)
    }
}
