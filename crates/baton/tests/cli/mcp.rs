//! `baton mcp` with real clients: the official MCP Python SDK on protocol 2025-11-25 and raw
//! JSON-RPC lines on 2025-06-18 (the scripts in `tests/mcp/`: the message round, a Work
//! Order round, project memory and receipts, the resume packet as a tool, prompt and
//! resource), plus startup refusals, settings taken from the project's config and paths
//! taken from its root.
//!
//! The Python client lives in a virtual environment under the cargo target dir, made on
//! first use and reused after: `python3 -m venv target/tmp/mcp-venv`, then
//! `target/tmp/mcp-venv/bin/python -m pip install mcp==2.3.0` (jsonschema comes with it).
//! Without python3 and its venv module these tests fail, saying so: they never skip.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::common::{Project, baton_exe, code};

/// The client the scripts are written against; pinned so a new SDK release cannot change
/// what these tests mean.
const MCP_VENV: Venv = Venv {
    name: "mcp-venv",
    requirements: &["mcp==2.3.0"],
    check: "import importlib.metadata as m, jsonschema, mcp; assert m.version('mcp') == '2.3.0'",
    tests: "MCP",
};

const TEAM: &[(&str, &str)] = &[("planner", "planner"), ("impl-1", "executor")];

pub(crate) fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

pub(crate) fn run(cmd: &mut Command) -> Result<Output, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "{cmd:?} failed with {}:\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A virtual environment of the tests' own under the cargo target dir: one pinned
/// requirements, and the Python line that proves they are installed.
pub(crate) struct Venv {
    /// Its directory's name under `CARGO_TARGET_TMPDIR`.
    pub name: &'static str,
    /// What `pip install` is given.
    pub requirements: &'static [&'static str],
    /// What `python -c` must run without failing once it is installed.
    pub check: &'static str,
    /// Which tests need it, for the message when it cannot be made.
    pub tests: &'static str,
}

/// Whether the venv's python imports the pinned SDK.
fn ready(python: &Path, venv: &Venv) -> bool {
    python.exists()
        && Command::new(python)
            .args(["-c", venv.check])
            .output()
            .is_ok_and(|o| o.status.success())
}

/// The venv's python, made on first use (and reused after).
pub(crate) fn make_venv(wanted: &Venv) -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let venv = root.join(wanted.name);
    let python = venv.join("bin/python");
    if ready(&python, wanted) {
        return Ok(python);
    }
    // Built aside and renamed into place, so a concurrent `cargo test` never sees half a venv.
    let staging = root.join(format!("{}.{}", wanted.name, std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    run(Command::new("python3").arg("-m").arg("venv").arg(&staging)).map_err(|e| {
        format!(
            "the {} tests need python3 with its venv module (apt-get install python3-venv): {e}",
            wanted.tests
        )
    })?;
    run(Command::new(staging.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--quiet",
        ])
        .args(wanted.requirements))
    .map_err(|e| {
        format!(
            "the {} tests need `pip install {}` from PyPI: {e}",
            wanted.tests,
            wanted.requirements.join(" ")
        )
    })?;
    // Another test process may have put its venv in place meanwhile, and be using it.
    if ready(&python, wanted) {
        let _ = std::fs::remove_dir_all(&staging);
        return Ok(python);
    }
    let _ = std::fs::remove_dir_all(&venv);
    if std::fs::rename(&staging, &venv).is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    if ready(&python, wanted) {
        Ok(python)
    } else {
        Err(format!(
            "{} does not import {}",
            python.display(),
            wanted.requirements.join(" ")
        ))
    }
}

/// The MCP venv's python, made once per test run.
pub(crate) fn python() -> &'static Path {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match PYTHON.get_or_init(|| make_venv(&MCP_VENV)) {
        Ok(python) => python,
        Err(e) => panic!("{e}"),
    }
}

