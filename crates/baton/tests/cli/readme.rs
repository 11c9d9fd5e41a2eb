//! README.md runs as written: every fenced `sh` block, in order, as one `bash -eu` script,
//! in a throwaway directory holding a fresh git repository `my-repo`, with `baton` on PATH
//! and stubs for the programs the tour names but a test cannot run for real (`claude`,
//! `cargo`). A block the README marks `<!-- not run: REASON -->` (on the line just before
//! it) is skipped, and must say why. A README change that breaks the tour fails here.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::baton_exe;

const MARK: &str = "<!-- not run: ";

/// The `sh` blocks to run, and the reasons given for those skipped.
fn blocks(readme: &str) -> (Vec<String>, Vec<String>) {
    let (mut run, mut skipped) = (Vec::new(), Vec::new());
    let mut previous = "";
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "```sh" {
            let block: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
            match previous.trim().strip_prefix(MARK) {
                Some(reason) => {
                    let reason = reason.trim_end_matches("-->").trim();
                    assert!(!reason.is_empty(), "a block marked not run must say why");
                    skipped.push(reason.to_owned());
                }
                None => run.push(block.join("\n")),
            }
        }
        if !line.trim().is_empty() {
            previous = line;
        }
    }
    (run, skipped)
}

fn stub(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(["-c", "user.name=tour", "-c", "user.email=tour@example.org"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "git {args:?}");
}

#[test]
fn the_readme_tour_runs_as_written() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .expect("README.md");
    let (run, skipped) = blocks(&readme);
    assert!(run.len() >= 3, "the tour has runnable blocks: {run:?}");
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("my-repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    std::fs::write(repo.join("src/parse.rs"), "pub fn parse() {}\n").unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "start"]);
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(baton_exe(), bin.join("baton")).unwrap();
    // An agent that reports one result, as `claude -p … --output-format stream-json` does.
    stub(
        &bin,
        "claude",
        r#"echo '{"type":"result","subtype":"success","is_error":false,"result":"done","usage":{"input_tokens":12,"output_tokens":5}}'"#,
    );
    stub(&bin, "cargo", "echo 'test result: ok. 1 passed; 0 failed'");
    let script = format!("set -eu\n{}\n", run.join("\n"));
    std::fs::write(dir.path().join("tour.sh"), &script).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Its own process group, so a hung step and its children die with it at the deadline.
    let mut child = Command::new("bash")
        .process_group(0)
        .arg("-x")
        .arg("tour.sh")
        .current_dir(dir.path())
        .env("PATH", path)
        .env("HOME", dir.path())
        .env_remove("BATON_AS")
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_DB")
        .env_remove("BATON_RUN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(
        status.success(),
        "the README's tour failed ({status}); skipped blocks: {skipped:?}\n--- stdout\n{out}\n--- trace (bash -x) and stderr\n{err}"
    );
}
