//! The store's story suite: what participants do with messages, told as short
//! stories against the [`Store`] trait and run against a fresh store of every backend.
//!
//! A story takes `&Store` and checks what a user can see: who may take which step, what
//! each view shows, and that every refusal writes nothing. The few stories that must reach
//! under the trait (replaying the log, tampering with it, holding its write lock) take a
//! [`Backend`] instead. A new backend is one more `impl Backend` and one more `stories!`
//! line at the bottom of this file.
//!
//! SQLite always runs. PostgreSQL runs on the database `BATON_TEST_POSTGRES` names, or on a
//! throwaway cluster of the tests' own where PostgreSQL is installed (`baton-testdb`): each
//! story gets a schema of its own, dropped at the end. Where neither is there, the
//! PostgreSQL stories are listed as ignored, with the reason.

use std::fmt::Debug;
use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use baton_core::authority::{Denied, Policy, Power};
use baton_core::delivery::{request_transition, transition};
use baton_core::message::DEFAULT_PAYLOAD_CAP;
use baton_core::metrics::{MessageFacts, Replay, Tally};
use baton_core::order::{OrderChange, OrderRequest, OrderStatus};
use baton_core::run::{
    HookCall, ProcessRef, Progress, Registration, Run, RunChange, RunStatus, TokenUsage,
};
use baton_core::state::StateOp;
use baton_core::{
    Change, DeliveryAction, DeliveryStatus, Draft, Field, InvalidTransition, MessageType, Millis,
    Passname, Payload, ProjectName, Record, Refusal, RefusalKind, RequestAction, RequestStatus,
    Topic,
};
use baton_store::{
    DEFAULT_BUSY_TIMEOUT, Database, End, Envelope, NewEvent, OrderQuery, PostgresDatabase,
    PostgresStore, RunQuery, SearchQuery, Sent, Settled, SqliteStore, Store, StoreError, Verb,
    Window,
};
use proptest::prelude::*;
use sqlx::Connection;
use sqlx::postgres::PgConnection;
use tempfile::TempDir;

use DeliveryStatus::{Acknowledged, Archived, Completed, Delivered, HandedBack, Pending, Refused};
use MessageType::{Info, Request};

/// The default duplicate window: ten minutes.
const WINDOW: i64 = 10 * 60 * 1000;

// ---------------------------------------------------------------------------------------
// Backends
// ---------------------------------------------------------------------------------------

/// What a backend offers the suite beyond the [`Store`] trait.
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

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

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

/// One search filter, so a table of searches reads as data.
#[derive(Debug, Clone, Copy)]
enum Filter<'a> {
    Topic(&'a str),
    Kind(MessageType),
    Sender(&'a str),
    Recipient(&'a str),
    Since(Millis),
    Until(Millis),
    /// The caller's own delivery status.
    Mine(&'a str, DeliveryStatus),
    Text(&'a str),
}
use Filter as F;

/// The caller and the query (one page of up to 100) that `filters` describe.
fn search_for(filters: &[Filter<'_>]) -> (Option<Passname>, SearchQuery) {
    let mut caller = None;
    let mut q = SearchQuery {
        limit: 100,
        ..SearchQuery::default()
    };
    for filter in filters {
        match *filter {
            F::Topic(t) => q.topic = Some(t.into()),
            F::Kind(k) => q.kind = Some(k),
            F::Sender(n) => q.from = Some(n.into()),
            F::Recipient(n) => q.to = Some(n.into()),
            F::Since(t) => q.since = Some(t),
            F::Until(t) => q.until = Some(t),
            F::Mine(who, status) => (caller, q.status) = (Some(name(who)), Some(status)),
            F::Text(text) => q.text = Some(text.into()),
        }
    }
    (caller, q)
}

// ---------------------------------------------------------------------------------------
// Stories
// ---------------------------------------------------------------------------------------

/// Story 1: Participants are registered once; messages name only registered participants.
async fn participants_register_once_and_gate_every_message(store: &Store) {
    let added = store
        .add_participant("@local", &name("planner"), "planner", None)
        .await
        .unwrap();
    assert!(added.created);
    assert_eq!(added.participant.name, name("planner"));
    assert_eq!(added.participant.role, "planner");
    store
        .add_participant("@local", &name("exec-1"), "executor", None)
        .await
        .unwrap();

    let listed: Vec<(String, String)> = store
        .participants()
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.name.to_string(), p.role))
        .collect();
    assert_eq!(
        listed,
        [
            ("exec-1".to_owned(), "executor".to_owned()),
            ("planner".to_owned(), "planner".to_owned()),
        ]
    );
    assert_eq!(
        store.participant("planner").await.unwrap(),
        Some(added.participant.clone())
    );
    assert_eq!(store.participant("nobody").await.unwrap(), None);

    // Adding the same name with the same role again is harmless and writes nothing.
    let before = generation(store).await;
    let again = store
        .add_participant("@local", &name("planner"), "planner", None)
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.participant, added.participant);
    assert_eq!(generation(store).await, before);

    // A different role is a conflict, and the role stays what it was.
    assert_variant!(
        refused(
            store,
            store.add_participant("@local", &name("planner"), "executor", None)
        )
        .await,
        StoreError::Refused(Refusal::RoleTaken { .. })
    );
    assert_eq!(
        store.participant("planner").await.unwrap().unwrap().role,
        "planner"
    );

    // Sending as or to someone unregistered stores nothing.
    let err = refused(
        store,
        store.send(
            &name("ghost"),
            draft(&["planner"], Info, "lane", "boo"),
            WINDOW,
        ),
    )
    .await;
    assert!(
        matches!(&err, StoreError::Refused(Refusal::UnknownParticipant { name }) if name == "ghost"),
        "{err:?}"
    );
    let err = refused(
        store,
        store.send(
            &name("planner"),
            draft(&["exec-1", "ghost"], Request, "lane", "do it"),
            WINDOW,
        ),
    )
    .await;
    assert!(
        matches!(&err, StoreError::Refused(Refusal::UnknownParticipant { name }) if name == "ghost"),
        "{err:?}"
    );
    let everything = SearchQuery {
        limit: 100,
        ..SearchQuery::default()
    };
    assert!(
        store
            .search(None, &everything)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        store
            .inbox(&name("exec-1"), true, &Window::EVERYTHING)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Story 2: A request to two executors reaches each inbox; the outbox tracks each recipient
/// separately.
async fn a_request_reaches_each_recipient_and_the_outbox_tracks_each(store: &Store) {
    cast(store).await;
    let id = send(
        store,
        "planner",
        draft(
            &["exec-1", "exec-2"],
            Request,
            "handoff",
            "migrate the export",
        ),
    )
    .await;

    for who in ["exec-1", "exec-2"] {
        let inbox = store
            .inbox(&name(who), false, &Window::EVERYTHING)
            .await
            .unwrap();
        assert_eq!(ids(&inbox), [id.as_str()], "{who}'s inbox");
        let env = &inbox[0];
        assert_eq!(env.status_for(&name(who)), Some(Pending));
        assert_eq!(env.from, name("planner"));
        assert_eq!(env.kind, Request);
        assert_eq!(env.topic.as_str(), "handoff");
        assert_eq!(env.excerpt, "migrate the export");
        assert_eq!((env.depth, env.reply_to.as_deref()), (0, None));
        assert_eq!(env.request_status, Some(RequestStatus::Open));
    }
    assert!(
        store
            .inbox(&name("planner"), true, &Window::EVERYTHING)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .inbox(&name("observer"), true, &Window::EVERYTHING)
            .await
            .unwrap()
            .is_empty()
    );

    let outbox = store
        .outbox(&name("planner"), false, &Window::EVERYTHING)
        .await
        .unwrap();
    assert_eq!(ids(&outbox), [id.as_str()]);
    assert_eq!(
        recipients(&outbox[0]),
        [("exec-1".into(), Pending), ("exec-2".into(), Pending)]
    );
    assert_eq!(outbox[0].replies, 0);

    // One recipient fetching moves only its own status.
    store.fetch(Some(&name("exec-1")), &id).await.unwrap();
    let outbox = store
        .outbox(&name("planner"), false, &Window::EVERYTHING)
        .await
        .unwrap();
    assert_eq!(
        recipients(&outbox[0]),
        [("exec-1".into(), Delivered), ("exec-2".into(), Pending)]
    );
    let inbox = store
        .inbox(&name("exec-1"), false, &Window::EVERYTHING)
        .await
        .unwrap();
    assert_eq!(ids(&inbox), [id.as_str()], "delivered is still owed");
    assert_eq!(inbox[0].status_for(&name("exec-1")), Some(Delivered));

    // Completing takes it out of that recipient's inbox only; the sender's end stays open.
    store
        .step(&name("exec-1"), &id, Verb::Complete, None)
        .await
        .unwrap();
    assert!(
        store
            .inbox(&name("exec-1"), false, &Window::EVERYTHING)
            .await
            .unwrap()
            .is_empty()
    );
    let all = store
        .inbox(&name("exec-1"), true, &Window::EVERYTHING)
        .await
        .unwrap();
    assert_eq!(ids(&all), [id.as_str()]);
    assert_eq!(all[0].status_for(&name("exec-1")), Some(Completed));
    assert_eq!(
        ids(&store
            .inbox(&name("exec-2"), false, &Window::EVERYTHING)
            .await
            .unwrap()),
        [id.as_str()]
    );
    let outbox = store
        .outbox(&name("planner"), false, &Window::EVERYTHING)
        .await
        .unwrap();
    assert_eq!(
        recipients(&outbox[0]),
        [("exec-1".into(), Completed), ("exec-2".into(), Pending)]
    );
    assert_eq!(outbox[0].request_status, Some(RequestStatus::Open));
    assert!(
        store
            .outbox(&name("exec-1"), true, &Window::EVERYTHING)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Story 3: Fetching delivers only to a pending recipient, and only once.
async fn fetching_delivers_once_and_only_to_a_pending_recipient(store: &Store) {
    cast(store).await;
    let id = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "handoff", "fix the date filter"),
    )
    .await;

    // The sender, an anonymous reader and a non-party read it without delivering it.
    for reader in [Some("planner"), None, Some("observer"), Some("exec-2")] {
        let before = generation(store).await;
        let reader_name = reader.map(name);
        let fetched = store.fetch(reader_name.as_ref(), &id).await.unwrap();
        assert_eq!(fetched.status, None, "{reader:?} is not a recipient");
        assert_eq!(fetched.payload["body"], "fix the date filter");
        assert_eq!(
            generation(store).await,
            before,
            "{reader:?}'s read wrote events"
        );
        assert_eq!(status(store, &id, "exec-1").await, Some(Pending));
    }

    // A recipient's status carries the time of the event that set it: the send's until
    // it moves.
    let sent_at = store.events_about(&id, "message.sent").await.unwrap()[0].at;
    assert_eq!(envelope(store, &id).await.to[0].changed_at, sent_at);
    clock_passes(sent_at).await;

    // The recipient's first fetch delivers it: one event, by the recipient.
    let before = generation(store).await;
    let fetched = store.fetch(Some(&name("exec-1")), &id).await.unwrap();
    assert_eq!(fetched.status, Some(Delivered));
    assert_eq!(
        fetched.envelope.status_for(&name("exec-1")),
        Some(Delivered)
    );
    assert_eq!(fetched.payload["body"], "fix the date filter");
    assert_eq!(generation(store).await, before + 1);
    let events = store.events(before, 10).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].actor, "exec-1");
    assert_eq!(events[0].change.kind(), "delivery.changed");
    assert_eq!(events[0].change.subject(), id);
    assert!(events[0].at > sent_at);
    assert_eq!(fetched.envelope.to[0].changed_at, events[0].at);
    assert_eq!(envelope(store, &id).await.to[0].changed_at, events[0].at);

    // A re-read is not a new fact.
    let fetched = store.fetch(Some(&name("exec-1")), &id).await.unwrap();
    assert_eq!(fetched.status, Some(Delivered));
    assert_eq!(generation(store).await, before + 1);

    // Nor does re-reading a finished delivery reopen it.
    store
        .step(&name("exec-1"), &id, Verb::Complete, None)
        .await
        .unwrap();
    let after_complete = generation(store).await;
    let fetched = store.fetch(Some(&name("exec-1")), &id).await.unwrap();
    assert_eq!(fetched.status, Some(Completed));
    assert_eq!(generation(store).await, after_complete);
}

/// Story 4: A step the lifecycle forbids is refused with the current status and what is
/// allowed, and writes nothing.
async fn invalid_transitions_are_refused_and_write_nothing(store: &Store) {
    cast(store).await;
    let exec = name("exec-1");
    let request = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "t", "a request"),
    )
    .await;
    let info = send(store, "planner", draft(&["exec-1"], Info, "t", "an info")).await;

    // Acknowledging an unread request: fetch it first.
    let t = transition_error(refused(store, store.step(&exec, &request, Verb::Ack, None)).await);
    assert_eq!(t.status, "pending");
    assert!(allowed(&t).contains(&"show"), "{t}");
    assert!(!allowed(&t).contains(&"ack"), "{t}");
    assert_eq!(status(store, &request, "exec-1").await, Some(Pending));

    // An info is acknowledged, never completed or handed back; nothing is archived unread.
    store.fetch(Some(&exec), &info).await.unwrap();
    let t = transition_error(refused(store, store.step(&exec, &info, Verb::Complete, None)).await);
    assert_eq!(t.status, "delivered");
    assert!(allowed(&t).contains(&"ack"), "{t}");
    let t = transition_error(
        refused(
            store,
            store.step(&exec, &info, Verb::HandBack, Some("no reply is posted")),
        )
        .await,
    );
    assert_eq!(t.status, "delivered");
    let t = transition_error(refused(store, store.step(&exec, &info, Verb::Archive, None)).await);
    assert_eq!(t.status, "delivered");
    assert_eq!(status(store, &info, "exec-1").await, Some(Delivered));

    // A delivered request is discharged, not acknowledged, and not archived before that.
    store.fetch(Some(&exec), &request).await.unwrap();
    for verb in [Verb::Ack, Verb::Archive] {
        let t = transition_error(refused(store, store.step(&exec, &request, verb, None)).await);
        assert_eq!(t.status, "delivered");
        assert_eq!(allowed(&t), ["refuse", "complete", "hand_back"]);
    }

    // Final statuses allow only what the table lists.
    store.step(&exec, &info, Verb::Ack, None).await.unwrap();
    assert_eq!(status(store, &info, "exec-1").await, Some(Acknowledged));
    let t = transition_error(refused(store, store.step(&exec, &info, Verb::Ack, None)).await);
    assert_eq!((t.status, allowed(&t)), ("acknowledged", vec!["archive"]));
    store.step(&exec, &info, Verb::Archive, None).await.unwrap();
    let t = transition_error(refused(store, store.step(&exec, &info, Verb::Archive, None)).await);
    assert_eq!(t.status, "archived");
    assert!(t.allowed.is_empty());
    assert_eq!(status(store, &info, "exec-1").await, Some(Archived));
}

/// Story 5: Handing back and refusing need a reason; the reason (and a completion note) is
/// posted to the sender as a threaded reply.
async fn a_reason_is_required_and_threaded_back_to_the_sender(store: &Store) {
    cast(store).await;
    let (exec1, exec2) = (name("exec-1"), name("exec-2"));
    let id = send(
        store,
        "planner",
        draft(
            &["exec-1", "exec-2"],
            Request,
            "handoff",
            "export the report",
        ),
    )
    .await;
    store.fetch(Some(&exec1), &id).await.unwrap();

    for note in [None, Some(""), Some("   ")] {
        assert_variant!(
            refused(store, store.step(&exec1, &id, Verb::HandBack, note)).await,
            StoreError::Refused(Refusal::Missing(Field::Reason))
        );
        assert_variant!(
            refused(store, store.step(&exec2, &id, Verb::Refuse, note)).await,
            StoreError::Refused(Refusal::Missing(Field::Reason))
        );
    }
    assert_eq!(status(store, &id, "exec-1").await, Some(Delivered));
    assert_eq!(status(store, &id, "exec-2").await, Some(Pending));

    // Handing back posts the blocker as a message in the thread, to the sender.
    let stepped = store
        .step(&exec1, &id, Verb::HandBack, Some("blocked on fixtures"))
        .await
        .unwrap();
    assert_eq!(
        (stepped.end, stepped.from, stepped.status),
        (End::Recipient, "delivered", "handed_back")
    );
    let blocker = stepped.reply.expect("a reply carrying the reason");
    let env = envelope(store, &blocker).await;
    assert_eq!(env.from, exec1);
    assert_eq!(recipients(&env), [("planner".into(), Pending)]);
    assert_eq!(env.kind, MessageType::Message);
    assert_eq!(env.topic.as_str(), "handoff");
    assert_eq!((env.reply_to.as_deref(), env.depth), (Some(id.as_str()), 1));
    let fetched = store.fetch(None, &blocker).await.unwrap();
    assert_eq!(fetched.payload["body"], "blocked on fixtures");

    // Refusing from pending does the same.
    let stepped = store
        .step(&exec2, &id, Verb::Refuse, Some("out of scope"))
        .await
        .unwrap();
    assert_eq!((stepped.from, stepped.status), ("pending", "refused"));
    let refusal = stepped.reply.expect("a reply carrying the reason");
    assert_eq!(
        envelope(store, &refusal).await.reply_to.as_deref(),
        Some(id.as_str())
    );

    let inbox = ids(&store
        .inbox(&name("planner"), false, &Window::EVERYTHING)
        .await
        .unwrap());
    assert_eq!(inbox, [blocker.clone(), refusal.clone()]);
    let thread = store.thread(&id).await.unwrap();
    assert_eq!(ids(&thread), [id.clone(), blocker, refusal]);
    assert_eq!(thread[0].replies, 2);
    let env = envelope(store, &id).await;
    assert_eq!(
        recipients(&env),
        [("exec-1".into(), HandedBack), ("exec-2".into(), Refused)]
    );

    // A completion note is posted as an info; a completion without one posts nothing.
    let noted = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "handoff", "noted"),
    )
    .await;
    store.fetch(Some(&exec1), &noted).await.unwrap();
    let stepped = store
        .step(&exec1, &noted, Verb::Complete, Some("fixed in 4f2a91c"))
        .await
        .unwrap();
    let report = stepped.reply.expect("a reply carrying the note");
    let env = envelope(store, &report).await;
    assert_eq!(env.kind, Info);
    assert_eq!(
        (env.reply_to.as_deref(), env.depth),
        (Some(noted.as_str()), 1)
    );
    assert_eq!(recipients(&env), [("planner".into(), Pending)]);
    assert_eq!(
        store.fetch(None, &report).await.unwrap().payload["body"],
        "fixed in 4f2a91c"
    );

    let quiet = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "handoff", "quiet"),
    )
    .await;
    store.fetch(Some(&exec1), &quiet).await.unwrap();
    let before = generation(store).await;
    let stepped = store
        .step(&exec1, &quiet, Verb::Complete, None)
        .await
        .unwrap();
    assert_eq!(stepped.reply, None);
    assert_eq!(generation(store).await, before + 1);
}

