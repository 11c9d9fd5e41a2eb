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
    // Keys are never imported: a credential is issued where it is used.
    assert_eq!(done["left_out"], 1, "{done}");
    let keyless = |p: &Project| -> Vec<String> {
        dump(p)
            .into_iter()
            .filter(|row| !row.starts_with("k|"))
            .collect()
    };
    assert!(dump(&a).iter().any(|row| row.starts_with("k|")));
    assert_eq!(keyless(&b), dump(&b), "no key was imported");
    assert_eq!(keyless(&a), dump(&b), "the projections equal the source's");

    // Again: nothing changes.
    let again = import(&b, &log.stdout);
    let done: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(done["imported"], 0, "{done}");
    assert_eq!(keyless(&a), dump(&b));
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
    let mut last = String::new();
    for i in 0..40 {
        last = a.ok(
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
    // Read, so the log holds a delivery.
    a.ok(Some("impl-1"), &["show", &last]);
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
    // Every event is held to the boundary every edge holds its input to.
    let sent = events
        .iter()
        .rposition(|e| e["kind"] == "message.sent")
        .unwrap();
    let with_line = |text: String| {
        let mut log: Vec<String> = events.iter().map(|e| e.to_string()).collect();
        log[sent] = text;
        (log.join("\n") + "\n").into_bytes()
    };
    let line = events[sent].to_string();
    let body = format!("\"body\":{}", events[sent]["data"]["payload"]["body"]);
    assert!(line.contains(&body), "{line}");
    refused(
        with_line(line.replace(&body, &format!("\"body\":\"x\",{body}"))),
        "duplicate key",
    );
    refused(
        with_line(line.replace(
            &body,
            &format!("\"n\":123456789012345678901234567890,{body}"),
        )),
        "cannot be kept exactly",
    );
    refused(
        with_line(line.replace(&body, "\"body\":\"a\\u0000b\"")),
        "U+0000",
    );
    let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
    refused(
        with_line(line.replace(&body, &format!("\"deep\":{deep},{body}"))),
        "nested too deeply",
    );
    // A payload over the cap, and one that is not what its hash says.
    let mut swollen = events.clone();
    swollen[sent]["data"]["payload"]["body"] = serde_json::json!("x".repeat(300 * 1024));
    refused(jsonl(&swollen), "its payload is refused");
    let mut altered = events.clone();
    altered[sent]["data"]["payload"]["body"] = serde_json::json!("not what was sent");
    refused(jsonl(&altered), "does not match its recorded size and hash");
    // References that neither the store nor the log can resolve.
    let mut ghost = events.clone();
    ghost[sent]["data"]["from"] = serde_json::json!("ghost");
    refused(jsonl(&ghost), "names participant ghost");
    let mut stray = events.clone();
    let delivery = stray
        .iter()
        .position(|e| e["kind"] == "delivery.changed")
        .expect("a delivery in the log");
    stray[delivery]["data"]["message"] = serde_json::json!("01NOSUCHMESSAGE0000000000");
    refused(jsonl(&stray), "refers to message 01NOSUCHMESSAGE0000000000");
    // The same log whole imports, and the same event twice in it is one event.
    let mut again = events.clone();
    again.push(events[events.len() - 1].clone());
    let out = import(&b, &jsonl(&again));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(exported(&b).len(), before + events.len());
}

/// `p`'s log exported, and the outcome of importing it into `into` with `extra` flags.
fn import_into(p: &Project, into: &Project, extra: &[&str]) -> std::process::Output {
    let log = p.run(None, &["export"]).stdout;
    let mut args = vec!["--json", "import"];
    args.extend_from_slice(extra);
    args.push("-");
    let mut child = into
        .cmd(None, &args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&log).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn another_projects_log_is_refused_unless_merged_and_never_brings_keys_or_authority() {
    let a = Project::new(TEAM);
    a.ok(
        Some("planner"),
        &["send", "--to", "impl-1", "--topic", "t", "--body", "from a"],
    );
    a.ok(
        Some("planner"),
        &["decide", "Ship on Fridays", "--why", "a's"],
    );
    let token = a.ok(None, &["key", "issue", "planner", "--scope", "admin"]);
    assert!(token.starts_with("baton_"), "{token}");

    // A project with a history of its own: a's log shares no event with it.
    let c = Project::new(TEAM);
    c.ok(
        Some("planner"),
        &["send", "--to", "impl-1", "--topic", "t", "--body", "from c"],
    );
    let before = exported(&c).len();
    let out = import_into(&a, &c, &[]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("another project's log") && stderr(&out).contains("--merge"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        exported(&c).len(),
        before,
        "a refused log imported something"
    );

    // Merged on purpose: a's work comes, its key and its participants' entries do not.
    let out = import_into(&a, &c, &["--merge"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let done: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The key, and a's two participants, whom c has already.
    assert_eq!(done["left_out"], 3, "{done}");
    let keys = c.json(None, &["key", "list"]);
    assert_eq!(keys["items"].as_array().map(Vec::len), Some(0), "{keys}");
    let state = c.json(None, &["state", "show"]);
    assert!(state.to_string().contains("Ship on Fridays"), "{state}");

    // A participant the log gives another role is refused, merge or not.
    let d = Project::new(&[("planner", "reviewer"), ("impl-1", "executor")]);
    d.ok(
        Some("impl-1"),
        &[
            "send", "--to", "planner", "--topic", "t", "--body", "from d",
        ],
    );
    let out = import_into(&a, &d, &["--merge"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("adds planner as planner, but planner is reviewer here"),
        "{}",
        stderr(&out)
    );
    // And an item id the project uses for another item.
    let e = Project::new(TEAM);
    e.ok(
        Some("planner"),
        &["decide", "Never on Fridays", "--why", "e's"],
    );
    let out = import_into(&a, &e, &["--merge"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("D-1 is another item in this project already"),
        "{}",
        stderr(&out)
    );
}
