//! `baton run`: the launch wrapper of the run ledger. The run's row is
//! committed before the agent exists; while it lives, the wrapper passes its output
//! through untouched, reads progress and token usage from it, records heartbeats and
//! forwards signals to its process group; at the end it records the exit and exits with
//! the agent's status.
//!
//! Stdout belongs to the agent: this command never prints to it. Once the agent has been
//! spawned, the run's outcome is the exit code (the agent's, 125 over budget, 127 when it
//! could not start, 128+N after signal N, 4 for a missing receipt) with one line on stderr
//! when it did not end `done`.

use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use baton_core::packet::clip;
use baton_core::run::{
    OutputParser, ProcessRef, Progress, Registration, RunChange, RunStatus, TokenUsage, over_budget,
};
use clap::Args;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use crate::child::{self, Captured, Piece};
use crate::commands::Context;
use crate::commands::admission::admit;
use crate::error::{CommandError, CommandResult, ErrorKind, RunEnd};
use crate::host::{host, start_time};
use crate::output::{Output, now};

/// Run an agent as a ledger row: registered before it starts, kept honest while it runs.
///
/// The row is committed before the command is spawned. Its stdout and stderr pass through
/// unchanged while `PROGRESS n/total` lines (or `PROGRESS n` with --steps) and token usage
/// (Claude Code `--output-format stream-json`, Codex `exec --json`) are read from them:
/// what this run spent, not the history of a resumed session or thread.
/// SIGINT, SIGTERM and SIGHUP are forwarded to the command's process group. The command
/// sees BATON_RUN (this run's id), BATON_PROJECT and, with --as, BATON_AS.
///
/// Exit status: the command's own; 128+N after signal N (status stopped); 125 over the
/// token budget; 127 when it could not be started; 4 when it exited 0 without an expected
/// receipt; 75 when no slot (or the writer lock) was free and --wait was not given.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    baton --as impl-1 run --order 01JD... --steps 5 -- claude -p 'fix the export' --output-format stream-json --verbose\n  \
    baton --as impl-2 run --writer --budget-tokens 2000000 -- codex exec --json 'add the CSV test'\n  \
    baton run --expect-receipt build -- make release")]
