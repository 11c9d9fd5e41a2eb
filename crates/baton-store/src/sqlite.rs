//! The embedded store: one SQLite file in WAL mode.
//!
//! Writers take `BEGIN IMMEDIATE` so a write never upgrades a read lock mid-transaction
//! (which SQLite refuses without waiting); waiting for the lock is bounded by the busy
//! timeout, past which the caller gets [`StoreError::Busy`]. Commits are fsync'd
//! (`synchronous = FULL`), so an acknowledged write survives a crash. Readers use plain
//! snapshots and never block writers.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use baton_core::delivery::{request_transition, transition};
use baton_core::event::SentMessage;
use baton_core::message::DEFAULT_PAYLOAD_CAP;
use baton_core::order::{Order, OrderRequest};
use baton_core::run::{Run, RunChange};
use baton_core::state::{ProjectState, StateError, StateOp};
use baton_core::{
    Change, DeliveryAction, DeliveryStatus, Draft, Event, MessageType, Millis, Passname, Payload,
    RequestAction, RequestStatus, Topic,
};
use serde_json::Value;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteRow, SqliteSynchronous,
};
use sqlx::{QueryBuilder, Row, Sqlite, Transaction};
use ulid::Ulid;

mod orders;
mod runs;

use crate::{
    Added, Envelope, Fetched, OrderQuery, OrderWritten, Page, Participant, Reaped, Recipient,
    Result, RunQuery, SearchQuery, Sent, Stepped, Store, StoreError, Verb,
};

/// Schema migrations, applied in order; `PRAGMA user_version` records how many ran.
const MIGRATIONS: &[&str] = &[
    include_str!("sqlite/001_event_log.sql"),
    include_str!("sqlite/002_event_kind_index.sql"),
    include_str!("sqlite/003_runs.sql"),
    include_str!("sqlite/004_orders.sql"),
];

/// How long a writer waits for another writer before giving up with [`StoreError::Busy`].
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    path: PathBuf,
    busy_timeout: Duration,
}

impl SqliteStore {
    /// Creates the database file if it is missing, then opens it.
    pub async fn create(path: &Path, busy_timeout: Duration) -> Result<Self> {
        Self::connect(path, busy_timeout, true).await
    }

    /// Opens an existing database; a missing file is an error, never a new empty store.
    pub async fn open(path: &Path, busy_timeout: Duration) -> Result<Self> {
        if !path.exists() {
            return Err(StoreError::Unavailable {
                path: path.display().to_string(),
                reason: "the database file is missing; run `baton init` to create it".into(),
            });
        }
        Self::connect(path, busy_timeout, false).await
    }

    async fn connect(path: &Path, busy_timeout: Duration, create: bool) -> Result<Self> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(create)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(busy_timeout)
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(busy_timeout)
            .connect_with(options)
            .await
            .map_err(|e| match classify(&e, busy_timeout) {
                busy @ StoreError::Busy { .. } => busy,
                _ => StoreError::Unavailable {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                },
            })?;
        let store = Self {
            pool,
            path: path.to_owned(),
            busy_timeout,
        };
        store.migrate().await?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Brings the schema up to date. Safe when several processes open a new store at once:
    /// the check is repeated under the write lock.
    async fn migrate(&self) -> Result<()> {
        let latest = MIGRATIONS.len() as i64;
        if self.user_version(None).await? == latest {
            return Ok(());
        }
        let mut tx = self.write().await?;
        let current = self.user_version(Some(&mut tx)).await?;
        if current > latest {
            return Err(StoreError::Unavailable {
                path: self.path.display().to_string(),
                reason: format!(
                    "its schema version {current} is newer than this baton knows ({latest}); upgrade baton"
                ),
            });
        }
        for script in &MIGRATIONS[current as usize..] {
            sqlx::raw_sql(*script)
                .execute(&mut *tx)
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
        for table in ["deliveries", "messages", "participants", "runs", "orders"] {
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
            "SELECT 'p|' || name || '|' || role || '|' || added_at FROM participants ORDER BY name",
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

/// Maps an engine error to what the user can act on: lock contention is `Busy` (retryable),
/// never a raw "database is locked".
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
            } else {
                StoreError::Engine(db.message().to_owned())
            }
        }
        other => StoreError::Engine(other.to_string()),
    }
}

