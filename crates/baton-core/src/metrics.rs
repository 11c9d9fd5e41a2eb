//! The handoff metrics: oldest open request, pending volume, creation→delivery
//! and delivery→completion latency, approval wait, clarification (replies per request) and
//! thread depth, completed outcomes per topic, review verdicts, security refusals.
//!
//! What grows with history is kept as a [`Tally`], a projection of constant size that the
//! store advances in the same transaction as each event that moves it ([`Tally::moved_by`],
//! [`Tally::apply`]), with the facts the event needs read from the other projections
//! ([`Facts`]). What is a count of live work — pending deliveries, open requests, orders
//! awaiting approval — the store counts from its indexes when asked ([`Metrics`]). So a
//! reader pays for one row and the live work, never for the log.
//!
//! A store made before the tally existed has it filled once from its log by a [`Replay`],
//! which keeps in memory only the facts of live work (deliveries fetched and not yet
//! done, orders submitted and not yet decided). What the log does not record (duplicate
//! sends, refused requests, failed authentications) is counted where it happens, by the
//! edge that sees it.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::delivery::{self, DeliveryStatus};
use crate::event::{Change, Event};
use crate::gate::{GateChange, Verdict};
use crate::message::MessageType;
use crate::order::{OrderChange, OrderStatus};
use crate::time::Millis;

/// A running sum, for latencies and the like: count, sum and the largest value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub count: u64,
    pub sum_ms: i64,
    pub max_ms: i64,
}

impl Summary {
    fn observe(&mut self, ms: i64) {
        let ms = ms.max(0);
        self.count += 1;
        self.sum_ms = self.sum_ms.saturating_add(ms);
        self.max_ms = self.max_ms.max(ms);
    }
}

/// How many of the latest observations a [`Series`] keeps.
pub const SERIES_POINTS: usize = 60;

/// The latest observations of a latency, oldest first: (when observed, milliseconds).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Series(VecDeque<(Millis, i64)>);

impl Series {
    fn observe(&mut self, at: Millis, ms: i64) {
        if self.0.len() == SERIES_POINTS {
            self.0.pop_front();
        }
        self.0.push_back((at, ms.max(0)));
    }

    pub fn points(&self) -> impl Iterator<Item = (Millis, i64)> + '_ {
        self.0.iter().copied()
    }
}

/// Review verdicts by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdicts {
    pub approve: u64,
    pub fix: u64,
    pub invalid: u64,
    pub stopped: u64,
}

/// The metrics that history accumulates, as of the newest event: its size does not grow
/// with the log (but for one count per topic that has had a request completed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Tally {
    pub created_to_delivered: Summary,
    pub delivered_to_completed: Summary,
    /// From an order's submission to its approval.
    pub approval_wait: Summary,
    /// Requests sent, and replies whose parent is a request (questions, answers, the notes
    /// of a hand-back or a refusal; a completion's note asks nothing and is not counted).
    pub requests: u64,
    pub replies_to_requests: u64,
    pub max_thread_depth: u32,
    /// Completed deliveries of requests, per topic.
    pub completed_by_topic: BTreeMap<String, u64>,
    /// The latest creation→delivery and delivery→completion latencies.
    pub delivery_trend: Series,
    pub completion_trend: Series,
    pub verdicts: Verdicts,
    /// Actions refused as beyond authority (security events).
    pub security_refusals: u64,
}

/// A message as the tally needs it: when it was sent, its type and topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageFacts {
    pub at: Millis,
    pub kind: MessageType,
    pub topic: String,
}

/// What an event needs to know beyond itself, read from the projections as they were
/// just before it (each `None` when the event is of another kind or the fact is absent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// A reply's parent: its type and depth in its thread.
    pub parent: Option<(MessageType, u32)>,
    /// A delivery change's message.
    pub message: Option<MessageFacts>,
    /// A delivery change's delivery, when it was `delivered` until now: since when.
    pub delivered_since: Option<Millis>,
    /// An order step's order, when it was `submitted` until now: since when.
    pub submitted_since: Option<Millis>,
}

