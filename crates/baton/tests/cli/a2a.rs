//! Participants as A2A 1.0 agents, driven by the official Python SDK (`a2a-sdk`, pinned)
//! against a real `baton serve`: the card resolved by the SDK's resolver, tasks sent,
//! worked on with the command line, read back, listed and canceled, a resend that creates
//! nothing, another project's key that finds nothing, and a task read after a restart; and
//! the other way, a participant standing for a small agent made with the SDK's server side
//! (`tests/a2a/agent.py`), whose requests come back completed or asking a question.
//!
//! The SDK lives in a virtual environment under the cargo target dir, made on first use
//! like the MCP clients' (`crate::mcp::make_venv`). Without python3, its venv module or
//! PyPI these tests fail, saying so: they never skip.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::common::{baton_exe, postgres_schema, stderr};
use crate::mcp::{Venv, make_venv};
use crate::server::{Serving, admin, serve, serve_in};

/// The SDK the clients are written against; pinned so a new release cannot change what
/// these tests mean.
const A2A_VENV: Venv = Venv {
    name: "a2a-venv",
    requirements: &["a2a-sdk[http-server]==1.3.0", "uvicorn==0.55.0"],
    check: "import importlib.metadata as m, a2a.client, a2a.server, uvicorn; \
            assert m.version('a2a-sdk') == '1.3.0'",
    tests: "A2A",
};

fn python() -> &'static Path {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match PYTHON.get_or_init(|| make_venv(&A2A_VENV)) {
        Ok(python) => python,
        Err(e) => panic!("{e}"),
    }
}

/// One SDK call (`tests/a2a/client.py`) on the agent at `base` with key `token`: its
/// one-line outcome, `{"ok": …}` or `{"error": CLASS, "message": …}`.
fn sdk(base: &str, token: &str, args: &[&str]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/a2a/client.py");
    let out = Command::new(python())
        .arg("-B")
        .arg(&script)
        .args([base, token])
        .args(args)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "client.py {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("client.py {args:?} printed {stdout:?}: {e}"))
}

pub(crate) fn ok(answer: Value) -> Value {
    assert!(answer.get("ok").is_some(), "the SDK call failed: {answer}");
    answer["ok"].clone()
}

/// `baton ARGS --json` as the key's participant, over the server (`BATON_URL`).
pub(crate) fn cli(server: &Serving, token: &str, args: &[&str]) -> Value {
    cli_in(server, "shop", token, args)
}

/// [`cli`] in `project`.
fn cli_in(server: &Serving, project: &str, token: &str, args: &[&str]) -> Value {
    let out = Command::new(baton_exe())
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_AS")
        .env_remove("BATON_DB")
        .env(
            "BATON_URL",
            format!("{}/v1/projects/{project}", server.base),
        )
        .env("BATON_KEY", token)
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

pub(crate) struct Shop {
    _dir: tempfile::TempDir,
    pub(crate) url: String,
    pub(crate) planner: String,
    pub(crate) executor: String,
    pub(crate) stranger: String,
}

/// Project `shop` (a planner that hands out work, an executor that takes it on topics
/// `billing` and `billing-*`), and project `other` with a participant of its own, in a
/// directory of SQLite projects.
pub(crate) fn shop() -> Shop {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("projects").display());
    shop_in(dir, url)
}

/// The same projects in a schema of their own (named by `test`, as tests run at once) on
/// the test PostgreSQL.
pub(crate) fn shop_on_postgresql(test: &str) -> Shop {
    shop_in(
        tempfile::tempdir().unwrap(),
        postgres_schema(&format!("baton_a2a_{test}_{}", std::process::id())),
    )
}

fn shop_in(dir: tempfile::TempDir, url: String) -> Shop {
    admin(&url, None, &["project", "add", "shop"]);
    admin(&url, None, &["project", "add", "other"]);
    admin(
        &url,
        Some("shop"),
        &["agent", "add", "planner", "--role", "planner"],
    );
    admin(
        &url,
        Some("shop"),
        &[
            "agent",
            "add",
            "impl-1",
            "--role",
            "executor",
            "--topics",
            "billing,billing-*",
        ],
    );
    admin(
        &url,
        Some("other"),
        &["agent", "add", "outsider", "--role", "planner"],
    );
    let token = |project: &str, who: &str| -> String {
        admin(
            &url,
            Some(project),
            &["key", "issue", who, "--scope", "write"],
        )["token"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    Shop {
        planner: token("shop", "planner"),
        executor: token("shop", "impl-1"),
        stranger: token("other", "outsider"),
        url,
        _dir: dir,
    }
}

pub(crate) fn agent(server: &Serving, project: &str, participant: &str) -> String {
    format!("{}/v1/projects/{project}/a2a/{participant}", server.base)
}

pub(crate) fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or("")
}

#[test]
fn an_a2a_client_hands_work_to_a_participant_and_reads_it_back_after_a_restart() {
    hand_work_over_and_read_it_back(&shop());
}

#[test]
#[cfg_attr(
    not(baton_test_postgres),
    ignore = "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES"
)]
fn an_a2a_client_hands_work_to_a_participant_on_postgresql_and_reads_it_back_after_a_restart() {
    hand_work_over_and_read_it_back(&shop_on_postgresql("py"));
}

