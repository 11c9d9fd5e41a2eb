//! The real Claude Code and Codex binaries (pinned in `tests/node/package.json`) against a
//! model stand-in of the tests' own on loopback (`tests/agents/model_server.py`), in a
//! project set up by `baton init --claude` / `--codex` alone. The model answers the first
//! turn with a call of Baton's `inbox` tool, then a helper (Claude Code's `Agent`, Codex's
//! `spawn_agent`), then text; it records what the agent sent back, so a test sees the
//! tool's real answer. The stand-in is the only one: the agents, their MCP client, their
//! hooks and Baton are real.
//!
//! Offline: each agent gets a HOME (and CODEX_HOME) of its own, the stand-in as its model
//! endpoint, its update checks, telemetry, plugin and app syncs turned off, and the
//! stand-in as its HTTP(S) proxy, which refuses and records any request for another host
//! (each test asserts there was none).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};

use serde_json::{Value, json};

use crate::common::{Project, baton_exe, code, stderr};
use crate::node;

const ME: &str = "impl-1";
/// The call id the stand-in gives its call of the Baton tool (model_server.py).
const BATON_CALL: &str = "call_baton_1";
/// What the stand-in says when the round is done.
const FINAL_TEXT: &str = "BATON-ROUND-DONE";

/// The model stand-in, stopped on drop.
struct ModelServer {
    child: Child,
    stdin: Option<ChildStdin>,
    port: u16,
    record: PathBuf,
    _dir: tempfile::TempDir,
}

