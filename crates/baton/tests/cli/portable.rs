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

/// `p` runs `args` as `who` (or no one) with `input` on its standard input: the outcome.
pub(crate) fn fed(
    p: &Project,
    who: Option<&str>,
    args: &[&str],
    input: &[u8],
) -> std::process::Output {
    let mut child = p
        .cmd(who, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// `baton --json import -` of `log` into `p`.
pub(crate) fn import(p: &Project, log: &[u8]) -> std::process::Output {
    fed(p, None, &["--json", "import", "-"], log)
}

/// `baton --json import --merge -` of `log` into `p`.
fn merge(p: &Project, log: &[u8]) -> std::process::Output {
    fed(p, None, &["--json", "import", "--merge", "-"], log)
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
    fed(into, None, &args, &log)
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
}

/// `p`'s exported lines, with the line of the event `id` (a message's id is its send's).
fn line_of(p: &Project, id: &str) -> serde_json::Value {
    exported(p)
        .into_iter()
        .find(|e| e["id"] == id)
        .expect("the event in the log")
}

#[test]
fn a_line_reusing_an_event_id_must_be_that_event_whole() {
    let p = Project::new(TEAM);
    let id = p.ok(
        Some("planner"),
        &["send", "--to", "impl-1", "--topic", "t", "--body", "hello"],
    );
    let before = exported(&p).len();
    let mut forged = line_of(&p, &id);
    forged["at"] = serde_json::json!(forged["at"].as_i64().unwrap() + 1);
    let out = import(&p, &jsonl(&[forged]));
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "line 1 is refused (event {id} is in this project already, with other contents)"
        )),
        "{}",
        stderr(&out)
    );
    // Merged or not.
    let mut forged = line_of(&p, &id);
    forged["actor"] = serde_json::json!("impl-1");
    let out = merge(&p, &jsonl(&[forged]));
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("with other contents"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        exported(&p).len(),
        before,
        "a refused log imported something"
    );
}

