//! The store's story suite: what participants do with messages, told as short
//! stories against the [`Store`] and run against a fresh store of every backend.
//!
//! A story takes `&Store` and checks what a user can see: who may take which step, what
//! each view shows, and that every refusal writes nothing. The few stories that must reach
//! under the store (replaying the log, tampering with it, holding its write lock) take a
//! [`Backend`] instead. A new backend is one more `impl Backend` and one more line in the
//! `every_backend!` call at the bottom of this file; a new story is a function in its
//! family's module and one line in that module's `stories!` list.
//!
//! This file is the harness: the backends, the helpers every family uses, and the call
//! that runs each family's stories on each backend. The stories are in one module per
//! family, each listing its own:
//! `messages`, `delivery` (the delivery lifecycle as a property), `log` (the log as the
//! truth, writers and waits), `migrations`, `runs`, `state`, `orders`, `review`,
//! `negotiation`, `authority` (and keys), `webhooks`, `reservations`, `portable` and
//! `databases`.
//!
//! SQLite always runs. PostgreSQL runs on the database `BATON_TEST_POSTGRES` names, or on a
//! throwaway cluster of the tests' own where PostgreSQL is installed (`baton-testdb`): each
//! story gets a schema of its own, dropped at the end. Where neither is there, the
//! PostgreSQL stories are listed as ignored, with the reason.

use std::fmt::Debug;
use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use baton_core::authority::{Policy, Power};
use baton_core::message::DEFAULT_PAYLOAD_CAP;
use baton_core::{
    DeliveryStatus, Draft, InvalidTransition, MessageType, Millis, Passname, Payload, ProjectName,
    Refusal, RefusalKind, Topic,
};
use baton_store::{
    DEFAULT_BUSY_TIMEOUT, Database, Envelope, PostgresDatabase, PostgresStore, SqliteStore, Store,
    StoreError, Verb,
};
use sqlx::Connection;
use sqlx::postgres::PgConnection;
use tempfile::TempDir;

mod authority;
mod databases;
mod delivery;
mod log;
mod messages;
mod migrations;
mod negotiation;
mod orders;
mod portable;
mod reservations;
mod review;
mod runs;
mod state;
mod webhooks;

/// The default duplicate window: ten minutes.
const WINDOW: i64 = 10 * 60 * 1000;

/// What a backend offers the suite beyond the [`Store`].
trait Backend: Sized {
    /// A connection that holds the store's write lock until released.
    type Lock;

    /// A fresh, empty store whose writers wait at most `busy_timeout` for the lock.
    async fn fresh(busy_timeout: Duration) -> Self;
    fn store(&self) -> &Store;
    /// Drops every projection and replays the log into them.
    async fn rebuild_projections(&self);
    /// Every projection row, in a stable order.
    async fn projection_dump(&self) -> Vec<String>;
    /// Runs one statement on a separate connection, behind the store's back.
    async fn behind_the_back(&self, sql: &'static str) -> Result<u64, String>;
    /// Takes the write lock from a separate connection.
    async fn hold_write_lock(&self) -> Self::Lock;
    async fn release(lock: Self::Lock);
}

/// The embedded store: one SQLite file in a temporary directory.
struct Sqlite {
    store: SqliteStore,
    handle: Store,
    _dir: TempDir,
}

impl Sqlite {
    fn new(store: SqliteStore, dir: TempDir) -> Self {
        Self {
            handle: Store::new(store.clone()),
            store,
            _dir: dir,
        }
    }

    /// A connection of its own to the store's file.
    fn raw(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.store.path()).expect("a raw connection to the store's file")
    }
}

impl Backend for Sqlite {
    type Lock = rusqlite::Connection;

    async fn fresh(busy_timeout: Duration) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = SqliteStore::create(&dir.path().join("baton.db"), busy_timeout)
            .await
            .expect("a new store");
        Self::new(store, dir)
    }

    fn store(&self) -> &Store {
        &self.handle
    }

    async fn rebuild_projections(&self) {
        self.store.rebuild_projections().await.expect("a rebuild");
    }

    async fn projection_dump(&self) -> Vec<String> {
        self.store.projection_dump().await.expect("a dump")
    }

    async fn behind_the_back(&self, sql: &'static str) -> Result<u64, String> {
        self.raw()
            .execute(sql, [])
            .map(|changed| changed as u64)
            .map_err(|e| e.to_string())
    }

    async fn hold_write_lock(&self) -> rusqlite::Connection {
        let conn = self.raw();
        conn.execute_batch("BEGIN IMMEDIATE")
            .expect("the write lock");
        conn
    }

    async fn release(conn: rusqlite::Connection) {
        conn.execute_batch("ROLLBACK").expect("a rollback");
        conn.close().map_err(|(_, e)| e).expect("a clean close");
    }
}

