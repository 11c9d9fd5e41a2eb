//! Staged effects with real processes: `baton gateway` between the official MCP
//! Python SDK (the worker's client) and an upstream MCP server made for these tests
//! (`tests/mcp/upstream.py`: one read tool, two write tools that append a line to a
//! file), then `baton order approve` running what was held. What ran is counted in the
//! upstream's file, never taken from Baton's word.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Project, baton_exe, code, stderr};
use crate::mcp::{python, scripts};

const TEAM: &[(&str, &str)] = &[
    ("owner", "owner"),
    ("planner", "planner"),
    ("impl-1", "executor"),
];

/// A project, its upstream's file, and helpers to drive the order `wo_1`.
pub(crate) struct Bench {
    pub(crate) project: Project,
    file: PathBuf,
    from: String,
}

impl Bench {
    /// `text` written raw to impl-1's gateway on stdin (no handshake), then stdin closed:
    /// its output, and the JSON-RPC answers it printed.
    fn raw(&self, text: &str) -> (Output, Vec<Value>) {
        let mut child = self
            .project
            .cmd(
                Some("impl-1"),
                &["gateway", "--order", "wo_1", "--name", "files", "--"],
            )
            .args(Bench::upstream())
            .env("UPSTREAM_FILE", &self.file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(text.as_bytes()).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        let answers = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        (out, answers)
    }

    /// An order from `from` to impl-1 with `tools`, `staged` and `budget`, accepted.
    pub(crate) fn new(from: &str, tools: Value, staged: Value, budget: Value) -> Self {
        let project = Project::new(TEAM);
        let file = project.path().join("upstream.txt");
        let order = json!({
            "spec": "awl/work-order@0.4", "id": "wo_1", "created_at": "2025-01-01T00:00:00Z",
            "from": from, "to": "impl-1", "goal": "File the release notes",
            "criteria": [{"id": "c1", "text": "Notes filed"}],
            "budget": budget, "deadline": "2999-01-01T00:00:00Z",
            "tools": tools, "staged": staged,
            "x-baton": {
                "context": {"repository": "git@example.org:acme/shop.git", "base_revision": "abc123",
                            "reproduction": "-", "expected": "notes filed"},
                "scope": {"allowed": ["notes/"], "excluded": []},
                "execution": {"test_command": "sh -c true"},
                "acceptance": {"owner": from},
                "stop_when": ["the notes are missing"], "decision": {"resume_at": "file the notes"}
            }
        });
        let bench = Self {
            project,
            file,
            from: from.to_owned(),
        };
        let path = bench.write("order.json", &order);
        bench.project.ok(Some(from), &["order", "create", &path]);
        bench
            .project
            .ok(Some("impl-1"), &["order", "accept", "wo_1"]);
        bench
    }

    fn write(&self, name: &str, doc: &Value) -> String {
        let path = self.project.path().join(name);
        std::fs::write(&path, doc.to_string()).unwrap();
        path.to_str().unwrap().to_owned()
    }

    /// The upstream's command line, as the gateway is given it.
    fn upstream() -> Vec<String> {
        vec![
            python().to_str().unwrap().to_owned(),
            "-B".into(),
            scripts().join("upstream.py").to_str().unwrap().to_owned(),
        ]
    }

    /// The upstream file's lines: what actually ran.
    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.file)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Connects the SDK client to `baton gateway` as `who` and makes `calls`.
    fn gateway(&self, who: &str, calls: Value) -> std::process::Output {
        let mut args: Vec<String> = vec![
            "--as".into(),
            who.into(),
            "gateway".into(),
            "--order".into(),
            "wo_1".into(),
            "--name".into(),
            "files".into(),
            "--".into(),
        ];
        args.extend(Self::upstream());
        let mut child = Command::new(python())
            .arg("-B")
            .arg(scripts().join("gateway_client.py"))
            .arg(baton_exe())
            .arg(self.project.path())
            .args(&args)
            .env("UPSTREAM_FILE", &self.file)
            .env_remove("BATON_AS")
            .current_dir(scripts())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run the client");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(calls.to_string().as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// As [`Bench::gateway`], insisting the session worked; its JSON summary.
    pub(crate) fn session(&self, calls: Value) -> Value {
        let out = self.gateway("impl-1", calls);
        assert!(
            out.status.success(),
            "the gateway session failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// A `done` report listing `effects`.
    pub(crate) fn report(&self, effects: Value) {
        let report = json!({
            "spec": "awl/work-report@0.3", "order_id": "wo_1", "from": "impl-1", "status": "done",
            "result": {"summary": "Notes staged"},
            "evidence": [{"criterion": "c1", "type": "note", "note": "staged through the gateway"}],
            "cost": {"usd": 0, "tool_calls": 2}, "finished_at": "2025-01-01T01:00:00Z",
            "tools_used": ["files/append"], "effects": effects,
            "x-baton": {"evidence": {
                "before": {"command": "sh -c true", "exit_code": 1, "output": "-", "base_revision": "abc123"},
                "change": [{"file": "notes/x", "reason": "notes"}],
                "after": {"command": "sh -c true", "exit_code": 0, "output": "-"},
                "uncertainty": {"none": true},
                "review": {"commit": "def456", "acceptance_owner": self.from}
            }}
        });
        let path = self.write("report.json", &report);
        self.project
            .ok(Some("impl-1"), &["order", "report", "wo_1", &path]);
    }

    /// `baton order approve` as `who` with `extra` arguments, the upstream's file in its
    /// environment.
    fn approve(&self, who: &str, extra: &[&str]) -> std::process::Output {
        let mut args = vec!["--json", "order", "approve", "wo_1"];
        args.extend_from_slice(extra);
        self.project
            .cmd(Some(who), &args)
            .env("UPSTREAM_FILE", &self.file)
            .output()
            .unwrap()
    }

    fn show(&self) -> Value {
        self.project.json(None, &["order", "show", "wo_1"])
    }
}

pub(crate) fn effect(reference: &str, tool: &str, arguments: Value) -> Value {
    json!({"ref": reference, "tool": tool, "arguments": arguments})
}

fn statuses(shown: &Value) -> Vec<(String, String)> {
    shown["effects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["ref"].as_str().unwrap().to_owned(),
                e["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn the_gateway_forwards_reads_holds_staged_writes_and_refuses_the_rest() {
    let b = Bench::new(
        "owner",
        json!(["files/read", "files/append"]),
        json!(["files/append"]),
        json!({"tool_calls": 3}),
    );
    let s = b.session(json!([
        {"tool": "read"},
        {"tool": "append", "arguments": {"line": "held"}},
        {"tool": "stamp", "arguments": {"text": "not allowed"}},
        {"tool": "append", "arguments": {"line": "held too"}},
        {"tool": "read"},
    ]));
    // `stamp` is outside the order's tools: not even listed.
    assert_eq!(s["tools"], json!(["append", "read"]));
    let r = s["results"].as_array().unwrap();
    assert_eq!(r[0]["error"], false);
    assert_eq!(
        r[0]["structured"],
        json!({"lines": []}),
        "the read reached the upstream"
    );
    assert_eq!(r[0]["meta"]["baton/evidence"], "files/read@1");
    assert_eq!(r[1]["error"], false);
    assert_eq!(r[1]["structured"]["pending"], "pending:files/append#1");
    assert!(
        r[1]["text"]
            .as_str()
            .unwrap()
            .contains("runs when the order's report is approved")
    );
    assert_eq!(r[2]["error"], true);
    assert!(
        r[2]["text"]
            .as_str()
            .unwrap()
            .contains("[files/read, files/append]"),
        "the refusal names the pattern set: {}",
        r[2]["text"]
    );
    assert_eq!(r[3]["structured"]["pending"], "pending:files/append#2");
    assert_eq!(
        r[4]["error"], true,
        "the fourth call passes the budget of 3"
    );
    assert!(
        r[4]["text"]
            .as_str()
            .unwrap()
            .contains("budget of 3 tool_calls")
    );
    assert!(
        b.lines().is_empty(),
        "nothing held reached the upstream: {:?}",
        b.lines()
    );

    let shown = b.show();
    assert_eq!(
        statuses(&shown),
        [
            ("files/append#1".into(), "held".into()),
            ("files/append#2".into(), "held".into())
        ]
    );
    assert_eq!(shown["tool_calls"], json!(["files/read@1"]));
    let refused = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "effect.changed" && e["what"] == "refused")
        .count();
    assert_eq!(refused, 0, "order show lists the order's own steps");
}

#[test]
fn arguments_over_the_payload_cap_are_refused_before_anything_is_stored() {
    let b = Bench::new(
        "owner",
        json!(["files/append"]),
        json!(["files/append"]),
        json!({"tool_calls": 10}),
    );
    // 300 KB: within the gateway's line cap, over the default payload cap of 256 KiB.
    let s = b.session(json!([
        {"tool": "append", "arguments": {"line": "x".repeat(300 * 1024)}},
        {"tool": "append", "arguments": {"line": "small"}},
    ]));
    let r = s["results"].as_array().unwrap();
    assert_eq!(r[0]["error"], true, "{}", r[0]["text"]);
    let text = r[0]["text"].as_str().unwrap();
    assert!(
        text.contains("`arguments`") && text.contains("over the cap of 262144 bytes"),
        "the refusal names the arguments and the cap: {text}"
    );
    assert_eq!(
        r[1]["structured"]["pending"], "pending:files/append#1",
        "the refused call took no reference"
    );
    let shown = b.show();
    assert_eq!(statuses(&shown), [("files/append#1".into(), "held".into())]);
    for file in ["baton.db", "baton.db-wal"] {
        let stored = std::fs::read(b.project.path().join(".baton").join(file)).unwrap_or_default();
        assert!(
            !stored.windows(4096).any(|w| w.iter().all(|c| *c == b'x')),
            "the oversized arguments were not stored in {file}"
        );
    }
}

#[test]
fn the_gateway_answers_a_line_over_its_cap_without_reading_it_whole() {
    let b = Bench::new(
        "owner",
        json!(["files/append"]),
        json!(["files/append"]),
        json!({"tool_calls": 10}),
    );
    let pad = "x".repeat(3 * 1024 * 1024);
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"tools/call\",\"params\":{{\"name\":\"append\",\"arguments\":{{\"line\":\"{pad}\"}}}},\"id\":7}}\n"
    );
    let (out, answers) = b.raw(&line);
    assert!(
        answers.iter().any(|a| a["id"] == 7
            && a["error"]["code"] == -32600
            && a["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("request too large"))),
        "the oversized line is answered with its id: {answers:?} {}",
        stderr(&out)
    );
    assert!(b.lines().is_empty());
}

#[test]
fn a_held_calls_arguments_are_kept_exactly_or_refused_before_anything_is_held() {
    let b = Bench::new(
        "owner",
        json!(["files/append"]),
        json!(["files/append"]),
        json!({"tool_calls": 10}),
    );
    // Anywhere in the arguments, not only in a payload: a number no reader keeps exactly,
    // a repeated key, a NUL. Each would be held as something other than what was sent.
    let calls = [
        r#"{"line":"a","n":123456789012345678901234567890}"#,
        r#"{"line":"a","line":"b"}"#,
        r#"{"line":"a\u0000b"}"#,
    ];
    let lines: String = calls
        .iter()
        .enumerate()
        .map(|(i, arguments)| {
            format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"tools/call\",\"params\":{{\"name\":\"append\",\"arguments\":{arguments}}}}}\n",
                10 + i
            )
        })
        .collect();
    let (out, answers) = b.raw(&lines);
    for id in 10..10 + calls.len() {
        assert!(
            answers
                .iter()
                .any(|a| a["id"] == id && a["error"]["code"] == -32602),
            "call {id} is refused as invalid params: {answers:?} {}",
            stderr(&out)
        );
    }
    let shown = b.project.json(None, &["order", "show", "wo_1"]);
    assert!(statuses(&shown).is_empty(), "nothing was held: {shown}");
    assert!(b.lines().is_empty());
}

#[test]
fn only_the_worker_of_an_accepted_order_can_start_a_gateway() {
    let b = Bench::new(
        "owner",
        json!(["files/*"]),
        json!(["files/append"]),
        json!({"usd": 5}),
    );
    let out = b.gateway("planner", json!([]));
    assert!(!out.status.success());
    // The client saw the server exit; the gateway said why on its stderr.
    assert!(
        stderr(&out).contains("not the worker of order wo_1"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_upstream_that_does_not_answer_in_time_is_a_failed_effect_and_nothing_hangs() {
    let b = Bench::new(
        "owner",
        json!(["files/*"]),
        json!(["files/append"]),
        json!({"usd": 5}),
    );
    b.project
        .configure("effect_timeout = \"60s\"", "effect_timeout = \"2s\"");
    // Held during the session; at approval the upstream takes 30 s to answer.
    let slow = json!({"line": "slow", "hold_seconds": 30});
    b.session(json!([{"tool": "append", "arguments": slow}]));
    b.report(json!([effect("files/append#1", "files/append", slow)]));
    let started = std::time::Instant::now();
    let out = b.approve("owner", &[]);
    let took = started.elapsed();
    assert!(
        took < std::time::Duration::from_secs(20),
        "approval waited {took:?} on an upstream past its 2 s"
    );
    let shown = b.show();
    assert_eq!(
        statuses(&shown),
        [("files/append#1".into(), "failed".into())],
        "{}",
        stderr(&out)
    );
    assert!(
        shown.to_string().contains("orders.effect_timeout"),
        "the failure names the setting: {shown}"
    );
}

#[test]
fn an_upstream_answer_over_the_payload_cap_is_a_failed_effect_not_a_stored_one() {
    let b = Bench::new(
        "owner",
        json!(["files/*"]),
        json!(["files/swell"]),
        json!({"usd": 5}),
    );
    // 300 KiB of answer, over the 256 KiB payload cap.
    let swell = json!({"text": "x".repeat(1024), "times": 300});
    b.session(json!([{"tool": "swell", "arguments": swell}]));
    b.report(json!([effect("files/swell#1", "files/swell", swell)]));
    b.approve("owner", &[]);
    assert_eq!(b.lines(), ["swell"], "the upstream ran once");
    let shown = b.show();
    assert_eq!(
        statuses(&shown),
        [("files/swell#1".into(), "failed".into())]
    );
    let text = shown.to_string();
    assert!(text.contains("the upstream's answer is refused"), "{text}");
    assert!(
        text.len() < 64 * 1024,
        "the answer was stored: {} bytes",
        text.len()
    );
}

#[test]
fn an_upstream_answer_no_participant_could_send_fails_its_effect_and_the_log_still_imports() {
    let b = Bench::new(
        "owner",
        json!(["files/*"]),
        json!(["files/hostile"]),
        json!({"usd": 5}),
    );
    let control = json!({"kind": "control"});
    let nul = json!({"kind": "nul"});
    b.session(json!([
        {"tool": "hostile", "arguments": control},
        {"tool": "hostile", "arguments": nul},
    ]));
    b.report(json!([
        effect("files/hostile#1", "files/hostile", control),
        effect("files/hostile#2", "files/hostile", nul),
    ]));
    b.approve("owner", &[]);
    assert_eq!(
        b.lines(),
        ["hostile: control", "hostile: nul"],
        "the upstream ran each once"
    );
    let shown = b.show();
    assert_eq!(
        statuses(&shown),
        [
            ("files/hostile#1".into(), "ran".into()),
            ("files/hostile#2".into(), "failed".into())
        ]
    );
    let text = shown.to_string();
    assert!(text.contains("U+0000"), "the failure says why: {text}");
    let human = b.project.ok(None, &["order", "show", "wo_1"]);
    assert!(
        !human.contains('\u{1b}') && !human.contains('\u{202e}'),
        "{human}"
    );

    // The log holds what a participant may send exactly, and nothing it may not.
    let log = b.project.run(None, &["export"]);
    assert_eq!(code(&log), 0, "{}", stderr(&log));
    let lines = String::from_utf8(log.stdout.clone()).unwrap();
    assert!(lines.contains("\\u001b[31mred\u{202e}txt"), "{lines}");
    assert!(!lines.contains("\\u0000"), "the answer was stored: {lines}");
    // And export is accepted by import.
    let fresh = Project::new(&[]);
    let out = crate::portable::import(&fresh, &log.stdout);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        fresh.json(None, &["order", "show", "wo_1"])["effects"],
        shown["effects"]
    );
}

#[test]
fn an_upstream_answer_in_one_enormous_line_fails_its_effect_at_once_unread() {
    let b = Bench::new(
        "owner",
        json!(["files/*"]),
        json!(["files/swell"]),
        json!({"usd": 5}),
    );
    // About 80 MB in one line (the text twice: as content and as structured content),
    // past the MCP SDK's own 16 MiB line limit, which drops such a line and waits on.
    let swell = json!({"text": "x".repeat(4096), "times": 10_000});
    b.session(json!([{"tool": "swell", "arguments": swell}]));
    b.report(json!([effect("files/swell#1", "files/swell", swell)]));
    let started = std::time::Instant::now();
    let out = b.approve("owner", &[]);
    let took = started.elapsed();
    // Failed when the line passed Baton's bound, not at the 60 s effect timeout.
    assert!(
        took < std::time::Duration::from_secs(30),
        "approval took {took:?}: {}",
        stderr(&out)
    );
    let shown = b.show();
    assert_eq!(
        statuses(&shown),
        [("files/swell#1".into(), "failed".into())]
    );
    let text = shown.to_string();
    assert!(text.contains("with a line over"), "{text}");
}

#[test]
fn approval_runs_the_held_effects_once_in_order_with_a_ref_filled_in() {
    let b = Bench::new(
        "owner",
        json!(["files/*"]),
        json!(["files/append", "files/stamp"]),
        json!({"usd": 5}),
    );
    let from_first = json!({"$ref": "files/append#1", "pointer": "/structuredContent/n"});
    b.session(json!([
        {"tool": "append", "arguments": {"line": "first"}},
        {"tool": "stamp", "arguments": {"text": from_first}},
    ]));
    b.report(json!([
        effect("files/append#1", "files/append", json!({"line": "first"})),
        effect("files/stamp#1", "files/stamp", json!({"text": from_first})),
    ]));
    let out = b.approve("owner", &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // The stamp's text came from the append's result: {"n": 1}.
    assert_eq!(b.lines(), ["first", "stamp: 1"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "baton/approval@1");
    assert_eq!(doc["order"]["status"], "approved");
    assert_eq!(
        statuses(&b.show()),
        [
            ("files/append#1".into(), "ran".into()),
            ("files/stamp#1".into(), "ran".into())
        ]
    );
    // Approving again runs nothing twice, and says so.
    let again = b.approve("owner", &[]);
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    assert_eq!(b.lines(), ["first", "stamp: 1"]);
    let said = b
        .project
        .cmd(Some("owner"), &["order", "approve", "wo_1"])
        .env("UPSTREAM_FILE", &b.file)
        .output()
        .unwrap();
    assert_eq!(code(&said), 0, "{}", stderr(&said));
    let text = String::from_utf8(said.stdout).unwrap();
    assert!(
        text.contains("files/append#1 ran before; nothing ran now")
            && text.contains("files/stamp#1 ran before; nothing ran now"),
        "{text}"
    );
    assert_eq!(b.lines(), ["first", "stamp: 1"]);
}

#[test]
fn a_partial_approval_runs_only_the_chosen_effects() {
    let b = Bench::new(
        "owner",
        json!(["files/*"]),
        json!(["files/append", "files/stamp"]),
        json!({"usd": 5}),
    );
    b.session(json!([
        {"tool": "append", "arguments": {"line": "left out"}},
        {"tool": "stamp", "arguments": {"text": "chosen"}},
    ]));
    b.report(json!([
        effect(
            "files/append#1",
            "files/append",
            json!({"line": "left out"})
        ),
        effect("files/stamp#1", "files/stamp", json!({"text": "chosen"})),
    ]));
    let out = b.approve("owner", &["--effects", "files/stamp#1"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(b.lines(), ["stamp: chosen"]);
    assert_eq!(
        statuses(&b.show()),
        [
            ("files/append#1".into(), "dropped".into()),
            ("files/stamp#1".into(), "ran".into())
        ]
    );
}

#[test]
fn a_report_that_differs_from_what_was_held_runs_nothing() {
    let b = Bench::new(
        "owner",
        json!(["files/*"]),
        json!(["files/append"]),
        json!({"usd": 5}),
    );
    b.session(json!([{"tool": "append", "arguments": {"line": "real"}}]));
    b.report(json!([effect(
        "files/append#1",
        "files/append",
        json!({"line": "something else"})
    )]));
    let out = b.approve("owner", &[]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("effect 1") && err.contains("arguments"),
        "{err}"
    );
    assert!(b.lines().is_empty());
    assert_eq!(
        b.show()["order"]["status"],
        "submitted",
        "nothing was approved"
    );
}

#[test]
fn approving_without_the_power_to_run_effects_runs_nothing() {
    // A planner may approve, but running side effects is not among its default powers.
    let b = Bench::new(
        "planner",
        json!(["files/*"]),
        json!(["files/append"]),
        json!({"usd": 5}),
    );
    b.session(json!([{"tool": "append", "arguments": {"line": "x"}}]));
    b.report(json!([effect(
        "files/append#1",
        "files/append",
        json!({"line": "x"})
    )]));
    let out = b.approve("planner", &[]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(b.lines().is_empty());
    assert_eq!(
        statuses(&b.show()),
        [("files/append#1".into(), "held".into())]
    );
}

#[test]
fn rework_drops_every_held_effect() {
    let b = Bench::new(
        "owner",
        json!(["files/*"]),
        json!(["files/append"]),
        json!({"usd": 5}),
    );
    b.session(json!([{"tool": "append", "arguments": {"line": "draft"}}]));
    b.report(json!([effect(
        "files/append#1",
        "files/append",
        json!({"line": "draft"})
    )]));
    let packet = b.project.ok(Some("owner"), &["resume"]);
    assert!(
        packet.contains("order wo_1 (File the release notes): 1 staged effect await approval"),
        "the owner's resume packet counts what awaits approval:\n{packet}"
    );
    b.project.ok(
        Some("owner"),
        &["order", "rework", "wo_1", "--reason", "wrong notes"],
    );
    assert_eq!(
        statuses(&b.show()),
        [("files/append#1".into(), "dropped".into())]
    );
    // The next round holds a new call and approval runs only that one.
    b.session(json!([{"tool": "append", "arguments": {"line": "final"}}]));
    b.report(json!([effect(
        "files/append#2",
        "files/append",
        json!({"line": "final"})
    )]));
    let out = b.approve("owner", &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(b.lines(), ["final"]);
}

/// Waits until `file` has `n` lines (the upstream wrote them), or fails.
fn wait_for_lines(file: &Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let have = std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .count();
        if have >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the upstream never wrote {n} lines"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn approve_killed_mid_sequence_never_runs_a_finished_effect_twice() {
    use std::os::unix::process::CommandExt;
    let b = Bench::new(
        "owner",
        json!(["files/*"]),
        json!(["files/append", "files/stamp"]),
        json!({"usd": 5}),
    );
    // The second effect writes its line, then holds its answer: approve is killed there.
    b.session(json!([
        {"tool": "append", "arguments": {"line": "one"}},
        {"tool": "append", "arguments": {"line": "two", "hold_seconds": 30}},
        {"tool": "stamp", "arguments": {"text": "three"}},
    ]));
    b.report(json!([
        effect("files/append#1", "files/append", json!({"line": "one"})),
        effect(
            "files/append#2",
            "files/append",
            json!({"line": "two", "hold_seconds": 30})
        ),
        effect("files/stamp#1", "files/stamp", json!({"text": "three"})),
    ]));
    let mut approve = b
        .project
        .cmd(Some("owner"), &["order", "approve", "wo_1"])
        .env("UPSTREAM_FILE", &b.file)
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_lines(&b.file, 2);
    // SIGKILL the approval and its upstream (one process group) inside the second call.
    let group = approve.id() as i32;
    let killed = Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .status()
        .unwrap();
    assert!(killed.success());
    let _ = approve.wait();
    assert_eq!(b.lines(), ["one", "two"]);
    assert_eq!(
        statuses(&b.show()),
        [
            ("files/append#1".into(), "ran".into()),
            ("files/append#2".into(), "uncertain".into()),
            ("files/stamp#1".into(), "held".into()),
        ]
    );
    // A person sees it in the human queue.
    let queue = b.project.json(None, &["queue", "--lane", "failures"]);
    let items = queue.to_string();
    assert!(
        items.contains("effect:files/append#2@wo_1") && items.contains("uncertain"),
        "the uncertain effect is in the queue: {queue}"
    );
    // A second approve runs nothing finished again, and stops at the uncertain effect.
    let again = b.approve("owner", &[]);
    assert_eq!(code(&again), 1, "{}", stderr(&again));
    assert!(
        stderr(&again).contains("stopped at files/append#2 (uncertain)"),
        "{}",
        stderr(&again)
    );
    assert_eq!(
        b.lines(),
        ["one", "two"],
        "nothing ran twice, nothing after it ran"
    );
}

#[test]
fn a_sub_order_is_never_given_a_tool_its_parent_stages() {
    let b = Bench::new(
        "owner",
        json!(["files/*"]),
        json!(["files/append"]),
        json!({"usd": 5}),
    );
    let order = |id: &str, tools: Value| {
        json!({
            "spec": "awl/work-order@0.1", "id": id, "created_at": "2025-01-01T00:00:00Z",
            "from": "impl-1", "to": "planner", "goal": "Check the notes",
            "criteria": [{"id": "c1", "text": "Checked"}],
            "budget": {"usd": 1}, "deadline": "2998-01-01T00:00:00Z",
            "tools": tools, "parent_id": "wo_1",
            "x-baton": {
                "context": {"repository": "git@example.org:acme/shop.git", "base_revision": "abc123",
                            "reproduction": "-", "expected": "checked"},
                "scope": {"allowed": ["notes/"], "excluded": []},
                "execution": {"test_command": "sh -c true"},
                "acceptance": {"owner": "impl-1"},
                "stop_when": ["the notes are missing"], "decision": {"resume_at": "read the notes"}
            }
        })
    };
    let wide = b.write("sub.json", &order("wo_sub", json!(["files/*"])));
    let out = b.project.run(Some("impl-1"), &["order", "create", &wide]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(stderr(&out).contains("C5"), "{}", stderr(&out));
    // Within the parent's allowance (and with the power to hand work on), it is offered.
    b.project.ok(
        None,
        &["agent", "policy", "impl-1", "--may", "request,send,accept"],
    );
    let narrow = b.write("sub2.json", &order("wo_sub2", json!(["files/read"])));
    b.project.ok(Some("impl-1"), &["order", "create", &narrow]);
}
