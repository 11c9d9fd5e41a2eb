//! The messages' documents: inbox and outbox rows, a thread, a search, one message shown,
//! and what a send or a step answers.

use baton_core::time::rfc3339;
use baton_core::{
    DeliveryStatus, Envelope, MessageType, Passname, Recipient, RequestStatus, Topic,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Whose status a message row reports.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RowStatus {
    /// The caller's own delivery status (null when the caller is not a recipient).
    Caller(Option<DeliveryStatus>),
    /// Every recipient's, by name (the outbox).
    Recipients(Map<String, Value>),
}

/// A message preview: never the payload, only its excerpt.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct MessageRow {
    pub id: String,
    pub from: Passname,
    pub to: Vec<Passname>,
    #[serde(rename = "type")]
    pub kind: MessageType,
    pub topic: Topic,
    pub status: RowStatus,
    pub size: u64,
    pub created_at: String,
    pub excerpt: String,
    pub reply_to: Option<String>,
    pub depth: u32,
    pub replies: u32,
    /// The sender's own end; requests only.
    pub request_status: Option<RequestStatus>,
}

impl MessageRow {
    /// A row showing `who`'s own status.
    pub fn for_caller(env: &Envelope, who: Option<&Passname>) -> Self {
        Self::new(env, RowStatus::Caller(who.and_then(|w| env.status_for(w))))
    }

    /// A row showing every recipient's status.
    pub fn for_sender(env: &Envelope) -> Self {
        let each = env
            .to
            .iter()
            .map(|r| (r.name.to_string(), Value::from(r.status.as_str())))
            .collect();
        Self::new(env, RowStatus::Recipients(each))
    }

    fn new(env: &Envelope, status: RowStatus) -> Self {
        Self {
            id: env.id.clone(),
            from: env.from.clone(),
            to: env.recipients(),
            kind: env.kind,
            topic: env.topic.clone(),
            status,
            size: env.size,
            created_at: rfc3339(env.created_at),
            excerpt: env.excerpt.clone(),
            reply_to: env.reply_to.clone(),
            depth: env.depth,
            replies: env.replies,
            request_status: env.request_status,
        }
    }
}

/// What `baton inbox` prints: what `participant` owes.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Inbox {
    pub participant: Passname,
    pub items: Vec<MessageRow>,
    /// The cursor of the next page (`--cursor`); null on the last page.
    #[serde(default)]
    pub next: Option<String>,
}
doc!(Inbox, "baton/inbox@1");

impl Inbox {
    pub fn new(me: &Passname, items: &[Envelope], next: Option<String>) -> Self {
        Self {
            participant: me.clone(),
            next,
            items: items
                .iter()
                .map(|e| MessageRow::for_caller(e, Some(me)))
                .collect(),
        }
    }
}

/// What `baton outbox` prints: the requests `participant` waits on, each recipient's
/// status.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Outbox {
    pub participant: Passname,
    pub items: Vec<MessageRow>,
    /// The cursor of the next page (`--cursor`); null on the last page.
    #[serde(default)]
    pub next: Option<String>,
}
doc!(Outbox, "baton/outbox@1");

impl Outbox {
    pub fn new(me: &Passname, items: &[Envelope], next: Option<String>) -> Self {
        Self {
            participant: me.clone(),
            next,
            items: items.iter().map(MessageRow::for_sender).collect(),
        }
    }
}

/// One recipient of a message: its status, and when the status was set.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RecipientRow {
    pub name: Passname,
    pub status: DeliveryStatus,
    /// The time of the event that set `status` (the send's, while it is the first).
    pub changed_at: String,
}

impl RecipientRow {
    /// Every recipient of `env`, in the order they were addressed.
    pub fn all(env: &Envelope) -> Vec<Self> {
        env.to.iter().map(Self::from).collect()
    }
}

impl From<&Recipient> for RecipientRow {
    fn from(r: &Recipient) -> Self {
        Self {
            name: r.name.clone(),
            status: r.status,
            changed_at: rfc3339(r.changed_at),
        }
    }
}

/// A message of a thread: its row for the caller, and every recipient's status.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ThreadRow {
    #[serde(flatten)]
    pub message: MessageRow,
    pub recipients: Vec<RecipientRow>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Thread {
    pub id: String,
    pub items: Vec<ThreadRow>,
}
doc!(Thread, "baton/thread@1");

impl Thread {
    /// The thread `id` belongs to, as `reader` sees it.
    pub fn new(id: &str, items: &[Envelope], reader: Option<&Passname>) -> Self {
        Self {
            id: id.to_owned(),
            items: items
                .iter()
                .map(|e| ThreadRow {
                    message: MessageRow::for_caller(e, reader),
                    recipients: RecipientRow::all(e),
                })
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Search {
    pub items: Vec<MessageRow>,
    /// The cursor of the next page; null on the last page.
    pub next: Option<String>,
}
doc!(Search, "baton/search@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Truncated {
    pub shown_bytes: usize,
    pub total_bytes: usize,
}

/// What `baton show` prints: the row, each recipient's status and the payload — or,
/// when cut at the byte cap, the text shown and both sizes.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Show {
    #[serde(flatten)]
    pub message: MessageRow,
    pub recipients: Vec<RecipientRow>,
    pub payload: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_text: Option<String>,
    pub truncated: Option<Truncated>,
    /// The idempotency key the send named; shown to its sender only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}
doc!(Show, "baton/show@1");

impl Show {
    pub fn new(shown: &crate::Shown, reader: Option<&Passname>) -> Self {
        let env = &shown.fetched.envelope;
        let cut = shown.is_cut();
        // A key is its sender's: only the sender is shown it.
        let own = reader == Some(&env.from);
        Self {
            idempotency_key: env.idempotency_key.clone().filter(|_| own),
            message: MessageRow::for_caller(env, reader),
            recipients: RecipientRow::all(env),
            payload: (!cut).then(|| shown.fetched.payload.clone()),
            payload_text: cut.then(|| shown.text.clone()),
            truncated: cut.then_some(Truncated {
                shown_bytes: shown.text.len(),
                total_bytes: shown.total_bytes,
            }),
        }
    }
}

/// A send's result: the new message's id, or the original's for a duplicate.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Sent {
    pub id: String,
    /// True when `id` is an earlier identical send's.
    pub duplicate: bool,
}
doc!(Sent, "baton/send@1");

impl From<baton_store::Sent> for Sent {
    fn from(s: baton_store::Sent) -> Self {
        Self {
            id: s.id,
            duplicate: s.duplicate,
        }
    }
}

/// A status step's result: which end moved, from what to what, and the reply that
/// carried its note.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Step {
    pub id: String,
    /// `recipient` or `sender`.
    pub end: String,
    pub from: String,
    pub status: String,
    pub reply: Option<String>,
}
doc!(Step, "baton/step@1");

impl From<baton_store::Stepped> for Step {
    fn from(s: baton_store::Stepped) -> Self {
        Self {
            id: s.id,
            end: s.end.as_str().to_owned(),
            from: s.from.to_owned(),
            status: s.status.to_owned(),
            reply: s.reply,
        }
    }
}
