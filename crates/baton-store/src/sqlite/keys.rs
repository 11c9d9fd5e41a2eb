//! Keys in SQLite: the `keys` projection, each row the fold of its key's `key.changed`
//! events (`baton_core::key::fold`), kept whole as JSON. The token itself is never stored.

use baton_core::Event;
use baton_core::key::{self, Key, KeyChange};
use rusqlite::{Connection, params};

use super::load_folded;
use super::sql::{Sql, column, exec};
use crate::rows;

/// Applies one key event to the projection (live writes and replay alike).
pub(super) fn project(conn: &Connection, event: &Event, change: &KeyChange) -> Sql<()> {
    let current = load(conn, change.key())?;
    let Some(k) = key::fold(current, change, event.at) else {
        return Ok(());
    };
    let data = serde_json::to_string(&k).expect("a key always serializes");
    exec(
        conn,
        "INSERT INTO keys (id, seq, participant, data) VALUES (?, ?, ?, ?) \
         ON CONFLICT (id) DO UPDATE SET data = excluded.data",
        params![k.id, event.seq, k.participant.as_str(), data],
    )?;
    Ok(())
}

pub(super) fn load(conn: &Connection, id: &str) -> Sql<Option<Key>> {
    load_folded(conn, "SELECT data FROM keys WHERE id = ?", id)
}

/// Every key, oldest first.
pub(super) fn all(conn: &Connection) -> Sql<Vec<Key>> {
    let data: Vec<String> = column(conn, "SELECT data FROM keys ORDER BY seq", [])?;
    Ok(data
        .iter()
        .map(|d| rows::folded(d))
        .collect::<sqlx::Result<_>>()?)
}
