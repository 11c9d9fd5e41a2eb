//! The embedded store: one SQLite file in WAL mode, driven in the calling thread
//! (rusqlite, through [`conn`]).
//!
//! Writers take `BEGIN IMMEDIATE` so a write never upgrades a read lock mid-transaction
//! (which SQLite refuses without waiting); waiting for the lock is bounded by the busy
//! timeout, past which the caller gets [`StoreError::Busy`]. Commits are fsync'd
//! (`synchronous = FULL`), so an acknowledged write survives a crash. Each read runs in
//! one read transaction (one snapshot) and never blocks writers.
//!
//! A store holds one connection, which a command's reads and writes take in turn. A
//! grouped store (a server's) gives that connection to its [`group`] and reads through
//! connections of their own beside it.
//!
//! This file holds the store, its migrations, the one function that appends an event and
//! projects it, and the [`Backend`] and [`Tx`] of the store, each a call into the file of
//! its concept: [`conn`] and [`rows`] (connections, statements and rows), [`events`] (the
//! log read back), [`participants`], [`messages`], [`state`], [`runs`], [`orders`],
//! [`keys`], [`webhooks`], [`metrics`] and [`attention`], named as PostgreSQL's are.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use baton_core::id::Span;
use baton_core::key::Key;
use baton_core::message::Prior;
use baton_core::metrics::Tally;
use baton_core::negotiation::Negotiation;
use baton_core::order::Order;
use baton_core::reservation::Reservation;
use baton_core::run::Run;
use baton_core::state::{ProjectState, StateDigest};
use baton_core::webhook::Webhook;
use baton_core::{
    Change, Draft, Envelope, Event, Millis, Participant, Passname, ProjectName, Record, Refusal,
};
use rusqlite::{Connection, params};
use serde_json::{Map, Value};
use tokio::sync::OwnedMutexGuard;

mod attention;
mod conn;
mod events;
mod group;
mod holder;
mod keys;
mod messages;
mod metrics;
mod orders;
mod participants;
mod pools;
mod reservations;
mod rows;
mod runs;
mod spool;
mod state;
mod webhooks;

use self::conn::{
    Conns, Lazy, Readers, Sql, blocking, check_header, classify, exec, located, transaction,
};
use self::rows::{column, scalar};
use crate::ReservationQuery;
use crate::decode;
use crate::pools::PoolQuery;
use crate::{
    Attention, Backend, MessageHead, NewEvent, OrderQuery, Page, Repeats, Result, RunQuery,
    SearchQuery, Settled, StoreError, Tx, Window,
};

/// Schema migrations, applied in order; `PRAGMA user_version` records how many ran. They
/// are the files of `migrations/`, embedded by the build script in the order of their
/// numbers.
const MIGRATIONS: &[&str] = include!(concat!(env!("OUT_DIR"), "/sqlite_migrations.rs"));

/// How many migrations ran before the one that added `message_text` and `state`: a store
/// older than that has them filled from its log when it is brought up to date.
const BEFORE_TEXT_AND_STATE: i64 = 7;

/// How many migrations ran before the last one that made `message_text` anew (with the
/// `ascii` tokenizer and its pending rows): a store older than that has it filled again
/// from its log.
const BEFORE_PENDING_TEXT: i64 = 12;

/// How many migrations ran before the one that added the `metrics` tally: a store older
/// than that (or a new one) has it filled from its log.
const BEFORE_METRICS: i64 = 15;

/// How many migrations ran before the one that added `open_needs` and `stuck_orders`: a
/// store older than that has them filled from its log.
const BEFORE_ATTENTION: i64 = 16;

#[derive(Clone)]
pub struct SqliteStore {
    conns: Conns,
    path: PathBuf,
    busy_timeout: Duration,
    /// Where hooks' events wait for the next writer ([`spool`]).
    spool: spool::Spool,
    /// Whether this store's hook events go to the spool (a hook's own process).
    spools: bool,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .field("grouped", &matches!(self.conns, Conns::Grouped { .. }))
            .finish()
    }
}

impl SqliteStore {
    /// Creates the database file if it is missing, then opens it.
    pub async fn create(path: &Path, busy_timeout: Duration) -> Result<Self> {
        Self::connect(path, busy_timeout, true).await
    }

