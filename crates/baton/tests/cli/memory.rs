//! Project memory end to end: state, STATE.md and its checks, notes that go stale against
//! real git commits, the resume packet's cap, receipts and their alerts, and a SIGKILL
//! during `state render`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Project, XorShift, code, stderr, until_waiting};

const TEAM: &[(&str, &str)] = &[("planner", "planner"), ("impl-1", "executor")];

fn git(dir: &Path, args: &[&str], date: Option<&str>) {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
        .args(args);
    if let Some(date) = date {
        cmd.env("GIT_COMMITTER_DATE", date)
            .env("GIT_AUTHOR_DATE", date);
    }
    let out = cmd.output().expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
}

/// Sets a file's modification time to `secs` since the epoch (so only git can tell).
fn set_mtime(path: &Path, secs: u64) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(std::time::UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}

/// A note's row in `state show --json`, by id.
fn note(p: &Project, id: &str) -> Value {
    let state = p.json(None, &["state", "show"]);
    state["notes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no note {id} in {state}"))
}

fn generation(p: &Project) -> i64 {
    p.json(None, &["state", "show"])["generation"]
        .as_i64()
        .unwrap()
}

#[test]
fn decisions_constraints_and_streams_keep_their_ids_and_history() {
    let p = Project::new(TEAM);
    p.ok(Some("planner"), &["focus", "set", "Ship the export fix"]);
    p.ok(None, &["stream", "set", "export", "--status", "fixing"]);
    assert_eq!(
        p.ok(None, &["decide", "Use SQLite", "--why", "embedded"]),
        "D-1"
    );
    assert_eq!(
        p.ok(None, &["decide", "Use WAL", "--why", "readers"]),
        "D-2"
    );
    assert_eq!(
        p.ok(
            None,
            &[
                "decide",
                "Use PostgreSQL",
                "--why",
                "teams",
                "--supersedes",
                "D-1"
            ]
        ),
        "D-3"
    );
    let again = p.run(None, &["decide", "x", "--why", "y", "--supersedes", "D-1"]);
    assert_eq!(code(&again), 3, "{}", stderr(&again));
    assert!(stderr(&again).contains("already superseded by D-3"));
    let missing = p.run(None, &["decide", "x", "--why", "y", "--supersedes", "D-9"]);
    assert_eq!(code(&missing), 4);
    assert_eq!(
        p.ok(
            None,
            &[
                "constrain",
                "No network",
                "--tried",
                "curl",
                "--result",
                "refused"
            ]
        ),
        "C-1"
    );
    let state = p.json(None, &["state", "show"]);
    assert_eq!(state["focus"], "Ship the export fix");
    assert_eq!(state["decisions"][0]["superseded_by"], "D-3");
    assert_eq!(
        state["decisions"][0]["text"], "Use SQLite",
        "superseded stays readable"
    );
    assert_eq!(state["decisions"][2]["written"]["actor"], "@local");
    assert_eq!(state["streams"][0]["name"], "export");
    p.ok(None, &["stream", "done", "export"]);
    assert_eq!(p.json(None, &["state", "show"])["streams"], json!([]));
    assert_eq!(code(&p.run(None, &["stream", "done", "export"])), 4);
}

