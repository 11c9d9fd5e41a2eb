//! `baton next`, `baton claim`, `baton pool`: work sent to a role's pool (`--to
//! role:ROLE` on `baton send` and `baton order create`), claimed by exactly one of the
//! role's holders.

use baton_app::doc::{Claimed, PoolRow};
use clap::Args;

use crate::commands::Context;
use crate::error::CommandResult;
use crate::output::{Output, table, visible};

/// Claim the most urgent work ready for you in your role's pool, and print it.
///
/// Ready: sent to your role's pool (`role:ROLE`), unclaimed, not withdrawn by its sender,
/// not past its deadline, not your own, and on a topic your policy lets you take work on.
/// Most urgent: the soonest deadline first (an item with a deadline before one without),
/// then the oldest. The choice and the claim are one transaction, so two executors never
/// get one item. Once claimed it is yours like anything sent to you: an order's worker is
/// you (accept it next), a request is in your inbox. Nothing ready exits 4.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton --as impl-1 next\n  baton --as impl-1 next --topic billing --json\n\n\
                  Exit codes: 0 claimed, 4 nothing ready"
)]
pub struct NextArgs {
    /// Only work on this topic.
    #[arg(long)]
    pub topic: Option<String>,
}

/// Claim one order or request sent to your role's pool, by id.
///
/// Exactly one claimant gets it: another's claim first (or, with --seq, an order that
/// moved past that seq) exits 6 and changes nothing.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton --as impl-1 claim wo_42\n  baton --as impl-1 claim wo_42 --seq 1\n\n\
                  Exit codes: 0 claimed, 6 claimed by another first (or the order moved), \
                  3 not sent to a pool or no longer open, 5 not your role's pool"
)]
pub struct ClaimArgs {
    /// The order's id, or the request's message id (or a unique prefix).
    pub id: String,
    /// Refuse unless the order is still at this seq (as `baton order show` printed it).
    #[arg(long, value_name = "SEQ")]
    pub seq: Option<i64>,
}

/// List what waits unclaimed in your role's pool (or --role's), the most urgent first.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton --as impl-1 pool\n  baton --as planner pool --role executor --json"
)]
pub struct PoolArgs {
    /// Another role's pool.
    #[arg(long, value_name = "ROLE")]
    pub role: Option<String>,
    /// Only this topic.
    #[arg(long)]
    pub topic: Option<String>,
}

/// What a claim took, in words; stored text (a goal, an excerpt) escaped.
fn claimed_text(doc: &Claimed) -> String {
    let item = &doc.item;
    let text = match &doc.order {
        Some(o) => format!(
            "Claimed order {} from {} (seq {}, topic {}): {}\nNext: baton order accept {}",
            o.id, item.pool, o.seq, item.topic, o.goal, o.id
        ),
        None => format!(
            "Claimed request {} from {} (topic {}, from {}): {}\nNext: baton show {}",
            item.message, item.pool, item.topic, item.from, item.excerpt, item.message
        ),
    };
    visible(&text)
}

pub async fn next(ctx: &Context, args: NextArgs) -> CommandResult<Output> {
    let input = baton_app::ops::NextInput { topic: args.topic };
    let doc = ctx.call::<baton_app::ops::NextItem>(input).await?;
    let human = claimed_text(&doc);
    Ok(Output::of(&doc, human))
}

pub async fn claim(ctx: &Context, args: ClaimArgs) -> CommandResult<Output> {
    let input = baton_app::ops::ClaimInput {
        id: args.id,
        expect_seq: args.seq,
    };
    let doc = ctx.call::<baton_app::ops::ClaimItem>(input).await?;
    let human = claimed_text(&doc);
    Ok(Output::of(&doc, human))
}

fn rows_table(rows: &[PoolRow]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.order.clone().unwrap_or_else(|| r.message.clone()),
                r.from.to_string(),
                r.topic.clone(),
                r.deadline.clone().unwrap_or_else(|| "-".into()),
                r.created_at.clone(),
                r.excerpt.clone(),
            ]
        })
        .collect();
    table(
        &["ID", "FROM", "TOPIC", "DEADLINE", "SENT", "EXCERPT"],
        &cells,
    )
}

pub async fn list(ctx: &Context, args: PoolArgs) -> CommandResult<Output> {
    let input = baton_app::ops::PoolInput {
        topic: args.topic,
        role: args.role,
    };
    let doc = ctx.call::<baton_app::ops::PoolList>(input).await?;
    let human = if doc.items.is_empty() {
        format!("Nothing waits in {}.", visible(&doc.pool))
    } else {
        format!(
            "Waiting in {}:\n{}",
            visible(&doc.pool),
            rows_table(&doc.items)
        )
    };
    Ok(Output::of(&doc, human))
}
