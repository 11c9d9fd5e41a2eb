//! What the benchmarks share: running the binary under test in a project, timing an
//! agent's hook, and seeding a store. Each benchmark uses part of it.
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use baton_core::run::RunChange;
use baton_core::state::{StateOp, Subject};
use baton_store::Store;

/// What Claude Code hands a `PreToolUse` hook on stdin.
pub const HOOK_PAYLOAD: &[u8] = br#"{"session_id":"5f1c2a9e-8d1b-4c1e-9a51-2b7c0e3d4f10","transcript_path":"/tmp/t.jsonl","cwd":"/repo","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"cargo test"}}"#;

/// Runs `baton hook claude PreToolUse` in `project` as `who` with [`HOOK_PAYLOAD`],
/// insisting that it exits 0 and prints nothing on stdout; its wall time and what it said
/// on stderr.
pub fn hook(exe: &Path, project: &Path, who: &str) -> (Duration, String) {
    let started = Instant::now();
    let mut child = Command::new(exe)
        .args(["hook", "claude", "PreToolUse"])
        .current_dir(project)
        .env_remove("BATON_PROJECT")
        .env("BATON_AS", who)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the hook");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(HOOK_PAYLOAD)
        .expect("write the payload");
    let out = child.wait_with_output().expect("wait for the hook");
    let took = started.elapsed();
    assert!(out.status.success(), "a hook exited {}", out.status);
    assert!(out.stdout.is_empty(), "a hook printed on stdout");
    (took, String::from_utf8_lossy(&out.stderr).trim().to_owned())
}

/// The state changes the stores are seeded with, the `i`th time: a decision, a note on a
/// record and a stream's status.
pub fn state_ops(i: usize) -> Vec<StateOp> {
    vec![
        StateOp::Decide {
            text: format!("decision {i}: keep the export path single"),
            why: "fewer places to fix".into(),
            supersedes: None,
        },
        StateOp::Note {
            text: format!("note {i} on request {}", i - 1),
            subject: Subject::Record(format!("req-{i}")),
        },
        StateOp::Stream {
            name: format!("stream-{}", i % 7),
            status: format!("step {i}"),
        },
    ]
}

/// Records the run changes gathered so far in one transaction, and empties the batch.
pub async fn record_runs(store: &Store, changes: &mut Vec<RunChange>) {
    if !changes.is_empty() {
        store
            .record_run("@bench", changes)
            .await
            .expect("seed runs");
        changes.clear();
    }
}

/// Runs `baton ARGS…` in `project` (no inherited `BATON_*` identity or project), insisting
/// on success; returns what it printed.
pub fn baton(exe: &Path, project: &Path, args: &[&str]) -> Output {
    let out = Command::new(exe)
        .args(args)
        .current_dir(project)
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_AS")
        .output()
        .expect("run baton");
    assert!(
        out.status.success(),
        "baton {args:?} failed with {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
