//! Baton's storage: the append-only event log and the projections derived from it.
//!
//! Two traits a backend implements, and one struct over them:
//! - [`Tx`], a write transaction: append an event (which updates the projections), and
//!   read the facts a rule needs (a participant, an envelope, earlier messages, an order,
//!   a run, the project state, a negotiation). A backend implements it in its own SQL.
//! - [`Backend`]: open a [`Tx`], and the reads the edges list and show. Also SQL only.
//! - [`Store`]: a handle over a backend whose methods are every write, each written once
//!   in `write.rs`: it gathers facts through a [`Tx`], asks the core's planners what to
//!   append, appends it and commits. The backend's reads are reached through it.
//!
//! A backend cannot hold a rule, by construction: it implements only [`Backend`] and
//! [`Tx`], and the writes are the struct's own methods, which no backend implements or
//! overrides.
//!
//! [`open`] (one embedded project) and [`database`] (projects by name: a directory of
//! SQLite files, or one PostgreSQL database) pick the backend from a URL. Every write is one short transaction, so a
//! write that returns `Ok` has committed. This crate never talks to the terminal and never
//! reads configuration files; callers pass what it needs.

mod decode;
mod error;
mod pools;
pub mod postgres;
mod reservations;
pub mod sqlite;
mod types;
mod write;

use std::sync::Arc;
use std::time::Duration;

pub use decode::{decode_cursor, encode_cursor};
pub use error::{Holder, StoreError};
pub use pools::PoolQuery;
pub use postgres::{PostgresDatabase, PostgresStore};
pub use reservations::ReservationQuery;
pub use sqlite::SqliteStore;
pub use types::*;
pub use write::pools::Taken;
pub use write::reservations::Force;

use async_trait::async_trait;
use baton_core::effect::{self, Effects};
use baton_core::id::Span;
use baton_core::key::Key;
use baton_core::message::Prior;
use baton_core::negotiation::Negotiation;
use baton_core::order::Order;
use baton_core::reservation::Reservation;
use baton_core::run::Run;
use baton_core::state::{ProjectState, StateDigest};
use baton_core::webhook::Webhook;
use baton_core::{Draft, Event, Millis, Participant, Passname, ProjectName, Record};
use serde_json::{Map, Value};

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// How long a writer waits for another writer before giving up with [`StoreError::Busy`].
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How often a backend that cannot be told of a commit looks at its generation while
/// someone waits (one cheap query).
pub const POLL: Duration = Duration::from_millis(50);

/// Every operation on a store: a handle over a backend (cheap to clone, shared by every
/// clone). Its writes are its own methods, written once in `write.rs` over the backend's
/// [`Tx`], each atomic; the backend's reads are reached through it ([`Backend`], by
/// `Deref`).
#[derive(Clone)]
pub struct Store {
    backend: Arc<dyn Backend>,
}

impl Store {
    /// The store over `backend`.
    pub fn new(backend: impl Backend + 'static) -> Self {
        Self {
            backend: Arc::new(backend),
        }
    }
}

/// A store is a handle over its backend: the backend's reads are the store's.
impl std::ops::Deref for Store {
    type Target = dyn Backend;

    fn deref(&self) -> &Self::Target {
        &*self.backend
    }
}

/// A place that holds projects by name: a directory of SQLite files (one a project), or a
/// PostgreSQL database (every table keyed by project). What `baton serve` and keyless
/// administration (`baton --db URL …`) open.
#[async_trait]
pub trait Database: Send + Sync {
    /// Project `name`'s store; refused as not found when there is no such project.
    async fn project(&self, name: &ProjectName) -> Result<Store>;
    /// Creates project `name`; `false` when it existed already (nothing changes).
    async fn add_project(&self, name: &ProjectName) -> Result<bool>;
    /// Every project's name, sorted.
    async fn projects(&self) -> Result<Vec<ProjectName>>;
}

