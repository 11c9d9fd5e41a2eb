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
//! is in `baton_core`, called from the [`Store`]'s writes. It uses no table inheritance and
//! no extensions.
//!
//! This file holds the database and a project's store, the migrations, the one function
//! that appends an event and projects it, and the [`Backend`] and [`Tx`] of a project's
//! store, each a call into the file of its concept: [`conn`] and [`rows`] (connections and
//! rows), [`events`] (the log read back), [`participants`], [`messages`], [`state`],
//! [`runs`], [`orders`], [`keys`], [`webhooks`], [`metrics`] and [`attention`], named as
//! SQLite's are.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
use serde_json::{Map, Value};
use sqlx::postgres::{PgConnection, PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection, Postgres, Row, Transaction};

mod attention;
mod conn;
mod events;
mod hosts;
mod keys;
mod messages;
mod metrics;
mod notify;
mod orders;
mod participants;
mod pools;
mod reservations;
mod rows;
mod runs;
mod state;
mod webhooks;

pub(crate) use self::conn::redact;
use self::conn::{begin_bounded, parse_url, place};
use crate::ReservationQuery;
use crate::decode;
use crate::pools::PoolQuery;
use crate::{
    Attention, Backend, Database, MessageHead, NewEvent, OrderQuery, Page, Repeats, Result,
    RunQuery, SearchQuery, Settled, Store, StoreError, Tx, Window,
};
use hosts::Link;

/// The migration that added the messages' words and the `state` projection: a database
/// made before it has them filled from its logs.
const TEXT_AND_STATE: i64 = 7;

/// The migration that added the metrics' tally: a database made before it has it filled
/// from its logs.
const METRICS: i64 = 10;

/// The migration that added `open_needs` and `stuck_orders`: a database made before it has
/// them filled from its logs.
const ATTENTION: i64 = 11;

/// Schema migrations, applied in order; the `migrations` table records which ran. They are
/// the files of `migrations/`, embedded by the build script in the order of their numbers.
const MIGRATIONS: &[&str] = include!(concat!(env!("OUT_DIR"), "/postgres_migrations.rs"));

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

impl PostgresStore {
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
            let batch = events::read(&mut tx, self.project, after, 1000)
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
        let queries = DUMPS.concat();
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
}

/// Each family's projection rows, for [`PostgresStore::projection_dump`]: a family's file holds its
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

/// The advisory lock that serializes migrations of one place (a schema, or the default
/// search path): the first 8 bytes of a hash of its name.
fn migration_lock(schema: Option<&str>) -> i64 {
    let hash = blake3::hash(format!("baton migrations {}", schema.unwrap_or("")).as_bytes());
    let bytes: [u8; 8] = hash.as_bytes()[..8].try_into().expect("8 bytes");
    i64::from_le_bytes(bytes)
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
                Change::State(_) => state::advance(conn, project, event).await?,
                _ => {}
            }
        }
    }
}

/// The store's clock, for the bookkeeping rows (`projects`, `migrations`).
fn now() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as Millis)
        .unwrap_or(0)
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

