//! `baton evidence run`: runs a command, passes its output through, and records what ran
//! (command line, exit code, the last lines of output, the revision, the times) under
//! `.baton/evidence/`, pointed to by a receipt; and reading those records back for a
//! report (`baton handoff new --report ORDER`).

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use baton_app::doc::EvidenceRun;
use baton_core::awl;
use serde_json::{Value, json};

use super::EvidenceCommand;
use crate::child::{self, Tail};
use crate::commands::Context;
use crate::error::{CommandError, CommandResult, ErrorKind};
use crate::output::{Output, now, timestamp};

/// Lines of output kept in the record.
const TAIL_LINES: usize = 200;

pub async fn evidence(ctx: &Context, cmd: EvidenceCommand, as_json: bool) -> CommandResult<Output> {
    let EvidenceCommand::Run(args) = cmd;
    let actor = ctx.actor().await?;
    let order = match &args.order {
        Some(text) => Some(ctx.order_named(text).await?),
        None => None,
    };
    let revision = Command::new("git")
        .arg("-C")
        .arg(&ctx.project.root)
        .args(["rev-parse", "HEAD"])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned());
    let started = now();
    let mut spawned = match Command::new(&args.command[0])
        .args(&args.command[1..])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        // Nothing ran, so there is no evidence to record.
        Err(e) => {
            return Err(CommandError::new(
                ErrorKind::Run(127),
                format!("{}: {e}", args.command[0]),
            ));
        }
    };
    let tail = Arc::new(Mutex::new(Tail::new(TAIL_LINES)));
    let pumps = [
        spawned
            .stdout
            .take()
            .map(|r| child::tail_into(r, std::io::stdout(), &tail)),
        spawned
            .stderr
            .take()
            .map(|r| child::tail_into(r, std::io::stderr(), &tail)),
    ];
    let status = spawned.wait()?;
    for p in pumps.into_iter().flatten() {
        let _ = p.join();
    }
    let finished = now();
    let code = child::exit_code(&status);
    let (lines, total) = tail.lock().unwrap_or_else(|e| e.into_inner()).lines();
    let id = baton_store::new_id().to_string();
    let step = format!("evidence-{id}");
    let record = json!({
        "schema": "baton/evidence@1",
        "step": step,
        "order": order,
        "command": args.command,
        "exit_code": status.code(),
        "signal": status.signal(),
        "output_tail": lines,
        "output_lines": total,
        "revision": revision,
        "started_at": timestamp(started),
        "finished_at": timestamp(finished),
        "by": actor,
    });
    // The record is an artifact like any other: written under .baton/evidence/, hashed,
    // and pointed to by a receipt, so `baton receipt verify` notices an edit.
    let dir = ctx.project.root.join(crate::project::DIR).join("evidence");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{id}.json"));
    write_durably(
        &path,
        &serde_json::to_vec_pretty(&record).unwrap_or_default(),
    )?;
    let root = ctx.project.root.clone();
    let (receipt, _) = ctx
        .app()?
        .write_receipt(
            &actor,
            &root,
            step.clone(),
            path.display().to_string(),
            None,
        )
        .await?;
    // The command's output is stdout; Baton's own word goes to stderr.
    let doc = EvidenceRun {
        step: step.clone(),
        exit_code: code,
        receipt,
    };
    let note = if as_json {
        baton_app::doc::to_json(&doc).to_string()
    } else {
        format!(
            "baton: {step}: `{}` exited {code} (cite it as ref \"{step}\")",
            args.command.join(" ")
        )
    };
    let out = Output::nothing().with_note(note);
    Ok(match u8::try_from(code) {
        Ok(0) => out,
        Ok(code) => out.with_exit(ErrorKind::Run(code)),
        Err(_) => out.with_exit(ErrorKind::Failed),
    })
}

/// Temp file, fsync, rename: a crash leaves the old file or the new one, never half.
fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    crate::files::write_atomically(path, bytes)
}

/// The most evidence records `handoff new --report` reads: the newest ones (records are
/// named by a ULID, so names sort by time).
const MAX_EVIDENCE_READ: usize = 1000;

/// The `baton evidence run --order ORDER` records under `.baton/evidence/`, oldest first,
/// among the newest [`MAX_EVIDENCE_READ`] records of the project.
pub(super) fn evidence_records(root: &Path, order: &str) -> Vec<Value> {
    let dir = root.join(crate::project::DIR).join("evidence");
    let mut names: Vec<std::ffi::OsString> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_str().is_some_and(|n| n.ends_with(".json")))
        .collect();
    names.sort_unstable_by(|a, b| b.cmp(a));
    names.truncate(MAX_EVIDENCE_READ);
    let mut found: Vec<Value> = names
        .iter()
        .filter_map(|name| {
            crate::files::read_bounded(&dir.join(name), awl::MAX_DOCUMENT_BYTES)
                .ok()
                .filter(|r| !r.over)
                .and_then(|r| serde_json::from_slice::<Value>(&r.bytes).ok())
        })
        .filter(|r| r.get("order").and_then(Value::as_str) == Some(order))
        .collect();
    // By time, not by text: RFC 3339 drops trailing zeros (`…:10Z` is before `…:10.02Z`).
    found.sort_by_key(|v| {
        let text = |key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
        (
            baton_core::time::instant(&text("started_at"), 0),
            text("step"),
        )
    });
    found
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_records_are_ordered_by_time_not_by_text() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(crate::project::DIR).join("evidence");
        std::fs::create_dir_all(&dir).unwrap();
        // As text, "…:10.02Z" sorts before "…:10Z"; as time it is 20 ms after.
        for (file, step, at) in [
            ("b.json", "evidence-b", "2026-11-30T18:45:10.02Z"),
            ("a.json", "evidence-a", "2026-11-30T18:45:10Z"),
            ("c.json", "evidence-c", "2026-11-30T18:45:09.5Z"),
        ] {
            let record = json!({"order": "wo_1", "step": step, "started_at": at});
            std::fs::write(dir.join(file), record.to_string()).unwrap();
        }
        let steps: Vec<Value> = evidence_records(root.path(), "wo_1")
            .into_iter()
            .map(|r| r["step"].clone())
            .collect();
        assert_eq!(steps, ["evidence-c", "evidence-a", "evidence-b"]);
    }
}
