//! `baton queue` and `baton need`: the human queue at the command line — the
//! lanes computed by the app, a need raised by hand, an item acknowledged.

use baton_app::doc::TrackRecords;
use baton_core::queue::Lane;
use clap::{Args, Subcommand};

use crate::commands::Context;
use crate::error::{CommandError, CommandResult};
use crate::output::{Output, table};

/// Show what needs a person, computed from the log: failed runs (last 2 h), unresolved
/// reviews, needs raised by hand or by agent sessions, requests past their service target,
/// and orders waiting on their owner.
///
/// Lanes: failures, reviews, needs, approvals; at most five items each, newest signal first,
/// with a count of what was held back. An item acknowledged (`baton queue ack ID`) stays
/// away until a newer signal; a failed run goes once a later run for the same order or with
/// the same command succeeded; one item per order (the newest).
#[derive(Args, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Examples:\n  baton queue\n  baton --json queue --lane reviews\n  baton --as owner queue ack review:wo_42"
)]
pub struct QueueArgs {
    /// Only this lane: failures, reviews, needs or approvals.
    #[arg(long, value_name = "LANE")]
    pub lane: Option<String>,
    #[command(subcommand)]
    pub command: Option<QueueCommand>,
}

#[derive(Subcommand, Debug)]
pub enum QueueCommand {
    /// Acknowledge an item: it leaves the queue until a newer signal about it.
    Ack(AckArgs),
}

#[derive(Args, Debug)]
pub struct AckArgs {
    /// The item's id, as `baton queue` shows it (e.g. run:01J…, review:wo_42).
    pub id: String,
}

/// Raise a need for a person: it appears in `baton queue` (lane needs).
#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  baton --as impl-1 need 'which fixture is canonical?' --order wo_42"
)]
pub struct NeedArgs {
    /// What is needed, in a sentence.
    pub text: String,
    /// The order it is about.
    #[arg(long, value_name = "ID")]
    pub order: Option<String>,
}

pub async fn queue(ctx: &Context, args: QueueArgs) -> CommandResult<Output> {
    if let Some(QueueCommand::Ack(a)) = args.command {
        let input = baton_app::ops::ItemInput { item: a.id.clone() };
        let doc = ctx.call::<baton_app::ops::AckItem>(input).await?;
        return Ok(Output::of(&doc, format!("{}: acknowledged", a.id)));
    }
    let lane = match &args.lane {
        Some(l) => Some(Lane::parse(l).ok_or_else(|| {
            CommandError::usage(format!(
                "--lane {l:?}: use failures, reviews, needs or approvals"
            ))
        })?),
        None => None,
    };
    let input = baton_app::ops::QueueInput { lane };
    let doc = ctx.call::<baton_app::ops::QueueShow>(input).await?;
    let mut human = String::new();
    for l in &doc.lanes {
        human.push_str(&format!("{} ({})\n", l.lane.as_str(), l.items.len()));
        for i in &l.items {
            human.push_str(&format!(
                "  {}  {}  {}{}\n",
                i.id,
                i.at,
                i.text,
                i.label
                    .as_deref()
                    .map(|x| format!(" [{x}]"))
                    .unwrap_or_default()
            ));
        }
        if l.held_back > 0 {
            human.push_str(&format!("  +{} held back\n", l.held_back));
        }
    }
    Ok(Output::of(&doc, human.trim_end().to_owned()))
}

pub async fn need(ctx: &Context, args: NeedArgs) -> CommandResult<Output> {
    let input = baton_app::ops::NeedInput {
        text: args.text,
        order: args.order,
    };
    let doc = ctx.call::<baton_app::ops::Need>(input).await?;
    let human = format!("{}: raised (see `baton queue --lane needs`)", doc.item);
    Ok(Output::of(&doc, human))
}

/// Show each worker's track record, computed from the log: orders, first-time approvals
/// (approved without a rework), rework rounds, failed or lost runs, expiries, INVALID
/// verdicts (a reviewer command is a worker too), and budget spent (tokens from runs, USD
/// from reports).
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  baton record\n  baton --json record impl-1")]
pub struct RecordArgs {
    /// Only this worker.
    pub worker: Option<String>,
}

pub async fn record(ctx: &Context, args: RecordArgs) -> CommandResult<Output> {
    let items = ctx.app()?.track_records(args.worker.as_deref()).await?;
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|r| {
            vec![
                r.worker.clone(),
                r.orders.to_string(),
                r.first_time_approvals.to_string(),
                r.rework_rounds.to_string(),
                r.failures.to_string(),
                r.expiries.to_string(),
                r.invalid_verdicts.to_string(),
                r.tokens.to_string(),
                format!("{:.2}", r.usd),
            ]
        })
        .collect();
    let human = if items.is_empty() {
        "No track record yet.".to_owned()
    } else {
        table(
            &[
                "WORKER",
                "ORDERS",
                "FIRST-TIME",
                "REWORKS",
                "FAILURES",
                "EXPIRIES",
                "INVALID",
                "TOKENS",
                "USD",
            ],
            &rows,
        )
    };
    Ok(Output::of(&TrackRecords { items }, human))
}
