//! The command line over a server (`BATON_URL`, `BATON_KEY`): the same sequence of
//! commands runs once against an embedded project and once against a real `baton serve`,
//! and prints the same thing (ids and times normalised) with the same exit codes,
//! refusals included. Then what only a server has: read keys, `--as` refused, usage
//! errors, commands that need the local machine, and a token that is never printed.

use std::process::{Command, Output};

use regex::Regex;
use serde_json::{Value, json};

use crate::common::{Project, baton_exe, code, stderr};
use crate::server::{Serving, admin, serve};

const PEOPLE: [(&str, &str); 4] = [
    ("planner", "planner"),
    ("impl-1", "executor"),
    ("owner", "owner"),
    ("obs", "observer"),
];

/// The keys both sides issue, in this order, so both logs hold the same events.
const KEYS: [(&str, &str); 5] = [
    ("planner", "write"),
    ("impl-1", "write"),
    ("owner", "admin"),
    ("impl-1", "read"),
    ("obs", "write"),
];

/// The same project twice: embedded, and on a server with a key per participant.
struct Twins {
    local: Project,
    _db: tempfile::TempDir,
    elsewhere: tempfile::TempDir,
    server: Serving,
    /// The tokens, in the order of [`KEYS`].
    tokens: Vec<String>,
}

impl Twins {
    fn new() -> Self {
        let local = Project::new(&PEOPLE);
        for (who, scope) in KEYS {
            local.ok(None, &["key", "issue", who, "--scope", scope]);
        }
        let db = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", db.path().join("projects").display());
        admin(&url, None, &["project", "add", "shop"]);
        for (name, role) in PEOPLE {
            admin(&url, Some("shop"), &["agent", "add", name, "--role", role]);
        }
        let tokens = KEYS
            .iter()
            .map(|(who, scope)| {
                admin(&url, Some("shop"), &["key", "issue", who, "--scope", scope])["token"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        Self {
            local,
            _db: db,
            // Remote commands run where there is no project at all.
            elsewhere: tempfile::tempdir().unwrap(),
            server: serve(&url),
            tokens,
        }
    }

    fn project_url(&self) -> String {
        format!("{}/v1/projects/shop", self.server.base)
    }

    fn token(&self, who: &str, scope: &str) -> &str {
        let i = KEYS.iter().position(|k| *k == (who, scope)).unwrap();
        &self.tokens[i]
    }

    /// `baton ARGS` over the server with `token`, from a directory with no project.
    fn remote_cmd(&self, token: Option<&str>, args: &[&str]) -> Command {
        let mut cmd = Command::new(baton_exe());
        cmd.current_dir(self.elsewhere.path())
            .env_remove("BATON_PROJECT")
            .env_remove("BATON_AS")
            .env_remove("BATON_DB")
            .env_remove("BATON_KEY")
            .env("BATON_URL", self.project_url());
        if let Some(token) = token {
            cmd.env("BATON_KEY", token);
        }
        cmd.args(args);
        cmd
    }

    fn remote(&self, token: &str, args: &[&str]) -> Output {
        let out = self.remote_cmd(Some(token), args).output().unwrap();
        self.never_shows_a_token(&out);
        out
    }

    /// No token is printed, on either stream, whatever the command did.
    fn never_shows_a_token(&self, out: &Output) {
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for token in &self.tokens {
            assert!(!all.contains(token.as_str()), "a token was printed: {all}");
        }
    }
}

/// Ids and times vary between two stores; what they say must not.
fn normalised(text: &str) -> String {
    let ulid = Regex::new(r"\b[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}\b").unwrap();
    // A time's width varies (trailing zeros of its fraction are dropped): so do columns.
    let padding = Regex::new(r" {2,}").unwrap();
    let secret = Regex::new(r"whsec_[0-9a-f]{64}").unwrap();
    let time = Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z").unwrap();
    let age = Regex::new(r"\b\d+(ms|[smhd])\b").unwrap();
    let millis = Regex::new(r#""(idle_ms|at|changed_at|mean_ms|max_ms|ms|age_ms)":\d+"#).unwrap();
    let text = secret.replace_all(text, "[SECRET]");
    let text = ulid.replace_all(&text, "[ID]");
    let text = time.replace_all(&text, "[TIME]");
    let text = age.replace_all(&text, "[AGE]");
    let text = millis.replace_all(&text, "\"$1\":[MS]");
    // A key's last use: the remote side's keys prove every call, the local side's none.
    let used_json = Regex::new(r#""last_used_at":("[^"]*"|null)"#).unwrap();
    let used_column = Regex::new(r"(?m)^(\[ID\] .*\[TIME\] {2,})(\[TIME\]|never)( {2,})").unwrap();
    let text = used_json.replace_all(&text, "\"last_used_at\":[USED]");
    let text = if text.contains("LAST USED") {
        used_column.replace_all(&text, "$1[USED]$3")
    } else {
        text
    };
    // Where a resume packet is: the checkout locally, none on a server (its size follows).
    let place = Regex::new(r"(# Resume: [^ ]+ \([a-z]+\)) in \S+").unwrap();
    let size = Regex::new(r#""bytes":\d+"#).unwrap();
    let text = place.replace_all(&text, "$1 in [WHERE]");
    let text = size.replace_all(&text, "\"bytes\":[N]");
    padding.replace_all(&text, "  ").into_owned()
}

/// How a step's output is compared.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Human,
    Json,
    /// A read: run twice, as text and as JSON.
    Both,
}

struct Step<'a> {
    who: &'a str,
    args: &'a [&'a str],
    mode: Mode,
    code: i32,
}

const fn ok<'a>(who: &'a str, mode: Mode, args: &'a [&'a str]) -> Step<'a> {
    Step {
        who,
        args,
        mode,
        code: 0,
    }
}

