//! The embedded store: one SQLite file in WAL mode.
//!
//! Writers take `BEGIN IMMEDIATE` so a write never upgrades a read lock mid-transaction
//! (which SQLite refuses without waiting); waiting for the lock is bounded by the busy
//! timeout, past which the caller gets [`StoreError::Busy`]. Commits are fsync'd
//! (`synchronous = FULL`), so an acknowledged write survives a crash. Readers use plain
//! snapshots and never block writers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use baton_core::key::Key;
use baton_core::message::Prior;
use baton_core::negotiation::Negotiation;
use baton_core::order::Order;
use baton_core::run::Run;
use baton_core::state::ProjectState;
use baton_core::{
    Change, DeliveryStatus, Draft, Envelope, Event, MessageType, Millis, Participant, Passname,
    ProjectName, Refusal, RequestStatus,
};
use serde_json::{Map, Value};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteRow, SqliteSynchronous,
};
use sqlx::{QueryBuilder, Row, Sqlite, Transaction};

mod group;
mod keys;
mod orders;
mod runs;
mod spool;
mod webhooks;

use crate::rows::{self, decode_cursor, depth_first, encode_cursor};
use crate::{
    Backend, NewEvent, OrderQuery, Page, Result, RunQuery, SearchQuery, Settled, StoreError, Tx,
};
use baton_core::webhook::Webhook;

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
];
/// How many migrations ran before the one that added `message_text` and `state`: a store
/// older than that has them filled from its log when it is brought up to date.
const BEFORE_TEXT_AND_STATE: i64 = 7;

