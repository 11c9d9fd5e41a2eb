//! Pools in SQLite: the `pool_items` projection (a row per message sent to a pool, closed
//! when it is claimed or its sender closes it), the claimant's delivery a claim makes,
//! and the read of items in urgency order.

use baton_core::event::SentMessage;
use baton_core::order::{self, Order, OrderChange, OrderStatus};
use baton_core::pool::{self, Claimed};
use baton_core::{Change, Event, RequestStatus, delivery};
use rusqlite::{Connection, params};

use super::conn::{Builder, Sql, exec};
use super::rows::rows;
use crate::pools::{self as shared, POOL_COLUMNS, PoolQuery, URGENCY};

/// Applies the changes that are this family's: a send to a pool, an order offered to one,
/// a claim, and a sender closing its request; any other change is not its.
pub(super) fn project(conn: &Connection, event: &Event) -> Sql<()> {
    match &event.change {
        Change::MessageSent(m) => sent(conn, event, m),
        Change::Order(change @ OrderChange::Created(c)) if c.to.starts_with(pool::ROLE_PREFIX) => {
            match order::fold(None, change, event.seq, event.at) {
                Some(order) => offered(conn, &order),
                None => Ok(()),
            }
        }
        Change::Claimed(c) => claimed(conn, event, c),
        Change::RequestChanged { message, status } if *status != RequestStatus::Open => {
            closed(conn, message)
        }
        _ => Ok(()),
    }
}

/// The pool's rows, for the projection dump.
pub(super) const DUMP: &[&str] = &[
    "SELECT 'q|' || message_id || '|' || pool || '|' || from_name || '|' || topic || '|' \
     || coalesce(order_id, '') || '|' || coalesce(deadline_at, '') || '|' || seq || '|' \
     || created_at || '|' || coalesce(claimed_by, '') || '|' \
     || coalesce(claimed_at, '') || '|' || open FROM pool_items ORDER BY message_id",
];

/// Projects a send to a pool: its row, open.
fn sent(conn: &Connection, event: &Event, m: &SentMessage) -> Sql<()> {
    let Some(pool) = &m.pool else { return Ok(()) };
    exec(
        conn,
        "INSERT INTO pool_items (message_id, pool, from_name, topic, seq, created_at, open) \
         VALUES (?, ?, ?, ?, ?, ?, 1)",
        params![
            m.id,
            pool.to_string(),
            m.from.as_str(),
            m.topic.as_str(),
            event.seq,
            event.at
        ],
    )?;
    Ok(())
}

/// Projects an order offered to a pool: the item carrying it learns its order and
/// deadline.
fn offered(conn: &Connection, order: &Order) -> Sql<()> {
    exec(
        conn,
        "UPDATE pool_items SET order_id = ?, deadline_at = ? WHERE message_id = ?",
        params![order.id, order.deadline_at, order.message],
    )?;
    Ok(())
}

/// Projects a claim: the item is closed and its claimant's, who has a delivery of it as
/// any recipient does.
fn claimed(conn: &Connection, event: &Event, c: &Claimed) -> Sql<()> {
    exec(
        conn,
        "UPDATE pool_items SET claimed_by = ?, claimed_at = ?, open = 0 WHERE message_id = ?",
        params![c.by.as_str(), event.at, c.message],
    )?;
    exec(
        conn,
        "INSERT INTO deliveries (message_id, participant, ordinal, status, updated_at, seq, request) \
         VALUES (?, ?, 0, ?, ?, ?, ?)",
        params![
            c.message,
            c.by.as_str(),
            delivery::FIRST_DELIVERY.as_str(),
            event.at,
            event.seq,
            true
        ],
    )?;
    Ok(())
}

/// Projects the sender closing its request: an item still in its pool leaves it.
fn closed(conn: &Connection, message: &str) -> Sql<()> {
    exec(
        conn,
        "UPDATE pool_items SET open = 0 WHERE message_id = ? AND open = 1",
        [message],
    )?;
    Ok(())
}

pub(super) fn query(conn: &Connection, q: &PoolQuery) -> Sql<Vec<pool::Item>> {
    let mut sql = Builder::new(&format!(
        "SELECT {POOL_COLUMNS} FROM pool_items WHERE 1 = 1"
    ));
    if let Some(message) = &q.message {
        sql.push(" AND message_id = ").bind(message.clone());
    }
    if let Some(pool) = &q.pool {
        sql.push(" AND pool = ").bind(pool.to_string());
    }
    if q.open_at.is_some() {
        // An order still waiting on others (or held) is not offered yet: not to be taken.
        sql.push(
            " AND open = 1 AND (order_id IS NULL OR EXISTS (SELECT 1 FROM orders o \
             WHERE o.id = pool_items.order_id AND o.status = ",
        )
        .bind(OrderStatus::Offered.as_str().to_owned())
        .push("))");
    }
    if let Some(now) = q.open_at {
        sql.push(" AND (deadline_at IS NULL OR deadline_at >= ")
            .bind(now)
            .push(")");
    }
    if let Some(topic) = &q.topic {
        sql.push(" AND topic = ").bind(topic.as_str().to_owned());
    }
    sql.push(&format!(
        " ORDER BY {URGENCY} LIMIT {}",
        q.limit.unwrap_or(pool::NEXT_PAGE)
    ));
    let found = rows(conn, &sql.sql, sql.params())?;
    Ok(found
        .iter()
        .map(shared::item)
        .collect::<sqlx::Result<_>>()?)
}
