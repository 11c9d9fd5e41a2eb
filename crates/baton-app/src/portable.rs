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

/// The latest time an event may carry: the end of year 9999 (UTC), as RFC 3339 can say.
const LATEST: baton_core::Millis = 253_402_300_799_999;

/// Whether a log holds together before anything of it is written: every event's time
/// within 1970 to 9999, and an id used twice only for the same event.
pub fn check(lines: &[(usize, Event)]) -> std::result::Result<(), Refusal> {
    let mut seen: std::collections::HashMap<&str, &Event> = std::collections::HashMap::new();
    for (line, event) in lines {
        let refused = |problem: String| Refusal::LogLine {
            line: *line,
            problem,
        };
        if !(0..=LATEST).contains(&event.at) {
            return Err(refused(format!(
                "its time {} ms is outside 1970 to 9999",
                event.at
            )));
        }
        if let Some(first) = seen.insert(&event.id, event)
            && (first.at, &first.actor, &first.change) != (event.at, &event.actor, &event.change)
        {
            return Err(refused(format!(
                "event {} appears twice with different contents",
                event.id
            )));
        }
    }
    Ok(())
}

impl App {
    /// The events after `after`, oldest first, at most `limit`: one page of an export.
    pub async fn export_page(&self, after: i64, limit: u32) -> Result<Vec<Event>> {
        self.store().events(after, limit).await
    }

    /// Appends `events` (a whole portable log, each with its line number) in one
    /// transaction, keeping their ids and times, once the log holds together
    /// ([`check`]); those the store holds already are skipped. A refusal imports nothing.
    pub async fn import(&self, lines: Vec<(usize, Event)>) -> Result<Imported> {
        check(&lines)?;
        let events: Vec<Event> = lines.into_iter().map(|(_, e)| e).collect();
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
