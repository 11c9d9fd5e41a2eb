//! `baton export` and `baton import`: a project's event log as JSON lines, to move it
//! between stores, back it up or carry it in git.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;

use baton_app::portable::{line, parse_line};
use clap::Args;

use crate::commands::Context;
use crate::error::{CommandError, CommandResult};
use crate::output::Output;

/// Events read or written per transaction.
const PAGE: u32 = 1000;

/// Print the project's event log as JSON lines (one event a line), oldest first.
///
/// Pipe it to a file, or into `baton import` on another store; --since SEQ starts after
/// that position. Nothing else is printed on stdout.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton export > log.jsonl\n  baton export --since 1200 >> log.jsonl"
)]
pub struct ExportArgs {
    /// Only the events after this log position.
    #[arg(long, default_value_t = 0, value_name = "SEQ")]
    pub since: i64,
}

/// Append the events of a portable log (from `baton export`) to this project's log.
///
/// The whole log is checked first, then applied in one transaction, or nothing is. Events
/// keep their ids and times; those the log holds already are skipped (a line whose id the
/// project holds must be that same event), so importing twice changes nothing. Keys are
/// never imported: issue them again on the new store. A log that does not continue the
/// log of a project with a history of its own (holding every event the project wrote
/// since the first the two share) is another project's, and is refused unless --merge.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton import log.jsonl\n  baton export | baton --project ../copy import -\n  \
                  baton import --merge other-project.jsonl"
)]
pub struct ImportArgs {
    /// The log file, or `-` for stdin.
    pub file: PathBuf,
    /// Take another project's log: its work is added to this project's; this project's
    /// participants keep their roles, policies, outside agents and webhooks; its decisions,
    /// constraints, notes and alerts whose ids this project uses take new ones (printed).
    #[arg(long)]
    pub merge: bool,
}

pub async fn export(ctx: &Context, args: ExportArgs) -> CommandResult<Output> {
    let mut after = args.since;
    let stdout = std::io::stdout();
    loop {
        let page = ctx.app()?.export_page(after, PAGE).await?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        let mut out = stdout.lock();
        for event in &page {
            writeln!(out, "{}", line(event))?;
        }
        out.flush()?;
    }
    Ok(Output::nothing())
}

/// The longest line read: an event carries at most a payload at the cap, and a little more.
fn max_line(cap: usize) -> usize {
    cap.saturating_mul(2).saturating_add(64 * 1024)
}

pub async fn import(ctx: &Context, args: ImportArgs) -> CommandResult<Output> {
    let reader: Box<dyn Read> = if args.file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::fs::File::open(&args.file).map_err(|e| {
            CommandError::new(
                crate::error::ErrorKind::NotFound,
                format!("{}: {e}", args.file.display()),
            )
        })?)
    };
    let limit = max_line(ctx.app()?.settings().payload_cap);
    let mut lines = BufReader::new(reader);
    // The whole log is read and checked first, then applied in one transaction: a bad
    // line anywhere imports nothing.
    let mut events = Vec::new();
    let mut number = 0;
    let mut text = String::new();
    loop {
        text.clear();
        // Read at most one line past the limit, so an endless line is refused, not held.
        let read = (&mut lines).take(limit as u64 + 1).read_line(&mut text)?;
        if read == 0 {
            break;
        }
        number += 1;
        if text.len() > limit {
            return Err(CommandError::refused(format!(
                "{} line {number} is over {limit} bytes: not an event this store would have \
                 written; nothing was imported",
                args.file.display(),
            )));
        }
        let trimmed = text.trim();
        if trimmed.is_empty() {
            continue;
        }
        events.push((number, parse_line(number, trimmed)?));
    }
    let done = ctx.app()?.import(events, args.merge).await?;
    let mut human = format!(
        "Imported {} event(s); {} already in the log were skipped.",
        done.imported, done.skipped
    );
    if done.left_out > 0 {
        human.push_str(&format!(
            " {} left out: keys, which are never imported (issue them again with `baton \
             key issue`), and what this project says of its own participants (policy, \
             outside agent, webhook).",
            done.left_out
        ));
    }
    if !done.renamed.is_empty() {
        human.push_str("\nRenamed (the log's id → this project's):");
        for (from, to) in &done.renamed {
            human.push_str(&format!("\n  {from} → {to}"));
        }
    }
    Ok(Output::of(&done, human))
}
