//! The portable log: a project's events as JSON lines, one event a line, to move between
//! stores (SQLite ↔ PostgreSQL), keep in git or back up. Importing is idempotent by event
//! id and merges by union; what a log must be to be imported is the core's
//! ([`baton_core::portable`]).

use baton_core::Event;

use crate::doc::ImportDone;
use crate::{App, Result};

pub use baton_core::portable::parse_line;

/// One event as a line of the portable log (no newline).
pub fn line(event: &Event) -> String {
    serde_json::to_string(event).expect("an event always serializes")
}

impl App {
    /// The events after `after`, oldest first, at most `limit`: one page of an export.
    pub async fn export_page(&self, after: i64, limit: u32) -> Result<Vec<Event>> {
        self.store().events(after, limit).await
    }

    /// Imports a whole portable log (each event with its line number) in one transaction,
    /// or refuses it whole: keeping ids and times, skipping what the store holds already
    /// (when it is the same event), never taking keys. `merge` takes another project's
    /// log, leaving out its setup of participants this project has and renaming the items
    /// whose ids this project uses.
    pub async fn import(&self, lines: Vec<(usize, Event)>, merge: bool) -> Result<ImportDone> {
        let done = self
            .store()
            .import(lines, merge, self.settings().payload_cap)
            .await?;
        Ok(ImportDone {
            imported: done.imported,
            skipped: done.skipped,
            left_out: done.left_out,
            renamed: done.renamed,
        })
    }
}
