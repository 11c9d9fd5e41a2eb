//! Keys in PostgreSQL: the `keys` projection, each row the fold of its key's `key.changed`
//! events (`baton_core::key::fold`), kept whole as JSON, keyed by project, and beside it
//! `key_uses`, each key's last recorded use (not in the log, so a rebuild keeps it). The
//! token itself is never stored.

use baton_core::key::{self, Key, KeyChange};
use baton_core::{Change, Event};
use sqlx::AssertSqlSafe;
use sqlx::postgres::{PgConnection, PgPool};

use super::rows::load_folded;
use crate::decode;

/// Applies a key's change to its row; any other change is not this family's.
pub(super) async fn project(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
) -> sqlx::Result<()> {
    match &event.change {
        Change::Key(change) => apply(conn, project, event, change).await,
        _ => Ok(()),
    }
}

/// Applies one key event to the projection (live writes and replay alike).
async fn apply(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
    change: &KeyChange,
) -> sqlx::Result<()> {
    let current = load(conn, project, change.key()).await?;
    let Some(k) = key::fold(current, change, event.at) else {
        return Ok(());
    };
    let data = serde_json::to_string(&k).expect("a key always serializes");
    sqlx::query(
        "INSERT INTO keys (project, id, seq, participant, data) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (project, id) DO UPDATE SET data = excluded.data",
    )
    .bind(project)
    .bind(&k.id)
    .bind(event.seq)
    .bind(k.participant.as_str())
    .bind(data)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub(super) async fn load(
    conn: &mut PgConnection,
    project: i64,
    id: &str,
) -> sqlx::Result<Option<Key>> {
    load_folded(
        conn,
        "SELECT data FROM keys WHERE project = $1 AND id = $2",
        project,
        id,
    )
    .await
}

const USED: &str = "SELECT k.data, u.used_at FROM keys k \
     LEFT JOIN key_uses u ON u.project = k.project AND u.id = k.id WHERE k.project = $1";

/// The key with its last recorded use.
pub(super) async fn used(pool: &PgPool, project: i64, id: &str) -> sqlx::Result<Option<Key>> {
    let found = sqlx::query(AssertSqlSafe(format!("{USED} AND k.id = $2")))
        .bind(project)
        .bind(id)
        .fetch_optional(pool)
        .await?;
    found.as_ref().map(decode::used_key).transpose()
}

/// Every key of the project with its last recorded use, oldest first.
pub(super) async fn all(pool: &PgPool, project: i64) -> sqlx::Result<Vec<Key>> {
    let found = sqlx::query(AssertSqlSafe(format!("{USED} ORDER BY k.seq")))
        .bind(project)
        .fetch_all(pool)
        .await?;
    found.iter().map(decode::used_key).collect()
}

/// Records a use of key `id` at `at` (a later one than recorded wins).
pub(super) async fn record_use(pool: &PgPool, project: i64, id: &str, at: i64) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO key_uses (project, id, used_at) VALUES ($1, $2, $3) \
         ON CONFLICT (project, id) DO UPDATE \
         SET used_at = greatest(key_uses.used_at, excluded.used_at)",
    )
    .bind(project)
    .bind(id)
    .bind(at)
    .execute(pool)
    .await?;
    Ok(())
}

/// This family's projection rows as text, in a stable order, for `projection_dump`
/// (`$1`: the project).
pub(super) const DUMP: &[&str] = &[
    "SELECT 'k|' || id || '|' || seq || '|' || participant || '|' || data \
     FROM keys WHERE project = $1 ORDER BY id COLLATE \"C\"",
];