#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    path: PathBuf,
    busy_timeout: Duration,
    /// With group commit, the writers' shared transaction ([`group`]).
    group: Option<Arc<group::Group>>,
    /// Where hooks' events wait for the next writer ([`spool`]).
    spool: spool::Spool,
    /// Whether this store's hook events go to the spool (a hook's own process).
    spools: bool,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .field("grouped", &self.group.is_some())
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
        // What hooks spooled is in the log before this process reads anything.
        if store.spool.pending() {
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
        let mut store = Self::connect(path, busy_timeout, false).await?;
        store.spools = true;
        Ok(store)
    }

    async fn connect(path: &Path, busy_timeout: Duration, create: bool) -> Result<Self> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(create)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(busy_timeout)
            .foreign_keys(true);
        // One connection: a command's reads and writes run one after another, and a pool
        // of more would open a second connection (a thread, the file, the schema) while
        // the first is still on its way back. A grouped store takes more ([`Self::grouped`]).
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(busy_timeout)
            .connect_with(options)
            .await
            .map_err(|e| match classify(&e, busy_timeout) {
                known @ (StoreError::Busy { .. } | StoreError::Corrupt { .. }) => known,
                _ => StoreError::Unavailable {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                },
            })?;
        let store = Self {
            pool,
            path: path.to_owned(),
            busy_timeout,
            group: None,
            spool: spool::Spool::beside(path),
            spools: false,
        };
        let version = store.user_version(None).await?;
        if !create && version == 0 {
            return Err(StoreError::NotAStore {
                path: path.display().to_string(),
                reason: "a SQLite database that Baton never set up".to_owned(),
            });
        }
        store.migrate(version).await?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// With group commit, how many transactions the group has committed (one fsync
    /// each); `None` without it.
    pub async fn commits(&self) -> Option<u64> {
        match &self.group {
            Some(group) => Some(group.commits().await),
            None => None,
        }
    }

    /// This store with group commit: concurrent writers in this process share one
    /// transaction and one fsync, each acknowledged only after it (see [`group`]). For a
    /// server, where many clients write at once; a one-shot command gains nothing.
    pub fn grouped(mut self) -> Self {
        // The group holds the writer connection; readers need their own beside it.
        let options = (*self.pool.connect_options()).clone();
        self.pool = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(self.busy_timeout)
            .connect_lazy_with(options);
        self.group = Some(Arc::new(group::Group::new(
            self.pool.clone(),
            self.busy_timeout,
        )));
        self
    }

    /// Brings the schema up to date from version `seen` (read on opening). Safe when
    /// several processes open a new store at once: the check is repeated under the write
    /// lock.
    async fn migrate(&self, seen: i64) -> Result<()> {
        let latest = MIGRATIONS.len() as i64;
        if seen == latest {
            return Ok(());
        }
        let mut tx = self.write().await?;
        let current = self.user_version(Some(&mut tx)).await?;
        if current > latest {
            return Err(StoreError::TooNew {
                path: self.path.display().to_string(),
                found: current,
                known: latest,
            });
        }
        for script in &MIGRATIONS[current as usize..] {
            sqlx::raw_sql(*script)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.err(e))?;
        }
        if (1..=BEFORE_TEXT_AND_STATE).contains(&current) {
            fill_text_and_state(&mut tx)
                .await
                .map_err(|e| self.err(e))?;
        }
        // PRAGMA takes no bound parameters; `latest` is a count we computed.
        let pragma = format!("PRAGMA user_version = {latest}");
        sqlx::raw_sql(sqlx::AssertSqlSafe(pragma))
            .execute(&mut *tx)
            .await
            .map_err(|e| self.err(e))?;
        tx.commit().await.map_err(|e| self.err(e))
    }

    async fn user_version(&self, tx: Option<&mut SqliteConnection>) -> Result<i64> {
        let query = sqlx::query_scalar::<_, i64>("PRAGMA user_version");
        let version = match tx {
            Some(conn) => query.fetch_one(conn).await,
            None => query.fetch_one(&self.pool).await,
        };
        version.map_err(|e| self.err(e))
    }

    /// Starts a write transaction, waiting at most the busy timeout for the lock.
    async fn write(&self) -> Result<Transaction<'static, Sqlite>> {
        self.pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(|e| self.err(e))
    }

    fn err(&self, e: sqlx::Error) -> StoreError {
        classify(&e, self.busy_timeout)
    }

    /// Result of `PRAGMA integrity_check`: `ok` when the file is sound.
    pub async fn integrity_check(&self) -> Result<String> {
        sqlx::query_scalar("PRAGMA integrity_check")
            .fetch_one(&self.pool)
            .await
            .map_err(|e| self.err(e))
    }

    /// Drops every projection and rebuilds it by replaying the log, in one transaction.
    /// The result must equal what the live writes produced: the projections hold nothing
    /// the log does not.
    pub async fn rebuild_projections(&self) -> Result<()> {
        let mut tx = self.write().await?;
        sqlx::query("INSERT INTO message_text (message_text) VALUES ('delete-all')")
            .execute(&mut *tx)
            .await
            .map_err(|e| self.err(e))?;
        for table in [
            "state",
            "deliveries",
            "messages",
            "participants",
            "runs",
            "orders",
            "keys",
            "webhooks",
        ] {
            let sql = format!("DELETE FROM {table}");
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&mut *tx)
                .await
                .map_err(|e| self.err(e))?;
        }
        let mut after = 0;
        loop {
            let batch = read_events(&mut tx, after, 1000)
                .await
                .map_err(|e| self.err(e))?;
            let Some(last) = batch.last() else { break };
            after = last.seq;
            for event in &batch {
                project(&mut tx, event).await.map_err(|e| self.err(e))?;
            }
        }
        tx.commit().await.map_err(|e| self.err(e))
    }

    /// Every projection row as text, in a stable order, for comparing two stores.
    pub async fn projection_dump(&self) -> Result<Vec<String>> {
        let queries = [
            "SELECT 'p|' || name || '|' || role || '|' || added_at || '|' || coalesce(policy, '') \
             FROM participants ORDER BY name",
            "SELECT 'm|' || id || '|' || seq || '|' || from_name || '|' || type || '|' || topic \
             || '|' || coalesce(reply_to, '') || '|' || root_id || '|' || depth || '|' || excerpt \
             || '|' || size || '|' || hash || '|' || coalesce(idempotency_key, '') || '|' \
             || created_at || '|' || coalesce(request_status, '') FROM messages ORDER BY id",
            "SELECT 'd|' || message_id || '|' || participant || '|' || status || '|' || updated_at \
             FROM deliveries ORDER BY message_id, participant",
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
            "SELECT 't|' || doc || '|' || \"offset\" || '|' || term \
             FROM message_words ORDER BY doc, \"offset\"",
            "SELECT 's|' || data FROM state",
        ];
        let mut rows = Vec::new();
        for q in queries {
            let part: Vec<String> = sqlx::query_scalar(q)
                .fetch_all(&self.pool)
                .await
                .map_err(|e| self.err(e))?;
            rows.extend(part);
        }
        Ok(rows)
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
    async fn project(&self, name: &ProjectName) -> Result<std::sync::Arc<dyn crate::Store>> {
        let file = self.file(name);
        if !file.exists() {
            return Err(Refusal::not_found(baton_core::Record::Project, name.as_str()).into());
        }
        // A server's project: many clients write at once, so writers share commits.
        Ok(std::sync::Arc::new(
            SqliteStore::open(&file, self.busy_timeout).await?.grouped(),
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

/// Maps an engine error to what the user can act on: lock contention is `Busy` (retryable),
/// never a raw "database is locked".
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

fn classify(e: &sqlx::Error, busy_timeout: Duration) -> StoreError {
    let busy = StoreError::Busy {
        timeout_ms: busy_timeout.as_millis() as u64,
    };
    match e {
        sqlx::Error::PoolTimedOut => busy,
        sqlx::Error::Database(db) => {
            // SQLite primary codes 5 (BUSY) and 6 (LOCKED), with any extended code.
            let code = db.code().and_then(|c| c.parse::<i32>().ok()).unwrap_or(0);
            if matches!(code & 0xff, 5 | 6) {
                busy
            } else if code & 0xff == 11 {
                StoreError::Corrupt {
                    what: "SQLite reports a malformed page",
                }
            } else if code & 0xff == 26 {
                StoreError::Corrupt {
                    what: "SQLite does not recognise the file as a database",
                }
            } else {
                StoreError::Engine(db.message().to_owned())
            }
        }
        other => StoreError::Engine(other.to_string()),
    }
}

/// Appends `event` to the log and applies it to the projections, inside the caller's
/// transaction: what [`Tx::append`] does.
async fn append(conn: &mut SqliteConnection, new: NewEvent) -> sqlx::Result<Event> {
    let seq: i64 = sqlx::query_scalar(
        "INSERT INTO events (id, at, actor, kind, subject, data) VALUES (?, ?, ?, ?, ?, ?) \
         RETURNING seq",
    )
    .bind(&new.id)
    .bind(new.at)
    .bind(&new.actor)
    .bind(new.change.kind())
    .bind(new.change.subject())
    .bind(new.change.data().to_string())
    .fetch_one(&mut *conn)
    .await?;
    let event = Event {
        seq,
        id: new.id,
        at: new.at,
        actor: new.actor,
        change: new.change,
    };
    project(conn, &event).await?;
    Ok(event)
}

/// Applies one event to the projections. Used for live writes and for replay alike.
async fn project(conn: &mut SqliteConnection, event: &Event) -> sqlx::Result<()> {
    match &event.change {
        Change::ParticipantAdded { name, role } => {
            sqlx::query(
                "INSERT INTO participants (name, role, added_at) VALUES (?, ?, ?) \
                 ON CONFLICT (name) DO UPDATE SET role = excluded.role",
            )
            .bind(name.as_str())
            .bind(role)
            .bind(event.at)
            .execute(&mut *conn)
            .await?;
        }
        Change::MessageSent(m) => {
            let (root, depth) = match &m.reply_to {
                Some(parent) => {
                    let row: Option<(String, i64)> =
                        sqlx::query_as("SELECT root_id, depth FROM messages WHERE id = ?")
                            .bind(parent)
                            .fetch_optional(&mut *conn)
                            .await?;
                    row.map(|(root, depth)| (root, depth + 1))
                        .unwrap_or_else(|| (m.id.clone(), 0))
                }
                None => (m.id.clone(), 0),
            };
            let request_status =
                (m.kind == MessageType::Request).then_some(RequestStatus::Open.as_str());
            sqlx::query(
                "INSERT INTO messages (id, seq, from_name, type, topic, reply_to, root_id, depth, \
                 excerpt, size, hash, idempotency_key, created_at, request_status) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(&m.id)
            .bind(event.seq)
            .bind(m.from.as_str())
            .bind(m.kind.as_str())
            .bind(m.topic.as_str())
            .bind(&m.reply_to)
            .bind(root)
            .bind(depth)
            .bind(&m.excerpt)
            .bind(m.size as i64)
            .bind(&m.hash)
            .bind(&m.idempotency_key)
            .bind(event.at)
            .bind(request_status)
            .execute(&mut *conn)
            .await?;
            index_words(conn, event.seq, m).await?;
            for to in &m.to {
                sqlx::query(
                    "INSERT INTO deliveries (message_id, participant, status, updated_at) \
                     VALUES (?, ?, ?, ?)",
                )
                .bind(&m.id)
                .bind(to.as_str())
                .bind(DeliveryStatus::Pending.as_str())
                .bind(event.at)
                .execute(&mut *conn)
                .await?;
            }
        }
        Change::DeliveryChanged {
            message,
            participant,
            status,
            ..
        } => {
            sqlx::query(
                "UPDATE deliveries SET status = ?, updated_at = ? \
                 WHERE message_id = ? AND participant = ?",
            )
            .bind(status.as_str())
            .bind(event.at)
            .bind(message)
            .bind(participant.as_str())
            .execute(&mut *conn)
            .await?;
        }
        Change::RequestChanged { message, status } => {
            sqlx::query("UPDATE messages SET request_status = ? WHERE id = ?")
                .bind(status.as_str())
                .bind(message)
                .execute(&mut *conn)
                .await?;
        }
        Change::State(_) => advance_state(conn, event).await?,
        Change::Run(change) => runs::project(conn, event, change).await?,
        Change::Order(change) => orders::project(conn, event, change).await?,
        Change::Key(change) => keys::project(conn, event, change).await?,
        Change::Webhook(change) => webhooks::project(conn, event, change).await?,
        Change::PolicySet { name, policy } => {
            sqlx::query("UPDATE participants SET policy = ? WHERE name = ?")
                .bind(rows::policy_text(policy.as_ref()))
                .bind(name.as_str())
                .execute(&mut *conn)
                .await?;
        }
        // The log is the record of a refusal; nothing projects it.
        Change::Denied(_) => {}
        // A negotiation is folded in memory from its events (`Negotiation::replay`).
        Change::Negotiation(_) | Change::Effect(_) => {}
        // Verdicts, needs and acknowledgements are read from the log (`events_of_kind`).
        Change::Gate(_) => {}
    }
    Ok(())
}

/// A projection row kept as the JSON of its fold (runs, orders): `query` selects its `data`
/// column by id.
async fn load_folded<T: serde::de::DeserializeOwned>(
    conn: &mut SqliteConnection,
    query: &'static str,
    id: &str,
) -> sqlx::Result<Option<T>> {
    let data: Option<String> = sqlx::query_scalar(query)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    data.as_deref().map(rows::folded).transpose()
}

async fn read_events(
    conn: &mut SqliteConnection,
    after: i64,
    limit: u32,
) -> sqlx::Result<Vec<Event>> {
    let found = sqlx::query(
        "SELECT seq, id, at, actor, kind, data FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
    )
    .bind(after)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    rows::events(&found)
}

/// The project state: the fold of every `state.changed` event, as its projection keeps it.
async fn read_state(conn: &mut SqliteConnection) -> sqlx::Result<ProjectState> {
    let data: Option<String> = sqlx::query_scalar("SELECT data FROM state WHERE id = 1")
        .fetch_optional(&mut *conn)
        .await?;
    Ok(match data {
        Some(data) => rows::folded(&data)?,
        None => ProjectState::default(),
    })
}

/// Folds one state event into the state's projection.
async fn advance_state(conn: &mut SqliteConnection, event: &Event) -> sqlx::Result<()> {
    let mut state = read_state(conn).await?;
    state.apply(event);
    let data = serde_json::to_string(&state).expect("the state always serializes");
    sqlx::query(
        "INSERT INTO state (id, data) VALUES (1, ?) \
         ON CONFLICT (id) DO UPDATE SET data = excluded.data",
    )
    .bind(data)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Indexes a message's words for free-text search, under its event's seq.
async fn index_words(
    conn: &mut SqliteConnection,
    seq: i64,
    m: &baton_core::event::SentMessage,
) -> sqlx::Result<()> {
    sqlx::query("INSERT INTO message_text (rowid, words) VALUES (?, ?)")
        .bind(seq)
        .bind(baton_core::search::words(&m.payload))
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Fills `message_text` and `state` from the log of a store made before they existed.
async fn fill_text_and_state(conn: &mut SqliteConnection) -> sqlx::Result<()> {
    let mut after = 0;
    loop {
        let found = sqlx::query(
            "SELECT seq, id, at, actor, kind, data FROM events \
             WHERE seq > ? AND kind IN ('message.sent', 'state.changed') ORDER BY seq LIMIT 1000",
        )
        .bind(after)
        .fetch_all(&mut *conn)
        .await?;
        let batch = rows::events(&found)?;
        let Some(last) = batch.last() else {
            return Ok(());
        };
        after = last.seq;
        for event in &batch {
            match &event.change {
                Change::MessageSent(m) => index_words(conn, event.seq, m).await?,
                Change::State(_) => advance_state(conn, event).await?,
                _ => {}
            }
        }
    }
}

/// Negotiation `id`: the fold of its events, found by the subject index.
async fn read_negotiation(
    conn: &mut SqliteConnection,
    id: &str,
) -> sqlx::Result<Option<Negotiation>> {
    Ok(Negotiation::replay(
        &read_about(conn, id, "negotiation.changed").await?,
    ))
}

/// The events of `kind` about `subject`, oldest first, found by the subject index.
async fn read_about(
    conn: &mut SqliteConnection,
    subject: &str,
    kind: &str,
) -> sqlx::Result<Vec<Event>> {
    let found = sqlx::query(
        "SELECT seq, id, at, actor, kind, data FROM events \
         WHERE subject = ? AND kind = ? ORDER BY seq",
    )
    .bind(subject)
    .bind(kind)
    .fetch_all(&mut *conn)
    .await?;
    rows::events(&found)
}

/// Loads the envelopes of `ids`, in the order given; unknown ids are skipped.
async fn load_envelopes(
    conn: &mut SqliteConnection,
    ids: &[String],
) -> sqlx::Result<Vec<Envelope>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let list = serde_json::to_string(ids).expect("strings serialize");
    let messages = sqlx::query(
        "SELECT m.id, m.from_name, m.type, m.topic, m.reply_to, m.depth, m.excerpt, m.size, \
                m.hash, m.created_at, m.request_status, \
                (SELECT count(*) FROM messages r WHERE r.reply_to = m.id) AS replies \
         FROM messages m WHERE m.id IN (SELECT value FROM json_each(?))",
    )
    .bind(&list)
    .fetch_all(&mut *conn)
    .await?;
    let recipients = sqlx::query(
        "SELECT message_id, participant, status FROM deliveries \
         WHERE message_id IN (SELECT value FROM json_each(?)) ORDER BY rowid",
    )
    .bind(&list)
    .fetch_all(&mut *conn)
    .await?;
    rows::envelopes(ids, &messages, &recipients)
}

#[async_trait]
impl Backend for SqliteStore {
    async fn begin(&self) -> Result<Box<dyn Tx>> {
        let handle = match &self.group {
            Some(group) => Handle::Member(group.begin().await?),
            None => Handle::Own(self.write().await?),
        };
        let mut tx = SqliteTx {
            handle,
            busy_timeout: self.busy_timeout,
            folded: None,
        };
        // Every writer folds what hooks spooled, in its own transaction.
        if self.group.is_none() && self.spool.pending() {
            let unavailable = |e: std::io::Error| StoreError::Unavailable {
                path: self.path.display().to_string(),
                reason: format!("the hook spool: {e}"),
            };
            for event in self.spool.claim().map_err(unavailable)? {
                if !tx.has_event(&event.id).await? {
                    tx.append(event).await?;
                }
            }
            tx.folded = Some(self.spool.clone());
        }
        Ok(Box::new(tx))
    }

    async fn spool(&self, event: &NewEvent) -> Result<bool> {
        if !self.spools || self.group.is_some() {
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
        let found =
            sqlx::query("SELECT name, role, added_at, policy FROM participants ORDER BY name")
                .fetch_all(&self.pool)
                .await
                .map_err(|e| self.err(e))?;
        found
            .iter()
            .map(rows::participant)
            .collect::<sqlx::Result<_>>()
            .map_err(|e| self.err(e))
    }

    async fn participant(&self, name: &str) -> Result<Option<Participant>> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.err(e))?;
        fetch_participant(&mut conn, name)
            .await
            .map_err(|e| self.err(e))
    }

    async fn inbox(&self, who: &Passname, all: bool) -> Result<Vec<Envelope>> {
        let sql = if all {
            "SELECT m.id FROM deliveries d JOIN messages m ON m.id = d.message_id \
             WHERE d.participant = ? AND d.status != 'archived' ORDER BY m.seq"
        } else {
            "SELECT m.id FROM deliveries d JOIN messages m ON m.id = d.message_id \
             WHERE d.participant = ? AND d.status IN ('pending', 'delivered') ORDER BY m.seq"
        };
        self.list(sqlx::query_scalar(sql).bind(who.as_str())).await
    }

    async fn owed(&self, who: &Passname, limit: u32) -> Result<(Vec<Envelope>, u64)> {
        let total: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM deliveries \
             WHERE participant = ? AND status IN ('pending', 'delivered')",
        )
        .bind(who.as_str())
        .fetch_one(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        let first = self
            .list(
                sqlx::query_scalar(
                    "SELECT m.id FROM deliveries d JOIN messages m ON m.id = d.message_id \
                     WHERE d.participant = ? AND d.status IN ('pending', 'delivered') \
                     ORDER BY m.type != 'request', m.seq LIMIT ?",
                )
                .bind(who.as_str())
                .bind(limit),
            )
            .await?;
        Ok((first, total as u64))
    }

    async fn outbox(&self, who: &Passname, all: bool) -> Result<Vec<Envelope>> {
        let sql = if all {
            "SELECT id FROM messages WHERE from_name = ? AND type = 'request' ORDER BY seq"
        } else {
            "SELECT id FROM messages WHERE from_name = ? AND type = 'request' \
             AND request_status != 'archived' ORDER BY seq"
        };
        self.list(sqlx::query_scalar(sql).bind(who.as_str())).await
    }

    async fn thread(&self, id: &str) -> Result<Vec<Envelope>> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.err(e))?;
        let root: Option<String> = sqlx::query_scalar("SELECT root_id FROM messages WHERE id = ?")
            .bind(id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(|e| self.err(e))?;
        let root = root
            .ok_or_else(|| StoreError::from(Refusal::not_found(baton_core::Record::Message, id)))?;
        let ids: Vec<String> =
            sqlx::query_scalar("SELECT id FROM messages WHERE root_id = ? ORDER BY seq")
                .bind(&root)
                .fetch_all(&mut *conn)
                .await
                .map_err(|e| self.err(e))?;
        let flat = load_envelopes(&mut conn, &ids)
            .await
            .map_err(|e| self.err(e))?;
        Ok(depth_first(flat, &root))
    }

    async fn search(&self, caller: Option<&Passname>, q: &SearchQuery) -> Result<Page> {
        let limit = q.limit.clamp(1, 100);
        let text = q.text.as_deref().filter(|t| !t.is_empty());
        let words = text
            .map(baton_core::search::query_words)
            .unwrap_or_default();
        // With words to look for, the index is walked newest first and each match joined
        // to its message: a page reads a page of matches, and no match reads none.
        let (mut sql, order) = if words.is_empty() {
            let sql = QueryBuilder::<Sqlite>::new("SELECT m.seq, m.id FROM messages m");
            (sql, "m.seq")
        } else {
            let sql = QueryBuilder::<Sqlite>::new(
                "SELECT m.seq, m.id FROM message_text f JOIN messages m ON m.seq = f.rowid",
            );
            (sql, "f.rowid")
        };
        if let Some(status) = q.status {
            let caller = caller.ok_or(Refusal::StatusNeedsIdentity)?;
            sql.push(" JOIN deliveries mine ON mine.message_id = m.id AND mine.participant = ")
                .push_bind(caller.as_str().to_owned())
                .push(" AND mine.status = ")
                .push_bind(status.as_str());
        }
        sql.push(" WHERE 1 = 1");
        if !words.is_empty() {
            // Each word must start a word of the payload: an FTS5 prefix query.
            let query: Vec<String> = words.iter().map(|w| format!("\"{w}\"*")).collect();
            sql.push(" AND f.message_text MATCH ")
                .push_bind(query.join(" "));
        }
        if let Some(topic) = &q.topic {
            sql.push(" AND m.topic = ").push_bind(topic.clone());
        }
        if let Some(kind) = q.kind {
            sql.push(" AND m.type = ").push_bind(kind.as_str());
        }
        if let Some(from) = &q.from {
            sql.push(" AND m.from_name = ").push_bind(from.clone());
        }
        if let Some(to) = &q.to {
            sql.push(" AND EXISTS (SELECT 1 FROM deliveries t WHERE t.message_id = m.id AND t.participant = ")
                .push_bind(to.clone())
                .push(")");
        }
        if let Some(since) = q.since {
            sql.push(" AND m.created_at >= ").push_bind(since);
        }
        if let Some(until) = q.until {
            sql.push(" AND m.created_at < ").push_bind(until);
        }
        if let Some(text) = text.filter(|_| words.is_empty()) {
            // Punctuation alone has no words to look up: the payloads' text is read.
            sql.push(" AND instr(lower((SELECT e.data FROM events e WHERE e.seq = m.seq)), lower(")
                .push_bind(text.to_owned())
                .push(")) > 0");
        }
        if let Some(cursor) = &q.cursor {
            sql.push(" AND ")
                .push(order)
                .push(" < ")
                .push_bind(decode_cursor(cursor)?);
        }
        sql.push(" ORDER BY ")
            .push(order)
            .push(" DESC LIMIT ")
            .push_bind(i64::from(limit) + 1);
        let mut conn = self.pool.acquire().await.map_err(|e| self.err(e))?;
        let rows: Vec<(i64, String)> = sql
            .build_query_as()
            .fetch_all(&mut *conn)
            .await
            .map_err(|e| self.err(e))?;
        let more = rows.len() > limit as usize;
        let rows = &rows[..rows.len().min(limit as usize)];
        let next = match (more, rows.last()) {
            (true, Some((seq, _))) => encode_cursor(*seq),
            _ => String::new(),
        };
        let ids: Vec<String> = rows.iter().map(|(_, id)| id.clone()).collect();
        let items = load_envelopes(&mut conn, &ids)
            .await
            .map_err(|e| self.err(e))?;
        Ok(Page { items, next })
    }

    async fn events_of_kind(
        &self,
        kind: &str,
        before_seq: Option<i64>,
        limit: u32,
    ) -> Result<Vec<Event>> {
        let found = sqlx::query(
            "SELECT seq, id, at, actor, kind, data FROM events \
             WHERE kind = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
        )
        .bind(kind)
        .bind(before_seq.unwrap_or(i64::MAX))
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        rows::events(&found).map_err(|e| self.err(e))
    }

    async fn events(&self, after_seq: i64, limit: u32) -> Result<Vec<Event>> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.err(e))?;
        read_events(&mut conn, after_seq, limit)
            .await
            .map_err(|e| self.err(e))
    }

    async fn state(&self) -> Result<ProjectState> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.err(e))?;
        read_state(&mut conn).await.map_err(|e| self.err(e))
    }

    async fn last_change(&self, subject: &str, after_seq: i64) -> Result<Option<Millis>> {
        sqlx::query_scalar("SELECT max(at) FROM events WHERE subject = ? AND seq > ?")
            .bind(subject)
            .bind(after_seq)
            .fetch_one(&self.pool)
            .await
            .map_err(|e| self.err(e))
    }

    async fn last_changes(&self, subjects: &[(String, i64)]) -> Result<Vec<Option<Millis>>> {
        let list = serde_json::to_string(subjects).expect("pairs serialize");
        let found: Vec<Option<Millis>> = sqlx::query_scalar(
            "SELECT (SELECT max(at) FROM events WHERE subject = j.value ->> 0 \
             AND seq > j.value ->> 1) FROM json_each(?) j ORDER BY j.key",
        )
        .bind(list)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        Ok(found)
    }

    async fn payloads(&self, ids: &[String]) -> Result<Vec<Option<Map<String, Value>>>> {
        let list = serde_json::to_string(ids).expect("strings serialize");
        let found: Vec<(String, String)> = sqlx::query_as(
            "SELECT m.id, e.data FROM messages m JOIN events e ON e.seq = m.seq \
             WHERE m.id IN (SELECT value FROM json_each(?))",
        )
        .bind(list)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        let by_id: std::collections::HashMap<String, String> = found.into_iter().collect();
        ids.iter()
            .map(|id| {
                by_id
                    .get(id)
                    .map(|data| rows::payload(id, data))
                    .transpose()
            })
            .collect()
    }

    async fn generation(&self) -> Result<i64> {
        sqlx::query_scalar("SELECT coalesce(max(seq), 0) FROM events")
            .fetch_one(&self.pool)
            .await
            .map_err(|e| self.err(e))
    }

    async fn message(&self, id: &str) -> Result<Option<(Envelope, Map<String, Value>)>> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.err(e))?;
        let Some(envelope) = envelope(&mut conn, id).await.map_err(|e| self.err(e))? else {
            return Ok(None);
        };
        let data: String = sqlx::query_scalar(
            "SELECT e.data FROM events e JOIN messages m ON m.seq = e.seq WHERE m.id = ?",
        )
        .bind(id)
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| self.err(e))?;
        Ok(Some((envelope, rows::payload(id, &data)?)))
    }

    async fn runs(&self, query: &RunQuery) -> Result<Vec<Run>> {
        runs::query(&self.pool, query)
            .await
            .map_err(|e| self.err(e))
    }

    async fn order(&self, id: &str) -> Result<Option<Order>> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.err(e))?;
        orders::load(&mut conn, id).await.map_err(|e| self.err(e))
    }

    async fn orders(&self, query: &OrderQuery) -> Result<Vec<Order>> {
        orders::query(&self.pool, query)
            .await
            .map_err(|e| self.err(e))
    }

    async fn order_events_since(&self, id: &str, after_seq: i64) -> Result<Vec<Event>> {
        orders::events_since(&self.pool, id, after_seq)
            .await
            .map_err(|e| self.err(e))
    }

    async fn key(&self, id: &str) -> Result<Option<Key>> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.err(e))?;
        keys::load(&mut conn, id).await.map_err(|e| self.err(e))
    }

    async fn keys(&self) -> Result<Vec<Key>> {
        keys::all(&self.pool).await.map_err(|e| self.err(e))
    }

    async fn webhook(&self, participant: &str) -> Result<Option<Webhook>> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.err(e))?;
        webhooks::load(&mut conn, participant)
            .await
            .map_err(|e| self.err(e))
    }

    async fn webhooks(&self) -> Result<Vec<Webhook>> {
        webhooks::all(&self.pool).await.map_err(|e| self.err(e))
    }

    async fn claim_webhook(&self, now: Millis, lease_until: Millis) -> Result<Option<Webhook>> {
        webhooks::claim(&self.pool, now, lease_until)
            .await
            .map_err(|e| self.err(e))
    }

    async fn settle_webhook(&self, hook: &Webhook, settled: Settled) -> Result<()> {
        webhooks::settle(&self.pool, hook, &settled)
            .await
            .map_err(|e| self.err(e))
    }

    async fn negotiation(&self, id: &str) -> Result<Option<Negotiation>> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.err(e))?;
        read_negotiation(&mut conn, id)
            .await
            .map_err(|e| self.err(e))
    }

    async fn events_about(&self, subject: &str, kind: &str) -> Result<Vec<Event>> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.err(e))?;
        read_about(&mut conn, subject, kind)
            .await
            .map_err(|e| self.err(e))
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
    Own(Transaction<'static, Sqlite>),
    Member(group::Member),
}

