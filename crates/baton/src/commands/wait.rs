//! `baton wait`: block until something new concerns you — a message to you, a step on
//! what you sent or hold, an order you are party to, an alert.

use std::time::Instant;

use baton_app::doc::EventRow;
use baton_app::ops::{AfterInput, MAX_WAIT, NewsWait};
use clap::Args;

use crate::commands::Context;
use crate::error::{CommandError, CommandResult};
use crate::output::{Output, table};
use crate::project::parse_duration;

/// Wait until something after --after concerns you, or --timeout passes; print it.
///
/// What you did yourself is not news. Pass the printed `after` back as --after to go on
/// from there. Nothing new by the timeout is not an error: the list is empty.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton --as impl-1 wait --timeout 5m\n  baton --as impl-1 --json wait --after 42"
)]
pub struct WaitArgs {
    /// The log position to look after (0: from the start).
    #[arg(long, default_value_t = 0, value_name = "SEQ")]
    pub after: i64,
    /// How long to wait, e.g. 30s or 10m.
    #[arg(long, default_value = "30s", value_name = "DURATION")]
    pub timeout: String,
}

pub async fn run(ctx: &Context, args: WaitArgs) -> CommandResult<Output> {
    let me = ctx.me().await?;
    let timeout = parse_duration("--timeout", &args.timeout).map_err(CommandError::usage)?;
    // One wait lasts at most what every edge allows; a longer one asks again.
    let deadline = Instant::now() + timeout;
    let mut after = args.after;
    let doc = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let news = ctx
            .call::<NewsWait>(AfterInput {
                after,
                timeout_seconds: Some(left.min(MAX_WAIT).as_secs_f64()),
            })
            .await?;
        if !news.events.is_empty() || Instant::now() >= deadline {
            break news;
        }
        after = news.after;
    };
    let human = if doc.events.is_empty() {
        format!(
            "Nothing new for {me} after {}; go on with --after {}",
            args.after, doc.after
        )
    } else {
        let rows: Vec<Vec<String>> = doc.events.iter().map(cells).collect();
        format!(
            "{}next: --after {}",
            table(&["SEQ", "KIND", "ABOUT", "BY", "AT"], &rows),
            doc.after
        )
    };
    Ok(Output::of(&doc, human))
}

fn cells(e: &EventRow) -> Vec<String> {
    let about = ["message", "id", "order", "run"]
        .iter()
        .find_map(|k| e.data.get(*k).and_then(|v| v.as_str()))
        .unwrap_or("-")
        .to_owned();
    vec![
        e.log_seq.to_string(),
        e.kind.clone(),
        about,
        e.actor.clone(),
        e.at.clone(),
    ]
}