/// The embedded store with group commit, as a server opens it: concurrent writers share
/// one transaction and one fsync.
struct Grouped(Sqlite);

impl Backend for Grouped {
    type Lock = rusqlite::Connection;

    async fn fresh(busy_timeout: Duration) -> Self {
        let Sqlite {
            store,
            handle,
            _dir,
        } = Sqlite::fresh(busy_timeout).await;
        // The group takes the store's one connection, which no other handle may hold.
        drop(handle);
        Self(Sqlite::new(store.grouped().expect("group commit"), _dir))
    }

    fn store(&self) -> &Store {
        self.0.store()
    }

    async fn rebuild_projections(&self) {
        self.0.rebuild_projections().await;
    }

    async fn projection_dump(&self) -> Vec<String> {
        self.0.projection_dump().await
    }

    async fn behind_the_back(&self, sql: &'static str) -> Result<u64, String> {
        self.0.behind_the_back(sql).await
    }

    async fn hold_write_lock(&self) -> rusqlite::Connection {
        self.0.hold_write_lock().await
    }

    async fn release(conn: rusqlite::Connection) {
        Sqlite::release(conn).await;
    }
}

/// The project every PostgreSQL story writes to.
const PROJECT: &str = "story";

/// A schema of the tests' PostgreSQL database for one test, unique to it and dropped
/// with everything in it when the test ends (even when it fails).
struct Schema {
    base: String,
    name: String,
}

impl Schema {
    fn new() -> Self {
        let base = baton_testdb::url();
        let name = format!(
            "baton_test_{}",
            ulid::Ulid::generate().to_string().to_lowercase()
        );
        Self { base, name }
    }

    /// The database URL with Baton's `schema` parameter. The store's connections carry the
    /// schema's name as their application name, so the drop can find them.
    fn url(&self) -> String {
        let sep = if self.base.contains('?') { '&' } else { '?' };
        format!(
            "{}{sep}schema={name}&application_name={name}",
            self.base,
            name = self.name
        )
    }
}

impl Drop for Schema {
    /// Ends the store's connections (a failed story may leave one in a transaction) and
    /// drops the schema, on a thread of its own because `drop` cannot await.
    fn drop(&mut self) {
        let (base, name) = (self.base.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let mut conn = PgConnection::connect(&base).await?;
                // Not waiting for them to exit here: the drop below waits for their locks.
                sqlx::query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE application_name = $1 AND pid <> pg_backend_pid()",
                )
                .bind(&name)
                .execute(&mut conn)
                .await?;
                let drop = format!("SET lock_timeout = '10s'; DROP SCHEMA \"{name}\" CASCADE");
                sqlx::raw_sql(sqlx::AssertSqlSafe(drop))
                    .execute(&mut conn)
                    .await?;
                conn.close().await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("schema {} was left behind: {dropped:?}", self.name);
        }
    }
}

/// The shared store: project `story` in a fresh schema of the `BATON_TEST_POSTGRES`
/// database.
struct Postgres {
    store: PostgresStore,
    handle: Store,
    _schema: Schema,
}

impl Postgres {
    async fn raw_connection(&self) -> PgConnection {
        PgConnection::connect_with(&self.store.connect_options())
            .await
            .expect("a raw connection to the store's database")
    }
}

impl Backend for Postgres {
    type Lock = PgConnection;

    async fn fresh(busy_timeout: Duration) -> Self {
        let schema = Schema::new();
        let database = PostgresDatabase::connect(&schema.url(), busy_timeout)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", schema.base));
        let project = ProjectName::new(PROJECT).unwrap();
        assert!(database.add_project(&project).await.expect("a new project"));
        let store = database.store(&project).await.expect("the project's store");
        Self {
            handle: Store::new(store.clone()),
            store,
            _schema: schema,
        }
    }

    fn store(&self) -> &Store {
        &self.handle
    }