impl ModelServer {
    /// Starts the stand-in, scripted to call `tool` and then the helper tool `helper`.
    fn start(tool: &str, helper: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("requests.jsonl");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/model_server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .env("MODEL_RECORD", &record)
            .env("MODEL_TOOL", tool)
            .env("MODEL_HELPER", helper)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run python3 (the model stand-in)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the stand-in printed {line:?}, not its port"));
        Self {
            stdin: child.stdin.take(),
            child,
            port,
            record,
            _dir: dir,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request recorded so far.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// What the agent sent back as the Baton tool's result.
    fn tool_result(&self) -> String {
        let requests = self.requests();
        requests
            .iter()
            .find_map(|r| r["results"][BATON_CALL].as_str().map(str::to_owned))
            .unwrap_or_else(|| panic!("no result of the Baton tool came back: {requests:#?}"))
    }

    /// Asserts that the agents asked for no other host.
    fn assert_offline(&self) {
        let outside: Vec<Value> = self
            .requests()
            .into_iter()
            .filter(|r| r.get("outside").is_some())
            .collect();
        assert!(outside.is_empty(), "the agent reached out: {outside:#?}");
    }

    /// The helpers' conversations the stand-in answered.
    fn helper_requests(&self) -> usize {
        self.requests()
            .iter()
            .filter(|r| r["helper"] == json!(true))
            .count()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One stage at a time: each agent is a heavy process, and on a loaded machine a hook
/// that overruns its budget drops its event (by design), which these tests would take
/// for a hook that never ran.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A project set up by `baton init --claude|--codex`, with a request from `planner` in
/// ME's inbox, `baton` on PATH and an empty HOME.
struct Stage {
    _turn: std::sync::MutexGuard<'static, ()>,
    project: Project,
    home: tempfile::TempDir,
    bin: tempfile::TempDir,
    server: ModelServer,
    /// The id of the request sent to ME before the agent starts.
    request: String,
}

impl Stage {
    fn new(agent: &str, helper: &str) -> Self {
        let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let project = Project::new(&[(ME, "executor"), ("planner", "planner")]);
        let request = project.ok(
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
                "export the report as CSV",
            ],
        );
        project.ok(None, &["init", agent]);
        let bin = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(baton_exe(), bin.path().join("baton")).unwrap();
        Self {
            _turn: turn,
            project,
            home: tempfile::tempdir().unwrap(),
            bin,
            server: ModelServer::start("inbox", helper),
            request,
        }
    }

    /// `program` with the environment every agent here gets: nothing of the test's own
    /// but PATH's system part, `baton` and Node 22 first on PATH, the identity, a HOME of
    /// its own, and the stand-in as the proxy for anything not on loopback.
    fn command(&self, program: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(self.project.path())
            .env_clear()
            .env(
                "PATH",
                format!(
                    "{}:{}:/usr/local/bin:/usr/bin:/bin",
                    self.bin.path().display(),
                    node::dir().join("node_modules/.bin").display()
                ),
            )
            .env("HOME", self.home.path())
            .env("LANG", "C.UTF-8")
            .env("TERM", "dumb")
            .env("BATON_AS", ME)
            .env("HTTPS_PROXY", self.server.url())
            .env("HTTP_PROXY", self.server.url())
            .env("ALL_PROXY", self.server.url())
            .env("NO_PROXY", "127.0.0.1,localhost")
            .stdin(Stdio::null());
        cmd
    }

    /// `baton --as ME run -- program args…`, under the agent's environment.
    fn baton_run(&self, agent: Command) -> Output {
        let program = agent.get_program().to_owned();
        let args: Vec<_> = agent.get_args().map(|a| a.to_owned()).collect();
        let envs: Vec<_> = agent
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
            .collect();
        let mut cmd = self.command(&baton_exe());
        cmd.envs(envs)
            .args(["--as", ME, "run", "--"])
            .arg(program)
            .args(args);
        finished(cmd)
    }

    fn runs(&self) -> Vec<Value> {
        self.project.json(None, &["runs", "--all"])["items"]
            .as_array()
            .unwrap()
            .clone()
    }

    fn row(&self, id: &str) -> Value {
        let runs = self.runs();
        runs.iter()
            .find(|r| r["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no row {id}: {runs:#?}"))
    }

    /// The hook events (as the agent named them) that landed on `row`.
    fn events_on(&self, rows: &[&str]) -> BTreeSet<String> {
        self.project
            .ok(None, &["export"])
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["data"]["what"] == "hook")
            .filter(|e| rows.iter().any(|r| e["data"]["row"] == *r))
            .map(|e| e["data"]["event"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The events Baton's hooks are installed for in the agent's configuration file.
    fn installed(&self, file: &str) -> BTreeSet<String> {
        let text = std::fs::read_to_string(self.project.path().join(file)).unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        doc["hooks"].as_object().unwrap().keys().cloned().collect()
    }

    /// Asserts the agent called Baton's tool and got the real answer: the request sent
    /// to ME beforehand, by its id.
    fn assert_real_answer(&self) {
        let result = self.server.tool_result();
        assert!(
            result.contains(&self.request) && result.contains("export the report as CSV"),
            "the inbox the agent got holds no request {}: {result}",
            self.request
        );
        self.server.assert_offline();
    }
}

/// Runs `cmd` to its end, within two minutes (an agent that hangs fails the test).
fn finished(mut cmd: Command) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {:?}: {e}", cmd.get_program()));
    let id = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(120)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // Ours to end: the agent we started, by its pid.
            let _ = Command::new("kill").arg("-9").arg(id.to_string()).status();
            panic!("{:?} did not finish within two minutes", cmd.get_program());
        }
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The row of `baton run`'s one run.
fn wrapper_run(runs: &[Value]) -> &Value {
    let wrapped: Vec<&Value> = runs.iter().filter(|r| r["source"] == "wrapper").collect();
    assert_eq!(wrapped.len(), 1, "{runs:#?}");
    wrapped[0]
}

/// Asserts both token counts were read from the agent's stream.
fn assert_tokens_read(run: &Value) {
    for part in ["input", "output"] {
        assert!(
            run["tokens"][part].as_u64().is_some_and(|n| n > 0),
            "{part} tokens unread: {run}"
        );
    }
}

/// Runs `scenario`, and once more when it fails: a hook over its 150 ms budget on a loaded
/// machine drops its event by design, which a scenario cannot tell from a hook that never
/// ran. A failure that repeats is the test's.
fn again_once(scenario: fn()) {
    if std::panic::catch_unwind(scenario).is_err() {
        eprintln!("real_agents: the scenario failed once (above); running it again");
        scenario();
    }
}

/// The rows under `parent`.
fn helpers_of(runs: &[Value], parent: &str) -> Vec<Value> {
    runs.iter()
        .filter(|r| r["parent"] == parent)
        .cloned()
        .collect()
}

// ---- Claude Code -----------------------------------------------------------------------

fn claude(stage: &Stage, args: &[&str]) -> Command {
    let mut cmd = stage.command(&node::bin("claude"));
    cmd.env("ANTHROPIC_BASE_URL", stage.server.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-stand-in")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        // Unattended (`-p`) runs cannot ask for a tool's permission: Baton's are allowed.
        .args(["--allowedTools", "mcp__baton"])
        .args(["--output-format", "stream-json", "--verbose"])
        .args(args);
    cmd
}

/// The session id Claude Code's stream names.
fn claude_session(out: &Output) -> String {
    stdout(out)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|v| v["session_id"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no session id in {}", stdout(out)))
}

fn claude_calls_baton_over_mcp_and_every_hook_lands_on_its_session() {
    let stage = Stage::new("--claude", "Agent");
    let out = finished(claude(&stage, &["-p", "What do I owe?"]));
    assert_eq!(code(&out), 0, "{}\n{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains(FINAL_TEXT), "{}", stdout(&out));
    stage.assert_real_answer();
    assert_eq!(stage.server.helper_requests(), 1, "the helper never ran");

    let session = format!("claude:{}", claude_session(&out));
    let row = stage.row(&session);
    assert_eq!(row["status"], "ended", "SessionEnd landed: {row}");
    assert_eq!(row["hooks_skipped"], false, "{row}");
    let tools = strings(&row["tools"]);
    for tool in ["mcp__baton__inbox", "Agent"] {
        assert!(
            tools.contains(&tool.to_owned()),
            "{tool} not counted: {row}"
        );
    }
    let runs = stage.runs();
    let helpers = helpers_of(&runs, &session);
    assert_eq!(helpers.len(), 1, "{runs:#?}");
    let helper = &helpers[0];
    assert_eq!(
        (&helper["source"], &helper["status"], &helper["agent_type"]),
        (&json!("helper"), &json!("ended"), &json!("general-purpose")),
        "{helper}"
    );

    // A compaction, as a person asks for it: Claude Code ends internal forks with a
    // SubagentStop of no kind, which makes no helper row.
    let id = claude_session(&out);
    let compacted = finished(claude(&stage, &["-p", "/compact", "--resume", &id]));
    assert_eq!(code(&compacted), 0, "{}", stderr(&compacted));
    stage.server.assert_offline();
    let forks: Vec<Value> = stage
        .project
        .ok(None, &["export"])
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["data"]["event"] == "SubagentStop" && e["data"]["agent_type"].is_null())
        .collect();
    assert!(
        !forks.is_empty(),
        "this Claude Code no longer stops forks on /compact; the rule may go"
    );
    let runs = stage.runs();
    assert_eq!(
        helpers_of(&runs, &session).len(),
        1,
        "a compaction fork became a helper: {runs:#?}"
    );

    // Every hook `baton init --claude` installs landed, but Notification, which asks for
    // a person (a permission prompt, an idle wait) and an unattended run never does.
    let helper_id = helper["id"].as_str().unwrap();
    let landed = stage.events_on(&[&session, helper_id]);
    let mut installed = stage.installed(".claude/settings.json");
    installed.remove("Notification");
    let missing: Vec<_> = installed.difference(&landed).collect();
    assert!(missing.is_empty(), "hooks that never landed: {missing:?}");
}

fn claude_inside_baton_run_has_its_tokens_read_and_its_hooks_on_the_run() {
    let stage = Stage::new("--claude", "Agent");
    let out = stage.baton_run(claude(&stage, &["-p", "What do I owe?"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    stage.assert_real_answer();
    let runs = stage.runs();
    let run = wrapper_run(&runs);
    assert_eq!(run["status"], "done", "{run}");
    assert_tokens_read(run);
    assert_eq!(run["session"], json!(claude_session(&out)), "{run}");
    assert!(
        strings(&run["tools"]).contains(&"mcp__baton__inbox".to_owned()),
        "{run}"
    );
    let id = run["id"].as_str().unwrap();
    let helpers = helpers_of(&runs, id);
    assert_eq!(helpers.len(), 1, "{runs:#?}");
    assert_eq!(helpers[0]["status"], "ended", "{}", helpers[0]);
    // No session row beside the run: the hooks knew their run.
    assert!(runs.iter().all(|r| r["source"] != "session"), "{runs:#?}");
}

// ---- Codex -----------------------------------------------------------------------------

/// CODEX_HOME's config.toml: the stand-in as the model provider, no update check,
/// analytics, feedback, plugin or app sync (each reaches OpenAI or GitHub), `notify` as
/// `baton init --codex` tells a person to set it, and the project trusted (the answer to
/// Codex's first question in it).
fn codex_home(stage: &Stage) -> PathBuf {
    let home = stage.home.path().join(".codex");
    if !home.exists() {
        std::fs::create_dir_all(&home).unwrap();
        let config = format!(
            r#"model = "stand-in"
model_provider = "stand-in"
check_for_update_on_startup = false
notify = ["baton", "hook", "codex", "{notify}"]

[model_providers.stand-in]
name = "model stand-in"
base_url = "{url}/v1"
wire_api = "responses"

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false
apps = false
remote_plugin = false

[projects."{project}"]
trust_level = "trusted"
"#,
            notify = baton_core::run::NOTIFY_EVENT,
            url = stage.server.url(),
            project = stage.project.path().display(),
        );
        std::fs::write(home.join("config.toml"), config).unwrap();
    }
    home
}

fn codex(stage: &Stage, args: &[&str]) -> Command {
    // Its launcher is a Node script, run by the pinned Node first on PATH; started by its
    // own name, as people start it, so `baton run` knows a Codex thread from its command.
    let mut cmd = stage.command(&node::bin("codex"));
    cmd.env("CODEX_HOME", codex_home(stage)).args(args);
    cmd
}

fn codex_exec(stage: &Stage, extra: &[&str]) -> Command {
    let mut cmd = codex(stage, &["exec", "--skip-git-repo-check"]);
    cmd.args(extra).arg("What do I owe?");
    cmd
}

/// Sends one JSON-RPC request and reads lines until its answer; returns its result.
fn rpc(
    stdin: &mut impl Write,
    stdout: &mut impl BufRead,
    id: u64,
    method: &str,
    params: Value,
) -> Value {
    let answer = crate::agents::request(stdin, stdout, id, method, params);
    assert!(answer.get("error").is_none(), "{method}: {answer}");
    answer["result"].clone()
}

/// The project's hooks as Codex lists them (`hooks/list`): (key, hash, trust status).
fn codex_hooks(
    stdin: &mut impl Write,
    stdout: &mut impl BufRead,
    id: u64,
    cwd: &Path,
) -> Vec<(String, String, String)> {
    let listed = rpc(stdin, stdout, id, "hooks/list", json!({"cwds": [cwd]}));
    listed["data"][0]["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["source"] == "project")
        .map(|h| {
            (
                h["key"].as_str().unwrap().to_owned(),
                h["currentHash"].as_str().unwrap().to_owned(),
                h["trustStatus"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Trusts the project's hooks as a person does with `/hooks`: the TUI lists them
/// (`hooks/list`) and writes each one's hash under `[hooks.state]` in CODEX_HOME's
/// config.toml (`config/batchWrite`), through Codex's app server.
fn trust_hooks_as_hooks_does(stage: &Stage) {
    let mut child = codex(stage, &["app-server"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    rpc(
        &mut stdin,
        &mut stdout,
        1,
        "initialize",
        json!({"clientInfo": {"name": "baton-tests", "version": "0"}}),
    );
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "initialized"})
    )
    .unwrap();
    let cwd = stage.project.path();
    let hooks = codex_hooks(&mut stdin, &mut stdout, 2, cwd);
    assert_eq!(
        hooks.len(),
        stage.installed(".codex/hooks.json").len(),
        "Codex does not list every hook Baton installed: {hooks:?}"
    );
    assert!(
        hooks.iter().all(|(_, _, trust)| trust == "untrusted"),
        "{hooks:?}"
    );
    let state: serde_json::Map<String, Value> = hooks
        .iter()
        .map(|(key, hash, _)| (key.clone(), json!({"trusted_hash": hash})))
        .collect();
    rpc(
        &mut stdin,
        &mut stdout,
        3,
        "config/batchWrite",
        json!({"edits": [{"keyPath": "hooks.state", "value": state, "mergeStrategy": "upsert"}]}),
    );
    let hooks = codex_hooks(&mut stdin, &mut stdout, 4, cwd);
    assert!(
        hooks.iter().all(|(_, _, trust)| trust == "trusted"),
        "{hooks:?}"
    );
    drop(stdin);
    // Ours to end: the app server we started.
    let _ = child.kill();
    let _ = child.wait();
}

/// The thread id `codex exec` reports on stderr (`session id: …`).
fn codex_session(out: &Output) -> String {
    stderr(out)
        .lines()
        .find_map(|l| l.strip_prefix("session id: ").map(str::to_owned))
        .unwrap_or_else(|| panic!("no session id in {}", stderr(out)))
}

fn codex_with_its_hooks_trusted_calls_baton_and_every_hook_lands() {
    let stage = Stage::new("--codex", "spawn_agent");
    let hooks = std::fs::read_to_string(stage.project.path().join(".codex/hooks.json")).unwrap();
    trust_hooks_as_hooks_does(&stage);
    let out = finished(codex_exec(&stage, &[]));
    assert_eq!(code(&out), 0, "{}\n{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains(FINAL_TEXT), "{}", stdout(&out));
    assert!(
        !stderr(&out).contains("clamp"),
        "Codex changed a timeout Baton set: {}",
        stderr(&out)
    );
    stage.assert_real_answer();
    assert_eq!(stage.server.helper_requests(), 1, "the helper never ran");

    let session = format!("codex:{}", codex_session(&out));
    let row = stage.row(&session);
    assert_eq!(
        row["status"], "ended",
        "SessionEnd landed when exec exited: {row}"
    );
    assert_eq!(row["hooks_skipped"], false, "{row}");
    let tools = strings(&row["tools"]);
    assert!(tools.contains(&"mcp__baton__inbox".to_owned()), "{row}");
    let runs = stage.runs();
    let helpers = helpers_of(&runs, &session);
    assert_eq!(helpers.len(), 1, "{runs:#?}");
    let helper = &helpers[0];
    assert_eq!(
        (
            &helper["source"],
            &helper["status"],
            &helper["hooks_skipped"]
        ),
        (&json!("helper"), &json!("ended"), &json!(false)),
        "{helper}"
    );
    assert_eq!(
        runs.len(),
        2,
        "the helper's thread is its helper row, nothing beside: {runs:#?}"
    );

    // A compaction (the stand-in reports enough tokens to pass a low limit).
    let compacted = finished(codex_exec(
        &stage,
        &["-c", "model_auto_compact_token_limit=500"],
    ));
    assert_eq!(code(&compacted), 0, "{}", stderr(&compacted));
    stage.server.assert_offline();
    let second = format!("codex:{}", codex_session(&compacted));
    assert_eq!(stage.row(&second)["status"], "ended");

    let helper_id = helper["id"].as_str().unwrap();
    let landed = stage.events_on(&[&session, helper_id, &second]);
    let installed = stage.installed(".codex/hooks.json");
    let missing: Vec<_> = installed.difference(&landed).collect();
    assert!(missing.is_empty(), "hooks that never landed: {missing:?}");
    // Trust is by hash: Baton's hooks are as they were trusted.
    assert_eq!(
        std::fs::read_to_string(stage.project.path().join(".codex/hooks.json")).unwrap(),
        hooks
    );
}

fn codex_skips_hooks_nobody_trusted_and_baton_says_so() {
    let stage = Stage::new("--codex", "");
    let out = finished(codex_exec(&stage, &[]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // MCP needs no trust: the tool answered.
    stage.assert_real_answer();
    let session = format!("codex:{}", codex_session(&out));
    let row = stage.row(&session);
    assert_eq!(row["hooks_skipped"], true, "only notify spoke: {row}");
    assert!(strings(&row["tools"]).is_empty(), "{row}");
    let runs = stage.project.ok(None, &["runs"]);
    assert!(
        runs.contains("hooks skipped") && runs.contains("/hooks"),
        "{runs}"
    );
    let status = stage.project.ok(None, &["status"]);
    assert!(status.contains("hooks skipped"), "{status}");

    // Inside `baton run`, untrusted: the run's row says so, and its tokens are read.
    let out = stage.baton_run(codex_exec(&stage, &["--json"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let runs = stage.runs();
    let run = wrapper_run(&runs);
    assert_eq!(
        (&run["status"], &run["hooks_skipped"]),
        (&json!("done"), &json!(true)),
        "{run}"
    );
    assert_tokens_read(run);
}

fn codex_unattended_with_hook_trust_bypassed_inside_baton_run() {
    let stage = Stage::new("--codex", "spawn_agent");
    let out = stage.baton_run(codex_exec(
        &stage,
        &["--json", "--dangerously-bypass-hook-trust"],
    ));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    stage.assert_real_answer();
    let runs = stage.runs();
    let run = wrapper_run(&runs);
    assert_eq!(
        (&run["status"], &run["hooks_skipped"]),
        (&json!("done"), &json!(false)),
        "{run}"
    );
    assert!(
        strings(&run["tools"]).contains(&"mcp__baton__inbox".to_owned()),
        "{run}"
    );
    assert_tokens_read(run);
    let id = run["id"].as_str().unwrap();
    let helpers = helpers_of(&runs, id);
    assert_eq!(helpers.len(), 1, "{runs:#?}");
    assert_eq!(helpers[0]["status"], "ended", "{}", helpers[0]);
    assert!(
        runs.iter().all(|r| r["source"] != "session"),
        "every hook knew its run: {runs:#?}"
    );
}

// ---- the tests: each scenario, again once when it fails --------------------------------

#[test]
fn real_agents_claude_calls_baton_over_mcp_and_every_hook_lands_on_its_session() {
    again_once(claude_calls_baton_over_mcp_and_every_hook_lands_on_its_session);
}

#[test]
fn real_agents_claude_inside_baton_run_has_its_tokens_read_and_its_hooks_on_the_run() {
    again_once(claude_inside_baton_run_has_its_tokens_read_and_its_hooks_on_the_run);
}

#[test]
fn real_agents_codex_with_its_hooks_trusted_calls_baton_and_every_hook_lands() {
    again_once(codex_with_its_hooks_trusted_calls_baton_and_every_hook_lands);
}

#[test]
fn real_agents_codex_skips_hooks_nobody_trusted_and_baton_says_so() {
    again_once(codex_skips_hooks_nobody_trusted_and_baton_says_so);
}

#[test]
fn real_agents_codex_unattended_with_hook_trust_bypassed_inside_baton_run() {
    again_once(codex_unattended_with_hook_trust_bypassed_inside_baton_run);
}
