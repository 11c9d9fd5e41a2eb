//! Rows read back whole: a record kept as the JSON of its fold, and the ids of a kind of
//! record in a span, for a lookup by prefix. The shared decoders ([`crate::decode`]) read
//! sqlx's rows by column name.

use baton_core::id::Span;
use sqlx::AssertSqlSafe;
use sqlx::postgres::{PgConnection, PgPool};

use crate::decode;

/// A projection row kept as the JSON of its fold (runs, orders): `query` selects its `data`
/// column by project (`$1`) and id (`$2`).
pub(super) async fn load_folded<T: serde::de::DeserializeOwned>(
    conn: &mut PgConnection,
    query: &'static str,
    project: i64,
    id: &str,
) -> sqlx::Result<Option<T>> {
    let data: Option<String> = sqlx::query_scalar(query)
        .bind(project)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    data.as_deref().map(decode::folded).transpose()
}

/// The ids of `table` in each of `spans`, the first [`decode::IDS_A_SPAN`] of each in
/// order.
pub(super) async fn ids(
    pool: &PgPool,
    project: i64,
    table: &str,
    spans: &[Span],
) -> sqlx::Result<Vec<String>> {
    // Compared byte by byte (`C`), whatever the database's collation, as the spans are.
    let sql = format!(
        "SELECT id FROM {table} WHERE project = $1 \
         AND id COLLATE \"C\" >= $2 AND id COLLATE \"C\" < $3 \
         ORDER BY id COLLATE \"C\" LIMIT {}",
        decode::IDS_A_SPAN
    );
    let mut found = Vec::new();
    for span in spans {
        let ids: Vec<String> = sqlx::query_scalar(AssertSqlSafe(sql.clone()))
            .bind(project)
            .bind(&span.from)
            .bind(&span.to)
            .fetch_all(pool)
            .await?;
        found.extend(ids);
    }
    Ok(found)
}