    async fn rebuild_projections(&self) {
        self.store.rebuild_projections().await.expect("a rebuild");
    }

    async fn projection_dump(&self) -> Vec<String> {
        self.store.projection_dump().await.expect("a dump")
    }

    async fn behind_the_back(&self, sql: &'static str) -> Result<u64, String> {
        let mut conn = self.raw_connection().await;
        let outcome = sqlx::query(sql)
            .execute(&mut conn)
            .await
            .map(|done| done.rows_affected())
            .map_err(|e| e.to_string());
        conn.close().await.expect("a clean close");
        outcome
    }

    async fn hold_write_lock(&self) -> PgConnection {
        let mut conn = self.raw_connection().await;
        sqlx::raw_sql("BEGIN")
            .execute(&mut conn)
            .await
            .expect("a transaction");
        sqlx::query("SELECT id FROM projects WHERE name = $1 FOR UPDATE")
            .bind(PROJECT)
            .execute(&mut conn)
            .await
            .expect("the project's write lock");
        conn
    }

    async fn release(mut conn: PgConnection) {
        sqlx::raw_sql("ROLLBACK")
            .execute(&mut conn)
            .await
            .expect("a rollback");
        conn.close().await.expect("a clean close");
    }
}

fn name(s: &str) -> Passname {
    Passname::new(s).expect("a valid passname")
}

fn draft(to: &[&str], kind: MessageType, topic: &str, body: &str) -> Draft {
    Draft {
        to: to.iter().map(|n| name(n)).collect(),
        kind,
        topic: Topic::new(topic).expect("a valid topic"),
        reply_to: None,
        payload: Payload::body(body, DEFAULT_PAYLOAD_CAP).expect("a valid payload"),
        idempotency_key: None,
    }
}

/// A planner, two executors and an observer who is party to nothing unless named, and
/// may answer what is escalated to it.
async fn cast(store: &Store) {
    let answers = Policy {
        may: [Power::Approve].into(),
        topics: None,
    };
    for (who, role, policy) in [
        ("planner", "planner", None),
        ("exec-1", "executor", None),
        ("exec-2", "executor", None),
        ("observer", "observer", Some(answers)),
    ] {
        store
            .add_participant("@local", &name(who), role, policy)
            .await
            .expect("a new participant");
    }
}

/// Sends a message that must be new, and returns its id.
async fn send(store: &Store, from: &str, draft: Draft) -> String {
    let sent = store
        .send(&name(from), draft, WINDOW)
        .await
        .expect("a send");
    assert!(!sent.duplicate, "{sent:?} should be a new message");
    sent.id
}

async fn generation(store: &Store) -> i64 {
    store.generation().await.expect("the generation")
}

/// The refusals on record: each security event and the repeats counted on it.
async fn refusals(store: &Store) -> i64 {
    let events = store
        .events_of_kind("security.refused", None, 1000)
        .await
        .expect("the security events");
    let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    let repeats = store.repeats(&seqs).await.expect("the repeats");
    events.len() as i64 + repeats.iter().map(|r| r.count).sum::<i64>()
}

/// Runs an attempt the store must refuse, checks that it wrote nothing but, for a
/// forbidden one, its one security event (or a repeat counted on the one it repeats), and
/// returns why.
async fn refused<T: Debug>(
    store: &Store,
    attempt: impl Future<Output = baton_store::Result<T>>,
) -> StoreError {
    let before = generation(store).await;
    let on_record = refusals(store).await;
    let err = attempt.await.expect_err("the store should refuse this");
    let forbidden = matches!(&err, StoreError::Refused(r) if r.kind() == RefusalKind::Forbidden);
    let after = generation(store).await;
    assert!(
        after == before || (forbidden && after == before + 1),
        "a refused command wrote {} events ({err})",
        after - before
    );
    assert_eq!(
        refusals(store).await,
        on_record + i64::from(forbidden),
        "the refusals on record ({err})"
    );
    if after > before {
        let newest = store
            .events_of_kind("security.refused", None, 1)
            .await
            .expect("the security events");
        assert_eq!(newest.first().map(|e| e.seq), Some(after), "{err}");
    }
    err
}

/// Asserts an error's variant and hands the error back.
macro_rules! assert_variant {
    ($err:expr, $pattern:pat) => {{
        let err = $err;
        assert!(
            matches!(err, $pattern),
            "expected {}, got {err:?}",
            stringify!($pattern)
        );
        err
    }};
}
pub(crate) use assert_variant;

