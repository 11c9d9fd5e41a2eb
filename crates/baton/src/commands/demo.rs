//! `baton demo`: the whole round on a throwaway project — a planner offers a Work Order, an
//! executor launched through `baton run` does it (evidence, a receipt, a staged tool call
//! through `baton gateway`) and reports, a second executor's reservation in the first's
//! paths is refused until the order ends, a reviewer process approves, the owner approves
//! and the held effect runs once, and two agents settle a disagreement by negotiation.
//! Every step is this same binary run as a separate process, so what it prints is what an
//! agent would see. The cast the demo needs and no one else does (the executor, the
//! reviewer and the upstream MCP server) are the hidden `baton demo-part` subcommands.
//!
//! This module only drives processes and prints: every rule it shows is Baton's own,
//! reached through the command line like any agent reaches it.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use baton_app::doc::{self, DemoStep};
use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use crate::cli::GlobalArgs;
use crate::error::{CommandError, CommandResult};
use crate::output::{Output, visible};
use crate::project::DIR;

/// Run a whole planner → executor → reviewer → owner round on a throwaway project,
/// printing each step as it happens.
///
/// A planner offers a Work Order with Baton's contract (`handoff new`, one tool staged);
/// an executor started through `baton run` accepts it, records evidence with `baton
/// evidence run`, writes a receipt, calls the staged tool through `baton gateway` (held,
/// not run) and reports with the held effect; a second executor's `baton reserve` of a path
/// in the order's scope is refused (exit 6) while the first holds it, and taken once the
/// order ends; a reviewer process reads the review packet
/// and approves (`baton review`); the owner approves and the effect runs once; two agents
/// settle a disagreement with `baton negotiate`; the planner's resume packet ends it.
/// Each step is a real `baton` process; the project needs git on PATH.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton demo\n  baton demo --keep /tmp/baton-demo\n  \
                        baton --json demo"
)]
pub struct DemoArgs {
    /// Keep the project in DIR (created if missing; must not already hold a project).
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
}

/// The demo's cast, each run by `baton demo` as a process of its own.
#[derive(Subcommand, Debug)]
pub enum DemoPart {
    /// An MCP server on stdio with `read` and `publish`; `publish` appends a line to FILE.
    Upstream {
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
    },
    /// The executor agent: takes ORDER on, does it, and reports (under `baton run`).
    Executor {
        #[arg(long, value_name = "ID")]
        order: String,
        /// The upstream's file, for the gateway's upstream command line.
        #[arg(long, value_name = "FILE")]
        published: PathBuf,
    },
    /// The reviewer: reads the review packet on stdin and prints its verdict.
    Reviewer,
}

/// The participants: the planner offers the order and, as the order's owner, approves it.
const PLANNER: &str = "planner";
const EXECUTOR: &str = "executor";
/// A second executor, working beside the first in the same repository.
const EXECUTOR_2: &str = "executor-2";
/// What the second executor wants to edit: under the order's scope (`notes/`).
const NEXT_NOTES: &str = "notes/1.5.md";
const REVIEWER: &str = "reviewer";
/// The upstream server's name in the order's tool patterns.
const SERVER: &str = "notes";
/// The file the upstream's `publish` appends to, in the project.
const PUBLISHED: &str = "published.txt";
/// The file the executor writes and the test command checks.
const NOTES: &str = "notes/1.4.md";
const ANNOUNCEMENT: &str = "Baton 1.4: the CSV export keeps its filters";
const NEGOTIATION: &str = "notes-format";

/// What a step must end with and how much of its output is shown.
#[derive(Clone, Copy)]
struct Expect {
    code: i32,
    /// Lines of output shown (the rest counted); all of them are in `--json`.
    lines: usize,
    /// Where the output is saved, shown as `> FILE`.
    into: Option<&'static str>,
    /// Show what it said on stderr too (a refusal the demo means to show).
    stderr: bool,
}

const OK: Expect = Expect {
    code: 0,
    lines: 12,
    into: None,
    stderr: false,
};