#[test]
fn session_end_hands_over_in_one_transaction_or_not_at_all() {
    let p = Project::new(TEAM);
    p.ok(None, &["stream", "set", "export", "--status", "fixing"]);
    let before = generation(&p);
    // One bad part (no such stream) and nothing of the rest is recorded.
    let out = p.run(
        None,
        &[
            "session",
            "end",
            "--completed",
            "nope",
            "--decision",
            "Keep filters :: one path",
        ],
    );
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert_eq!(generation(&p), before);
    let out = p.json(
        None,
        &[
            "session",
            "end",
            "--completed",
            "export",
            "--decision",
            "Keep filters in the query :: one code path",
            "--constraint",
            "Fixtures are read-only :: writing them :: permission denied",
            "--dependency-change",
            "csv 1.3 -> 1.4",
        ],
    );
    assert_eq!(
        out["recorded"],
        json!(["export", "D-1", "C-1", "dependencies"])
    );
    let state = p.json(None, &["state", "show"]);
    assert_eq!(state["streams"], json!([]));
    assert_eq!(state["dependency_changes"][0]["text"], "csv 1.3 -> 1.4");
    let file = p.path().join("handover.json");
    std::fs::write(
        &file,
        r#"{"decisions": [{"text": "Use PG", "why": "teams", "supersedes": "D-1"}]}"#,
    )
    .unwrap();
    let out = p.json(None, &["session", "end", "--file", file.to_str().unwrap()]);
    assert_eq!(out["recorded"], json!(["D-2"]));
    let bad = p.run(None, &["session", "end", "--decision", "no separator"]);
    assert_eq!(code(&bad), 2);

    // The first action for next time heads that participant's packet, and only its own;
    // "continue" is no action, and is refused with nothing recorded.
    let before = generation(&p);
    let vague = p.run(
        Some("impl-1"),
        &["session", "end", "--resume-at", "continue"],
    );
    assert_eq!(code(&vague), 3, "{}", stderr(&vague));
    assert_eq!(generation(&p), before);
    let next = "run cargo test -p export csv_filters";
    let out = p.json(Some("impl-1"), &["session", "end", "--resume-at", next]);
    assert_eq!(out["recorded"], json!(["resume-at"]));
    let packet = p.ok(Some("impl-1"), &["resume"]);
    let header = packet.split("\n\n## ").next().unwrap();
    assert!(
        header.contains("\nWhere my last session stopped (") && header.ends_with(next),
        "{packet}"
    );
    let theirs = p.ok(Some("planner"), &["resume"]);
    assert!(!theirs.contains(next), "{theirs}");
}

#[test]
fn check_tells_valid_truncated_stale_and_drifted_apart() {
    let p = Project::new(TEAM);
    p.ok(None, &["focus", "set", "Ship it"]);
    p.ok(None, &["decide", "Use SQLite", "--why", "embedded"]);
    p.ok(None, &["state", "render"]);
    let file = p.path().join("STATE.md");
    let text = std::fs::read_to_string(&file).unwrap();
    let valid = p.run(None, &["check", "STATE.md"]);
    assert_eq!(code(&valid), 0, "{}", stderr(&valid));

    let variant = |name: &str, contents: &str| -> std::process::Output {
        std::fs::write(p.path().join(name), contents).unwrap();
        p.run(None, &["check", name])
    };
    let cut = variant("cut.md", &text[..text.len() * 2 / 3]);
    assert_eq!(code(&cut), 3);
    assert!(stderr(&cut).contains("TRUNCATED"), "{}", stderr(&cut));
    let tampered = variant(
        "tampered.md",
        &text.replace("\"Use SQLite\"", "\"Use Redis\""),
    );
    assert_eq!(code(&tampered), 3);
    assert!(
        stderr(&tampered).contains("checksum"),
        "{}",
        stderr(&tampered)
    );
    let renamed = variant("renamed.md", &text.replace("## Decisions", "## Choices"));
    assert_eq!(code(&renamed), 2);
    assert!(stderr(&renamed).contains("DRIFTED"), "{}", stderr(&renamed));
    let header = variant(
        "header.md",
        &text.replace(
            "| Id | Decision | Why | Status |",
            "| Id | Decision | Reason | Status |",
        ),
    );
    assert_eq!(code(&header), 2);
    assert!(
        stderr(&header).contains("table header"),
        "{}",
        stderr(&header)
    );
    let marker = variant("marker.md", &text.replace("| current |", "| probably |"));
    assert_eq!(code(&marker), 2);
    assert!(
        stderr(&marker).contains("unknown status marker"),
        "{}",
        stderr(&marker)
    );

    p.ok(None, &["decide", "Use WAL", "--why", "readers"]);
    let stale = p.run(None, &["check", "STATE.md"]);
    assert_eq!(code(&stale), 3);
    assert!(stderr(&stale).contains("STALE"), "{}", stderr(&stale));
    let json = p.run(None, &["--json", "check", "STATE.md"]);
    let err: Value = serde_json::from_slice(&json.stderr).unwrap();
    assert_eq!(err["error"]["kind"], "conflict");
}

