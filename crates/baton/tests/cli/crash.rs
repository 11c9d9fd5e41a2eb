//! Acknowledged means durable, tested with real processes: a shell
//! loop of `baton send` is killed with SIGKILL, process group and all, at a random instant;
//! every id it printed must be in the store, the store must pass SQLite's integrity check,
//! its projections must equal a replay of its log, and nothing may be stored twice.

use std::collections::HashSet;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use baton_store::SqliteStore;

use crate::common::{Project, XorShift, baton_exe};

const TRIALS: u64 = 24;
/// How many messages the loop would send if nobody killed it: far more than it manages
/// in the longest delay, so every kill lands mid-run.
const MESSAGES: u32 = 1000;
/// Kill delays are spread over this range, one stratum per trial, so both kills during the
/// first sends and kills deep into the run are covered every time.
const MIN_DELAY_MS: u64 = 50;
const MAX_DELAY_MS: u64 = 1500;

/// Sends `msg-1`, `msg-2`, … in order, one `baton` process each; stdout holds only the ids
/// `baton send` printed after committing. A failed send stops the loop with its status.
const SEND_LOOP: &str = r#"i=1
while [ "$i" -le "$2" ]; do
  "$1" --as sender send --to receiver --type info --topic crash --body "msg-$i" || exit $?
  i=$((i + 1))
done"#;

/// What one trial saw.
struct Trial {
    /// The ids the loop printed on complete lines, in order: the acknowledged sends.
    acknowledged: Vec<String>,
    /// False when the loop finished before the kill landed.
    killed_mid_run: bool,
}

#[test]
fn killed_senders_lose_no_acknowledged_message() {
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
        | 1;
    eprintln!("crash: seed {seed}");
    let mut rng = XorShift(seed);
    let started = Instant::now();
    let stratum = (MAX_DELAY_MS - MIN_DELAY_MS) / TRIALS;
    let mut killed_mid_run = 0;
    let mut acknowledged_some = 0;
    for trial in 0..TRIALS {
        let delay = MIN_DELAY_MS + trial * stratum + rng.next() % stratum;
        let outcome = run_trial(trial, Duration::from_millis(delay));
        killed_mid_run += u64::from(outcome.killed_mid_run);
        acknowledged_some += u64::from(!outcome.acknowledged.is_empty());
    }
    eprintln!(
        "crash: {TRIALS} trials in {:.1} s; {killed_mid_run} killed mid-run, \
         {acknowledged_some} with at least one acknowledged send",
        started.elapsed().as_secs_f64()
    );
    // Without these the test would pass if the kill never landed or nothing was ever sent.
    assert!(
        killed_mid_run >= TRIALS / 2,
        "only {killed_mid_run} of {TRIALS} loops were killed before finishing: the kill is not landing"
    );
    assert!(
        acknowledged_some >= TRIALS / 2,
        "only {acknowledged_some} of {TRIALS} loops acknowledged any send before the kill"
    );
}