struct Demo {
    exe: PathBuf,
    dir: PathBuf,
    quiet: bool,
    steps: Vec<DemoStep>,
}

/// `arg` as a shell would need it quoted.
fn quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@#,+%".contains(c));
    if plain {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

impl Demo {
    fn say(&self, text: &str) {
        if !self.quiet {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", visible(text));
            let _ = out.flush();
        }
    }

    /// A path in the project.
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// `args` as a person would type them: this binary is `baton`, project paths are
    /// relative.
    fn shown(&self, program: &str, args: &[String]) -> String {
        let exe = self.exe.display().to_string();
        let root = format!("{}/", self.dir.display());
        let mut words = vec![program.to_owned()];
        words.extend(args.iter().map(|a| {
            let a = a.replace(&quote(&exe), "baton").replace(&exe, "baton");
            quote(&a.replace(&root, ""))
        }));
        words.join(" ")
    }

    /// Runs `baton [--as WHO] ARGS…` against the demo project as a step.
    fn baton(&mut self, who: Option<&str>, args: &[&str]) -> CommandResult<String> {
        self.baton_expect(who, args, OK)
    }

    fn baton_expect(
        &mut self,
        who: Option<&str>,
        args: &[&str],
        expect: Expect,
    ) -> CommandResult<String> {
        let mut argv: Vec<String> = Vec::new();
        if let Some(who) = who {
            argv.extend(["--as".to_owned(), who.to_owned()]);
        }
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let mut cmd = Command::new(&self.exe);
        cmd.args(&argv).env_remove("BATON_AS");
        self.step("baton", &argv, cmd, expect)
    }

    /// Runs a command in the project, printing its output line by line as it comes, and
    /// fails the demo unless it exits with the expected code. Returns its stdout.
    fn step(
        &mut self,
        program: &str,
        args: &[String],
        mut cmd: Command,
        expect: Expect,
    ) -> CommandResult<String> {
        let mut shown = self.shown(program, args);
        if let Some(file) = expect.into {
            shown.push_str(&format!(" > {file}"));
        }
        self.say(&format!("$ {shown}"));
        let mut child = cmd
            .current_dir(&self.dir)
            .env("BATON_PROJECT", &self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| CommandError::failed(format!("demo: cannot start `{shown}`: {e}")))?;
        let mut err = child.stderr.take().expect("piped");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            text
        });
        let mut stdout = String::new();
        let (mut lines, mut hidden) = (0, 0);
        for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
            let line = line?;
            lines += 1;
            if expect.into.is_none() && lines <= expect.lines {
                self.say(&format!("  {line}"));
            } else {
                hidden += 1;
            }
            stdout.push_str(&line);
            stdout.push('\n');
        }
        let status = child.wait()?;
        let stderr = stderr.join().unwrap_or_default();
        let mut said = lines > hidden;
        if hidden > 0 && expect.into.is_none() {
            self.say(&format!("  … {hidden} more lines (all of them in --json)"));
            said = true;
        }
        if expect.stderr {
            for line in stderr.lines() {
                self.say(&format!("  {line}"));
                said = true;
            }
        }
        if expect.code != 0 && status.code() == Some(expect.code) {
            self.say(&format!("  (exit {}, as expected)", expect.code));
            said = true;
        }
        if said {
            self.say("");
        }
        self.steps.push(DemoStep {
            command: shown.clone(),
            exit_code: status.code(),
            stdout: stdout.clone(),
        });
        if status.code() != Some(expect.code) {
            return Err(CommandError::failed(format!(
                "demo step `{shown}` ended with {status}, not exit {}: {}",
                expect.code,
                stderr.trim()
            )));
        }
        if let Some(file) = expect.into {
            std::fs::write(self.path(file), &stdout)?;
        }
        Ok(stdout.trim().to_owned())
    }

    /// `git ARGS…` in the project, as an author named `who`.
    fn git(&mut self, who: &str, args: &[&str]) -> CommandResult<()> {
        let argv: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let mut cmd = Command::new("git");
        cmd.args(&argv);
        for var in ["GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"] {
            cmd.env(var, who);
        }
        for var in ["GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"] {
            cmd.env(var, format!("{who}@baton.demo"));
        }
        // A person's signing setup is not the demo's to use.
        cmd.env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "commit.gpgsign")
            .env("GIT_CONFIG_VALUE_0", "false");
        self.step("git", &argv, cmd, OK).map(|_| ())
    }

    /// Writes `text` to the project's `name`, saying so.
    fn write(&self, name: &str, text: &str) -> CommandResult<()> {
        let path = self.path(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text)?;
        self.say(&format!("(writes {name})"));
        Ok(())
    }

    fn write_json(&self, name: &str, doc: &Value) -> CommandResult<()> {
        self.write(name, &serde_json::to_string_pretty(doc).unwrap_or_default())
    }

    fn read_json(&self, name: &str) -> CommandResult<Value> {
        let text = std::fs::read_to_string(self.path(name))?;
        serde_json::from_str(&text)
            .map_err(|e| CommandError::failed(format!("demo: {name} is not JSON: {e}")))
    }
}

