//! Interruptions, with real processes: a recipient frozen before the request is sent, a
//! sender killed right after its commit, a key revoked mid-flow, a writer frozen while it
//! holds the write lock, and the disk filling under the store. (A recipient killed after
//! fetching, before completing, is `ledger::reap_marks_a_killed_wrappers_run_lost_…`.)

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

use crate::common::{Project, baton_exe, code, stderr, until_waiting};
use crate::server::{admin, serve};

const TEAM: [(&str, &str); 3] = [
    ("planner", "planner"),
    ("impl-1", "executor"),
    ("impl-2", "executor"),
];

fn signal(child: &Child, signal: Signal) {
    kill(Pid::from_raw(child.id() as i32), signal).expect("the process is there");
}

/// Whether `child` is stopped (`T` in `/proc/PID/stat`).
fn is_stopped(child: &Child) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap_or_default();
    // The state follows the command's name in parentheses.
    stat.rsplit(')')
        .next()
        .unwrap_or("")
        .trim_start()
        .starts_with('T')
}

/// Each recipient's status of what `planner` sent, as its outbox shows them.
fn outbox_statuses(p: &Project) -> Vec<(String, String)> {
    let outbox = p.json(Some("planner"), &["outbox", "--all"]);
    let mut seen = Vec::new();
    for item in outbox["items"].as_array().unwrap() {
        for (who, status) in item["status"].as_object().unwrap() {
            seen.push((who.clone(), status.as_str().unwrap().to_owned()));
        }
    }
    seen
}

#[test]
fn a_request_sent_while_its_recipient_is_frozen_reaches_it_once_it_runs_again() {
    let p = Project::new(&TEAM);
    let after = p.generation().to_string();
    let mut waiter = p
        .cmd(
            Some("impl-1"),
            &["--json", "wait", "--after", &after, "--timeout", "60s"],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Frozen once it waits: stopped earlier, it could be stopped while opening the store,
    // holding its lock, which is another interruption (a writer frozen holding the lock).
    until_waiting(&mut waiter);
    signal(&waiter, Signal::SIGSTOP);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !is_stopped(&waiter) {
        assert!(Instant::now() < deadline, "the recipient never stopped");
        std::thread::sleep(Duration::from_millis(5));
    }

    let id = p.ok(
        Some("planner"),
        &[
            "send", "--to", "impl-1", "--type", "request", "--topic", "t", "--body", "do it",
        ],
    );
    assert_eq!(
        outbox_statuses(&p),
        [("impl-1".to_owned(), "pending".to_owned())],
        "the request is kept for the frozen recipient"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        waiter.try_wait().unwrap().is_none(),
        "a frozen recipient learns nothing"
    );

    signal(&waiter, Signal::SIGCONT);
    let out = waiter.wait_with_output().unwrap();
    assert!(out.status.success());
    let news: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        news.to_string().contains(&id),
        "the thawed recipient is told of {id}: {news}"
    );
    p.ok(Some("impl-1"), &["show", &id]);
    p.ok(Some("impl-1"), &["complete", &id, "--note", "done"]);
    assert_eq!(
        outbox_statuses(&p),
        [("impl-1".to_owned(), "completed".to_owned())]
    );
}

/// A pipe whose buffer is full: a process writing to it blocks until it is read.
fn full_pipe() -> (OwnedFd, OwnedFd) {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let (read, write) = nix::unistd::pipe().unwrap();
    fcntl(write.as_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).unwrap();
    let mut file = std::fs::File::from(write.try_clone().unwrap());
    let chunk = [b'x'; 4096];
    loop {
        match file.write(&chunk) {
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("filling the pipe: {e}"),
        }
    }
    // The flag belongs to the pipe's open file, which the child shares: a blocking write.
    fcntl(write.as_fd(), FcntlArg::F_SETFL(OFlag::empty())).unwrap();
    (read, write)
}

