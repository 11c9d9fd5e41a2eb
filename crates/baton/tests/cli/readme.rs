//! README.md runs as written: every fenced `sh` block, in order, as one `bash -eu` script,
//! in a throwaway directory holding a fresh git repository `my-repo` (a Cargo package, so
//! the tour's `cargo test` and the test command `handoff new` finds make sense), with
//! `baton` on PATH and stubs for the programs the tour names but a test cannot run for
//! real (`claude`, `cargo`). A block the README marks `<!-- not run: REASON -->` (on the
//! line just before it) is skipped, and must say why. After each step whose comment claims
//! something a test can see, the script checks it ([`CLAIMS`]). A README change that breaks
//! the tour, or a step that no longer does what its comment says, fails here.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::baton_exe;

const MARK: &str = "<!-- not run: ";

/// What the tour's comments claim, each checked right after the README line that contains
/// its first part (every such line: `baton init --claude` runs twice). The check is bash
/// over the helpers of [`PRELUDE`] and the tour's own variables; it runs in `my-repo`, or
/// wherever the tour is at that point. A claim no line of a run block contains fails the
/// test: editing a step means editing what is checked after it.
const CLAIMS: &[(&str, &str)] = &[
    (
        r#"BATON_AS=impl-2 baton reserve src/export/csv.rs"#,
        r#"exits 6 baton --as impl-2 reserve src/export/csv.rs && baton --json reservations | json '[(r["holder"], r["path"]) for r in d["items"]] == [("impl-1", "src/export/**")]'"#,
    ),
    (
        r#"BATON_AS=impl-3 git commit"#,
        r#"test "$(git log -1 --format=%s)" != 'Speed up the export' && git diff --cached --name-only | grep -qx src/export/csv.rs"#,
    ),
    (
        r#"BATON_AS=impl-1 baton release 'src/export/**'"#,
        r#"baton --json reservations | json 'sorted(r["holder"] for r in d["items"]) == ["impl-2", "impl-3"]' && exits 4 baton --as impl-1 release"#,
    ),
    (
        r#"BATON_AS=impl-2 baton pool"#,
        r#"baton --as impl-2 --json pool | json '[(i["pool"], i["excerpt"]) for i in d["items"]] == [("role:executor", "Quote the header row")]'"#,
    ),
    (
        r#"BATON_AS=impl-2 baton next"#,
        r#"baton --as impl-2 --json inbox | json 'any(i["excerpt"] == "Quote the header row" for i in d["items"])' && baton --as impl-3 --json pool | json 'd["items"] == []'"#,
    ),
    (
        r#"BATON_AS=impl-3 baton next"#,
        r#"exits 4 baton --as impl-3 next"#,
    ),
    (
        r#"cd my-repo && baton init"#,
        r#"test -f .baton/baton.db && test -f .baton/config.toml"#,
    ),
    (
        r#"baton agent policy impl-1 --topics 'csv-*'"#,
        r#"exits 5 baton --as planner send --to impl-1 --type request --topic billing --body 'not a csv topic'"#,
    ),
    (
        r#"baton security-events"#,
        r#"baton --json security-events | json 'any(i["participant"] == "planner" and i["topic"] == "billing" for i in d["items"])'"#,
    ),
    (
        r#"ID=$(baton send --to impl-1"#,
        r#"export ID && baton --json thread "$ID" | json 'd["items"][0]["id"] == e["ID"] and d["items"][0]["type"] == "request"'"#,
    ),
    (
        r#"BATON_AS=impl-1 baton inbox"#,
        r#"baton --as impl-1 --json inbox | json '[(i["id"], i["status"]) for i in d["items"]] == [(e["ID"], "pending")] and "payload" not in d["items"][0]'"#,
    ),
    (
        r#"BATON_AS=impl-1 baton show "$ID""#,
        r#"baton --as impl-1 --json inbox | json 'd["items"][0]["status"] == "delivered"'"#,
    ),
    (
        r#"BATON_AS=impl-1 baton send --reply-to"#,
        r#"baton --json thread "$ID" | json 'any(i["reply_to"] == e["ID"] and i["from"] == "impl-1" and i["excerpt"] == "Date range too?" for i in d["items"])'"#,
    ),
    (
        r#"BATON_AS=impl-1 baton complete"#,
        r#"baton --json inbox | json 'any(i["reply_to"] == e["ID"] and i["type"] == "info" and i["excerpt"] == "Fixed in 4f2a91c" for i in d["items"])'"#,
    ),
    (
        r#"baton outbox"#,
        r#"baton --json outbox | json '[(i["id"], i["status"], i["replies"]) for i in d["items"]] == [(e["ID"], {"impl-1": "completed"}, 2)]'"#,
    ),
    (
        r#"baton thread "$ID""#,
        r#"baton --json thread "$ID" | json '[i["depth"] for i in d["items"]] == [0, 1, 1]'"#,
    ),
    (
        r#"baton complete "$ID" && baton archive "$ID""#,
        r#"baton --json outbox | json 'd["items"] == []' && baton --json outbox --all | json 'd["items"][0]["request_status"] == "archived"'"#,
    ),
    (
        r#"baton focus set"#,
        r#"baton --json state show | json 'd["focus"] == "Ship the CSV export fix"'"#,
    ),
    (
        r#"baton stream set export"#,
        r#"baton --json state show | json '[(s["name"], s["status"]) for s in d["streams"]] == [("export", "fixing filters")]'"#,
    ),
    (
        r#"baton decide"#,
        r#"baton --json state show | json '[(x["id"], x["text"]) for x in d["decisions"]] == [("D-1", "Filter in the query")]'"#,
    ),
    (
        r#"baton constrain"#,
        r#"baton --json state show | json '[(x["id"], x["tried"], x["result"]) for x in d["constraints"]] == [("C-1", "regenerating", "permission denied")]'"#,
    ),
    (
        r#"baton note"#,
        r#"baton --json state show | json '[n["freshness"] for n in d["notes"]] == ["current"]' && echo '// edited' >> src/parse.rs && baton --json state show | json '[n["freshness"] for n in d["notes"]] == ["stale"]' && git checkout -q src/parse.rs"#,
    ),
    (
        r#"BATON_AS=impl-1 baton resume"#,
        r#"test "$(baton --as impl-1 resume | wc -c)" -le 6000 && baton --as impl-1 resume | grep -q 'Fixtures are read-only'"#,
    ),
    (
        r#"baton state render && baton check STATE.md"#,
        r#"head -c 300 STATE.md > ../truncated.md && exits 3 baton check ../truncated.md"#,
    ),
    (
        r#"baton receipt write"#,
        r#"baton --json receipt show tests | json 'd["receipt"]["artifact"] == "test.log" and len(d["receipt"]["hash"]) == 64'"#,
    ),
    (
        r#"baton receipt wait"#,
        r#"exits 4 baton receipt wait --step lint --timeout 1s && exits 4 baton receipt wait --step lint --timeout 1s && baton --json alerts | json '[a["key"] for a in d["items"]] == ["receipt-missing:lint"]'"#,
    ),
    (
        r#"baton session end"#,
        r#"baton --json state show | json 'd["streams"] == [] and d["decisions"][-1]["why"] == "fixes quoting"'"#,
    ),
    (
        r#"baton init --claude"#,
        r#"test -f .claude/settings.json && test -f .mcp.json && grep -q 'baton hook claude' .claude/settings.json && test "$(grep -c 'baton:begin' CLAUDE.md)" = 1 && test "$(grep -c 'baton:begin' AGENTS.md)" = 1"#,
    ),
    (
        r#"baton runs"#,
        r#"baton --json runs | json '[(r["status"], r["exit_code"], r["tokens"]["total"], r["participant"]) for r in d["items"]] == [("done", 0, 17, "impl-1")]'"#,
    ),
    (
        r#"baton evidence run -- cargo test"#,
        r#"baton --json receipt show "$(ls .baton/evidence | sed -n 's/\.json$//p' | sed 's/^/evidence-/' | tail -n 1)" | json 'd["receipt"]["hash"] is not None'"#,
    ),
    (
        r#"--criterion 'Filtered rows only'"#,
        r#"json 'd["from"] == "planner" and d["to"] == "impl-1" and d["x-baton"]["execution"]["test_command"] == "cargo test"' < order.json && grep -q '<fill in:' order.json"#,
    ),
    (
        r#"baton init --codex"#,
        r#"grep -q 'baton hook codex' .codex/hooks.json && grep -q 'env_vars = \["BATON_AS", "BATON_PROJECT", "BATON_RUN"\]' .codex/config.toml && test "$(grep -c 'baton:begin' AGENTS.md)" = 1"#,
    ),
    (
        r#"baton --as impl-1 need"#,
        r#"baton --json queue | json 'any(i["text"].endswith("which fixture is canonical?") for l in d["lanes"] if l["lane"] == "needs" for i in l["items"])'"#,
    ),
    (
        r#"baton record impl-1"#,
        r#"baton --json record impl-1 >/dev/null"#,
    ),
];

