//! Project memory: `baton focus`, `stream`, `decide`, `constrain`, `note`, `session end`,
//! `state show|render|import` and `check`.

use std::path::{Path, PathBuf};

use baton_app::doc::{self, Checked, StateImport, StateRendered};
use baton_app::ops;
use baton_app::recall::note_line;
use baton_core::Refusal;
use baton_core::state::StateOp;
use baton_core::statefile::{self, Snapshot, Verdict};
use baton_store::StoreError;
use clap::{Args, Subcommand};

use crate::commands::Context;
use crate::error::{CommandError, CommandResult, ErrorKind};
use crate::output::{Output, table, timestamp};

/// Set the project's focus: one line saying what matters now.
#[derive(Subcommand, Debug)]
pub enum FocusCommand {
    /// Replace the focus.
    #[command(after_help = "Example:\n  baton focus set 'Ship the CSV export fix'")]
    Set { text: String },
}

/// Active streams of work, each with a status.
#[derive(Subcommand, Debug)]
pub enum StreamCommand {
    /// Start a stream or update its status.
    #[command(after_help = "Example:\n  baton stream set export --status 'fixing filters'")]
    Set {
        name: String,
        #[arg(long)]
        status: String,
    },
    /// Finish a stream: it leaves the active view (the log keeps it).
    #[command(after_help = "Example:\n  baton stream done export")]
    Done { name: String },
}

/// Record a decision, `D-N`: immutable, superseded only by a later decision.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton decide 'Store state in SQLite' --why 'embedded, one file'\n  \
                  baton decide 'Use PostgreSQL for teams' --why 'several machines' --supersedes D-1"
)]
pub struct DecideArgs {
    pub text: String,
    #[arg(long)]
    pub why: String,
    #[arg(long, value_name = "D-N")]
    pub supersedes: Option<String>,
}

/// Record a constraint, `C-N`: what was tried, what happened. Read before every plan.
#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  baton constrain 'No network in CI' --tried 'downloading fixtures' --result 'connection refused'"
)]
pub struct ConstrainArgs {
    pub text: String,
    #[arg(long)]
    pub tried: String,
    #[arg(long)]
    pub result: String,
}

/// Write a note about a path, message or order, `N-N`. It reads as stale once its subject
/// changes (a later commit or edit of the path; a later event on the record).
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton note 'Parser assumes UTF-8' --subject src/parse.rs\n  baton note 'Waiting on fixtures' --subject 01JD3M..."
)]
pub struct NoteArgs {
    pub text: String,
    #[arg(long, value_name = "PATH|ORDER|MESSAGE")]
    pub subject: String,
}

/// End a session: hand over what was completed, decided, discovered and changed, in one
/// transaction.
///
/// `--completed NAME` finishes an active stream. `--decision 'TEXT :: WHY'`,
/// `--constraint 'TEXT :: TRIED :: RESULT'`, `--resume-at 'FIRST ACTION'` (what the next
/// session does first; it heads the resume packet). Or `--file F` with
/// `{"completed": [...], "decisions": [{"text", "why", "supersedes"?}], "constraints":
/// [{"text", "tried", "result"}], "dependency_changes": [...], "resume_at": "..."}`.
#[derive(Subcommand, Debug)]
pub enum SessionCommand {
    #[command(
        after_help = "Example:\n  baton session end --completed export --decision 'Keep filters in the query :: one code path' \\\n    \
                      --constraint 'Fixtures are read-only :: writing them :: permission denied' --dependency-change 'csv 1.3 → 1.4' \\\n    \
                      --resume-at 'run cargo test -p export csv_filters'"
    )]
    End(SessionEndArgs),
}

#[derive(Args, Debug)]
pub struct SessionEndArgs {
    #[arg(long, value_name = "STREAM")]
    pub completed: Vec<String>,
    #[arg(long, value_name = "TEXT :: WHY")]
    pub decision: Vec<String>,
    #[arg(long, value_name = "TEXT :: TRIED :: RESULT")]
    pub constraint: Vec<String>,
    #[arg(long, value_name = "TEXT")]
    pub dependency_change: Vec<String>,
    /// The first action the next session takes (a concrete step, never "continue").
    #[arg(long, value_name = "FIRST ACTION")]
    pub resume_at: Option<String>,
    /// A JSON file with the same four lists and `resume_at`.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
}