#[test]
fn import_applies_table_edits_after_showing_them() {
    let p = Project::new(TEAM);
    p.ok(None, &["stream", "set", "export", "--status", "fixing"]);
    p.ok(None, &["decide", "Use SQLite", "--why", "embedded"]);
    p.ok(None, &["state", "render"]);
    let file = p.path().join("STATE.md");
    let text = std::fs::read_to_string(&file).unwrap();
    let edited = text
        .replace("| export | fixing |", "| export | in review |")
        .replace(
            "| D-1 | Use SQLite | embedded | current |",
            "| D-1 | Use SQLite | embedded | current |\n| new | Use PostgreSQL | teams | supersedes D-1 |",
        );
    std::fs::write(&file, &edited).unwrap();
    assert_eq!(
        code(&p.run(None, &["check", "STATE.md"])),
        0,
        "edits keep the file valid"
    );

    let before = generation(&p);
    let dry = p.json(None, &["state", "import", "STATE.md", "--dry-run"]);
    assert_eq!(dry["changes"].as_array().unwrap().len(), 2, "{dry}");
    assert_eq!(generation(&p), before, "a dry run writes nothing");
    let human = p.ok(None, &["state", "import", "STATE.md", "--dry-run"]);
    assert!(human.contains("new decision superseding D-1"), "{human}");

    let done = p.json(None, &["state", "import", "STATE.md"]);
    assert_eq!(done["recorded"], json!(["export", "D-2"]));
    let state = p.json(None, &["state", "show"]);
    assert_eq!(state["streams"][0]["status"], "in review");
    assert_eq!(state["decisions"][0]["superseded_by"], "D-2");
    // The same file is now stale: importing it twice is refused.
    let again = p.run(None, &["state", "import", "STATE.md"]);
    assert_eq!(code(&again), 3, "{}", stderr(&again));

    // Editing a decision in place is refused, naming it, and changes nothing.
    p.ok(None, &["state", "render"]);
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        text.replace("| Use SQLite | embedded |", "| Use Redis | embedded |"),
    )
    .unwrap();
    let refused = p.run(None, &["state", "import", "STATE.md"]);
    assert_eq!(code(&refused), 3);
    assert!(
        stderr(&refused).contains("D-1: decisions are immutable"),
        "{}",
        stderr(&refused)
    );
}

#[test]
fn notes_go_stale_when_their_subject_changes_in_git_or_the_log() {
    let p = Project::new(TEAM);
    let dir = p.path();
    git(dir, &["init", "-q"], None);
    std::fs::write(dir.join("parse.rs"), "fn parse() {}\n").unwrap();
    git(dir, &["add", "parse.rs"], None);
    git(
        dir,
        &["commit", "-qm", "parse"],
        Some("2020-01-01T00:00:00Z"),
    );
    set_mtime(&dir.join("parse.rs"), 1_577_836_800); // 2020-01-01, the commit's time
    p.ok(
        None,
        &["note", "parse assumes UTF-8", "--subject", "parse.rs"],
    );
    assert_eq!(note(&p, "N-1")["freshness"], "current");

    // A later commit of the path makes the note stale, even with an old work-tree time.
    std::fs::write(dir.join("parse.rs"), "fn parse() { todo!() }\n").unwrap();
    git(
        dir,
        &["commit", "-qam", "change"],
        Some("2099-01-01T00:00:00Z"),
    );
    set_mtime(&dir.join("parse.rs"), 1_577_836_800);
    let stale = note(&p, "N-1");
    assert_eq!(stale["freshness"], "stale", "{stale}");
    assert_eq!(stale["changed_at"], 4_070_908_800_000i64);
    let human = p.ok(None, &["state", "show"]);
    assert!(
        human.contains("N-1 STALE (parse.rs changed 2099-01-01T00:00:00Z after the note of"),
        "{human}"
    );

    // A note on a message goes stale at the message's next event.
    let id = p.ok(
        Some("planner"),
        &[
            "send", "--to", "impl-1", "--type", "request", "--topic", "t", "--body", "x",
        ],
    );
    p.ok(None, &["note", "waiting on impl-1", "--subject", &id]);
    assert_eq!(note(&p, "N-2")["freshness"], "current");
    p.ok(Some("impl-1"), &["show", &id]);
    assert_eq!(note(&p, "N-2")["freshness"], "stale");
    let resume = p.ok(Some("planner"), &["resume"]);
    assert!(
        resume.contains("## Stale notes (do not take as fact)"),
        "{resume}"
    );
    assert!(resume.contains("N-2 STALE"), "{resume}");

    let nowhere = p.run(None, &["note", "x", "--subject", "no/such/file.rs"]);
    assert_eq!(code(&nowhere), 4);
}

