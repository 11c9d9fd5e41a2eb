//! Baton's storage: the [`Store`] trait over the append-only event log and the projections
//! derived from it, and its embedded SQLite implementation.
//!
//! Every write is one short transaction that appends events and updates their projections
//! together, so a command that returns `Ok` has committed. This crate never talks to the
//! terminal and never reads configuration files; callers pass what it needs.

mod error;
pub mod recall;
pub mod receipt;
pub mod sqlite;
mod types;

pub use error::StoreError;
pub use sqlite::SqliteStore;
pub use types::*;

use async_trait::async_trait;
use baton_core::order::{Order, OrderRequest};
use baton_core::run::{Run, RunChange};
use baton_core::state::{ProjectState, StateOp};
use baton_core::{Draft, Event, Millis, Passname, Payload, Topic};

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The operations every backend offers. Each write is atomic; each read sees one
/// consistent snapshot.
#[async_trait]
pub trait Store: Send + Sync {
    /// Registers a participant. Adding the same name with the same role again is harmless.
    async fn add_participant(&self, actor: &str, name: &Passname, role: &str) -> Result<Added>;
    async fn participants(&self) -> Result<Vec<Participant>>;
    async fn participant(&self, name: &str) -> Result<Option<Participant>>;

    /// Stores a message from `from`, or returns the original when it is a duplicate: same
    /// idempotency key (forever), or same type, topic, payload and parent within
    /// `window_ms` milliseconds.
    async fn send(&self, from: &Passname, draft: Draft, window_ms: i64) -> Result<Sent>;

    /// The full message. When `reader` is a recipient whose delivery is pending, it becomes
    /// delivered in the same transaction.
    async fn fetch(&self, reader: Option<&Passname>, id: &str) -> Result<Fetched>;

    /// A status step on a message: a recipient's step on its delivery, or the sender's
    /// step on its own end of a request. `note` (required for refuse and hand-back) is
    /// recorded and posted to the sender as a threaded reply.
    async fn step(
        &self,
        who: &Passname,
        id: &str,
        verb: Verb,
        note: Option<&str>,
    ) -> Result<Stepped>;

    /// What `who` owes: inbound messages still pending or delivered (with `all`, every
    /// inbound message not archived), oldest first.
    async fn inbox(&self, who: &Passname, all: bool) -> Result<Vec<Envelope>>;
    /// The first `limit` messages `who` owes — requests first, then oldest first — and how
    /// many it owes in all. For bounded reads such as the resume packet.
    async fn owed(&self, who: &Passname, limit: u32) -> Result<(Vec<Envelope>, u64)>;
    /// The requests `who` sent whose own end is not archived (with `all`, every one),
    /// oldest first, with each recipient's status and the reply count.
    async fn outbox(&self, who: &Passname, all: bool) -> Result<Vec<Envelope>>;
    /// The whole thread `id` belongs to, depth-first from the root.
    async fn thread(&self, id: &str) -> Result<Vec<Envelope>>;
    /// Newest first, one page at a time.
    async fn search(&self, caller: Option<&Passname>, query: &SearchQuery) -> Result<Page>;

    /// Applies state changes in one transaction, each checked against the state left by
    /// the ones before it; returns the events written (an alert already open writes none).
    async fn change_state(&self, actor: &str, ops: &[StateOp]) -> Result<Vec<Event>>;
    /// The project state: focus, streams, decisions, constraints, notes, receipts, alerts.
    async fn state(&self) -> Result<ProjectState>;
    /// When `subject` (a message, order or other record id) last changed after `after_seq`.
    async fn last_change(&self, subject: &str, after_seq: i64) -> Result<Option<Millis>>;

    /// Records facts about runs in one transaction, each checked against the run's status
    /// left by the ones before it (`baton_core::run::check`). An untracked process that
    /// is already recorded writes nothing.
    async fn record_run(&self, actor: &str, changes: &[RunChange]) -> Result<Vec<Event>>;
    /// Runs matching `query`, oldest first.
    async fn runs(&self, query: &RunQuery) -> Result<Vec<Run>>;
    /// Marks a registered or running run lost and, in the same transaction, resurfaces as
    /// pending the messages its participant fetched during the run (unless another of its
    /// runs is live) and raises one alert for each. `None` when the run is no longer live
    /// (an exit or another reaper got there first).
    async fn reap_lost(&self, actor: &str, run: &str, reason: &str) -> Result<Option<Reaped>>;

    /// Offers a Work Order: sends `document` to its `to` as a `request` on `topic` and
    /// records the order (seq 1, `offered`), in one transaction. `actor` must be the
    /// document's `from`; an id already used is a conflict. The caller validates the
    /// document (AWL and contract rules) first.
    async fn create_order(
        &self,
        actor: &Passname,
        topic: Topic,
        document: Payload,
    ) -> Result<OrderWritten>;
    /// Takes a lifecycle step (`baton_core::order::plan`) as `actor`, provided the order's
    /// newest seq is still `expected_seq`: a writer that lost a race gets `Conflict` and
    /// writes nothing.
    async fn order_step(
        &self,
        actor: &Passname,
        id: &str,
        expected_seq: i64,
        request: OrderRequest,
    ) -> Result<OrderWritten>;
    async fn order(&self, id: &str) -> Result<Option<Order>>;
    /// Orders matching `query`, oldest first.
    async fn orders(&self, query: &OrderQuery) -> Result<Vec<Order>>;
    /// The order's events whose own seq is after `after_seq`, oldest first.
    async fn order_events_since(&self, id: &str, after_seq: i64) -> Result<Vec<Event>>;

    /// Events after `after_seq`, oldest first, at most `limit`.
    async fn events(&self, after_seq: i64, limit: u32) -> Result<Vec<Event>>;
    /// The store's generation: the sequence number of its newest event (0 when empty).
    async fn generation(&self) -> Result<i64>;
}
