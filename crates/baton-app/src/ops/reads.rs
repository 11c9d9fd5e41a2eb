//! The reads as typed operations: the inbox and outbox, a message and its thread, search,
//! the resume packet and the human queue. Each changes nothing, except that showing a
//! message pending for its reader marks it delivered, when the reader's key may write.

use baton_core::key::Scope;
use baton_core::queue::Lane;
use baton_core::{DeliveryStatus, MessageType};
use baton_store::SearchQuery;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    GET, MessageInput, Needs, Operation, Role, The, Typed, Who, participant, refused, route, typed,
};
use crate::doc::{Inbox, Outbox, Queue, Resume, Search, Show, Thread};
use crate::{App, LIST_PAGE, Layout, MAX_LIST_PAGE, Result};

const fn read(
    name: &'static str,
    path: &'static str,
    summary: &'static str,
    call: &'static dyn super::Call,
) -> Operation {
    typed(name, Needs::Read, route(GET, path), summary, call).idempotent()
}

/// A page's size: `limit`, or the default page, within what a page may hold.
fn page(operation: &'static str, limit: Option<u32>) -> Result<u32> {
    let limit = limit.unwrap_or(LIST_PAGE);
    if !(1..=MAX_LIST_PAGE).contains(&limit) {
        return Err(refused(
            operation,
            format!("`limit` {limit} is out of range: use 1 to {MAX_LIST_PAGE}"),
        ));
    }
    Ok(limit)
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListInput {
    /// Finished ones too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
    /// A page's `next`: the page after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Entries per page, default 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<u32>,
}

pub struct InboxList;

impl Typed for InboxList {
    type Input = ListInput;
    type Output = Inbox;
    const OP: Operation = read(
        "inbox",
        "/inbox",
        "Messages you owe, oldest first.",
        &The::<Self>::ONE,
    )
    .offered(
        "inbox",
        &[Role::Executor, Role::Planner, Role::Reviewer, Role::Owner],
    );

    async fn run(app: &App, who: Who<'_>, input: ListInput) -> Result<Inbox> {
        let me = participant(who.actor)?;
        let limit = page(Self::OP.name, input.limit)?;
        let (items, next) = app
            .inbox(&me, input.all, input.cursor.as_deref(), limit)
            .await?;
        Ok(Inbox::new(&me, &items, next))
    }
}

pub struct OutboxList;

impl Typed for OutboxList {
    type Input = ListInput;
    type Output = Outbox;
    const OP: Operation = read(
        "outbox",
        "/outbox",
        "Your open requests, each recipient's status.",
        &The::<Self>::ONE,
    )
    .offered("outbox", &[Role::Planner, Role::Owner]);

    async fn run(app: &App, who: Who<'_>, input: ListInput) -> Result<Outbox> {
        let me = participant(who.actor)?;
        let limit = page(Self::OP.name, input.limit)?;
        let (items, next) = app
            .outbox(&me, input.all, input.cursor.as_deref(), limit)
            .await?;
        Ok(Outbox::new(&me, &items, next))
    }
}

/// What `show` cuts a payload at unless asked otherwise: what an agent's context takes.
pub const SHOW_BYTES: usize = 8192;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowInput {
    pub id: String,
    /// Cut the payload text here (default 8192).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<usize>,
    /// Indent the payload text (the cut counts it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pretty: bool,
}

pub struct ShowMessage;

impl Typed for ShowMessage {
    type Input = ShowInput;
    type Output = Show;
    // Reading delivers: any key may look, and a key that may write marks a message
    // pending for its reader delivered (once: showing again changes nothing).
    const OP: Operation = read(
        "show",
        "/messages/{id}",
        "Read a message; marks it delivered.",
        &The::<Self>::ONE,
    )
    .delivers()
    .offered(
        "show",
        &[Role::Executor, Role::Planner, Role::Reviewer, Role::Owner],
    );

    async fn run(app: &App, who: Who<'_>, input: ShowInput) -> Result<Show> {
        let reader = participant(who.actor).ok();
        let marks = reader.as_ref().filter(|_| who.scope.allows(Scope::Write));
        let layout = if input.pretty {
            Layout::Pretty
        } else {
            Layout::Compact
        };
        let max = input.max_bytes.unwrap_or(SHOW_BYTES);
        let shown = app.show(marks, &input.id, Some(max), layout).await?;
        Ok(Show::new(&shown, reader.as_ref()))
    }
}

pub struct ThreadOf;

impl Typed for ThreadOf {
    type Input = MessageInput;
    type Output = Thread;
    const OP: Operation = read(
        "thread",
        "/messages/{id}/thread",
        "A message's whole thread, depth-first.",
        &The::<Self>::ONE,
    )
    .offered("thread", &[Role::Reviewer]);

    async fn run(app: &App, who: Who<'_>, input: MessageInput) -> Result<Thread> {
        let reader = participant(who.actor).ok();
        let (id, items) = app.thread(&input.id).await?;
        Ok(Thread::new(&id, &items, reader.as_ref()))
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchInput {
    /// Matches the payload, topic or names, ignoring ASCII case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::message_kinds")]
    pub kind: Option<MessageType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// RFC 3339, or an age such as `2h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Your own delivery status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DeliveryStatus>,
    /// 1 to 100, default 50.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

pub struct SearchMessages;

impl Typed for SearchMessages {
    type Input = SearchInput;
    type Output = Search;
    const OP: Operation = read(
        "search",
        "/search",
        "Search messages, newest first, by page.",
        &The::<Self>::ONE,
    )
    .offered("search", &[Role::Reviewer]);

    async fn run(app: &App, who: Who<'_>, input: SearchInput) -> Result<Search> {
        let name = Self::OP.name;
        let reader = participant(who.actor).ok();
        let limit = input.limit.unwrap_or(50);
        if !(1..=100).contains(&limit) {
            return Err(refused(
                name,
                format!("`limit` {limit} is out of range: use 1 to 100"),
            ));
        }
        let now = app.now();
        let time = |field: &str, text: Option<String>| {
            text.map(|t| {
                baton_core::time::instant(&t, now).ok_or_else(|| {
                    refused(
                        name,
                        format!(
                            "`{field}` {t:?} is not a time: use {}",
                            baton_core::time::INSTANT_FORMS
                        ),
                    )
                })
            })
            .transpose()
        };
        let query = SearchQuery {
            since: time("since", input.since)?,
            until: time("until", input.until)?,
            topic: input.topic,
            kind: input.kind,
            from: input.from,
            to: input.to,
            status: input.status,
            text: input.text,
            limit,
            cursor: input.cursor.filter(|c| !c.is_empty()),
        };
        let page = app.search(reader.as_ref(), &query).await?;
        Ok(Search {
            items: page
                .items
                .iter()
                .map(|e| crate::doc::MessageRow::for_caller(e, reader.as_ref()))
                .collect(),
            next: page.next,
        })
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeInput {
    /// Packet bytes, default 6000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<usize>,
}

pub struct ResumePacket;

impl Typed for ResumePacket {
    type Input = ResumeInput;
    type Output = Resume;
    const OP: Operation = read(
        "resume",
        "/resume",
        "Start here: what you owe and the project's memory.",
        &The::<Self>::ONE,
    )
    .offered(
        "resume",
        &[Role::Executor, Role::Planner, Role::Reviewer, Role::Owner],
    );

    async fn run(app: &App, who: Who<'_>, input: ResumeInput) -> Result<Resume> {
        let me = participant(who.actor)?;
        let max = input
            .max_bytes
            .unwrap_or(baton_core::packet::DEFAULT_MAX_BYTES);
        let r = app.resume(&me, max).await?;
        Ok(Resume::new(&me, max, r))
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueInput {
    /// Only this lane (default: all four).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<Lane>,
}

pub struct QueueShow;

impl Typed for QueueShow {
    type Input = QueueInput;
    type Output = Queue;
    const OP: Operation = read(
        "queue",
        "/queue",
        "What needs a person: four lanes, five items each, newest first.",
        &The::<Self>::ONE,
    )
    .offered("queue", &[Role::Owner]);

    async fn run(app: &App, _: Who<'_>, input: QueueInput) -> Result<Queue> {
        Ok(Queue::new(&app.queue(input.lane).await?))
    }
}

/// This group's operations (the reads of the inbox, the resume packet and the queue), in the order the edges list them: its
/// part of [`super::OPERATIONS`].
pub(super) const OPERATIONS: &[Operation] = &[
    InboxList::OP,
    OutboxList::OP,
    ShowMessage::OP,
    SearchMessages::OP,
    ThreadOf::OP,
    ResumePacket::OP,
    QueueShow::OP,
];
