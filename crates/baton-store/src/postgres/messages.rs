//! Messages in PostgreSQL: the `messages` and `deliveries` projections (each message's
//! row, its place in its thread and its words for search; each recipient's delivery),
//! keyed by project, and the reads over them: envelopes, the inbox and the outbox and their
//! bounded forms, a thread, search, a message's payload, and the duplicate check's
//! candidates.

use baton_core::event::SentMessage;
use baton_core::message::Prior;
use baton_core::{
    Change, DeliveryStatus, Draft, Envelope, Event, Millis, Passname, Refusal, RequestStatus,
    delivery,
};
use sqlx::postgres::{PgConnection, PgRow};
use sqlx::{Postgres, QueryBuilder, Row};

use crate::decode::{self, decode_cursor, depth_first};
use crate::{MessageHead, Page, Result, SearchQuery, Window};

/// A sender's sends like a draft within the duplicate window, newest first. Ordered by
/// `created_at`, which `messages_duplicate` holds in order after the sender and the hash:
/// ordered by `seq`, the plan a prepared statement kept from when the table was empty
/// walked the sender's whole outbox index (`messages_outbox`) backwards, so a send's cost
/// grew with everything its sender had sent. (Between those two states, on a table grown
/// but not yet analyzed, every index scan is estimated at one row and the planner may
/// take any of them until autovacuum's next analysis re-plans it: docs/DECISIONS.md.)
pub(super) const RECENT: &str = "SELECT id, hash, type, topic, reply_to, idempotency_key FROM messages \
     WHERE project = $1 AND from_name = $2 AND hash = $3 AND type = $4 AND topic = $5 \
     AND reply_to IS NOT DISTINCT FROM $6 AND created_at >= $7 \
     ORDER BY created_at DESC, seq DESC LIMIT 20";

/// Applies a message sent, or a step of a delivery or of a request to their rows; any other change is not this family's.
pub(super) async fn project(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
) -> sqlx::Result<()> {
    match &event.change {
        Change::MessageSent(m) => sent(conn, project, event, m).await,
        Change::DeliveryChanged {
            message,
            participant,
            status,
            ..
        } => delivery_changed(conn, project, event, message, participant, *status).await,
        Change::RequestChanged { message, status } => {
            request_changed(conn, project, message, *status).await
        }
        _ => Ok(()),
    }
}

