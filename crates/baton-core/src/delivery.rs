//! The delivery lifecycle: each recipient's status for one message, and the sender's own
//! end of a request. Transitions follow the table in [`transition`]; anything else is an
//! [`InvalidTransition`] naming the current status and the steps that are allowed.
//!
//! [`plan_step`] and [`plan_fetch`] turn what a participant asks into the events to
//! append, so a backend stores the outcome and decides nothing.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::{Change, SentMessage};
use crate::message::{DEFAULT_PAYLOAD_CAP, Draft, Envelope, MessageType, Payload};
use crate::names::Passname;
use crate::refusal::{Action, Blocker, Field, InvalidTransition, Refusal};

/// A recipient's status for one message, independent of every other recipient's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// Stored, not yet fetched. Previewing is not delivery.
    Pending,
    /// The full payload was fetched.
    Delivered,
    /// An `info` or `message` was read; no work moved.
    Acknowledged,
    /// A `request` was discharged.
    Completed,
    /// Out of the active view, still in the record.
    Archived,
    /// Refused by the recipient, with reasons.
    Refused,
    /// The recipient cannot proceed; the blocker is a threaded reply.
    HandedBack,
}

impl DeliveryStatus {
    pub const ALL: [DeliveryStatus; 7] = [
        Self::Pending,
        Self::Delivered,
        Self::Acknowledged,
        Self::Completed,
        Self::Archived,
        Self::Refused,
        Self::HandedBack,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Acknowledged => "acknowledged",
            Self::Completed => "completed",
            Self::Archived => "archived",
            Self::Refused => "refused",
            Self::HandedBack => "handed_back",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Whether the recipient still owes something: the inbox shows these.
    pub fn is_owed(self) -> bool {
        matches!(self, Self::Pending | Self::Delivered)
    }
}

impl fmt::Display for DeliveryStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a recipient does to its delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryAction {
    /// Fetch the full payload (`baton show`).
    Fetch,
    Refuse,
    Acknowledge,
    Complete,
    HandBack,
    Archive,
}

impl DeliveryAction {
    pub const ALL: [DeliveryAction; 6] = [
        Self::Fetch,
        Self::Refuse,
        Self::Acknowledge,
        Self::Complete,
        Self::HandBack,
        Self::Archive,
    ];

    /// The step's canonical name (an edge may spell it its own way).
    pub fn name(self) -> &'static str {
        match self {
            Self::Fetch => "show",
            Self::Refuse => "refuse",
            Self::Acknowledge => "ack",
            Self::Complete => "complete",
            Self::HandBack => "hand_back",
            Self::Archive => "archive",
        }
    }
}

/// The sender's own end of a request: open until it is satisfied with every recipient's
/// end, then completed, then archived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RequestStatus {
    Open,
    Completed,
    Archived,
}

impl RequestStatus {
    pub const ALL: [RequestStatus; 3] = [Self::Open, Self::Completed, Self::Archived];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Completed => "completed",
            Self::Archived => "archived",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// The sender's end of a message of `kind` as it is sent: a request opens; no other
    /// kind has one.
    pub fn on_send(kind: MessageType) -> Option<Self> {
        (kind == MessageType::Request).then_some(Self::Open)
    }
}

/// The status each recipient's delivery starts in.
pub const FIRST_DELIVERY: DeliveryStatus = DeliveryStatus::Pending;

/// Where a sent message sits in its conversation, given its parent's place (thread root,
/// depth) when it replies to a message the store has: one level below its parent, in its
/// parent's thread; otherwise the root of a thread of its own, at depth 0.
pub fn thread_place(id: &str, parent: Option<(String, i64)>) -> (String, i64) {
    parent.map_or_else(|| (id.to_owned(), 0), |(root, depth)| (root, depth + 1))
}

impl fmt::Display for RequestStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestAction {
    Complete,
    Archive,
}

impl RequestAction {
    pub fn name(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Archive => "archive",
        }
    }
}

