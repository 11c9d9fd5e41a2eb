//! The order lifecycle in PostgreSQL: the `orders` projection, each row the fold of its
//! order's `order.changed` events (`baton_core::order::fold`), kept whole as JSON, keyed by
//! project.

use baton_core::order::{self, Order, OrderChange};
use baton_core::{Change, Event};
use sqlx::postgres::{PgConnection, PgPool};
use sqlx::{Postgres, QueryBuilder};

use super::rows::load_folded;
use crate::OrderQuery;
use crate::decode;

/// Applies an order's change to its row; any other change is not this family's.
pub(super) async fn project(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
) -> sqlx::Result<()> {
    match &event.change {
        Change::Order(change) => apply(conn, project, event, change).await,
        _ => Ok(()),
    }
}

/// Applies one order event to the projection (live writes and replay alike).
async fn apply(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
    change: &OrderChange,
) -> sqlx::Result<()> {
    let current = load(conn, project, change.order()).await?;
    if let Some(order) = order::fold(current, change, event.seq, event.at) {
        save(conn, project, &order).await?;
    }
    Ok(())
}

pub(super) async fn load(
    conn: &mut PgConnection,
    project: i64,
    id: &str,
) -> sqlx::Result<Option<Order>> {
    load_folded(
        conn,
        "SELECT data FROM orders WHERE project = $1 AND id = $2",
        project,
        id,
    )
    .await
}

async fn save(conn: &mut PgConnection, project: i64, order: &Order) -> sqlx::Result<()> {
    let data = serde_json::to_string(order).expect("an order always serializes");
    sqlx::query(
        "INSERT INTO orders \
         (project, id, log_seq, seq, status, from_name, to_name, escalate_to, data) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
         ON CONFLICT (project, id) DO UPDATE SET seq = excluded.seq, status = excluded.status, \
         data = excluded.data",
    )
    .bind(project)
    .bind(&order.id)
    .bind(order.log_seq)
    .bind(order.seq)
    .bind(order.status.as_str())
    .bind(&order.from)
    .bind(&order.to)
    .bind(&order.escalate_to)
    .bind(data)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub(super) async fn query(
    pool: &PgPool,
    project: i64,
    query: &OrderQuery,
) -> sqlx::Result<Vec<Order>> {
    let mut sql = QueryBuilder::<Postgres>::new("SELECT data FROM orders WHERE project = ");
    sql.push_bind(project);
    if let Some(who) = &query.party {
        sql.push(" AND (from_name = ")
            .push_bind(who.clone())
            .push(" OR to_name = ")
            .push_bind(who.clone())
            .push(" OR escalate_to = ")
            .push_bind(who.clone())
            .push(")");
    }
    let closed = decode::closed_orders();
    match (query.closed, query.closed_since) {
        (false, _) => {
            sql.push(" AND status NOT IN ").push(&closed);
        }
        (true, Some(since)) => {
            sql.push(" AND (status NOT IN ")
                .push(&closed)
                .push(" OR (data::json->>'updated_at')::bigint >= ")
                .push_bind(since)
                .push(")");
        }
        (true, None) => {}
    }
    sql.push(" ORDER BY log_seq");
    let data: Vec<String> = sql.build_query_scalar().fetch_all(pool).await?;
    data.iter().map(|d| decode::folded(d)).collect()
}

/// The order's events whose own seq is after `after_seq`. The order's seq is read from the
/// decoded event rather than from the stored JSON in SQL, so the text is parsed one way.
pub(super) async fn events_since(
    pool: &PgPool,
    project: i64,
    id: &str,
    after_seq: i64,
) -> sqlx::Result<Vec<Event>> {
    let found = sqlx::query(
        "SELECT seq, id, at, actor, kind, data FROM events \
         WHERE project = $1 AND subject = $2 AND kind = 'order.changed' ORDER BY seq",
    )
    .bind(project)
    .bind(id)
    .fetch_all(pool)
    .await?;
    let mut events = decode::events(&found)?;
    events.retain(|e| matches!(&e.change, Change::Order(c) if c.seq() > after_seq));
    Ok(events)
}

/// This family's projection rows as text, in a stable order, for `projection_dump`
/// (`$1`: the project).
pub(super) const DUMP: &[&str] = &[
    "SELECT 'o|' || id || '|' || log_seq || '|' || seq || '|' || status || '|' || from_name \
     || '|' || to_name || '|' || coalesce(escalate_to, '') || '|' || data \
     FROM orders WHERE project = $1 ORDER BY id COLLATE \"C\"",
];
