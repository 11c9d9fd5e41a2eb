//! What a stored row becomes, for every backend: events, participants, envelopes, duplicate
//! candidates and fold-backed records decoded from the columns both engines store alike,
//! plus the read-side shaping that is not SQL (a thread's depth-first order, the search
//! cursor). It never builds or runs a query: each backend writes its own SQL and hands the
//! rows here, so a stored value is read back the same way whichever engine kept it.

use std::collections::HashMap;

use baton_core::key::Key;
use baton_core::message::{MessageType, Prior};
use baton_core::metrics::MessageFacts;
use baton_core::run::RunStatus;
use baton_core::webhook::Webhook;
use baton_core::{
    Change, DeliveryStatus, Envelope, Event, Participant, Passname, Policy, Recipient, Refusal,
    RequestStatus, Topic,
};
use serde_json::{Map, Value};
use sqlx::{ColumnIndex, Decode, Row, Type};

use crate::{Result, StoreError};

/// The table holding the ids of `record`'s kind, for a lookup by prefix; `None` for a
/// kind without ids of its own.
pub(crate) fn id_table(record: baton_core::Record) -> Option<&'static str> {
    use baton_core::Record as R;
    Some(match record {
        R::Message | R::Parent => "messages",
        R::Order => "orders",
        R::Run => "runs",
        R::Key => "keys",
        R::Reservation => "reservations",
        R::Decision | R::Stream | R::Alert | R::Receipt | R::Project | R::Negotiation => {
            return None;
        }
    })
}

/// The most ids a prefix lookup lists of each of its spans.
pub(crate) const IDS_A_SPAN: usize = baton_core::id::CANDIDATES + 1;

/// A row's columns by name, as the two types Baton stores: text and 64-bit integers.
pub(crate) trait Columns {
    fn text(&self, column: &str) -> sqlx::Result<String>;
    fn maybe_text(&self, column: &str) -> sqlx::Result<Option<String>>;
    fn int(&self, column: &str) -> sqlx::Result<i64>;
    fn maybe_int(&self, column: &str) -> sqlx::Result<Option<i64>>;
}

impl<R> Columns for R
where
    R: Row,
    for<'c> &'c str: ColumnIndex<R>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
{
    fn text(&self, column: &str) -> sqlx::Result<String> {
        self.try_get(column)
    }

    fn maybe_text(&self, column: &str) -> sqlx::Result<Option<String>> {
        self.try_get(column)
    }

    fn int(&self, column: &str) -> sqlx::Result<i64> {
        self.try_get(column)
    }

    fn maybe_int(&self, column: &str) -> sqlx::Result<Option<i64>> {
        self.try_get(column)
    }
}

pub(crate) fn decode<T, E>(r: std::result::Result<T, E>) -> sqlx::Result<T>
where
    E: std::error::Error + Send + Sync + 'static,
{
    r.map_err(|e| sqlx::Error::Decode(Box::new(e)))
}

/// A key from `data` (its fold) and `used_at` (its last recorded use, if any).
pub(crate) fn used_key(row: &impl Columns) -> sqlx::Result<Key> {
    let mut key: Key = folded(&row.text("data")?)?;
    key.last_used_at = row.maybe_int("used_at")?;
    Ok(key)
}

/// An event from `seq, id, at, actor, kind, data`.
pub(crate) fn event(row: &impl Columns) -> sqlx::Result<Event> {
    let kind = row.text("kind")?;
    let data = row.text("data")?;
    let change = decode(
        serde_json::from_str(&data).and_then(|data: Value| Change::from_parts(&kind, data)),
    )?;
    Ok(Event {
        seq: row.int("seq")?,
        id: row.text("id")?,
        at: row.int("at")?,
        actor: row.text("actor")?,
        change,
    })
}

pub(crate) fn events<R: Columns>(rows: &[R]) -> sqlx::Result<Vec<Event>> {
    rows.iter().map(event).collect()
}

/// A participant from `name, role, added_at, policy`.
pub(crate) fn participant(row: &impl Columns) -> sqlx::Result<Participant> {
    let policy = match row.maybe_text("policy")? {
        Some(json) => Some(decode(serde_json::from_str(&json))?),
        None => None,
    };
    Ok(Participant {
        name: decode(Passname::try_from(row.text("name")?))?,
        role: row.text("role")?,
        added_at: row.int("added_at")?,
        policy,
    })
}

