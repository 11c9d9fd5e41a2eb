//! Group commit: many writers' transactions made durable by one fsync.
//!
//! SQLite has one writer, and each commit in `synchronous = FULL` costs an fsync: writers
//! that each commit alone are held to the disk's fsync rate. A grouped store keeps one
//! writer connection with one open transaction (`BEGIN IMMEDIATE`). Each writer's
//! transaction is a savepoint inside it: its checks and appends run in turn, as before,
//! and its commit releases the savepoint, then waits — it is not acknowledged until the
//! enclosing transaction has committed. A committer task takes its turn on the connection
//! behind the writers already queued (the lock is fair) and commits them all with one
//! fsync, then tells each. A writer that fails or is refused rolls back to its savepoint
//! and leaves the others untouched.
//!
//! Readers use other connections and see only what was committed: nothing a writer has
//! not been told is durable is ever read.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::{Mutex, Notify, OwnedMutexGuard, oneshot};

use super::sql::{self, blocking, classify, exec};
use crate::{Result, StoreError};

/// The writer connection and what its open transaction holds.
struct Batch {
    conn: Connection,
    path: PathBuf,
    busy_timeout: Duration,
    /// Whether a transaction is open on the connection.
    open: bool,
    /// A member dropped without committing left its savepoint to roll back.
    undo: bool,
    /// Members whose savepoints were released, waiting for the commit.
    waiting: Vec<oneshot::Sender<std::result::Result<(), String>>>,
    /// Transactions committed so far (each one fsync).
    commits: u64,
}

/// One store's group: the batch behind a fair lock, and the committer's bell.
pub(super) struct Group {
    batch: Arc<Mutex<Batch>>,
    bell: Arc<Notify>,
    busy_timeout: Duration,
    committer: tokio::task::JoinHandle<()>,
}

impl Drop for Group {
    fn drop(&mut self) {
        self.committer.abort();
    }
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
                && let Ok(fresh) = sql::connect(&self.path, self.busy_timeout, false)
            {
                self.conn = fresh;
            }
        }
        for waiter in self.waiting.drain(..) {
            let _ = waiter.send(Err(why.to_owned()));
        }
    }

    /// Commits the open transaction (one fsync) and tells every member waiting.
    fn commit(&mut self) {
        self.settle_undo();
        if !self.open {
            return;
        }
        match blocking(|| exec(&self.conn, "COMMIT", [])) {
            Ok(_) => {
                self.open = false;
                self.commits += 1;
                for waiter in self.waiting.drain(..) {
                    let _ = waiter.send(Ok(()));
                }
            }
            Err(e) => {
                let why = format!("the commit failed: {}", classify(&e, self.busy_timeout));
                self.abandon(&why);
            }
        }
    }
}

impl Group {
    /// The group writing through `conn`, the store at `path`'s connection.
    pub(super) fn new(conn: Connection, path: &Path, busy_timeout: Duration) -> Self {
        let batch = Arc::new(Mutex::new(Batch {
            conn,
            path: path.to_owned(),
            busy_timeout,
            open: false,
            undo: false,
            waiting: Vec::new(),
            commits: 0,
        }));
        let bell = Arc::new(Notify::new());
        let committer = tokio::spawn({
            let batch = Arc::clone(&batch);
            let bell = Arc::clone(&bell);
            async move {
                loop {
                    bell.notified().await;
                    // Behind every writer already queued: they join this commit.
                    batch.lock().await.commit();
                }
            }
        });
        Self {
            batch,
            bell,
            busy_timeout,
            committer,
        }
    }

    /// How many transactions the group has committed: each one fsync, however many
    /// writers it carried.
    pub(super) async fn commits(&self) -> u64 {
        self.batch.lock().await.commits
    }

    /// Waits for the writer connection, opens its transaction if none is open, and starts
    /// a member's savepoint.
    pub(super) async fn begin(&self) -> Result<Member> {
        let mut batch = Arc::clone(&self.batch).lock_owned().await;
        batch.settle_undo();
        if !batch.open {
            blocking(|| exec(&batch.conn, "BEGIN IMMEDIATE", []))
                .map_err(|e| classify(&e, self.busy_timeout))?;
            batch.open = true;
        }
        if let Err(e) = exec(&batch.conn, "SAVEPOINT member", []) {
            // Ring so the transaction does not stay open holding the write lock.
            self.bell.notify_one();
            return Err(classify(&e, self.busy_timeout));
        }
        Ok(Member {
            batch: Some(batch),
            bell: Arc::clone(&self.bell),
        })
    }
}

/// One writer's transaction inside the group's: a savepoint, holding the connection.
pub(super) struct Member {
    batch: Option<OwnedMutexGuard<Batch>>,
    bell: Arc<Notify>,
}

impl Member {
    pub(super) fn conn(&self) -> &Connection {
        &self
            .batch
            .as_ref()
            .expect("a member holds the open transaction")
            .conn
    }

    /// Releases the savepoint and waits until the group's transaction has committed.
    pub(super) async fn commit(mut self, busy_timeout: Duration) -> Result<()> {
        let mut batch = self.batch.take().expect("a member holds the batch");
        if let Err(e) = exec(&batch.conn, "RELEASE member", []) {
            batch.undo = true;
            self.bell.notify_one();
            return Err(classify(&e, busy_timeout));
        }
        let (told, answer) = oneshot::channel();
        batch.waiting.push(told);
        drop(batch);
        self.bell.notify_one();
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
        // Not committed: the next holder of the connection (a writer, or the committer
        // this rings) rolls the savepoint back first.
        if let Some(mut batch) = self.batch.take() {
            batch.undo = true;
            drop(batch);
            self.bell.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use baton_core::{Draft, MessageType, Passname, Payload, Topic};

    use crate::{Backend, SqliteStore, Store};

    /// Sixteen writers at once are made durable by fewer commits than writers, each told
    /// only after its own commit; a refused one leaves the others whole.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writers_share_commits() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            SqliteStore::create(&dir.path().join("b.db"), std::time::Duration::from_secs(5))
                .await
                .unwrap()
                .grouped();
        for who in ["a", "b"] {
            store
                .add_participant("@t", &Passname::new(who).unwrap(), "peer", None)
                .await
                .unwrap();
        }
        let before = store.commits().await.unwrap();
        let draft = |n: usize, to: &str| Draft {
            to: vec![Passname::new(to).unwrap()],
            kind: MessageType::Info,
            topic: Topic::new("t").unwrap(),
            reply_to: None,
            payload: Payload::body(&format!("m{n}"), 1024).unwrap(),
            idempotency_key: None,
        };
        let a = Passname::new("a").unwrap();
        let sends = (0..16).map(|n| {
            let store = store.clone();
            let a = a.clone();
            // Every fourth is refused (to nobody registered) inside the shared transaction.
            let to = if n % 4 == 3 { "ghost" } else { "b" };
            let draft = draft(n, to);
            tokio::spawn(async move { store.send(&a, draft, 0).await })
        });
        let results: Vec<_> = futures_results(sends).await;
        let sent = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(sent, 12, "{results:?}");
        let commits = store.commits().await.unwrap() - before;
        assert!(commits < 12, "12 writers took {commits} commits");
        // Every acknowledged message is readable from another connection.
        for r in results.into_iter().flatten() {
            assert!(store.message(&r.id).await.unwrap().is_some());
        }
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
