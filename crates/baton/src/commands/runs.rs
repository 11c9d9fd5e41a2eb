//! `baton runs`: the run ledger as a table, with health derived at read time.

use baton_app::doc::{RunDoc, Runs};
use baton_core::packet::clip;
use baton_core::time::age;
use baton_store::RunQuery;
use clap::Args;

use crate::commands::Context;
use crate::error::CommandResult;
use crate::output::{Output, now, table};

/// List runs: status (a recorded fact), health (derived now), age, idle time, progress,
/// tokens and exit code.
///
/// Without --all: live runs and those that ended in the last hour. Unknown values read
/// `-` (null in JSON), never 0.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  baton runs\n  baton runs --all --json")]
pub struct RunsArgs {
    /// Every run ever recorded.
    #[arg(long)]
    pub all: bool,
}

/// How long an ended run stays in the default view.
const RECENT_MS: i64 = 3_600_000;
/// How much of a command the table shows, in bytes (JSON has all of it).
const COMMAND_SHOWN: usize = 80;

fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

pub async fn run(ctx: &Context, args: RunsArgs) -> CommandResult<Output> {
    let now = now();
    let query = RunQuery {
        ended_since: (!args.all).then_some(now - RECENT_MS),
        ..RunQuery::default()
    };
    let runs = ctx.app.runs(&query).await?;
    let mut items = Vec::new();
    let mut rows = Vec::new();
    for row in &runs {
        let (run, health) = (&row.run, row.health);
        items.push(RunDoc::new(row, now));
        let exit = match (run.exit_code, run.signal) {
            (_, Some(sig)) => format!("sig {sig}"),
            (code, None) => or_dash(code),
        };
        let tokens = run.tokens.map(|t| match t.total() {
            Some(total) => total.to_string(),
            None => format!("≥{}", t.known()),
        });
        rows.push(vec![
            run.id.clone(),
            run.status.to_string(),
            or_dash(health),
            or_dash(run.participant.as_deref()),
            age(run.registered_at, now),
            if run.ended_at.is_some() {
                "-".to_owned()
            } else {
                age(run.last_event_at, now)
            },
            or_dash(run.progress.map(|p| format!("{}/{}", p.done, p.total))),
            or_dash(tokens),
            exit,
            or_dash(run.process.map(|p| p.pid)),
            clip(&run.command.join(" "), COMMAND_SHOWN),
        ]);
    }
    let human = if rows.is_empty() {
        if args.all {
            "No runs recorded.".to_owned()
        } else {
            "No live or recent runs (see `baton runs --all`).".to_owned()
        }
    } else {
        table(
            &[
                "ID", "STATUS", "HEALTH", "WHO", "AGE", "IDLE", "PROGRESS", "TOKENS", "EXIT",
                "PID", "COMMAND",
            ],
            &rows,
        )
    };
    Ok(Output::of(&Runs { items }, human))
}