impl SqliteTx {
    fn err(&self, e: sqlx::Error) -> StoreError {
        classify(&e, self.busy_timeout)
    }

    fn conn(&mut self) -> &mut SqliteConnection {
        match &mut self.handle {
            Handle::Own(tx) => tx,
            Handle::Member(member) => member.conn(),
        }
    }
}

#[async_trait]
impl Tx for SqliteTx {
    async fn append(&mut self, event: NewEvent) -> Result<Event> {
        let result = append(self.conn(), event).await;
        result.map_err(|e| self.err(e))
    }

    async fn participant(&mut self, name: &str) -> Result<Option<Participant>> {
        let result = fetch_participant(self.conn(), name).await;
        result.map_err(|e| self.err(e))
    }

    async fn envelope(&mut self, id: &str) -> Result<Option<Envelope>> {
        let result = envelope(self.conn(), id).await;
        result.map_err(|e| self.err(e))
    }

    async fn keyed(&mut self, from: &Passname, key: &str) -> Result<Option<Prior>> {
        let rows = sqlx::query(
            "SELECT id, hash, type, topic, reply_to, idempotency_key FROM messages \
             WHERE from_name = ? AND idempotency_key = ?",
        )
        .bind(from.as_str())
        .bind(key)
        .fetch_all(self.conn())
        .await;
        let rows = rows.map_err(|e| self.err(e))?;
        let priors = priors(self.conn(), &rows).await;
        Ok(priors.map_err(|e| self.err(e))?.pop())
    }