/// Story 5b: Whatever step a recipient's note rides on, the reply that carries it must not
/// claim a different step: either the store refuses the note (writing nothing), or the
/// reply's payload names the status that was actually reached, as it does for
/// `completed`, `refused` and `handed_back`.
async fn a_note_reply_names_the_step_that_was_taken(store: &Store) {
    cast(store).await;
    let exec = name("exec-1");
    let request = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "t", "a request"),
    )
    .await;
    let info = send(store, "planner", draft(&["exec-1"], Info, "t", "an info")).await;
    let refuse_me = send(store, "planner", draft(&["exec-1"], Info, "t", "refuse me")).await;
    store.fetch(Some(&exec), &request).await.unwrap();
    store.fetch(Some(&exec), &info).await.unwrap();

    let mut mislabelled = Vec::new();
    for (id, verb) in [
        (&request, Verb::Complete),
        (&refuse_me, Verb::Refuse),
        (&info, Verb::Ack),
        (&info, Verb::Archive),
        (&request, Verb::Archive),
    ] {
        let before = generation(store).await;
        match store.step(&exec, id, verb, Some("a note")).await {
            Err(StoreError::Refused(r))
                if r.kind() == RefusalKind::Invalid && !matches!(r, Refusal::Transition(_)) =>
            {
                let after = generation(store).await;
                assert_eq!(after, before, "a refused note wrote events");
            }
            Err(other) => panic!("{} with a note: {other:?}", step_name(verb)),
            Ok(stepped) => {
                let reply = stepped.reply.expect("a note is posted as a reply");
                let payload = store.fetch(None, &reply).await.unwrap().payload;
                let claimed: Vec<&String> = payload.keys().filter(|k| *k != "body").collect();
                if claimed != [stepped.status] || payload[stepped.status] != id.as_str() {
                    mislabelled.push(format!(
                        "`{}` moved the delivery to {} but its reply says {payload:?}",
                        step_name(verb),
                        stepped.status
                    ));
                }
            }
        }
    }
    assert!(mislabelled.is_empty(), "{mislabelled:#?}");
}

/// Story 6: The sender closes its own end of a request (complete, then archive); the other
/// steps are its recipients', and a third participant takes none.
async fn the_sender_closes_its_own_end_of_a_request(store: &Store) {
    cast(store).await;
    let planner = name("planner");
    let id = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "handoff", "ship it"),
    )
    .await;

    for (verb, note) in [
        (Verb::Ack, None),
        (Verb::HandBack, Some("not mine")),
        (Verb::Refuse, Some("not mine")),
    ] {
        assert_variant!(
            refused(store, store.step(&planner, &id, verb, note)).await,
            StoreError::Refused(Refusal::SenderSteps { .. })
        );
    }
    for verb in [Verb::Ack, Verb::Complete, Verb::Archive] {
        assert_variant!(
            refused(store, store.step(&name("observer"), &id, verb, None)).await,
            StoreError::Refused(Refusal::NotAParty { .. })
        );
    }
    // Its own end is completed before it is archived, and a note goes in a reply instead.
    let t = transition_error(refused(store, store.step(&planner, &id, Verb::Archive, None)).await);
    assert_eq!((t.status, allowed(&t)), ("open", vec!["complete"]));
    assert_variant!(
        refused(
            store,
            store.step(&planner, &id, Verb::Complete, Some("thanks"))
        )
        .await,
        StoreError::Refused(Refusal::SenderNote)
    );

    let stepped = store
        .step(&planner, &id, Verb::Complete, None)
        .await
        .unwrap();
    assert_eq!(
        (stepped.end, stepped.from, stepped.status, stepped.reply),
        (End::Sender, "open", "completed", None)
    );
    let env = envelope(store, &id).await;
    assert_eq!(env.request_status, Some(RequestStatus::Completed));
    assert_eq!(
        recipients(&env),
        [("exec-1".into(), Pending)],
        "independent ends"
    );
    assert_eq!(
        ids(&store
            .outbox(&planner, false, &Window::EVERYTHING)
            .await
            .unwrap()),
        [id.as_str()]
    );
    // The bounded view lists at most its limit and counts every open one.
    let (first, total) = store.waiting(&planner, 10).await.unwrap();
    assert_eq!((ids(&first), total), (vec![id.clone()], 1));
    let (first, total) = store.waiting(&planner, 0).await.unwrap();
    assert_eq!((first.len(), total), (0, 1));

    let stepped = store
        .step(&planner, &id, Verb::Archive, None)
        .await
        .unwrap();
    assert_eq!(
        (stepped.end, stepped.from, stepped.status),
        (End::Sender, "completed", "archived")
    );
    assert!(
        store
            .outbox(&planner, false, &Window::EVERYTHING)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.waiting(&planner, 10).await.unwrap().1, 0);
    let all = store
        .outbox(&planner, true, &Window::EVERYTHING)
        .await
        .unwrap();
    assert_eq!(ids(&all), [id.as_str()]);
    assert_eq!(all[0].request_status, Some(RequestStatus::Archived));
    let t = transition_error(refused(store, store.step(&planner, &id, Verb::Archive, None)).await);
    assert!(t.allowed.is_empty());

    // An info has no sender's end to close.
    let info = send(store, "planner", draft(&["exec-1"], Info, "handoff", "fyi")).await;
    assert_variant!(
        refused(store, store.step(&planner, &info, Verb::Complete, None)).await,
        StoreError::Refused(Refusal::NotARequest { .. })
    );
}

/// Story 7: A repeated send inside the window, or with a used idempotency key, returns the
/// original.
async fn duplicates_return_the_original(store: &Store) {
    cast(store).await;
    let planner = name("planner");
    let original = draft(&["exec-1"], Request, "dup", "do the thing");
    let first = send(store, "planner", original.clone()).await;

    let before = generation(store).await;
    let again = store
        .send(&planner, original.clone(), WINDOW)
        .await
        .unwrap();
    assert_eq!(
        again,
        Sent {
            id: first.clone(),
            duplicate: true
        }
    );
    assert_eq!(generation(store).await, before);

    // Another type, topic or parent is another message.
    let variants = [
        Draft {
            kind: Info,
            ..original.clone()
        },
        Draft {
            topic: Topic::new("other").unwrap(),
            ..original.clone()
        },
        Draft {
            reply_to: Some(first.clone()),
            ..original.clone()
        },
    ];
    for variant in variants {
        let sent = store.send(&planner, variant, WINDOW).await.unwrap();
        assert!(!sent.duplicate && sent.id != first, "{sent:?}");
    }

    // With no window, the same content is a new message.
    let before = generation(store).await;
    let sent = store.send(&planner, original.clone(), 0).await.unwrap();
    assert!(!sent.duplicate && sent.id != first, "{sent:?}");
    assert_eq!(generation(store).await, before + 1);

    // An idempotency key returns the original whatever the window.
    let keyed = Draft {
        idempotency_key: Some("k-1".into()),
        ..draft(&["exec-2"], Info, "dup", "keyed")
    };
    let key_first = store.send(&planner, keyed.clone(), 0).await.unwrap();
    assert!(!key_first.duplicate);
    for window in [0, WINDOW] {
        let before = generation(store).await;
        let again = store.send(&planner, keyed.clone(), window).await.unwrap();
        assert_eq!(
            again,
            Sent {
                id: key_first.id.clone(),
                duplicate: true
            }
        );
        assert_eq!(generation(store).await, before);
    }
    // A reused key with other content is a conflict, not a silent duplicate.
    let reused = Draft {
        payload: Payload::body("other content", DEFAULT_PAYLOAD_CAP).unwrap(),
        ..keyed.clone()
    };
    assert_variant!(
        refused(store, store.send(&planner, reused, 0)).await,
        StoreError::Refused(Refusal::KeyReused { .. })
    );
    // The key is read back with the message (the sender's documents show it); a send
    // without one has none.
    assert_eq!(
        envelope(store, &key_first.id)
            .await
            .idempotency_key
            .as_deref(),
        Some("k-1")
    );
    assert_eq!(envelope(store, &first).await.idempotency_key, None);
}

/// Story 8: A send that cannot be addressed is refused and stores nothing.
async fn an_unaddressable_send_is_refused(store: &Store) {
    cast(store).await;
    let planner = name("planner");
    let orphan = Draft {
        reply_to: Some("01JZZZZZZZZZZZZZZZZZZZZZZZ".into()),
        ..draft(&["exec-1"], MessageType::Message, "t", "about that")
    };
    assert_variant!(
        refused(store, store.send(&planner, orphan, WINDOW)).await,
        StoreError::Refused(Refusal::NotFound {
            record: Record::Parent,
            ..
        })
    );
    assert_variant!(
        refused(
            store,
            store.send(
                &planner,
                draft(&["exec-1", "planner"], Info, "t", "me too"),
                WINDOW
            )
        )
        .await,
        StoreError::Refused(Refusal::SelfSend { .. })
    );
    assert_variant!(
        refused(
            store,
            store.send(&planner, draft(&[], Info, "t", "anyone?"), WINDOW)
        )
        .await,
        StoreError::Refused(Refusal::Missing(Field::To))
    );
    // Nor can anyone read, step on or follow a message that does not exist.
    let missing = "01JZZZZZZZZZZZZZZZZZZZZZZZ";
    assert_variant!(
        refused(store, store.fetch(Some(&name("exec-1")), missing)).await,
        StoreError::Refused(Refusal::NotFound {
            record: Record::Message,
            ..
        })
    );
    assert_variant!(
        refused(
            store,
            store.step(&name("exec-1"), missing, Verb::Archive, None)
        )
        .await,
        StoreError::Refused(Refusal::NotFound {
            record: Record::Message,
            ..
        })
    );
    assert_variant!(
        refused(store, store.thread(missing)).await,
        StoreError::Refused(Refusal::NotFound {
            record: Record::Message,
            ..
        })
    );

    // A recipient named twice gets one delivery.
    let id = send(
        store,
        "planner",
        draft(&["exec-1", "exec-1"], Info, "t", "once"),
    )
    .await;
    assert_eq!(
        recipients(&envelope(store, &id).await),
        [("exec-1".into(), Pending)]
    );
}

/// What a prefix lookup lists: the ids of one kind in each range, byte for byte, a bounded
/// few of each, whatever the engine's collation.
async fn ids_are_listed_by_their_first_characters_in_either_case(store: &Store) {
    cast(store).await;
    let mut sent = Vec::new();
    for n in 0..12 {
        let body = format!("request {n}");
        sent.push(send(store, "planner", draft(&["exec-1"], Request, "csv", &body)).await);
    }
    sent.sort();
    let ids = |text: &str| {
        let spans = baton_core::id::spans(text);
        async move { store.ids(Record::Message, &spans).await.expect("the ids") }
    };
    let one = &sent[3];
    assert_eq!(ids(one).await, [one.as_str()], "the whole id, as typed");
    assert_eq!(
        ids(&one.to_lowercase()).await,
        [one.as_str()],
        "in lower case"
    );
    // Every id sent in the same second shares its first characters: a bounded few.
    let listed = ids(&one[..6].to_lowercase()).await;
    assert_eq!(listed.len(), baton_core::id::CANDIDATES + 1, "{listed:?}");
    assert_eq!(listed, sent[..listed.len()], "in order, from the first");
    assert!(ids("zz").await.is_empty());
    // Underscores and hyphens are characters like any other, not patterns.
    assert!(ids("01_").await.is_empty());
    assert!(
        store
            .ids(Record::Decision, &baton_core::id::spans("D-1"))
            .await
            .unwrap()
            .is_empty()
    );
}

/// Story 9: A thread is a tree, listed depth-first from its root with depths and reply counts.
async fn a_thread_comes_back_depth_first(store: &Store) {
    cast(store).await;
    let message = MessageType::Message;
    let root = send(store, "planner", draft(&["exec-1"], message, "t", "root")).await;
    let unrelated = send(store, "planner", draft(&["exec-1"], message, "t", "other")).await;
    let first = send(
        store,
        "exec-1",
        Draft {
            reply_to: Some(root.clone()),
            ..draft(&["planner"], message, "t", "first reply")
        },
    )
    .await;
    let second = send(
        store,
        "exec-2",
        Draft {
            reply_to: Some(root.clone()),
            ..draft(&["planner"], message, "t", "second reply")
        },
    )
    .await;
    // Sent last, listed third: under the first reply, not after the second.
    let nested = send(
        store,
        "planner",
        Draft {
            reply_to: Some(first.clone()),
            ..draft(&["exec-1"], message, "t", "reply to the first")
        },
    )
    .await;

    for from in [&root, &second, &nested] {
        let thread = store.thread(from).await.unwrap();
        assert_eq!(
            ids(&thread),
            [root.clone(), first.clone(), nested.clone(), second.clone()]
        );
        let shape: Vec<(u32, u32, Option<&str>)> = thread
            .iter()
            .map(|e| (e.depth, e.replies, e.reply_to.as_deref()))
            .collect();
        assert_eq!(
            shape,
            [
                (0, 2, None),
                (1, 1, Some(root.as_str())),
                (2, 0, Some(first.as_str())),
                (1, 0, Some(root.as_str())),
            ]
        );
    }
    assert_eq!(ids(&store.thread(&unrelated).await.unwrap()), [unrelated]);
}

/// Story 10: Every search filter narrows the result; pages walk everything once, newest first.
async fn search_filters_narrow_and_pages_walk_everything_once(store: &Store) {
    cast(store).await;
    let exec1 = name("exec-1");
    let m1 = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "alpha", "migrate the export"),
    )
    .await;
    let m2 = send(
        store,
        "planner",
        draft(&["exec-2"], Info, "beta", "fixtures are ready"),
    )
    .await;
    clock_passes(envelope(store, &m2).await.created_at).await;
    let m3 = send(
        store,
        "exec-1",
        draft(
            &["planner"],
            MessageType::Message,
            "alpha",
            "a question about the EXPORT",
        ),
    )
    .await;
    let m4 = send(
        store,
        "planner",
        draft(&["exec-1", "exec-2"], Request, "alpha", "ship it"),
    )
    .await;
    let m5 = send(
        store,
        "exec-2",
        draft(&["exec-1"], Info, "beta", "zebra notes"),
    )
    .await;
    store.fetch(Some(&exec1), &m1).await.unwrap();
    let at3 = envelope(store, &m3).await.created_at;
    let newest_first = [&m5, &m4, &m3, &m2, &m1];

    let find = async |filters: &[Filter<'_>]| -> Vec<String> {
        let (caller, query) = search_for(filters);
        let page = store.search(caller.as_ref(), &query).await.unwrap();
        assert_eq!(page.next, None);
        ids(&page.items)
    };
    let all = find(&[]).await;
    assert_eq!(all, newest_first.map(String::clone));

    let cases: [(&[Filter], Vec<&String>); 14] = [
        (&[F::Topic("alpha")], vec![&m4, &m3, &m1]),
        (&[F::Kind(Info)], vec![&m5, &m2]),
        (&[F::Sender("planner")], vec![&m4, &m2, &m1]),
        (&[F::Recipient("exec-1")], vec![&m5, &m4, &m1]),
        (&[F::Since(at3)], vec![&m5, &m4, &m3]),
        (&[F::Until(at3)], vec![&m2, &m1]),
        (&[F::Mine("exec-1", Delivered)], vec![&m1]),
        (&[F::Mine("exec-1", Pending)], vec![&m5, &m4]),
        (&[F::Text("Export")], vec![&m3, &m1]),
        // Every word of the query starts a word of the payload, in any order and case.
        (&[F::Text("expo")], vec![&m3, &m1]),
        (&[F::Text("the QUESTION, export")], vec![&m3]),
        // Inside a word is not the start of one.
        (&[F::Text("xport")], vec![]),
        // Punctuation alone has no words: the payload's text is compared.
        (&[F::Text("\"body\":")], vec![&m5, &m4, &m3, &m2, &m1]),
        (
            &[F::Topic("alpha"), F::Kind(Request), F::Sender("planner")],
            vec![&m4, &m1],
        ),
    ];
    for (filters, want) in cases {
        let want: Vec<String> = want.into_iter().cloned().collect();
        assert_eq!(find(filters).await, want, "filtered by {filters:?}");
    }

    // Pages of two: 2, 2, 1, each message once, newest first, `next` empty at the end.
    let mut walked = Vec::new();
    let mut sizes = Vec::new();
    let mut cursor = None;
    loop {
        let query = SearchQuery {
            limit: 2,
            cursor: cursor.take(),
            ..Default::default()
        };
        let page = store.search(None, &query).await.unwrap();
        sizes.push(page.items.len());
        walked.extend(ids(&page.items));
        let Some(next) = page.next else {
            break;
        };
        assert!(sizes.len() < 5, "pagination does not end");
        cursor = Some(next);
    }
    assert_eq!(sizes, [2, 2, 1]);
    assert_eq!(walked, all);
    let exact = SearchQuery {
        limit: 5,
        ..Default::default()
    };
    assert_eq!(store.search(None, &exact).await.unwrap().next, None);

    for cursor in ["garbage", "", "c"] {
        let query = SearchQuery {
            limit: 2,
            cursor: Some(cursor.into()),
            ..Default::default()
        };
        assert_variant!(
            refused(store, store.search(None, &query)).await,
            StoreError::Refused(Refusal::Cursor { .. })
        );
    }
    // A status filter is the caller's own: without a caller it means nothing.
    let anonymous = SearchQuery {
        status: Some(Pending),
        limit: 10,
        ..Default::default()
    };
    assert_variant!(
        refused(store, store.search(None, &anonymous)).await,
        StoreError::Refused(Refusal::StatusNeedsIdentity)
    );
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