/// Opens the database a URL names: `sqlite:DIR` (a directory of `NAME.db` files, created
/// when missing) or `postgres://USER@HOST[:PORT]/DATABASE[?schema=NAME]` (every project in
/// one database, its tables in `NAME` when given; migrated on open). One project's store
/// is `database(url)` then [`Database::project`].
pub async fn database(url: &str, busy_timeout: Duration) -> Result<Arc<dyn Database>> {
    match url.split_once(':') {
        Some(("sqlite", dir)) if !dir.is_empty() => {
            let dir = std::path::Path::new(dir.strip_prefix("//").unwrap_or(dir));
            Ok(Arc::new(sqlite::SqliteDirectory::new(dir, busy_timeout)?))
        }
        Some(("postgres" | "postgresql", rest)) if rest.starts_with("//") => Ok(Arc::new(
            PostgresDatabase::connect(url, busy_timeout).await?,
        )),
        _ => Err(StoreError::Url {
            url: postgres::redact(url),
        }),
    }
}

/// Opens an existing one-project store for an agent's hook: on SQLite its hook events
/// are spooled beside the store rather than wait for the write lock.
pub async fn open_for_hooks(url: &str, busy_timeout: Duration) -> Result<Store> {
    match url.split_once(':') {
        Some(("sqlite", path)) if !path.is_empty() => {
            let path = std::path::Path::new(path.strip_prefix("//").unwrap_or(path));
            Ok(Store::new(
                SqliteStore::open_spooling(path, busy_timeout).await?,
            ))
        }
        _ => Err(StoreError::Url {
            url: postgres::redact(url),
        }),
    }
}

/// Opens the one-project store a URL names: `sqlite:PATH` (the file must exist unless
/// `create`). The embedded mode's `.baton/baton.db`. A PostgreSQL database holds many
/// projects, so it is opened with [`database`] and a project's name.
pub async fn open(url: &str, busy_timeout: Duration, create: bool) -> Result<Store> {
    match url.split_once(':') {
        Some(("sqlite", path)) if !path.is_empty() => {
            let path = std::path::Path::new(path.strip_prefix("//").unwrap_or(path));
            let store = if create {
                SqliteStore::create(path, busy_timeout).await?
            } else {
                SqliteStore::open(path, busy_timeout).await?
            };
            Ok(Store::new(store))
        }
        _ => Err(StoreError::Url {
            url: postgres::redact(url),
        }),
    }
}

