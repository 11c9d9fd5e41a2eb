//! The project state in SQLite: the `state` projection, the fold of every `state.changed`
//! event (`baton_core::state`), kept whole as JSON, and beside it its digest, the newest
//! entries of each list.

use baton_core::state::{DIGEST_ITEMS, ProjectState, StateDigest};
use baton_core::{Change, Event};
use rusqlite::Connection;

use super::conn::{Sql, exec};
use super::rows::scalar;
use crate::decode;

/// Applies a change of the project state to its row and its digest; any other change is not this family's.
pub(super) fn project(conn: &Connection, event: &Event) -> Sql<()> {
    match &event.change {
        Change::State(_) => advance(conn, event),
        _ => Ok(()),
    }
}

/// The project state: the fold of every `state.changed` event, as its projection keeps it.
pub(super) fn read(conn: &Connection) -> Sql<ProjectState> {
    let data: Option<String> = scalar(conn, "SELECT data FROM state WHERE id = 1", [])?;
    Ok(match data {
        Some(data) => decode::folded(&data)?,
        None => ProjectState::default(),
    })
}

/// The state's digest as its projection keeps it; made from the whole state when a store
/// older than the digest has not changed its state since.
pub(super) fn digest(conn: &Connection) -> Sql<StateDigest> {
    let data: Option<String> = scalar(conn, "SELECT data FROM state_digest WHERE id = 1", [])?;
    Ok(match data {
        Some(data) => decode::folded(&data)?,
        None => read(conn)?.digest(DIGEST_ITEMS),
    })
}

/// Folds one state event into the state's projection and its digest.
pub(super) fn advance(conn: &Connection, event: &Event) -> Sql<()> {
    let mut state = read(conn)?;
    state.apply(event);
    let (data, digest) = decode::state_rows(&state);
    for (table, data) in [("state", data), ("state_digest", digest)] {
        exec(
            conn,
            &format!(
                "INSERT INTO {table} (id, data) VALUES (1, ?) \
                 ON CONFLICT (id) DO UPDATE SET data = excluded.data"
            ),
            [data],
        )?;
    }
    Ok(())
}

/// This family's projection rows as text, in a stable order, for `projection_dump`.
pub(super) const DUMP: &[&str] = &[
    "SELECT 's|' || data FROM state",
    "SELECT 'g|' || data FROM state_digest",
];