    async fn recent(
        &mut self,
        from: &Passname,
        draft: &Draft,
        since: Millis,
    ) -> Result<Vec<Prior>> {
        let rows = sqlx::query(
            "SELECT id, hash, type, topic, reply_to, idempotency_key FROM messages \
             WHERE from_name = ? AND hash = ? AND type = ? AND topic = ? \
             AND reply_to IS ? AND created_at >= ? ORDER BY seq DESC LIMIT 20",
        )
        .bind(from.as_str())
        .bind(draft.payload.hash())
        .bind(draft.kind.as_str())
        .bind(draft.topic.as_str())
        .bind(&draft.reply_to)
        .bind(since)
        .fetch_all(self.conn())
        .await;
        let rows = rows.map_err(|e| self.err(e))?;
        let priors = priors(self.conn(), &rows).await;
        priors.map_err(|e| self.err(e))
    }

    async fn order(&mut self, id: &str) -> Result<Option<Order>> {
        let result = orders::load(self.conn(), id).await;
        result.map_err(|e| self.err(e))
    }

    async fn run(&mut self, id: &str) -> Result<Option<Run>> {
        let result = runs::load(self.conn(), id).await;
        result.map_err(|e| self.err(e))
    }

    async fn key(&mut self, id: &str) -> Result<Option<Key>> {
        let result = keys::load(self.conn(), id).await;
        result.map_err(|e| self.err(e))
    }

