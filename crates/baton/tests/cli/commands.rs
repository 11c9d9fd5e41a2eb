//! The commands as a user runs them: output (human and JSON, as snapshots), refusals and
//! their exit codes, and what each leaves in the store.

use std::io::Write;
use std::process::Stdio;

use serde_json::Value;

use crate::common::{Project, code, stderr};

const TEAM: &[(&str, &str)] = &[
    ("planner", "planner"),
    ("impl-1", "executor"),
    ("impl-2", "executor"),
];

/// Snapshots with ids, times and ages replaced, since they change on every run.
macro_rules! snapshot {
    ($name:expr, $value:expr) => {
        insta::with_settings!({
            filters => vec![
                (r"[0-9A-HJKMNP-TV-Z]{26}", "[ID]"),
                (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "[TIME]"),
                (r"\b\d{1,2}s\b", "Ns"),
                (r"/tmp/[^\s/]+", "[DIR]"),
            ],
            prepend_module_to_snapshot => false,
        }, {
            insta::assert_snapshot!($name, $value);
        });
    };
}

/// How many messages the project holds, as anyone sees them.
fn message_count(p: &Project) -> usize {
    let mut count = 0;
    let mut cursor = String::new();
    loop {
        let mut args = vec!["search", "--limit", "100"];
        if !cursor.is_empty() {
            args.extend(["--cursor", &cursor]);
        }
        let page = p.json(None, &args);
        count += page["items"].as_array().unwrap().len();
        // The last page has no next: null, never an empty cursor.
        assert_ne!(page["next"], "", "{page}");
        cursor = page["next"].as_str().unwrap_or_default().to_owned();
        if cursor.is_empty() {
            assert!(page["next"].is_null(), "{page}");
            return count;
        }
    }
}

fn send_request(p: &Project, to: &str, body: &str) -> String {
    p.ok(
        Some("planner"),
        &[
            "send",
            "--to",
            to,
            "--type",
            "request",
            "--topic",
            "csv-export",
            "--body",
            body,
        ],
    )
}

#[test]
fn a_message_is_named_by_a_unique_prefix_of_its_id_in_either_case() {
    let p = Project::new(TEAM);
    let first = send_request(&p, "impl-1", "one");
    let second = send_request(&p, "impl-1", "two");
    let common = first
        .chars()
        .zip(second.chars())
        .take_while(|(a, b)| a == b)
        .count();
    assert!(common >= 6, "sent a second apart? {first} {second}");
    let unique = first[..common + 1].to_lowercase();
    let shown = p.json(Some("impl-1"), &["show", &unique]);
    assert_eq!(shown["id"], first.as_str());
    p.ok(Some("impl-1"), &["show", &second.to_lowercase()]);
    p.ok(Some("impl-1"), &["complete", &second.to_lowercase()]);
    let replied = p.ok(
        Some("impl-1"),
        &["send", "--reply-to", &unique, "--body", "why?"],
    );
    let thread = p.json(None, &["thread", &replied.to_lowercase()]);
    assert_eq!(thread["id"], replied.as_str());

    // A prefix of both is refused, naming each; one too short to name any is refused too.
    let out = p.run(Some("impl-1"), &["show", &first[..common]]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let why = stderr(&out);
    assert!(why.contains(&first) && why.contains(&second), "{why}");
    let out = p.run(Some("impl-1"), &["show", &first[..5]]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("at least 6 characters"),
        "{}",
        stderr(&out)
    );
    assert_eq!(code(&p.run(Some("impl-1"), &["show", "ZZZZZZZ"])), 4);
}

#[test]
fn init_twice_is_harmless_and_keeps_gitignore_lines() {
    let p = Project::new(&[]);
    std::fs::write(p.path().join(".gitignore"), "target/\n").unwrap();
    let second = p.json(None, &["init"]);
    assert_eq!(second["created"], false);
    assert_eq!(second["gitignore"], "updated");
    let text = std::fs::read_to_string(p.path().join(".gitignore")).unwrap();
    assert!(text.starts_with("target/\n"), "{text}");
    assert!(text.contains(".baton/baton.db-wal"), "{text}");
    let human = p.ok(None, &["init"]);
    assert!(human.contains("already initialized"), "{human}");
    let mode = std::fs::read(p.db()).unwrap();
    // A WAL-mode database says so in its header (bytes 18 and 19 are 2).
    assert_eq!((mode[18], mode[19]), (2, 2));
}

#[test]
fn init_over_an_empty_store_file_says_it_made_the_store_in_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".baton")).unwrap();
    std::fs::write(dir.path().join(".baton/baton.db"), b"").unwrap();
    let out = std::process::Command::new(crate::common::baton_exe())
        .current_dir(dir.path())
        .env_remove("BATON_PROJECT")
        .args(["--json", "init"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["created"], true, "{doc}");
    let out = std::process::Command::new(crate::common::baton_exe())
        .current_dir(dir.path())
        .env_remove("BATON_PROJECT")
        .args(["init"])
        .output()
        .unwrap();
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(human.contains("already initialized"), "{human}");
}

