//! The order lifecycle in SQLite: the `orders` projection (each row the fold of its
//! order's `order.changed` events, kept whole as JSON) and the writes that go with it.
//! Events are appended only through the parent module's `append`; the rules are
//! `baton_core::order`'s.

use baton_core::delivery::{request_transition, transition};
use baton_core::order::{
    self, Created, Order, OrderChange, OrderRefused, OrderRequest, OrderStatus,
};
use baton_core::{
    Change, DeliveryAction, DeliveryStatus, Draft, Event, MessageType, Millis, Passname, Payload,
    RequestAction, RequestStatus, Topic,
};
use sqlx::sqlite::SqliteConnection;
use sqlx::{QueryBuilder, Sqlite};

use super::{SqliteStore, append, decode_events, envelope, load_folded, now, send_in};
use crate::{OrderQuery, OrderWritten, Result, StoreError};

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

async fn load(conn: &mut SqliteConnection, id: &str) -> sqlx::Result<Option<Order>> {
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

fn refused(e: OrderRefused) -> StoreError {
    match e {
        OrderRefused::NoSuchOrder(_) => StoreError::NotFound(e.to_string()),
        OrderRefused::Exists(_) | OrderRefused::Moved { .. } => StoreError::Conflict(e.to_string()),
        OrderRefused::Forbidden(_) => StoreError::Forbidden(e.to_string()),
        OrderRefused::Transition(t) => StoreError::Transition(t),
        OrderRefused::Invalid(_) => StoreError::Invalid(e.to_string()),
    }
}

impl SqliteStore {
    pub(super) async fn offer_order(
        &self,
        actor: &Passname,
        topic: Topic,
        document: Payload,
    ) -> Result<OrderWritten> {
        let doc = serde_json::Value::Object(document.object().clone());
        // The message id is not known yet; the lifecycle's fields are checked first.
        let mut created = Created::from_document(&doc, String::new()).map_err(refused)?;
        if created.from != actor.as_str() {
            return Err(StoreError::Forbidden(format!(
                "{actor} may not offer an order from {:?}: the order's \"from\" must be the \
                 acting identity ({actor})",
                created.from
            )));
        }
        let to = Passname::new(&created.to).map_err(|e| {
            StoreError::Invalid(format!(
                "the order's \"to\" must be a participant of this project: {e}"
            ))
        })?;
        let mut tx = self.write().await?;
        if load(&mut tx, &created.order)
            .await
            .map_err(|e| self.err(e))?
            .is_some()
        {
            return Err(refused(OrderRefused::Exists(created.order)));
        }
        let at = now();
        let draft = Draft {
            to: vec![to],
            kind: MessageType::Request,
            topic,
            reply_to: None,
            payload: document,
            idempotency_key: None,
        };
        // No duplicate window: the order id already makes a second offer a conflict.
        let sent = send_in(&mut tx, actor, draft, 0, at, self.busy_timeout).await?;
        created.message = sent.id;
        let id = created.order.clone();
        let message = self.event_of(&mut tx, &created.message).await?;
        let event = append(
            &mut tx,
            actor.as_str(),
            Change::Order(OrderChange::Created(Box::new(created))),
            at,
        )
        .await
        .map_err(|e| self.err(e))?;
        let order = load(&mut tx, &id)
            .await
            .map_err(|e| self.err(e))?
            .ok_or_else(|| StoreError::Engine(format!("order {id} was not projected")))?;
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(OrderWritten {
            order,
            events: message.into_iter().chain([event]).collect(),
        })
    }

    /// The `message.sent` event of a message just written in this transaction.
    async fn event_of(&self, conn: &mut SqliteConnection, message: &str) -> Result<Option<Event>> {
        let rows = sqlx::query(
            "SELECT e.seq, e.id, e.at, e.actor, e.kind, e.data FROM events e \
             JOIN messages m ON m.seq = e.seq WHERE m.id = ?",
        )
        .bind(message)
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| self.err(e))?;
        Ok(decode_events(&rows).map_err(|e| self.err(e))?.pop())
    }

    pub(super) async fn step_order(
        &self,
        actor: &Passname,
        id: &str,
        expected_seq: i64,
        request: OrderRequest,
    ) -> Result<OrderWritten> {
        let mut tx = self.write().await?;
        let current = load(&mut tx, id)
            .await
            .map_err(|e| self.err(e))?
            .ok_or_else(|| refused(OrderRefused::NoSuchOrder(id.to_owned())))?;
        let at = now();
        let steps =
            order::plan(&current, actor.as_str(), request, expected_seq, at).map_err(refused)?;
        let mut events = Vec::new();
        for step in steps {
            let change = Change::Order(OrderChange::Stepped(Box::new(step)));
            events.push(
                append(&mut tx, actor.as_str(), change, at)
                    .await
                    .map_err(|e| self.err(e))?,
            );
        }
        let order = load(&mut tx, id)
            .await
            .map_err(|e| self.err(e))?
            .ok_or_else(|| StoreError::Engine(format!("order {id} vanished")))?;
        // `events` stays the order's own; the request's steps are in the log beside them.
        self.follow_request(&mut tx, actor, &order, at).await?;
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(OrderWritten { order, events })
    }

    /// Keeps the order's `request` message in step with the order, in the same transaction:
    /// once the worker acts on the order it has read the request (`delivered`); when the
    /// order ends, the worker's end closes (`completed` when approved, `refused` otherwise)
    /// and so does the sender's. Without this an approved order would stay in the worker's
    /// inbox and resume packet as work still owed.
    async fn follow_request(
        &self,
        conn: &mut SqliteConnection,
        actor: &Passname,
        order: &Order,
        at: Millis,
    ) -> Result<()> {
        let Ok(worker) = Passname::new(&order.to) else {
            return Ok(());
        };
        let env = envelope(conn, &order.message, self.busy_timeout).await?;
        let mut steps: Vec<(DeliveryAction, Option<String>)> = Vec::new();
        let mut status = env.status_for(&worker).unwrap_or(DeliveryStatus::Pending);
        if status == DeliveryStatus::Pending && order.status != OrderStatus::Offered {
            steps.push((DeliveryAction::Fetch, None));
            status = DeliveryStatus::Delivered;
        }
        if order.status.is_terminal() && status == DeliveryStatus::Delivered {
            let closing = if order.status == OrderStatus::Approved {
                DeliveryAction::Complete
            } else {
                DeliveryAction::Refuse
            };
            steps.push((
                closing,
                Some(format!("order {} {}", order.id, order.status.as_str())),
            ));
        }
        let mut current = env.status_for(&worker).unwrap_or(DeliveryStatus::Pending);
        for (action, note) in steps {
            let next = transition(current, action, env.kind)?;
            let change = Change::DeliveryChanged {
                message: order.message.clone(),
                participant: worker.clone(),
                status: next,
                note,
            };
            append(conn, actor.as_str(), change, at)
                .await
                .map_err(|e| self.err(e))?;
            current = next;
        }
        if order.status.is_terminal() && env.request_status == Some(RequestStatus::Open) {
            let change = Change::RequestChanged {
                message: order.message.clone(),
                status: request_transition(RequestStatus::Open, RequestAction::Complete)?,
            };
            append(conn, actor.as_str(), change, at)
                .await
                .map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    pub(super) async fn load_order(&self, id: &str) -> Result<Option<Order>> {
        let mut conn = self.pool.acquire().await.map_err(|e| self.err(e))?;
        load(&mut conn, id).await.map_err(|e| self.err(e))
    }

    pub(super) async fn query_orders(&self, query: &OrderQuery) -> Result<Vec<Order>> {
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
        let rows: Vec<String> = sql
            .build_query_scalar()
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.err(e))?;
        rows.iter()
            .map(|d| {
                serde_json::from_str(d)
                    .map_err(|e| StoreError::Engine(format!("an order row is unreadable: {e}")))
            })
            .collect()
    }

    pub(super) async fn order_events(&self, id: &str, after_seq: i64) -> Result<Vec<Event>> {
        let rows = sqlx::query(
            "SELECT seq, id, at, actor, kind, data FROM events \
             WHERE subject = ? AND kind = 'order.changed' AND json_extract(data, '$.seq') > ? \
             ORDER BY seq",
        )
        .bind(id)
        .bind(after_seq)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.err(e))?;
        decode_events(&rows).map_err(|e| self.err(e))
    }
}