/// The tables derived from the log, which a rebuild empties and replays into (the
/// search index is the backend's own).
pub(crate) const PROJECTIONS: [&str; 15] = [
    "order_waits",
    "metrics",
    "open_needs",
    "stuck_orders",
    "state",
    "state_digest",
    "deliveries",
    "messages",
    "participants",
    "runs",
    "orders",
    "keys",
    "webhooks",
    "reservations",
    "pool_items",
];

/// The columns a webhook is read from.
pub(crate) const WEBHOOK_COLUMNS: &str =
    "participant, url, secret, set_seq, cursor, failures, next_at, last_error, delivered_at";

/// A webhook from [`WEBHOOK_COLUMNS`].
pub(crate) fn webhook(row: &impl Columns) -> sqlx::Result<Webhook> {
    Ok(Webhook {
        participant: decode(Passname::try_from(row.text("participant")?))?,
        url: row.text("url")?,
        secret: row.text("secret")?,
        set_seq: row.int("set_seq")?,
        cursor: row.int("cursor")?,
        failures: u32::try_from(row.int("failures")?).unwrap_or(u32::MAX),
        next_at: row.int("next_at")?,
        last_error: row.maybe_text("last_error")?,
        delivered_at: row.maybe_int("delivered_at")?,
    })
}

/// The stored form of a participant's policy (`None`: its role's default).
pub(crate) fn policy_text(policy: Option<&Policy>) -> Option<String> {
    policy.map(|p| serde_json::to_string(p).expect("a policy serializes"))
}

/// The rows of the state projection: the whole state, and its digest
/// ([`ProjectState::digest`]).
pub(crate) fn state_rows(state: &baton_core::state::ProjectState) -> (String, String) {
    let digest = state.digest(baton_core::state::DIGEST_ITEMS);
    (
        serde_json::to_string(state).expect("the state always serializes"),
        serde_json::to_string(&digest).expect("a digest always serializes"),
    )
}

/// A record kept whole as the JSON of its fold (a run, an order).
pub(crate) fn folded<T: serde::de::DeserializeOwned>(data: &str) -> sqlx::Result<T> {
    decode(serde_json::from_str(data))
}

/// Run counts by status, from rows of `status` and `n`.
/// A SQL list of statuses, `('a', 'b')`, for `status IN …`: the statuses are the core's
/// (`RunStatus::is_live`, `OrderStatus::is_terminal`, …), so which runs are live or which
/// orders closed is decided once, not written into each backend's SQL. The text is the
/// same as the partial indexes' predicates spell it (tested), which a planner needs to
/// use them.
pub(crate) fn statuses<S: AsRef<str>>(statuses: impl IntoIterator<Item = S>) -> String {
    let quoted: Vec<String> = statuses
        .into_iter()
        .map(|s| format!("'{}'", s.as_ref()))
        .collect();
    format!("({})", quoted.join(", "))
}

/// The live runs' statuses, as SQL.
pub(crate) fn live_runs() -> String {
    statuses(RunStatus::all_where(RunStatus::is_live).map(RunStatus::as_str))
}

/// The failed runs' statuses, as SQL (the failures lane).
pub(crate) fn failed_runs() -> String {
    statuses(RunStatus::all_where(RunStatus::is_failure).map(RunStatus::as_str))
}

/// The status of a run that clears a failure, as a SQL literal.
pub(crate) fn clearing_run() -> String {
    let clears: Vec<&str> = RunStatus::all_where(RunStatus::clears_failures)
        .map(RunStatus::as_str)
        .collect();
    debug_assert_eq!(clears.len(), 1, "one status clears a failure");
    format!("'{}'", clears.concat())
}

/// The closed orders' statuses, as SQL.
pub(crate) fn closed_orders() -> String {
    statuses(baton_core::order::OrderStatus::closed().map(|s| s.as_str()))
}

