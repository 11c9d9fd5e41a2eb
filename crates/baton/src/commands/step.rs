//! Status steps: `baton ack`, `complete`, `hand-back`, `refuse` and `archive`.

use baton_app::doc::Step;
use baton_app::ops;
use baton_core::delivery::End;
use clap::Args;

use crate::commands::Context;
use crate::error::CommandResult;
use crate::output::Output;

/// Acknowledge an info or message you have read (no work moved).
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  baton --as impl-1 ack 01JD3M...")]
pub struct AckArgs {
    pub id: String,
}

/// Complete a request: as a recipient, your end is discharged; as its sender, you are
/// satisfied with every recipient's end.
///
/// A recipient's `--note` says how it was done; it is posted to the sender as a threaded
/// `info` reply.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton --as impl-1 complete 01JD3M... --note 'Fixed in 4f2a91c; regression test added'\n  \
                  baton --as planner complete 01JD3M..."
)]
pub struct CompleteArgs {
    pub id: String,
    #[arg(long, value_name = "TEXT")]
    pub note: Option<String>,
}

/// Hand a request back: you cannot proceed. The reason is posted to the sender as a
/// threaded reply.
#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  baton --as impl-1 hand-back 01JD3M... --reason 'No fixture for the date filter; which file?'"
)]
pub struct HandBackArgs {
    pub id: String,
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
}

/// Refuse a message you will not take (invalid, or beyond your authority). The reason is
/// posted to the sender as a threaded reply.
#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  baton --as impl-1 refuse 01JD3M... --reason 'Out of scope: schema migrations'"
)]
pub struct RefuseArgs {
    pub id: String,
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
}

/// Archive a message out of your active view (it stays in the record). As the sender of a
/// request, archive your own end after completing it.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  baton --as impl-1 archive 01JD3M...")]
pub struct ArchiveArgs {
    pub id: String,
}

pub async fn ack(ctx: &Context, args: AckArgs) -> CommandResult<Output> {
    ctx.me().await?;
    said(
        ctx.call::<ops::Ack>(ops::MessageInput { id: args.id })
            .await?,
    )
}

pub async fn complete(ctx: &Context, args: CompleteArgs) -> CommandResult<Output> {
    ctx.me().await?;
    let input = ops::CompleteInput {
        id: args.id,
        note: args.note,
    };
    said(ctx.call::<ops::Complete>(input).await?)
}

pub async fn hand_back(ctx: &Context, args: HandBackArgs) -> CommandResult<Output> {
    ctx.me().await?;
    let input = ops::ReasonInput {
        id: args.id,
        reason: args.reason,
    };
    said(ctx.call::<ops::HandBack>(input).await?)
}

pub async fn refuse(ctx: &Context, args: RefuseArgs) -> CommandResult<Output> {
    ctx.me().await?;
    let input = ops::ReasonInput {
        id: args.id,
        reason: args.reason,
    };
    said(ctx.call::<ops::Refuse>(input).await?)
}

pub async fn archive(ctx: &Context, args: ArchiveArgs) -> CommandResult<Output> {
    ctx.me().await?;
    said(
        ctx.call::<ops::Archive>(ops::MessageInput { id: args.id })
            .await?,
    )
}

/// A step as the command prints it.
fn said(s: Step) -> CommandResult<Output> {
    let whose = if s.end == End::Sender.as_str() {
        "your own end"
    } else {
        "your delivery"
    };
    let mut human = format!("{}: {whose} {} → {}", s.id, s.from, s.status);
    if let Some(reply) = &s.reply {
        human.push_str(&format!("\nposted reply {reply} to the sender"));
    }
    Ok(Output::of(&s, human))
}
