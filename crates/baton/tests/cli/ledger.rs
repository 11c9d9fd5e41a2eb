//! The run ledger with real processes: `baton run` wrapping fake agents (shell
//! scripts), signals sent to it, holders killed with SIGKILL, `baton reap`, the hooks and
//! `baton init --claude|--codex`.
//!
//! Synchronisation is by FIFOs and pipes, never by sleeping: a fake agent announces that it
//! runs by writing to a FIFO the test is reading, and then blocks reading its stdin until
//! the test writes to it (or closes it). Every wait is bounded by [`PATIENCE`] so a broken
//! wrapper fails the test instead of hanging it.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::common::{Project, baton_exe, stderr, until_waiting};

/// The longest any single step may take before the test gives up on it.
const PATIENCE: Duration = Duration::from_secs(60);

const CLAUDE_SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../baton-core/tests/data/claude-stream.jsonl"
);
const CODEX_SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../baton-core/tests/data/codex-exec.jsonl"
);

/// Writes an executable shell script.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn fifo(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let status = Command::new("mkfifo").arg(&path).status().expect("mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
    path
}

/// Runs `f` on a thread and waits at most [`PATIENCE`] for it.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(PATIENCE)
        .unwrap_or_else(|_| panic!("gave up after {PATIENCE:?} waiting for {what}"))
}

/// Opens a FIFO for reading (which waits for its writer) and reads until the writer
/// closes it.
fn read_fifo(path: &Path) -> String {
    let path = path.to_owned();
    within(&format!("a writer on {}", path.display()), move || {
        let mut text = String::new();
        std::fs::File::open(&path)
            .and_then(|mut f| f.read_to_string(&mut text))
            .expect("read the FIFO");
        text
    })
}

/// Waits for the process and collects what it printed.
fn finish(child: Child) -> Output {
    within("baton run to exit", move || {
        child.wait_with_output().expect("wait for baton")
    })
}

fn code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| panic!("ended by a signal: {status}"))
}

/// `baton run ARGS` in the project, with piped stdio, as `who` when given. The agent
/// finds `baton` in `$BATON`.
fn spawn_run(project: &Project, who: Option<&str>, args: &[&str]) -> Child {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    project
        .cmd(who, &all)
        .env("BATON", baton_exe())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn baton run")
}

fn runs(project: &Project) -> Vec<Value> {
    project.json(None, &["runs", "--all"])["items"]
        .as_array()
        .expect("items")
        .clone()
}

fn the_run(project: &Project, id: &str) -> Value {
    runs(project)
        .into_iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no run {id} in the ledger"))
}

/// The only run whose command mentions `needle`.
fn run_with(project: &Project, needle: &str) -> Value {
    let found: Vec<Value> = runs(project)
        .into_iter()
        .filter(|r| r["command"].to_string().contains(needle))
        .collect();
    assert_eq!(found.len(), 1, "runs mentioning {needle}: {found:?}");
    found.into_iter().next().unwrap()
}

#[test]
fn the_row_is_committed_before_the_agent_starts() {
    let project = Project::new(&[("impl-1", "executor")]);
    let dir = project.path();
    let started = fifo(dir, "started");
    // Its first act is to read the ledger; then it says it runs and blocks before any
    // output until the test writes to its stdin.
    let agent = script(
        dir,
        "agent.sh",
        r#""$BATON" --json runs > "$1.view"
echo "$$ $BATON_RUN" > "$1"
read line
echo "got $line""#,
    );
    let mut child = spawn_run(
        &project,
        Some("impl-1"),
        &["--", agent.to_str().unwrap(), started.to_str().unwrap()],
    );
    let said = read_fifo(&started);
    let (pid, id) = said.trim().split_once(' ').expect("pid and run id");

    // The agent's own view: its row existed before it ran.
    let view: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("started.view")).unwrap()).unwrap();
    let mine = view["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("the agent did not find its run {id} in {view}"));
    assert!(
        ["registered", "running"].contains(&mine["status"].as_str().unwrap()),
        "{mine}"
    );
    // The test's view while the agent is blocked before its first output.
    let row = the_run(&project, id);
    assert!(
        ["registered", "running"].contains(&row["status"].as_str().unwrap()),
        "{row}"
    );
    assert_eq!(row["participant"], "impl-1");
    assert_eq!(row["exit_code"], Value::Null, "no exit yet: {row}");
    assert_eq!(row["tokens"], Value::Null, "no tokens were reported: {row}");
    assert_eq!(
        row["progress"],
        Value::Null,
        "no progress was reported: {row}"
    );

    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let out = finish(child);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert_eq!(out.stdout, b"got go\n", "stdout passes through unchanged");
    let row = the_run(&project, id);
    assert_eq!(row["status"], "done");
    assert_eq!(row["exit_code"], 0);
    assert_eq!(row["pid"].to_string(), pid);
}

