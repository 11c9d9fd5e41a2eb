//! Group commit: many writers' transactions made durable by one fsync, and the next
//! writers at work while that fsync runs.
//!
//! SQLite has one writer, and a commit in `synchronous = FULL` holds the write lock while
//! it fsyncs the log: writers that each commit alone are held to the disk's fsync rate,
//! and writers sharing a commit still stand idle while it syncs. A grouped store keeps one
//! writer connection with one open transaction (`BEGIN IMMEDIATE`). Each writer's
//! transaction is a savepoint inside it: its checks and appends run in turn, as before,
//! and its commit releases the savepoint, then waits — it is not acknowledged until what
//! it wrote is on disk. A writer that fails or is refused rolls back to its savepoint and
//! leaves the others untouched.
//!
//! The group's log thread makes the writers durable in two steps. It takes its turn on
//! the connection behind the writers already queued (the lock is fair) and commits them
//! all; the writer connection is in `synchronous = NORMAL`, so the commit writes the
//! transaction's pages to the log (`PATH-wal`) without syncing it. It hands the connection
//! back, and while the next writers' savepoints run it calls `fdatasync` on the log file;
//! only then is each member of the commit told. Every page of the commit was written to
//! the log before the sync began, so after it they are on disk, as FULL would have had
//! them when COMMIT returned. NORMAL's checkpoints sync the log before copying it into the
//! database and the database after, so a checkpoint never leaves a synced commit resting
//! on unsynced pages.
//!
//! Readers use other connections, where a commit is visible as soon as it is written,
//! before its sync. So a read, before it answers, waits until every commit its snapshot
//! could have seen is synced: nothing a reader is shown can be lost to a power failure.
//! A sync that fails leaves the group unable to say what is on disk: every write and read
//! after it is refused until the store is opened again (SQLite then recovers the log from
//! what the disk holds).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar};
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::{Mutex, OwnedMutexGuard, oneshot, watch};

use super::conn::{self, Sql, blocking, classify, exec};
use super::spool::same_file;
use crate::{Result, StoreError};

/// How a member of a commit is told its outcome.
type Answer = oneshot::Sender<std::result::Result<(), String>>;

/// What makes the log's written pages durable.
pub(super) type SyncLog = Box<dyn FnMut() -> std::io::Result<()> + Send>;

/// The writer connection and what its open transaction holds.
struct Batch {
    conn: Connection,
    path: PathBuf,
    busy_timeout: Duration,
    /// Whether a transaction is open on the connection.
    open: bool,
    /// A member dropped without committing left its savepoint to roll back.
    undo: bool,
    /// Members whose savepoints were released, waiting for the commit and its sync.
    waiting: Vec<Answer>,
}

/// What the group shares with its log thread and its members.
struct Shared {
    batch: Arc<Mutex<Batch>>,
    bell: std::sync::Mutex<Bell>,
    rung: Condvar,
    /// Commits begun, numbered from 1. A commit's number is taken before its COMMIT
    /// runs, so a reader whose snapshot holds a commit reads a number at least its own.
    begun: AtomicU64,
    /// Commits made durable (each one fsync of the log), however many members each.
    commits: AtomicU64,
    /// Every commit up to this number is synced (or wrote nothing); a failed sync is kept.
    durable: watch::Sender<Durable>,
}

#[derive(Default)]
struct Bell {
    rung: bool,
    closing: bool,
}

#[derive(Default)]
struct Durable {
    through: u64,
    failed: Option<String>,
}

/// One store's group: the shared state, and the log thread that commits and syncs.
pub(super) struct Group {
    shared: Arc<Shared>,
    busy_timeout: Duration,
}

impl Drop for Group {
    fn drop(&mut self) {
        // The log thread commits and syncs what is waiting, then ends.
        let mut bell = self.shared.bell.lock().unwrap_or_else(|p| p.into_inner());
        bell.closing = true;
        self.shared.rung.notify_one();
    }
}

