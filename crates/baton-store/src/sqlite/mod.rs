//! The embedded store: one SQLite file in WAL mode, driven in the calling thread
//! (rusqlite, through [`sql`]).
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

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use baton_core::delivery;
use baton_core::id::Span;
use baton_core::key::Key;
use baton_core::message::Prior;
use baton_core::metrics::Tally;
use baton_core::negotiation::Negotiation;
use baton_core::order::Order;
use baton_core::run::Run;
use baton_core::state::{DIGEST_ITEMS, ProjectState, StateDigest};
use baton_core::{
    Change, DeliveryStatus, Draft, Envelope, Event, MessageType, Millis, Participant, Passname,
    ProjectName, Record, Refusal, RequestStatus,
};
use rusqlite::{Connection, params};
use serde_json::{Map, Value};
use tokio::sync::{Mutex, OnceCell, OwnedMutexGuard};

mod attention;
mod group;
mod holder;
mod keys;
mod metrics;
mod orders;
mod runs;
mod spool;
mod sql;
mod webhooks;

use self::sql::{Builder, Fault, Sql, blocking, classify, column, exec, row, rows, scalar};
use crate::rows::{self as decode, decode_cursor, depth_first};
use crate::{
    Attention, Backend, NewEvent, OrderQuery, Page, Repeats, Result, RunQuery, SearchQuery,
    Settled, StoreError, Tx, Window,
};
use baton_core::webhook::Webhook;

/// The duplicate check's candidates: the sender's messages since a time with the same
/// payload hash, type, topic and parent, newest first.
const RECENT: &str = "SELECT id, hash, type, topic, reply_to, idempotency_key FROM messages \
     WHERE from_name = ? AND hash = ? AND type = ? AND topic = ? \
     AND reply_to IS ? AND created_at >= ? ORDER BY seq DESC LIMIT 20";

/// Schema migrations, applied in order; `PRAGMA user_version` records how many ran.
const MIGRATIONS: &[&str] = &[
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
];
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
/// Pending rows of free-text words at which the writer adding the last one moves them
/// all into the index, as one segment. Search compares at most this many rows directly.
const PENDING_TEXT_FLUSH: i64 = 64;

/// The event kinds in the kind index, as its `WHERE` names them (migration 13).
const KINDS_INDEXED: [&str; 2] = ["gate.changed", "security.refused"];

/// The newest events of an indexed kind before a seq.
const OF_KIND_INDEXED: &str = "SELECT seq, id, at, actor, kind, data FROM events \
     WHERE kind = ? AND kind IN ('gate.changed', 'security.refused') AND seq < ? \
     ORDER BY seq DESC LIMIT ?";
/// The newest events of any other kind before a seq: the log read back from its end.
const OF_KIND: &str = "SELECT seq, id, at, actor, kind, data FROM events \
     WHERE kind = ? AND seq < ? ORDER BY seq DESC LIMIT ?";

/// The events of one kind about a subject, oldest first, from the index of subjects. It
/// holds every kind but `message.sent` (migration 14): a message's own event is found by
/// its row in `messages` ([`SENT`]).
const ABOUT: &str = "SELECT seq, id, at, actor, kind, data FROM events \
     WHERE subject = ? AND kind = ? AND kind != 'message.sent' ORDER BY seq";
/// A message's own event, by the message's id.
const SENT: &str = "SELECT e.seq, e.id, e.at, e.actor, e.kind, e.data FROM messages m \
     JOIN events e ON e.seq = m.seq WHERE m.id = ?";
/// Whether the log holds an event by its id. The index of ids leaves out a
/// `message.sent` that took its message's id (migration 15): that one is found by its
/// message's row.
const HAS_EVENT: &str = "SELECT 1 FROM events WHERE id = ?1 \
     AND (kind != 'message.sent' OR id != subject) \
     UNION ALL SELECT 1 FROM messages m JOIN events e ON e.seq = m.seq \
     WHERE m.id = ?1 AND e.id = ?1 LIMIT 1";
/// An event by its id, found as [`HAS_EVENT`] finds it.
const EVENT: &str = "SELECT seq, id, at, actor, kind, data FROM events WHERE id = ?1 \
     AND (kind != 'message.sent' OR id != subject) \
     UNION ALL SELECT e.seq, e.id, e.at, e.actor, e.kind, e.data FROM messages m \
     JOIN events e ON e.seq = m.seq WHERE m.id = ?1 AND e.id = ?1 LIMIT 1";
/// When each subject of a JSON list of `[subject, seq]` last changed after its seq, in
/// the list's order: its events in the index of subjects, or its creation when it is a
/// message (`NULL` when neither).
const LAST_CHANGES: &str = "SELECT nullif(max(\
     ifnull((SELECT max(at) FROM events WHERE subject = j.value ->> 0 \
             AND seq > j.value ->> 1 AND kind != 'message.sent'), 0), \
     ifnull((SELECT created_at FROM messages WHERE id = j.value ->> 0 \
             AND seq > j.value ->> 1), 0)), 0) \
     FROM json_each(?) j ORDER BY j.key";

/// The replies under a thread's root, oldest first, from the index of threads.
const THREAD_REPLIES: &str =
    "SELECT id FROM messages WHERE root_id = ? AND reply_to IS NOT NULL ORDER BY seq";

/// Idle reader connections a grouped store keeps open for the next read.
const IDLE_READERS: usize = 8;

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

/// The connections a store reads and writes through.
#[derive(Clone)]
enum Conns {
    /// One connection for everything, taken in turn.
    One(Arc<Lazy>),
    /// Group commit: the writers' shared transaction, and readers beside it.
    Grouped {
        group: Arc<group::Group>,
        readers: Arc<Readers>,
    },
}