pub(crate) fn run_counts(rows: &[impl Columns]) -> sqlx::Result<Vec<crate::RunCount>> {
    rows.iter()
        .map(|row| {
            let status = row.text("status")?;
            let status = RunStatus::parse(&status)
                .ok_or_else(|| sqlx::Error::Decode(format!("run status {status:?}").into()))?;
            let source = row.text("source")?;
            let source = baton_core::run::Source::parse(&source)
                .ok_or_else(|| sqlx::Error::Decode(format!("run source {source:?}").into()))?;
            Ok(crate::RunCount {
                status,
                source,
                n: row.int("n")? as u64,
                quiet: row.int("quiet")? as u64,
                parent: row.maybe_text("parent")?,
            })
        })
        .collect()
}

/// The columns a message's facts for the handoff metrics are read from.
pub(crate) const MESSAGE_FACTS: &str = "created_at, type, topic, depth";

/// A message's head from its `id`, `type`, `topic`, `created_at` and `request_status`.
pub(crate) fn message_head(row: &impl Columns) -> sqlx::Result<crate::MessageHead> {
    let request_status = row.maybe_text("request_status")?;
    Ok(crate::MessageHead {
        id: row.text("id")?,
        kind: message_type(row)?,
        topic: decode(Topic::try_from(row.text("topic")?))?,
        created_at: row.int("created_at")?,
        request_status: request_status.as_deref().and_then(RequestStatus::parse),
    })
}

fn message_type(row: &impl Columns) -> sqlx::Result<MessageType> {
    row.text("type")?
        .parse()
        .map_err(|e: String| sqlx::Error::Decode(e.into()))
}

/// A message's facts for the tally, from [`MESSAGE_FACTS`].
pub(crate) fn message_facts(row: &impl Columns) -> sqlx::Result<MessageFacts> {
    Ok(MessageFacts {
        at: row.int("created_at")?,
        kind: message_type(row)?,
        topic: row.text("topic")?,
    })
}

/// A reply's parent for the tally, from [`MESSAGE_FACTS`]: its type and depth.
pub(crate) fn parent_facts(row: &impl Columns) -> sqlx::Result<(MessageType, u32)> {
    Ok((message_type(row)?, row.int("depth")? as u32))
}

/// The envelopes of `ids`, in that order (unknown ids skipped), from the message rows
/// (`id, from_name, type, topic, reply_to, depth, excerpt, size, hash, created_at,
/// request_status, replies, idempotency_key, pool`) and their delivery rows (`message_id,
/// participant, status, updated_at`, in the order the recipients were addressed).
pub(crate) fn envelopes<M: Columns, D: Columns>(
    ids: &[String],
    messages: &[M],
    deliveries: &[D],
) -> sqlx::Result<Vec<Envelope>> {
    let mut to: HashMap<String, Vec<Recipient>> = HashMap::new();
    for row in deliveries {
        let status = row.text("status")?;
        to.entry(row.text("message_id")?)
            .or_default()
            .push(Recipient {
                name: decode(Passname::try_from(row.text("participant")?))?,
                status: DeliveryStatus::parse(&status)
                    .ok_or_else(|| sqlx::Error::Decode(format!("status {status:?}").into()))?,
                changed_at: row.int("updated_at")?,
            });
    }
    let mut by_id = HashMap::new();
    for row in messages {
        let id = row.text("id")?;
        let request_status = row.maybe_text("request_status")?;
        let pool = row
            .maybe_text("pool")?
            .map(|p| {
                baton_core::pool::Pool::try_from(p.clone())
                    .map_err(|_| sqlx::Error::Decode(format!("pool {p:?}").into()))
            })
            .transpose()?;
        let envelope = Envelope {
            from: decode(Passname::try_from(row.text("from_name")?))?,
            to: to.remove(&id).unwrap_or_default(),
            pool,
            kind: message_type(row)?,
            topic: decode(Topic::try_from(row.text("topic")?))?,
            reply_to: row.maybe_text("reply_to")?,
            depth: row.int("depth")? as u32,
            excerpt: row.text("excerpt")?,
            size: row.int("size")? as u64,
            hash: row.text("hash")?,
            created_at: row.int("created_at")?,
            request_status: request_status.as_deref().and_then(RequestStatus::parse),
            replies: row.int("replies")? as u32,
            idempotency_key: row.maybe_text("idempotency_key")?,
            id: id.clone(),
        };
        by_id.insert(id, envelope);
    }
    Ok(ids.iter().filter_map(|id| by_id.remove(id)).collect())
}

