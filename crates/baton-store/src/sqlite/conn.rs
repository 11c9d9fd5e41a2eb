//! Connections to the store's file and statements run on them: opening a connection with
//! the store's settings (read-only when this process may not write the store), the store's
//! one connection opened when it is first used, a grouped store's readers, a read in one
//! snapshot and a write in a transaction of its own, statements run from the connection's
//! statement cache, and what an engine error means to a caller.
//!
//! SQLite runs in the calling thread: a query is a function call, not a message to a
//! driver's worker thread and back. A one-shot command makes a handful of queries, and on
//! a busy machine each round trip to another thread costs a scheduling delay.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags, Params};
use tokio::sync::{Mutex, OnceCell};

use super::{SqliteStore, group, holder, open_conn};
use crate::{Result, StoreError};

/// Idle reader connections a grouped store keeps open for the next read.
const IDLE_READERS: usize = 8;

/// What went wrong in a store function: the engine, a row the store cannot read back
/// (the shared decoders in [`crate::decode`] speak sqlx's error), or a connection that
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

/// The connections a store reads and writes through.
#[derive(Clone)]
pub(super) enum Conns {
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
pub(super) struct Lazy {
    conn: OnceCell<Arc<Mutex<Connection>>>,
    path: PathBuf,
    busy_timeout: Duration,
}

impl Lazy {
    pub(super) fn opened(conn: Connection, path: &Path, busy_timeout: Duration) -> Self {
        Self {
            conn: OnceCell::new_with(Some(Arc::new(Mutex::new(conn)))),
            path: path.to_owned(),
            busy_timeout,
        }
    }

    /// A connection to open when it is first used.
    pub(super) fn later(path: &Path, busy_timeout: Duration) -> Self {
        Self {
            conn: OnceCell::new(),
            path: path.to_owned(),
            busy_timeout,
        }
    }

    /// The connection, opened now if it was not yet.
    pub(super) async fn get(&self) -> Result<&Arc<Mutex<Connection>>> {
        self.conn
            .get_or_try_init(|| async {
                open_conn(&self.path, self.busy_timeout, false)
                    .map(|conn| Arc::new(Mutex::new(conn)))
            })
            .await
    }

    /// The connection itself when nothing else holds it: opened now if it was not yet.
    pub(super) fn take(self: Arc<Self>) -> std::result::Result<Result<Connection>, Arc<Self>> {
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
pub(super) fn located(path: &Path, e: StoreError) -> StoreError {
    match e {
        StoreError::Busy {
            timeout_ms,
            holder: None,
        } => StoreError::Busy {
            timeout_ms,
            holder: holder::holder(path),
        },
        StoreError::Engine(_) | StoreError::Unavailable { .. } if out_of_room(path) => {
            StoreError::Full
        }
        other => other,
    }
}

/// Refuses a file that cannot be a SQLite database: shorter than its 100-byte header (an
/// empty file, say), or without SQLite's magic string at its start.
pub(super) fn check_header(path: &Path) -> Result<()> {
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

/// A grouped store's idle reader connections.
pub(super) struct Readers {
    path: PathBuf,
    busy_timeout: Duration,
    idle: std::sync::Mutex<Vec<Connection>>,
}

impl Readers {
    pub(super) fn new(path: &Path, busy_timeout: Duration) -> Self {
        Self {
            path: path.to_owned(),
            busy_timeout,
            idle: std::sync::Mutex::new(Vec::new()),
        }
    }

    pub(super) fn take(&self) -> Sql<Connection> {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match idle {
            Some(conn) => Ok(conn),
            None => connect(&self.path, self.busy_timeout, false),
        }
    }

    pub(super) fn give(&self, conn: Connection) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < IDLE_READERS && conn.is_autocommit() {
            idle.push(conn);
        }
    }
}

/// Runs `work` in one read transaction: everything it reads comes from one snapshot.
pub(super) fn snapshot<T>(conn: &Connection, work: impl FnOnce(&Connection) -> Sql<T>) -> Sql<T> {
    exec(conn, "BEGIN", [])?;
    let out = work(conn);
    let end = exec(conn, if out.is_ok() { "COMMIT" } else { "ROLLBACK" }, []);
    let out = out?;
    end?;
    Ok(out)
}

/// Runs `work` in a write transaction of its own on `conn` (`BEGIN IMMEDIATE`, committed
/// with an fsync), rolled back when it fails.
pub(super) fn transaction<T>(
    conn: &Connection,
    work: impl FnOnce(&Connection) -> Sql<T>,
) -> Sql<T> {
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
    pub(super) fn err(&self, e: Fault) -> StoreError {
        classify(&e, self.busy_timeout)
    }

    /// Runs `work` in one read transaction on a connection of the store's. With group
    /// commit, it returns once everything the snapshot could hold is on disk.
    pub(super) async fn read<T>(&self, work: impl FnOnce(&Connection) -> Sql<T>) -> Result<T> {
        let out = self.read_unsettled(work).await?;
        if let Conns::Grouped { group, .. } = &self.conns {
            group.settled().await?;
        }
        Ok(out)
    }

    /// [`Self::read`] without waiting for the group's sync: for a read whose result no
    /// caller is shown.
    pub(super) async fn read_unsettled<T>(
        &self,
        work: impl FnOnce(&Connection) -> Sql<T>,
    ) -> Result<T> {
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
    pub(super) async fn bookkeep<T>(&self, work: impl FnOnce(&Connection) -> Sql<T>) -> Result<T> {
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
        let indexed = plan(super::super::events::OF_KIND_INDEXED);
        assert!(indexed.contains("USING INDEX events_kind"), "{indexed}");
        let other = plan(super::super::events::OF_KIND);
        assert!(!other.contains("events_kind"), "{other}");
        let replies = conn
            .prepare(&format!(
                "EXPLAIN QUERY PLAN {}",
                super::super::messages::THREAD_REPLIES
            ))
            .unwrap()
            .query_row(["r"], |r| r.get::<_, String>(3))
            .unwrap();
        assert!(replies.contains("USING INDEX messages_root"), "{replies}");
        for about in [
            super::super::events::ABOUT,
            super::super::events::LAST_CHANGES,
        ] {
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
        for kind in super::super::events::KINDS_INDEXED {
            assert!(super::super::events::OF_KIND_INDEXED.contains(&format!("'{kind}'")));
        }
        // An event by its id: through the index of ids, or a send's through its message.
        let by_id = conn
            .prepare(&format!(
                "EXPLAIN QUERY PLAN {}",
                super::super::events::HAS_EVENT
            ))
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
            let mut stmt = conn.prepare_cached(super::super::messages::RECENT).unwrap();
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
