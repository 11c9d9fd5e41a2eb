//! The status of a project at one generation of its log: what `baton status` prints and the
//! board renders (`baton/status@1`). It composes the other use cases — runs with their
//! health, inboxes and outboxes, orders and their held effects, the human queue, open
//! alerts — and the handoff metrics' projection; it decides nothing of its own.

use std::collections::HashMap;
use std::time::Duration;

use baton_core::metrics::{Metrics, Series};
use baton_core::order::OrderStatus;
use baton_core::run::{Health, RunStatus, Source};
use baton_core::time::rfc3339;
use baton_store::{OrderQuery, RunQuery};

use crate::doc::{
    BoardOrder, EffectRow, HelperCounts, Latency, OldestRequest, OrderGroup, OrderRow,
    ParticipantLoad, Queue, ReviewInFlight, RunCounts, RunDoc, Status, StatusMetrics, TrendPoint,
    Trends, Verdicts,
};
use crate::ledger::RECENT_RUNS;
use crate::{App, Result, wait};

/// How long an ended run or a closed order stays on the status.
pub const RECENT_MS: i64 = 3_600_000;

/// How many times the status is gathered again when the log moved while it was gathered.
const ATTEMPTS: usize = 5;

/// The order statuses in lifecycle order: the board's columns.
const ORDER_STATUSES: [OrderStatus; 11] = [
    OrderStatus::Waiting,
    OrderStatus::Held,
    OrderStatus::Offered,
    OrderStatus::Accepted,
    OrderStatus::Working,
    OrderStatus::Blocked,
    OrderStatus::Submitted,
    OrderStatus::Approved,
    OrderStatus::Declined,
    OrderStatus::Expired,
    OrderStatus::Cancelled,
];

/// `rows` as documents, each session or run with its helpers tallied from the store's
/// `counts`.
fn docs(
    rows: &[crate::ledger::RunRow],
    counts: &[baton_store::RunCount],
    now: baton_core::Millis,
) -> Vec<RunDoc> {
    let mut by_parent: HashMap<&str, HelperCounts> = HashMap::new();
    for c in counts.iter().filter(|c| c.source == Source::Helper) {
        by_parent
            .entry(c.parent.as_deref().unwrap_or_default())
            .or_default()
            .add(c);
    }
    rows.iter()
        .map(|r| {
            let doc = RunDoc::new(r, now);
            match by_parent.remove(r.run.id.as_str()) {
                Some(helpers) => doc.with_helpers(&r.run, helpers),
                None => doc,
            }
        })
        .collect()
}

impl App {
    /// The status now. Every figure is as of the document's `generation`: when a write
    /// lands while it is gathered, it is gathered again.
    pub async fn status(&self) -> Result<Status> {
        let mut status = self.gather().await?;
        for _ in 1..ATTEMPTS {
            if self.generation().await? == status.generation {
                break;
            }
            status = self.gather().await?;
        }
        Ok(status)
    }

    /// The status once the log is past `generation`, or when `timeout` has passed.
    pub async fn status_after(&self, generation: i64, timeout: Duration) -> Result<Status> {
        self.wait_generation(generation, timeout).await?;
        self.status().await
    }

    /// The handoff metrics as the store keeps them: one row and counts of live
    /// work, whatever the log's length.
    pub async fn metrics(&self) -> Result<Metrics> {
        self.store().metrics().await
    }

    /// How many rows of the ledger are live now, by where they come from (helpers quiet
    /// past `[runs] helper_idle` left out): what `/metrics` reports.
    pub async fn live_by_source(&self) -> Result<Vec<(Source, u64)>> {
        let mut live: Vec<(Source, u64)> = Source::ALL.iter().map(|s| (*s, 0)).collect();
        for c in self.run_counts(self.now(), None).await? {
            if !c.status.is_live() {
                continue;
            }
            let active = if c.source == Source::Helper {
                let mut helpers = HelperCounts::default();
                helpers.add(&c);
                helpers.active as u64
            } else {
                c.n
            };
            if let Some(slot) = live.iter_mut().find(|(s, _)| *s == c.source) {
                slot.1 += active;
            }
        }
        Ok(live)
    }

    /// `me`'s sessions and runs that have not ended, helpers counted under each as in the
    /// status: what the resume packet lists.
    pub(crate) async fn live_of(&self, me: &str) -> Result<Vec<RunDoc>> {
        let now = self.now();
        let mut rows = self
            .runs(&RunQuery {
                live: true,
                without_helpers: true,
                ..RunQuery::default()
            })
            .await?;
        rows.retain(|r| r.run.participant.as_deref() == Some(me));
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        // Helpers ended within the hour are counted, as in the status; only these rows'.
        let ids: Vec<String> = rows.iter().map(|r| r.run.id.clone()).collect();
        let counts = self.run_counts(now - RECENT_MS, Some(&ids)).await?;
        Ok(docs(&rows, &counts, now))
    }

    /// The store's counts of the live rows and those ended since `ended_since`, with the
    /// rows quiet past `[runs] helper_idle` counted apart.
    async fn run_counts(
        &self,
        ended_since: baton_core::Millis,
        parents: Option<&[String]>,
    ) -> Result<Vec<baton_store::RunCount>> {
        let quiet_before = self.now() - self.settings().helper_idle.as_millis() as i64;
        self.store()
            .run_counts(ended_since, quiet_before, parents)
            .await
    }

    /// Waits until the log is past `generation` or `timeout` passes; the generation then.
    pub async fn wait_generation(&self, generation: i64, timeout: Duration) -> Result<i64> {
        let moved = wait::until(
            self.store(),
            timeout,
            || {},
            || async {
                let now = self.generation().await?;
                Ok((now > generation).then_some(now))
            },
        )
        .await?;
        match moved {
            Some(now) => Ok(now),
            None => self.generation().await,
        }
    }

