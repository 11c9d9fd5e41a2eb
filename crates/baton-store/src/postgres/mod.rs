//! The shared store: one PostgreSQL database (or one schema of it) holding many projects.
//!
//! Every table is keyed by project (`projects.id`). A writer begins a transaction, bounds
//! its lock waits by the busy timeout (`SET LOCAL lock_timeout`) and locks its project's
//! row first (`SELECT … FOR UPDATE`), so writers of one project queue as SQLite's
//! `BEGIN IMMEDIATE` makes them, writers of different projects never wait for each other,
//! and every check a write makes through its [`Tx`] sees everything committed before it.
//! Each event takes the next `seq` from that locked row: per project, strictly increasing,
//! gap-free for committed events. Lock timeouts, serialization failures and deadlocks are
//! [`StoreError::Busy`], never an engine message. A read that makes more than one query
//! runs in one read-only repeatable-read transaction, so it sees one snapshot. A commit is
//! told on `LISTEN/NOTIFY` (`notify.rs`), which wakes waits. A URL naming several hosts
//! (a cluster with automatic failover) is followed to its writable primary (`hosts.rs`);
//! while there is none, calls are [`StoreError::Reconnecting`].
//!
//! This module holds SQL and migrations only; it must never decide anything — every rule
//! is in `baton_core`, called from [`crate::write`]. It uses no table inheritance and no
//! extensions.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use baton_core::delivery;
use baton_core::id::Span;
use baton_core::key::Key;
use baton_core::message::Prior;
use baton_core::order::Order;
use baton_core::run::Run;
use baton_core::state::{DIGEST_ITEMS, ProjectState, StateDigest};
use baton_core::{
    Change, DeliveryStatus, Draft, Envelope, Event, Millis, Participant, Passname, ProjectName,
    Record, Refusal, RequestStatus,
};
use serde_json::{Map, Value};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions, PgRow};
use sqlx::{AssertSqlSafe, Connection, Postgres, QueryBuilder, Row, Transaction};

mod attention;
mod hosts;
mod keys;
mod metrics;
mod notify;
mod orders;
mod runs;
mod webhooks;

use crate::decode::{self, decode_cursor, depth_first};
use crate::{
    Attention, Backend, Database, NewEvent, OrderQuery, Page, Repeats, Result, RunQuery,
    SearchQuery, Settled, Store, StoreError, Tx, Window,
};
use baton_core::metrics::Tally;
use baton_core::negotiation::Negotiation;
use baton_core::webhook::Webhook;
use hosts::Link;

/// Schema migrations, applied in order; the `migrations` table records which ran.
/// The migration that added the messages' words and the `state` projection: a database
/// made before it has them filled from its logs.
const TEXT_AND_STATE: i64 = 7;
/// The migration that added the metrics' tally: a database made before it has it filled
/// from its logs.
const METRICS: i64 = 10;
/// The migration that added `open_needs` and `stuck_orders`: a database made before it has
/// them filled from its logs.
const ATTENTION: i64 = 11;

const MIGRATIONS: &[&str] = &[
    include_str!("migrations/001_event_log.sql"),
    include_str!("migrations/002_runs.sql"),
    include_str!("migrations/003_orders.sql"),
    include_str!("migrations/004_keys.sql"),
    include_str!("migrations/005_authority.sql"),
    include_str!("migrations/006_webhooks.sql"),
    include_str!("migrations/007_text_and_state.sql"),
    include_str!("migrations/008_state_digest.sql"),
    include_str!("migrations/009_key_uses.sql"),
    include_str!("migrations/010_metrics.sql"),
    include_str!("migrations/011_attention.sql"),
    include_str!("migrations/012_failures.sql"),
    include_str!("migrations/013_refusal_repeats.sql"),
    include_str!("migrations/014_runs_parent.sql"),
];

/// Connections one database keeps open, shared by all its projects.
const MAX_CONNECTIONS: u32 = 8;

/// A PostgreSQL database holding projects by name: `postgres://USER@HOST[:PORT]/DATABASE`,
/// with `?schema=NAME` to keep Baton's tables in a schema of their own (created when
/// missing). The other query parameters are those sqlx reads (any other is refused by
/// name, `hosts.rs`).
pub struct PostgresDatabase {
    pool: PgPool,
    link: Link,
    notifier: Arc<notify::Notifier>,
}

/// A sender's sends like a draft within the duplicate window, newest first. Ordered by
/// `created_at`, which `messages_duplicate` holds in order after the sender and the hash:
/// ordered by `seq`, the plan a prepared statement kept from when the table was empty
/// walked the sender's whole outbox index (`messages_outbox`) backwards, so a send's cost
/// grew with everything its sender had sent. (Between those two states, on a table grown
/// but not yet analyzed, every index scan is estimated at one row and the planner may
/// take any of them until autovacuum's next analysis re-plans it: docs/DECISIONS.md.)
const RECENT: &str = "SELECT id, hash, type, topic, reply_to, idempotency_key FROM messages \
     WHERE project = $1 AND from_name = $2 AND hash = $3 AND type = $4 AND topic = $5 \
     AND reply_to IS NOT DISTINCT FROM $6 AND created_at >= $7 \
     ORDER BY created_at DESC, seq DESC LIMIT 20";

/// One project's store in a [`PostgresDatabase`].
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
    project: i64,
    name: ProjectName,
    link: Link,
    notifier: Arc<notify::Notifier>,
}

impl PostgresDatabase {
    /// Connects and brings the schema up to date. A URL naming several hosts connects to
    /// the one that takes writes, and follows it from then on (`hosts.rs`).
    pub async fn connect(url: &str, busy_timeout: Duration) -> Result<Self> {
        let urls = hosts::split(url).map_err(|reason| StoreError::Unavailable {
            path: redact(url),
            reason,
        })?;
        let mut hosts = Vec::with_capacity(urls.len());
        let mut schema = None;
        for url in &urls {
            let (options, named) = parse_url(url)?;
            hosts.push(match &named {
                Some(schema) => options.options([("search_path", schema)]),
                None => options,
            });
            schema = named;
        }
        let place = match &hosts[..] {
            [one] => place(one, schema.as_deref()),
            _ => redact(url),
        };
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(busy_timeout);
        let (mut conn, pool, link) = if hosts.len() > 1 {
            hosts::follow(hosts, pool, busy_timeout).await?
        } else {
            let options = hosts.pop().expect("a URL names a host");
            // A connection of its own first, for the migrations: a server that cannot be
            // reached says why at once, where a pool would retry until its timeout.
            let conn = PgConnection::connect_with(&options).await.map_err(|e| {
                StoreError::Unavailable {
                    path: place.clone(),
                    reason: match &e {
                        sqlx::Error::Database(db) => db.message().to_owned(),
                        other => other.to_string(),
                    },
                }
            })?;
            let pool = pool.connect_lazy_with(options);
            (conn, pool, Link::single(busy_timeout))
        };
        migrate(&mut conn, schema.as_deref(), &place, &link).await?;
        conn.close().await.map_err(|e| link.classify(&e))?;
        Ok(Self {
            pool,
            link,
            notifier: Arc::default(),
        })
    }

    async fn pool(&self) -> Result<&PgPool> {
        self.link.ready(&self.pool).await
    }

    /// Project `name`'s store; refused as not found when there is no such project.
    pub async fn store(&self, name: &ProjectName) -> Result<PostgresStore> {
        let id: Option<i64> = sqlx::query_scalar("SELECT id FROM projects WHERE name = $1")
            .bind(name.as_str())
            .fetch_optional(self.pool().await?)
            .await
            .map_err(|e| self.link.classify(&e))?;
        let project = id.ok_or_else(|| Refusal::not_found(Record::Project, name.as_str()))?;
        Ok(PostgresStore {
            pool: self.pool.clone(),
            project,
            name: name.clone(),
            link: self.link.clone(),
            notifier: Arc::clone(&self.notifier),
        })
    }
}

