//! `baton mcp` with real clients: the official MCP Python SDK on protocol 2025-11-25 and raw
//! JSON-RPC lines on 2025-06-18 (the scripts in `tests/mcp/`), plus startup refusals and
//! settings taken from the project's config.
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

use crate::common::{Project, baton_exe};

/// The client the scripts are written against; pinned so a new SDK release cannot change
/// what these tests mean.
const MCP_REQUIREMENT: &str = "mcp==2.3.0";
const MCP_VERSION: &str = "2.3.0";

const TEAM: &[(&str, &str)] = &[("planner", "planner"), ("impl-1", "executor")];

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

fn run(cmd: &mut Command) -> Result<Output, String> {
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

/// Whether the venv's python imports the pinned SDK.
fn ready(python: &Path) -> bool {
    python.exists()
        && Command::new(python)
            .args([
                "-c",
                &format!(
                    "import importlib.metadata as m, jsonschema, mcp; \
                     assert m.version('mcp') == '{MCP_VERSION}'"
                ),
            ])
            .output()
            .is_ok_and(|o| o.status.success())
}

fn make_venv() -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let venv = root.join("mcp-venv");
    let python = venv.join("bin/python");
    if ready(&python) {
        return Ok(python);
    }
    // Built aside and renamed into place, so a concurrent `cargo test` never sees half a venv.
    let staging = root.join(format!("mcp-venv.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    run(Command::new("python3").arg("-m").arg("venv").arg(&staging)).map_err(|e| {
        format!(
            "the MCP tests need python3 with its venv module (apt-get install python3-venv): {e}"
        )
    })?;
    run(Command::new(staging.join("bin/python")).args([
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--quiet",
        MCP_REQUIREMENT,
    ]))
    .map_err(|e| format!("the MCP tests need `pip install {MCP_REQUIREMENT}` from PyPI: {e}"))?;
    let _ = std::fs::remove_dir_all(&venv);
    if std::fs::rename(&staging, &venv).is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    if ready(&python) {
        Ok(python)
    } else {
        Err(format!(
            "{} does not import {MCP_REQUIREMENT}",
            python.display()
        ))
    }
}

/// The venv's python, made once per test run.
fn python() -> &'static Path {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match PYTHON.get_or_init(make_venv) {
        Ok(python) => python,
        Err(e) => panic!("{e}"),
    }
}

/// Runs one client script against a fresh project; panics with its output on failure.
fn client(script: &str) -> String {
    let project = Project::new(TEAM);
    let out = Command::new(python())
        .arg("-B") // no __pycache__ in the source tree
        .arg(scripts().join(script))
        .arg(baton_exe())
        .arg(project.path())
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

#[test]
fn mcp_full_round_through_the_python_sdk_on_2025_11_25() {
    let out = client("sdk_client.py");
    assert!(out.contains("sdk: full round ok"), "{out}");
    assert!(out.contains("unknown tool is a protocol error"), "{out}");
}

#[test]
fn mcp_full_round_over_raw_json_rpc_on_2025_06_18() {
    let out = client("raw_client.py");
    for line in [
        "raw: full round ok on 2025-06-18",
        "garbage lines are protocol errors",
        "hostile argument sets came back as isError results",
        "stdout carried only JSON-RPC",
    ] {
        assert!(out.contains(line), "{line:?} missing from:\n{out}");
    }
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited normally")
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
    let mut child = p
        .cmd(Some(who), &["mcp"])
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