/// What the operations declare of the MCP tools (`baton_app::ops`), as the scripts read
/// it from `BATON_DECLARED`: every tool, each role profile's, the ones that change
/// nothing, and the idempotent ones of those that do.
fn declared() -> Value {
    use baton_app::ops::OPERATIONS;
    let tools = |keep: fn(&baton_app::ops::Operation) -> bool| -> Vec<&str> {
        OPERATIONS
            .iter()
            .filter(|o| keep(o))
            .filter_map(|o| o.tool)
            .collect()
    };
    let profiles: serde_json::Map<String, Value> = baton_mcp::Profile::ALL
        .into_iter()
        .filter(|p| *p != baton_mcp::Profile::All)
        .map(|p| (p.as_str().to_owned(), json!(p.tools())))
        .collect();
    json!({
        "tools": tools(|_| true),
        "profiles": profiles,
        "read_only": tools(|o| !o.changes()),
        "idempotent": tools(|o| o.changes() && o.idempotent),
    })
}

/// How many MCP tools the operations declare: what a session without a profile lists.
pub(crate) fn every_tool() -> usize {
    baton_app::ops::tools().count()
}

/// Runs the script `script` of `tests/mcp/` with `args`; panics with its output on
/// failure, returns (and prints) its stdout.
pub(crate) fn script<S: AsRef<std::ffi::OsStr>>(script: &str, args: &[S]) -> String {
    let out = Command::new(python())
        .arg("-B") // no __pycache__ in the source tree
        .arg(scripts().join(script))
        .args(args)
        .env("BATON_DECLARED", declared().to_string())
        .current_dir(scripts())
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{script} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    print!("{stdout}");
    stdout
}

/// Runs one client script against a fresh project.
fn client(name: &str) -> String {
    let project = Project::new(TEAM);
    script(name, &[baton_exe().as_os_str(), project.path().as_os_str()])
}

#[test]
fn mcp_over_streamable_http_serves_the_same_tools_as_the_keys_participant() {
    use crate::server::{admin, serve};
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("projects").display());
    admin(&url, None, &["project", "add", "shop"]);
    // The planner's role has no profile of its own (every tool: the whole round); the
    // executor gets its role's.
    admin(
        &url,
        Some("shop"),
        &[
            "agent",
            "add",
            "planner",
            "--role",
            "lead",
            "--may",
            "request,send,accept,approve",
        ],
    );
    admin(
        &url,
        Some("shop"),
        &["agent", "add", "impl-1", "--role", "executor"],
    );
    let token = |who: &str, scope: &str| -> String {
        admin(&url, Some("shop"), &["key", "issue", who, "--scope", scope])["token"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (planner, executor, reader) = (
        token("planner", "write"),
        token("impl-1", "write"),
        token("impl-1", "read"),
    );
    let serving = serve(&url);
    let stdout = script(
        "http_client.py",
        &[
            format!("{}/v1/projects/shop/mcp", serving.base),
            planner,
            executor,
            reader,
        ],
    );
    let read_only = baton_app::ops::OPERATIONS
        .iter()
        .filter(|o| o.tool.is_some() && !o.changes())
        .count();
    for line in [
        format!(
            "http: each write key lists its role's profile ({} and {} tools)",
            every_tool(),
            baton_mcp::Profile::Executor.tools().len()
        ),
        "http: full round ok".to_owned(),
        format!("http: a read key is offered {read_only} read-only tools"),
        "http: a bad key is refused with 401".to_owned(),
    ] {
        assert!(stdout.contains(&line), "missing {line:?} in:\n{stdout}");
    }
}

#[test]
fn mcp_full_round_through_the_python_sdk_on_2025_11_25() {
    let out = client("sdk_client.py");
    let every = format!(
        "sdk: every tool's output ({} tools) matched its outputSchema",
        every_tool()
    );
    for line in [
        "sdk: full round ok",
        "sdk: order round ok",
        "sdk: resume, focus, decide, constrain, note and receipts ok; state and alerts match",
        "sdk: the resume prompt and baton://resume return the packet",
        every.as_str(),
        "sdk: unknown tool, prompt and resource are protocol errors",
    ] {
        assert!(out.contains(line), "{line:?} missing from:\n{out}");
    }
}

#[test]
fn mcp_full_round_over_raw_json_rpc_on_2025_06_18() {
    let out = client("raw_client.py");
    let every = format!(
        "raw: every tool's output ({} tools) matched its outputSchema",
        every_tool()
    );
    for line in [
        "raw: tools/list result is ",
        "raw: full round ok on 2025-06-18",
        "raw: order round ok on 2025-06-18",
        "raw: resume, focus, decide, constrain, note and receipts ok; state and alerts match",
        "raw: the resume prompt and baton://resume return the packet",
        every.as_str(),
        "garbage lines are protocol errors",
        "hostile argument sets came back as isError results",
        "stdout carried only JSON-RPC",
    ] {
        assert!(out.contains(line), "{line:?} missing from:\n{out}");
    }
}

#[test]
fn mcp_refuses_to_start_without_a_registered_identity() {
    let p = Project::new(TEAM);
    // `output()` gives the child a closed stdin: a server that started would see EOF and
    // end with a different code, so each code below proves it refused before serving.
    for (who, args, expected, says) in [
        (Some("ghost"), &["mcp"][..], 4, "no such participant"),
        (None, &["mcp"][..], 2, "--as NAME"),
        (
            Some("planner"),
            &["--json", "mcp"][..],
            2,
            "stdout carries the MCP protocol",
        ),
    ] {
        let out = p.run(who, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), expected, "{who:?} {args:?}: {stderr}");
        assert!(stderr.contains(says), "{who:?} {args:?}: {stderr}");
        assert!(
            out.stdout.is_empty(),
            "stdout must stay empty before serving"
        );
    }
}

