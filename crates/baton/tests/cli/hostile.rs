//! Hostile input and damaged stores: what another agent wrote is shown as
//! visible escapes, payloads and documents are refused at the boundary before anything is
//! stored (one depth limit, exact numbers, no duplicate keys), every input file is read
//! within a cap, receipts stay inside the project, `baton mcp` answers every request, a
//! store that is not one (or is damaged) is refused with the fix, permanent conflicts exit
//! 3, and files Baton writes get the umask.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::{Project, baton_exe, code, stderr, work_order};

const TEAM: &[(&str, &str)] = &[("planner", "planner"), ("impl-1", "executor")];

/// The deepest payload accepted (baton_core::json::MAX_DEPTH).
const MAX_DEPTH: usize = 64;

/// `{"a":{"a":…1…}}`, `levels` objects deep.
fn nested(levels: usize) -> String {
    format!("{}1{}", "{\"a\":".repeat(levels), "}".repeat(levels))
}

fn file(p: &Project, name: &str, text: &str) -> String {
    std::fs::write(p.path().join(name), text).unwrap();
    name.to_owned()
}

fn messages(p: &Project) -> usize {
    p.json(None, &["search", "--since", "1h"])["items"]
        .as_array()
        .map_or(0, Vec::len)
}

/// The raw terminal controls a hostile string carries; none may reach a terminal.
fn assert_no_raw_controls(what: &str, bytes: &[u8]) {
    let raw: Vec<u8> = bytes
        .iter()
        .copied()
        .filter(|b| (*b < 0x20 && *b != b'\n' && *b != b'\t') || *b == 0x7f)
        .collect();
    assert!(
        raw.is_empty(),
        "{what} printed raw control bytes {raw:?}: {}",
        String::from_utf8_lossy(bytes)
    );
    // C1 controls (U+0080..U+009F) as UTF-8: 0xC2 followed by 0x80..0x9F.
    assert!(
        !bytes
            .windows(2)
            .any(|w| w[0] == 0xc2 && (0x80..=0x9f).contains(&w[1])),
        "{what} printed a raw C1 control: {}",
        String::from_utf8_lossy(bytes)
    );
}

#[test]
fn hostile_controls_from_stored_data_are_shown_as_escapes_and_json_stays_exact() {
    let p = Project::new(TEAM);
    // Every control but U+0000, which no store keeps (refused at the boundary, below).
    let evil = "all tests passed\u{1b}]52;c;cm0gLXJmIH4=\u{7}\r\u{1b}[2K\u{1}\u{9b}31m";
    let payload = json!({ "body": evil, "title": evil }).to_string();
    file(&p, "evil.json", &payload);
    let id = p.ok(
        Some("planner"),
        &[
            "send",
            "--to",
            "impl-1",
            "--topic",
            "t",
            "--payload",
            "evil.json",
        ],
    );
    p.ok(Some("planner"), &["focus", "set", "ship\u{1b}[8mhidden"]);
    p.ok(
        None,
        &["decide", "Use \u{1b}]52;c;eA==\u{7}", "--why", "why\r"],
    );
    let mut order = work_order("wo_1");
    order["goal"] = format!("Fix it{evil}").into();
    order["escalate_to"] = "planner".into();
    file(&p, "order.json", &order.to_string());
    p.ok(Some("planner"), &["order", "create", "order.json"]);
    p.ok(None, &["run", "--", "true", "\u{1b}]52;c;eA==\u{7}"]);

    for (who, args) in [
        (Some("impl-1"), vec!["inbox"]),
        (None, vec!["search", "--since", "1h"]),
        (Some("impl-1"), vec!["thread", id.as_str()]),
        (Some("impl-1"), vec!["show", id.as_str()]),
        (Some("impl-1"), vec!["resume"]),
        (None, vec!["state", "show"]),
        (None, vec!["order", "list"]),
        (None, vec!["order", "show", "wo_1"]),
        (None, vec!["runs", "--all"]),
    ] {
        let out = p.run(who, &args);
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        assert_no_raw_controls(&format!("{args:?}"), &out.stdout);
        assert_no_raw_controls(&format!("{args:?} (stderr)"), &out.stderr);
    }
    // Shown, not obeyed: the escapes are visible in the excerpt and the state.
    let inbox = String::from_utf8(p.run(Some("impl-1"), &["inbox"]).stdout).unwrap();
    assert!(inbox.contains("passed\\e]52;c;"), "{inbox}");
    assert!(
        inbox.contains("\\u{1}") && inbox.contains("\\u{9b}"),
        "{inbox}"
    );
    let state = String::from_utf8(p.run(None, &["state", "show"]).stdout).unwrap();
    assert!(state.contains("ship\\e[8mhidden"), "{state}");
    // JSON is exact: the same string, escaped by JSON itself.
    let doc = p.json(Some("impl-1"), &["show", &id]);
    assert_eq!(doc["payload"]["body"], evil, "{doc}");
    // U+0000 is refused before anything is stored, on every backend alike.
    file(&p, "nul.json", &json!({ "body": "a\u{0}b" }).to_string());
    let nul = p.run(
        Some("planner"),
        &[
            "send",
            "--to",
            "impl-1",
            "--topic",
            "t",
            "--payload",
            "nul.json",
        ],
    );
    assert_eq!(code(&nul), 3, "{}", stderr(&nul));
    assert!(stderr(&nul).contains("U+0000"), "{}", stderr(&nul));
}

