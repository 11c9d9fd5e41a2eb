//! The thin layer between the embedded store and SQLite (rusqlite): opening a connection
//! with the store's settings, running a statement from the connection's statement cache,
//! rows read into owned values that [`crate::rows`] decodes, and what an engine error
//! means to a caller.
//!
//! SQLite runs in the calling thread: a query is a function call, not a message to a
//! driver's worker thread and back. A one-shot command makes a handful of queries, and on
//! a busy machine each round trip to another thread costs a scheduling delay.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::types::{FromSql, Value};
use rusqlite::{Connection, OpenFlags, OptionalExtension, Params};

use crate::StoreError;

/// What went wrong in a store function: the engine, a row the store cannot read back
/// (the shared decoders in [`crate::rows`] speak sqlx's error), or a connection that
/// cannot be given the store's settings.
#[derive(Debug)]
pub(super) enum Fault {
    Engine(rusqlite::Error),
    Row(sqlx::Error),
    Setup(String),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Engine(e) => e.fmt(f),
            Fault::Row(e) => e.fmt(f),
            Fault::Setup(why) => f.write_str(why),
        }
    }
}

impl From<rusqlite::Error> for Fault {
    fn from(e: rusqlite::Error) -> Self {
        Fault::Engine(e)
    }
}

impl From<sqlx::Error> for Fault {
    fn from(e: sqlx::Error) -> Self {
        Fault::Row(e)
    }
}

pub(super) type Sql<T> = std::result::Result<T, Fault>;

/// Maps an engine error to what the user can act on: lock contention is `Busy`
/// (retryable), never a raw "database is locked".
pub(super) fn classify(e: &Fault, busy_timeout: Duration) -> StoreError {
    use rusqlite::ErrorCode;
    match e {
        Fault::Engine(rusqlite::Error::SqliteFailure(failure, message)) => match failure.code {
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => StoreError::Busy {
                timeout_ms: busy_timeout.as_millis() as u64,
                holder: None,
            },
            ErrorCode::DatabaseCorrupt => StoreError::Corrupt {
                what: "SQLite reports a malformed page",
            },
            ErrorCode::NotADatabase => StoreError::Corrupt {
                what: "SQLite does not recognise the file as a database",
            },
            ErrorCode::ReadOnly => StoreError::ReadOnly,
            ErrorCode::DiskFull => StoreError::Full,
            _ => StoreError::Engine(message.clone().unwrap_or_else(|| failure.to_string())),
        },
        other => StoreError::Engine(other.to_string()),
    }
}

/// Below this many free bytes, an I/O error on the store's file system is taken for a
/// full disk: a write needs a few pages of log and the shared-memory file's 32 KiB.
const ROOM: u64 = 1 << 20;

/// Whether the file system holding `path` has next to no room left for this process.
pub(super) fn out_of_room(path: &Path) -> bool {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    match nix::sys::statvfs::statvfs(dir.unwrap_or(Path::new("."))) {
        Ok(fs) => fs.blocks_available().saturating_mul(fs.fragment_size()) < ROOM,
        Err(_) => false,
    }
}

