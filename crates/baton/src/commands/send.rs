//! `baton send`: store a message for one or more recipients.

use std::path::PathBuf;

use baton_app::ops;
use baton_core::refusal::Field;
use baton_core::{MessageType, Payload, Refusal};
use clap::{ArgGroup, Args};

use crate::commands::Context;
use crate::error::{CommandError, CommandResult};
use crate::output::Output;

/// Send a message: a request (moves responsibility), an info (moves knowledge) or a
/// message (dialogue).
///
/// Prints the new id. The payload is a JSON object (`--payload FILE`, `-` for stdin) or
/// `--body TEXT` for `{"body": TEXT}`. A reply (`--reply-to ID`) goes by default to the
/// other side of the parent (its sender, or its recipients when you sent it) and keeps the
/// parent's topic. Sending the same thing twice within the duplicate window, or with the
/// same --idempotency-key, returns the original id with `duplicate: true`.
#[derive(Args, Debug)]
#[command(
    group(ArgGroup::new("content").required(true).args(["payload", "body"])),
    after_help = "Examples:\n  baton --as planner send --to impl-1 --type request --topic csv-export \
                  --body 'CSV export drops the active filters'\n  \
                  baton --as impl-1 send --reply-to 01J... --body 'Which filters?'\n  \
                  baton --as planner send --to impl-1,impl-2 --type info --topic release --payload notes.json\n  \
                  baton --as planner send --to role:executor --type request --topic billing --body 'Fix invoice rounding'"
)]
pub struct SendArgs {
    /// Recipients, comma-separated passnames; or one pool, `role:ROLE`, for a request any
    /// holder of the role may claim (`baton next`).
    #[arg(long, value_delimiter = ',', value_name = "NAME[,NAME…]|role:ROLE")]
    pub to: Vec<String>,
    /// request, info or message.
    #[arg(long = "type", value_name = "TYPE", default_value = "message")]
    pub kind: MessageType,
    /// A lowercase slug naming the lane; a reply inherits its parent's.
    #[arg(long)]
    pub topic: Option<String>,
    /// The message this one answers.
    #[arg(long, value_name = "ID")]
    pub reply_to: Option<String>,
    /// A file holding a JSON object, or `-` for stdin.
    #[arg(long, value_name = "FILE|-")]
    pub payload: Option<PathBuf>,
    /// Shortcut for a payload of {"body": TEXT}.
    #[arg(long, value_name = "TEXT")]
    pub body: Option<String>,
    /// Any string: a second send with the same key returns the first id, forever.
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
}

pub async fn run(ctx: &Context, args: SendArgs) -> CommandResult<Output> {
    ctx.me().await?;
    if args.reply_to.is_none() {
        if args.to.is_empty() {
            return Err(CommandError::usage(
                "--to NAME is required (unless replying with --reply-to)",
            ));
        }
        if args.topic.is_none() {
            return Err(CommandError::usage(
                "--topic TOPIC is required (unless replying with --reply-to)",
            ));
        }
    }
    // A payload file passes the payload's own checks here, so its refusal names the file's
    // content as it does everywhere; the operation checks it again as any input.
    let payload = match (&args.body, &args.payload) {
        (Some(_), _) => None,
        (None, Some(path)) => {
            let cap = ctx.cases.payload_cap();
            let text = read_payload(path, cap)?;
            let payload = Payload::parse(&text, cap).map_err(|error| Refusal::Payload {
                field: Field::Payload,
                error,
            });
            Some(payload.map_err(CommandError::from)?.object().clone())
        }
        (None, None) => unreachable!("clap requires --payload or --body"),
    };
    let input = ops::SendInput {
        to: args.to,
        kind: Some(args.kind),
        topic: args.topic,
        reply_to: args.reply_to,
        body: args.body,
        payload,
        idempotency_key: args.idempotency_key,
    };
    let sent = ctx.call::<ops::SendMessage>(input).await?;
    let human = if sent.duplicate {
        format!("{} (duplicate: already sent)", sent.id)
    } else {
        sent.id.clone()
    };
    Ok(Output::of(&sent, human))
}

/// Reads at most `cap + 1` bytes, so an oversized input is refused without holding all of
/// it; the refusal still states the true size when the file system knows it.
fn read_payload(path: &std::path::Path, cap: usize) -> CommandResult<String> {
    let known_size = std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    let read = crate::files::read_bounded(path, cap)
        .map_err(|e| CommandError::refused(format!("--payload {}: {e}", path.display())))?;
    let bytes = read.bytes;
    if read.over {
        let size = match known_size {
            Some(size) => size.to_string(),
            None => format!("more than {cap}"),
        };
        return Err(CommandError::refused(format!(
            "payload is {size} bytes, over the cap of {cap} bytes (messages.payload_cap in .baton/config.toml)"
        )));
    }
    String::from_utf8(bytes)
        .map_err(|_| CommandError::refused("payload is not valid JSON: it is not UTF-8 text"))
}