#[test]
fn hostile_one_depth_limit_refuses_before_storing_and_what_is_accepted_reads_back() {
    let p = Project::new(TEAM);
    file(&p, "ok.json", &nested(MAX_DEPTH));
    let id = p.ok(
        Some("planner"),
        &[
            "send",
            "--to",
            "impl-1",
            "--topic",
            "t",
            "--payload",
            "ok.json",
        ],
    );
    // Accepted, so every reader can read it back.
    p.ok(Some("impl-1"), &["show", &id]);
    p.json(Some("impl-1"), &["show", &id]);
    p.ok(Some("impl-1"), &["thread", &id]);
    for line in p.ok(None, &["export"]).lines() {
        serde_json::from_str::<Value>(line).expect("an exported line reads back");
    }

    file(&p, "deep.json", &nested(MAX_DEPTH + 1));
    let before = messages(&p);
    let out = p.run(
        Some("planner"),
        &[
            "send",
            "--to",
            "impl-1",
            "--topic",
            "t",
            "--payload",
            "deep.json",
        ],
    );
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("more than 64 levels"),
        "{}",
        stderr(&out)
    );
    assert_eq!(messages(&p), before, "nothing stored");

    // An order that deep: `handoff check` and `order create` agree, in words.
    let mut order = String::from(
        r#"{"spec":"awl/work-order@0.1","id":"wo_deep","from":"planner","to":"impl-1","goal":"g","x":"#,
    );
    order.push_str(&"[".repeat(127));
    order.push_str(&"]".repeat(127));
    order.push('}');
    file(&p, "deep-order.json", &order);
    let check = p.run(None, &["handoff", "check", "deep-order.json"]);
    assert_ne!(code(&check), 0);
    let create = p.run(Some("planner"), &["order", "create", "deep-order.json"]);
    assert_eq!(code(&create), 3, "{}", stderr(&create));
    assert!(
        stderr(&create).contains("more than 64 levels")
            && !stderr(&create).contains("recursion limit"),
        "{}",
        stderr(&create)
    );
    assert_eq!(
        p.json(None, &["order", "list", "--all"])["items"],
        json!([])
    );
}

