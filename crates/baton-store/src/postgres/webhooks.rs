//! Webhooks in PostgreSQL: the `webhooks` projection of `webhook.changed`, and the
//! delivery bookkeeping beside it. Several servers share the work: each claims the due
//! webhook first in line that no other holds (`FOR UPDATE SKIP LOCKED`) and leases it.

use baton_core::webhook::{Webhook, WebhookChange};
use baton_core::{Change, Event};
use sqlx::postgres::{PgConnection, PgPool};

use crate::Settled;
use crate::decode::{self, WEBHOOK_COLUMNS};

/// Applies a webhook's change to its row; any other change is not this family's.
pub(super) async fn project(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
) -> sqlx::Result<()> {
    match &event.change {
        Change::Webhook(change) => apply(conn, project, event, change).await,
        _ => Ok(()),
    }
}

/// Applies one webhook event (live writes and replay alike); see the SQLite twin.
async fn apply(
    conn: &mut PgConnection,
    project: i64,
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
                "INSERT INTO webhooks (project, participant, url, secret, set_seq, cursor) \
                 VALUES ($1, $2, $3, $4, $5, $5) \
                 ON CONFLICT (project, participant) DO UPDATE SET url = excluded.url, \
                 secret = excluded.secret, set_seq = excluded.set_seq, failures = 0, \
                 next_at = 0, last_error = NULL",
            )
            .bind(project)
            .bind(participant.as_str())
            .bind(url)
            .bind(secret)
            .bind(event.seq)
            .execute(&mut *conn)
            .await?;
        }
        WebhookChange::Removed { participant } => {
            sqlx::query("DELETE FROM webhooks WHERE project = $1 AND participant = $2")
                .bind(project)
                .bind(participant.as_str())
                .execute(&mut *conn)
                .await?;
        }
    }
    Ok(())
}

pub(super) async fn load(
    conn: &mut PgConnection,
    project: i64,
    participant: &str,
) -> sqlx::Result<Option<Webhook>> {
    let sql =
        format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE project = $1 AND participant = $2");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(project)
        .bind(participant)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(decode::webhook).transpose()
}

pub(super) async fn all(pool: &PgPool, project: i64) -> sqlx::Result<Vec<Webhook>> {
    let sql = format!(
        "SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE project = $1 \
         ORDER BY participant COLLATE \"C\""
    );
    let found = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(project)
        .fetch_all(pool)
        .await?;
    found.iter().map(decode::webhook).collect()
}

/// Leases the webhook due first whose cursor the log has passed, skipping rows another
/// server is claiming this instant.
pub(super) async fn claim(
    pool: &PgPool,
    project: i64,
    now: i64,
    lease_until: i64,
) -> sqlx::Result<Option<Webhook>> {
    let sql = format!(
        "UPDATE webhooks SET lease_until = $3 \
         WHERE project = $1 AND participant = ( \
           SELECT participant FROM webhooks \
           WHERE project = $1 AND next_at <= $2 AND lease_until <= $2 \
             AND cursor < (SELECT coalesce(max(seq), 0) FROM events WHERE project = $1) \
           ORDER BY next_at, participant LIMIT 1 \
           FOR UPDATE SKIP LOCKED) \
         RETURNING {WEBHOOK_COLUMNS}"
    );
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(project)
        .bind(now)
        .bind(lease_until)
        .fetch_optional(pool)
        .await?;
    row.as_ref().map(decode::webhook).transpose()
}

/// Records how a claimed delivery went and ends the lease; see the SQLite twin.
pub(super) async fn settle(
    pool: &PgPool,
    project: i64,
    hook: &Webhook,
    settled: &Settled,
) -> sqlx::Result<()> {
    let query = match settled {
        Settled::Told { cursor, at } => sqlx::query(
            "UPDATE webhooks SET cursor = greatest(cursor, $4), failures = 0, next_at = 0, \
             lease_until = 0, last_error = NULL, delivered_at = $5 \
             WHERE project = $1 AND participant = $2 AND set_seq = $3",
        )
        .bind(project)
        .bind(hook.participant.as_str())
        .bind(hook.set_seq)
        .bind(cursor)
        .bind(at),
        Settled::Passed { cursor } => sqlx::query(
            "UPDATE webhooks SET cursor = greatest(cursor, $4), lease_until = 0 \
             WHERE project = $1 AND participant = $2 AND set_seq = $3",
        )
        .bind(project)
        .bind(hook.participant.as_str())
        .bind(hook.set_seq)
        .bind(cursor),
        Settled::Failed {
            failures,
            next_at,
            error,
        } => sqlx::query(
            "UPDATE webhooks SET failures = $4, next_at = $5, last_error = $6, lease_until = 0 \
             WHERE project = $1 AND participant = $2 AND set_seq = $3",
        )
        .bind(project)
        .bind(hook.participant.as_str())
        .bind(hook.set_seq)
        .bind(i64::from(*failures))
        .bind(next_at)
        .bind(error),
    };
    query.execute(pool).await?;
    Ok(())
}

/// This family's projection rows as text, in a stable order, for `projection_dump`
/// (`$1`: the project).
pub(super) const DUMP: &[&str] = &[
    "SELECT 'w|' || participant || '|' || url || '|' || set_seq \
     FROM webhooks WHERE project = $1 ORDER BY participant COLLATE \"C\"",
];