/// Sets the string at `pointer` in `doc` (its parent must exist).
fn set(doc: &mut Value, pointer: &str, value: Value) -> CommandResult<()> {
    let slot = doc
        .pointer_mut(pointer)
        .ok_or_else(|| CommandError::failed(format!("demo: the template has no {pointer}")))?;
    *slot = value;
    Ok(())
}

/// Fails the demo if a `<fill in: …>` placeholder is left in `doc`.
fn filled(doc: &Value, name: &str) -> CommandResult<()> {
    let text = doc.to_string();
    if text.contains(baton_core::awl::contract::PLACEHOLDER) {
        return Err(CommandError::failed(format!(
            "demo: {name} still holds a placeholder: {text}"
        )));
    }
    Ok(())
}

pub async fn run(g: &GlobalArgs, args: DemoArgs) -> CommandResult<Output> {
    let (dir, _guard) = match &args.keep {
        Some(dir) => {
            if dir.join(DIR).exists() {
                return Err(CommandError::usage(format!(
                    "{} already holds a Baton project; give --keep an empty or new directory",
                    dir.display()
                )));
            }
            std::fs::create_dir_all(dir)?;
            (dir.canonicalize()?, None)
        }
        None => {
            let tmp = tempfile::Builder::new().prefix("baton-demo-").tempdir()?;
            (tmp.path().canonicalize()?, Some(tmp))
        }
    };
    let mut demo = Demo {
        exe: std::env::current_exe()?,
        dir: dir.clone(),
        quiet: g.json,
        steps: Vec::new(),
    };
    let d = &mut demo;
    d.say("Baton demo: a planner, an executor, a reviewer and the owner hand one piece of");
    d.say("work along, each a separate process; every step below is a real command.");
    d.say(&format!(
        "Project: {} ({})\n",
        dir.display(),
        if args.keep.is_some() {
            "kept"
        } else {
            "removed at the end; --keep DIR keeps it"
        }
    ));

    setup(d)?;
    let (order, request) = offer(d)?;
    execute(d, &order)?;
    review(d, &order)?;
    let lines = approve(d, &order, &request)?;
    negotiate(d)?;
    finale(d, args.keep.is_some())?;

    let human = format!(
        "Done: order {order} offered, done, reviewed, approved; its effect ran once ({lines} \
         line in {PUBLISHED}); negotiation {NEGOTIATION} settled.\n{}",
        if args.keep.is_some() {
            format!(
                "Explore it: cd {} && baton --as {PLANNER} order show {order}",
                dir.display()
            )
        } else {
            "Run `baton demo --keep DIR` to explore the result.".to_owned()
        }
    );
    let out = doc::Demo {
        project: dir.display().to_string(),
        kept: args.keep.is_some(),
        order,
        negotiation: NEGOTIATION.to_owned(),
        steps: demo.steps,
    };
    Ok(Output::of(&out, human))
}