#[test]
fn hostile_numbers_are_kept_exactly_or_refused_and_duplicate_keys_name_their_path() {
    let p = Project::new(TEAM);
    let before = messages(&p);
    file(&p, "big.json", r#"{"n": 123456789012345678901234567890}"#);
    let out = p.run(
        Some("planner"),
        &[
            "send",
            "--to",
            "impl-1",
            "--topic",
            "t",
            "--payload",
            "big.json",
        ],
    );
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot be kept exactly"),
        "{}",
        stderr(&out)
    );
    file(&p, "dup.json", r#"{"a": {"b": 1, "b": 2}}"#);
    let out = p.run(
        Some("planner"),
        &[
            "send",
            "--to",
            "impl-1",
            "--topic",
            "t",
            "--payload",
            "dup.json",
        ],
    );
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("duplicate key at /a/b"),
        "{}",
        stderr(&out)
    );
    assert_eq!(messages(&p), before, "nothing stored");

    // What can be kept is kept as given.
    file(
        &p,
        "exact.json",
        r#"{"big": 18446744073709551615, "neg": -9223372036854775808, "x": 0.1}"#,
    );
    let id = p.ok(
        Some("planner"),
        &[
            "send",
            "--to",
            "impl-1",
            "--topic",
            "t",
            "--payload",
            "exact.json",
        ],
    );
    let out = p.run(Some("impl-1"), &["--json", "show", &id]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("18446744073709551615") && text.contains("-9223372036854775808"),
        "{text}"
    );
}

#[test]
fn hostile_input_files_are_read_within_a_cap_whatever_they_are() {
    let p = Project::new(TEAM);
    p.ok(None, &["state", "render"]);
    for (who, args) in [
        (
            Some("planner"),
            vec![
                "send",
                "--to",
                "impl-1",
                "--topic",
                "t",
                "--payload",
                "/dev/zero",
            ],
        ),
        (None, vec!["handoff", "check", "/dev/zero"]),
        (Some("planner"), vec!["order", "create", "/dev/zero"]),
        (None, vec!["session", "end", "--file", "/dev/zero"]),
        (None, vec!["state", "import", "/dev/zero"]),
        (None, vec!["check", "/dev/zero"]),
    ] {
        let out = p.run(who, &args);
        assert_ne!(code(&out), 0, "{args:?} succeeded");
        let err = stderr(&out);
        let said = String::from_utf8_lossy(&out.stdout).into_owned() + &err;
        assert!(
            said.contains("cap") || said.contains("largest accepted"),
            "{args:?} does not name the cap: {said}"
        );
    }
}