fn run_trial(trial: u64, delay: Duration) -> Trial {
    let project = Project::new(&[("sender", "executor"), ("receiver", "executor")]);
    let mut child = Command::new("sh")
        .args(["-c", SEND_LOOP, "send-loop"])
        .arg(baton_exe())
        .arg(MESSAGES.to_string())
        .current_dir(project.path())
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_AS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so one kill takes the shell and the `baton` it is running.
        .process_group(0)
        .spawn()
        .expect("spawn the send loop");
    let group = child.id();
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out_reader = thread::spawn(move || {
        let mut bytes = Vec::new();
        stdout
            .read_to_end(&mut bytes)
            .expect("read the loop's stdout");
        bytes
    });
    let err_reader = thread::spawn(move || {
        let mut bytes = Vec::new();
        stderr
            .read_to_end(&mut bytes)
            .expect("read the loop's stderr");
        bytes
    });

    // The sleep is the experiment (when the kill lands), not synchronisation.
    thread::sleep(delay);
    kill_group(group);
    let status = child.wait().expect("reap the send loop");
    let out = out_reader.join().expect("stdout reader");
    let err = err_reader.join().expect("stderr reader");
    let err = String::from_utf8_lossy(&err);

    let killed_mid_run = match (status.signal(), status.code()) {
        (Some(9), _) => true,
        (_, Some(0)) => false,
        _ => panic!("trial {trial}: the send loop failed on its own ({status}): {err}"),
    };
    // Only complete lines count: a line cut by the kill was never acknowledged.
    let out = String::from_utf8(out).expect("utf-8 ids");
    let acknowledged: Vec<String> = match out.rfind('\n') {
        Some(end) => out[..end].lines().map(str::to_owned).collect(),
        None => Vec::new(),
    };
    for id in &acknowledged {
        assert!(
            id.len() == 26 && id.chars().all(|c| c.is_ascii_alphanumeric()),
            "trial {trial}: `baton send` printed {id:?}, not a ULID"
        );
    }

    let stored = stored_messages(&project);
    let stored_ids: HashSet<&str> = stored.iter().map(|(id, _)| id.as_str()).collect();
    let bodies: HashSet<&str> = stored.iter().map(|(_, body)| body.as_str()).collect();
    assert_eq!(
        stored_ids.len(),
        stored.len(),
        "trial {trial}: an id is stored twice"
    );
    assert_eq!(
        bodies.len(),
        stored.len(),
        "trial {trial}: a body is stored twice"
    );
    for (n, id) in acknowledged.iter().enumerate() {
        let body = format!("msg-{}", n + 1);
        assert!(
            stored.iter().any(|(s, b)| s == id && *b == body),
            "trial {trial}: acknowledged send {id} ({body}) is not in the store"
        );
    }
    // The loop is sequential, so the store holds exactly the first k messages: the
    // acknowledged ones and at most one more, committed before its id could be printed.
    let expected: HashSet<String> = (1..=stored.len()).map(|n| format!("msg-{n}")).collect();
    assert_eq!(
        bodies,
        expected.iter().map(String::as_str).collect(),
        "trial {trial}: the store holds a gap or a stranger"
    );
    assert!(
        stored.len() - acknowledged.len() <= 1,
        "trial {trial}: {} stored but only {} acknowledged; one send can be in flight, not more",
        stored.len(),
        acknowledged.len()
    );

    check_store_is_sound(&project, trial);
    // And it still takes writes.
    project.ok(
        Some("sender"),
        &[
            "send", "--to", "receiver", "--type", "info", "--topic", "crash", "--body", "after",
        ],
    );

    eprintln!(
        "crash: trial {trial:2}: killed after {:4} ms, {} acknowledged, {} stored, {}",
        delay.as_millis(),
        acknowledged.len(),
        stored.len(),
        if killed_mid_run {
            "killed mid-run"
        } else {
            "loop had finished"
        }
    );
    Trial {
        acknowledged,
        killed_mid_run,
    }
}

/// SIGKILL to every process in the group: the shell and whichever `baton` it is running.
fn kill_group(group: u32) {
    let status = Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .status()
        .expect("run kill(1)");
    assert!(status.success(), "kill -KILL -{group} failed: {status}");
}

/// Every message on the `crash` topic as `(id, body)`, paging through `baton search`.
fn stored_messages(project: &Project) -> Vec<(String, String)> {
    let mut stored = Vec::new();
    let mut cursor = String::new();
    loop {
        let mut args = vec!["search", "--topic", "crash", "--limit", "100"];
        if !cursor.is_empty() {
            args.extend(["--cursor", &cursor]);
        }
        let page = project.json(Some("receiver"), &args);
        for item in page["items"].as_array().expect("items") {
            // The bodies are short, so the excerpt is the whole body.
            stored.push((
                item["id"].as_str().expect("id").to_owned(),
                item["excerpt"].as_str().expect("excerpt").to_owned(),
            ));
        }
        cursor = page["next"].as_str().unwrap_or_default().to_owned();
        if cursor.is_empty() {
            return stored;
        }
    }
}

/// The file passes `PRAGMA integrity_check`, and replaying the log rebuilds exactly the
/// projections the killed writers left: no event without its projection, nor the reverse.
fn check_store_is_sound(project: &Project, trial: u64) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let store = SqliteStore::open(&project.db(), Duration::from_secs(5))
            .await
            .expect("open the store after the crash");
        let check = store.integrity_check().await.expect("integrity check");
        assert_eq!(check, "ok", "trial {trial}: integrity check");
        let live = store.projection_dump().await.expect("dump projections");
        store
            .rebuild_projections()
            .await
            .expect("rebuild projections");
        let replayed = store.projection_dump().await.expect("dump projections");
        assert_eq!(
            live, replayed,
            "trial {trial}: projections differ from a replay of the log"
        );
    });
}