    /// Opens an existing database; a missing file is an error, never a new empty store,
    /// and so is a file that is not a Baton store (empty, another program's, or a SQLite
    /// database Baton never set up).
    pub async fn open(path: &Path, busy_timeout: Duration) -> Result<Self> {
        if !path.exists() {
            return Err(StoreError::Missing {
                path: path.display().to_string(),
            });
        }
        check_header(path)?;
        let store = Self::connect(path, busy_timeout, false).await?;
        // What hooks spooled is in the log before this process reads anything (a store
        // this process may only read is read as it is).
        if store.spool.pending() && conn::writable(path) {
            store.begin().await?.commit().await?;
        }
        Ok(store)
    }

    /// Opens an existing database for an agent's hook: its events are spooled beside the
    /// store instead of waiting for the write lock ([`spool`]), and nothing spooled is
    /// folded on opening.
    pub async fn open_spooling(path: &Path, busy_timeout: Duration) -> Result<Self> {
        if !path.exists() {
            return Err(StoreError::Missing {
                path: path.display().to_string(),
            });
        }
        check_header(path)?;
        Ok(Self {
            conns: Conns::One(Arc::new(Lazy::later(path, busy_timeout))),
            path: path.to_owned(),
            busy_timeout,
            spool: spool::Spool::beside(path),
            spools: true,
        })
    }

    async fn connect(path: &Path, busy_timeout: Duration, create: bool) -> Result<Self> {
        let conn = open_conn(path, busy_timeout, create)?;
        Ok(Self {
            conns: Conns::One(Arc::new(Lazy::opened(conn, path, busy_timeout))),
            path: path.to_owned(),
            busy_timeout,
            spool: spool::Spool::beside(path),
            spools: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// With group commit, how many transactions the group has committed (one fsync
    /// each); `None` without it.
    pub async fn commits(&self) -> Option<u64> {
        match &self.conns {
            Conns::Grouped { group, .. } => Some(group.commits()),
            Conns::One(_) => None,
        }
    }

    /// This store with group commit: concurrent writers in this process share one
    /// transaction and one fsync, each acknowledged only after it (see [`group`]). For a
    /// server, where many clients write at once; a one-shot command gains nothing.
    pub fn grouped(self) -> Result<Self> {
        self.grouped_with(None)
    }

    /// [`Self::grouped`], its commits made durable by `sync` instead of the log's fsync
    /// (tests hold or fail a sync with it).
    fn grouped_with(self, sync: Option<group::SyncLog>) -> Result<Self> {
        let SqliteStore {
            conns,
            path,
            busy_timeout,
            spool,
            spools,
        } = self;
        let keep = |conns| SqliteStore {
            conns,
            path: path.clone(),
            busy_timeout,
            spool: spool.clone(),
            spools,
        };
        // The group takes the store's connection. While a clone of the store still holds
        // it, the group writes through a connection of its own; should that one not open,
        // the store stays as it was (every write its own commit).
        let writer = match conns {
            grouped @ Conns::Grouped { .. } => return Ok(keep(grouped)),
            Conns::One(shared) => match shared.take() {
                Ok(only) => only?,
                Err(shared) => match conn::connect(&path, busy_timeout, false) {
                    Ok(conn) => conn,
                    Err(_) => return Ok(keep(Conns::One(shared))),
                },
            },
        };
        let group = match sync {
            Some(sync) => group::Group::syncing(writer, &path, busy_timeout, sync),
            None => group::Group::new(writer, &path, busy_timeout),
        }
        .map_err(|e| classify(&e, busy_timeout))?;
        Ok(keep(Conns::Grouped {
            group: Arc::new(group),
            readers: Arc::new(Readers::new(&path, busy_timeout)),
        }))
    }

    /// Result of `PRAGMA integrity_check`: `ok` when the file is sound.
    pub async fn integrity_check(&self) -> Result<String> {
        self.read(|c| Ok(scalar(c, "PRAGMA integrity_check", [])?.unwrap_or_default()))
            .await
    }

    /// Drops every projection and rebuilds it by replaying the log, in one transaction.
    /// The result must equal what the live writes produced: the projections hold nothing
    /// the log does not.
    pub async fn rebuild_projections(&self) -> Result<()> {
        self.bookkeep(|conn| {
            exec(
                conn,
                "INSERT INTO message_text (message_text) VALUES ('delete-all')",
                [],
            )?;
            for table in decode::PROJECTIONS {
                conn.execute_batch(&format!("DELETE FROM {table}"))?;
            }
            let mut after = 0;
            loop {
                let batch = events::read(conn, after, 1000)?;
                let Some(last) = batch.last() else { break };
                after = last.seq;
                for event in &batch {
                    project(conn, event)?;
                }
            }
            Ok(())
        })
        .await
    }

    /// Every projection row as text, in a stable order, for comparing two stores.
    pub async fn projection_dump(&self) -> Result<Vec<String>> {
        let queries = DUMPS.concat();
        self.read(|conn| {
            let mut out = Vec::new();
            for q in queries {
                out.extend(column::<String>(conn, q, [])?);
            }
            Ok(out)
        })
        .await
    }
}

/// Projects as SQLite files in one directory, `NAME.db` each.
pub struct SqliteDirectory {
    dir: PathBuf,
    busy_timeout: Duration,
}

impl SqliteDirectory {
    /// The directory, created when missing.
    pub fn new(dir: &Path, busy_timeout: Duration) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Unavailable {
            path: dir.display().to_string(),
            reason: e.to_string(),
        })?;
        Ok(Self {
            dir: dir.to_owned(),
            busy_timeout,
        })
    }

    fn file(&self, name: &ProjectName) -> PathBuf {
        self.dir.join(format!("{name}.db"))
    }
}

#[async_trait]
impl crate::Database for SqliteDirectory {
    async fn project(&self, name: &ProjectName) -> Result<crate::Store> {
        let file = self.file(name);
        if !file.exists() {
            return Err(Refusal::not_found(baton_core::Record::Project, name.as_str()).into());
        }
        // A server's project: many clients write at once, so writers share commits.
        Ok(crate::Store::new(
            SqliteStore::open(&file, self.busy_timeout)
                .await?
                .grouped()?,
        ))
    }