impl Tally {
    /// Whether `change` can move the tally: a store reads the tally, and the facts, only
    /// for these.
    pub fn moved_by(change: &Change) -> bool {
        match change {
            Change::MessageSent(m) => m.kind == MessageType::Request || m.reply_to.is_some(),
            Change::DeliveryChanged { status, .. } => {
                matches!(
                    status,
                    DeliveryStatus::Delivered | DeliveryStatus::Completed
                )
            }
            Change::Order(OrderChange::Stepped(step)) => step.status == OrderStatus::Approved,
            Change::Gate(GateChange::Reviewed { .. }) | Change::Denied(_) => true,
            _ => false,
        }
    }

    /// Applies one event, with the facts it needs; an event [`Tally::moved_by`] refuses
    /// changes nothing.
    pub fn apply(&mut self, event: &Event, facts: &Facts) {
        if !Self::moved_by(&event.change) {
            return;
        }
        match &event.change {
            Change::MessageSent(m) => {
                if let Some((kind, depth)) = facts.parent {
                    self.max_thread_depth = self.max_thread_depth.max(depth + 1);
                    if kind == MessageType::Request && !delivery::completion_note(m) {
                        self.replies_to_requests += 1;
                    }
                }
                if m.kind == MessageType::Request {
                    self.requests += 1;
                }
            }
            Change::DeliveryChanged { status, .. } => match status {
                DeliveryStatus::Delivered => {
                    if let Some(m) = &facts.message {
                        self.created_to_delivered.observe(event.at - m.at);
                        self.delivery_trend.observe(event.at, event.at - m.at);
                    }
                }
                _ => {
                    if let Some(since) = facts.delivered_since {
                        self.delivered_to_completed.observe(event.at - since);
                        self.completion_trend.observe(event.at, event.at - since);
                    }
                    if let Some(m) = facts
                        .message
                        .as_ref()
                        .filter(|m| m.kind == MessageType::Request)
                    {
                        *self.completed_by_topic.entry(m.topic.clone()).or_default() += 1;
                    }
                }
            },
            Change::Order(_) => {
                if let Some(since) = facts.submitted_since {
                    self.approval_wait.observe(event.at - since);
                }
            }
            Change::Gate(GateChange::Reviewed { verdict, .. }) => {
                let n = match verdict {
                    Verdict::Approve => &mut self.verdicts.approve,
                    Verdict::Fix { .. } => &mut self.verdicts.fix,
                    Verdict::Invalid { .. } => &mut self.verdicts.invalid,
                    Verdict::Stopped { .. } => &mut self.verdicts.stopped,
                };
                *n += 1;
            }
            Change::Denied(_) => self.security_refusals += 1,
            _ => {}
        }
    }
}

/// The handoff metrics as a store reads them: the tally, and the live work counted from
/// the indexes, all as of `generation`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metrics {
    pub generation: i64,
    pub tally: Tally,
    /// Deliveries stored and not yet fetched.
    pub pending: u64,
    /// Requests whose sender's end is open, and the oldest of them: (sent at, id).
    pub open_requests: u64,
    pub oldest_open_request: Option<(Millis, String)>,
    /// Orders submitted and waiting for approval.
    pub awaiting_approval: u64,
}

impl Metrics {
    /// How long the oldest open request has waited at `now`, if any is open.
    pub fn oldest_open_request_ms(&self, now: Millis) -> Option<i64> {
        self.oldest_open_request
            .as_ref()
            .map(|(at, _)| (now - at).max(0))
    }
}

/// Fills a [`Tally`] from a log read in order, for a store made before the tally: the
/// facts only the log's past holds — which deliveries are `delivered` and since when,
/// which orders are `submitted` and since when — it keeps itself, dropping each when its
/// work moves on; the facts the message projection holds (which never change) the caller
/// gives.
#[derive(Debug, Default)]
pub struct Replay {
    pub tally: Tally,
    delivered: HashMap<(String, String), Millis>,
    submitted: HashMap<String, Millis>,
}