#[test]
fn the_resume_packet_keeps_its_order_and_cap() {
    let p = Project::new(TEAM);
    p.ok(None, &["focus", "set", "Ship the export fix"]);
    p.ok(
        None,
        &[
            "constrain",
            "No network",
            "--tried",
            "curl",
            "--result",
            "refused",
        ],
    );
    p.ok(None, &["decide", "Use SQLite", "--why", "embedded"]);
    let payload = json!({
        "body": "Fix the export",
        "x-baton": {"stop_when": ["the fixture is missing"], "decision": {"resume_at": "run cargo test -p export"}}
    });
    let file = p.path().join("req.json");
    std::fs::write(&file, payload.to_string()).unwrap();
    p.ok(
        Some("planner"),
        &[
            "send",
            "--to",
            "impl-1",
            "--type",
            "request",
            "--topic",
            "export",
            "--payload",
            file.to_str().unwrap(),
        ],
    );
    let packet = p.ok(Some("impl-1"), &["resume"]);
    let order = [
        "# Resume: impl-1 (executor)",
        "## What I owe",
        "resume at: run cargo test -p export",
        "## Focus",
        "## Active constraints",
        "## Recent decisions",
        "## What I am waiting for",
        "## Open alerts",
        "## Stop conditions",
        "the fixture is missing",
    ];
    let mut at = 0;
    for part in order {
        let found = packet[at..]
            .find(part)
            .unwrap_or_else(|| panic!("{part:?} out of order in:\n{packet}"));
        at += found;
    }
    // Two hundred more owed messages: the packet stays under its cap and says what it left out.
    for i in 0..200 {
        p.ok(
            Some("planner"),
            &[
                "send",
                "--to",
                "impl-1",
                "--type",
                "info",
                "--topic",
                "noise",
                "--body",
                &format!("note {i} {}", "x".repeat(100)),
            ],
        );
    }
    for cap in [400, 2000, 6000] {
        let out = p
            .cmd(Some("impl-1"), &["resume", "--max-bytes", &cap.to_string()])
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(out.stdout.len() <= cap, "{} > {cap}", out.stdout.len());
    }
    let packet = p.ok(Some("impl-1"), &["resume"]);
    assert!(packet.len() <= 6000);
    assert!(packet.contains("more: `baton inbox`"), "{packet}");
    assert!(
        packet.contains("the fixture is missing"),
        "stop conditions survive a flood:\n{packet}"
    );
    let doc = p.json(Some("impl-1"), &["resume"]);
    assert_eq!(doc["sections"][0]["total"], 201);
    // A cap with room for every line shows every line, past the first page read.
    let doc = p.json(Some("impl-1"), &["resume", "--max-bytes", "100000"]);
    assert_eq!(doc["sections"][0]["shown"], 201, "{doc}");
}

