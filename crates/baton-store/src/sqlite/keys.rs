//! Keys in SQLite: the `keys` projection, each row the fold of its key's `key.changed`
//! events (`baton_core::key::fold`), kept whole as JSON, and beside it `key_uses`, each
//! key's last recorded use (not in the log, so a rebuild keeps it). The token itself is
//! never stored.

use baton_core::key::{self, Key, KeyChange};
use baton_core::{Change, Event};
use rusqlite::{Connection, params};

use super::conn::{Sql, exec};
use super::rows::{self, load_folded};
use crate::decode;

/// Applies a key's change to its row; any other change is not this family's.
pub(super) fn project(conn: &Connection, event: &Event) -> Sql<()> {
    match &event.change {
        Change::Key(change) => apply(conn, event, change),
        _ => Ok(()),
    }
}

/// Applies one key event to the projection (live writes and replay alike).
fn apply(conn: &Connection, event: &Event, change: &KeyChange) -> Sql<()> {
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

/// The fold alone, for the write that folds the next change into it.
pub(super) fn load(conn: &Connection, id: &str) -> Sql<Option<Key>> {
    load_folded(conn, "SELECT data FROM keys WHERE id = ?", id)
}

const USED: &str = "SELECT k.data, u.used_at FROM keys k LEFT JOIN key_uses u ON u.id = k.id";

/// The key with its last recorded use.
pub(super) fn used(conn: &Connection, id: &str) -> Sql<Option<Key>> {
    let found = rows::row(conn, &format!("{USED} WHERE k.id = ?"), [id])?;
    Ok(found.as_ref().map(decode::used_key).transpose()?)
}

/// Every key with its last recorded use, oldest first.
pub(super) fn all(conn: &Connection) -> Sql<Vec<Key>> {
    let found = rows::rows(conn, &format!("{USED} ORDER BY k.seq"), [])?;
    Ok(found
        .iter()
        .map(decode::used_key)
        .collect::<sqlx::Result<_>>()?)
}

/// Records a use of key `id` at `at` (a later one than recorded wins).
pub(super) fn record_use(conn: &Connection, id: &str, at: i64) -> Sql<()> {
    exec(
        conn,
        "INSERT INTO key_uses (id, used_at) VALUES (?, ?) \
         ON CONFLICT (id) DO UPDATE SET used_at = max(used_at, excluded.used_at)",
        params![id, at],
    )?;
    Ok(())
}

/// This family's projection rows as text, in a stable order, for `projection_dump`.
pub(super) const DUMP: &[&str] = &[
    "SELECT 'k|' || id || '|' || seq || '|' || participant || '|' || data \
     FROM keys ORDER BY id",
];