/// Sends `requests` (after the 2025-06-18 handshake) to `baton mcp` as `who`, closes stdin
/// and returns each request's response, by id.
fn exchange(p: &Project, who: &str, requests: &[Value]) -> Vec<Value> {
    exchange_with(p.cmd(Some(who), &["mcp"]), requests)
}

/// [`exchange`] with a server started by `server` (a `baton … mcp` command).
fn exchange_with(mut server: Command, requests: &[Value]) -> Vec<Value> {
    let mut lines = vec![
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "baton-test", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ];
    lines.extend(requests.iter().enumerate().map(|(i, r)| {
        let mut r = r.clone();
        r["jsonrpc"] = json!("2.0");
        r["id"] = json!(i + 1);
        r
    }));
    let mut child = server
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn baton mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    for line in &lines {
        writeln!(stdin, "{line}").expect("write a request");
    }
    drop(stdin);
    let out = child.wait_with_output().expect("baton mcp ends");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let responses: Vec<Value> = String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("stdout holds JSON-RPC lines only"))
        .collect();
    (1..=requests.len())
        .map(|id| {
            responses
                .iter()
                .find(|r| r["id"] == json!(id))
                .unwrap_or_else(|| panic!("no response to request {id}: {responses:?}"))
                .clone()
        })
        .collect()
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