/// The round of an A2A client with `shop`: card, send, resend, work, completion, list,
/// another project's key, a restart.
fn hand_work_over_and_read_it_back(shop: &Shop) {
    let server = serve(&shop.url);
    let base = agent(&server, "shop", "impl-1");

    // The card, resolved by the SDK from the agent's base URL and parsed strictly.
    let card = ok(sdk(&base, &shop.planner, &["card"]));
    assert_eq!(card["name"], "impl-1");
    assert!(
        card["description"].as_str().unwrap().contains("executor"),
        "{card}"
    );
    assert_eq!(
        card["supportedInterfaces"],
        json!([{"url": base, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}])
    );
    assert_eq!(
        card["securitySchemes"]["baton-key"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    let skills: Vec<&str> = card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(skills, ["billing", "billing-*"]);

    // A task is a request in the participant's inbox.
    let task = ok(sdk(
        &base,
        &shop.planner,
        &["send", "msg-1", "billing", "Fix the invoice rounding"],
    ));
    let id = task["id"].as_str().unwrap().to_owned();
    assert_eq!(state(&task), "TASK_STATE_SUBMITTED", "{task}");
    assert_eq!(task["contextId"], "billing");
    let inbox = cli(&server, &shop.executor, &["inbox"]);
    assert_eq!(inbox["items"].as_array().unwrap().len(), 1, "{inbox}");
    assert_eq!(inbox["items"][0]["id"], id.as_str());
    assert_eq!(inbox["items"][0]["type"], "request");
    assert_eq!(inbox["items"][0]["from"], "planner");

    // The same messageId again creates nothing: the same task comes back.
    let again = ok(sdk(
        &base,
        &shop.planner,
        &["send", "msg-1", "billing", "Fix the invoice rounding"],
    ));
    assert_eq!(again["id"], id.as_str());
    let inbox = cli(&server, &shop.executor, &["inbox"]);
    assert_eq!(inbox["items"].as_array().unwrap().len(), 1, "{inbox}");

    // The participant reads it (working), then completes it with a note.
    cli(&server, &shop.executor, &["show", &id]);
    assert_eq!(
        state(&ok(sdk(&base, &shop.planner, &["get", &id]))),
        "TASK_STATE_WORKING"
    );
    let note = "Rounded half-even; the totals match the ledger";
    let landed = "https://ci.example.org/shop/runs/812";
    cli(
        &server,
        &shop.executor,
        &["receipt", "write", "--step", &id, "--artifact", landed],
    );
    cli(&server, &shop.executor, &["complete", &id, "--note", note]);
    let done = ok(sdk(&base, &shop.planner, &["get", &id]));
    assert_eq!(state(&done), "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(done["artifacts"][0]["name"], "completion note", "{done}");
    assert_eq!(done["artifacts"][0]["parts"], json!([{"text": note}]));
    assert_eq!(done["artifacts"][1]["name"], "receipt", "{done}");
    assert_eq!(done["artifacts"][1]["parts"][0], json!({"url": landed}));
    assert_eq!(
        done["artifacts"][1]["parts"][1]["data"]["step"],
        id.as_str()
    );
    assert_eq!(
        done["history"][0]["parts"],
        json!([{"text": "Fix the invoice rounding"}])
    );
    assert_eq!(done["history"][0]["role"], "ROLE_USER");
    // The client's message keeps its own id; the status time is the completion's.
    assert_eq!(done["history"][0]["messageId"], "msg-1", "{done}");
    let completed_at = done["status"]["timestamp"].as_str().unwrap_or_default();
    let sent_at = task["status"]["timestamp"].as_str().unwrap_or_default();
    assert!(
        baton_core::time::timestamp(completed_at) > baton_core::time::timestamp(sent_at),
        "{task} then {done}"
    );

    // Listed among the caller's tasks for this agent; a finished one cannot be canceled.
    let listed = ok(sdk(&base, &shop.planner, &["list", "billing"]));
    assert_eq!(listed["tasks"][0]["id"], id.as_str(), "{listed}");
    let refused = sdk(&base, &shop.planner, &["cancel", &id]);
    assert_eq!(refused["error"], "TaskNotCancelableError", "{refused}");

    // Another project's key: at its own agent the task is not found; at this project's
    // agent it is refused exactly as at a project that does not exist.
    let theirs = sdk(
        &agent(&server, "other", "outsider"),
        &shop.stranger,
        &["get", &id],
    );
    assert_eq!(theirs["error"], "TaskNotFoundError", "{theirs}");
    let at_shop = sdk(&base, &shop.stranger, &["get", &id]);
    let at_nowhere = sdk(
        &agent(&server, "nowhere", "impl-1"),
        &shop.stranger,
        &["get", &id],
    );
    assert_eq!(at_shop["error"], "AgentCardResolutionError", "{at_shop}");
    assert_eq!(
        at_shop["message"]
            .as_str()
            .unwrap()
            .replace("/shop/", "/nowhere/"),
        at_nowhere["message"].as_str().unwrap()
    );
    // The participant itself is not the task's client: for it, the task does not exist.
    let own = sdk(&base, &shop.executor, &["get", &id]);
    assert_eq!(own["error"], "TaskNotFoundError", "{own}");

    // The task outlives the server.
    drop(server);
    let server = serve(&shop.url);
    let base = agent(&server, "shop", "impl-1");
    let after = ok(sdk(&base, &shop.planner, &["get", &id]));
    assert_eq!(state(&after), "TASK_STATE_COMPLETED", "{after}");
    assert_eq!(after["artifacts"], done["artifacts"]);
}

#[test]
fn a2a_task_states_follow_the_delivery_status_and_the_thread() {
    let shop = shop();
    let server = serve(&shop.url);
    let base = agent(&server, "shop", "impl-1");
    let send = |message: &str, text: &str| -> String {
        let task = ok(sdk(
            &base,
            &shop.planner,
            &["send", message, "billing-eu", text],
        ));
        task["id"].as_str().unwrap().to_owned()
    };

    // A question back asks for input; the client's answer is a reply in the thread.
    let asked = send("q-1", "Convert the refunds");
    cli(&server, &shop.executor, &["show", &asked]);
    cli(
        &server,
        &shop.executor,
        &["send", "--reply-to", &asked, "--body", "Which currency?"],
    );
    let waiting = ok(sdk(&base, &shop.planner, &["get", &asked]));
    assert_eq!(state(&waiting), "TASK_STATE_INPUT_REQUIRED", "{waiting}");
    assert_eq!(
        waiting["status"]["message"]["parts"],
        json!([{"text": "Which currency?"}])
    );
    assert_eq!(waiting["status"]["message"]["role"], "ROLE_AGENT");
    let answered = ok(sdk(
        &base,
        &shop.planner,
        &["send", "q-2", "-", "EUR", &asked, r#"{"rate": "daily"}"#],
    ));
    assert_eq!(answered["id"], asked.as_str());
    assert_eq!(state(&answered), "TASK_STATE_WORKING", "{answered}");
    let thread = cli(&server, &shop.executor, &["thread", &asked]);
    let last = thread["items"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["from"], "planner");
    assert_eq!(last["to"], json!(["impl-1"]));
    assert_eq!(last["reply_to"], json!(asked));
    assert_eq!(last["type"], "message");
    let shown = cli(
        &server,
        &shop.executor,
        &["show", last["id"].as_str().unwrap()],
    );
    assert_eq!(
        shown["payload"],
        json!({"body": "EUR", "data": [{"rate": "daily"}]})
    );
    // The answer is in the task's history, as the client's.
    let history = ok(sdk(&base, &shop.planner, &["get", &asked]))["history"].clone();
    let answer = history.as_array().unwrap().last().unwrap().clone();
    assert_eq!(answer["role"], "ROLE_USER");
    assert_eq!(answer["messageId"], "q-2", "{history}");
    assert_eq!(history[0]["messageId"], "q-1", "{history}");
    assert_eq!(
        answer["parts"],
        json!([{"text": "EUR"}, {"data": {"rate": "daily"}, "mediaType": "application/json"}])
    );

    // Handed back: failed, with the reason.
    let blocked = send("h-1", "Close the quarter");
    cli(&server, &shop.executor, &["show", &blocked]);
    cli(
        &server,
        &shop.executor,
        &["hand-back", &blocked, "--reason", "No access to the ledger"],
    );
    let failed = ok(sdk(&base, &shop.planner, &["get", &blocked]));
    assert_eq!(state(&failed), "TASK_STATE_FAILED", "{failed}");
    assert_eq!(
        failed["status"]["message"]["parts"],
        json!([{"text": "No access to the ledger"}])
    );

    // Refused: rejected.
    let refused = send("r-1", "Delete the audit log");
    cli(
        &server,
        &shop.executor,
        &["refuse", &refused, "--reason", "Out of scope"],
    );
    let rejected = ok(sdk(&base, &shop.planner, &["get", &refused]));
    assert_eq!(state(&rejected), "TASK_STATE_REJECTED", "{rejected}");

    // Canceled by its sender while still pending: its own end closes.
    let dropped = send("c-1", "Rename the invoices");
    let canceled = ok(sdk(&base, &shop.planner, &["cancel", &dropped]));
    assert_eq!(state(&canceled), "TASK_STATE_CANCELED", "{canceled}");
    let outbox = cli(&server, &shop.planner, &["outbox", "--all"]);
    let row = outbox["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == dropped.as_str())
        .unwrap_or_else(|| panic!("{outbox}"))
        .clone();
    assert_eq!(row["request_status"], "completed");

    // A topic the participant does not take work on is refused by the one gate.
    let beyond = sdk(
        &base,
        &shop.planner,
        &["send", "x-1", "payroll", "Pay them"],
    );
    assert_eq!(beyond["error"], "InvalidRequestError", "{beyond}");
    let list = ok(sdk(&base, &shop.planner, &["list"]));
    let order = |list: &Value| -> Vec<String> {
        list["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        order(&list),
        [
            dropped.as_str(),
            refused.as_str(),
            blocked.as_str(),
            asked.as_str()
        ],
        "newest status first: {list}"
    );
    // Completing the oldest moves it to the front: the list is by status time.
    cli(&server, &shop.executor, &["complete", &asked]);
    let list = ok(sdk(&base, &shop.planner, &["list"]));
    assert_eq!(
        order(&list),
        [
            asked.as_str(),
            dropped.as_str(),
            refused.as_str(),
            blocked.as_str()
        ],
        "{list}"
    );
    let times: Vec<Option<i64>> = list["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| baton_core::time::timestamp(t["status"]["timestamp"].as_str().unwrap_or("")))
        .collect();
    assert!(
        times.iter().all(Option::is_some) && times.windows(2).all(|w| w[0] >= w[1]),
        "{list}"
    );
}

#[test]
fn a2a_json_rpc_holds_to_the_version_rule_and_a2a_error_codes() {
    let shop = shop();
    let server = serve(&shop.url);
    let base = agent(&server, "shop", "impl-1");
    let http: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let call = |version: Option<&str>, token: &str, body: Value| -> (u16, Value) {
        let mut request = http
            .post(&base)
            .header("Authorization", &format!("Bearer {token}"));
        if let Some(v) = version {
            request = request.header("A2A-Version", v);
        }
        let mut response = request.send_json(body).unwrap();
        let status = response.status().as_u16();
        (status, response.body_mut().read_json().unwrap())
    };
    let get = json!({"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "01ABC"}});
    // No version means 0.3, which this agent does not speak.
    let (status, answer) = call(None, &shop.planner, get.clone());
    assert_eq!(status, 200);
    assert_eq!(answer["error"]["code"], -32009, "{answer}");
    assert_eq!(answer["id"], 7);
    let (_, answer) = call(Some("2.0"), &shop.planner, get.clone());
    assert_eq!(answer["error"]["code"], -32009, "{answer}");
    // 1.0 and a patch of it are spoken.
    for version in ["1.0", "1.0.2"] {
        let (_, answer) = call(Some(version), &shop.planner, get.clone());
        assert_eq!(answer["error"]["code"], -32001, "{version}: {answer}");
    }
    let (_, answer) = call(
        Some("1.0"),
        &shop.planner,
        json!({"jsonrpc": "2.0", "id": "a", "method": "Nope", "params": {}}),
    );
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    let (_, answer) = call(
        Some("1.0"),
        &shop.planner,
        json!({"jsonrpc": "2.0", "id": "b", "method": "SubscribeToTask", "params": {"id": "x"}}),
    );
    assert_eq!(answer["error"]["code"], -32004, "{answer}");
    let (_, answer) = call(
        Some("1.0"),
        &shop.planner,
        json!({"jsonrpc": "2.0", "id": "c", "method": "CreateTaskPushNotificationConfig", "params": {}}),
    );
    assert_eq!(answer["error"]["code"], -32003, "{answer}");
    let file = json!({"jsonrpc": "2.0", "id": "d", "method": "SendMessage", "params": {
        "message": {"messageId": "f-1", "role": "ROLE_USER", "contextId": "billing",
                    "parts": [{"url": "https://example.com/a.pdf"}]}}});
    let (_, answer) = call(Some("1.0"), &shop.planner, file);
    assert_eq!(answer["error"]["code"], -32005, "{answer}");
    let (_, answer) = call(
        Some("1.0"),
        &shop.planner,
        json!({"jsonrpc": "2.0", "id": "e", "method": "SendMessage", "params": {"message": 3}}),
    );
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    // A bad key is refused before any JSON-RPC, as on every route.
    let (status, _) = call(Some("1.0"), "bt_nope", get);
    assert_eq!(status, 401);
    // A read key may read but not send: the one gate refuses it and records it.
    let reader = admin(
        &shop.url,
        Some("shop"),
        &["key", "issue", "planner", "--scope", "read"],
    )["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": "k-1", "role": "ROLE_USER", "contextId": "billing",
                    "parts": [{"text": "hi"}]}}});
    let (_, answer) = call(Some("1.0"), &reader, send);
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert_eq!(
        answer["error"]["data"][0]["reason"], "FORBIDDEN",
        "{answer}"
    );
    assert_eq!(answer["error"]["data"][1]["value"]["code"], "forbidden");
    let events = admin(&shop.url, Some("shop"), &["security-events"]);
    assert!(
        events.to_string().contains("planner"),
        "the refusal is a security event: {events}"
    );
}

/// A small A2A agent made with the SDK's server side (`tests/a2a/agent.py`), taking `token`
/// as its key: the process (killed on drop), its URL, and the file it logs each call to.
struct OutsideAgent {
    child: std::process::Child,
    url: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for OutsideAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn outside_agent(token: &str) -> OutsideAgent {
    outside_agent_with(token, &[])
}

/// [`outside_agent`] with `agent.py`'s options `extra` (`--hold`, `--hold-until`).
fn outside_agent_with(token: &str, extra: &[&str]) -> OutsideAgent {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/a2a/agent.py");
    let mut child = Command::new(python())
        .arg("-B")
        .arg(&script)
        .arg(token)
        .arg("--log")
        .arg(&log)
        .args(extra)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the agent");
    let mut port = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut port)
        .unwrap();
    let port: u16 = port
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("the agent printed {port:?}, not its port"));
    OutsideAgent {
        child,
        url: format!("http://127.0.0.1:{port}/"),
        log,
        _dir: dir,
    }
}

impl OutsideAgent {
    /// How many calls the agent logged whose line is `line` (`METHOD ID`).
    fn calls(&self, line: &str) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == line)
            .count()
    }

    /// How many calls of `method` the agent logged.
    fn calls_of(&self, method: &str) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.split(' ').next() == Some(method))
            .count()
    }

    /// Returns once `check` holds of the agent's log, which the agent appends to as each
    /// call comes in (looked at every 50 ms, for at most a minute): the agent process
    /// tells nothing else.
    fn until(&self, what: &str, check: impl Fn(&Self) -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !check(self) {
            assert!(
                std::time::Instant::now() < deadline,
                "the agent logged no {what} within a minute"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// Makes `name` in `project` stand for the agent at `url`, its key in `$var` (keyless,
/// where the database is).
fn stand_for(shop: &Shop, project: &str, name: &str, url: &str, var: &str) {
    admin(
        &shop.url,
        Some(project),
        &[
            "agent",
            "add",
            name,
            "--role",
            "executor",
            "--a2a",
            url,
            "--key-env",
            var,
        ],
    );
}

/// The shop, with `researcher` standing for an agent made with `agent.py`'s options
/// `extra`, and a server on loopback that has its key.
fn researcher(extra: &[&str]) -> (Shop, OutsideAgent, Serving) {
    let shop = shop();
    let agent = outside_agent_with("outside-secret", extra);
    stand_for(&shop, "shop", "researcher", &agent.url, "RESEARCHER_KEY");
    let server = serve_in(&shop.url, &OUTSIDE, &[("RESEARCHER_KEY", "outside-secret")]);
    (shop, agent, server)
}

/// A request from the key's participant to `to` on topic `ledger`: its id.
fn request(server: &Serving, token: &str, to: &str, text: &str) -> String {
    request_in(server, "shop", token, to, text)
}

fn request_in(server: &Serving, project: &str, token: &str, to: &str, text: &str) -> String {
    let sent = cli_in(
        server,
        project,
        token,
        &[
            "send", "--to", to, "--type", "request", "--topic", "ledger", "--body", text,
        ],
    );
    sent["id"].as_str().unwrap().to_owned()
}

/// The body of the completion note `to` posted in request `id`'s thread.
fn completion_note(server: &Serving, token: &str, id: &str, to: &str) -> Value {
    let note = thread_of(server, token, id)
        .into_iter()
        .find(|r| r["from"] == to && r["type"] == "info")
        .expect("a completion note");
    cli(server, token, &["show", note["id"].as_str().unwrap()])["payload"]["body"].clone()
}

/// The switches of a server whose outside agents are on loopback, with their keys in
/// `RESEARCHER_KEY` and `ANALYST_KEY`.
const OUTSIDE: [&str; 5] = [
    "--allow-private-agents",
    "--agent-key-env",
    "RESEARCHER_KEY",
    "--agent-key-env",
    "ANALYST_KEY",
];

/// What `check` finds, once it finds something: asked again each time something new
/// concerns `token`'s participant (`baton wait`), for at most a minute.
fn until<T>(server: &Serving, token: &str, what: &str, check: impl Fn() -> Option<T>) -> T {
    until_in(server, "shop", token, what, check)
}

/// [`until`] for a participant of `project`.
fn until_in<T>(
    server: &Serving,
    project: &str,
    token: &str,
    what: &str,
    check: impl Fn() -> Option<T>,
) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut after = 0;
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {what} within a minute"
        );
        let news = cli_in(
            server,
            project,
            token,
            &["wait", "--after", &after.to_string(), "--timeout", "10s"],
        );
        after = news["after"].as_i64().unwrap();
    }
}

/// Request `id`'s recipient `to`'s status, once it is neither pending nor delivered.
fn settled(server: &Serving, token: &str, id: &str, to: &str) -> String {
    until(server, token, "settled request", || {
        let outbox = cli(server, token, &["outbox", "--all"]);
        let status = outbox["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .map(|r| r["status"][to].as_str().unwrap_or("").to_owned())
            .unwrap_or_default();
        (!matches!(status.as_str(), "pending" | "delivered")).then_some(status)
    })
}

/// The messages of request `id`'s thread.
fn thread_of(server: &Serving, token: &str, id: &str) -> Vec<Value> {
    cli(server, token, &["thread", id])["items"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn a_request_to_an_outside_a2a_agent_is_handed_to_it_and_comes_back_completed() {
    let shop = shop();
    let agent = outside_agent("outside-secret");
    admin(
        &shop.url,
        Some("shop"),
        &[
            "agent",
            "add",
            "researcher",
            "--role",
            "executor",
            "--a2a",
            &agent.url,
            "--key-env",
            "RESEARCHER_KEY",
        ],
    );
    let listed = admin(
        &shop.url,
        Some("shop"),
        &["agent", "add", "researcher", "--role", "executor"],
    );
    assert_eq!(
        listed["a2a"],
        json!({"url": agent.url, "key_env": "RESEARCHER_KEY"}),
        "{listed}"
    );
    // A second participant for the same agent, whose key the first server lacks.
    admin(
        &shop.url,
        Some("shop"),
        &[
            "agent",
            "add",
            "analyst",
            "--role",
            "executor",
            "--a2a",
            &agent.url,
            "--key-env",
            "ANALYST_KEY",
        ],
    );
    // The list says which participants stand for an outside agent, and where.
    let agents = admin(&shop.url, Some("shop"), &["agent", "list"]);
    let linked: Vec<(&str, &Value)> = agents["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row.get("a2a").is_some())
        .map(|row| (row["name"].as_str().unwrap(), &row["a2a"]["key_env"]))
        .collect();
    assert_eq!(
        linked,
        [
            ("analyst", &json!("ANALYST_KEY")),
            ("researcher", &json!("RESEARCHER_KEY"))
        ],
        "{agents}"
    );
    let text = Command::new(baton_exe())
        .env_remove("BATON_PROJECT")
        .args(["--db", &shop.url, "--project", "shop", "agent", "list"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("A2A AGENT")
            && text.contains(&format!("{} (key in $ANALYST_KEY)", agent.url)),
        "{text}"
    );
    let server = serve_in(&shop.url, &OUTSIDE, &[("RESEARCHER_KEY", "outside-secret")]);
    let send = |server: &Serving, text: &str| -> String {
        let sent = cli(
            server,
            &shop.planner,
            &[
                "send",
                "--to",
                "researcher",
                "--type",
                "request",
                "--topic",
                "ledger",
                "--body",
                text,
            ],
        );
        sent["id"].as_str().unwrap().to_owned()
    };

    // Handed over with SendMessage, polled with GetTask, completed with its artifact.
    let id = send(&server, "Summarise the ledger");
    assert_eq!(
        settled(&server, &shop.planner, &id, "researcher"),
        "completed"
    );
    let note = thread_of(&server, &shop.planner, &id)
        .into_iter()
        .find(|r| r["from"] == "researcher" && r["type"] == "info")
        .expect("a completion note");
    let shown = cli(
        &server,
        &shop.planner,
        &["show", note["id"].as_str().unwrap()],
    );
    assert_eq!(
        shown["payload"]["body"], "Done: Summarise the ledger",
        "{shown}"
    );
    // Where it landed: the agent's task, as a receipt of the request.
    let receipt = cli(&server, &shop.planner, &["receipt", "show", &id]);
    let artifact = receipt["receipt"]["artifact"].as_str().unwrap();
    assert!(
        artifact.starts_with(&format!("{}#task=", agent.url)),
        "{receipt}"
    );

    // A question back from the agent is a reply in the request's thread.
    let asked = send(&server, "A question? about the ledger");
    let question = until(&server, &shop.planner, "question back", || {
        thread_of(&server, &shop.planner, &asked)
            .into_iter()
            .find(|r| r["from"] == "researcher" && r["type"] == "message")
    });
    let shown = cli(
        &server,
        &shop.planner,
        &["show", question["id"].as_str().unwrap()],
    );
    assert_eq!(shown["payload"]["body"], "Which quarter?");
    let before = thread_of(&server, &shop.planner, &asked).len();

    // Without its key the analyst's request waits unread: the agent is never called for it.
    let waiting = request(&server, &shop.planner, "analyst", "Check the totals");
    let later = request(&server, &shop.planner, "researcher", "Count the rows");
    assert_eq!(
        settled(&server, &shop.planner, &later, "researcher"),
        "completed"
    );
    let outbox = cli(&server, &shop.planner, &["outbox"]);
    assert!(
        outbox["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == waiting.as_str() && r["status"]["analyst"] == "pending"),
        "{outbox}"
    );
    assert_eq!(agent.calls(&format!("SendMessage {waiting}")), 0);

    // After a restart the loop goes on from the log: the question is not asked again
    // (each pass reads the inbox oldest first, and the request sent now takes two passes:
    // handed over, then found completed).
    drop(server);
    let server = serve_in(
        &shop.url,
        &OUTSIDE,
        &[
            ("RESEARCHER_KEY", "outside-secret"),
            ("ANALYST_KEY", "outside-secret"),
        ],
    );
    let later = send(&server, "Count the invoices");
    assert_eq!(
        settled(&server, &shop.planner, &later, "researcher"),
        "completed"
    );
    assert_eq!(thread_of(&server, &shop.planner, &asked).len(), before);
    assert_eq!(agent.calls(&format!("SendMessage {asked}")), 1, "sent once");
    let outbox = cli(&server, &shop.planner, &["outbox"]);
    let row = outbox["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == asked.as_str())
        .unwrap_or_else(|| panic!("{outbox}"))
        .clone();
    assert_eq!(
        row["status"]["researcher"], "delivered",
        "the question leaves it open"
    );
    // The sender's answer in the thread goes on to the agent's task, which completes.
    cli(
        &server,
        &shop.planner,
        &[
            "send",
            "--reply-to",
            question["id"].as_str().unwrap(),
            "--body",
            "The third quarter",
        ],
    );
    assert_eq!(
        settled(&server, &shop.planner, &asked, "researcher"),
        "completed"
    );
    let note = thread_of(&server, &shop.planner, &asked)
        .into_iter()
        .find(|r| r["from"] == "researcher" && r["type"] == "info")
        .expect("a completion note");
    let shown = cli(
        &server,
        &shop.planner,
        &["show", note["id"].as_str().unwrap()],
    );
    assert_eq!(
        shown["payload"]["body"], "Done: The third quarter",
        "{shown}"
    );
    // With its key, the analyst's request is handed over after all.
    assert_eq!(
        settled(&server, &shop.planner, &waiting, "analyst"),
        "completed"
    );
}

/// A key of `scope` for `who` in `project`, issued where the database is.
fn key(shop: &Shop, project: &str, who: &str, scope: &str) -> String {
    admin(
        &shop.url,
        Some(project),
        &["key", "issue", who, "--scope", scope],
    )["token"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// `baton ARGS` over the server as the key's participant, expected to fail: its exit code
/// and stderr.
fn cli_fails(server: &Serving, token: &str, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(baton_exe())
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_AS")
        .env_remove("BATON_DB")
        .env("BATON_URL", format!("{}/v1/projects/shop", server.base))
        .env("BATON_KEY", token)
        .args(args)
        .output()
        .unwrap();
    (out.status.code(), stderr(&out))
}

/// `POST {server}/v1/projects/shop{path}` with `body` as the key's participant: the status
/// and the answer.
fn post(server: &Serving, token: &str, path: &str, body: Value) -> (u16, Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut answer = agent
        .post(&format!("{}/v1/projects/shop{path}", server.base))
        .header("Authorization", &format!("Bearer {token}"))
        .send_json(body)
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.body_mut().read_json().unwrap_or(Value::Null))
}

#[test]
fn only_the_variables_the_operator_lists_may_hold_an_outside_agents_key() {
    let shop = shop();
    let agent = outside_agent("outside-secret");
    let owner = key(&shop, "shop", "planner", "admin");
    let server = serve_in(
        &shop.url,
        &OUTSIDE,
        &[
            ("RESEARCHER_KEY", "outside-secret"),
            ("SNEAKY_KEY", "outside-secret"),
        ],
    );
    // A project admin naming any other variable is refused, over HTTP and the command line.
    for var in ["PGPASSWORD", "BATON_DB", "PATH", "SNEAKY_KEY"] {
        let (status, refused) = post(
            &server,
            &owner,
            "/participants",
            json!({"name": "evil", "role": "executor", "a2a": agent.url, "key_env": var}),
        );
        assert_eq!(status, 422, "{var}: {refused}");
        assert_eq!(
            refused["error"]["refusal"]["KeyEnvNotListed"]["name"], var,
            "{refused}"
        );
        let (code, said) = cli_fails(
            &server,
            &owner,
            &[
                "agent",
                "add",
                "evil",
                "--role",
                "executor",
                "--a2a",
                &agent.url,
                "--key-env",
                var,
            ],
        );
        assert_eq!(code, Some(3), "{said}");
        assert!(
            said.contains("not an environment variable this server reads"),
            "{said}"
        );
    }
    let agents = cli(&server, &owner, &["agent", "list"]);
    assert!(!agents.to_string().contains("evil"), "{agents}");
    // A listed one is taken.
    let (status, added) = post(
        &server,
        &owner,
        "/participants",
        json!({"name": "researcher", "role": "executor", "a2a": agent.url,
               "key_env": "RESEARCHER_KEY"}),
    );
    assert_eq!(status, 200, "{added}");
    // The operator, where the database is, may name any variable; the server still reads
    // none it was not told to: that participant's requests wait, and its agent never hears.
    stand_for(&shop, "shop", "sneaky", &agent.url, "SNEAKY_KEY");
    let sneaky = request(
        &server,
        &shop.planner,
        "sneaky",
        "Read the operator's secrets",
    );
    let fair = request(&server, &shop.planner, "researcher", "Summarise the ledger");
    assert_eq!(
        settled(&server, &shop.planner, &fair, "researcher"),
        "completed"
    );
    assert_eq!(agent.calls(&format!("SendMessage {sneaky}")), 0);
    let outbox = cli(&server, &shop.planner, &["outbox"]);
    assert!(
        outbox["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == sneaky.as_str() && r["status"]["sneaky"] == "pending"),
        "{outbox}"
    );
}

#[test]
fn outside_agents_and_webhooks_at_special_purpose_addresses_are_refused_when_set() {
    let shop = shop();
    let owner = key(&shop, "shop", "planner", "admin");
    let server = serve_in(&shop.url, &["--agent-key-env", "RESEARCHER_KEY"], &[]);
    for url in [
        "http://127.0.0.1:9/",
        "http://169.254.169.254/latest/meta-data",
        "http://10.1.2.3/",
        "http://[::127.0.0.1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[64:ff9b::7f00:1]/",
        "http://[64:ff9b:1::7f00:1]/",
        "http://[2002:7f00:1::]/",
        "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
        "http://[fd00::1]/",
        "http://[fe80::1]/",
    ] {
        let (status, refused) = post(
            &server,
            &owner,
            "/participants",
            json!({"name": "agent-x", "role": "executor", "a2a": url,
                   "key_env": "RESEARCHER_KEY"}),
        );
        assert_eq!(status, 422, "{url}: {refused}");
        assert!(
            refused["error"]["refusal"]["AgentUrl"]["why"]
                .as_str()
                .is_some_and(|why| why.contains("--allow-private-agents")),
            "{url}: {refused}"
        );
        let (status, refused) = post(
            &server,
            &owner,
            "/participants/impl-1/webhook",
            json!({"url": url}),
        );
        assert_eq!(status, 422, "{url}: {refused}");
    }
}

#[test]
fn a_slow_or_dead_outside_agent_delays_no_other_project() {
    let shop = shop();
    let dir = tempfile::tempdir().unwrap();
    let release = dir.path().join("release");
    let slow = outside_agent_with(
        "outside-secret",
        &["--hold-until", release.to_str().unwrap()],
    );
    let fast = outside_agent("outside-secret");
    stand_for(&shop, "shop", "researcher", &slow.url, "RESEARCHER_KEY");
    stand_for(&shop, "other", "helper", &fast.url, "RESEARCHER_KEY");
    let server = serve_in(&shop.url, &OUTSIDE, &[("RESEARCHER_KEY", "outside-secret")]);
    let held: Vec<String> = (0..6)
        .map(|n| {
            request(
                &server,
                &shop.planner,
                "researcher",
                &format!("Summarise ledger {n}"),
            )
        })
        .collect();
    // Four at once to one agent; the others wait their turn.
    slow.until("four held sends", |a| a.calls_of("SendMessage") == 4);
    // While the slow agent holds its answers, another project's request goes and comes
    // back, and the server is still waiting for every held answer (none given up).
    let other = request_in(
        &server,
        "other",
        &shop.stranger,
        "helper",
        "Count the invoices",
    );
    until_in(
        &server,
        "other",
        &shop.stranger,
        "the other project's completion",
        || {
            let outbox = cli_in(&server, "other", &shop.stranger, &["outbox", "--all"]);
            outbox["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["id"] == other.as_str() && r["status"]["helper"] == "completed")
                .then_some(())
        },
    );
    assert_eq!(slow.calls_of("GONE"), 0, "a held answer was given up");
    assert_eq!(slow.calls_of("SendMessage"), 4, "at most four at once");
    // Once it answers, its own requests complete, each sent once.
    std::fs::write(&release, "").unwrap();
    for id in &held {
        assert_eq!(
            settled(&server, &shop.planner, id, "researcher"),
            "completed"
        );
        assert_eq!(slow.calls(&format!("SendMessage {id}")), 1);
    }
}

#[test]
fn an_answer_slower_than_a_webhook_is_waited_for_and_the_request_sent_once() {
    // Longer than a webhook's POST may take (10 s): the answer is still waited for.
    let (shop, agent, server) = researcher(&["--hold", "12"]);
    let id = request(&server, &shop.planner, "researcher", "Summarise the ledger");
    assert_eq!(
        settled(&server, &shop.planner, &id, "researcher"),
        "completed"
    );
    assert_eq!(
        completion_note(&server, &shop.planner, &id, "researcher"),
        "Done: Summarise the ledger"
    );
    assert_eq!(agent.calls(&format!("SendMessage {id}")), 1, "sent once");
}

#[test]
fn a_server_killed_between_send_and_answer_finds_the_task_after_restart() {
    let shop = shop();
    let dir = tempfile::tempdir().unwrap();
    let release = dir.path().join("release");
    let agent = outside_agent_with(
        "outside-secret",
        &["--hold-until", release.to_str().unwrap()],
    );
    stand_for(&shop, "shop", "researcher", &agent.url, "RESEARCHER_KEY");
    let env = [("RESEARCHER_KEY", "outside-secret")];
    let server = serve_in(&shop.url, &OUTSIDE, &env);
    let id = request(&server, &shop.planner, "researcher", "Summarise the ledger");
    agent.until("SendMessage", |a| {
        a.calls(&format!("SendMessage {id}")) == 1
    });
    // SIGKILL while the agent holds its answer: the answer is never read.
    drop(server);
    std::fs::write(&release, "").unwrap();
    let server = serve_in(&shop.url, &OUTSIDE, &env);
    assert_eq!(
        settled(&server, &shop.planner, &id, "researcher"),
        "completed"
    );
    assert_eq!(
        completion_note(&server, &shop.planner, &id, "researcher"),
        "Done: Summarise the ledger"
    );
    assert_eq!(
        agent.calls(&format!("SendMessage {id}")),
        1,
        "no second task"
    );
    assert!(agent.calls_of("ListTasks") >= 1, "found by its context");
}

#[test]
fn replicas_on_postgresql_hand_each_request_over_once() {
    let shop = shop_on_postgresql("replicas");
    // Each answer held a moment, so the other replica finds the request mid-hand-over.
    let agent = outside_agent_with("outside-secret", &["--hold", "2"]);
    stand_for(&shop, "shop", "researcher", &agent.url, "RESEARCHER_KEY");
    let env = [("RESEARCHER_KEY", "outside-secret")];
    let replicas = [
        serve_in(&shop.url, &OUTSIDE, &env),
        serve_in(&shop.url, &OUTSIDE, &env),
    ];
    let ids: Vec<String> = (0..4)
        .map(|n| {
            request(
                &replicas[n % 2],
                &shop.planner,
                "researcher",
                &format!("Summarise ledger {n}"),
            )
        })
        .collect();
    for (n, id) in ids.iter().enumerate() {
        assert_eq!(
            settled(&replicas[0], &shop.planner, id, "researcher"),
            "completed"
        );
        assert_eq!(
            completion_note(&replicas[1], &shop.planner, id, "researcher"),
            format!("Done: Summarise ledger {n}").as_str()
        );
        assert_eq!(agent.calls(&format!("SendMessage {id}")), 1, "{id}");
    }
}

#[test]
fn a_planted_receipt_does_not_steer_where_the_loop_looks() {
    let shop = shop();
    let agent = outside_agent("outside-secret");
    stand_for(&shop, "shop", "researcher", &agent.url, "RESEARCHER_KEY");
    stand_for(&shop, "other", "helper", &agent.url, "RESEARCHER_KEY");
    let env = [("RESEARCHER_KEY", "outside-secret")];
    let server = serve_in(&shop.url, &OUTSIDE, &env);
    // Another project's request lands in a task of the same agent.
    let victim = request_in(
        &server,
        "other",
        &shop.stranger,
        "helper",
        "The private plan",
    );
    until_in(
        &server,
        "other",
        &shop.stranger,
        "the victim's completion",
        || {
            let outbox = cli_in(&server, "other", &shop.stranger, &["outbox", "--all"]);
            outbox["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["id"] == victim.as_str() && r["status"]["helper"] == "completed")
                .then_some(())
        },
    );
    let receipt = cli_in(
        &server,
        "other",
        &shop.stranger,
        &["receipt", "show", &victim],
    );
    let victim_task = receipt["receipt"]["artifact"].as_str().unwrap().to_owned();
    drop(server);
    // A participant of this project plants a receipt naming it, before the hand-over.
    let local = |args: &[&str]| {
        let out = Command::new(baton_exe())
            .env_remove("BATON_PROJECT")
            .env_remove("BATON_URL")
            .args([
                "--json",
                "--db",
                &shop.url,
                "--project",
                "shop",
                "--as",
                "planner",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let id = local(&[
        "send",
        "--to",
        "researcher",
        "--type",
        "request",
        "--topic",
        "ledger",
        "--body",
        "Count the invoices",
    ])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    local(&[
        "receipt",
        "write",
        "--step",
        &id,
        "--artifact",
        &victim_task,
    ]);
    let server = serve_in(&shop.url, &OUTSIDE, &env);
    assert_eq!(
        settled(&server, &shop.planner, &id, "researcher"),
        "completed"
    );
    assert_eq!(
        completion_note(&server, &shop.planner, &id, "researcher"),
        "Done: Count the invoices",
        "its own task's result, never the victim's"
    );
    assert_eq!(agent.calls(&format!("SendMessage {id}")), 1);
}

#[test]
fn what_an_outside_agent_returns_passes_the_boundary_and_exports_importably() {
    let (shop, _agent, server) = researcher(&[]);
    // U+0000 in the agent's answer: refused whole, as a participant's would be; the
    // request is handed back saying why.
    let hostile = request(&server, &shop.planner, "researcher", "hostile work");
    assert_eq!(
        settled(&server, &shop.planner, &hostile, "researcher"),
        "handed_back"
    );
    let thread = thread_of(&server, &shop.planner, &hostile).to_vec();
    let why = thread
        .iter()
        .find(|r| r["from"] == "researcher")
        .expect("a hand-back reason");
    let shown = cli(
        &server,
        &shop.planner,
        &["show", why["id"].as_str().unwrap()],
    );
    assert!(
        shown.to_string().contains("U+0000"),
        "the reason names the boundary's rule: {shown}"
    );
    // ESC and a right-to-left override are kept, and shown escaped.
    let shady = request(&server, &shop.planner, "researcher", "shady work");
    assert_eq!(
        settled(&server, &shop.planner, &shady, "researcher"),
        "completed"
    );
    let note = thread_of(&server, &shop.planner, &shady)
        .into_iter()
        .find(|r| r["from"] == "researcher" && r["type"] == "info")
        .expect("a completion note");
    let text = Command::new(baton_exe())
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_AS")
        .env_remove("BATON_DB")
        .env("BATON_URL", format!("{}/v1/projects/shop", server.base))
        .env("BATON_KEY", &shop.planner)
        .args(["show", note["id"].as_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("evil") && !text.contains('\u{1b}') && !text.contains('\u{202e}'),
        "{text:?}"
    );
    // The log, hand-overs included, is importable.
    drop(server);
    let exported = Command::new(baton_exe())
        .env_remove("BATON_PROJECT")
        .args(["--db", &shop.url, "--project", "shop", "export"])
        .output()
        .unwrap();
    assert!(exported.status.success(), "{}", stderr(&exported));
    let log = String::from_utf8(exported.stdout).unwrap();
    assert!(log.contains("handover.changed"), "{log}");
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &log).unwrap();
    admin(&shop.url, None, &["project", "add", "copy"]);
    let imported = admin(
        &shop.url,
        Some("copy"),
        &["import", file.path().to_str().unwrap()],
    );
    assert!(imported.to_string().contains("imported"), "{imported}");
}

#[test]
fn an_agent_asking_forever_asks_once_until_the_sender_answers() {
    let (shop, agent, server) = researcher(&[]);
    let id = request(&server, &shop.planner, "researcher", "A forever? question");
    let questions = || {
        thread_of(&server, &shop.planner, &id)
            .into_iter()
            .filter(|r| r["from"] == "researcher" && r["type"] == "message")
            .collect::<Vec<Value>>()
    };
    let first = until(&server, &shop.planner, "a question", || {
        questions().first().cloned()
    });
    // The agent is read three more times, each time with a new status message: still one
    // question.
    let read = agent.calls_of("GetTask");
    agent.until("three more reads", |a| a.calls_of("GetTask") >= read + 3);
    assert_eq!(questions().len(), 1, "{:?}", questions());
    // Answered, the agent asks again: one more question, and no more until answered.
    cli(
        &server,
        &shop.planner,
        &[
            "send",
            "--reply-to",
            first["id"].as_str().unwrap(),
            "--body",
            "Q3",
        ],
    );
    until(&server, &shop.planner, "a second question", || {
        (questions().len() == 2).then_some(())
    });
    let read = agent.calls_of("GetTask");
    agent.until("three more reads", |a| a.calls_of("GetTask") >= read + 3);
    assert_eq!(questions().len(), 2, "{:?}", questions());
}
