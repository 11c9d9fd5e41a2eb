//! The handoff metrics of SPEC §8 as a fold over the event log: oldest open request,
//! pending volume, creation→delivery and delivery→completion latency, approval wait,
//! clarification (replies per request) and thread depth, completed outcomes per topic.
//!
//! It also keeps the board's small trends: the latest latencies with when they were
//! observed (a [`Series`] of at most [`SERIES_POINTS`]), and review verdicts by kind.
//!
//! A reader keeps a [`Fold`] and applies each new event once, so a scrape costs the events
//! since the last one, not the whole history. What the log does not record (duplicate
//! sends, refused requests, failed authentications) is counted where it happens, by the
//! edge that sees it.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use crate::delivery::{DeliveryStatus, RequestStatus};
use crate::event::{Change, Event};
use crate::gate::{GateChange, Verdict};
use crate::message::MessageType;
use crate::order::{OrderChange, OrderStatus};
use crate::time::Millis;

/// A running sum, for latencies and the like: count, sum and the largest value.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
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
#[derive(Debug, Clone, Default, PartialEq)]
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

#[derive(Debug, Clone)]
struct Message {
    at: Millis,
    kind: MessageType,
    topic: String,
    depth: u32,
}

/// The metrics of one project, as of the last event applied.
#[derive(Debug, Clone, Default)]
pub struct Fold {
    /// The newest event applied.
    pub seq: i64,
    messages: HashMap<String, Message>,
    /// Requests whose sender's end is open: (sent at, id).
    open_requests: BTreeSet<(Millis, String)>,
    /// When each delivery reached `delivered`: (message, participant).
    delivered_at: HashMap<(String, String), Millis>,
    /// Deliveries pending now.
    pub pending: u64,
    pub created_to_delivered: Summary,
    pub delivered_to_completed: Summary,
    /// Orders submitted and waiting for their sender: order → since.
    submitted: HashMap<String, Millis>,
    pub approval_wait: Summary,
    /// Requests sent, and replies whose parent is a request (questions, answers, notes).
    pub requests: u64,
    pub replies_to_requests: u64,
    pub max_thread_depth: u32,
    /// Completed deliveries of requests, per topic.
    pub completed_by_topic: BTreeMap<String, u64>,
    pub events: u64,
    /// The latest creation→delivery and delivery→completion latencies.
    pub delivery_trend: Series,
    pub completion_trend: Series,
    /// Review verdicts by kind: `approve`, `fix`, `invalid`, `stopped`.
    pub verdicts: BTreeMap<&'static str, u64>,
    /// Actions refused as beyond authority (security events).
    pub security_refusals: u64,
}

impl Fold {
    /// Applies one event (in log order; an event at or before `seq` is ignored).
    pub fn apply(&mut self, event: &Event) {
        if event.seq <= self.seq {
            return;
        }
        self.seq = event.seq;
        self.events += 1;
        match &event.change {
            Change::MessageSent(m) => {
                let depth = m
                    .reply_to
                    .as_ref()
                    .and_then(|p| self.messages.get(p))
                    .map_or(0, |p| p.depth + 1);
                if let Some(parent) = m.reply_to.as_ref().and_then(|p| self.messages.get(p))
                    && parent.kind == MessageType::Request
                {
                    self.replies_to_requests += 1;
                }
                self.max_thread_depth = self.max_thread_depth.max(depth);
                if m.kind == MessageType::Request {
                    self.requests += 1;
                    self.open_requests.insert((event.at, m.id.clone()));
                }
                self.pending += m.to.len() as u64;
                self.messages.insert(
                    m.id.clone(),
                    Message {
                        at: event.at,
                        kind: m.kind,
                        topic: m.topic.to_string(),
                        depth,
                    },
                );
            }
            Change::DeliveryChanged {
                message,
                participant,
                status,
                ..
            } => {
                let key = (message.clone(), participant.to_string());
                let sent = self.messages.get(message).cloned();
                match status {
                    DeliveryStatus::Delivered => {
                        self.pending = self.pending.saturating_sub(1);
                        if let Some(m) = &sent {
                            self.created_to_delivered.observe(event.at - m.at);
                            self.delivery_trend.observe(event.at, event.at - m.at);
                        }
                        self.delivered_at.insert(key, event.at);
                    }
                    // Resurfaced by the reaper: owed again.
                    DeliveryStatus::Pending => {
                        self.pending += 1;
                        self.delivered_at.remove(&key);
                    }
                    DeliveryStatus::Refused => {
                        if self.delivered_at.remove(&key).is_none() {
                            self.pending = self.pending.saturating_sub(1);
                        }
                    }
                    DeliveryStatus::Completed => {
                        if let Some(at) = self.delivered_at.remove(&key) {
                            self.delivered_to_completed.observe(event.at - at);
                            self.completion_trend.observe(event.at, event.at - at);
                        }
                        if let Some(m) = sent.filter(|m| m.kind == MessageType::Request) {
                            *self.completed_by_topic.entry(m.topic).or_default() += 1;
                        }
                    }
                    _ => {
                        self.delivered_at.remove(&key);
                    }
                }
            }
            Change::RequestChanged { message, status } => {
                if *status != RequestStatus::Open
                    && let Some(m) = self.messages.get(message)
                {
                    self.open_requests.remove(&(m.at, message.clone()));
                }
            }
            Change::Order(OrderChange::Stepped(step)) => {
                if step.status == OrderStatus::Submitted {
                    self.submitted.insert(step.order.clone(), event.at);
                } else if let Some(since) = self.submitted.remove(&step.order)
                    && step.status == OrderStatus::Approved
                {
                    self.approval_wait.observe(event.at - since);
                }
            }
            Change::Gate(GateChange::Reviewed { verdict, .. }) => {
                let kind = match verdict {
                    Verdict::Approve => "approve",
                    Verdict::Fix { .. } => "fix",
                    Verdict::Invalid { .. } => "invalid",
                    Verdict::Stopped { .. } => "stopped",
                };
                *self.verdicts.entry(kind).or_default() += 1;
            }
            Change::Denied(_) => self.security_refusals += 1,
            _ => {}
        }
    }