/// A store's one connection, opened when it is first used (its schema brought up to date
/// then). A store is opened at once, except for an agent's hook: a hook that only spools
/// its event never takes a lock on the database, so a writer checkpointing as it closes
/// never holds it up.
struct Lazy {
    conn: OnceCell<Arc<Mutex<Connection>>>,
    path: PathBuf,
    busy_timeout: Duration,
}

impl Lazy {
    fn opened(conn: Connection, path: &Path, busy_timeout: Duration) -> Self {
        Self {
            conn: OnceCell::new_with(Some(Arc::new(Mutex::new(conn)))),
            path: path.to_owned(),
            busy_timeout,
        }
    }

    /// A connection to open when it is first used.
    fn later(path: &Path, busy_timeout: Duration) -> Self {
        Self {
            conn: OnceCell::new(),
            path: path.to_owned(),
            busy_timeout,
        }
    }

    /// The connection, opened now if it was not yet.
    async fn get(&self) -> Result<&Arc<Mutex<Connection>>> {
        self.conn
            .get_or_try_init(|| async {
                open_conn(&self.path, self.busy_timeout, false)
                    .map(|conn| Arc::new(Mutex::new(conn)))
            })
            .await
    }

    /// The connection itself when nothing else holds it: opened now if it was not yet.
    fn take(self: Arc<Self>) -> std::result::Result<Result<Connection>, Arc<Self>> {
        let lazy = Arc::try_unwrap(self)?;
        let (path, busy_timeout) = (lazy.path, lazy.busy_timeout);
        match lazy.conn.into_inner() {
            None => Ok(open_conn(&path, busy_timeout, false)),
            Some(conn) => match Arc::try_unwrap(conn) {
                Ok(only) => Ok(Ok(only.into_inner())),
                Err(conn) => Err(Arc::new(Self {
                    conn: OnceCell::new_with(Some(conn)),
                    path,
                    busy_timeout,
                })),
            },
        }
    }
}

/// `e` with what only the store's place can tell: the process holding the write lock of a
/// busy store, and a disk with no room left behind an I/O error (SQLite reports running
/// out of room as `SQLITE_FULL` only where it sees `ENOSPC` itself; making its
/// shared-memory file on a full disk is "disk I/O error").
fn located(path: &Path, e: StoreError) -> StoreError {
    match e {
        StoreError::Busy {
            timeout_ms,
            holder: None,
        } => StoreError::Busy {
            timeout_ms,
            holder: holder::holder(path),
        },
        StoreError::Engine(_) | StoreError::Unavailable { .. } if sql::out_of_room(path) => {
            StoreError::Full
        }
        other => other,
    }
}