#[test]
fn hostile_a_fifo_nobody_writes_is_read_as_empty_at_once() {
    let p = Project::new(TEAM);
    let fifo = p.path().join("handoff.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let mut child = Command::new(baton_exe())
        .current_dir(p.path())
        .env_remove("BATON_AS")
        .args(["handoff", "check", fifo.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    let status = status.expect("`handoff check FIFO` still waiting after 20 s");
    assert!(
        !status.success(),
        "an empty handoff passed: {}",
        stderr(&out)
    );
}

#[test]
fn hostile_receipt_artifacts_resolve_inside_the_project_or_are_uris() {
    let p = Project::new(TEAM);
    std::os::unix::fs::symlink("/etc/passwd", p.path().join("out-link")).unwrap();
    let status = Command::new("mkfifo")
        .arg(p.path().join("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    for artifact in [
        "/etc/passwd",
        "../../etc/passwd",
        "out-link",
        "/dev/zero",
        "pipe",
    ] {
        let out = p.run(
            None,
            &[
                "receipt",
                "write",
                "--step",
                "build",
                "--artifact",
                artifact,
            ],
        );
        assert_ne!(code(&out), 0, "{artifact} was recorded");
        assert!(
            code(&out) == 3 || code(&out) == 4,
            "{artifact}: {}",
            stderr(&out)
        );
    }
    assert_eq!(
        code(&p.run(None, &["receipt", "show", "build"])),
        4,
        "no receipt was written"
    );
    std::fs::write(p.path().join("app.bin"), b"binary").unwrap();
    p.ok(
        None,
        &[
            "receipt",
            "write",
            "--step",
            "build",
            "--artifact",
            "app.bin",
        ],
    );
    p.ok(
        None,
        &[
            "receipt",
            "write",
            "--step",
            "deploy",
            "--artifact",
            "https://example.org/a",
        ],
    );
}

/// `baton mcp` as impl-1, fed `lines` (each a JSON-RPC message, or raw bytes), read until
/// every id in `ids` is answered.
fn mcp_round(p: &Project, lines: &[Vec<u8>], ids: &[Value]) -> Vec<Value> {
    let mut child = p
        .cmd(Some("impl-1"), &["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = lines.to_vec();
    let writer = std::thread::spawn(move || {
        for line in lines {
            stdin.write_all(&line).unwrap();
            stdin.write_all(b"\n").unwrap();
        }
        stdin.flush().unwrap();
        stdin
    });
    let mut answers = Vec::new();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut pending: Vec<Value> = ids.to_vec();
    while !pending.is_empty() {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            panic!("baton mcp closed stdout with {pending:?} unanswered; got {answers:?}");
        }
        let answer: Value = serde_json::from_str(&line).unwrap();
        pending.retain(|id| *id != answer["id"]);
        answers.push(answer);
    }
    drop(writer.join().unwrap());
    assert!(child.wait().unwrap().success());
    answers
}

fn rpc(id: i64, method: &str, params: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        .to_string()
        .into_bytes()
}

#[test]
fn hostile_mcp_answers_every_request_with_an_id_and_stays_usable() {
    let p = Project::new(TEAM);
    let init = rpc(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "t", "version": "1"}}),
    );
    let initialized = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec();
    let mut huge = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"send","arguments":{"to":["planner"],"topic":"t","body":""#.to_vec();
    huge.extend(std::iter::repeat_n(b'x', 20 * 1024 * 1024));
    huge.extend_from_slice(b"\"}}}");
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"send","arguments":{{"to":["planner"],"topic":"t","payload":{}}}}}}}"#,
        nested(126)
    )
    .into_bytes();
    let number = br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"send","arguments":{"to":["planner"],"topic":"t","payload":{"n":1e400}}}}"#.to_vec();
    let mut not_utf8 = br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"send","arguments":{"to":["planner"],"topic":"t","body":""#.to_vec();
    not_utf8.extend_from_slice(b"\xff\xfe\"}}}");
    let not_object = rpc(
        6,
        "tools/call",
        json!({"name": "inbox", "arguments": "str"}),
    );
    let outside = rpc(
        7,
        "tools/call",
        json!({"name": "receipt_write", "arguments": {"step": "b", "artifact": "/etc/passwd"}}),
    );
    let after = rpc(8, "tools/list", json!({}));
    let answers = mcp_round(
        &p,
        &[
            init,
            initialized,
            huge,
            deep,
            number,
            not_utf8,
            not_object,
            outside,
            after,
        ],
        &(1..=8).map(Value::from).collect::<Vec<_>>(),
    );
    let by_id = |id: i64| {
        answers
            .iter()
            .find(|a| a["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no answer to {id}: {answers:?}"))
    };
    assert_eq!(by_id(2)["error"]["code"], -32600, "{}", by_id(2));
    assert!(
        by_id(2)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("too large")
    );
    assert_eq!(by_id(3)["error"]["code"], -32602, "{}", by_id(3));
    assert_eq!(by_id(4)["error"]["code"], -32602, "{}", by_id(4));
    assert_eq!(by_id(5)["error"]["code"], -32700, "{}", by_id(5));
    assert_eq!(by_id(6)["error"]["code"], -32602, "{}", by_id(6));
    // The same rule as the command line: a tool error, nothing recorded.
    assert_eq!(by_id(7)["result"]["isError"], true, "{}", by_id(7));
    assert!(
        by_id(7).to_string().contains("outside the project"),
        "{}",
        by_id(7)
    );
    assert!(
        by_id(8)["result"]["tools"].is_array(),
        "usable after: {}",
        by_id(8)
    );
    assert_eq!(messages(&p), 0, "nothing was sent");
}