/// One write transaction. Dropped without [`Tx::commit`], it writes nothing.
#[async_trait]
pub trait Tx: Send {
    /// The one function that writes events: appends `event` at the end of the log and
    /// applies it to the projections.
    async fn append(&mut self, event: NewEvent) -> Result<Event>;
    async fn participant(&mut self, name: &str) -> Result<Option<Participant>>;
    async fn envelope(&mut self, id: &str) -> Result<Option<Envelope>>;
    /// The sender's message with this idempotency key, if any.
    async fn keyed(&mut self, from: &Passname, key: &str) -> Result<Option<Prior>>;
    /// The sender's messages since `since` with the draft's payload hash, type, topic
    /// and parent, newest first: the candidates a send may repeat.
    async fn recent(&mut self, from: &Passname, draft: &Draft, since: Millis)
    -> Result<Vec<Prior>>;
    async fn order(&mut self, id: &str) -> Result<Option<Order>>;
    /// What each of `orders` still waits on: `(order, the order it waits on)`.
    async fn waits(&mut self, orders: &[String]) -> Result<Vec<(String, Order)>>;
    /// The orders that still wait on `id`, oldest first.
    async fn waiting_on(&mut self, id: &str) -> Result<Vec<Order>>;
    async fn run(&mut self, id: &str) -> Result<Option<Run>>;
    async fn key(&mut self, id: &str) -> Result<Option<Key>>;
    async fn webhook(&mut self, participant: &str) -> Result<Option<Webhook>>;
    /// Whether the log holds an event with this id.
    async fn has_event(&mut self, id: &str) -> Result<bool>;
    /// Whether the log holds an event of a kind not among `kinds`.
    async fn has_event_beyond(&mut self, kinds: &[&str]) -> Result<bool>;
    /// The event with this id, as the log holds it.
    async fn event(&mut self, id: &str) -> Result<Option<Event>>;
    /// How many events at or after `seq` are of a kind not among `kinds`.
    async fn count_beyond_from(&mut self, seq: i64, kinds: &[&str]) -> Result<usize>;
    /// Whether `participant` has a registered or running run other than `except`.
    async fn other_live_run(&mut self, participant: &str, except: &str) -> Result<bool>;
    /// The messages delivered to `participant` (and still only delivered) since `since`,
    /// oldest first.
    async fn held(&mut self, participant: &str, since: Millis) -> Result<Vec<String>>;
    /// The project state: the fold of every `state.changed` event.
    async fn state(&mut self) -> Result<ProjectState>;
    /// Negotiation `id`: the fold of its `negotiation.changed` events (subject `id`).
    async fn negotiation(&mut self, id: &str) -> Result<Option<Negotiation>>;
    /// The events of `kind` about `subject`, oldest first.
    async fn events_about(&mut self, subject: &str, kind: &str) -> Result<Vec<Event>>;
    /// Order `id`'s staged effects: the fold of its `effect.changed` events.
    async fn effects(&mut self, id: &str) -> Result<Effects> {
        Ok(Effects::replay(&self.events_about(id, effect::KIND).await?))
    }
    /// The reservations `query` names, oldest first.
    async fn reservations(&mut self, query: &ReservationQuery) -> Result<Vec<Reservation>>;
    /// The newest event or heartbeat of `participant`'s runs and sessions that have not
    /// ended.
    async fn activity(&mut self, participant: &str) -> Result<Option<Millis>>;
    /// The pool items `query` names, the most urgent first.
    async fn pool_items(&mut self, query: &PoolQuery) -> Result<Vec<baton_core::pool::Item>>;
    /// Every participant, by name.
    async fn participants(&mut self) -> Result<Vec<Participant>>;
    async fn commit(self: Box<Self>) -> Result<()>;
}

/// What a backend implements: transactions and reads. Each read sees one consistent
/// snapshot.
#[async_trait]
pub trait Backend: Send + Sync {
    /// Starts a write transaction, waiting at most the busy timeout for the write lock.
    async fn begin(&self) -> Result<Box<dyn Tx>>;

    /// Keeps `event`, already planned, durably for the next writer to append, without
    /// waiting for the write lock: `true` when it did (an agent hook's store on SQLite,
    /// see `sqlite::spool`), `false` when the caller must write it itself.
    async fn spool(&self, _event: &NewEvent) -> Result<bool> {
        Ok(false)
    }