/// Runs `work`, which may wait on the disk (an fsync) or on another process's write
/// lock, so that it holds up no other task: on a multi-threaded runtime this worker's
/// other tasks move to another thread meanwhile. On a single-threaded one (a command)
/// there is nothing else to run, and it simply runs.
pub(super) fn blocking<T>(work: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

/// Opens a connection to the store's file: WAL, every commit fsync'd (`synchronous =
/// FULL`), waits for the write lock bounded by `busy_timeout`, foreign keys on.
/// A store this process may not write (its file or its directory read-only to it, or on
/// a read-only file system) is opened for reading only: every read works, and a write is
/// refused as [`crate::StoreError::ReadOnly`].
pub(super) fn connect(path: &Path, busy_timeout: Duration, create: bool) -> Sql<Connection> {
    let read_only = !create && !writable(path);
    let conn = if read_only {
        open_read_only(path)?
    } else {
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        Connection::open_with_flags(path, flags)?
    };
    conn.busy_timeout(busy_timeout)?;
    // Statements are compiled once a connection and kept: a command repeats a few, a
    // server's connections repeat them all.
    conn.set_prepared_statement_cache_capacity(128);
    // One plan a statement, whatever its parameters: without the query planner stability
    // guarantee, a parameter compared with a partial index's constant (`type = ?` against
    // `messages_open_requests`' `type = 'request'`) marks the statement to be compiled
    // again each time that parameter is bound, so a kept statement was compiled on every
    // use. The partial indexes serve queries that name their constants in the SQL.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    // Setting the journal mode writes the file: a store open for reading keeps its own
    // (an immutable file reports none).
    if read_only {
        conn.execute_batch("PRAGMA foreign_keys = ON;")?;
        return Ok(conn);
    }
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Fault::Setup(format!(
            "the store could not switch to WAL mode (it is in {mode} mode)"
        )));
    }
    conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")?;
    Ok(conn)
}

/// Whether this process may write the store at `path`: the file and the directory its
/// journal files are made in.
pub(super) fn writable(path: &Path) -> bool {
    use nix::unistd::{AccessFlags, access};
    let directory = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    access(path, AccessFlags::W_OK).is_ok() && access(directory, AccessFlags::W_OK).is_ok()
}

/// Opens the store at `path` for reading only. With its write-ahead log beside it, SQLite
/// reads the log through the index file beside it too; without one (the last writer
/// folded it in and removed it), no index can be made in a directory this process may not
/// write, so the file is read as it stands (`immutable`): whoever could change it can
/// write there, and then this is not the path taken.
fn open_read_only(path: &Path) -> Sql<Connection> {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let immutable = if Path::new(&wal).exists() {
        ""
    } else {
        "&immutable=1"
    };
    // The path as a URI: the characters a URI gives meaning to are escaped.
    let mut uri = String::from("file:");
    for c in path.to_string_lossy().chars() {
        match c {
            '%' | '?' | '#' => uri.push_str(&format!("%{:02X}", c as u32)),
            c => uri.push(c),
        }
    }
    uri.push_str("?mode=ro");
    uri.push_str(immutable);
    Ok(Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?)
}

/// A row read out of SQLite into owned values, its columns found by name.
pub(super) struct Row {
    names: Arc<[String]>,
    values: Vec<Value>,
}

impl Row {
    fn get(&self, column: &str) -> sqlx::Result<&Value> {
        self.names
            .iter()
            .position(|n| n == column)
            .map(|i| &self.values[i])
            .ok_or_else(|| sqlx::Error::ColumnNotFound(column.to_owned()))
    }
}

fn mismatch(column: &str, want: &str, got: &Value) -> sqlx::Error {
    sqlx::Error::Decode(format!("column {column}: expected {want}, found {got:?}").into())
}

impl crate::rows::Columns for Row {
    fn text(&self, column: &str) -> sqlx::Result<String> {
        self.maybe_text(column)?
            .ok_or_else(|| mismatch(column, "text", &Value::Null))
    }

    fn maybe_text(&self, column: &str) -> sqlx::Result<Option<String>> {
        match self.get(column)? {
            Value::Text(t) => Ok(Some(t.clone())),
            Value::Null => Ok(None),
            other => Err(mismatch(column, "text", other)),
        }
    }

    fn int(&self, column: &str) -> sqlx::Result<i64> {
        self.maybe_int(column)?
            .ok_or_else(|| mismatch(column, "an integer", &Value::Null))
    }

    fn maybe_int(&self, column: &str) -> sqlx::Result<Option<i64>> {
        match self.get(column)? {
            Value::Integer(i) => Ok(Some(*i)),
            Value::Null => Ok(None),
            other => Err(mismatch(column, "an integer", other)),
        }
    }
}

