//! `cargo bench -p baton --bench mcp`: what `baton mcp` costs an agent — the byte size of
//! its `tools/list` result (read into the agent's context on every session, budget 12 KiB)
//! and the round trip of tool calls over stdio to one running server.
//!
//! It prints a table and asserts nothing about time. Run without `--bench` (as
//! `cargo test --benches` does) it only checks that it works, with a few calls.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::baton;

use serde_json::{Value, json};

// The budget each role profile's `tools/list` must stay under.
use baton_mcp::PROFILE_BUDGET;

struct Session {
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Session {
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").expect("write a request");
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).expect("read a response");
            assert!(n > 0, "baton mcp closed stdout");
            let message: Value = serde_json::from_str(&line).expect("a JSON-RPC line");
            if message["id"] == json!(id) {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message;
            }
        }
    }

    fn call(&mut self, name: &str, arguments: Value) -> Value {
        let r = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        let result = r["result"].clone();
        assert_ne!(result["isError"], json!(true), "{name}: {result}");
        result["structuredContent"].clone()
    }
}

fn serve(exe: &Path, project: &Path, who: &str) -> (std::process::Child, Session) {
    serve_profile(exe, project, who, "all")
}

fn serve_profile(
    exe: &Path,
    project: &Path,
    who: &str,
    profile: &str,
) -> (std::process::Child, Session) {
    let mut child = Command::new(exe)
        .args(["--project"])
        .arg(project)
        .args(["--as", who, "mcp", "--profile", profile])
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_AS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn baton mcp");
    let mut session = Session {
        stdin: child.stdin.take().expect("stdin"),
        stdout: BufReader::new(child.stdout.take().expect("stdout")),
        next_id: 0,
    };
    session.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "baton-bench", "version": "0"}}),
    );
    writeln!(
        session.stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .expect("write");
    (child, session)
}

fn time(runs: usize, mut f: impl FnMut(usize)) -> Vec<Duration> {
    f(usize::MAX); // warm-up
    (0..runs)
        .map(|run| {
            let start = Instant::now();
            f(run);
            start.elapsed()
        })
        .collect()
}

fn main() {
    let runs = if std::env::args().any(|a| a == "--bench") {
        300
    } else {
        3
    };
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_baton"));
    let dir = tempfile::tempdir().expect("temp dir");
    let project = dir.path();
    baton(&exe, project, &["init"]);
    for (name, role) in [("planner", "planner"), ("impl-1", "executor")] {
        baton(&exe, project, &["agent", "add", name, "--role", role]);
    }
    let (mut planner_process, mut planner) = serve(&exe, project, "planner");
    let (mut executor_process, mut executor) = serve(&exe, project, "impl-1");

    let listed = planner.request("tools/list", json!({}));
    let tools = listed["result"]["tools"].as_array().expect("tools").len();
    let bytes = listed["result"].to_string().len();
    // Each role's profile: what an agent of that role reads into its context.
    let mut profiles = Vec::new();
    for profile in ["executor", "planner", "reviewer", "owner"] {
        let (mut process, mut session) = serve_profile(&exe, project, "planner", profile);
        let listed = session.request("tools/list", json!({}));
        let n = listed["result"]["tools"].as_array().expect("tools").len();
        profiles.push((profile, n, listed["result"].to_string().len()));
        drop(session);
        process.wait().expect("the profile's server exits");
    }

    let mut sent = Vec::new();
    let mut rows: Vec<(&str, Vec<Duration>)> = Vec::new();
    rows.push((
        "send (request, body)",
        time(runs, |run| {
            let id = planner.call(
                "send",
                json!({"to": ["impl-1"], "type": "request", "topic": "bench",
                       "body": format!("bench request {run}: keep the filters")}),
            )["id"]
                .as_str()
                .expect("id")
                .to_owned();
            sent.push(id);
        }),
    ));
    rows.push((
        "inbox",
        time(runs, |_| {
            executor.call("inbox", json!({}));
        }),
    ));
    rows.push((
        "show (first fetch)",
        time(runs, |run| {
            executor.call("show", json!({"id": sent[run.min(sent.len() - 1)]}));
        }),
    ));
    rows.push((
        "search (text)",
        time(runs, |_| {
            executor.call("search", json!({"text": "filters", "limit": 20}));
        }),
    ));
    rows.push((
        "outbox",
        time(runs, |_| {
            planner.call("outbox", json!({}));
        }),
    ));
    rows.push((
        "resume (packet)",
        time(runs, |_| {
            executor.call("resume", json!({}));
        }),
    ));

    drop(planner);
    drop(executor);
    planner_process.wait().expect("planner exits");
    executor_process.wait().expect("executor exits");

    println!(
        "baton mcp bench: {} · protocol 2025-11-25 · {runs} calls each after 1 warm-up",
        exe.display()
    );
    println!(
        "tools/list result (profile all): {bytes} bytes for {tools} tools (the role profiles keep under {PROFILE_BUDGET})"
    );
    for (profile, n, size) in &profiles {
        println!(
            "tools/list result (profile {profile}): {size} bytes for {n} tools (budget {PROFILE_BUDGET}, {} left)",
            PROFILE_BUDGET as i64 - *size as i64
        );
    }
    println!(
        "{:<24} {:>5} {:>10} {:>8} {:>8}",
        "tool call", "runs", "median ms", "p90 ms", "min ms"
    );
    for (name, mut times) in rows {
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let p90 = (times.len() * 9).div_ceil(10).max(1) - 1;
        println!(
            "{name:<24} {:>5} {:>10.2} {:>8.2} {:>8.2}",
            times.len(),
            ms(times[times.len() / 2]),
            ms(times[p90]),
            ms(times[0]),
        );
    }
}
