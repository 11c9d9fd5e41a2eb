//! What store operations take and return: plain data, shaped for the CLI, MCP and HTTP
//! edges alike. The domain's own records (envelopes, participants, runs, orders) are the
//! core's types.

use baton_core::order::Order;
use baton_core::{
    Change, DeliveryStatus, Event, MessageType, Millis, Participant, RequestStatus, Topic,
};
use serde::Serialize;
use serde_json::{Map, Value};

pub use baton_core::delivery::{End, Stepped};
pub use baton_core::{Envelope, Recipient, Verb};

/// An event to append: its id and time are given (a new one's, or an imported one's);
/// the log assigns its position.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub id: String,
    pub at: Millis,
    pub actor: String,
    pub change: Change,
}

/// An event read from a log (an export), to be appended to another as it was: its id,
/// time, actor and change kept; its seq is the new log's to assign.
impl From<Event> for NewEvent {
    fn from(e: Event) -> Self {
        Self {
            id: e.id,
            at: e.at,
            actor: e.actor,
            change: e.change,
        }
    }
}

/// A new ULID: the time in milliseconds and 80 bits from the operating system's random
/// source. Not `ulid::Ulid::generate`: its generator (`rand`'s thread generator) asks the
/// processor which instructions it has the first time it runs in a process, with `cpuid`,
/// a trap to the hypervisor on a virtual machine that a command would pay at every start.
pub fn new_id() -> ulid::Ulid {
    let mut random = [0u8; 16];
    if getrandom::fill(&mut random).is_err() {
        return ulid::Ulid::generate();
    }
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    ulid::Ulid::from_parts(ms, u128::from_le_bytes(random))
}

impl NewEvent {
    /// A new event, with a fresh ULID.
    pub fn new(actor: &str, change: Change, at: Millis) -> Self {
        Self {
            id: new_id().to_string(),
            at,
            actor: actor.to_owned(),
            change,
        }
    }
}

/// How a claimed webhook delivery went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// The endpoint took what was pending up to `cursor`.
    Told { cursor: i64, at: Millis },
    /// Nothing up to `cursor` concerned the participant: nothing was sent.
    Passed { cursor: i64 },
    /// The endpoint failed (`failures` in a row now); try again at `next_at`.
    Failed {
        failures: u32,
        next_at: Millis,
        error: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Added {
    pub participant: Participant,
    /// False when the participant already existed with the same role.
    pub created: bool,
    /// Whether a policy was set (the one given differed from the one it held).
    pub policy_set: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sent {
    pub id: String,
    pub duplicate: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fetched {
    pub envelope: Envelope,
    pub payload: Map<String, Value>,
    /// The reader's status after the fetch, when the reader is a recipient.
    pub status: Option<DeliveryStatus>,
}

/// What a message is ranked and counted by without its envelope: the few columns a list
/// of every open item reads (its id, type, topic, when it was sent and, for a request, the
/// sender's own end), so a bounded reader loads only the envelopes it shows.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageHead {
    pub id: String,
    pub kind: MessageType,
    pub topic: Topic,
    pub created_at: Millis,
    pub request_status: Option<RequestStatus>,
}

/// A page of a list: the entries after the one with message id `after` (from the start
/// when `None`; none at all when no message has that id), at most `limit` of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub after: Option<String>,
    pub limit: u32,
}

impl Window {
    /// The whole list, for a caller that knows it is small (live work) or a test.
    pub const EVERYTHING: Window = Window {
        after: None,
        limit: u32::MAX,
    };
}

/// What waits for a person until it is acknowledged or settles, from the `attention`
/// projection: so the human queue reads the work still open, not every need and effect
/// there ever was.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attention {
    /// The needs no one acknowledged, their `gate.changed` events, oldest first.
    pub needs: Vec<Event>,
    /// The orders with an effect that failed or started with no recorded end
    /// (`Effects::stuck`), by id.
    pub stuck: Vec<String>,
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
    /// Opaque token for the next page; none on the last page.
    pub next: Option<String>,
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
    /// Live runs plus this many of the newest others (a bounded view, whatever the history).
    pub recent: Option<u32>,
    /// Only runs created after the one whose `seq` this is: the page after it.
    pub after_seq: Option<i64>,
    /// At most this many runs.
    pub limit: Option<u32>,
    /// Leave helpers (subagents seen through hooks) out: a view that counts them instead.
    pub without_helpers: bool,
}

/// How many rows of the ledger have one status and source, and how many of those had no
/// event since a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCount {
    pub status: baton_core::run::RunStatus,
    pub source: baton_core::run::Source,
    pub n: u64,
    /// Of `n`, those whose last event is older than the time asked about.
    pub quiet: u64,
    /// For helpers, the session or run they belong to (counted per parent).
    pub parent: Option<String>,
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

/// A key to record: everything but its token, which only the one it is issued to sees.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyIssue {
    pub id: String,
    pub participant: baton_core::Passname,
    pub scope: baton_core::key::Scope,
    /// `baton_core::key::hash` of the token.
    pub hash: String,
    pub expires_at: Option<Millis>,
}

/// Which orders to list. The default is every open order (as recorded), oldest first.
#[derive(Debug, Clone, Default)]
pub struct OrderQuery {
    /// Only orders this participant is party to: their `from`, `to` or `escalate_to`.
    pub party: Option<String>,
    /// Closed orders too (approved, declined, expired or cancelled as recorded).
    pub closed: bool,
    /// With `closed`: only the closed orders whose last step was at or after this time.
    pub closed_since: Option<Millis>,
    /// Only orders in these statuses as recorded (any, when empty).
    pub only: Vec<baton_core::order::OrderStatus>,
}

/// An order after a write, and the events the write appended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OrderWritten {
    pub order: Order,
    pub events: Vec<Event>,
}

#[cfg(test)]
mod tests {
    use super::new_id;

    #[test]
    fn new_ids_carry_the_time_and_differ() {
        let before = std::time::SystemTime::now();
        let ids: Vec<_> = (0..1000).map(|_| new_id()).collect();
        let after = std::time::SystemTime::now();
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len(), "every id is new");
        for id in &ids {
            let ms = |t: std::time::SystemTime| {
                t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
            };
            assert!(
                (ms(before)..=ms(after)).contains(&id.timestamp_ms()),
                "{id}"
            );
            assert_eq!(id.to_string().parse::<ulid::Ulid>().unwrap(), *id);
        }
    }
}

/// The repeats counted on one security event: how many, and when the newest was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeats {
    pub seq: i64,
    pub count: i64,
    pub last_at: Millis,
}

/// What an import of a portable log did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Imported {
    /// Events appended.
    pub imported: usize,
    /// Events the log held already (by id), left as they were.
    pub skipped: usize,
    /// Events never imported: keys, and on a merge the setup (policy, outside agent,
    /// webhook) of participants the project had already.
    pub left_out: usize,
    /// Items of the log that have another id here (the log's id → this project's).
    pub renamed: std::collections::BTreeMap<String, String>,
}
