//! Status: the board and `baton status`, counts, latency, trends, what is in flight.

use std::collections::BTreeMap;

use baton_core::order::OrderStatus;
use baton_core::state::Alert;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{EffectRow, OrderRow, QueueLane, Reservations, RunDoc};

/// How many runs of each status, and of each health among the live ones.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct RunCounts {
    pub registered: usize,
    pub running: usize,
    pub done: usize,
    pub failed: usize,
    pub stopped: usize,
    pub lost: usize,
    pub untracked: usize,
    /// Sessions seen through hooks that ended.
    #[serde(default)]
    pub ended: usize,
    /// Live runs whose health is `stalled`.
    pub stalled: usize,
    /// The rows above and the helpers, by where they come from.
    #[serde(default)]
    pub sources: SourceCounts,
    /// Helpers (subagents seen through hooks), counted rather than listed.
    #[serde(default)]
    pub helpers: HelperCounts,
}

/// Live and recent rows of the ledger by where they come from.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct SourceCounts {
    /// Started through `baton run`.
    pub wrapper: usize,
    /// Agent processes found running outside it.
    pub untracked: usize,
    /// Sessions seen through hooks.
    pub sessions: usize,
    /// Helpers of sessions and runs.
    pub helpers: usize,
}

/// Helpers by what became of them: running with a recent hook, running but quiet past
/// `[runs] helper_idle` (no longer counted as active), and ended within the hour.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct HelperCounts {
    pub active: usize,
    pub idle: usize,
    pub ended: usize,
}

impl HelperCounts {
    /// Adds a count of helpers the store made: ended, or live and active or quiet.
    pub fn add(&mut self, c: &baton_store::RunCount) {
        let (n, quiet) = (c.n as usize, c.quiet as usize);
        if c.status == baton_core::run::RunStatus::Ended {
            self.ended += n;
        } else if c.status.is_live() {
            self.idle += quiet;
            self.active += n - quiet;
        }
    }
}

/// A participant's load: what it owes (messages delivered to it and not finished) and
/// what it waits on (its own requests still open).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ParticipantLoad {
    pub name: String,
    pub role: String,
    pub owed: usize,
    pub waiting: usize,
}

/// An order on the board: where it stands and the calls its gateway held.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct BoardOrder {
    pub order: OrderRow,
    /// Held calls, in order, with where each stands (held, uncertain, ran, failed,
    /// dropped).
    pub effects: Vec<EffectRow>,
}

/// The orders in one status.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OrderGroup {
    pub status: OrderStatus,
    pub items: Vec<BoardOrder>,
}

/// A latency as the board shows it: how many were observed, their mean and the largest.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Latency {
    pub count: u64,
    /// `null` when nothing was observed.
    pub mean_ms: Option<i64>,
    pub max_ms: Option<i64>,
}

impl From<baton_core::metrics::Summary> for Latency {
    fn from(s: baton_core::metrics::Summary) -> Self {
        let seen = s.count > 0;
        Self {
            count: s.count,
            mean_ms: seen.then(|| s.sum_ms / s.count as i64),
            max_ms: seen.then_some(s.max_ms),
        }
    }
}

/// The oldest request whose sender's end is open.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OldestRequest {
    pub id: String,
    pub sent_at: String,
    pub age_ms: i64,
}

/// The handoff metrics, from the log (oldest open request first). What only a server
/// sees (duplicate sends, refused requests, failed authentications) is on its `/metrics`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StatusMetrics {
    /// `null` when no request is open.
    pub oldest_open_request: Option<OldestRequest>,
    pub open_requests: usize,
    /// Deliveries stored and not yet fetched.
    pub pending_deliveries: u64,
    pub created_to_delivered: Latency,
    pub delivered_to_completed: Latency,
    /// From an order's submission to its approval.
    pub approval_wait: Latency,
    pub orders_awaiting_approval: usize,
    pub requests: u64,
    /// Replies to requests (questions, answers, notes) per request; `null` before any
    /// request.
    pub clarification_rate: Option<f64>,
    pub max_thread_depth: u32,
    /// Actions refused as beyond authority (security events in the log).
    pub security_refusals: u64,
    /// Requests completed by their recipients, per topic.
    pub completed_by_topic: BTreeMap<String, u64>,
}

/// One observation of a trend: when, and the milliseconds it took.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct TrendPoint {
    pub at: String,
    pub ms: i64,
}

/// The board's small charts: the latest latencies over time and review verdicts by kind
/// (outcomes per topic are the metrics' `completed_by_topic`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Trends {
    pub created_to_delivered: Vec<TrendPoint>,
    pub delivered_to_completed: Vec<TrendPoint>,
    pub verdicts: Verdicts,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Verdicts {
    pub approve: u64,
    pub fix: u64,
    pub invalid: u64,
    pub stopped: u64,
}

impl From<baton_core::metrics::Verdicts> for Verdicts {
    fn from(v: baton_core::metrics::Verdicts) -> Self {
        Self {
            approve: v.approve,
            fix: v.fix,
            invalid: v.invalid,
            stopped: v.stopped,
        }
    }
}

/// `baton status` and the board: everything at one generation of the log.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Status {
    /// The log position every figure here is as of.
    pub generation: i64,
    /// When it was computed (ages and health are judged at this instant).
    pub at: String,
    /// Live runs and those that ended in the last hour, oldest first.
    pub runs: Vec<RunDoc>,
    pub run_counts: RunCounts,
    pub participants: Vec<ParticipantLoad>,
    /// Open orders and those closed in the last hour, by status in lifecycle order.
    pub orders: Vec<OrderGroup>,
    /// The human queue: at most five items a lane, each with its reason.
    pub queue: Vec<QueueLane>,
    pub alerts: Vec<Alert>,
    /// Reviews started and not concluded: one whose process was killed stays here until a
    /// round of the same number concludes.
    #[serde(default)]
    pub reviews: Vec<ReviewInFlight>,
    /// The paths held now, oldest first (at most 50; `more` says there are others).
    #[serde(default)]
    pub reservations: Reservations,
    /// What waits unclaimed in the role pools, the most urgent first (at most 50).
    #[serde(default)]
    pub pools: super::PoolsWaiting,
    pub metrics: StatusMetrics,
    pub trends: Trends,
}
doc!(Status, "baton/status@1");

/// A review started and not concluded.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReviewInFlight {
    pub order: String,
    pub round: u32,
    pub started_at: String,
    pub age_ms: i64,
    /// The reviewer commands, in order.
    pub reviewers: Vec<String>,
}
