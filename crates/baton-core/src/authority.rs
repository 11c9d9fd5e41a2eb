//! Authority: what a participant may do, and on which topics.
//!
//! A participant's policy is a set of [`Power`]s and the topics they reach. Each role has
//! a least-privilege default ([`Policy::for_role`]); an owner may set another. The write
//! path asks [`authorize`] before anything is appended; a refusal it gives is a security
//! event ([`denied`]), recorded in its own transaction after the refused one wrote nothing.
//!
//! Authority narrows, never widens, what the lifecycles allow: a power lets `impl-1`
//! accept requests, but only those addressed to it.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::delivery::Verb;
use crate::event::Change;
use crate::message::{Envelope, MessageType};
use crate::names::{Passname, Topic};
use crate::order::OrderRequest;
use crate::participant::Participant;
use crate::refusal::Refusal;

/// One thing a policy may allow.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Power {
    /// Send requests and offer Work Orders: ask for work.
    Request,
    /// Send information and messages (replies to what one received included), and record
    /// project memory: focus, streams, decisions, constraints, notes, receipts, needs,
    /// acknowledgements, runs, negotiations and session hand-overs. Recording memory is
    /// telling the project something, as an `info` to everyone would.
    Send,
    /// Take on requests and orders addressed to oneself: accept, start, report, complete,
    /// hand back.
    Accept,
    /// Answer as an order's sender: approve, ask for rework, reject, answer a question.
    Approve,
    /// Run staged side effects (the gate layer).
    Effects,
}

impl Power {
    pub const ALL: [Power; 5] = [
        Self::Request,
        Self::Send,
        Self::Accept,
        Self::Approve,
        Self::Effects,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::Send => "send",
            Self::Accept => "accept",
            Self::Approve => "approve",
            Self::Effects => "effects",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// What the power lets one do, for a refusal: "send requests".
    pub fn doing(self) -> &'static str {
        match self {
            Self::Request => "send requests or offer orders",
            Self::Send => "send messages or record project memory",
            Self::Accept => "take on requests or orders",
            Self::Approve => "approve, reject or answer orders",
            Self::Effects => "run side effects",
        }
    }
}