/// A git repository with a test command, a Baton project and the cast.
fn setup(d: &mut Demo) -> CommandResult<()> {
    d.say("0. A repository with a test command, a Baton project, and the cast.");
    d.write(
        "check-notes.sh",
        &format!(
            "# The release notes name the fix.\ntest -f {NOTES} && grep -q 'keeps its filters' {NOTES}\n"
        ),
    )?;
    d.git(PLANNER, &["init", "-q"])?;
    d.git(PLANNER, &["add", "check-notes.sh"])?;
    d.git(
        PLANNER,
        &["commit", "-q", "-m", "Add the release-notes check"],
    )?;
    d.baton(None, &["init"])?;
    d.baton(None, &["agent", "add", PLANNER, "--role", "owner"])?;
    d.baton(None, &["agent", "add", EXECUTOR, "--role", "executor"])?;
    d.baton(None, &["agent", "add", EXECUTOR_2, "--role", "executor"])?;
    d.baton(None, &["agent", "add", REVIEWER, "--role", "reviewer"])?;
    d.baton(Some(PLANNER), &["focus", "set", "Ship release 1.4"])?;
    Ok(())
}

/// The planner writes a Work Order from what Baton knows, fills in what only it can
/// decide (one tool staged), checks it and offers it. Returns the order's id and the id
/// of the request message that carries it.
fn offer(d: &mut Demo) -> CommandResult<(String, String)> {
    d.say("1. The planner offers a Work Order: Baton fills what it knows, the planner the rest.");
    d.baton_expect(
        Some(PLANNER),
        &[
            "handoff",
            "new",
            "--to",
            EXECUTOR,
            "--goal",
            "Publish the 1.4 release notes",
            "--criterion",
            "notes/1.4.md says the CSV export keeps its filters",
            "--criterion",
            "the release line is published once, after approval",
            "--budget",
            "tool_calls=5",
            "--tool",
            "notes/*",
            "--deadline",
            "1d",
        ],
        Expect {
            into: Some("order.json"),
            ..OK
        },
    )?;
    let mut order = d.read_json("order.json")?;
    // `staged` came in AWL 0.4: publishing waits for the owner's approval.
    set(&mut order, "/spec", json!("awl/work-order@0.4"))?;
    order["staged"] = json!([format!("{SERVER}/publish")]);
    let fills = [
        (
            "/x-baton/context/reproduction",
            json!("sh check-notes.sh (fails: there are no notes yet)"),
        ),
        (
            "/x-baton/context/expected",
            json!("notes/1.4.md names the fix, and one announcement line is published"),
        ),
        ("/x-baton/scope/allowed", json!(["notes/"])),
        (
            "/x-baton/execution/test_command",
            json!("sh check-notes.sh"),
        ),
        (
            "/x-baton/stop_when",
            json!(["the fix is not in the 1.4 changes"]),
        ),
        (
            "/x-baton/decision/resume_at",
            json!("run sh check-notes.sh and read why it fails"),
        ),
    ];
    for (pointer, value) in fills {
        set(&mut order, pointer, value)?;
    }
    order["x-baton"]["acceptance"]["reviewers"] = json!([REVIEWER]);
    filled(&order, "order.json")?;
    d.write_json("order.json", &order)?;
    d.baton(None, &["handoff", "check", "order.json"])?;
    // "wo_…: offered to executor (seq 1, request ID)"
    let created = d.baton(Some(PLANNER), &["order", "create", "order.json"])?;
    let request = created
        .split_once("request ")
        .and_then(|(_, rest)| rest.split(')').next())
        .map(str::to_owned);
    match (order["id"].as_str(), request) {
        (Some(id), Some(request)) => Ok((id.to_owned(), request)),
        _ => Err(CommandError::failed(format!(
            "demo: order create named no order and request: {created}"
        ))),
    }
}