#[test]
fn a_sender_killed_right_after_its_commit_retries_with_its_key_and_one_message_is_sent() {
    let p = Project::new(&TEAM);
    let send = [
        "send",
        "--to",
        "impl-1",
        "--type",
        "request",
        "--topic",
        "t",
        "--body",
        "exactly once",
        "--idempotency-key",
        "job-7",
    ];
    let before = p.generation();
    // Its answer cannot be printed: the sender commits, then blocks writing the id.
    let (_read, write) = full_pipe();
    let sender = p
        .cmd(Some("planner"), &send)
        .stdout(Stdio::from(write))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while p.generation() == before {
        assert!(Instant::now() < deadline, "the send never committed");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(100));
    let mut sender = sender;
    assert!(
        sender.try_wait().unwrap().is_none(),
        "the sender is still blocked on its answer"
    );
    signal(&sender, Signal::SIGKILL);
    sender.wait().unwrap();

    // The caller never saw an id: it sends again with the same key.
    let again = p.json(Some("planner"), &send);
    assert_eq!(again["duplicate"], true, "{again}");
    let all = p.json(Some("planner"), &["outbox", "--all"]);
    let items = all["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "one message: {all}");
    assert_eq!(items[0]["id"], again["id"]);
}

#[test]
fn a_key_revoked_mid_flow_stops_its_holder_alone_and_the_others_finish() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("projects").display());
    admin(&url, None, &["project", "add", "shop"]);
    for (name, role) in TEAM {
        admin(&url, Some("shop"), &["agent", "add", name, "--role", role]);
    }
    let issue = |who: &str| {
        admin(
            &url,
            Some("shop"),
            &["key", "issue", who, "--scope", "write"],
        )
    };
    let (planner, one, two) = (issue("planner"), issue("impl-1"), issue("impl-2"));
    let server = serve(&url);
    let elsewhere = tempfile::tempdir().unwrap();
    let remote = |key: &Value, args: &[&str]| {
        Command::new(baton_exe())
            .current_dir(elsewhere.path())
            .env_remove("BATON_PROJECT")
            .env_remove("BATON_AS")
            .env_remove("BATON_DB")
            .env("BATON_URL", format!("{}/v1/projects/shop", server.base))
            .env("BATON_KEY", key["token"].as_str().unwrap())
            .args(args)
            .output()
            .unwrap()
    };
    let ok = |key: &Value, args: &[&str]| {
        let out = remote(key, args);
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    // Each its own body: the same one again would be a duplicate of the first.
    let to = |who: &str, body: &str| {
        ok(
            &planner,
            &[
                "send", "--to", who, "--type", "request", "--topic", "t", "--body", body,
            ],
        )
    };
    let (first, second) = (to("impl-1", "first"), to("impl-2", "second"));
    ok(&one, &["show", &first]);
    ok(&two, &["show", &second]);

    admin(
        &url,
        Some("shop"),
        &["key", "revoke", one["id"].as_str().unwrap()],
    );
    let refused = remote(&one, &["complete", &first, "--note", "done"]);
    assert_eq!(code(&refused), 5, "{}", stderr(&refused));
    ok(&two, &["complete", &second, "--note", "done"]);
    let later = to("impl-2", "later");
    ok(&two, &["show", &later]);
    ok(&two, &["complete", &later, "--note", "done too"]);

    let outbox: Value =
        serde_json::from_str(&ok(&planner, &["--json", "outbox", "--all"])).unwrap();
    let status_of = |id: &str| {
        outbox["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["id"] == id)
            .and_then(|i| i["status"].as_object()?.values().next()?.as_str())
            .map(str::to_owned)
            .unwrap()
    };
    assert_eq!(
        status_of(&first),
        "delivered",
        "the revoked key changed nothing"
    );
    assert_eq!(status_of(&second), "completed");
    assert_eq!(status_of(&later), "completed");
    // Its participant goes on with a new key.
    let renewed = issue("impl-1");
    ok(&renewed, &["complete", &first, "--note", "done"]);
}

/// The process holding an exclusive lock on byte 120 of `shm` (SQLite's write lock), as
/// `/proc/locks` lists it.
fn write_lock_holder(shm: &std::path::Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let inode = std::fs::metadata(shm).ok()?.ino().to_string();
    std::fs::read_to_string("/proc/locks")
        .ok()?
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| {
            f.len() >= 8
                && f[1] == "POSIX"
                && f[3] == "WRITE"
                && f[5].rsplit(':').next() == Some(inode.as_str())
                && f[6] == "120"
        })
        .and_then(|f| f[4].parse().ok())
}