fn now() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as Millis)
        .unwrap_or(0)
}

/// The one function that writes events: appends `change` and applies it to the
/// projections, inside the caller's transaction.
async fn append(
    conn: &mut SqliteConnection,
    actor: &str,
    change: Change,
    at: Millis,
) -> sqlx::Result<Event> {
    let id = Ulid::generate().to_string();
    let seq: i64 = sqlx::query_scalar(
        "INSERT INTO events (id, at, actor, kind, subject, data) VALUES (?, ?, ?, ?, ?, ?) \
         RETURNING seq",
    )
    .bind(&id)
    .bind(at)
    .bind(actor)
    .bind(change.kind())
    .bind(change.subject())
    .bind(change.data().to_string())
    .fetch_one(&mut *conn)
    .await?;
    let event = Event {
        seq,
        id,
        at,
        actor: actor.to_owned(),
        change,
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
        // Project state is folded in memory from its events (`ProjectState::replay`).
        Change::State(_) => {}
        Change::Run(change) => runs::project(conn, event, change).await?,
        Change::Order(change) => orders::project(conn, event, change).await?,
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
    data.map(|d| serde_json::from_str(&d).map_err(|e| sqlx::Error::Decode(Box::new(e))))
        .transpose()
}

async fn read_events(
    conn: &mut SqliteConnection,
    after: i64,
    limit: u32,
) -> sqlx::Result<Vec<Event>> {
    let rows = sqlx::query(
        "SELECT seq, id, at, actor, kind, data FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
    )
    .bind(after)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    decode_events(&rows)
}

/// The project state: the fold of every `state.changed` event.
async fn read_state(conn: &mut SqliteConnection) -> sqlx::Result<ProjectState> {
    let rows = sqlx::query(
        "SELECT seq, id, at, actor, kind, data FROM events WHERE kind = 'state.changed' ORDER BY seq",
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(ProjectState::replay(&decode_events(&rows)?))
}

fn decode_events(rows: &[SqliteRow]) -> sqlx::Result<Vec<Event>> {
    rows.iter()
        .map(|row| {
            let kind: String = row.try_get("kind")?;
            let data: String = row.try_get("data")?;
            let change = serde_json::from_str(&data)
                .and_then(|data: Value| Change::from_parts(&kind, data))
                .map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
            Ok(Event {
                seq: row.try_get("seq")?,
                id: row.try_get("id")?,
                at: row.try_get("at")?,
                actor: row.try_get("actor")?,
                change,
            })
        })
        .collect()
}

fn participant_row(row: &SqliteRow) -> sqlx::Result<Participant> {
    let name: String = row.try_get("name")?;
    Ok(Participant {
        name: Passname::try_from(name).map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
        role: row.try_get("role")?,
        added_at: row.try_get("added_at")?,
    })
}

async fn require_participant(
    conn: &mut SqliteConnection,
    name: &str,
    busy: Duration,
) -> Result<()> {
    let found: Option<i64> = sqlx::query_scalar("SELECT 1 FROM participants WHERE name = ?")
        .bind(name)
        .fetch_optional(&mut *conn)
        .await
        .map_err(|e| classify(&e, busy))?;
    match found {
        Some(_) => Ok(()),
        None => Err(StoreError::UnknownParticipant(name.to_owned())),
    }
}

fn decode<T, E>(r: std::result::Result<T, E>) -> sqlx::Result<T>
where
    E: std::error::Error + Send + Sync + 'static,
{
    r.map_err(|e| sqlx::Error::Decode(Box::new(e)))
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
    let rows = sqlx::query(
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
    let mut to: HashMap<String, Vec<Recipient>> = HashMap::new();
    for row in &recipients {
        let status: String = row.try_get("status")?;
        let name: String = row.try_get("participant")?;
        to.entry(row.try_get("message_id")?)
            .or_default()
            .push(Recipient {
                name: decode(Passname::try_from(name))?,
                status: DeliveryStatus::parse(&status)
                    .ok_or_else(|| sqlx::Error::Decode(format!("status {status:?}").into()))?,
            });
    }
    let mut by_id = HashMap::new();
    for row in &rows {
        let id: String = row.try_get("id")?;
        let kind: String = row.try_get("type")?;
        let request_status: Option<String> = row.try_get("request_status")?;
        let envelope = Envelope {
            from: decode(Passname::try_from(row.try_get::<String, _>("from_name")?))?,
            to: to.remove(&id).unwrap_or_default(),
            kind: kind
                .parse()
                .map_err(|e: String| sqlx::Error::Decode(e.into()))?,
            topic: decode(Topic::try_from(row.try_get::<String, _>("topic")?))?,
            reply_to: row.try_get("reply_to")?,
            depth: row.try_get::<i64, _>("depth")? as u32,
            excerpt: row.try_get("excerpt")?,
            size: row.try_get::<i64, _>("size")? as u64,
            hash: row.try_get("hash")?,
            created_at: row.try_get("created_at")?,
            request_status: request_status.as_deref().and_then(RequestStatus::parse),
            replies: row.try_get::<i64, _>("replies")? as u32,
            id: id.clone(),
        };
        by_id.insert(id, envelope);
    }
    Ok(ids.iter().filter_map(|id| by_id.remove(id)).collect())
}

async fn envelope(conn: &mut SqliteConnection, id: &str, busy: Duration) -> Result<Envelope> {
    load_envelopes(conn, &[id.to_owned()])
        .await
        .map_err(|e| classify(&e, busy))?
        .pop()
        .ok_or_else(|| StoreError::NotFound(format!("no message {id} in this project")))
}

/// Appends a `message.sent` event for `draft` and returns the new id.
async fn insert_message(
    conn: &mut SqliteConnection,
    from: &Passname,
    draft: Draft,
    at: Millis,
) -> sqlx::Result<String> {
    let id = Ulid::generate().to_string();
    let sent = SentMessage {
        id: id.clone(),
        from: from.clone(),
        to: draft.to,
        kind: draft.kind,
        topic: draft.topic,
        reply_to: draft.reply_to,
        excerpt: draft.payload.excerpt(),
        size: draft.payload.size(),
        hash: draft.payload.hash(),
        payload: draft.payload.object().clone(),
        idempotency_key: draft.idempotency_key,
    };
    append(conn, from.as_str(), Change::MessageSent(Box::new(sent)), at).await?;
    Ok(id)
}

/// The send path, inside the caller's transaction: checks the recipients and the parent,
/// returns the original of a duplicate, else appends the message. `send` and
/// `create_order` both come through here.
async fn send_in(
    conn: &mut SqliteConnection,
    from: &Passname,
    mut draft: Draft,
    window_ms: i64,
    at: Millis,
    busy: Duration,
) -> Result<Sent> {
    let mut seen = Vec::new();
    draft.to.retain(|name| {
        let first = !seen.contains(name);
        seen.push(name.clone());
        first
    });
    if draft.to.is_empty() {
        return Err(StoreError::Invalid(
            "a message needs at least one recipient (--to NAME)".into(),
        ));
    }
    if draft.to.contains(from) {
        return Err(StoreError::Invalid(format!(
            "{from} cannot send to itself: name another participant in --to"
        )));
    }
    require_participant(&mut *conn, from.as_str(), busy).await?;
    for to in &draft.to {
        require_participant(&mut *conn, to.as_str(), busy).await?;
    }
    if let Some(parent) = &draft.reply_to {
        envelope(&mut *conn, parent, busy)
            .await
            .map_err(|e| match e {
                StoreError::NotFound(_) => {
                    StoreError::NotFound(format!("no message {parent} to reply to in this project"))
                }
                other => other,
            })?;
    }
    if let Some(id) = find_duplicate(&mut *conn, from, &draft, window_ms, at, busy).await? {
        return Ok(Sent {
            id,
            duplicate: true,
        });
    }
    let id = insert_message(&mut *conn, from, draft, at)
        .await
        .map_err(|e| classify(&e, busy))?;
    Ok(Sent {
        id,
        duplicate: false,
    })
}

/// The original of a duplicate send, if there is one.
async fn find_duplicate(
    conn: &mut SqliteConnection,
    from: &Passname,
    draft: &Draft,
    window_ms: i64,
    at: Millis,
    busy: Duration,
) -> Result<Option<String>> {
    let hash = draft.payload.hash();
    let to_err = |e: sqlx::Error| classify(&e, busy);
    if let Some(key) = &draft.idempotency_key {
        let row: Option<(String, String, String, String, Option<String>)> = sqlx::query_as(
            "SELECT id, hash, type, topic, reply_to FROM messages \
             WHERE from_name = ? AND idempotency_key = ?",
        )
        .bind(from.as_str())
        .bind(key)
        .fetch_optional(&mut *conn)
        .await
        .map_err(to_err)?;
        let Some((id, h, kind, topic, reply_to)) = row else {
            return Ok(None);
        };
        let same = h == hash
            && kind == draft.kind.as_str()
            && topic == draft.topic.as_str()
            && reply_to == draft.reply_to
            && same_recipients(conn, &id, &draft.to)
                .await
                .map_err(to_err)?;
        return if same {
            Ok(Some(id))
        } else {
            Err(StoreError::Conflict(format!(
                "idempotency key {key:?} was already used for message {id} with different \
                 content or recipients; use a new key for a new message"
            )))
        };
    }
    if window_ms <= 0 {
        return Ok(None);
    }
    let candidates: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM messages WHERE from_name = ? AND hash = ? AND type = ? AND topic = ? \
         AND reply_to IS ? AND created_at >= ? ORDER BY seq DESC LIMIT 20",
    )
    .bind(from.as_str())
    .bind(&hash)
    .bind(draft.kind.as_str())
    .bind(draft.topic.as_str())
    .bind(&draft.reply_to)
    .bind(at - window_ms)
    .fetch_all(&mut *conn)
    .await
    .map_err(to_err)?;
    for id in candidates {
        if same_recipients(conn, &id, &draft.to)
            .await
            .map_err(to_err)?
        {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

/// Whether message `id` went to exactly `to` (in any order). The same text sent to someone
/// else is a new message, not a duplicate.
async fn same_recipients(
    conn: &mut SqliteConnection,
    id: &str,
    to: &[Passname],
) -> sqlx::Result<bool> {
    let mut stored: Vec<String> =
        sqlx::query_scalar("SELECT participant FROM deliveries WHERE message_id = ?")
            .bind(id)
            .fetch_all(&mut *conn)
            .await?;
    let mut wanted: Vec<String> = to.iter().map(|p| p.as_str().to_owned()).collect();
    stored.sort();
    wanted.sort();
    Ok(stored == wanted)
}

fn encode_cursor(seq: i64) -> String {
    format!("c{seq:x}")
}

fn decode_cursor(cursor: &str) -> Result<i64> {
    cursor
        .strip_prefix('c')
        .and_then(|hex| i64::from_str_radix(hex, 16).ok())
        .ok_or_else(|| {
            StoreError::Invalid(format!(
                "cursor {cursor:?} is not one this store issued: pass the `next` value of the \
                 previous page"
            ))
        })
}

#[async_trait]
impl Store for SqliteStore {
    async fn add_participant(&self, actor: &str, name: &Passname, role: &str) -> Result<Added> {
        let role = role.trim();
        if role.is_empty() || role.chars().count() > 64 || role.contains(char::is_control) {
            return Err(StoreError::Invalid(format!(
                "role {role:?} is not valid: use planner, executor, reviewer, owner, observer or \
                 another word of at most 64 characters"
            )));
        }
        let mut tx = self.write().await?;
        if let Some(existing) = fetch_participant(&mut tx, name.as_str())
            .await
            .map_err(|e| self.err(e))?
        {
            return if existing.role == role {
                Ok(Added {
                    participant: existing,
                    created: false,
                })
            } else {
                Err(StoreError::Conflict(format!(
                    "participant {name} already exists with role {:?}",
                    existing.role
                )))
            };
        }
        let at = now();
        let change = Change::ParticipantAdded {
            name: name.clone(),
            role: role.to_owned(),
        };
        append(&mut tx, actor, change, at)
            .await
            .map_err(|e| self.err(e))?;
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(Added {
            participant: Participant {
                name: name.clone(),
                role: role.to_owned(),
                added_at: at,
            },
            created: true,
        })
    }

    async fn participants(&self) -> Result<Vec<Participant>> {
        let rows = sqlx::query("SELECT name, role, added_at FROM participants ORDER BY name")
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.err(e))?;
        rows.iter()
            .map(participant_row)
            .collect::<sqlx::Result<_>>()
            .map_err(|e| self.err(e))
    }

    async fn participant(&self, name: &str) -> Result<Option<Participant>> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.err(e))?;
        fetch_participant(&mut conn, name)
            .await
            .map_err(|e| self.err(e))
    }

    async fn send(&self, from: &Passname, draft: Draft, window_ms: i64) -> Result<Sent> {
        let mut tx = self.write().await?;
        let sent = send_in(&mut tx, from, draft, window_ms, now(), self.busy_timeout).await?;
        // A duplicate wrote nothing; committing it is harmless.
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(sent)
    }

    async fn fetch(&self, reader: Option<&Passname>, id: &str) -> Result<Fetched> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.err(e))?;
        let mut env = envelope(&mut conn, id, self.busy_timeout).await?;
        drop(conn);
        let mut status = reader.and_then(|r| env.status_for(r));
        if let (Some(reader), Some(DeliveryStatus::Pending)) = (reader, status) {
            let mut tx = self.write().await?;
            // Re-read under the lock: another process may have fetched it meanwhile.
            env = envelope(&mut tx, id, self.busy_timeout).await?;
            let current = env.status_for(reader).unwrap_or(DeliveryStatus::Pending);
            let next = transition(current, DeliveryAction::Fetch, env.kind)?;
            if next != current {
                let change = Change::DeliveryChanged {
                    message: id.to_owned(),
                    participant: reader.clone(),
                    status: next,
                    note: None,
                };
                append(&mut tx, reader.as_str(), change, now())
                    .await
                    .map_err(|e| self.err(e))?;
                env = envelope(&mut tx, id, self.busy_timeout).await?;
            }
            tx.commit().await.map_err(|e| self.err(e))?;
            status = Some(next);
        }
        let data: String = sqlx::query_scalar(
            "SELECT e.data FROM events e JOIN messages m ON m.seq = e.seq WHERE m.id = ?",
        )
        .bind(id)
        .fetch_one(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        let sent: SentMessage = serde_json::from_str(&data)
            .map_err(|e| StoreError::Engine(format!("message {id} is unreadable: {e}")))?;
        Ok(Fetched {
            envelope: env,
            payload: sent.payload,
            status,
        })
    }

    async fn step(
        &self,
        who: &Passname,
        id: &str,
        verb: Verb,
        note: Option<&str>,
    ) -> Result<Stepped> {
        let note = note.map(str::trim).filter(|n| !n.is_empty());
        if matches!(verb, Verb::HandBack | Verb::Refuse) && note.is_none() {
            return Err(StoreError::Invalid(
                "a reason is required (--reason TEXT): it is posted to the sender".into(),
            ));
        }
        let mut tx = self.write().await?;
        require_participant(&mut tx, who.as_str(), self.busy_timeout).await?;
        let env = envelope(&mut tx, id, self.busy_timeout).await?;
        let at = now();
        let stepped = if let Some(current) = env.status_for(who) {
            let action = match verb {
                Verb::Ack => DeliveryAction::Acknowledge,
                Verb::Complete => DeliveryAction::Complete,
                Verb::HandBack => DeliveryAction::HandBack,
                Verb::Refuse => DeliveryAction::Refuse,
                Verb::Archive => DeliveryAction::Archive,
            };
            let next = transition(current, action, env.kind)?;
            let change = Change::DeliveryChanged {
                message: id.to_owned(),
                participant: who.clone(),
                status: next,
                note: note.map(str::to_owned),
            };
            append(&mut tx, who.as_str(), change, at)
                .await
                .map_err(|e| self.err(e))?;
            let reply = match note {
                Some(text) => {
                    // A completion note moves knowledge; a refusal or hand-back asks for an
                    // answer. The marker names the status the step reached.
                    let kind = if verb == Verb::Complete {
                        MessageType::Info
                    } else {
                        MessageType::Message
                    };
                    let payload = serde_json::json!({ "body": text, next.as_str(): id });
                    let draft = Draft {
                        to: vec![env.from.clone()],
                        kind,
                        topic: env.topic.clone(),
                        reply_to: Some(id.to_owned()),
                        payload: Payload::from_value(payload, DEFAULT_PAYLOAD_CAP)?,
                        idempotency_key: None,
                    };
                    Some(
                        insert_message(&mut tx, who, draft, at)
                            .await
                            .map_err(|e| self.err(e))?,
                    )
                }
                None => None,
            };
            Stepped {
                id: id.to_owned(),
                end: "recipient",
                from: current.as_str(),
                status: next.as_str(),
                reply,
            }
        } else if &env.from == who {
            let current = env.request_status.ok_or_else(|| {
                StoreError::Invalid(format!(
                    "you sent {id} as {} {}: only its recipients change its status",
                    if env.kind == MessageType::Info {
                        "an"
                    } else {
                        "a"
                    },
                    env.kind
                ))
            })?;
            let action = match verb {
                Verb::Complete => RequestAction::Complete,
                Verb::Archive => RequestAction::Archive,
                _ => {
                    return Err(StoreError::Forbidden(format!(
                        "you sent {id}: as its sender you complete or archive your own end; \
                         the other steps are its recipients'"
                    )));
                }
            };
            if note.is_some() {
                return Err(StoreError::Invalid(
                    "--note is for a recipient's completion; to tell the recipients something, \
                     reply with `baton send --reply-to ID`"
                        .into(),
                ));
            }
            let next = request_transition(current, action)?;
            let change = Change::RequestChanged {
                message: id.to_owned(),
                status: next,
            };
            append(&mut tx, who.as_str(), change, at)
                .await
                .map_err(|e| self.err(e))?;
            Stepped {
                id: id.to_owned(),
                end: "sender",
                from: current.as_str(),
                status: next.as_str(),
                reply: None,
            }
        } else {
            return Err(StoreError::Forbidden(format!(
                "{who} is neither a recipient nor the sender of {id}"
            )));
        };
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(stepped)
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
        let root =
            root.ok_or_else(|| StoreError::NotFound(format!("no message {id} in this project")))?;
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
        let mut sql = QueryBuilder::<Sqlite>::new("SELECT m.seq, m.id FROM messages m");
        if let Some(status) = q.status {
            let caller = caller.ok_or_else(|| {
                StoreError::Invalid("--status filters by your own status: pass --as NAME".into())
            })?;
            sql.push(" JOIN deliveries mine ON mine.message_id = m.id AND mine.participant = ")
                .push_bind(caller.as_str().to_owned())
                .push(" AND mine.status = ")
                .push_bind(status.as_str());
        }
        sql.push(" WHERE 1 = 1");
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
        if let Some(text) = q.text.as_deref().filter(|t| !t.is_empty()) {
            sql.push(" AND instr(lower((SELECT e.data FROM events e WHERE e.seq = m.seq)), lower(")
                .push_bind(text.to_owned())
                .push(")) > 0");
        }
        if let Some(cursor) = &q.cursor {
            sql.push(" AND m.seq < ").push_bind(decode_cursor(cursor)?);
        }
        sql.push(" ORDER BY m.seq DESC LIMIT ")
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

    async fn events(&self, after_seq: i64, limit: u32) -> Result<Vec<Event>> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.err(e))?;
        read_events(&mut conn, after_seq, limit)
            .await
            .map_err(|e| self.err(e))
    }

    async fn change_state(&self, actor: &str, ops: &[StateOp]) -> Result<Vec<Event>> {
        let mut tx = self.write().await?;
        let mut state = read_state(&mut tx).await.map_err(|e| self.err(e))?;
        let at = now();
        let mut written = Vec::new();
        for op in ops {
            let change = state.plan(op).map_err(|e| match e {
                StateError::NoSuchDecision(_)
                | StateError::NoSuchStream(_)
                | StateError::NoSuchAlert(_) => StoreError::NotFound(e.to_string()),
                other => StoreError::Invalid(other.to_string()),
            })?;
            if let Some(change) = change {
                let event = append(&mut tx, actor, Change::State(change), at)
                    .await
                    .map_err(|e| self.err(e))?;
                state.apply(&event);
                written.push(event);
            }
        }
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(written)
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

    async fn record_run(&self, actor: &str, changes: &[RunChange]) -> Result<Vec<Event>> {
        self.record_run_changes(actor, changes).await
    }

    async fn runs(&self, query: &RunQuery) -> Result<Vec<Run>> {
        self.query_runs(query).await
    }

    async fn reap_lost(&self, actor: &str, run: &str, reason: &str) -> Result<Option<Reaped>> {
        self.reap(actor, run, reason).await
    }

    async fn create_order(
        &self,
        actor: &Passname,
        topic: Topic,
        document: Payload,
    ) -> Result<OrderWritten> {
        self.offer_order(actor, topic, document).await
    }

    async fn order_step(
        &self,
        actor: &Passname,
        id: &str,
        expected_seq: i64,
        request: OrderRequest,
    ) -> Result<OrderWritten> {
        self.step_order(actor, id, expected_seq, request).await
    }

    async fn order(&self, id: &str) -> Result<Option<Order>> {
        self.load_order(id).await
    }

    async fn orders(&self, query: &OrderQuery) -> Result<Vec<Order>> {
        self.query_orders(query).await
    }

    async fn order_events_since(&self, id: &str, after_seq: i64) -> Result<Vec<Event>> {
        self.order_events(id, after_seq).await
    }

    async fn generation(&self) -> Result<i64> {
        sqlx::query_scalar("SELECT coalesce(max(seq), 0) FROM events")
            .fetch_one(&self.pool)
            .await
            .map_err(|e| self.err(e))
    }
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
    let row = sqlx::query("SELECT name, role, added_at FROM participants WHERE name = ?")
        .bind(name)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(participant_row).transpose()
}

/// Orders a thread's messages depth-first from the root, siblings oldest first.
fn depth_first(flat: Vec<Envelope>, root: &str) -> Vec<Envelope> {
    let mut children: HashMap<Option<String>, Vec<Envelope>> = HashMap::new();
    for env in flat {
        let parent = if env.id == root {
            None
        } else {
            env.reply_to.clone()
        };
        children.entry(parent).or_default().push(env);
    }
    let mut out = Vec::new();
    let mut stack: Vec<Envelope> = children.remove(&None).unwrap_or_default();
    stack.reverse();
    while let Some(env) = stack.pop() {
        if let Some(mut kids) = children.remove(&Some(env.id.clone())) {
            kids.reverse();
            stack.extend(kids);
        }
        out.push(env);
    }
    out
}
