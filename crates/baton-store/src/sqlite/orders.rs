//! The order lifecycle in SQLite: the `orders` projection, each row the fold of its
//! order's `order.changed` events (`baton_core::order::fold`), kept whole as JSON, and
//! `order_waits`, the orders each still waits on (`baton_core::after::edits`).

use baton_core::after::{self, WaitEdit};
use baton_core::order::{self, Order, OrderChange};
use baton_core::{Change, Event};
use rusqlite::{Connection, params};

use super::conn::{Builder, Sql, exec};
use super::rows::{Row, column, load_folded, rows};
use crate::OrderQuery;
use crate::decode::{self, Columns};

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
    for edit in after::edits(change) {
        edit_waits(conn, &edit)?;
    }
    Ok(())
}

fn edit_waits(conn: &Connection, edit: &WaitEdit) -> Sql<()> {
    match edit {
        WaitEdit::Add {
            order,
            message,
            after,
        } => {
            for a in after {
                exec(
                    conn,
                    "INSERT OR IGNORE INTO order_waits (order_id, after_id, message_id) \
                     VALUES (?, ?, ?)",
                    params![order, a, message],
                )?;
            }
        }
        WaitEdit::Satisfied { after } => {
            exec(conn, "DELETE FROM order_waits WHERE after_id = ?", [after])?;
        }
        WaitEdit::Drop { order, after } => {
            for a in after {
                exec(
                    conn,
                    "DELETE FROM order_waits WHERE order_id = ? AND after_id = ?",
                    [order, a],
                )?;
            }
        }
        WaitEdit::Clear { order } => {
            exec(conn, "DELETE FROM order_waits WHERE order_id = ?", [order])?;
        }
    }
    Ok(())
}

/// What each of `orders` still waits on: `(order, the order it waits on)`, by order and
/// then in the order they were offered.
pub(super) fn waits(conn: &Connection, orders: &[String]) -> Sql<Vec<(String, Order)>> {
    let found: Vec<Row> = match orders {
        [] => return Ok(Vec::new()),
        // One order (a step's own check) is read without `json_each`, whose statement
        // costs more to compile than to run.
        [id] => rows(
            conn,
            "SELECT w.order_id, o.data FROM order_waits w JOIN orders o ON o.id = w.after_id \
             WHERE w.order_id = ? ORDER BY o.log_seq",
            [id],
        )?,
        _ => rows(
            conn,
            "SELECT w.order_id, o.data FROM json_each(?) j \
             JOIN order_waits w ON w.order_id = j.value \
             JOIN orders o ON o.id = w.after_id ORDER BY j.key, o.log_seq",
            [serde_json::to_string(orders).expect("strings serialize")],
        )?,
    };
    Ok(found
        .iter()
        .map(|row| Ok((row.text("order_id")?, decode::folded(&row.text("data")?)?)))
        .collect::<sqlx::Result<_>>()?)
}

/// The orders that wait on `id`, oldest first.
pub(super) fn waiting_on(conn: &Connection, id: &str) -> Sql<Vec<Order>> {
    let data: Vec<String> = column(
        conn,
        "SELECT o.data FROM order_waits w JOIN orders o ON o.id = w.order_id \
         WHERE w.after_id = ? ORDER BY o.log_seq",
        [id],
    )?;
    Ok(data
        .iter()
        .map(|d| decode::folded(d))
        .collect::<sqlx::Result<_>>()?)
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
         to_name = excluded.to_name, data = excluded.data",
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
    if !query.only.is_empty() {
        sql.push(" AND status IN ")
            .push(&decode::statuses(query.only.iter().map(|s| s.as_str())));
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
    "SELECT 'a|' || order_id || '|' || after_id || '|' || message_id FROM order_waits \
     ORDER BY order_id, after_id",
];
