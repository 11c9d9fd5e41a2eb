//! The inbox: who is acting, sending and replying, reading under a byte cap, the views,
//! and status steps.

use baton_core::message::reply_recipients;
use baton_core::packet::floor_char_boundary;
use baton_core::pool::{self, Address, Pool};
use baton_core::{
    Draft, Envelope, Field, MessageType, Participant, Passname, Payload, Record, Refusal, Topic,
    Verb,
};
use baton_store::{Fetched, Page, SearchQuery, Sent, Stepped, StoreError, Window};
use serde_json::{Map, Value};

use crate::{App, Result};

/// The most entries a page of a list holds, and how many it holds unless asked.
pub const MAX_LIST_PAGE: u32 = 1000;
pub const LIST_PAGE: u32 = 100;

/// The window that reads one entry past a page of `limit`, to learn whether another
/// page follows.
fn window(cursor: Option<&str>, limit: u32) -> Window {
    Window {
        after: cursor.filter(|c| !c.is_empty()).map(str::to_owned),
        limit: limit.clamp(1, MAX_LIST_PAGE) + 1,
    }
}

/// A page read through [`window`], cut to `limit`, and the cursor of the next page:
/// the id of its last entry, when an entry was left over.
fn paged(mut items: Vec<Envelope>, limit: u32) -> (Vec<Envelope>, Option<String>) {
    let limit = limit.clamp(1, MAX_LIST_PAGE) as usize;
    if items.len() <= limit {
        return (items, None);
    }
    items.truncate(limit);
    let next = items.last().map(|e| e.id.clone());
    (items, next)
}

/// What a payload is made of, as the edge received it.
#[derive(Debug, Clone)]
pub enum Body {
    /// Text, sent as `{"body": TEXT}`.
    Text(String),
    /// A JSON document as text (a file's or stdin's content), which must hold an object.
    Json(String),
    /// A JSON object already parsed.
    Object(Map<String, Value>),
}

/// A message to send. With `reply_to`, `to` defaults to the other side of the parent and
/// `topic` to the parent's.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub to: Vec<String>,
    pub kind: MessageType,
    pub topic: Option<String>,
    pub reply_to: Option<String>,
    pub body: Body,
    pub idempotency_key: Option<String>,
}

/// How a shown payload is laid out as text (the byte cap counts these bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Indented, for people.
    Pretty,
    /// One line, for programs.
    Compact,
}

/// A message as read, its payload as text under the cap.
#[derive(Debug, Clone)]
pub struct Shown {
    pub fetched: Fetched,
    /// The payload in the layout asked for, cut at a character boundary within the cap.
    pub text: String,
    /// The whole payload's length in that layout.
    pub total_bytes: usize,
}

impl Shown {
    pub fn is_cut(&self) -> bool {
        self.text.len() < self.total_bytes
    }
}

/// The recipients a send names, or the one pool (`role:ROLE`) it goes to: a pool is the
/// only recipient of what is sent to it.
fn addresses(names: &[String]) -> Result<(Vec<Passname>, Option<Pool>)> {
    let mut to = Vec::new();
    let mut pools = Vec::new();
    for name in names {
        match pool::address(name, Field::To)? {
            Address::One(n) => to.push(n),
            Address::Pool(p) => pools.push(p),
        }
    }
    match (pools.len(), to.is_empty()) {
        (0, _) => Ok((to, None)),
        (1, true) => Ok((to, pools.pop())),
        _ => Err(Refusal::PoolAddress {
            field: Field::To,
            value: names.join(","),
            problem: pool::AddressProblem::NotAlone,
        }
        .into()),
    }
}

impl App {
    /// The acting identity: a valid passname that is registered.
    pub async fn identify(&self, name: &str) -> Result<Passname> {
        let me = Passname::new(name).map_err(|error| Refusal::Name {
            field: Field::Actor,
            error,
        })?;
        match self.store().participant(me.as_str()).await? {
            Some(_) => Ok(me),
            None => Err(Refusal::UnknownParticipant {
                name: me.to_string(),
            }
            .into()),
        }
    }

    pub async fn participants(&self) -> Result<Vec<Participant>> {
        self.store().participants().await
    }

    /// A payload from what the edge received, within the project's cap.
    pub fn payload(&self, body: Body) -> Result<Payload> {
        let cap = self.settings.payload_cap;
        let (field, parsed) = match body {
            Body::Text(text) => (Field::Body, Payload::body(&text, cap)),
            Body::Json(raw) => (Field::Payload, Payload::parse(&raw, cap)),
            Body::Object(object) => (
                Field::Payload,
                Payload::from_value(Value::Object(object), cap),
            ),
        };
        parsed.map_err(|error| Refusal::Payload { field, error }.into())
    }

