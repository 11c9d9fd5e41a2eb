//! The delivery lifecycle: each recipient's status for one message, and the sender's own
//! end of a request. Transitions follow SPEC §5.1's table; anything else is an
//! [`InvalidTransition`] naming the current status and the steps that are allowed.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::message::MessageType;

/// A recipient's status for one message, independent of every other recipient's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

    /// The command a user runs to take this step.
    pub fn command(self) -> &'static str {
        match self {
            Self::Fetch => "show",
            Self::Refuse => "refuse",
            Self::Acknowledge => "ack",
            Self::Complete => "complete",
            Self::HandBack => "hand-back",
            Self::Archive => "archive",
        }
    }
}

/// The sender's own end of a request: open until it is satisfied with every recipient's
/// end, then completed, then archived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    pub fn command(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Archive => "archive",
        }
    }
}

/// A refused step: what was asked, where things stand, and what may be done instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "cannot {action} {what}: its status is {status}{why}; allowed next: {}",
    if allowed.is_empty() { "nothing (it is final)".to_owned() } else { allowed.join(", ") }
)]
pub struct InvalidTransition {
    pub action: &'static str,
    pub what: &'static str,
    pub status: &'static str,
    /// Extra reason, e.g. " (only a request is completed)"; empty when the table says it all.
    pub why: &'static str,
    pub allowed: Vec<&'static str>,
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
        let why = match (status, action) {
            (S::Delivered, A::Acknowledge) => {
                " (a request is discharged with complete or hand-back, not acknowledged)"
            }
            (S::Delivered, A::Complete | A::HandBack) => {
                " (only a request is completed or handed back; acknowledge an info or message)"
            }
            (S::Pending, A::Acknowledge | A::Complete | A::HandBack) => {
                " (fetch it first with `baton show ID`)"
            }
            _ => "",
        };
        InvalidTransition {
            action: action.command(),
            what: "this message",
            status: status.as_str(),
            why,
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
pub fn allowed(status: DeliveryStatus, kind: MessageType) -> Vec<&'static str> {
    DeliveryAction::ALL
        .into_iter()
        .filter(|a| next_status(status, *a, kind).is_some_and(|next| next != status))
        .map(DeliveryAction::command)
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
            action: action.command(),
            what: "your own end of this request",
            status: status.as_str(),
            why: "",
            allowed: [RequestAction::Complete, RequestAction::Archive]
                .into_iter()
                .filter(|a| {
                    matches!(
                        (status, a),
                        (RequestStatus::Open, RequestAction::Complete)
                            | (RequestStatus::Completed, RequestAction::Archive)
                    )
                })
                .map(RequestAction::command)
                .collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DeliveryAction as A;
    use DeliveryStatus as S;
    use proptest::prelude::*;

    /// SPEC §5.1's table, written out as data: (from, action, to, the types it applies to).
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
        assert_eq!(
            err.to_string(),
            "cannot ack this message: its status is pending (fetch it first with `baton show ID`); \
             allowed next: show, refuse"
        );
        let err = transition(S::Archived, A::Complete, MessageType::Request).unwrap_err();
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
        assert_eq!(err.allowed, vec!["complete"]);
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