/// Applies a recipient's action to its delivery of a message of type `kind`.
///
/// Fetching is always allowed and moves `pending` to `delivered`; from any other status it
/// changes nothing (a re-read is not a new fact).
pub fn transition(
    status: DeliveryStatus,
    action: DeliveryAction,
    kind: MessageType,
) -> Result<DeliveryStatus, InvalidTransition> {
    use DeliveryAction as A;
    use DeliveryStatus as S;
    next_status(status, action, kind).ok_or_else(|| {
        let blocker = match (status, action) {
            (S::Delivered, A::Acknowledge) => Some(Blocker::RequestsAreDischarged),
            (S::Delivered, A::Complete | A::HandBack) => Some(Blocker::OnlyRequests),
            (S::Pending, A::Acknowledge | A::Complete | A::HandBack) => Some(Blocker::FetchFirst),
            _ => None,
        };
        InvalidTransition {
            action: Action::Delivery(action),
            status: status.as_str(),
            blocker,
            allowed: allowed(status, kind),
        }
    })
}

fn next_status(
    status: DeliveryStatus,
    action: DeliveryAction,
    kind: MessageType,
) -> Option<DeliveryStatus> {
    use DeliveryAction as A;
    use DeliveryStatus as S;
    let is_request = kind == MessageType::Request;
    match (status, action) {
        (S::Pending, A::Fetch) => Some(S::Delivered),
        (s, A::Fetch) => Some(s),
        (S::Pending | S::Delivered, A::Refuse) => Some(S::Refused),
        (S::Delivered, A::Acknowledge) if !is_request => Some(S::Acknowledged),
        (S::Delivered, A::Complete) if is_request => Some(S::Completed),
        (S::Delivered, A::HandBack) if is_request => Some(S::HandedBack),
        (S::Acknowledged | S::Completed | S::Refused | S::HandedBack, A::Archive) => {
            Some(S::Archived)
        }
        _ => None,
    }
}

/// The steps that change a delivery in `status` (re-reading is left out: it changes nothing).
pub fn allowed(status: DeliveryStatus, kind: MessageType) -> Vec<Action> {
    DeliveryAction::ALL
        .into_iter()
        .filter(|a| next_status(status, *a, kind).is_some_and(|next| next != status))
        .map(Action::Delivery)
        .collect()
}

/// The reaper's step, not a recipient's, and outside the table above on purpose: a
/// message its recipient fetched during a run that was then lost goes back to `pending`,
/// so the work is offered again instead of waiting on a process that no longer exists.
/// Only `delivered` resurfaces; every later status is the recipient's own word.
pub fn resurface(status: DeliveryStatus) -> Option<DeliveryStatus> {
    (status == DeliveryStatus::Delivered).then_some(DeliveryStatus::Pending)
}

/// Applies the sender's action to its own end of a request.
pub fn request_transition(
    status: RequestStatus,
    action: RequestAction,
) -> Result<RequestStatus, InvalidTransition> {
    match (status, action) {
        (RequestStatus::Open, RequestAction::Complete) => Ok(RequestStatus::Completed),
        (RequestStatus::Completed, RequestAction::Archive) => Ok(RequestStatus::Archived),
        _ => Err(InvalidTransition {
            action: Action::Request(action),
            status: status.as_str(),
            blocker: None,
            allowed: [RequestAction::Complete, RequestAction::Archive]
                .into_iter()
                .filter(|a| {
                    matches!(
                        (status, a),
                        (RequestStatus::Open, RequestAction::Complete)
                            | (RequestStatus::Completed, RequestAction::Archive)
                    )
                })
                .map(Action::Request)
                .collect(),
        }),
    }
}

// ---- planning a step ------------------------------------------------------------------------

/// A status step named by the command that takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    Ack,
    Complete,
    HandBack,
    Refuse,
    Archive,
}

impl Verb {
    /// The recipient's action this verb takes.
    pub fn action(self) -> DeliveryAction {
        match self {
            Self::Ack => DeliveryAction::Acknowledge,
            Self::Complete => DeliveryAction::Complete,
            Self::HandBack => DeliveryAction::HandBack,
            Self::Refuse => DeliveryAction::Refuse,
            Self::Archive => DeliveryAction::Archive,
        }
    }
}

/// Which end of a message a step moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum End {
    /// The recipient's delivery.
    Recipient,
    /// The sender's own end of a request.
    Sender,
}

impl End {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Recipient => "recipient",
            Self::Sender => "sender",
        }
    }
}

/// What a step did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stepped {
    pub id: String,
    /// Which end moved.
    pub end: End,
    pub from: &'static str,
    pub status: &'static str,
    /// The threaded reply that carried the note, if any.
    pub reply: Option<String>,
}