    async fn webhook(&mut self, participant: &str) -> Result<Option<Webhook>> {
        let result = webhooks::load(self.conn(), participant).await;
        result.map_err(|e| self.err(e))
    }

    async fn has_event(&mut self, id: &str) -> Result<bool> {
        let found: sqlx::Result<Option<i64>> =
            sqlx::query_scalar("SELECT 1 FROM events WHERE id = ?")
                .bind(id)
                .fetch_optional(self.conn())
                .await;
        Ok(found.map_err(|e| self.err(e))?.is_some())
    }

    async fn other_live_run(&mut self, participant: &str, except: &str) -> Result<bool> {
        let result = runs::other_live(self.conn(), participant, except).await;
        result.map_err(|e| self.err(e))
    }

    async fn held(&mut self, participant: &str, since: Millis) -> Result<Vec<String>> {
        let held = sqlx::query_scalar(
            "SELECT message_id FROM deliveries WHERE participant = ? AND status = ? \
             AND updated_at >= ? ORDER BY updated_at, message_id",
        )
        .bind(participant)
        .bind(DeliveryStatus::Delivered.as_str())
        .bind(since)
        .fetch_all(self.conn())
        .await;
        held.map_err(|e| self.err(e))
    }

    async fn state(&mut self) -> Result<ProjectState> {
        let result = read_state(self.conn()).await;
        result.map_err(|e| self.err(e))
    }