#[test]
fn outside_a_project_the_error_names_init_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(crate::common::baton_exe())
        .current_dir(dir.path())
        .env_remove("BATON_PROJECT")
        .args(["--as", "planner", "inbox"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("baton init"), "{err}");
}

#[test]
fn the_project_is_found_upward_and_by_override() {
    let p = Project::new(TEAM);
    let nested = p.path().join("src/deep");
    std::fs::create_dir_all(&nested).unwrap();
    let out = p
        .cmd(Some("impl-1"), &["inbox"])
        .current_dir(&nested)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let elsewhere = tempfile::tempdir().unwrap();
    let out = p
        .cmd(Some("impl-1"), &["inbox", "--json"])
        .current_dir(elsewhere.path())
        .env("BATON_PROJECT", p.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let out = p
        .cmd(
            Some("impl-1"),
            &["--project", elsewhere.path().to_str().unwrap(), "inbox"],
        )
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "a --project without .baton/ is refused");
}

#[test]
fn passnames_follow_the_slug_rule() {
    let p = Project::new(&[]);
    for bad in ["Planner", "ünicode", "a_b", "a b"] {
        let out = p.run(None, &["agent", "add", bad, "--role", "planner"]);
        assert_eq!(code(&out), 3, "{bad}");
        assert!(
            stderr(&out).contains("[a-z0-9][a-z0-9-]{0,63}"),
            "{}",
            stderr(&out)
        );
    }
    p.ok(None, &["agent", "add", "impl-1", "--role", "executor"]);
    let again = p.json(None, &["agent", "add", "impl-1", "--role", "executor"]);
    assert_eq!(again["created"], false);
    let other_role = p.run(None, &["agent", "add", "impl-1", "--role", "reviewer"]);
    assert_eq!(code(&other_role), 3);
    snapshot!("agent_list", p.ok(None, &["agent", "list"]));
    snapshot!("agent_list_json", p.ok(None, &["--json", "agent", "list"]));
}

