//! `cargo bench -p baton --bench layout`: writes `crates/baton/layout.txt`, the functions
//! the everyday commands run, which the release build places side by side in the
//! executable (`build.rs` hands the file to the linker as `--symbol-ordering-file`).
//!
//! A command runs for a few milliseconds, and much of that is the kernel mapping in the
//! pages of code it touches. Left to the linker, the code one command runs is spread over
//! the whole 24 MB of the executable, a page here and a page there; placed together it
//! takes a fraction of the pages. See DECISIONS.md, "Code layout".
//!
//! It makes a small project, runs each everyday command once under `valgrind
//! --tool=callgrind`, and lists every function of the executable that ran, grouped by
//! the first command that ran it. Symbol names carry a hash that changes when the toolchain
//! or a dependency changes: a name the linker does not find is skipped, so an old list
//! costs speed, never correctness. `cargo bench -p baton --bench floor` prints how much of
//! the list the build found; run this again when that falls. Run without `--bench` (as
//! `cargo test --benches` does) it runs the commands once each and reads one profile,
//! writing nothing.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod support;
use support::{HOOK_PAYLOAD, baton};

const ME: &str = "impl-1";

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_baton"));
    let temp = tempfile::tempdir().expect("temp dir");
    let project = temp.path().join("project");
    let work = everyday(&exe, &project);
    if !full {
        for step in &work {
            step.run(&exe, &project, None);
        }
        smoke(&exe, &project, temp.path());
        return;
    }
    let exe = exe.canonicalize().expect("the executable's path");
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    for (i, step) in work.iter().enumerate() {
        let out = temp.path().join(format!("callgrind.{i}"));
        step.run(&exe, &project, Some(&out));
        let profile = std::fs::read_to_string(&out).expect("read the profile");
        functions(&profile, &exe, &mut order, &mut seen);
    }
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("layout.txt");
    let mut text = String::from(
        "# The functions the everyday commands run, grouped by the first command that ran\n\
         # them: the release build places them side by side (build.rs). Written by\n\
         # `cargo bench -p baton --bench layout`; do not edit.\n",
    );
    for name in &order {
        text.push_str(name);
        text.push('\n');
    }
    std::fs::write(&file, text).expect("write layout.txt");
    println!(
        "{} functions of {} commands written to {}",
        order.len(),
        work.len(),
        file.display()
    );
}

/// One command line to profile: its arguments, what it reads on stdin, and who it acts as
/// through the environment (a hook names no `--as`).
struct Step {
    argv: Vec<String>,
    stdin: Option<&'static [u8]>,
    env_as: Option<&'static str>,
}

impl Step {
    fn of(argv: &[&str]) -> Self {
        Self {
            argv: argv.iter().map(|s| (*s).to_owned()).collect(),
            stdin: None,
            env_as: None,
        }
    }