#[test]
fn mcp_takes_the_payload_cap_and_duplicate_window_from_the_config() {
    let p = Project::new(TEAM);
    std::fs::write(
        p.path().join(".baton/config.toml"),
        "[messages]\npayload_cap = 64\nduplicate_window = \"0s\"\n",
    )
    .unwrap();
    let hello = json!({"to": ["impl-1"], "topic": "lane", "body": "hello"});
    let big = json!({"to": ["impl-1"], "topic": "lane", "body": "x".repeat(100)});
    let r = exchange(
        &p,
        "planner",
        &[
            call("send", hello.clone()),
            call("send", hello),
            call("send", big),
        ],
    );
    let first = &r[0]["result"]["structuredContent"];
    let second = &r[1]["result"]["structuredContent"];
    assert_eq!(first["duplicate"], json!(false), "{r:?}");
    // A window of 0s turns duplicate detection off: the same send stores a second message.
    assert_eq!(second["duplicate"], json!(false), "{r:?}");
    assert_ne!(first["id"], second["id"]);
    assert_eq!(r[2]["result"]["isError"], json!(true), "{r:?}");
    let text = r[2]["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("over the cap of 64 bytes"), "{text}");
}

fn structured(response: &Value) -> &Value {
    assert_ne!(response["result"]["isError"], json!(true), "{response}");
    &response["result"]["structuredContent"]
}

#[test]
fn mcp_takes_note_subjects_and_artifacts_from_the_project_root_wherever_it_runs() {
    let p = Project::new(TEAM);
    std::fs::create_dir_all(p.path().join("src/deep")).unwrap();
    std::fs::write(p.path().join("src/lib.rs"), "pub fn f() {}\n").unwrap();
    // Started from a subdirectory: paths still name files from the project root, as an
    // agent reads them in the packet and in `baton state show`.
    let mut server = baton_exe_in(&p.path().join("src/deep"));
    server
        .arg("--project")
        .arg(p.path())
        .args(["--as", "impl-1", "mcp"]);
    let r = exchange_with(
        server,
        &[
            call(
                "note",
                json!({"text": "f is pure", "subject": "src/lib.rs"}),
            ),
            call(
                "receipt_write",
                json!({"step": "lib", "artifact": "src/lib.rs"}),
            ),
            // From the working directory this is src/lib.rs; from the root it is outside.
            call("note", json!({"text": "x", "subject": "../lib.rs"})),
        ],
    );
    assert_eq!(structured(&r[0])["recorded"], json!(["N-1"]));
    assert_eq!(structured(&r[1])["receipt"]["artifact"], "src/lib.rs");
    assert_eq!(structured(&r[1])["receipt"]["size"], 14);
    assert_eq!(r[2]["result"]["isError"], json!(true), "{r:?}");
    let state = p.json(Some("impl-1"), &["state", "show"]);
    assert_eq!(
        state["notes"][0]["subject"],
        json!({"kind": "path", "id": "src/lib.rs"})
    );
    assert_eq!(state["notes"][0]["freshness"], "current", "{state}");
    let receipt = p.json(None, &["receipt", "show", "lib"]);
    assert_eq!(
        receipt["receipt"]["hash"],
        structured(&r[1])["receipt"]["hash"]
    );
    p.ok(None, &["receipt", "verify", "lib"]);
}

/// A `baton` command run from `dir`, with no project or identity from the environment.
fn baton_exe_in(dir: &Path) -> Command {
    let mut cmd = Command::new(baton_exe());
    cmd.current_dir(dir)
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_AS");
    cmd
}

#[test]
fn mcp_resume_is_the_packet_of_baton_resume_as_a_tool_a_prompt_and_a_resource() {
    let p = Project::new(TEAM);
    p.ok(
        Some("planner"),
        &["focus", "set", "Ship the CSV export fix"],
    );
    p.ok(
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
            "Keep the filters",
        ],
    );
    let r = exchange(
        &p,
        "impl-1",
        &[
            call("resume", json!({})),
            call("resume", json!({"max_bytes": 250})),
            json!({"method": "prompts/get", "params": {"name": "resume"}}),
            json!({"method": "resources/read", "params": {"uri": "baton://resume"}}),
        ],
    );
    let cli = p.json(Some("impl-1"), &["resume"]);
    let same = |text: &str| -> String {
        // The second line names the moment of reading: `generation N · TIME`.
        text.lines()
            .enumerate()
            .map(|(i, l)| {
                if i == 1 {
                    l.split(" · ").next().unwrap_or(l)
                } else {
                    l
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let expected = same(cli["text"].as_str().unwrap());
    let tool = structured(&r[0]);
    let small = structured(&r[1]);
    let prompt = r[2]["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap();
    let resource = r[3]["result"]["contents"][0]["text"].as_str().unwrap();
    for text in [tool["text"].as_str().unwrap(), prompt, resource] {
        assert_eq!(same(text), expected);
        assert!(text.contains("## What I owe") && text.contains("Ship the CSV export fix"));
        assert!(text.len() <= 6000);
    }
    assert_eq!(tool["bytes"], json!(tool["text"].as_str().unwrap().len()));
    assert!(small["bytes"].as_u64().unwrap() <= 250, "{small}");
}

/// The names a `tools/list` response offers, sorted, and its result's size in bytes.
fn listed(response: &Value) -> (Vec<String>, usize) {
    let mut names: Vec<String> = response["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    (names, response["result"].to_string().len())
}

#[test]
fn mcp_profiles_default_from_the_role_stay_small_and_refuse_other_tools_with_a_hint() {
    let p = Project::new(&[
        ("planner", "planner"),
        ("impl-1", "executor"),
        ("rev", "reviewer"),
        ("owner", "owner"),
        ("bot", "observer"),
    ]);
    let tools_list = json!({"method": "tools/list"});
    // Each role's default profile: its own tools, within 8 KB with room to spare (the
    // budget is 7.5 KB).
    for (who, has, lacks) in [
        ("impl-1", "need", "queue"),
        ("planner", "complete", "need"),
        ("rev", "need", "order"),
        ("owner", "queue", "receipt_write"),
    ] {
        let r = exchange(&p, who, std::slice::from_ref(&tools_list));
        let (names, bytes) = listed(&r[0]);
        assert!(
            bytes < baton_mcp::PROFILE_BUDGET,
            "{who}: tools/list is {bytes} bytes, over {}",
            baton_mcp::PROFILE_BUDGET
        );
        assert!(names.iter().any(|n| n == has), "{who}: {names:?}");
        assert!(!names.iter().any(|n| n == lacks), "{who}: {names:?}");
    }
    // A role without a profile gets every tool.
    let r = exchange(&p, "bot", std::slice::from_ref(&tools_list));
    assert_eq!(listed(&r[0]).0.len(), every_tool());

    // A tool outside the profile is refused naming a profile that has it; one inside works.
    let r = exchange(
        &p,
        "impl-1",
        &[
            call("queue", json!({})),
            call("archive", json!({"id": "x"})),
            call("need", json!({"text": "which fixture?"})),
        ],
    );
    let text = r[0]["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(r[0]["result"]["isError"], true, "{}", r[0]);
    assert!(
        text.contains("`queue` is not in the executor profile")
            && text.contains("`baton mcp --profile owner`"),
        "{text}"
    );
    let text = r[1]["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("`baton mcp --profile planner`"), "{text}");
    assert_ne!(r[2]["result"]["isError"], true, "{}", r[2]);

    // An explicit profile wins over the role; an unknown one is a usage error.
    let r = exchange_with(
        p.cmd(Some("impl-1"), &["mcp", "--profile", "owner"]),
        std::slice::from_ref(&tools_list),
    );
    assert!(listed(&r[0]).0.iter().any(|n| n == "queue"));
    let out = p.run(Some("impl-1"), &["mcp", "--profile", "boss"]);
    assert_eq!(code(&out), 2);
}

/// Where `value`, a JSON Schema, holds a boolean where a schema object is wanted: every
/// subschema keyword but `additionalProperties` and `unevaluatedProperties` (whose `false`
/// MCP's, OpenAPI's and JSON Schema's drafts all take). MCP's schema wants each property
/// an object, and a client built on the TypeScript SDK refuses a whole `tools/list`
/// otherwise.
fn boolean_subschemas(value: &Value, path: &str, found: &mut Vec<String>) {
    let Value::Object(schema) = value else {
        if value.is_boolean() {
            found.push(path.to_owned());
        }
        return;
    };
    for (key, sub) in schema {
        let at = format!("{path}/{key}");
        match (key.as_str(), sub) {
            (
                "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas",
                Value::Object(named),
            ) => {
                for (name, s) in named {
                    boolean_subschemas(s, &format!("{at}/{name}"), found);
                }
            }
            ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(subs)) => {
                for (i, s) in subs.iter().enumerate() {
                    boolean_subschemas(s, &format!("{at}/{i}"), found);
                }
            }
            (
                "items" | "contains" | "not" | "if" | "then" | "else" | "propertyNames"
                | "additionalItems" | "unevaluatedItems",
                s,
            ) => boolean_subschemas(s, &at, found),
            ("additionalProperties" | "unevaluatedProperties", s @ Value::Object(_)) => {
                boolean_subschemas(s, &at, found);
            }
            _ => {}
        }
    }
}

/// Every schema a published document holds (a `tools/list` result, an OpenAPI document,
/// an A2A card), walked with [`boolean_subschemas`]: whatever sits under `schema`,
/// `schemas`, `inputSchema` or `outputSchema`, wherever in the document.
fn published_booleans(document: &Value, path: &str, found: &mut Vec<String>) {
    match document {
        Value::Object(fields) => {
            for (key, value) in fields {
                let at = format!("{path}/{key}");
                match (key.as_str(), value) {
                    ("schema" | "inputSchema" | "outputSchema", schema) => {
                        boolean_subschemas(schema, &at, found);
                    }
                    ("schemas", Value::Object(named)) => {
                        for (name, s) in named {
                            boolean_subschemas(s, &format!("{at}/{name}"), found);
                        }
                    }
                    _ => published_booleans(value, &at, found),
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                published_booleans(item, &format!("{path}/{i}"), found);
            }
        }
        _ => {}
    }
}

#[test]
fn the_schema_walk_finds_a_boolean_subschema_wherever_it_is_published() {
    // The walk itself, on the shapes it must catch and the ones it must let be.
    let listed = json!({"tools": [{"name": "t", "inputSchema": {"type": "object",
        "additionalProperties": false, "properties": {"a": {"type": "string"}}},
        "outputSchema": {"type": "object", "properties": {"report": true,
        "rows": {"type": "array", "items": false}, "any": {"anyOf": [{}, true]}}}}]});
    let mut found = Vec::new();
    published_booleans(&listed, "", &mut found);
    assert_eq!(
        found,
        [
            "/tools/0/outputSchema/properties/report",
            "/tools/0/outputSchema/properties/rows/items",
            "/tools/0/outputSchema/properties/any/anyOf/1",
        ]
    );
    let openapi = json!({"components": {"schemas": {"Shown": {"properties": {"r": true}}}},
        "paths": {"/x": {"get": {"responses": {"200": {"content": {"application/json":
        {"schema": {"$ref": "#/components/schemas/Shown"}}}}}}}}});
    let mut found = Vec::new();
    published_booleans(&openapi, "", &mut found);
    assert_eq!(found, ["/components/schemas/Shown/properties/r"]);
}

#[test]
fn every_published_schema_is_an_object_where_a_schema_is_wanted() {
    use crate::server::serve;
    let mut found = Vec::new();
    // Every profile's tools/list over stdio: each role's, and every tool's.
    let p = Project::new(&[("impl-1", "executor")]);
    for profile in ["executor", "planner", "reviewer", "owner", "all"] {
        let r = exchange_with(
            p.cmd(Some("impl-1"), &["mcp", "--profile", profile]),
            &[json!({"method": "tools/list"})],
        );
        let tools = &r[0]["result"];
        assert!(
            tools["tools"].as_array().is_some_and(|t| !t.is_empty()),
            "{profile}: {r:?}"
        );
        published_booleans(tools, &format!("tools/list({profile})"), &mut found);
    }
    // The OpenAPI document and a participant's A2A card, as `baton serve` publishes them.
    let (_dir, url, tokens) = shop_keyed(&[("impl-1", "executor")], "read");
    let token = &tokens[0];
    let serving = serve(&url);
    let get = |path: &str| -> Value {
        ureq::get(&format!("{}{path}", serving.base))
            .header("Authorization", &format!("Bearer {token}"))
            .call()
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
            .body_mut()
            .read_json()
            .unwrap()
    };
    let openapi = get("/v1/openapi.json");
    assert!(openapi["components"]["schemas"].is_object(), "{openapi}");
    published_booleans(&openapi, "openapi", &mut found);
    let card = get("/v1/projects/shop/a2a/impl-1/.well-known/agent-card.json");
    assert!(card["name"].is_string(), "{card}");
    published_booleans(&card, "agent-card", &mut found);
    assert!(
        found.is_empty(),
        "boolean subschemas where an object is wanted: {found:#?}"
    );
}

/// One HTTP/1.1 POST of `body` to `path` on `address`, with the `Host` and headers given
/// as written (no client library renames them): the status and the body.
fn raw_post(
    address: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut all = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    for (name, value) in headers {
        all.retain(|(n, _)| n != name);
        all.push((name, value));
    }
    raw_http(address, "POST", path, host, &all, body)
}

/// One HTTP/1.1 request on a connection of its own, exactly as given: the status and the
/// body of its answer.
fn raw_http(
    address: &str,
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"));
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// A shared store holding project `shop` with `team` as `(name, role)`, and a key of
/// `scope` for each: the directory (kept while it lives), the store's URL and the tokens,
/// in the team's order.
pub(crate) fn shop_keyed(
    team: &[(&str, &str)],
    scope: &str,
) -> (tempfile::TempDir, String, Vec<String>) {
    use crate::server::admin;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("projects").display());
    admin(&url, None, &["project", "add", "shop"]);
    let tokens = team
        .iter()
        .map(|(name, role)| {
            admin(&url, Some("shop"), &["agent", "add", name, "--role", role]);
            admin(
                &url,
                Some("shop"),
                &["key", "issue", name, "--scope", scope],
            )["token"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    (dir, url, tokens)
}

#[test]
fn mcp_over_http_answers_only_a_host_it_is_named_by() {
    use crate::server::serve_with;
    let (_dir, url, tokens) = shop_keyed(&[("impl-1", "executor")], "write");
    let token = &tokens[0];
    let serving = serve_with(
        &url,
        &[
            "--public-url",
            "https://baton.example.com/",
            "--allow-host",
            "other.test:8443",
        ],
    );
    let address = serving.base.trim_start_matches("http://").to_owned();
    let port = address.rsplit(':').next().unwrap().to_owned();
    let bearer = format!("Bearer {token}");
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let mcp = "/v1/projects/shop/mcp";
    let ask = |host: &str, origin: Option<&str>| {
        let mut headers = vec![("Authorization", bearer.as_str())];
        if let Some(origin) = origin {
            headers.push(("Origin", origin));
        }
        raw_post(&address, mcp, host, &headers, list)
    };
    let own = format!("127.0.0.1:{port}");
    for host in [
        own.clone(),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "baton.example.com".to_owned(),
        "BATON.example.com:443".to_owned(),
        "other.test:8443".to_owned(),
    ] {
        let (status, body) = ask(&host, None);
        assert_eq!(status, 200, "{host}: {body}");
    }
    for host in [
        "evil.example.com".to_owned(),
        format!("evil.example.com:{port}"),
        "baton.example.com:8080".to_owned(),
        "other.test".to_owned(),
        format!("127.0.0.1:{}", port.parse::<u16>().unwrap().wrapping_add(1)),
        format!("{}:{port}", "a".repeat(5000)),
    ] {
        let (status, body) = ask(&host, None);
        assert_eq!(status, 403, "{host}: {body}");
        // MCP's own shape, quoting at most a short prefix of the host it refuses.
        let error: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_eq!(
            (&error["jsonrpc"], &error["error"]["code"]),
            (&json!("2.0"), &json!(-32000)),
            "{body}"
        );
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("does not answer to the host") && message.len() < 400,
            "{message}"
        );
    }
    // Origin is checked against the same names: the conformance suite's rebinding pair,
    // another site, and another port of this host are refused; the server's own are not.
    for (host, origin, status) in [
        ("evil.example.com", "http://evil.example.com", 403),
        (own.as_str(), "http://evil.example.com", 403),
        (own.as_str(), "http://127.0.0.1:1", 403),
        (own.as_str(), "null", 403),
        (own.as_str(), &format!("http://localhost:{port}"), 200),
        (own.as_str(), "https://baton.example.com", 200),
    ] {
        let (got, body) = ask(host, Some(origin));
        assert_eq!(got, status, "{host} {origin}: {body}");
    }
    // The board's page answers the same names.
    let page = |host: &str| raw_http(&address, "GET", "/", host, &[], "").0;
    assert_eq!(page(&own), 200);
    assert_eq!(page("rebound.example"), 403);
    // A public URL or a host that cannot be read is refused before serving.
    for bad in [
        ["--public-url", "ftp://baton.example.com"],
        ["--allow-host", "a b"],
    ] {
        let out = Command::new(baton_exe())
            .args(["--db", &url, "serve", "--bind", "127.0.0.1:0"])
            .args(bad)
            .output()
            .unwrap();
        assert_eq!(
            code(&out),
            2,
            "{bad:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Malformed frames, each with the id it was sent with: what must come back is an error
/// in JSON-RPC's shape, carrying that id, with the code that fits.
fn malformed() -> Vec<(Value, i64)> {
    let long = "m".repeat(400 * 1024);
    vec![
        (json!({"method": "tools/call", "params": "send"}), -32602),
        (
            json!({"method": "tools/call", "params": [{"name": "send", "arguments": {
                "to": ["impl-1"], "topic": "lane", "body": "smuggled"}}]}),
            -32602,
        ),
        (json!({"method": 5}), -32600),
        (json!({"method": long}), -32601),
        (
            json!({"method": "tools/call", "params": {"name": "send", "arguments": "x"}}),
            -32602,
        ),
    ]
}

fn judged(answer: &Value, id: &Value, code: i64) {
    assert_eq!(
        (&answer["jsonrpc"], &answer["id"], &answer["error"]["code"]),
        (&json!("2.0"), id, &json!(code)),
        "{}",
        baton_core::packet::clip(&answer.to_string(), 500)
    );
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.len() <= 300,
        "a refusal quotes at most a prefix: {} bytes",
        message.len()
    );
}

#[test]
fn malformed_frames_are_answered_with_their_ids_and_change_nothing_on_both_transports() {
    // stdio: each frame answered with its id, and the session goes on.
    let p = Project::new(TEAM);
    let frames = malformed();
    let mut requests: Vec<Value> = frames.iter().map(|(f, _)| f.clone()).collect();
    requests.push(call("inbox", json!({})));
    // A well-formed call whose argument does not fit is the tool's own refusal, quoting
    // as little of the value.
    requests.push(call("inbox", json!({"limit": "m".repeat(400 * 1024)})));
    let r = exchange(&p, "planner", &requests);
    for (i, (_, code)) in frames.iter().enumerate() {
        judged(&r[i], &json!(i + 1), *code);
    }
    assert!(
        structured(&r[frames.len()])["items"].is_array(),
        "{:?}",
        r[frames.len()]
    );
    let refused = &r[frames.len() + 1]["result"];
    let text = refused["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        refused["isError"] == json!(true) && text.contains("`limit`") && text.len() <= 300,
        "{}",
        baton_core::packet::clip(&refused.to_string(), 500)
    );
    let inbox = p.json(Some("impl-1"), &["inbox"]);
    assert_eq!(
        inbox["items"],
        json!([]),
        "a refused frame stored nothing: {inbox}"
    );

    // Streamable HTTP: the same frames answered 400 with their ids, nothing stored.
    let (_dir, url, tokens) =
        shop_keyed(&[("impl-1", "executor"), ("planner", "planner")], "write");
    let (executor, planner) = (&tokens[0], &tokens[1]);
    let serving = crate::server::serve(&url);
    let address = serving.base.trim_start_matches("http://").to_owned();
    let bearer = format!("Bearer {planner}");
    for (i, (frame, code)) in frames.iter().enumerate() {
        let id = json!(format!("req-{i}"));
        let mut frame = frame.clone();
        frame["jsonrpc"] = json!("2.0");
        frame["id"] = id.clone();
        let (status, body) = raw_post(
            &address,
            "/v1/projects/shop/mcp",
            &address,
            &[("Authorization", &bearer)],
            &frame.to_string(),
        );
        assert_eq!(status, 400, "{}", baton_core::packet::clip(&body, 500));
        judged(&serde_json::from_str(&body).unwrap(), &id, *code);
    }
    // What rmcp itself refuses (a client that does not accept its answers, a body not said
    // to be JSON) comes back in the same shape, with its status and id.
    let list = r#"{"jsonrpc":"2.0","id":"h-1","method":"tools/list"}"#;
    for (header, value, status) in [
        ("Accept", "text/html", 406),
        ("Content-Type", "text/plain", 415),
    ] {
        let (got, body) = raw_post(
            &address,
            "/v1/projects/shop/mcp",
            &address,
            &[("Authorization", &bearer), (header, value)],
            list,
        );
        assert_eq!(got, status, "{header}: {value}: {body}");
        judged(&serde_json::from_str(&body).unwrap(), &json!("h-1"), -32600);
    }
    let (got, body) = raw_http(
        &address,
        "GET",
        "/v1/projects/shop/mcp",
        &address,
        &[("Authorization", &bearer), ("Accept", "text/event-stream")],
        "",
    );
    assert_eq!(got, 405, "{body}");
    judged(&serde_json::from_str(&body).unwrap(), &json!(null), -32600);
    let inbox: Value = ureq::get(&format!("{}/v1/projects/shop/inbox", serving.base))
        .header("Authorization", &format!("Bearer {executor}"))
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
    assert_eq!(
        inbox["items"],
        json!([]),
        "a refused frame stored nothing: {inbox}"
    );
}