    async fn negotiation(&mut self, id: &str) -> Result<Option<Negotiation>> {
        let result = read_negotiation(self.conn(), id).await;
        result.map_err(|e| self.err(e))
    }

    async fn events_about(&mut self, subject: &str, kind: &str) -> Result<Vec<Event>> {
        let result = read_about(self.conn(), subject, kind).await;
        result.map_err(|e| self.err(e))
    }

    async fn commit(self: Box<Self>) -> Result<()> {
        let busy_timeout = self.busy_timeout;
        match self.handle {
            Handle::Own(tx) => tx.commit().await.map_err(|e| classify(&e, busy_timeout))?,
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

/// Earlier messages as the duplicate rule compares them, with their recipients.
async fn priors(conn: &mut SqliteConnection, rows: &[SqliteRow]) -> sqlx::Result<Vec<Prior>> {
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let id: String = row.try_get("id")?;
        let to: Vec<String> =
            sqlx::query_scalar("SELECT participant FROM deliveries WHERE message_id = ?")
                .bind(&id)
                .fetch_all(&mut *conn)
                .await?;
        out.push(rows::prior(row, to)?);
    }
    Ok(out)
}

/// One message's envelope.
async fn envelope(conn: &mut SqliteConnection, id: &str) -> sqlx::Result<Option<Envelope>> {
    Ok(load_envelopes(conn, &[id.to_owned()]).await?.pop())
}

impl SqliteStore {
    /// Runs a query that selects message ids and loads their envelopes, in that order.
    async fn list<'q>(
        &self,
        query: sqlx::query::QueryScalar<'q, Sqlite, String, sqlx::sqlite::SqliteArguments>,
    ) -> Result<Vec<Envelope>> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.err(e))?;
        let ids = query.fetch_all(&mut *conn).await.map_err(|e| self.err(e))?;
        load_envelopes(&mut conn, &ids)
            .await
            .map_err(|e| self.err(e))
    }
}

async fn fetch_participant(
    conn: &mut SqliteConnection,
    name: &str,
) -> sqlx::Result<Option<Participant>> {
    let row = sqlx::query("SELECT name, role, added_at, policy FROM participants WHERE name = ?")
        .bind(name)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(rows::participant).transpose()
}