#[test]
fn receipts_verify_and_missing_ones_alert_once() {
    let p = Project::new(TEAM);
    let artifact = p.path().join("out.txt");
    std::fs::write(&artifact, "result").unwrap();
    p.ok(
        None,
        &[
            "receipt",
            "write",
            "--step",
            "build",
            "--artifact",
            "out.txt",
        ],
    );
    let shown = p.json(None, &["receipt", "show", "build"]);
    assert_eq!(
        shown["receipt"]["hash"],
        blake3::hash(b"result").to_hex().to_string()
    );
    assert_eq!(shown["receipt"]["size"], 6);
    p.ok(None, &["receipt", "verify"]);
    std::fs::write(&artifact, "tampered").unwrap();
    let changed = p.run(None, &["receipt", "verify", "build"]);
    assert_eq!(code(&changed), 3);
    assert!(
        stderr(&changed).contains("build: out.txt changed"),
        "{}",
        stderr(&changed)
    );
    std::fs::remove_file(&artifact).unwrap();
    let missing = p.run(None, &["receipt", "verify"]);
    assert_eq!(code(&missing), 3, "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains("out.txt is missing"),
        "{}",
        stderr(&missing)
    );
    assert_eq!(
        code(&p.run(
            None,
            &["receipt", "write", "--step", "x", "--artifact", "nope.txt"]
        )),
        4
    );

    // A wait that runs out fails loud and raises one alert, however often it is repeated.
    for _ in 0..2 {
        let out = p.run(
            None,
            &["receipt", "wait", "--step", "deploy", "--timeout", "200ms"],
        );
        assert_eq!(code(&out), 4);
        assert!(
            stderr(&out).contains("no receipt for step \"deploy\""),
            "{}",
            stderr(&out)
        );
    }
    let alerts = p.json(None, &["alerts"]);
    assert_eq!(alerts["items"].as_array().unwrap().len(), 1, "{alerts}");
    assert_eq!(alerts["items"][0]["id"], "A-1");
    p.ok(None, &["alerts", "ack", "A-1"]);
    assert_eq!(p.json(None, &["alerts"])["items"], json!([]));
    assert_eq!(code(&p.run(None, &["alerts", "ack", "A-1"])), 4);
}

#[test]
fn a_wait_returns_as_soon_as_the_receipt_lands() {
    let p = Project::new(TEAM);
    let mut waiter = p
        .cmd(
            None,
            &[
                "--json",
                "receipt",
                "wait",
                "--step",
                "render",
                "--timeout",
                "60s",
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The receipt is written only once the waiter says it blocks: only the wake-up path
    // can return it.
    until_waiting(&mut waiter);
    std::fs::write(p.path().join("page.html"), "<p>").unwrap();
    p.ok(
        None,
        &[
            "receipt",
            "write",
            "--step",
            "render",
            "--artifact",
            "page.html",
        ],
    );
    let started = Instant::now();
    let out = waiter.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["receipt"]["artifact"], "page.html");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the wait ran to its deadline"
    );
}

#[test]
fn a_render_clears_the_temporary_files_killed_renders_left_long_ago() {
    let p = Project::new(TEAM);
    p.ok(None, &["state", "render"]);
    let stale = p.path().join(".STATE.md.k1ll3d.tmp");
    let fresh = p.path().join(".STATE.md.n0w.tmp");
    for tmp in [&stale, &fresh] {
        std::fs::write(tmp, "half a render").unwrap();
    }
    // An hour old: long past any render in flight.
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(hour_ago)
        .unwrap();
    p.ok(None, &["state", "render"]);
    assert!(!stale.exists(), "the stale temporary file is still there");
    // A recent one may be another render's in flight: left alone.
    assert!(fresh.exists(), "a recent temporary file was removed");
}

