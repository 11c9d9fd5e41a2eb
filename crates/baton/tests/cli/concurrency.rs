//! Many writers at once, as real processes: eight participants in a ring, each driving
//! `baton` one process after another from its own thread, all against one store. Nothing
//! may be lost, every command must succeed (contention waits, it does not fail), and no
//! raw engine error may reach a user.

use std::collections::HashSet;
use std::thread;

use serde_json::Value;

use crate::common::Project;

const PARTICIPANTS: usize = 8;
/// Requests each participant sends to the next one, and so also completes.
const REQUESTS: usize = 15;
/// Each round sends at most one request and drains the inbox once; a participant that
/// needs more rounds than this is stuck, and the test says so instead of hanging.
const MAX_ROUNDS: usize = 100 * REQUESTS;
/// Text that means an engine error leaked past the store's error mapping.
const LEAKS: [&str; 3] = ["database is locked", "SQLITE", "sqlx"];

/// Everything one participant's commands produced that the test must look at.
#[derive(Default)]
struct Transcript {
    commands: usize,
    /// Commands that exited non-zero, with their stderr.
    failures: Vec<String>,
    /// Stderr that carried a raw engine error, whatever the exit status.
    leaks: Vec<String>,
    sent: usize,
    completed: HashSet<String>,
    rounds: usize,
}

impl Transcript {
    /// Runs `baton --json --as who ARGS…` and returns its parsed stdout, or `None` (with the
    /// failure recorded) when it failed.
    fn baton(&mut self, project: &Project, who: &str, args: &[&str]) -> Option<Value> {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = project.run(Some(who), &all);
        self.commands += 1;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if LEAKS.iter().any(|leak| stderr.contains(leak)) {
            self.leaks.push(format!("{who} {args:?}: {stderr}"));
        }
        if !out.status.success() {
            self.failures
                .push(format!("{who} {args:?} exited {}: {stderr}", out.status));
            return None;
        }
        match serde_json::from_slice(&out.stdout) {
            Ok(doc) => Some(doc),
            Err(e) => {
                self.failures
                    .push(format!("{who} {args:?} printed no JSON document: {e}"));
                None
            }
        }
    }
}

fn name(n: usize) -> String {
    format!("p{}", n % PARTICIPANTS)
}

/// One participant's session: send a request to the next participant, then show and
/// complete whatever it owes, round after round, until both halves are done.
fn participant(project: &Project, me: usize) -> Transcript {
    let who = name(me);
    let next = name(me + 1);
    let mut t = Transcript::default();
    while t.rounds < MAX_ROUNDS && (t.sent < REQUESTS || t.completed.len() < REQUESTS) {
        t.rounds += 1;
        if t.sent < REQUESTS {
            let body = format!("{who} asks {next}: job {}", t.sent);
            let args = [
                "send", "--to", &next, "--type", "request", "--topic", "ring", "--body", &body,
            ];
            if t.baton(project, &who, &args).is_some() {
                t.sent += 1;
            }
        }
        if t.completed.len() == REQUESTS {
            continue;
        }
        let Some(inbox) = t.baton(project, &who, &["inbox"]) else {
            continue;
        };
        let owed: Vec<String> = inbox["items"]
            .as_array()
            .expect("inbox items")
            .iter()
            .filter(|item| item["type"] == "request")
            .map(|item| item["id"].as_str().expect("id").to_owned())
            .collect();
        for id in owed {
            let shown = t.baton(project, &who, &["show", &id]);
            if shown.is_some_and(|doc| doc["status"] != "delivered") {
                t.failures
                    .push(format!("{who} show {id}: not delivered after the fetch"));
            }
            if let Some(step) = t.baton(project, &who, &["complete", &id]) {
                if step["status"] == "completed" {
                    t.completed.insert(id);
                } else {
                    t.failures.push(format!("{who} complete {id}: {step}"));
                }
            }
        }
    }
    t
}

#[test]
fn eight_processes_sending_and_completing_lose_nothing() {
    let names: Vec<String> = (0..PARTICIPANTS).map(name).collect();
    let roles: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "executor")).collect();
    let project = Project::new(&roles);
    // Peers in a ring ask each other for work: each may send requests.
    for n in &names {
        project.ok(
            None,
            &["agent", "policy", n, "--may", "request,send,accept"],
        );
    }

    let transcripts: Vec<Transcript> = thread::scope(|s| {
        let sessions: Vec<_> = (0..PARTICIPANTS)
            .map(|me| {
                let project = &project;
                s.spawn(move || participant(project, me))
            })
            .collect();
        sessions
            .into_iter()
            .map(|session| session.join().expect("participant thread"))
            .collect()
    });

    let commands: usize = transcripts.iter().map(|t| t.commands).sum();
    let failures: Vec<&String> = transcripts.iter().flat_map(|t| &t.failures).collect();
    let leaks: Vec<&String> = transcripts.iter().flat_map(|t| &t.leaks).collect();
    let rounds: Vec<usize> = transcripts.iter().map(|t| t.rounds).collect();
    eprintln!(
        "concurrency: {PARTICIPANTS} participants ran {commands} baton processes \
         (rounds per participant {rounds:?}), {} failures, {} leaks",
        failures.len(),
        leaks.len()
    );
    assert!(
        leaks.is_empty(),
        "raw engine errors reached stderr: {leaks:#?}"
    );
    assert!(failures.is_empty(), "commands failed: {failures:#?}");
    for (me, t) in transcripts.iter().enumerate() {
        assert_eq!(t.sent, REQUESTS, "{} sent {} requests", name(me), t.sent);
        assert_eq!(
            t.completed.len(),
            REQUESTS,
            "{} completed {} of {REQUESTS} requests in {MAX_ROUNDS} rounds",
            name(me),
            t.completed.len()
        );
    }

    // The store agrees: every request exists once, and each recipient's end is completed.
    let mut requests = Vec::new();
    let mut cursor = String::new();
    loop {
        let mut args = vec!["search", "--type", "request", "--limit", "100"];
        if !cursor.is_empty() {
            args.extend(["--cursor", &cursor]);
        }
        let page = project.json(None, &args);
        requests.extend(page["items"].as_array().expect("items").iter().cloned());
        cursor = page["next"].as_str().unwrap_or_default().to_owned();
        if cursor.is_empty() {
            break;
        }
    }
    assert_eq!(requests.len(), PARTICIPANTS * REQUESTS, "requests stored");
    let ids: HashSet<&str> = requests.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let bodies: HashSet<&str> = requests
        .iter()
        .map(|r| r["excerpt"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), requests.len(), "request ids are unique");
    assert_eq!(bodies.len(), requests.len(), "no request was stored twice");
    for me in 0..PARTICIPANTS {
        let who = name(me);
        let outbox = project.json(Some(&who), &["outbox"]);
        let items = outbox["items"].as_array().expect("outbox items");
        assert_eq!(items.len(), REQUESTS, "{who}'s outbox");
        for item in items {
            assert_eq!(
                item["status"],
                serde_json::json!({ name(me + 1): "completed" }),
                "{who}'s request {}",
                item["id"]
            );
        }
        let inbox = project.json(Some(&who), &["inbox"]);
        assert_eq!(inbox["items"], serde_json::json!([]), "{who} still owes");
    }
}
