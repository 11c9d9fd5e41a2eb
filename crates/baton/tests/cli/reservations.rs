//! Reservations end to end, as real processes: reserving, a conflict (exit 6) naming holder
//! and expiry, bad input refused with its field named and nothing stored, releasing (and
//! releasing nothing), an owner's force-release; a reservation's time to live at its
//! boundary; sixteen processes racing for one path, queued behind a held write lock; two
//! `baton serve` on one PostgreSQL; and the git guard with real `git commit`s in two
//! worktrees of one repository.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Project, code, queued, stderr};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn millis(rfc3339: &Value) -> i64 {
    rfc3339
        .as_str()
        .expect("a time")
        .parse::<jiff::Timestamp>()
        .expect("RFC 3339")
        .as_millisecond()
}

fn team() -> Project {
    Project::new(&[
        ("impl-1", "executor"),
        ("impl-2", "executor"),
        ("planner", "planner"),
        ("boss", "owner"),
    ])
}

#[test]
fn a_conflict_names_holder_id_and_expiry_and_bad_input_stores_nothing() {
    let p = team();
    let made = p.json(
        Some("impl-1"),
        &[
            "reserve",
            "src/billing/**",
            "--reason",
            "invoice rounding",
            "--ttl",
            "2h",
        ],
    );
    assert_eq!(made["schema"], "baton/reserve@1");
    let row = &made["items"][0];
    let id = row["id"].as_str().unwrap().to_owned();
    assert_eq!(
        (&row["holder"], &row["mode"], &row["status"], &row["path"]),
        (
            &json!("impl-1"),
            &json!("exclusive"),
            &json!("live"),
            &json!("src/billing/**")
        )
    );
    assert_eq!(
        millis(&row["expires_at"]) - millis(&row["reserved_at"]),
        7_200_000
    );

    let before = p.generation();
    let out = p.run(Some("impl-2"), &["reserve", "docs/**", "src/billing/x.rs"]);
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    let said = stderr(&out);
    let expiry = row["expires_at"].as_str().unwrap();
    for named in ["impl-1", id.as_str(), expiry, "nothing was reserved"] {
        assert!(said.contains(named), "{named} in: {said}");
    }
    let refused = p
        .cmd(Some("impl-2"), &["--json", "reserve", "src/billing/x.rs"])
        .output()
        .unwrap();
    let err: Value = serde_json::from_slice(&refused.stderr).expect("a JSON error");
    assert_eq!(err["error"]["kind"], "contention", "{err}");

    // Bad input: the field named, exit 3, nothing stored.
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), p.path().join("elsewhere")).unwrap();
    for (args, named) in [
        (&["reserve", "../other/**"][..], "GLOB \"../other/**\""),
        (&["reserve", "/etc/passwd"][..], "relative to the checkout"),
        (&["reserve", "!src/**"][..], "`!` is refused"),
        (&["reserve", "elsewhere/**"][..], "symbolic link"),
        (&["reserve", "x", "--ttl", "0s"][..], "--ttl 0s"),
        (&["reserve", "x", "--ttl", "-5m"][..], "--ttl -300s"),
        (&["reserve", "x", "--ttl", "2d"][..], "reservations.max_ttl"),
    ] {
        let out = p.run(Some("impl-2"), args);
        assert_eq!(code(&out), 3, "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(named), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(p.generation(), before, "a refusal stores nothing");

    // Releasing nothing says so, naming what is held.
    let out = p.run(Some("impl-1"), &["release", "tests/**"]);
    assert_eq!(code(&out), 4);
    assert!(
        stderr(&out).contains(&format!("{id} src/billing/**")),
        "{}",
        stderr(&out)
    );
    let out = p.run(Some("impl-2"), &["release", &id]);
    assert_eq!(code(&out), 3, "another's is not released by hand");
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    assert_eq!(p.generation(), before);

    // An owner force-releases a quiet holder, who is told why; an executor may not.
    let out = p.run(
        Some("impl-2"),
        &["release", "--force", &id, "--reason", "mine now"],
    );
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    let released = p.json(
        Some("boss"),
        &[
            "release",
            "--force",
            &id,
            "--reason",
            "impl-1 crashed an hour ago",
        ],
    );
    assert_eq!(released["schema"], "baton/release@1");
    assert_eq!(released["items"][0]["status"], "released");
    assert_eq!(released["items"][0]["released_by"], "boss");
    let inbox = p.json(Some("impl-1"), &["inbox"]);
    let told = inbox["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["topic"] == "reservations")
        .expect("the holder is told");
    assert!(
        told["excerpt"]
            .as_str()
            .unwrap()
            .contains("impl-1 crashed an hour ago")
    );

    // Shared beside shared; a renewal keeps the id; the list and --all.
    let a = p.json(Some("impl-1"), &["reserve", "docs/", "--shared"]);
    p.json(Some("impl-2"), &["reserve", "docs/*.md", "--shared"]);
    let again = p.json(
        Some("impl-1"),
        &["reserve", "docs", "--shared", "--ttl", "5m"],
    );
    assert_eq!(again["items"][0]["id"], a["items"][0]["id"]);
    let listed = p.json(None, &["reservations"]);
    assert_eq!(listed["schema"], "baton/reservations@1");
    assert_eq!(listed["items"].as_array().unwrap().len(), 2);
    let text = p.ok(None, &["reservations", "--all"]);
    assert!(
        text.contains("released") && text.contains("impl-2"),
        "{text}"
    );
    let mine = p.json(Some("impl-1"), &["release"]);
    assert_eq!(mine["items"].as_array().unwrap().len(), 1);
}

/// Reads whether `who` holds a live reservation, bracketed by the wall clock before and
/// after the read.
fn holds(p: &Project, who: &str) -> (i64, bool, i64) {
    let before = now_ms();
    let listed = p.json(None, &["reservations", "--holder", who]);
    let after = now_ms();
    (
        before,
        !listed["items"].as_array().unwrap().is_empty(),
        after,
    )
}

#[test]
fn a_reservation_is_live_until_its_expiry_and_over_from_it() {
    let p = team();
    let made = p.json(Some("impl-1"), &["reserve", "lib/**", "--ttl", "2s"]);
    let expires = millis(&made["items"][0]["expires_at"]);
    let (mut live_seen, mut over_seen) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (before, live, after) = holds(&p, "impl-1");
        if after < expires {
            assert!(
                live,
                "lapsed early: read in [{before}, {after}], expires {expires}"
            );
            live_seen += 1;
        }
        if before >= expires {
            assert!(
                !live,
                "outlived its TTL: read in [{before}, {after}], expires {expires}"
            );
            over_seen += 1;
        }
        // Another's reservation is refused while it is live and taken once it is not.
        let before = now_ms();
        let out = p.run(Some("impl-2"), &["reserve", "lib/x.rs", "--ttl", "1m"]);
        let after = now_ms();
        if after < expires {
            assert_eq!(code(&out), 6, "taken early: {}", stderr(&out));
        }
        if before >= expires {
            assert_eq!(code(&out), 0, "still refused after: {}", stderr(&out));
        }
        if over_seen >= 2 && code(&out) == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "never saw it lapse");
        // A poll of the wall clock, not a wait for anything to happen.
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(live_seen >= 1, "read live at least once before its expiry");
}

#[test]
fn sixteen_processes_reserving_one_path_exactly_one_wins_every_time() {
    let names: Vec<String> = (0..16).map(|n| format!("w-{n}")).collect();
    let cast: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "executor")).collect();
    let p = Project::new(&cast);
    // Each writer waits behind the lock this test holds.
    p.configure("busy_timeout = \"5s\"", "busy_timeout = \"60s\"");
    for round in 0..5 {
        let path = format!("src/hot-{round}.rs");
        // Forced interleaving: every process opens the store and reads before any may
        // write, so all sixteen queue for the write lock with the same view.
        let outs = queued(&p, &names, &["--json", "reserve", &path]);
        let won: Vec<Value> = outs
            .iter()
            .filter(|o| o.status.success())
            .map(|o| serde_json::from_slice(&o.stdout).unwrap())
            .collect();
        assert_eq!(won.len(), 1, "round {round}: {} won", won.len());
        let id = won[0]["items"][0]["id"].as_str().unwrap();
        for out in outs.iter().filter(|o| !o.status.success()) {
            assert_eq!(code(out), 6, "{}", stderr(out));
            let err: Value = serde_json::from_slice(&out.stderr).unwrap();
            assert!(
                err["error"]["message"].as_str().unwrap().contains(id),
                "the loser names the winner's reservation: {err}"
            );
        }
        let listed = p.json(None, &["reservations"]);
        let holders: Vec<&Value> = listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["path"] == path.as_str())
            .collect();
        assert_eq!(holders.len(), 1);
    }
}

