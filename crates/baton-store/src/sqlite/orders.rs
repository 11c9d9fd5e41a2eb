//! The order lifecycle in SQLite: the `orders` projection, each row the fold of its
//! order's `order.changed` events (`baton_core::order::fold`), kept whole as JSON.

use baton_core::order::{self, Order, OrderChange};
use baton_core::{Change, Event};
use rusqlite::{Connection, params};

use super::conn::{Builder, Sql, exec};
use super::rows::{column, load_folded, rows};
use crate::OrderQuery;
use crate::decode;

/// Applies an order's change to its row; any other change is not this family's.
pub(super) fn project(conn: &Connection, event: &Event) -> Sql<()> {
    match &event.change {
        Change::Order(change) => apply(conn, event, change),
        _ => Ok(()),
    }
}

/// Applies one order event to the projection (live writes and replay alike).
fn apply(conn: &Connection, event: &Event, change: &OrderChange) -> Sql<()> {
    let current = load(conn, change.order())?;
    if let Some(order) = order::fold(current, change, event.seq, event.at) {
        save(conn, &order)?;
    }
    Ok(())
}

pub(super) fn load(conn: &Connection, id: &str) -> Sql<Option<Order>> {
    load_folded(conn, "SELECT data FROM orders WHERE id = ?", id)
}

fn save(conn: &Connection, order: &Order) -> Sql<()> {
    let data = serde_json::to_string(order).expect("an order always serializes");
    exec(
        conn,
        "INSERT INTO orders (id, log_seq, seq, status, from_name, to_name, escalate_to, data) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, status = excluded.status, \
         data = excluded.data",
        params![
            order.id,
            order.log_seq,
            order.seq,
            order.status.as_str(),
            order.from,
            order.to,
            order.escalate_to,
            data
        ],
    )?;
    Ok(())
}

pub(super) fn query(conn: &Connection, query: &OrderQuery) -> Sql<Vec<Order>> {
    let mut sql = Builder::new("SELECT data FROM orders WHERE 1 = 1");
    if let Some(who) = &query.party {
        sql.push(" AND (from_name = ")
            .bind(who.clone())
            .push(" OR to_name = ")
            .bind(who.clone())
            .push(" OR escalate_to = ")
            .bind(who.clone())
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
                .push(" OR json_extract(data, '$.updated_at') >= ")
                .bind(since)
                .push(")");
        }
        (true, None) => {}
    }
    sql.push(" ORDER BY log_seq");
    let data: Vec<String> = column(conn, &sql.sql, sql.params())?;
    Ok(data
        .iter()
        .map(|d| decode::folded(d))
        .collect::<sqlx::Result<_>>()?)
}

pub(super) fn events_since(conn: &Connection, id: &str, after_seq: i64) -> Sql<Vec<Event>> {
    // `kind != 'message.sent'` repeats the subject index's condition (migration 14): the
    // planner uses a partial index only for a query that names its condition.
    let found = rows(
        conn,
        "SELECT seq, id, at, actor, kind, data FROM events \
         WHERE subject = ? AND kind = 'order.changed' AND kind != 'message.sent' \
         AND json_extract(data, '$.seq') > ? \
         ORDER BY seq",
        params![id, after_seq],
    )?;
    Ok(decode::events(&found)?)
}

/// This family's projection rows as text, in a stable order, for `projection_dump`.
pub(super) const DUMP: &[&str] = &[
    "SELECT 'o|' || id || '|' || log_seq || '|' || seq || '|' || status || '|' || from_name \
     || '|' || to_name || '|' || coalesce(escalate_to, '') || '|' || data \
     FROM orders ORDER BY id",
];
