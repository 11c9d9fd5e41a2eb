//! Keys in SQLite: the `keys` projection, each row the fold of its key's `key.changed`
//! events (`baton_core::key::fold`), kept whole as JSON. The token itself is never stored.

use baton_core::Event;
use baton_core::key::{self, Key, KeyChange};
use sqlx::sqlite::{SqliteConnection, SqlitePool};

use super::load_folded;

/// Applies one key event to the projection (live writes and replay alike).
pub(super) async fn project(
    conn: &mut SqliteConnection,
    event: &Event,
    change: &KeyChange,
) -> sqlx::Result<()> {
    let current = load(conn, change.key()).await?;
    let Some(k) = key::fold(current, change, event.at) else {
        return Ok(());
    };
    let data = serde_json::to_string(&k).expect("a key always serializes");
    sqlx::query(
        "INSERT INTO keys (id, seq, participant, data) VALUES (?, ?, ?, ?) \
         ON CONFLICT (id) DO UPDATE SET data = excluded.data",
    )
    .bind(&k.id)
    .bind(event.seq)
    .bind(k.participant.as_str())
    .bind(data)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub(super) async fn load(conn: &mut SqliteConnection, id: &str) -> sqlx::Result<Option<Key>> {
    load_folded(conn, "SELECT data FROM keys WHERE id = ?", id).await
}

/// Every key, oldest first.
pub(super) async fn all(pool: &SqlitePool) -> sqlx::Result<Vec<Key>> {
    let rows: Vec<String> = sqlx::query_scalar("SELECT data FROM keys ORDER BY seq")
        .fetch_all(pool)
        .await?;
    rows.iter()
        .map(|d| serde_json::from_str(d).map_err(|e| sqlx::Error::Decode(Box::new(e))))
        .collect()
}