#[test]
fn a_killed_render_leaves_the_old_file_or_the_new_one() {
    let p = Project::new(TEAM);
    // A large state, so a render takes long enough to be killed in the middle.
    let decisions: Vec<Value> = (0..3000)
        .map(|i| json!({"text": format!("decision {i} {}", "x".repeat(120)), "why": "load"}))
        .collect();
    // One write makes at most 1000 state changes: the bulk goes in three.
    for chunk in decisions.chunks(1000) {
        let file = p.path().join("bulk.json");
        std::fs::write(&file, json!({ "decisions": chunk }).to_string()).unwrap();
        p.ok(None, &["session", "end", "--file", file.to_str().unwrap()]);
    }
    p.ok(None, &["state", "render"]);
    // How long a render of this state takes, spawn to exit (the slowest of three).
    let render = (0..3)
        .map(|_| {
            let started = Instant::now();
            p.ok(None, &["state", "render"]);
            started.elapsed()
        })
        .max()
        .unwrap();
    // Kill delays spread over the render, weighted to its end where the write is: the
    // fractions walk [0.2, 1.2) by the golden ratio, so every part of it is hit and none
    // twice. A kill that leaves the temporary file behind landed inside the write (after
    // the temporary was created, before the rename); enough of those are required.
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut fraction = (rng.next() % 1000) as f64 / 1000.0;
    let (mut inside_write, mut trials) = (0, 0);
    while trials < 30 || (inside_write < 3 && trials < 400) {
        trials += 1;
        fraction = (fraction + 0.618_033_988_75) % 1.0;
        let delay = render.mul_f64(0.2 + fraction);
        p.ok(None, &["focus", "set", &format!("trial {trials}")]);
        let mut child = p
            .cmd(None, &["state", "render"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        child.kill().ok();
        child.wait().unwrap();
        let leftovers: Vec<_> = std::fs::read_dir(p.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|f| {
                let name = f.file_name().unwrap().to_string_lossy().into_owned();
                name.starts_with(".STATE.md.") && name.ends_with(".tmp")
            })
            .collect();
        if !leftovers.is_empty() {
            inside_write += 1;
            for f in leftovers {
                std::fs::remove_file(f).unwrap();
            }
        }
        // Valid (the new file), or stale (the old one: a conflict, exit 3); truncated is
        // also exit 3, so the kind tells them apart.
        let check = p.run(None, &["--json", "check", "STATE.md"]);
        let stale = serde_json::from_slice::<Value>(&check.stderr)
            .is_ok_and(|e| e["error"]["kind"] == "conflict");
        assert!(
            code(&check) == 0 || (code(&check) == 3 && stale),
            "trial {trials} (killed at {delay:?} of {render:?}): STATE.md is neither the old \
             file nor the new one: {}",
            stderr(&check)
        );
    }
    assert!(
        inside_write >= 3,
        "only {inside_write} of {trials} kills landed inside the write (render {render:?}); \
         the test proved nothing"
    );
}

#[test]
fn a_wait_whose_waiter_died_is_alerted_by_the_reaper_once() {
    let p = Project::new(TEAM);
    let mut waiter = p
        .cmd(
            None,
            &["receipt", "wait", "--step", "deploy", "--timeout", "4s"],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The wait is recorded before the waiter says it blocks, and so before it goes.
    until_waiting(&mut waiter);
    waiter.kill().unwrap();
    waiter.wait().unwrap();
    let expected = |p: &Project| p.json(None, &["state", "show"])["expected_receipts"].clone();
    assert_eq!(expected(&p)[0]["step"], "deploy");
    let deadline = expected(&p)[0]["deadline"]
        .as_str()
        .expect("the recorded deadline")
        .parse::<jiff::Timestamp>()
        .unwrap();

    // Before the deadline nothing is overdue: a pass that ended before it (by this
    // clock, the one baton reads) must raise nothing.
    let pass = p.json(None, &["reap"]);
    let ended = jiff::Timestamp::now();
    assert!(
        ended < deadline,
        "the machine took longer than the 4 s wait to get here; the check proves nothing"
    );
    assert_eq!(pass["overdue"], json!([]), "overdue before its deadline");
    assert_eq!(p.json(None, &["alerts"])["items"], json!([]));

    // After it, one alert, however often reap runs. Waiting out the deadline is the
    // behaviour under test, not synchronisation with another process.
    let left = deadline.duration_since(jiff::Timestamp::now());
    if left.is_positive() {
        std::thread::sleep(Duration::try_from(left).unwrap() + Duration::from_millis(1));
    }
    assert_eq!(
        p.json(None, &["reap"])["overdue"],
        json!(["A-1"]),
        "the reaper did not raise the overdue wait"
    );
    assert_eq!(p.json(None, &["reap"])["overdue"], json!([]));
    let alerts = p.json(None, &["alerts"]);
    assert_eq!(alerts["items"].as_array().unwrap().len(), 1, "{alerts}");
    assert!(
        alerts["items"][0]["message"]
            .as_str()
            .unwrap()
            .contains("deploy")
    );
    assert_eq!(expected(&p), json!([]), "the alert settles the wait");
}
