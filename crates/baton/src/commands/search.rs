//! `baton search`: find messages by lane, party, time, status or text, a page at a time.

use baton_app::ops::{SearchInput, SearchMessages};
use baton_core::time::instant;
use baton_core::{DeliveryStatus, MessageType, Millis};
use clap::Args;

use crate::commands::Context;
use crate::error::{CommandError, CommandResult};
use crate::output::{Output, now, preview_table};

/// Search the project's messages, newest first.
///
/// Times are RFC 3339 (`2026-11-29T10:00:00Z`) or an age such as `2h` (that long ago).
/// `--status` is your own delivery status and needs --as. Each word of the text must
/// begin a word of the payload (its keys or values), ignoring case: `expo` finds "Export".
/// Pages hold `--limit` items (default 50, max 100); pass the printed `next` token as
/// `--cursor` for the next page.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton search --topic csv-export --type request\n  \
                  baton --as impl-1 search --status pending --since 1d 'filters'\n  \
                  baton search --from planner --limit 20 --cursor c1f4"
)]
pub struct SearchArgs {
    #[arg(long)]
    pub topic: Option<String>,
    #[arg(long = "type", value_name = "TYPE")]
    pub kind: Option<MessageType>,
    #[arg(long, value_name = "NAME")]
    pub from: Option<String>,
    #[arg(long, value_name = "NAME")]
    pub to: Option<String>,
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// pending, delivered, acknowledged, completed, archived, refused or handed_back.
    #[arg(long)]
    pub status: Option<String>,
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub limit: u32,
    #[arg(long)]
    pub cursor: Option<String>,
    /// Free text.
    pub text: Option<String>,
}

fn parse_time(flag: &str, text: &str, now: Millis) -> CommandResult<Millis> {
    instant(text, now).ok_or_else(|| {
        CommandError::usage(format!(
            "{flag} {text:?}: use {}",
            baton_core::time::INSTANT_FORMS
        ))
    })
}

pub async fn run(ctx: &Context, args: SearchArgs) -> CommandResult<Output> {
    ctx.maybe_me().await?;
    let status = args
        .status
        .as_deref()
        .map(|s| {
            DeliveryStatus::parse(s).ok_or_else(|| {
                CommandError::usage(format!(
                    "--status {s:?}: use pending, delivered, acknowledged, completed, archived, refused or handed_back"
                ))
            })
        })
        .transpose()?;
    let now = now();
    // Times are checked here so a mistake names the flag; the operation takes the text.
    for (flag, time) in [("--since", &args.since), ("--until", &args.until)] {
        if let Some(t) = time {
            parse_time(flag, t, now)?;
        }
    }
    let input = SearchInput {
        topic: args.topic,
        kind: args.kind,
        from: args.from,
        to: args.to,
        since: args.since,
        until: args.until,
        status,
        text: args.text,
        limit: Some(args.limit),
        cursor: args.cursor,
    };
    let doc = ctx.call::<SearchMessages>(input).await?;
    let mut human = if doc.items.is_empty() {
        "No messages match.".to_owned()
    } else {
        preview_table(&doc.items, now)
    };
    if let Some(next) = &doc.next {
        human.push_str(&format!("more: --cursor {next}\n"));
    }
    Ok(Output::of(&doc, human))
}