/// Projects a message's send: its row (its place in its thread, its words) and a delivery
/// to each recipient.
pub(super) async fn sent(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
    m: &SentMessage,
) -> sqlx::Result<()> {
    let parent: Option<(String, i64)> = match &m.reply_to {
        Some(parent) => {
            sqlx::query_as("SELECT root_id, depth FROM messages WHERE project = $1 AND id = $2")
                .bind(project)
                .bind(parent)
                .fetch_optional(&mut *conn)
                .await?
        }
        None => None,
    };
    let (root, depth) = delivery::thread_place(&m.id, parent);
    let request_status = RequestStatus::on_send(m.kind).map(RequestStatus::as_str);
    sqlx::query(
        "INSERT INTO messages (project, id, seq, from_name, type, topic, reply_to, \
         root_id, depth, excerpt, size, hash, idempotency_key, created_at, request_status, \
         words) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, \
         to_tsvector('simple', $16))",
    )
    .bind(project)
    .bind(&m.id)
    .bind(event.seq)
    .bind(m.from.as_str())
    .bind(m.kind.as_str())
    .bind(m.topic.as_str())
    .bind(&m.reply_to)
    .bind(root)
    .bind(depth)
    .bind(&m.excerpt)
    .bind(m.size as i64)
    .bind(&m.hash)
    .bind(&m.idempotency_key)
    .bind(event.at)
    .bind(request_status)
    .bind(baton_core::search::words(&m.payload))
    .execute(&mut *conn)
    .await?;
    for (ordinal, to) in (0_i64..).zip(&m.to) {
        sqlx::query(
            "INSERT INTO deliveries \
             (project, message_id, participant, ordinal, status, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(project)
        .bind(&m.id)
        .bind(to.as_str())
        .bind(ordinal)
        .bind(delivery::FIRST_DELIVERY.as_str())
        .bind(event.at)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// Projects a recipient's step on its delivery of `message`.
pub(super) async fn delivery_changed(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
    message: &str,
    participant: &Passname,
    status: DeliveryStatus,
) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE deliveries SET status = $1, updated_at = $2 \
         WHERE project = $3 AND message_id = $4 AND participant = $5",
    )
    .bind(status.as_str())
    .bind(event.at)
    .bind(project)
    .bind(message)
    .bind(participant.as_str())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Projects the sender's step on its own end of request `message`.
pub(super) async fn request_changed(
    conn: &mut PgConnection,
    project: i64,
    message: &str,
    status: RequestStatus,
) -> sqlx::Result<()> {
    sqlx::query("UPDATE messages SET request_status = $1 WHERE project = $2 AND id = $3")
        .bind(status.as_str())
        .bind(project)
        .bind(message)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// What `who` owes, the page `window` names (with `all`, every inbound message not
/// archived).
pub(super) async fn inbox(
    conn: &mut PgConnection,
    project: i64,
    who: &Passname,
    all: bool,
    window: &Window,
) -> sqlx::Result<Vec<Envelope>> {
    let sql = if all {
        "SELECT m.id FROM deliveries d \
         JOIN messages m ON m.project = d.project AND m.id = d.message_id \
         WHERE d.project = $1 AND d.participant = $2 AND d.status != 'archived' \
         AND m.seq > $3 ORDER BY m.seq LIMIT $4"
    } else {
        "SELECT m.id FROM deliveries d \
         JOIN messages m ON m.project = d.project AND m.id = d.message_id \
         WHERE d.project = $1 AND d.participant = $2 \
         AND d.status IN ('pending', 'delivered') AND m.seq > $3 \
         AND NOT EXISTS (SELECT 1 FROM order_waits w \
             WHERE w.project = d.project AND w.message_id = d.message_id) \
         ORDER BY m.seq LIMIT $4"
    };
    list(conn, project, sql, who, window).await
}

/// The first `limit` messages `who` owes, requests first, and how many it owes in all.
pub(super) async fn owed(
    conn: &mut PgConnection,
    project: i64,
    who: &Passname,
    limit: u32,
) -> sqlx::Result<(Vec<Envelope>, u64)> {
    counted(
        conn,
        project,
        "SELECT count(*) FROM deliveries d \
         WHERE project = $1 AND participant = $2 AND status IN ('pending', 'delivered') \
         AND NOT EXISTS (SELECT 1 FROM order_waits w \
             WHERE w.project = d.project AND w.message_id = d.message_id)",
        "SELECT m.id FROM deliveries d \
         JOIN messages m ON m.project = d.project AND m.id = d.message_id \
         WHERE d.project = $1 AND d.participant = $2 \
         AND d.status IN ('pending', 'delivered') \
         AND NOT EXISTS (SELECT 1 FROM order_waits w \
             WHERE w.project = d.project AND w.message_id = d.message_id) \
         ORDER BY m.type != 'request', m.seq LIMIT $3",
        who,
        limit,
    )
    .await
}

/// The requests `who` sent whose own end is not archived (with `all`, every one), the page
/// `window` names.
pub(super) async fn outbox(
    conn: &mut PgConnection,
    project: i64,
    who: &Passname,
    all: bool,
    window: &Window,
) -> sqlx::Result<Vec<Envelope>> {
    let sql = if all {
        "SELECT id FROM messages WHERE project = $1 AND from_name = $2 \
         AND type = 'request' AND seq > $3 ORDER BY seq LIMIT $4"
    } else {
        "SELECT id FROM messages \
         WHERE project = $1 AND from_name = $2 AND type = 'request' \
         AND request_status != 'archived' AND seq > $3 ORDER BY seq LIMIT $4"
    };
    list(conn, project, sql, who, window).await
}

/// The first `limit` requests `who` sent whose own end is not archived, and how many there
/// are in all.
pub(super) async fn waiting(
    conn: &mut PgConnection,
    project: i64,
    who: &Passname,
    limit: u32,
) -> sqlx::Result<(Vec<Envelope>, u64)> {
    counted(
        conn,
        project,
        "SELECT count(*) FROM messages WHERE project = $1 AND from_name = $2 \
         AND type = 'request' AND request_status != 'archived'",
        "SELECT id FROM messages WHERE project = $1 AND from_name = $2 \
         AND type = 'request' AND request_status != 'archived' ORDER BY seq LIMIT $3",
        who,
        limit,
    )
    .await
}

/// Every request `who` owes, oldest first, then the first `others` other messages it owes,
/// as heads; and how many it owes in all.
pub(super) async fn owed_heads(
    conn: &mut PgConnection,
    project: i64,
    who: &Passname,
    others: u32,
) -> sqlx::Result<(Vec<MessageHead>, u64)> {
    let total: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM deliveries \
         WHERE project = $1 AND participant = $2 AND status IN ('pending', 'delivered')",
    )
    .bind(project)
    .bind(who.as_str())
    .fetch_one(&mut *conn)
    .await?;
    let mut heads = Vec::new();
    for (sql, limit) in [(OWED_REQUESTS, i64::MAX), (OWED_OTHERS, i64::from(others))] {
        let found = sqlx::query(sql)
            .bind(project)
            .bind(who.as_str())
            .bind(limit)
            .fetch_all(&mut *conn)
            .await?;
        for row in &found {
            heads.push(decode::message_head(row)?);
        }
    }
    Ok((heads, total as u64))
}

/// The heads of the requests `$2` owes in project `$1`, oldest first, at most `$3`.
const OWED_REQUESTS: &str = "SELECT m.id, m.type, m.topic, m.created_at, m.request_status \
     FROM deliveries d JOIN messages m ON m.project = d.project AND m.id = d.message_id \
     WHERE d.project = $1 AND d.participant = $2 AND d.status IN ('pending', 'delivered') \
     AND m.type = 'request' ORDER BY m.seq LIMIT $3";

/// The heads of the other messages `$2` owes in project `$1`, oldest first, at most `$3`.
const OWED_OTHERS: &str = "SELECT m.id, m.type, m.topic, m.created_at, m.request_status \
     FROM deliveries d JOIN messages m ON m.project = d.project AND m.id = d.message_id \
     WHERE d.project = $1 AND d.participant = $2 AND d.status IN ('pending', 'delivered') \
     AND m.type != 'request' ORDER BY m.seq LIMIT $3";

/// Every request `who` sent whose own end is not archived, oldest first, as heads.
pub(super) async fn waiting_heads(
    conn: &mut PgConnection,
    project: i64,
    who: &Passname,
) -> sqlx::Result<Vec<MessageHead>> {
    let found = sqlx::query(
        "SELECT id, type, topic, created_at, request_status FROM messages \
         WHERE project = $1 AND from_name = $2 AND type = 'request' \
         AND request_status != 'archived' ORDER BY seq",
    )
    .bind(project)
    .bind(who.as_str())
    .fetch_all(&mut *conn)
    .await?;
    found.iter().map(decode::message_head).collect()
}

/// The envelopes of `ids`, in the order given; unknown ids are skipped.
pub(super) async fn envelopes(
    conn: &mut PgConnection,
    project: i64,
    ids: &[String],
) -> sqlx::Result<Vec<Envelope>> {
    load_envelopes(conn, project, ids).await
}

/// A bounded list for `who`: the envelopes of the first `limit` ids `ids` selects (`$1` the
/// project, `$2` who, `$3` the limit) and the count `count` gives.
async fn counted(
    conn: &mut PgConnection,
    project: i64,
    count: &'static str,
    ids: &'static str,
    who: &Passname,
    limit: u32,
) -> sqlx::Result<(Vec<Envelope>, u64)> {
    let total: i64 = sqlx::query_scalar(count)
        .bind(project)
        .bind(who.as_str())
        .fetch_one(&mut *conn)
        .await?;
    let ids: Vec<String> = sqlx::query_scalar(ids)
        .bind(project)
        .bind(who.as_str())
        .bind(i64::from(limit))
        .fetch_all(&mut *conn)
        .await?;
    let first = load_envelopes(conn, project, &ids).await?;
    Ok((first, total as u64))
}

/// A page of a list for `who`: the envelopes of the ids `sql` selects (bound: project,
/// who, the seq the page starts after, the limit), `window`'s message id turned into
/// its seq first.
async fn list(
    conn: &mut PgConnection,
    project: i64,
    sql: &'static str,
    who: &Passname,
    window: &Window,
) -> sqlx::Result<Vec<Envelope>> {
    let after = match &window.after {
        None => 0,
        // An id that is no message names no place in any list: the page is empty.
        Some(id) => sqlx::query_scalar("SELECT seq FROM messages WHERE project = $1 AND id = $2")
            .bind(project)
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?
            .unwrap_or(i64::MAX),
    };
    let ids: Vec<String> = sqlx::query_scalar(sql)
        .bind(project)
        .bind(who.as_str())
        .bind(after)
        .bind(i64::from(window.limit))
        .fetch_all(&mut *conn)
        .await?;
    load_envelopes(conn, project, &ids).await
}

/// The whole thread `id` belongs to, depth-first from the root; `None` when `id` is no
/// message.
pub(super) async fn thread(
    conn: &mut PgConnection,
    project: i64,
    id: &str,
) -> sqlx::Result<Option<Vec<Envelope>>> {
    let root: Option<String> =
        sqlx::query_scalar("SELECT root_id FROM messages WHERE project = $1 AND id = $2")
            .bind(project)
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
    let Some(root) = root else {
        return Ok(None);
    };
    let ids: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM messages WHERE project = $1 AND root_id = $2 ORDER BY seq",
    )
    .bind(project)
    .bind(&root)
    .fetch_all(&mut *conn)
    .await?;
    let flat = load_envelopes(conn, project, &ids).await?;
    Ok(Some(depth_first(flat, &root)))
}

/// A search's statement, newest first, asking for one more than its page size, and the
/// page size.
pub(super) fn search_query(
    project: i64,
    caller: Option<&Passname>,
    q: &SearchQuery,
) -> Result<(u32, QueryBuilder<Postgres>)> {
    let limit = q.limit.clamp(1, 100);
    let mut sql = QueryBuilder::<Postgres>::new("SELECT m.seq, m.id FROM messages m");
    if let Some(status) = q.status {
        let caller = caller.ok_or(Refusal::StatusNeedsIdentity)?;
        sql.push(
            " JOIN deliveries mine ON mine.project = m.project \
             AND mine.message_id = m.id AND mine.participant = ",
        )
        .push_bind(caller.as_str().to_owned())
        .push(" AND mine.status = ")
        .push_bind(status.as_str());
    }
    sql.push(" WHERE m.project = ").push_bind(project);
    if let Some(topic) = &q.topic {
        sql.push(" AND m.topic = ").push_bind(topic.clone());
    }
    if let Some(kind) = q.kind {
        sql.push(" AND m.type = ").push_bind(kind.as_str());
    }
    if let Some(from) = &q.from {
        sql.push(" AND m.from_name = ").push_bind(from.clone());
    }
    if let Some(to) = &q.to {
        sql.push(
            " AND EXISTS (SELECT 1 FROM deliveries t WHERE t.project = m.project \
             AND t.message_id = m.id AND t.participant = ",
        )
        .push_bind(to.clone())
        .push(")");
    }
    if let Some(since) = q.since {
        sql.push(" AND m.created_at >= ").push_bind(since);
    }
    if let Some(until) = q.until {
        sql.push(" AND m.created_at < ").push_bind(until);
    }
    let text = q.text.as_deref().filter(|t| !t.is_empty());
    let words = text
        .map(baton_core::search::query_words)
        .unwrap_or_default();
    if !words.is_empty() {
        // Each word must start a word of the payload: a prefix `tsquery` over the
        // GIN-indexed words. The words are letters and digits only, so quoting is safe.
        let query: Vec<String> = words.iter().map(|w| format!("'{w}':*")).collect();
        sql.push(" AND m.words @@ to_tsquery('simple', ")
            .push_bind(query.join(" & "))
            .push(")");
    }
    if let Some(text) = text.filter(|_| words.is_empty()) {
        // Punctuation alone has no words to look up: the stored event's text is read,
        // ignoring ASCII case only, as on SQLite (`lower()` there folds ASCII alone).
        sql.push(
            " AND strpos(translate((SELECT e.data FROM events e \
             WHERE e.project = m.project AND e.seq = m.seq), \
             'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'), ",
        )
        .push_bind(text.to_ascii_lowercase())
        .push(") > 0");
    }
    if let Some(cursor) = &q.cursor {
        sql.push(" AND m.seq < ").push_bind(decode_cursor(cursor)?);
    }
    sql.push(" ORDER BY m.seq DESC LIMIT ")
        .push_bind(i64::from(limit) + 1);
    Ok((limit, sql))
}

/// A page of a search: the matches `sql` finds and their envelopes.
pub(super) async fn search(
    conn: &mut PgConnection,
    project: i64,
    limit: u32,
    mut sql: QueryBuilder<Postgres>,
) -> sqlx::Result<Page> {
    let found: Vec<(i64, String)> = sql.build_query_as().fetch_all(&mut *conn).await?;
    let (ids, next) = decode::page_ids(&found, limit);
    let items = load_envelopes(conn, project, &ids).await?;
    Ok(Page { items, next })
}

/// A message's envelope and the stored data of its `message.sent` event.
pub(super) async fn message(
    conn: &mut PgConnection,
    project: i64,
    id: &str,
) -> sqlx::Result<Option<(Envelope, String)>> {
    let Some(envelope) = envelope(conn, project, id).await? else {
        return Ok(None);
    };
    let data: String = sqlx::query_scalar(
        "SELECT e.data FROM events e \
         JOIN messages m ON m.project = e.project AND m.seq = e.seq \
         WHERE m.project = $1 AND m.id = $2",
    )
    .bind(project)
    .bind(id)
    .fetch_one(&mut *conn)
    .await?;
    Ok(Some((envelope, data)))
}

/// The sender's message with this idempotency key, if any.
pub(super) async fn keyed(
    conn: &mut PgConnection,
    project: i64,
    from: &Passname,
    key: &str,
) -> sqlx::Result<Option<Prior>> {
    let found = sqlx::query(
        "SELECT id, hash, type, topic, reply_to, idempotency_key FROM messages \
         WHERE project = $1 AND from_name = $2 AND idempotency_key = $3",
    )
    .bind(project)
    .bind(from.as_str())
    .bind(key)
    .fetch_all(&mut *conn)
    .await?;
    Ok(priors(conn, project, &found).await?.pop())
}

/// The sender's messages since `since` like `draft`, newest first: what a send may repeat.
pub(super) async fn recent(
    conn: &mut PgConnection,
    project: i64,
    from: &Passname,
    draft: &Draft,
    since: Millis,
) -> sqlx::Result<Vec<Prior>> {
    let found = sqlx::query(RECENT)
        .bind(project)
        .bind(from.as_str())
        .bind(draft.payload.hash())
        .bind(draft.kind.as_str())
        .bind(draft.topic.as_str())
        .bind(&draft.reply_to)
        .bind(since)
        .fetch_all(&mut *conn)
        .await?;
    priors(conn, project, &found).await
}

/// The messages delivered to `participant` (and still only delivered) since `since`.
pub(super) async fn held(
    conn: &mut PgConnection,
    project: i64,
    participant: &str,
    since: Millis,
) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar(
        "SELECT message_id FROM deliveries WHERE project = $1 AND participant = $2 \
         AND status = $3 AND updated_at >= $4 ORDER BY updated_at, message_id COLLATE \"C\"",
    )
    .bind(project)
    .bind(participant)
    .bind(DeliveryStatus::Delivered.as_str())
    .bind(since)
    .fetch_all(&mut *conn)
    .await
}

