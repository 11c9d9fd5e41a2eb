//! The status of a project at one generation of its log: what `baton status` prints and the
//! board renders (`baton/status@1`). It composes the other use cases — runs with their
//! health, inboxes and outboxes, orders and their held effects, the human queue, open
//! alerts — and the handoff metrics' fold; it decides nothing of its own.

use std::time::Duration;

use baton_core::metrics::{Fold, Series};
use baton_core::order::OrderStatus;
use baton_core::run::{Health, RunStatus};
use baton_core::time::rfc3339;
use baton_store::RunQuery;

use crate::doc::{
    BoardOrder, EffectRow, Latency, OldestRequest, OrderGroup, OrderRow, ParticipantLoad, Queue,
    RunCounts, RunDoc, Status, StatusMetrics, TrendPoint, Trends, Verdicts,
};
use crate::{App, Result, wait};

/// How long an ended run or a closed order stays on the status.
pub const RECENT_MS: i64 = 3_600_000;

/// How many times the status is gathered again when the log moved while it was gathered.
const ATTEMPTS: usize = 5;

/// The order statuses in lifecycle order: the board's columns.
const ORDER_STATUSES: [OrderStatus; 9] = [
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

impl App {
    /// The status now. `fold` is the handoff metrics' fold, brought up to the log here (a
    /// caller that keeps it between calls pays only for the events since). Every figure is
    /// as of the document's `generation`: when a write lands while it is gathered, it is
    /// gathered again.
    pub async fn status(&self, fold: &mut Fold) -> Result<Status> {
        let mut status = self.gather(fold).await?;
        for _ in 1..ATTEMPTS {
            if self.generation().await? == status.generation {
                break;
            }
            status = self.gather(fold).await?;
        }
        Ok(status)
    }

    /// The status once the log is past `generation`, or when `timeout` has passed.
    pub async fn status_after(
        &self,
        fold: &mut Fold,
        generation: i64,
        timeout: Duration,
    ) -> Result<Status> {
        self.wait_generation(generation, timeout).await?;
        self.status(fold).await
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

    async fn gather(&self, fold: &mut Fold) -> Result<Status> {
        let generation = self.generation().await?;
        let now = self.now();

        let rows = self
            .runs(&RunQuery {
                ended_since: Some(now - RECENT_MS),
                ..RunQuery::default()
            })
            .await?;
        let mut counts = RunCounts::default();
        for row in &rows {
            let n = match row.run.status {
                RunStatus::Registered => &mut counts.registered,
                RunStatus::Running => &mut counts.running,
                RunStatus::Done => &mut counts.done,
                RunStatus::Failed => &mut counts.failed,
                RunStatus::Stopped => &mut counts.stopped,
                RunStatus::Lost => &mut counts.lost,
                RunStatus::Untracked => &mut counts.untracked,
            };
            *n += 1;
            counts.stalled += usize::from(row.health == Some(Health::Stalled));
        }
        let runs = rows.iter().map(|r| RunDoc::new(r, now)).collect();

        let mut participants = Vec::new();
        for p in self.participants().await? {
            participants.push(ParticipantLoad {
                owed: self.inbox(&p.name, false).await?.len(),
                waiting: self.outbox(&p.name, false).await?.len(),
                name: p.name.to_string(),
                role: p.role,
            });
        }

        let mut orders: Vec<OrderGroup> = Vec::new();
        for o in self.orders(None, true).await? {
            let status = o.status_at(now);
            if status.is_terminal() && o.updated_at < now - RECENT_MS {
                continue;
            }
            let effects = self.store().effects(&o.id).await?;
            let item = BoardOrder {
                order: OrderRow::new(&o, now),
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

        self.catch_up(fold).await?;
        let metrics = StatusMetrics {
            oldest_open_request: fold.oldest_open_request().map(|(at, id)| OldestRequest {
                id: id.to_owned(),
                sent_at: rfc3339(at),
                age_ms: (now - at).max(0),
            }),
            open_requests: fold.open_requests(),
            pending_deliveries: fold.pending,
            created_to_delivered: Latency::from(fold.created_to_delivered),
            delivered_to_completed: Latency::from(fold.delivered_to_completed),
            approval_wait: Latency::from(fold.approval_wait),
            orders_awaiting_approval: fold.awaiting_approval(),
            requests: fold.requests,
            clarification_rate: (fold.requests > 0)
                .then(|| fold.replies_to_requests as f64 / fold.requests as f64),
            max_thread_depth: fold.max_thread_depth,
            security_refusals: fold.security_refusals,
            completed_by_topic: fold.completed_by_topic.clone(),
        };
        let verdict = |kind: &str| fold.verdicts.get(kind).copied().unwrap_or(0);
        let trends = Trends {
            created_to_delivered: points(&fold.delivery_trend),
            delivered_to_completed: points(&fold.completion_trend),
            verdicts: Verdicts {
                approve: verdict("approve"),
                fix: verdict("fix"),
                invalid: verdict("invalid"),
                stopped: verdict("stopped"),
            },
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