/// Opens the database at `path` and brings its schema up to date: a file Baton never set
/// up is refused, not taken over (unless `create`, for a new store).
fn open_conn(path: &Path, busy_timeout: Duration, create: bool) -> Result<Connection> {
    let conn = sql::connect(path, busy_timeout, create).map_err(|e| {
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

/// A grouped store's idle reader connections.
struct Readers {
    path: PathBuf,
    busy_timeout: Duration,
    idle: std::sync::Mutex<Vec<Connection>>,
}

impl Readers {
    fn take(&self) -> Sql<Connection> {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match idle {
            Some(conn) => Ok(conn),
            None => sql::connect(&self.path, self.busy_timeout, false),
        }
    }

    fn give(&self, conn: Connection) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < IDLE_READERS && conn.is_autocommit() {
            idle.push(conn);
        }
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .field("grouped", &matches!(self.conns, Conns::Grouped { .. }))
            .finish()
    }
}

/// Runs `work` in one read transaction: everything it reads comes from one snapshot.
fn snapshot<T>(conn: &Connection, work: impl FnOnce(&Connection) -> Sql<T>) -> Sql<T> {
    exec(conn, "BEGIN", [])?;
    let out = work(conn);
    let end = exec(conn, if out.is_ok() { "COMMIT" } else { "ROLLBACK" }, []);
    let out = out?;
    end?;
    Ok(out)
}

/// Runs `work` in a write transaction of its own on `conn` (`BEGIN IMMEDIATE`, committed
/// with an fsync), rolled back when it fails.
fn transaction<T>(conn: &Connection, work: impl FnOnce(&Connection) -> Sql<T>) -> Sql<T> {
    blocking(|| exec(conn, "BEGIN IMMEDIATE", []))?;
    let out = work(conn).and_then(|out| {
        blocking(|| exec(conn, "COMMIT", []))?;
        Ok(out)
    });
    if out.is_err() && !conn.is_autocommit() {
        let _ = exec(conn, "ROLLBACK", []);
    }
    out
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
        if store.spool.pending() && sql::writable(path) {
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
                Err(shared) => match sql::connect(&path, busy_timeout, false) {
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
            readers: Arc::new(Readers {
                path: path.clone(),
                busy_timeout,
                idle: std::sync::Mutex::new(Vec::new()),
            }),
        }))
    }

    fn err(&self, e: Fault) -> StoreError {
        classify(&e, self.busy_timeout)
    }

    /// Runs `work` in one read transaction on a connection of the store's. With group
    /// commit, it returns once everything the snapshot could hold is on disk.
    async fn read<T>(&self, work: impl FnOnce(&Connection) -> Sql<T>) -> Result<T> {
        let out = self.read_unsettled(work).await?;
        if let Conns::Grouped { group, .. } = &self.conns {
            group.settled().await?;
        }
        Ok(out)
    }

    /// [`Self::read`] without waiting for the group's sync: for a read whose result no
    /// caller is shown.
    async fn read_unsettled<T>(&self, work: impl FnOnce(&Connection) -> Sql<T>) -> Result<T> {
        let out = match &self.conns {
            Conns::One(conn) => snapshot(&*conn.get().await?.lock().await, work),
            Conns::Grouped { readers, .. } => {
                let conn = readers.take().map_err(|e| self.err(e))?;
                let out = snapshot(&conn, work);
                readers.give(conn);
                out
            }
        };
        out.map_err(|e| self.err(e))
    }

    /// Runs `work`, a write of the store's own bookkeeping outside the log (a webhook's
    /// lease), in a write transaction: the group's in a grouped store.
    async fn bookkeep<T>(&self, work: impl FnOnce(&Connection) -> Sql<T>) -> Result<T> {
        match &self.conns {
            Conns::One(conn) => {
                transaction(&*conn.get().await?.lock().await, work).map_err(|e| self.err(e))
            }
            Conns::Grouped { group, .. } => {
                let member = group.begin().await?;
                let out = work(member.conn()).map_err(|e| self.err(e))?;
                member.commit(self.busy_timeout).await?;
                Ok(out)
            }
        }
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
            for table in crate::rows::PROJECTIONS {
                conn.execute_batch(&format!("DELETE FROM {table}"))?;
            }
            let mut after = 0;
            loop {
                let batch = read_events(conn, after, 1000)?;
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
        let queries = [
            "SELECT 'p|' || name || '|' || role || '|' || added_at || '|' || coalesce(policy, '') \
             FROM participants ORDER BY name",
            "SELECT 'm|' || id || '|' || seq || '|' || from_name || '|' || type || '|' || topic \
             || '|' || coalesce(reply_to, '') || '|' || root_id || '|' || depth || '|' || excerpt \
             || '|' || size || '|' || hash || '|' || coalesce(idempotency_key, '') || '|' \
             || created_at || '|' || coalesce(request_status, '') || '|' || replies \
             FROM messages ORDER BY id",
            "SELECT 'd|' || message_id || '|' || participant || '|' || status || '|' || updated_at \
             || '|' || seq || '|' || request FROM deliveries ORDER BY message_id, participant",
            "SELECT 'r|' || id || '|' || seq || '|' || status || '|' || coalesce(participant, '') \
             || '|' || coalesce(host, '') || '|' || coalesce(ended_at, '') || '|' || data \
             FROM runs ORDER BY id",
            "SELECT 'o|' || id || '|' || log_seq || '|' || seq || '|' || status || '|' || from_name \
             || '|' || to_name || '|' || coalesce(escalate_to, '') || '|' || data \
             FROM orders ORDER BY id",
            "SELECT 'k|' || id || '|' || seq || '|' || participant || '|' || data \
             FROM keys ORDER BY id",
            "SELECT 'w|' || participant || '|' || url || '|' || set_seq \
             FROM webhooks ORDER BY participant",
            // A message's words, indexed or pending: which of the two holds them depends
            // on how many were written since the last move, not on what they are.
            "SELECT 't|' || seq || '|' || words FROM ( \
                 SELECT doc AS seq, group_concat(term, ' ' ORDER BY \"offset\") AS words \
                 FROM message_words GROUP BY doc \
                 UNION ALL SELECT seq, words FROM messages WHERE words != '') ORDER BY seq",
            "SELECT 's|' || data FROM state",
            "SELECT 'g|' || data FROM state_digest",
            "SELECT 'x|' || data FROM metrics",
            "SELECT 'n|' || id || '|' || seq FROM open_needs ORDER BY id",
            "SELECT 'u|' || id FROM stuck_orders ORDER BY id",
        ];
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

/// Refuses a file that cannot be a SQLite database: shorter than its 100-byte header (an
/// empty file, say), or without SQLite's magic string at its start.
fn check_header(path: &Path) -> Result<()> {
    use std::io::Read;
    let not = |reason: &str| StoreError::NotAStore {
        path: path.display().to_string(),
        reason: reason.to_owned(),
    };
    let meta = std::fs::metadata(path).map_err(|e| StoreError::Unavailable {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    if !meta.is_file() {
        return Err(not("not a regular file"));
    }
    if meta.len() == 0 {
        return Err(not("the file is empty"));
    }
    let mut head = [0u8; 16];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head));
    if read.is_err() || meta.len() < 100 || &head != b"SQLite format 3\0" {
        return Err(not("it is not a SQLite database"));
    }
    Ok(())
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

/// [`project`] but for the metrics' tally.
fn project_tables(conn: &Connection, event: &Event) -> Sql<()> {
    match &event.change {
        Change::ParticipantAdded { name, role } => {
            exec(
                conn,
                "INSERT INTO participants (name, role, added_at) VALUES (?, ?, ?) \
                 ON CONFLICT (name) DO UPDATE SET role = excluded.role",
                params![name.as_str(), role, event.at],
            )?;
        }
        Change::MessageSent(m) => {
            let parent = match &m.reply_to {
                Some(parent) => row(
                    conn,
                    "SELECT root_id, depth FROM messages WHERE id = ?",
                    [parent],
                )?,
                None => None,
            };
            let parent = match parent {
                Some(parent) => {
                    use decode::Columns;
                    Some((parent.text("root_id")?, parent.int("depth")?))
                }
                None => None,
            };
            let (root, depth) = delivery::thread_place(&m.id, parent);
            if let Some(parent) = &m.reply_to {
                exec(
                    conn,
                    "UPDATE messages SET replies = replies + 1 WHERE id = ?",
                    [parent],
                )?;
            }
            let request_status = RequestStatus::on_send(m.kind).map(RequestStatus::as_str);
            exec(
                conn,
                "INSERT INTO messages (id, seq, from_name, type, topic, reply_to, root_id, depth, \
                 excerpt, size, hash, idempotency_key, created_at, request_status, words) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                params![
                    m.id,
                    event.seq,
                    m.from.as_str(),
                    m.kind.as_str(),
                    m.topic.as_str(),
                    m.reply_to,
                    root,
                    depth,
                    m.excerpt,
                    m.size as i64,
                    m.hash,
                    m.idempotency_key,
                    event.at,
                    request_status,
                    baton_core::search::words(&m.payload)
                ],
            )?;
            move_words(conn)?;
            for (ordinal, to) in m.to.iter().enumerate() {
                exec(
                    conn,
                    "INSERT INTO deliveries \
                     (message_id, participant, ordinal, status, updated_at, seq, request) \
                     VALUES (?, ?, ?, ?, ?, ?, ?)",
                    params![
                        m.id,
                        to.as_str(),
                        ordinal as i64,
                        delivery::FIRST_DELIVERY.as_str(),
                        event.at,
                        event.seq,
                        m.kind == MessageType::Request
                    ],
                )?;
            }
        }
        Change::DeliveryChanged {
            message,
            participant,
            status,
            ..
        } => {
            exec(
                conn,
                "UPDATE deliveries SET status = ?, updated_at = ? \
                 WHERE message_id = ? AND participant = ?",
                params![status.as_str(), event.at, message, participant.as_str()],
            )?;
        }
        Change::RequestChanged { message, status } => {
            exec(
                conn,
                "UPDATE messages SET request_status = ? WHERE id = ?",
                params![status.as_str(), message],
            )?;
        }
        Change::State(_) => advance_state(conn, event)?,
        Change::Run(change) => runs::project(conn, event, change)?,
        Change::Order(change) => orders::project(conn, event, change)?,
        Change::Key(change) => keys::project(conn, event, change)?,
        Change::Webhook(change) => webhooks::project(conn, event, change)?,
        Change::PolicySet { name, policy } => {
            exec(
                conn,
                "UPDATE participants SET policy = ? WHERE name = ?",
                params![decode::policy_text(policy.as_ref()), name.as_str()],
            )?;
        }
        // The log is the record of a refusal; nothing projects it.
        Change::Denied(_) => {}
        // A negotiation is folded in memory from its events (`Negotiation::replay`), and
        // so are an order's effects (`Effects::replay`), but for whether one is stuck.
        // Whom a participant stands for is folded from its events when asked.
        Change::Negotiation(_) | Change::A2aAgent { .. } | Change::Handover(_) => {}
        Change::Effect(change) => attention::effect(conn, change)?,
        // Verdicts and acknowledgements are read from the log by subject; open needs are
        // projected.
        Change::Gate(change) => attention::gate(conn, event, change)?,
    }
    Ok(())
}

/// A projection row kept as the JSON of its fold (runs, orders): `query` selects its `data`
/// column by id.
fn load_folded<T: serde::de::DeserializeOwned>(
    conn: &Connection,
    query: &'static str,
    id: &str,
) -> Sql<Option<T>> {
    let data: Option<String> = scalar(conn, query, [id])?;
    Ok(data.as_deref().map(decode::folded).transpose()?)
}

fn read_events(conn: &Connection, after: i64, limit: u32) -> Sql<Vec<Event>> {
    let found = rows(
        conn,
        "SELECT seq, id, at, actor, kind, data FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
        params![after, limit],
    )?;
    Ok(decode::events(&found)?)
}

/// The project state: the fold of every `state.changed` event, as its projection keeps it.
fn read_state(conn: &Connection) -> Sql<ProjectState> {
    let data: Option<String> = scalar(conn, "SELECT data FROM state WHERE id = 1", [])?;
    Ok(match data {
        Some(data) => decode::folded(&data)?,
        None => ProjectState::default(),
    })
}

/// The state's digest as its projection keeps it; made from the whole state when a store
/// older than the digest has not changed its state since.
fn read_digest(conn: &Connection) -> Sql<StateDigest> {
    let data: Option<String> = scalar(conn, "SELECT data FROM state_digest WHERE id = 1", [])?;
    Ok(match data {
        Some(data) => decode::folded(&data)?,
        None => read_state(conn)?.digest(DIGEST_ITEMS),
    })
}

/// Folds one state event into the state's projection and its digest.
fn advance_state(conn: &Connection, event: &Event) -> Sql<()> {
    let mut state = read_state(conn)?;
    state.apply(event);
    let (data, digest) = decode::state_rows(&state);
    for (table, data) in [("state", data), ("state_digest", digest)] {
        exec(
            conn,
            &format!(
                "INSERT INTO {table} (id, data) VALUES (1, ?) \
                 ON CONFLICT (id) DO UPDATE SET data = excluded.data"
            ),
            [data],
        )?;
    }
    Ok(())
}

/// Where a search reads its matches from.
#[derive(Clone, Copy)]
enum Source {
    /// Every message (no words to look for).
    Messages,
    /// The words not yet moved into the index.
    Pending,
    /// The free-text index.
    Index,
}

/// A search's statement over `source`, newest first, its `LIMIT` left to bind last.
fn search_sql(
    source: Source,
    caller: Option<&Passname>,
    q: &SearchQuery,
    text: Option<&str>,
    words: &[String],
    cursor: Option<i64>,
) -> Result<Builder> {
    let (mut sql, order) = match source {
        Source::Messages => (Builder::new("SELECT m.seq, m.id FROM messages m"), "m.seq"),
        // The words waiting are in the newest rows (`move_words`).
        Source::Pending => {
            let mut sql = Builder::new(
                "SELECT m.seq, m.id FROM (SELECT seq, words FROM messages ORDER BY seq DESC \
                 LIMIT ",
            );
            sql.bind(PENDING_TEXT_FLUSH)
                .push(") f JOIN messages m ON m.seq = f.seq");
            (sql, "f.seq")
        }
        Source::Index => (
            Builder::new(
                "SELECT m.seq, m.id FROM message_text f JOIN messages m ON m.seq = f.rowid",
            ),
            "f.rowid",
        ),
    };
    if let Some(status) = q.status {
        let caller = caller.ok_or(Refusal::StatusNeedsIdentity)?;
        sql.push(" JOIN deliveries mine ON mine.message_id = m.id AND mine.participant = ")
            .bind(caller.as_str().to_owned())
            .push(" AND mine.status = ")
            .bind(status.as_str().to_owned());
    }
    sql.push(" WHERE 1 = 1");
    match source {
        Source::Messages => {}
        // Each word must start a word of the payload: an FTS5 prefix query, or the same
        // test on the pending words (one space between words, none at either end).
        // The words are one parameter, a JSON array: one statement whatever their number,
        // and a query of many words never meets SQLite's limit on parameters.
        Source::Pending => {
            let list = serde_json::to_string(words).expect("words serialize");
            sql.push(" AND f.words IS NOT NULL AND NOT EXISTS (SELECT 1 FROM json_each(")
                .bind(list)
                .push(") w WHERE instr(' ' || f.words, ' ' || w.value) = 0)");
        }
        Source::Index => {
            let query: Vec<String> = words.iter().map(|w| format!("\"{w}\"*")).collect();
            sql.push(" AND f.message_text MATCH ").bind(query.join(" "));
        }
    }
    if let Some(topic) = &q.topic {
        sql.push(" AND m.topic = ").bind(topic.clone());
    }
    if let Some(kind) = q.kind {
        sql.push(" AND m.type = ").bind(kind.as_str().to_owned());
    }
    if let Some(from) = &q.from {
        sql.push(" AND m.from_name = ").bind(from.clone());
    }
    if let Some(to) = &q.to {
        sql.push(" AND EXISTS (SELECT 1 FROM deliveries t WHERE t.message_id = m.id AND t.participant = ")
            .bind(to.clone())
            .push(")");
    }
    if let Some(since) = q.since {
        sql.push(" AND m.created_at >= ").bind(since);
    }
    if let Some(until) = q.until {
        sql.push(" AND m.created_at < ").bind(until);
    }
    if let Some(text) = text.filter(|_| words.is_empty()) {
        // Punctuation alone has no words to look up: the payloads' text is read.
        sql.push(" AND instr(lower((SELECT e.data FROM events e WHERE e.seq = m.seq)), lower(")
            .bind(text.to_owned())
            .push(")) > 0");
    }
    if let Some(cursor) = cursor {
        sql.push(" AND ").push(order).push(" < ").bind(cursor);
    }
    sql.push(" ORDER BY ").push(order).push(" DESC LIMIT ?");
    Ok(sql)
}

/// Moves the words waiting in the newest messages' rows into the free-text index, as one
/// segment, once `PENDING_TEXT_FLUSH` of them wait (migrations 13 and 15 say why). Every
/// message written since the last move waits (as '' when its payload has no words), so
/// what waits is always the newest rows of `messages`, fewer than `PENDING_TEXT_FLUSH`.
fn move_words(conn: &Connection) -> Sql<()> {
    // What waits is a run of the newest rows, so it is `PENDING_TEXT_FLUSH` rows long
    // once the row that many from the newest waits: one row read, not that many.
    let oldest = scalar::<i64>(conn, OLDEST_OF_NEWEST_WAITING, [PENDING_TEXT_FLUSH - 1])?;
    if let Some(from) = oldest {
        exec(
            conn,
            "INSERT INTO message_text (rowid, words) SELECT seq, words FROM messages \
             WHERE seq >= ? AND words != '' ORDER BY seq",
            [from],
        )?;
        exec(
            conn,
            "UPDATE messages SET words = NULL WHERE seq >= ? AND words IS NOT NULL",
            [from],
        )?;
    }
    Ok(())
}

/// The seq of the message `?` rows before the newest, if its words wait for the index.
const OLDEST_OF_NEWEST_WAITING: &str = "SELECT seq FROM (SELECT seq, words FROM messages \
     ORDER BY seq DESC LIMIT 1 OFFSET ?) WHERE words IS NOT NULL";

/// Fills `message_text` from the log of a store made before it was last made anew, and
/// `state` too when `state` (a store made before it existed).
fn fill_text_and_state(conn: &Connection, state: bool) -> Sql<()> {
    each_event_of(conn, &["message.sent", "state.changed"], |event| {
        match &event.change {
            // Straight into the index: the newest rows need not be these.
            Change::MessageSent(m) => exec(
                conn,
                "INSERT INTO message_text (rowid, words) SELECT ?1, ?2 WHERE ?2 != ''",
                params![event.seq, baton_core::search::words(&m.payload)],
            )
            .map(drop)?,
            Change::State(_) if state => advance_state(conn, event)?,
            _ => {}
        }
        Ok(())
    })
}

/// Hands each event of `kinds` to `each`, oldest first, read a thousand at a time: how a
/// migration fills a new projection from the log.
fn each_event_of(
    conn: &Connection,
    kinds: &[&str],
    mut each: impl FnMut(&Event) -> Sql<()>,
) -> Sql<()> {
    let kinds = serde_json::to_string(kinds).expect("strings serialize");
    let mut after = 0;
    loop {
        let found = rows(
            conn,
            "SELECT seq, id, at, actor, kind, data FROM events \
             WHERE seq > ? AND kind IN (SELECT value FROM json_each(?)) ORDER BY seq LIMIT 1000",
            params![after, kinds],
        )?;
        let batch = decode::events(&found)?;
        let Some(last) = batch.last() else {
            return Ok(());
        };
        after = last.seq;
        for event in &batch {
            each(event)?;
        }
    }
}

/// Negotiation `id`: the fold of its events, found by the subject index.
fn read_negotiation(conn: &Connection, id: &str) -> Sql<Option<Negotiation>> {
    Ok(Negotiation::replay(&read_about(
        conn,
        id,
        "negotiation.changed",
    )?))
}

/// The events of `kind` about `subject`, oldest first, found by the subject index.
fn read_about(conn: &Connection, subject: &str, kind: &str) -> Sql<Vec<Event>> {
    let found = if kind == "message.sent" {
        rows(conn, SENT, [subject])?
    } else {
        rows(conn, ABOUT, [subject, kind])?
    };
    Ok(decode::events(&found)?)
}

/// The statement reading the message rows of envelopes, `WHERE …` appended.
macro_rules! envelope_messages {
    ($where:literal) => {
        concat!(
            "SELECT m.id, m.from_name, m.type, m.topic, m.reply_to, m.depth, m.excerpt, \
             m.size, m.hash, m.created_at, m.request_status, m.replies, m.idempotency_key \
             FROM messages m ",
            $where
        )
    };
}

/// The statement reading the recipients of envelopes, `WHERE …` appended.
macro_rules! envelope_recipients {
    ($where:literal) => {
        concat!(
            "SELECT message_id, participant, status, updated_at FROM deliveries ",
            $where,
            " ORDER BY ordinal"
        )
    };
}

/// Loads the envelopes of `ids`, in the order given; unknown ids are skipped.
fn load_envelopes(conn: &Connection, ids: &[String]) -> Sql<Vec<Envelope>> {
    let (messages, recipients) = match ids {
        [] => return Ok(Vec::new()),
        // One message (shown, stepped, replied to) is read without `json_each`: compiling
        // a statement that calls it costs more than running it, and a command compiles
        // each statement it runs once.
        [id] => (
            rows(conn, envelope_messages!("WHERE m.id = ?"), [id])?,
            rows(conn, envelope_recipients!("WHERE message_id = ?"), [id])?,
        ),
        _ => {
            let list = serde_json::to_string(ids).expect("strings serialize");
            (
                rows(
                    conn,
                    envelope_messages!("WHERE m.id IN (SELECT value FROM json_each(?))"),
                    [&list],
                )?,
                rows(
                    conn,
                    envelope_recipients!("WHERE message_id IN (SELECT value FROM json_each(?))"),
                    [&list],
                )?,
            )
        }
    };
    Ok(decode::envelopes(ids, &messages, &recipients)?)
}

/// Runs a query that selects message ids and loads their envelopes, in that order.
fn listed(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> Sql<Vec<Envelope>> {
    let ids: Vec<String> = column(conn, sql, params)?;
    load_envelopes(conn, &ids)
}

/// A page of a list for `who`: the envelopes of the ids `sql` selects (bound: who, the seq
/// the page starts after, the limit), `window`'s message id turned into its seq first.
fn windowed(conn: &Connection, sql: &str, who: &Passname, window: &Window) -> Sql<Vec<Envelope>> {
    let after = match &window.after {
        None => 0,
        // An id that is no message names no place in any list: the page is empty.
        Some(id) => {
            scalar(conn, "SELECT seq FROM messages WHERE id = ?", [id])?.unwrap_or(i64::MAX)
        }
    };
    listed(conn, sql, params![who.as_str(), after, window.limit])
}

/// A bounded list for `who`: the envelopes of the first `limit` ids `ids` selects (bound:
/// who, the limit) and the count `count` gives (bound: who).
fn counted(
    conn: &Connection,
    count: &str,
    ids: &str,
    who: &Passname,
    limit: u32,
) -> Sql<(Vec<Envelope>, u64)> {
    let total: i64 = scalar(conn, count, [who.as_str()])?.unwrap_or(0);
    let first = listed(conn, ids, params![who.as_str(), limit])?;
    Ok((first, total as u64))
}

/// One message's envelope.
fn envelope(conn: &Connection, id: &str) -> Sql<Option<Envelope>> {
    Ok(load_envelopes(conn, &[id.to_owned()])?.pop())
}

fn fetch_participant(conn: &Connection, name: &str) -> Sql<Option<Participant>> {
    let found = row(
        conn,
        "SELECT name, role, added_at, policy FROM participants WHERE name = ?",
        [name],
    )?;
    Ok(found.as_ref().map(decode::participant).transpose()?)
}

/// Earlier messages as the duplicate rule compares them, with their recipients.
fn priors(conn: &Connection, found: &[sql::Row]) -> Sql<Vec<Prior>> {
    use decode::Columns;
    let mut out = Vec::with_capacity(found.len());
    for r in found {
        let id = r.text("id")?;
        let to: Vec<String> = column(
            conn,
            "SELECT participant FROM deliveries WHERE message_id = ?",
            [&id],
        )?;
        out.push(decode::prior(r, to)?);
    }
    Ok(out)
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
        self.read(|conn| {
            let found = rows(
                conn,
                "SELECT name, role, added_at, policy FROM participants ORDER BY name",
                [],
            )?;
            Ok(found
                .iter()
                .map(decode::participant)
                .collect::<sqlx::Result<_>>()?)
        })
        .await
    }

    async fn participant(&self, name: &str) -> Result<Option<Participant>> {
        self.read(|conn| fetch_participant(conn, name)).await
    }

    async fn inbox(&self, who: &Passname, all: bool, window: &Window) -> Result<Vec<Envelope>> {
        let sql = if all {
            "SELECT message_id FROM deliveries \
             WHERE participant = ?1 AND status != 'archived' AND seq > ?2 ORDER BY seq LIMIT ?3"
        } else {
            "SELECT message_id FROM deliveries \
             WHERE participant = ?1 AND status IN ('pending', 'delivered') AND seq > ?2 \
             ORDER BY seq LIMIT ?3"
        };
        self.read(|conn| windowed(conn, sql, who, window)).await
    }

    async fn owed(&self, who: &Passname, limit: u32) -> Result<(Vec<Envelope>, u64)> {
        self.read(|conn| {
            counted(
                conn,
                "SELECT count(*) FROM deliveries \
                 WHERE participant = ? AND status IN ('pending', 'delivered')",
                "SELECT message_id FROM deliveries \
                 WHERE participant = ? AND status IN ('pending', 'delivered') \
                 ORDER BY request DESC, seq LIMIT ?",
                who,
                limit,
            )
        })
        .await
    }

    async fn outbox(&self, who: &Passname, all: bool, window: &Window) -> Result<Vec<Envelope>> {
        let sql = if all {
            "SELECT id FROM messages WHERE from_name = ?1 AND type = 'request' AND seq > ?2 \
             ORDER BY seq LIMIT ?3"
        } else {
            "SELECT id FROM messages INDEXED BY messages_open_requests \
             WHERE from_name = ?1 AND type = 'request' AND request_status != 'archived' \
             AND seq > ?2 ORDER BY seq LIMIT ?3"
        };
        self.read(|conn| windowed(conn, sql, who, window)).await
    }

    async fn waiting(&self, who: &Passname, limit: u32) -> Result<(Vec<Envelope>, u64)> {
        self.read(|conn| {
            counted(
                conn,
                "SELECT count(*) FROM messages INDEXED BY messages_open_requests \
                 WHERE from_name = ? AND type = 'request' AND request_status != 'archived'",
                "SELECT id FROM messages INDEXED BY messages_open_requests \
                 WHERE from_name = ? AND type = 'request' AND request_status != 'archived' \
                 ORDER BY seq LIMIT ?",
                who,
                limit,
            )
        })
        .await
    }

    async fn thread(&self, id: &str) -> Result<Vec<Envelope>> {
        let found = self
            .read(|conn| {
                let Some(root) =
                    scalar::<String>(conn, "SELECT root_id FROM messages WHERE id = ?", [id])?
                else {
                    return Ok(None);
                };
                // The root, then its replies (the index of threads holds only replies).
                let mut ids = vec![root.clone()];
                ids.extend(column::<String>(conn, THREAD_REPLIES, [&root])?);
                let flat = load_envelopes(conn, &ids)?;
                Ok(Some((root, flat)))
            })
            .await?;
        let (root, flat) = found
            .ok_or_else(|| StoreError::from(Refusal::not_found(baton_core::Record::Message, id)))?;
        Ok(depth_first(flat, &root))
    }

    async fn search(&self, caller: Option<&Passname>, q: &SearchQuery) -> Result<Page> {
        let limit = q.limit.clamp(1, 100);
        let text = q.text.as_deref().filter(|t| !t.is_empty());
        let words = text
            .map(baton_core::search::query_words)
            .unwrap_or_default();
        let cursor = q.cursor.as_deref().map(decode_cursor).transpose()?;
        // Where the matches come from, newest first. With words to look for: the pending
        // rows (at most `PENDING_TEXT_FLUSH`, every one newer than anything indexed),
        // compared directly, then the index, walked newest first with each match joined to
        // its message, for what the pending rows did not fill: a page reads a page of
        // matches, and no match reads none.
        let sources: &[Source] = if words.is_empty() {
            &[Source::Messages]
        } else {
            &[Source::Pending, Source::Index]
        };
        let statements: Vec<Builder> = sources
            .iter()
            .map(|source| search_sql(*source, caller, q, text, &words, cursor))
            .collect::<Result<_>>()?;
        self.read(|conn| {
            let mut found: Vec<(i64, String)> = Vec::new();
            for sql in &statements {
                let want = i64::from(limit) + 1 - found.len() as i64;
                if want <= 0 {
                    break;
                }
                let mut stmt = conn.prepare_cached(&sql.sql)?;
                let want = rusqlite::types::Value::Integer(want);
                let params = sql.params.iter().chain(std::iter::once(&want));
                found.extend(
                    stmt.query_map(rusqlite::params_from_iter(params), |r| {
                        Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()?,
                );
            }
            let (ids, next) = decode::page_ids(&found, limit);
            let items = load_envelopes(conn, &ids)?;
            Ok(Page { items, next })
        })
        .await
    }

    async fn events_of_kind(
        &self,
        kind: &str,
        before_seq: Option<i64>,
        limit: u32,
    ) -> Result<Vec<Event>> {
        // The kind index holds only the kinds read back by kind (migration 13); its
        // condition is named in the statement so that the planner may use it. Another
        // kind is found by reading the log.
        let sql = if KINDS_INDEXED.contains(&kind) {
            OF_KIND_INDEXED
        } else {
            OF_KIND
        };
        self.read(|conn| {
            let found = rows(
                conn,
                sql,
                params![kind, before_seq.unwrap_or(i64::MAX), limit],
            )?;
            Ok(decode::events(&found)?)
        })
        .await
    }

    async fn events(&self, after_seq: i64, limit: u32) -> Result<Vec<Event>> {
        self.read(|conn| read_events(conn, after_seq, limit)).await
    }

    async fn state(&self) -> Result<ProjectState> {
        self.read(read_state).await
    }

    async fn state_digest(&self) -> Result<StateDigest> {
        self.read(read_digest).await
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
        self.read(|conn| column(conn, LAST_CHANGES, [&list])).await
    }

    async fn payloads(&self, ids: &[String]) -> Result<Vec<Option<Map<String, Value>>>> {
        let list = serde_json::to_string(ids).expect("strings serialize");
        let found = self
            .read(|conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT m.id, e.data FROM messages m JOIN events e ON e.seq = m.seq \
                     WHERE m.id IN (SELECT value FROM json_each(?))",
                )?;
                let found = stmt
                    .query_map([&list], |r| {
                        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                    })?
                    .collect::<rusqlite::Result<std::collections::HashMap<_, _>>>()?;
                Ok(found)
            })
            .await?;
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
        self.read(|conn| {
            Ok(scalar(conn, "SELECT coalesce(max(seq), 0) FROM events", [])?.unwrap_or(0))
        })
        .await
    }

    async fn message(&self, id: &str) -> Result<Option<(Envelope, Map<String, Value>)>> {
        let found = self
            .read(|conn| {
                let Some(envelope) = envelope(conn, id)? else {
                    return Ok(None);
                };
                let data: Option<String> = scalar(
                    conn,
                    "SELECT e.data FROM events e JOIN messages m ON m.seq = e.seq WHERE m.id = ?",
                    [id],
                )?;
                Ok(data.map(|data| (envelope, data)))
            })
            .await?;
        match found {
            Some((envelope, data)) => Ok(Some((envelope, decode::payload(id, &data)?))),
            None => Ok(None),
        }
    }

    async fn ids(&self, record: Record, spans: &[Span]) -> Result<Vec<String>> {
        let Some(table) = decode::id_table(record) else {
            return Ok(Vec::new());
        };
        let sql = format!(
            "SELECT id FROM {table} WHERE id >= ? AND id < ? ORDER BY id LIMIT {}",
            decode::IDS_A_SPAN
        );
        self.read(|conn| {
            let mut found = Vec::new();
            for span in spans {
                found.extend(column::<String>(conn, &sql, [&span.from, &span.to])?);
            }
            Ok(found)
        })
        .await
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
        self.bookkeep(|conn| {
            exec(
                conn,
                "INSERT INTO refusal_repeats (seq, count, last_at) VALUES (?, 1, ?) \
                 ON CONFLICT (seq) DO UPDATE \
                 SET count = count + 1, last_at = max(last_at, excluded.last_at)",
                params![seq, at],
            )?;
            Ok(())
        })
        .await
    }

    async fn repeats(&self, seqs: &[i64]) -> Result<Vec<Repeats>> {
        self.read(|conn| {
            let mut found = Vec::new();
            for &seq in seqs {
                let counted = row(
                    conn,
                    "SELECT count, last_at FROM refusal_repeats WHERE seq = ?",
                    params![seq],
                )?;
                if let Some(r) = counted {
                    use crate::rows::Columns;
                    found.push(Repeats {
                        seq,
                        count: r.int("count")?,
                        last_at: r.int("last_at")?,
                    });
                }
            }
            Ok(found)
        })
        .await
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
        self.read(|conn| read_negotiation(conn, id)).await
    }

    async fn events_about(&self, subject: &str, kind: &str) -> Result<Vec<Event>> {
        self.read(|conn| read_about(conn, subject, kind)).await
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
        self.on(|conn| fetch_participant(conn, name))
    }

    async fn envelope(&mut self, id: &str) -> Result<Option<Envelope>> {
        self.on(|conn| envelope(conn, id))
    }

    async fn keyed(&mut self, from: &Passname, key: &str) -> Result<Option<Prior>> {
        self.on(|conn| {
            let found = rows(
                conn,
                "SELECT id, hash, type, topic, reply_to, idempotency_key FROM messages \
                 WHERE from_name = ? AND idempotency_key = ?",
                [from.as_str(), key],
            )?;
            Ok(priors(conn, &found)?.pop())
        })
    }

    async fn recent(
        &mut self,
        from: &Passname,
        draft: &Draft,
        since: Millis,
    ) -> Result<Vec<Prior>> {
        self.on(|conn| {
            let found = rows(
                conn,
                RECENT,
                params![
                    from.as_str(),
                    draft.payload.hash(),
                    draft.kind.as_str(),
                    draft.topic.as_str(),
                    draft.reply_to,
                    since
                ],
            )?;
            priors(conn, &found)
        })
    }

    async fn order(&mut self, id: &str) -> Result<Option<Order>> {
        self.on(|conn| orders::load(conn, id))
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
        self.on(|conn| Ok(scalar::<i64>(conn, HAS_EVENT, [id])?.is_some()))
    }

    async fn has_event_beyond(&mut self, kinds: &[&str]) -> Result<bool> {
        let sql = format!(
            "SELECT 1 FROM events WHERE kind NOT IN ({}) LIMIT 1",
            vec!["?"; kinds.len()].join(", ")
        );
        self.on(|conn| Ok(scalar::<i64>(conn, &sql, rusqlite::params_from_iter(kinds))?.is_some()))
    }

    async fn event(&mut self, id: &str) -> Result<Option<Event>> {
        self.on(|conn| {
            Ok(decode::events(&rows(conn, EVENT, [id])?)?
                .into_iter()
                .next())
        })
    }

    async fn count_beyond_from(&mut self, seq: i64, kinds: &[&str]) -> Result<usize> {
        let sql = format!(
            "SELECT count(*) FROM events WHERE seq >= ? AND kind NOT IN ({})",
            vec!["?"; kinds.len()].join(", ")
        );
        let params: Vec<rusqlite::types::Value> = std::iter::once(seq.into())
            .chain(kinds.iter().map(|k| (*k).to_owned().into()))
            .collect();
        self.on(|conn| {
            let n = scalar::<i64>(conn, &sql, rusqlite::params_from_iter(params))?;
            Ok(usize::try_from(n.unwrap_or(0)).unwrap_or(0))
        })
    }

    async fn other_live_run(&mut self, participant: &str, except: &str) -> Result<bool> {
        self.on(|conn| runs::other_live(conn, participant, except))
    }

    async fn held(&mut self, participant: &str, since: Millis) -> Result<Vec<String>> {
        self.on(|conn| {
            column(
                conn,
                "SELECT message_id FROM deliveries WHERE participant = ? AND status = ? \
                 AND updated_at >= ? ORDER BY updated_at, message_id",
                params![participant, DeliveryStatus::Delivered.as_str(), since],
            )
        })
    }

    async fn state(&mut self) -> Result<ProjectState> {
        self.on(read_state)
    }

    async fn negotiation(&mut self, id: &str) -> Result<Option<Negotiation>> {
        self.on(|conn| read_negotiation(conn, id))
    }

    async fn events_about(&mut self, subject: &str, kind: &str) -> Result<Vec<Event>> {
        self.on(|conn| read_about(conn, subject, kind))
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
