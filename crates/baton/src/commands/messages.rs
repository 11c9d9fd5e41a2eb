//! The read side: `baton inbox`, `outbox`, `show` and `thread`.

use baton_app::doc::RowStatus;
use baton_app::ops::{
    InboxList, ListInput, MessageInput, OutboxList, ShowInput, ShowMessage, ThreadOf,
};
use baton_app::{LIST_PAGE, MAX_LIST_PAGE};
use clap::Args;

use crate::commands::Context;
use crate::error::CommandResult;
use crate::output::{Output, age_of, now, preview_table, size, table};

/// What you owe: inbound messages still pending or delivered, oldest first.
///
/// Shows previews only (id, from, type, topic, status, size, age, thread depth, excerpt);
/// `baton show ID` fetches a payload. `--all` also lists what you acknowledged, completed,
/// refused or handed back and have not archived. A page holds 100 unless `--limit` says;
/// the next page is `--cursor NEXT` (`next` in --json output, and the last line of text).
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton --as impl-1 inbox --json\n  baton --as impl-1 inbox --all --cursor 01JD3M... --limit 500"
)]
pub struct InboxArgs {
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub page: PageArgs,
}

/// Which page of a list to print.
#[derive(Args, Debug)]
pub struct PageArgs {
    /// Entries per page.
    #[arg(long, default_value_t = LIST_PAGE, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_LIST_PAGE)))]
    pub limit: u32,
    /// The page after this cursor (the `next` of the previous page).
    #[arg(long)]
    pub cursor: Option<String>,
}

/// What you are waiting for: the requests you sent, each recipient's status, reply counts.
///
/// A request stays here until you archive your own end (`baton complete ID`, then
/// `baton archive ID`); `--all` lists archived ones too. Paged as `baton inbox` is.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton --as planner outbox\n  baton --as planner outbox --all --limit 1000"
)]
pub struct OutboxArgs {
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub page: PageArgs,
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
    ctx.me().await?;
    let page = &args.page;
    let doc = ctx.call::<InboxList>(page.input(args.all)).await?;
    let human = if doc.items.is_empty() {
        format!("{} owes nothing: the inbox is empty.", doc.participant)
    } else {
        preview_table(&doc.items, now()) + &more("inbox", args.all, page, doc.next.as_deref())
    };
    Ok(Output::of(&doc, human))
}

pub async fn outbox(ctx: &Context, args: OutboxArgs) -> CommandResult<Output> {
    ctx.me().await?;
    let page = &args.page;
    let doc = ctx.call::<OutboxList>(page.input(args.all)).await?;
    let now = now();
    let human = if doc.items.is_empty() {
        format!(
            "{} is waiting for nothing: no open requests.",
            doc.participant
        )
    } else {
        let rows: Vec<Vec<String>> = doc
            .items
            .iter()
            .map(|e| {
                let to = match &e.status {
                    RowStatus::Recipients(each) => each
                        .iter()
                        .map(|(name, status)| format!("{name}:{}", status.as_str().unwrap_or("-")))
                        .collect::<Vec<_>>()
                        .join(","),
                    RowStatus::Caller(_) => {
                        e.to.iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(",")
                    }
                };
                vec![
                    e.id.clone(),
                    to,
                    e.topic.to_string(),
                    e.request_status.map_or("-", |s| s.as_str()).to_owned(),
                    e.replies.to_string(),
                    age_of(&e.created_at, now),
                    e.excerpt.clone(),
                ]
            })
            .collect();
        table(
            &["ID", "TO", "TOPIC", "MINE", "REPLIES", "AGE", "EXCERPT"],
            &rows,
        ) + &more("outbox", args.all, page, doc.next.as_deref())
    };
    Ok(Output::of(&doc, human))
}

impl PageArgs {
    /// The list operations' input for this page.
    fn input(&self, all: bool) -> ListInput {
        ListInput {
            all,
            cursor: self.cursor.clone(),
            limit: Some(self.limit),
        }
    }
}

/// The line under a page that another follows: the command that prints it.
fn more(command: &str, all: bool, page: &PageArgs, next: Option<&str>) -> String {
    let Some(next) = next else {
        return String::new();
    };
    let all = if all { " --all" } else { "" };
    let limit = if page.limit == LIST_PAGE {
        String::new()
    } else {
        format!(" --limit {}", page.limit)
    };
    format!("\nmore: baton {command}{all}{limit} --cursor {next}\n")
}

pub async fn show(ctx: &Context, args: ShowArgs) -> CommandResult<Output> {
    ctx.maybe_me().await?;
    // A person at a terminal sees the whole payload unless they cap it.
    let input = ShowInput {
        id: args.id,
        max_bytes: Some(args.max_bytes.unwrap_or(usize::MAX)),
        pretty: true,
    };
    let doc = ctx.call::<ShowMessage>(input).await?;
    let text = match (&doc.payload, &doc.payload_text) {
        (_, Some(cut)) => cut.clone(),
        (Some(payload), None) => {
            serde_json::to_string_pretty(payload).expect("a JSON object serializes")
        }
        (None, None) => String::new(),
    };
    let m = &doc.message;
    let mut human = format!(
        "id:       {}\nfrom:     {}\nto:       {}\ntype:     {}\ntopic:    {}\n",
        m.id,
        m.from,
        doc.recipients
            .iter()
            .map(|r| format!("{} ({})", r.name, r.status))
            .collect::<Vec<_>>()
            .join(", "),
        m.kind,
        m.topic,
    );
    if let Some(parent) = &m.reply_to {
        human.push_str(&format!("reply to: {parent} (depth {})\n", m.depth));
    }
    if let Some(status) = m.request_status {
        human.push_str(&format!("request:  {status} (the sender's own end)\n"));
    }
    human.push_str(&format!(
        "size:     {}\nsent:     {} ago\nreplies:  {}\n\n",
        size(m.size),
        age_of(&m.created_at, now()),
        m.replies
    ));
    human.push_str(&text);
    if let Some(cut) = &doc.truncated {
        human.push_str(&format!(
            "\n[truncated: showing {} of {} bytes; run `baton show {}` without --max-bytes for all of it]",
            cut.shown_bytes, cut.total_bytes, m.id
        ));
    }
    Ok(Output::of(&doc, human))
}

pub async fn thread(ctx: &Context, args: ThreadArgs) -> CommandResult<Output> {
    ctx.maybe_me().await?;
    let input = MessageInput {
        id: args.id.clone(),
    };
    let doc = ctx.call::<ThreadOf>(input).await?;
    let now = now();
    let mut human = String::new();
    for row in &doc.items {
        let e = &row.message;
        let indent = "  ".repeat(e.depth as usize);
        let to = row
            .recipients
            .iter()
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
            age_of(&e.created_at, now),
            e.excerpt
        ));
    }
    Ok(Output::of(&doc, human))
}