#[test]
#[cfg_attr(
    not(baton_test_postgres),
    ignore = "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES"
)]
fn two_servers_on_one_postgresql_let_one_of_sixteen_clients_reserve_each_path() {
    use crate::race::post;
    use crate::server::{admin, client, member, serve};
    const CLIENTS: usize = 16;
    const PATHS: usize = 10;
    let schema = format!("baton_reserve_{}", std::process::id());
    let url = crate::common::postgres_schema(&schema);
    admin(&url, None, &["project", "add", "shop"]);
    let tokens: Vec<String> = (0..CLIENTS)
        .map(|n| member(&url, "shop", &format!("w-{n}"), "executor"))
        .collect();
    let servers = [serve(&url), serve(&url)];
    let bases: Vec<String> = servers
        .iter()
        .map(|s| format!("{}/v1/projects/shop", s.base))
        .collect();
    let agent = client();
    let start = Arc::new(Barrier::new(CLIENTS));
    let threads: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (bases, token, agent, start) = (
                bases.clone(),
                tokens[c].clone(),
                agent.clone(),
                Arc::clone(&start),
            );
            std::thread::spawn(move || {
                let mut answers = Vec::new();
                for i in 0..PATHS {
                    start.wait();
                    let url = format!("{}/reservations", bases[(c + i) % 2]);
                    let body = json!({"paths": [format!("src/hot-{i}.rs")], "reason": "race"});
                    answers.push(post(&agent, &url, &token, body));
                }
                answers
            })
        })
        .collect();
    let answers: Vec<Vec<(u16, Value)>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let mut holders = Vec::new();
    for i in 0..PATHS {
        let won: Vec<&Value> = answers
            .iter()
            .map(|a| &a[i])
            .filter(|(status, _)| *status == 200)
            .map(|(_, body)| body)
            .collect();
        assert_eq!(won.len(), 1, "src/hot-{i}.rs won by {}", won.len());
        let id = won[0]["items"][0]["id"].as_str().unwrap();
        for (status, body) in answers.iter().map(|a| &a[i]).filter(|(s, _)| *s != 200) {
            assert_eq!(*status, 409, "{body}");
            assert_eq!(body["error"]["retryable"], true, "{body}");
            assert!(
                body["error"]["message"].as_str().unwrap().contains(id),
                "{body}"
            );
        }
        holders.push(won[0]["items"][0]["holder"].clone());
    }
    // Both servers read the same holders at once.
    for base in &bases {
        let mut response = agent
            .get(&format!("{base}/reservations"))
            .header("Authorization", &format!("Bearer {}", tokens[0]))
            .call()
            .unwrap();
        let listed: Value = response.body_mut().read_json().unwrap();
        let read: Vec<Value> = listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["holder"].clone())
            .collect();
        assert_eq!(read, holders, "{base}");
    }
    drop(servers);
    crate::common::drop_postgres_schema(&schema);
}

