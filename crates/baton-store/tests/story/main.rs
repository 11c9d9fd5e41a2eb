//! The store's story suite: what participants do with messages, told as short
//! stories against the [`Store`] and run against a fresh store of every backend.
//!
//! A story takes `&Store` and checks what a user can see: who may take which step, what
//! each view shows, and that every refusal writes nothing. The few stories that must reach
//! under the store (replaying the log, tampering with it, holding its write lock) take a
//! [`Backend`] instead. A new backend is one more `impl Backend` and one more line in the
//! `every_backend!` call at the bottom of this file; a new story is a function in its
//! family's module and one line in that call's list.
//!
//! This file is the harness: the backends, the helpers every family uses, and the list
//! that runs each story on each backend. The stories are in one module per family:
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

macro_rules! stories {
    (
        $attrs:tt $module:ident: $backend:ty;
        stores: [$($family:ident::$story:ident),* $(,)?];
        backends: [$($deep_family:ident::$deep:ident),* $(,)?]
    ) => {
        mod $module {
            use super::*;

            $(
                marked!($attrs
                #[tokio::test]
                async fn $story() {
                    let backend = <$backend>::fresh(DEFAULT_BUSY_TIMEOUT).await;
                    super::$family::$story(backend.store()).await;
                });
            )*

            $(
                marked!($attrs
                #[tokio::test]
                async fn $deep() {
                    super::$deep_family::$deep::<$backend>().await;
                });
            )*

            marked!($attrs
            #[test]
            fn the_store_follows_the_delivery_model() {
                super::delivery::the_store_follows_the_delivery_model::<$backend>();
            });
        }
    };
}

/// Every story, on every backend: one list, so a new story runs everywhere or nowhere.
macro_rules! every_backend {
    ($($(#[$attr:meta])* $module:ident: $backend:ty),* $(,)?) => {
        $(
            stories!({ $(#[$attr])* } $module: $backend;
                stores: [
                    messages::participants_register_once_and_gate_every_message,
                    messages::a_request_reaches_each_recipient_and_the_outbox_tracks_each,
                    messages::ids_are_listed_by_their_first_characters_in_either_case,
                    messages::fetching_delivers_once_and_only_to_a_pending_recipient,
                    messages::invalid_transitions_are_refused_and_write_nothing,
                    messages::a_reason_is_required_and_threaded_back_to_the_sender,
                    messages::a_note_reply_names_the_step_that_was_taken,
                    messages::the_sender_closes_its_own_end_of_a_request,
                    messages::duplicates_return_the_original,
                    messages::an_unaddressable_send_is_refused,
                    messages::a_thread_comes_back_depth_first,
                    messages::search_filters_narrow_and_pages_walk_everything_once,
                    messages::a_search_over_many_messages_walks_them_all_newest_first,
                    messages::owed_and_waiting_lists_read_as_heads_and_envelopes_on_demand,
                    runs::a_run_is_the_fold_of_its_facts,
                    runs::a_hooks_event_is_its_participants_or_the_local_operators,
                    runs::the_runs_view_is_live_runs_and_the_newest_others_and_pages_walk_all,
                    runs::a_lost_run_resurfaces_what_it_held_once,
                    runs::an_untracked_run_of_the_participant_keeps_its_work_from_resurfacing,
                    runs::the_failures_lane_reads_failures_and_only_what_could_clear_them,
                    state::the_state_digest_keeps_the_newest_of_each_list_and_their_counts,
                    orders::an_order_goes_round_its_lifecycle,
                    negotiation::a_negotiation_takes_participants_and_opens_again_once_settled,
                    log::the_handoff_metrics_are_a_projection_of_the_log,
                    orders::an_offer_is_checked_and_orders_list_by_party,
                    portable::an_imported_event_keeps_its_id_and_time,
                    runs::sessions_and_helpers_are_rows_counted_by_source,
                    runs::ten_thousand_hooks_of_one_session_are_one_row_and_a_row_per_helper,
                    log::a_send_is_found_by_its_event_id,
                    authority::a_key_is_issued_revoked_alone_and_never_holds_its_token,
                    review::gate_events_are_appended_together_and_read_back_by_kind,
                    log::a_subjects_events_and_last_change_are_found_whatever_their_kind,
                    authority::an_action_beyond_authority_is_refused_and_recorded,
                    authority::a_refusal_repeated_is_counted_on_its_event_not_appended,
                    webhooks::a_webhook_is_claimed_by_one_server_and_settled,
                    log::a_wait_wakes_when_another_writer_commits,
                    log::racing_writers_queue_and_the_log_has_no_gaps,
                    orders::steps_from_the_same_view_one_is_taken_the_others_find_it_moved,
                    reservations::reservations_are_held_renewed_released_and_refused_in_the_way,
                    reservations::a_reservation_lapses_at_its_expiry_not_before_and_not_after,
                    reservations::an_accepted_order_holds_its_scope_for_its_worker_until_it_ends,
                    reservations::a_quiet_holders_reservation_is_force_released_and_the_holder_told,
                    reservations::sixteen_writers_reserving_one_path_one_wins,
                ];
                backends: [
                    log::the_log_is_the_truth,
                    review::what_waits_for_a_person_is_open_work_only,
                    log::a_locked_store_is_busy_then_writable,
                    runs::runs_replay_to_the_same_rows,
                    authority::random_operations_keep_authority_s_promises,
                    orders::orders_replay_to_the_same_rows,
                    authority::a_keys_last_use_is_kept_beside_the_log,
                    reservations::reservations_replay_to_the_same_rows,
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
