//! Messages in SQLite: the `messages` and `deliveries` projections (each message's row and
//! its place in its thread, each recipient's delivery), the free-text index a message's
//! words move into, and the reads over them: envelopes, the inbox and the outbox and their
//! bounded forms, a thread, search, payloads, and the duplicate check's candidates.

use std::collections::HashMap;

use baton_core::event::SentMessage;
use baton_core::message::Prior;
use baton_core::{
    Change, DeliveryStatus, Draft, Envelope, Event, MessageType, Millis, Passname, Refusal,
    RequestStatus, delivery,
};
use rusqlite::{Connection, params};

use super::conn::{Builder, Sql, exec};
use super::rows::{Row, column, row, rows, scalar};
use crate::decode::{self, decode_cursor, depth_first};
use crate::{MessageHead, Page, Result, SearchQuery, Window};

/// The duplicate check's candidates: the sender's messages since a time with the same
/// payload hash, type, topic and parent, newest first.
pub(super) const RECENT: &str = "SELECT id, hash, type, topic, reply_to, idempotency_key FROM messages \
     WHERE from_name = ? AND hash = ? AND type = ? AND topic = ? \
     AND reply_to IS ? AND created_at >= ? ORDER BY seq DESC LIMIT 20";

/// The replies under a thread's root, oldest first, from the index of threads.
pub(super) const THREAD_REPLIES: &str =
    "SELECT id FROM messages WHERE root_id = ? AND reply_to IS NOT NULL ORDER BY seq";

/// Pending rows of free-text words at which the writer adding the last one moves them
/// all into the index, as one segment. Search compares at most this many rows directly.
pub(super) const PENDING_TEXT_FLUSH: i64 = 64;

/// The seq of the message `?` rows before the newest, if its words wait for the index.
const OLDEST_OF_NEWEST_WAITING: &str = "SELECT seq FROM (SELECT seq, words FROM messages \
     ORDER BY seq DESC LIMIT 1 OFFSET ?) WHERE words IS NOT NULL";

/// Applies a message sent, or a step of a delivery or of a request to their rows; any other change is not this family's.
pub(super) fn project(conn: &Connection, event: &Event) -> Sql<()> {
    match &event.change {
        Change::MessageSent(m) => sent(conn, event, m),
        Change::DeliveryChanged {
            message,
            participant,
            status,
            ..
        } => delivery_changed(conn, event, message, participant, *status),
        Change::RequestChanged { message, status } => request_changed(conn, message, *status),
        _ => Ok(()),
    }
}

/// Projects a message's send: its row (its place in its thread; its parent's reply count),
/// its words waiting for the index, and a delivery to each recipient.
pub(super) fn sent(conn: &Connection, event: &Event, m: &SentMessage) -> Sql<()> {
    let parent = match &m.reply_to {
        Some(parent) => row(
            conn,
            "SELECT root_id, depth FROM messages WHERE id = ?",
            [parent],
        )?,
        None => None,
    };
    let parent = match parent {
        Some(parent) => {
            use decode::Columns;
            Some((parent.text("root_id")?, parent.int("depth")?))
        }
        None => None,
    };
    let (root, depth) = delivery::thread_place(&m.id, parent);
    if let Some(parent) = &m.reply_to {
        exec(
            conn,
            "UPDATE messages SET replies = replies + 1 WHERE id = ?",
            [parent],
        )?;
    }
    let request_status = RequestStatus::on_send(m.kind).map(RequestStatus::as_str);
    exec(
        conn,
        "INSERT INTO messages (id, seq, from_name, type, topic, reply_to, root_id, depth, \
         excerpt, size, hash, idempotency_key, created_at, request_status, words) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        params![
            m.id,
            event.seq,
            m.from.as_str(),
            m.kind.as_str(),
            m.topic.as_str(),
            m.reply_to,
            root,
            depth,
            m.excerpt,
            m.size as i64,
            m.hash,
            m.idempotency_key,
            event.at,
            request_status,
            baton_core::search::words(&m.payload)
        ],
    )?;
    move_words(conn)?;
    for (ordinal, to) in m.to.iter().enumerate() {
        exec(
            conn,
            "INSERT INTO deliveries \
             (message_id, participant, ordinal, status, updated_at, seq, request) \
             VALUES (?, ?, ?, ?, ?, ?, ?)",
            params![
                m.id,
                to.as_str(),
                ordinal as i64,
                delivery::FIRST_DELIVERY.as_str(),
                event.at,
                event.seq,
                m.kind == MessageType::Request
            ],
        )?;
    }
    Ok(())
}

