//! A PostgreSQL failover under two `baton serve` replicas: a pg_auto_failover formation
//! (a monitor, a primary and a synchronous secondary) named by the multi-host URI
//! `pg_autoctl show uri` prints; a steady load of sends with idempotency keys through both
//! replicas; SIGKILL to the primary's postmaster. The secondary is promoted; every answer
//! during the switch is a retryable 503 with `Retry-After` (the command line exits 6),
//! never another error or a wrong answer; each client retries with its key until it is
//! answered; afterwards every acknowledged send is stored exactly once.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_testdb::formation::{Formation, USER};
use serde_json::{Value, json};

use crate::common::{baton_exe, code, stderr};
use crate::server::{Serving, announced};

const SENDERS: usize = 4;
/// Sends each sender has acknowledged after the new primary took over, before the load
/// stops.
const AFTER: usize = 10;

/// `baton` on the formation: the URI as printed names no user, so `PGUSER` does.
fn baton(uri: &str) -> Command {
    let mut cmd = Command::new(baton_exe());
    cmd.env("PGUSER", USER)
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_AS")
        .env_remove("BATON_URL")
        .args(["--db", uri]);
    cmd
}

fn admin(uri: &str, project: Option<&str>, args: &[&str]) -> Value {
    let mut cmd = baton(uri);
    cmd.arg("--json");
    if let Some(p) = project {
        cmd.args(["--project", p]);
    }
    let out = cmd.args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A replica on the formation, and what it says on stderr.
fn serve(uri: &str) -> (Serving, Arc<Mutex<Vec<String>>>) {
    let mut child = baton(uri)
        .args(["serve", "--bind", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (base, lines) = announced(&mut child);
    let said: Arc<Mutex<Vec<String>>> = Arc::default();
    let kept = Arc::clone(&said);
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            kept.lock().unwrap().push(line);
        }
    });
    let serving = Serving {
        child,
        base: format!("http://{base}"),
    };
    (serving, said)
}

/// What one answer during the load was.
enum Answer {
    Stored(String),
    Retry,
}

/// What the load saw.
#[derive(Default)]
struct Seen {
    /// `(key, id)` of every acknowledged send.
    acknowledged: Vec<(String, String)>,
    /// When each was acknowledged.
    acknowledged_at: Vec<Instant>,
    /// When the first and the last retryable answer came.
    retries: Option<(Instant, Instant)>,
    retry_count: usize,
    /// The longest a request waited for its answer.
    slowest: Duration,
    /// Any answer that was neither a success nor a retryable 503 with `Retry-After`.
    wrong: Vec<String>,
}

fn send(agent: &ureq::Agent, base: &str, token: &str, key: &str) -> Result<Answer, String> {
    let body = json!({"to": ["impl-1"], "type": "request", "topic": "load",
                      "body": format!("job {key}"), "idempotency_key": key});
    let mut response = agent
        .post(&format!("{base}/messages"))
        .header("Authorization", &format!("Bearer {token}"))
        .send_json(body)
        .map_err(|e| format!("{key}: no answer: {e}"))?;
    let status = response.status().as_u16();
    let retry_after = response.headers().get("retry-after").is_some();
    let answer: Value = response.body_mut().read_json().unwrap_or(Value::Null);
    match status {
        200 if answer["id"].is_string() => {
            Ok(Answer::Stored(answer["id"].as_str().unwrap().into()))
        }
        503 if retry_after && answer["error"]["retryable"] == true => Ok(Answer::Retry),
        _ => Err(format!("{key}: {status} {answer}")),
    }
}

