//! The event log in SQLite, read back: by position, by kind, by subject and by id; its
//! generation; when subjects last changed; and the repeats counted on a security event
//! (bookkeeping beside the log, which a rebuild keeps).

use baton_core::negotiation::Negotiation;
use baton_core::{Event, Millis};
use rusqlite::{Connection, params};

use super::conn::{Sql, exec};
use super::rows::{column, row, rows, scalar};
use crate::Repeats;
use crate::decode;

/// The event kinds in the kind index, as its `WHERE` names them (migration 13).
pub(super) const KINDS_INDEXED: [&str; 2] = ["gate.changed", "security.refused"];

/// The newest events of an indexed kind before a seq.
pub(super) const OF_KIND_INDEXED: &str = "SELECT seq, id, at, actor, kind, data FROM events \
     WHERE kind = ? AND kind IN ('gate.changed', 'security.refused') AND seq < ? \
     ORDER BY seq DESC LIMIT ?";

/// The newest events of any other kind before a seq: the log read back from its end.
pub(super) const OF_KIND: &str = "SELECT seq, id, at, actor, kind, data FROM events \
     WHERE kind = ? AND seq < ? ORDER BY seq DESC LIMIT ?";

/// The events of one kind about a subject, oldest first, from the index of subjects. It
/// holds every kind but `message.sent` (migration 14): a message's own event is found by
/// its row in `messages` ([`SENT`]).
pub(super) const ABOUT: &str = "SELECT seq, id, at, actor, kind, data FROM events \
     WHERE subject = ? AND kind = ? AND kind != 'message.sent' ORDER BY seq";

/// A message's own event, by the message's id.
const SENT: &str = "SELECT e.seq, e.id, e.at, e.actor, e.kind, e.data FROM messages m \
     JOIN events e ON e.seq = m.seq WHERE m.id = ?";

/// Whether the log holds an event by its id. The index of ids leaves out a
/// `message.sent` that took its message's id (migration 15): that one is found by its
/// message's row.
pub(super) const HAS_EVENT: &str = "SELECT 1 FROM events WHERE id = ?1 \
     AND (kind != 'message.sent' OR id != subject) \
     UNION ALL SELECT 1 FROM messages m JOIN events e ON e.seq = m.seq \
     WHERE m.id = ?1 AND e.id = ?1 LIMIT 1";

/// An event by its id, found as [`HAS_EVENT`] finds it.
const EVENT: &str = "SELECT seq, id, at, actor, kind, data FROM events WHERE id = ?1 \
     AND (kind != 'message.sent' OR id != subject) \
     UNION ALL SELECT e.seq, e.id, e.at, e.actor, e.kind, e.data FROM messages m \
     JOIN events e ON e.seq = m.seq WHERE m.id = ?1 AND e.id = ?1 LIMIT 1";

/// When each subject of a JSON list of `[subject, seq]` last changed after its seq, in
/// the list's order: its events in the index of subjects, or its creation when it is a
/// message (`NULL` when neither).
pub(super) const LAST_CHANGES: &str = "SELECT nullif(max(\
     ifnull((SELECT max(at) FROM events WHERE subject = j.value ->> 0 \
             AND seq > j.value ->> 1 AND kind != 'message.sent'), 0), \
     ifnull((SELECT created_at FROM messages WHERE id = j.value ->> 0 \
             AND seq > j.value ->> 1), 0)), 0) \
     FROM json_each(?) j ORDER BY j.key";

/// Events after `after`, oldest first, at most `limit`.
pub(super) fn read(conn: &Connection, after: i64, limit: u32) -> Sql<Vec<Event>> {
    let found = rows(
        conn,
        "SELECT seq, id, at, actor, kind, data FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
        params![after, limit],
    )?;
    Ok(decode::events(&found)?)
}

/// Hands each event of `kinds` to `each`, oldest first, read a thousand at a time: how a
/// migration fills a new projection from the log.
pub(super) fn each_of(
    conn: &Connection,
    kinds: &[&str],
    mut each: impl FnMut(&Event) -> Sql<()>,
) -> Sql<()> {
    let kinds = serde_json::to_string(kinds).expect("strings serialize");
    let mut after = 0;
    loop {
        let found = rows(
            conn,
            "SELECT seq, id, at, actor, kind, data FROM events \
             WHERE seq > ? AND kind IN (SELECT value FROM json_each(?)) ORDER BY seq LIMIT 1000",
            params![after, kinds],
        )?;
        let batch = decode::events(&found)?;
        let Some(last) = batch.last() else {
            return Ok(());
        };
        after = last.seq;
        for event in &batch {
            each(event)?;
        }
    }
}