/// Gives `conn` the writer's settings: commits written to the log, synced by the group;
/// and no waiting for the write lock unless another process holds it ([`Group::begin`]).
fn writer(conn: Connection) -> Sql<Connection> {
    exec(&conn, "PRAGMA synchronous = NORMAL", [])?;
    conn.busy_timeout(Duration::ZERO)?;
    Ok(conn)
}

impl Batch {
    /// Rolls back a dropped member's savepoint. If that fails the whole transaction is
    /// gone (SQLite rolls back on some errors): every member waiting is told so.
    fn settle_undo(&mut self) {
        if !std::mem::take(&mut self.undo) || !self.open {
            return;
        }
        let undone = exec(&self.conn, "ROLLBACK TO member", [])
            .and_then(|_| exec(&self.conn, "RELEASE member", []));
        if let Err(e) = undone {
            self.abandon(&format!(
                "the group's transaction was lost: {}",
                classify(&e, self.busy_timeout)
            ));
        }
    }

    /// Ends the open transaction without committing it; the members waiting fail.
    fn abandon(&mut self, why: &str) {
        if self.open {
            let _ = exec(&self.conn, "ROLLBACK", []);
            self.open = false;
            // Never write on through a connection in an unknown state.
            if !self.conn.is_autocommit()
                && let Ok(fresh) =
                    conn::connect(&self.path, self.busy_timeout, false).and_then(writer)
            {
                self.conn = fresh;
            }
        }
        for waiter in self.waiting.drain(..) {
            let _ = waiter.send(Err(why.to_owned()));
        }
    }

    /// Commits the open transaction, its pages written to the log but not yet synced,
    /// and hands back the members it carried; `None` when it could not commit (the
    /// members were told why).
    fn commit(&mut self) -> Option<Vec<Answer>> {
        match exec(&self.conn, "COMMIT", []) {
            Ok(_) => {
                self.open = false;
                Some(std::mem::take(&mut self.waiting))
            }
            Err(e) => {
                let why = format!("the commit failed: {}", classify(&e, self.busy_timeout));
                self.abandon(&why);
                None
            }
        }
    }
}

/// The store's log file, kept open between syncs.
struct Log {
    path: PathBuf,
    file: Option<File>,
}

impl Log {
    /// Syncs the log's data to disk. A log file this process has not synced before (the
    /// first, or one SQLite made anew after every connection closed) has its directory
    /// synced too: a new file's name must be on disk with its data.
    fn sync(&mut self) -> std::io::Result<()> {
        if !self.file.as_ref().is_some_and(|f| same_file(f, &self.path)) {
            let file = open_patiently(&self.path)?;
            if let Some(dir) = self.path.parent() {
                let dir = if dir.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    dir
                };
                open_patiently(dir)?.sync_all()?;
            }
            self.file = Some(file);
        }
        self.file.as_ref().expect("opened above").sync_data()
    }
}

/// Opens `path`, waiting while the process is out of descriptors (EMFILE, ENFILE) rather
/// than failing: nothing has been synced yet, so waiting loses nothing, where a failed sync
/// refuses every write after it. Writers and readers wait meanwhile, as for a slow disk.
fn open_patiently(path: &Path) -> std::io::Result<File> {
    patiently(|| File::open(path))
}

/// `open` tried again, after a pause that doubles up to a second, while it fails for want
/// of descriptors.
fn patiently<T>(mut open: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    use nix::errno::Errno;
    let out_of_descriptors = [Errno::EMFILE, Errno::ENFILE].map(|n| Some(n as i32));
    let mut pause = Duration::from_millis(10);
    loop {
        match open() {
            Err(e) if out_of_descriptors.contains(&e.raw_os_error()) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            opened => return opened,
        }
    }
}