/// The project state: show it, render STATE.md, import a human-edited STATE.md.
#[derive(Subcommand, Debug)]
pub enum StateCommand {
    /// Print the state (stale notes marked stale).
    #[command(after_help = "Example:\n  baton state show --json")]
    Show,
    /// Write STATE.md: Markdown for people, a checksummed machine block for tools.
    /// Written to a temporary file, fsync'd, then renamed: never half a file.
    #[command(after_help = "Example:\n  baton state render --out STATE.md")]
    Render {
        #[arg(long, value_name = "FILE", default_value = "STATE.md")]
        out: PathBuf,
    },
    /// Apply the edits made to a STATE.md's tables, if the file is valid and not stale.
    #[command(after_help = "Example:\n  baton state import STATE.md --dry-run")]
    Import {
        file: PathBuf,
        /// Print what would change and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// Check a rendered STATE.md: valid, truncated (exit 3), stale (exit 6) or drifted
/// (exit 2: a person must fix the prose).
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  baton check STATE.md && echo current")]
pub struct CheckArgs {
    pub file: PathBuf,
}

fn one(recorded: &doc::Recorded, human: String) -> Output {
    Output::of(recorded, human)
}

pub async fn focus(ctx: &Context, cmd: FocusCommand) -> CommandResult<Output> {
    let FocusCommand::Set { text } = cmd;
    let recorded = ctx.call::<ops::Focus>(ops::FocusInput { text }).await?;
    Ok(one(&recorded, "Focus set.".into()))
}

pub async fn stream(ctx: &Context, cmd: StreamCommand) -> CommandResult<Output> {
    let (recorded, human) = match cmd {
        StreamCommand::Set { name, status } => {
            let human = format!("Stream {name} updated.");
            let input = ops::StreamInput { name, status };
            (ctx.call::<ops::Stream>(input).await?, human)
        }
        StreamCommand::Done { name } => {
            let human = format!("Stream {name} done: it left the active view.");
            let input = ops::StreamDoneInput { name };
            (ctx.call::<ops::StreamDone>(input).await?, human)
        }
    };
    Ok(one(&recorded, human))
}

pub async fn decide(ctx: &Context, args: DecideArgs) -> CommandResult<Output> {
    let input = ops::DecideInput {
        text: args.text,
        why: args.why,
        supersedes: args.supersedes,
    };
    let recorded = ctx.call::<ops::Decide>(input).await?;
    Ok(one(&recorded, recorded.recorded.join("")))
}

pub async fn constrain(ctx: &Context, args: ConstrainArgs) -> CommandResult<Output> {
    let input = ops::ConstrainInput {
        text: args.text,
        tried: args.tried,
        result: args.result,
    };
    let recorded = ctx.call::<ops::Constrain>(input).await?;
    Ok(one(&recorded, recorded.recorded.join("")))
}

pub async fn note(ctx: &Context, args: NoteArgs) -> CommandResult<Output> {
    // A path is given from the working directory; the operation takes it from the root.
    let subject = ctx.rooted(&args.subject)?;
    let input = ops::NoteInput {
        text: args.text,
        subject,
    };
    let recorded = ctx.call::<ops::Note>(input).await?;
    Ok(one(&recorded, recorded.recorded.join("")))
}

fn split_parts<const N: usize>(flag: &str, value: &str) -> CommandResult<[String; N]> {
    let parts: Vec<String> = value.split("::").map(|p| p.trim().to_owned()).collect();
    parts.try_into().map_err(|parts: Vec<String>| {
        CommandError::usage(format!(
            "{flag} {value:?} has {} part(s) separated by `::`, expected {N}",
            parts.len()
        ))
    })
}

pub async fn session(ctx: &Context, cmd: SessionCommand) -> CommandResult<Output> {
    let SessionCommand::End(args) = cmd;
    let mut handover: ops::Handover = match &args.file {
        Some(path) => {
            let text = crate::files::read_text(path, crate::files::MAX_FILE_BYTES, "--file")?;
            baton_core::json::check_text(&text, baton_core::json::MAX_DEPTH)
                .map_err(|e| CommandError::refused(format!("--file {}: {e}", path.display())))?;
            serde_json::from_str(&text)
                .map_err(|e| CommandError::refused(format!("--file {}: {e}", path.display())))?
        }
        None => ops::Handover::default(),
    };
    handover.completed.extend(args.completed);
    for d in &args.decision {
        let [text, why] = split_parts("--decision", d)?;
        handover.decisions.push(ops::DecideInput {
            text,
            why,
            supersedes: None,
        });
    }
    for c in &args.constraint {
        let [text, tried, result] = split_parts("--constraint", c)?;
        handover.constraints.push(ops::ConstrainInput {
            text,
            tried,
            result,
        });
    }
    handover.dependency_changes.extend(args.dependency_change);
    if args.resume_at.is_some() {
        handover.resume_at = args.resume_at;
    }
    if handover.completed.is_empty()
        && handover.decisions.is_empty()
        && handover.constraints.is_empty()
        && handover.dependency_changes.is_empty()
        && handover.resume_at.is_none()
    {
        return Err(CommandError::usage(
            "nothing to hand over: pass --completed, --decision, --constraint, \
             --dependency-change, --resume-at or --file",
        ));
    }
    let recorded = ctx.call::<ops::SessionEnd>(handover).await?;
    let human = format!(
        "Session handed over in one transaction: {}",
        recorded.recorded.join(", ")
    );
    Ok(one(&recorded, human))
}

pub async fn state(ctx: &Context, cmd: StateCommand) -> CommandResult<Output> {
    match cmd {
        StateCommand::Show => show(ctx).await,
        StateCommand::Render { out } => render(ctx, &out).await,
        StateCommand::Import { file, dry_run } => import(ctx, &file, dry_run).await,
    }
}

async fn show(ctx: &Context) -> CommandResult<Output> {
    let state = ctx.call::<ops::StateShow>(ops::Nothing {}).await?;
    let mut human = format!("generation {}\n", state.generation);
    human.push_str(&format!(
        "\nFocus: {}\n",
        state.focus.as_deref().unwrap_or("(none)")
    ));
    let streams: Vec<Vec<String>> = state
        .streams
        .iter()
        .map(|s| vec![s.name.clone(), s.status.clone()])
        .collect();
    human.push_str("\nStreams\n");
    human.push_str(&table(&["STREAM", "STATUS"], &streams));
    let decisions: Vec<Vec<String>> = state
        .decisions
        .iter()
        .map(|d| {
            vec![
                d.id.clone(),
                d.superseded_by
                    .as_ref()
                    .map_or("current".into(), |n| format!("superseded by {n}")),
                d.text.clone(),
                d.why.clone(),
            ]
        })
        .collect();
    human.push_str("\nDecisions\n");
    human.push_str(&table(&["ID", "STATUS", "DECISION", "WHY"], &decisions));
    let constraints: Vec<Vec<String>> = state
        .constraints
        .iter()
        .map(|c| {
            vec![
                c.id.clone(),
                c.text.clone(),
                c.tried.clone(),
                c.result.clone(),
            ]
        })
        .collect();
    human.push_str("\nConstraints\n");
    human.push_str(&table(
        &["ID", "CONSTRAINT", "TRIED", "RESULT"],
        &constraints,
    ));
    human.push_str("\nNotes\n");
    for row in &state.notes {
        human.push_str(&format!("- {}\n", note_line(&row.note, &row.freshness)));
    }
    Ok(Output::of(&state, human))
}

async fn render(ctx: &Context, out: &Path) -> CommandResult<Output> {
    let state = ctx.app()?.state().await?;
    let text = statefile::render(&Snapshot::of(&state), timestamp);
    let path = if out.is_absolute() {
        out.to_owned()
    } else {
        std::env::current_dir()?.join(out)
    };
    crate::files::write_atomically(&path, text.as_bytes())?;
    let doc = StateRendered {
        path: path.display().to_string(),
        generation: state.generation,
        bytes: text.len(),
    };
    Ok(Output::of(
        &doc,
        format!(
            "Wrote {} (generation {}, {} bytes)",
            path.display(),
            state.generation,
            text.len()
        ),
    ))
}

/// A file's bytes, or exit 4 naming why they cannot be read.
fn read_file(file: &Path) -> CommandResult<Vec<u8>> {
    crate::files::read(file, crate::files::MAX_FILE_BYTES, "")
}

fn verdict_error(file: &Path, verdict: Verdict) -> CommandError {
    let f = file.display();
    match verdict {
        Verdict::Truncated(why) => CommandError::new(
            ErrorKind::Refused,
            format!(
                "{f} is TRUNCATED or corrupted; do not act on it. Re-render with `baton state render`.\n  - {}",
                why.join("\n  - ")
            ),
        ),
        Verdict::Stale { file, store } => CommandError::new(
            ErrorKind::Conflict,
            format!(
                "{f} is STALE: it shows generation {file}, the store is at {store}. Re-render with \
                 `baton state render` (and redo any edits on the new file)."
            ),
        ),
        Verdict::Drifted(why) => CommandError::new(
            ErrorKind::Usage,
            format!(
                "{f} has DRIFTED from the schema; a person must restore the section and column \
                 names before it can be read:\n  - {}",
                why.join("\n  - ")
            ),
        ),
        Verdict::Valid { .. } => unreachable!("a valid file is not an error"),
    }
}

pub async fn check(ctx: &Context, args: CheckArgs) -> CommandResult<Output> {
    match ctx.app()?.judge_state_file(&read_file(&args.file)?).await? {
        Verdict::Valid { snapshot, .. } => Ok(Output::of(
            &Checked {
                file: args.file.display().to_string(),
                verdict: "valid".into(),
                generation: snapshot.generation,
            },
            format!(
                "{} is valid and current (generation {})",
                args.file.display(),
                snapshot.generation
            ),
        )),
        other => Err(verdict_error(&args.file, other)),
    }
}

async fn import(ctx: &Context, file: &Path, dry_run: bool) -> CommandResult<Output> {
    let actor = ctx.actor().await?;
    let imported = match ctx
        .app()?
        .import_state_file(&actor, &read_file(file)?, dry_run)
        .await
    {
        Ok(Ok(imported)) => imported,
        Ok(Err(verdict)) => return Err(verdict_error(file, verdict)),
        Err(StoreError::Refused(Refusal::StateEdits { refused })) => {
            return Err(CommandError::refused(format!(
                "{} has edits that cannot be imported; nothing was changed:\n  - {}",
                file.display(),
                refused.join("\n  - ")
            )));
        }
        Err(e) => return Err(e.into()),
    };
    let ops = imported.ops;
    let mut human = if ops.is_empty() {
        "No changes: the tables match the store.".to_owned()
    } else {
        format!(
            "{} change(s){}:\n",
            ops.len(),
            if dry_run {
                " (dry run: nothing written)"
            } else {
                ""
            }
        )
    };
    for op in &ops {
        human.push_str(&format!("  - {}\n", describe(op)));
    }
    if !imported.recorded.is_empty() {
        human.push_str(&format!("Recorded: {}", imported.recorded.join(", ")));
    }
    let doc = StateImport {
        dry_run,
        changes: ops,
        recorded: imported.recorded,
    };
    Ok(Output::of(&doc, human))
}

fn describe(op: &StateOp) -> String {
    match op {
        StateOp::Focus { text } => format!("focus → {text:?}"),
        StateOp::Stream { name, status } => format!("stream {name} → {status:?}"),
        StateOp::StreamDone { name } => format!("stream {name} done"),
        StateOp::Decide {
            text, supersedes, ..
        } => match supersedes {
            Some(old) => format!("new decision superseding {old}: {text:?}"),
            None => format!("new decision: {text:?}"),
        },
        StateOp::Constrain { text, .. } => format!("new constraint: {text:?}"),
        StateOp::Note { text, subject } => {
            format!("new note on {}: {text:?}", subject.label())
        }
        other => format!("{other:?}"),
    }
}