    async fn add_project(&self, name: &ProjectName) -> Result<bool> {
        let file = self.file(name);
        let existed = file.exists();
        SqliteStore::create(&file, self.busy_timeout).await?;
        Ok(!existed)
    }

    async fn projects(&self) -> Result<Vec<ProjectName>> {
        let entries = std::fs::read_dir(&self.dir).map_err(|e| StoreError::Unavailable {
            path: self.dir.display().to_string(),
            reason: e.to_string(),
        })?;
        let mut names: Vec<ProjectName> = entries
            .filter_map(|e| {
                let name = e.ok()?.file_name().into_string().ok()?;
                ProjectName::new(name.strip_suffix(".db")?).ok()
            })
            .collect();
        names.sort();
        Ok(names)
    }
}

/// Opens the database at `path` and brings its schema up to date: a file Baton never set
/// up is refused, not taken over (unless `create`, for a new store).
fn open_conn(path: &Path, busy_timeout: Duration, create: bool) -> Result<Connection> {
    let conn = conn::connect(path, busy_timeout, create).map_err(|e| {
        located(
            path,
            match classify(&e, busy_timeout) {
                known @ (StoreError::Busy { .. }
                | StoreError::Corrupt { .. }
                | StoreError::Full) => known,
                _ => StoreError::Unavailable {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                },
            },
        )
    })?;
    let version = scalar::<i64>(&conn, "PRAGMA user_version", [])
        .map_err(|e| located(path, classify(&e, busy_timeout)))?
        .unwrap_or(0);
    if !create && version == 0 {
        return Err(StoreError::NotAStore {
            path: path.display().to_string(),
            reason: "a SQLite database that Baton never set up".to_owned(),
        });
    }
    migrate(&conn, version, path, busy_timeout)?;
    Ok(conn)
}

/// Brings the schema up to date from version `seen` (read on opening). Safe when
/// several processes open a new store at once: the check is repeated under the write
/// lock.
fn migrate(conn: &Connection, seen: i64, path: &Path, busy_timeout: Duration) -> Result<()> {
    let latest = MIGRATIONS.len() as i64;
    if seen == latest {
        return Ok(());
    }
    let found = transaction(conn, |conn| {
        let current = scalar::<i64>(conn, "PRAGMA user_version", [])?.unwrap_or(0);
        if current > latest {
            return Ok(Some(current));
        }
        for script in &MIGRATIONS[current as usize..] {
            conn.execute_batch(script)?;
        }
        if (1..=BEFORE_TEXT_AND_STATE).contains(&current) {
            fill_text_and_state(conn, true)?;
        } else if (1..=BEFORE_PENDING_TEXT).contains(&current) {
            fill_text_and_state(conn, false)?;
        }
        if current <= BEFORE_METRICS {
            metrics::fill(conn)?;
        }
        if (1..=BEFORE_ATTENTION).contains(&current) {
            attention::fill(conn)?;
        }
        // PRAGMA takes no bound parameters; `latest` is a count we computed.
        conn.execute_batch(&format!("PRAGMA user_version = {latest}"))?;
        Ok(None)
    })
    .map_err(|e| classify(&e, busy_timeout))?;
    match found {
        Some(found) => Err(StoreError::TooNew {
            path: path.display().to_string(),
            found,
            known: latest,
        }),
        None => Ok(()),
    }
}

/// Each family's projection rows, for [`SqliteStore::projection_dump`]: a family's file holds its
/// own, so a table's new column is written there.
const DUMPS: [&[&str]; 11] = [
    participants::DUMP,
    messages::DUMP,
    runs::DUMP,
    orders::DUMP,
    keys::DUMP,
    webhooks::DUMP,
    state::DUMP,
    metrics::DUMP,
    attention::DUMP,
    reservations::DUMP,
    pools::DUMP,
];

/// Fills `message_text` from the log of a store made before it was last made anew, and
/// `state` too when `state` (a store made before it existed).
fn fill_text_and_state(conn: &Connection, state: bool) -> Sql<()> {
    events::each_of(conn, &["message.sent", "state.changed"], |event| {
        match &event.change {
            // Straight into the index: the newest rows need not be these.
            Change::MessageSent(m) => exec(
                conn,
                "INSERT INTO message_text (rowid, words) SELECT ?1, ?2 WHERE ?2 != ''",
                params![event.seq, baton_core::search::words(&m.payload)],
            )
            .map(drop)?,
            Change::State(_) if state => state::advance(conn, event)?,
            _ => {}
        }
        Ok(())
    })
}

/// Appends `event` to the log and applies it to the projections, inside the caller's
/// transaction: what [`Tx::append`] does.
fn append(conn: &Connection, new: NewEvent) -> Sql<Event> {
    let seq: i64 = scalar(
        conn,
        "INSERT INTO events (id, at, actor, kind, subject, data) VALUES (?, ?, ?, ?, ?, ?) \
         RETURNING seq",
        params![
            new.id,
            new.at,
            new.actor,
            new.change.kind(),
            new.change.subject(),
            new.change.data().to_string()
        ],
    )?
    .expect("an insert returns its row");
    let event = Event {
        seq,
        id: new.id,
        at: new.at,
        actor: new.actor,
        change: new.change,
    };
    project(conn, &event)?;
    Ok(event)
}

/// Applies one event to the projections. Used for live writes and for replay alike.
fn project(conn: &Connection, event: &Event) -> Sql<()> {
    let tally = if Tally::moved_by(&event.change) {
        Some(metrics::facts(conn, event)?)
    } else {
        None
    };
    project_tables(conn, event)?;
    if let Some(facts) = tally {
        metrics::advance(conn, event, &facts)?;
    }
    Ok(())
}

/// [`project`] but for the metrics' tally: each family applies the changes that are its
/// own (in its file: `messages::project`, `runs::project`, …) and passes over the rest.
/// What no family projects is read from the log when asked: a refusal (the log is its
/// record), a negotiation and an order's effects (folded in memory, but for whether an
/// order is stuck), whom a participant stands for, a hand-over, verdicts and
/// acknowledgements (read by subject).
fn project_tables(conn: &Connection, event: &Event) -> Sql<()> {
    participants::project(conn, event)?;
    messages::project(conn, event)?;
    state::project(conn, event)?;
    runs::project(conn, event)?;
    orders::project(conn, event)?;
    keys::project(conn, event)?;
    webhooks::project(conn, event)?;
    reservations::project(conn, event)?;
    pools::project(conn, event)?;
    attention::project(conn, event)
}

#[async_trait]
impl Backend for SqliteStore {
    async fn begin(&self) -> Result<Box<dyn Tx>> {
        let handle = match &self.conns {
            Conns::Grouped { group, .. } => {
                Handle::Member(group.begin().await.map_err(|e| located(&self.path, e))?)
            }
            Conns::One(conn) => {
                let conn = Arc::clone(conn.get().await?).lock_owned().await;
                blocking(|| exec(&conn, "BEGIN IMMEDIATE", []))
                    .map_err(|e| located(&self.path, self.err(e)))?;
                Handle::Own(Own(conn))
            }
        };
        let mut tx = SqliteTx {
            handle,
            busy_timeout: self.busy_timeout,
            folded: None,
        };
        // Every writer folds what hooks spooled, in its own transaction.
        if matches!(self.conns, Conns::One(_)) && self.spool.pending() {
            let unavailable = |e: std::io::Error| StoreError::Unavailable {
                path: self.path.display().to_string(),
                reason: format!("the hook spool: {e}"),
            };
            // Only hooks spool: each event is a hook's, its actor settled now.
            for mut event in self.spool.claim().map_err(unavailable)? {
                if !tx.has_event(&event.id).await? {
                    crate::write::settle_hook_actor(&mut tx, &mut event).await?;
                    tx.append(event).await?;
                }
            }
            tx.folded = Some(self.spool.clone());
        }
        Ok(Box::new(tx))
    }

