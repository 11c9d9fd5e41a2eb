//! `baton resume`: the bounded packet a fresh agent reads first.

use baton_app::ops::{ResumeInput, ResumePacket};
use baton_core::packet::DEFAULT_MAX_BYTES;
use clap::Args;

use crate::commands::Context;
use crate::error::CommandResult;
use crate::output::Output;

/// Print the resume packet: who and where; what I owe; focus; constraints; decisions; what
/// I wait for; open alerts; stale notes; stop conditions — never over --max-bytes.
///
/// Lists that do not fit end with "+N more" and the command that shows them all.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton --as impl-1 resume\n  baton --as impl-1 resume --max-bytes 2000 --json"
)]
pub struct ResumeArgs {
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_BYTES)]
    pub max_bytes: usize,
}

pub async fn run(ctx: &Context, args: ResumeArgs) -> CommandResult<Output> {
    ctx.me().await?;
    let input = ResumeInput {
        max_bytes: Some(args.max_bytes),
    };
    let doc = ctx.call::<ResumePacket>(input).await?;
    let human = doc.text.clone();
    Ok(Output::of(&doc, human))
}