/// Plays `turns` random commands (sends, replies, fetches, steps, registrations), many of
/// them refused; a refusal must be one a user can act on, never an engine failure.
async fn random_mix(store: &Store, dice: &mut Dice, turns: usize) {
    const PEOPLE: [&str; 5] = ["planner", "exec-1", "exec-2", "observer", "late-1"];
    const VERBS: [Verb; 5] = [
        Verb::Ack,
        Verb::Complete,
        Verb::HandBack,
        Verb::Refuse,
        Verb::Archive,
    ];
    let mut sent: Vec<String> = Vec::new();
    for _ in 0..turns {
        let outcome = match dice.below(10) {
            0..=3 => {
                let from = dice.pick(&PEOPLE);
                let mut to = vec![dice.pick(&PEOPLE)];
                if dice.one_in(2) {
                    to.push(dice.pick(&PEOPLE));
                }
                let mut d = draft(
                    &to,
                    dice.pick(&MessageType::ALL),
                    dice.pick(&["alpha", "beta"]),
                    &format!("note {}", dice.below(4)),
                );
                if !sent.is_empty() && dice.one_in(3) {
                    d.reply_to = Some(dice.pick(&sent));
                }
                if dice.one_in(5) {
                    d.idempotency_key = Some(format!("k{}", dice.below(3)));
                }
                let window = dice.pick(&[0, WINDOW]);
                store.send(&name(from), d, window).await.map(|s| {
                    if !s.duplicate {
                        sent.push(s.id);
                    }
                })
            }
            4..=5 if !sent.is_empty() => {
                let reader = dice.pick(&[None, Some("exec-1"), Some("exec-2"), Some("planner")]);
                let reader = reader.map(name);
                let id = dice.pick(&sent);
                store.fetch(reader.as_ref(), &id).await.map(drop)
            }
            6..=8 if !sent.is_empty() => {
                let who = name(dice.pick(&PEOPLE));
                let id = dice.pick(&sent);
                let verb = dice.pick(&VERBS);
                let note = dice.one_in(2).then_some("because");
                store.step(&who, &id, verb, note).await.map(drop)
            }
            _ => {
                let who = name(dice.pick(&["planner", "late-1", "late-2"]));
                let role = dice.pick(&["planner", "executor"]);
                store
                    .add_participant("@local", &who, role, None)
                    .await
                    .map(drop)
            }
        };
        if let Err(e) = outcome {
            assert!(
                !matches!(
                    e,
                    StoreError::Engine(_)
                        | StoreError::Busy { .. }
                        | StoreError::Unavailable { .. }
                ),
                "an engine failure where a refusal was due: {e:?}"
            );
        }
    }
}

/// The tally a [`Replay`] of the whole log gives, the messages' facts read from their
/// envelopes: what the store's projection, advanced event by event, must equal.
async fn replayed(store: &Store) -> Tally {
    let mut replay = Replay::default();
    for event in store.events(0, u32::MAX).await.unwrap() {
        let (parent, message) = match &event.change {
            Change::MessageSent(m) => match &m.reply_to {
                Some(p) => {
                    let parent = envelope(store, p).await;
                    (Some((parent.kind, parent.depth)), None)
                }
                None => (None, None),
            },
            Change::DeliveryChanged { message, .. } => {
                let sent = envelope(store, message).await;
                let facts = MessageFacts {
                    at: sent.created_at,
                    kind: sent.kind,
                    topic: sent.topic.to_string(),
                };
                (None, Some(facts))
            }
            _ => (None, None),
        };
        replay.apply(&event, parent, message);
    }
    replay.tally
}

/// Story: the handoff metrics are a projection of the log: the tally moves with each
/// send, fetch and completion (and equals a replay of the log), and the live work —
/// deliveries pending, requests open and the oldest of them — is counted as it stands.
async fn the_handoff_metrics_are_a_projection_of_the_log(store: &Store) {
    cast(store).await;
    let m = store.metrics().await.unwrap();
    assert_eq!((m.pending, m.open_requests), (0, 0));
    assert_eq!(m.tally, Tally::default());

    let r1 = send(
        store,
        "planner",
        draft(&["exec-1", "exec-2"], Request, "alpha", "first"),
    )
    .await;
    let r2 = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "beta", "second"),
    )
    .await;
    send(store, "planner", draft(&["exec-1"], Info, "alpha", "fyi")).await;
    let mut question = draft(&["planner"], MessageType::Message, "alpha", "which file?");
    question.reply_to = Some(r1.clone());
    send(store, "exec-1", question).await;
    let m = store.metrics().await.unwrap();
    assert_eq!(m.pending, 5, "r1 twice, r2, the info and the question");
    assert_eq!(m.open_requests, 2);
    assert_eq!(m.oldest_open_request.as_ref().map(|(_, id)| id), Some(&r1));
    assert_eq!(
        (m.tally.requests, m.tally.replies_to_requests),
        (2, 1),
        "the question replies to a request"
    );
    assert_eq!(m.tally.max_thread_depth, 1);

    let exec_1 = name("exec-1");
    store.fetch(Some(&exec_1), &r1).await.unwrap();
    clock_passes(now_ms() + 3).await;
    store
        .step(&exec_1, &r1, Verb::Complete, None)
        .await
        .unwrap();
    store
        .step(&name("planner"), &r1, Verb::Complete, None)
        .await
        .unwrap();
    let m = store.metrics().await.unwrap();
    assert_eq!(m.pending, 4);
    assert_eq!(m.open_requests, 1, "the sender closed r1");
    assert_eq!(m.oldest_open_request.as_ref().map(|(_, id)| id), Some(&r2));
    let t = &m.tally;
    assert_eq!(
        (t.created_to_delivered.count, t.delivered_to_completed.count),
        (1, 1)
    );
    assert!(t.delivered_to_completed.sum_ms >= 3, "{t:?}");
    assert_eq!(t.completed_by_topic.get("alpha"), Some(&1));
    assert_eq!(t.delivery_trend.points().count(), 1);
    assert_eq!(m.generation, generation(store).await);
    assert_eq!(m.tally, replayed(store).await);
}

/// Story 11: The log is the truth: replaying it rebuilds exactly the projections the live writes
/// made, and the log itself cannot be rewritten.
async fn the_log_is_the_truth<B: Backend>() {
    for seed in [1, 7, 2024] {
        let backend = B::fresh(DEFAULT_BUSY_TIMEOUT).await;
        let store = backend.store();
        cast(store).await;
        random_mix(store, &mut Dice(seed), 200).await;
        // State changes between the messages: the state's projection is replayed too.
        for i in 0..3 {
            store
                .change_state(
                    "planner",
                    &[
                        StateOp::Decide {
                            text: format!("decision {seed}.{i}"),
                            why: "replayed".into(),
                            supersedes: None,
                        },
                        StateOp::Stream {
                            name: format!("s{}", i % 2),
                            status: format!("step {i}"),
                        },
                    ],
                )
                .await
                .unwrap();
            random_mix(store, &mut Dice(seed + i), 20).await;
        }

        let live = backend.projection_dump().await;
        assert!(
            live.iter()
                .any(|row| row.starts_with("d|") && !row.contains("|pending|")),
            "seed {seed}: the mix moved no delivery, so the replay proves little"
        );
        // The search index and the state are among the projections compared.
        assert!(
            live.iter().any(|row| row.starts_with("t|")),
            "no words indexed"
        );
        assert!(
            live.iter()
                .any(|row| row.starts_with("s|") && row.contains("decision")),
            "no state projected"
        );
        // The metrics' tally, advanced with each write, is what a replay of the log gives.
        let tally = store.metrics().await.unwrap().tally;
        assert!(
            tally.requests > 0 && tally.created_to_delivered.count > 0,
            "seed {seed}: the mix moved no metric, so the comparison proves little"
        );
        assert_eq!(
            tally,
            replayed(store).await,
            "seed {seed}: the tally differs"
        );
        let generation_before = generation(store).await;
        backend.rebuild_projections().await;
        assert_eq!(
            backend.projection_dump().await,
            live,
            "seed {seed}: replay differs"
        );
        assert_eq!(generation(store).await, generation_before);

        // The log refuses to be rewritten or shortened.
        let log = store.events(0, u32::MAX).await.unwrap();
        assert_eq!(log.len() as i64, generation_before);
        for sql in [
            "UPDATE events SET actor = 'mallory' WHERE seq = 1",
            "UPDATE events SET data = '{}'",
            "DELETE FROM events WHERE seq = (SELECT max(seq) FROM events)",
            "DELETE FROM events",
        ] {
            let err = backend
                .behind_the_back(sql)
                .await
                .expect_err("the event log must refuse this");
            assert!(err.contains("append-only"), "{sql}: {err}");
        }
        assert_eq!(store.events(0, u32::MAX).await.unwrap(), log);
    }
}

/// Story 10b: A search over more messages than one backend's recent window walks them all
/// once, newest first, whatever page size: on SQLite 150 messages are two moves of 64
/// words into the free-text index and 22 pending rows compared directly, and a page that
/// starts among the pending rows ends in the index. A word matches the same way on either
/// side, non-ASCII words included.
async fn a_search_over_many_messages_walks_them_all_newest_first(store: &Store) {
    cast(store).await;
    let mut sent = Vec::new();
    for i in 0..150 {
        let body = match i % 3 {
            0 => format!("export filter {i}"),
            1 => format!("Exporter note {i} über alles"),
            _ => format!("unrelated {i}"),
        };
        let topic = if i % 2 == 0 { "alpha" } else { "beta" };
        sent.push(send(store, "planner", draft(&["exec-1"], Info, topic, &body)).await);
    }
    let newest_first = |keep: &dyn Fn(usize) -> bool| -> Vec<String> {
        (0..150)
            .rev()
            .filter(|i| keep(*i))
            .map(|i| sent[i].clone())
            .collect()
    };
    let walk = async |filters: &[Filter<'_>], limit: u32| -> Vec<String> {
        let (caller, mut query) = search_for(filters);
        query.limit = limit;
        let mut walked = Vec::new();
        loop {
            let page = store.search(caller.as_ref(), &query).await.unwrap();
            assert!(page.items.len() <= limit as usize);
            walked.extend(ids(&page.items));
            let Some(next) = page.next else {
                return walked;
            };
            assert!(walked.len() <= 150, "pagination does not end");
            query.cursor = Some(next);
        }
    };
    for limit in [7, 9, 100] {
        assert_eq!(
            walk(&[F::Text("export")], limit).await,
            newest_first(&|i| i % 3 != 2),
            "pages of {limit}"
        );
    }
    assert_eq!(
        walk(&[F::Text("EXPORTER")], 10).await,
        newest_first(&|i| i % 3 == 1)
    );
    assert_eq!(
        walk(&[F::Text("üb"), F::Topic("alpha")], 8).await,
        newest_first(&|i| i % 3 == 1 && i % 2 == 0)
    );
    assert_eq!(
        walk(&[F::Text("filter 14")], 2).await,
        newest_first(&|i| i % 3 == 0 && i.to_string().starts_with("14"))
    );
    assert_eq!(walk(&[F::Text("ilter")], 5).await, Vec::<String>::new());
}

/// The migration scripts a SQLite store has run, in order.
const SQLITE_SCRIPTS: [&str; 15] = [
    include_str!("../src/sqlite/migrations/001_event_log.sql"),
    include_str!("../src/sqlite/migrations/002_event_kind_index.sql"),
    include_str!("../src/sqlite/migrations/003_runs.sql"),
    include_str!("../src/sqlite/migrations/004_orders.sql"),
    include_str!("../src/sqlite/migrations/005_keys.sql"),
    include_str!("../src/sqlite/migrations/006_authority.sql"),
    include_str!("../src/sqlite/migrations/007_webhooks.sql"),
    include_str!("../src/sqlite/migrations/008_text_and_state.sql"),
    include_str!("../src/sqlite/migrations/009_state_digest.sql"),
    include_str!("../src/sqlite/migrations/010_list_reads.sql"),
    include_str!("../src/sqlite/migrations/011_fewer_pages.sql"),
    include_str!("../src/sqlite/migrations/012_key_uses.sql"),
    include_str!("../src/sqlite/migrations/013_pending_text.sql"),
    include_str!("../src/sqlite/migrations/014_subjects_without_sends.sql"),
    include_str!("../src/sqlite/migrations/015_sends_in_fewer_trees.sql"),
];

/// A SQLite store of the latest version in `dir`, with the cast: the store a migration
/// story's older one is copied from.
async fn live_store(dir: &std::path::Path) -> (std::path::PathBuf, SqliteStore) {
    let path = dir.join("now.db");
    let store = SqliteStore::create(&path, DEFAULT_BUSY_TIMEOUT)
        .await
        .unwrap();
    cast(&Store::new(store.clone())).await;
    (path, store)
}

/// A new database at `path` with the schema of the first `version` scripts (10 or later),
/// the log and the rows of messages, participants and state of the store at `now` copied
/// into it, and that store left attached as `now` for the rest.
fn older_store(
    path: &std::path::Path,
    version: usize,
    now: &std::path::Path,
) -> rusqlite::Connection {
    let old = rusqlite::Connection::open(path).unwrap();
    old.execute_batch("PRAGMA journal_mode = WAL").unwrap();
    for script in &SQLITE_SCRIPTS[..version] {
        old.execute_batch(script).unwrap();
    }
    old.execute("ATTACH ? AS now", [now.to_str().unwrap()])
        .unwrap();
    old.execute_batch(
        "INSERT INTO events SELECT seq, id, at, actor, kind, subject, data FROM now.events
             ORDER BY seq;
         INSERT INTO messages (id, seq, from_name, type, topic, reply_to, root_id, depth,
             excerpt, size, hash, idempotency_key, created_at, request_status, replies)
             SELECT id, seq, from_name, type, topic, reply_to, root_id, depth, excerpt, size,
                 hash, idempotency_key, created_at, request_status, replies FROM now.messages;
         INSERT INTO participants SELECT * FROM now.participants;
         INSERT INTO state SELECT * FROM now.state;
         INSERT INTO state_digest SELECT * FROM now.state_digest;",
    )
    .unwrap();
    old
}

/// A SQLite store made at schema version 10, before its tables were rebuilt for fewer
/// pages a write, opens at the latest version with the projections it had, each message's
/// recipients in the order they were named, its words searchable again, and a log that
/// still continues its seqs and refuses to be rewritten.
#[tokio::test]
async fn a_version_10_sqlite_store_migrates_to_the_same_projections() {
    let dir = TempDir::new().unwrap();
    let (now_path, sqlite) = live_store(dir.path()).await;
    let store = Store::new(sqlite.clone());
    random_mix(&store, &mut Dice(7), 200).await;
    // Open work for a person, which migration 17 fills from the log: a need, and an order
    // whose effect started with no recorded end.
    store
        .record_gate(
            "planner",
            &[baton_core::gate::GateChange::Need {
                id: "n-old".into(),
                text: "still open".into(),
                order: None,
                source: baton_core::gate::NeedSource::Hand,
                run: None,
            }],
        )
        .await
        .unwrap();
    inject(
        &store,
        vec![NewEvent::new(
            "@gateway",
            Change::Effect(baton_core::effect::EffectChange::Started {
                order: "wo_m".into(),
                reference: "deploy#1".into(),
            }),
            now_ms(),
        )],
    )
    .await;
    let ordered = send(
        &store,
        "planner",
        draft(
            &["exec-2", "exec-1"],
            Request,
            "alpha",
            "recipients in order",
        ),
    )
    .await;
    let live = sqlite.projection_dump().await.unwrap();
    assert!(live.iter().any(|r| r.starts_with("n|n-old|")) && live.contains(&"u|wo_m".into()));
    let generation_before = generation(&store).await;
    drop((store, sqlite));

    // The same history in a store of version 10: the schema of the first ten scripts and
    // every projection row copied, except the free-text index (contentless, it cannot be
    // copied; the migration fills it from the log).
    let old_path = dir.path().join("old.db");
    let old = older_store(&old_path, 10, &now_path);
    old.execute_batch(
        "INSERT INTO deliveries (message_id, participant, status, updated_at, seq, request)
             SELECT message_id, participant, status, updated_at, seq, request
             FROM now.deliveries ORDER BY message_id, ordinal;
         INSERT INTO runs SELECT * FROM now.runs;
         INSERT INTO orders SELECT * FROM now.orders;
         INSERT INTO keys SELECT * FROM now.keys;
         INSERT INTO webhooks SELECT * FROM now.webhooks;
         DETACH now;
         PRAGMA user_version = 10;",
    )
    .unwrap();
    drop(old);

    let opened = SqliteStore::open(&old_path, DEFAULT_BUSY_TIMEOUT)
        .await
        .unwrap();
    let store = Store::new(opened.clone());
    assert_eq!(opened.projection_dump().await.unwrap(), live);
    let recipients: Vec<String> = envelope(&store, &ordered)
        .await
        .to
        .iter()
        .map(|r| r.name.to_string())
        .collect();
    assert_eq!(recipients, ["exec-2", "exec-1"]);
    opened.rebuild_projections().await.unwrap();
    assert_eq!(opened.projection_dump().await.unwrap(), live);
    assert_eq!(opened.integrity_check().await.unwrap(), "ok");

    send(
        &store,
        "planner",
        draft(&["exec-1"], Info, "alpha", "after the migration"),
    )
    .await;
    let log = store.events(0, u32::MAX).await.unwrap();
    let seqs: Vec<i64> = log.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=generation_before + 1).collect::<Vec<_>>());
    drop((store, opened));
    let conn = rusqlite::Connection::open(&old_path).unwrap();
    let err = conn
        .execute_batch("DELETE FROM events WHERE seq = 1")
        .expect_err("the log refuses a delete");
    assert!(err.to_string().contains("append-only"), "{err}");
}