    async fn spool(&self, event: &NewEvent) -> Result<bool> {
        if !self.spools || matches!(self.conns, Conns::Grouped { .. }) {
            return Ok(false);
        }
        self.spool
            .append(event)
            .map_err(|e| StoreError::Unavailable {
                path: self.path.display().to_string(),
                reason: format!("the hook spool: {e}"),
            })?;
        Ok(true)
    }

    async fn participants(&self) -> Result<Vec<Participant>> {
        self.read(participants::all).await
    }

    async fn participant(&self, name: &str) -> Result<Option<Participant>> {
        self.read(|conn| participants::load(conn, name)).await
    }

    async fn inbox(&self, who: &Passname, all: bool, window: &Window) -> Result<Vec<Envelope>> {
        self.read(|conn| messages::inbox(conn, who, all, window))
            .await
    }

    async fn owed(&self, who: &Passname, limit: u32) -> Result<(Vec<Envelope>, u64)> {
        self.read(|conn| messages::owed(conn, who, limit)).await
    }

    async fn outbox(&self, who: &Passname, all: bool, window: &Window) -> Result<Vec<Envelope>> {
        self.read(|conn| messages::outbox(conn, who, all, window))
            .await
    }

    async fn waiting(&self, who: &Passname, limit: u32) -> Result<(Vec<Envelope>, u64)> {
        self.read(|conn| messages::waiting(conn, who, limit)).await
    }

