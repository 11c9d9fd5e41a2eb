//! `baton serve` killed under concurrent HTTP senders: each sender posts messages with an
//! idempotency key of its own and, when a request fails (the server is gone, or answers
//! 5xx), posts it again with the same key until it is answered. The server is SIGKILLed at
//! random instants and started again on the same store and port. Afterwards every message
//! that got a 2xx must be stored exactly once, under the id the 2xx gave.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::process::{Baton, XorShift};
use crate::{Counter, Options, Tally, check};

const SENDERS: usize = 4;
/// Kill instants after a start, in ms: from inside the first requests to well into a run.
const MIN_DELAY_MS: u64 = 30;
const MAX_DELAY_MS: u64 = 1200;
/// How long a sender keeps retrying one message before the harness gives up on the server.
const PATIENCE: Duration = Duration::from_secs(60);
const TOPIC: &str = "crash";

#[derive(Debug, Clone)]
pub enum Backend {
    Sqlite,
    /// The base URL of a database; the run makes a schema of its own in it.
    Postgres(String),
}

/// A database of one project, `shop`, on a backend, and what is needed to serve it.
struct Store {
    url: String,
    /// The SQLite directory (kept until the run ends), or the PostgreSQL schema.
    _dir: Option<tempfile::TempDir>,
    sqlite_file: Option<PathBuf>,
    schema: Option<(String, String)>,
}