#[test]
fn one_copied_event_does_not_make_a_log_this_projects_and_a_merge_never_sets_up_its_participants() {
    let team = &[
        ("owner", "owner"),
        ("planner", "planner"),
        ("impl-1", "executor"),
    ];
    // The setup a log's author wants for the victim's participants, written for real in a
    // project of the author's own.
    let author = Project::new(team);
    author.ok(
        None,
        &[
            "agent",
            "policy",
            "impl-1",
            "--may",
            "send,accept,request,approve,effects",
        ],
    );
    author.ok(
        None,
        &[
            "agent",
            "webhook",
            "owner",
            "--url",
            "https://hooks.example.org/steal",
        ],
    );
    author.ok(
        None,
        &[
            "agent",
            "add",
            "helper",
            "--role",
            "executor",
            "--a2a",
            "https://agents.example.org/x",
            "--key-env",
            "PGPASSWORD",
        ],
    );
    let setup: Vec<serde_json::Value> = exported(&author)
        .into_iter()
        .filter(|e| {
            ["participant.policy", "webhook.changed", "participant.a2a"]
                .contains(&e["kind"].as_str().unwrap())
        })
        .map(|mut e| {
            // Aimed at the victim's owner.
            if e["kind"] == "participant.a2a" {
                e["data"]["name"] = serde_json::json!("owner");
            }
            e
        })
        .collect();
    assert_eq!(setup.len(), 3, "{setup:?}");

    // The victim: a project with a history, and a message impl-1 can read, copied exactly.
    let victim = Project::new(team);
    let id = victim.ok(
        Some("planner"),
        &[
            "send",
            "--to",
            "impl-1",
            "--topic",
            "t",
            "--body",
            "for impl-1",
        ],
    );
    victim.ok(Some("planner"), &["decide", "Ship", "--why", "ready"]);
    let mut forged = vec![line_of(&victim, &id)];
    forged.extend(setup);
    let agents = victim.json(None, &["agent", "list"]);
    let hooks = victim.json(None, &["agent", "webhooks"]);
    let before = exported(&victim).len();

    let out = import(&victim, &jsonl(&forged));
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("another project's log"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        exported(&victim).len(),
        before,
        "a refused log imported something"
    );

    // Merged on purpose: nothing of the victim's participants' setup is taken.
    let out = merge(&victim, &jsonl(&forged));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let done: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&done["imported"], &done["left_out"]),
        (&0.into(), &3.into()),
        "{done}"
    );
    assert_eq!(victim.json(None, &["agent", "list"]), agents);
    assert_eq!(victim.json(None, &["agent", "webhooks"]), hooks);
    assert_eq!(exported(&victim).len(), before);

    // The project's own later export, all of it held, is its own log, whatever came since.
    let own = victim.run(None, &["export"]).stdout;
    victim.ok(Some("planner"), &["decide", "Later", "--why", "since"]);
    let out = import(&victim, &own);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn merging_two_projects_with_the_same_item_ids_renames_the_logs_and_prints_the_map() {
    let a = Project::new(TEAM);
    a.ok(
        Some("planner"),
        &["decide", "Ship on Fridays", "--why", "a's"],
    );
    a.ok(
        Some("planner"),
        &[
            "decide",
            "Ship on Mondays",
            "--why",
            "a's second",
            "--supersedes",
            "D-1",
        ],
    );
    a.ok(
        Some("planner"),
        &[
            "constrain",
            "No cron",
            "--tried",
            "cron",
            "--result",
            "drift",
        ],
    );
    let c = Project::new(TEAM);
    c.ok(
        Some("planner"),
        &["decide", "Never on Fridays", "--why", "c's"],
    );
    c.ok(
        Some("planner"),
        &[
            "constrain",
            "No sleeps",
            "--tried",
            "sleep",
            "--result",
            "flaky",
        ],
    );
    let out = import_into(&a, &c, &["--merge"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let done: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        done["renamed"],
        serde_json::json!({"D-1": "D-3", "C-1": "C-2"}),
        "{done}"
    );
    let state = c.json(None, &["state", "show"]);
    let decisions: Vec<(String, String, Option<String>)> = state["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["id"].as_str().unwrap().to_owned(),
                d["text"].as_str().unwrap().to_owned(),
                d["supersedes"].as_str().map(str::to_owned),
            )
        })
        .collect();
    assert!(
        decisions.contains(&("D-1".into(), "Never on Fridays".into(), None)),
        "{decisions:?}"
    );
    assert!(
        decisions.contains(&("D-3".into(), "Ship on Fridays".into(), None)),
        "{decisions:?}"
    );
    assert!(
        decisions.contains(&("D-2".into(), "Ship on Mondays".into(), Some("D-3".into()))),
        "the reference follows the renamed decision: {decisions:?}"
    );
    // The next decision takes an id neither had.
    c.ok(Some("planner"), &["decide", "Next", "--why", "after"]);
    let state = c.json(None, &["state", "show"]);
    assert!(state.to_string().contains("\"D-4\""), "{state}");

    // Merging again changes nothing, and says the same map.
    let before = exported(&c).len();
    let out = import_into(&a, &c, &["--merge"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let again: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(again["imported"], 0, "{again}");
    assert_eq!(again["renamed"], done["renamed"]);
    assert_eq!(exported(&c).len(), before);

    // In words, the map is printed.
    let e = Project::new(TEAM);
    e.ok(Some("planner"), &["decide", "e's own", "--why", "e"]);
    let log = a.run(None, &["export"]).stdout;
    let out = fed(&e, None, &["import", "--merge", "-"], &log);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("D-1 → D-3"), "{text}");
}