/// Helpers the checks use: `exits N CMD…` (CMD exits N), `json EXPR` (a Python expression
/// over the JSON document on stdin, `d`, and the environment, `e`, holds) and `fail LINE`.
const PRELUDE: &str = r#"set -eu
fail() { echo "README claim not kept after: $1" >&2; exit 1; }
exits() { local want=$1 got; shift; "$@" >/dev/null 2>&1 && got=0 || got=$?; [ "$got" = "$want" ] || { echo "exit $got, not $want: $*" >&2; return 1; }; }
json() { python3 -c 'import json, os, sys; d = json.load(sys.stdin); e = os.environ; sys.exit(0 if eval(sys.argv[1]) else 1)' "$1"; }
"#;

/// The script: the prelude, then each run block's lines, each claim's check after the line
/// that makes it (after the last line of a command continued with `\`).
fn script(run: &[String]) -> String {
    let mut out = String::from(PRELUDE);
    let mut used = vec![0; CLAIMS.len()];
    let mut pending: Vec<usize> = Vec::new();
    for line in run.iter().flat_map(|block| block.lines()) {
        out.push_str(line);
        out.push('\n');
        for (i, (made_by, _)) in CLAIMS.iter().enumerate() {
            if line.contains(made_by) {
                used[i] += 1;
                pending.push(i);
            }
        }
        if !line.trim_end().ends_with('\\') {
            for i in pending.drain(..) {
                let (made_by, check) = CLAIMS[i];
                let quoted = made_by.replace('\'', r"'\''");
                out.push_str(&format!("{{ {check}; }} || fail '{quoted}'\n"));
            }
        }
    }
    for ((made_by, _), n) in CLAIMS.iter().zip(used) {
        assert!(
            n > 0,
            "no line of the README's tour contains {made_by:?}: update CLAIMS"
        );
    }
    out
}

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
    std::fs::write(
        repo.join("Cargo.toml"),
        "[package]\nname = \"my-repo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
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
    let script = script(&run);
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
