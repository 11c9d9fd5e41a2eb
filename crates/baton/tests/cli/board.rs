//! `baton status` and the board. The board is checked in a real browser:
//! Debian's `chromium` driven by `playwright-core` (`tests/board/check.mjs`), on `baton
//! board` over a project with fixture data — runs in most statuses (done with progress,
//! failed, a spawn failure, stopped, running, lost), a full needs lane, an order with a
//! held effect waiting for approval, an alert, a long topic, agent text holding a
//! `<script>` — and on an empty project. The page must equal `baton status --json` at the
//! same generation. Without chromium, node or the script's `node_modules` these tests fail
//! and say how to install them (`.ci/run` does).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::common::{Project, baton_exe, code, stderr};
use crate::gateway::{Bench, effect};

/// A `baton board` on an ephemeral loopback port, killed on drop if still running.
struct Board {
    child: Child,
    url: String,
}

impl Drop for Board {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn board(project: &Path) -> Board {
    let mut child = Command::new(baton_exe())
        .args(["board", "--bind", "127.0.0.1:0"])
        .current_dir(project)
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_AS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start baton board");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().expect("a first line").unwrap();
    let url = first
        .strip_prefix("baton board: ")
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_owned();
    std::thread::spawn(move || for _ in lines {});
    Board { child, url }
}

/// A program on PATH, or a failure that says how to install it.
fn program(names: &[&str], install: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in names {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!("{} is not installed: {install}", names.join(" or "));
}

/// The browser tests' folder, with its `node_modules` installed from the committed lock
/// file when missing (playwright-core is a library; the browser is the system's
/// `chromium`, never downloaded).
fn scripts() -> PathBuf {
    crate::node::installed("tests/board", "node_modules/playwright-core")
}

/// Where the screenshots go: `target/board-screenshots/`.
fn screenshots() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    );
    target.join("board-screenshots")
}

/// The longest topic there may be.
const LONG_TOPIC: &str = "quarterly-billing-export-release-notes-for-every-region-and-lang";
/// A need whose text would run if the page took agent text as markup.
const HOSTILE: &str =
    "<script>window.__baton_pwned = 1</script><img src=x onerror=\"window.__baton_pwned = 2\">";

