//! The order lifecycle in SQLite: the `orders` projection, each row the fold of its
//! order's `order.changed` events (`baton_core::order::fold`), kept whole as JSON.

use baton_core::Event;
use baton_core::order::{self, Order, OrderChange};
use sqlx::sqlite::{SqliteConnection, SqlitePool};
use sqlx::{QueryBuilder, Sqlite};

use super::load_folded;
use crate::OrderQuery;
use crate::rows;

const CLOSED: &str = "('approved', 'declined', 'expired', 'cancelled')";

/// Applies one order event to the projection (live writes and replay alike).
pub(super) async fn project(
    conn: &mut SqliteConnection,
    event: &Event,
    change: &OrderChange,
) -> sqlx::Result<()> {
    let current = load(conn, change.order()).await?;
    if let Some(order) = order::fold(current, change, event.seq, event.at) {
        save(conn, &order).await?;
    }
    Ok(())
}

pub(super) async fn load(conn: &mut SqliteConnection, id: &str) -> sqlx::Result<Option<Order>> {
    load_folded(conn, "SELECT data FROM orders WHERE id = ?", id).await
}

async fn save(conn: &mut SqliteConnection, order: &Order) -> sqlx::Result<()> {
    let data = serde_json::to_string(order).expect("an order always serializes");
    sqlx::query(
        "INSERT INTO orders (id, log_seq, seq, status, from_name, to_name, escalate_to, data) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, status = excluded.status, \
         data = excluded.data",
    )
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

pub(super) async fn query(pool: &SqlitePool, query: &OrderQuery) -> sqlx::Result<Vec<Order>> {
    let mut sql = QueryBuilder::<Sqlite>::new("SELECT data FROM orders WHERE 1 = 1");
    if let Some(who) = &query.party {
        sql.push(" AND (from_name = ")
            .push_bind(who.clone())
            .push(" OR to_name = ")
            .push_bind(who.clone())
            .push(" OR escalate_to = ")
            .push_bind(who.clone())
            .push(")");
    }
    if !query.closed {
        sql.push(" AND status NOT IN ").push(CLOSED);
    }
    sql.push(" ORDER BY log_seq");
    let data: Vec<String> = sql.build_query_scalar().fetch_all(pool).await?;
    data.iter().map(|d| rows::folded(d)).collect()
}

pub(super) async fn events_since(
    pool: &SqlitePool,
    id: &str,
    after_seq: i64,
) -> sqlx::Result<Vec<Event>> {
    let found = sqlx::query(
        "SELECT seq, id, at, actor, kind, data FROM events \
         WHERE subject = ? AND kind = 'order.changed' AND json_extract(data, '$.seq') > ? \
         ORDER BY seq",
    )
    .bind(id)
    .bind(after_seq)
    .fetch_all(pool)
    .await?;
    rows::events(&found)
}
