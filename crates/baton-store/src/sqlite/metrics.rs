//! The handoff metrics in SQLite: the `metrics` row, the tally of
//! [`baton_core::metrics`] advanced in the transaction of each event that moves it, and the
//! live work (pending deliveries, open requests, orders awaiting approval) counted from
//! indexes that hold only that work.

use baton_core::metrics::{Facts, Metrics, Replay, Tally};
use baton_core::order::{OrderChange, OrderStatus};
use baton_core::{Change, Event};
use rusqlite::{Connection, params};

use super::conn::{Sql, exec};
use super::rows::{Row, row, scalar};
use super::{events, orders};
use crate::decode::{self, MESSAGE_FACTS};

fn message(conn: &Connection, id: &str) -> Sql<Option<Row>> {
    row(
        conn,
        &format!("SELECT {MESSAGE_FACTS} FROM messages WHERE id = ?"),
        [id],
    )
}

fn parent(conn: &Connection, event: &Event) -> Sql<Option<(baton_core::MessageType, u32)>> {
    let Change::MessageSent(m) = &event.change else {
        return Ok(None);
    };
    match &m.reply_to {
        Some(id) => Ok(message(conn, id)?
            .map(|r| decode::parent_facts(&r))
            .transpose()?),
        None => Ok(None),
    }
}

fn message_facts(
    conn: &Connection,
    event: &Event,
) -> Sql<Option<baton_core::metrics::MessageFacts>> {
    let Change::DeliveryChanged { message: id, .. } = &event.change else {
        return Ok(None);
    };
    Ok(message(conn, id)?
        .map(|r| decode::message_facts(&r))
        .transpose()?)
}

/// What `event` needs to move the tally, read from the projections before `event` is
/// projected into them.
pub(super) fn facts(conn: &Connection, event: &Event) -> Sql<Facts> {
    let mut facts = Facts {
        parent: parent(conn, event)?,
        message: message_facts(conn, event)?,
        ..Facts::default()
    };
    match &event.change {
        Change::DeliveryChanged {
            message,
            participant,
            ..
        } => {
            facts.delivered_since = scalar(
                conn,
                "SELECT updated_at FROM deliveries \
                 WHERE message_id = ? AND participant = ? AND status = 'delivered'",
                params![message, participant.as_str()],
            )?;
        }
        Change::Order(OrderChange::Stepped(step)) => {
            facts.submitted_since = orders::load(conn, &step.order)?
                .filter(|o| o.status == OrderStatus::Submitted)
                .map(|o| o.updated_at);
        }
        _ => {}
    }
    Ok(facts)
}

fn load(conn: &Connection) -> Sql<Tally> {
    let data: Option<String> = scalar(conn, "SELECT data FROM metrics WHERE id = 1", [])?;
    Ok(match data {
        Some(data) => decode::folded(&data)?,
        None => Tally::default(),
    })
}

fn save(conn: &Connection, tally: &Tally) -> Sql<()> {
    let data = serde_json::to_string(tally).expect("a tally always serializes");
    exec(
        conn,
        "INSERT INTO metrics (id, data) VALUES (1, ?) \
         ON CONFLICT (id) DO UPDATE SET data = excluded.data",
        [data],
    )?;
    Ok(())
}

/// Moves the tally by `event`, with the facts read before it was projected.
pub(super) fn advance(conn: &Connection, event: &Event, facts: &Facts) -> Sql<()> {
    let mut tally = load(conn)?;
    tally.apply(event, facts);
    save(conn, &tally)
}

/// Fills the tally from the log of a store made before it existed (the messages' facts,
/// which never change, from their rows). As live writes do, it writes the row only when
/// some event moved it.
pub(super) fn fill(conn: &Connection) -> Sql<()> {
    let mut replay = Replay::default();
    let mut moved_any = false;
    let kinds = [
        "message.sent",
        "delivery.changed",
        "order.changed",
        "gate.changed",
        "security.refused",
    ];
    events::each_of(conn, &kinds, |event| {
        let moved = Tally::moved_by(&event.change);
        moved_any |= moved;
        let (parent, message) = if moved {
            (parent(conn, event)?, message_facts(conn, event)?)
        } else {
            (None, None)
        };
        replay.apply(event, parent, message);
        Ok(())
    })?;
    if moved_any {
        save(conn, &replay.tally)?;
    }
    Ok(())
}

/// The metrics now: the tally, and the live work counted.
pub(super) fn read(conn: &Connection) -> Sql<Metrics> {
    let count = |sql: &str| -> Sql<u64> { Ok(scalar::<i64>(conn, sql, [])?.unwrap_or(0) as u64) };
    let oldest = row(
        conn,
        "SELECT created_at, id FROM messages WHERE request_status = 'open' ORDER BY seq LIMIT 1",
        [],
    )?;
    use decode::Columns;
    Ok(Metrics {
        generation: scalar(conn, "SELECT coalesce(max(seq), 0) FROM events", [])?.unwrap_or(0),
        tally: load(conn)?,
        // By recipient, so that the list index answers (its first column is the recipient).
        pending: count(
            "SELECT count(*) FROM deliveries \
             WHERE participant IN (SELECT name FROM participants) AND status = 'pending'",
        )?,
        open_requests: count("SELECT count(*) FROM messages WHERE request_status = 'open'")?,
        oldest_open_request: oldest
            .map(|r| Ok::<_, sqlx::Error>((r.int("created_at")?, r.text("id")?)))
            .transpose()?,
        awaiting_approval: count(
            "SELECT count(*) FROM orders INDEXED BY orders_submitted WHERE status = 'submitted'",
        )?,
    })
}

/// This family's projection rows as text, in a stable order, for `projection_dump`.
pub(super) const DUMP: &[&str] = &["SELECT 'x|' || data FROM metrics"];