/// The executor, started through the launch wrapper as a ledger row.
fn execute(d: &mut Demo, order: &str) -> CommandResult<()> {
    d.say("2. An executor agent starts through `baton run` (a ledger row before it spawns)");
    d.say("   and does the work; its own steps are indented below its run.");
    let exe = d.exe.display().to_string();
    let published = d.path(PUBLISHED).display().to_string();
    d.baton_expect(
        Some(EXECUTOR),
        &[
            "run",
            "--order",
            order,
            "--",
            &exe,
            "demo-part",
            "executor",
            "--order",
            order,
            "--published",
            &published,
        ],
        Expect {
            lines: usize::MAX,
            ..OK
        },
    )?;
    d.baton(None, &["runs", "--all"])?;
    d.say("   A second executor works in the same repository. It wants to start the 1.5 notes,");
    d.say("   but the first executor holds notes/ for its order until the order ends: Baton");
    d.say("   refuses at once (exit 6), naming who holds it, so it reserves other paths instead.");
    d.baton_expect(
        Some(EXECUTOR_2),
        &["reserve", NEXT_NOTES, "--reason", "draft the 1.5 notes"],
        Expect {
            code: 6,
            stderr: true,
            ..OK
        },
    )?;
    d.baton(
        Some(EXECUTOR_2),
        &["reserve", "docs/", "--reason", "the CSV export guide"],
    )?;
    d.baton(None, &["reservations"])?;
    Ok(())
}

/// A reviewer process reads the packet and gives its verdict.
fn review(d: &mut Demo, order: &str) -> CommandResult<()> {
    d.say("3. A reviewer process reads the review packet on stdin and gives its verdict.");
    let reviewer = format!("{} demo-part reviewer", quote(&d.exe.display().to_string()));
    d.baton(Some(PLANNER), &["review", order, "--reviewer", &reviewer])?;
    Ok(())
}