    /// Sends a message (or a reply) as `me`. A duplicate returns the original's id.
    pub async fn send(&self, me: &Passname, out: Outgoing) -> Result<Sent> {
        let payload = self.payload(out.body)?;
        let reply_to = match &out.reply_to {
            Some(text) => Some(self.resolve(Record::Parent, text).await?),
            None => None,
        };
        // Read without fetching: replying is not reading the parent.
        let parent = match &reply_to {
            Some(id) => Some(
                self.store()
                    .message(id)
                    .await?
                    .ok_or_else(|| Refusal::not_found(Record::Parent, id))?
                    .0,
            ),
            None => None,
        };
        let (to, pool) = match (&parent, out.to.is_empty()) {
            (Some(p), true) => (reply_recipients(&p.from, &p.recipients(), me), None),
            (_, _) => addresses(&out.to)?,
        };
        let topic = match (&out.topic, &parent) {
            (Some(t), _) => Topic::new(t).map_err(|error| Refusal::Name {
                field: Field::Topic,
                error,
            })?,
            (None, Some(p)) => p.topic.clone(),
            (None, None) => return Err(Refusal::Missing(Field::Topic).into()),
        };
        let draft = Draft {
            to,
            kind: out.kind,
            topic,
            reply_to,
            payload,
            idempotency_key: out.idempotency_key,
        };
        match self
            .store()
            .send_to(
                me,
                pool.as_ref(),
                draft,
                self.settings.duplicate_window_ms(),
            )
            .await
        {
            // A recipient nobody registered: say which names would have done.
            Err(StoreError::Refused(Refusal::UnknownParticipant { name }))
                if name != me.as_str() =>
            {
                let mut registered: Vec<String> = self
                    .participants()
                    .await?
                    .into_iter()
                    .map(|p| p.name.to_string())
                    .collect();
                registered.sort();
                Err(Refusal::NoRecipient { name, registered }.into())
            }
            other => other,
        }
    }

    /// Reads a message (delivering it to `reader` when it was pending), its payload laid
    /// out as text and cut at `max_bytes` when given.
    pub async fn show(
        &self,
        reader: Option<&Passname>,
        id: &str,
        max_bytes: Option<usize>,
        layout: Layout,
    ) -> Result<Shown> {
        let id = self.resolve(Record::Message, id).await?;
        let fetched = self.store().fetch(reader, &id).await?;
        let object = Value::Object(fetched.payload.clone());
        let full = match layout {
            Layout::Pretty => serde_json::to_string_pretty(&object),
            Layout::Compact => serde_json::to_string(&object),
        }
        .expect("a JSON object serializes");
        let total_bytes = full.len();
        let text = match max_bytes {
            Some(max) if total_bytes > max => full[..floor_char_boundary(&full, max)].to_owned(),
            _ => full,
        };
        Ok(Shown {
            fetched,
            text,
            total_bytes,
        })
    }

    /// A page of what `me` owes (with `all`, of every inbound message not archived): at
    /// most `limit` (within [`MAX_LIST_PAGE`]) after `cursor`, and the next page's cursor
    /// (none on the last).
    pub async fn inbox(
        &self,
        me: &Passname,
        all: bool,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<(Vec<Envelope>, Option<String>)> {
        let window = window(cursor, limit);
        Ok(paged(self.store().inbox(me, all, &window).await?, limit))
    }

    /// A page of the requests `me` sent and has not archived (with `all`, of every one),
    /// as [`App::inbox`] pages.
    pub async fn outbox(
        &self,
        me: &Passname,
        all: bool,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<(Vec<Envelope>, Option<String>)> {
        let window = window(cursor, limit);
        Ok(paged(self.store().outbox(me, all, &window).await?, limit))
    }

    /// The thread of the message `text` names, and that message's id.
    pub async fn thread(&self, text: &str) -> Result<(String, Vec<Envelope>)> {
        let id = self.resolve(Record::Message, text).await?;
        let thread = self.store().thread(&id).await?;
        Ok((id, thread))
    }

    pub async fn search(&self, caller: Option<&Passname>, query: &SearchQuery) -> Result<Page> {
        self.store().search(caller, query).await
    }

    /// A status step as `me`: a recipient's on its delivery, a sender's on its own end.
    pub async fn step(
        &self,
        me: &Passname,
        id: &str,
        verb: Verb,
        note: Option<&str>,
    ) -> Result<Stepped> {
        let id = self.resolve(Record::Message, id).await?;
        self.store().step(me, &id, verb, note).await
    }
}
