//! Participants in SQLite: the `participants` projection (each one's name, role and
//! authority policy) and the reads over it.

use baton_core::{Change, Event, Participant, Passname, Policy};
use rusqlite::{Connection, params};

use super::conn::{Sql, exec};
use super::rows::{row, rows};
use crate::decode;

/// Applies a participant's addition or policy to its row; any other change is not this family's.
pub(super) fn project(conn: &Connection, event: &Event) -> Sql<()> {
    match &event.change {
        Change::ParticipantAdded { name, role } => added(conn, event, name, role),
        Change::PolicySet { name, policy } => policy_set(conn, name, policy.as_ref()),
        _ => Ok(()),
    }
}

/// Projects a participant's registration (a role given again replaces its role).
pub(super) fn added(conn: &Connection, event: &Event, name: &Passname, role: &str) -> Sql<()> {
    exec(
        conn,
        "INSERT INTO participants (name, role, added_at) VALUES (?, ?, ?) \
         ON CONFLICT (name) DO UPDATE SET role = excluded.role",
        params![name.as_str(), role, event.at],
    )?;
    Ok(())
}

/// Projects a participant's policy set (`None`: back to its role's default).
pub(super) fn policy_set(conn: &Connection, name: &Passname, policy: Option<&Policy>) -> Sql<()> {
    exec(
        conn,
        "UPDATE participants SET policy = ? WHERE name = ?",
        params![decode::policy_text(policy), name.as_str()],
    )?;
    Ok(())
}

/// Every participant, by name.
pub(super) fn all(conn: &Connection) -> Sql<Vec<Participant>> {
    let found = rows(
        conn,
        "SELECT name, role, added_at, policy FROM participants ORDER BY name",
        [],
    )?;
    Ok(found
        .iter()
        .map(decode::participant)
        .collect::<sqlx::Result<_>>()?)
}

/// Participant `name`, if it is registered.
pub(super) fn load(conn: &Connection, name: &str) -> Sql<Option<Participant>> {
    let found = row(
        conn,
        "SELECT name, role, added_at, policy FROM participants WHERE name = ?",
        [name],
    )?;
    Ok(found.as_ref().map(decode::participant).transpose()?)
}

/// This family's projection rows as text, in a stable order, for `projection_dump`.
pub(super) const DUMP: &[&str] = &[
    "SELECT 'p|' || name || '|' || role || '|' || added_at || '|' || coalesce(policy, '') \
     FROM participants ORDER BY name",
];