/// Projects a recipient's step on its delivery of `message`.
pub(super) fn delivery_changed(
    conn: &Connection,
    event: &Event,
    message: &str,
    participant: &Passname,
    status: DeliveryStatus,
) -> Sql<()> {
    exec(
        conn,
        "UPDATE deliveries SET status = ?, updated_at = ? \
         WHERE message_id = ? AND participant = ?",
        params![status.as_str(), event.at, message, participant.as_str()],
    )?;
    Ok(())
}

/// Projects the sender's step on its own end of request `message`.
pub(super) fn request_changed(conn: &Connection, message: &str, status: RequestStatus) -> Sql<()> {
    exec(
        conn,
        "UPDATE messages SET request_status = ? WHERE id = ?",
        params![status.as_str(), message],
    )?;
    Ok(())
}

/// Moves the words waiting in the newest messages' rows into the free-text index, as one
/// segment, once `PENDING_TEXT_FLUSH` of them wait (migrations 13 and 15 say why). Every
/// message written since the last move waits (as '' when its payload has no words), so
/// what waits is always the newest rows of `messages`, fewer than `PENDING_TEXT_FLUSH`.
fn move_words(conn: &Connection) -> Sql<()> {
    // What waits is a run of the newest rows, so it is `PENDING_TEXT_FLUSH` rows long
    // once the row that many from the newest waits: one row read, not that many.
    let oldest = scalar::<i64>(conn, OLDEST_OF_NEWEST_WAITING, [PENDING_TEXT_FLUSH - 1])?;
    if let Some(from) = oldest {
        exec(
            conn,
            "INSERT INTO message_text (rowid, words) SELECT seq, words FROM messages \
             WHERE seq >= ? AND words != '' ORDER BY seq",
            [from],
        )?;
        exec(
            conn,
            "UPDATE messages SET words = NULL WHERE seq >= ? AND words IS NOT NULL",
            [from],
        )?;
    }
    Ok(())
}

/// What `who` owes, the page `window` names (with `all`, every inbound message not
/// archived).
pub(super) fn inbox(
    conn: &Connection,
    who: &Passname,
    all: bool,
    window: &Window,
) -> Sql<Vec<Envelope>> {
    let sql = if all {
        "SELECT message_id FROM deliveries \
         WHERE participant = ?1 AND status != 'archived' AND seq > ?2 ORDER BY seq LIMIT ?3"
    } else {
        "SELECT message_id FROM deliveries d \
         WHERE participant = ?1 AND status IN ('pending', 'delivered') AND seq > ?2 \
         AND NOT EXISTS (SELECT 1 FROM order_waits w WHERE w.message_id = d.message_id) \
         ORDER BY seq LIMIT ?3"
    };
    windowed(conn, sql, who, window)
}

/// The first `limit` messages `who` owes, requests first, and how many it owes in all.
pub(super) fn owed(conn: &Connection, who: &Passname, limit: u32) -> Sql<(Vec<Envelope>, u64)> {
    counted(
        conn,
        "SELECT count(*) FROM deliveries d \
         WHERE participant = ? AND status IN ('pending', 'delivered') \
         AND NOT EXISTS (SELECT 1 FROM order_waits w WHERE w.message_id = d.message_id)",
        "SELECT message_id FROM deliveries d \
         WHERE participant = ? AND status IN ('pending', 'delivered') \
         AND NOT EXISTS (SELECT 1 FROM order_waits w WHERE w.message_id = d.message_id) \
         ORDER BY request DESC, seq LIMIT ?",
        who,
        limit,
    )
}