/// Every row `sql` selects.
pub(super) fn rows(conn: &Connection, sql: &str, params: impl Params) -> Sql<Vec<Row>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let names: Arc<[String]> = stmt.column_names().into_iter().map(str::to_owned).collect();
    let width = names.len();
    let mut found = stmt.query(params)?;
    let mut out = Vec::new();
    while let Some(row) = found.next()? {
        let mut values = Vec::with_capacity(width);
        for i in 0..width {
            values.push(row.get::<_, Value>(i)?);
        }
        out.push(Row {
            names: Arc::clone(&names),
            values,
        });
    }
    Ok(out)
}

/// The first row `sql` selects, if any.
pub(super) fn row(conn: &Connection, sql: &str, params: impl Params) -> Sql<Option<Row>> {
    Ok(rows(conn, sql, params)?.into_iter().next())
}

/// The first column of every row `sql` selects.
pub(super) fn column<T: FromSql>(conn: &Connection, sql: &str, params: impl Params) -> Sql<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let found = stmt.query_map(params, |r| r.get::<_, T>(0))?;
    Ok(found.collect::<rusqlite::Result<_>>()?)
}

/// The first column of the first row `sql` selects, if any.
pub(super) fn scalar<T: FromSql>(
    conn: &Connection,
    sql: &str,
    params: impl Params,
) -> Sql<Option<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    Ok(stmt.query_row(params, |r| r.get::<_, T>(0)).optional()?)
}

/// Runs `sql` (a write); how many rows it changed.
pub(super) fn exec(conn: &Connection, sql: &str, params: impl Params) -> Sql<usize> {
    let mut stmt = conn.prepare_cached(sql)?;
    Ok(stmt.execute(params)?)
}

/// A statement put together from optional parts, with its parameters beside it.
pub(super) struct Builder {
    pub(super) sql: String,
    pub(super) params: Vec<Value>,
}

impl Builder {
    pub(super) fn new(sql: &str) -> Self {
        Self {
            sql: sql.to_owned(),
            params: Vec::new(),
        }
    }

    /// Appends SQL text.
    pub(super) fn push(&mut self, sql: &str) -> &mut Self {
        self.sql.push_str(sql);
        self
    }

    /// Appends a parameter placeholder bound to `value`.
    pub(super) fn bind(&mut self, value: impl Into<Value>) -> &mut Self {
        self.sql.push('?');
        self.params.push(value.into());
        self
    }

    pub(super) fn params(&self) -> rusqlite::ParamsFromIter<std::slice::Iter<'_, Value>> {
        rusqlite::params_from_iter(self.params.iter())
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::StatementStatus;

    use super::connect;
    use crate::SqliteStore;

