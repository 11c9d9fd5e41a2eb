//! Shared mode through real processes: keyless administration where the database is
//! (`baton --db URL project|agent|key …`), keys in an embedded project, and `baton serve`
//! answering a real HTTP client and stopping on SIGTERM only after the request in flight
//! has written and answered.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::common::{Project, baton_exe, code, stderr};

/// `baton --db URL [--project NAME] ARGS --json`, which must succeed.
pub fn admin(url: &str, project: Option<&str>, args: &[&str]) -> Value {
    let mut cmd = Command::new(baton_exe());
    cmd.env_remove("BATON_PROJECT")
        .env_remove("BATON_AS")
        .args(["--json", "--db", url]);
    if let Some(p) = project {
        cmd.args(["--project", p]);
    }
    let out = cmd.args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Adds `who` with `role` to `project` and issues it a write key: the token.
pub fn member(url: &str, project: &str, who: &str, role: &str) -> String {
    admin(url, Some(project), &["agent", "add", who, "--role", role]);
    admin(
        url,
        Some(project),
        &["key", "issue", who, "--scope", "write"],
    )["token"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// An HTTP client that hands back every status rather than failing on one.
pub fn client() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

#[test]
fn keyless_administration_happens_where_the_database_is() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("projects").display());
    let added = admin(&url, None, &["project", "add", "shop"]);
    assert_eq!(added["created"], true);
    assert_eq!(
        admin(&url, None, &["project", "add", "shop"])["created"],
        false
    );
    assert_eq!(
        admin(&url, None, &["project", "list"])["items"],
        json!(["shop"])
    );
    admin(
        &url,
        Some("shop"),
        &["agent", "add", "impl-1", "--role", "executor"],
    );
    let issued = admin(
        &url,
        Some("shop"),
        &[
            "key",
            "issue",
            "impl-1",
            "--scope",
            "write",
            "--expires",
            "30d",
        ],
    );
    let token = issued["token"].as_str().unwrap();
    assert!(token.starts_with("baton_"), "{issued}");
    let listed = admin(&url, Some("shop"), &["key", "list"]);
    assert_eq!(listed["items"][0]["id"], issued["id"]);
    assert!(
        !listed.to_string().contains(token),
        "a list never shows a token"
    );
    // A project that does not exist is not created by naming it.
    let out = Command::new(baton_exe())
        .args(["--db", &url, "--project", "nowhere", "agent", "list"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 4, "{}", stderr(&out));
}

#[test]
fn keys_are_issued_listed_and_revoked_one_at_a_time_in_an_embedded_project() {
    let p = Project::new(&[("impl-1", "executor"), ("planner", "planner")]);
    let a = p.json(None, &["key", "issue", "impl-1", "--scope", "read"]);
    let b = p.json(None, &["key", "issue", "planner", "--scope", "admin"]);
    let revoked = p.json(None, &["key", "revoke", a["id"].as_str().unwrap()]);
    assert_eq!(revoked["live"], false);
    let listed = p.json(None, &["key", "list"]);
    let live: Vec<(&str, bool)> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["id"].as_str().unwrap(), k["live"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        live,
        [
            (a["id"].as_str().unwrap(), false),
            (b["id"].as_str().unwrap(), true)
        ]
    );
    let out = p.run(None, &["key", "issue", "ghost", "--scope", "read"]);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    let out = p.run(None, &["key", "revoke", "nope"]);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
}

#[test]
fn a_key_issued_prints_its_token_alone_on_stdout_so_a_shell_can_keep_it() {
    let p = Project::new(&[("impl-1", "executor")]);
    let out = p.run(None, &["key", "issue", "impl-1", "--scope", "write"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let printed = String::from_utf8(out.stdout.clone()).unwrap();
    let token = printed.strip_suffix('\n').expect("one line");
    assert!(
        token.starts_with("baton_") && !token.contains(char::is_whitespace),
        "stdout is the token alone: {printed:?}"
    );
    // What it is goes to stderr, naming the key the token belongs to.
    let listed = p.json(None, &["key", "list"]);
    let id = listed["items"][0]["id"].as_str().unwrap();
    assert!(
        token.starts_with(&format!("baton_{id}_")),
        "{token} is key {id}'s"
    );
    let said = stderr(&out);
    assert!(
        said.contains(id) && said.contains("shown this once"),
        "{said}"
    );
}

/// A shared store holding project `shop` with a planner, and a key of `scope` for it:
/// the directory (kept while it lives), the store's URL and the key's token.
fn shop(scope: &str) -> (tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("projects").display());
    admin(&url, None, &["project", "add", "shop"]);
    admin(
        &url,
        Some("shop"),
        &["agent", "add", "planner", "--role", "planner"],
    );
    let issued = admin(
        &url,
        Some("shop"),
        &["key", "issue", "planner", "--scope", scope],
    );
    let token = issued["token"].as_str().unwrap().to_owned();
    (dir, url, token)
}

/// A `baton serve` process on an ephemeral port, killed on drop if still running.
pub struct Serving {
    pub child: Child,
    pub base: String,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address a `baton serve` just started says it listens on (its first line on
/// stderr), and the rest of its stderr's lines.
pub fn announced(
    child: &mut Child,
) -> (String, std::io::Lines<BufReader<std::process::ChildStderr>>) {
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().expect("a first line").unwrap();
    let address = first
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split("/v1").next())
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_owned();
    (address, lines)
}

/// `baton serve` on `url` with at most `descriptors` open files (`ulimit -n`) and the
/// flags `extra`: the process, the address it announced, and the rest of its stderr.
fn serve_under(
    url: &str,
    descriptors: u32,
    extra: &str,
) -> (
    Child,
    String,
    std::io::Lines<BufReader<std::process::ChildStderr>>,
) {
    let script = format!(
        "ulimit -n {descriptors} && exec '{}' --db '{url}' serve --bind 127.0.0.1:0 {extra}",
        baton_exe().display()
    );
    let mut child = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (address, lines) = announced(&mut child);
    (child, address, lines)
}

/// What a server says on stderr, kept as it comes (read on a thread of its own, so the
/// server never blocks on a full pipe).
fn kept(
    lines: std::io::Lines<BufReader<std::process::ChildStderr>>,
) -> std::sync::Arc<std::sync::Mutex<Vec<String>>> {
    let said: std::sync::Arc<std::sync::Mutex<Vec<String>>> = std::sync::Arc::default();
    let kept = std::sync::Arc::clone(&said);
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            kept.lock().unwrap().push(line);
        }
    });
    said
}

pub fn serve(url: &str) -> Serving {
    serve_with(url, &[])
}

/// `baton serve` on `url` with the flags `extra`.
pub fn serve_with(url: &str, extra: &[&str]) -> Serving {
    serve_in(url, extra, &[])
}

/// `baton serve` on `url` with the flags `extra` and the environment variables `envs`.
pub fn serve_in(url: &str, extra: &[&str], envs: &[(&str, &str)]) -> Serving {
    let mut child = Command::new(baton_exe())
        .args(["--db", url, "serve", "--bind", "127.0.0.1:0"])
        .args(extra)
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (base, lines) = announced(&mut child);
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Serving {
        child,
        base: format!("http://{base}"),
    }
}

#[test]
fn serve_answers_http_and_finishes_the_write_in_flight_before_it_stops() {
    let (_dir, url, token) = shop("write");
    let mut server = serve(&url);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let inbox = agent
        .get(&format!("{}/v1/projects/shop/inbox", server.base))
        .header("Authorization", &format!("Bearer {token}"))
        .call()
        .unwrap();
    assert_eq!(inbox.status().as_u16(), 200);

    // A wait that misses raises an alert at its deadline: a write, in flight when the
    // server is told to stop.
    let waiting = {
        let url = format!("{}/v1/projects/shop/receipts/deploy/wait", server.base);
        let token = token.clone();
        let agent = agent.clone();
        std::thread::spawn(move || {
            let mut response = agent
                .post(&url)
                .header("Authorization", &format!("Bearer {token}"))
                .send_json(json!({"timeout_seconds": 2}))
                .unwrap();
            let status = response.status().as_u16();
            let body: Value = response.body_mut().read_json().unwrap();
            (status, body)
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let asked = Instant::now();
    kill(Pid::from_raw(server.child.id() as i32), Signal::SIGTERM).unwrap();
    let (status, body) = waiting.join().unwrap();
    assert_eq!(
        status, 404,
        "the wait ran to its deadline and answered: {body}"
    );
    assert_eq!(body["error"]["code"], "not_found");
    let exit = server.child.wait().unwrap();
    assert!(exit.success(), "serve exits 0 after a SIGTERM: {exit}");
    assert!(asked.elapsed() < Duration::from_secs(20));
    let alerts = admin(&url, Some("shop"), &["alerts"]);
    assert_eq!(alerts["items"].as_array().unwrap().len(), 1, "{alerts}");
    // Where the database is, the key list says the server saw the key used.
    let keys = admin(&url, Some("shop"), &["key", "list"]);
    assert!(keys["items"][0]["last_used_at"].is_string(), "{keys}");
}

#[test]
fn wait_returns_what_concerns_the_caller_and_not_its_own_doing() {
    let p = Project::new(&[("planner", "planner"), ("impl-1", "executor")]);
    let waiter = p
        .cmd(Some("impl-1"), &["--json", "wait", "--timeout", "60s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let id = p.ok(
        Some("planner"),
        &["send", "--to", "impl-1", "--topic", "t", "--body", "news"],
    );
    let out = waiter.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let news: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(news["schema"], "baton/news@1");
    assert_eq!(news["events"][0]["id"], id.as_str(), "{news}");
    // The planner's own send is no news to the planner.
    let own = p.json(Some("planner"), &["wait", "--timeout", "1s"]);
    assert_eq!(own["events"], json!([]), "{own}");
    assert!(own["after"].as_i64().unwrap() >= news["events"][0]["log_seq"].as_i64().unwrap());
}

/// User and system CPU time of process `pid` so far, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which is parenthesised and may hold spaces).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 here.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn serve_out_of_descriptors_waits_quietly_and_answers_again_once_they_free() {
    use std::io::Write;
    let (_dir, url, token) = shop("read");
    // A server with few descriptors, as under a low `ulimit -n`.
    // No cap on connections: this is about the descriptors themselves running out.
    let (mut child, addr, lines) = serve_under(&url, 64, "--max-connections 100000");
    let started = Instant::now();
    let said = kept(lines);
    // Far more connections than descriptors, each with half a request (a connection the
    // listen queue has no room for is not waited for).
    let target: std::net::SocketAddr = addr.parse().unwrap();
    let held: Vec<std::net::TcpStream> = (0..150)
        .filter_map(|_| {
            let mut s =
                std::net::TcpStream::connect_timeout(&target, Duration::from_millis(200)).ok()?;
            s.write_all(b"GET /v1/health HTTP/1.1\r\n").ok()?;
            Some(s)
        })
        .collect();
    assert!(held.len() > 80, "only {} connections opened", held.len());
    let reports = || {
        said.lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("accept failed"))
            .count()
    };
    let before = cpu_ticks(child.id());
    let window = Duration::from_secs(3);
    std::thread::sleep(window);
    let spent = cpu_ticks(child.id()) - before;
    // Clock ticks are 1/100 s: a server spinning on its accept loop spends about 300 of
    // them in these 3 s; one that waits, a handful.
    assert!(
        spent < 100,
        "the server spent {spent} ticks of CPU in {window:?} while out of descriptors"
    );
    // Reported, and at most once per 5 s since the server started: a spinning loop
    // reports every failure.
    let lasted = started.elapsed().as_secs().div_ceil(5) as usize;
    let reports = reports();
    assert!(
        (1..=lasted + 1).contains(&reports),
        "{reports} reports of failed accepts in {:?}: {:?}",
        started.elapsed(),
        said.lock().unwrap()
    );
    // Once the descriptors free, it answers again.
    drop(held);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let retrying = Instant::now();
    let status = loop {
        let answer = agent
            .get(&format!("http://{addr}/v1/projects/shop/inbox"))
            .header("Authorization", &format!("Bearer {token}"))
            .call();
        match answer {
            Ok(r) if r.status().as_u16() == 200 => break 200,
            _ if retrying.elapsed() > Duration::from_secs(20) => break 0,
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        status,
        200,
        "the server did not answer again: {:?}",
        said.lock().unwrap()
    );
}

/// Sends one keep-alive request for `path` with `token` on `stream` and reads its answer
/// whole; the answer's status.
fn exchange(stream: &mut std::net::TcpStream, path: &str, token: &str) -> u16 {
    use std::io::{Read, Write};
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().unwrap())
        })
        .expect("a content-length");
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).unwrap();
    head[9..12].parse().unwrap()
}