fn transition_error(err: StoreError) -> InvalidTransition {
    match err {
        StoreError::Refused(Refusal::Transition(t)) => t,
        other => panic!("expected a refused transition, got {other:?}"),
    }
}

/// The steps a refused transition allows, by name.
fn allowed(t: &InvalidTransition) -> Vec<&'static str> {
    t.allowed.iter().map(|a| a.name()).collect()
}

/// The envelope of `id`, read without side effects (through its thread).
async fn envelope(store: &Store, id: &str) -> Envelope {
    store
        .thread(id)
        .await
        .expect("the message's thread")
        .into_iter()
        .find(|e| e.id == id)
        .expect("the message is in its own thread")
}

async fn status(store: &Store, id: &str, who: &str) -> Option<DeliveryStatus> {
    envelope(store, id).await.status_for(&name(who))
}

fn ids(envelopes: &[Envelope]) -> Vec<String> {
    envelopes.iter().map(|e| e.id.clone()).collect()
}

fn recipients(env: &Envelope) -> Vec<(String, DeliveryStatus)> {
    env.to
        .iter()
        .map(|r| (r.name.to_string(), r.status))
        .collect()
}

fn now_ms() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_millis() as Millis
}

/// Waits until the wall clock has passed `t`, so the next message the store stamps is
/// later than one stamped at `t` (the store reads the clock itself; this spins for at most
/// a millisecond).
async fn clock_passes(t: Millis) {
    while now_ms() <= t {
        tokio::task::yield_now().await;
    }
}

fn step_name(verb: Verb) -> &'static str {
    match verb {
        Verb::Ack => "ack",
        Verb::Complete => "complete",
        Verb::HandBack => "hand-back",
        Verb::Refuse => "refuse",
        Verb::Archive => "archive",
    }
}

/// A small deterministic generator (xorshift64*), so a failing mix replays exactly.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }

    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

/// `item` with the attributes in braces before it.
macro_rules! marked {
    ({ $(#[$attr:meta])* } $item:item) => {
        $(#[$attr])* $item
    };
}
pub(crate) use marked;

/// The tests of one family's stories on one backend, inside that backend's module: each
/// family's `stories!` (in its own file) calls this with its lists — the stories over a
/// [`Store`], those that reach under it (generic over the [`Backend`]), and the models
/// checked by property tests.
macro_rules! on_backend {
    (
        $attrs:tt $backend:ty; $family:ident;
        $(stores: [$($story:ident),* $(,)?];)?
        $(backends: [$($deep:ident),* $(,)?];)?
        $(models: [$($model:ident),* $(,)?];)?
    ) => {
        $($(
            crate::marked!($attrs
            #[tokio::test]
            async fn $story() {
                let backend = <$backend>::fresh(DEFAULT_BUSY_TIMEOUT).await;
                crate::$family::$story(backend.store()).await;
            });
        )*)?
        $($(
            crate::marked!($attrs
            #[tokio::test]
            async fn $deep() {
                crate::$family::$deep::<$backend>().await;
            });
        )*)?
        $($(
            crate::marked!($attrs
            #[test]
            fn $model() {
                crate::$family::$model::<$backend>();
            });
        )*)?
    };
}
pub(crate) use on_backend;

/// Each family's stories on one backend.
macro_rules! each_family {
    ([$($family:ident),* $(,)?] $attrs:tt $backend:ty) => {
        $(crate::$family::stories!($attrs $backend);)*
    };
}

/// Every family's stories, on every backend: a module per backend, so a story runs
/// everywhere or nowhere.
macro_rules! every_backend {
    (families: $families:tt; $($(#[$attr:meta])* $module:ident: $backend:ty),* $(,)?) => {
        $(
            mod $module {
                use super::*;

                each_family!($families { $(#[$attr])* } $backend);
            }
        )*
    };
}

every_backend!(
    families: [
        messages,
        delivery,
        log,
        runs,
        state,
        orders,
        review,
        negotiation,
        authority,
        webhooks,
        reservations,
        portable,
    ];
    sqlite: Sqlite,
    grouped: Grouped,
    #[cfg_attr(not(baton_test_postgres), ignore = "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES")]
    postgres: Postgres,
);
