//! The handoff metrics in PostgreSQL: each project's `metrics` row, the tally of
//! [`baton_core::metrics`] advanced in the transaction of each event that moves it, and the
//! live work (pending deliveries, open requests, orders awaiting approval) counted from
//! indexes that hold only that work.

use baton_core::metrics::{Facts, MessageFacts, Metrics, Replay, Tally};
use baton_core::order::{OrderChange, OrderStatus};
use baton_core::{Change, Event, MessageType};
use sqlx::Row;
use sqlx::postgres::{PgConnection, PgRow};

use super::{events, orders};
use crate::decode::{self, Columns, MESSAGE_FACTS};

async fn message(conn: &mut PgConnection, project: i64, id: &str) -> sqlx::Result<Option<PgRow>> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {MESSAGE_FACTS} FROM messages WHERE project = $1 AND id = $2"
    )))
    .bind(project)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await
}

async fn parent(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
) -> sqlx::Result<Option<(MessageType, u32)>> {
    let Change::MessageSent(m) = &event.change else {
        return Ok(None);
    };
    match &m.reply_to {
        Some(id) => message(conn, project, id)
            .await?
            .map(|r| decode::parent_facts(&r))
            .transpose(),
        None => Ok(None),
    }
}

async fn message_facts(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
) -> sqlx::Result<Option<MessageFacts>> {
    let Change::DeliveryChanged { message: id, .. } = &event.change else {
        return Ok(None);
    };
    message(conn, project, id)
        .await?
        .map(|r| decode::message_facts(&r))
        .transpose()
}

/// What `event` needs to move the tally, read from the projections before `event` is
/// projected into them.
pub(super) async fn facts(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
) -> sqlx::Result<Facts> {
    let mut facts = Facts {
        parent: parent(conn, project, event).await?,
        message: message_facts(conn, project, event).await?,
        ..Facts::default()
    };
    match &event.change {
        Change::DeliveryChanged {
            message,
            participant,
            ..
        } => {
            facts.delivered_since = sqlx::query_scalar(
                "SELECT updated_at FROM deliveries WHERE project = $1 AND message_id = $2 \
                 AND participant = $3 AND status = 'delivered'",
            )
            .bind(project)
            .bind(message)
            .bind(participant.as_str())
            .fetch_optional(&mut *conn)
            .await?;
        }
        Change::Order(OrderChange::Stepped(step)) => {
            facts.submitted_since = orders::load(conn, project, &step.order)
                .await?
                .filter(|o| o.status == OrderStatus::Submitted)
                .map(|o| o.updated_at);
        }
        _ => {}
    }
    Ok(facts)
}

async fn load(conn: &mut PgConnection, project: i64) -> sqlx::Result<Tally> {
    let data: Option<String> = sqlx::query_scalar("SELECT data FROM metrics WHERE project = $1")
        .bind(project)
        .fetch_optional(&mut *conn)
        .await?;
    data.as_deref()
        .map_or_else(|| Ok(Tally::default()), decode::folded)
}

async fn save(conn: &mut PgConnection, project: i64, tally: &Tally) -> sqlx::Result<()> {
    let data = serde_json::to_string(tally).expect("a tally always serializes");
    sqlx::query(
        "INSERT INTO metrics (project, data) VALUES ($1, $2) \
         ON CONFLICT (project) DO UPDATE SET data = excluded.data",
    )
    .bind(project)
    .bind(data)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Moves the tally by `event`, with the facts read before it was projected.
pub(super) async fn advance(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
    facts: &Facts,
) -> sqlx::Result<()> {
    let mut tally = load(conn, project).await?;
    tally.apply(event, facts);
    save(conn, project, &tally).await
}

/// Fills every project's tally from its log, in a database made before the tally existed
/// (the messages' facts, which never change, from their rows). As live writes do, it
/// writes a project's row only when some event moved it.
pub(super) async fn fill(conn: &mut PgConnection) -> sqlx::Result<()> {
    const KINDS: [&str; 5] = [
        "message.sent",
        "delivery.changed",
        "order.changed",
        "gate.changed",
        "security.refused",
    ];
    let projects: Vec<i64> = sqlx::query_scalar("SELECT id FROM projects ORDER BY id")
        .fetch_all(&mut *conn)
        .await?;
    for project in projects {
        let mut replay = Replay::default();
        let mut moved_any = false;
        let mut after = 0_i64;
        loop {
            let batch = events::of_kinds(conn, project, &KINDS, after).await?;
            let Some(last) = batch.last() else { break };
            after = last.seq;
            for event in &batch {
                let moved = Tally::moved_by(&event.change);
                moved_any |= moved;
                let (parent, message) = if moved {
                    (
                        parent(conn, project, event).await?,
                        message_facts(conn, project, event).await?,
                    )
                } else {
                    (None, None)
                };
                replay.apply(event, parent, message);
            }
        }
        if moved_any {
            save(conn, project, &replay.tally).await?;
        }
    }
    Ok(())
}

/// The metrics now: the tally, and the live work counted.
pub(super) async fn read(conn: &mut PgConnection, project: i64) -> sqlx::Result<Metrics> {
    let counts = sqlx::query(
        "SELECT (SELECT last_seq FROM projects WHERE id = $1) AS generation, \
         (SELECT count(*) FROM deliveries WHERE project = $1 AND participant IN \
             (SELECT name FROM participants WHERE project = $1) AND status = 'pending') \
             AS pending, \
         (SELECT count(*) FROM messages WHERE project = $1 AND request_status = 'open') \
             AS open_requests, \
         (SELECT count(*) FROM orders WHERE project = $1 AND status = 'submitted') \
             AS awaiting_approval",
    )
    .bind(project)
    .fetch_one(&mut *conn)
    .await?;
    let oldest = sqlx::query(
        "SELECT created_at, id FROM messages WHERE project = $1 AND request_status = 'open' \
         ORDER BY seq LIMIT 1",
    )
    .bind(project)
    .fetch_optional(&mut *conn)
    .await?;
    let count = |name: &str| -> sqlx::Result<u64> { Ok(counts.try_get::<i64, _>(name)? as u64) };
    Ok(Metrics {
        generation: counts.try_get("generation")?,
        tally: load(conn, project).await?,
        pending: count("pending")?,
        open_requests: count("open_requests")?,
        oldest_open_request: oldest
            .map(|r| Ok::<_, sqlx::Error>((r.int("created_at")?, r.text("id")?)))
            .transpose()?,
        awaiting_approval: count("awaiting_approval")?,
    })
}

/// This family's projection rows as text, in a stable order, for `projection_dump`
/// (`$1`: the project).
pub(super) const DUMP: &[&str] = &["SELECT 'x|' || data FROM metrics WHERE project = $1"];
