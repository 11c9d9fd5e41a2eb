//! `baton reap`: reconciles the ledger with the processes on this machine.
//!
//! The pass itself is `baton_app::App::reap`; this command supplies the machine (`/proc`,
//! in [`crate::host::ProcTable`]) and prints what the pass did, once or on every tick.

use std::time::Duration;

use baton_app::Pass;
use baton_app::doc::Reap;
use clap::Args;

use crate::commands::Context;
use crate::error::{CommandError, CommandResult};
use crate::host::ProcTable;
use crate::output::{Output, visible};
use crate::project::parse_duration;

/// Reconcile runs with the processes on this machine: lost runs, orphaned deliveries,
/// untracked agents.
///
/// A registered or running run whose `baton run` process is gone without a recorded exit
/// becomes lost (with an alert), and the messages its participant fetched during the run
/// are pending again (with an alert). Agent processes (claude, codex, …) not started
/// through `baton run` are recorded as untracked. Each condition alerts once; see
/// `baton alerts`.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  baton reap\n  baton reap --watch --interval 10s")]
pub struct ReapArgs {
    /// Keep reaping, once per --interval, until interrupted.
    #[arg(long)]
    pub watch: bool,
    /// Time between passes with --watch.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "5s",
        requires = "watch"
    )]
    pub interval: String,
}

fn human(pass: &Pass) -> String {
    if pass.is_empty() {
        return "Nothing to reap.".to_owned();
    }
    let mut lines = Vec::new();
    for r in &pass.lost {
        let mut line = format!("lost: run {}", r.run);
        if !r.resurfaced.is_empty() {
            line.push_str(&format!(
                "; {} message(s) pending again: {}",
                r.resurfaced.len(),
                r.resurfaced.join(", ")
            ));
        }
        if !r.alerts.is_empty() {
            line.push_str(&format!(" (alerts {})", r.alerts.join(", ")));
        }
        lines.push(line);
    }
    for id in &pass.untracked {
        lines.push(format!("untracked: {id}"));
    }
    for id in &pass.gone {
        lines.push(format!("gone: untracked {id} has exited"));
    }
    for alert in &pass.overdue {
        lines.push(format!("overdue: {alert}"));
    }
    for id in &pass.ended {
        lines.push(format!("ended: {} fell silent", visible(id)));
    }
    for alert in &pass.held {
        lines.push(format!("held work: {alert}"));
    }
    lines.join("\n")
}

pub async fn run(ctx: &Context, args: ReapArgs, as_json: bool) -> CommandResult<Output> {
    let processes = ProcTable {
        root: ctx.project.root.clone(),
    };
    if !args.watch {
        let pass = ctx.app()?.reap(&processes).await?;
        return Ok(Output::of(&Reap::from(&pass), human(&pass)));
    }
    let interval = parse_duration("--interval", &args.interval).map_err(CommandError::usage)?;
    if interval.is_zero() {
        return Err(CommandError::usage("--interval must be longer than 0s"));
    }
    let mut ticks = tokio::time::interval(interval.max(Duration::from_millis(100)));
    loop {
        ticks.tick().await;
        let pass = ctx.app()?.reap(&processes).await?;
        if !pass.is_empty() {
            let out = Output::of(&Reap::from(&pass), human(&pass));
            print!("{}", out.render(as_json));
            use std::io::Write;
            let _ = std::io::stdout().flush();
        }
    }
}