impl fmt::Display for Power {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Topics a policy reaches: a topic (`billing`), a prefix (`billing-*`) or every topic
/// (`*`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct TopicPattern(String);

impl TopicPattern {
    /// A pattern: `*`, a topic, or a topic's first characters followed by `*`.
    pub fn new(raw: &str) -> Result<Self, Refusal> {
        let raw = raw.trim();
        let head = raw.strip_suffix('*').unwrap_or(raw);
        let ok = head.is_empty() && raw == "*" || !head.is_empty() && Topic::new(head).is_ok();
        if ok {
            Ok(Self(raw.to_owned()))
        } else {
            Err(Refusal::TopicPattern {
                pattern: raw.to_owned(),
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn matches(&self, topic: &Topic) -> bool {
        match self.0.strip_suffix('*') {
            Some(prefix) => topic.as_str().starts_with(prefix),
            None => topic.as_str() == self.0,
        }
    }
}

impl<'de> Deserialize<'de> for TopicPattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::new(&raw).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for TopicPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a participant may do, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Policy {
    /// The powers it holds.
    pub may: BTreeSet<Power>,
    /// The topics they reach; absent, every topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topics: Option<Vec<TopicPattern>>,
}

impl Policy {
    /// The least a role needs: an owner holds every power; a planner asks for work, takes
    /// on what it is asked and answers its orders; a reviewer does not ask; an executor
    /// takes on work and says so; an observer only reads. Any other role sends and takes
    /// on work, as an executor does.
    pub fn for_role(role: &str) -> Self {
        use Power::*;
        let may: &[Power] = match role {
            "owner" => &Power::ALL,
            "planner" => &[Request, Send, Accept, Approve],
            "reviewer" => &[Send, Accept, Approve],
            "observer" => &[],
            _ => &[Send, Accept],
        };
        Self {
            may: may.iter().copied().collect(),
            topics: None,
        }
    }

    /// This policy with the powers and topics given in place of its own; `*` among the
    /// topics means every topic.
    pub fn amend(
        mut self,
        may: Option<BTreeSet<Power>>,
        topics: Option<Vec<TopicPattern>>,
    ) -> Self {
        if let Some(may) = may {
            self.may = may;
        }
        if let Some(topics) = topics {
            self.topics = (!topics.iter().any(|t| t.as_str() == "*")).then_some(topics);
        }
        self
    }

    /// Powers by name (`request`, `send`, …); `none` alone is the empty set.
    pub fn powers<S: AsRef<str>>(names: &[S]) -> Result<BTreeSet<Power>, Refusal> {
        names
            .iter()
            .map(|n| n.as_ref().trim())
            .filter(|n| *n != "none")
            .map(|n| Power::parse(n).ok_or_else(|| Refusal::PowerName { name: n.to_owned() }))
            .collect()
    }

    /// Topic patterns from text.
    pub fn topics<S: AsRef<str>>(raw: &[S]) -> Result<Vec<TopicPattern>, Refusal> {
        raw.iter().map(|t| TopicPattern::new(t.as_ref())).collect()
    }

    /// Whether the policy lets one use `power` on `topic`.
    pub fn allows(&self, power: Power, topic: &Topic) -> bool {
        self.may.contains(&power)
            && self
                .topics
                .as_ref()
                .is_none_or(|patterns| patterns.iter().any(|p| p.matches(topic)))
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.may.is_empty() {
            f.write_str("nothing (read only)")?;
        } else {
            let may: Vec<&str> = self.may.iter().map(|p| p.as_str()).collect();
            f.write_str(&may.join(", "))?;
        }
        match &self.topics {
            None => f.write_str(" on every topic"),
            Some(t) => {
                let topics: Vec<&str> = t.iter().map(TopicPattern::as_str).collect();
                write!(f, " on topics {}", topics.join(", "))
            }
        }
    }
}

impl Participant {
    /// The policy in force: the one set for it, else its role's default.
    pub fn policy(&self) -> Policy {
        self.policy
            .clone()
            .unwrap_or_else(|| Policy::for_role(&self.role))
    }
}

/// Whether `actor` is the machine itself rather than a participant: the local operator
/// (`@local`), the reaper, the negotiation's mediator. No key and no `--as` can name one
/// (a passname never starts with `@`), so only the machine's own processes act as one, and
/// it holds every power.
pub fn is_machine(actor: &str) -> bool {
    actor.starts_with('@')
}

/// Whether `who` may use `power` on `topic` (`None`: a write with no topic, such as project
/// memory, which takes the power alone); the refusal names what its policy allows.
pub fn authorize(who: &Participant, power: Power, topic: Option<&Topic>) -> Result<(), Refusal> {
    let policy = who.policy();
    let allowed = match topic {
        Some(topic) => policy.allows(power, topic),
        None => policy.may.contains(&power),
    };
    if allowed {
        return Ok(());
    }
    Err(Refusal::Beyond {
        actor: who.name.clone(),
        role: who.role.clone(),
        power,
        topic: topic.cloned(),
        policy: Box::new(policy),
    })
}

/// The power every write of project memory takes (see [`Power::Send`]).
pub const MEMORY: Power = Power::Send;

/// Whether `recipient` could take on a message of `kind` on `topic`: a request (an order's
/// offer included) goes only to a recipient whose policy lets it accept work on that
/// topic, so whatever lands in an inbox can be closed by its owner. Information and
/// messages need nothing of their recipient: reading, acknowledging and archiving take no
/// power.
pub fn deliverable(
    recipient: &Participant,
    kind: MessageType,
    topic: &Topic,
) -> Result<(), Refusal> {
    let policy = recipient.policy();
    if kind != MessageType::Request || policy.allows(Power::Accept, topic) {
        return Ok(());
    }
    Err(Refusal::Unwilling {
        recipient: recipient.name.clone(),
        role: recipient.role.clone(),
        topic: topic.clone(),
        policy: Box::new(policy),
    })
}

/// The power sending a message of `kind` takes.
pub fn for_send(kind: MessageType) -> Power {
    match kind {
        MessageType::Request => Power::Request,
        _ => Power::Send,
    }
}

/// The power `who`'s step on a message takes, if any: completing a request one received
/// is taking on work; acknowledging, refusing, handing back and archiving are one's own
/// inbox, and a sender's step on its own request is its own end.
pub fn for_step(envelope: &Envelope, who: &Passname, verb: Verb) -> Option<Power> {
    let recipient = envelope.status_for(who).is_some();
    (recipient && verb == Verb::Complete).then_some(Power::Accept)
}

/// The power a step of an order takes, if any: the worker's steps toward doing it take
/// `accept`; the sender's answers take `approve`; declining and cancelling take none.
pub fn for_order(request: &OrderRequest) -> Option<Power> {
    match request {
        OrderRequest::Accept | OrderRequest::Start | OrderRequest::Report { .. } => {
            Some(Power::Accept)
        }
        OrderRequest::Answer { .. } | OrderRequest::Approve | OrderRequest::Rework { .. } => {
            Some(Power::Approve)
        }
        // Going on offers the order to its worker, as creating it did.
        OrderRequest::Proceed { .. } => Some(Power::Request),
        OrderRequest::Decline { .. } | OrderRequest::Cancel { .. } => None,
    }
}

/// Setting `policy` on `existing` (`None`: back to its role's default): the change to
/// append, or `None` when it holds that policy already.
pub fn plan_policy(
    existing: &Participant,
    policy: Option<Policy>,
) -> Result<Option<Change>, Refusal> {
    if existing.policy == policy {
        return Ok(None);
    }
    Ok(Some(Change::PolicySet {
        name: existing.name.clone(),
        policy,
    }))
}

/// The kind of a security event in the log (`Change::Denied`).
pub const DENIED_KIND: &str = "security.refused";

/// How long a recorded refusal takes the same refusal again as a repeat: counted on it
/// (`baton security-events` shows the count) rather than appended as another event, so a
/// participant refused over and over cannot grow the log without bound.
pub const REPEAT_WINDOW_MS: crate::Millis = 60_000;

/// The security event among `recent` (newest first) that `denied` repeats: the same
/// participant refused the same action, topic and reason, recorded within
/// [`REPEAT_WINDOW_MS`] of `now`.
pub fn repeat_of(denied: &Denied, recent: &[crate::Event], now: crate::Millis) -> Option<i64> {
    recent
        .iter()
        .take_while(|e| e.at >= now - REPEAT_WINDOW_MS)
        .find(|e| matches!(&e.change, crate::Change::Denied(d) if d == denied))
        .map(|e| e.seq)
}

/// A refusal recorded as a security event (`security.refused`): who tried what, where,
/// and why it was refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Denied {
    pub participant: Passname,
    /// What was tried: a power, or what a key's scope did not allow.
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<Topic>,
    /// The refusal's code (`forbidden`) and its words.
    pub code: String,
    pub reason: String,
}

/// What a request that names its own actor tried: a passname is a claim, only the key
/// proves who acts.
pub const ACT_AS_ANOTHER: &str = "name the actor in a request";

/// The security event a refusal of `who` is, if it is one: every refusal of kind
/// `forbidden` — an action beyond its policy or its key's scope, a request naming its own
/// actor, a step on what is not its own (someone else's message, order, negotiation or
/// review). One rule, so a new way to be forbidden is recorded without being listed here;
/// the list only words what was tried.
pub fn denied(who: &Passname, refusal: &Refusal) -> Option<Denied> {
    if refusal.kind() != crate::RefusalKind::Forbidden {
        return None;
    }
    let (action, topic) = match refusal {
        Refusal::Beyond { power, topic, .. } => (power.as_str().to_owned(), topic.clone()),
        Refusal::Unwilling {
            recipient, topic, ..
        } => (
            format!("send a request to {recipient}"),
            Some(topic.clone()),
        ),
        Refusal::OwnWork { order, .. } => {
            (format!("review or approve its own order {order}"), None)
        }
        Refusal::OrderRole { action, order, .. } => {
            (format!("{} order {order}", action.command()), None)
        }
        Refusal::Scope { action, .. } => ((*action).to_owned(), None),
        Refusal::ActorInRequest => (ACT_AS_ANOTHER.to_owned(), None),
        Refusal::NotAParty { id, .. } => (format!("step on message {id}"), None),
        Refusal::SenderSteps { id } => (format!("take a recipient's step on {id}"), None),
        Refusal::OfferFrom { from, .. } => (format!("offer an order from {from}"), None),
        Refusal::ReportFrom { from, .. } => (format!("report as {from}"), None),
        Refusal::NotANegotiator { id, .. } => (format!("take part in negotiation {id}"), None),
        Refusal::OwnPosition { id, party, .. } => (
            format!("submit {party}'s position to negotiation {id}"),
            None,
        ),
        Refusal::NotTheWorker { order, .. } => {
            (format!("act for the worker of order {order}"), None)
        }
        other => (other.kind().as_str().to_owned(), None),
    };
    Some(Denied {
        participant: who.clone(),
        action,
        topic,
        code: refusal.kind().as_str().to_owned(),
        reason: refusal.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(t: &str) -> Topic {
        Topic::new(t).unwrap()
    }

    fn member(role: &str, policy: Option<Policy>) -> Participant {
        Participant {
            name: Passname::new("impl-1").unwrap(),
            role: role.into(),
            added_at: 0,
            policy,
        }
    }

    #[test]
    fn roles_default_to_the_least_they_need() {
        let t = topic("billing");
        let may = |role: &str| -> Vec<Power> {
            Power::ALL
                .into_iter()
                .filter(|p| Policy::for_role(role).allows(*p, &t))
                .collect()
        };
        use Power::*;
        assert_eq!(may("owner"), Power::ALL);
        assert_eq!(may("planner"), [Request, Send, Accept, Approve]);
        assert_eq!(may("reviewer"), [Send, Accept, Approve]);
        assert_eq!(may("executor"), [Send, Accept]);
        assert_eq!(may("observer"), []);
        assert_eq!(may("translator"), [Send, Accept]);
    }

    #[test]
    fn a_set_policy_replaces_the_role_default_and_reaches_only_its_topics() {
        let policy = Policy {
            may: [Power::Request, Power::Send].into(),
            topics: Some(vec![
                TopicPattern::new("billing-*").unwrap(),
                TopicPattern::new("docs").unwrap(),
            ]),
        };
        let who = member("executor", Some(policy));
        assert!(authorize(&who, Power::Request, Some(&topic("billing-api"))).is_ok());
        assert!(authorize(&who, Power::Send, Some(&topic("docs"))).is_ok());
        for (power, t) in [
            (Power::Request, "docs-site"),
            (Power::Request, "billing"),
            (Power::Accept, "docs"),
        ] {
            let refused = authorize(&who, power, Some(&topic(t))).unwrap_err();
            assert!(matches!(refused, Refusal::Beyond { .. }), "{power} {t}");
            assert_eq!(refused.kind(), crate::RefusalKind::Forbidden);
        }
    }

    #[test]
    fn the_refusal_names_what_the_policy_allows() {
        let refused = authorize(
            &member("executor", None),
            Power::Request,
            Some(&topic("billing")),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            refused,
            "impl-1 (executor) may not send requests or offer orders on topic billing: \
             its policy allows send, accept on every topic"
        );
    }

    #[test]
    fn memory_takes_the_power_alone_and_an_observer_has_none() {
        let refused = authorize(&member("observer", None), MEMORY, None).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "impl-1 (observer) may not send messages or record project memory: \
             its policy allows nothing (read only) on every topic"
        );
        let narrowed =
            Policy::for_role("executor").amend(None, Some(Policy::topics(&["csv-*"]).unwrap()));
        assert!(authorize(&member("executor", Some(narrowed)), MEMORY, None).is_ok());
        assert!(is_machine("@local") && !is_machine("planner"));
    }

    #[test]
    fn a_request_goes_only_to_a_recipient_that_may_take_it_on() {
        let narrowed =
            Policy::for_role("executor").amend(None, Some(Policy::topics(&["csv-*"]).unwrap()));
        let impl1 = member("executor", Some(narrowed));
        assert!(deliverable(&impl1, MessageType::Request, &topic("csv-export")).is_ok());
        let refused = deliverable(&impl1, MessageType::Request, &topic("work-order")).unwrap_err();
        assert!(
            matches!(&refused, Refusal::Unwilling { topic, .. } if topic.as_str() == "work-order")
        );
        assert_eq!(refused.kind(), crate::RefusalKind::Forbidden);
        assert!(denied(&Passname::new("planner").unwrap(), &refused).is_some());
        // What it only reads needs nothing of it.
        assert!(deliverable(&impl1, MessageType::Info, &topic("work-order")).is_ok());
        assert!(deliverable(&member("observer", None), MessageType::Message, &topic("x")).is_ok());
    }

    #[test]
    fn patterns_are_a_topic_a_prefix_or_every_topic() {
        for ok in ["*", "billing", "billing-*", "b*"] {
            assert!(TopicPattern::new(ok).is_ok(), "{ok}");
        }
        for bad in ["", "**", "Billing", "bill*ing", "*-api", "a b"] {
            assert!(
                matches!(TopicPattern::new(bad), Err(Refusal::TopicPattern { .. })),
                "{bad}"
            );
        }
        assert!(TopicPattern::new("*").unwrap().matches(&topic("x")));
        assert!(
            !TopicPattern::new("billing")
                .unwrap()
                .matches(&topic("billing-2"))
        );
        assert!(serde_json::from_str::<TopicPattern>("\"Bad*\"").is_err());
    }

    #[test]
    fn amending_replaces_what_is_given_and_keeps_the_rest() {
        let base = Policy::for_role("planner");
        let narrowed = base
            .clone()
            .amend(None, Some(Policy::topics(&["billing-*"]).unwrap()));
        assert_eq!(narrowed.may, base.may);
        assert!(!narrowed.allows(Power::Request, &topic("docs")));
        let widened = narrowed.amend(
            Some(Policy::powers(&["send"]).unwrap()),
            Some(Policy::topics(&["*"]).unwrap()),
        );
        assert_eq!(widened.to_string(), "send on every topic");
        assert_eq!(Policy::powers(&["none"]).unwrap(), BTreeSet::new());
        assert!(matches!(
            Policy::powers(&["send", "deploy"]),
            Err(Refusal::PowerName { name }) if name == "deploy"
        ));
    }

    #[test]
    fn setting_the_policy_it_holds_changes_nothing() {
        let who = member("executor", None);
        assert_eq!(plan_policy(&who, None), Ok(None));
        let planner = Some(Policy::for_role("planner"));
        assert!(matches!(
            plan_policy(&who, planner),
            Ok(Some(Change::PolicySet { .. }))
        ));
    }

    #[test]
    fn refusals_of_authority_are_security_events_and_others_are_not() {
        let who = Passname::new("impl-1").unwrap();
        let beyond =
            authorize(&member("observer", None), Power::Send, Some(&topic("x"))).unwrap_err();
        let event = denied(&who, &beyond).unwrap();
        assert_eq!(
            (event.action.as_str(), event.code.as_str()),
            ("send", "forbidden")
        );
        let scope = Refusal::Scope {
            scope: crate::key::Scope::Read,
            action: "send messages",
        };
        assert_eq!(denied(&who, &scope).unwrap().action, "send messages");
        assert_eq!(
            denied(&who, &Refusal::ActorInRequest).unwrap().action,
            ACT_AS_ANOTHER
        );
        assert!(denied(&who, &Refusal::SenderNote).is_none());
        // Every forbidden refusal is one, whatever its variant.
        let not_a_party = Refusal::NotAParty {
            who: who.clone(),
            id: "01M".into(),
        };
        assert_eq!(
            denied(&who, &not_a_party).unwrap().action,
            "step on message 01M"
        );
    }

    #[test]
    fn a_refusal_repeats_the_same_one_recorded_within_the_window_only() {
        let denied = |reason: &str| Denied {
            participant: Passname::new("exec-1").unwrap(),
            action: "request".into(),
            topic: None,
            code: "forbidden".into(),
            reason: reason.into(),
        };
        let event = |seq: i64, at: crate::Millis, d: Denied| crate::Event {
            seq,
            id: format!("e{seq}"),
            at,
            actor: "exec-1".into(),
            change: crate::Change::Denied(d),
        };
        let now = 1_000_000;
        // Newest first, as the store lists them.
        let recent = [
            event(3, now - 10, denied("b")),
            event(2, now - 20, denied("a")),
            event(1, now - REPEAT_WINDOW_MS - 1, denied("c")),
        ];
        assert_eq!(repeat_of(&denied("a"), &recent, now), Some(2));
        assert_eq!(repeat_of(&denied("b"), &recent, now), Some(3));
        assert_eq!(
            repeat_of(&denied("c"), &recent, now),
            None,
            "past the window"
        );
        assert_eq!(
            repeat_of(&denied("d"), &recent, now),
            None,
            "another refusal"
        );
    }
}
