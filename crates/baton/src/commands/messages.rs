//! The read side: `baton inbox`, `outbox`, `show` and `thread`.

use baton_app::Layout;
use baton_app::doc::{Inbox, MessageRow, Outbox, Show, Thread};
use baton_core::time::age;
use clap::Args;

use crate::commands::Context;
use crate::error::CommandResult;
use crate::output::{Output, now, preview_table, size, table};

/// What you owe: inbound messages still pending or delivered, oldest first.
///
/// Shows previews only (id, from, type, topic, status, size, age, thread depth, excerpt);
/// `baton show ID` fetches a payload. `--all` also lists what you acknowledged, completed,
/// refused or handed back and have not archived.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  baton --as impl-1 inbox --json")]
pub struct InboxArgs {
    #[arg(long)]
    pub all: bool,
}

/// What you are waiting for: the requests you sent, each recipient's status, reply counts.
///
/// A request stays here until you archive your own end (`baton complete ID`, then
/// `baton archive ID`); `--all` lists archived ones too.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  baton --as planner outbox")]
pub struct OutboxArgs {
    #[arg(long)]
    pub all: bool,
}

/// Print a message in full and, if it was pending for you, mark it delivered.
///
/// `--max-bytes N` caps the payload printed; a cut payload says so and gives its true size.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  baton --as impl-1 show 01JD3M... --max-bytes 2000")]
pub struct ShowArgs {
    pub id: String,
    #[arg(long, value_name = "N")]
    pub max_bytes: Option<usize>,
}

/// Print the whole thread a message belongs to, as a tree of previews.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  baton thread 01JD3M...")]
pub struct ThreadArgs {
    pub id: String,
}

pub async fn inbox(ctx: &Context, args: InboxArgs) -> CommandResult<Output> {
    let me = ctx.me().await?;
    let items = ctx.app.inbox(&me, args.all).await?;
    let human = if items.is_empty() {
        format!("{me} owes nothing: the inbox is empty.")
    } else {
        preview_table(&items, Some(&me), now())
    };
    Ok(Output::of(&Inbox::new(&me, &items), human))
}

pub async fn outbox(ctx: &Context, args: OutboxArgs) -> CommandResult<Output> {
    let me = ctx.me().await?;
    let items = ctx.app.outbox(&me, args.all).await?;
    let now = now();
    let human = if items.is_empty() {
        format!("{me} is waiting for nothing: no open requests.")
    } else {
        let rows: Vec<Vec<String>> = items
            .iter()
            .map(|e| {
                let to =
                    e.to.iter()
                        .map(|r| format!("{}:{}", r.name, r.status))
                        .collect::<Vec<_>>()
                        .join(",");
                vec![
                    e.id.clone(),
                    to,
                    e.topic.to_string(),
                    e.request_status.map_or("-", |s| s.as_str()).to_owned(),
                    e.replies.to_string(),
                    age(e.created_at, now),
                    e.excerpt.clone(),
                ]
            })
            .collect();
        table(
            &["ID", "TO", "TOPIC", "MINE", "REPLIES", "AGE", "EXCERPT"],
            &rows,
        )
    };
    Ok(Output::of(&Outbox::new(&me, &items), human))
}

pub async fn show(ctx: &Context, args: ShowArgs) -> CommandResult<Output> {
    let me = ctx.maybe_me().await?;
    let shown = ctx
        .app
        .show(me.as_ref(), &args.id, args.max_bytes, Layout::Pretty)
        .await?;
    let env = &shown.fetched.envelope;
    let mut human = format!(
        "id:       {}\nfrom:     {}\nto:       {}\ntype:     {}\ntopic:    {}\n",
        env.id,
        env.from,
        env.to
            .iter()
            .map(|r| format!("{} ({})", r.name, r.status))
            .collect::<Vec<_>>()
            .join(", "),
        env.kind,
        env.topic,
    );
    if let Some(parent) = &env.reply_to {
        human.push_str(&format!("reply to: {parent} (depth {})\n", env.depth));
    }
    if let Some(status) = env.request_status {
        human.push_str(&format!("request:  {status} (the sender's own end)\n"));
    }
    human.push_str(&format!(
        "size:     {}\nsent:     {} ago\nreplies:  {}\n\n",
        size(env.size),
        age(env.created_at, now()),
        env.replies
    ));
    human.push_str(&shown.text);
    if shown.is_cut() {
        human.push_str(&format!(
            "\n[truncated: showing {} of {} bytes; run `baton show {}` without --max-bytes for all of it]",
            shown.text.len(),
            shown.total_bytes,
            env.id
        ));
    }
    Ok(Output::of(&Show::new(&shown, me.as_ref()), human))
}

pub async fn thread(ctx: &Context, args: ThreadArgs) -> CommandResult<Output> {
    let me = ctx.maybe_me().await?;
    let items = ctx.app.thread(&args.id).await?;
    let now = now();
    let mut human = String::new();
    for e in &items {
        let indent = "  ".repeat(e.depth as usize);
        let to =
            e.to.iter()
                .map(|r| format!("{} ({})", r.name, r.status))
                .collect::<Vec<_>>()
                .join(", ");
        let marker = if e.id == args.id { "*" } else { "-" };
        human.push_str(&format!(
            "{indent}{marker} {} {} {} → {to} · {} · {} ago\n{indent}  {}\n",
            e.id,
            e.kind,
            e.from,
            e.topic,
            age(e.created_at, now),
            e.excerpt
        ));
    }
    let doc = Thread {
        id: args.id,
        items: items
            .iter()
            .map(|e| MessageRow::for_caller(e, me.as_ref()))
            .collect(),
    };
    Ok(Output::of(&doc, human))
}