// ---- the git guard --------------------------------------------------------------------------

fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.email=dev@example.org", "-c", "user.name=Dev"])
        .args(args)
        .env_remove("BATON_AS")
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_URL")
        .output()
        .expect("git runs")
}

fn git_ok(dir: &Path, args: &[&str]) -> String {
    let out = git(dir, args);
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A commit of `file` (written with `text`) in `dir` as `who` (BATON_AS), with `extra`
/// flags.
fn commit_as(
    dir: &Path,
    who: Option<&str>,
    file: &str,
    text: &str,
    extra: &[&str],
) -> std::process::Output {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    git_ok(dir, &["add", file]);
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .args([
            "-c",
            "user.email=dev@example.org",
            "-c",
            "user.name=Dev",
            "commit",
            "-m",
            text,
        ])
        .args(extra)
        .env_remove("BATON_AS")
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_URL");
    if let Some(who) = who {
        cmd.env("BATON_AS", who);
    }
    cmd.output().expect("git commit runs")
}

fn head(dir: &Path) -> String {
    git_ok(dir, &["rev-parse", "HEAD"])
}

#[test]
fn the_git_guard_refuses_anothers_reserved_paths_in_every_worktree_and_records_a_bypass() {
    let p = team();
    let root = p.path();
    git_ok(root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("README.md"), "shop\n").unwrap();
    git_ok(root, &["add", "README.md", ".gitignore"]);
    git_ok(root, &["commit", "-qm", "start"]);
    let installed = p.json(None, &["init", "--git-guard"]);
    let hooks: Vec<&str> = installed["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["result"].as_str().unwrap())
        .collect();
    assert_eq!(hooks, ["created", "created", "created"], "{installed}");
    assert_eq!(
        p.json(None, &["init", "--git-guard"])["agents"][0]["result"],
        "unchanged"
    );
    let trees = tempfile::tempdir().unwrap();
    let (one, two) = (trees.path().join("one"), trees.path().join("two"));
    git_ok(
        root,
        &["worktree", "add", "-q", one.to_str().unwrap(), "-b", "one"],
    );
    git_ok(
        root,
        &["worktree", "add", "-q", two.to_str().unwrap(), "-b", "two"],
    );

    let made = p.json(
        Some("impl-1"),
        &["reserve", "src/billing/**", "--reason", "invoice rounding"],
    );
    let id = made["items"][0]["id"].as_str().unwrap().to_owned();

    // Another participant's commit in another worktree is refused, naming holder,
    // reservation and the ways out; nothing is committed.
    let before = head(&two);
    let out = commit_as(
        &two,
        Some("impl-2"),
        "src/billing/invoice.rs",
        "round half up",
        &[],
    );
    assert!(!out.status.success(), "the commit went in");
    let said = stderr(&out);
    for named in [
        "impl-1",
        id.as_str(),
        "src/billing/invoice.rs",
        "release",
        "--no-verify",
    ] {
        assert!(said.contains(named), "{named} in: {said}");
    }
    assert_eq!(head(&two), before);
    // So is a commit by no one (BATON_AS unset): every holder is another.
    assert!(
        !commit_as(&two, None, "src/billing/invoice.rs", "x", &[])
            .status
            .success()
    );
    // Paths no one else holds, and the holder's own, go in.
    git_ok(&two, &["reset", "-q", "--hard"]);
    let out = commit_as(&two, Some("impl-2"), "docs/notes.md", "notes", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = commit_as(
        &one,
        Some("impl-1"),
        "src/billing/invoice.rs",
        "impl-1's",
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));

    // `--no-verify` goes past the guard, and Baton records the commit as it is made.
    let out = commit_as(
        &two,
        Some("impl-2"),
        "src/billing/tax.rs",
        "past the guard",
        &["--no-verify"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("recorded"), "{}", stderr(&out));
    let bypass = head(&two);
    let db = rusqlite::Connection::open(p.db()).unwrap();
    let (actor, data): (String, String) = db
        .query_row(
            "SELECT actor, data FROM events WHERE kind = 'reservation.changed' \
             AND subject = ?",
            [&bypass],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the bypass is recorded");
    assert_eq!(actor, "impl-2");
    let data: Value = serde_json::from_str(&data).unwrap();
    assert_eq!(data["paths"], json!(["src/billing/tax.rs"]));
    assert_eq!(data["reservations"], json!([id]));

    // A push carrying that commit is refused too.
    let remote = trees.path().join("remote.git");
    git_ok(root, &["init", "-q", "--bare", remote.to_str().unwrap()]);
    let mut push = Command::new("git");
    push.current_dir(&two)
        .args(["push", remote.to_str().unwrap(), "two"])
        .env("BATON_AS", "impl-2")
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_URL");
    let out = push.output().unwrap();
    assert!(!out.status.success(), "the push went through");
    assert!(
        stderr(&out).contains("this push touches"),
        "{}",
        stderr(&out)
    );

    // Released, the same commit goes in.
    p.ok(Some("impl-1"), &["release", &id]);
    git_ok(&two, &["reset", "-q", "--soft", "HEAD~1"]);
    let out = Command::new("git")
        .current_dir(&two)
        .args([
            "-c",
            "user.email=dev@example.org",
            "-c",
            "user.name=Dev",
            "commit",
            "-qm",
            "now",
        ])
        .env("BATON_AS", "impl-2")
        .env_remove("BATON_PROJECT")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn the_git_guard_fails_open_with_a_warning_unless_configured_closed() {
    let p = team();
    let root = p.path();
    git_ok(root, &["init", "-q", "-b", "main"]);
    git_ok(root, &["add", ".gitignore"]);
    git_ok(root, &["commit", "-qm", "start"]);
    p.ok(None, &["init", "--git-guard"]);
    p.ok(Some("impl-1"), &["reserve", "src/**"]);
    // The store cannot be read: moved away.
    let db = p.db();
    let aside = db.with_extension("aside");
    std::fs::rename(&db, &aside).unwrap();
    let out = commit_as(root, Some("impl-2"), "src/a.rs", "one", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let warned: Vec<String> = stderr(&out)
        .lines()
        .filter(|l| l.contains("baton guard"))
        .map(str::to_owned)
        .collect();
    assert_eq!(warned.len(), 1, "one line: {warned:?}");
    assert!(
        warned[0].contains("the pre-commit check was skipped"),
        "{warned:?}"
    );
    p.configure("guard = \"open\"", "guard = \"closed\"");
    let out = commit_as(root, Some("impl-2"), "src/b.rs", "two", &[]);
    assert!(!out.status.success(), "a closed guard let it in");
    assert!(
        stderr(&out).contains("reservations.guard"),
        "{}",
        stderr(&out)
    );
    // Back, the reservation refuses it.
    std::fs::rename(&aside, &db).unwrap();
    let out = commit_as(root, Some("impl-2"), "src/b.rs", "two", &[]);
    assert!(stderr(&out).contains("impl-1"), "{}", stderr(&out));
    // A hook that is not Baton's is kept.
    let hook = root.join(".git/hooks/pre-push");
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
    let again = p.json(None, &["init", "--git-guard"]);
    assert_eq!(again["agents"][1]["result"], "kept", "{again}");
    assert!(
        again["steps"].to_string().contains("baton guard pre-push"),
        "{again}"
    );
    assert_eq!(
        std::fs::read_to_string(&hook).unwrap(),
        "#!/bin/sh\nexit 0\n"
    );
}

#[test]
fn the_status_and_the_resume_packet_say_who_holds_what_and_which_offer_it_blocks() {
    let p = team();
    p.ok(
        Some("impl-1"),
        &["reserve", "src/**", "--reason", "the export refactor"],
    );
    // An order offered to impl-2 whose scope impl-1 holds, and one impl-2 accepts.
    for (id, to) in [("wo_1", "impl-2"), ("wo_2", "impl-1")] {
        let mut doc = crate::common::work_order(id);
        doc["to"] = json!(to);
        let file = p.path().join(format!("{id}.json"));
        std::fs::write(&file, doc.to_string()).unwrap();
        p.ok(
            Some("planner"),
            &["order", "create", file.to_str().unwrap()],
        );
    }
    let out = p.run(Some("impl-2"), &["order", "accept", "wo_1"]);
    assert_eq!(code(&out), 6, "accepting into held paths: {}", stderr(&out));
    assert!(stderr(&out).contains("impl-1"), "{}", stderr(&out));
    p.ok(Some("impl-1"), &["order", "accept", "wo_2"]);

    let status = p.json(None, &["status"]);
    let held: Vec<(&str, &str)> = status["reservations"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["path"].as_str().unwrap(), r["holder"].as_str().unwrap()))
        .collect();
    assert_eq!(held, [("src/**", "impl-1"), ("src/export.rs", "impl-1")]);
    let text = p.ok(None, &["status"]);
    assert!(
        text.contains("RESERVED PATHS (2)") && text.contains("until order wo_2 ends"),
        "{text}"
    );

    let mine = p.ok(Some("impl-1"), &["resume"]);
    assert!(mine.contains("## Paths I hold"), "{mine}");
    assert!(mine.contains("src/** (exclusive"), "{mine}");
    assert!(mine.contains("the export refactor"), "{mine}");
    assert!(mine.contains("for order wo_2"), "{mine}");
    let theirs = p.ok(Some("impl-2"), &["resume"]);
    assert!(
        theirs.contains("## Blocked by others' reservations"),
        "{theirs}"
    );
    assert!(
        theirs.contains("order wo_1 needs src/export.rs: impl-1 holds src/**"),
        "{theirs}"
    );
    assert!(!theirs.contains("## Paths I hold"), "{theirs}");
}

#[test]
fn the_command_line_over_a_server_reserves_and_words_a_conflict_as_it_does_here() {
    use crate::server::{admin, member, serve};
    let db = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", db.path().join("projects").display());
    admin(&url, None, &["project", "add", "shop"]);
    let token = |who: &str| member(&url, "shop", who, "executor");
    let (one, two) = (token("impl-1"), token("impl-2"));
    let server = serve(&url);
    let elsewhere = tempfile::tempdir().unwrap();
    let remote = |key: &str, args: &[&str]| {
        Command::new(crate::common::baton_exe())
            .current_dir(elsewhere.path())
            .env_remove("BATON_PROJECT")
            .env_remove("BATON_AS")
            .env_remove("BATON_DB")
            .env("BATON_URL", format!("{}/v1/projects/shop", server.base))
            .env("BATON_KEY", key)
            .args(args)
            .output()
            .unwrap()
    };
    let out = remote(&one, &["--json", "reserve", "src/**", "--reason", "remote"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let made: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = made["items"][0]["id"].as_str().unwrap().to_owned();
    let out = remote(&two, &["reserve", "src/lib.rs"]);
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    for said in [
        id.as_str(),
        "impl-1",
        "Run it again once that lapses",
        "`baton reservations`",
    ] {
        assert!(stderr(&out).contains(said), "{said} in {}", stderr(&out));
    }
    let out = remote(&two, &["reserve", "../x"]);
    assert_eq!(code(&out), 3);
    assert!(stderr(&out).contains("GLOB \"../x\""), "{}", stderr(&out));
    let out = remote(&one, &["release", "src/**"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = remote(&two, &["--json", "reservations", "--all"]);
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed["items"][0]["status"], "released", "{listed}");
}