#[async_trait]
impl Database for PostgresDatabase {
    async fn project(&self, name: &ProjectName) -> Result<Store> {
        Ok(Store::new(self.store(name).await?))
    }

    async fn add_project(&self, name: &ProjectName) -> Result<bool> {
        let created: Option<i64> = sqlx::query_scalar(
            "INSERT INTO projects (name, created_at) VALUES ($1, $2) \
             ON CONFLICT (name) DO NOTHING RETURNING id",
        )
        .bind(name.as_str())
        .bind(now())
        .fetch_optional(self.pool().await?)
        .await
        .map_err(|e| self.link.classify(&e))?;
        Ok(created.is_some())
    }

    async fn projects(&self) -> Result<Vec<ProjectName>> {
        let names: Vec<String> = sqlx::query_scalar("SELECT name FROM projects")
            .fetch_all(self.pool().await?)
            .await
            .map_err(|e| self.link.classify(&e))?;
        // Sorted here, byte-wise as SQLite's directory listing is, whatever the collation.
        let mut names: Vec<ProjectName> = names
            .into_iter()
            .filter_map(|n| ProjectName::new(&n).ok())
            .collect();
        names.sort();
        Ok(names)
    }
}

/// Brings the schema up to date, in one transaction. Two processes migrating the same
/// place at once queue on an advisory lock named after it; the later ones find the work
/// done.
async fn migrate(
    conn: &mut PgConnection,
    schema: Option<&str>,
    place: &str,
    link: &Link,
) -> Result<()> {
    let err = |e: sqlx::Error| link.classify(&e);
    let busy_timeout = link.busy_timeout;
    let latest = MIGRATIONS.len() as i64;
    let mut tx = conn
        .begin_with(AssertSqlSafe(begin_bounded(busy_timeout)))
        .await
        .map_err(err)?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(migration_lock(schema))
        .execute(&mut *tx)
        .await
        .map_err(err)?;
    if let Some(schema) = schema {
        // A checked plain name (see `parse_url`); DDL takes no bound parameters.
        let create = format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"");
        sqlx::raw_sql(AssertSqlSafe(create))
            .execute(&mut *tx)
            .await
            .map_err(err)?;
    }
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS migrations \
         (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)",
    )
    .execute(&mut *tx)
    .await
    .map_err(err)?;
    let current: i64 = sqlx::query_scalar("SELECT coalesce(max(version), 0) FROM migrations")
        .fetch_one(&mut *tx)
        .await
        .map_err(err)?;
    if current > latest {
        return Err(StoreError::TooNew {
            path: place.to_owned(),
            found: current,
            known: latest,
        });
    }
    for (version, script) in (1_i64..).zip(MIGRATIONS).skip(current as usize) {
        sqlx::raw_sql(*script)
            .execute(&mut *tx)
            .await
            .map_err(err)?;
        if version == TEXT_AND_STATE && current > 0 {
            fill_text_and_state(&mut tx).await.map_err(err)?;
        }
        if version == METRICS {
            metrics::fill(&mut tx).await.map_err(err)?;
        }
        if version == ATTENTION && current > 0 {
            attention::fill(&mut tx).await.map_err(err)?;
        }
        sqlx::query("INSERT INTO migrations (version, applied_at) VALUES ($1, $2)")
            .bind(version)
            .bind(now())
            .execute(&mut *tx)
            .await
            .map_err(err)?;
    }
    tx.commit().await.map_err(err)
}

/// Splits Baton's own `schema` parameter off the URL; the rest is sqlx's to read.
fn parse_url(url: &str) -> Result<(PgConnectOptions, Option<String>)> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut schema = None;
    let mut rest = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.strip_prefix("schema=") {
            Some(name) => schema = Some(name.to_owned()),
            None => rest.push(pair),
        }
    }
    let url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    let options: PgConnectOptions =
        url.parse()
            .map_err(|e: sqlx::Error| StoreError::Unavailable {
                path: redact(base),
                reason: e.to_string(),
            })?;
    let options = hosts::unbracket(options);
    if let Some(name) = &schema {
        let plain = name.len() <= 63
            && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !plain {
            return Err(StoreError::Unavailable {
                path: redact(base),
                reason: format!(
                    "schema {name:?} is not a plain SQL name: use a-z, 0-9 and _, \
                     starting with a letter or _, at most 63 characters"
                ),
            });
        }
    }
    Ok((options, schema))
}

/// The URL with its password (if any) hidden, for messages.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rsplit_once('@') {
        Some((user, host)) if user.contains(':') => {
            let user = user.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}{}", &rest[authority_end..])
        }
        _ => url.to_owned(),
    }
}

/// Where a database is, for messages: never its password.
fn place(options: &PgConnectOptions, schema: Option<&str>) -> String {
    let mut place = format!(
        "postgres://{}@{}:{}/{}",
        options.get_username(),
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or_default()
    );
    if let Some(schema) = schema {
        place.push_str("?schema=");
        place.push_str(schema);
    }
    place
}

/// The advisory lock that serializes migrations of one place (a schema, or the default
/// search path): the first 8 bytes of a hash of its name.
fn migration_lock(schema: Option<&str>) -> i64 {
    let hash = blake3::hash(format!("baton migrations {}", schema.unwrap_or("")).as_bytes());
    let bytes: [u8; 8] = hash.as_bytes()[..8].try_into().expect("8 bytes");
    i64::from_le_bytes(bytes)
}

/// The statement that opens a write transaction: lock waits end at the busy timeout.
/// `SET` takes no bound parameters; the value is a number computed here (at least 1 ms,
/// because 0 would mean waiting forever).
fn begin_bounded(busy_timeout: Duration) -> String {
    let ms = busy_timeout.as_millis().max(1);
    format!("BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = {ms}")
}

/// The store's clock, for the bookkeeping rows (`projects`, `migrations`).
fn now() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as Millis)
        .unwrap_or(0)
}

impl PostgresStore {
    /// The options the store connects with (its schema included): for tools and tests
    /// that must reach under the store on a connection of their own.
    pub fn connect_options(&self) -> PgConnectOptions {
        (*self.pool.connect_options()).clone()
    }

    fn err(&self, e: sqlx::Error) -> StoreError {
        self.link.classify(&e)
    }

    /// The pool, once it reaches the primary.
    async fn pool(&self) -> Result<&PgPool> {
        self.link.ready(&self.pool).await
    }

    /// A connection of the pool, once it reaches the primary.
    async fn conn(&self) -> Result<PoolConnection<Postgres>> {
        self.pool().await?.acquire().await.map_err(|e| self.err(e))
    }