/// Text an agent may well write: plain words, and what a terminal would act on (ESC
/// sequences, a bell, right-to-left overrides and marks), line breaks, other scripts.
fn hostile_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    prop::collection::vec(
        prop_oneof![
            Just("plain words"),
            Just("\u{1b}[2J\u{1b}[31m"),
            Just("\u{202e}txt.exe"),
            Just("\u{200f}\u{2066}"),
            Just("\u{7}\u{8}\u{7f}"),
            Just("line\nbreak\ttab"),
            Just("é✓中"),
        ],
        1..4,
    )
    .prop_map(|parts| parts.concat())
}

/// A payload's JSON text and whether the boundary must refuse it: U+0000 in a string, a
/// number no reader keeps exactly, nesting past the limit.
fn payload() -> impl proptest::strategy::Strategy<Value = (String, bool)> {
    use proptest::prelude::*;
    let number = prop_oneof![
        Just(("1", false)),
        Just(("-0", false)),
        Just(("18446744073709551615", false)),
        Just(("0.1", false)),
        Just(("1.5e300", false)),
        Just(("123456789012345678901234567890", true)),
        Just(("1e400", true)),
    ];
    // Levels inside the payload object: 63 more is the deepest taken.
    let depth = prop_oneof![Just(0usize), Just(10), Just(63), Just(64), Just(100)];
    (hostile_text(), any::<bool>(), number, depth).prop_map(|(text, nul, (n, inexact), depth)| {
        let body = serde_json::to_string(&text).unwrap();
        let body = if nul {
            body.replacen('"', "\"\\u0000", 1)
        } else {
            body
        };
        let deep = format!("{}{n}{}", "[".repeat(depth), "]".repeat(depth));
        (
            format!("{{\"body\":{body},\"n\":{n},\"deep\":{deep}}}"),
            nul || inexact || depth + 1 > 64,
        )
    })
}

/// One real operation of a generated history.
#[derive(Debug, Clone)]
enum Step {
    /// From planner (or owner) to impl-1, a request, info or message.
    Send {
        owner: bool,
        kind: usize,
        payload: (String, bool),
    },
    /// impl-1 answers a message it was sent.
    Reply {
        which: usize,
        payload: (String, bool),
    },
    Show {
        which: usize,
    },
    Complete {
        which: usize,
        note: String,
    },
    HandBack {
        which: usize,
        reason: String,
    },
    Decide {
        text: String,
        why: String,
        supersede: bool,
    },
    Constrain {
        text: String,
        tried: String,
    },
    Note {
        text: String,
        which: usize,
    },
    Focus {
        text: String,
    },
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    let which = 0usize..8;
    prop_oneof![
        3 => (any::<bool>(), 0usize..3, payload())
            .prop_map(|(owner, kind, payload)| Step::Send { owner, kind, payload }),
        1 => (which.clone(), payload()).prop_map(|(which, payload)| Step::Reply { which, payload }),
        2 => which.clone().prop_map(|which| Step::Show { which }),
        1 => (which.clone(), hostile_text()).prop_map(|(which, note)| Step::Complete { which, note }),
        1 => (which.clone(), hostile_text())
            .prop_map(|(which, reason)| Step::HandBack { which, reason }),
        1 => (hostile_text(), hostile_text(), any::<bool>())
            .prop_map(|(text, why, supersede)| Step::Decide { text, why, supersede }),
        1 => (hostile_text(), hostile_text())
            .prop_map(|(text, tried)| Step::Constrain { text, tried }),
        1 => (hostile_text(), which).prop_map(|(text, which)| Step::Note { text, which }),
        1 => hostile_text().prop_map(|text| Step::Focus { text }),
    ]
}

/// A send as `from` with `args` and the payload `json`: refused at the boundary exactly
/// when `refused` says; the new id, if it was taken.
fn send(
    p: &Project,
    from: &str,
    args: &[&str],
    (json, refused): &(String, bool),
) -> Option<String> {
    let mut all = vec!["send", "--payload", "-"];
    all.extend_from_slice(args);
    let out = fed(p, Some(from), &all, json.as_bytes());
    assert_eq!(
        code(&out),
        if *refused { 3 } else { 0 },
        "{json:.200}: {}",
        stderr(&out)
    );
    out.status
        .success()
        .then(|| String::from_utf8(out.stdout).unwrap().trim().to_owned())
}