/// The owner approves: the held effect runs, once. Returns the upstream file's lines.
fn approve(d: &mut Demo, order: &str, request: &str) -> CommandResult<usize> {
    d.say("4. The owner approves: approval runs the held call, once (approve means ship).");
    let effect = format!("{SERVER}/publish#1");
    d.baton(
        Some(PLANNER),
        &["order", "approve", order, "--effects", &effect],
    )?;
    d.say("   Approving again runs nothing twice:");
    d.baton(Some(PLANNER), &["order", "approve", order])?;
    let text = std::fs::read_to_string(d.path(PUBLISHED)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    d.say(&format!(
        "$ cat {PUBLISHED}   # written by the upstream server, not by Baton"
    ));
    for line in &lines {
        d.say(&format!("  {line}"));
    }
    d.say("");
    if lines != [ANNOUNCEMENT] {
        return Err(CommandError::failed(format!(
            "demo: {PUBLISHED} should hold the announcement exactly once, holds {lines:?}"
        )));
    }
    d.say("   The approval closed both ends of the order's request; the planner archives it:");
    d.baton(Some(PLANNER), &["archive", request])?;
    d.say("   The order ended, and with it the executor's hold on notes/: the second executor");
    d.say("   reserves its notes now.");
    d.baton(
        Some(EXECUTOR_2),
        &["reserve", NEXT_NOTES, "--reason", "draft the 1.5 notes"],
    )?;
    Ok(lines.len())
}

/// The executor and the reviewer disagree on the notes' form; the engine settles it.
fn negotiate(d: &mut Demo) -> CommandResult<()> {
    d.say("5. The executor and the reviewer disagree on how release notes are written; each");
    d.say("   submits a private position, the engine settles it (no language model), and the");
    d.say("   planner records the outcome as a decision.");
    d.write_json(
        "negotiation/spec.json",
        &json!({
            "id": NEGOTIATION, "rounds": 20,
            "issues": [{"name": "detail", "options": ["summary", "highlights", "full"]},
                       {"name": "timing", "options": ["each-release", "weekly"]}],
            "constraints": [{"detail": "full", "timing": "weekly"}],
            "parties": [{"name": EXECUTOR, "position": "negotiation/executor.json"},
                        {"name": REVIEWER, "position": "negotiation/reviewer.json"}]
        }),
    )?;
    // The executor wants a short summary with each release; the reviewer wants the full
    // story, will not take a bare summary, and vetoes weekly batches. Neither's first
    // choice is acceptable to the other.
    d.write_json(
        "negotiation/executor.json",
        &json!({"weights": {"detail": 0.7, "timing": 0.3},
                "utilities": {"detail": {"summary": 1, "highlights": 0.6, "full": 0.1},
                              "timing": {"each-release": 1, "weekly": 0.2}},
                "floor": 0.6}),
    )?;
    d.write_json(
        "negotiation/reviewer.json",
        &json!({"weights": {"detail": 0.6, "timing": 0.4},
                "utilities": {"detail": {"summary": 0.3, "highlights": 0.8, "full": 1},
                              "timing": {"each-release": 1, "weekly": 0.7}},
                "floor": 0.75, "veto": [{"timing": "weekly"}]}),
    )?;
    d.baton(None, &["negotiate", "open", "negotiation/spec.json"])?;
    d.baton(
        Some(REVIEWER),
        &[
            "negotiate",
            "submit",
            NEGOTIATION,
            "--position",
            "negotiation/reviewer.json",
        ],
    )?;
    let shown = d.baton(
        Some(EXECUTOR),
        &[
            "negotiate",
            "submit",
            NEGOTIATION,
            "--position",
            "negotiation/executor.json",
        ],
    )?;
    if !shown.starts_with(&format!("negotiation {NEGOTIATION}: agreement")) {
        return Err(CommandError::failed(format!(
            "demo: negotiation {NEGOTIATION} did not settle: {shown}"
        )));
    }
    d.baton(
        Some(PLANNER),
        &[
            "decide",
            "Release notes: highlights, with each release",
            "--why",
            "negotiation notes-format settled it",
        ],
    )?;
    Ok(())
}

/// The end of the round, and the one place it ends: the planner's resume packet, then
/// where the status view and the board are. `baton status` is printed here too, and with
/// `--keep` `baton board` is started here and its URL printed, once those commands exist.
fn finale(d: &mut Demo, kept: bool) -> CommandResult<()> {
    d.say("6. The planner's next session starts from one bounded read: its resume packet.");
    d.baton_expect(
        Some(PLANNER),
        &["resume", "--max-bytes", "2000"],
        Expect {
            lines: usize::MAX,
            ..OK
        },
    )?;
    d.say("7. The same facts for a person: the status view (the board shows this document).");
    d.baton_expect(
        Some(PLANNER),
        &["status"],
        Expect {
            lines: usize::MAX,
            ..OK
        },
    )?;
    if kept {
        let (url, pid) = start_board(d)?;
        d.say(&format!(
            "The board is running at {url} (process {pid}; stop it with `kill {pid}`)."
        ));
    } else {
        d.say("Keep the project with `baton demo --keep DIR` to leave a running board to look at.");
    }
    d.say("");
    Ok(())
}

/// Starts `baton board` on the kept project, left running after the demo: on a free
/// loopback port, its own process group, its words in `.baton/board.log`. Its address.
fn start_board(d: &Demo) -> CommandResult<(String, u32)> {
    use std::os::unix::process::CommandExt;
    let log_path = d.dir.join(DIR).join("board.log");
    let log = std::fs::File::create(&log_path)?;
    let child = Command::new(&d.exe)
        .args(["board", "--bind", "127.0.0.1:0"])
        .current_dir(&d.dir)
        .env_remove("BATON_AS")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .process_group(0)
        .spawn()?;
    let pid = child.id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        let said = std::fs::read_to_string(&log_path).unwrap_or_default();
        if let Some(url) = said.lines().find_map(|l| l.strip_prefix("baton board: ")) {
            return Ok((url.trim().to_owned(), pid));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Err(CommandError::failed(format!(
        "baton board did not start within 10 s (see {})",
        log_path.display()
    )))
}

// ---- the cast -----------------------------------------------------------------------------

pub async fn part(g: &GlobalArgs, part: DemoPart) -> CommandResult<Output> {
    match part {
        DemoPart::Upstream { file } => {
            baton_mcp::serve_demo_upstream(file)
                .await
                .map_err(|e| CommandError::failed(e.to_string()))?;
            Ok(Output::nothing())
        }
        DemoPart::Executor { order, published } => executor(g, &order, &published).await,
        DemoPart::Reviewer => {
            // The review packet, within its budget (one byte over is read to notice it).
            let read =
                crate::files::read_bounded(Path::new("-"), baton_core::gate::PACKET_MAX_BYTES)?;
            let packet = String::from_utf8_lossy(&read.bytes);
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", verdict(&packet))?;
            Ok(Output::nothing())
        }
    }
}

/// The executor: a real process acting as an agent through the command line and an MCP
/// session, as `BATON_AS` (set by `baton run`).
async fn executor(g: &GlobalArgs, order: &str, published: &Path) -> CommandResult<Output> {
    let dir = match &g.project {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    let me = g
        .as_name
        .clone()
        .ok_or_else(|| CommandError::usage("the demo's executor runs with --as NAME"))?;
    let mut demo = Demo {
        exe: std::env::current_exe()?,
        dir,
        quiet: false,
        steps: Vec::new(),
    };
    let d = &mut demo;
    let me = me.as_str();
    d.say(&format!(
        "[{me}] my run is {}; I start from what I owe",
        std::env::var("BATON_RUN").unwrap_or_else(|_| "unknown".into())
    ));
    d.baton(Some(me), &["inbox"])?;
    d.baton(Some(me), &["order", "accept", order])?;
    d.baton(Some(me), &["order", "start", order])?;

    d.say(&format!(
        "[{me}] the check fails before the change: recorded as evidence"
    ));
    let check = [
        "evidence",
        "run",
        "--order",
        order,
        "--",
        "sh",
        "check-notes.sh",
    ];
    d.baton_expect(Some(me), &check, Expect { code: 1, ..OK })?;
    d.write(
        NOTES,
        "# 1.4\n\n- The CSV export keeps its filters (status and date range).\n",
    )?;
    d.git(me, &["add", NOTES])?;
    d.git(me, &["commit", "-q", "-m", "Release notes for 1.4"])?;
    d.say(&format!(
        "[{me}] after the change it passes (exit 0): recorded too"
    ));
    d.baton(Some(me), &check)?;
    d.baton(
        Some(me),
        &[
            "receipt",
            "write",
            "--step",
            "release-notes",
            "--artifact",
            NOTES,
        ],
    )?;

    d.say(&format!(
        "[{me}] an MCP session through `baton gateway`: the read passes, the publish is held"
    ));
    let upstream = vec![
        d.exe.display().to_string(),
        "demo-part".to_owned(),
        "upstream".to_owned(),
        "--file".to_owned(),
        published.display().to_string(),
    ];
    let mut gateway = vec![
        d.exe.display().to_string(),
        "--as".to_owned(),
        me.to_owned(),
        "gateway".to_owned(),
        "--order".to_owned(),
        order.to_owned(),
        "--name".to_owned(),
        SERVER.to_owned(),
        "--".to_owned(),
    ];
    gateway.extend(upstream);
    let shown = d.shown("baton", &gateway[1..]);
    d.say(&format!("$ {shown}   # as an MCP client"));
    let mut publish = Map::new();
    publish.insert("line".into(), ANNOUNCEMENT.into());
    let calls = vec![
        ("read".to_owned(), Map::new()),
        ("publish".to_owned(), publish.clone()),
    ];
    let (tools, results) = baton_mcp::agent_session(&gateway, &calls)
        .await
        .map_err(|e| CommandError::failed(format!("demo: the gateway session failed: {e}")))?;
    d.say(&format!("  tools: {}", tools.join(", ")));
    for ((tool, _), result) in calls.iter().zip(&results) {
        let said = result["structuredContent"].to_string();
        let evidence = result
            .pointer("/_meta/baton~1evidence")
            .and_then(Value::as_str)
            .map(|r| format!("   (forwarded; evidence {r})"))
            .unwrap_or_default();
        d.say(&format!("  {tool} → {said}{evidence}"));
    }
    let pending = results
        .get(1)
        .and_then(|r| r.pointer("/structuredContent/ref"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| CommandError::failed("demo: the publish call was not held"))?;
    d.say("");

    d.say(&format!(
        "[{me}] the report: Baton fills what it knows (evidence runs, HEAD), I fill the rest"
    ));
    d.baton_expect(
        Some(me),
        &["handoff", "new", "--report", order],
        Expect {
            into: Some("report.json"),
            ..OK
        },
    )?;
    let mut report = d.read_json("report.json")?;
    // `effects` came in AWL report 0.3.
    set(&mut report, "/spec", json!("awl/work-report@0.3"))?;
    set(
        &mut report,
        "/result/summary",
        json!("Release notes written; the announcement is held for approval"),
    )?;
    let notes = [
        "check-notes.sh passes after the change (evidence run)",
        "the publish call is held by the gateway as an effect",
    ];
    if let Some(evidence) = report["evidence"].as_array_mut() {
        for (e, note) in evidence.iter_mut().zip(notes) {
            e["note"] = json!(note);
        }
    }
    set(&mut report, "/cost/tool_calls", json!(results.len()))?;
    set(
        &mut report,
        "/x-baton/evidence/change",
        json!([{"file": NOTES, "reason": "the 1.4 notes did not exist"}]),
    )?;
    set(
        &mut report,
        "/x-baton/evidence/uncertainty",
        json!(["the announcement's wording was not checked by a person"]),
    )?;
    report["tools_used"] = json!([format!("{SERVER}/read"), format!("{SERVER}/publish")]);
    report["effects"] =
        json!([{"ref": pending, "tool": format!("{SERVER}/publish"), "arguments": publish}]);
    filled(&report, "report.json")?;
    d.write_json("report.json", &report)?;
    d.baton(
        None,
        &["handoff", "check", "report.json", "--order", "order.json"],
    )?;
    d.baton(Some(me), &["order", "report", order, "report.json"])?;
    Ok(Output::nothing())
}

/// The reviewer's verdict on a packet: APPROVE, or the numbered fixes it needs.
fn verdict(packet: &str) -> String {
    let report = packet
        .split_once("## Report\n")
        .and_then(|(_, r)| serde_json::from_str::<Value>(r.trim()).ok());
    let mut fixes = Vec::new();
    match &report {
        None => fixes.push("Include the Work Report in the packet.".to_owned()),
        Some(r) => {
            if r["status"] != "done" {
                fixes.push("Finish the work: the report is not `done`.".to_owned());
            }
            if r.pointer("/x-baton/evidence/after/exit_code") != Some(&json!(0)) {
                fixes.push("Show the check passing after the change.".to_owned());
            }
            if r["effects"].as_array().is_none_or(Vec::is_empty) {
                fixes.push("List the held publish call under `effects`.".to_owned());
            }
        }
    }
    if !packet.contains(&format!("+++ b/{NOTES}")) {
        fixes.push(format!("Change {NOTES}: the diff does not touch it."));
    }
    if fixes.is_empty() {
        "APPROVE".to_owned()
    } else {
        fixes
            .iter()
            .enumerate()
            .map(|(i, f)| format!("{}. {f}", i + 1))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(diff: &str, report: Value) -> String {
        format!("# Review\n## Diff a..b\n{diff}\n## Report\n{report:#}\n")
    }

    fn done() -> Value {
        json!({"status": "done", "effects": [{"ref": "notes/publish#1"}],
               "x-baton": {"evidence": {"after": {"exit_code": 0}}}})
    }

    #[test]
    fn the_reviewer_approves_only_a_done_report_with_its_diff_and_effects() {
        let diff = format!("+++ b/{NOTES}\n+- fixed");
        assert_eq!(verdict(&packet(&diff, done())), "APPROVE");
        let mut failing = done();
        failing["x-baton"]["evidence"]["after"]["exit_code"] = json!(1);
        failing["effects"] = json!([]);
        assert_eq!(
            verdict(&packet("+++ b/other.md", failing)),
            "1. Show the check passing after the change.\n\
             2. List the held publish call under `effects`.\n\
             3. Change notes/1.4.md: the diff does not touch it."
        );
        assert_eq!(
            verdict("no report here"),
            "1. Include the Work Report in the packet.\n\
             2. Change notes/1.4.md: the diff does not touch it."
        );
    }
}