#[test]
fn a_command_that_cannot_start_fails_with_127_and_the_reason() {
    let project = Project::new(&[]);
    let not_executable = project.path().join("not-executable");
    std::fs::write(&not_executable, "#!/bin/sh\necho never\n").unwrap();
    for (program, why) in [
        ("./no-such-agent", "No such file"),
        ("./not-executable", "Permission denied"),
    ] {
        let out = project.run(None, &["run", "--", program, "--flag"]);
        assert_eq!(code(out.status), 127, "{program}: {}", stderr(&out));
        assert!(out.stdout.is_empty());
        assert!(stderr(&out).contains(why), "{program}: {}", stderr(&out));
        let row = run_with(&project, program);
        assert_eq!(row["status"], "failed", "{row}");
        assert_eq!(row["exit_code"], 127);
        assert!(row["reason"].as_str().unwrap().contains(why), "{row}");
        assert_eq!(row["pid"], Value::Null, "it never had a process: {row}");
        assert_eq!(
            row["health"],
            Value::Null,
            "an ended run has no health: {row}"
        );
    }
    // The table says `-`, never `ok`, for a run that failed with 127.
    let table = project.ok(None, &["runs", "--all"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    let health = header
        .iter()
        .position(|h| *h == "HEALTH")
        .expect("a HEALTH column");
    let row = table
        .lines()
        .find(|l| l.contains("no-such-agent"))
        .unwrap_or_else(|| panic!("no row for the failed run:\n{table}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    let status = header.iter().position(|h| *h == "STATUS").unwrap();
    assert_eq!(cells[status], "failed", "{table}");
    assert_eq!(cells[health], "-", "{table}");
}

#[test]
fn the_commands_exit_code_is_the_runs() {
    let project = Project::new(&[]);
    let out = project.run(
        None,
        &["run", "--", "sh", "-c", "echo out; echo err >&2; exit 3"],
    );
    assert_eq!(code(out.status), 3);
    assert_eq!(out.stdout, b"out\n");
    assert!(stderr(&out).starts_with("err\n"), "{}", stderr(&out));
    let row = run_with(&project, "exit 3");
    assert_eq!(row["status"], "failed");
    assert_eq!(row["exit_code"], 3);
}

#[test]
fn sigterm_is_forwarded_to_the_agents_group_and_the_run_is_stopped() {
    let project = Project::new(&[]);
    let dir = project.path();
    let started = fifo(dir, "started");
    let held = fifo(dir, "held");
    // A grandchild holds `held` open for writing: the test reads it to its end, which
    // comes only when the grandchild dies, so the signal must reach the whole group.
    let agent = script(
        dir,
        "agent.sh",
        r#"sleep 600 > "$2" &
echo "$$" > "$1"
wait"#,
    );
    let child = spawn_run(
        &project,
        None,
        &[
            "--",
            agent.to_str().unwrap(),
            started.to_str().unwrap(),
            held.to_str().unwrap(),
        ],
    );
    let baton = Pid::from_raw(child.id() as i32);
    let agent_pid = read_fifo(&started);
    // Open the read end before the signal: the open returns only once the grandchild holds
    // the write end, so the signal cannot land while it is still opening the FIFO (a
    // grandchild killed there would never open it, and the read below would wait forever
    // and blame forwarding for a race of the test's own).
    let held_path = held.clone();
    let mut held_open = within("the grandchild to open its FIFO", move || {
        std::fs::File::open(&held_path).expect("open the FIFO for reading")
    });
    let (tx, grandchild_gone) = mpsc::channel();
    thread::spawn(move || {
        let mut rest = String::new();
        let _ = tx.send(held_open.read_to_string(&mut rest).is_ok());
    });

    kill(baton, Signal::SIGTERM).expect("signal baton run");
    let out = finish(child);
    assert_eq!(code(out.status), 128 + 15, "{}", stderr(&out));
    assert_eq!(
        grandchild_gone.recv_timeout(PATIENCE),
        Ok(true),
        "the agent's background child did not get the signal"
    );
    let row = run_with(&project, "agent.sh");
    assert_eq!(row["status"], "stopped", "{row}");
    assert_eq!(row["signal"], 15);
    assert_eq!(row["pid"].to_string(), agent_pid.trim());
    // Ended: health does not apply (null), whatever way it ended.
    assert_eq!(row["health"], Value::Null, "{row}");
}

/// An agent that prints a recorded stream and then blocks, as a live agent would.
/// A stand-in named like the agent (`stream/claude`, `stream/codex`) that prints `sample`
/// and then waits on stdin.
fn streaming_agent(dir: &Path, name: &str, sample: &str) -> PathBuf {
    let dir = dir.join("stream");
    std::fs::create_dir_all(&dir).unwrap();
    script(&dir, name, &format!("cat '{sample}'\nread line"))
}

#[test]
fn over_its_token_budget_the_agent_is_stopped_and_baton_exits_125() {
    // Codex started as `codex exec`: a new thread, so its first total is this run's.
    let cases = [
        ("claude", &["-p", "go"][..], CLAUDE_SAMPLE, 32_432),
        ("codex", &["exec", "--json", "go"], CODEX_SAMPLE, 28_139),
    ];
    for (name, args, sample, total) in cases {
        let project = Project::new(&[]);
        let agent = streaming_agent(project.path(), name, sample);
        let mut all = vec!["--budget-tokens", "1000", "--", agent.to_str().unwrap()];
        all.extend_from_slice(args);
        let mut child = spawn_run(&project, None, &all);
        // Held open: the agent would wait on it forever; only the budget ends it.
        let stdin = child.stdin.take();
        let out = finish(child);
        drop(stdin);
        assert_eq!(code(out.status), 125, "{sample}: {}", stderr(&out));
        assert_eq!(
            out.stdout,
            std::fs::read(sample).unwrap(),
            "{sample}: the stream passes through unchanged"
        );
        assert!(stderr(&out).contains("budget"), "{}", stderr(&out));
        let row = run_with(&project, "stream/");
        assert_eq!(row["status"], "failed", "{row}");
        assert!(
            row["reason"].as_str().unwrap().starts_with("budget"),
            "{row}"
        );
        assert_eq!(row["tokens"]["total"], total, "{row}");
        assert_eq!(row["budget_tokens"], 1000);
    }
}

#[test]
fn progress_and_tokens_are_read_and_unknown_stays_unknown() {
    let project = Project::new(&[]);
    let dir = project.path();
    let claude = script(dir, "claude.sh", &format!("cat '{CLAUDE_SAMPLE}'"));
    let out = project.run(None, &["run", "--", claude.to_str().unwrap()]);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    let row = run_with(&project, "claude.sh");
    assert_eq!(row["tokens"]["input"], 32_012, "{row}");
    assert_eq!(row["tokens"]["cached_input"], 30_000);
    assert_eq!(row["tokens"]["output"], 420);
    assert_eq!(
        row["progress"]["done"], 1,
        "PROGRESS 1/3 in the agent's text: {row}"
    );
    assert_eq!(row["progress"]["total"], 3);

    // A bare count needs a declared denominator; plain output reports no tokens.
    let plain = script(dir, "plain.sh", "echo 'PROGRESS 2'\necho working");
    project.ok(None, &["run", "--", plain.to_str().unwrap()]);
    let row = run_with(&project, "plain.sh");
    assert_eq!(row["progress"], Value::Null, "{row}");
    assert_eq!(row["tokens"], Value::Null, "{row}");
    project.ok(
        None,
        &["run", "--steps", "5", "--", plain.to_str().unwrap()],
    );
    let declared: Vec<Value> = runs(&project)
        .into_iter()
        .filter(|r| r["command"].to_string().contains("plain.sh"))
        .collect();
    assert_eq!(declared[1]["progress"]["done"], 2, "{declared:?}");
    assert_eq!(declared[1]["progress"]["total"], 5);
    assert_eq!(declared[1]["tokens"], Value::Null);
}

/// Starts a `baton run` whose agent announces itself on a FIFO and then waits on stdin.
fn holder(project: &Project, name: &str, extra: &[&str]) -> (Child, u32) {
    let dir = project.path();
    let started = fifo(dir, name);
    let agent = script(
        dir,
        &format!("{name}.sh"),
        "echo \"$$\" > \"$1\"\nread line\nexit 0",
    );
    let mut args: Vec<&str> = extra.to_vec();
    args.extend(["--", agent.to_str().unwrap(), started.to_str().unwrap()]);
    let child = spawn_run(project, None, &args);
    let pid = read_fifo(&started).trim().parse().expect("the agent's pid");
    (child, pid)
}

#[test]
fn with_every_slot_taken_a_run_exits_75_and_a_killed_holders_slot_frees_itself() {
    let project = Project::new(&[]);
    let (first, first_agent) = holder(&project, "first", &["--slots", "2"]);
    let (mut second, _) = holder(&project, "second", &["--slots", "2"]);

    let out = project.run(None, &["run", "--slots", "2", "--", "echo", "third"]);
    assert_eq!(code(out.status), 75, "{}", stderr(&out));
    assert!(stderr(&out).contains("slot"), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "the command must not have run");
    assert_eq!(runs(&project).len(), 2, "a refused run writes no row");

    // SIGKILL the first holder: nothing releases its lock but the kernel.
    kill(Pid::from_raw(first.id() as i32), Signal::SIGKILL).unwrap();
    let killed = finish(first);
    assert_eq!(killed.status.code(), None, "killed, not exited");
    let out = project.run(None, &["run", "--slots", "2", "--", "echo", "third"]);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert_eq!(out.stdout, b"third\n");

    // --wait queues instead of refusing, and starts once a slot is free.
    let (mut third, _) = holder(&project, "third", &["--slots", "2"]);
    let before = runs(&project).len();
    let mut waiter = project
        .cmd(
            None,
            &["run", "--slots", "2", "--wait", "--", "echo", "waited"],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // It says it waits (every slot was taken when it looked) before a slot is freed: it
    // was blocked, and only the freed slot can start it.
    until_waiting(&mut waiter);
    assert_eq!(
        runs(&project).len(),
        before,
        "a queued run writes no row while it waits"
    );
    second.stdin.take().unwrap().write_all(b"done\n").unwrap();
    assert_eq!(code(finish(second).status), 0);
    let out = finish(waiter);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert_eq!(out.stdout, b"waited\n");

    let _ = killpg(Pid::from_raw(first_agent as i32), Signal::SIGKILL);
    drop(third.stdin.take());
    assert_eq!(code(finish(third).status), 0);
}

#[test]
fn a_second_writer_is_not_admitted_while_others_still_run() {
    let project = Project::new(&[]);
    let (mut writer, _) = holder(&project, "writer", &["--writer"]);
    let out = project.run(None, &["run", "--writer", "--", "echo", "second writer"]);
    assert_eq!(code(out.status), 75, "{}", stderr(&out));
    assert!(stderr(&out).contains("writer"), "{}", stderr(&out));
    let out = project.run(None, &["run", "--", "echo", "a reader"]);
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    drop(writer.stdin.take());
    assert_eq!(code(finish(writer).status), 0);
}

#[test]
fn reap_marks_a_killed_wrappers_run_lost_resurfaces_its_work_and_alerts_once() {
    let project = Project::new(&[("planner", "planner"), ("impl-1", "executor")]);
    let dir = project.path();
    let before = project.ok(
        Some("planner"),
        &[
            "send",
            "--to",
            "impl-1",
            "--type",
            "request",
            "--topic",
            "csv",
            "--body",
            "fetched before",
        ],
    );
    project.ok(Some("impl-1"), &["show", &before]);
    let held = project.ok(
        Some("planner"),
        &[
            "send",
            "--to",
            "impl-1",
            "--type",
            "request",
            "--topic",
            "csv",
            "--body",
            "fetched in the run",
        ],
    );
    let started = fifo(dir, "started");
    // The agent fetches the request (BATON_AS comes from `baton run --as`), says so, waits.
    let agent = script(
        dir,
        "agent.sh",
        "\"$BATON\" show \"$2\" > /dev/null || exit 9\necho \"$$\" > \"$1\"\nread line",
    );
    let child = spawn_run(
        &project,
        Some("impl-1"),
        &[
            "--",
            agent.to_str().unwrap(),
            started.to_str().unwrap(),
            &held,
        ],
    );
    let agent_pid: i32 = read_fifo(&started).trim().parse().unwrap();
    let run_id = run_with(&project, "agent.sh")["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Kill the wrapper itself, so no exit is ever recorded.
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    finish(child);
    assert_eq!(the_run(&project, &run_id)["status"], "running");

    let reaped = project.json(None, &["reap"]);
    let lost = reaped["lost"].as_array().unwrap();
    assert_eq!(lost.len(), 1, "{reaped}");
    assert_eq!(lost[0]["run"], run_id.as_str());
    assert_eq!(lost[0]["resurfaced"][0], held.as_str());
    let row = the_run(&project, &run_id);
    assert_eq!(row["status"], "lost", "{row}");
    assert_eq!(row["health"], "lost");
    assert_eq!(
        row["exit_code"],
        Value::Null,
        "no exit code is invented: {row}"
    );
    let inbox = project.json(Some("impl-1"), &["inbox"]);
    let status_of = |id: &str| {
        inbox["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .map(|m| m["status"].clone())
    };
    assert_eq!(status_of(&held), Some("pending".into()), "{inbox}");
    assert_eq!(status_of(&before), Some("delivered".into()), "{inbox}");
    let alerts = project.json(None, &["alerts"]);
    assert_eq!(alerts["items"].as_array().unwrap().len(), 2, "{alerts}");

    let again = project.json(None, &["reap"]);
    assert_eq!(again["lost"], Value::Array(Vec::new()), "{again}");
    let alerts = project.json(None, &["alerts"]);
    assert_eq!(
        alerts["items"].as_array().unwrap().len(),
        2,
        "alerted twice: {alerts}"
    );

    let _ = killpg(Pid::from_raw(agent_pid), Signal::SIGKILL);
}

#[test]
fn reap_records_agents_not_started_through_baton_run_once() {
    let project = Project::new(&[]);
    let dir = project.path();
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    // Named like the agent, so the process is called `claude`.
    let claude = script(&bin, "claude", "echo \"$$\" > \"$1\"\nread line\nexit 0");
    let started = fifo(dir, "untracked");
    let mut untracked = Command::new(&claude)
        .arg(&started)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let untracked_pid = read_fifo(&started).trim().to_owned();
    // The same agent working in another checkout is that project's, not this one's.
    let elsewhere = tempfile::tempdir().unwrap();
    let started_elsewhere = fifo(dir, "elsewhere");
    let mut other = Command::new(&claude)
        .arg(&started_elsewhere)
        .current_dir(elsewhere.path())
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let other_pid = read_fifo(&started_elsewhere).trim().to_owned();
    let tracked_fifo = fifo(dir, "tracked");
    let mut tracked = spawn_run(
        &project,
        None,
        &[
            "--",
            claude.to_str().unwrap(),
            tracked_fifo.to_str().unwrap(),
        ],
    );
    let tracked_pid = read_fifo(&tracked_fifo).trim().to_owned();

    let reaped = project.json(None, &["reap"]);
    let ids: Vec<String> = reaped["untracked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let prefix = format!("pid-{untracked_pid}-");
    assert!(ids.iter().any(|id| id.starts_with(&prefix)), "{reaped}");
    assert!(
        !ids.iter()
            .any(|id| id.starts_with(&format!("pid-{other_pid}-"))),
        "an agent working in another directory was counted here: {reaped}"
    );
    drop(other.stdin.take());
    other.wait().unwrap();
    assert!(
        !ids.iter()
            .any(|id| id.starts_with(&format!("pid-{tracked_pid}-"))),
        "the agent started through `baton run` was counted twice: {reaped}"
    );
    let id = ids
        .iter()
        .find(|id| id.starts_with(&prefix))
        .unwrap()
        .clone();
    let row = the_run(&project, &id);
    assert_eq!(row["status"], "untracked");
    assert_eq!(row["health"], "unknown");
    assert_eq!(row["pid"].to_string(), untracked_pid);

    let again = project.json(None, &["reap"]);
    assert!(
        !again["untracked"].to_string().contains(&prefix),
        "recorded twice: {again}"
    );

    drop(untracked.stdin.take());
    within("the untracked agent to exit", move || {
        untracked.wait().unwrap()
    });
    let after = project.json(None, &["reap"]);
    assert!(after["gone"].to_string().contains(&id), "{after}");
    assert_eq!(the_run(&project, &id)["status"], "lost");

    drop(tracked.stdin.take());
    assert_eq!(code(finish(tracked).status), 0);
}

#[test]
fn a_run_that_exits_0_without_its_expected_receipt_fails_naming_the_step() {
    let project = Project::new(&[]);
    let out = project.run(None, &["run", "--expect-receipt", "build", "--", "true"]);
    assert_eq!(code(out.status), 4, "{}", stderr(&out));
    assert!(stderr(&out).contains("build"), "{}", stderr(&out));
    let row = run_with(&project, "true");
    assert_eq!(row["status"], "failed");
    assert_eq!(row["exit_code"], 0);
    assert!(row["reason"].as_str().unwrap().contains("build"), "{row}");

    let writes = "echo artifact > out.txt && \"$BATON\" receipt write --step build --artifact out.txt --run \"$BATON_RUN\" > /dev/null";
    let out = project
        .cmd(
            None,
            &["run", "--expect-receipt", "build", "--", "sh", "-c", writes],
        )
        .env("BATON", baton_exe())
        .output()
        .unwrap();
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert_eq!(run_with(&project, "receipt write")["status"], "done");
}

fn hook(project: &Project, who: Option<&str>, args: &[&str], stdin: &[u8]) -> Output {
    let mut all = vec!["hook"];
    all.extend_from_slice(args);
    let mut child = project
        .cmd(who, &all)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A hook that has nothing to do with its input (an event it does not know) may exit
    // before reading it: the write then meets a closed pipe, which is not the test's
    // concern; its exit code and output are.
    match child.stdin.take().unwrap().write_all(stdin) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        written => written.unwrap(),
    }
    finish(child)
}

#[test]
fn hooks_exit_0_print_nothing_and_tie_the_session_to_the_run() {
    let project = Project::new(&[("impl-1", "executor")]);
    for stdin in [&b"not json at all"[..], b"", b"[1,2]", &[0xff, 0xfe, 0x00]] {
        let out = hook(&project, None, &["claude", "PreToolUse"], stdin);
        assert_eq!(code(out.status), 0, "{}", stderr(&out));
        assert!(out.stdout.is_empty(), "{:?}", out.stdout);
    }
    let out = hook(&project, None, &["claude", "not an event!"], b"{}");
    assert_eq!(code(out.status), 0);
    assert!(out.stdout.is_empty());

    // The agent calls the hook from inside its run: BATON_RUN ties the two.
    let calls = r#"printf '{"session_id":"s-42","tool_name":"Bash","hook_event_name":"PreToolUse"}' | "$BATON" hook claude PreToolUse"#;
    let out = project
        .cmd(Some("impl-1"), &["run", "--", "sh", "-c", calls])
        .env("BATON", baton_exe())
        .output()
        .unwrap();
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "the hook printed {:?}", out.stdout);
    assert_eq!(run_with(&project, "hook claude")["session"], "s-42");

    // Only SessionStart (and UserPromptSubmit) with --inject print, and only the packet.
    let packet = hook(
        &project,
        Some("impl-1"),
        &["claude", "SessionStart", "--inject"],
        b"{}",
    );
    assert_eq!(code(packet.status), 0);
    let text = String::from_utf8(packet.stdout).unwrap();
    assert!(text.starts_with("# Resume: impl-1"), "{text}");
    for args in [
        &["claude", "PreCompact", "--inject"][..],
        &["claude", "Stop", "--inject"],
        &["codex", "SessionStart"],
    ] {
        let out = hook(&project, Some("impl-1"), args, b"{}");
        assert!(out.stdout.is_empty(), "{args:?} printed {:?}", out.stdout);
    }
    let anonymous = hook(
        &project,
        None,
        &["claude", "SessionStart", "--inject"],
        b"{}",
    );
    assert!(anonymous.stdout.is_empty(), "no identity, no packet");
    let said = String::from_utf8_lossy(&anonymous.stderr);
    assert!(
        said.contains("BATON_AS=NAME"),
        "says who it could not find: {said}"
    );
    let stranger = hook(
        &project,
        Some("ghost"),
        &["claude", "SessionStart", "--inject"],
        b"{}",
    );
    assert_eq!(code(stranger.status), 0);
    assert!(stranger.stdout.is_empty(), "no participant, no packet");
    let said = String::from_utf8_lossy(&stranger.stderr);
    assert!(said.contains("ghost is not a participant"), "{said}");
}

/// `/compact` in Claude Code 2.1.332 (payloads as it sent them, paths shortened): a
/// PreCompact, then a SubagentStop for each internal fork, with an agent_id, an empty
/// agent_type and no SubagentStart. They stay in the log and make no helper row; the
/// helper the session really started is still its only one.
#[test]
fn a_compactions_forks_that_only_stop_make_no_helper_rows() {
    let project = Project::new(&[("impl-1", "executor")]);
    let session = "536a46b4-e8a0-4e05-8495-f1fdeebbeaad";
    let stop = |agent: &str, kind: &str| {
        format!(
            r#"{{"session_id":"{session}","transcript_path":"/home/dev/.claude/projects/-home-dev-proj/{session}.jsonl","cwd":"/home/dev/proj","prompt_id":"8a694c70-c8a9-4af6-9039-be2652c1f83c","permission_mode":"default","agent_id":"{agent}","agent_type":"{kind}","effort":{{"level":"medium"}},"hook_event_name":"SubagentStop","stop_hook_active":false,"agent_transcript_path":"/home/dev/.claude/projects/-home-dev-proj/{session}/subagents/agent-{agent}.jsonl","last_assistant_message":"done","background_tasks":[],"session_crons":[]}}"#
        )
    };
    let calls = [
        (
            "SessionStart",
            format!(
                r#"{{"session_id":"{session}","hook_event_name":"SessionStart","source":"startup"}}"#
            ),
        ),
        (
            "SubagentStart",
            format!(
                r#"{{"session_id":"{session}","hook_event_name":"SubagentStart","agent_id":"a0634772da1dea376","agent_type":"general-purpose"}}"#
            ),
        ),
        ("SubagentStop", stop("a0634772da1dea376", "general-purpose")),
        (
            "PreCompact",
            format!(
                r#"{{"session_id":"{session}","cwd":"/home/dev/proj","prompt_id":"8a694c70-c8a9-4af6-9039-be2652c1f83c","hook_event_name":"PreCompact","trigger":"manual","custom_instructions":null}}"#
            ),
        ),
        ("SubagentStop", stop("a7b4c5624d693ab9d", "")),
        ("SubagentStop", stop("a056b7bddaadf4a3f", "")),
    ];
    for (event, payload) in &calls {
        // A hook over its budget on a loaded machine drops its event (by design): again.
        let landed = (0..20).any(|_| {
            let out = hook(
                &project,
                Some("impl-1"),
                &["claude", event],
                payload.as_bytes(),
            );
            assert_eq!(code(out.status), 0, "{}", stderr(&out));
            !stderr(&out).contains("event dropped")
        });
        assert!(landed, "every {event} call dropped its event");
    }
    let stops = project
        .ok(None, &["export"])
        .lines()
        .filter(|l| l.contains(r#""event":"SubagentStop""#))
        .count();
    assert_eq!(stops, 3, "every stop is in the log");
    let rows = runs(&project);
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let id = format!("claude:{session}");
    assert_eq!(
        ids,
        [id.clone(), format!("{id}/a0634772da1dea376")],
        "a fork became a helper"
    );
}

#[test]
fn sessions_and_helpers_seen_through_hooks_are_rows_of_the_ledger() {
    let project = Project::new(&[("impl-1", "executor"), ("planner", "planner")]);
    let claude = |event: &str, payload: &str| {
        let out = hook(
            &project,
            Some("impl-1"),
            &["claude", event],
            payload.as_bytes(),
        );
        assert_eq!(code(out.status), 0, "{}", stderr(&out));
    };
    // As Claude Code sends them: a session starts, three helpers start, a tool is used.
    claude(
        "SessionStart",
        r#"{"session_id":"s1","hook_event_name":"SessionStart","source":"startup","cwd":"/w"}"#,
    );
    for helper in ["a1", "a2", "a3"] {
        claude(
            "SubagentStart",
            &format!(
                r#"{{"session_id":"s1","hook_event_name":"SubagentStart","agent_id":"{helper}","agent_type":"Explore"}}"#
            ),
        );
    }
    claude(
        "PostToolUse",
        r#"{"session_id":"s1","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}"#,
    );
    claude(
        "SubagentStop",
        r#"{"session_id":"s1","hook_event_name":"SubagentStop","agent_id":"a1","agent_type":"Explore"}"#,
    );
    let session = the_run(&project, "claude:s1");
    assert_eq!(session["source"], "session", "{session}");
    assert_eq!(session["agent"], "claude");
    assert_eq!(session["participant"], "impl-1");
    assert_eq!(session["status"], "running");
    assert_eq!(session["health"], "ok");
    assert_eq!(session["tools"], json!(["Bash"]));
    assert_eq!(session["pid"], Value::Null, "its pid is not known");
    let helper = the_run(&project, "claude:s1/a1");
    assert_eq!(
        (
            &helper["source"],
            &helper["parent"],
            &helper["agent_type"],
            &helper["status"]
        ),
        (
            &json!("helper"),
            &json!("claude:s1"),
            &json!("Explore"),
            &json!("ended")
        ),
        "{helper}"
    );
    assert_eq!(the_run(&project, "claude:s1/a2")["status"], "running");
    // The stored hook keeps the helper it fired in.
    let log = project.ok(None, &["export"]);
    assert!(log.contains(r#""agent_id":"a2""#), "{log}");
    // The table says where each row comes from.
    let table = project.ok(None, &["runs", "--all"]);
    assert!(
        table.contains("claude-session") && table.contains("claude-helper"),
        "{table}"
    );
    // The status lists the session and counts its helpers rather than list them.
    let status = project.json(None, &["status"]);
    let listed: Vec<&str> = status["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["claude:s1"], "{status}");
    // The session shows its own helpers, counted.
    let row = &status["runs"][0];
    assert_eq!(
        row["helpers"],
        json!({"active": 2, "idle": 0, "ended": 1}),
        "{row}"
    );
    assert_eq!(
        row["what"], "helpers 2 active, 0 idle, 1 ended · tools: Bash",
        "{row}"
    );
    let counts = &status["run_counts"];
    assert_eq!(
        (
            &counts["sources"]["sessions"],
            &counts["sources"]["helpers"]
        ),
        (&json!(1), &json!(3)),
        "{counts}"
    );
    assert_eq!(
        counts["helpers"],
        json!({"active": 2, "idle": 0, "ended": 1}),
        "{counts}"
    );
    let text = project.ok(None, &["status"]);
    assert!(
        text.contains("sessions 1  helpers 3 (active 2  idle 0  ended 1)"),
        "{text}"
    );
    // The participant's resume packet lists its session, helpers counted; another's does
    // not.
    let packet = project.ok(Some("impl-1"), &["resume"]);
    assert!(
        packet.contains("## My sessions and runs not ended\n- claude:s1 claude-session running (ok), last event ")
            && packet.contains(": helpers 2 active, 0 idle, 1 ended · tools: Bash\n"),
        "{packet}"
    );
    let theirs = project.ok(Some("planner"), &["resume"]);
    assert!(!theirs.contains("claude:s1"), "{theirs}");
    // A helper quiet past `[runs] helper_idle` stops counting as active, with no event
    // saying so.
    project.configure("helper_idle = \"15m\"", "helper_idle = \"1s\"");
    std::thread::sleep(Duration::from_millis(1100));
    let counts = &project.json(None, &["status"])["run_counts"];
    assert_eq!(
        counts["helpers"],
        json!({"active": 0, "idle": 2, "ended": 1}),
        "{counts}"
    );

    // A Codex session is a row of its own.
    let out = hook(
        &project,
        Some("impl-1"),
        &["codex", "SessionStart"],
        br#"{"session_id":"c9","hook_event_name":"SessionStart","model":"gpt-5-codex"}"#,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert_eq!(the_run(&project, "codex:c9")["source"], "session");

    // The session ends at SessionEnd; a hook after it (a resumed session) revives it.
    claude("SessionEnd", r#"{"session_id":"s1","reason":"exit"}"#);
    let ended = the_run(&project, "claude:s1");
    assert_eq!(
        (&ended["status"], &ended["health"]),
        (&json!("ended"), &Value::Null)
    );
    let packet = project.ok(Some("impl-1"), &["resume"]);
    assert!(!packet.contains("claude:s1"), "an ended session: {packet}");
    claude(
        "UserPromptSubmit",
        r#"{"session_id":"s1","prompt":"go on"}"#,
    );
    assert_eq!(the_run(&project, "claude:s1")["status"], "running");

    // Inside `baton run` the session is the run's row, never a second one.
    let before = runs(&project).len();
    let calls = r#"printf '{"session_id":"s2","hook_event_name":"SessionStart"}' | "$BATON" hook claude SessionStart && printf '{"session_id":"s2"}' | "$BATON" hook claude SessionEnd"#;
    let out = project
        .cmd(Some("impl-1"), &["run", "--", "sh", "-c", calls])
        .env("BATON", baton_exe())
        .output()
        .unwrap();
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert_eq!(runs(&project).len(), before + 1, "one row for the run");
    let run = run_with(&project, "hook claude SessionStart");
    assert_eq!(
        (&run["source"], &run["session"], &run["status"]),
        (&json!("wrapper"), &json!("s2"), &json!("done")),
        "{run}"
    );
    assert!(
        runs(&project).iter().all(|r| r["id"] != "claude:s2"),
        "a second row for the run's session"
    );
}

#[test]
fn a_session_that_falls_silent_is_ended_by_the_reaper_once_with_an_alert_for_held_work() {
    let project = Project::new(&[("planner", "planner"), ("impl-1", "executor")]);
    let id = project.ok(
        Some("planner"),
        &[
            "send", "--to", "impl-1", "--type", "request", "--topic", "t", "--body", "do it",
        ],
    );
    project.ok(Some("impl-1"), &["show", &id]);
    for (event, payload) in [
        ("SessionStart", r#"{"session_id":"s1"}"#),
        ("SubagentStart", r#"{"session_id":"s1","agent_id":"a1"}"#),
    ] {
        let out = hook(
            &project,
            Some("impl-1"),
            &["claude", event],
            payload.as_bytes(),
        );
        assert_eq!(code(out.status), 0, "{}", stderr(&out));
    }
    // Nothing is ended while hooks are recent.
    let reaped = project.json(None, &["reap"]);
    assert_eq!(reaped["ended"], json!([]), "{reaped}");
    project.configure(
        "session_ended_after = \"1h\"",
        "session_ended_after = \"1s\"",
    );
    std::thread::sleep(Duration::from_millis(1100));
    let reaped = project.json(None, &["reap"]);
    assert_eq!(
        reaped["ended"],
        json!(["claude:s1", "claude:s1/a1"]),
        "{reaped}"
    );
    assert_eq!(reaped["held"].as_array().map(Vec::len), Some(1), "{reaped}");
    let session = the_run(&project, "claude:s1");
    assert_eq!(session["status"], "ended");
    assert!(
        session["reason"]
            .as_str()
            .is_some_and(|r| r.contains("runs.session_ended_after")),
        "{session}"
    );
    let alerts = project.json(None, &["alerts"]).to_string();
    assert!(
        alerts.contains("session claude:s1 of impl-1 fell silent") && alerts.contains("holds 1"),
        "{alerts}"
    );
    // Once.
    let again = project.json(None, &["reap"]);
    assert_eq!(again["ended"], json!([]), "{again}");
    // A hook after it makes it running again.
    let out = hook(
        &project,
        Some("impl-1"),
        &["claude", "UserPromptSubmit"],
        br#"{"session_id":"s1"}"#,
    );
    assert_eq!(code(out.status), 0, "{}", stderr(&out));
    assert_eq!(the_run(&project, "claude:s1")["status"], "running");
}

#[test]
fn a_hook_spools_its_event_rather_than_wait_for_a_locked_store_and_the_next_command_folds_it() {
    let project = Project::new(&[]);
    // Commands wait up to 30 s for a locked store; a hook must not.
    std::fs::write(
        project.path().join(".baton/config.toml"),
        "[store]\nbusy_timeout = \"30s\"\n",
    )
    .unwrap();
    let db = project.db();
    let logged = |text: &str| logged_events(&db, text);
    let events_before = logged("");
    let lock = rusqlite::Connection::open(&db).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = Instant::now();
    let out = hook(
        &project,
        None,
        &["claude", "Stop"],
        br#"{"session_id":"s-spooled"}"#,
    );
    let took = started.elapsed();
    lock.execute_batch("ROLLBACK").unwrap();
    assert_eq!(code(out.status), 0);
    assert!(out.stdout.is_empty());
    assert_eq!(stderr(&out), "", "the hook complained");
    // Far below the store's own 30 s wait (the real numbers are in `cargo bench --bench floor`).
    assert!(took < Duration::from_secs(5), "the hook waited {took:?}");
    assert_eq!(
        logged(""),
        events_before,
        "the hook wrote to the locked log"
    );
    // The next command that opens the store folds the spool into the log first.
    project.ok(None, &["runs"]);
    project.ok(None, &["runs"]);
    assert_eq!(logged(""), events_before + 1, "one event was folded in");
    assert_eq!(
        logged("s-spooled"),
        1,
        "the hook's event is in the log once"
    );
    assert!(
        !db.with_file_name("baton.db-spool").exists()
            && !db.with_file_name("baton.db-spool.claimed").exists(),
        "the spool was left behind"
    );
}

#[test]
fn a_hook_records_while_no_one_can_read_the_store_and_its_actor_is_settled_as_it_is_folded() {
    let project = Project::new(&[("impl-1", "executor")]);
    let db = project.db();
    // A connection in exclusive locking mode holds the database from every reader, as a
    // writer does while it checkpoints the log on closing.
    let lock = rusqlite::Connection::open(&db).unwrap();
    lock.execute_batch("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE;")
        .unwrap();
    let started = Instant::now();
    for (who, session) in [("impl-1", "s-held"), ("ghost", "s-ghost")] {
        let payload = format!(r#"{{"session_id":"{session}","tool_name":"Bash"}}"#);
        let out = hook(
            &project,
            Some(who),
            &["claude", "PreToolUse"],
            payload.as_bytes(),
        );
        assert_eq!(code(out.status), 0);
        // Before, the hook read who was calling and dropped its event past 100 ms.
        assert_eq!(stderr(&out), "", "the hook complained as {who}");
    }
    let took = started.elapsed();
    lock.execute_batch("ROLLBACK").unwrap();
    drop(lock);
    assert!(took < Duration::from_secs(5), "the hooks waited {took:?}");
    project.ok(None, &["runs"]);
    let actor = |session: &str| -> String {
        rusqlite::Connection::open(&db)
            .unwrap()
            .query_row(
                "SELECT actor FROM events WHERE instr(data, ?1) > 0",
                [session],
                |r| r.get(0),
            )
            .unwrap()
    };
    assert_eq!(actor("s-held"), "impl-1", "a participant's hook is theirs");
    assert_eq!(
        actor("s-ghost"),
        baton_core::event::LOCAL_OPERATOR,
        "a name no one registered is recorded as the local operator"
    );
}

/// How many events in the log hold `text`, read with a bare connection (opening the store
/// would fold the spool).
fn logged_events(db: &Path, text: &str) -> i64 {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM events WHERE instr(data, ?1) > 0 OR ?1 = ''",
            [text],
            |r| r.get(0),
        )
        .unwrap()
}

#[test]
fn init_for_claude_and_codex_merges_and_never_clobbers() {
    let project = Project::new(&[]);
    let dir = project.path();
    std::fs::create_dir_all(dir.join(".claude")).unwrap();
    std::fs::create_dir_all(dir.join(".codex")).unwrap();
    let user_settings = r#"{"model": "opus", "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint.sh"}]}]}}"#;
    std::fs::write(dir.join(".claude/settings.json"), user_settings).unwrap();
    std::fs::write(dir.join("CLAUDE.md"), "# House rules\nNo force pushes.\n").unwrap();
    std::fs::write(
        dir.join(".codex/config.toml"),
        "# mine\nmodel = \"o4\"\n\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n\n[features]\ncodex_hooks = false\n",
    )
    .unwrap();

    let first = project.json(None, &["init", "--claude", "--codex"]);
    let second = project.json(None, &["init", "--claude", "--codex"]);
    for w in second["agents"].as_array().unwrap() {
        assert_eq!(w["result"], "unchanged", "the second init changed {w}");
    }
    assert_eq!(first["agents"].as_array().unwrap().len(), 6, "{first}");

    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(".claude/settings.json")).unwrap())
            .unwrap();
    assert_eq!(settings["model"], "opus");
    let pre = settings["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre[0]["hooks"][0]["command"], "./lint.sh");
    assert_eq!(
        pre[1]["hooks"][0]["command"],
        "baton hook claude PreToolUse"
    );
    assert_eq!(
        settings["hooks"]["SessionStart"][0]["hooks"][0]["command"],
        "baton hook claude SessionStart --inject"
    );
    let mcp: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(".mcp.json")).unwrap()).unwrap();
    assert_eq!(mcp["mcpServers"]["baton"]["args"][0], "mcp");
    let claude_md = std::fs::read_to_string(dir.join("CLAUDE.md")).unwrap();
    assert!(
        claude_md.starts_with("# House rules\nNo force pushes.\n"),
        "{claude_md}"
    );
    assert_eq!(claude_md.matches("<!-- baton:begin").count(), 1);
    let agents_md = std::fs::read_to_string(dir.join("AGENTS.md")).unwrap();
    assert_eq!(agents_md.matches("<!-- baton:end -->").count(), 1);
    let codex = std::fs::read_to_string(dir.join(".codex/config.toml")).unwrap();
    assert!(codex.starts_with("# mine\nmodel = \"o4\"\n"), "{codex}");
    assert!(codex.contains("[mcp_servers.docs]"), "{codex}");
    assert!(codex.contains("[mcp_servers.baton]"), "{codex}");
    assert!(
        codex.contains("codex_hooks = false"),
        "a user's setting was changed: {codex}"
    );
    let hooks: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(".codex/hooks.json")).unwrap())
            .unwrap();
    assert_eq!(
        hooks["hooks"]["SessionStart"][0]["hooks"][0]["command"],
        "baton hook codex SessionStart --inject"
    );

    // A file that is not what it should be is refused, not overwritten.
    std::fs::write(dir.join(".mcp.json"), "[not an object]").unwrap();
    let out = project.run(None, &["init", "--claude"]);
    assert_eq!(code(out.status), 3, "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(dir.join(".mcp.json")).unwrap(),
        "[not an object]"
    );
}
