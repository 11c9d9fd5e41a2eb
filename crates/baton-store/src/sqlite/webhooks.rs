//! Webhooks in SQLite: the `webhooks` projection of `webhook.changed`, and the delivery
//! bookkeeping beside it (claimed, settled) that the log does not hold.

use baton_core::Event;
use baton_core::webhook::{Webhook, WebhookChange};
use sqlx::sqlite::{SqliteConnection, SqlitePool};

use crate::Settled;
use crate::rows::{self, WEBHOOK_COLUMNS};

/// Applies one webhook event (live writes and replay alike). A new webhook starts at its
/// event: what happened before it was set is not told. A changed URL keeps the cursor:
/// what was pending goes to the new URL.
pub(super) async fn project(
    conn: &mut SqliteConnection,
    event: &Event,
    change: &WebhookChange,
) -> sqlx::Result<()> {
    match change {
        WebhookChange::Set {
            participant,
            url,
            secret,
        } => {
            sqlx::query(
                "INSERT INTO webhooks (participant, url, secret, set_seq, cursor) \
                 VALUES (?, ?, ?, ?, ?) \
                 ON CONFLICT (participant) DO UPDATE SET url = excluded.url, \
                 secret = excluded.secret, set_seq = excluded.set_seq, failures = 0, \
                 next_at = 0, last_error = NULL",
            )
            .bind(participant.as_str())
            .bind(url)
            .bind(secret)
            .bind(event.seq)
            .bind(event.seq)
            .execute(&mut *conn)
            .await?;
        }
        WebhookChange::Removed { participant } => {
            sqlx::query("DELETE FROM webhooks WHERE participant = ?")
                .bind(participant.as_str())
                .execute(&mut *conn)
                .await?;
        }
    }
    Ok(())
}

pub(super) async fn load(
    conn: &mut SqliteConnection,
    participant: &str,
) -> sqlx::Result<Option<Webhook>> {
    let sql = format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE participant = ?");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(participant)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(rows::webhook).transpose()
}

pub(super) async fn all(pool: &SqlitePool) -> sqlx::Result<Vec<Webhook>> {
    let sql = format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks ORDER BY participant");
    let found = sqlx::query(sqlx::AssertSqlSafe(sql))
        .fetch_all(pool)
        .await?;
    found.iter().map(rows::webhook).collect()
}

/// Leases the webhook due first whose cursor the log has passed (one statement: SQLite has
/// one writer at a time).
pub(super) async fn claim(
    pool: &SqlitePool,
    now: i64,
    lease_until: i64,
) -> sqlx::Result<Option<Webhook>> {
    let sql = format!(
        "UPDATE webhooks SET lease_until = ? WHERE participant = ( \
           SELECT participant FROM webhooks \
           WHERE next_at <= ? AND lease_until <= ? \
             AND cursor < (SELECT coalesce(max(seq), 0) FROM events) \
           ORDER BY next_at, participant LIMIT 1) \
         RETURNING {WEBHOOK_COLUMNS}"
    );
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(lease_until)
        .bind(now)
        .bind(now)
        .fetch_optional(pool)
        .await?;
    row.as_ref().map(rows::webhook).transpose()
}

/// Records how a claimed delivery went and ends the lease; nothing when the webhook was
/// set anew or removed meanwhile (the new one starts from its own state).
pub(super) async fn settle(
    pool: &SqlitePool,
    hook: &Webhook,
    settled: &Settled,
) -> sqlx::Result<()> {
    let query = match settled {
        Settled::Told { cursor, at } => sqlx::query(
            "UPDATE webhooks SET cursor = max(cursor, ?), failures = 0, next_at = 0, \
             lease_until = 0, last_error = NULL, delivered_at = ? \
             WHERE participant = ? AND set_seq = ?",
        )
        .bind(cursor)
        .bind(at),
        Settled::Passed { cursor } => sqlx::query(
            "UPDATE webhooks SET cursor = max(cursor, ?), lease_until = 0 \
             WHERE participant = ? AND set_seq = ?",
        )
        .bind(cursor),
        Settled::Failed {
            failures,
            next_at,
            error,
        } => sqlx::query(
            "UPDATE webhooks SET failures = ?, next_at = ?, last_error = ?, lease_until = 0 \
             WHERE participant = ? AND set_seq = ?",
        )
        .bind(i64::from(*failures))
        .bind(next_at)
        .bind(error),
    };
    query
        .bind(hook.participant.as_str())
        .bind(hook.set_seq)
        .execute(pool)
        .await?;
    Ok(())
}
