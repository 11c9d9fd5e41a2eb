//! What waits for a person in PostgreSQL: the `open_needs` and `stuck_orders` projections
//! (migration 11), kept in the transaction of each gate and effect event, so the human
//! queue reads open work instead of every need and effect in the log.

use baton_core::effect::{EffectChange, Effects, StuckBy, stuck_by};
use baton_core::gate::{GateChange, NeedMove, need_move};
use baton_core::{Change, Event};
use sqlx::postgres::PgConnection;

use super::events;
use crate::Attention;
use crate::decode;

/// Applies a verdict, a need, an acknowledgement or an effect to the open needs and the stuck orders; any other change is not this family's.
pub(super) async fn project(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
) -> sqlx::Result<()> {
    match &event.change {
        Change::Gate(change) => gate(conn, project, event, change).await,
        Change::Effect(change) => effect(conn, project, change).await,
        _ => Ok(()),
    }
}

/// Projects a gate event as the core moves its need (`gate::need_move`).
pub(super) async fn gate(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
    change: &GateChange,
) -> sqlx::Result<()> {
    match need_move(change) {
        Some(NeedMove::Opened(id)) => {
            sqlx::query(
                "INSERT INTO open_needs (project, id, seq) VALUES ($1, $2, $3) \
                 ON CONFLICT (project, id) DO NOTHING",
            )
            .bind(project)
            .bind(id)
            .bind(event.seq)
            .execute(&mut *conn)
            .await?;
        }
        Some(NeedMove::Closed(id)) => {
            sqlx::query("DELETE FROM open_needs WHERE project = $1 AND id = $2")
                .bind(project)
                .bind(id)
                .execute(&mut *conn)
                .await?;
        }
        None => {}
    }
    Ok(())
}

/// Projects an effect event as the core says it moves its order (`effect::stuck_by`).
pub(super) async fn effect(
    conn: &mut PgConnection,
    project: i64,
    change: &EffectChange,
) -> sqlx::Result<()> {
    let order = change.order();
    let stuck = match stuck_by(change) {
        Some(StuckBy::Stuck) => true,
        Some(StuckBy::Recheck) => {
            Effects::replay(&events::about(conn, project, order, baton_core::effect::KIND).await?)
                .stuck()
                .is_some()
        }
        None => return Ok(()),
    };
    let sql = if stuck {
        "INSERT INTO stuck_orders (project, id) VALUES ($1, $2) ON CONFLICT (project, id) DO NOTHING"
    } else {
        "DELETE FROM stuck_orders WHERE project = $1 AND id = $2"
    };
    sqlx::query(sql)
        .bind(project)
        .bind(order)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Fills both from the logs of a database made before they existed, as live writes would
/// have.
pub(super) async fn fill(conn: &mut PgConnection) -> sqlx::Result<()> {
    let projects: Vec<i64> = sqlx::query_scalar("SELECT id FROM projects ORDER BY id")
        .fetch_all(&mut *conn)
        .await?;
    for project in projects {
        let mut after = 0_i64;
        loop {
            let kinds = ["gate.changed", "effect.changed"];
            let batch = events::of_kinds(conn, project, &kinds, after).await?;
            let Some(last) = batch.last() else { break };
            after = last.seq;
            for event in &batch {
                match &event.change {
                    Change::Gate(g) => gate(conn, project, event, g).await?,
                    Change::Effect(e) => effect(conn, project, e).await?,
                    _ => {}
                }
            }
        }
    }
    Ok(())
}

pub(super) async fn read(conn: &mut PgConnection, project: i64) -> sqlx::Result<Attention> {
    let found = sqlx::query(
        "SELECT e.seq, e.id, e.at, e.actor, e.kind, e.data FROM open_needs n \
         JOIN events e ON e.project = n.project AND e.seq = n.seq \
         WHERE n.project = $1 ORDER BY n.seq",
    )
    .bind(project)
    .fetch_all(&mut *conn)
    .await?;
    let stuck = sqlx::query_scalar(
        "SELECT id FROM stuck_orders WHERE project = $1 ORDER BY id COLLATE \"C\"",
    )
    .bind(project)
    .fetch_all(&mut *conn)
    .await?;
    Ok(Attention {
        needs: decode::events(&found)?,
        stuck,
    })
}

/// When each item was last acknowledged: the newest `gate.changed` event on it (an
/// acknowledgement's subject is its item id).
pub(super) async fn acks(
    conn: &mut PgConnection,
    project: i64,
    items: &[String],
) -> sqlx::Result<Vec<Option<i64>>> {
    sqlx::query_scalar(
        "SELECT (SELECT max(at) FROM events e WHERE e.project = $1 AND e.subject = i.item \
         AND e.kind = 'gate.changed') \
         FROM unnest($2::text[]) WITH ORDINALITY AS i (item, n) ORDER BY i.n",
    )
    .bind(project)
    .bind(items)
    .fetch_all(&mut *conn)
    .await
}

/// This family's projection rows as text, in a stable order, for `projection_dump`
/// (`$1`: the project).
pub(super) const DUMP: &[&str] = &[
    "SELECT 'n|' || id || '|' || seq FROM open_needs \
     WHERE project = $1 ORDER BY id COLLATE \"C\"",
    "SELECT 'u|' || id FROM stuck_orders WHERE project = $1 ORDER BY id COLLATE \"C\"",
];
