//! The hook spool: events an agent's hook recorded without waiting for the write lock.
//!
//! A hook must never hold an agent up, and SQLite has one writer: behind a busy writer a
//! hook would wait. So a hook appends its event, already planned, as one JSON line to
//! `baton.db-spool` beside the store and fsyncs it (durable, no lock on the store), and
//! the next write transaction folds the spool into the log: every writer looks for it
//! when it begins, and every command that opens the store looks for it first, so what a
//! hook recorded is in the log before anything reads the store after it.
//!
//! Folding claims the spool under the store's write lock: the spool is renamed to
//! `baton.db-spool.claimed` (a hook appending at that moment holds the file's lock, and
//! one that opened the old file finds it renamed and opens the new one), its events are
//! appended in the folding transaction, and the claimed file is removed once that
//! transaction has committed. A crash in between leaves the claimed file for the next
//! writer; an event already in the log (by its id) is not appended twice. A line cut
//! short by a crash mid-append was never complete and is skipped.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use baton_core::Change;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::NewEvent;

/// The spool of the store at `db`.
#[derive(Debug, Clone)]
pub(super) struct Spool {
    path: PathBuf,
    claimed: PathBuf,
}

/// One spooled event, as a line.
#[derive(Serialize, Deserialize)]
struct Line {
    id: String,
    at: i64,
    actor: String,
    kind: String,
    data: Value,
}

impl Spool {
    pub(super) fn beside(db: &Path) -> Self {
        let name = db.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_else(|| "baton.db".to_owned());
        Self {
            path: db.with_file_name(format!("{name}-spool")),
            claimed: db.with_file_name(format!("{name}-spool.claimed")),
        }
    }

    /// Whether anything waits to be folded.
    pub(super) fn pending(&self) -> bool {
        self.path.exists() || self.claimed.exists()
    }

    /// Appends `event` as one line and fsyncs it.
    pub(super) fn append(&self, event: &NewEvent) -> std::io::Result<()> {
        let mut line = serde_json::to_string(&Line {
            id: event.id.clone(),
            at: event.at,
            actor: event.actor.clone(),
            kind: event.change.kind().to_owned(),
            data: event.change.data(),
        })
        .map_err(std::io::Error::other)?;
        line.push('\n');
        loop {
            let mut file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)?;
            file.lock()?;
            // A writer may have claimed this file between our open and our lock: then
            // the path names a new spool (or none), and the line goes there instead.
            if !same_file(&file, &self.path) {
                continue;
            }
            file.write_all(line.as_bytes())?;
            file.sync_data()?;
            return Ok(());
        }
    }

    /// Claims what was spooled and returns its events, oldest first. Called under the
    /// store's write lock; [`Spool::release`] after the transaction commits.
    pub(super) fn claim(&self) -> std::io::Result<Vec<NewEvent>> {
        // A claimed file left by a writer that did not commit is folded first, alone:
        // renaming over it would lose it.
        if !self.claimed.exists() {
            match File::open(&self.path) {
                Ok(file) => {
                    // Waits for a hook mid-append; the lock goes with the file's handle.
                    file.lock()?;
                    std::fs::rename(&self.path, &self.claimed)?;
                    if let Some(dir) = self.path.parent() {
                        File::open(dir)?.sync_all()?;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(e),
            }
        }
        let mut text = String::new();
        match File::open(&self.claimed) {
            Ok(mut file) => file.read_to_string(&mut text)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        Ok(text
            .split_inclusive('\n')
            // An unfinished last line was cut short by a crash: it was never recorded.
            .filter(|l| l.ends_with('\n'))
            .filter_map(|l| serde_json::from_str::<Line>(l).ok())
            .filter_map(|l| {
                Some(NewEvent {
                    change: Change::from_parts(&l.kind, l.data).ok()?,
                    id: l.id,
                    at: l.at,
                    actor: l.actor,
                })
            })
            .collect())
    }

    /// Forgets the claimed file once its events are committed.
    pub(super) fn release(&self) -> std::io::Result<()> {
        match std::fs::remove_file(&self.claimed) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

pub(super) fn same_file(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}
