//! The portable log through real processes: `baton export` from one project, `baton import`
//! into a fresh one, and the projections come out equal; importing again changes nothing;
//! a line that is not an event is refused with its number.

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use baton_store::SqliteStore;

use crate::common::{Project, code, stderr};

const TEAM: &[(&str, &str)] = &[("planner", "planner"), ("impl-1", "executor")];

fn dump(p: &Project) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        SqliteStore::open(&p.db(), Duration::from_secs(5))
            .await
            .unwrap()
            .projection_dump()
            .await
            .unwrap()
    })
}

fn import(p: &Project, log: &[u8]) -> std::process::Output {
    let mut child = p
        .cmd(None, &["--json", "import", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(log).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn a_log_exported_and_imported_elsewhere_reproduces_every_projection() {
    let a = Project::new(TEAM);
    let id = a.ok(
        Some("planner"),
        &[
            "send", "--to", "impl-1", "--type", "request", "--topic", "csv", "--body", "do it",
        ],
    );
    a.ok(Some("impl-1"), &["show", &id]);
    a.ok(Some("impl-1"), &["complete", &id, "--note", "done in 4f2a"]);
    a.ok(
        Some("planner"),
        &["decide", "Filter in SQL", "--why", "one path"],
    );
    a.ok(None, &["key", "issue", "impl-1", "--scope", "read"]);
    let log = a.run(None, &["export"]);
    assert!(log.status.success(), "{}", stderr(&log));
    let lines = String::from_utf8(log.stdout.clone()).unwrap();
    assert!(lines.lines().count() >= 8, "{lines}");
    assert!(
        !lines.contains("baton_"),
        "a key's token is never in the log"
    );

    // A fresh project holds only what `init` wrote: no events.
    let b = Project::new(&[]);
    let out = import(&b, &log.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    let done: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(done["skipped"], 0);
    assert_eq!(dump(&a), dump(&b), "the projections equal the source's");

    // Again: nothing changes.
    let again = import(&b, &log.stdout);
    let done: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(done["imported"], 0, "{done}");
    assert_eq!(dump(&a), dump(&b));
    // Part of it, from a position on, is the tail of the same log.
    let tail = a.run(None, &["export", "--since", "3"]);
    let tail = String::from_utf8(tail.stdout).unwrap();
    assert_eq!(tail.lines().count(), lines.lines().count() - 3);
}

#[test]
fn a_line_that_is_not_an_event_is_refused_with_its_number() {
    let p = Project::new(TEAM);
    let good = p.run(None, &["export"]).stdout;
    let mut log = good.clone();
    log.extend_from_slice(b"{\"kind\": \"message.sent\", \"data\": {}}\n");
    let out = import(&p, &log);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let lines = good
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    assert!(
        stderr(&out).contains(&format!("line {}", lines + 1)),
        "{}",
        stderr(&out)
    );
}

/// The events of `p`'s exported log, one JSON value a line.
fn exported(p: &Project) -> Vec<serde_json::Value> {
    let out = p.run(None, &["export"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    out.stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}

fn jsonl(events: &[serde_json::Value]) -> Vec<u8> {
    events
        .iter()
        .flat_map(|e| format!("{e}\n").into_bytes())
        .collect()
}

#[test]
fn an_import_is_checked_whole_and_a_refused_log_imports_nothing() {
    let a = Project::new(TEAM);
    for i in 0..40 {
        a.ok(
            Some("planner"),
            &[
                "send",
                "--to",
                "impl-1",
                "--topic",
                "t",
                "--body",
                &format!("m{i}"),
            ],
        );
    }
    let events = exported(&a);
    assert!(events.len() > 40, "{}", events.len());
    let b = Project::new(&[]);
    let before = exported(&b).len();
    let refused = |log: Vec<u8>, why: &str| {
        let out = import(&b, &log);
        assert_eq!(code(&out), 3, "{}", stderr(&out));
        assert!(stderr(&out).contains(why), "{why}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("nothing was imported"),
            "{}",
            stderr(&out)
        );
        assert_eq!(
            exported(&b).len(),
            before,
            "a refused log imported something"
        );
    };
    // A bad line near the end: nothing of what came before it is kept.
    let mut log = jsonl(&events);
    log.extend_from_slice(b"{\"kind\": \"message.sent\", \"data\": {}}\n");
    refused(log, &format!("line {}", events.len() + 1));
    // One id for two different events.
    let mut twice = events.clone();
    let mut other = events[events.len() - 1].clone();
    other["actor"] = serde_json::json!("someone-else");
    twice.push(other);
    refused(jsonl(&twice), "appears twice with different contents");
    // A time no clock gives.
    let mut late = events.clone();
    let last = late.len() - 1;
    late[last]["at"] = serde_json::json!(253_402_300_800_000_i64);
    refused(jsonl(&late), "outside 1970 to 9999");
    // The same log whole imports, and the same event twice in it is one event.
    let mut again = events.clone();
    again.push(events[events.len() - 1].clone());
    let out = import(&b, &jsonl(&again));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(exported(&b).len(), before + events.len());
}