impl Store {
    fn new(backend: &Backend) -> Result<Self, String> {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
                let projects = dir.path().join("projects");
                Ok(Self {
                    url: format!("sqlite:{}", projects.display()),
                    sqlite_file: Some(projects.join("shop.db")),
                    _dir: Some(dir),
                    schema: None,
                })
            }
            Backend::Postgres(base) => {
                let nanos = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.subsec_nanos())
                    .unwrap_or(0);
                let schema = format!("baton_crash_{}_{nanos}", std::process::id());
                let separator = if base.contains('?') { '&' } else { '?' };
                Ok(Self {
                    url: format!("{base}{separator}schema={schema}"),
                    _dir: None,
                    sqlite_file: None,
                    schema: Some((base.clone(), schema)),
                })
            }
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // The schema is the run's own: dropped with everything in it (best effort; `psql`
        // may be missing, and a left schema harms nothing but space).
        if let Some((base, schema)) = &self.schema {
            let _ = Command::new("psql")
                .args([
                    base.as_str(),
                    "-q",
                    "-c",
                    &format!("DROP SCHEMA IF EXISTS {schema} CASCADE"),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// `baton --json --db URL [--project shop] args…`, which must succeed.
fn admin(baton: &Baton, url: &str, project: bool, args: &[&str]) -> Result<Value, String> {
    let mut all = vec!["--db", url];
    if project {
        all.extend(["--project", "shop"]);
    }
    all.extend_from_slice(args);
    baton.json(std::path::Path::new("/"), None, &all)
}

/// A running `baton serve`.
struct Server {
    child: Child,
}

impl Server {
    /// Starts `baton serve` on `bind`; returns once it said where it listens.
    fn start(baton: &Baton, url: &str, bind: &str) -> Result<(Self, String), String> {
        let mut child = Command::new(&baton.exe)
            .args(["--db", url, "serve", "--bind", bind])
            .env_remove("BATON_PROJECT")
            .env_remove("BATON_AS")
            .env_remove("BATON_DB")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start baton serve: {e}"))?;
        let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
        let first = match lines.next() {
            Some(Ok(line)) => line,
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("baton serve ended before saying where it listens".into());
            }
        };
        let address = first
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split("/v1").next())
            .map(str::to_owned)
            .ok_or_else(|| format!("baton serve said {first:?}, no address"))?;
        // Keep draining stderr so the server never blocks on a full pipe.
        thread::spawn(move || for _ in lines {});
        Ok((Self { child }, address))
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, and wait for the graceful stop.
    fn stop(mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}

/// What the senders share.
struct Shared {
    /// Every 2xx: the idempotency key and the id it answered.
    acknowledged: Mutex<Vec<(String, String)>>,
    stop: AtomicBool,
    /// Requests sent and not yet answered, so a kill can be told mid-run.
    in_flight: AtomicU64,
    /// A sender that gave up or was refused: a problem, with its words.
    failures: Mutex<Vec<String>>,
}

fn sender(t: usize, base: String, token: String, shared: Arc<Shared>) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into();
    let url = format!("{base}/v1/projects/shop/messages");
    let mut i = 0u64;
    while !shared.stop.load(Ordering::SeqCst) {
        i += 1;
        let key = format!("s{t}-{i}");
        let body = json!({"to": ["impl-1"], "type": "info", "topic": TOPIC,
                          "body": key, "idempotency_key": key});
        let started = Instant::now();
        // The same message, with the same key, until it is answered.
        loop {
            shared.in_flight.fetch_add(1, Ordering::SeqCst);
            let answer = agent
                .post(&url)
                .header("Authorization", &format!("Bearer {token}"))
                .send_json(&body);
            shared.in_flight.fetch_sub(1, Ordering::SeqCst);
            match answer {
                Ok(mut response) if response.status().is_success() => {
                    let sent: Value = response.body_mut().read_json().unwrap_or(Value::Null);
                    match sent["id"].as_str() {
                        Some(id) => shared
                            .acknowledged
                            .lock()
                            .expect("lock")
                            .push((key.clone(), id.to_owned())),
                        None => shared
                            .failures
                            .lock()
                            .expect("lock")
                            .push(format!("{key}: a 2xx without an id: {sent}")),
                    }
                    break;
                }
                Ok(response) if response.status().is_server_error() => {}
                Ok(mut response) => {
                    let status = response.status();
                    let text = response.body_mut().read_to_string().unwrap_or_default();
                    shared
                        .failures
                        .lock()
                        .expect("lock")
                        .push(format!("{key}: answered {status}: {text}"));
                    return;
                }
                // The server is gone or going: the connection failed. Send it again.
                Err(_) => {}
            }
            if started.elapsed() > PATIENCE {
                shared
                    .failures
                    .lock()
                    .expect("lock")
                    .push(format!("{key}: no answer within {PATIENCE:?}"));
                return;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Every message on the topic as `(id, body)`, paging through the server's search.
fn stored(base: &str, token: &str) -> Result<Vec<(String, String)>, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut all = Vec::new();
    let mut cursor = String::new();
    loop {
        let mut url = format!("{base}/v1/projects/shop/search?topic={TOPIC}&limit=100");
        if !cursor.is_empty() {
            url.push_str(&format!("&cursor={cursor}"));
        }
        let mut response = agent
            .get(&url)
            .header("Authorization", &format!("Bearer {token}"))
            .call()
            .map_err(|e| format!("search: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("search answered {}", response.status()));
        }
        let page: Value = response
            .body_mut()
            .read_json()
            .map_err(|e| format!("search: {e}"))?;
        for item in page["items"].as_array().into_iter().flatten() {
            all.push((
                item["id"].as_str().unwrap_or_default().to_owned(),
                item["excerpt"].as_str().unwrap_or_default().to_owned(),
            ));
        }
        cursor = page["next"].as_str().unwrap_or_default().to_owned();
        if cursor.is_empty() {
            return Ok(all);
        }
    }
}

/// The server's trials on one backend.
pub fn run(backend: Backend, options: &Options) -> Result<Tally, String> {
    let name = match backend {
        Backend::Sqlite => "serve-sqlite",
        Backend::Postgres(_) => "serve-postgres",
    };
    let mut tally = Tally::new(name);
    let baton = Baton {
        exe: options.baton.clone(),
    };
    let store = Store::new(&backend)?;
    let url = store.url.clone();
    admin(&baton, &url, false, &["project", "add", "shop"])?;
    admin(
        &baton,
        &url,
        true,
        &["agent", "add", "planner", "--role", "planner"],
    )?;
    admin(
        &baton,
        &url,
        true,
        &["agent", "add", "impl-1", "--role", "executor"],
    )?;
    let token = |who: &str| -> Result<String, String> {
        let issued = admin(
            &baton,
            &url,
            true,
            &["key", "issue", who, "--scope", "write"],
        )?;
        issued["token"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("no token in {issued}"))
    };
    let (planner, reader) = (token("planner")?, token("impl-1")?);

    let (server, address) = Server::start(&baton, &url, "127.0.0.1:0")?;
    let base = format!("http://{address}");
    let shared = Arc::new(Shared {
        acknowledged: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
        in_flight: AtomicU64::new(0),
        failures: Mutex::new(Vec::new()),
    });
    let senders: Vec<_> = (0..SENDERS)
        .map(|t| {
            let (base, token, shared) = (base.clone(), planner.clone(), Arc::clone(&shared));
            thread::spawn(move || sender(t, base, token, shared))
        })
        .collect();

    let mut rng = XorShift::stream(options.seed, name);
    let trials = u64::from(options.server_kills);
    let mut server = Some(server);
    for trial in 0..trials {
        let delay = rng.delay(trial, trials, MIN_DELAY_MS, MAX_DELAY_MS);
        thread::sleep(delay);
        let before = shared.acknowledged.lock().expect("lock").len();
        let mid_run = shared.in_flight.load(Ordering::SeqCst) > 0;
        if let Some(s) = server.take() {
            s.kill();
        }
        tally.trials += 1;
        tally.killed_mid_run += u64::from(mid_run);
        if options.verbose {
            eprintln!(
                "crash: {name}: kill {trial:3} after {:4} ms, {before} acknowledged so far{}",
                delay.as_millis(),
                if mid_run { ", requests in flight" } else { "" }
            );
        }
        // The same store, the same port: the senders retry into the new process.
        let mut restarted = None;
        for _ in 0..100 {
            match Server::start(&baton, &url, &address) {
                Ok((s, _)) => {
                    restarted = Some(s);
                    break;
                }
                Err(_) => thread::sleep(Duration::from_millis(50)),
            }
        }
        match restarted {
            Some(s) => server = Some(s),
            None => {
                return Err(format!(
                    "{name}: baton serve does not start again on {address}"
                ));
            }
        }
    }
    shared.stop.store(true, Ordering::SeqCst);
    for s in senders {
        let _ = s.join();
    }
    for f in shared.failures.lock().expect("lock").iter() {
        tally.problem("a sender", Counter::Other, f);
    }

    let acknowledged = shared.acknowledged.lock().expect("lock").clone();
    tally.acknowledged = acknowledged.len() as u64;
    let stored = stored(&base, &reader);
    if let Some(s) = server.take() {
        s.stop();
    }
    let stored = stored?;
    let mut by_id: HashMap<&str, u32> = HashMap::new();
    let mut by_body: HashMap<&str, u32> = HashMap::new();
    for (id, body) in &stored {
        *by_id.entry(id).or_default() += 1;
        *by_body.entry(body).or_default() += 1;
    }
    for (key, id) in &acknowledged {
        match by_id.get(id.as_str()) {
            None => tally.problem(
                "after the kills",
                Counter::Lost,
                format!("{key} ({id}) got a 2xx and is not stored"),
            ),
            Some(1) => {}
            Some(n) => tally.problem(
                "after the kills",
                Counter::Duplicated,
                format!("{id} is stored {n} times"),
            ),
        }
        if let Some(n) = by_body.get(key.as_str()).filter(|n| **n > 1) {
            tally.problem(
                "after the kills",
                Counter::Duplicated,
                format!("{key} is stored {n} times"),
            );
        }
    }
    let problem = match (&backend, &store.sqlite_file) {
        (Backend::Sqlite, Some(file)) => check::sqlite(file)?,
        (Backend::Postgres(_), _) => check::postgres(&url, "shop")?,
        (Backend::Sqlite, None) => None,
    };
    if let Some(p) = problem {
        tally.problem("after the kills", Counter::Integrity, p);
    }
    Ok(tally)
}
