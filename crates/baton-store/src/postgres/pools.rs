//! Pools in PostgreSQL: the `pool_items` projection (a row per message sent to a pool,
//! closed when it is claimed or its sender closes it), keyed by project, the claimant's
//! delivery a claim makes, and the read of items in urgency order.

use baton_core::event::SentMessage;
use baton_core::order::{self, Order, OrderChange, OrderStatus};
use baton_core::pool::{self, Claimed};
use baton_core::{Change, Event, Participant, RequestStatus, delivery};
use sqlx::postgres::PgConnection;
use sqlx::{Postgres, QueryBuilder};

use crate::decode;
use crate::pools::{self as shared, POOL_COLUMNS, PoolQuery, URGENCY};

/// Applies the changes that are this family's: a send to a pool, an order offered to one,
/// a claim, and a sender closing its request; any other change is not its.
pub(super) async fn project(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
) -> sqlx::Result<()> {
    match &event.change {
        Change::MessageSent(m) => sent(conn, project, event, m).await,
        Change::Order(change @ OrderChange::Created(c)) if c.to.starts_with(pool::ROLE_PREFIX) => {
            match order::fold(None, change, event.seq, event.at) {
                Some(order) => offered(conn, project, &order).await,
                None => Ok(()),
            }
        }
        Change::Claimed(c) => claimed(conn, project, event, c).await,
        Change::RequestChanged { message, status } if *status != RequestStatus::Open => {
            closed(conn, project, message).await
        }
        _ => Ok(()),
    }
}

/// The pool's rows, for the projection dump.
pub(super) const DUMP: &[&str] = &[
    "SELECT 'q|' || message_id || '|' || pool || '|' || from_name || '|' || topic || '|' \
     || coalesce(order_id, '') || '|' || coalesce(deadline_at::text, '') || '|' || seq \
     || '|' || created_at || '|' || coalesce(claimed_by, '') || '|' \
     || coalesce(claimed_at::text, '') || '|' || open FROM pool_items \
     WHERE project = $1 ORDER BY message_id COLLATE \"C\"",
];

/// Projects a send to a pool: its row, open.
async fn sent(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
    m: &SentMessage,
) -> sqlx::Result<()> {
    let Some(pool) = &m.pool else { return Ok(()) };
    sqlx::query(
        "INSERT INTO pool_items \
         (project, message_id, pool, from_name, topic, seq, created_at, open) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, 1)",
    )
    .bind(project)
    .bind(&m.id)
    .bind(pool.to_string())
    .bind(m.from.as_str())
    .bind(m.topic.as_str())
    .bind(event.seq)
    .bind(event.at)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Projects an order offered to a pool: the item carrying it learns its order and
/// deadline.
async fn offered(conn: &mut PgConnection, project: i64, order: &Order) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE pool_items SET order_id = $1, deadline_at = $2 \
         WHERE project = $3 AND message_id = $4",
    )
    .bind(&order.id)
    .bind(order.deadline_at)
    .bind(project)
    .bind(&order.message)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Projects a claim: the item is closed and its claimant's, who has a delivery of it as
/// any recipient does.
async fn claimed(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
    c: &Claimed,
) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE pool_items SET claimed_by = $1, claimed_at = $2, open = 0 \
         WHERE project = $3 AND message_id = $4",
    )
    .bind(c.by.as_str())
    .bind(event.at)
    .bind(project)
    .bind(&c.message)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO deliveries (project, message_id, participant, ordinal, status, updated_at) \
         VALUES ($1, $2, $3, 0, $4, $5)",
    )
    .bind(project)
    .bind(&c.message)
    .bind(c.by.as_str())
    .bind(delivery::FIRST_DELIVERY.as_str())
    .bind(event.at)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Projects the sender closing its request: an item still in its pool leaves it.
async fn closed(conn: &mut PgConnection, project: i64, message: &str) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE pool_items SET open = 0 WHERE project = $1 AND message_id = $2 AND open = 1",
    )
    .bind(project)
    .bind(message)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub(super) async fn query(
    conn: &mut PgConnection,
    project: i64,
    q: &PoolQuery,
) -> sqlx::Result<Vec<pool::Item>> {
    let mut sql = QueryBuilder::<Postgres>::new(format!(
        "SELECT {POOL_COLUMNS} FROM pool_items WHERE project = "
    ));
    sql.push_bind(project);
    if let Some(message) = &q.message {
        sql.push(" AND message_id = ").push_bind(message.clone());
    }
    if let Some(pool) = &q.pool {
        sql.push(" AND pool = ").push_bind(pool.to_string());
    }
    if q.open_at.is_some() {
        // An order still waiting on others (or held) is not offered yet: not to be taken.
        sql.push(
            " AND open = 1 AND (order_id IS NULL OR EXISTS (SELECT 1 FROM orders o \
             WHERE o.project = pool_items.project AND o.id = pool_items.order_id \
             AND o.status = ",
        )
        .push_bind(OrderStatus::Offered.as_str().to_owned())
        .push("))");
    }
    if let Some(now) = q.open_at {
        sql.push(" AND (deadline_at IS NULL OR deadline_at >= ")
            .push_bind(now)
            .push(")");
    }
    if let Some(topic) = &q.topic {
        sql.push(" AND topic = ")
            .push_bind(topic.as_str().to_owned());
    }
    sql.push(format!(" ORDER BY {URGENCY} LIMIT "))
        .push_bind(i64::from(q.limit.unwrap_or(pool::NEXT_PAGE)));
    let found = sql.build().fetch_all(&mut *conn).await?;
    found.iter().map(shared::item).collect()
}

/// Every participant, by name, inside a transaction.
pub(super) async fn participants(
    conn: &mut PgConnection,
    project: i64,
) -> sqlx::Result<Vec<Participant>> {
    let found = sqlx::query(
        "SELECT name, role, added_at, policy FROM participants WHERE project = $1 \
         ORDER BY name COLLATE \"C\"",
    )
    .bind(project)
    .fetch_all(&mut *conn)
    .await?;
    found.iter().map(decode::participant).collect()
}
