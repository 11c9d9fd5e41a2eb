//! Events: the only source of truth. Every change to a project is one appended [`Event`];
//! statuses and queues are projections of the log. Events are never updated or deleted.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::authority::{Denied, Policy};
use crate::delivery::{DeliveryStatus, RequestStatus};
use crate::effect::EffectChange;
use crate::gate::GateChange;
use crate::key::KeyChange;
use crate::message::MessageType;
use crate::names::{Passname, Topic};
use crate::negotiation::NegotiationChange;
use crate::order::OrderChange;
use crate::run::RunChange;
use crate::state::StateChange;
use crate::time::Millis;
use crate::webhook::WebhookChange;

/// The actor recorded for changes made by the local operator without an identity
/// (`baton init`, `baton agent add`).
pub const LOCAL_OPERATOR: &str = "@local";

/// One committed change: who did what to which subject, and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the project's log, assigned by the store; strictly increasing.
    pub seq: i64,
    /// A ULID, unique across projects (so logs can be merged by union).
    pub id: String,
    pub at: Millis,
    pub actor: String,
    #[serde(flatten)]
    pub change: Change,
}

/// What changed. Serialized as `{"kind": ..., "data": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data")]
pub enum Change {
    #[serde(rename = "participant.added")]
    ParticipantAdded { name: Passname, role: String },
    /// A participant's authority policy was set (`None`: back to its role's default).
    #[serde(rename = "participant.policy")]
    PolicySet {
        name: Passname,
        policy: Option<Policy>,
    },
    /// A participant was made an outside A2A agent (`None`: no longer one): requests to it
    /// are handed to the agent at its URL.
    #[serde(rename = "participant.a2a")]
    A2aAgent {
        name: Passname,
        agent: Option<crate::participant::OutsideAgent>,
    },
    /// An action beyond authority was refused: a security event.
    #[serde(rename = "security.refused")]
    Denied(Denied),
    #[serde(rename = "message.sent")]
    MessageSent(Box<SentMessage>),
    /// A recipient's status for one message changed.
    #[serde(rename = "delivery.changed")]
    DeliveryChanged {
        message: String,
        participant: Passname,
        status: DeliveryStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// The sender's own end of a request changed.
    #[serde(rename = "request.changed")]
    RequestChanged {
        message: String,
        status: RequestStatus,
    },
    /// The project state changed: focus, a stream, a decision, a constraint, a note, a
    /// receipt or an alert.
    #[serde(rename = "state.changed")]
    State(StateChange),
    /// A fact about a run: registered, started, a heartbeat, output read, an exit, a
    /// loss, an untracked process, or a hook call.
    #[serde(rename = "run.changed")]
    Run(RunChange),
    /// A Work Order was offered or took a step of its lifecycle.
    #[serde(rename = "order.changed")]
    Order(OrderChange),
    /// A key was issued or revoked.
    #[serde(rename = "key.changed")]
    Key(KeyChange),
    /// A participant's webhook was set or removed.
    #[serde(rename = "webhook.changed")]
    Webhook(WebhookChange),
    /// A negotiation was opened, a party submitted its position, or the engine settled it.
    #[serde(rename = "negotiation.changed")]
    Negotiation(NegotiationChange),
    /// The gateway forwarded, held or refused a call on an order, or a held call was
    /// dropped, started or finished.
    #[serde(rename = "effect.changed")]
    Effect(EffectChange),
    /// The review gate and the human queue: a verdict, a round's conclusion, a need for a
    /// person, an acknowledged queue item.
    #[serde(rename = "gate.changed")]
    Gate(GateChange),
    /// A server handed a request to an outside A2A agent, or took a step of that
    /// hand-over: a send claimed, where it landed, a send ended, a question posted.
    /// Written by the server only; no operation writes it.
    #[serde(rename = "handover.changed")]
    Handover(crate::handover::HandoverChange),
    /// A participant reserved paths, renewed or released a reservation, or a commit was
    /// seen to have bypassed the git guard.
    #[serde(rename = "reservation.changed")]
    Reservation(crate::reservation::ReservationChange),
    /// A participant claimed a request or an order sent to a pool: it is its own from here.
    #[serde(rename = "pool.claimed")]
    Claimed(crate::pool::Claimed),
}

impl Change {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ParticipantAdded { .. } => "participant.added",
            Self::PolicySet { .. } => "participant.policy",
            Self::A2aAgent { .. } => crate::participant::A2A_KIND,
            Self::Denied(_) => "security.refused",
            Self::MessageSent(_) => "message.sent",
            Self::DeliveryChanged { .. } => "delivery.changed",
            Self::RequestChanged { .. } => "request.changed",
            Self::State(_) => "state.changed",
            Self::Run(_) => "run.changed",
            Self::Order(_) => "order.changed",
            Self::Key(_) => "key.changed",
            Self::Webhook(_) => "webhook.changed",
            Self::Negotiation(_) => "negotiation.changed",
            Self::Effect(_) => crate::effect::KIND,
            Self::Gate(_) => "gate.changed",
            Self::Handover(_) => crate::handover::KIND,
            Self::Reservation(_) => crate::reservation::KIND,
            Self::Claimed(_) => crate::pool::KIND,
        }
    }

    /// The thing the event is about: a passname, a message, run, order or negotiation id.
    pub fn subject(&self) -> &str {
        match self {
            Self::ParticipantAdded { name, .. }
            | Self::PolicySet { name, .. }
            | Self::A2aAgent { name, .. } => name.as_str(),
            Self::Denied(d) => d.participant.as_str(),
            Self::MessageSent(m) => &m.id,
            Self::DeliveryChanged { message, .. } | Self::RequestChanged { message, .. } => message,
            Self::State(change) => change.subject(),
            Self::Run(change) => change.subject(),
            Self::Order(change) => change.order(),
            Self::Key(change) => change.key(),
            Self::Webhook(change) => change.participant().as_str(),
            Self::Negotiation(change) => change.negotiation(),
            Self::Effect(change) => change.order(),
            Self::Gate(change) => change.subject(),
            Self::Handover(change) => change.request(),
            Self::Reservation(change) => change.subject(),
            Self::Claimed(c) => &c.message,
        }
    }

    /// The `data` half of the serialized form.
    pub fn data(&self) -> Value {
        let mut tagged = serde_json::to_value(self).expect("a Change always serializes");
        tagged
            .as_object_mut()
            .and_then(|o| o.remove("data"))
            .unwrap_or(Value::Null)
    }

    /// Rebuilds a change from the stored kind and data.
    pub fn from_parts(kind: &str, data: Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(serde_json::json!({ "kind": kind, "data": data }))
    }
}

/// A message as it was sent: the envelope and the payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SentMessage {
    pub id: String,
    pub from: Passname,
    /// Empty when it went to a pool: whoever claims it becomes its recipient.
    pub to: Vec<Passname>,
    /// The pool it went to, if it went to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<crate::pool::Pool>,
    #[serde(rename = "type")]
    pub kind: MessageType,
    pub topic: Topic,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    pub payload: Map<String, Value>,
    pub excerpt: String,
    pub size: usize,
    pub hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_round_trips_through_kind_and_data() {
        let change = Change::DeliveryChanged {
            message: "01J".into(),
            participant: Passname::new("impl-1").unwrap(),
            status: DeliveryStatus::HandedBack,
            note: Some("blocked on fixtures".into()),
        };
        assert_eq!(change.kind(), "delivery.changed");
        assert_eq!(change.subject(), "01J");
        let data = change.data();
        assert_eq!(data["status"], "handed_back");
        assert_eq!(Change::from_parts(change.kind(), data).unwrap(), change);
    }

    #[test]
    fn an_unknown_kind_does_not_parse() {
        assert!(Change::from_parts("message.edited", serde_json::json!({})).is_err());
    }
}