/// A SQLite store made at schema version 14, with words waiting in `message_text_pending`
/// beside the ones already in the index, opens at the latest version with the same
/// projections: what waited moves into the index, every message is found by its words,
/// and the next sends wait in their own rows until 64 of them move together.
#[tokio::test]
async fn a_version_14_sqlite_store_keeps_its_waiting_words() {
    let dir = TempDir::new().unwrap();
    let (now_path, sqlite) = live_store(dir.path()).await;
    let store = Store::new(sqlite.clone());
    // 64 move together: 100 sends leave 36 waiting.
    let mut sent = Vec::new();
    for n in 0..100 {
        let body = format!("migrating word{n}");
        sent.push(send(&store, "planner", draft(&["exec-1"], Info, "words", &body)).await);
    }
    let live = sqlite.projection_dump().await.unwrap();
    drop((store, sqlite));

    // The same history at version 14: the index holds the words the live store's index
    // holds (read back from its vocabulary), the pending table the ones waiting.
    let old_path = dir.path().join("old.db");
    let old = older_store(&old_path, 14, &now_path);
    old.execute_batch(
        "INSERT INTO deliveries SELECT * FROM now.deliveries;
         INSERT INTO message_text (rowid, words)
             SELECT doc, group_concat(term, ' ' ORDER BY \"offset\") FROM now.message_words
             GROUP BY doc;
         INSERT INTO message_text_pending (seq, words)
             SELECT seq, words FROM now.messages WHERE words IS NOT NULL;
         DETACH now;
         PRAGMA user_version = 14;",
    )
    .unwrap();
    let waiting: i64 = old
        .query_row("SELECT count(*) FROM message_text_pending", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(waiting, 36, "words waiting before the migration");
    drop(old);

    let opened = SqliteStore::open(&old_path, DEFAULT_BUSY_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(opened.projection_dump().await.unwrap(), live);
    let handle = Store::new(opened.clone());
    let store = &handle;
    let found = |n: usize| SearchQuery {
        text: Some(format!("word{n}")),
        ..Default::default()
    };
    for n in [0, 63, 64, 99] {
        let page = store.search(None, &found(n)).await.unwrap();
        assert_eq!(ids(&page.items), [sent[n].clone()], "word{n}");
    }
    // The next sends wait in their rows; the 64th moves them all.
    for n in 100..164 {
        let body = format!("migrating word{n}");
        sent.push(send(store, "planner", draft(&["exec-1"], Info, "words", &body)).await);
        let page = store.search(None, &found(n)).await.unwrap();
        assert_eq!(ids(&page.items), [sent[n].clone()], "word{n}");
    }
    drop((handle, opened));
    let conn = rusqlite::Connection::open(&old_path).unwrap();
    let (waiting, indexed): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT count(*) FROM messages WHERE words IS NOT NULL), \
                    (SELECT count(DISTINCT doc) FROM message_words)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((waiting, indexed), (0, 164));
}

/// Story 13: A writer that finds the store locked for longer than its busy timeout gets a
/// retryable `Busy`, writes nothing, and succeeds once the lock is gone.
async fn a_locked_store_is_busy_then_writable<B: Backend>() {
    let backend = B::fresh(Duration::from_millis(200)).await;
    let store = backend.store();
    cast(store).await;
    let exec = name("exec-1");
    let waiting = send(
        store,
        "planner",
        draft(&["exec-1"], Info, "busy", "read me"),
    )
    .await;
    let blocked = draft(&["exec-1"], Request, "busy", "while locked");
    let before = generation(store).await;

    let lock = backend.hold_write_lock().await;
    let sending = store.send(&name("planner"), blocked.clone(), WINDOW).await;
    let fetching = store.fetch(Some(&exec), &waiting).await;
    // Readers are not blocked by a writer.
    assert_eq!(generation(store).await, before);
    assert_eq!(status(store, &waiting, "exec-1").await, Some(Pending));
    B::release(lock).await;

    for (what, err) in [
        ("send", sending.map(drop).unwrap_err()),
        ("fetch", fetching.map(drop).unwrap_err()),
    ] {
        assert!(matches!(err, StoreError::Busy { .. }), "{what}: {err:?}");
        assert!(err.is_retryable(), "{what}: {err}");
        assert!(!err.to_string().contains("locked"), "{what}: {err}");
    }

    let sent = store
        .send(&name("planner"), blocked, WINDOW)
        .await
        .expect("a send once the lock is released");
    assert!(!sent.duplicate, "the busy send must not have been stored");
    assert_eq!(generation(store).await, before + 1);
    let fetched = store.fetch(Some(&exec), &waiting).await.unwrap();
    assert_eq!(fetched.status, Some(Delivered));
}

/// Story 21: Writers queue: eight sends racing on one store all commit, and the log numbers
/// their events one after another, with no gap and no number used twice.
async fn racing_writers_queue_and_the_log_has_no_gaps(store: &Store) {
    cast(store).await;
    let before = generation(store).await;
    let planner = name("planner");
    let send = |n: u32| {
        store.send(
            &planner,
            draft(&["exec-1"], Info, "race", &format!("writer {n}")),
            WINDOW,
        )
    };
    let sent = tokio::join!(
        send(1),
        send(2),
        send(3),
        send(4),
        send(5),
        send(6),
        send(7),
        send(8)
    );
    let sent: Vec<Sent> = [
        sent.0, sent.1, sent.2, sent.3, sent.4, sent.5, sent.6, sent.7,
    ]
    .into_iter()
    .map(|r| r.expect("a writer that queued"))
    .collect();
    assert!(sent.iter().all(|s| !s.duplicate), "{sent:?}");
    let seqs: Vec<i64> = store
        .events(before, 100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, (before + 1..=before + 8).collect::<Vec<_>>());
    assert_eq!(generation(store).await, before + 8);
}

// ---------------------------------------------------------------------------------------
// Story 12: the store follows the pure lifecycle of `baton_core::delivery`, step for step.
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Actor {
    Sender,
    First,
    Second,
    Outsider,
}

impl Actor {
    fn passname(self) -> Passname {
        name(match self {
            Self::Sender => "planner",
            Self::First => "exec-1",
            Self::Second => "exec-2",
            Self::Outsider => "observer",
        })
    }

    fn recipient(self) -> Option<usize> {
        match self {
            Self::First => Some(0),
            Self::Second => Some(1),
            Self::Sender | Self::Outsider => None,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Act {
    Fetch,
    Step(Verb),
}

#[derive(Debug, Clone, Copy)]
struct Turn {
    actor: Actor,
    act: Act,
    note: bool,
}

/// Why the model refuses a turn.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Verdict {
    /// The lifecycle forbids it; carries the current status.
    Transition(&'static str),
    Invalid,
    Forbidden,
}

/// The pure lifecycle, tracked per participant: each recipient's delivery and the
/// sender's own end.
struct Model {
    kind: MessageType,
    deliveries: [DeliveryStatus; 2],
    request: Option<RequestStatus>,
}

impl Model {
    fn new(kind: MessageType) -> Self {
        Self {
            kind,
            deliveries: [Pending; 2],
            request: (kind == Request).then_some(RequestStatus::Open),
        }
    }

    /// Plays one turn: `Ok(events it appends)` or why it is refused.
    fn play(&mut self, turn: Turn) -> Result<i64, Verdict> {
        let verb = match turn.act {
            Act::Fetch => {
                let Some(i) = turn.actor.recipient() else {
                    return Ok(0);
                };
                let before = self.deliveries[i];
                let after = transition(before, DeliveryAction::Fetch, self.kind)
                    .expect("fetching is always allowed");
                self.deliveries[i] = after;
                return Ok(i64::from(after != before));
            }
            Act::Step(verb) => verb,
        };
        if matches!(verb, Verb::HandBack | Verb::Refuse) && !turn.note {
            return Err(Verdict::Invalid);
        }
        match (turn.actor.recipient(), turn.actor) {
            (Some(i), _) => {
                let action = match verb {
                    Verb::Ack => DeliveryAction::Acknowledge,
                    Verb::Complete => DeliveryAction::Complete,
                    Verb::HandBack => DeliveryAction::HandBack,
                    Verb::Refuse => DeliveryAction::Refuse,
                    Verb::Archive => DeliveryAction::Archive,
                };
                let next = transition(self.deliveries[i], action, self.kind)
                    .map_err(|e| Verdict::Transition(e.status))?;
                self.deliveries[i] = next;
                // The status change, plus the reply that carries a note.
                Ok(1 + i64::from(turn.note))
            }
            (None, Actor::Sender) => {
                // Only a request has a sender's end; of it, the sender only completes
                // and archives, and says anything more in a reply.
                let Some(current) = self.request else {
                    return Err(Verdict::Invalid);
                };
                let action = match verb {
                    Verb::Complete => RequestAction::Complete,
                    Verb::Archive => RequestAction::Archive,
                    _ => return Err(Verdict::Forbidden),
                };
                if turn.note {
                    return Err(Verdict::Invalid);
                }
                let next = request_transition(current, action)
                    .map_err(|e| Verdict::Transition(e.status))?;
                self.request = Some(next);
                Ok(1)
            }
            (None, _) => Err(Verdict::Forbidden),
        }
    }
}

fn refusal(err: &StoreError) -> Option<Verdict> {
    match err.refusal()? {
        Refusal::Transition(t) => Some(Verdict::Transition(t.status)),
        r if r.kind() == RefusalKind::Invalid => Some(Verdict::Invalid),
        r if r.kind() == RefusalKind::Forbidden => Some(Verdict::Forbidden),
        _ => None,
    }
}

fn turn() -> impl Strategy<Value = Turn> {
    let actor = prop::sample::select(vec![
        Actor::Sender,
        Actor::First,
        Actor::Second,
        Actor::Outsider,
    ]);
    let act = prop_oneof![
        2 => Just(Act::Fetch),
        5 => prop::sample::select(vec![
            Verb::Ack,
            Verb::Complete,
            Verb::HandBack,
            Verb::Refuse,
            Verb::Archive,
        ])
        .prop_map(Act::Step),
    ];
    (actor, act, prop::bool::weighted(0.7)).prop_map(|(actor, act, note)| Turn { actor, act, note })
}

fn message_type() -> impl Strategy<Value = MessageType> {
    prop::sample::select(MessageType::ALL.to_vec())
}

/// Plays `turns` on one message of type `kind` to two recipients, against the store and
/// the model together, comparing after every turn.
fn follows_the_delivery_model<B: Backend>(
    kind: MessageType,
    turns: &[Turn],
) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let backend = B::fresh(DEFAULT_BUSY_TIMEOUT).await;
        let store = backend.store();
        cast(store).await;
        let id = send(
            store,
            "planner",
            draft(&["exec-1", "exec-2"], kind, "model", "go"),
        )
        .await;
        let mut model = Model::new(kind);

        for (n, &turn) in turns.iter().enumerate() {
            let who = turn.actor.passname();
            let before = generation(store).await;
            let on_record = refusals(store).await;
            let outcome = match turn.act {
                Act::Fetch => store.fetch(Some(&who), &id).await.map(|f| f.status),
                Act::Step(verb) => store
                    .step(&who, &id, verb, turn.note.then_some("a note"))
                    .await
                    .map(|_| None),
            };
            let written = generation(store).await - before;
            let recorded = refusals(store).await - on_record;
            // Either both take the turn and the store wrote what the model expects, or both
            // refuse it for the same reason and the store wrote nothing but, for a forbidden
            // turn, its refusal on record (an event, or a repeat counted on one).
            let observed = match &outcome {
                Ok(_) => Ok(written),
                Err(err) => {
                    prop_assert!(
                        written <= recorded,
                        "turn {}: {} events written",
                        n,
                        written
                    );
                    Err((refusal(err), recorded))
                }
            };
            let expected = model
                .play(turn)
                .map_err(|why| (Some(why), i64::from(why == Verdict::Forbidden)));
            prop_assert_eq!(observed, expected, "turn {}: {:?}: {:?}", n, turn, outcome);
            if let (Act::Fetch, Ok(fetched)) = (turn.act, outcome) {
                let reader = turn.actor.recipient().map(|i| model.deliveries[i]);
                prop_assert_eq!(fetched, reader, "turn {}: {:?}", n, turn);
            }
            let env = envelope(store, &id).await;
            prop_assert_eq!(
                [
                    env.status_for(&name("exec-1")),
                    env.status_for(&name("exec-2"))
                ],
                model.deliveries.map(Some),
                "turn {}: {:?}",
                n,
                turn
            );
            prop_assert_eq!(env.request_status, model.request, "turn {}: {:?}", n, turn);
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------
// The run ledger
// ---------------------------------------------------------------------------------------

fn registration(id: &str, participant: Option<&str>) -> RunChange {
    RunChange::Registered(Box::new(Registration {
        run: id.into(),
        participant: participant.map(str::to_owned),
        command: vec!["claude".into(), "-p".into(), "fix the export".into()],
        heartbeat_ms: Some(15_000),
        ..Registration::default()
    }))
}

fn run_started(id: &str) -> RunChange {
    RunChange::Started {
        run: id.into(),
        process: ProcessRef {
            pid: 4242,
            start: Some(99),
        },
        pgid: 4242,
    }
}

async fn one_run(store: &Store, id: &str) -> Run {
    let query = RunQuery {
        id: Some(id.into()),
        ..RunQuery::default()
    };
    let mut runs = store.runs(&query).await.expect("the run");
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs.remove(0)
}

/// Story: a hook's event is recorded as the participant it names when one is registered
/// by that name, and as the local operator otherwise (a hook never fails over who called
/// it).
async fn a_hooks_event_is_its_participants_or_the_local_operators(store: &Store) {
    cast(store).await;
    for (who, session) in [("exec-1", "s-known"), ("ghost", "s-ghost")] {
        store
            .record_hook(
                who,
                HookCall {
                    agent: "claude".into(),
                    event: "PreToolUse".into(),
                    session: Some(session.into()),
                    ..HookCall::default()
                },
            )
            .await
            .expect("a hook is recorded");
    }
    let actors: Vec<(String, Option<String>)> = store
        .events(0, 1_000)
        .await
        .expect("the log")
        .into_iter()
        .filter_map(|e| match e.change {
            Change::Run(RunChange::Hook(call)) => Some((e.actor, call.session)),
            _ => None,
        })
        .collect();
    assert_eq!(
        actors,
        vec![
            ("exec-1".to_owned(), Some("s-known".to_owned())),
            ("@local".to_owned(), Some("s-ghost".to_owned())),
        ]
    );
}

/// Story 14: A run is the fold of the facts its producers record, in order; a fact that
/// cannot follow the run's status is refused and writes nothing, and an untracked process
/// is recorded once.
async fn a_run_is_the_fold_of_its_facts(store: &Store) {
    cast(store).await;
    store
        .record_run(
            "exec-1",
            &[registration("r1", Some("exec-1")), run_started("r1")],
        )
        .await
        .expect("register and start");
    let tokens = TokenUsage {
        input: Some(1_000),
        cached_input: None,
        output: Some(50),
    };
    store
        .record_run(
            "exec-1",
            &[RunChange::Reported {
                run: "r1".into(),
                progress: Some(Progress { done: 2, total: 5 }),
                tokens: Some(tokens),
            }],
        )
        .await
        .expect("a report");
    let run = one_run(store, "r1").await;
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(run.process.map(|p| p.pid), Some(4242));
    assert_eq!(run.progress, Some(Progress { done: 2, total: 5 }));
    assert_eq!(run.tokens, Some(tokens));
    assert_eq!(run.exit_code, None, "no exit is known yet");

    let exit = RunChange::Exited {
        run: "r1".into(),
        status: RunStatus::Done,
        exit_code: Some(0),
        signal: None,
        reason: None,
    };
    store
        .record_run("exec-1", std::slice::from_ref(&exit))
        .await
        .expect("the exit");
    assert_variant!(
        refused(store, store.record_run("exec-1", &[exit])).await,
        StoreError::Refused(Refusal::RunStatus { .. })
    );
    assert_variant!(
        refused(store, store.record_run("exec-1", &[run_started("nope")])).await,
        StoreError::Refused(Refusal::NotFound {
            record: Record::Run,
            ..
        })
    );
    // A batch is all or nothing.
    assert_variant!(
        refused(
            store,
            store.record_run("exec-1", &[registration("r2", None), run_started("r1")])
        )
        .await,
        StoreError::Refused(Refusal::RunStatus { .. })
    );
    assert!(
        store
            .runs(&RunQuery {
                id: Some("r2".into()),
                ..RunQuery::default()
            })
            .await
            .unwrap()
            .is_empty()
    );

    let untracked = RunChange::Untracked(Box::new(Registration {
        run: "pid-77-1".into(),
        command: vec!["codex".into()],
        process: Some(ProcessRef {
            pid: 77,
            start: Some(1),
        }),
        ..Registration::default()
    }));
    let first = store
        .record_run("@reaper", std::slice::from_ref(&untracked))
        .await
        .unwrap();
    let again = store.record_run("@reaper", &[untracked]).await.unwrap();
    assert_eq!((first.len(), again.len()), (1, 0));

    let live = store
        .runs(&RunQuery {
            live: true,
            ..RunQuery::default()
        })
        .await
        .unwrap();
    let live: Vec<_> = live.iter().map(|r| (r.id.as_str(), r.status)).collect();
    assert_eq!(live, [("pid-77-1", RunStatus::Untracked)]);
    assert_eq!(store.runs(&RunQuery::default()).await.unwrap().len(), 2);
}

/// Story 15: When a run is lost, what its participant fetched during the run is pending
/// again, with one alert each for the loss and the resurfacing; reaping it again does
/// nothing, and what was fetched before the run stays delivered.
async fn a_lost_run_resurfaces_what_it_held_once(store: &Store) {
    cast(store).await;
    let before = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "csv", "before"),
    )
    .await;
    let during = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "csv", "during"),
    )
    .await;
    let fetched = store.fetch(Some(&name("exec-1")), &before).await.unwrap();
    clock_passes(envelope(store, &before).await.created_at.max(now_ms())).await;
    store
        .record_run(
            "exec-1",
            &[registration("r1", Some("exec-1")), run_started("r1")],
        )
        .await
        .unwrap();
    assert_eq!(fetched.status, Some(Delivered));
    store.fetch(Some(&name("exec-1")), &during).await.unwrap();

    let reaped = store
        .reap_lost("@reaper", "r1", "the monitor is gone")
        .await
        .unwrap()
        .expect("a live run is reaped");
    assert_eq!(reaped.resurfaced, std::slice::from_ref(&during));
    assert_eq!(reaped.alerts.len(), 2, "{reaped:?}");
    assert_eq!(status(store, &during, "exec-1").await, Some(Pending));
    assert_eq!(status(store, &before, "exec-1").await, Some(Delivered));
    assert_eq!(one_run(store, "r1").await.status, RunStatus::Lost);
    let state = store.state().await.unwrap();
    assert_eq!(state.alerts.len(), 2);

    let generation_before = generation(store).await;
    assert_eq!(
        store.reap_lost("@reaper", "r1", "again").await.unwrap(),
        None
    );
    assert_eq!(
        generation(store).await,
        generation_before,
        "a second reap wrote"
    );
}

/// Story: a run counts as live as the core says (`RunStatus::is_live`), an untracked
/// process of the participant included: while one may still hold its work, what it
/// fetched does not resurface when another of its runs is lost.
async fn an_untracked_run_of_the_participant_keeps_its_work_from_resurfacing(store: &Store) {
    cast(store).await;
    store
        .record_run(
            "exec-1",
            &[registration("r1", Some("exec-1")), run_started("r1")],
        )
        .await
        .unwrap();
    // Fetched during the run, a clock tick after it was registered.
    clock_passes(now_ms()).await;
    let held = send(store, "planner", draft(&["exec-1"], Request, "csv", "held")).await;
    store.fetch(Some(&name("exec-1")), &held).await.unwrap();
    let untracked = RunChange::Untracked(Box::new(Registration {
        run: "pid-88-1".into(),
        participant: Some("exec-1".into()),
        command: vec!["codex".into()],
        process: Some(ProcessRef {
            pid: 88,
            start: Some(1),
        }),
        ..Registration::default()
    }));
    store.record_run("@reaper", &[untracked]).await.unwrap();
    let reaped = store
        .reap_lost("@reaper", "r1", "the monitor is gone")
        .await
        .unwrap()
        .expect("a live run is reaped");
    assert!(reaped.resurfaced.is_empty(), "{reaped:?}");
    assert_eq!(status(store, &held, "exec-1").await, Some(Delivered));
}

/// Story: the state's digest, written with the state, holds the newest of each list and
/// how many there are, so a bounded view never reads the whole state.
async fn the_state_digest_keeps_the_newest_of_each_list_and_their_counts(store: &Store) {
    use baton_core::state::{DIGEST_ITEMS, Subject};
    cast(store).await;
    let extra = DIGEST_ITEMS + 7;
    let mut ops = Vec::new();
    for i in 0..extra {
        ops.push(StateOp::Decide {
            text: format!("decision {i}"),
            why: "digest".into(),
            supersedes: (i == 3).then(|| "D-1".to_owned()),
        });
        ops.push(StateOp::Constrain {
            text: format!("constraint {i}"),
            tried: "a".into(),
            result: "b".into(),
        });
        ops.push(StateOp::Note {
            text: format!("note {i}"),
            subject: Subject::Path(format!("src/{i}.rs")),
        });
    }
    ops.push(StateOp::Alert {
        key: "k".into(),
        message: "an alert".into(),
    });
    store.change_state("planner", &ops).await.unwrap();

    let state = store.state().await.unwrap();
    let digest = store.state_digest().await.unwrap();
    assert_eq!(digest, state.digest(DIGEST_ITEMS));
    assert_eq!(digest.generation, state.generation);
    assert_eq!(digest.decisions.len(), DIGEST_ITEMS);
    // One decision superseded another: it no longer counts.
    assert_eq!(digest.decisions_total, extra - 1);
    assert_eq!(digest.decisions[0].text, format!("decision {}", extra - 1));
    assert_eq!(digest.constraints_total, extra);
    assert_eq!(digest.notes_total, extra);
    assert_eq!(digest.notes[0].text, format!("note {}", extra - 1));
    assert_eq!((digest.alerts.len(), digest.alerts_total), (1, 1));
    assert!(!digest.is_whole());
}

/// Story: the bounded view of the ledger is every live run and the newest `recent` ended
/// ones, oldest first; pages after a run's seq walk every run once.
async fn the_runs_view_is_live_runs_and_the_newest_others_and_pages_walk_all(store: &Store) {
    cast(store).await;
    let ended = |id: &str| RunChange::Exited {
        run: id.into(),
        status: RunStatus::Done,
        exit_code: Some(0),
        signal: None,
        reason: None,
    };
    // r1 stays live, oldest of all; r2..r6 end; r7 stays live, newest of all.
    let mut changes = vec![registration("r1", Some("exec-1"))];
    for i in 2..=6 {
        let id = format!("r{i}");
        changes.push(registration(&id, Some("exec-1")));
        changes.push(ended(&id));
    }
    changes.push(registration("r7", Some("exec-2")));
    store.record_run("exec-1", &changes).await.unwrap();
    let ids = |runs: Vec<Run>| runs.into_iter().map(|r| r.id).collect::<Vec<_>>();

    let view = store
        .runs(&RunQuery {
            recent: Some(2),
            ..RunQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(ids(view), ["r1", "r5", "r6", "r7"]);

    let mut walked = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .runs(&RunQuery {
                after_seq: after,
                limit: Some(3),
                ..RunQuery::default()
            })
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        after = Some(last.seq);
        walked.extend(ids(page));
        assert!(walked.len() <= 7, "the pages do not end: {walked:?}");
    }
    assert_eq!(walked, ["r1", "r2", "r3", "r4", "r5", "r6", "r7"]);
}

/// Story 16b: The failures lane reads each run that failed or was lost within its window,
/// and for each only what could clear it: the newest later success of the same command
/// and the newest for the same order. Earlier successes, other commands' successes and
/// failures before the window are not read.
async fn the_failures_lane_reads_failures_and_only_what_could_clear_them(store: &Store) {
    async fn ended(store: &Store, id: &str, command: &str, order: Option<&str>, end: RunChange) {
        let register = RunChange::Registered(Box::new(Registration {
            run: id.into(),
            command: command.split(' ').map(str::to_owned).collect(),
            order: order.map(str::to_owned),
            ..Registration::default()
        }));
        store
            .record_run("@launch", &[register, run_started(id), end])
            .await
            .unwrap();
        // Each run ends in a millisecond of its own: a clearing success ends later.
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let exit = |id: &str, status: RunStatus| RunChange::Exited {
        run: id.into(),
        status,
        exit_code: Some(i32::from(status != RunStatus::Done)),
        signal: None,
        reason: None,
    };
    cast(store).await;
    ended(
        store,
        "early-a",
        "make a",
        None,
        exit("early-a", RunStatus::Done),
    )
    .await;
    ended(
        store,
        "early-d",
        "make d",
        None,
        exit("early-d", RunStatus::Done),
    )
    .await;
    ended(store, "f0", "make z", None, exit("f0", RunStatus::Failed)).await;
    let window = now_ms();
    tokio::time::sleep(Duration::from_millis(3)).await;
    ended(
        store,
        "f1",
        "make a",
        Some("wo_1"),
        exit("f1", RunStatus::Failed),
    )
    .await;
    for i in 0..5 {
        let id = format!("b{i}");
        ended(store, &id, "make b", None, exit(&id, RunStatus::Done)).await;
    }
    ended(store, "a1", "make a", None, exit("a1", RunStatus::Done)).await;
    ended(store, "a2", "make a", None, exit("a2", RunStatus::Done)).await;
    ended(
        store,
        "o1",
        "make c",
        Some("wo_1"),
        exit("o1", RunStatus::Done),
    )
    .await;
    let lost = RunChange::Lost {
        run: "f2".into(),
        reason: "gone".into(),
    };
    ended(store, "f2", "make d", None, lost).await;
    ended(
        store,
        "d0",
        "make d",
        Some("wo_2"),
        exit("d0", RunStatus::Failed),
    )
    .await;

    let read: Vec<String> = store
        .failures(window)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(read, ["f1", "f2", "d0", "a2", "o1"]);
    let all: Vec<String> = store
        .failures(0)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(
        all,
        ["f0", "f1", "f2", "d0", "a2", "o1"],
        "f0 has nothing later to clear it"
    );
}

/// How many random sequences the authority story runs on each backend, and how long each
/// is.
const AUTHORITY_CASES: u64 = 24;
const AUTHORITY_STEPS: usize = 40;

/// Story (property): random operations by random participants of every role, some with
/// policies narrowed to a topic, on one store. A forbidden refusal adds exactly one event,
/// its security event; any other refusal adds nothing; and at the end every request
/// sent to a participant and not yet closed can be closed by it: completed, unless its
/// policy changed after the send (then handed back, which is always open).
async fn random_operations_keep_authority_s_promises<B: Backend>() {
    const WHO: [&str; 5] = ["planner", "impl-1", "rev", "own", "obs"];
    const TOPICS: [&str; 3] = ["csv-export", "billing", "work-order"];
    let mut forbidden = 0;
    let mut other_refusals = 0;
    let mut checked = 0;
    for case in 0..AUTHORITY_CASES {
        let backend = B::fresh(DEFAULT_BUSY_TIMEOUT).await;
        let store = backend.store();
        let seed = 0x9E37_79B9_7F4A_7C15 ^ (case + 1);
        let mut dice = Dice(seed);
        for (who, role) in [
            ("planner", "planner"),
            ("impl-1", "executor"),
            ("rev", "reviewer"),
            ("own", "owner"),
            ("obs", "observer"),
        ] {
            store
                .add_participant("@local", &name(who), role, None)
                .await
                .unwrap();
        }
        let mut sent: Vec<String> = Vec::new();
        // When each message was sent and each participant's policy last changed: work
        // sent after a recipient's last change must be completable by it.
        let mut sent_at: std::collections::HashMap<String, usize> = Default::default();
        let mut policy_at: std::collections::HashMap<String, usize> = Default::default();
        for step in 0..AUTHORITY_STEPS {
            let who = name(dice.pick(&WHO));
            let before = generation(store).await;
            let security = store
                .events_of_kind("security.refused", None, 500)
                .await
                .unwrap()
                .len();
            let on_record = refusals(store).await;
            let what = dice.below(8);
            let result: baton_store::Result<()> = match what {
                0 | 1 => {
                    let kind = dice.pick(&[Request, Info, MessageType::Message]);
                    let to = dice.pick(&WHO);
                    let mut d = draft(&[to], kind, dice.pick(&TOPICS), &format!("{case}-{step}"));
                    if !sent.is_empty() && dice.below(3) == 0 {
                        d.reply_to = Some(dice.pick(&sent));
                    }
                    store.send(&who, d, 0).await.map(|s| {
                        sent_at.insert(s.id.clone(), step);
                        sent.push(s.id);
                    })
                }
                2 if !sent.is_empty() => {
                    let id = dice.pick(&sent);
                    store.fetch(Some(&who), &id).await.map(drop)
                }
                3 if !sent.is_empty() => {
                    let id = dice.pick(&sent);
                    let verb = dice.pick(&[
                        Verb::Ack,
                        Verb::Complete,
                        Verb::HandBack,
                        Verb::Refuse,
                        Verb::Archive,
                    ]);
                    let note = matches!(verb, Verb::HandBack | Verb::Refuse).then_some("why");
                    store.step(&who, &id, verb, note).await.map(drop)
                }
                4 => {
                    let op = StateOp::Decide {
                        text: format!("decision {step}"),
                        why: "random".into(),
                        supersedes: None,
                    };
                    store.change_state(who.as_str(), &[op]).await.map(drop)
                }
                5 => {
                    use baton_core::gate::{GateChange, NeedSource};
                    let need = GateChange::Need {
                        id: format!("n{case}-{step}"),
                        text: "look".into(),
                        order: None,
                        source: NeedSource::Hand,
                        run: None,
                    };
                    store.record_gate(who.as_str(), &[need]).await.map(drop)
                }
                6 => {
                    // The local operator narrows someone to one topic, or restores its role's.
                    let topics = Policy::topics(&[dice.pick(&["csv-*", "billing"])]).unwrap();
                    let policy = (dice.below(2) == 0).then(|| Policy {
                        may: [Power::Send, Power::Accept, Power::Request].into(),
                        topics: Some(topics),
                    });
                    policy_at.insert(who.to_string(), step);
                    store.set_policy("@local", &who, policy).await.map(drop)
                }
                _ => Ok(()),
            };
            let after = generation(store).await;
            let security_after = store
                .events_of_kind("security.refused", None, 500)
                .await
                .unwrap()
                .len();
            let context = format!("seed {seed:#x} step {step}: {who} op {what}: {result:?}");
            match &result {
                Err(StoreError::Refused(r)) if r.kind() == RefusalKind::Forbidden => {
                    forbidden += 1;
                    // Its refusal on record: an event of its own, or a repeat counted on
                    // the one it repeats; nothing else.
                    assert_eq!(refusals(store).await, on_record + 1, "{context}");
                    assert!(
                        (after, security_after) == (before + 1, security + 1)
                            || (after, security_after) == (before, security),
                        "{context}"
                    );
                }
                Err(StoreError::Refused(_)) => {
                    other_refusals += 1;
                    assert_eq!(after, before, "{context}");
                }
                Err(e) => panic!("{context}: the store failed: {e}"),
                Ok(()) => assert_eq!(security_after, security, "{context}"),
            }
        }
        // Whatever was delivered to a participant it can close.
        for id in &sent {
            let env = envelope(store, id).await;
            if env.kind != Request {
                continue;
            }
            for recipient in &env.to {
                if !matches!(recipient.status, Pending | Delivered) {
                    continue;
                }
                let who = &recipient.name;
                // What is still pending it reads first, as it would.
                store.fetch(Some(who), id).await.unwrap();
                let changed_since = policy_at
                    .get(who.as_str())
                    .is_some_and(|at| *at >= sent_at[id.as_str()]);
                checked += 1;
                let closed = match store.step(who, id, Verb::Complete, None).await {
                    Ok(_) => Ok(()),
                    // Only a policy narrowed after the send may keep it from completing;
                    // handing back is always open.
                    Err(StoreError::Refused(Refusal::Beyond { .. })) if changed_since => store
                        .step(who, id, Verb::HandBack, Some("my policy changed"))
                        .await
                        .map(drop),
                    Err(e) => Err(e),
                };
                assert!(
                    closed.is_ok(),
                    "seed {seed:#x}: {who} cannot close {id}: {closed:?}"
                );
            }
        }
    }
    println!(
        "{AUTHORITY_CASES} cases of {AUTHORITY_STEPS} operations: {forbidden} forbidden, \
         {other_refusals} other refusals, {checked} delivered requests closed"
    );
    assert!(
        forbidden > 0 && other_refusals > 0,
        "the cases tried nothing refused"
    );
    assert!(checked > 0, "no delivered request was left to close");
}

/// Story 16: Run rows, too, are a projection: replaying the log rebuilds them exactly.
async fn runs_replay_to_the_same_rows<B: Backend>() {
    let backend = B::fresh(DEFAULT_BUSY_TIMEOUT).await;
    let store = backend.store();
    a_run_is_the_fold_of_its_facts(store).await;
    store
        .record_run("exec-2", &[registration("r3", Some("exec-2"))])
        .await
        .unwrap();
    store.reap_lost("@reaper", "r3", "gone").await.unwrap();
    let live = backend.projection_dump().await;
    assert!(
        live.iter().filter(|r| r.starts_with("r|")).count() >= 3,
        "{live:?}"
    );
    backend.rebuild_projections().await;
    assert_eq!(backend.projection_dump().await, live);
}

/// A Work Order from `from` to `to` (the lifecycle reads `id`, `from`, `to`,
/// `escalate_to` and `deadline`; the AWL rules are the caller's).
fn order_doc(id: &str, from: &str, to: &str, deadline: &str) -> Payload {
    Payload::from_value(
        serde_json::json!({
            "spec": "awl/work-order@0.1", "id": id, "created_at": "2025-01-01T00:00:00Z",
            "from": from, "to": to, "escalate_to": "observer", "goal": "Keep the CSV filters",
            "criteria": [{"id": "c1", "text": "filtered rows only"}], "budget": {"usd": 2},
            "deadline": deadline, "tools": ["repo/*"]
        }),
        DEFAULT_PAYLOAD_CAP,
    )
    .expect("a valid payload")
}

const FAR: &str = "2999-01-01T00:00:00Z";

fn report_of(from: &str, status: &str) -> OrderRequest {
    OrderRequest::Report {
        report: serde_json::json!({"order_id": "wo_1", "from": from, "status": status}),
        findings: vec![],
    }
}

fn topic(t: &str) -> Topic {
    Topic::new(t).expect("a valid topic")
}

/// Takes a step that must succeed, expecting the order at `seq`, and returns the new status.
async fn order_step(
    store: &Store,
    who: &str,
    id: &str,
    seq: i64,
    request: OrderRequest,
) -> OrderStatus {
    store
        .order_step(&name(who), id, seq, request)
        .await
        .unwrap_or_else(|e| panic!("{who}: {e}"))
        .order
        .status
}

/// A negotiation's parties are participants unless its spec declares them external, and a
/// settled one opens again under its id, the sitting before it kept.
async fn a_negotiation_takes_participants_and_opens_again_once_settled(store: &Store) {
    cast(store).await;
    let spec = |external: bool| {
        serde_json::json!({
            "id": "db", "rounds": 10,
            "issues": [{"name": "db", "options": ["sqlite", "postgres"]}],
            "parties": [{"name": "planner"}, {"name": "vendor", "external": external}]
        })
    };
    let position = serde_json::json!({
        "weights": {"db": 1}, "utilities": {"db": {"sqlite": 1, "postgres": 1}}, "floor": 0.5
    });
    let positions = [
        (name("planner"), position.clone()),
        (name("vendor"), position),
    ];
    let err = refused(store, store.negotiate("planner", &spec(false), &positions)).await;
    assert_variant!(err, StoreError::Refused(Refusal::NegotiationInput { .. }));
    let first = store
        .negotiate("planner", &spec(true), &positions)
        .await
        .expect("an external party's position, handed over with the spec");
    assert!(first.settlement.is_some() && first.earlier.is_empty());
    let again = store
        .open_negotiation("planner", &spec(true))
        .await
        .expect("a settled negotiation opens again");
    assert!(again.settlement.is_none());
    assert_eq!(again.earlier.len(), 1);
    assert_eq!(store.negotiation("db").await.unwrap(), Some(again));
    let err = refused(store, store.open_negotiation("planner", &spec(true))).await;
    assert_variant!(err, StoreError::Refused(Refusal::NegotiationExists { .. }));
}

/// Story 17: A Work Order goes round its lifecycle: offered as a request in its worker's
/// inbox, every step an event with the order's own seq from 1, reports counted; the wrong
/// party, a step the table does not allow and a stale view are refused and write nothing.
async fn an_order_goes_round_its_lifecycle(store: &Store) {
    cast(store).await;
    let offered = store
        .create_order(
            &name("planner"),
            topic("csv"),
            order_doc("wo_1", "planner", "exec-1", FAR),
        )
        .await
        .expect("an offer");
    let order = &offered.order;
    assert_eq!(
        (order.status, order.seq, order.attempt),
        (OrderStatus::Offered, 1, 0)
    );
    let inbox = store
        .inbox(&name("exec-1"), false, &Window::EVERYTHING)
        .await
        .unwrap();
    assert_eq!(ids(&inbox), std::slice::from_ref(&order.message));
    assert_eq!(inbox[0].kind, Request);
    let fetched = store.fetch(None, &order.message).await.unwrap();
    assert_eq!(
        fetched.payload["id"], "wo_1",
        "the request carries the document"
    );
    assert_eq!(offered.events.len(), 2, "the message and the offer");

    // Refusals, each writing nothing.
    for (who, expected, request, want) in [
        ("exec-2", 1, OrderRequest::Accept, "forbidden"),
        ("planner", 1, OrderRequest::Accept, "forbidden"),
        ("exec-1", 1, OrderRequest::Start, "transition"),
        ("exec-1", 0, OrderRequest::Accept, "conflict"),
        (
            "observer",
            1,
            OrderRequest::Answer { text: "x".into() },
            "transition",
        ),
    ] {
        let err = refused(
            store,
            store.order_step(&name(who), "wo_1", expected, request),
        )
        .await;
        let got = match err {
            StoreError::Refused(Refusal::OrderRole { .. }) => "forbidden",
            StoreError::Refused(Refusal::Transition(_)) => "transition",
            StoreError::Refused(Refusal::Moved { .. }) => "conflict",
            other => panic!("{who}: unexpected {other:?}"),
        };
        assert_eq!(got, want, "{who} expecting seq {expected}");
    }
    assert_variant!(
        refused(
            store,
            store.order_step(&name("exec-1"), "wo_9", 1, OrderRequest::Accept)
        )
        .await,
        StoreError::Refused(Refusal::NotFound {
            record: Record::Order,
            ..
        })
    );

    let round = [
        ("exec-1", OrderRequest::Accept, OrderStatus::Accepted),
        ("exec-1", OrderRequest::Start, OrderStatus::Working),
        (
            "exec-1",
            report_of("exec-1", "blocked"),
            OrderStatus::Blocked,
        ),
        (
            "observer",
            OrderRequest::Answer { text: "UTC".into() },
            OrderStatus::Working,
        ),
        (
            "exec-1",
            report_of("exec-1", "done"),
            OrderStatus::Submitted,
        ),
        (
            "planner",
            OrderRequest::Rework {
                reason: "keep the header".into(),
            },
            OrderStatus::Working,
        ),
        (
            "exec-1",
            report_of("exec-1", "done"),
            OrderStatus::Submitted,
        ),
        ("planner", OrderRequest::Approve, OrderStatus::Approved),
    ];
    for (i, (who, request, want)) in round.into_iter().enumerate() {
        assert_eq!(
            order_step(store, who, "wo_1", i as i64 + 1, request).await,
            want
        );
        let awaiting = store.metrics().await.unwrap().awaiting_approval;
        assert_eq!(
            awaiting,
            u64::from(want == OrderStatus::Submitted),
            "after {want:?}"
        );
    }
    let order = store.order("wo_1").await.unwrap().expect("the order");
    assert_eq!(
        (order.status, order.seq, order.attempt),
        (OrderStatus::Approved, 9, 3)
    );
    // Three submissions, one approval: the wait runs from the last submission.
    let m = store.metrics().await.unwrap();
    assert_eq!((m.awaiting_approval, m.tally.approval_wait.count), (0, 1));
    assert_eq!(m.tally, replayed(store).await);
    let events = store.order_events_since("wo_1", 0).await.unwrap();
    let seqs: Vec<i64> = events
        .iter()
        .map(|e| match &e.change {
            Change::Order(c) => c.seq(),
            other => panic!("not an order event: {other:?}"),
        })
        .collect();
    assert_eq!(seqs, (1..=9).collect::<Vec<_>>());
    assert_eq!(store.order_events_since("wo_1", 7).await.unwrap().len(), 2);
    assert_eq!(events[3].actor, "exec-1");
    assert!(matches!(
        &events[5].change,
        Change::Order(OrderChange::Stepped(s)) if s.attempt == Some(2)
    ));
    assert_variant!(
        refused(
            store,
            store.order_step(
                &name("planner"),
                "wo_1",
                9,
                OrderRequest::Cancel { reason: None }
            )
        )
        .await,
        StoreError::Refused(Refusal::Transition(_))
    );
}

/// Story 18: An offer is the acting identity's own, to a participant, under a new id; a
/// refused offer sends nothing. The list shows open orders, by party, oldest first.
async fn an_offer_is_checked_and_orders_list_by_party(store: &Store) {
    cast(store).await;
    let offer = |who: &str, doc| {
        let who = name(who);
        async move { store.create_order(&who, topic("csv"), doc).await }
    };
    assert_variant!(
        refused(
            store,
            offer("exec-2", order_doc("wo_1", "planner", "exec-1", FAR))
        )
        .await,
        StoreError::Refused(Refusal::OfferFrom { .. })
    );
    assert_variant!(
        refused(
            store,
            offer("planner", order_doc("wo_1", "planner", "nobody", FAR))
        )
        .await,
        StoreError::Refused(Refusal::UnknownParticipant { .. })
    );
    assert_variant!(
        refused(
            store,
            offer("planner", order_doc("wo_1", "planner", "Not A Name", FAR))
        )
        .await,
        StoreError::Refused(Refusal::Name {
            field: Field::OrderTo,
            ..
        })
    );
    assert_variant!(
        refused(
            store,
            offer("planner", order_doc("wo_1", "planner", "planner", FAR))
        )
        .await,
        StoreError::Refused(Refusal::SelfSend { .. })
    );
    offer("planner", order_doc("wo_1", "planner", "exec-1", FAR))
        .await
        .unwrap();
    assert_variant!(
        refused(
            store,
            offer("planner", order_doc("wo_1", "planner", "exec-2", FAR))
        )
        .await,
        StoreError::Refused(Refusal::OrderExists { .. })
    );
    offer("planner", order_doc("wo_2", "planner", "exec-2", FAR))
        .await
        .unwrap();
    order_step(
        store,
        "exec-2",
        "wo_2",
        1,
        OrderRequest::Decline { reason: None },
    )
    .await;

    let list = |party: Option<&str>, closed: bool| {
        let query = OrderQuery {
            party: party.map(str::to_owned),
            closed,
            ..OrderQuery::default()
        };
        async move {
            store
                .orders(&query)
                .await
                .unwrap()
                .into_iter()
                .map(|o| o.id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(list(None, false).await, ["wo_1"]);
    assert_eq!(list(None, true).await, ["wo_1", "wo_2"]);
    assert_eq!(list(Some("exec-2"), true).await, ["wo_2"]);
    assert_eq!(
        list(Some("observer"), true).await,
        ["wo_1", "wo_2"],
        "escalate_to"
    );
    assert!(list(Some("exec-2"), false).await.is_empty());
}

/// Story 21c: What waits for a person is read from open work only. A need stays open
/// until its item is acknowledged; an order is stuck while an effect of it failed or
/// started with no recorded end, and leaves once every one settled well. Acknowledgements
/// are found by item, and the two projections are what a replay of the log gives.
async fn what_waits_for_a_person_is_open_work_only<B: Backend>() {
    use baton_core::effect::EffectChange;
    use baton_core::gate::{GateChange, NeedSource};
    let backend = B::fresh(DEFAULT_BUSY_TIMEOUT).await;
    let store = backend.store();
    cast(store).await;
    let need = |id: &str, order: Option<&str>| GateChange::Need {
        id: id.into(),
        text: format!("about {id}"),
        order: order.map(str::to_owned),
        source: NeedSource::Hand,
        run: None,
    };
    let ack = |item: &str| GateChange::Acked { item: item.into() };
    store
        .record_gate("planner", &[need("n1", None), need("n2", Some("wo_1"))])
        .await
        .unwrap();
    store
        .record_gate("planner", &[ack("need:n1"), ack("order:wo_1")])
        .await
        .unwrap();
    let open = store.attention().await.unwrap();
    let ids: Vec<&str> = open.needs.iter().map(|e| e.change.subject()).collect();
    assert_eq!(ids, ["n2"], "n1 was acknowledged");
    let acks = store
        .acks(&["need:n1".into(), "need:n2".into(), "order:wo_1".into()])
        .await
        .unwrap();
    assert!(
        acks[0].is_some() && acks[1].is_none() && acks[2].is_some(),
        "{acks:?}"
    );

    let effect = |change: EffectChange| NewEvent::new("@gateway", Change::Effect(change), now_ms());
    let held = |order: &str, reference: &str| EffectChange::Held {
        order: order.into(),
        reference: reference.into(),
        tool: "deploy".into(),
        arguments: serde_json::Map::new(),
        upstream: vec!["upstream".into()],
    };
    let started = |order: &str, reference: &str| EffectChange::Started {
        order: order.into(),
        reference: reference.into(),
    };
    let finished = |order: &str, reference: &str, ok: bool| EffectChange::Finished {
        order: order.into(),
        reference: reference.into(),
        ok,
        result: serde_json::json!({}),
    };
    inject(
        store,
        vec![
            effect(held("wo_a", "deploy#1")),
            effect(held("wo_a", "deploy#2")),
            effect(held("wo_b", "deploy#1")),
            effect(held("wo_c", "deploy#1")),
            // wo_a: one ran, the other started and never finished.
            effect(started("wo_a", "deploy#1")),
            effect(finished("wo_a", "deploy#1", true)),
            effect(started("wo_a", "deploy#2")),
            // wo_b failed; wo_c started and then ran.
            effect(started("wo_b", "deploy#1")),
            effect(finished("wo_b", "deploy#1", false)),
            effect(started("wo_c", "deploy#1")),
        ],
    )
    .await;
    assert_eq!(
        store.attention().await.unwrap().stuck,
        ["wo_a", "wo_b", "wo_c"]
    );
    inject(store, vec![effect(finished("wo_c", "deploy#1", true))]).await;
    // wo_a's first effect finishing well again leaves its second one stuck.
    inject(store, vec![effect(finished("wo_a", "deploy#1", true))]).await;
    assert_eq!(store.attention().await.unwrap().stuck, ["wo_a", "wo_b"]);

    let live = backend.projection_dump().await;
    assert!(live.iter().any(|r| r.starts_with("n|n2|")), "{live:?}");
    assert!(live.iter().any(|r| r == "u|wo_b"), "{live:?}");
    backend.rebuild_projections().await;
    assert_eq!(backend.projection_dump().await, live, "replay differs");
}

/// Story 22: Four steps on one order taken from the same view (each expecting the seq it
/// read): whichever the write lock lets in first is taken, and the others find the order
/// moved and write nothing. On SQLite the four run one after the other on this task; the
/// steps of separate processes racing for real are the command line's concurrency tests.
async fn steps_from_the_same_view_one_is_taken_the_others_find_it_moved(store: &Store) {
    cast(store).await;
    let exec = name("exec-1");
    for id in ["wo_1", "wo_2", "wo_3"] {
        store
            .create_order(
                &name("planner"),
                topic("csv"),
                order_doc(id, "planner", "exec-1", FAR),
            )
            .await
            .unwrap();
        let accept = || store.order_step(&exec, id, 1, OrderRequest::Accept);
        let raced = tokio::join!(accept(), accept(), accept(), accept());
        let (won, lost): (Vec<_>, Vec<_>) = [raced.0, raced.1, raced.2, raced.3]
            .into_iter()
            .partition(Result::is_ok);
        assert_eq!(
            won.len(),
            1,
            "{id}: exactly one step should be taken: {won:?}"
        );
        for err in lost {
            assert_variant!(err.unwrap_err(), StoreError::Refused(Refusal::Moved { .. }));
        }
        let order = store.order(id).await.unwrap().unwrap();
        assert_eq!(
            (order.seq, order.status),
            (2, OrderStatus::Accepted),
            "{id}"
        );
        assert_eq!(
            store.order_events_since(id, 1).await.unwrap().len(),
            1,
            "{id}: one step after the offer"
        );
    }
}

/// Story 19: Order rows, too, are a projection: replaying the log rebuilds them exactly.
async fn orders_replay_to_the_same_rows<B: Backend>() {
    let backend = B::fresh(DEFAULT_BUSY_TIMEOUT).await;
    let store = backend.store();
    an_order_goes_round_its_lifecycle(store).await;
    store
        .create_order(
            &name("planner"),
            topic("csv"),
            order_doc("wo_2", "planner", "exec-2", FAR),
        )
        .await
        .unwrap();
    let live = backend.projection_dump().await;
    assert_eq!(
        live.iter().filter(|r| r.starts_with("o|")).count(),
        2,
        "{live:?}"
    );
    backend.rebuild_projections().await;
    assert_eq!(backend.projection_dump().await, live);
}

/// Story 23: A key's last use is kept beside the log, not in it: recording one writes no
/// event, a later use wins over an earlier one, and a rebuild of the projections keeps it.
async fn a_keys_last_use_is_kept_beside_the_log<B: Backend>() {
    use baton_core::key::{self, Scope};
    use baton_store::KeyIssue;
    let backend = B::fresh(DEFAULT_BUSY_TIMEOUT).await;
    let store = backend.store();
    cast(store).await;
    let issue = |id: &str| KeyIssue {
        id: id.into(),
        participant: name("exec-1"),
        scope: Scope::Write,
        hash: key::hash(id),
        expires_at: None,
    };
    store.issue_key("@local", issue("k1")).await.unwrap();
    store.issue_key("@local", issue("k2")).await.unwrap();
    let unused = store.key("k1").await.unwrap().unwrap();
    assert_eq!(unused.last_used_at, None, "issued, never used");
    let before = generation(store).await;
    store.key_used("k1", 5_000).await.unwrap();
    store.key_used("k1", 9_000).await.unwrap();
    store.key_used("k1", 7_000).await.unwrap();
    assert_eq!(generation(store).await, before, "a use is not an event");
    assert_eq!(
        store.key("k1").await.unwrap().unwrap().last_used_at,
        Some(9_000)
    );
    let uses: Vec<(String, Option<i64>)> = store
        .keys()
        .await
        .unwrap()
        .into_iter()
        .map(|k| (k.id, k.last_used_at))
        .collect();
    assert_eq!(uses, [("k1".into(), Some(9_000)), ("k2".into(), None)]);
    let live = backend.projection_dump().await;
    backend.rebuild_projections().await;
    assert_eq!(backend.projection_dump().await, live);
    assert_eq!(
        store.key("k1").await.unwrap().unwrap().last_used_at,
        Some(9_000),
        "a rebuild keeps the last use"
    );
    store.revoke_key("@local", "k1").await.unwrap();
    assert_eq!(
        store.key("k1").await.unwrap().unwrap().last_used_at,
        Some(9_000),
        "a revocation keeps it too"
    );
}

// ---------------------------------------------------------------------------------------
// One module of tests per backend
// ---------------------------------------------------------------------------------------

/// Story: a session and its helpers seen through hooks are rows of the ledger; the store
/// counts live and recent rows by status and source (and those quiet since a time), and a
/// view can leave helpers out.
async fn sessions_and_helpers_are_rows_counted_by_source(store: &Store) {
    use baton_core::run::{HookCall, RunStatus, Source};
    cast(store).await;
    for (event, helper) in [
        ("SessionStart", None),
        ("SubagentStart", Some("a1")),
        ("SubagentStart", Some("a2")),
        ("PostToolUse", Some("a2")),
        ("SubagentStop", Some("a2")),
    ] {
        let call = HookCall {
            row: HookCall::row_of(None, "claude", Some("s1"), helper),
            run: None,
            agent: "claude".into(),
            event: event.into(),
            session: Some("s1".into()),
            tool: (event == "PostToolUse").then(|| "Read".into()),
            agent_id: helper.map(Into::into),
            agent_type: helper.map(|_| "Explore".into()),
        };
        store.record_hook("planner", call).await.unwrap();
    }
    let all = store.runs(&RunQuery::default()).await.unwrap();
    assert_eq!(all.len(), 3, "{all:?}");
    let row = |id: &str| {
        all.iter()
            .find(|r| r.id == id)
            .cloned()
            .unwrap_or_else(|| panic!("no row {id}"))
    };
    let session = row("claude:s1");
    assert_eq!(
        (
            session.source,
            session.status,
            session.participant.as_deref()
        ),
        (Source::Session, RunStatus::Running, Some("planner"))
    );
    let ended = row("claude:s1/a2");
    assert_eq!(
        (ended.status, ended.parent.as_deref(), ended.tools.clone()),
        (RunStatus::Ended, Some("claude:s1"), vec!["Read".to_owned()])
    );
    let mut counts = store.run_counts(0, Millis::MAX, None).await.unwrap();
    counts.sort_by_key(|c| (c.source.as_str(), c.status.as_str()));
    let seen: Vec<(Source, RunStatus, u64, u64)> = counts
        .iter()
        .map(|c| (c.source, c.status, c.n, c.quiet))
        .collect();
    assert_eq!(
        seen,
        [
            (Source::Helper, RunStatus::Ended, 1, 1),
            (Source::Helper, RunStatus::Running, 1, 1),
            (Source::Session, RunStatus::Running, 1, 1),
        ]
    );
    let none_quiet = store.run_counts(0, 0, None).await.unwrap();
    assert!(none_quiet.iter().all(|c| c.quiet == 0), "{none_quiet:?}");
    // Counted for their parent: the session's helpers only, live and ended alike.
    let of = |parents: &'static [&'static str]| async move {
        let parents: Vec<String> = parents.iter().map(|p| p.to_string()).collect();
        let mut counts = store
            .run_counts(0, Millis::MAX, Some(&parents))
            .await
            .unwrap();
        counts.sort_by_key(|c| c.status.as_str());
        counts
            .iter()
            .map(|c| (c.source, c.status, c.n, c.parent.clone()))
            .collect::<Vec<_>>()
    };
    let parent = Some("claude:s1".to_owned());
    assert_eq!(
        of(&["claude:s1"]).await,
        [
            (Source::Helper, RunStatus::Ended, 1, parent.clone()),
            (Source::Helper, RunStatus::Running, 1, parent),
        ]
    );
    assert_eq!(of(&["claude:s2"]).await, [], "no helpers under another row");
    let listed: Vec<String> = store
        .runs(&RunQuery {
            recent: Some(10),
            without_helpers: true,
            ..RunQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, ["claude:s1"]);
}

/// Ten thousand hook events of one session, with helpers, stay one row for the session and
/// one per helper: the row folds its events, it does not grow with them.
async fn ten_thousand_hooks_of_one_session_are_one_row_and_a_row_per_helper(store: &Store) {
    use baton_core::run::{HookCall, MAX_TOOLS, RunStatus, Source};
    cast(store).await;
    let call = |event: &str, helper: Option<String>, tool: Option<String>| {
        RunChange::Hook(HookCall {
            row: HookCall::row_of(None, "claude", Some("s1"), helper.as_deref()),
            agent: "claude".into(),
            event: event.into(),
            session: Some("s1".into()),
            tool,
            agent_type: helper.as_ref().map(|_| "Explore".into()),
            agent_id: helper,
            ..HookCall::default()
        })
    };
    let mut changes = vec![call("SessionStart", None, None)];
    for h in 0..20 {
        changes.push(call("SubagentStart", Some(format!("a{h}")), None));
        changes.push(call("SubagentStop", Some(format!("a{h}")), None));
    }
    // More distinct tools than a row keeps.
    while changes.len() < 10_000 {
        let tool = format!("tool-{}", changes.len() % (MAX_TOOLS + 8));
        changes.push(call("PostToolUse", None, Some(tool)));
    }
    for chunk in changes.chunks(2500) {
        store.record_run("planner", chunk).await.unwrap();
    }
    let all = store.runs(&RunQuery::default()).await.unwrap();
    assert_eq!(all.len(), 21, "one session and twenty helpers");
    let session = all
        .iter()
        .find(|r| r.id == "claude:s1")
        .expect("the session's row");
    assert_eq!(
        (session.source, session.status, session.tools.len()),
        (Source::Session, RunStatus::Running, MAX_TOOLS)
    );
    let counts = store.run_counts(0, 0, None).await.unwrap();
    let helpers: u64 = counts
        .iter()
        .filter(|c| c.source == Source::Helper && c.status == RunStatus::Ended)
        .map(|c| c.n)
        .sum();
    assert_eq!(helpers, 20, "{counts:?}");
    assert!(store.generation().await.unwrap() >= 10_000);
}

/// Appends `events` as an imported log (merged: a test's store has a history of its own).
async fn inject(store: &Store, events: Vec<NewEvent>) -> baton_store::Imported {
    let lines = events
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            let event = baton_core::Event {
                seq: 0,
                id: e.id,
                at: e.at,
                actor: e.actor,
                change: e.change,
            };
            (i + 1, event)
        })
        .collect();
    store
        .import(lines, true, DEFAULT_PAYLOAD_CAP)
        .await
        .unwrap()
}

/// Story 19: An event that already has an id and a time (an imported log) is appended as
/// given, through the same append as every write, and projected like a live one; the same
/// id again is skipped: importing twice changes nothing.
async fn an_imported_event_keeps_its_id_and_time(store: &Store) {
    let at: Millis = 1_700_000_000_000;
    let added = NewEvent {
        id: "01HZZZZZZZZZZZZZZZZZZZZZZZ".into(),
        at,
        actor: "@import".into(),
        change: Change::ParticipantAdded {
            name: name("planner"),
            role: "planner".into(),
        },
    };
    let done = inject(store, vec![added.clone()]).await;
    assert_eq!(done.imported, 1);
    let read = store.events(0, 10).await.unwrap();
    assert_eq!(
        (read[0].id.as_str(), read[0].at, read[0].seq),
        (added.id.as_str(), at, 1)
    );
    let planner = store.participant("planner").await.unwrap().unwrap();
    assert_eq!(planner.added_at, at, "projected from the imported event");
    let again = inject(store, vec![added]).await;
    assert_eq!(
        (again.imported, again.skipped),
        (0, 1),
        "the same event id twice"
    );
    assert_eq!(generation(store).await, 1);
}

/// Story 19b: A send's event takes its message's id, and the log finds it by that id like
/// any other event: appending it again writes nothing. A send from a log made before the
/// two shared an id (its event's id differs from its message's) is found by its own id
/// too, so importing such a log twice also changes nothing.
async fn a_send_is_found_by_its_event_id(store: &Store) {
    cast(store).await;
    let id = send(
        store,
        "planner",
        draft(&["exec-1"], Info, "ids", "one id for both"),
    )
    .await;
    let log = store.events(0, u32::MAX).await.unwrap();
    let sent = log.last().expect("the send's event").clone();
    assert_eq!(sent.id, id, "the event takes its message's id");
    let before = generation(store).await;
    assert_eq!(
        inject(store, vec![NewEvent::from(sent.clone())])
            .await
            .imported,
        0
    );
    assert_eq!(generation(store).await, before);

    let Change::MessageSent(mut older) = sent.change.clone() else {
        panic!("a send's event: {sent:?}");
    };
    older.id = "01HZZZZZZZZZZZZZZZZZZZZZZY".into();
    let imported = NewEvent {
        id: "01HZZZZZZZZZZZZZZZZZZZZZZX".into(),
        at: sent.at,
        actor: sent.actor.clone(),
        change: Change::MessageSent(older),
    };
    assert_eq!(
        inject(store, vec![imported.clone()]).await.imported,
        1,
        "a send of its own"
    );
    let log = store.events(0, u32::MAX).await.unwrap();
    assert_eq!(log.last().unwrap().id, imported.id);
    let older_id = "01HZZZZZZZZZZZZZZZZZZZZZZY";
    assert_eq!(
        envelope(store, older_id).await.id,
        older_id,
        "its message is there"
    );
    assert_eq!(inject(store, vec![imported]).await.imported, 0);
    assert_eq!(
        inject(store, vec![NewEvent::from(sent.clone())])
            .await
            .imported,
        0
    );
    assert_eq!(generation(store).await, before + 1);
}

/// Story 20: A database holds projects by name; each is a store of its own, and a project
/// that does not exist is not found (never created by opening it).
async fn a_database_holds_projects_by_name(db: &dyn Database) {
    let shop = ProjectName::new("shop").unwrap();
    let docs = ProjectName::new("docs").unwrap();
    let err = db.project(&shop).await.err().expect("no project yet");
    assert!(
        matches!(
            err,
            StoreError::Refused(Refusal::NotFound {
                record: Record::Project,
                ..
            })
        ),
        "{err:?}"
    );
    assert!(db.add_project(&shop).await.unwrap());
    assert!(
        !db.add_project(&shop).await.unwrap(),
        "adding it again is harmless"
    );
    assert!(db.add_project(&docs).await.unwrap());
    assert_eq!(db.projects().await.unwrap(), [docs.clone(), shop.clone()]);
    // Each project's log is its own.
    let store = db.project(&shop).await.unwrap();
    cast(&store).await;
    assert!(generation(&store).await > 0);
    let other = db.project(&docs).await.unwrap();
    assert_eq!(generation(&other).await, 0);
    assert!(other.participants().await.unwrap().is_empty());
}

#[tokio::test]
async fn sqlite_a_directory_holds_projects_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = baton_store::database(
        &format!("sqlite:{}", dir.path().join("projects").display()),
        DEFAULT_BUSY_TIMEOUT,
    )
    .await
    .unwrap();
    a_database_holds_projects_by_name(db.as_ref()).await;
}

#[tokio::test]
#[cfg_attr(
    not(baton_test_postgres),
    ignore = "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES"
)]
async fn postgres_a_database_holds_projects_by_name() {
    let schema = Schema::new();
    let db = baton_store::database(&schema.url(), DEFAULT_BUSY_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", schema.base));
    a_database_holds_projects_by_name(db.as_ref()).await;
}

/// A URL whose host is an IPv6 address reaches the database (sqlx keeps the brackets,
/// which no resolver reads): here through a forwarder on `[::1]` to the test database.
/// A URL parameter nobody reads, or a `target_session_attrs` asking for a standby, is
/// refused by name, with one host as with several.
#[tokio::test]
#[cfg_attr(
    not(baton_test_postgres),
    ignore = "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES"
)]
async fn postgres_an_ipv6_host_is_reached_and_unknown_parameters_are_refused() {
    let schema = Schema::new();
    let url = schema.url();
    let (scheme, rest) = url.split_once("://").unwrap();
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (user, target) = match authority.rsplit_once('@') {
        Some((user, host)) => (format!("{user}@"), host.to_owned()),
        None => (String::new(), authority.to_owned()),
    };
    let target = if target.contains(':') {
        target
    } else {
        format!("{target}:5432")
    };
    let listener = tokio::net::TcpListener::bind("[::1]:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            let target = target.clone();
            tokio::spawn(async move {
                if let Ok(mut server) = tokio::net::TcpStream::connect(&target).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    let v6 = format!("{scheme}://{user}[::1]:{port}{tail}");
    let db = baton_store::database(&v6, DEFAULT_BUSY_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{v6}: {e}"));
    a_database_holds_projects_by_name(db.as_ref()).await;

    for (extra, named) in [
        ("sslmod=require", "\"sslmod\""),
        (
            "target_session_attrs=standby",
            "target_session_attrs=standby",
        ),
    ] {
        let refused = baton_store::database(&format!("{url}&{extra}"), DEFAULT_BUSY_TIMEOUT)
            .await
            .err()
            .expect("refused");
        assert!(refused.to_string().contains(named), "{refused}");
    }
}

/// Four openers of a new database at once all find it migrated: each waits for the one
/// ahead of it under the migration lock, then finds the work done.
#[tokio::test]
#[cfg_attr(
    not(baton_test_postgres),
    ignore = "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES"
)]
async fn postgres_openers_at_once_all_find_one_schema_migrated() {
    let schema = Schema::new();
    let url = schema.url();
    let open = || PostgresDatabase::connect(&url, DEFAULT_BUSY_TIMEOUT);
    let opened = tokio::join!(open(), open(), open(), open());
    for db in [opened.0, opened.1, opened.2, opened.3] {
        let db = db.expect("a migrated database");
        assert!(db.projects().await.unwrap().is_empty());
    }
}

/// Runs every story against `$backend`: `stores` take `&Store`, `backends` take the
/// backend itself; the delivery model is checked as a property test.
/// A participant refused over and over grows the log by one event: the same refusal within
/// the window is counted on it, and a different one is an event of its own.
async fn a_refusal_repeated_is_counted_on_its_event_not_appended(store: &Store) {
    cast(store).await;
    let before = generation(store).await;
    for _ in 0..1000 {
        store
            .send(
                &name("exec-1"),
                draft(&["planner"], Request, "lane", "ask again"),
                WINDOW,
            )
            .await
            .expect_err("an executor's request");
    }
    assert_eq!(generation(store).await, before + 1, "one event for 1,000");
    let events = store
        .events_of_kind("security.refused", None, 10)
        .await
        .unwrap();
    assert_eq!(events.len(), 1);
    let repeats = store.repeats(&[events[0].seq]).await.unwrap();
    assert_eq!(repeats.len(), 1);
    assert_eq!(repeats[0].count, 999, "the count says how many");
    assert!(repeats[0].last_at >= events[0].at);
    // Another refusal (another topic) is an event of its own, with no repeats yet.
    store
        .send(
            &name("exec-1"),
            draft(&["planner"], Request, "other-lane", "ask"),
            WINDOW,
        )
        .await
        .expect_err("an executor's request");
    let events = store
        .events_of_kind("security.refused", None, 10)
        .await
        .unwrap();
    assert_eq!(events.len(), 2);
    assert!(store.repeats(&[events[0].seq]).await.unwrap().is_empty());
}

/// Authority: what a role's default or a set policy does not allow is refused before
/// anything is written, and the refusal alone is recorded, as a security event.
async fn an_action_beyond_authority_is_refused_and_recorded(store: &Store) {
    cast(store).await;
    let security = |events: Vec<baton_core::Event>| -> Vec<Denied> {
        events
            .into_iter()
            .map(|e| match e.change {
                Change::Denied(d) => d,
                other => panic!("not a security event: {other:?}"),
            })
            .collect()
    };
    assert!(
        store
            .events_of_kind("security.refused", None, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // An executor does not ask for work by default; the refusal writes one event, its own.
    let before = generation(store).await;
    let err = store
        .send(
            &name("exec-1"),
            draft(&["planner"], Request, "lane", "ask 1"),
            WINDOW,
        )
        .await
        .expect_err("an executor's request");
    assert_variant!(
        err,
        StoreError::Refused(Refusal::Beyond {
            power: Power::Request,
            ..
        })
    );
    assert_eq!(
        generation(store).await,
        before + 1,
        "only the security event"
    );
    let recorded = security(
        store
            .events_of_kind("security.refused", None, 10)
            .await
            .unwrap(),
    );
    assert_eq!(recorded.len(), 1);
    assert_eq!(
        (
            recorded[0].participant.as_str(),
            recorded[0].action.as_str(),
            recorded[0].code.as_str()
        ),
        ("exec-1", "request", "forbidden")
    );
    // Information it may send.
    send(store, "exec-1", draft(&["planner"], Info, "lane", "ask 2")).await;

    // Work sent to it while it still takes work on; the policy narrows after.
    let to_it = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "lane", "ask 5"),
    )
    .await;
    store.fetch(Some(&name("exec-1")), &to_it).await.unwrap();

    // A policy reaching some topics: requests there, and nowhere else.
    let asks = Policy::for_role("executor").amend(
        Some([Power::Send, Power::Request].into()),
        Some(Policy::topics(&["billing-*"]).unwrap()),
    );
    let set = store
        .set_policy("@local", &name("exec-1"), Some(asks.clone()))
        .await
        .unwrap();
    assert_eq!(set.policy.as_ref(), Some(&asks));
    let billing = draft(&["exec-2"], Request, "billing-api", "ask 3");
    let id = send(store, "exec-1", billing).await;
    let before = generation(store).await;
    assert_variant!(
        store
            .send(
                &name("exec-1"),
                draft(&["exec-2"], Request, "lane", "ask 4"),
                WINDOW
            )
            .await
            .unwrap_err(),
        StoreError::Refused(Refusal::Beyond { .. })
    );
    assert_eq!(generation(store).await, before + 1);
    // No new work reaches it, refused at the send as the sender's attempt.
    let before = generation(store).await;
    assert_variant!(
        store
            .send(
                &name("planner"),
                draft(&["exec-1"], Request, "lane", "ask 6"),
                WINDOW
            )
            .await
            .unwrap_err(),
        StoreError::Refused(Refusal::Unwilling { .. })
    );
    assert_eq!(
        generation(store).await,
        before + 1,
        "only the security event"
    );
    // It no longer takes on work: completing what it was sent is refused.
    assert_variant!(
        store
            .step(&name("exec-1"), &to_it, Verb::Complete, None)
            .await
            .unwrap_err(),
        StoreError::Refused(Refusal::Beyond {
            power: Power::Accept,
            ..
        })
    );
    // Giving work back takes no power.
    store
        .step(
            &name("exec-1"),
            &to_it,
            Verb::HandBack,
            Some("not mine to take"),
        )
        .await
        .unwrap();
    // exec-2 completes what exec-1 asked of it.
    store.fetch(Some(&name("exec-2")), &id).await.unwrap();
    store
        .step(&name("exec-2"), &id, Verb::Complete, None)
        .await
        .unwrap();

    // Back to the role's default; setting it again changes nothing.
    store
        .set_policy("@local", &name("exec-1"), None)
        .await
        .unwrap();
    let before = generation(store).await;
    let reset = store
        .set_policy("@local", &name("exec-1"), None)
        .await
        .unwrap();
    assert_eq!((reset.policy, generation(store).await), (None, before));

    // An order's sender answers with `approve`: a planner stripped of it cannot.
    store
        .create_order(
            &name("planner"),
            topic("csv"),
            order_doc("wo_a", "planner", "exec-1", FAR),
        )
        .await
        .unwrap();
    for step in [
        OrderRequest::Accept,
        OrderRequest::Start,
        report_of("exec-1", "done"),
    ] {
        let seq = store.order("wo_a").await.unwrap().unwrap().seq;
        store
            .order_step(&name("exec-1"), "wo_a", seq, step)
            .await
            .unwrap();
    }
    let asks_only = Policy::for_role("planner").amend(Some([Power::Request].into()), None);
    store
        .set_policy("@local", &name("planner"), Some(asks_only))
        .await
        .unwrap();
    let seq = store.order("wo_a").await.unwrap().unwrap().seq;
    let before = generation(store).await;
    assert_variant!(
        store
            .order_step(&name("planner"), "wo_a", seq, OrderRequest::Approve)
            .await
            .unwrap_err(),
        StoreError::Refused(Refusal::Beyond {
            power: Power::Approve,
            ..
        })
    );
    assert_eq!(generation(store).await, before + 1);
    assert_eq!(
        store.order("wo_a").await.unwrap().unwrap().seq,
        seq,
        "the order did not move"
    );

    let all = security(
        store
            .events_of_kind("security.refused", None, 10)
            .await
            .unwrap(),
    );
    assert_eq!(all.len(), 5, "newest first: {all:?}");
    let actions: Vec<&str> = all.iter().map(|d| d.action.as_str()).collect();
    assert_eq!(
        actions,
        [
            "approve",
            "accept",
            "send a request to exec-1",
            "request",
            "request"
        ]
    );
    let older = store
        .events_of_kind(
            "security.refused",
            Some(
                store
                    .events_of_kind("security.refused", None, 1)
                    .await
                    .unwrap()[0]
                    .seq,
            ),
            10,
        )
        .await
        .unwrap();
    assert_eq!(older.len(), 4, "a page before a seq");
    // Only registered participants hold a policy.
    assert_variant!(
        store
            .set_policy("@local", &name("ghost"), None)
            .await
            .unwrap_err(),
        StoreError::Refused(Refusal::UnknownParticipant { .. })
    );
}

/// Webhooks: the log is the outbox. A webhook is due when the log moved past its cursor
/// and its backoff ended; one claimer at a time holds it; a settled delivery moves the
/// cursor or schedules the next try.
async fn a_webhook_is_claimed_by_one_server_and_settled(store: &Store) {
    cast(store).await;
    let t0: i64 = 1_900_000_000_000;
    let lease = |t: i64| t + 60_000;
    assert!(store.claim_webhook(t0, lease(t0)).await.unwrap().is_none());
    let before = generation(store).await;
    assert_variant!(
        store
            .set_webhook("@local", &name("exec-1"), Some("ftp://h/"), "s".into())
            .await
            .unwrap_err(),
        StoreError::Refused(Refusal::WebhookUrl { .. })
    );
    assert_variant!(
        store
            .set_webhook("@local", &name("ghost"), Some("http://h/"), "s".into())
            .await
            .unwrap_err(),
        StoreError::Refused(Refusal::UnknownParticipant { .. })
    );
    assert_eq!(generation(store).await, before, "refusals write nothing");
    let hook = store
        .set_webhook(
            "@local",
            &name("exec-1"),
            Some("http://127.0.0.1:9/hook"),
            "s1".into(),
        )
        .await
        .unwrap()
        .expect("a webhook");
    assert_eq!(
        (hook.cursor, hook.set_seq),
        (before + 1, before + 1),
        "it starts now"
    );
    assert!(
        store.claim_webhook(t0, lease(t0)).await.unwrap().is_none(),
        "nothing happened since it was set"
    );

    send(
        store,
        "planner",
        draft(&["exec-1"], Request, "lane", "do it"),
    )
    .await;
    let (a, b) = tokio::join!(
        store.claim_webhook(t0, lease(t0)),
        store.claim_webhook(t0, lease(t0))
    );
    let claims = [a.unwrap(), b.unwrap()];
    assert_eq!(
        claims.iter().flatten().count(),
        1,
        "one claimer holds it: {claims:?}"
    );
    let claimed = claims.into_iter().flatten().next().unwrap();
    assert!(
        store
            .claim_webhook(t0 + 1, lease(t0))
            .await
            .unwrap()
            .is_none(),
        "leased"
    );

    // A failure waits out its backoff; a lease that ran out frees it as well.
    store
        .settle_webhook(
            &claimed,
            Settled::Failed {
                failures: 1,
                next_at: t0 + 1000,
                error: "HTTP 500".into(),
            },
        )
        .await
        .unwrap();
    assert!(
        store
            .claim_webhook(t0 + 999, lease(t0))
            .await
            .unwrap()
            .is_none()
    );
    let again = store
        .claim_webhook(t0 + 1000, lease(t0 + 1000))
        .await
        .unwrap()
        .expect("due after its backoff");
    assert_eq!(
        (again.failures, again.last_error.as_deref()),
        (1, Some("HTTP 500"))
    );
    let head = generation(store).await;
    store
        .settle_webhook(
            &again,
            Settled::Told {
                cursor: head,
                at: t0 + 1001,
            },
        )
        .await
        .unwrap();
    let told = store.webhook("exec-1").await.unwrap().unwrap();
    assert_eq!(
        (
            told.cursor,
            told.failures,
            told.delivered_at,
            told.last_error
        ),
        (head, 0, Some(t0 + 1001), None)
    );
    assert!(
        store
            .claim_webhook(t0 + 2000, lease(t0 + 2000))
            .await
            .unwrap()
            .is_none()
    );

    // Set anew: the cursor stays (what is pending goes to the new URL); a settlement of
    // the old claim no longer applies.
    let moved = store
        .set_webhook(
            "@local",
            &name("exec-1"),
            Some("https://hooks.example/x"),
            "s2".into(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (moved.cursor, moved.url.as_str()),
        (head, "https://hooks.example/x")
    );
    store
        .settle_webhook(&again, Settled::Passed { cursor: head + 99 })
        .await
        .unwrap();
    assert_eq!(store.webhook("exec-1").await.unwrap().unwrap().cursor, head);
    assert_eq!(store.webhooks().await.unwrap().len(), 1);

    // Removed once; removing again writes nothing.
    assert!(
        store
            .set_webhook("@local", &name("exec-1"), None, String::new())
            .await
            .unwrap()
            .is_none()
    );
    let after = generation(store).await;
    store
        .set_webhook("@local", &name("exec-1"), None, String::new())
        .await
        .unwrap();
    assert_eq!(generation(store).await, after);
    assert!(store.webhooks().await.unwrap().is_empty());
}

/// `item` with the attributes in braces before it.
macro_rules! marked {
    ({ $(#[$attr:meta])* } $item:item) => {
        $(#[$attr])* $item
    };
}

macro_rules! stories {
    (
        $attrs:tt $module:ident: $backend:ty;
        stores: [$($story:ident),* $(,)?];
        backends: [$($deep:ident),* $(,)?]
    ) => {
        mod $module {
            use super::*;

            $(
                marked!($attrs
                #[tokio::test]
                async fn $story() {
                    let backend = <$backend>::fresh(DEFAULT_BUSY_TIMEOUT).await;
                    super::$story(backend.store()).await;
                });
            )*

            $(
                marked!($attrs
                #[tokio::test]
                async fn $deep() {
                    super::$deep::<$backend>().await;
                });
            )*

            marked!($attrs
            #[test]
            fn the_store_follows_the_delivery_model() {
                proptest!(ProptestConfig::with_cases(64), |(
                    kind in message_type(),
                    turns in prop::collection::vec(turn(), 1..30),
                )| {
                    follows_the_delivery_model::<$backend>(kind, &turns)?;
                });
            });
        }
    };
}

/// Story: what happened to a subject is found whatever the kind of its events: a message
/// with nothing but its send has that event and changed when it was sent, a delivery
/// after it is its last change, and an id nothing happened to has none.
async fn a_subjects_events_and_last_change_are_found_whatever_their_kind(store: &Store) {
    cast(store).await;
    let id = send(
        store,
        "planner",
        draft(&["exec-1"], MessageType::Info, "t", "only sent"),
    )
    .await;
    let sent = store.events_about(&id, "message.sent").await.unwrap();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let sent = &sent[0];
    assert!(matches!(&sent.change, Change::MessageSent(m) if m.id == id));
    assert_eq!(store.last_change(&id, 0).await.unwrap(), Some(sent.at));
    assert_eq!(store.last_change(&id, sent.seq).await.unwrap(), None);
    assert_eq!(store.last_change("m_nothing", 0).await.unwrap(), None);

    clock_passes(sent.at).await;
    store.fetch(Some(&name("exec-1")), &id).await.unwrap();
    let delivered = store.events(sent.seq, 10).await.unwrap();
    let delivered = delivered.last().expect("the delivery's event");
    assert!(delivered.at > sent.at);
    assert_eq!(store.last_change(&id, 0).await.unwrap(), Some(delivered.at));
    assert_eq!(
        store.last_change(&id, sent.seq).await.unwrap(),
        Some(delivered.at)
    );
    let batch = store
        .last_changes(&[
            (id.clone(), sent.seq),
            ("m_nothing".to_owned(), 0),
            (id.clone(), delivered.seq),
        ])
        .await
        .unwrap();
    assert_eq!(batch, vec![Some(delivered.at), None, None]);
    let steps = store.events_about(&id, "delivery.changed").await.unwrap();
    assert_eq!(steps.len(), 1, "{steps:?}");
}

/// Story: review verdicts, needs and acknowledgements are appended together as
/// `gate.changed` events and read back by kind, newest first, with the raw text of an
/// INVALID verdict intact.
async fn gate_events_are_appended_together_and_read_back_by_kind(store: &Store) {
    use baton_core::gate::{GateChange, NeedSource, Outcome, Verdict};
    cast(store).await;
    let changes = [
        GateChange::Reviewed {
            order: "wo_1".into(),
            round: 1,
            reviewer: "sh review.sh".into(),
            run: Some("r1".into()),
            verdict: Verdict::Invalid {
                raw: "looks fine\nAPPROVE".into(),
            },
        },
        GateChange::Concluded {
            order: "wo_1".into(),
            round: 1,
            outcome: Outcome::Unresolved,
            disagreement: false,
        },
        GateChange::Need {
            id: "n1".into(),
            text: "which fixture?".into(),
            order: None,
            source: NeedSource::Hand,
            run: None,
        },
    ];
    let written = store.record_gate("planner", &changes).await.unwrap();
    assert_eq!(written.len(), 3);
    store
        .record_gate(
            "planner",
            &[GateChange::Acked {
                item: "need:n1".into(),
            }],
        )
        .await
        .unwrap();
    let read = store
        .events_of_kind("gate.changed", None, 10)
        .await
        .unwrap();
    let back: Vec<GateChange> = read
        .iter()
        .rev()
        .map(|e| match &e.change {
            Change::Gate(g) => g.clone(),
            other => panic!("not a gate event: {other:?}"),
        })
        .collect();
    assert_eq!(back[..3], changes);
    assert_eq!(
        back[3],
        GateChange::Acked {
            item: "need:n1".into()
        }
    );
    assert_eq!(read[3].change.subject(), "wo_1");
}

/// Story 23: A key is recorded for a registered participant with only its token's hash;
/// revoking it marks it alone and revoking again changes nothing; an unknown key or
/// participant is refused and writes nothing.
async fn a_key_is_issued_revoked_alone_and_never_holds_its_token(store: &Store) {
    use baton_core::key::{self, Scope};
    use baton_store::KeyIssue;
    cast(store).await;
    let issue = |id: &str, who: &str, token: &str| KeyIssue {
        id: id.into(),
        participant: name(who),
        scope: Scope::Write,
        hash: key::hash(token),
        expires_at: None,
    };
    let token = key::token("k1", &[9u8; 32]);
    let k1 = store
        .issue_key("@local", issue("k1", "exec-1", &token))
        .await
        .unwrap();
    assert!(key::matches(&k1, &token));
    store
        .issue_key(
            "@local",
            issue("k2", "planner", &key::token("k2", &[3u8; 32])),
        )
        .await
        .unwrap();
    assert_variant!(
        refused(store, store.issue_key("@local", issue("k3", "ghost", "t"))).await,
        StoreError::Refused(Refusal::UnknownParticipant { .. })
    );
    let revoked = store.revoke_key("@local", "k1").await.unwrap();
    assert!(revoked.revoked_at.is_some());
    let before = generation(store).await;
    store.revoke_key("@local", "k1").await.unwrap();
    assert_eq!(
        generation(store).await,
        before,
        "revoking again writes nothing"
    );
    assert_variant!(
        refused(store, store.revoke_key("@local", "k9")).await,
        StoreError::Refused(Refusal::NotFound {
            record: Record::Key,
            ..
        })
    );
    let keys = store.keys().await.unwrap();
    let live: Vec<(&str, bool)> = keys
        .iter()
        .map(|k| (k.id.as_str(), k.revoked_at.is_none()))
        .collect();
    assert_eq!(live, [("k1", false), ("k2", true)]);
    assert_eq!(
        store.key("k2").await.unwrap().unwrap().participant,
        name("planner")
    );
    let everything = store.events(0, 1000).await.unwrap();
    assert!(
        !serde_json::to_string(&everything).unwrap().contains(&token),
        "the token is never in the log"
    );
}

/// Story 24: A wait for the store to move returns once another writer commits, with the
/// generation it moved to; with nothing written it returns at its timeout, unmoved.
async fn a_wait_wakes_when_another_writer_commits(store: &Store) {
    cast(store).await;
    let seen = generation(store).await;
    let idle = store
        .changed(seen, Duration::from_millis(100))
        .await
        .unwrap();
    assert_eq!(idle, seen, "nothing was written");
    let started = std::time::Instant::now();
    let (moved, id) = tokio::join!(store.changed(seen, Duration::from_secs(30)), async {
        send(store, "planner", draft(&["exec-1"], Info, "t", "wake up")).await
    });
    let moved = moved.unwrap();
    assert!(moved > seen, "{moved} after {seen}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "woken by the commit of {id}, not by the timeout"
    );
}

/// Every story, on every backend: one list, so a new story runs everywhere or nowhere.
macro_rules! every_backend {
    ($($(#[$attr:meta])* $module:ident: $backend:ty),* $(,)?) => {
        $(
            stories!({ $(#[$attr])* } $module: $backend;
                stores: [
                    participants_register_once_and_gate_every_message,
                    a_request_reaches_each_recipient_and_the_outbox_tracks_each,
                    ids_are_listed_by_their_first_characters_in_either_case,
                    fetching_delivers_once_and_only_to_a_pending_recipient,
                    invalid_transitions_are_refused_and_write_nothing,
                    a_reason_is_required_and_threaded_back_to_the_sender,
                    a_note_reply_names_the_step_that_was_taken,
                    the_sender_closes_its_own_end_of_a_request,
                    duplicates_return_the_original,
                    an_unaddressable_send_is_refused,
                    a_thread_comes_back_depth_first,
                    search_filters_narrow_and_pages_walk_everything_once,
                    a_search_over_many_messages_walks_them_all_newest_first,
                    a_run_is_the_fold_of_its_facts,
                    a_hooks_event_is_its_participants_or_the_local_operators,
                    the_runs_view_is_live_runs_and_the_newest_others_and_pages_walk_all,
                    a_lost_run_resurfaces_what_it_held_once,
                    an_untracked_run_of_the_participant_keeps_its_work_from_resurfacing,
                    the_failures_lane_reads_failures_and_only_what_could_clear_them,
                    the_state_digest_keeps_the_newest_of_each_list_and_their_counts,
                    an_order_goes_round_its_lifecycle,
                    a_negotiation_takes_participants_and_opens_again_once_settled,
                    the_handoff_metrics_are_a_projection_of_the_log,
                    an_offer_is_checked_and_orders_list_by_party,
                    an_imported_event_keeps_its_id_and_time,
                    sessions_and_helpers_are_rows_counted_by_source,
                    ten_thousand_hooks_of_one_session_are_one_row_and_a_row_per_helper,
                    a_send_is_found_by_its_event_id,
                    a_key_is_issued_revoked_alone_and_never_holds_its_token,
                    gate_events_are_appended_together_and_read_back_by_kind,
                    a_subjects_events_and_last_change_are_found_whatever_their_kind,
                    an_action_beyond_authority_is_refused_and_recorded,
                    a_refusal_repeated_is_counted_on_its_event_not_appended,
                    a_webhook_is_claimed_by_one_server_and_settled,
                    a_wait_wakes_when_another_writer_commits,
                    racing_writers_queue_and_the_log_has_no_gaps,
                    steps_from_the_same_view_one_is_taken_the_others_find_it_moved,
                ];
                backends: [
                    the_log_is_the_truth,
                    what_waits_for_a_person_is_open_work_only,
                    a_locked_store_is_busy_then_writable,
                    runs_replay_to_the_same_rows,
                    random_operations_keep_authority_s_promises,
                    orders_replay_to_the_same_rows,
                    a_keys_last_use_is_kept_beside_the_log,
                ]
            );
        )*
    };
}

every_backend!(
    sqlite: Sqlite,
    grouped: Grouped,
    #[cfg_attr(not(baton_test_postgres), ignore = "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES")]
    postgres: Postgres,
);
