//! The agent-facing conformance suite: Claude Code and Codex as their own documentation
//! defines them. Recorded-shape fixtures in `tests/agents/` — every hook event of both
//! agents and their stream outputs — each naming its source in a `# source:` header line,
//! run through the real `baton` binary: exit codes, what stdout carries, what is stored and
//! the tokens counted. Plus `baton init --claude|--codex` as the agents read it, and
//! `baton mcp` started under exactly the environment Codex gives a stdio server.
//!
//! A fixture is `# key: value` header lines, then the payload or stream itself. The
//! headers say what to run (`args`, `command`, `via`, `exit`, `budget`, `steps`) and what
//! must be true (`session`, `tool`, `prints`, `expect-exit`, `status`, `tokens`,
//! `progress`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::{Project, baton_exe, code, stderr};

const ME: &str = "impl-1";

fn fixtures(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/agents")
        .join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", root.display());
    files
}

/// A fixture's headers and its body (everything after them).
struct Fixture {
    name: String,
    headers: BTreeMap<String, String>,
    body: String,
}

impl Fixture {
    fn read(path: &Path) -> Self {
        let text = std::fs::read_to_string(path).unwrap();
        let mut headers = BTreeMap::new();
        let mut body = String::new();
        for line in text.lines() {
            match line.strip_prefix("# ") {
                Some(h) if body.is_empty() => {
                    let (k, v) = h.split_once(": ").expect("a `# key: value` header");
                    headers.insert(k.to_owned(), v.to_owned());
                }
                _ => {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
        let name = path.display().to_string();
        assert!(
            headers.get("source").is_some_and(|s| s.len() > 20),
            "{name} does not name its source"
        );
        Self {
            name,
            headers,
            body,
        }
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.headers.get(key).map(String::as_str)
    }

    fn want(&self, key: &str) -> &str {
        self.get(key)
            .unwrap_or_else(|| panic!("{}: no `# {key}:` header", self.name))
    }
}

/// The events `baton export` holds, as JSON values.
fn events(project: &Project) -> Vec<Value> {
    project
        .ok(None, &["export"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// One hook call as the agent makes it. A hook drops its event rather than overrun its
/// 150 ms budget (and says so on stderr); on a loaded machine that can happen, and it is
/// not what these tests check, so a dropped call is made again.
fn hook_call(project: &Project, fixture: &Fixture, inject: bool) -> std::process::Output {
    for _ in 0..20 {
        let out = hook_once(project, fixture, inject);
        if !stderr(&out).contains("event dropped") {
            return out;
        }
    }
    panic!("{}: every call dropped its event", fixture.name)
}

fn hook_once(project: &Project, fixture: &Fixture, inject: bool) -> std::process::Output {
    let mut args: Vec<&str> = vec!["hook"];
    args.extend(
        fixture
            .want("args")
            .split_whitespace()
            .filter(|a| inject || *a != "--inject"),
    );
    let payload = fixture.body.trim_end();
    let by_argument = fixture.get("via") == Some("argument");
    if by_argument {
        args.push(payload);
    }
    let mut child = project
        .cmd(Some(ME), &args)
        .env_remove("BATON_RUN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    if !by_argument {
        // A hook may stop reading once its budget is spent: the pipe closing is the agent's
        // signal that the hook is done with its input, not an error here.
        match stdin.write_all(payload.as_bytes()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            other => other.unwrap(),
        }
    }
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// Every hook event of both agents: exit 0; stdout is the packet exactly where the agent
/// reads it into the context (with --inject), else nothing; the stored event names the
/// agent, the event, the session and the tool.
#[test]
fn agents_every_hook_event_exits_0_prints_by_the_rules_and_stores_session_and_tool() {
    let project = Project::new(&[(ME, "executor")]);
    let mut seen = 0;
    let mut failed = Vec::new();
    for dir in ["claude/hooks", "codex/hooks"] {
        for path in fixtures(dir) {
            let fixture = Fixture::read(&path);
            let outcome = std::panic::catch_unwind(|| {
                let mut seen = 0;
                let args: Vec<&str> = fixture.want("args").split_whitespace().collect();
                for inject in [true, false] {
                    let out = hook_call(&project, &fixture, inject);
                    let name = &fixture.name;
                    assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
                    let stdout = String::from_utf8(out.stdout).unwrap();
                    if inject && fixture.want("prints") == "packet" {
                        assert!(
                            stdout.starts_with(&format!("# Resume: {ME}")),
                            "{name} printed {stdout:?}"
                        );
                    } else {
                        assert_eq!(stdout, "", "{name} (inject {inject}) printed");
                    }
                    let stored = events(&project).pop().unwrap();
                    assert_eq!(stored["kind"], "run.changed", "{name}: {stored}");
                    let data = &stored["data"];
                    assert_eq!(data["what"], "hook", "{name}: {stored}");
                    assert_eq!(data["agent"], args[0], "{name}: {stored}");
                    assert_eq!(data["event"], args[1], "{name}: {stored}");
                    assert_eq!(data["session"], fixture.want("session"), "{name}: {stored}");
                    match fixture.want("tool") {
                        "-" => assert!(data.get("tool").is_none(), "{name}: {stored}"),
                        tool => assert_eq!(data["tool"], tool, "{name}: {stored}"),
                    }
                    assert_eq!(stored["actor"], ME, "{name}: {stored}");
                    seen += 1;
                }
                seen
            });
            match outcome {
                Ok(n) => seen += n,
                Err(_) => failed.push(fixture.name.clone()),
            }
        }
    }
    assert!(failed.is_empty(), "fixtures that failed: {failed:#?}");
    assert_eq!(seen, 2 * (12 + 8), "a fixture went missing");
}

#[test]
fn agents_a_hook_payload_over_1_mib_keeps_its_session_and_tool() {
    let project = Project::new(&[(ME, "executor")]);
    let fixture = Fixture::read(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/claude/hooks/PostToolUse.hook"),
    );
    let mut payload: Value = serde_json::from_str(&fixture.body).unwrap();
    // A tool that printed 3 MiB: Claude Code passes it whole in tool_response.
    payload["tool_response"]["stdout"] = json!("x".repeat(3 * 1024 * 1024));
    let big = Fixture {
        body: payload.to_string(),
        ..fixture
    };
    assert!(big.body.len() > 3 * 1024 * 1024);
    let out = hook_call(&project, &big, false);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let stored = events(&project).pop().unwrap();
    assert_eq!(stored["data"]["session"], big.want("session"), "{stored}");
    assert_eq!(stored["data"]["tool"], "Edit", "{stored}");
    // Nothing of the payload beyond those fields is stored.
    assert!(
        stored.to_string().len() < 1024,
        "{}",
        stored.to_string().len()
    );
}

/// A directory holding `claude` and `codex` stand-ins that print the fixture named by
/// BATON_FIXTURE and exit with BATON_FIXTURE_EXIT, so `baton run` sees the command line
/// an agent is started with and the stream it prints.
fn stand_ins() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for agent in ["claude", "codex"] {
        let path = dir.path().join(agent);
        std::fs::write(
            &path,
            "#!/bin/sh\ngrep -v '^# ' \"$BATON_FIXTURE\"\nexit \"$BATON_FIXTURE_EXIT\"\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

fn path_with(dir: &Path) -> String {
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Both agents' stream outputs (new and resumed sessions or threads, parallel tool calls,
/// subagents, several results or totals, a failed turn) through `baton run`: the stream
/// passes through untouched, the exit code is the agent's, and the tokens recorded are
/// what this run spent — unknown when the stream cannot tell.
#[test]
fn agents_stream_outputs_record_what_this_run_spent() {
    let shims = stand_ins();
    let mut seen = 0;
    let mut failed = Vec::new();
    for dir in ["claude/stream", "codex/stream"] {
        for path in fixtures(dir) {
            let fixture = Fixture::read(&path);
            let outcome = std::panic::catch_unwind(|| {
                let name = &fixture.name;
                let project = Project::new(&[(ME, "executor")]);
                let mut args: Vec<String> = vec!["run".into()];
                if let Some(budget) = fixture.get("budget") {
                    args.extend(["--budget-tokens".into(), budget.into()]);
                }
                if let Some(steps) = fixture.get("steps") {
                    args.extend(["--steps".into(), steps.into()]);
                }
                args.push("--".into());
                args.extend(fixture.want("command").split_whitespace().map(String::from));
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let out = project
                    .cmd(Some(ME), &args)
                    .env("PATH", path_with(shims.path()))
                    .env("BATON_FIXTURE", &path)
                    .env("BATON_FIXTURE_EXIT", fixture.want("exit"))
                    .stdin(Stdio::null())
                    .output()
                    .unwrap();
                let expect_exit: i32 = fixture.want("expect-exit").parse().unwrap();
                assert_eq!(code(&out), expect_exit, "{name}: {}", stderr(&out));
                assert_eq!(
                    String::from_utf8(out.stdout).unwrap(),
                    fixture.body,
                    "{name}: the agent's stdout was changed"
                );
                let runs = project.json(None, &["runs", "--all"]);
                let run = &runs["items"][0];
                assert_eq!(
                    run["status"],
                    fixture.get("status").unwrap_or("done"),
                    "{name}: {run}"
                );
                match fixture.want("tokens") {
                    "unknown" => assert!(run["tokens"].is_null(), "{name}: {run}"),
                    want => {
                        let got = format!(
                            "input={} cached={} output={}",
                            run["tokens"]["input"],
                            run["tokens"]["cached_input"],
                            run["tokens"]["output"]
                        );
                        assert_eq!(got, want, "{name}: {run}");
                    }
                }
                if let Some(progress) = fixture.get("progress") {
                    let got = format!("{}/{}", run["progress"]["done"], run["progress"]["total"]);
                    assert_eq!(got, progress, "{name}: {run}");
                }
            });
            match outcome {
                Ok(()) => seen += 1,
                Err(_) => failed.push(fixture.name.clone()),
            }
        }
    }
    assert!(failed.is_empty(), "fixtures that failed: {failed:#?}");
    assert_eq!(seen, 12, "a fixture went missing");
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn agents_init_codex_forwards_the_identity_and_respects_the_hooks_setting() {
    // A user who turned hooks off keeps them off; no deprecated key is ever added.
    let project = Project::new(&[]);
    let config = project.path().join(".codex/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let mine = "model = \"o4\"\n\n[features]\nhooks = false\n\n[mcp_servers.baton]\ncommand = \"/opt/tools/baton\"\nstartup_timeout_sec = 20\nenv_vars = [\"MY_TOKEN\"]\n";
    std::fs::write(&config, mine).unwrap();
    let first = project.json(None, &["init", "--codex"]);
    let text = read(&config);
    assert!(text.contains("hooks = false"), "{text}");
    assert!(!text.contains("codex_hooks"), "{text}");
    assert!(!text.contains("hooks = true"), "{text}");
    let doc: toml_edit::DocumentMut = text.parse().unwrap();
    let baton = &doc["mcp_servers"]["baton"];
    // The user's own path to baton stands; the tool timeout covers the longest wait.
    assert_eq!(
        baton["command"].as_str(),
        Some("/opt/tools/baton"),
        "{text}"
    );
    assert_eq!(baton["tool_timeout_sec"].as_integer(), Some(310), "{text}");
    assert_eq!(
        baton["startup_timeout_sec"].as_integer(),
        Some(20),
        "{text}"
    );
    let names: Vec<&str> = baton["env_vars"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(
        names,
        ["MY_TOKEN", "BATON_AS", "BATON_PROJECT", "BATON_RUN"],
        "{text}"
    );
    let steps = first["steps"].to_string();
    for needle in ["/hooks", "trust", "~/.codex/config.toml", "notify"] {
        assert!(steps.contains(needle), "{needle} missing from {steps}");
    }
    let again = project.json(None, &["init", "--codex"]);
    for w in again["agents"].as_array().unwrap() {
        assert_eq!(w["result"], "unchanged", "the second init changed {w}");
    }
    assert_eq!(
        again["steps"], first["steps"],
        "the steps are printed every time"
    );

    // Codex's whole lifecycle, each with a timeout Codex takes as it is (it clamps a
    // SessionEnd timeout above 3 s, and warns on every start).
    let hooks: Value =
        serde_json::from_str(&read(&project.path().join(".codex/hooks.json"))).unwrap();
    for event in [
        "SessionStart",
        "SessionEnd",
        "SubagentStart",
        "SubagentStop",
        "PreCompact",
        "PostCompact",
    ] {
        let hook = &hooks["hooks"][event][0]["hooks"][0];
        assert_eq!(
            hook["command"],
            json!(format!(
                "baton hook codex {event}{}",
                if event == "SessionStart" {
                    " --inject"
                } else {
                    ""
                }
            )),
            "{hooks}"
        );
        let limit = if event == "SessionEnd" { 3 } else { 5 };
        assert!(
            hook["timeout"].as_u64().is_some_and(|t| t <= limit),
            "{event}: {hook}"
        );
    }

    // Nothing set either way: the current key, never the deprecated alias.
    let fresh = Project::new(&[]);
    let human = fresh.ok(None, &["init", "--codex"]);
    assert!(
        human.contains("Once, by hand:") && human.contains("/hooks"),
        "{human}"
    );
    let text = read(&fresh.path().join(".codex/config.toml"));
    let doc: toml_edit::DocumentMut = text.parse().unwrap();
    assert_eq!(doc["features"]["hooks"].as_bool(), Some(true), "{text}");
    assert!(!text.contains("codex_hooks"), "{text}");
    // The deprecated key set by the user is their choice too.
    let old = Project::new(&[]);
    std::fs::create_dir_all(old.path().join(".codex")).unwrap();
    std::fs::write(
        old.path().join(".codex/config.toml"),
        "[features]\ncodex_hooks = false\n",
    )
    .unwrap();
    old.ok(None, &["init", "--codex"]);
    let text = read(&old.path().join(".codex/config.toml"));
    assert!(
        text.contains("codex_hooks = false") && !text.contains("hooks = true"),
        "{text}"
    );
}

#[test]
fn agents_init_claude_keeps_what_works_and_injects_only_at_session_start() {
    let project = Project::new(&[]);
    let first = project.json(None, &["init", "--claude"]);
    let settings: Value =
        serde_json::from_str(&read(&project.path().join(".claude/settings.json"))).unwrap();
    let hooks = settings["hooks"].as_object().unwrap();
    for (event, groups) in hooks {
        let command = groups[0]["hooks"][0]["command"].as_str().unwrap();
        assert_eq!(
            command.ends_with(" --inject"),
            event == "SessionStart",
            "{event}: {command}"
        );
    }
    assert!(hooks.contains_key("PreCompact"), "{settings}");
    let mcp: Value = serde_json::from_str(&read(&project.path().join(".mcp.json"))).unwrap();
    assert_eq!(
        mcp["mcpServers"]["baton"],
        json!({"command": "baton", "args": ["mcp"]})
    );
    let steps = first["steps"].to_string();
    assert!(
        steps.contains(".mcp.json") && steps.contains("/mcp"),
        "{steps}"
    );
    let again = project.json(None, &["init", "--claude"]);
    for w in again["agents"].as_array().unwrap() {
        assert_eq!(w["result"], "unchanged", "the second init changed {w}");
    }
}

/// What Codex passes a stdio MCP server of the environment it runs in
/// (codex-rs rmcp-client `utils.rs`, DEFAULT_ENV_VARS on Unix).
const CODEX_WHITELIST: [&str; 10] = [
    "HOME", "LOGNAME", "PATH", "SHELL", "USER", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ",
];

/// Starts the server `.codex/config.toml` names exactly as Codex would: `env -i`, the
/// whitelist, then the names the entry forwards (`env_vars`), from `agent_env`.
fn codex_starts_mcp(
    project: &Project,
    agent_env: &[(&str, String)],
    bin: &Path,
    cwd: &Path,
) -> std::process::Child {
    let text = read(&project.path().join(".codex/config.toml"));
    let doc: toml_edit::DocumentMut = text.parse().unwrap();
    let entry = &doc["mcp_servers"]["baton"];
    let command = entry["command"].as_str().unwrap();
    let args: Vec<&str> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let forwarded: Vec<&str> = entry
        .get("env_vars")
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    // The environment Codex itself runs in: the test's, with `baton` on PATH and the
    // agent's identity set by whoever started Codex.
    let mut parent: BTreeMap<String, String> = std::env::vars().collect();
    parent.insert("PATH".into(), path_with(bin));
    for (k, v) in agent_env {
        parent.insert((*k).into(), v.clone());
    }
    let mut cmd = Command::new("env");
    cmd.arg("-i");
    for name in CODEX_WHITELIST.iter().chain(forwarded.iter()) {
        if let Some(value) = parent.get(*name) {
            cmd.arg(format!("{name}={value}"));
        }
    }
    cmd.arg(command).args(&args);
    cmd.current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn env -i")
}

/// Sends one JSON-RPC request line and reads lines until its response.
pub(crate) fn request(
    stdin: &mut impl Write,
    stdout: &mut impl BufRead,
    id: u64,
    method: &str,
    params: Value,
) -> Value {
    let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    writeln!(stdin, "{line}").unwrap();
    stdin.flush().unwrap();
    loop {
        let mut text = String::new();
        assert!(
            stdout.read_line(&mut text).unwrap() > 0,
            "the server closed stdout before answering {method}"
        );
        let v: Value = serde_json::from_str(&text).unwrap();
        if v["id"] == json!(id) {
            return v;
        }
    }
}

#[test]
fn agents_codex_starts_baton_mcp_under_its_own_environment_rules() {
    let project = Project::new(&[(ME, "executor"), ("planner", "planner")]);
    project.ok(
        Some("planner"),
        &[
            "send",
            "--to",
            ME,
            "--type",
            "request",
            "--topic",
            "export",
            "--body",
            "export CSV, please",
        ],
    );
    project.ok(None, &["init", "--codex"]);
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(baton_exe(), bin.path().join("baton")).unwrap();
    let agent_env = [
        ("BATON_AS", ME.to_owned()),
        ("BATON_PROJECT", project.path().display().to_string()),
        ("BATON_RUN", "01RUNFROMTHEWRAPPER".to_owned()),
    ];
    // Codex's working directory need not be the project: BATON_PROJECT says where it is.
    let elsewhere = tempfile::tempdir().unwrap();
    let mut child = codex_starts_mcp(&project, &agent_env, bin.path(), elsewhere.path());
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let init = request(
        &mut stdin,
        &mut stdout,
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "codex-mcp-client", "version": "0.0.0"}}),
    );
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    let inbox = request(
        &mut stdin,
        &mut stdout,
        2,
        "tools/call",
        json!({"name": "inbox", "arguments": {}}),
    );
    assert_eq!(inbox["result"]["isError"], json!(false), "{inbox}");
    assert!(inbox.to_string().contains("export CSV"), "{inbox}");
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    // The entry before this fix (no env_vars): the identity never arrives.
    let text = read(&project.path().join(".codex/config.toml"));
    let mut doc: toml_edit::DocumentMut = text.parse().unwrap();
    doc["mcp_servers"]["baton"]
        .as_table_mut()
        .unwrap()
        .remove("env_vars");
    std::fs::write(project.path().join(".codex/config.toml"), doc.to_string()).unwrap();
    let mut child = codex_starts_mcp(&project, &agent_env, bin.path(), project.path());
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("env_vars"), "{}", stderr(&out));
}