#[test]
fn hostile_a_store_that_is_not_one_is_refused_and_damage_is_explained() {
    let p = Project::new(TEAM);
    std::fs::write(p.db(), b"").unwrap();
    let out = p.run(Some("impl-1"), &["inbox"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a Baton store"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::metadata(p.db()).unwrap().len(),
        0,
        "left untouched"
    );
    std::fs::write(p.db(), b"my notes, not a database\n").unwrap();
    let out = p.run(Some("impl-1"), &["inbox"]);
    assert!(
        stderr(&out).contains("not a Baton store"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("code:"), "{}", stderr(&out));

    // Pages damaged under a real store: a clear error with the fix, never driver text.
    let p = Project::new(TEAM);
    let body = "x".repeat(3000);
    for _ in 0..20 {
        p.ok(
            Some("planner"),
            &["send", "--to", "impl-1", "--topic", "t", "--body", &body],
        );
    }
    let mut bytes = std::fs::read(p.db()).unwrap();
    for page in (2..bytes.len() / 4096).map(|n| n * 4096 + 8) {
        bytes[page..page + 64].fill(0xff);
    }
    std::fs::write(p.db(), &bytes).unwrap();
    let out = p.run(
        Some("planner"),
        &["send", "--to", "impl-1", "--topic", "t", "--body", "more"],
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("damaged") && err.contains("baton export"),
        "{err}"
    );
    assert!(
        !err.contains("code:") && !err.contains("malformed\""),
        "{err}"
    );
}

#[test]
fn hostile_exit_6_is_only_for_what_a_retry_can_fix() {
    let p = Project::new(TEAM);
    let other_role = p.run(None, &["agent", "add", "impl-1", "--role", "reviewer"]);
    assert_eq!(code(&other_role), 3, "{}", stderr(&other_role));
    let send = |body: &str| {
        p.run(
            Some("planner"),
            &[
                "--json",
                "send",
                "--to",
                "impl-1",
                "--topic",
                "t",
                "--body",
                body,
                "--idempotency-key",
                "k1",
            ],
        )
    };
    assert_eq!(code(&send("one")), 0);
    let reused = send("two");
    assert_eq!(code(&reused), 3, "{}", stderr(&reused));
    let err: Value = serde_json::from_slice(&reused.stderr).unwrap();
    assert_eq!(err["error"]["retryable"], false);
    assert_eq!(err["error"]["exit_code"], 3);

    let usage = p.run(None, &["--json", "inbox", "--no-such-flag"]);
    assert_eq!(code(&usage), 2);
    let err: Value = serde_json::from_slice(&usage.stderr)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", stderr(&usage)));
    assert_eq!(err["schema"], "baton/error@1");
    assert_eq!(err["error"]["kind"], "usage");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--no-such-flag")
    );
}

#[test]
fn hostile_one_write_makes_at_most_a_thousand_state_changes() {
    let p = Project::new(TEAM);
    let completed: Vec<String> = (0..1001).map(|i| format!("s{i}")).collect();
    file(
        &p,
        "handover.json",
        &json!({ "completed": completed }).to_string(),
    );
    let out = p.run(None, &["session", "end", "--file", "handover.json"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(stderr(&out).contains("at most 1000"), "{}", stderr(&out));
}

#[test]
fn hostile_a_state_import_adds_at_most_a_thousand_rows() {
    let p = Project::new(TEAM);
    p.ok(None, &["state", "render"]);
    let path = p.path().join("STATE.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let header = "| Id | Decision | Why | Status |\n| --- | --- | --- | --- |\n";
    let rows: String = (0..1001)
        .map(|i| format!("| new | Decision {i} | because | current |\n"))
        .collect();
    assert!(text.contains(header), "{text}");
    std::fs::write(&path, text.replace(header, &format!("{header}{rows}"))).unwrap();
    let before = p.json(None, &["state", "show"]);
    let out = p.run(None, &["state", "import", "STATE.md"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(stderr(&out).contains("at most 1000"), "{}", stderr(&out));
    assert_eq!(p.json(None, &["state", "show"]), before, "nothing changed");
}

/// Runs `baton ARGS` in the project under umask 022.
fn under_umask(p: &Project, args: &str) {
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("umask 022 && exec \"$0\" {args}"))
        .arg(baton_exe())
        .current_dir(p.path())
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_AS")
        .status()
        .unwrap();
    assert!(status.success(), "baton {args}");
}

fn mode(p: &Project, name: &str) -> u32 {
    std::fs::metadata(p.path().join(name))
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn hostile_files_baton_writes_get_the_umask_and_existing_ones_keep_their_mode() {
    let p = Project::new(TEAM);
    under_umask(&p, "state render");
    assert_eq!(mode(&p, "STATE.md"), 0o644);
    under_umask(&p, "init --claude");
    assert_eq!(mode(&p, ".claude/settings.json"), 0o644);
    std::fs::set_permissions(
        p.path().join("STATE.md"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    p.ok(None, &["decide", "Use WAL", "--why", "readers"]);
    under_umask(&p, "state render");
    assert_eq!(mode(&p, "STATE.md"), 0o640);
}

#[test]
fn hostile_the_http_server_applies_the_same_limits_before_storing() {
    use crate::server::{admin, serve};
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("projects").display());
    admin(&url, None, &["project", "add", "shop"]);
    for (name, role) in TEAM {
        admin(&url, Some("shop"), &["agent", "add", name, "--role", role]);
    }
    let token = admin(
        &url,
        Some("shop"),
        &["key", "issue", "planner", "--scope", "write"],
    )["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let server = serve(&url);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let post = |body: String| {
        let mut response = agent
            .post(&format!("{}/v1/projects/shop/messages", server.base))
            .header("Authorization", &format!("Bearer {token}"))
            .header("Content-Type", "application/json")
            .send(body)
            .unwrap();
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap();
        (status, text)
    };
    let body = |payload: &str| format!(r#"{{"to":["impl-1"],"topic":"t","payload":{payload}}}"#);
    // Refused by the payload's rule (422), or as a body that cannot be taken (400).
    for (payload, want, says) in [
        (nested(MAX_DEPTH + 1), 422, "more than 64 levels"),
        (nested(126), 400, "more than 64 levels"),
        (
            r#"{"n":123456789012345678901234567890}"#.to_owned(),
            400,
            "exactly",
        ),
        (
            r#"{"a":1,"a":2}"#.to_owned(),
            400,
            "duplicate key at /payload/a",
        ),
    ] {
        let (status, text) = post(body(&payload));
        assert_eq!(status, want, "{text}");
        assert!(text.contains(says), "{text}");
    }
    let (status, text) = post(body(&nested(MAX_DEPTH)));
    assert!(
        (200..300).contains(&status),
        "the deepest accepted payload is stored: {text}"
    );
    let sent = admin(&url, Some("shop"), &["search", "--since", "1h"]);
    assert_eq!(sent["items"].as_array().map(Vec::len), Some(1), "{sent}");
}

#[test]
fn a_read_only_store_is_read_and_a_write_to_it_says_why_it_cannot() {
    use std::os::unix::process::CommandExt;
    let p = Project::new(TEAM);
    let id = p.ok(
        Some("planner"),
        &["send", "--to", "impl-1", "--topic", "t", "--body", "hello"],
    );
    // Read-only to the process below: as root, a process of the unprivileged `nobody`
    // over files only root may write; otherwise the files made read-only.
    let root = nix::unistd::Uid::effective().is_root();
    let baton_dir = p.path().join(".baton");
    let mode = |path: &std::path::Path, bits: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(bits)).unwrap();
    };
    let (dirs, files) = if root { (0o755, 0o644) } else { (0o555, 0o444) };
    mode(p.path(), dirs);
    for entry in std::fs::read_dir(&baton_dir).unwrap() {
        mode(&entry.unwrap().path(), files);
    }
    mode(&baton_dir, dirs);
    let run = |args: &[&str]| {
        let mut cmd = p.cmd(Some("impl-1"), args);
        if root {
            cmd.uid(65534).gid(65534);
        }
        cmd.output().unwrap()
    };
    for read in [
        &["--json", "inbox"][..],
        &["--json", "status"],
        &["--json", "state", "show"],
        &["export"],
    ] {
        let out = run(read);
        assert_eq!(code(&out), 0, "{read:?}: {}", stderr(&out));
    }
    let inbox: Value = serde_json::from_slice(&run(&["--json", "inbox"]).stdout).unwrap();
    assert!(inbox.to_string().contains(&id), "{inbox}");
    let out = run(&["send", "--to", "planner", "--topic", "t", "--body", "back"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the store is read-only to this process"),
        "{}",
        stderr(&out)
    );
    // Made writable again, nothing of the refused write is there.
    mode(&baton_dir, 0o755);
    for entry in std::fs::read_dir(&baton_dir).unwrap() {
        mode(&entry.unwrap().path(), 0o644);
    }
    let outbox = p.json(Some("impl-1"), &["outbox"]);
    assert!(!outbox.to_string().contains("back"), "{outbox}");
}