impl Replay {
    /// Applies one event. `parent` and `message` are [`Facts`]' fields of the same names,
    /// asked only when [`Tally::moved_by`] says the event moves the tally.
    pub fn apply(
        &mut self,
        event: &Event,
        parent: Option<(MessageType, u32)>,
        message: Option<MessageFacts>,
    ) {
        let mut facts = Facts {
            parent,
            message,
            ..Facts::default()
        };
        match &event.change {
            Change::DeliveryChanged {
                message,
                participant,
                status,
                ..
            } => {
                let key = (message.clone(), participant.to_string());
                facts.delivered_since = self.delivered.remove(&key);
                if *status == DeliveryStatus::Delivered {
                    self.delivered.insert(key, event.at);
                }
            }
            Change::Order(OrderChange::Stepped(step)) => {
                facts.submitted_since = self.submitted.remove(&step.order);
                if step.status == OrderStatus::Submitted {
                    self.submitted.insert(step.order.clone(), event.at);
                }
            }
            _ => {}
        }
        self.tally.apply(event, &facts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::SentMessage;
    use crate::names::{Passname, Topic};
    use crate::order::{OrderAction, Step};

    fn event(seq: i64, at: Millis, change: Change) -> Event {
        Event {
            seq,
            id: format!("e{seq}"),
            at,
            actor: "x".into(),
            change,
        }
    }

    fn sent(id: &str, kind: MessageType, reply_to: Option<&str>) -> Change {
        Change::MessageSent(Box::new(SentMessage {
            id: id.into(),
            from: Passname::new("planner").unwrap(),
            to: vec![Passname::new("impl-1").unwrap()],
            pool: None,
            kind,
            topic: Topic::new("csv").unwrap(),
            reply_to: reply_to.map(str::to_owned),
            payload: serde_json::Map::new(),
            excerpt: String::new(),
            size: 2,
            hash: String::new(),
            idempotency_key: None,
        }))
    }

    fn step(id: &str, status: DeliveryStatus) -> Change {
        Change::DeliveryChanged {
            message: id.into(),
            participant: Passname::new("impl-1").unwrap(),
            status,
            note: None,
        }
    }

    fn request_at(at: Millis) -> Option<MessageFacts> {
        Some(MessageFacts {
            at,
            kind: MessageType::Request,
            topic: "csv".into(),
        })
    }

    #[test]
    fn latencies_and_outcomes_follow_the_log() {
        let mut r = Replay::default();
        r.apply(
            &event(1, 1_000, sent("r1", MessageType::Request, None)),
            None,
            None,
        );
        r.apply(
            &event(2, 1_500, sent("q1", MessageType::Message, Some("r1"))),
            Some((MessageType::Request, 0)),
            None,
        );
        r.apply(
            &event(3, 3_000, step("r1", DeliveryStatus::Delivered)),
            None,
            request_at(1_000),
        );
        r.apply(
            &event(4, 7_000, step("r1", DeliveryStatus::Completed)),
            None,
            request_at(1_000),
        );
        let t = &r.tally;
        assert_eq!(t.created_to_delivered.sum_ms, 2_000);
        assert_eq!(t.delivered_to_completed.sum_ms, 4_000);
        assert_eq!(t.completed_by_topic["csv"], 1);
        assert_eq!(
            (t.requests, t.replies_to_requests, t.max_thread_depth),
            (1, 1, 1)
        );
        assert_eq!(
            t.delivery_trend.points().collect::<Vec<_>>(),
            [(3_000, 2_000)]
        );
        assert_eq!(
            t.completion_trend.points().collect::<Vec<_>>(),
            [(7_000, 4_000)]
        );
        assert!(r.delivered.is_empty(), "a completed delivery is forgotten");
    }

    #[test]
    fn a_completion_note_is_not_a_clarification() {
        let mut r = Replay::default();
        r.apply(
            &event(1, 1_000, sent("r1", MessageType::Request, None)),
            None,
            None,
        );
        let Change::MessageSent(mut note) = sent("n1", MessageType::Info, Some("r1")) else {
            unreachable!()
        };
        note.payload = serde_json::json!({"body": "done", "completed": "r1"})
            .as_object()
            .unwrap()
            .clone();
        r.apply(
            &event(2, 2_000, Change::MessageSent(note.clone())),
            Some((MessageType::Request, 0)),
            None,
        );
        assert_eq!(
            r.tally.replies_to_requests, 0,
            "the completion note counted"
        );
        // The same words as a question are one.
        note.kind = MessageType::Message;
        r.apply(
            &event(3, 3_000, Change::MessageSent(note)),
            Some((MessageType::Request, 0)),
            None,
        );
        assert_eq!(r.tally.replies_to_requests, 1);
    }

    #[test]
    fn a_completion_after_the_delivery_moved_on_measures_nothing() {
        let mut r = Replay::default();
        r.apply(
            &event(1, 1_000, step("r1", DeliveryStatus::Delivered)),
            None,
            request_at(0),
        );
        // Resurfaced by the reaper, then completed without a fetch.
        r.apply(
            &event(2, 2_000, step("r1", DeliveryStatus::Pending)),
            None,
            None,
        );
        r.apply(
            &event(3, 9_000, step("r1", DeliveryStatus::Completed)),
            None,
            request_at(0),
        );
        assert_eq!(r.tally.delivered_to_completed, Summary::default());
        assert_eq!(r.tally.completed_by_topic["csv"], 1);
    }

    #[test]
    fn approval_wait_runs_from_the_newest_submission() {
        let stepped = |status| {
            Change::Order(OrderChange::Stepped(Box::new(Step {
                order: "wo_1".into(),
                seq: 2,
                action: OrderAction::Approve,
                was: OrderStatus::Working,
                status,
                note: None,
                attempt: None,
                report: None,
                findings: Vec::new(),
                after: Vec::new(),
            })))
        };
        let mut r = Replay::default();
        r.apply(
            &event(1, 1_000, stepped(OrderStatus::Submitted)),
            None,
            None,
        );
        r.apply(&event(2, 2_000, stepped(OrderStatus::Working)), None, None);
        r.apply(
            &event(3, 5_000, stepped(OrderStatus::Submitted)),
            None,
            None,
        );
        r.apply(&event(4, 8_000, stepped(OrderStatus::Approved)), None, None);
        assert_eq!(
            r.tally.approval_wait,
            Summary {
                count: 1,
                sum_ms: 3_000,
                max_ms: 3_000
            }
        );
        assert!(r.submitted.is_empty());
    }

    #[test]
    fn verdicts_are_counted_by_kind_and_series_keep_the_latest() {
        let mut t = Tally::default();
        let verdicts = [
            Verdict::Approve,
            Verdict::Fix {
                fixes: vec!["x".into()],
            },
            Verdict::Invalid { raw: "lgtm".into() },
            Verdict::Approve,
        ];
        for (i, verdict) in verdicts.into_iter().enumerate() {
            let reviewed = Change::Gate(GateChange::Reviewed {
                order: "wo_1".into(),
                round: 1,
                reviewer: "r".into(),
                run: None,
                verdict,
            });
            t.apply(&event(i as i64 + 1, 0, reviewed), &Facts::default());
        }
        assert_eq!(
            t.verdicts,
            Verdicts {
                approve: 2,
                fix: 1,
                invalid: 1,
                stopped: 0
            }
        );
        let mut s = Series::default();
        for i in 0..(SERIES_POINTS as i64 + 5) {
            s.observe(i, i);
        }
        let points: Vec<_> = s.points().collect();
        assert_eq!(points.len(), SERIES_POINTS);
        assert_eq!(points[0], (5, 5), "the oldest observations go first");
    }

    #[test]
    fn an_event_that_does_not_move_the_tally_changes_nothing_whatever_the_facts() {
        let facts = Facts {
            parent: Some((MessageType::Request, 3)),
            message: request_at(0),
            delivered_since: Some(0),
            submitted_since: Some(0),
        };
        let mut t = Tally::default();
        t.apply(
            &event(1, 5_000, sent("i1", MessageType::Info, None)),
            &facts,
        );
        t.apply(
            &event(2, 5_000, step("i1", DeliveryStatus::Acknowledged)),
            &facts,
        );
        assert_eq!(t, Tally::default());
        // The same facts with an event that moves it do count.
        t.apply(
            &event(3, 5_000, step("i1", DeliveryStatus::Completed)),
            &facts,
        );
        assert_eq!(t.delivered_to_completed.sum_ms, 5_000);
    }

    #[test]
    fn a_tally_survives_its_json() {
        let mut r = Replay::default();
        r.apply(
            &event(1, 1_000, step("r1", DeliveryStatus::Delivered)),
            None,
            request_at(0),
        );
        let json = serde_json::to_string(&r.tally).unwrap();
        assert_eq!(serde_json::from_str::<Tally>(&json).unwrap(), r.tally);
        assert_eq!(
            serde_json::from_str::<Tally>("{}").unwrap(),
            Tally::default()
        );
    }
}