    /// Starts a write transaction holding the project's write lock, waiting at most the
    /// busy timeout for it.
    async fn write(&self) -> Result<Transaction<'static, Postgres>> {
        let mut tx = self
            .pool()
            .await?
            .begin_with(AssertSqlSafe(begin_bounded(self.link.busy_timeout)))
            .await
            .map_err(|e| self.err(e))?;
        let locked: Option<i64> =
            sqlx::query_scalar("SELECT id FROM projects WHERE id = $1 FOR UPDATE")
                .bind(self.project)
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| self.err(e))?;
        if locked.is_none() {
            return Err(Refusal::not_found(Record::Project, self.name.as_str()).into());
        }
        Ok(tx)
    }

    /// Starts a read that sees one snapshot across its queries; end it with [`Self::done`].
    async fn snapshot(&self) -> Result<Transaction<'static, Postgres>> {
        self.pool()
            .await?
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await
            .map_err(|e| self.err(e))
    }

    /// Ends a snapshot read, handing back what it read.
    async fn done<T>(
        &self,
        tx: Transaction<'static, Postgres>,
        read: sqlx::Result<T>,
    ) -> Result<T> {
        let value = read.map_err(|e| self.err(e))?;
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(value)
    }

    /// Drops every projection row of this project and rebuilds them by replaying its log,
    /// in one transaction. The result must equal what the live writes produced.
    pub async fn rebuild_projections(&self) -> Result<()> {
        let mut tx = self.write().await?;
        for table in crate::decode::PROJECTIONS {
            let sql = format!("DELETE FROM {table} WHERE project = $1");
            sqlx::query(AssertSqlSafe(sql))
                .bind(self.project)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.err(e))?;
        }
        let mut after = 0;
        loop {
            let batch = read_events(&mut tx, self.project, after, 1000)
                .await
                .map_err(|e| self.err(e))?;
            let Some(last) = batch.last() else { break };
            after = last.seq;
            for event in &batch {
                project(&mut tx, self.project, event)
                    .await
                    .map_err(|e| self.err(e))?;
            }
        }
        tx.commit().await.map_err(|e| self.err(e))
    }

    /// Every projection row as text, in a stable order, in the same format as
    /// [`crate::SqliteStore::projection_dump`], so two stores can be compared.
    pub async fn projection_dump(&self) -> Result<Vec<String>> {
        // Ordered byte-wise (`COLLATE "C"`), as SQLite orders text.
        let queries = [
            "SELECT 'p|' || name || '|' || role || '|' || added_at || '|' || coalesce(policy, '') \
             FROM participants \
             WHERE project = $1 ORDER BY name COLLATE \"C\"",
            "SELECT 'm|' || id || '|' || seq || '|' || from_name || '|' || type || '|' || topic \
             || '|' || coalesce(reply_to, '') || '|' || root_id || '|' || depth || '|' || excerpt \
             || '|' || size || '|' || hash || '|' || coalesce(idempotency_key, '') || '|' \
             || created_at || '|' || coalesce(request_status, '') FROM messages \
             WHERE project = $1 ORDER BY id COLLATE \"C\"",
            "SELECT 'd|' || message_id || '|' || participant || '|' || status || '|' || updated_at \
             FROM deliveries WHERE project = $1 \
             ORDER BY message_id COLLATE \"C\", participant COLLATE \"C\"",
            "SELECT 'r|' || id || '|' || seq || '|' || status || '|' || coalesce(participant, '') \
             || '|' || coalesce(host, '') || '|' || coalesce(ended_at::text, '') || '|' || data \
             FROM runs WHERE project = $1 ORDER BY id COLLATE \"C\"",
            "SELECT 'o|' || id || '|' || log_seq || '|' || seq || '|' || status || '|' || from_name \
             || '|' || to_name || '|' || coalesce(escalate_to, '') || '|' || data \
             FROM orders WHERE project = $1 ORDER BY id COLLATE \"C\"",
            "SELECT 'k|' || id || '|' || seq || '|' || participant || '|' || data \
             FROM keys WHERE project = $1 ORDER BY id COLLATE \"C\"",
            "SELECT 'w|' || participant || '|' || url || '|' || set_seq \
             FROM webhooks WHERE project = $1 ORDER BY participant COLLATE \"C\"",
            "SELECT 't|' || seq || '|' || words::text FROM messages \
             WHERE project = $1 ORDER BY seq",
            "SELECT 's|' || data FROM state WHERE project = $1",
            "SELECT 'g|' || data FROM state_digest WHERE project = $1",
            "SELECT 'x|' || data FROM metrics WHERE project = $1",
            "SELECT 'n|' || id || '|' || seq FROM open_needs \
             WHERE project = $1 ORDER BY id COLLATE \"C\"",
            "SELECT 'u|' || id FROM stuck_orders WHERE project = $1 ORDER BY id COLLATE \"C\"",
        ];
        let mut tx = self.snapshot().await?;
        let mut dump = Vec::new();
        for q in queries {
            let part: sqlx::Result<Vec<String>> = sqlx::query_scalar(q)
                .bind(self.project)
                .fetch_all(&mut *tx)
                .await;
            dump.extend(part.map_err(|e| self.err(e))?);
        }
        self.done(tx, Ok(dump)).await
    }

    /// A bounded list for `who`: the envelopes of the first `limit` ids `ids` selects
    /// (`$1` the project, `$2` who, `$3` the limit) and the count `count` gives, in one
    /// snapshot.
    async fn counted(
        &self,
        count: &'static str,
        ids: &'static str,
        who: &Passname,
        limit: u32,
    ) -> Result<(Vec<Envelope>, u64)> {
        let mut tx = self.snapshot().await?;
        let read = async {
            let total: i64 = sqlx::query_scalar(count)
                .bind(self.project)
                .bind(who.as_str())
                .fetch_one(&mut *tx)
                .await?;
            let ids: Vec<String> = sqlx::query_scalar(ids)
                .bind(self.project)
                .bind(who.as_str())
                .bind(i64::from(limit))
                .fetch_all(&mut *tx)
                .await?;
            let first = load_envelopes(&mut tx, self.project, &ids).await?;
            Ok((first, total as u64))
        }
        .await;
        self.done(tx, read).await
    }

    /// Runs a query selecting message ids (`$1` the project, `$2` a participant) and loads
    /// their envelopes, in that order, from one snapshot.
    /// A page of a list for `who`: the envelopes of the ids `sql` selects (bound: project,
    /// who, the seq the page starts after, the limit), `window`'s message id turned into
    /// its seq first.
    async fn list(
        &self,
        sql: &'static str,
        who: &Passname,
        window: &Window,
    ) -> Result<Vec<Envelope>> {
        let mut tx = self.snapshot().await?;
        let read = async {
            let after = match &window.after {
                None => 0,
                // An id that is no message names no place in any list: the page is empty.
                Some(id) => {
                    sqlx::query_scalar("SELECT seq FROM messages WHERE project = $1 AND id = $2")
                        .bind(self.project)
                        .bind(id)
                        .fetch_optional(&mut *tx)
                        .await?
                        .unwrap_or(i64::MAX)
                }
            };
            let ids: Vec<String> = sqlx::query_scalar(sql)
                .bind(self.project)
                .bind(who.as_str())
                .bind(after)
                .bind(i64::from(window.limit))
                .fetch_all(&mut *tx)
                .await?;
            load_envelopes(&mut tx, self.project, &ids).await
        }
        .await;
        self.done(tx, read).await
    }
}

/// Appends `event` to the project's log and applies it to the projections, inside the
/// caller's transaction (which holds the project's row lock): what [`Tx::append`] does.
async fn append(conn: &mut PgConnection, project_id: i64, new: NewEvent) -> sqlx::Result<Event> {
    let seq: i64 = sqlx::query_scalar(
        "WITH next AS (UPDATE projects SET last_seq = last_seq + 1 WHERE id = $1 \
                       RETURNING last_seq) \
         INSERT INTO events (project, seq, id, at, actor, kind, subject, data) \
         SELECT $1, last_seq, $2, $3, $4, $5, $6, $7 FROM next RETURNING seq",
    )
    .bind(project_id)
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
    project(conn, project_id, &event).await?;
    Ok(event)
}

/// Applies one event to the project's projections. Used for live writes and for replay.
async fn project(conn: &mut PgConnection, project: i64, event: &Event) -> sqlx::Result<()> {
    let tally = if Tally::moved_by(&event.change) {
        Some(metrics::facts(conn, project, event).await?)
    } else {
        None
    };
    project_tables(conn, project, event).await?;
    if let Some(facts) = tally {
        metrics::advance(conn, project, event, &facts).await?;
    }
    Ok(())
}