/// The events a step appends: the status change, and the threaded reply that carries its
/// note to the sender (the store gives the reply its id).
#[derive(Debug, Clone)]
pub struct StepPlan {
    pub change: Change,
    pub reply: Option<Draft>,
    pub stepped: Stepped,
}

/// The note of a step, trimmed; refuse and hand-back must carry one (it is posted to the
/// sender). Checked before anything is read.
pub fn note_for(verb: Verb, note: Option<&str>) -> Result<Option<&str>, Refusal> {
    let note = note.map(str::trim).filter(|n| !n.is_empty());
    if matches!(verb, Verb::HandBack | Verb::Refuse) && note.is_none() {
        return Err(Refusal::Missing(Field::Reason));
    }
    Ok(note)
}

/// Whether `m` is the note a recipient's completion posted to the sender: an `info` reply
/// marked `"completed": PARENT`. It tells what was done; it asks nothing.
pub fn completion_note(m: &SentMessage) -> bool {
    m.kind == MessageType::Info
        && m.reply_to.is_some()
        && m.payload
            .get(DeliveryStatus::Completed.as_str())
            .and_then(Value::as_str)
            == m.reply_to.as_deref()
}

/// The step `who` takes on message `env`: its own delivery when it is a recipient, its
/// own end of the request when it sent it.
pub fn plan_step(
    env: &Envelope,
    who: &Passname,
    verb: Verb,
    note: Option<&str>,
) -> Result<StepPlan, Refusal> {
    let note = note_for(verb, note)?;
    let id = &env.id;
    if let Some(current) = env.status_for(who) {
        let next = transition(current, verb.action(), env.kind)?;
        // A completion note moves knowledge; a refusal or hand-back asks for an answer. The
        // marker names the status the step reached.
        let reply = note
            .map(|text| -> Result<Draft, Refusal> {
                let kind = if verb == Verb::Complete {
                    MessageType::Info
                } else {
                    MessageType::Message
                };
                let payload = serde_json::json!({ "body": text, next.as_str(): id });
                Ok(Draft {
                    to: vec![env.from.clone()],
                    kind,
                    topic: env.topic.clone(),
                    reply_to: Some(id.clone()),
                    payload: Payload::from_value(payload, DEFAULT_PAYLOAD_CAP).map_err(
                        |error| Refusal::Payload {
                            field: Field::Note,
                            error,
                        },
                    )?,
                    idempotency_key: None,
                })
            })
            .transpose()?;
        return Ok(StepPlan {
            change: Change::DeliveryChanged {
                message: id.clone(),
                participant: who.clone(),
                status: next,
                note: note.map(str::to_owned),
            },
            reply,
            stepped: Stepped {
                id: id.clone(),
                end: End::Recipient,
                from: current.as_str(),
                status: next.as_str(),
                reply: None,
            },
        });
    }
    if &env.from != who {
        return Err(Refusal::NotAParty {
            who: who.clone(),
            id: id.clone(),
        });
    }
    let current = env.request_status.ok_or_else(|| Refusal::NotARequest {
        id: id.clone(),
        kind: env.kind,
    })?;
    let action = match verb {
        Verb::Complete => RequestAction::Complete,
        Verb::Archive => RequestAction::Archive,
        _ => return Err(Refusal::SenderSteps { id: id.clone() }),
    };
    if note.is_some() {
        return Err(Refusal::SenderNote);
    }
    let next = request_transition(current, action)?;
    Ok(StepPlan {
        change: Change::RequestChanged {
            message: id.clone(),
            status: next,
        },
        reply: None,
        stepped: Stepped {
            id: id.clone(),
            end: End::Sender,
            from: current.as_str(),
            status: next.as_str(),
            reply: None,
        },
    })
}

