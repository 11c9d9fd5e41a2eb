//! Webhooks in SQLite: the `webhooks` projection of `webhook.changed`, and the delivery
//! bookkeeping beside it (claimed, settled) that the log does not hold.

use baton_core::webhook::{Webhook, WebhookChange};
use baton_core::{Change, Event};
use rusqlite::{Connection, params};

use super::conn::{Sql, exec};
use super::rows::{row, rows};
use crate::Settled;
use crate::decode::{self, WEBHOOK_COLUMNS};

/// Applies a webhook's change to its row; any other change is not this family's.
pub(super) fn project(conn: &Connection, event: &Event) -> Sql<()> {
    match &event.change {
        Change::Webhook(change) => apply(conn, event, change),
        _ => Ok(()),
    }
}

/// Applies one webhook event (live writes and replay alike). A new webhook starts at its
/// event: what happened before it was set is not told. A changed URL keeps the cursor:
/// what was pending goes to the new URL.
fn apply(conn: &Connection, event: &Event, change: &WebhookChange) -> Sql<()> {
    match change {
        WebhookChange::Set {
            participant,
            url,
            secret,
        } => {
            exec(
                conn,
                "INSERT INTO webhooks (participant, url, secret, set_seq, cursor) \
                 VALUES (?, ?, ?, ?, ?) \
                 ON CONFLICT (participant) DO UPDATE SET url = excluded.url, \
                 secret = excluded.secret, set_seq = excluded.set_seq, failures = 0, \
                 next_at = 0, last_error = NULL",
                params![participant.as_str(), url, secret, event.seq, event.seq],
            )?;
        }
        WebhookChange::Removed { participant } => {
            exec(
                conn,
                "DELETE FROM webhooks WHERE participant = ?",
                [participant.as_str()],
            )?;
        }
    }
    Ok(())
}

pub(super) fn load(conn: &Connection, participant: &str) -> Sql<Option<Webhook>> {
    let sql = format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE participant = ?");
    let found = row(conn, &sql, [participant])?;
    Ok(found.as_ref().map(decode::webhook).transpose()?)
}

pub(super) fn all(conn: &Connection) -> Sql<Vec<Webhook>> {
    let sql = format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks ORDER BY participant");
    let found = rows(conn, &sql, [])?;
    Ok(found
        .iter()
        .map(decode::webhook)
        .collect::<sqlx::Result<_>>()?)
}

/// Leases the webhook due first whose cursor the log has passed (one statement: SQLite has
/// one writer at a time).
pub(super) fn claim(conn: &Connection, now: i64, lease_until: i64) -> Sql<Option<Webhook>> {
    let sql = format!(
        "UPDATE webhooks SET lease_until = ? WHERE participant = ( \
           SELECT participant FROM webhooks \
           WHERE next_at <= ? AND lease_until <= ? \
             AND cursor < (SELECT coalesce(max(seq), 0) FROM events) \
           ORDER BY next_at, participant LIMIT 1) \
         RETURNING {WEBHOOK_COLUMNS}"
    );
    let found = row(conn, &sql, params![lease_until, now, now])?;
    Ok(found.as_ref().map(decode::webhook).transpose()?)
}

/// Records how a claimed delivery went and ends the lease; nothing when the webhook was
/// set anew or removed meanwhile (the new one starts from its own state).
pub(super) fn settle(conn: &Connection, hook: &Webhook, settled: &Settled) -> Sql<()> {
    let who = hook.participant.as_str();
    match settled {
        Settled::Told { cursor, at } => exec(
            conn,
            "UPDATE webhooks SET cursor = max(cursor, ?), failures = 0, next_at = 0, \
             lease_until = 0, last_error = NULL, delivered_at = ? \
             WHERE participant = ? AND set_seq = ?",
            params![cursor, at, who, hook.set_seq],
        ),
        Settled::Passed { cursor } => exec(
            conn,
            "UPDATE webhooks SET cursor = max(cursor, ?), lease_until = 0 \
             WHERE participant = ? AND set_seq = ?",
            params![cursor, who, hook.set_seq],
        ),
        Settled::Failed {
            failures,
            next_at,
            error,
        } => exec(
            conn,
            "UPDATE webhooks SET failures = ?, next_at = ?, last_error = ?, lease_until = 0 \
             WHERE participant = ? AND set_seq = ?",
            params![i64::from(*failures), next_at, error, who, hook.set_seq],
        ),
    }?;
    Ok(())
}

/// This family's projection rows as text, in a stable order, for `projection_dump`.
pub(super) const DUMP: &[&str] = &[
    "SELECT 'w|' || participant || '|' || url || '|' || set_seq \
     FROM webhooks ORDER BY participant",
];