const fn refused<'a>(who: &'a str, code: i32, args: &'a [&'a str]) -> Step<'a> {
    Step {
        who,
        args,
        mode: Mode::Human,
        code,
    }
}

/// Runs `step` on one side: `run(who, args)` runs it there; `ids` fill `{1}`, `{2}`, and
/// `files` the documents' paths.
fn take(
    step: &Step,
    ids: &[String],
    files: &[(&str, &str)],
    run: &dyn Fn(&str, &[&str]) -> Output,
) -> Vec<(i32, String)> {
    let args: Vec<String> = step
        .args
        .iter()
        .map(|a| {
            let a = ids.iter().enumerate().fold((*a).to_owned(), |a, (i, id)| {
                a.replace(&format!("{{{}}}", i + 1), id)
            });
            files
                .iter()
                .fold(a, |a, (name, path)| a.replace(name, path))
        })
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let modes: &[bool] = match step.mode {
        Mode::Human => &[false],
        Mode::Json => &[true],
        Mode::Both => &[false, true],
    };
    modes
        .iter()
        .map(|&json| {
            let mut all = Vec::new();
            if json {
                all.push("--json");
            }
            all.extend_from_slice(&args);
            let out = run(step.who, &all);
            (
                code(&out),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            )
        })
        .collect()
}

/// The id a send printed, as text or as JSON.
fn sent_id(stdout: &str) -> String {
    match serde_json::from_str::<Value>(stdout) {
        Ok(doc) => doc["id"].as_str().unwrap().to_owned(),
        Err(_) => stdout.trim().to_owned(),
    }
}