/// Loads the envelopes of `ids`, in the order given; unknown ids are skipped.
async fn load_envelopes(
    conn: &mut PgConnection,
    project: i64,
    ids: &[String],
) -> sqlx::Result<Vec<Envelope>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let messages = sqlx::query(
        "SELECT m.id, m.from_name, m.type, m.topic, m.reply_to, m.depth, m.excerpt, m.size, \
                m.hash, m.created_at, m.request_status, m.idempotency_key, \
                (SELECT count(*) FROM messages r \
                 WHERE r.project = m.project AND r.reply_to = m.id) AS replies, \
                (SELECT p.pool FROM pool_items p \
                 WHERE p.project = m.project AND p.message_id = m.id) AS pool \
         FROM messages m WHERE m.project = $1 AND m.id = ANY($2)",
    )
    .bind(project)
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?;
    let recipients = sqlx::query(
        "SELECT message_id, participant, status, updated_at FROM deliveries \
         WHERE project = $1 AND message_id = ANY($2) ORDER BY ordinal",
    )
    .bind(project)
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?;
    decode::envelopes(ids, &messages, &recipients)
}

/// One message's envelope.
pub(super) async fn envelope(
    conn: &mut PgConnection,
    project: i64,
    id: &str,
) -> sqlx::Result<Option<Envelope>> {
    Ok(load_envelopes(conn, project, &[id.to_owned()]).await?.pop())
}