/// The events of `kind` about `subject`, oldest first, found by the subject index.
pub(super) fn about(conn: &Connection, subject: &str, kind: &str) -> Sql<Vec<Event>> {
    let found = if kind == "message.sent" {
        rows(conn, SENT, [subject])?
    } else {
        rows(conn, ABOUT, [subject, kind])?
    };
    Ok(decode::events(&found)?)
}

/// Negotiation `id`: the fold of its events, found by the subject index.
pub(super) fn negotiation(conn: &Connection, id: &str) -> Sql<Option<Negotiation>> {
    Ok(Negotiation::replay(&about(
        conn,
        id,
        "negotiation.changed",
    )?))
}

/// The newest `limit` events of `kind` before `before_seq`, newest first.
pub(super) fn of_kind(
    conn: &Connection,
    kind: &str,
    before_seq: Option<i64>,
    limit: u32,
) -> Sql<Vec<Event>> {
    // The kind index holds only the kinds read back by kind (migration 13); its
    // condition is named in the statement so that the planner may use it. Another
    // kind is found by reading the log.
    let sql = if KINDS_INDEXED.contains(&kind) {
        OF_KIND_INDEXED
    } else {
        OF_KIND
    };
    let found = rows(
        conn,
        sql,
        params![kind, before_seq.unwrap_or(i64::MAX), limit],
    )?;
    Ok(decode::events(&found)?)
}

/// The sequence number of the newest event (0 when the log is empty).
pub(super) fn generation(conn: &Connection) -> Sql<i64> {
    Ok(scalar(conn, "SELECT coalesce(max(seq), 0) FROM events", [])?.unwrap_or(0))
}

/// When each subject of `list` (JSON, `[subject, seq]` pairs) last changed after its seq.
pub(super) fn last_changes(conn: &Connection, list: &str) -> Sql<Vec<Option<Millis>>> {
    column(conn, LAST_CHANGES, [list])
}

/// Whether the log holds an event with this id.
pub(super) fn has(conn: &Connection, id: &str) -> Sql<bool> {
    Ok(scalar::<i64>(conn, HAS_EVENT, [id])?.is_some())
}

/// Whether the log holds an event of a kind not among `kinds`.
pub(super) fn any_beyond(conn: &Connection, kinds: &[&str]) -> Sql<bool> {
    let sql = format!(
        "SELECT 1 FROM events WHERE kind NOT IN ({}) LIMIT 1",
        vec!["?"; kinds.len()].join(", ")
    );
    Ok(scalar::<i64>(conn, &sql, rusqlite::params_from_iter(kinds))?.is_some())
}

/// The event with this id, as the log holds it.
pub(super) fn by_id(conn: &Connection, id: &str) -> Sql<Option<Event>> {
    Ok(decode::events(&rows(conn, EVENT, [id])?)?
        .into_iter()
        .next())
}

/// How many events at or after `seq` are of a kind not among `kinds`.
pub(super) fn count_beyond_from(conn: &Connection, seq: i64, kinds: &[&str]) -> Sql<usize> {
    let sql = format!(
        "SELECT count(*) FROM events WHERE seq >= ? AND kind NOT IN ({})",
        vec!["?"; kinds.len()].join(", ")
    );
    let params: Vec<rusqlite::types::Value> = std::iter::once(seq.into())
        .chain(kinds.iter().map(|k| (*k).to_owned().into()))
        .collect();
    let n = scalar::<i64>(conn, &sql, rusqlite::params_from_iter(params))?;
    Ok(usize::try_from(n.unwrap_or(0)).unwrap_or(0))
}

/// Counts a repeat, at `at`, of the security event at `seq`.
pub(super) fn count_repeat(conn: &Connection, seq: i64, at: Millis) -> Sql<()> {
    exec(
        conn,
        "INSERT INTO refusal_repeats (seq, count, last_at) VALUES (?, 1, ?) \
         ON CONFLICT (seq) DO UPDATE \
         SET count = count + 1, last_at = max(last_at, excluded.last_at)",
        params![seq, at],
    )?;
    Ok(())
}

/// The repeats counted on the security events at `seqs` (those with none are absent).
pub(super) fn repeats(conn: &Connection, seqs: &[i64]) -> Sql<Vec<Repeats>> {
    let mut found = Vec::new();
    for &seq in seqs {
        let counted = row(
            conn,
            "SELECT count, last_at FROM refusal_repeats WHERE seq = ?",
            params![seq],
        )?;
        if let Some(r) = counted {
            use decode::Columns;
            found.push(Repeats {
                seq,
                count: r.int("count")?,
                last_at: r.int("last_at")?,
            });
        }
    }
    Ok(found)
}