    /// The oldest open request: when it was sent and its id.
    pub fn oldest_open_request(&self) -> Option<(Millis, &str)> {
        self.open_requests
            .first()
            .map(|(at, id)| (*at, id.as_str()))
    }

    /// How long the oldest open request has waited at `now`, if any is open.
    pub fn oldest_open_request_ms(&self, now: Millis) -> Option<i64> {
        self.open_requests.first().map(|(at, _)| (now - at).max(0))
    }

    /// Requests whose sender's end is open.
    pub fn open_requests(&self) -> usize {
        self.open_requests.len()
    }

    /// Orders submitted and waiting for approval.
    pub fn awaiting_approval(&self) -> usize {
        self.submitted.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::SentMessage;
    use crate::names::{Passname, Topic};

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

    #[test]
    fn latencies_volume_and_outcomes_follow_the_log() {
        let mut f = Fold::default();
        f.apply(&event(1, 1_000, sent("r1", MessageType::Request, None)));
        f.apply(&event(
            2,
            1_500,
            sent("q1", MessageType::Message, Some("r1")),
        ));
        assert_eq!(f.pending, 2);
        assert_eq!(f.oldest_open_request_ms(4_000), Some(3_000));
        f.apply(&event(3, 3_000, step("r1", DeliveryStatus::Delivered)));
        f.apply(&event(4, 7_000, step("r1", DeliveryStatus::Completed)));
        f.apply(&event(
            5,
            8_000,
            Change::RequestChanged {
                message: "r1".into(),
                status: RequestStatus::Completed,
            },
        ));
        assert_eq!(f.pending, 1, "the question is still pending");
        assert_eq!(f.created_to_delivered.sum_ms, 2_000);
        assert_eq!(f.delivered_to_completed.sum_ms, 4_000);
        assert_eq!(f.completed_by_topic["csv"], 1);
        assert_eq!(
            (f.requests, f.replies_to_requests, f.max_thread_depth),
            (1, 1, 1)
        );
        assert_eq!(f.oldest_open_request_ms(9_000), None);
        // Applying an event twice, or an older one, changes nothing.
        let before = f.pending;
        f.apply(&event(4, 7_000, step("r1", DeliveryStatus::Completed)));
        assert_eq!((f.pending, f.completed_by_topic["csv"]), (before, 1));
        // The trends: each latency with when it was observed.
        assert_eq!(
            f.delivery_trend.points().collect::<Vec<_>>(),
            [(3_000, 2_000)]
        );
        assert_eq!(
            f.completion_trend.points().collect::<Vec<_>>(),
            [(7_000, 4_000)]
        );
    }

    #[test]
    fn verdicts_are_counted_by_kind_and_series_keep_the_latest() {
        let mut f = Fold::default();
        let verdicts = [
            Verdict::Approve,
            Verdict::Fix {
                fixes: vec!["x".into()],
            },
            Verdict::Invalid { raw: "lgtm".into() },
            Verdict::Approve,
        ];
        for (i, verdict) in verdicts.into_iter().enumerate() {
            f.apply(&event(
                i as i64 + 1,
                0,
                Change::Gate(GateChange::Reviewed {
                    order: "wo_1".into(),
                    round: 1,
                    reviewer: "r".into(),
                    run: None,
                    verdict,
                }),
            ));
        }
        assert_eq!(
            f.verdicts,
            BTreeMap::from([("approve", 2), ("fix", 1), ("invalid", 1)])
        );
        let mut s = Series::default();
        for i in 0..(SERIES_POINTS as i64 + 5) {
            s.observe(i, i);
        }
        let points: Vec<_> = s.points().collect();
        assert_eq!(points.len(), SERIES_POINTS);
        assert_eq!(points[0], (5, 5), "the oldest observations go first");
    }
}
