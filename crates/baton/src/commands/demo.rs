//! `baton demo`: a real round on a throwaway project. Every step runs this same binary as
//! a separate process, so what it prints is what an agent would see.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

use baton_app::doc::{self, DemoStep};
use clap::Args;
use serde_json::{Value, json};

use crate::cli::GlobalArgs;
use crate::error::{CommandError, CommandResult};
use crate::output::Output;
use crate::project::DIR;

/// Run a short planner → executor round on a throwaway project, printing each step.
///
/// The planner sends a request; the executor fetches it, asks a question in the thread;
/// the planner answers; the executor completes with a note; both views are shown; the
/// planner closes its own end. Each step is a real `baton` process.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  baton demo\n  baton demo --keep /tmp/baton-demo")]
pub struct DemoArgs {
    /// Keep the project in DIR (created if missing; must not already hold a project).
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
}

struct Demo {
    exe: PathBuf,
    dir: PathBuf,
    quiet: bool,
    steps: Vec<DemoStep>,
}

impl Demo {
    fn say(&self, text: &str) {
        if !self.quiet {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{text}");
            let _ = out.flush();
        }
    }

    /// Runs `baton [--as NAME] ARGS…` against the demo project; fails the demo if the step
    /// fails. Returns what it printed on stdout.
    fn baton(&mut self, who: Option<&str>, args: &[&str]) -> CommandResult<String> {
        let mut argv: Vec<&str> = Vec::new();
        if let Some(who) = who {
            argv.extend(["--as", who]);
        }
        argv.extend_from_slice(args);
        let shown = argv
            .iter()
            .map(|a| {
                if a.contains(' ') {
                    format!("'{a}'")
                } else {
                    (*a).to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        self.say(&format!("$ baton {shown}"));
        let out = Command::new(&self.exe)
            .args(&argv)
            .current_dir(&self.dir)
            .env("BATON_PROJECT", &self.dir)
            .env_remove("BATON_AS")
            .output()?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        for line in stdout.lines() {
            self.say(&format!("  {line}"));
        }
        self.say("");
        self.steps.push(DemoStep {
            command: format!("baton {shown}"),
            exit_code: out.status.code(),
            stdout: stdout.clone(),
        });
        if !out.status.success() {
            return Err(CommandError::failed(format!(
                "demo step `baton {shown}` failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(stdout.trim().to_owned())
    }
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
            (tmp.path().to_owned(), Some(tmp))
        }
    };
    let mut demo = Demo {
        exe: std::env::current_exe()?,
        dir: dir.clone(),
        quiet: g.json,
        steps: Vec::new(),
    };
    let d = &mut demo;
    d.say("Baton demo: a planner hands work to an executor through a durable inbox.");
    d.say(&format!(
        "Project: {} ({})\n",
        dir.display(),
        if args.keep.is_some() {
            "kept"
        } else {
            "removed at the end; --keep DIR keeps it"
        }
    ));

    d.say("1. Create the project and register two participants.");
    d.baton(None, &["init"])?;
    d.baton(None, &["agent", "add", "planner", "--role", "planner"])?;
    d.baton(None, &["agent", "add", "executor", "--role", "executor"])?;
    d.baton(
        Some("planner"),
        &["focus", "set", "Ship the CSV export fix"],
    )?;
    d.baton(
        Some("planner"),
        &[
            "decide",
            "Filter in the query, not in the CSV writer",
            "--why",
            "one code path for every export",
        ],
    )?;

    d.say("2. The planner sends a request: responsibility moves to the executor.");
    let payload = json!({
        "body": "CSV export drops the active filters. Reproduce: filter status=open, export, \
                 count rows. Done when the export holds exactly the filtered rows and a \
                 regression test covers it.",
        "x-baton": {
            "stop_when": ["the fixture cannot be read", "a schema migration looks necessary"],
            "decision": { "resume_at": "run the export tests and read the first failure" }
        }
    });
    std::fs::write(d.dir.join("request.json"), payload.to_string())?;
    let request = d.baton(
        Some("planner"),
        &[
            "send",
            "--to",
            "executor",
            "--type",
            "request",
            "--topic",
            "csv-export",
            "--payload",
            "request.json",
        ],
    )?;

    d.say("3. A fresh executor session starts from one bounded read: the resume packet.");
    d.baton(Some("executor"), &["resume", "--max-bytes", "1500"])?;
    d.baton(Some("executor"), &["inbox"])?;

    d.say("4. It fetches the full request: pending → delivered.");
    d.baton(Some("executor"), &["show", &request])?;

    d.say("5. It asks a question as a threaded reply (to the sender, same topic).");
    let question = d.baton(
        Some("executor"),
        &[
            "send",
            "--reply-to",
            &request,
            "--body",
            "Only the status filter, or the date range too?",
        ],
    )?;

    d.say("6. The planner sees the question and answers in the thread.");
    d.baton(Some("planner"), &["inbox"])?;
    d.baton(Some("planner"), &["show", &question])?;
    d.baton(Some("planner"), &["ack", &question])?;
    let answer = d.baton(
        Some("planner"),
        &[
            "send",
            "--reply-to",
            &question,
            "--body",
            "Both. The fixture is tests/fixtures/filters.csv.",
        ],
    )?;

    d.say("7. The executor reads the answer, records where its evidence landed, and completes.");
    d.baton(Some("executor"), &["show", &answer])?;
    d.baton(Some("executor"), &["ack", &answer])?;
    std::fs::write(
        d.dir.join("export-test.log"),
        "test export::keeps_filters ... ok\ntest result: ok. 1 passed; 0 failed\n",
    )?;
    d.baton(
        Some("executor"),
        &[
            "receipt",
            "write",
            "--step",
            "export-tests",
            "--artifact",
            "export-test.log",
        ],
    )?;
    d.baton(
        Some("executor"),
        &[
            "constrain",
            "Fixtures are read-only",
            "--tried",
            "regenerating them",
            "--result",
            "permission denied",
        ],
    )?;
    d.baton(
        Some("executor"),
        &[
            "complete",
            &request,
            "--note",
            "Export applies status and date filters; regression test added.",
        ],
    )?;

    d.say("8. Both views: the executor owes nothing; the planner's request shows each end.");
    d.baton(Some("executor"), &["inbox"])?;
    d.baton(Some("planner"), &["outbox"])?;
    d.baton(None, &["thread", &request])?;

    d.say("9. The planner reads the note and closes its own end of the request.");
    let inbox = d.baton(Some("planner"), &["inbox", "--json"])?;
    let note = serde_json::from_str::<Value>(&inbox)
        .ok()
        .and_then(|v| v["items"][0]["id"].as_str().map(str::to_owned))
        .ok_or_else(|| {
            CommandError::failed("demo: the completion note did not reach the planner")
        })?;
    d.baton(Some("planner"), &["show", &note])?;
    d.baton(Some("planner"), &["ack", &note])?;
    d.baton(Some("planner"), &["receipt", "verify", "export-tests"])?;
    d.baton(Some("planner"), &["complete", &request])?;
    d.baton(Some("planner"), &["outbox"])?;

    d.say("10. The state is rendered for people, checksummed, and checked.");
    d.baton(None, &["state", "render"])?;
    d.baton(None, &["check", "STATE.md"])?;

    let human = format!(
        "Done: one request, one question, one answer, one completion, all in the log.\n{}",
        if args.keep.is_some() {
            format!("Explore it: BATON_PROJECT={} baton search", dir.display())
        } else {
            "Run `baton demo --keep DIR` to explore the result.".to_owned()
        }
    );
    let out = doc::Demo {
        project: dir.display().to_string(),
        kept: args.keep.is_some(),
        request,
        steps: demo.steps,
    };
    Ok(Output::of(&out, human))
}