#[test]
fn serve_over_its_connection_cap_closes_keyless_connections_first() {
    use std::io::{Read, Write};
    let (_dir, url, token) = shop("read");
    let (mut child, addr, lines) = serve_under(&url, 1024, "--max-connections 20");
    let said = kept(lines);
    let target: std::net::SocketAddr = addr.parse().unwrap();
    let inbox = "/v1/projects/shop/inbox";
    // A client that showed its key, keeping its connection open.
    let mut keyed = std::net::TcpStream::connect(target).unwrap();
    keyed
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(exchange(&mut keyed, inbox, &token), 200);
    // Then a hundred connections that never finish their request.
    let held: Vec<std::net::TcpStream> = (0..100)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(target).unwrap();
            s.write_all(b"GET /v1/health HTTP/1.1\r\n").unwrap();
            s
        })
        .collect();
    // The server holds at most 20: the oldest keyless ones are closed at once, long
    // before their 10 s to send headers run out.
    std::thread::sleep(Duration::from_millis(500));
    let closed = held
        .iter()
        .filter(|s| {
            // `Read` is implemented for a shared reference to a stream.
            let mut s: &std::net::TcpStream = s;
            s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
            // Closed: the end of the stream or a reset. Open: nothing to read yet.
            match s.read(&mut [0u8; 64]) {
                Ok(0) => true,
                Err(e) => !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                Ok(_) => false,
            }
        })
        .count();
    assert!(
        closed >= 100 - 20,
        "only {closed} of 100 keyless connections were closed under a cap of 20"
    );
    // The keyed connection was kept and still answers; a new client with a key is heard.
    assert_eq!(exchange(&mut keyed, inbox, &token), 200);
    let mut fresh = std::net::TcpStream::connect(target).unwrap();
    fresh
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(exchange(&mut fresh, inbox, &token), 200);
    let metrics = exchange_text(target, "/metrics");
    let shed: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("baton_connections_shed_total "))
        .expect("the shed counter")
        .parse()
        .unwrap();
    assert!(shed >= 80, "metrics count {shed} connections shed");
    let _ = child.kill();
    let _ = child.wait();
    // Said on stderr, once per interval rather than once per connection.
    let reports = said
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("at its cap of 20 connections"))
        .count();
    assert!(
        (1..=2).contains(&reports),
        "{reports} reports of shed connections: {:?}",
        said.lock().unwrap()
    );
}