#[test]
fn a_writer_frozen_holding_the_lock_is_named_to_the_others_who_go_on_once_it_thaws() {
    let p = Project::new(&TEAM);
    p.configure("busy_timeout = \"5s\"", "busy_timeout = \"1s\"");
    let shm = p.path().join(".baton/baton.db-shm");
    let handover = p.path().join("handover.json");
    let changes: Vec<String> = (0..1000).map(|i| format!("dependency {i}")).collect();
    std::fs::write(
        &handover,
        serde_json::json!({ "dependency_changes": changes }).to_string(),
    )
    .unwrap();

    // A handover of a thousand changes is one long write: freeze it while it holds the
    // lock (a try that froze it a moment too late thaws it and tries again).
    let mut frozen = None;
    for _ in 0..100 {
        let mut writer = p
            .cmd(
                Some("impl-1"),
                &["session", "end", "--file", "handover.json"],
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = writer.id();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) && writer.try_wait().unwrap().is_none() {
            if write_lock_holder(&shm) == Some(pid) {
                signal(&writer, Signal::SIGSTOP);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
        if is_stopped(&writer) && write_lock_holder(&shm) == Some(pid) {
            frozen = Some(writer);
            break;
        }
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGCONT);
        writer.wait().unwrap();
    }
    let writer = frozen.expect("a writer frozen while holding the lock, in 100 tries");

    let send = [
        "send", "--to", "impl-2", "--type", "info", "--topic", "t", "--body", "hello",
    ];
    let started = Instant::now();
    let busy = p.run(Some("planner"), &send);
    assert_eq!(code(&busy), 6, "{}", stderr(&busy));
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "refused at the busy timeout, not held: {:?}",
        started.elapsed()
    );
    let said = stderr(&busy);
    assert!(
        said.contains(&format!("process {}", writer.id())) && said.contains("session end"),
        "the message names the holder: {said}"
    );

    signal(&writer, Signal::SIGCONT);
    let done = writer.wait_with_output().unwrap();
    assert!(
        done.status.success(),
        "the thawed writer finishes: {}: {}",
        done.status,
        String::from_utf8_lossy(&done.stderr)
    );
    p.ok(Some("planner"), &send);
    let state = p.json(None, &["state", "show"]);
    assert!(
        state.to_string().contains("dependency 999"),
        "the frozen writer's handover is whole: {state}"
    );
}

#[test]
fn on_a_full_disk_writes_fail_clearly_nothing_acknowledged_is_lost_and_room_brings_it_back() {
    let mount = tempfile::tempdir().unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8m", "tmpfs"])
        .arg(mount.path())
        .output();
    if !matches!(&mounted, Ok(out) if out.status.success()) {
        // Straight to stderr: the harness swallows `eprintln!` of a test that passes.
        let _ = writeln!(
            std::io::stderr(),
            "full disk: not run: mounting a small tmpfs needs root ({mounted:?})"
        );
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mount.path().to_owned());

    let root = mount.path();
    let init = Command::new(baton_exe())
        .current_dir(root)
        .env_remove("BATON_PROJECT")
        .arg("init")
        .output()
        .unwrap();
    assert!(init.status.success(), "{}", stderr(&init));
    let baton = |args: &[&str]| {
        Command::new(baton_exe())
            .current_dir(root)
            .env_remove("BATON_PROJECT")
            .env_remove("BATON_AS")
            .args(args)
            .output()
            .unwrap()
    };
    for (name, role) in TEAM {
        assert!(
            baton(&["agent", "add", name, "--role", role])
                .status
                .success()
        );
    }
    let body = "x".repeat(2000);
    let send = |n: usize| {
        baton(&[
            "--as",
            "planner",
            "send",
            "--to",
            "impl-1",
            "--type",
            "info",
            "--topic",
            "t",
            "--body",
            &format!("{n} {body}"),
        ])
    };
    let mut acknowledged = Vec::new();
    for n in 0..5 {
        let out = send(n);
        assert!(out.status.success(), "{}", stderr(&out));
        acknowledged.push(n);
    }

    // Fill the disk, leaving no room for the log to grow.
    let filler = root.join("filler");
    {
        let mut file = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        while file.write_all(&chunk).is_ok() {}
        let byte = [0u8; 1];
        while file.write_all(&byte).is_ok() {}
        let _ = file.sync_all();
    }
    let mut refused = None;
    for n in 5..200 {
        let out = send(n);
        if out.status.success() {
            acknowledged.push(n);
        } else {
            refused = Some(out);
            break;
        }
    }
    let refused = refused.expect("a send refused on a full disk");
    assert_eq!(code(&refused), 1, "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("disk holding the store is full"),
        "a clear error: {}",
        stderr(&refused)
    );

    std::fs::remove_file(&filler).unwrap();
    let out = send(1000);
    assert!(out.status.success(), "works again: {}", stderr(&out));
    acknowledged.push(1000);
    let inbox = baton(&["--as", "impl-1", "--json", "inbox", "--all"]);
    let inbox: Value = serde_json::from_slice(&inbox.stdout).unwrap();
    let text = inbox.to_string();
    for n in acknowledged {
        assert!(text.contains(&format!("\"{n} x")), "message {n} is kept");
    }
    let db = rusqlite::Connection::open(root.join(".baton/baton.db")).unwrap();
    let check: String = db
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}
