//! Keys in PostgreSQL: the `keys` projection, each row the fold of its key's `key.changed`
//! events (`baton_core::key::fold`), kept whole as JSON, keyed by project. The token itself
//! is never stored.

use baton_core::Event;
use baton_core::key::{self, Key, KeyChange};
use sqlx::postgres::{PgConnection, PgPool};

use super::load_folded;
use crate::rows;

/// Applies one key event to the projection (live writes and replay alike).
pub(super) async fn project(
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

/// Every key of the project, oldest first.
pub(super) async fn all(pool: &PgPool, project: i64) -> sqlx::Result<Vec<Key>> {
    let found: Vec<String> =
        sqlx::query_scalar("SELECT data FROM keys WHERE project = $1 ORDER BY seq")
            .bind(project)
            .fetch_all(pool)
            .await?;
    found.iter().map(|d| rows::folded(d)).collect()
}