impl Shared {
    /// Waits for the bell; `false` once the group is closing and nothing was rung.
    fn wait(&self) -> bool {
        let mut bell = self.bell.lock().unwrap_or_else(|p| p.into_inner());
        while !bell.rung && !bell.closing {
            bell = self.rung.wait(bell).unwrap_or_else(|p| p.into_inner());
        }
        std::mem::take(&mut bell.rung) || !bell.closing
    }

    fn ring(&self) {
        let mut bell = self.bell.lock().unwrap_or_else(|p| p.into_inner());
        if !bell.rung {
            bell.rung = true;
            self.rung.notify_one();
        }
    }

    /// One round of the log thread: commit what the open transaction holds, give the
    /// connection back, sync the log, tell the members.
    fn round(&self, sync: &mut SyncLog) {
        let (number, members) = {
            let mut batch = self.batch.blocking_lock();
            batch.settle_undo();
            if !batch.open {
                return;
            }
            let number = self.begun.fetch_add(1, Ordering::SeqCst) + 1;
            (number, batch.commit())
        };
        // The connection is free: the next writers run while the log syncs.
        // Only a released savepoint writes anything, and each has its member waiting.
        let outcome = match &members {
            None => Ok(()),
            Some(members) if members.is_empty() => Ok(()),
            Some(_) => {
                sync().map_err(|e| format!("the store's log could not be synced to disk: {e}"))
            }
        };
        self.durable.send_modify(|d| {
            d.through = number;
            if let Err(why) = &outcome {
                d.failed.get_or_insert_with(|| why.clone());
            }
        });
        let Some(members) = members else { return };
        if outcome.is_ok() && !members.is_empty() {
            self.commits.fetch_add(1, Ordering::SeqCst);
        }
        for member in members {
            let _ = member.send(outcome.clone());
        }
    }

    fn failed(&self) -> Option<String> {
        self.durable.borrow().failed.clone()
    }
}

impl Group {
    /// The group writing through `conn`, the store at `path`'s connection. Its log thread
    /// runs until the group is dropped.
    pub(super) fn new(conn: Connection, path: &Path, busy_timeout: Duration) -> Sql<Self> {
        let mut log = Log {
            path: PathBuf::from(format!("{}-wal", path.display())),
            file: None,
        };
        Self::syncing(conn, path, busy_timeout, Box::new(move || log.sync()))
    }

    /// The group, its commits made durable by `sync` (the log's, or a test's).
    pub(super) fn syncing(
        conn: Connection,
        path: &Path,
        busy_timeout: Duration,
        mut sync: SyncLog,
    ) -> Sql<Self> {
        let shared = Arc::new(Shared {
            batch: Arc::new(Mutex::new(Batch {
                conn: writer(conn)?,
                path: path.to_owned(),
                busy_timeout,
                open: false,
                undo: false,
                waiting: Vec::new(),
            })),
            bell: std::sync::Mutex::new(Bell::default()),
            rung: Condvar::new(),
            begun: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            durable: watch::Sender::new(Durable::default()),
        });
        let thread = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("baton-log".into())
            .spawn(move || {
                while thread.wait() {
                    thread.round(&mut sync);
                }
            })
            .map_err(|e| conn::Fault::Setup(format!("the group's log thread: {e}")))?;
        Ok(Self {
            shared,
            busy_timeout,
        })
    }

    /// How many transactions the group has made durable: each one fsync, however many
    /// writers it carried.
    pub(super) fn commits(&self) -> u64 {
        self.shared.commits.load(Ordering::SeqCst)
    }

    /// Waits until every commit a read that has just finished could have seen is synced.
    pub(super) async fn settled(&self) -> Result<()> {
        let seen = self.shared.begun.load(Ordering::SeqCst);
        let mut durable = self.shared.durable.subscribe();
        let reached = durable
            .wait_for(|d| d.through >= seen || d.failed.is_some())
            .await
            .map_err(|_| StoreError::Engine("the store closed during a read".to_owned()))?;
        match &reached.failed {
            Some(why) => Err(StoreError::Engine(why.clone())),
            None => Ok(()),
        }
    }

