//! What store operations return: plain data, shaped for the CLI, MCP and HTTP edges alike.

use baton_core::order::Order;
use baton_core::{DeliveryStatus, Event, MessageType, Millis, Passname, RequestStatus, Topic};
use serde::Serialize;
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Participant {
    pub name: Passname,
    pub role: String,
    pub added_at: Millis,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Added {
    pub participant: Participant,
    /// False when the participant already existed with the same role.
    pub created: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sent {
    pub id: String,
    pub duplicate: bool,
}

/// One recipient's status for a message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recipient {
    pub name: Passname,
    pub status: DeliveryStatus,
}

/// A message without its payload: everything a preview shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Envelope {
    pub id: String,
    pub from: Passname,
    pub to: Vec<Recipient>,
    #[serde(rename = "type")]
    pub kind: MessageType,
    pub topic: Topic,
    pub reply_to: Option<String>,
    /// Distance from the thread's root (the root is 0).
    pub depth: u32,
    pub excerpt: String,
    pub size: u64,
    pub hash: String,
    pub created_at: Millis,
    /// The sender's own end; present for requests only.
    pub request_status: Option<RequestStatus>,
    /// Direct replies to this message.
    pub replies: u32,
}

impl Envelope {
    /// `who`'s delivery status, when `who` is a recipient.
    pub fn status_for(&self, who: &Passname) -> Option<DeliveryStatus> {
        self.to.iter().find(|r| &r.name == who).map(|r| r.status)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fetched {
    pub envelope: Envelope,
    pub payload: Map<String, Value>,
    /// The reader's status after the fetch, when the reader is a recipient.
    pub status: Option<DeliveryStatus>,
}

/// A status step named by the command that takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Ack,
    Complete,
    HandBack,
    Refuse,
    Archive,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stepped {
    pub id: String,
    /// `recipient` or `sender`: which end moved.
    pub end: &'static str,
    pub from: &'static str,
    pub status: &'static str,
    /// The threaded reply that carried the note, if any.
    pub reply: Option<String>,
}

#[derive(Debug, Clone)]
pub struct SearchQuery {
    pub topic: Option<String>,
    pub kind: Option<MessageType>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub since: Option<Millis>,
    pub until: Option<Millis>,
    /// The caller's delivery status.
    pub status: Option<DeliveryStatus>,
    pub text: Option<String>,
    pub limit: u32,
    pub cursor: Option<String>,
}

impl Default for SearchQuery {
    /// Everything, one default page (50) at a time.
    fn default() -> Self {
        Self {
            topic: None,
            kind: None,
            from: None,
            to: None,
            since: None,
            until: None,
            status: None,
            text: None,
            limit: 50,
            cursor: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Page {
    pub items: Vec<Envelope>,
    /// Opaque token for the next page; empty on the last page.
    pub next: String,
}

/// Which runs to list. The default is every run, oldest first.
#[derive(Debug, Clone, Default)]
pub struct RunQuery {
    /// Just this run.
    pub id: Option<String>,
    /// Only runs that may still have a process: registered, running, untracked.
    pub live: bool,
    /// Live runs plus those that ended at or after this time.
    pub ended_since: Option<Millis>,
}

/// What the reaper did about one lost run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reaped {
    pub run: String,
    /// Messages its participant had fetched during the run, back to pending.
    pub resurfaced: Vec<String>,
    /// Alerts raised (an alert already open is not raised again).
    pub alerts: Vec<String>,
}

/// Which orders to list. The default is every open order (as recorded), oldest first.
#[derive(Debug, Clone, Default)]
pub struct OrderQuery {
    /// Only orders this participant is party to: their `from`, `to` or `escalate_to`.
    pub party: Option<String>,
    /// Closed orders too (approved, declined, expired or cancelled as recorded).
    pub closed: bool,
}

/// An order after a write, and the events the write appended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OrderWritten {
    pub order: Order,
    pub events: Vec<Event>,
}