    async fn gather(&self) -> Result<Status> {
        let generation = self.generation().await?;
        let now = self.now();

        // Every live run and the newest others that ended within the hour: a bounded list,
        // however busy the hour; the counts are the store's.
        let since = now - RECENT_MS;
        let mut rows = self
            .runs(&RunQuery {
                recent: Some(RECENT_RUNS),
                // Helpers are counted, not listed: a session may start thousands.
                without_helpers: true,
                ..RunQuery::default()
            })
            .await?;
        rows.retain(|r| r.run.status.is_live() || r.run.ended_at.is_some_and(|e| e >= since));
        let mut counts = RunCounts::default();
        let tallies = self.run_counts(since, None).await?;
        for c in &tallies {
            let n = c.n as usize;
            *match c.source {
                Source::Wrapper => &mut counts.sources.wrapper,
                Source::Untracked => &mut counts.sources.untracked,
                Source::Session => &mut counts.sources.sessions,
                Source::Helper => &mut counts.sources.helpers,
            } += n;
            if c.source == Source::Helper {
                counts.helpers.add(c);
                continue;
            }
            *match c.status {
                RunStatus::Registered => &mut counts.registered,
                RunStatus::Running => &mut counts.running,
                RunStatus::Done => &mut counts.done,
                RunStatus::Failed => &mut counts.failed,
                RunStatus::Stopped => &mut counts.stopped,
                RunStatus::Lost => &mut counts.lost,
                RunStatus::Untracked => &mut counts.untracked,
                RunStatus::Ended => &mut counts.ended,
            } += n;
        }
        counts.stalled = rows
            .iter()
            .filter(|r| r.health == Some(Health::Stalled))
            .count();
        let runs = docs(&rows, &tallies, now);

        let mut participants = Vec::new();
        for p in self.participants().await? {
            participants.push(ParticipantLoad {
                owed: self.store().owed(&p.name, 0).await?.1 as usize,
                waiting: self.store().waiting(&p.name, 0).await?.1 as usize,
                name: p.name.to_string(),
                role: p.role,
            });
        }

        let mut orders: Vec<OrderGroup> = Vec::new();
        let mut reviews = Vec::new();
        let recent = OrderQuery {
            closed: true,
            closed_since: Some(since),
            ..OrderQuery::default()
        };
        let listed = self.store().orders(&recent).await?;
        let waits = self.waits(&listed).await?;
        for (o, waits) in listed.into_iter().zip(waits) {
            let status = baton_core::after::status_at(&o, &waits, now);
            if status.is_terminal() && o.updated_at < now - RECENT_MS {
                continue;
            }
            if status == OrderStatus::Submitted {
                let gate = self.store().events_about(&o.id, "gate.changed").await?;
                if let Some(open) = baton_core::gate::in_flight(&gate) {
                    reviews.push(ReviewInFlight {
                        order: o.id.clone(),
                        round: open.round,
                        started_at: rfc3339(open.started_at),
                        age_ms: (now - open.started_at).max(0),
                        reviewers: open.reviewers,
                    });
                }
            }
            let effects = self.store().effects(&o.id).await?;
            let item = BoardOrder {
                order: OrderRow::waiting(&o, &waits, now),
                effects: EffectRow::all(&effects),
            };
            match orders.iter_mut().find(|g| g.status == status) {
                Some(group) => group.items.push(item),
                None => orders.push(OrderGroup {
                    status,
                    items: vec![item],
                }),
            }
        }
        orders.sort_by_key(|g| ORDER_STATUSES.iter().position(|s| *s == g.status));

        let queue = Queue::new(&self.queue(None).await?).lanes;
        let alerts = self.alerts().await?;
        let reservations = self.held_now(now).await?;
        let pools = self.pools_waiting(now).await?;

        let m = self.metrics().await?;
        let t = &m.tally;
        let metrics = StatusMetrics {
            oldest_open_request: m
                .oldest_open_request
                .as_ref()
                .map(|(at, id)| OldestRequest {
                    id: id.clone(),
                    sent_at: rfc3339(*at),
                    age_ms: (now - at).max(0),
                }),
            open_requests: m.open_requests as usize,
            pending_deliveries: m.pending,
            created_to_delivered: Latency::from(t.created_to_delivered),
            delivered_to_completed: Latency::from(t.delivered_to_completed),
            approval_wait: Latency::from(t.approval_wait),
            orders_awaiting_approval: m.awaiting_approval as usize,
            requests: t.requests,
            clarification_rate: (t.requests > 0)
                .then(|| t.replies_to_requests as f64 / t.requests as f64),
            max_thread_depth: t.max_thread_depth,
            security_refusals: t.security_refusals,
            completed_by_topic: t.completed_by_topic.clone(),
        };
        let trends = Trends {
            created_to_delivered: points(&t.delivery_trend),
            delivered_to_completed: points(&t.completion_trend),
            verdicts: Verdicts::from(t.verdicts),
        };
        Ok(Status {
            // Read first: a write landing meanwhile moves the log past it, and the status
            // is gathered again.
            generation,
            at: rfc3339(now),
            runs,
            run_counts: counts,
            participants,
            orders,
            queue,
            alerts,
            reviews,
            reservations,
            pools,
            metrics,
            trends,
        })
    }
}

fn points(series: &Series) -> Vec<TrendPoint> {
    series
        .points()
        .map(|(at, ms)| TrendPoint {
            at: rfc3339(at),
            ms,
        })
        .collect()
}