    /// A new store, and a connection of its own to the same file.
    async fn fresh() -> (tempfile::TempDir, SqliteStore, rusqlite::Connection) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.db");
        let timeout = std::time::Duration::from_secs(5);
        let store = SqliteStore::create(&path, timeout).await.unwrap();
        let conn = connect(&path, timeout, false).unwrap();
        (dir, store, conn)
    }

    /// A send's words wait in its message's row until there are enough of them to
    /// move into the free-text index at once; the move leaves none pending. A message
    /// without words waits as well (so what waits is always the newest rows) and adds
    /// nothing to the index.
    #[tokio::test]
    async fn pending_words_move_into_the_index_together() {
        use baton_core::{Draft, MessageType, Passname, Payload, Topic};

        use crate::Store;

        let (_dir, store, conn) = fresh().await;
        let store = Store::new(store);
        for who in ["a", "b"] {
            store
                .add_participant("@t", &Passname::new(who).unwrap(), "peer", None)
                .await
                .unwrap();
        }
        let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        let flush = super::super::PENDING_TEXT_FLUSH;
        let wordless = |n: i64| n % 5 == 0;
        let worded = |upto: i64| (1..=upto).filter(|n| !wordless(*n)).count() as i64;
        for n in 1..=flush + 1 {
            let draft = Draft {
                to: vec![Passname::new("b").unwrap()],
                kind: MessageType::Info,
                topic: Topic::new("t").unwrap(),
                reply_to: None,
                payload: if wordless(n) {
                    Payload::parse(r#"{"_": "... !?"}"#, 1024).unwrap()
                } else {
                    Payload::body(&format!("word{n}"), 1024).unwrap()
                },
                idempotency_key: None,
            };
            store
                .send(&Passname::new("a").unwrap(), draft, 0)
                .await
                .unwrap();
            let pending = count("SELECT count(*) FROM messages WHERE words IS NOT NULL");
            let indexed = count("SELECT count(DISTINCT doc) FROM message_words");
            let want = if n < flush {
                (n, 0)
            } else {
                (n - flush, worded(flush))
            };
            assert_eq!((pending, indexed), want, "after {n} sends");
        }
    }

    /// The partial indexes a write leaves out serve the reads that need them: the kinds
    /// read back by kind are found through the kind index, which holds no other kind (any
    /// other kind is still found, by reading the log), a thread's replies through the
    /// index of threads, which holds only replies, and the events about a subject (and
    /// when it last changed) through the index of subjects, which holds no send.
    #[tokio::test]
    async fn the_partial_indexes_serve_their_reads() {
        let (_dir, _store, conn) = fresh().await;
        let plan = |sql: &str| -> String {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let rows = stmt
                .query_map(rusqlite::params!["gate.changed", 10, 5], |r| {
                    r.get::<_, String>(3)
                })
                .unwrap();
            rows.collect::<rusqlite::Result<Vec<_>>>()
                .unwrap()
                .join("; ")
        };
        let indexed = plan(super::super::OF_KIND_INDEXED);
        assert!(indexed.contains("USING INDEX events_kind"), "{indexed}");
        let other = plan(super::super::OF_KIND);
        assert!(!other.contains("events_kind"), "{other}");
        let replies = conn
            .prepare(&format!(
                "EXPLAIN QUERY PLAN {}",
                super::super::THREAD_REPLIES
            ))
            .unwrap()
            .query_row(["r"], |r| r.get::<_, String>(3))
            .unwrap();
        assert!(replies.contains("USING INDEX messages_root"), "{replies}");
        for about in [super::super::ABOUT, super::super::LAST_CHANGES] {
            let found = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {about}"))
                .unwrap()
                .query_map(
                    rusqlite::params_from_iter(
                        ["s", "order.changed"]
                            .iter()
                            .take(about.matches('?').count()),
                    ),
                    |r| r.get::<_, String>(3),
                )
                .unwrap()
                .collect::<rusqlite::Result<Vec<_>>>()
                .unwrap()
                .join("; ");
            assert!(found.contains("USING INDEX events_subject"), "{found}");
        }
        for kind in super::super::KINDS_INDEXED {
            assert!(super::super::OF_KIND_INDEXED.contains(&format!("'{kind}'")));
        }
        // An event by its id: through the index of ids, or a send's through its message.
        let by_id = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {}", super::super::HAS_EVENT))
            .unwrap()
            .query_map(["e"], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<rusqlite::Result<Vec<_>>>()
            .unwrap()
            .join("; ");
        assert!(by_id.contains("USING INDEX events_id"), "{by_id}");
        assert!(
            by_id.contains("INDEX sqlite_autoindex_messages_1"),
            "{by_id}"
        );
    }

    /// A kept statement runs again with new parameters without being compiled again: the
    /// duplicate check binds `type`, which a partial index compares with a constant.
    #[tokio::test]
    async fn a_kept_statement_is_not_compiled_again_for_new_parameters() {
        let (_dir, _store, conn) = fresh().await;
        for kind in ["info", "request", "info", "request"] {
            let mut stmt = conn.prepare_cached(super::super::RECENT).unwrap();
            let mut rows = stmt
                .query(rusqlite::params!["a", "h", kind, "t", None::<String>, 0])
                .unwrap();
            assert!(rows.next().unwrap().is_none());
            drop(rows);
            assert_eq!(
                stmt.get_status(StatementStatus::RePrepare),
                0,
                "compiled again for type {kind}"
            );
        }
    }
}