/// An earlier message as the duplicate rule compares it, from `id, hash, type, topic,
/// reply_to, idempotency_key` and its recipients.
pub(crate) fn prior(row: &impl Columns, to: Vec<String>) -> sqlx::Result<Prior> {
    Ok(Prior {
        id: row.text("id")?,
        hash: row.text("hash")?,
        kind: row
            .text("type")?
            .parse()
            .map_err(|e: String| sqlx::Error::Decode(e.into()))?,
        topic: decode(Topic::try_from(row.text("topic")?))?,
        reply_to: row.maybe_text("reply_to")?,
        idempotency_key: row.maybe_text("idempotency_key")?,
        to: to
            .into_iter()
            .map(|n| decode(Passname::try_from(n)))
            .collect::<sqlx::Result<_>>()?,
    })
}

/// The payload of message `id`, from the data of its `message.sent` event.
pub(crate) fn payload(id: &str, data: &str) -> Result<Map<String, Value>> {
    let sent: baton_core::event::SentMessage = serde_json::from_str(data)
        .map_err(|e| StoreError::Engine(format!("message {id} is unreadable: {e}")))?;
    Ok(sent.payload)
}

/// Orders a thread's messages depth-first from the root, siblings oldest first.
pub(crate) fn depth_first(flat: Vec<Envelope>, root: &str) -> Vec<Envelope> {
    let mut children: HashMap<Option<String>, Vec<Envelope>> = HashMap::new();
    for env in flat {
        let parent = if env.id == root {
            None
        } else {
            env.reply_to.clone()
        };
        children.entry(parent).or_default().push(env);
    }
    let mut out = Vec::new();
    let mut stack: Vec<Envelope> = children.remove(&None).unwrap_or_default();
    stack.reverse();
    while let Some(env) = stack.pop() {
        if let Some(mut kids) = children.remove(&Some(env.id.clone())) {
            kids.reverse();
            stack.extend(kids);
        }
        out.push(env);
    }
    out
}

/// A search page from the `(seq, id)` rows a query found newest first, asking for one
/// more than `limit`: the ids of the page, and the cursor to the next page (empty when
/// this is the last).
pub(crate) fn page_ids(found: &[(i64, String)], limit: u32) -> (Vec<String>, Option<String>) {
    let more = found.len() > limit as usize;
    let found = &found[..found.len().min(limit as usize)];
    let next = match (more, found.last()) {
        (true, Some((seq, _))) => Some(encode_cursor(*seq)),
        _ => None,
    };
    (found.iter().map(|(_, id)| id.clone()).collect(), next)
}

/// The search cursor: the log position to continue before, opaque to callers.
pub fn encode_cursor(seq: i64) -> String {
    format!("c{seq:x}")
}

pub fn decode_cursor(cursor: &str) -> Result<i64> {
    cursor
        .strip_prefix('c')
        .and_then(|hex| i64::from_str_radix(hex, 16).ok())
        .ok_or_else(|| {
            Refusal::Cursor {
                cursor: cursor.to_owned(),
            }
            .into()
        })
}

#[cfg(test)]
mod status_tests {
    use super::*;

    /// The lists are the core's rules, spelled as the migrations' partial indexes spell
    /// theirs: a query repeating an index's predicate word for word is one its planner
    /// can serve from it.
    #[test]
    fn status_lists_are_the_cores_rules_as_the_indexes_spell_them() {
        assert_eq!(live_runs(), "('registered', 'running', 'untracked')");
        assert_eq!(failed_runs(), "('failed', 'lost')");
        assert_eq!(clearing_run(), "'done'");
        assert_eq!(
            closed_orders(),
            "('approved', 'declined', 'expired', 'cancelled')"
        );
        for (migration, predicate) in [
            (
                include_str!("sqlite/migrations/018_failures.sql"),
                failed_runs(),
            ),
            (
                include_str!("postgres/migrations/012_failures.sql"),
                failed_runs(),
            ),
            (
                include_str!("sqlite/migrations/017_attention.sql"),
                closed_orders(),
            ),
            (
                include_str!("postgres/migrations/011_attention.sql"),
                closed_orders(),
            ),
        ] {
            assert!(migration.contains(&predicate), "{predicate} in {migration}");
        }
    }
}
