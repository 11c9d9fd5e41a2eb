//! Reservations in SQLite: the `reservations` projection of `reservation.changed`, its
//! reads, and a participant's newest activity (what a force-release waits out).

use baton_core::reservation::{PathGlob, Reservation, ReservationChange};
use baton_core::{Change, Event};
use rusqlite::{Connection, params};

use super::conn::{Builder, Sql, exec};
use super::rows::{rows, scalar};
use crate::reservations::{self as shared, RESERVATION_COLUMNS, ReservationQuery};

/// Applies a reservation's change to its row; any other change is not this family's.
pub(super) fn project(conn: &Connection, event: &Event) -> Sql<()> {
    match &event.change {
        Change::Reservation(change) => apply(conn, event, change),
        _ => Ok(()),
    }
}

/// Applies one reservation event (live writes and replay alike).
fn apply(conn: &Connection, event: &Event, change: &ReservationChange) -> Sql<()> {
    let expires_at = change.expires_at(event.at);
    match change {
        ReservationChange::Reserved {
            id,
            holder,
            path,
            exclusive,
            reason,
            order,
            ..
        } => exec(
            conn,
            "INSERT INTO reservations (id, seq, holder, path, prefix, exclusive, reason, \
             order_id, reserved_at, renewed_at, expires_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            params![
                id,
                event.seq,
                holder.as_str(),
                path.as_str(),
                PathGlob::prefix(path),
                i64::from(*exclusive),
                reason,
                order,
                event.at,
                event.at,
                expires_at
            ],
        )?,
        ReservationChange::Renewed {
            id,
            exclusive,
            reason,
            ..
        } => exec(
            conn,
            "UPDATE reservations SET renewed_at = ?, expires_at = ?, exclusive = ?, reason = ? \
             WHERE id = ? AND released_at IS NULL",
            params![event.at, expires_at, i64::from(*exclusive), reason, id],
        )?,
        ReservationChange::Released { id, forced } => exec(
            conn,
            "UPDATE reservations SET released_at = ?, released_by = ?, forced = ? \
             WHERE id = ? AND released_at IS NULL",
            params![event.at, event.actor, forced, id],
        )?,
        ReservationChange::Bypassed { .. } => 0,
    };
    Ok(())
}

pub(super) fn query(conn: &Connection, q: &ReservationQuery) -> Sql<Vec<Reservation>> {
    let mut sql = Builder::new(&format!(
        "SELECT {RESERVATION_COLUMNS} FROM reservations WHERE 1 = 1"
    ));
    if let Some(ids) = &q.ids {
        sql.push(" AND id IN (");
        for (i, id) in ids.iter().enumerate() {
            if i > 0 {
                sql.push(", ");
            }
            sql.bind(id.clone());
        }
        sql.push(")");
    }
    if let Some(holder) = &q.holder {
        sql.push(" AND holder = ").bind(holder.clone());
    }
    if let Some(order) = &q.order {
        sql.push(" AND order_id = ").bind(order.clone());
    }
    if let Some(now) = q.live_at {
        sql.push(" AND released_at IS NULL AND (expires_at IS NULL OR expires_at > ")
            .bind(now)
            .push(")");
    }
    if let Some((exact, under)) = q.near.as_deref().and_then(shared::near) {
        sql.push(" AND (prefix IN (");
        for (i, prefix) in exact.into_iter().enumerate() {
            if i > 0 {
                sql.push(", ");
            }
            sql.bind(prefix);
        }
        sql.push(")");
        for prefix in under {
            let (from, to) = shared::under_bounds(&prefix);
            sql.push(" OR (prefix >= ")
                .bind(from)
                .push(" AND prefix < ")
                .bind(to)
                .push(")");
        }
        sql.push(")");
    }
    sql.push(" ORDER BY seq");
    if let Some(limit) = q.limit {
        sql.push(&format!(" LIMIT {limit}"));
    }
    let found = rows(conn, &sql.sql, sql.params())?;
    Ok(found
        .iter()
        .map(shared::reservation)
        .collect::<sqlx::Result<_>>()?)
}

/// The newest sign of life of `participant`'s runs and sessions that have not ended: an
/// event or a heartbeat. `None` when it has none.
pub(super) fn activity(conn: &Connection, participant: &str) -> Sql<Option<i64>> {
    let sql = format!(
        "SELECT max(max(coalesce(json_extract(data, '$.last_event_at'), 0), \
                        coalesce(json_extract(data, '$.heartbeat_at'), 0))) \
         FROM runs WHERE participant = ? AND status IN {}",
        crate::decode::live_runs()
    );
    scalar::<Option<i64>>(conn, &sql, [participant]).map(Option::flatten)
}

/// This family's projection rows as text, in a stable order, for `projection_dump`.
pub(super) const DUMP: &[&str] = &[
    "SELECT 'v|' || id || '|' || seq || '|' || holder || '|' || path || '|' || prefix \
     || '|' || exclusive || '|' || reason || '|' || coalesce(order_id, '') || '|' \
     || reserved_at || '|' || renewed_at || '|' || coalesce(expires_at, '') || '|' \
     || coalesce(released_at, '') || '|' || coalesce(released_by, '') || '|' \
     || coalesce(forced, '') FROM reservations ORDER BY id",
];