pub struct RunArgs {
    /// The work order (or request) this run works on.
    #[arg(long, value_name = "ID")]
    pub order: Option<String>,
    /// How many steps the work has: `PROGRESS n` lines then count against it.
    #[arg(long, value_name = "N")]
    pub steps: Option<u64>,
    /// Stop the command (exit 125) once its reported token usage exceeds N.
    #[arg(long, value_name = "N")]
    pub budget_tokens: Option<u64>,
    /// Take the checkout's exclusive writer lock before a slot.
    #[arg(long)]
    pub writer: bool,
    /// How many runs may run at once in this checkout [default: runs.slots in config, 2].
    #[arg(long, value_name = "N")]
    pub slots: Option<u32>,
    /// Wait for the writer lock and a slot instead of exiting 75.
    #[arg(long)]
    pub wait: bool,
    /// A step whose receipt must be written during the run (repeatable): exiting 0
    /// without it fails the run.
    #[arg(long = "expect-receipt", value_name = "STEP")]
    pub expect_receipts: Vec<String>,
    /// The command to run, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// The longest argument recorded in the ledger, in bytes; how many arguments are kept.
const MAX_ARG_BYTES: usize = 1000;
const MAX_ARGS: usize = 64;
/// How often progress and token reports are written at most.
const REPORT_EVERY: Duration = Duration::from_secs(1);
/// How long a command stopped for its budget gets between SIGTERM and SIGKILL.
const BUDGET_GRACE: Duration = Duration::from_secs(10);
/// How long output still open after the command exited (a background child holding the
/// pipe) is read before the run is recorded.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// Exit code for a missing receipt: the same as `baton receipt wait` at its deadline.
const MISSING_RECEIPT_EXIT: i32 = 4;

/// What the output readers tell the wrapper.
enum Seen {
    /// The command wrote output at this time.
    Active(i64),
    Progress(Progress),
    Tokens(TokenUsage),
    /// One of the two streams reached its end.
    Closed,
}

/// The command's arguments as recorded: each cut to [`MAX_ARG_BYTES`], at most
/// [`MAX_ARGS`] of them.
fn recorded_command(command: &[String]) -> Vec<String> {
    let mut out: Vec<String> = command
        .iter()
        .take(MAX_ARGS)
        .map(|a| clip(a, MAX_ARG_BYTES))
        .collect();
    if command.len() > MAX_ARGS {
        out.push(format!("…{} more", command.len() - MAX_ARGS));
    }
    out
}

fn program_name(program: &str) -> String {
    std::path::Path::new(program)
        .file_name()
        .map_or_else(|| program.to_owned(), |n| n.to_string_lossy().into_owned())
}

/// How a launched command is wired beyond the ledger: where its stdin comes from, extra
/// environment, and whether its stdout is kept (the reviewer's verdict) instead of passed
/// through.
#[derive(Default)]
pub struct Wiring {
    pub stdin: Option<std::fs::File>,
    pub env: Vec<(String, String)>,
    /// Keep stdout (up to [`MAX_CAPTURED`](crate::child::MAX_CAPTURED) bytes) instead of passing it through.
    pub capture: bool,
    /// A reviewer command, run through `sh -c`: the ledger records it as given (not the
    /// shell), and for no participant — a reviewer holds none of its invoker's work, so
    /// its crash gives back nothing of the invoker's and its run is no load of theirs.
    pub reviewer: Option<String>,
}

/// A launched command's end, as recorded in the ledger.
pub struct Launched {
    pub run: String,
    pub status: RunStatus,
    pub signal: Option<i32>,
    pub reason: Option<String>,
    /// The exit code `baton run` exits with.
    pub exit: i32,
    /// Its stdout, when captured.
    pub stdout: Vec<u8>,
}

pub async fn run(ctx: &Context, args: RunArgs) -> CommandResult<Output> {
    let launched = launch(ctx, &args, Wiring::default()).await?;
    if launched.status == RunStatus::Done {
        return Ok(Output::nothing());
    }
    let code = u8::try_from(launched.exit).unwrap_or(1);
    let mut error = CommandError::new(ErrorKind::Run(code), launched.reason.unwrap_or_default());
    error.run = Some(RunEnd {
        run: launched.run,
        status: launched.status,
    });
    Err(error)
}

/// Runs `args.command` as a ledger row (the launch wrapper itself), wired as `wiring` says.
pub async fn launch(ctx: &Context, args: &RunArgs, wiring: Wiring) -> CommandResult<Launched> {
    let captured = Captured::default();
    let slots = args.slots.unwrap_or(ctx.project.config.slots);
    if slots == 0 {
        return Err(CommandError::usage("--slots must be at least 1"));
    }
    if args.steps == Some(0) {
        return Err(CommandError::usage(
            "--steps must be at least 1 (leave it out when the work has no known number of steps)",
        ));
    }
    let me = ctx.maybe_me().await?;
    let actor = ctx.actor().await?;
    let order = match &args.order {
        Some(text) => Some(ctx.order_named(text).await?),
        None => None,
    };
    let admission = admit(&ctx.project.root, args.writer, slots, args.wait)?;

    // Handlers first: a signal from here on is ours to forward, never a silent death.
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;

    let id = baton_store::new_id().to_string();
    let heartbeat = ctx.project.config.heartbeat;
    let me_pid = std::process::id();
    let (participant, command) = match &wiring.reviewer {
        Some(reviewer) => (None, vec![reviewer.clone()]),
        None => (me.as_ref().map(|m| m.to_string()), args.command.clone()),
    };
    let program = command[0].split_whitespace().next().unwrap_or_default();
    let registration = Registration {
        run: id.clone(),
        participant,
        order,
        agent: Some(program_name(program)),
        command: recorded_command(&command),
        cwd: std::env::current_dir()
            .ok()
            .map(|d| d.display().to_string()),
        host: host(),
        monitor: Some(ProcessRef {
            pid: me_pid,
            start: start_time(me_pid),
        }),
        process: None,
        budget_tokens: args.budget_tokens,
        steps: args.steps,
        heartbeat_ms: Some(heartbeat.as_millis() as u64),
        expect_receipts: args.expect_receipts.clone(),
        writer: args.writer,
        slot: Some(admission.slot),
    };
    let registered = ctx
        .app()?
        .record_run(&actor, &[RunChange::Registered(Box::new(registration))])
        .await?;
    let registered_seq = registered.first().map_or(0, |e| e.seq);
    let ledger = Ledger {
        ctx,
        actor: &actor,
        id: &id,
    };

    // A signal that arrived while the row was being written: the command never starts.
    let early = tokio::select! {
        biased;
        _ = sigint.recv() => Some(Signal::SIGINT),
        _ = sigterm.recv() => Some(Signal::SIGTERM),
        _ = sighup.recv() => Some(Signal::SIGHUP),
        () = std::future::ready(()) => None,
    };
    if let Some(sig) = early {
        let outcome = Outcome {
            status: RunStatus::Stopped,
            exit_code: None,
            signal: Some(sig as i32),
            reason: Some(format!("{sig} arrived before the command started")),
            exit: 128 + sig as i32,
        };
        return Ok(finish(&ledger, None, outcome, &captured).await);
    }

    let mut command = std::process::Command::new(&args.command[0]);
    command
        .args(&args.command[1..])
        .process_group(0)
        .stdin(match wiring.stdin {
            Some(file) => Stdio::from(file),
            None => Stdio::inherit(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("BATON_RUN", &id)
        .env("BATON_PROJECT", &ctx.project.root)
        .envs(wiring.env.iter().map(|(k, v)| (k, v)));
    if let Some(me) = &me {
        command.env("BATON_AS", me.as_str());
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let outcome = Outcome {
                status: RunStatus::Failed,
                exit_code: Some(127),
                signal: None,
                reason: Some(format!("could not start {:?}: {e}", args.command[0])),
                exit: 127,
            };
            return Ok(finish(&ledger, None, outcome, &captured).await);
        }
    };
    let pid = child.id();
    ledger
        .record(RunChange::Started {
            run: id.clone(),
            process: ProcessRef {
                pid,
                start: start_time(pid),
            },
            pgid: pid,
        })
        .await;

    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let tx = seen_tx.clone();
    // Token usage is read from stdout only; what the command line says about a Codex
    // thread decides what its first total counts for.
    let out_parser = OutputParser::for_command(args.steps, &args.command);
    let err_parser = OutputParser::new(args.steps);
    if wiring.capture {
        let to = captured.clone();
        std::thread::spawn(move || pump(stdout, to, out_parser, true, tx));
    } else {
        std::thread::spawn(move || pump(stdout, std::io::stdout(), out_parser, true, tx));
    }
    std::thread::spawn(move || pump(stderr, std::io::stderr(), err_parser, false, seen_tx));
    let (exit_tx, mut exited) = tokio::sync::oneshot::channel::<std::io::Result<ExitStatus>>();
    std::thread::spawn(move || {
        let _ = exit_tx.send(child.wait());
    });

    let group = Pid::from_raw(pid as i32);
    let start = tokio::time::Instant::now();
    let mut beats = tokio::time::interval_at(start + heartbeat, heartbeat);
    let mut reports = tokio::time::interval_at(start + REPORT_EVERY, REPORT_EVERY);
    let mut state = Observed::default();
    let mut forwarded: Option<Signal> = None;
    let mut budget_stop: Option<u64> = None;
    let mut kill_at: Option<tokio::time::Instant> = None;
    let status = loop {
        let kill_timer = async {
            match kill_at {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            got = &mut exited => {
                break got.unwrap_or_else(|_| Err(std::io::Error::other("the command's waiter ended")));
            }
            _ = sigint.recv() => forwarded = Some(forward(group, Signal::SIGINT)),
            _ = sigterm.recv() => forwarded = Some(forward(group, Signal::SIGTERM)),
            _ = sighup.recv() => forwarded = Some(forward(group, Signal::SIGHUP)),
            Some(s) = seen.recv() => {
                state.take(s);
                if budget_stop.is_none()
                    && let Some(spent) = over_budget(state.tokens.as_ref(), args.budget_tokens)
                {
                    budget_stop = Some(spent);
                    forward(group, Signal::SIGTERM);
                    kill_at = Some(tokio::time::Instant::now() + BUDGET_GRACE);
                }
            }
            _ = beats.tick() => {
                ledger.record(RunChange::Heartbeat { run: id.clone(), active_at: state.active_at }).await;
            }
            _ = reports.tick(), if state.dirty => {
                if let Some(report) = state.report(&id) {
                    ledger.record(report).await;
                }
            }
            () = kill_timer => {
                forward(group, Signal::SIGKILL);
                kill_at = None;
            }
        }
    };

    // The streams usually close with the command; read what is left, briefly.
    let drain_until = Instant::now() + DRAIN_GRACE;
    while state.closed < 2 {
        let left = drain_until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, seen.recv()).await {
            Ok(Some(s)) => state.take(s),
            Ok(None) | Err(_) => break,
        }
    }
    let final_report = state.report(&id);

    let outcome = match status {
        Err(e) => Outcome {
            status: RunStatus::Failed,
            exit_code: None,
            signal: None,
            reason: Some(format!("the command's exit status could not be read: {e}")),
            exit: 1,
        },
        Ok(status) => {
            decide(
                ctx,
                args,
                registered_seq,
                &id,
                status,
                forwarded,
                budget_stop.or_else(|| over_budget(state.tokens.as_ref(), args.budget_tokens)),
            )
            .await
        }
    };
    drop(admission);
    Ok(finish(&ledger, final_report, outcome, &captured).await)
}

/// What the readers have reported so far, and what is not yet written.
#[derive(Default)]
struct Observed {
    active_at: Option<i64>,
    progress: Option<Progress>,
    tokens: Option<TokenUsage>,
    dirty: bool,
    closed: u8,
}

impl Observed {
    fn take(&mut self, seen: Seen) {
        match seen {
            Seen::Active(at) => self.active_at = Some(at),
            Seen::Progress(p) => {
                self.progress = Some(p);
                self.dirty = true;
            }
            Seen::Tokens(t) => {
                self.tokens = Some(t);
                self.dirty = true;
            }
            Seen::Closed => self.closed += 1,
        }
    }

    /// The report to write, when something changed since the last one.
    fn report(&mut self, id: &str) -> Option<RunChange> {
        if !self.dirty {
            return None;
        }
        self.dirty = false;
        Some(RunChange::Reported {
            run: id.to_owned(),
            progress: self.progress,
            tokens: self.tokens,
        })
    }
}

/// Sends `sig` to the command's process group; a group already gone is not an error.
fn forward(group: Pid, sig: Signal) -> Signal {
    let _ = killpg(group, sig);
    sig
}

/// Copies one stream of the command to ours, unchanged, and reads its lines on the way.
fn pump(
    from: impl Read,
    to: impl Write,
    mut parser: OutputParser,
    tokens: bool,
    tx: mpsc::UnboundedSender<Seen>,
) {
    let mut last_active = 0;
    child::copy(from, to, |piece| match piece {
        Piece::Bytes => {
            let at = now();
            if at - last_active >= 1000 {
                last_active = at;
                let _ = tx.send(Seen::Active(at));
            }
        }
        Piece::Line(line) => {
            let parsed = parser.line(&String::from_utf8_lossy(line));
            if let Some(p) = parsed.progress {
                let _ = tx.send(Seen::Progress(p));
            }
            if let (true, Some(t)) = (tokens, parsed.tokens) {
                let _ = tx.send(Seen::Tokens(t));
            }
        }
        // Too long to be a progress or token line.
        Piece::Cut(_) => {}
    });
    let _ = tx.send(Seen::Active(now()));
    let _ = tx.send(Seen::Closed);
}

/// How the run ends: the fact recorded and the exit code.
struct Outcome {
    status: RunStatus,
    exit_code: Option<i32>,
    signal: Option<i32>,
    reason: Option<String>,
    exit: i32,
}

async fn decide(
    ctx: &Context,
    args: &RunArgs,
    registered_seq: i64,
    id: &str,
    status: ExitStatus,
    forwarded: Option<Signal>,
    over: Option<u64>,
) -> Outcome {
    let code = status.code();
    if let (Some(spent), Some(budget)) = (over, args.budget_tokens) {
        return Outcome {
            status: RunStatus::Failed,
            exit_code: code,
            signal: status.signal(),
            reason: Some(format!(
                "budget: {spent} tokens reported, over the budget of {budget}; the command was stopped"
            )),
            exit: 125,
        };
    }
    if let Some(sig) = forwarded.map(|s| s as i32).or(status.signal()) {
        let name =
            Signal::try_from(sig).map_or_else(|_| format!("signal {sig}"), |s| s.to_string());
        return Outcome {
            status: RunStatus::Stopped,
            exit_code: code,
            signal: Some(sig),
            reason: Some(format!("stopped by {name}")),
            exit: 128 + sig,
        };
    }
    let code = code.unwrap_or(1);
    if code != 0 {
        return Outcome {
            status: RunStatus::Failed,
            exit_code: Some(code),
            signal: None,
            reason: Some(format!("the command exited with {code}")),
            exit: code,
        };
    }
    let missing = match ctx
        .local()
        .missing_receipts(&args.expect_receipts, registered_seq, id)
        .await
    {
        Ok(missing) => missing,
        Err(e) => {
            return Outcome {
                status: RunStatus::Failed,
                exit_code: Some(0),
                signal: None,
                reason: Some(format!("the expected receipts could not be checked: {e}")),
                exit: 1,
            };
        }
    };
    if !missing.is_empty() {
        let steps = missing.join(", ");
        return Outcome {
            status: RunStatus::Failed,
            exit_code: Some(0),
            signal: None,
            reason: Some(format!(
                "exited 0 without a receipt for step {steps}: the step must record its output \
                 with `baton receipt write --step STEP --artifact PATH` during the run"
            )),
            exit: MISSING_RECEIPT_EXIT,
        };
    }
    Outcome {
        status: RunStatus::Done,
        exit_code: Some(0),
        signal: None,
        reason: None,
        exit: 0,
    }
}

/// Writes to the ledger while the command runs. A failed write must not stop the command:
/// it is reported on stderr and the run goes on (the reaper reconciles a run that could
/// not record its end).
struct Ledger<'a> {
    ctx: &'a Context,
    actor: &'a str,
    id: &'a str,
}

impl Ledger<'_> {
    async fn record(&self, change: RunChange) {
        if let Err(e) = self.ctx.local().record_run(self.actor, &[change]).await {
            eprintln!(
                "baton: run {}: could not record to the ledger: {e}",
                self.id
            );
        }
    }
}

/// Records the end. After the command has run, stdout is the command's: the caller
/// prints nothing for a run that ended `done`; any other end is an error whose exit code
/// is the outcome's.
async fn finish(
    ledger: &Ledger<'_>,
    report: Option<RunChange>,
    outcome: Outcome,
    captured: &Captured,
) -> Launched {
    let mut changes: Vec<RunChange> = report.into_iter().collect();
    changes.push(RunChange::Exited {
        run: ledger.id.to_owned(),
        status: outcome.status,
        exit_code: outcome.exit_code,
        signal: outcome.signal,
        reason: outcome.reason.clone(),
    });
    if let Err(e) = ledger.ctx.local().record_run(ledger.actor, &changes).await {
        eprintln!(
            "baton: run {}: the exit could not be recorded ({e}); `baton reap` will mark the run lost",
            ledger.id
        );
    }
    let stdout = captured.take();
    Launched {
        run: ledger.id.to_owned(),
        status: outcome.status,
        signal: outcome.signal,
        reason: outcome.reason,
        exit: outcome.exit,
        stdout,
    }
}