/// Reading a message: a recipient's pending delivery becomes delivered. `None` when the
/// read changes nothing (not a recipient, or read before).
pub fn plan_fetch(env: &Envelope, reader: &Passname) -> Result<Option<Change>, Refusal> {
    let Some(current) = env.status_for(reader) else {
        return Ok(None);
    };
    let next = transition(current, DeliveryAction::Fetch, env.kind)?;
    Ok((next != current).then(|| Change::DeliveryChanged {
        message: env.id.clone(),
        participant: reader.clone(),
        status: next,
        note: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use DeliveryAction as A;
    use DeliveryStatus as S;
    use proptest::prelude::*;

    /// The delivery lifecycle's table as data: (from, action, to, the types it applies to).
    const R: &[MessageType] = &[MessageType::Request];
    const NOT_R: &[MessageType] = &[MessageType::Info, MessageType::Message];
    const ANY: &[MessageType] = &MessageType::ALL;
    const TABLE: &[(S, A, S, &[MessageType])] = &[
        (S::Pending, A::Fetch, S::Delivered, ANY),
        (S::Pending, A::Refuse, S::Refused, ANY),
        (S::Delivered, A::Refuse, S::Refused, ANY),
        (S::Delivered, A::Acknowledge, S::Acknowledged, NOT_R),
        (S::Delivered, A::Complete, S::Completed, R),
        (S::Delivered, A::HandBack, S::HandedBack, R),
        (S::Acknowledged, A::Archive, S::Archived, ANY),
        (S::Completed, A::Archive, S::Archived, ANY),
        (S::Refused, A::Archive, S::Archived, ANY),
        (S::HandedBack, A::Archive, S::Archived, ANY),
    ];

    fn table(from: S, action: A, kind: MessageType) -> Option<S> {
        TABLE
            .iter()
            .find(|(f, a, _, kinds)| *f == from && *a == action && kinds.contains(&kind))
            .map(|(_, _, to, _)| *to)
    }

    #[test]
    fn the_transition_function_is_the_table() {
        for status in S::ALL {
            for action in A::ALL {
                for kind in MessageType::ALL {
                    let got = transition(status, action, kind).ok();
                    let want =
                        table(status, action, kind).or((action == A::Fetch).then_some(status));
                    assert_eq!(got, want, "{status} --{action:?}--> for a {kind}");
                }
            }
        }
    }

    #[test]
    fn refusals_name_the_status_and_the_allowed_steps() {
        let err = transition(S::Pending, A::Acknowledge, MessageType::Request).unwrap_err();
        assert_eq!(err.status, "pending");
        assert_eq!(err.blocker, Some(Blocker::FetchFirst));
        assert_eq!(
            err.allowed,
            [Action::Delivery(A::Fetch), Action::Delivery(A::Refuse)]
        );
        let err = transition(S::Archived, A::Complete, MessageType::Request).unwrap_err();
        assert!(err.allowed.is_empty());
        assert!(
            err.to_string()
                .ends_with("allowed next: nothing (it is final)")
        );
    }

    #[test]
    fn the_senders_end_goes_open_completed_archived() {
        use RequestAction as RA;
        use RequestStatus as RS;
        assert_eq!(
            request_transition(RS::Open, RA::Complete),
            Ok(RS::Completed)
        );
        assert_eq!(
            request_transition(RS::Completed, RA::Archive),
            Ok(RS::Archived)
        );
        let err = request_transition(RS::Open, RA::Archive).unwrap_err();
        assert_eq!(err.allowed, vec![Action::Request(RA::Complete)]);
        assert!(request_transition(RS::Archived, RA::Complete).is_err());
    }

    #[test]
    fn only_a_delivered_message_resurfaces() {
        for status in S::ALL {
            let want = (status == S::Delivered).then_some(S::Pending);
            assert_eq!(resurface(status), want, "{status}");
        }
    }

    fn action() -> impl Strategy<Value = A> {
        proptest::sample::select(A::ALL.to_vec())
    }

    fn kind() -> impl Strategy<Value = MessageType> {
        proptest::sample::select(MessageType::ALL.to_vec())
    }

    proptest! {
        /// No sequence of commands reaches a state the table forbids: every step that changes
        /// the status is a row of the table, and every refused step has no row.
        #[test]
        fn no_sequence_leaves_the_table(kind in kind(), actions in proptest::collection::vec(action(), 0..40)) {
            let mut status = S::Pending;
            for a in actions {
                match transition(status, a, kind) {
                    Ok(next) if next == status => prop_assert_eq!(a, A::Fetch),
                    Ok(next) => {
                        prop_assert_eq!(table(status, a, kind), Some(next));
                        status = next;
                    }
                    Err(e) => {
                        prop_assert_eq!(table(status, a, kind), None);
                        prop_assert_eq!(e.status, status.as_str());
                    }
                }
            }
            // What a request may end in, and what the others may.
            if kind == MessageType::Request {
                prop_assert!(status != S::Acknowledged);
            } else {
                prop_assert!(!matches!(status, S::Completed | S::HandedBack));
            }
        }
    }
}