    async fn owed_heads(&self, who: &Passname, others: u32) -> Result<(Vec<MessageHead>, u64)> {
        self.read(|conn| messages::owed_heads(conn, who, others))
            .await
    }

    async fn waiting_heads(&self, who: &Passname) -> Result<Vec<MessageHead>> {
        self.read(|conn| messages::waiting_heads(conn, who)).await
    }

    async fn envelopes(&self, ids: &[String]) -> Result<Vec<Envelope>> {
        self.read(|conn| messages::envelopes(conn, ids)).await
    }

    async fn thread(&self, id: &str) -> Result<Vec<Envelope>> {
        self.read(|conn| messages::thread(conn, id))
            .await?
            .ok_or_else(|| StoreError::from(Refusal::not_found(Record::Message, id)))
    }

    async fn search(&self, caller: Option<&Passname>, q: &SearchQuery) -> Result<Page> {
        let (limit, statements) = messages::search_statements(caller, q)?;
        self.read(|conn| messages::search(conn, limit, &statements))
            .await
    }

    async fn events_of_kind(
        &self,
        kind: &str,
        before_seq: Option<i64>,
        limit: u32,
    ) -> Result<Vec<Event>> {
        self.read(|conn| events::of_kind(conn, kind, before_seq, limit))
            .await
    }

    async fn events(&self, after_seq: i64, limit: u32) -> Result<Vec<Event>> {
        self.read(|conn| events::read(conn, after_seq, limit)).await
    }