/// Runs `steps` on `p`: a send's outcome is what the boundary says of its payload; any
/// other step may be refused (a message not delivered yet, say), never fail otherwise.
fn play(p: &Project, steps: &[Step]) {
    let mut sent: Vec<String> = Vec::new();
    let pick = |sent: &[String], which: usize| sent.get(which % sent.len().max(1)).cloned();
    let mut decisions = 0;
    for step in steps {
        let out = match step {
            Step::Send {
                owner,
                kind,
                payload,
            } => {
                let from = if *owner { "owner" } else { "planner" };
                let kind = ["request", "info", "message"][*kind];
                let args = ["--to", "impl-1", "--topic", "lane", "--type", kind];
                sent.extend(send(p, from, &args, payload));
                continue;
            }
            Step::Reply { which, payload } => {
                if let Some(parent) = pick(&sent, *which) {
                    sent.extend(send(p, "impl-1", &["--reply-to", &parent], payload));
                }
                continue;
            }
            Step::Show { which } => match pick(&sent, *which) {
                Some(id) => p.run(Some("impl-1"), &["show", &id]),
                None => continue,
            },
            Step::Complete { which, note } => match pick(&sent, *which) {
                Some(id) => p.run(Some("impl-1"), &["complete", &id, "--note", note]),
                None => continue,
            },
            Step::HandBack { which, reason } => match pick(&sent, *which) {
                Some(id) => p.run(Some("impl-1"), &["hand-back", &id, "--reason", reason]),
                None => continue,
            },
            Step::Decide {
                text,
                why,
                supersede,
            } => {
                let old = format!("D-{decisions}");
                let mut args = vec!["decide", text.as_str(), "--why", why.as_str()];
                if *supersede && decisions > 0 {
                    args.extend(["--supersedes", &old]);
                }
                let out = p.run(Some("planner"), &args);
                decisions += usize::from(out.status.success());
                out
            }
            Step::Constrain { text, tried } => p.run(
                Some("planner"),
                &["constrain", text, "--tried", tried, "--result", "failed"],
            ),
            Step::Note { text, which } => {
                let subject = pick(&sent, *which).unwrap_or_else(|| "src/lib.rs".into());
                p.run(Some("planner"), &["note", text, "--subject", &subject])
            }
            Step::Focus { text } => p.run(Some("planner"), &["focus", "set", text]),
        };
        assert!(
            [0, 3, 4, 5].contains(&code(&out)),
            "{step:?}: {}",
            stderr(&out)
        );
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 12,
        max_shrink_iters: 16,
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Whatever a project went through, hostile text included, its export is accepted by
    /// `import` into a fresh project, which then holds the same projections; and it is
    /// the project's own log to the project itself.
    #[test]
    fn every_export_is_accepted_by_import(steps in proptest::collection::vec(step(), 2..9)) {
        let team = &[("planner", "planner"), ("impl-1", "executor"), ("owner", "owner")];
        let a = Project::new(team);
        play(&a, &steps);
        let log = a.run(None, &["export"]);
        proptest::prop_assert_eq!(code(&log), 0, "{}", stderr(&log));
        let b = Project::new(&[]);
        let out = import(&b, &log.stdout);
        proptest::prop_assert_eq!(code(&out), 0, "{}", stderr(&out));
        proptest::prop_assert_eq!(dump(&a), dump(&b));
        let again = import(&a, &log.stdout);
        proptest::prop_assert_eq!(code(&again), 0, "{}", stderr(&again));
        let done: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
        proptest::prop_assert_eq!(&done["imported"], &serde_json::json!(0));
    }
}
