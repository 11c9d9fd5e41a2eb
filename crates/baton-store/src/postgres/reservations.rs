//! Reservations in PostgreSQL: the `reservations` projection of `reservation.changed`,
//! keyed by project, its reads, and a participant's newest activity (what a force-release
//! waits out).

use baton_core::reservation::{Reservation, ReservationChange};
use baton_core::{Change, Event};
use sqlx::postgres::PgConnection;
use sqlx::{Postgres, QueryBuilder};

use crate::decode;
use crate::reservations::{self as shared, RESERVATION_COLUMNS, ReservationQuery};

/// Applies a reservation's change to its row; any other change is not this family's.
pub(super) async fn project(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
) -> sqlx::Result<()> {
    match &event.change {
        Change::Reservation(change) => apply(conn, project, event, change).await,
        _ => Ok(()),
    }
}

/// Applies one reservation event (live writes and replay alike).
async fn apply(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
    change: &ReservationChange,
) -> sqlx::Result<()> {
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
        } => {
            sqlx::query(
                "INSERT INTO reservations (project, id, seq, holder, path, prefix, exclusive, \
                 reason, order_id, reserved_at, renewed_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11) \
                 ON CONFLICT (project, id) DO NOTHING",
            )
            .bind(project)
            .bind(id)
            .bind(event.seq)
            .bind(holder.as_str())
            .bind(path.as_str())
            .bind(path.prefix())
            .bind(i64::from(*exclusive))
            .bind(reason)
            .bind(order)
            .bind(event.at)
            .bind(expires_at)
            .execute(&mut *conn)
            .await?;
        }
        ReservationChange::Renewed {
            id,
            exclusive,
            reason,
            ..
        } => {
            sqlx::query(
                "UPDATE reservations SET renewed_at = $1, expires_at = $2, exclusive = $3, \
                 reason = $4 WHERE project = $5 AND id = $6 AND released_at IS NULL",
            )
            .bind(event.at)
            .bind(expires_at)
            .bind(i64::from(*exclusive))
            .bind(reason)
            .bind(project)
            .bind(id)
            .execute(&mut *conn)
            .await?;
        }
        ReservationChange::Released { id, forced } => {
            sqlx::query(
                "UPDATE reservations SET released_at = $1, released_by = $2, forced = $3 \
                 WHERE project = $4 AND id = $5 AND released_at IS NULL",
            )
            .bind(event.at)
            .bind(&event.actor)
            .bind(forced)
            .bind(project)
            .bind(id)
            .execute(&mut *conn)
            .await?;
        }
        ReservationChange::Bypassed { .. } => {}
    }
    Ok(())
}

pub(super) async fn query(
    conn: &mut PgConnection,
    project: i64,
    q: &ReservationQuery,
) -> sqlx::Result<Vec<Reservation>> {
    let mut sql = QueryBuilder::<Postgres>::new(format!(
        "SELECT {RESERVATION_COLUMNS} FROM reservations WHERE project = "
    ));
    sql.push_bind(project);
    if let Some(ids) = &q.ids {
        sql.push(" AND id = ANY(").push_bind(ids.clone()).push(")");
    }
    if let Some(holder) = &q.holder {
        sql.push(" AND holder = ").push_bind(holder.clone());
    }
    if let Some(order) = &q.order {
        sql.push(" AND order_id = ").push_bind(order.clone());
    }
    if let Some(now) = q.live_at {
        sql.push(" AND released_at IS NULL AND (expires_at IS NULL OR expires_at > ")
            .push_bind(now)
            .push(")");
    }
    if let Some((exact, under)) = q.near.as_deref().and_then(shared::near) {
        sql.push(" AND (prefix = ANY(").push_bind(exact).push(")");
        for prefix in under {
            let (from, to) = shared::under_bounds(&prefix);
            sql.push(" OR (prefix >= ")
                .push_bind(from)
                .push(" AND prefix < ")
                .push_bind(to)
                .push(")");
        }
        sql.push(")");
    }
    sql.push(" ORDER BY seq");
    if let Some(limit) = q.limit {
        sql.push(" LIMIT ").push_bind(i64::from(limit));
    }
    let found = sql.build().fetch_all(&mut *conn).await?;
    found.iter().map(shared::reservation).collect()
}

/// The newest sign of life of `participant`'s runs and sessions that have not ended: an
/// event or a heartbeat. `None` when it has none.
pub(super) async fn activity(
    conn: &mut PgConnection,
    project: i64,
    participant: &str,
) -> sqlx::Result<Option<i64>> {
    let sql = format!(
        "SELECT max(greatest(coalesce((data::jsonb ->> 'last_event_at')::bigint, 0), \
                             coalesce((data::jsonb ->> 'heartbeat_at')::bigint, 0))) \
         FROM runs WHERE project = $1 AND participant = $2 AND status IN {}",
        decode::live_runs()
    );
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(project)
        .bind(participant)
        .fetch_one(&mut *conn)
        .await
}

/// This family's projection rows as text, in a stable order, for `projection_dump`
/// (`$1`: the project).
pub(super) const DUMP: &[&str] = &[
    "SELECT 'v|' || id || '|' || seq || '|' || holder || '|' || path || '|' || prefix \
     || '|' || exclusive || '|' || reason || '|' || coalesce(order_id, '') || '|' \
     || reserved_at || '|' || renewed_at || '|' || coalesce(expires_at::text, '') || '|' \
     || coalesce(released_at::text, '') || '|' || coalesce(released_by, '') || '|' \
     || coalesce(forced, '') FROM reservations WHERE project = $1 \
     ORDER BY id COLLATE \"C\"",
];
