//! `baton runs`: the run ledger as a table, with health derived at read time.

use baton_core::packet::clip;
use baton_core::run::{Health, HealthPolicy, Run, health};
use baton_core::time::age;
use baton_store::{RunQuery, Store};
use clap::Args;
use serde_json::{Value, json};

use crate::commands::Context;
use crate::error::CommandResult;
use crate::output::{Output, now, table, timestamp};

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

fn policy(ctx: &Context) -> HealthPolicy {
    let c = &ctx.project.config;
    HealthPolicy {
        idle_after_ms: c.idle_after.as_millis() as i64,
        stalled_after_ms: c.stalled_after.as_millis() as i64,
        ..HealthPolicy::default()
    }
}

fn row(run: &Run, health: Health, now: i64) -> Value {
    json!({
        "id": run.id,
        "status": run.status,
        "health": health,
        "participant": run.participant,
        "order": run.order,
        "agent": run.agent,
        "command": run.command,
        "host": run.host,
        "pid": run.process.map(|p| p.pid),
        "monitor_pid": run.monitor.map(|p| p.pid),
        "exit_code": run.exit_code,
        "signal": run.signal,
        "reason": run.reason,
        "progress": run.progress,
        "tokens": run.tokens.map(|t| json!({
            "input": t.input,
            "cached_input": t.cached_input,
            "output": t.output,
            "total": t.total(),
        })),
        "budget_tokens": run.budget_tokens,
        "session": run.session,
        "registered_at": timestamp(run.registered_at),
        "started_at": run.started_at.map(timestamp),
        "heartbeat_at": run.heartbeat_at.map(timestamp),
        "last_event_at": timestamp(run.last_event_at),
        "ended_at": run.ended_at.map(timestamp),
        "idle_ms": run.ended_at.is_none().then(|| (now - run.last_event_at).max(0)),
    })
}

fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

pub async fn run(ctx: &Context, args: RunsArgs) -> CommandResult<Output> {
    let now = now();
    let query = RunQuery {
        ended_since: (!args.all).then_some(now - RECENT_MS),
        ..RunQuery::default()
    };
    let runs = ctx.store.runs(&query).await?;
    let policy = policy(ctx);
    let mut items = Vec::new();
    let mut rows = Vec::new();
    for run in &runs {
        let health = health(run, now, &policy);
        items.push(row(run, health, now));
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
            health.to_string(),
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
    Ok(Output::new(
        "baton/runs@1",
        json!({ "items": items }),
        human,
    ))
}