    async fn state(&self) -> Result<ProjectState> {
        self.read(state::read).await
    }

    async fn state_digest(&self) -> Result<StateDigest> {
        self.read(state::digest).await
    }

    async fn metrics(&self) -> Result<baton_core::metrics::Metrics> {
        self.read(metrics::read).await
    }

    async fn last_change(&self, subject: &str, after_seq: i64) -> Result<Option<Millis>> {
        let one = [(subject.to_owned(), after_seq)];
        Ok(self.last_changes(&one).await?.pop().flatten())
    }

    async fn last_changes(&self, subjects: &[(String, i64)]) -> Result<Vec<Option<Millis>>> {
        let list = serde_json::to_string(subjects).expect("pairs serialize");
        self.read(|conn| events::last_changes(conn, &list)).await
    }

    async fn payloads(&self, ids: &[String]) -> Result<Vec<Option<Map<String, Value>>>> {
        let list = serde_json::to_string(ids).expect("strings serialize");
        let found = self.read(|conn| messages::payloads(conn, &list)).await?;
        ids.iter()
            .map(|id| {
                found
                    .get(id)
                    .map(|data| decode::payload(id, data))
                    .transpose()
            })
            .collect()
    }

    async fn generation(&self) -> Result<i64> {
        self.read(events::generation).await
    }

    async fn message(&self, id: &str) -> Result<Option<(Envelope, Map<String, Value>)>> {
        match self.read(|conn| messages::message(conn, id)).await? {
            Some((envelope, data)) => Ok(Some((envelope, decode::payload(id, &data)?))),
            None => Ok(None),
        }
    }

    async fn ids(&self, record: Record, spans: &[Span]) -> Result<Vec<String>> {
        let Some(table) = decode::id_table(record) else {
            return Ok(Vec::new());
        };
        self.read(|conn| rows::ids(conn, table, spans)).await
    }

    async fn runs(&self, query: &RunQuery) -> Result<Vec<Run>> {
        self.read(|conn| runs::query(conn, query)).await
    }

    async fn run_counts(
        &self,
        ended_since: Millis,
        quiet_before: Millis,
        parents: Option<&[String]>,
    ) -> Result<Vec<crate::RunCount>> {
        self.read(|conn| runs::counts(conn, ended_since, quiet_before, parents))
            .await
    }

    async fn failures(&self, since: Millis) -> Result<Vec<Run>> {
        self.read(|conn| runs::failures(conn, since)).await
    }

    async fn order(&self, id: &str) -> Result<Option<Order>> {
        self.read(|conn| orders::load(conn, id)).await
    }

    async fn orders(&self, query: &OrderQuery) -> Result<Vec<Order>> {
        self.read(|conn| orders::query(conn, query)).await
    }

    async fn waits(&self, ids: &[String]) -> Result<Vec<(String, Order)>> {
        self.read(|conn| orders::waits(conn, ids)).await
    }

    async fn order_events_since(&self, id: &str, after_seq: i64) -> Result<Vec<Event>> {
        self.read(|conn| orders::events_since(conn, id, after_seq))
            .await
    }

    async fn key(&self, id: &str) -> Result<Option<Key>> {
        // A key is read to authenticate its bearer, who is shown nothing of it: it need
        // not wait for the log's sync (a key's token is handed out only after its issue
        // is synced, and a revocation not yet synced refuses early, never late).
        self.read_unsettled(|conn| keys::used(conn, id)).await
    }

    async fn key_used(&self, id: &str, at: Millis) -> Result<()> {
        self.bookkeep(|conn| keys::record_use(conn, id, at)).await
    }

    async fn count_repeat(&self, seq: i64, at: Millis) -> Result<()> {
        self.bookkeep(|conn| events::count_repeat(conn, seq, at))
            .await
    }

    async fn repeats(&self, seqs: &[i64]) -> Result<Vec<Repeats>> {
        self.read(|conn| events::repeats(conn, seqs)).await
    }

    async fn keys(&self) -> Result<Vec<Key>> {
        self.read(keys::all).await
    }

    async fn webhook(&self, participant: &str) -> Result<Option<Webhook>> {
        self.read(|conn| webhooks::load(conn, participant)).await
    }