    /// Waits for the writer connection, opens its transaction if none is open, and starts
    /// a member's savepoint.
    pub(super) async fn begin(&self) -> Result<Member> {
        if let Some(why) = self.shared.failed() {
            return Err(StoreError::Engine(why));
        }
        let mut batch = Arc::clone(&self.shared.batch).lock_owned().await;
        batch.settle_undo();
        if !batch.open {
            let conn = &batch.conn;
            let begun = match exec(conn, "BEGIN IMMEDIATE", []) {
                // Another process holds the write lock: wait for it, bounded by the busy
                // timeout, with this worker's other tasks moved elsewhere meanwhile.
                Err(e) if matches!(classify(&e, self.busy_timeout), StoreError::Busy { .. }) => {
                    blocking(|| {
                        conn.busy_timeout(self.busy_timeout)?;
                        let begun = exec(conn, "BEGIN IMMEDIATE", []);
                        conn.busy_timeout(Duration::ZERO)?;
                        begun
                    })
                }
                other => other,
            };
            begun.map_err(|e| classify(&e, self.busy_timeout))?;
            batch.open = true;
        }
        if let Err(e) = exec(&batch.conn, "SAVEPOINT member", []) {
            // Ring so the transaction does not stay open holding the write lock.
            self.shared.ring();
            return Err(classify(&e, self.busy_timeout));
        }
        Ok(Member {
            batch: Some(batch),
            shared: Arc::clone(&self.shared),
        })
    }
}

/// One writer's transaction inside the group's: a savepoint, holding the connection.
pub(super) struct Member {
    batch: Option<OwnedMutexGuard<Batch>>,
    shared: Arc<Shared>,
}

impl Member {
    pub(super) fn conn(&self) -> &Connection {
        &self
            .batch
            .as_ref()
            .expect("a member holds the open transaction")
            .conn
    }

    /// Releases the savepoint and waits until the group's transaction has committed and
    /// the log holding it is synced.
    pub(super) async fn commit(mut self, busy_timeout: Duration) -> Result<()> {
        let mut batch = self.batch.take().expect("a member holds the batch");
        if let Err(e) = exec(&batch.conn, "RELEASE member", []) {
            batch.undo = true;
            drop(batch);
            self.shared.ring();
            return Err(classify(&e, busy_timeout));
        }
        let (told, answer) = oneshot::channel();
        batch.waiting.push(told);
        drop(batch);
        self.shared.ring();
        match answer.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(StoreError::Engine(why)),
            Err(_) => Err(StoreError::Engine(
                "the store closed before the commit".to_owned(),
            )),
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        // Not committed: the next holder of the connection (a writer, or the log thread
        // this rings) rolls the savepoint back first.
        if let Some(mut batch) = self.batch.take() {
            batch.undo = true;
            drop(batch);
            self.shared.ring();
        }
    }
}

#[cfg(test)]
mod tests {
    use baton_core::{Draft, MessageType, Passname, Payload, Topic};

    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use crate::{SqliteStore, Store};