#[test]
fn remote_commands_print_what_local_ones_print_with_the_same_exit_codes() {
    use Mode::{Both, Human, Json};
    let t = Twins::new();
    let local = |who: &str, args: &[&str]| t.local.run(Some(who), args);
    let remote = |who: &str, args: &[&str]| {
        t.remote(
            t.token(who, if who == "owner" { "admin" } else { "write" }),
            args,
        )
    };
    const GHOST: &str = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
    let script: Vec<Step> = vec![
        ok(
            "planner",
            Human,
            &[
                "send",
                "--to",
                "impl-1",
                "--type",
                "request",
                "--topic",
                "csv-export",
                "--body",
                "CSV export drops the active filters",
            ],
        ),
        ok(
            "planner",
            Json,
            &[
                "send",
                "--to",
                "impl-1",
                "--type",
                "info",
                "--topic",
                "csv-export",
                "--body",
                "The filters are status and date; fixtures in tests/fixtures/orders.csv",
            ],
        ),
        ok("impl-1", Both, &["inbox"]),
        ok("impl-1", Both, &["show", "{1}"]),
        ok("impl-1", Both, &["show", "{2}", "--max-bytes", "20"]),
        ok("impl-1", Json, &["ack", "{2}"]),
        // A page of one, and the page after it.
        ok("impl-1", Both, &["inbox", "--all", "--limit", "1"]),
        ok(
            "impl-1",
            Both,
            &["inbox", "--all", "--limit", "1", "--cursor", "{1}"],
        ),
        ok(
            "impl-1",
            Human,
            &["complete", "{1}", "--note", "Filters kept; test added"],
        ),
        ok("planner", Both, &["outbox"]),
        ok("planner", Both, &["outbox", "--all"]),
        ok("planner", Both, &["thread", "{1}"]),
        ok("planner", Both, &["search", "--topic", "csv-export"]),
        ok(
            "impl-1",
            Both,
            &["search", "--status", "completed", "filters"],
        ),
        ok("planner", Human, &["focus", "set", "Ship the CSV export"]),
        ok(
            "planner",
            Json,
            &[
                "decide",
                "Keep the filters in exports",
                "--why",
                "users asked",
            ],
        ),
        ok(
            "planner",
            Human,
            &[
                "constrain",
                "Streaming rows",
                "--tried",
                "a cursor",
                "--result",
                "locks the table",
            ],
        ),
        ok(
            "planner",
            Json,
            &["stream", "set", "csv", "--status", "reviewing"],
        ),
        ok(
            "impl-1",
            Human,
            &["note", "The fixture is small", "--subject", "{1}"],
        ),
        ok(
            "planner",
            Json,
            &[
                "session",
                "end",
                "--completed",
                "csv",
                "--decision",
                "Ship Friday :: the release train",
            ],
        ),
        ok("planner", Both, &["state", "show"]),
        ok("impl-1", Both, &["resume"]),
        ok("planner", Both, &["alerts"]),
        ok("planner", Both, &["queue"]),
        ok("planner", Both, &["runs", "--all"]),
        ok("planner", Both, &["status"]),
        ok("planner", Both, &["order", "list", "--all"]),
        ok("planner", Human, &["order", "create", "{order}"]),
        ok(
            "impl-1",
            Json,
            &["order", "accept", "csv-filters", "--expect-seq", "1"],
        ),
        ok("impl-1", Human, &["order", "start", "csv-filters"]),
        ok(
            "impl-1",
            Json,
            &["order", "report", "csv-filters", "{report}"],
        ),
        ok("planner", Both, &["order", "show", "csv-filters"]),
        ok("impl-1", Both, &["order", "list"]),
        ok(
            "planner",
            Both,
            &[
                "order",
                "wait",
                "csv-filters",
                "--since",
                "1",
                "--timeout",
                "1s",
            ],
        ),
        ok("planner", Both, &["queue"]),
        refused("impl-1", 3, &["order", "accept", "csv-filters"]),
        refused(
            "planner",
            6,
            &[
                "order",
                "rework",
                "csv-filters",
                "--reason",
                "stale view",
                "--expect-seq",
                "2",
            ],
        ),
        ok(
            "planner",
            Human,
            &[
                "order",
                "rework",
                "csv-filters",
                "--reason",
                "add a test",
                "--expect-seq",
                "4",
            ],
        ),
        ok("planner", Both, &["order", "list", "--all"]),
        // Reported again and approved: an order holding no effects is approved over a
        // server as it is here.
        ok(
            "impl-1",
            Json,
            &["order", "report", "csv-filters", "{report2}"],
        ),
        refused("impl-1", 5, &["order", "approve", "csv-filters"]),
        ok("planner", Json, &["order", "approve", "csv-filters"]),
        // An observer writes nothing, memory included.
        refused("obs", 5, &["decide", "Watching", "--why", "x"]),
        refused("obs", 5, &["focus", "set", "Watching"]),
        ok(
            "planner",
            Json,
            &[
                "receipt",
                "write",
                "--step",
                "export",
                "--artifact",
                "s3://bucket/export.csv",
            ],
        ),
        ok("impl-1", Both, &["receipt", "show", "export"]),
        ok("impl-1", Both, &["wait", "--after", "0", "--timeout", "1s"]),
        // Refusals: the same kind, so the same exit code.
        refused("impl-1", 4, &["show", GHOST]),
        refused("impl-1", 4, &["order", "show", GHOST]),
        refused("impl-1", 4, &["receipt", "show", "nothing-here"]),
        refused(
            "impl-1",
            5,
            &[
                "send",
                "--to",
                "planner",
                "--type",
                "request",
                "--topic",
                "billing",
                "--body",
                "beyond an executor",
            ],
        ),
        refused("impl-1", 3, &["complete", "{1}"]),
        refused(
            "planner",
            4,
            &[
                "decide",
                "Superseding nothing",
                "--why",
                "x",
                "--supersedes",
                "D-99",
            ],
        ),
        ok("impl-1", Human, &["archive", "{1}"]),
        ok("owner", Both, &["security-events"]),
        ok("owner", Both, &["key", "list"]),
        ok(
            "owner",
            Json,
            &["agent", "add", "reviewer", "--role", "reviewer"],
        ),
        ok(
            "owner",
            Human,
            &[
                "agent", "add", "impl-2", "--role", "executor", "--may", "send",
            ],
        ),
        ok("owner", Both, &["agent", "list"]),
        // A request goes only to a recipient that may take it on.
        refused(
            "planner",
            5,
            &[
                "send",
                "--to",
                "impl-2",
                "--type",
                "request",
                "--topic",
                "csv-export",
                "--body",
                "impl-2 only sends",
            ],
        ),
        ok(
            "owner",
            Json,
            &[
                "agent",
                "webhook",
                "impl-1",
                "--url",
                "https://hooks.example.com/hook",
            ],
        ),
        ok("owner", Human, &["agent", "webhook", "impl-1", "--off"]),
        ok("owner", Both, &["agent", "webhooks"]),
        ok("owner", Human, &["agent", "policy", "impl-2", "--default"]),
    ];
    // Documents both sides read from the same files.
    let order = t.elsewhere.path().join("order.json");
    std::fs::write(&order, crate::orders::order("csv-filters").to_string()).unwrap();
    let report = t.elsewhere.path().join("report.json");
    let report_doc = crate::orders::report_doc("csv-filters", "impl-1", 1);
    std::fs::write(&report, report_doc.to_string()).unwrap();
    let report2 = t.elsewhere.path().join("report2.json");
    let report2_doc = crate::orders::report_doc("csv-filters", "impl-1", 2);
    std::fs::write(&report2, report2_doc.to_string()).unwrap();
    let files = [
        ("{order}", order.to_str().unwrap()),
        ("{report2}", report2.to_str().unwrap()),
        ("{report}", report.to_str().unwrap()),
    ];
    let (mut local_ids, mut remote_ids) = (Vec::new(), Vec::new());
    for step in &script {
        let here = take(step, &local_ids, &files, &local);
        let there = take(step, &remote_ids, &files, &remote);
        for ((here_code, here_out), (there_code, there_out)) in here.iter().zip(&there) {
            assert_eq!(
                (*here_code, *there_code),
                (step.code, step.code),
                "{:?} as {}: exit codes (local, remote); remote printed {there_out}",
                step.args,
                step.who
            );
            assert_eq!(
                normalised(here_out),
                normalised(there_out),
                "{:?} as {}: local and remote print the same",
                step.args,
                step.who
            );
        }
        if step.args[0] == "send" && step.code == 0 {
            local_ids.push(sent_id(&here[0].1));
            remote_ids.push(sent_id(&there[0].1));
        }
    }
}

