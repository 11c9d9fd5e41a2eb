//! `cargo bench -p baton --bench hook`: the wall time of `baton hook claude PreToolUse` as
//! a whole process (start, read the hook JSON, open the store, spool the event, exit),
//! 1,000 calls, on an idle store and while another process keeps writing to it. Prints
//! median, p99 and max, and how many calls complained on stderr (a hook that gave up: it
//! waits at most 100 ms to open the store and 150 ms in all; its event goes to the spool
//! beside the store, so it never waits for the write lock). Asserts nothing about time.
//! `cargo bench --bench floor` times hooks beside a floor and counts every event in the
//! log. Run without `--bench` (as `cargo test --benches` does) it only checks that it
//! works, with a few calls.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

mod support;
use support::{baton, hook};

/// A writer that never stops: one `baton send` after another, each its own process and
/// its own short write transaction, as agents sending messages would be.
const WRITER: &str = r#"i=0
while :; do
  "$1" --as planner send --to impl-1 --type info --topic bench --body "write $i" > /dev/null || exit 1
  i=$((i + 1))
done"#;

struct Timed {
    label: &'static str,
    times: Vec<Duration>,
    dropped: usize,
}

fn time_hooks(exe: &Path, project: &Path, calls: usize, label: &'static str) -> Timed {
    let mut times = Vec::with_capacity(calls);
    let mut dropped = 0;
    for _ in 0..calls {
        let (took, said) = hook(exe, project, "impl-1");
        times.push(took);
        if !said.is_empty() {
            dropped += 1;
        }
    }
    times.sort();
    Timed {
        label,
        times,
        dropped,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let calls = if full { 1000 } else { 10 };
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_baton"));
    let dir = tempfile::tempdir().expect("temp dir");
    let project = dir.path();
    baton(&exe, project, &["init"]);
    baton(
        &exe,
        project,
        &["agent", "add", "planner", "--role", "planner"],
    );
    baton(
        &exe,
        project,
        &["agent", "add", "impl-1", "--role", "executor"],
    );

    let idle = time_hooks(&exe, project, calls, "idle store");

    let mut writer = Command::new("sh")
        .args(["-c", WRITER, "writer"])
        .arg(&exe)
        .current_dir(project)
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_AS")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the writer");
    let generation_before = generation(&exe, project);
    let busy = time_hooks(&exe, project, calls, "another process writing");
    let writes = generation(&exe, project) - generation_before;
    let _ = writer.kill();
    let _ = writer.wait();

    println!("baton hook claude PreToolUse, {calls} calls each, whole process (ms):");
    println!(
        "{:<28} {:>8} {:>8} {:>8} {:>8}",
        "", "median", "p99", "max", "dropped"
    );
    for t in [&idle, &busy] {
        let p99 = t.times[(t.times.len() * 99 / 100).min(t.times.len() - 1)];
        println!(
            "{:<28} {:>8} {:>8} {:>8} {:>8}",
            t.label,
            ms(t.times[t.times.len() / 2]),
            ms(p99),
            ms(*t.times.last().expect("times")),
            t.dropped
        );
    }
    println!("events written meanwhile (hooks and the writer's sends): {writes}");
}

/// The store's generation (its newest event's seq), as `baton resume --json` reports it.
fn generation(exe: &Path, project: &Path) -> i64 {
    let out = baton(
        exe,
        project,
        &["--json", "--as", "impl-1", "resume", "--max-bytes", "200"],
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("resume JSON");
    doc["generation"].as_i64().expect("a generation")
}