    /// Sixteen writers at once are made durable by fewer commits than writers, each told
    /// only after its own commit; a refused one leaves the others whole.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writers_share_commits() {
        let dir = tempfile::tempdir().unwrap();
        let grouped = peers(&dir.path().join("b.db"), Duration::from_secs(5), None).await;
        let store = Store::new(grouped.clone());
        let before = grouped.commits().await.unwrap();
        let a = Passname::new("a").unwrap();
        let sends = (0..16).map(|n| {
            let store = store.clone();
            let a = a.clone();
            // Every fourth is refused (to nobody registered) inside the shared transaction.
            let to = if n % 4 == 3 { "ghost" } else { "b" };
            let draft = info_to(to, &format!("m{n}"));
            tokio::spawn(async move { store.send(&a, draft, 0).await })
        });
        let results: Vec<_> = futures_results(sends).await;
        let sent = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(sent, 12, "{results:?}");
        let commits = grouped.commits().await.unwrap() - before;
        assert!(commits < 12, "12 writers took {commits} commits");
        // Every acknowledged message is readable from another connection.
        for r in results.into_iter().flatten() {
            assert!(store.message(&r.id).await.unwrap().is_some());
        }
    }

    /// A sync the test holds and then lets through or fails.
    struct HeldSync {
        hold: Arc<AtomicBool>,
        entered: std::sync::mpsc::Receiver<()>,
        release: std::sync::mpsc::Sender<std::io::Result<()>>,
    }

    /// A grouped store whose log syncs pass at once until `hold` is set; then each sync
    /// says it began and waits to be released.
    async fn held_store(dir: &std::path::Path) -> (Store, HeldSync) {
        let hold = Arc::new(AtomicBool::new(false));
        let (entered_tx, entered) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel();
        let holding = Arc::clone(&hold);
        let sync: super::SyncLog = Box::new(move || {
            if !holding.load(Ordering::SeqCst) {
                return Ok(());
            }
            let _ = entered_tx.send(());
            released.recv().unwrap_or(Ok(()))
        });
        (
            Store::new(peers(&dir.join("b.db"), Duration::from_secs(5), Some(sync)).await),
            HeldSync {
                hold,
                entered,
                release,
            },
        )
    }

    /// A new grouped store at `file` with participants `a` and `b`, its log synced by
    /// `sync` when given (else the log's fsync).
    async fn peers(
        file: &std::path::Path,
        busy_timeout: Duration,
        sync: Option<super::SyncLog>,
    ) -> SqliteStore {
        let store = SqliteStore::create(file, busy_timeout)
            .await
            .unwrap()
            .grouped_with(sync)
            .unwrap();
        let writes = Store::new(store.clone());
        for who in ["a", "b"] {
            writes
                .add_participant("@t", &Passname::new(who).unwrap(), "peer", None)
                .await
                .unwrap();
        }
        store
    }

    fn info(body: &str) -> Draft {
        info_to("b", body)
    }

    fn info_to(to: &str, body: &str) -> Draft {
        Draft {
            to: vec![Passname::new(to).unwrap()],
            kind: MessageType::Info,
            topic: Topic::new("t").unwrap(),
            reply_to: None,
            payload: Payload::body(body, 1024).unwrap(),
            idempotency_key: None,
        }
    }

    /// Blocks this test's thread until the log thread is inside a held sync.
    async fn sync_began(held: &HeldSync) {
        let entered = &held.entered;
        tokio::task::block_in_place(|| entered.recv_timeout(Duration::from_secs(10)))
            .expect("the log thread began a sync");
    }

    /// While the log syncs a commit: its writer is not answered, a reader whose snapshot
    /// holds the commit is not answered either, and the next writer already has the
    /// connection. Once the sync is through, both answer, and the reader shows the
    /// message.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn nothing_is_acknowledged_or_shown_before_its_sync() {
        let dir = tempfile::tempdir().unwrap();
        let (store, held) = held_store(dir.path()).await;
        let a = Passname::new("a").unwrap();
        let seen = store.events(0, 100).await.unwrap().len();
        held.hold.store(true, Ordering::SeqCst);
        let send = tokio::spawn({
            let (store, a) = (store.clone(), a.clone());
            async move { store.send(&a, info("held"), 0).await }
        });
        // The commit is written (readers can see it) and its sync is under way.
        sync_began(&held).await;
        let read = tokio::spawn({
            let store = store.clone();
            async move { store.events(0, 100).await }
        });
        // The connection is free for the next writer while the sync runs.
        let next = tokio::time::timeout(Duration::from_secs(5), store.begin()).await;
        assert!(
            matches!(next, Ok(Ok(_))),
            "the next writer waited for the sync"
        );
        drop(next);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!send.is_finished(), "a send was answered before its sync");
        assert!(
            !read.is_finished(),
            "a read answered before what it saw was synced"
        );

        held.hold.store(false, Ordering::SeqCst);
        held.release.send(Ok(())).unwrap();
        let sent = send.await.unwrap().expect("the send, once synced");
        let events = read.await.unwrap().expect("the read, once synced");
        assert_eq!(events.len(), seen + 1);
        assert!(store.message(&sent.id).await.unwrap().is_some());
    }

    /// A sync that fails fails the writers it carried, and every write and read after
    /// it: the store can no longer say what is on disk.
    /// Out of descriptors, the log is opened again until it opens, instead of failing the
    /// sync (which would refuse every write after it); any other error is the sync's.
    #[test]
    fn the_log_is_opened_again_while_the_process_is_out_of_descriptors() {
        use nix::errno::Errno;
        let mut tries = 0;
        let opened = super::patiently(|| {
            tries += 1;
            match tries {
                1 => Err(std::io::Error::from_raw_os_error(Errno::EMFILE as i32)),
                2 => Err(std::io::Error::from_raw_os_error(Errno::ENFILE as i32)),
                _ => Ok(tries),
            }
        });
        assert_eq!(opened.unwrap(), 3);
        let mut tries = 0;
        let failed = super::patiently(|| -> std::io::Result<()> {
            tries += 1;
            Err(std::io::Error::from_raw_os_error(Errno::EACCES as i32))
        });
        assert!(failed.is_err());
        assert_eq!(
            tries, 1,
            "an error other than want of descriptors is not retried"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_sync_refuses_everything_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let (store, held) = held_store(dir.path()).await;
        let a = Passname::new("a").unwrap();
        held.hold.store(true, Ordering::SeqCst);
        let send = tokio::spawn({
            let (store, a) = (store.clone(), a.clone());
            async move { store.send(&a, info("lost"), 0).await }
        });
        sync_began(&held).await;
        held.release
            .send(Err(std::io::Error::other("the disk went away")))
            .unwrap();
        let failed = send.await.unwrap().expect_err("a send whose sync failed");
        assert!(
            failed.to_string().contains("the disk went away"),
            "{failed}"
        );
        let after = store.send(&a, info("after"), 0).await;
        assert!(after.is_err(), "a write after a failed sync: {after:?}");
        let read = store.events(0, 100).await;
        assert!(read.is_err(), "a read after a failed sync: {read:?}");
    }

    /// The group's writer takes the write lock without waiting when it is free, and
    /// waits for another process's transaction, bounded by the busy timeout, when not.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_writer_waits_for_another_process_only_up_to_the_busy_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("b.db");
        let store = Store::new(peers(&file, Duration::from_millis(1500), None).await);
        let a = Passname::new("a").unwrap();
        let other = rusqlite::Connection::open(&file).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let send = tokio::spawn({
            let (store, a) = (store.clone(), a.clone());
            async move { store.send(&a, info("after the other writer"), 0).await }
        });
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(!send.is_finished(), "the writer did not wait for the lock");
        other.execute_batch("COMMIT").unwrap();
        let sent = send.await.unwrap().expect("a send once the lock is free");
        assert!(store.message(&sent.id).await.unwrap().is_some());

        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let busy = store.send(&a, info("never"), 0).await;
        assert!(
            matches!(busy, Err(crate::StoreError::Busy { .. })),
            "{busy:?}"
        );
        other.execute_batch("COMMIT").unwrap();
        store.send(&a, info("once free again"), 0).await.unwrap();
    }

    async fn futures_results<T: Send + 'static>(
        handles: impl Iterator<Item = tokio::task::JoinHandle<T>>,
    ) -> Vec<T> {
        let mut out = Vec::new();
        for h in handles.collect::<Vec<_>>() {
            out.push(h.await.unwrap());
        }
        out
    }
}