/// The body of a keyless GET of `path`.
fn exchange_text(target: std::net::SocketAddr, path: &str) -> String {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    agent
        .get(&format!("http://{target}{path}"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap()
}

#[test]
fn serve_keeps_a_bounded_set_of_projects_open_and_answers_every_one() {
    // One project with a key, copied: 120 projects under a limit of 128 descriptors,
    // far fewer than 120 open projects would hold.
    let (dir, url, token) = shop("read");
    let projects = dir.path().join("projects");
    for n in 0..120 {
        for suffix in ["db", "db-wal"] {
            let from = projects.join(format!("shop.{suffix}"));
            if from.exists() {
                std::fs::copy(&from, projects.join(format!("p{n}.{suffix}"))).unwrap();
            }
        }
    }
    let (child, addr, lines) = serve_under(&url, 128, "--open-projects 8");
    std::thread::spawn(move || for _ in lines {});
    let serving = Serving {
        child,
        base: format!("http://{addr}"),
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let status = |path: &str| {
        agent
            .get(&format!("{}{path}", serving.base))
            .header("Authorization", &format!("Bearer {token}"))
            .call()
            .unwrap()
            .status()
            .as_u16()
    };
    let failed: Vec<(String, u16)> = (0..120)
        .map(|n| format!("p{n}"))
        .map(|p| {
            let got = status(&format!("/v1/projects/{p}/inbox"));
            (p, got)
        })
        .filter(|(_, got)| *got != 200)
        .collect();
    assert!(
        failed.is_empty(),
        "projects that did not answer: {failed:?}"
    );
    assert_eq!(status("/metrics"), 200, "/metrics over 121 projects");
}