    async fn participants(&self) -> Result<Vec<Participant>>;
    async fn participant(&self, name: &str) -> Result<Option<Participant>>;
    /// A message's envelope and payload, read without side effects.
    async fn message(&self, id: &str) -> Result<Option<(Envelope, Map<String, Value>)>>;
    /// The ids of `record`'s kind (messages, orders, runs, keys) in each of `spans`, the
    /// first `baton_core::id::CANDIDATES + 1` of each in order: what `baton_core::id::pick`
    /// chooses from. A kind of record without ids of its own has none.
    async fn ids(&self, record: Record, spans: &[Span]) -> Result<Vec<String>>;
    /// What `who` owes: inbound messages still pending or delivered (with `all`, every
    /// inbound message not archived), oldest first, the page `window` names.
    async fn inbox(&self, who: &Passname, all: bool, window: &Window) -> Result<Vec<Envelope>>;
    /// The first `limit` messages `who` owes — requests first, then oldest first — and how
    /// many it owes in all. For bounded reads such as the resume packet.
    async fn owed(&self, who: &Passname, limit: u32) -> Result<(Vec<Envelope>, u64)>;
    /// The requests `who` sent whose own end is not archived (with `all`, every one),
    /// oldest first, with each recipient's status and the reply count, the page `window`
    /// names.
    async fn outbox(&self, who: &Passname, all: bool, window: &Window) -> Result<Vec<Envelope>>;
    /// The first `limit` requests `who` sent whose own end is not archived, oldest first,
    /// and how many there are in all. For bounded reads such as the resume packet.
    async fn waiting(&self, who: &Passname, limit: u32) -> Result<(Vec<Envelope>, u64)>;
    /// Every request `who` owes, oldest first, then the first `others` other messages it
    /// owes (infos and messages), oldest first, as their heads; and how many it owes in
    /// all. The resume packet ranks and counts these, then reads the envelopes it shows.
    async fn owed_heads(&self, who: &Passname, others: u32) -> Result<(Vec<MessageHead>, u64)>;
    /// Every request `who` sent whose own end is not archived, oldest first, as their
    /// heads.
    async fn waiting_heads(&self, who: &Passname) -> Result<Vec<MessageHead>>;
    /// The envelopes of `ids`, in the order given (an unknown id is skipped).
    async fn envelopes(&self, ids: &[String]) -> Result<Vec<Envelope>>;
    /// The whole thread `id` belongs to, depth-first from the root.
    async fn thread(&self, id: &str) -> Result<Vec<Envelope>>;
    /// Newest first, one page at a time.
    async fn search(&self, caller: Option<&Passname>, query: &SearchQuery) -> Result<Page>;
    /// The project state: focus, streams, decisions, constraints, notes, receipts, alerts.
    async fn state(&self) -> Result<ProjectState>;
    /// The newest entries of each list of the state, with their counts: a few kilobytes
    /// however long the project has run ([`ProjectState::digest`]).
    async fn state_digest(&self) -> Result<StateDigest>;
    /// The handoff metrics as of one generation: a projection's row and counts of
    /// live work, however long the project has run.
    async fn metrics(&self) -> Result<baton_core::metrics::Metrics>;
    /// When `subject` (a message, order or other record id) last changed after `after_seq`.
    async fn last_change(&self, subject: &str, after_seq: i64) -> Result<Option<Millis>>;
    /// [`Backend::last_change`] of each `(subject, after_seq)`, in order: one read where
    /// the backend can make it one.
    async fn last_changes(&self, subjects: &[(String, i64)]) -> Result<Vec<Option<Millis>>> {
        let mut out = Vec::with_capacity(subjects.len());
        for (subject, after) in subjects {
            out.push(self.last_change(subject, *after).await?);
        }
        Ok(out)
    }
    /// The payloads of messages `ids`, in order (`None` for an unknown id): one read where
    /// the backend can make it one.
    async fn payloads(&self, ids: &[String]) -> Result<Vec<Option<Map<String, Value>>>> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            out.push(self.message(id).await?.map(|(_, payload)| payload));
        }
        Ok(out)
    }
    /// Runs matching `query`, oldest first.
    async fn runs(&self, query: &RunQuery) -> Result<Vec<Run>>;
    /// How many runs have each recorded status and source, of the live ones and those
    /// that ended at or after `ended_since`, and how many of each had no event since
    /// `quiet_before`: counted by the store, however many there are. With `parents`, only
    /// the helpers of those rows are counted (read by an index on the parent).
    async fn run_counts(
        &self,
        ended_since: Millis,
        quiet_before: Millis,
        parents: Option<&[String]>,
    ) -> Result<Vec<RunCount>>;
    async fn order(&self, id: &str) -> Result<Option<Order>>;
    /// Orders matching `query`, oldest first.
    async fn orders(&self, query: &OrderQuery) -> Result<Vec<Order>>;
    /// What each of `orders` still waits on: `(order, the order it waits on)`, by order.
    async fn waits(&self, orders: &[String]) -> Result<Vec<(String, Order)>>;
    /// The order's events whose own seq is after `after_seq`, oldest first.
    async fn order_events_since(&self, id: &str, after_seq: i64) -> Result<Vec<Event>>;
    /// Events after `after_seq`, oldest first, at most `limit`.
    async fn events(&self, after_seq: i64, limit: u32) -> Result<Vec<Event>>;
    /// The newest `limit` events of `kind` (`security.refused`) before `before_seq`
    /// (every one when `None`), newest first.
    async fn events_of_kind(
        &self,
        kind: &str,
        before_seq: Option<i64>,
        limit: u32,
    ) -> Result<Vec<Event>>;
    /// The runs the failures lane decides from: those that failed or were lost at or after
    /// `since`, oldest first, then for each the newest later success of the same command
    /// and the newest for the same order (what could clear it), each once.
    async fn failures(&self, since: Millis) -> Result<Vec<Run>>;
    /// The open needs and the orders with a stuck effect (the `attention` projection).
    async fn attention(&self) -> Result<Attention>;
    /// When each of `items` (queue item ids) was last acknowledged, in order.
    async fn acks(&self, items: &[String]) -> Result<Vec<Option<Millis>>>;
    /// Key `id` with its last recorded use.
    async fn key(&self, id: &str) -> Result<Option<Key>>;
    /// Every key ever issued (revoked ones too) with its last recorded use, oldest first.
    async fn keys(&self) -> Result<Vec<Key>>;
    /// Records that key `id` proved its participant at `at`. Bookkeeping beside the log,
    /// not in it: no event, no generation; a rebuild keeps it.
    async fn key_used(&self, id: &str, at: Millis) -> Result<()>;
    /// Counts a repeat, at `at`, of the security event at `seq` (bookkeeping beside the
    /// log, as a key's use is: a rebuild keeps it).
    async fn count_repeat(&self, seq: i64, at: Millis) -> Result<()>;
    /// The repeats counted on the security events at `seqs` (those with none are absent).
    async fn repeats(&self, seqs: &[i64]) -> Result<Vec<Repeats>>;
    async fn webhook(&self, participant: &str) -> Result<Option<Webhook>>;
    /// Every webhook, by participant.
    async fn webhooks(&self) -> Result<Vec<Webhook>>;
    /// Leases until `lease_until` the webhook due first (`next_at` reached, no live lease)
    /// that the log has moved past; `None` when none is. Servers sharing a database never
    /// hold the same one.
    async fn claim_webhook(&self, now: Millis, lease_until: Millis) -> Result<Option<Webhook>>;
    /// Records how a claimed delivery went and ends the lease (nothing when the webhook was
    /// set anew or removed since the claim).
    async fn settle_webhook(&self, hook: &Webhook, settled: Settled) -> Result<()>;
    /// Negotiation `id`: the fold of its `negotiation.changed` events (subject `id`).
    async fn negotiation(&self, id: &str) -> Result<Option<Negotiation>>;
    /// The events of `kind` about `subject`, oldest first.
    async fn events_about(&self, subject: &str, kind: &str) -> Result<Vec<Event>>;
    /// Order `id`'s staged effects: the fold of its `effect.changed` events.
    async fn effects(&self, id: &str) -> Result<Effects> {
        Ok(Effects::replay(&self.events_about(id, effect::KIND).await?))
    }
    /// The reservations `query` names, oldest first.
    async fn reservations(&self, query: &ReservationQuery) -> Result<Vec<Reservation>>;
    /// The pool items `query` names, the most urgent first.
    async fn pool_items(&self, query: &PoolQuery) -> Result<Vec<baton_core::pool::Item>>;
    /// The store's generation: the sequence number of its newest event (0 when empty).
    async fn generation(&self) -> Result<i64>;

    /// Waits until the generation is past `seen`, or `timeout` passes; returns the
    /// generation then. This looks every [`POLL`]; a backend that is told of commits
    /// (PostgreSQL's `LISTEN/NOTIFY`) wakes when one lands instead.
    async fn changed(&self, seen: i64, timeout: Duration) -> Result<i64> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let generation = self.generation().await?;
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if generation > seen || left.is_zero() {
                return Ok(generation);
            }
            tokio::time::sleep(POLL.min(left)).await;
        }
    }
}
