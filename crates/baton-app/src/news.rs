//! News: what happened since a point in the log that concerns one participant — a message
//! to it, a step on a message it sent or on one it holds, a step on an order it is party
//! to, an alert — and a long poll that returns as soon as there is some.
//!
//! What the participant did itself is not news to it. The scan is bounded: at most
//! [`SCAN`] events are examined per call, and the answer says where to resume.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use baton_core::order::OrderChange;
use baton_core::state::StateChange;
use baton_core::{Change, Event, Passname};

use crate::{App, Result, wait};

/// How many events one look examines at most.
pub const SCAN: u32 = 1000;

/// The news after a point, and where to look next time.
#[derive(Debug, Clone, PartialEq)]
pub struct News {
    /// Pass this as `after` next time: the position of the last event examined.
    pub after: i64,
    pub events: Vec<Event>,
}

impl App {
    /// Whether `event` is news to `me`.
    async fn concerns(&self, me: &Passname, event: &Event) -> Result<bool> {
        if event.actor == me.as_str() {
            return Ok(false);
        }
        Ok(match &event.change {
            Change::MessageSent(m) => match &m.pool {
                // Work sent to my role's pool is news to me: I may claim it.
                Some(pool) => self
                    .store()
                    .participant(me.as_str())
                    .await?
                    .is_some_and(|p| p.role == pool.role()),
                None => m.to.contains(me),
            },
            // A claim is news to the sender: its work has a taker.
            Change::Claimed(c) => self
                .store()
                .message(&c.message)
                .await?
                .is_some_and(|(env, _)| &env.from == me),
            Change::DeliveryChanged {
                message,
                participant,
                ..
            } => {
                participant == me
                    || self
                        .store()
                        .message(message)
                        .await?
                        .is_some_and(|(env, _)| &env.from == me)
            }
            Change::RequestChanged { message, .. } => self
                .store()
                .message(message)
                .await?
                .is_some_and(|(env, _)| env.status_for(me).is_some()),
            Change::Order(change) => {
                let id = match change {
                    OrderChange::Created(c) => &c.order,
                    OrderChange::Stepped(s) => &s.order,
                    OrderChange::Claimed(c) => &c.order,
                };
                self.store().order(id).await?.is_some_and(|o| {
                    o.from == me.as_str()
                        || o.to == me.as_str()
                        || o.escalate_to.as_deref() == Some(me.as_str())
                })
            }
            Change::State(StateChange::AlertRaised { .. }) => true,
            _ => false,
        })
    }

    /// `me`'s news after position `after`, looking at most [`SCAN`] events ahead.
    pub async fn news(&self, me: &Passname, after: i64) -> Result<News> {
        let scanned = self.store().events(after, SCAN).await?;
        let next = scanned.last().map_or(after, |e| e.seq);
        let mut events = Vec::new();
        for event in scanned {
            if self.concerns(me, &event).await? {
                events.push(event);
            }
        }
        Ok(News {
            after: next,
            events,
        })
    }

    /// Waits until `me` has news after `after`, or `timeout` passes (then the answer has
    /// no events, and `after` is as far as the log was examined).
    pub async fn wait_news(&self, me: &Passname, after: i64, timeout: Duration) -> Result<News> {
        // Where the next look starts: each look that finds nothing moves it on, so the
        // same events are not examined twice.
        let from = AtomicI64::new(after);
        let found = wait::until(
            self.store(),
            timeout,
            || self.waiting(&format!("news for {me} after {after}")),
            || async {
                let news = self.news(me, from.load(Ordering::Relaxed)).await?;
                if news.events.is_empty() {
                    from.store(news.after, Ordering::Relaxed);
                    Ok(None)
                } else {
                    Ok(Some(news))
                }
            },
        )
        .await?;
        Ok(found.unwrap_or_else(|| News {
            after: from.load(Ordering::Relaxed),
            events: Vec::new(),
        }))
    }
}