/// A `baton run` as impl-1 left running in the background.
fn background_run(p: &Project, command: &[&str]) -> Child {
    let mut args = vec!["run", "--"];
    args.extend_from_slice(command);
    p.cmd(Some("impl-1"), &args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start baton run")
}

/// Waits until a run of `command` is recorded as running with its process; its id and pid.
fn running(p: &Project, command: &str, skip: &[String]) -> (String, u32) {
    for _ in 0..600 {
        let runs = p.json(None, &["runs"]);
        if let Some(r) = runs["items"].as_array().unwrap().iter().find(|r| {
            r["status"] == "running"
                && r["command"].as_array().unwrap().join_str() == command
                && !skip.contains(&r["id"].as_str().unwrap().to_owned())
                && r["pid"].is_u64()
        }) {
            return (
                r["id"].as_str().unwrap().to_owned(),
                r["pid"].as_u64().unwrap() as u32,
            );
        }
        // Polling a fact another process records: nothing to wake on from here.
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("no running run of {command}");
}

trait JoinStr {
    fn join_str(&self) -> String;
}

impl JoinStr for Vec<Value> {
    fn join_str(&self) -> String {
        self.iter()
            .map(|v| v.as_str().unwrap_or_default())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The fixture: every part of the board has something to show. Returns the processes to
/// end when done (a running run, and the orphan of the lost one).
fn fixture(b: &Bench) -> Vec<u32> {
    let p = &b.project;
    // A held effect on an order waiting for its owner (the approvals lane).
    b.session(json!([{"tool": "append", "arguments": {"line": HOSTILE}}]));
    b.report(json!([effect(
        "files/append#1",
        "files/append",
        json!({"line": HOSTILE})
    )]));
    // Requests: one completed on a long topic, one held by impl-1, one still pending.
    let done = p.json(
        Some("planner"),
        &[
            "send",
            "--to",
            "impl-1",
            "--type",
            "request",
            "--topic",
            LONG_TOPIC,
            "--body",
            "done soon",
        ],
    );
    let done = done["id"].as_str().unwrap();
    p.ok(Some("impl-1"), &["show", done]);
    p.ok(Some("impl-1"), &["complete", done, "--note", "filed"]);
    let held = p.json(
        Some("planner"),
        &[
            "send",
            "--to",
            "impl-1",
            "--type",
            "request",
            "--topic",
            "csv-export",
            "--body",
            HOSTILE,
        ],
    );
    p.ok(Some("impl-1"), &["show", held["id"].as_str().unwrap()]);
    p.ok(
        Some("owner"),
        &[
            "send", "--to", "planner", "--type", "request", "--topic", "plan", "--body", "plan it",
        ],
    );
    // Work waiting in the executors' pool, its text a script.
    p.ok(
        Some("planner"),
        &[
            "send",
            "--to",
            "role:executor",
            "--type",
            "request",
            "--topic",
            "pool",
            "--body",
            HOSTILE,
        ],
    );
    // Seven needs: the lane shows five and holds two back; one carries a script.
    for i in 0..6 {
        p.ok(Some("impl-1"), &["need", &format!("need number {i}")]);
    }
    p.ok(Some("impl-1"), &["need", HOSTILE]);
    // Runs: done (one with progress), failed, a spawn failure, stopped.
    for _ in 0..94 {
        p.ok(Some("impl-1"), &["run", "--", "true"]);
    }
    p.ok(
        Some("impl-1"),
        &["run", "--", "sh", "-c", "echo PROGRESS 3/7"],
    );
    assert_eq!(code(&p.run(Some("impl-1"), &["run", "--", "false"])), 1);
    assert_eq!(
        code(&p.run(Some("impl-1"), &["run", "--", "/nonexistent/agent"])),
        127
    );
    let stopped = p.run(Some("impl-1"), &["run", "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(code(&stopped), 128 + 15, "{}", stderr(&stopped));
    // Running, and lost: its `baton run` killed, the reaper's pass records it (and the
    // message impl-1 held resurfaces with an alert).
    let mut live = background_run(p, &["sleep", "300"]);
    let (live_id, live_pid) = running(p, "sleep 300", &[]);
    let mut doomed = background_run(p, &["sleep", "301"]);
    let (_, orphan) = running(p, "sleep 301", &[live_id]);
    doomed.kill().unwrap();
    doomed.wait().unwrap();
    // Untracked: an agent started without `baton run` (a script named like one).
    let untracked = untracked_agent(p.path());
    let reaped = p.json(None, &["reap"]);
    assert_eq!(reaped["lost"].as_array().unwrap().len(), 1, "{reaped}");
    assert_eq!(reaped["untracked"].as_array().unwrap().len(), 1, "{reaped}");
    // A review of the submitted order killed while its reviewer ran (after the reaper's
    // pass, so its run is still running): started, not concluded.
    crate::review::killed_mid_review(p, "owner", "wo_1");
    let reviews = p.json(None, &["status"])["reviews"].clone();
    assert_eq!(reviews.as_array().map(Vec::len), Some(1), "{reviews}");
    // `live` stays running until the test ends its command.
    std::thread::spawn(move || live.wait());
    vec![live_pid, orphan, untracked]
}

/// A process named like an agent (`claude`), not started through `baton run`, running
/// once this returns; its pid.
fn untracked_agent(dir: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    std::fs::write(
        &claude,
        // It ends on its own once the test's directory is gone, even after a failure.
        "#!/bin/sh\necho $$ > \"$1\"\nwhile [ -e \"$1\" ]; do sleep 1; done\n",
    )
    .unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let said = dir.join("untracked.pid");
    let mut child = Command::new(&claude)
        .arg(&said)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env_remove("BATON_RUN")
        .env_remove("BATON_AS")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read_to_string(&said).is_ok_and(|s| s.trim() == pid.to_string()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::thread::spawn(move || child.wait());
    pid
}

fn end(pids: &[u32]) {
    for pid in pids {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
}

fn bench() -> Bench {
    Bench::new(
        "owner",
        json!(["files/*"]),
        json!(["files/append"]),
        json!({"usd": 5}),
    )
}

#[test]
fn the_board_in_a_real_browser_equals_status_follows_the_log_and_escapes_agent_text() {
    let chromium = program(
        &["chromium", "chromium-browser"],
        "apt-get install -y chromium (.ci/run does)",
    );
    let node = program(&["node"], "apt-get install -y nodejs npm (.ci/run does)");
    let scripts = scripts();
    let b = bench();
    let pids = fixture(&b);
    let empty = Project::new(&[]);
    let mut shown = board(b.project.path());
    let empty_board = board(empty.path());
    let store = tempfile::tempdir().unwrap();
    let (served, key) = serve_with_a_read_key(store.path());
    let out = Command::new(node)
        .arg("check.mjs")
        .current_dir(&scripts)
        .env("BATON", baton_exe())
        .env("PROJECT", b.project.path())
        .env("BOARD_URL", &shown.url)
        .env("BOARD_PID", shown.child.id().to_string())
        .env("EMPTY_URL", &empty_board.url)
        .env("SERVE_URL", &served.base)
        .env("SERVE_PROJECT", "shop")
        .env("SERVE_KEY", &key)
        .env("CHROMIUM", &chromium)
        .env("SCREENSHOTS", screenshots())
        .output()
        .expect("run node");
    end(&pids);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the browser check failed: {said}{}",
        stderr(&out)
    );
    let result: Value = serde_json::from_str(said.trim()).expect("the check's JSON line");
    for line in result["checked"].as_array().unwrap() {
        println!("{}", line.as_str().unwrap());
    }
    // The check stopped the board to see the page go stale: it stopped cleanly.
    let exit = shown.child.wait().unwrap();
    assert!(exit.success(), "baton board exits 0 on SIGTERM: {exit}");
    for shot in [
        "fixture-laptop.png",
        "fixture-phone.png",
        "live-update.png",
        "empty-project.png",
        "stale.png",
        "serve-with-key.png",
    ] {
        assert!(screenshots().join(shot).is_file(), "no screenshot {shot}");
    }
}

#[test]
fn status_prints_the_board_in_100_columns_and_its_document_with_json() {
    let b = bench();
    let p = &b.project;
    p.ok(
        Some("planner"),
        &[
            "send", "--to", "impl-1", "--type", "request", "--topic", LONG_TOPIC, "--body", HOSTILE,
        ],
    );
    p.ok(
        Some("impl-1"),
        &["need", &format!("{HOSTILE} \u{1b}[2J{}", "x".repeat(300))],
    );
    p.ok(
        Some("planner"),
        &[
            "send",
            "--to",
            "role:executor",
            "--type",
            "request",
            "--topic",
            LONG_TOPIC,
            "--body",
            &format!("{HOSTILE} \u{1b}[2J{}", "y".repeat(300)),
        ],
    );
    let failed = p.run(
        Some("impl-1"),
        &["run", "--", "sh", "-c", "echo PROGRESS 2/5; exit 3"],
    );
    assert_eq!(code(&failed), 3, "{}", stderr(&failed));
    let doc = p.json(None, &["status"]);
    assert_eq!(doc["schema"], "baton/status@1");
    assert_eq!(doc["run_counts"]["failed"], 1);
    assert_eq!(doc["runs"][0]["progress"], json!({"done": 2, "total": 5}));
    assert_eq!(
        doc["runs"][0]["tokens"],
        Value::Null,
        "unknown stays unknown"
    );
    let impl1 = doc["participants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "impl-1")
        .unwrap();
    assert_eq!(
        (impl1["owed"].as_u64(), impl1["waiting"].as_u64()),
        (Some(2), Some(0))
    );
    assert_eq!(doc["orders"][0]["status"], "accepted");
    assert!(doc["metrics"]["oldest_open_request"]["id"].is_string());
    assert_eq!(doc["generation"].as_i64(), Some(p.generation()));

    let text = p.ok(None, &["status"]);
    for line in text.lines() {
        assert!(
            line.chars().count() <= 100,
            "a line over 100 columns ({}): {line}",
            line.chars().count()
        );
    }
    assert!(
        !text.contains('\u{1b}'),
        "agent text reaches the terminal escaped"
    );
    assert!(text.contains("RUNS  running 0 (stalled 0)  registered 0  done 0  failed 1"));
    assert!(text.contains("2/5"), "{text}");
    assert!(text.contains("WAITING IN POOLS (1)"), "{text}");
    assert!(text.contains("oldest open request"), "{text}");
}

#[test]
fn an_empty_project_status_says_how_to_start() {
    let p = Project::new(&[]);
    let text = p.ok(None, &["status"]);
    assert!(text.contains("baton agent add"), "{text}");
}

#[test]
fn the_board_listens_on_loopback_only() {
    let p = Project::new(&[]);
    let out = p.run(None, &["board", "--bind", "0.0.0.0:0"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("loopback"), "{}", stderr(&out));
}

#[test]
fn the_board_serves_its_status_without_a_key_and_serve_asks_for_one() {
    let b = bench();
    let shown = board(b.project.path());
    let project = shown_project(&shown);
    let status: Value = ureq::get(&format!("{}v1/projects/{project}/status", shown.url))
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
    assert_eq!(status["generation"].as_i64(), Some(b.project.generation()));
    // The same document as the command line's, at the same generation.
    let mut cli = b.project.json(None, &["status"]);
    cli.as_object_mut().unwrap().remove("schema");
    let mut served = status.clone();
    for doc in [&mut cli, &mut served] {
        let doc = doc.as_object_mut().unwrap();
        // Judged at two instants: ages differ by the time between the two reads.
        doc.remove("at");
        doc.remove("runs");
        doc["metrics"]
            .as_object_mut()
            .unwrap()
            .remove("oldest_open_request");
    }
    assert_eq!(served, cli);
    // A request naming another host (a page whose name was pointed here: DNS rebinding)
    // reads nothing.
    let address = shown
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let mut raw = std::net::TcpStream::connect(&address).unwrap();
    use std::io::{Read, Write};
    write!(
        raw,
        "GET /v1/projects/{project}/status HTTP/1.1\r\nHost: rebound.example\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    raw.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(!answer.contains("generation"), "{answer}");
    // Another project's name gets nothing without a key.
    let other = ureq::get(&format!("{}v1/projects/elsewhere/status", shown.url)).call();
    assert!(
        matches!(other, Err(ureq::Error::StatusCode(401))),
        "{other:?}"
    );
    // The page itself: served with a policy that runs no inline script.
    let page = ureq::get(&shown.url).call().unwrap();
    let policy = page
        .headers()
        .get("content-security-policy")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert!(policy.contains("script-src 'self'"), "{policy}");

    // `baton serve`: the same endpoint needs a read key.
    let dir = tempfile::tempdir().unwrap();
    let (server, token) = serve_with_a_read_key(dir.path());
    let config: Value = ureq::get(&format!("{}/v1/board", server.base))
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
    assert_eq!(config["project"], Value::Null);
    let bare = ureq::get(&format!("{}/v1/projects/shop/status", server.base)).call();
    assert!(
        matches!(bare, Err(ureq::Error::StatusCode(401))),
        "{bare:?}"
    );
    let keyed: Value = ureq::get(&format!("{}/v1/projects/shop/status", server.base))
        .header("Authorization", &format!("Bearer {token}"))
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
    assert_eq!(keyed["participants"][0]["name"], "viewer");
}

/// `baton serve` over a store in `dir` with project `shop`, participant `viewer` and a
/// read key of it; the server and the key's token.
fn serve_with_a_read_key(dir: &Path) -> (crate::server::Serving, String) {
    let url = format!("sqlite:{}", dir.join("projects").display());
    crate::server::admin(&url, None, &["project", "add", "shop"]);
    crate::server::admin(
        &url,
        Some("shop"),
        &["agent", "add", "viewer", "--role", "planner"],
    );
    let key = crate::server::admin(
        &url,
        Some("shop"),
        &["key", "issue", "viewer", "--scope", "read"],
    );
    let token = key["token"].as_str().unwrap().to_owned();
    (crate::server::serve(&url), token)
}

/// The project name a board serves (its `/v1/board`).
fn shown_project(board: &Board) -> String {
    let config: Value = ureq::get(&format!("{}v1/board", board.url))
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
    config["project"].as_str().unwrap().to_owned()
}

#[test]
fn status_watch_prints_the_status_again_when_the_log_moves() {
    let p = Project::new(&[("planner", "planner"), ("impl-1", "executor")]);
    let mut watch = p
        .cmd(None, &["--json", "status", "--watch"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start baton status --watch");
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["schema"], "baton/status@1");
    p.ok(
        Some("planner"),
        &[
            "send", "--to", "impl-1", "--type", "request", "--topic", "t", "--body", "x",
        ],
    );
    let moved = p.generation();
    // The next documents: the one at the new generation shows the new request.
    let next = lines
        .map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap())
        .find(|d| d["generation"].as_i64() >= Some(moved))
        .expect("a document at the new generation");
    watch.kill().unwrap();
    watch.wait().unwrap();
    assert_eq!(next["metrics"]["open_requests"], 1);
    assert_eq!(first["metrics"]["open_requests"], 0);
}