    async fn webhooks(&self) -> Result<Vec<Webhook>> {
        self.read(webhooks::all).await
    }

    async fn claim_webhook(&self, now: Millis, lease_until: Millis) -> Result<Option<Webhook>> {
        self.bookkeep(|conn| webhooks::claim(conn, now, lease_until))
            .await
    }

    async fn settle_webhook(&self, hook: &Webhook, settled: Settled) -> Result<()> {
        self.bookkeep(|conn| webhooks::settle(conn, hook, &settled))
            .await
    }

    async fn negotiation(&self, id: &str) -> Result<Option<Negotiation>> {
        self.read(|conn| events::negotiation(conn, id)).await
    }

    async fn events_about(&self, subject: &str, kind: &str) -> Result<Vec<Event>> {
        self.read(|conn| events::about(conn, subject, kind)).await
    }

    async fn reservations(&self, query: &ReservationQuery) -> Result<Vec<Reservation>> {
        self.read(|conn| reservations::query(conn, query)).await
    }

    async fn pool_items(&self, query: &PoolQuery) -> Result<Vec<baton_core::pool::Item>> {
        self.read(|conn| pools::query(conn, query)).await
    }

    async fn attention(&self) -> Result<Attention> {
        self.read(attention::read).await
    }

    async fn acks(&self, items: &[String]) -> Result<Vec<Option<Millis>>> {
        self.read(|conn| attention::acks(conn, items)).await
    }
}

/// A write transaction on the SQLite file: its own `BEGIN IMMEDIATE`, committed with an
/// fsync; or, in a grouped store, a member of the group's transaction.
struct SqliteTx {
    handle: Handle,
    busy_timeout: Duration,
    /// The spool this transaction folded, released once it commits.
    folded: Option<spool::Spool>,
}

enum Handle {
    Own(Own),
    Member(group::Member),
}

/// The store's connection with a transaction of its own open on it; dropped without a
/// commit, it rolls back.
struct Own(OwnedMutexGuard<Connection>);

impl Drop for Own {
    fn drop(&mut self) {
        if !self.0.is_autocommit() {
            let _ = exec(&self.0, "ROLLBACK", []);
        }
    }
}

impl SqliteTx {
    fn conn(&self) -> &Connection {
        match &self.handle {
            Handle::Own(own) => &own.0,
            Handle::Member(member) => member.conn(),
        }
    }

    /// Runs `work` on the transaction's connection.
    fn on<T>(&self, work: impl FnOnce(&Connection) -> Sql<T>) -> Result<T> {
        work(self.conn()).map_err(|e| classify(&e, self.busy_timeout))
    }
}

#[async_trait]
impl Tx for SqliteTx {
    async fn append(&mut self, event: NewEvent) -> Result<Event> {
        self.on(|conn| append(conn, event))
    }

    async fn participant(&mut self, name: &str) -> Result<Option<Participant>> {
        self.on(|conn| participants::load(conn, name))
    }

    async fn envelope(&mut self, id: &str) -> Result<Option<Envelope>> {
        self.on(|conn| messages::envelope(conn, id))
    }

    async fn keyed(&mut self, from: &Passname, key: &str) -> Result<Option<Prior>> {
        self.on(|conn| messages::keyed(conn, from, key))
    }

    async fn recent(
        &mut self,
        from: &Passname,
        draft: &Draft,
        since: Millis,
    ) -> Result<Vec<Prior>> {
        self.on(|conn| messages::recent(conn, from, draft, since))
    }

    async fn order(&mut self, id: &str) -> Result<Option<Order>> {
        self.on(|conn| orders::load(conn, id))
    }

    async fn waits(&mut self, ids: &[String]) -> Result<Vec<(String, Order)>> {
        self.on(|conn| orders::waits(conn, ids))
    }

    async fn waiting_on(&mut self, id: &str) -> Result<Vec<Order>> {
        self.on(|conn| orders::waiting_on(conn, id))
    }

    async fn run(&mut self, id: &str) -> Result<Option<Run>> {
        self.on(|conn| runs::load(conn, id))
    }

    async fn key(&mut self, id: &str) -> Result<Option<Key>> {
        self.on(|conn| keys::load(conn, id))
    }

    async fn webhook(&mut self, participant: &str) -> Result<Option<Webhook>> {
        self.on(|conn| webhooks::load(conn, participant))
    }