    /// Runs the step in `project`, under callgrind writing to `profile` when given.
    fn run(&self, exe: &Path, project: &Path, profile: Option<&Path>) {
        let mut cmd = match profile {
            Some(out) => {
                let mut cmd = Command::new("valgrind");
                cmd.args([
                    "--tool=callgrind",
                    "--demangle=no",
                    "--dump-instr=no",
                    "--compress-strings=no",
                    "--compress-pos=no",
                ])
                .arg(format!("--callgrind-out-file={}", out.display()))
                .arg(exe);
                cmd
            }
            None => Command::new(exe),
        };
        cmd.args(&self.argv)
            .current_dir(project)
            .env_remove("BATON_PROJECT")
            .env_remove("BATON_AS")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(who) = self.env_as {
            cmd.env("BATON_AS", who);
        }
        let mut child = cmd.spawn().expect("run baton (valgrind when profiling)");
        let mut stdin = child.stdin.take().expect("stdin");
        if let Some(bytes) = self.stdin {
            stdin.write_all(bytes).expect("write stdin");
        }
        drop(stdin);
        let out = child.wait_with_output().expect("wait for baton");
        assert!(
            out.status.success(),
            "baton {:?} failed: {}",
            self.argv,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Makes a project at `project` with work in it, and returns the command lines to
/// profile: what an agent runs in a session, most frequent first.
fn everyday(exe: &Path, project: &Path) -> Vec<Step> {
    std::fs::create_dir_all(project).expect("project dir");
    baton(exe, project, &["init"]);
    for (name, role) in [
        ("planner", "planner"),
        (ME, "planner"),
        ("impl-2", "executor"),
    ] {
        baton(exe, project, &["agent", "add", name, "--role", role]);
    }
    let send = |from: &str, kind: &str, body: &str| -> String {
        let out = baton(
            exe,
            project,
            &[
                "--as", from, "send", "--to", ME, "--type", kind, "--topic", "export", "--body",
                body, "--json",
            ],
        );
        let sent: serde_json::Value = serde_json::from_slice(&out.stdout).expect("send --json");
        sent["id"].as_str().expect("a message id").to_owned()
    };
    let request = send(
        "planner",
        "request",
        "Keep the filters when exporting rows.",
    );
    let other = send("planner", "request", "Export the audit log as CSV.");
    let info = send("planner", "info", "The export runs nightly at 02:00.");
    let me = |rest: &[&str]| {
        let mut argv = vec!["--as", ME];
        argv.extend_from_slice(rest);
        Step::of(&argv)
    };
    vec![
        me(&["inbox"]),
        me(&["show", &request]),
        me(&["show", &request]),
        me(&["complete", &request]),
        me(&["show", &info]),
        me(&["ack", &info]),
        me(&[
            "send",
            "--to",
            "planner",
            "--type",
            "info",
            "--topic",
            "export",
            "--body",
            "The filters are kept.",
        ]),
        me(&["outbox"]),
        me(&["thread", &request]),
        me(&["search"]),
        me(&["search", "filters"]),
        me(&["resume"]),
        Step {
            argv: ["hook", "claude", "PreToolUse"].map(str::to_owned).to_vec(),
            stdin: Some(HOOK_PAYLOAD),
            env_as: Some(ME),
        },
        Step::of(&["runs"]),
        me(&["show", &other]),
        me(&[
            "hand-back",
            &other,
            "--reason",
            "The audit log has no CSV schema yet.",
        ]),
        me(&[
            "note",
            "--subject",
            &request,
            "Filters are read from the query string.",
        ]),
        me(&[
            "decide",
            "Export keeps every filter",
            "--why",
            "users asked",
        ]),
        me(&["state", "show"]),
        Step::of(&["queue"]),
        Step::of(&["--version"]),
    ]
}

/// Adds to `order` each function of `exe` that a callgrind profile (written with
/// `--compress-strings=no`) names, unless `seen` has it. Callgrind marks a function's
/// recursion depth with `'N`; functions without a symbol show as addresses.
fn functions(profile: &str, exe: &Path, order: &mut Vec<String>, seen: &mut HashSet<String>) {
    let mut ours = false;
    for line in profile.lines() {
        if let Some(object) = line.strip_prefix("ob=") {
            ours = Path::new(object) == exe;
        } else if let Some(name) = line.strip_prefix("fn=")
            && ours
        {
            let name = match name.rsplit_once('\'') {
                Some((base, depth)) if depth.bytes().all(|b| b.is_ascii_digit()) => base,
                _ => name,
            };
            if name.starts_with("0x") || name.starts_with('(') {
                continue;
            }
            if seen.insert(name.to_owned()) {
                order.push(name.to_owned());
            }
        }
    }
}

/// Without `--bench`: reads the profile of one short command, so the reading is checked
/// where valgrind is installed (it is on every machine CI runs on).
fn smoke(exe: &Path, project: &Path, dir: &Path) {
    let have_valgrind = Command::new("valgrind")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have_valgrind {
        println!("layout smoke: valgrind is not installed; the commands ran, no profile read");
        return;
    }
    let exe = exe.canonicalize().expect("the executable's path");
    let out = dir.join("callgrind.smoke");
    Step::of(&["--version"]).run(&exe, project, Some(&out));
    let profile = std::fs::read_to_string(&out).expect("read the profile");
    let (mut order, mut seen) = (Vec::new(), HashSet::new());
    functions(&profile, &exe, &mut order, &mut seen);
    assert!(
        order.iter().any(|f| f == "main") && order.len() > 100,
        "the profile of `baton --version` named {} functions of the executable",
        order.len()
    );
    println!(
        "layout smoke: `baton --version` ran {} functions",
        order.len()
    );
}