#[test]
#[cfg_attr(
    not(baton_test_failover),
    ignore = "pg_auto_failover not found: apt-get install postgresql-15-auto-failover"
)]
fn a_failover_under_load_loses_and_duplicates_no_acknowledged_write() {
    let started = Instant::now();
    let formation = Formation::start();
    eprintln!(
        "failover: the formation took {} ms to start",
        started.elapsed().as_millis()
    );
    let uri = formation.uri().to_owned();
    assert!(
        uri.contains(',') && uri.contains("target_session_attrs=read-write"),
        "{uri}"
    );
    admin(&uri, None, &["project", "add", "shop"]);
    for (name, role) in [("planner", "planner"), ("impl-1", "executor")] {
        admin(&uri, Some("shop"), &["agent", "add", name, "--role", role]);
    }
    let token = |who: &str, scope: &str| {
        admin(&uri, Some("shop"), &["key", "issue", who, "--scope", scope])["token"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (planner, worker) = (token("planner", "write"), token("impl-1", "read"));
    let (replicas, said): (Vec<Serving>, Vec<_>) = (0..2).map(|_| serve(&uri)).unzip();
    let bases: Arc<Vec<String>> = Arc::new(
        replicas
            .iter()
            .map(|s| format!("{}/v1/projects/shop", s.base))
            .collect(),
    );
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        // The server closes a connection idle for its header timeout (10 s); one idle
        // half that long is not used again.
        .max_idle_age(Duration::from_secs(5))
        .build()
        .into();

    // The load: each sender sends with a key of its own through one replica, and on a
    // retryable answer retries the same key through the other, until it is answered.
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let promoted = Arc::new(AtomicBool::new(false));
    let after_promotion = Arc::new(AtomicUsize::new(0));
    let senders: Vec<_> = (0..SENDERS)
        .map(|t| {
            let (agent, bases, planner) = (agent.clone(), Arc::clone(&bases), planner.clone());
            let (seen, promoted, after) = (
                Arc::clone(&seen),
                Arc::clone(&promoted),
                Arc::clone(&after_promotion),
            );
            std::thread::spawn(move || {
                let mut mine_after = 0;
                for i in 0.. {
                    let key = format!("job-{t}-{i}");
                    let mut attempt = t + i;
                    loop {
                        let base = &bases[attempt % bases.len()];
                        let asked = Instant::now();
                        let answer = send(&agent, base, &planner, &key);
                        let mut seen = seen.lock().unwrap();
                        seen.slowest = seen.slowest.max(asked.elapsed());
                        match answer {
                            Ok(Answer::Stored(id)) => {
                                seen.acknowledged.push((key.clone(), id));
                                seen.acknowledged_at.push(Instant::now());
                                break;
                            }
                            Ok(Answer::Retry) => {
                                let now = Instant::now();
                                seen.retry_count += 1;
                                seen.retries = Some(match seen.retries {
                                    None => (now, now),
                                    Some((first, _)) => (first, now),
                                });
                            }
                            Err(wrong) => seen.wrong.push(wrong),
                        }
                        drop(seen);
                        attempt += 1;
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    if promoted.load(Ordering::SeqCst) {
                        mine_after += 1;
                        if mine_after == AFTER {
                            after.fetch_add(1, Ordering::SeqCst);
                        }
                        if after.load(Ordering::SeqCst) == SENDERS {
                            return;
                        }
                    }
                }
            })
        })
        .collect();

    // Some load on the first primary, then the kill.
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.lock().unwrap().acknowledged.len() < 40 {
        assert!(Instant::now() < deadline, "the load does not get going");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A wait on each replica, so each listens for commits on the first primary.
    for base in bases.iter() {
        let response = agent
            .get(&format!("{base}/wait?after=0&timeout_seconds=0"))
            .header("Authorization", &format!("Bearer {worker}"))
            .call()
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
    }
    let first = formation.primary().expect("a primary");
    let before = seen.lock().unwrap().acknowledged.len();
    let killed_at = Instant::now();
    assert_eq!(formation.kill_primary(), first);

    // The command line during the switch, on the database and over a replica: exit 6
    // while there is no primary, then 0.
    let local = {
        let uri = uri.clone();
        std::thread::spawn(move || {
            until_sent(killed_at, "job-cli", || {
                let mut cmd = baton(&uri);
                cmd.args(["--project", "shop", "--as", "planner"]);
                cmd
            })
        })
    };
    let remote = {
        let (url, key) = (bases[0].clone(), planner.clone());
        std::thread::spawn(move || {
            until_sent(killed_at, "job-cli-remote", || {
                let mut cmd = Command::new(baton_exe());
                cmd.env_remove("BATON_PROJECT")
                    .env_remove("BATON_AS")
                    .env_remove("BATON_DB")
                    .env("BATON_URL", &url)
                    .env("BATON_KEY", &key);
                cmd
            })
        })
    };
    let kills = formation.until_failover(first);
    let cli_exits = local.join().unwrap();
    let remote_exits = remote.join().unwrap();

    formation
        .wait_for(Duration::from_secs(90), |states| {
            // Taking writes: alone (`wait_primary`) until the old primary rejoins.
            states.iter().any(|s| {
                s.port != first
                    && s.reported == s.assigned
                    && matches!(&*s.reported, "wait_primary" | "primary")
            })
        })
        .unwrap();
    let promoted_at = Instant::now();
    promoted.store(true, Ordering::SeqCst);
    for sender in senders {
        sender.join().unwrap();
    }
    let seen = Arc::try_unwrap(seen).ok().unwrap().into_inner().unwrap();

    // After the switch, a long poll on one replica still wakes on a write through the
    // other: both listen on the new primary now (the 1 s re-check would be the bound
    // otherwise).
    let generation = loop {
        let mut response = agent
            .get(&format!("{}/status", bases[0]))
            .header("Authorization", &format!("Bearer {worker}"))
            .call()
            .unwrap();
        let code = response.status().as_u16();
        let status: Value = response.body_mut().read_json().unwrap();
        match code {
            200 => break status["generation"].as_i64().unwrap(),
            503 => std::thread::sleep(Duration::from_millis(50)),
            _ => panic!("status after the switch: {code} {status}"),
        }
    };
    let poll = {
        let (agent, url, worker) = (
            agent.clone(),
            format!("{}/wait?after={generation}&timeout_seconds=30", bases[0]),
            worker.clone(),
        );
        std::thread::spawn(move || {
            let mut response = agent
                .get(&url)
                .header("Authorization", &format!("Bearer {worker}"))
                .call()
                .unwrap();
            let status = response.status().as_u16();
            let news: Value = response.body_mut().read_json().unwrap_or(Value::Null);
            (status, news, Instant::now())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let poked_at = Instant::now();
    let poke = loop {
        match send(&agent, &bases[1], &planner, "poke") {
            Ok(Answer::Stored(id)) => break id,
            Ok(Answer::Retry) => std::thread::sleep(Duration::from_millis(50)),
            Err(wrong) => panic!("a send after the switch: {wrong}"),
        }
    };
    let (status, news, woke_at) = poll.join().unwrap();
    assert_eq!(status, 200, "{news}");
    assert!(
        news.to_string().contains(&poke),
        "the poll is told of {poke}: {news}"
    );
    let woke = woke_at.saturating_duration_since(poked_at);

    assert!(
        seen.wrong.is_empty(),
        "answers neither right nor retryable: {:?}; the replicas said: {:?}",
        seen.wrong,
        said.iter()
            .map(|s| s.lock().unwrap().clone())
            .collect::<Vec<_>>()
    );

    // Every acknowledged send is stored exactly once: the recipient's inbox, read through
    // each replica, page by page.
    let mut lost = 0;
    let mut duplicated = 0;
    for base in bases.iter() {
        let mut by_body: HashMap<String, Vec<String>> = HashMap::new();
        let mut cursor = String::new();
        loop {
            let mut response = agent
                .get(&format!("{base}/inbox?all=true&limit=1000&cursor={cursor}"))
                .header("Authorization", &format!("Bearer {worker}"))
                .call()
                .unwrap();
            assert_eq!(response.status().as_u16(), 200);
            let page: Value = response.body_mut().read_json().unwrap();
            for item in page["items"].as_array().unwrap() {
                by_body
                    .entry(item["excerpt"].as_str().unwrap().to_owned())
                    .or_default()
                    .push(item["id"].as_str().unwrap().to_owned());
            }
            match page["next"].as_str() {
                Some(next) => cursor = next.to_owned(),
                None => break,
            }
        }
        lost = seen
            .acknowledged
            .iter()
            .filter(|(key, _)| !by_body.contains_key(&format!("job {key}")))
            .count();
        duplicated = by_body.values().map(|ids| ids.len() - 1).sum();
        assert_eq!(lost, 0, "{base}: acknowledged sends missing");
        assert_eq!(duplicated, 0, "{base}: sends stored twice");
        for (key, id) in &seen.acknowledged {
            assert_eq!(
                by_body[&format!("job {key}")],
                std::slice::from_ref(id),
                "{key}: the id acknowledged"
            );
        }
        assert_eq!(
            by_body.len(),
            seen.acknowledged.len() + 3,
            "{base}: the load's sends, the command line's two and the poke, nothing else"
        );
    }
    let retrying = seen
        .retries
        .map_or(Duration::ZERO, |(first, last)| last.duration_since(first));
    // The unavailability window: the longest time in which no write was acknowledged.
    let mut at = seen.acknowledged_at.clone();
    at.sort();
    let window = at
        .windows(2)
        .map(|pair| pair[1].duration_since(pair[0]))
        .max()
        .unwrap_or_default();
    eprintln!(
        "failover: killed the primary's postmaster on port {first} ({kills} time(s)); the monitor settled the new primary \
         {} ms later; unavailability window {} ms (no write acknowledged); retryable answers \
         for {} ms ({} of them); command line exits {:?} (over a replica {:?}); acknowledged writes {} ({before} \
         before the kill); lost {lost}; duplicated {duplicated}; slowest answer {} ms; a long poll woke {} ms after a write through the other replica",
        promoted_at.duration_since(killed_at).as_millis(),
        window.as_millis(),
        retrying.as_millis(),
        seen.retry_count,
        dedup(&cli_exits),
        dedup(&remote_exits),
        seen.acknowledged.len(),
        seen.slowest.as_millis(),
        woke.as_millis(),
    );
    assert!(
        cli_exits.contains(&6) || remote_exits.contains(&6) || seen.retry_count > 0,
        "the switch was seen by some client"
    );
    drop(replicas);
}

/// The command line on a multi-host URL none of whose hosts answers: exit 6 (retryable),
/// naming the hosts and what to do, at once rather than after a timeout.
#[test]
fn the_command_line_exits_6_while_no_host_is_the_primary() {
    let free = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    let uri = format!(
        "postgres://127.0.0.1:{},127.0.0.1:{}/baton?target_session_attrs=read-write",
        free(),
        free()
    );
    let started = Instant::now();
    let out = baton(&uri).args(["project", "list"]).output().unwrap();
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("no host of the database takes writes now"),
        "{said}"
    );
    assert!(said.contains("--idempotency-key"), "{said}");
    assert!(started.elapsed() < Duration::from_secs(5), "at once");
}

/// Runs `baton send` (on `command`) with idempotency key `key` until it exits 0; every
/// other exit must be 6, whose message is shown once. Its exit codes, in order.
fn until_sent(since: Instant, key: &str, command: impl Fn() -> Command) -> Vec<i32> {
    let mut exits = Vec::new();
    loop {
        let out = command()
            .args([
                "send", "--to", "impl-1", "--type", "request", "--topic", "load",
            ])
            .args(["--body", &format!("job {key}"), "--idempotency-key", key])
            .output()
            .unwrap();
        exits.push(code(&out));
        match code(&out) {
            0 => return exits,
            6 => {
                if exits.iter().filter(|c| **c == 6).count() == 1 {
                    eprintln!("failover: the command line said: {}", stderr(&out).trim());
                }
                assert!(
                    since.elapsed() < Duration::from_secs(90),
                    "{key}: still exit 6 after 90 s: {}",
                    stderr(&out)
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            other => panic!("{key}: the command line exited {other}: {}", stderr(&out)),
        }
    }
}

/// `exits` with runs of one code counted: `[(6, 12), (0, 1)]`.
fn dedup(exits: &[i32]) -> Vec<(i32, usize)> {
    let mut runs: Vec<(i32, usize)> = Vec::new();
    for &e in exits {
        match runs.last_mut() {
            Some((code, n)) if *code == e => *n += 1,
            _ => runs.push((e, 1)),
        }
    }
    runs
}
