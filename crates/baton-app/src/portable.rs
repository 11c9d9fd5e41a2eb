//! The portable log (SPEC §3): a project's events as JSON lines, one event a line, to move
//! between stores (SQLite ↔ PostgreSQL), keep in git or back up. Importing is idempotent by
//! event id and merges by union.

use baton_core::{Event, Refusal};
use baton_store::NewEvent;

use crate::{App, Result};

/// What an import did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Imported {
    /// Events appended.
    pub imported: usize,
    /// Events the log held already (by id), left as they were.
    pub skipped: usize,
}

/// One event as a line of the portable log (no newline).
pub fn line(event: &Event) -> String {
    serde_json::to_string(event).expect("an event always serializes")
}

/// An event read from line `number` (from 1) of a portable log.
pub fn parse_line(number: usize, text: &str) -> std::result::Result<Event, Refusal> {
    serde_json::from_str(text).map_err(|e| Refusal::LogLine {
        line: number,
        problem: e.to_string(),
    })
}

impl App {
    /// The events after `after`, oldest first, at most `limit`: one page of an export.
    pub async fn export_page(&self, after: i64, limit: u32) -> Result<Vec<Event>> {
        self.store().events(after, limit).await
    }

    /// Appends `events` (read from a portable log) in one transaction, keeping their ids
    /// and times; those the log holds already are skipped.
    pub async fn import(&self, events: Vec<Event>) -> Result<Imported> {
        let total = events.len();
        let written = self
            .store()
            .append_events(events.into_iter().map(NewEvent::from).collect())
            .await?;
        Ok(Imported {
            imported: written.len(),
            skipped: total - written.len(),
        })
    }
}