#[test]
fn remote_refusals_are_worded_as_the_command_line_words_them() {
    let t = Twins::new();
    let local = |who: &str, args: &[&str]| t.local.run(Some(who), args);
    let remote = |who: &str, args: &[&str]| t.remote(t.token(who, "write"), args);
    let ask = |to: &str, topic: &str| -> Vec<String> {
        [
            "send", "--to", to, "--type", "request", "--topic", topic, "--body", "x",
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let tries: Vec<(&str, Vec<String>, &str)> = vec![
        // Beyond its policy: the hint names `baton agent policy`, not a route.
        (
            "impl-1",
            ask("planner", "billing"),
            "baton agent policy impl-1",
        ),
        (
            "obs",
            vec!["decide".into(), "x".into(), "--why".into(), "w".into()],
            "baton agent policy obs",
        ),
        (
            "planner",
            vec!["show".into(), "01ARZ3NDEKTSV4RRFFQ69G5FAV".into()],
            "no message",
        ),
        (
            "planner",
            vec!["order".into(), "show".into(), "wo_none".into()],
            "wo_none",
        ),
    ];
    for (who, args, words) in tries {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (here, there) = (local(who, &args), remote(who, &args));
        assert_eq!(code(&here), code(&there), "{args:?}");
        assert_eq!(
            normalised(&stderr(&here)),
            normalised(&stderr(&there)),
            "{args:?}: local and remote word it alike"
        );
        assert!(
            stderr(&there).contains(words),
            "{args:?}: {}",
            stderr(&there)
        );
        assert!(!stderr(&there).contains("POST …/"), "{}", stderr(&there));
    }
}

#[test]
fn remote_keys_decide_who_acts_and_what_they_may_do() {
    let t = Twins::new();
    let reader = t.token("impl-1", "read");
    let admin_key = t.token("owner", "admin");
    // A read key reads and writes nothing: forbidden, as a security event.
    let out = t.remote(reader, &["inbox"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = t.remote(
        reader,
        &["send", "--to", "planner", "--topic", "t", "--body", "x"],
    );
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    let out = t.remote(reader, &["focus", "set", "mine now"]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    // Only an admin key administers.
    let writer = t.token("impl-1", "write");
    let out = t.remote(writer, &["key", "list"]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    let out = t.remote(writer, &["agent", "add", "sneaky", "--role", "owner"]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    // An admin key issues a key whose token works, and revokes it: it stops alone.
    let out = t.remote(
        admin_key,
        &["--json", "key", "issue", "planner", "--scope", "read"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let issued: Value = serde_json::from_slice(&out.stdout).unwrap();
    let fresh = issued["token"].as_str().unwrap().to_owned();
    let whoami = t
        .remote_cmd(Some(&fresh), &["--json", "inbox"])
        .output()
        .unwrap();
    assert_eq!(code(&whoami), 0, "{}", stderr(&whoami));
    let inbox: Value = serde_json::from_slice(&whoami.stdout).unwrap();
    assert_eq!(inbox["participant"], "planner", "the key says who acts");
    let out = t.remote(
        admin_key,
        &["key", "revoke", issued["id"].as_str().unwrap()],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let refused = t.remote_cmd(Some(&fresh), &["inbox"]).output().unwrap();
    assert_eq!(code(&refused), 5, "a revoked key: {}", stderr(&refused));
    assert!(
        !stderr(&refused).contains(&fresh),
        "an error never shows the token"
    );
    let out = t.remote(writer, &["inbox"]);
    assert_eq!(code(&out), 0, "other keys keep working: {}", stderr(&out));
    // The refused writes are security events, with the key's participant.
    let out = t.remote(admin_key, &["--json", "security-events"]);
    let events: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tried: Vec<(&str, &str)> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["participant"].as_str().unwrap(),
                e["action"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        tried,
        [
            ("impl-1", "agent add"),
            ("impl-1", "key list"),
            ("impl-1", "focus"),
            ("impl-1", "send"),
        ],
        "{events}"
    );
}

#[test]
fn remote_usage_errors_are_clear_and_never_show_the_token() {
    let t = Twins::new();
    let writer = t.token("impl-1", "write");
    let run = |cmd: &mut Command| {
        let out = cmd.output().unwrap();
        t.never_shows_a_token(&out);
        out
    };
    // BATON_URL without BATON_KEY.
    let out = run(&mut t.remote_cmd(None, &["inbox"]));
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("BATON_KEY"), "{}", stderr(&out));
    // --as (or BATON_AS) with a server: the key says who acts.
    let out = run(&mut t.remote_cmd(Some(writer), &["--as", "planner", "inbox"]));
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let out = run(t
        .remote_cmd(Some(writer), &["inbox"])
        .env("BATON_AS", "planner"));
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    // A URL that is not a project's.
    for bad in [
        "not a url".to_owned(),
        format!("{}/v1/projects", t.server.base),
        "ftp://127.0.0.1/v1/projects/shop".to_owned(),
    ] {
        let out = run(t
            .remote_cmd(Some(writer), &["inbox"])
            .env("BATON_URL", &bad));
        assert_eq!(code(&out), 2, "{bad}: {}", stderr(&out));
    }
    // A server that does not answer: a failure (1) naming the URL, not the token.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nobody = format!("http://{}/v1/projects/shop", closed.local_addr().unwrap());
    drop(closed);
    let out = run(t
        .remote_cmd(Some(writer), &["inbox"])
        .env("BATON_URL", &nobody));
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot reach"), "{}", stderr(&out));
    // Commands that need this machine say so.
    for args in [
        &["export"][..],
        &["reap"],
        &["run", "--", "true"],
        &["state", "render"],
        &["board"],
    ] {
        let out = run(&mut t.remote_cmd(Some(writer), args));
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("BATON_URL"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    // A wrong token, and a project the key is not for: one answer, 5, no token shown.
    let out = run(&mut t.remote_cmd(Some("baton_00000000000000000000000000_00"), &["inbox"]));
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    let out = run(t.remote_cmd(Some(writer), &["--json", "inbox"]).env(
        "BATON_URL",
        format!("{}/v1/projects/elsewhere", t.server.base),
    ));
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    let error: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(error["error"]["kind"], "forbidden", "{error}");
}

#[test]
fn remote_a_body_naming_its_actor_is_a_security_event_listed_by_the_cli() {
    let t = Twins::new();
    let writer = t.token("impl-1", "write");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let response = agent
        .post(format!("{}/messages", t.project_url()))
        .header("Authorization", &format!("Bearer {writer}"))
        .send_json(json!({"to": ["planner"], "topic": "t", "body": "x", "as": "planner"}))
        .unwrap();
    assert_eq!(response.status().as_u16(), 403);
    let out = t.remote(t.token("owner", "admin"), &["--json", "security-events"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let events: Value = serde_json::from_slice(&out.stdout).unwrap();
    let items = events["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{events}");
    assert_eq!(items[0]["participant"], "impl-1", "the key's participant");
    assert_eq!(items[0]["action"], "name the actor in a request");
    // And nothing else: the planner's inbox is as empty as before.
    let out = t.remote(t.token("planner", "write"), &["--json", "inbox"]);
    let inbox: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(inbox["items"], json!([]));
}