    async fn has_event(&mut self, id: &str) -> Result<bool> {
        self.on(|conn| events::has(conn, id))
    }

    async fn has_event_beyond(&mut self, kinds: &[&str]) -> Result<bool> {
        self.on(|conn| events::any_beyond(conn, kinds))
    }

    async fn event(&mut self, id: &str) -> Result<Option<Event>> {
        self.on(|conn| events::by_id(conn, id))
    }

    async fn count_beyond_from(&mut self, seq: i64, kinds: &[&str]) -> Result<usize> {
        self.on(|conn| events::count_beyond_from(conn, seq, kinds))
    }

    async fn other_live_run(&mut self, participant: &str, except: &str) -> Result<bool> {
        self.on(|conn| runs::other_live(conn, participant, except))
    }

    async fn held(&mut self, participant: &str, since: Millis) -> Result<Vec<String>> {
        self.on(|conn| messages::held(conn, participant, since))
    }

    async fn state(&mut self) -> Result<ProjectState> {
        self.on(state::read)
    }

    async fn negotiation(&mut self, id: &str) -> Result<Option<Negotiation>> {
        self.on(|conn| events::negotiation(conn, id))
    }

    async fn events_about(&mut self, subject: &str, kind: &str) -> Result<Vec<Event>> {
        self.on(|conn| events::about(conn, subject, kind))
    }

    async fn reservations(&mut self, query: &ReservationQuery) -> Result<Vec<Reservation>> {
        self.on(|conn| reservations::query(conn, query))
    }

    async fn activity(&mut self, participant: &str) -> Result<Option<Millis>> {
        self.on(|conn| reservations::activity(conn, participant))
    }

    async fn pool_items(&mut self, query: &PoolQuery) -> Result<Vec<baton_core::pool::Item>> {
        self.on(|conn| pools::query(conn, query))
    }

    async fn participants(&mut self) -> Result<Vec<Participant>> {
        self.on(participants::all)
    }

    async fn commit(self: Box<Self>) -> Result<()> {
        let busy_timeout = self.busy_timeout;
        match self.handle {
            Handle::Own(own) => blocking(|| exec(&own.0, "COMMIT", []))
                .map(drop)
                .map_err(|e| classify(&e, busy_timeout))?,
            Handle::Member(member) => member.commit(busy_timeout).await?,
        }
        if let Some(spool) = self.folded {
            // Committed: the claimed events are in the log. Should the removal fail, the
            // next writer finds them there by id and appends nothing twice.
            let _ = spool.release();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scripts a store made before migrations were read from their directory has run
    /// are the ones it ran then, in the same order: its recorded `user_version` means what it
    /// meant, and it opens unchanged.
    #[test]
    fn the_embedded_migrations_begin_with_the_ones_stores_have_run() {
        let before: &[&str] = &[
            include_str!("migrations/001_event_log.sql"),
            include_str!("migrations/002_event_kind_index.sql"),
            include_str!("migrations/003_runs.sql"),
            include_str!("migrations/004_orders.sql"),
            include_str!("migrations/005_keys.sql"),
            include_str!("migrations/006_authority.sql"),
            include_str!("migrations/007_webhooks.sql"),
            include_str!("migrations/008_text_and_state.sql"),
            include_str!("migrations/009_state_digest.sql"),
            include_str!("migrations/010_list_reads.sql"),
            include_str!("migrations/011_fewer_pages.sql"),
            include_str!("migrations/012_key_uses.sql"),
            include_str!("migrations/013_pending_text.sql"),
            include_str!("migrations/014_subjects_without_sends.sql"),
            include_str!("migrations/015_sends_in_fewer_trees.sql"),
            include_str!("migrations/016_metrics.sql"),
            include_str!("migrations/017_attention.sql"),
            include_str!("migrations/018_failures.sql"),
            include_str!("migrations/019_refusal_repeats.sql"),
            include_str!("migrations/020_runs_parent.sql"),
            include_str!("migrations/021_reservations.sql"),
        ];
        assert!(MIGRATIONS.len() >= before.len());
        for (number, (now, then)) in (1..).zip(MIGRATIONS.iter().zip(before)) {
            assert_eq!(now, then, "migration {number}");
        }
    }
}