/// [`project`] but for the metrics' tally: each family applies the changes that are its
/// own (in its file: `messages::project`, `runs::project`, …) and passes over the rest,
/// as SQLite's do.
async fn project_tables(conn: &mut PgConnection, project: i64, event: &Event) -> sqlx::Result<()> {
    participants::project(conn, project, event).await?;
    messages::project(conn, project, event).await?;
    state::project(conn, project, event).await?;
    runs::project(conn, project, event).await?;
    orders::project(conn, project, event).await?;
    keys::project(conn, project, event).await?;
    webhooks::project(conn, project, event).await?;
    reservations::project(conn, project, event).await?;
    pools::project(conn, project, event).await?;
    attention::project(conn, project, event).await
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
        participants::all(self.pool().await?, self.project)
            .await
            .map_err(|e| self.err(e))
    }

    async fn participant(&self, name: &str) -> Result<Option<Participant>> {
        let mut conn = self.conn().await?;
        participants::load(&mut conn, self.project, name)
            .await
            .map_err(|e| self.err(e))
    }

    async fn inbox(&self, who: &Passname, all: bool, window: &Window) -> Result<Vec<Envelope>> {
        let mut tx = self.snapshot().await?;
        let read = messages::inbox(&mut tx, self.project, who, all, window).await;
        self.done(tx, read).await
    }

    async fn owed(&self, who: &Passname, limit: u32) -> Result<(Vec<Envelope>, u64)> {
        let mut tx = self.snapshot().await?;
        let read = messages::owed(&mut tx, self.project, who, limit).await;
        self.done(tx, read).await
    }

    async fn outbox(&self, who: &Passname, all: bool, window: &Window) -> Result<Vec<Envelope>> {
        let mut tx = self.snapshot().await?;
        let read = messages::outbox(&mut tx, self.project, who, all, window).await;
        self.done(tx, read).await
    }

    async fn waiting(&self, who: &Passname, limit: u32) -> Result<(Vec<Envelope>, u64)> {
        let mut tx = self.snapshot().await?;
        let read = messages::waiting(&mut tx, self.project, who, limit).await;
        self.done(tx, read).await
    }

    async fn owed_heads(&self, who: &Passname, others: u32) -> Result<(Vec<MessageHead>, u64)> {
        let mut tx = self.snapshot().await?;
        let read = messages::owed_heads(&mut tx, self.project, who, others).await;
        self.done(tx, read).await
    }

    async fn waiting_heads(&self, who: &Passname) -> Result<Vec<MessageHead>> {
        let mut tx = self.snapshot().await?;
        let read = messages::waiting_heads(&mut tx, self.project, who).await;
        self.done(tx, read).await
    }

    async fn envelopes(&self, ids: &[String]) -> Result<Vec<Envelope>> {
        let mut tx = self.snapshot().await?;
        let read = messages::envelopes(&mut tx, self.project, ids).await;
        self.done(tx, read).await
    }

    async fn thread(&self, id: &str) -> Result<Vec<Envelope>> {
        let mut tx = self.snapshot().await?;
        let read = messages::thread(&mut tx, self.project, id).await;
        self.done(tx, read)
            .await?
            .ok_or_else(|| Refusal::not_found(Record::Message, id).into())
    }

    async fn search(&self, caller: Option<&Passname>, q: &SearchQuery) -> Result<Page> {
        let (limit, sql) = messages::search_query(self.project, caller, q)?;
        let mut tx = self.snapshot().await?;
        let read = messages::search(&mut tx, self.project, limit, sql).await;
        self.done(tx, read).await
    }

    async fn events_of_kind(
        &self,
        kind: &str,
        before_seq: Option<i64>,
        limit: u32,
    ) -> Result<Vec<Event>> {
        events::of_kind(self.pool().await?, self.project, kind, before_seq, limit)
            .await
            .map_err(|e| self.err(e))
    }

    async fn events(&self, after_seq: i64, limit: u32) -> Result<Vec<Event>> {
        let mut conn = self.conn().await?;
        events::read(&mut conn, self.project, after_seq, i64::from(limit))
            .await
            .map_err(|e| self.err(e))
    }

    async fn state(&self) -> Result<ProjectState> {
        let mut conn = self.conn().await?;
        state::read(&mut conn, self.project)
            .await
            .map_err(|e| self.err(e))
    }

    async fn state_digest(&self) -> Result<StateDigest> {
        let mut conn = self.conn().await?;
        state::digest(&mut conn, self.project)
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
        events::last_change(self.pool().await?, self.project, subject, after_seq)
            .await
            .map_err(|e| self.err(e))
    }

    async fn generation(&self) -> Result<i64> {
        events::generation(self.pool().await?, self.project)
            .await
            .map_err(|e| self.err(e))
    }

    async fn message(&self, id: &str) -> Result<Option<(Envelope, Map<String, Value>)>> {
        let mut tx = self.snapshot().await?;
        let read = messages::message(&mut tx, self.project, id).await;
        match self.done(tx, read).await? {
            Some((envelope, data)) => Ok(Some((envelope, decode::payload(id, &data)?))),
            None => Ok(None),
        }
    }

    async fn ids(&self, record: Record, spans: &[Span]) -> Result<Vec<String>> {
        let Some(table) = decode::id_table(record) else {
            return Ok(Vec::new());
        };
        rows::ids(self.pool().await?, self.project, table, spans)
            .await
            .map_err(|e| self.err(e))
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

    async fn waits(&self, ids: &[String]) -> Result<Vec<(String, Order)>> {
        let mut conn = self.conn().await?;
        orders::waits(&mut conn, self.project, ids)
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
        events::count_repeat(self.pool().await?, self.project, seq, at)
            .await
            .map_err(|e| self.err(e))
    }

    async fn repeats(&self, seqs: &[i64]) -> Result<Vec<Repeats>> {
        events::repeats(self.pool().await?, self.project, seqs)
            .await
            .map_err(|e| self.err(e))
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
        events::negotiation(&mut conn, self.project, id)
            .await
            .map_err(|e| self.err(e))
    }

    async fn events_about(&self, subject: &str, kind: &str) -> Result<Vec<Event>> {
        let mut conn = self.conn().await?;
        events::about(&mut conn, self.project, subject, kind)
            .await
            .map_err(|e| self.err(e))
    }

    async fn reservations(&self, query: &ReservationQuery) -> Result<Vec<Reservation>> {
        let mut conn = self.conn().await?;
        reservations::query(&mut conn, self.project, query)
            .await
            .map_err(|e| self.err(e))
    }

    async fn pool_items(&self, query: &PoolQuery) -> Result<Vec<baton_core::pool::Item>> {
        let mut conn = self.conn().await?;
        pools::query(&mut conn, self.project, query)
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
        let result = participants::load(&mut self.tx, self.project, name).await;
        result.map_err(|e| self.err(e))
    }

    async fn envelope(&mut self, id: &str) -> Result<Option<Envelope>> {
        let result = messages::envelope(&mut self.tx, self.project, id).await;
        result.map_err(|e| self.err(e))
    }

    async fn keyed(&mut self, from: &Passname, key: &str) -> Result<Option<Prior>> {
        let result = messages::keyed(&mut self.tx, self.project, from, key).await;
        result.map_err(|e| self.err(e))
    }

    async fn recent(
        &mut self,
        from: &Passname,
        draft: &Draft,
        since: Millis,
    ) -> Result<Vec<Prior>> {
        let result = messages::recent(&mut self.tx, self.project, from, draft, since).await;
        result.map_err(|e| self.err(e))
    }

    async fn order(&mut self, id: &str) -> Result<Option<Order>> {
        let result = orders::load(&mut self.tx, self.project, id).await;
        result.map_err(|e| self.err(e))
    }

    async fn waits(&mut self, ids: &[String]) -> Result<Vec<(String, Order)>> {
        let result = orders::waits(&mut self.tx, self.project, ids).await;
        result.map_err(|e| self.err(e))
    }

    async fn waiting_on(&mut self, id: &str) -> Result<Vec<Order>> {
        let result = orders::waiting_on(&mut self.tx, self.project, id).await;
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
        let result = events::negotiation(&mut self.tx, self.project, id).await;
        result.map_err(|e| self.err(e))
    }

    async fn events_about(&mut self, subject: &str, kind: &str) -> Result<Vec<Event>> {
        let result = events::about(&mut self.tx, self.project, subject, kind).await;
        result.map_err(|e| self.err(e))
    }

    async fn reservations(&mut self, query: &ReservationQuery) -> Result<Vec<Reservation>> {
        let result = reservations::query(&mut self.tx, self.project, query).await;
        result.map_err(|e| self.err(e))
    }

    async fn activity(&mut self, participant: &str) -> Result<Option<Millis>> {
        let result = reservations::activity(&mut self.tx, self.project, participant).await;
        result.map_err(|e| self.err(e))
    }

    async fn pool_items(&mut self, query: &PoolQuery) -> Result<Vec<baton_core::pool::Item>> {
        let result = pools::query(&mut self.tx, self.project, query).await;
        result.map_err(|e| self.err(e))
    }

    async fn participants(&mut self) -> Result<Vec<Participant>> {
        let result = pools::participants(&mut self.tx, self.project).await;
        result.map_err(|e| self.err(e))
    }

    async fn has_event(&mut self, id: &str) -> Result<bool> {
        let result = events::has(&mut self.tx, self.project, id).await;
        result.map_err(|e| self.err(e))
    }

    async fn has_event_beyond(&mut self, kinds: &[&str]) -> Result<bool> {
        let result = events::any_beyond(&mut self.tx, self.project, kinds).await;
        result.map_err(|e| self.err(e))
    }

    async fn event(&mut self, id: &str) -> Result<Option<Event>> {
        let result = events::by_id(&mut self.tx, self.project, id).await;
        result.map_err(|e| self.err(e))
    }

    async fn count_beyond_from(&mut self, seq: i64, kinds: &[&str]) -> Result<usize> {
        let result = events::count_beyond_from(&mut self.tx, self.project, seq, kinds).await;
        result.map_err(|e| self.err(e))
    }

    async fn other_live_run(&mut self, participant: &str, except: &str) -> Result<bool> {
        let result = runs::other_live(&mut self.tx, self.project, participant, except).await;
        result.map_err(|e| self.err(e))
    }

    async fn held(&mut self, participant: &str, since: Millis) -> Result<Vec<String>> {
        let result = messages::held(&mut self.tx, self.project, participant, since).await;
        result.map_err(|e| self.err(e))
    }

    async fn state(&mut self) -> Result<ProjectState> {
        let result = state::read(&mut self.tx, self.project).await;
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

    /// The scripts a store made before migrations were read from their directory has run
    /// are the ones it ran then, in the same order: its recorded `migrations` rows means what it
    /// meant, and it opens unchanged.
    #[test]
    fn the_embedded_migrations_begin_with_the_ones_stores_have_run() {
        let before: &[&str] = &[
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
            include_str!("migrations/015_reservations.sql"),
        ];
        assert!(MIGRATIONS.len() >= before.len());
        for (number, (now, then)) in (1..).zip(MIGRATIONS.iter().zip(before)) {
            assert_eq!(now, then, "migration {number}");
        }
    }
}