#[test]
fn a_policy_bounds_what_a_participant_may_do_and_each_refusal_is_recorded() {
    let p = Project::new(&[
        ("planner", "planner"),
        ("impl-1", "executor"),
        ("watch", "observer"),
    ]);
    let ask = |who: &str, topic: &str| {
        p.run(
            Some(who),
            &[
                "send", "--to", "planner", "--type", "request", "--topic", topic, "--body", "x",
            ],
        )
    };
    // By default an executor takes on work but does not ask for it.
    let out = ask("impl-1", "billing");
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    for words in [
        "impl-1 (executor) may not send requests",
        "its policy allows send, accept on every topic",
        "baton agent policy impl-1 --may request",
    ] {
        assert!(stderr(&out).contains(words), "{words}: {}", stderr(&out));
    }
    assert_eq!(message_count(&p), 0, "nothing was sent");
    // An observer sends nothing at all.
    let out = p.run(
        Some("watch"),
        &["send", "--to", "planner", "--topic", "t", "--body", "hi"],
    );
    assert_eq!(code(&out), 5);

    let events = p.json(None, &["security-events"]);
    let items = events["items"].as_array().unwrap();
    assert_eq!(events["schema"], "baton/security-events@1");
    assert_eq!(items.len(), 2, "{events}");
    assert_eq!(
        (
            &items[1]["participant"],
            &items[1]["action"],
            &items[1]["topic"]
        ),
        (&"impl-1".into(), &"request".into(), &"billing".into())
    );
    assert_eq!(items[0]["participant"], "watch", "newest first");
    let page = p.json(
        None,
        &["security-events", "--before", &items[0]["seq"].to_string()],
    );
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert!(p.ok(None, &["security-events"]).contains("impl-1"));

    // Widened to requests on billing topics, and nowhere else.
    let set = p.json(
        None,
        &[
            "agent",
            "policy",
            "impl-1",
            "--may",
            "send,accept,request",
            "--topics",
            "billing-*",
        ],
    );
    assert_eq!(set["schema"], "baton/agent-policy@1");
    assert_eq!(
        set["policy"]["may"],
        serde_json::json!(["request", "send", "accept"])
    );
    assert_eq!(set["policy"]["topics"], serde_json::json!(["billing-*"]));
    assert_eq!(set["policy"]["default"], false);
    assert_eq!(code(&ask("impl-1", "billing-api")), 0);
    assert_eq!(code(&ask("impl-1", "docs")), 5);
    assert!(
        p.ok(None, &["agent", "list"])
            .contains("request,send,accept on billing-* (set)")
    );
    // Narrowing only the topics keeps the powers; --default returns to the role's.
    let set = p.json(None, &["agent", "policy", "impl-1", "--topics", "docs"]);
    assert_eq!(
        set["policy"]["may"],
        serde_json::json!(["request", "send", "accept"])
    );
    assert_eq!(code(&ask("impl-1", "docs")), 0);
    let reset = p.json(None, &["agent", "policy", "impl-1", "--default"]);
    assert_eq!(reset["policy"]["default"], true);
    assert_eq!(code(&ask("impl-1", "docs")), 5);

    // A participant added with a policy holds it from the start.
    let added = p.json(
        None,
        &[
            "agent",
            "add",
            "bot",
            "--role",
            "executor",
            "--may",
            "request,send",
            "--topics",
            "ops",
        ],
    );
    assert_eq!(
        (added["created"].as_bool(), added["policy_set"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(code(&ask("bot", "ops")), 0);

    // Bad input is refused by name, and changes nothing.
    for (args, words) in [
        (
            vec!["agent", "policy", "impl-1", "--may", "deploy"],
            "unknown power \"deploy\"",
        ),
        (
            vec!["agent", "policy", "impl-1", "--topics", "Bad*"],
            "topic pattern \"Bad*\"",
        ),
        (
            vec!["agent", "policy", "impl-1"],
            "--may, --topics or --default",
        ),
        (vec!["agent", "policy", "ghost", "--default"], "ghost"),
    ] {
        let out = p.run(None, &args);
        assert_ne!(code(&out), 0, "{args:?}");
        assert!(stderr(&out).contains(words), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn a_webhook_is_set_with_a_secret_shown_once_and_removed() {
    let p = Project::new(TEAM);
    let set = p.json(
        None,
        &[
            "agent",
            "webhook",
            "impl-1",
            "--url",
            "https://hooks.example.com/baton",
        ],
    );
    assert_eq!(set["schema"], "baton/webhook-set@1");
    let secret = set["secret"].as_str().unwrap().to_owned();
    assert_eq!(secret.len(), "whsec_".len() + 64);
    let listed = p.json(None, &["agent", "webhooks"]);
    assert_eq!(listed["items"][0]["url"], "https://hooks.example.com/baton");
    assert!(!listed.to_string().contains(&secret));
    assert!(!p.ok(None, &["agent", "webhooks"]).contains(&secret));
    // Set again: a new secret.
    let again = p.json(
        None,
        &[
            "agent",
            "webhook",
            "impl-1",
            "--url",
            "http://93.184.216.34:8080/x",
        ],
    );
    assert_ne!(again["secret"], set["secret"]);
    // Only public addresses: no loopback, private, link-local or numeric-trick hosts.
    for inward in [
        "http://127.0.0.1:5432/",
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.1/",
        "http://[::1]/",
        "http://0.0.0.0/",
        "http://2130706433/",
        "http://localhost:9/",
    ] {
        let out = p.run(None, &["agent", "webhook", "impl-1", "--url", inward]);
        assert_eq!(code(&out), 3, "{inward}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("--allow-private-webhooks"),
            "{inward}: {}",
            stderr(&out)
        );
    }
    // A project that allows them (a local test setup) takes them.
    p.configure("allow_private = false", "allow_private = true");
    p.json(
        None,
        &[
            "agent",
            "webhook",
            "impl-1",
            "--url",
            "http://127.0.0.1:9/x",
        ],
    );
    for (args, want) in [
        (
            vec!["agent", "webhook", "impl-1", "--url", "file:///etc/passwd"],
            3,
        ),
        (vec!["agent", "webhook", "ghost", "--url", "http://h/"], 4),
        (vec!["agent", "webhook", "impl-1"], 2),
    ] {
        let out = p.run(None, &args);
        assert_eq!(code(&out), want, "{args:?}: {}", stderr(&out));
    }
    let off = p.json(None, &["agent", "webhook", "impl-1", "--off"]);
    assert!(
        off.get("url").is_none() && off.get("secret").is_none(),
        "{off}"
    );
    assert_eq!(
        p.json(None, &["agent", "webhooks"])["items"],
        serde_json::json!([])
    );
}

#[test]
fn an_unknown_identity_is_refused_and_writes_nothing() {
    let p = Project::new(TEAM);
    let out = p.run(
        Some("ghost"),
        &["send", "--to", "impl-1", "--topic", "t", "--body", "hi"],
    );
    assert_eq!(code(&out), 4);
    assert!(
        stderr(&out).contains("baton agent add ghost"),
        "{}",
        stderr(&out)
    );
    let out = p.run(Some("ghost"), &["inbox"]);
    assert_eq!(code(&out), 4);
    assert_eq!(message_count(&p), 0);
    let out = p.run(None, &["inbox"]);
    assert_eq!(code(&out), 2, "no identity at all is a usage error");
}

#[test]
fn bad_sends_are_refused_with_the_reason_and_store_nothing() {
    let p = Project::new(TEAM);
    let cases: &[(&[&str], Option<&str>, i32, &str)] = &[
        (
            &["--to", "nobody", "--topic", "t", "--body", "x"],
            None,
            4,
            "unknown participant",
        ),
        (
            &["--to", "impl-1", "--topic", "Bad Topic", "--body", "x"],
            None,
            3,
            "topic",
        ),
        (
            &["--to", "impl-1", "--topic", "t", "--payload", "-"],
            Some("{not json"),
            3,
            "not valid JSON",
        ),
        (
            &["--to", "impl-1", "--topic", "t", "--payload", "-"],
            Some("[1, 2]"),
            3,
            "must be a JSON object",
        ),
        (
            &[
                "--to",
                "impl-1",
                "--topic",
                "t",
                "--reply-to",
                "01JD0000000000000000000000",
                "--body",
                "x",
            ],
            None,
            4,
            "to reply to",
        ),
        (
            &["--to", "planner", "--topic", "t", "--body", "x"],
            None,
            3,
            "cannot send to itself",
        ),
        (
            &[
                "--to", "impl-1", "--type", "order", "--topic", "t", "--body", "x",
            ],
            None,
            2,
            "order",
        ),
    ];
    for (args, stdin, want, says) in cases {
        let mut all = vec!["send"];
        all.extend_from_slice(args);
        let mut child = p
            .cmd(Some("planner"), &all)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
        drop(input);
        let out = child.wait_with_output().unwrap();
        assert_eq!(code(&out), *want, "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(message_count(&p), 0);
}

#[test]
fn an_oversized_payload_is_refused_with_its_size_and_the_cap() {
    let p = Project::new(TEAM);
    let big = format!("{{\"body\": \"{}\"}}", "x".repeat(300 * 1024));
    let file = p.path().join("big.json");
    std::fs::write(&file, &big).unwrap();
    let out = p.run(
        Some("planner"),
        &[
            "send",
            "--to",
            "impl-1",
            "--topic",
            "t",
            "--payload",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(code(&out), 3);
    let err = stderr(&out);
    assert!(err.contains(&big.len().to_string()), "{err}");
    assert!(err.contains("262144"), "{err}");
    // The cap is the project's to set.
    let config = p.path().join(".baton/config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("payload_cap = 262144", "payload_cap = 16"),
    )
    .unwrap();
    let out = p.run(
        Some("planner"),
        &[
            "send",
            "--to",
            "impl-1",
            "--topic",
            "t",
            "--body",
            "seventeen bytes!",
        ],
    );
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert_eq!(message_count(&p), 0);
}

#[test]
fn duplicate_sends_return_the_original_id() {
    let p = Project::new(TEAM);
    let args = [
        "--json", "send", "--to", "impl-1", "--topic", "t", "--body", "same",
    ];
    let first = p.json(Some("planner"), &args[1..]);
    assert_eq!(first["duplicate"], false);
    let second = p.json(Some("planner"), &args[1..]);
    assert_eq!(second["duplicate"], true);
    assert_eq!(second["id"], first["id"]);
    let keyed = [
        "send",
        "--to",
        "impl-1",
        "--topic",
        "t",
        "--body",
        "k",
        "--idempotency-key",
        "job-7",
    ];
    let a = p.json(Some("planner"), &keyed);
    let b = p.json(Some("planner"), &keyed);
    assert_eq!(
        (a["id"].clone(), b["duplicate"].clone()),
        (b["id"].clone(), Value::Bool(true))
    );
    // The same text to someone else is a new message, not a duplicate.
    let other = p.json(
        Some("planner"),
        &["send", "--to", "impl-2", "--topic", "t", "--body", "same"],
    );
    assert_eq!(other["duplicate"], false);
    let mut elsewhere = keyed.to_vec();
    elsewhere[2] = "impl-2";
    assert_eq!(
        code(&p.run(Some("planner"), &elsewhere)),
        3,
        "a key names one message"
    );
    let mut reused = keyed.to_vec();
    reused[6] = "different";
    let out = p.run(Some("planner"), &reused);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert_eq!(message_count(&p), 3);
    // With the window off, the same content is a new message.
    let config = p.path().join(".baton/config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("duplicate_window = \"10m\"", "duplicate_window = \"0s\""),
    )
    .unwrap();
    let third = p.json(Some("planner"), &args[1..]);
    assert_eq!(third["duplicate"], false);
    assert_ne!(third["id"], first["id"]);
}

#[test]
fn a_round_through_inbox_show_thread_and_outbox() {
    let p = Project::new(TEAM);
    let id = send_request(&p, "impl-1,impl-2", "CSV export drops the active filters");
    // Previewing is not delivery.
    snapshot!("inbox_pending", p.ok(Some("impl-1"), &["inbox"]));
    let inbox = p.json(Some("impl-1"), &["inbox"]);
    let row = &inbox["items"][0];
    for field in [
        "id",
        "from",
        "to",
        "type",
        "topic",
        "status",
        "size",
        "created_at",
    ] {
        assert!(!row[field].is_null(), "inbox rows carry {field}: {row}");
    }
    assert_eq!(row["status"], "pending");
    assert_eq!(inbox["schema"], "baton/inbox@1");

    // Acking a request is not a step the table has; fetching first is.
    let out = p.run(Some("impl-1"), &["ack", &id]);
    assert_eq!(code(&out), 3);
    assert!(
        stderr(&out).contains("its status is pending"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("allowed next: show, refuse"),
        "{}",
        stderr(&out)
    );

    snapshot!("show", p.ok(Some("impl-1"), &["show", &id]));
    let question = p.ok(
        Some("impl-1"),
        &["send", "--reply-to", &id, "--body", "Which filters?"],
    );
    let answer = p.ok(
        Some("planner"),
        &[
            "send",
            "--reply-to",
            &question,
            "--body",
            "Status and date.",
        ],
    );
    p.ok(Some("impl-1"), &["show", &answer]);
    p.ok(Some("impl-1"), &["ack", &answer]);
    p.ok(
        Some("impl-1"),
        &["complete", &id, "--note", "Filters kept; test added."],
    );
    p.ok(Some("impl-2"), &["show", &id]);
    p.ok(
        Some("impl-2"),
        &["hand-back", &id, "--reason", "No fixture for dates."],
    );

    snapshot!("thread", p.ok(None, &["thread", &id]));
    snapshot!("outbox", p.ok(Some("planner"), &["outbox"]));
    let outbox = p.json(Some("planner"), &["outbox"]);
    let status = &outbox["items"][0]["status"];
    assert_eq!(status["impl-1"], "completed");
    assert_eq!(status["impl-2"], "handed_back");
    assert_eq!(outbox["items"][0]["replies"], 3);
    assert_eq!(
        p.ok(Some("impl-1"), &["inbox"]),
        "impl-1 owes nothing: the inbox is empty."
    );

    // The sender closes its own end, separately.
    p.ok(Some("planner"), &["complete", &id]);
    p.ok(Some("planner"), &["archive", &id]);
    assert_eq!(
        p.json(Some("planner"), &["outbox"])["items"],
        Value::Array(vec![])
    );
    let out = p.run(Some("impl-1"), &["complete", &id]);
    assert_eq!(code(&out), 3, "completing twice is refused");
    p.ok(Some("impl-1"), &["archive", &id]);
    let out = p.run(Some("impl-1"), &["complete", &id]);
    assert!(
        stderr(&out).contains("its status is archived"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("it is final"), "{}", stderr(&out));
}

#[test]
fn show_truncates_explicitly_and_states_the_true_size() {
    let p = Project::new(TEAM);
    let id = send_request(&p, "impl-1", &"long text ".repeat(100));
    let human = p.ok(Some("impl-1"), &["show", &id, "--max-bytes", "64"]);
    let full_len =
        serde_json::to_string_pretty(&serde_json::json!({"body": "long text ".repeat(100)}))
            .unwrap()
            .len();
    assert!(
        human.contains(&format!("[truncated: showing 64 of {full_len} bytes")),
        "{human}"
    );
    let doc = p.json(Some("impl-1"), &["show", &id, "--max-bytes", "64"]);
    assert_eq!(doc["payload"], Value::Null);
    assert_eq!(doc["truncated"]["shown_bytes"], 64);
    assert_eq!(doc["truncated"]["total_bytes"], full_len);
    assert_eq!(doc["payload_text"].as_str().unwrap().len(), 64);
    let whole = p.json(Some("impl-1"), &["show", &id]);
    assert_eq!(whole["truncated"], Value::Null);
    assert_eq!(whole["payload"]["body"], "long text ".repeat(100));
}

#[test]
fn each_recipient_moves_independently() {
    let p = Project::new(TEAM);
    let id = send_request(&p, "impl-1,impl-2", "two ends");
    p.ok(Some("impl-1"), &["show", &id]);
    assert_eq!(
        p.json(Some("impl-1"), &["inbox"])["items"][0]["status"],
        "delivered"
    );
    assert_eq!(
        p.json(Some("impl-2"), &["inbox"])["items"][0]["status"],
        "pending"
    );
    // A participant who is neither sender nor recipient cannot step on it.
    let p3 = Project::new(&[("planner", "planner"), ("a", "executor"), ("b", "executor")]);
    let id = p3.ok(
        Some("planner"),
        &[
            "send", "--to", "a", "--type", "request", "--topic", "t", "--body", "x",
        ],
    );
    let out = p3.run(Some("b"), &["complete", &id]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
}

#[test]
fn search_since_takes_ages_in_days_and_weeks() {
    let p = Project::new(TEAM);
    let id = p.ok(
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
            "filters",
        ],
    );
    let ids = |args: &[&str]| -> Vec<String> {
        p.json(None, args)["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    // The README's line, as written.
    assert_eq!(
        ids(&[
            "search",
            "--topic",
            "csv-export",
            "--since",
            "1d",
            "filters"
        ]),
        vec![id.clone()]
    );
    assert_eq!(ids(&["search", "--since", "3d"]), vec![id.clone()]);
    assert_eq!(ids(&["search", "--since", "2w"]), vec![id.clone()]);
    assert_eq!(ids(&["search", "--until", "1d"]), Vec::<String>::new());
    // A unit with no fixed length is refused, and the refusal lists what works.
    let out = p.run(None, &["search", "--since", "1y"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    for unit in ["30s", "10m", "2h", "1d", "2w"] {
        assert!(stderr(&out).contains(unit), "{}", stderr(&out));
    }
}

#[test]
fn search_filters_and_pages() {
    let p = Project::new(TEAM);
    for i in 0..5 {
        p.ok(
            Some("planner"),
            &[
                "send",
                "--to",
                "impl-1",
                "--type",
                "info",
                "--topic",
                "lane-a",
                "--body",
                &format!("note {i}"),
            ],
        );
    }
    let req = p.ok(
        Some("planner"),
        &[
            "send",
            "--to",
            "impl-2",
            "--type",
            "request",
            "--topic",
            "lane-b",
            "--body",
            "Needle in here",
        ],
    );
    let ids = |v: &Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&p.json(None, &["search", "needle"])), vec![req.clone()]);
    assert_eq!(
        ids(&p.json(None, &["search", "--topic", "lane-b"])),
        vec![req.clone()]
    );
    assert_eq!(
        ids(&p.json(None, &["search", "--type", "request"])),
        vec![req.clone()]
    );
    assert_eq!(
        ids(&p.json(None, &["search", "--to", "impl-2"])),
        vec![req.clone()]
    );
    assert_eq!(
        p.json(None, &["search", "--from", "impl-1"])["items"],
        Value::Array(vec![])
    );
    assert_eq!(ids(&p.json(None, &["search", "--since", "1h"])).len(), 6);
    assert_eq!(ids(&p.json(None, &["search", "--until", "1h"])).len(), 0);
    p.ok(Some("impl-2"), &["show", &req]);
    assert_eq!(
        ids(&p.json(Some("impl-2"), &["search", "--status", "delivered"])),
        vec![req.clone()]
    );
    assert_eq!(
        ids(&p.json(Some("impl-1"), &["search", "--status", "delivered"])).len(),
        0
    );

    // Pages of two walk all six, newest first, each once.
    let mut seen = Vec::new();
    let mut cursor = String::new();
    for _ in 0..10 {
        let mut args = vec!["search", "--limit", "2"];
        if !cursor.is_empty() {
            args.extend(["--cursor", &cursor]);
        }
        let page = p.json(None, &args);
        seen.extend(ids(&page));
        cursor = page["next"].as_str().unwrap_or_default().to_owned();
        if cursor.is_empty() {
            break;
        }
    }
    assert_eq!(seen.len(), 6);
    assert_eq!(seen[0], req);
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.reverse();
    assert_eq!(seen, sorted, "ULIDs sort by time: newest first");
    let out = p.run(None, &["search", "--limit", "101"]);
    assert_eq!(code(&out), 2);
    let out = p.run(None, &["search", "--cursor", "garbage"]);
    assert_eq!(code(&out), 3);
}

#[test]
fn json_errors_are_structured_on_stderr() {
    let p = Project::new(TEAM);
    let out = p.run(
        Some("impl-1"),
        &["--json", "show", "01JD0000000000000000000000"],
    );
    assert_eq!(code(&out), 4);
    assert!(out.stdout.is_empty());
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["schema"], "baton/error@1");
    assert_eq!(err["error"]["kind"], "not_found");
    assert_eq!(err["error"]["exit_code"], 4);
}

#[test]
fn help_has_examples() {
    let p = Project::new(&[]);
    let commands: &[&[&str]] = &[
        &["send"],
        &["inbox"],
        &["outbox"],
        &["show"],
        &["thread"],
        &["ack"],
        &["complete"],
        &["hand-back"],
        &["refuse"],
        &["archive"],
        &["search"],
        &["init"],
        &["demo"],
        &["agent", "add"],
        &["agent", "list"],
        &["focus", "set"],
        &["stream", "set"],
        &["stream", "done"],
        &["decide"],
        &["constrain"],
        &["note"],
        &["session", "end"],
        &["state", "show"],
        &["state", "render"],
        &["state", "import"],
        &["check"],
        &["resume"],
        &["receipt", "write"],
        &["receipt", "show"],
        &["receipt", "verify"],
        &["receipt", "wait"],
        &["alerts"],
    ];
    for cmd in commands {
        let mut args = cmd.to_vec();
        args.push("--help");
        let help = p.ok(None, &args);
        assert!(
            help.contains("Example"),
            "baton {cmd:?} --help has no example:\n{help}"
        );
    }
}

#[test]
fn actions_beyond_authority_include_memory_an_observer_writes_nothing_and_each_try_is_recorded() {
    let p = Project::new(&[("planner", "planner"), ("watch", "observer")]);
    let before = p.json(None, &["state", "show"]);
    let tries: &[&[&str]] = &[
        &["decide", "x", "--why", "w"],
        &["focus", "set", "watching"],
        &["stream", "set", "export", "--status", "s"],
        &["constrain", "c", "--tried", "t", "--result", "r"],
        &["note", "n", "--subject", ".baton"],
        &["need", "a person should look"],
        &["session", "end", "--completed", "x"],
    ];
    for args in tries {
        let out = p.run(Some("watch"), args);
        assert_eq!(code(&out), 5, "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("may not send messages or record project memory"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    let events = p.json(None, &["security-events"]);
    let items = events["items"].as_array().unwrap();
    // Each try is on record: the same refusal again within the minute is counted on the
    // event it repeats.
    let counted: i64 = items.iter().map(|e| e["count"].as_i64().unwrap()).sum();
    assert_eq!(counted, tries.len() as i64, "every try on record: {events}");
    assert!(items.iter().all(|e| e["participant"] == "watch"));
    let mut after = p.json(None, &["state", "show"]);
    // Nothing but the security events changed: the state is as it was.
    after["generation"] = before["generation"].clone();
    assert_eq!(after, before);
    // The planner records the same memory freely.
    p.ok(Some("planner"), &["decide", "x", "--why", "w"]);
}

#[test]
fn actions_beyond_authority_include_a_request_the_recipient_may_not_take_on() {
    let p = Project::new(&[("planner", "planner"), ("impl-1", "executor")]);
    p.ok(None, &["agent", "policy", "impl-1", "--topics", "csv-*"]);
    let ask = |topic: &str, kind: &str| {
        p.run(
            Some("planner"),
            &[
                "--json", "send", "--to", "impl-1", "--type", kind, "--topic", topic, "--body", "x",
            ],
        )
    };
    let out = ask("billing", "request");
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    for words in [
        "impl-1 (executor) may not take on",
        "topic billing",
        "--topics",
    ] {
        assert!(stderr(&out).contains(words), "{words}: {}", stderr(&out));
    }
    assert_eq!(message_count(&p), 0, "nothing was sent");
    let events = p.json(None, &["security-events"]);
    assert_eq!(events["items"][0]["participant"], "planner", "{events}");
    assert_eq!(events["items"][0]["topic"], "billing", "{events}");
    // What it only reads goes anywhere; work on its topics goes to it, and it can close it.
    assert_eq!(code(&ask("billing", "info")), 0);
    let sent: serde_json::Value =
        serde_json::from_slice(&ask("csv-export", "request").stdout).unwrap();
    let id = sent["id"].as_str().unwrap();
    p.ok(Some("impl-1"), &["show", id]);
    p.ok(Some("impl-1"), &["complete", id, "--note", "done"]);
}