/// Every request `who` owes, oldest first, then the first `others` other messages it owes,
/// as heads; and how many it owes in all. Both come from the owed index (the heads join
/// each delivery to its message by seq), so no envelope is read.
pub(super) fn owed_heads(
    conn: &Connection,
    who: &Passname,
    others: u32,
) -> Sql<(Vec<MessageHead>, u64)> {
    let (total, requests): (i64, i64) = conn
        .prepare_cached(
            "SELECT count(*), ifnull(sum(request), 0) FROM deliveries \
             WHERE participant = ? AND status IN ('pending', 'delivered')",
        )?
        .query_row([who.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let found = rows(
        conn,
        "SELECT m.id, m.type, m.topic, m.created_at, m.request_status \
         FROM deliveries d JOIN messages m ON m.seq = d.seq \
         WHERE d.participant = ? AND d.status IN ('pending', 'delivered') \
         ORDER BY d.request DESC, d.seq LIMIT ?",
        params![who.as_str(), requests + i64::from(others)],
    )?;
    let heads = found
        .iter()
        .map(decode::message_head)
        .collect::<sqlx::Result<_>>()?;
    Ok((heads, total as u64))
}

/// Every request `who` sent whose own end is not archived, oldest first, as heads.
pub(super) fn waiting_heads(conn: &Connection, who: &Passname) -> Sql<Vec<MessageHead>> {
    let found = rows(
        conn,
        "SELECT id, type, topic, created_at, request_status \
         FROM messages INDEXED BY messages_open_requests \
         WHERE from_name = ? AND type = 'request' AND request_status != 'archived' \
         ORDER BY seq",
        [who.as_str()],
    )?;
    Ok(found
        .iter()
        .map(decode::message_head)
        .collect::<sqlx::Result<_>>()?)
}

/// The envelopes of `ids`, in the order given; unknown ids are skipped.
pub(super) fn envelopes(conn: &Connection, ids: &[String]) -> Sql<Vec<Envelope>> {
    load_envelopes(conn, ids)
}

/// The requests `who` sent whose own end is not archived (with `all`, every one), the page
/// `window` names.
pub(super) fn outbox(
    conn: &Connection,
    who: &Passname,
    all: bool,
    window: &Window,
) -> Sql<Vec<Envelope>> {
    let sql = if all {
        "SELECT id FROM messages WHERE from_name = ?1 AND type = 'request' AND seq > ?2 \
         ORDER BY seq LIMIT ?3"
    } else {
        "SELECT id FROM messages INDEXED BY messages_open_requests \
         WHERE from_name = ?1 AND type = 'request' AND request_status != 'archived' \
         AND seq > ?2 ORDER BY seq LIMIT ?3"
    };
    windowed(conn, sql, who, window)
}

/// The first `limit` requests `who` sent whose own end is not archived, and how many there
/// are in all.
pub(super) fn waiting(conn: &Connection, who: &Passname, limit: u32) -> Sql<(Vec<Envelope>, u64)> {
    counted(
        conn,
        "SELECT count(*) FROM messages INDEXED BY messages_open_requests \
         WHERE from_name = ? AND type = 'request' AND request_status != 'archived'",
        "SELECT id FROM messages INDEXED BY messages_open_requests \
         WHERE from_name = ? AND type = 'request' AND request_status != 'archived' \
         ORDER BY seq LIMIT ?",
        who,
        limit,
    )
}

/// The whole thread `id` belongs to, depth-first from the root; `None` when `id` is no
/// message.
pub(super) fn thread(conn: &Connection, id: &str) -> Sql<Option<Vec<Envelope>>> {
    let Some(root) = scalar::<String>(conn, "SELECT root_id FROM messages WHERE id = ?", [id])?
    else {
        return Ok(None);
    };
    // The root, then its replies (the index of threads holds only replies).
    let mut ids = vec![root.clone()];
    ids.extend(column::<String>(conn, THREAD_REPLIES, [&root])?);
    let flat = load_envelopes(conn, &ids)?;
    Ok(Some(depth_first(flat, &root)))
}

/// A search's statements, newest first, and its page size. With words to look for: the
/// pending rows (at most `PENDING_TEXT_FLUSH`, every one newer than anything indexed),
/// compared directly, then the index, walked newest first with each match joined to its
/// message, for what the pending rows did not fill: a page reads a page of matches, and no
/// match reads none.
pub(super) fn search_statements(
    caller: Option<&Passname>,
    q: &SearchQuery,
) -> Result<(u32, Vec<Builder>)> {
    let limit = q.limit.clamp(1, 100);
    let text = q.text.as_deref().filter(|t| !t.is_empty());
    let words = text
        .map(baton_core::search::query_words)
        .unwrap_or_default();
    let cursor = q.cursor.as_deref().map(decode_cursor).transpose()?;
    let sources: &[Source] = if words.is_empty() {
        &[Source::Messages]
    } else {
        &[Source::Pending, Source::Index]
    };
    let statements: Vec<Builder> = sources
        .iter()
        .map(|source| search_sql(*source, caller, q, text, &words, cursor))
        .collect::<Result<_>>()?;
    Ok((limit, statements))
}

/// A page of a search: the first `limit` matches of `statements`, in turn.
pub(super) fn search(conn: &Connection, limit: u32, statements: &[Builder]) -> Sql<Page> {
    let mut found: Vec<(i64, String)> = Vec::new();
    for sql in statements {
        let want = i64::from(limit) + 1 - found.len() as i64;
        if want <= 0 {
            break;
        }
        let mut stmt = conn.prepare_cached(&sql.sql)?;
        let want = rusqlite::types::Value::Integer(want);
        let params = sql.params.iter().chain(std::iter::once(&want));
        found.extend(
            stmt.query_map(rusqlite::params_from_iter(params), |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?,
        );
    }
    let (ids, next) = decode::page_ids(&found, limit);
    let items = load_envelopes(conn, &ids)?;
    Ok(Page { items, next })
}

/// The stored data of the `message.sent` events of `ids` (a JSON list), by message id.
pub(super) fn payloads(conn: &Connection, list: &str) -> Sql<HashMap<String, String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT m.id, e.data FROM messages m JOIN events e ON e.seq = m.seq \
         WHERE m.id IN (SELECT value FROM json_each(?))",
    )?;
    let found = stmt
        .query_map([list], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?
        .collect::<rusqlite::Result<HashMap<_, _>>>()?;
    Ok(found)
}

/// A message's envelope and the stored data of its `message.sent` event.
pub(super) fn message(conn: &Connection, id: &str) -> Sql<Option<(Envelope, String)>> {
    let Some(envelope) = envelope(conn, id)? else {
        return Ok(None);
    };
    let data: Option<String> = scalar(
        conn,
        "SELECT e.data FROM events e JOIN messages m ON m.seq = e.seq WHERE m.id = ?",
        [id],
    )?;
    Ok(data.map(|data| (envelope, data)))
}

/// The sender's message with this idempotency key, if any.
pub(super) fn keyed(conn: &Connection, from: &Passname, key: &str) -> Sql<Option<Prior>> {
    let found = rows(
        conn,
        "SELECT id, hash, type, topic, reply_to, idempotency_key FROM messages \
         WHERE from_name = ? AND idempotency_key = ?",
        [from.as_str(), key],
    )?;
    Ok(priors(conn, &found)?.pop())
}

/// The sender's messages since `since` like `draft`, newest first: what a send may repeat.
pub(super) fn recent(
    conn: &Connection,
    from: &Passname,
    draft: &Draft,
    since: Millis,
) -> Sql<Vec<Prior>> {
    let found = rows(
        conn,
        RECENT,
        params![
            from.as_str(),
            draft.payload.hash(),
            draft.kind.as_str(),
            draft.topic.as_str(),
            draft.reply_to,
            since
        ],
    )?;
    priors(conn, &found)
}

/// The messages delivered to `participant` (and still only delivered) since `since`.
pub(super) fn held(conn: &Connection, participant: &str, since: Millis) -> Sql<Vec<String>> {
    column(
        conn,
        "SELECT message_id FROM deliveries WHERE participant = ? AND status = ? \
         AND updated_at >= ? ORDER BY updated_at, message_id",
        params![participant, DeliveryStatus::Delivered.as_str(), since],
    )
}

/// The statement reading the message rows of envelopes, `WHERE …` appended.
macro_rules! envelope_messages {
    ($where:literal) => {
        concat!(
            "SELECT m.id, m.from_name, m.type, m.topic, m.reply_to, m.depth, m.excerpt, \
             m.size, m.hash, m.created_at, m.request_status, m.replies, m.idempotency_key, \
             (SELECT p.pool FROM pool_items p WHERE p.message_id = m.id) AS pool \
             FROM messages m ",
            $where
        )
    };
}

/// The statement reading the recipients of envelopes, `WHERE …` appended.
macro_rules! envelope_recipients {
    ($where:literal) => {
        concat!(
            "SELECT message_id, participant, status, updated_at FROM deliveries ",
            $where,
            " ORDER BY ordinal"
        )
    };
}

/// Loads the envelopes of `ids`, in the order given; unknown ids are skipped.
fn load_envelopes(conn: &Connection, ids: &[String]) -> Sql<Vec<Envelope>> {
    let (messages, recipients) = match ids {
        [] => return Ok(Vec::new()),
        // One message (shown, stepped, replied to) is read without `json_each`: compiling
        // a statement that calls it costs more than running it, and a command compiles
        // each statement it runs once.
        [id] => (
            rows(conn, envelope_messages!("WHERE m.id = ?"), [id])?,
            rows(conn, envelope_recipients!("WHERE message_id = ?"), [id])?,
        ),
        _ => {
            let list = serde_json::to_string(ids).expect("strings serialize");
            (
                rows(
                    conn,
                    envelope_messages!("WHERE m.id IN (SELECT value FROM json_each(?))"),
                    [&list],
                )?,
                rows(
                    conn,
                    envelope_recipients!("WHERE message_id IN (SELECT value FROM json_each(?))"),
                    [&list],
                )?,
            )
        }
    };
    Ok(decode::envelopes(ids, &messages, &recipients)?)
}

/// Runs a query that selects message ids and loads their envelopes, in that order.
fn listed(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> Sql<Vec<Envelope>> {
    let ids: Vec<String> = column(conn, sql, params)?;
    load_envelopes(conn, &ids)
}

/// A page of a list for `who`: the envelopes of the ids `sql` selects (bound: who, the seq
/// the page starts after, the limit), `window`'s message id turned into its seq first.
fn windowed(conn: &Connection, sql: &str, who: &Passname, window: &Window) -> Sql<Vec<Envelope>> {
    let after = match &window.after {
        None => 0,
        // An id that is no message names no place in any list: the page is empty.
        Some(id) => {
            scalar(conn, "SELECT seq FROM messages WHERE id = ?", [id])?.unwrap_or(i64::MAX)
        }
    };
    listed(conn, sql, params![who.as_str(), after, window.limit])
}

/// A bounded list for `who`: the envelopes of the first `limit` ids `ids` selects (bound:
/// who, the limit) and the count `count` gives (bound: who).
fn counted(
    conn: &Connection,
    count: &str,
    ids: &str,
    who: &Passname,
    limit: u32,
) -> Sql<(Vec<Envelope>, u64)> {
    let total: i64 = scalar(conn, count, [who.as_str()])?.unwrap_or(0);
    let first = listed(conn, ids, params![who.as_str(), limit])?;
    Ok((first, total as u64))
}

/// One message's envelope.
pub(super) fn envelope(conn: &Connection, id: &str) -> Sql<Option<Envelope>> {
    Ok(load_envelopes(conn, &[id.to_owned()])?.pop())
}

/// Earlier messages as the duplicate rule compares them, with their recipients.
fn priors(conn: &Connection, found: &[Row]) -> Sql<Vec<Prior>> {
    use decode::Columns;
    let mut out = Vec::with_capacity(found.len());
    for r in found {
        let id = r.text("id")?;
        let to: Vec<String> = column(
            conn,
            "SELECT participant FROM deliveries WHERE message_id = ?",
            [&id],
        )?;
        out.push(decode::prior(r, to)?);
    }
    Ok(out)
}

/// Where a search reads its matches from.
#[derive(Clone, Copy)]
enum Source {
    /// Every message (no words to look for).
    Messages,
    /// The words not yet moved into the index.
    Pending,
    /// The free-text index.
    Index,
}

/// A search's statement over `source`, newest first, its `LIMIT` left to bind last.
fn search_sql(
    source: Source,
    caller: Option<&Passname>,
    q: &SearchQuery,
    text: Option<&str>,
    words: &[String],
    cursor: Option<i64>,
) -> Result<Builder> {
    let (mut sql, order) = match source {
        Source::Messages => (Builder::new("SELECT m.seq, m.id FROM messages m"), "m.seq"),
        // The words waiting are in the newest rows (`move_words`).
        Source::Pending => {
            let mut sql = Builder::new(
                "SELECT m.seq, m.id FROM (SELECT seq, words FROM messages ORDER BY seq DESC \
                 LIMIT ",
            );
            sql.bind(PENDING_TEXT_FLUSH)
                .push(") f JOIN messages m ON m.seq = f.seq");
            (sql, "f.seq")
        }
        Source::Index => (
            Builder::new(
                "SELECT m.seq, m.id FROM message_text f JOIN messages m ON m.seq = f.rowid",
            ),
            "f.rowid",
        ),
    };
    if let Some(status) = q.status {
        let caller = caller.ok_or(Refusal::StatusNeedsIdentity)?;
        sql.push(" JOIN deliveries mine ON mine.message_id = m.id AND mine.participant = ")
            .bind(caller.as_str().to_owned())
            .push(" AND mine.status = ")
            .bind(status.as_str().to_owned());
    }
    sql.push(" WHERE 1 = 1");
    match source {
        Source::Messages => {}
        // Each word must start a word of the payload: an FTS5 prefix query, or the same
        // test on the pending words (one space between words, none at either end).
        // The words are one parameter, a JSON array: one statement whatever their number,
        // and a query of many words never meets SQLite's limit on parameters.
        Source::Pending => {
            let list = serde_json::to_string(words).expect("words serialize");
            sql.push(" AND f.words IS NOT NULL AND NOT EXISTS (SELECT 1 FROM json_each(")
                .bind(list)
                .push(") w WHERE instr(' ' || f.words, ' ' || w.value) = 0)");
        }
        Source::Index => {
            let query: Vec<String> = words.iter().map(|w| format!("\"{w}\"*")).collect();
            sql.push(" AND f.message_text MATCH ").bind(query.join(" "));
        }
    }
    if let Some(topic) = &q.topic {
        sql.push(" AND m.topic = ").bind(topic.clone());
    }
    if let Some(kind) = q.kind {
        sql.push(" AND m.type = ").bind(kind.as_str().to_owned());
    }
    if let Some(from) = &q.from {
        sql.push(" AND m.from_name = ").bind(from.clone());
    }
    if let Some(to) = &q.to {
        sql.push(" AND EXISTS (SELECT 1 FROM deliveries t WHERE t.message_id = m.id AND t.participant = ")
            .bind(to.clone())
            .push(")");
    }
    if let Some(since) = q.since {
        sql.push(" AND m.created_at >= ").bind(since);
    }
    if let Some(until) = q.until {
        sql.push(" AND m.created_at < ").bind(until);
    }
    if let Some(text) = text.filter(|_| words.is_empty()) {
        // Punctuation alone has no words to look up: the payloads' text is read.
        sql.push(" AND instr(lower((SELECT e.data FROM events e WHERE e.seq = m.seq)), lower(")
            .bind(text.to_owned())
            .push(")) > 0");
    }
    if let Some(cursor) = cursor {
        sql.push(" AND ").push(order).push(" < ").bind(cursor);
    }
    sql.push(" ORDER BY ").push(order).push(" DESC LIMIT ?");
    Ok(sql)
}

/// This family's projection rows as text, in a stable order, for `projection_dump`.
pub(super) const DUMP: &[&str] = &[
    "SELECT 'm|' || id || '|' || seq || '|' || from_name || '|' || type || '|' || topic \
     || '|' || coalesce(reply_to, '') || '|' || root_id || '|' || depth || '|' || excerpt \
     || '|' || size || '|' || hash || '|' || coalesce(idempotency_key, '') || '|' \
     || created_at || '|' || coalesce(request_status, '') || '|' || replies \
     FROM messages ORDER BY id",
    "SELECT 'd|' || message_id || '|' || participant || '|' || status || '|' || updated_at \
     || '|' || seq || '|' || request FROM deliveries ORDER BY message_id, participant",
    // A message's words, indexed or pending: which of the two holds them depends
    // on how many were written since the last move, not on what they are.
    "SELECT 't|' || seq || '|' || words FROM ( \
         SELECT doc AS seq, group_concat(term, ' ' ORDER BY \"offset\") AS words \
         FROM message_words GROUP BY doc \
         UNION ALL SELECT seq, words FROM messages WHERE words != '') ORDER BY seq",
];

#[cfg(test)]
mod tests {
    use baton_core::{Draft, MessageType, Passname, Payload, Topic};

    use crate::{SqliteStore, Store};

    /// A send's words wait in its message's row until there are enough of them to
    /// move into the free-text index at once; the move leaves none pending. A message
    /// without words waits as well (so what waits is always the newest rows) and adds
    /// nothing to the index.
    #[tokio::test]
    async fn pending_words_move_into_the_index_together() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.db");
        let timeout = std::time::Duration::from_secs(5);
        let store = Store::new(SqliteStore::create(&path, timeout).await.unwrap());
        let conn = super::super::conn::connect(&path, timeout, false).unwrap();
        for who in ["a", "b"] {
            store
                .add_participant("@t", &Passname::new(who).unwrap(), "peer", None)
                .await
                .unwrap();
        }
        let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        let flush = super::PENDING_TEXT_FLUSH;
        let wordless = |n: i64| n % 5 == 0;
        let worded = |upto: i64| (1..=upto).filter(|n| !wordless(*n)).count() as i64;
        for n in 1..=flush + 1 {
            let draft = Draft {
                to: vec![Passname::new("b").unwrap()],
                kind: MessageType::Info,
                topic: Topic::new("t").unwrap(),
                reply_to: None,
                payload: if wordless(n) {
                    Payload::parse(r#"{"_": "... !?"}"#, 1024).unwrap()
                } else {
                    Payload::body(&format!("word{n}"), 1024).unwrap()
                },
                idempotency_key: None,
            };
            store
                .send(&Passname::new("a").unwrap(), draft, 0)
                .await
                .unwrap();
            let pending = count("SELECT count(*) FROM messages WHERE words IS NOT NULL");
            let indexed = count("SELECT count(DISTINCT doc) FROM message_words");
            let want = if n < flush {
                (n, 0)
            } else {
                (n - flush, worded(flush))
            };
            assert_eq!((pending, indexed), want, "after {n} sends");
        }
    }
}
