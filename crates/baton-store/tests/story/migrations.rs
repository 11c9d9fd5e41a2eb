//! Migrations: a SQLite store made at an older schema version opens at the latest with the
//! same projections as a store that was always new.

use baton_core::Change;
use baton_core::MessageType::{Info, Request};
use baton_store::{DEFAULT_BUSY_TIMEOUT, NewEvent, SearchQuery, SqliteStore, Store};
use tempfile::TempDir;

use crate::log::random_mix;
use crate::portable::inject;
use crate::{Dice, cast, draft, envelope, generation, ids, now_ms, send};

/// The migration scripts a SQLite store has run, in order.
const SQLITE_SCRIPTS: [&str; 15] = [
    include_str!("../../src/sqlite/migrations/001_event_log.sql"),
    include_str!("../../src/sqlite/migrations/002_event_kind_index.sql"),
    include_str!("../../src/sqlite/migrations/003_runs.sql"),
    include_str!("../../src/sqlite/migrations/004_orders.sql"),
    include_str!("../../src/sqlite/migrations/005_keys.sql"),
    include_str!("../../src/sqlite/migrations/006_authority.sql"),
    include_str!("../../src/sqlite/migrations/007_webhooks.sql"),
    include_str!("../../src/sqlite/migrations/008_text_and_state.sql"),
    include_str!("../../src/sqlite/migrations/009_state_digest.sql"),
    include_str!("../../src/sqlite/migrations/010_list_reads.sql"),
    include_str!("../../src/sqlite/migrations/011_fewer_pages.sql"),
    include_str!("../../src/sqlite/migrations/012_key_uses.sql"),
    include_str!("../../src/sqlite/migrations/013_pending_text.sql"),
    include_str!("../../src/sqlite/migrations/014_subjects_without_sends.sql"),
    include_str!("../../src/sqlite/migrations/015_sends_in_fewer_trees.sql"),
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
    for (table, order) in [
        ("events", "seq"),
        ("messages", "seq"),
        ("participants", "name"),
        ("state", "1"),
        ("state_digest", "1"),
    ] {
        copy(&old, table, order);
    }
    old
}

/// Copies the rows of `table` from the attached store `now` into the older one, ordered by
/// `order`: the columns the older table has, so a column added since needs nothing here
/// (the migration that added it fills it).
fn copy(old: &rusqlite::Connection, table: &str, order: &str) {
    let columns: Vec<String> = old
        .prepare("SELECT name FROM pragma_table_info(?1, 'main')")
        .unwrap()
        .query_map([table], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(!columns.is_empty(), "the older store has no table {table}");
    let columns = columns.join(", ");
    old.execute_batch(&format!(
        "INSERT INTO main.{table} ({columns}) SELECT {columns} FROM now.{table} ORDER BY {order}"
    ))
    .unwrap();
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
    for (table, order) in [
        ("deliveries", "message_id, ordinal"),
        ("runs", "id"),
        ("orders", "id"),
        ("keys", "id"),
        ("webhooks", "participant"),
    ] {
        copy(&old, table, order);
    }
    old.execute_batch("DETACH now; PRAGMA user_version = 10;")
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
    copy(&old, "deliveries", "message_id, ordinal");
    old.execute_batch(
        "INSERT INTO message_text (rowid, words)
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
