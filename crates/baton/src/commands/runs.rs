//! `baton runs`: the run ledger as a table, with health derived at read time.

use baton_core::packet::clip;
use clap::Args;

use crate::commands::Context;
use crate::error::CommandResult;
use crate::output::{Output, age_of, now, table, visible};

/// List runs: status (a recorded fact), health (derived now), age, idle time, progress,
/// tokens and exit code.
///
/// Without --all: live runs and the 50 newest others. Unknown values read `-` (null in
/// JSON), never 0.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton runs\n  baton runs --all --json\n  baton runs --all --cursor c1f4 --limit 500"
)]
pub struct RunsArgs {
    /// Every run ever recorded, oldest first, a page at a time (`next` in --json output).
    #[arg(long)]
    pub all: bool,
    /// With --all: runs per page.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub limit: u32,
    /// With --all: the page after this cursor (the `next` of the previous page).
    #[arg(long, requires = "all")]
    pub cursor: Option<String>,
}

/// Said under a table with a row whose hooks were skipped (`hooks_skipped`); lines within
/// the width of `baton status`.
pub const HOOKS_SKIPPED: &str =
    "hooks skipped: the agent's notify reached Baton, none of its hooks did.
Codex runs only the hooks a person trusted: review Baton's with /hooks in codex, or start
`codex exec --dangerously-bypass-hook-trust` where .codex/hooks.json is vetted
(README: trusting Baton's hooks).";

/// How much of a command the table shows, in bytes (JSON has all of it).
const COMMAND_SHOWN: usize = 80;

fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

pub async fn run(ctx: &Context, args: RunsArgs) -> CommandResult<Output> {
    let now = now();
    let input = baton_app::ops::RunsInput {
        all: args.all,
        cursor: args.cursor,
        limit: Some(args.limit),
    };
    let doc = ctx.call::<baton_app::ops::RunList>(input).await?;
    let mut rows = Vec::new();
    for run in &doc.items {
        let exit = match (run.exit_code, run.signal) {
            (_, Some(sig)) => format!("sig {sig}"),
            (code, None) => or_dash(code),
        };
        let tokens = run.tokens.as_ref().map(|t| match t.total {
            Some(total) => total.to_string(),
            // What is known spent: the parts reported so far.
            None => format!("≥{}", t.input.unwrap_or(0) + t.output.unwrap_or(0)),
        });
        rows.push(vec![
            visible(&run.id),
            source(run),
            run.status.to_string(),
            or_dash(run.health),
            or_dash(run.participant.as_deref()),
            age_of(&run.registered_at, now),
            if run.ended_at.is_some() {
                "-".to_owned()
            } else {
                age_of(&run.last_event_at, now)
            },
            or_dash(run.progress.map(|p| format!("{}/{}", p.done, p.total))),
            or_dash(tokens),
            exit,
            or_dash(run.pid),
            visible(&clip(&run.what, COMMAND_SHOWN)),
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
                "ID", "SOURCE", "STATUS", "HEALTH", "WHO", "AGE", "IDLE", "PROGRESS", "TOKENS",
                "EXIT", "PID", "COMMAND",
            ],
            &rows,
        )
    };
    let human = if doc.items.iter().any(|r| r.hooks_skipped) {
        format!("{}\n{HOOKS_SKIPPED}\n", human.trim_end())
    } else {
        human
    };
    let human = match &doc.next {
        None => human,
        Some(next) => format!(
            "{}\nMore: baton runs --all --cursor {next}\n",
            human.trim_end()
        ),
    };
    Ok(Output::of(&doc, human))
}

/// Where a row comes from, as the table shows it (escaped: the agent is a hook's word).
fn source(run: &baton_app::doc::RunDoc) -> String {
    visible(&run.source_label())
}