/// [`project`] but for the metrics' tally.
async fn project_tables(conn: &mut PgConnection, project: i64, event: &Event) -> sqlx::Result<()> {
    match &event.change {
        Change::ParticipantAdded { name, role } => {
            sqlx::query(
                "INSERT INTO participants (project, name, role, added_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (project, name) DO UPDATE SET role = excluded.role",
            )
            .bind(project)
            .bind(name.as_str())
            .bind(role)
            .bind(event.at)
            .execute(&mut *conn)
            .await?;
        }
        Change::MessageSent(m) => {
            let parent: Option<(String, i64)> = match &m.reply_to {
                Some(parent) => {
                    sqlx::query_as(
                        "SELECT root_id, depth FROM messages WHERE project = $1 AND id = $2",
                    )
                    .bind(project)
                    .bind(parent)
                    .fetch_optional(&mut *conn)
                    .await?
                }
                None => None,
            };
            let (root, depth) = delivery::thread_place(&m.id, parent);
            let request_status = RequestStatus::on_send(m.kind).map(RequestStatus::as_str);
            sqlx::query(
                "INSERT INTO messages (project, id, seq, from_name, type, topic, reply_to, \
                 root_id, depth, excerpt, size, hash, idempotency_key, created_at, request_status, \
                 words) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, \
                 to_tsvector('simple', $16))",
            )
            .bind(project)
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
            .bind(baton_core::search::words(&m.payload))
            .execute(&mut *conn)
            .await?;
            for (ordinal, to) in (0_i64..).zip(&m.to) {
                sqlx::query(
                    "INSERT INTO deliveries \
                     (project, message_id, participant, ordinal, status, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(project)
                .bind(&m.id)
                .bind(to.as_str())
                .bind(ordinal)
                .bind(delivery::FIRST_DELIVERY.as_str())
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
                "UPDATE deliveries SET status = $1, updated_at = $2 \
                 WHERE project = $3 AND message_id = $4 AND participant = $5",
            )
            .bind(status.as_str())
            .bind(event.at)
            .bind(project)
            .bind(message)
            .bind(participant.as_str())
            .execute(&mut *conn)
            .await?;
        }
        Change::RequestChanged { message, status } => {
            sqlx::query("UPDATE messages SET request_status = $1 WHERE project = $2 AND id = $3")
                .bind(status.as_str())
                .bind(project)
                .bind(message)
                .execute(&mut *conn)
                .await?;
        }
        Change::State(_) => advance_state(conn, project, event).await?,
        Change::Run(change) => runs::project(conn, project, event, change).await?,
        Change::Order(change) => orders::project(conn, project, event, change).await?,
        Change::Key(change) => keys::project(conn, project, event, change).await?,
        Change::Webhook(change) => webhooks::project(conn, project, event, change).await?,
        Change::PolicySet { name, policy } => {
            sqlx::query("UPDATE participants SET policy = $1 WHERE project = $2 AND name = $3")
                .bind(decode::policy_text(policy.as_ref()))
                .bind(project)
                .bind(name.as_str())
                .execute(&mut *conn)
                .await?;
        }
        // The log is the record of a refusal; nothing projects it.
        Change::Denied(_) => {}
        // A negotiation is folded in memory from its events (`Negotiation::replay`), and
        // so are an order's effects (`Effects::replay`), but for whether one is stuck.
        // Whom a participant stands for is folded from its events when asked.
        Change::Negotiation(_) | Change::A2aAgent { .. } | Change::Handover(_) => {}
        Change::Effect(change) => attention::effect(conn, project, change).await?,
        // Verdicts and acknowledgements are read from the log by subject; open needs are
        // projected.
        Change::Gate(change) => attention::gate(conn, project, event, change).await?,
    }
    Ok(())
}

/// A projection row kept as the JSON of its fold (runs, orders): `query` selects its `data`
/// column by project (`$1`) and id (`$2`).
async fn load_folded<T: serde::de::DeserializeOwned>(
    conn: &mut PgConnection,
    query: &'static str,
    project: i64,
    id: &str,
) -> sqlx::Result<Option<T>> {
    let data: Option<String> = sqlx::query_scalar(query)
        .bind(project)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    data.as_deref().map(decode::folded).transpose()
}

async fn read_events(
    conn: &mut PgConnection,
    project: i64,
    after: i64,
    limit: i64,
) -> sqlx::Result<Vec<Event>> {
    let found = sqlx::query(
        "SELECT seq, id, at, actor, kind, data FROM events \
         WHERE project = $1 AND seq > $2 ORDER BY seq LIMIT $3",
    )
    .bind(project)
    .bind(after)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    decode::events(&found)
}

/// Negotiation `id`: the fold of its events, found by the subject index.
async fn read_negotiation(
    conn: &mut PgConnection,
    project: i64,
    id: &str,
) -> sqlx::Result<Option<Negotiation>> {
    Ok(Negotiation::replay(
        &read_about(conn, project, id, "negotiation.changed").await?,
    ))
}

/// The events of `kind` about `subject`, oldest first.
async fn read_about(
    conn: &mut PgConnection,
    project: i64,
    subject: &str,
    kind: &str,
) -> sqlx::Result<Vec<Event>> {
    let found = sqlx::query(
        "SELECT seq, id, at, actor, kind, data FROM events \
         WHERE project = $1 AND subject = $2 AND kind = $3 ORDER BY seq",
    )
    .bind(project)
    .bind(subject)
    .bind(kind)
    .fetch_all(&mut *conn)
    .await?;
    decode::events(&found)
}

/// The project state: the fold of every `state.changed` event, as its projection keeps it.
async fn read_state(conn: &mut PgConnection, project: i64) -> sqlx::Result<ProjectState> {
    let data: Option<String> = sqlx::query_scalar("SELECT data FROM state WHERE project = $1")
        .bind(project)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(match data {
        Some(data) => decode::folded(&data)?,
        None => ProjectState::default(),
    })
}

/// The state's digest as its projection keeps it; made from the whole state when a
/// database older than the digest has not changed the project's state since.
async fn read_digest(conn: &mut PgConnection, project: i64) -> sqlx::Result<StateDigest> {
    let data: Option<String> =
        sqlx::query_scalar("SELECT data FROM state_digest WHERE project = $1")
            .bind(project)
            .fetch_optional(&mut *conn)
            .await?;
    Ok(match data {
        Some(data) => decode::folded(&data)?,
        None => read_state(conn, project).await?.digest(DIGEST_ITEMS),
    })
}

/// Folds one state event into the project's state projection and its digest.
async fn advance_state(conn: &mut PgConnection, project: i64, event: &Event) -> sqlx::Result<()> {
    let mut state = read_state(conn, project).await?;
    state.apply(event);
    let (data, digest) = decode::state_rows(&state);
    for (table, data) in [("state", data), ("state_digest", digest)] {
        let sql = format!(
            "INSERT INTO {table} (project, data) VALUES ($1, $2) \
             ON CONFLICT (project) DO UPDATE SET data = excluded.data"
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(project)
            .bind(data)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Project `project`'s events of `kinds` after `after_seq`, oldest first, at most a
/// thousand: how a migration fills a new projection from a log, a batch at a time.
async fn events_of_kinds(
    conn: &mut PgConnection,
    project: i64,
    kinds: &[&str],
    after_seq: i64,
) -> sqlx::Result<Vec<Event>> {
    let found = sqlx::query(
        "SELECT seq, id, at, actor, kind, data FROM events \
         WHERE project = $1 AND seq > $2 AND kind = ANY($3) ORDER BY seq LIMIT 1000",
    )
    .bind(project)
    .bind(after_seq)
    .bind(kinds)
    .fetch_all(&mut *conn)
    .await?;
    decode::events(&found)
}

/// Fills the messages' words and `state` from the logs of a database made before they
/// existed.
async fn fill_text_and_state(conn: &mut PgConnection) -> sqlx::Result<()> {
    let mut after = (0_i64, 0_i64);
    loop {
        let found = sqlx::query(
            "SELECT project, seq, id, at, actor, kind, data FROM events \
             WHERE (project, seq) > ($1, $2) AND kind IN ('message.sent', 'state.changed') \
             ORDER BY project, seq LIMIT 1000",
        )
        .bind(after.0)
        .bind(after.1)
        .fetch_all(&mut *conn)
        .await?;
        let projects: Vec<i64> = found
            .iter()
            .map(|row| row.try_get("project"))
            .collect::<sqlx::Result<_>>()?;
        let batch = decode::events(&found)?;
        let (Some(last), Some(&project)) = (batch.last(), projects.last()) else {
            return Ok(());
        };
        after = (project, last.seq);
        for (event, &project) in batch.iter().zip(&projects) {
            match &event.change {
                Change::MessageSent(m) => {
                    sqlx::query(
                        "UPDATE messages SET words = to_tsvector('simple', $1) \
                         WHERE project = $2 AND id = $3",
                    )
                    .bind(baton_core::search::words(&m.payload))
                    .bind(project)
                    .bind(&m.id)
                    .execute(&mut *conn)
                    .await?;
                }
                Change::State(_) => advance_state(conn, project, event).await?,
                _ => {}
            }
        }
    }
}

async fn fetch_participant(
    conn: &mut PgConnection,
    project: i64,
    name: &str,
) -> sqlx::Result<Option<Participant>> {
    let row = sqlx::query(
        "SELECT name, role, added_at, policy FROM participants WHERE project = $1 AND name = $2",
    )
    .bind(project)
    .bind(name)
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(decode::participant).transpose()
}

/// Loads the envelopes of `ids`, in the order given; unknown ids are skipped.
async fn load_envelopes(
    conn: &mut PgConnection,
    project: i64,
    ids: &[String],
) -> sqlx::Result<Vec<Envelope>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let messages = sqlx::query(
        "SELECT m.id, m.from_name, m.type, m.topic, m.reply_to, m.depth, m.excerpt, m.size, \
                m.hash, m.created_at, m.request_status, m.idempotency_key, \
                (SELECT count(*) FROM messages r \
                 WHERE r.project = m.project AND r.reply_to = m.id) AS replies \
         FROM messages m WHERE m.project = $1 AND m.id = ANY($2)",
    )
    .bind(project)
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?;
    let recipients = sqlx::query(
        "SELECT message_id, participant, status, updated_at FROM deliveries \
         WHERE project = $1 AND message_id = ANY($2) ORDER BY ordinal",
    )
    .bind(project)
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?;
    decode::envelopes(ids, &messages, &recipients)
}

/// One message's envelope.
async fn envelope(
    conn: &mut PgConnection,
    project: i64,
    id: &str,
) -> sqlx::Result<Option<Envelope>> {
    Ok(load_envelopes(conn, project, &[id.to_owned()]).await?.pop())
}

/// Earlier messages as the duplicate rule compares them, with their recipients.
async fn priors(
    conn: &mut PgConnection,
    project: i64,
    found: &[PgRow],
) -> sqlx::Result<Vec<Prior>> {
    let mut out = Vec::with_capacity(found.len());
    for row in found {
        let id: String = row.try_get("id")?;
        let to: Vec<String> = sqlx::query_scalar(
            "SELECT participant FROM deliveries WHERE project = $1 AND message_id = $2",
        )
        .bind(project)
        .bind(&id)
        .fetch_all(&mut *conn)
        .await?;
        out.push(decode::prior(row, to)?);
    }
    Ok(out)
}

#[async_trait]
impl Backend for PostgresStore {
    async fn changed(&self, seen: i64, timeout: Duration) -> Result<i64> {
        notify::changed(
            &self.notifier,
            &self.pool,
            self.project,
            seen,
            timeout,
            || self.generation(),
        )
        .await
    }

    async fn begin(&self) -> Result<Box<dyn Tx>> {
        Ok(Box::new(PostgresTx {
            tx: self.write().await?,
            project: self.project,
            link: self.link.clone(),
            appended: None,
        }))
    }

    async fn participants(&self) -> Result<Vec<Participant>> {
        let found = sqlx::query(
            "SELECT name, role, added_at, policy FROM participants WHERE project = $1 \
             ORDER BY name COLLATE \"C\"",
        )
        .bind(self.project)
        .fetch_all(self.pool().await?)
        .await
        .map_err(|e| self.err(e))?;
        found
            .iter()
            .map(decode::participant)
            .collect::<sqlx::Result<_>>()
            .map_err(|e| self.err(e))
    }

    async fn participant(&self, name: &str) -> Result<Option<Participant>> {
        let mut conn = self.conn().await?;
        fetch_participant(&mut conn, self.project, name)
            .await
            .map_err(|e| self.err(e))
    }

    async fn inbox(&self, who: &Passname, all: bool, window: &Window) -> Result<Vec<Envelope>> {
        let sql = if all {
            "SELECT m.id FROM deliveries d \
             JOIN messages m ON m.project = d.project AND m.id = d.message_id \
             WHERE d.project = $1 AND d.participant = $2 AND d.status != 'archived' \
             AND m.seq > $3 ORDER BY m.seq LIMIT $4"
        } else {
            "SELECT m.id FROM deliveries d \
             JOIN messages m ON m.project = d.project AND m.id = d.message_id \
             WHERE d.project = $1 AND d.participant = $2 \
             AND d.status IN ('pending', 'delivered') AND m.seq > $3 ORDER BY m.seq LIMIT $4"
        };
        self.list(sql, who, window).await
    }

    async fn owed(&self, who: &Passname, limit: u32) -> Result<(Vec<Envelope>, u64)> {
        self.counted(
            "SELECT count(*) FROM deliveries \
             WHERE project = $1 AND participant = $2 AND status IN ('pending', 'delivered')",
            "SELECT m.id FROM deliveries d \
             JOIN messages m ON m.project = d.project AND m.id = d.message_id \
             WHERE d.project = $1 AND d.participant = $2 \
             AND d.status IN ('pending', 'delivered') \
             ORDER BY m.type != 'request', m.seq LIMIT $3",
            who,
            limit,
        )
        .await
    }

    async fn outbox(&self, who: &Passname, all: bool, window: &Window) -> Result<Vec<Envelope>> {
        let sql = if all {
            "SELECT id FROM messages WHERE project = $1 AND from_name = $2 \
             AND type = 'request' AND seq > $3 ORDER BY seq LIMIT $4"
        } else {
            "SELECT id FROM messages \
             WHERE project = $1 AND from_name = $2 AND type = 'request' \
             AND request_status != 'archived' AND seq > $3 ORDER BY seq LIMIT $4"
        };
        self.list(sql, who, window).await
    }

    async fn waiting(&self, who: &Passname, limit: u32) -> Result<(Vec<Envelope>, u64)> {
        self.counted(
            "SELECT count(*) FROM messages WHERE project = $1 AND from_name = $2 \
             AND type = 'request' AND request_status != 'archived'",
            "SELECT id FROM messages WHERE project = $1 AND from_name = $2 \
             AND type = 'request' AND request_status != 'archived' ORDER BY seq LIMIT $3",
            who,
            limit,
        )
        .await
    }

    async fn thread(&self, id: &str) -> Result<Vec<Envelope>> {
        let mut tx = self.snapshot().await?;
        let read = async {
            let root: Option<String> =
                sqlx::query_scalar("SELECT root_id FROM messages WHERE project = $1 AND id = $2")
                    .bind(self.project)
                    .bind(id)
                    .fetch_optional(&mut *tx)
                    .await?;
            let Some(root) = root else {
                return Ok(None);
            };
            let ids: Vec<String> = sqlx::query_scalar(
                "SELECT id FROM messages WHERE project = $1 AND root_id = $2 ORDER BY seq",
            )
            .bind(self.project)
            .bind(&root)
            .fetch_all(&mut *tx)
            .await?;
            let flat = load_envelopes(&mut tx, self.project, &ids).await?;
            Ok(Some(depth_first(flat, &root)))
        }
        .await;
        self.done(tx, read)
            .await?
            .ok_or_else(|| Refusal::not_found(Record::Message, id).into())
    }

    async fn search(&self, caller: Option<&Passname>, q: &SearchQuery) -> Result<Page> {
        let limit = q.limit.clamp(1, 100);
        let mut sql = QueryBuilder::<Postgres>::new("SELECT m.seq, m.id FROM messages m");
        if let Some(status) = q.status {
            let caller = caller.ok_or(Refusal::StatusNeedsIdentity)?;
            sql.push(
                " JOIN deliveries mine ON mine.project = m.project \
                 AND mine.message_id = m.id AND mine.participant = ",
            )
            .push_bind(caller.as_str().to_owned())
            .push(" AND mine.status = ")
            .push_bind(status.as_str());
        }
        sql.push(" WHERE m.project = ").push_bind(self.project);
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
            sql.push(
                " AND EXISTS (SELECT 1 FROM deliveries t WHERE t.project = m.project \
                 AND t.message_id = m.id AND t.participant = ",
            )
            .push_bind(to.clone())
            .push(")");
        }
        if let Some(since) = q.since {
            sql.push(" AND m.created_at >= ").push_bind(since);
        }
        if let Some(until) = q.until {
            sql.push(" AND m.created_at < ").push_bind(until);
        }
        let text = q.text.as_deref().filter(|t| !t.is_empty());
        let words = text
            .map(baton_core::search::query_words)
            .unwrap_or_default();
        if !words.is_empty() {
            // Each word must start a word of the payload: a prefix `tsquery` over the
            // GIN-indexed words. The words are letters and digits only, so quoting is safe.
            let query: Vec<String> = words.iter().map(|w| format!("'{w}':*")).collect();
            sql.push(" AND m.words @@ to_tsquery('simple', ")
                .push_bind(query.join(" & "))
                .push(")");
        }
        if let Some(text) = text.filter(|_| words.is_empty()) {
            // Punctuation alone has no words to look up: the stored event's text is read,
            // ignoring ASCII case only, as on SQLite (`lower()` there folds ASCII alone).
            sql.push(
                " AND strpos(translate((SELECT e.data FROM events e \
                 WHERE e.project = m.project AND e.seq = m.seq), \
                 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'), ",
            )
            .push_bind(text.to_ascii_lowercase())
            .push(") > 0");
        }
        if let Some(cursor) = &q.cursor {
            sql.push(" AND m.seq < ").push_bind(decode_cursor(cursor)?);
        }
        sql.push(" ORDER BY m.seq DESC LIMIT ")
            .push_bind(i64::from(limit) + 1);
        let mut tx = self.snapshot().await?;
        let read = async {
            let found: Vec<(i64, String)> = sql.build_query_as().fetch_all(&mut *tx).await?;
            let (ids, next) = decode::page_ids(&found, limit);
            let items = load_envelopes(&mut tx, self.project, &ids).await?;
            Ok(Page { items, next })
        }
        .await;
        self.done(tx, read).await
    }

    async fn events_of_kind(
        &self,
        kind: &str,
        before_seq: Option<i64>,
        limit: u32,
    ) -> Result<Vec<Event>> {
        let found = sqlx::query(
            "SELECT seq, id, at, actor, kind, data FROM events \
             WHERE project = $1 AND kind = $2 AND seq < $3 ORDER BY seq DESC LIMIT $4",
        )
        .bind(self.project)
        .bind(kind)
        .bind(before_seq.unwrap_or(i64::MAX))
        .bind(i64::from(limit))
        .fetch_all(self.pool().await?)
        .await
        .map_err(|e| self.err(e))?;
        decode::events(&found).map_err(|e| self.err(e))
    }

    async fn events(&self, after_seq: i64, limit: u32) -> Result<Vec<Event>> {
        let mut conn = self.conn().await?;
        read_events(&mut conn, self.project, after_seq, i64::from(limit))
            .await
            .map_err(|e| self.err(e))
    }

    async fn state(&self) -> Result<ProjectState> {
        let mut conn = self.conn().await?;
        read_state(&mut conn, self.project)
            .await
            .map_err(|e| self.err(e))
    }

    async fn state_digest(&self) -> Result<StateDigest> {
        let mut conn = self.conn().await?;
        read_digest(&mut conn, self.project)
            .await
            .map_err(|e| self.err(e))
    }

    async fn metrics(&self) -> Result<baton_core::metrics::Metrics> {
        let mut tx = self.snapshot().await?;
        let read = metrics::read(&mut tx, self.project).await;
        self.done(tx, read).await
    }

    async fn attention(&self) -> Result<Attention> {
        let mut tx = self.snapshot().await?;
        let read = attention::read(&mut tx, self.project).await;
        self.done(tx, read).await
    }

    async fn acks(&self, items: &[String]) -> Result<Vec<Option<Millis>>> {
        let mut conn = self.conn().await?;
        attention::acks(&mut conn, self.project, items)
            .await
            .map_err(|e| self.err(e))
    }

    async fn last_change(&self, subject: &str, after_seq: i64) -> Result<Option<Millis>> {
        sqlx::query_scalar(
            "SELECT max(at) FROM events WHERE project = $1 AND subject = $2 AND seq > $3",
        )
        .bind(self.project)
        .bind(subject)
        .bind(after_seq)
        .fetch_one(self.pool().await?)
        .await
        .map_err(|e| self.err(e))
    }

    async fn generation(&self) -> Result<i64> {
        // The counter moves in the same transaction as the events it numbers.
        sqlx::query_scalar("SELECT last_seq FROM projects WHERE id = $1")
            .bind(self.project)
            .fetch_one(self.pool().await?)
            .await
            .map_err(|e| self.err(e))
    }

    async fn message(&self, id: &str) -> Result<Option<(Envelope, Map<String, Value>)>> {
        let mut tx = self.snapshot().await?;
        let read = async {
            let Some(envelope) = envelope(&mut tx, self.project, id).await? else {
                return Ok(None);
            };
            let data: String = sqlx::query_scalar(
                "SELECT e.data FROM events e \
                 JOIN messages m ON m.project = e.project AND m.seq = e.seq \
                 WHERE m.project = $1 AND m.id = $2",
            )
            .bind(self.project)
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
            Ok(Some((envelope, data)))
        }
        .await;
        match self.done(tx, read).await? {
            Some((envelope, data)) => Ok(Some((envelope, decode::payload(id, &data)?))),
            None => Ok(None),
        }
    }

    async fn ids(&self, record: Record, spans: &[Span]) -> Result<Vec<String>> {
        let Some(table) = decode::id_table(record) else {
            return Ok(Vec::new());
        };
        // Compared byte by byte (`C`), whatever the database's collation, as the spans are.
        let sql = format!(
            "SELECT id FROM {table} WHERE project = $1 \
             AND id COLLATE \"C\" >= $2 AND id COLLATE \"C\" < $3 \
             ORDER BY id COLLATE \"C\" LIMIT {}",
            decode::IDS_A_SPAN
        );
        let mut found = Vec::new();
        for span in spans {
            let ids: Vec<String> = sqlx::query_scalar(AssertSqlSafe(sql.clone()))
                .bind(self.project)
                .bind(&span.from)
                .bind(&span.to)
                .fetch_all(self.pool().await?)
                .await
                .map_err(|e| self.err(e))?;
            found.extend(ids);
        }
        Ok(found)
    }

    async fn runs(&self, query: &RunQuery) -> Result<Vec<Run>> {
        runs::query(self.pool().await?, self.project, query)
            .await
            .map_err(|e| self.err(e))
    }

    async fn run_counts(
        &self,
        ended_since: Millis,
        quiet_before: Millis,
        parents: Option<&[String]>,
    ) -> Result<Vec<crate::RunCount>> {
        runs::counts(
            self.pool().await?,
            self.project,
            ended_since,
            quiet_before,
            parents,
        )
        .await
        .map_err(|e| self.err(e))
    }

    async fn failures(&self, since: Millis) -> Result<Vec<Run>> {
        let mut tx = self.snapshot().await?;
        let read = runs::failures(&mut tx, self.project, since).await;
        self.done(tx, read).await
    }

    async fn order(&self, id: &str) -> Result<Option<Order>> {
        let mut conn = self.conn().await?;
        orders::load(&mut conn, self.project, id)
            .await
            .map_err(|e| self.err(e))
    }

    async fn orders(&self, query: &OrderQuery) -> Result<Vec<Order>> {
        orders::query(self.pool().await?, self.project, query)
            .await
            .map_err(|e| self.err(e))
    }

    async fn order_events_since(&self, id: &str, after_seq: i64) -> Result<Vec<Event>> {
        orders::events_since(self.pool().await?, self.project, id, after_seq)
            .await
            .map_err(|e| self.err(e))
    }

    async fn key(&self, id: &str) -> Result<Option<Key>> {
        keys::used(self.pool().await?, self.project, id)
            .await
            .map_err(|e| self.err(e))
    }

    async fn key_used(&self, id: &str, at: Millis) -> Result<()> {
        keys::record_use(self.pool().await?, self.project, id, at)
            .await
            .map_err(|e| self.err(e))
    }

    async fn count_repeat(&self, seq: i64, at: Millis) -> Result<()> {
        sqlx::query(
            "INSERT INTO refusal_repeats (project, seq, count, last_at) VALUES ($1, $2, 1, $3) \
             ON CONFLICT (project, seq) DO UPDATE SET count = refusal_repeats.count + 1, \
             last_at = greatest(refusal_repeats.last_at, excluded.last_at)",
        )
        .bind(self.project)
        .bind(seq)
        .bind(at)
        .execute(self.pool().await?)
        .await
        .map_err(|e| self.err(e))?;
        Ok(())
    }

    async fn repeats(&self, seqs: &[i64]) -> Result<Vec<Repeats>> {
        let found: Vec<(i64, i64, i64)> = sqlx::query_as(
            "SELECT seq, count, last_at FROM refusal_repeats \
             WHERE project = $1 AND seq = ANY($2)",
        )
        .bind(self.project)
        .bind(seqs)
        .fetch_all(self.pool().await?)
        .await
        .map_err(|e| self.err(e))?;
        Ok(found
            .into_iter()
            .map(|(seq, count, last_at)| Repeats {
                seq,
                count,
                last_at,
            })
            .collect())
    }

    async fn keys(&self) -> Result<Vec<Key>> {
        keys::all(self.pool().await?, self.project)
            .await
            .map_err(|e| self.err(e))
    }

    async fn webhook(&self, participant: &str) -> Result<Option<Webhook>> {
        let mut conn = self.conn().await?;
        webhooks::load(&mut conn, self.project, participant)
            .await
            .map_err(|e| self.err(e))
    }

    async fn negotiation(&self, id: &str) -> Result<Option<Negotiation>> {
        let mut conn = self.conn().await?;
        read_negotiation(&mut conn, self.project, id)
            .await
            .map_err(|e| self.err(e))
    }

    async fn events_about(&self, subject: &str, kind: &str) -> Result<Vec<Event>> {
        let mut conn = self.conn().await?;
        read_about(&mut conn, self.project, subject, kind)
            .await
            .map_err(|e| self.err(e))
    }

    async fn webhooks(&self) -> Result<Vec<Webhook>> {
        webhooks::all(self.pool().await?, self.project)
            .await
            .map_err(|e| self.err(e))
    }

    async fn claim_webhook(&self, now: Millis, lease_until: Millis) -> Result<Option<Webhook>> {
        webhooks::claim(self.pool().await?, self.project, now, lease_until)
            .await
            .map_err(|e| self.err(e))
    }

    async fn settle_webhook(&self, hook: &Webhook, settled: Settled) -> Result<()> {
        webhooks::settle(self.pool().await?, self.project, hook, &settled)
            .await
            .map_err(|e| self.err(e))
    }
}

/// A write transaction holding its project's row lock, committed by PostgreSQL's WAL.
struct PostgresTx {
    tx: Transaction<'static, Postgres>,
    project: i64,
    link: Link,
    /// The newest event appended, told to waiters when the transaction commits.
    appended: Option<i64>,
}

impl PostgresTx {
    fn err(&self, e: sqlx::Error) -> StoreError {
        self.link.classify(&e)
    }
}

#[async_trait]
impl Tx for PostgresTx {
    async fn append(&mut self, event: NewEvent) -> Result<Event> {
        let result = append(&mut self.tx, self.project, event).await;
        let event = result.map_err(|e| self.err(e))?;
        self.appended = Some(event.seq);
        Ok(event)
    }

    async fn participant(&mut self, name: &str) -> Result<Option<Participant>> {
        let result = fetch_participant(&mut self.tx, self.project, name).await;
        result.map_err(|e| self.err(e))
    }

    async fn envelope(&mut self, id: &str) -> Result<Option<Envelope>> {
        let result = envelope(&mut self.tx, self.project, id).await;
        result.map_err(|e| self.err(e))
    }

    async fn keyed(&mut self, from: &Passname, key: &str) -> Result<Option<Prior>> {
        let found = sqlx::query(
            "SELECT id, hash, type, topic, reply_to, idempotency_key FROM messages \
             WHERE project = $1 AND from_name = $2 AND idempotency_key = $3",
        )
        .bind(self.project)
        .bind(from.as_str())
        .bind(key)
        .fetch_all(&mut *self.tx)
        .await;
        let found = found.map_err(|e| self.err(e))?;
        let priors = priors(&mut self.tx, self.project, &found).await;
        Ok(priors.map_err(|e| self.err(e))?.pop())
    }

    async fn recent(
        &mut self,
        from: &Passname,
        draft: &Draft,
        since: Millis,
    ) -> Result<Vec<Prior>> {
        let found = sqlx::query(RECENT)
            .bind(self.project)
            .bind(from.as_str())
            .bind(draft.payload.hash())
            .bind(draft.kind.as_str())
            .bind(draft.topic.as_str())
            .bind(&draft.reply_to)
            .bind(since)
            .fetch_all(&mut *self.tx)
            .await;
        let found = found.map_err(|e| self.err(e))?;
        let priors = priors(&mut self.tx, self.project, &found).await;
        priors.map_err(|e| self.err(e))
    }

    async fn order(&mut self, id: &str) -> Result<Option<Order>> {
        let result = orders::load(&mut self.tx, self.project, id).await;
        result.map_err(|e| self.err(e))
    }

    async fn run(&mut self, id: &str) -> Result<Option<Run>> {
        let result = runs::load(&mut self.tx, self.project, id).await;
        result.map_err(|e| self.err(e))
    }

    async fn key(&mut self, id: &str) -> Result<Option<Key>> {
        let result = keys::load(&mut self.tx, self.project, id).await;
        result.map_err(|e| self.err(e))
    }

    async fn webhook(&mut self, participant: &str) -> Result<Option<Webhook>> {
        let result = webhooks::load(&mut self.tx, self.project, participant).await;
        result.map_err(|e| self.err(e))
    }

    async fn negotiation(&mut self, id: &str) -> Result<Option<Negotiation>> {
        let result = read_negotiation(&mut self.tx, self.project, id).await;
        result.map_err(|e| self.err(e))
    }

    async fn events_about(&mut self, subject: &str, kind: &str) -> Result<Vec<Event>> {
        let result = read_about(&mut self.tx, self.project, subject, kind).await;
        result.map_err(|e| self.err(e))
    }

    async fn has_event(&mut self, id: &str) -> Result<bool> {
        let found: sqlx::Result<Option<i32>> =
            sqlx::query_scalar("SELECT 1 FROM events WHERE project = $1 AND id = $2")
                .bind(self.project)
                .bind(id)
                .fetch_optional(&mut *self.tx)
                .await;
        Ok(found.map_err(|e| self.err(e))?.is_some())
    }

    async fn has_event_beyond(&mut self, kinds: &[&str]) -> Result<bool> {
        let found: sqlx::Result<Option<i32>> = sqlx::query_scalar(
            "SELECT 1 FROM events WHERE project = $1 AND kind <> ALL($2) LIMIT 1",
        )
        .bind(self.project)
        .bind(kinds)
        .fetch_optional(&mut *self.tx)
        .await;
        Ok(found.map_err(|e| self.err(e))?.is_some())
    }

    async fn event(&mut self, id: &str) -> Result<Option<Event>> {
        let found = sqlx::query(
            "SELECT seq, id, at, actor, kind, data FROM events WHERE project = $1 AND id = $2",
        )
        .bind(self.project)
        .bind(id)
        .fetch_all(&mut *self.tx)
        .await
        .and_then(|found| decode::events(&found));
        Ok(found.map_err(|e| self.err(e))?.into_iter().next())
    }

    async fn count_beyond_from(&mut self, seq: i64, kinds: &[&str]) -> Result<usize> {
        let n: sqlx::Result<i64> = sqlx::query_scalar(
            "SELECT count(*) FROM events WHERE project = $1 AND seq >= $2 AND kind <> ALL($3)",
        )
        .bind(self.project)
        .bind(seq)
        .bind(kinds)
        .fetch_one(&mut *self.tx)
        .await;
        Ok(usize::try_from(n.map_err(|e| self.err(e))?).unwrap_or(0))
    }

    async fn other_live_run(&mut self, participant: &str, except: &str) -> Result<bool> {
        let result = runs::other_live(&mut self.tx, self.project, participant, except).await;
        result.map_err(|e| self.err(e))
    }

    async fn held(&mut self, participant: &str, since: Millis) -> Result<Vec<String>> {
        let held = sqlx::query_scalar(
            "SELECT message_id FROM deliveries WHERE project = $1 AND participant = $2 \
             AND status = $3 AND updated_at >= $4 ORDER BY updated_at, message_id COLLATE \"C\"",
        )
        .bind(self.project)
        .bind(participant)
        .bind(DeliveryStatus::Delivered.as_str())
        .bind(since)
        .fetch_all(&mut *self.tx)
        .await;
        held.map_err(|e| self.err(e))
    }

    async fn state(&mut self) -> Result<ProjectState> {
        let result = read_state(&mut self.tx, self.project).await;
        result.map_err(|e| self.err(e))
    }

    async fn commit(mut self: Box<Self>) -> Result<()> {
        let link = self.link.clone();
        if let Some(seq) = self.appended {
            // Delivered to listeners when, and only if, the transaction commits.
            let told = sqlx::query("SELECT pg_notify($1, $2)")
                .bind(notify::CHANNEL)
                .bind(format!("{}:{seq}", self.project))
                .execute(&mut *self.tx)
                .await;
            told.map_err(|e| link.classify(&e))?;
        }
        self.tx.commit().await.map_err(|e| link.classify(&e))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn the_url_keeps_its_libpq_parameters_and_names_a_plain_schema() {
        let (options, schema) =
            parse_url("postgres://baton@db.example:5433/shared?schema=team_a&sslmode=disable")
                .unwrap();
        assert_eq!(schema.as_deref(), Some("team_a"));
        assert_eq!(
            place(&options, schema.as_deref()),
            "postgres://baton@db.example:5433/shared?schema=team_a"
        );
        for bad in ["Team", "1a", "a-b", "a;drop", ""] {
            let err = parse_url(&format!("postgres://u@h/db?schema={bad}")).unwrap_err();
            assert!(err.to_string().contains("plain SQL name"), "{bad}: {err}");
        }
    }

    #[test]
    fn messages_never_show_a_password() {
        assert_eq!(
            redact("postgres://baton:s3cret@db:5432/x?schema=a"),
            "postgres://baton:***@db:5432/x?schema=a"
        );
        assert_eq!(redact("postgres://baton@db/x"), "postgres://baton@db/x");
        let (options, _) = parse_url("postgres://baton:s3cret@db/x").unwrap();
        assert!(!place(&options, None).contains("s3cret"));
    }

    /// Project `shop` in a new schema of the tests' database (`baton_testdb`), and that
    /// schema (the test drops it).
    pub(crate) async fn test_store(what: &str) -> (PostgresStore, String) {
        let base = baton_testdb::url();
        let schema = format!(
            "baton_{what}_{}",
            crate::new_id().to_string().to_lowercase()
        );
        let separator = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{separator}schema={schema}");
        let db = PostgresDatabase::connect(&url, Duration::from_secs(5))
            .await
            .unwrap();
        let name = ProjectName::new("shop").unwrap();
        crate::Database::add_project(&db, &name).await.unwrap();
        (db.store(&name).await.unwrap(), schema)
    }

    /// The duplicate check probes its own index, not a walk of the sender's outbox, in the
    /// plan a prepared statement keeps: one made on a new table, and one made once the
    /// table is analyzed holding a sender's many sends of one type and topic. (A table
    /// grown but never analyzed is not covered: there the planner may take any index;
    /// see [`RECENT`].)
    #[tokio::test]
    #[cfg_attr(
        not(baton_test_postgres),
        ignore = "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES"
    )]
    async fn the_duplicate_check_probes_its_index_in_plans_kept_from_a_new_or_an_analyzed_table() {
        use crate::Store;
        use baton_core::{Draft, MessageType, Passname, Payload, Topic};
        let (store, schema) = test_store("plan").await;
        let plan = async |store: &PostgresStore, analyze: &str| -> String {
            let mut conn = store.pool.acquire().await.unwrap();
            let setup = format!(
                "SET plan_cache_mode = force_generic_plan; {analyze} \
                 PREPARE recent AS {RECENT}"
            );
            sqlx::raw_sql(sqlx::AssertSqlSafe(setup))
                .execute(&mut *conn)
                .await
                .unwrap();
            let lines: Vec<String> = sqlx::query_scalar(
                "EXPLAIN EXECUTE recent(1, 'planner', 'h', 'info', 't', NULL, 0)",
            )
            .fetch_all(&mut *conn)
            .await
            .unwrap();
            let _ = sqlx::raw_sql("RESET plan_cache_mode; DEALLOCATE recent")
                .execute(&mut *conn)
                .await;
            lines.join("\n")
        };
        // Never analyzed: no statistics at all.
        let empty = plan(&store, "").await;
        let writes = Store::new(store.clone());
        for who in ["planner", "impl-1"] {
            writes
                .add_participant("@test", &Passname::new(who).unwrap(), "x", None)
                .await
                .unwrap();
        }
        for n in 0..300 {
            let draft = Draft {
                to: vec![Passname::new("impl-1").unwrap()],
                kind: MessageType::Info,
                topic: Topic::new("t").unwrap(),
                reply_to: None,
                payload: Payload::body(&format!("send {n}"), 1024).unwrap(),
                idempotency_key: None,
            };
            writes
                .send(&Passname::new("planner").unwrap(), draft, 0)
                .await
                .unwrap();
        }
        let analyzed = plan(&store, "ANALYZE messages;").await;
        let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
            .execute(&store.pool)
            .await;
        for plan in [empty, analyzed] {
            assert!(
                plan.contains("messages_duplicate") && !plan.contains("messages_outbox"),
                "{plan}"
            );
        }
    }

    #[test]
    fn lock_waits_are_bounded_and_never_unbounded() {
        assert!(begin_bounded(Duration::from_millis(200)).ends_with("lock_timeout = 200"));
        assert!(begin_bounded(Duration::ZERO).ends_with("lock_timeout = 1"));
    }
}