/// Earlier messages as the duplicate rule compares them, with their recipients.
async fn priors(
    conn: &mut PgConnection,
    project: i64,
    found: &[PgRow],
) -> sqlx::Result<Vec<Prior>> {
    let mut out = Vec::with_capacity(found.len());
    for row in found {
        let id: String = row.try_get("id")?;
        let to: Vec<String> = sqlx::query_scalar(
            "SELECT participant FROM deliveries WHERE project = $1 AND message_id = $2",
        )
        .bind(project)
        .bind(&id)
        .fetch_all(&mut *conn)
        .await?;
        out.push(decode::prior(row, to)?);
    }
    Ok(out)
}

/// This family's projection rows as text, in a stable order, for `projection_dump`
/// (`$1`: the project).
pub(super) const DUMP: &[&str] = &[
    "SELECT 'm|' || id || '|' || seq || '|' || from_name || '|' || type || '|' || topic \
     || '|' || coalesce(reply_to, '') || '|' || root_id || '|' || depth || '|' || excerpt \
     || '|' || size || '|' || hash || '|' || coalesce(idempotency_key, '') || '|' \
     || created_at || '|' || coalesce(request_status, '') FROM messages \
     WHERE project = $1 ORDER BY id COLLATE \"C\"",
    "SELECT 'd|' || message_id || '|' || participant || '|' || status || '|' || updated_at \
     FROM deliveries WHERE project = $1 \
     ORDER BY message_id COLLATE \"C\", participant COLLATE \"C\"",
    "SELECT 't|' || seq || '|' || words::text FROM messages \
     WHERE project = $1 ORDER BY seq",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;
    use crate::postgres::PostgresStore;
    use crate::postgres::tests::test_store;

    /// The duplicate check probes its own index, not a walk of the sender's outbox, in the
    /// plan a prepared statement keeps: one made on a new table, and one made once the
    /// table is analyzed holding a sender's many sends of one type and topic. (A table
    /// grown but never analyzed is not covered: there the planner may take any index;
    /// see [`RECENT`].)
    #[tokio::test]
    #[cfg_attr(
        not(baton_test_postgres),
        ignore = "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES"
    )]
    async fn the_duplicate_check_probes_its_index_in_plans_kept_from_a_new_or_an_analyzed_table() {
        use baton_core::{Draft, MessageType, Passname, Payload, Topic};
        let (store, schema) = test_store("plan").await;
        let plan = async |store: &PostgresStore, analyze: &str| -> String {
            let mut conn = store.pool.acquire().await.unwrap();
            let setup = format!(
                "SET plan_cache_mode = force_generic_plan; {analyze} \
                 PREPARE recent AS {RECENT}"
            );
            sqlx::raw_sql(sqlx::AssertSqlSafe(setup))
                .execute(&mut *conn)
                .await
                .unwrap();
            let lines: Vec<String> = sqlx::query_scalar(
                "EXPLAIN EXECUTE recent(1, 'planner', 'h', 'info', 't', NULL, 0)",
            )
            .fetch_all(&mut *conn)
            .await
            .unwrap();
            let _ = sqlx::raw_sql("RESET plan_cache_mode; DEALLOCATE recent")
                .execute(&mut *conn)
                .await;
            lines.join("\n")
        };
        // Never analyzed: no statistics at all.
        let empty = plan(&store, "").await;
        let writes = Store::new(store.clone());
        for who in ["planner", "impl-1"] {
            writes
                .add_participant("@test", &Passname::new(who).unwrap(), "x", None)
                .await
                .unwrap();
        }
        for n in 0..300 {
            let draft = Draft {
                to: vec![Passname::new("impl-1").unwrap()],
                kind: MessageType::Info,
                topic: Topic::new("t").unwrap(),
                reply_to: None,
                payload: Payload::body(&format!("send {n}"), 1024).unwrap(),
                idempotency_key: None,
            };
            writes
                .send(&Passname::new("planner").unwrap(), draft, 0)
                .await
                .unwrap();
        }
        let analyzed = plan(&store, "ANALYZE messages;").await;
        let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
            .execute(&store.pool)
            .await;
        for plan in [empty, analyzed] {
            assert!(
                plan.contains("messages_duplicate") && !plan.contains("messages_outbox"),
                "{plan}"
            );
        }
    }
}
