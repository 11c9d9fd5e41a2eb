//! The event log in PostgreSQL, read back: by position, by kind, by subject and by id; a
//! project's generation; when a subject last changed; and the repeats counted on a security
//! event (bookkeeping beside the log, which a rebuild keeps).

use baton_core::negotiation::Negotiation;
use baton_core::{Event, Millis};
use sqlx::postgres::{PgConnection, PgPool};

use crate::Repeats;
use crate::decode;

/// Project `project`'s events after `after`, oldest first, at most `limit`.
pub(super) async fn read(
    conn: &mut PgConnection,
    project: i64,
    after: i64,
    limit: i64,
) -> sqlx::Result<Vec<Event>> {
    let found = sqlx::query(
        "SELECT seq, id, at, actor, kind, data FROM events \
         WHERE project = $1 AND seq > $2 ORDER BY seq LIMIT $3",
    )
    .bind(project)
    .bind(after)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    decode::events(&found)
}

/// Project `project`'s events of `kinds` after `after_seq`, oldest first, at most a
/// thousand: how a migration fills a new projection from a log, a batch at a time.
pub(super) async fn of_kinds(
    conn: &mut PgConnection,
    project: i64,
    kinds: &[&str],
    after_seq: i64,
) -> sqlx::Result<Vec<Event>> {
    let found = sqlx::query(
        "SELECT seq, id, at, actor, kind, data FROM events \
         WHERE project = $1 AND seq > $2 AND kind = ANY($3) ORDER BY seq LIMIT 1000",
    )
    .bind(project)
    .bind(after_seq)
    .bind(kinds)
    .fetch_all(&mut *conn)
    .await?;
    decode::events(&found)
}

/// The events of `kind` about `subject`, oldest first.
pub(super) async fn about(
    conn: &mut PgConnection,
    project: i64,
    subject: &str,
    kind: &str,
) -> sqlx::Result<Vec<Event>> {
    let found = sqlx::query(
        "SELECT seq, id, at, actor, kind, data FROM events \
         WHERE project = $1 AND subject = $2 AND kind = $3 ORDER BY seq",
    )
    .bind(project)
    .bind(subject)
    .bind(kind)
    .fetch_all(&mut *conn)
    .await?;
    decode::events(&found)
}

/// Negotiation `id`: the fold of its events, found by the subject index.
pub(super) async fn negotiation(
    conn: &mut PgConnection,
    project: i64,
    id: &str,
) -> sqlx::Result<Option<Negotiation>> {
    Ok(Negotiation::replay(
        &about(conn, project, id, "negotiation.changed").await?,
    ))
}

/// The newest `limit` events of `kind` before `before_seq`, newest first.
pub(super) async fn of_kind(
    pool: &PgPool,
    project: i64,
    kind: &str,
    before_seq: Option<i64>,
    limit: u32,
) -> sqlx::Result<Vec<Event>> {
    let found = sqlx::query(
        "SELECT seq, id, at, actor, kind, data FROM events \
         WHERE project = $1 AND kind = $2 AND seq < $3 ORDER BY seq DESC LIMIT $4",
    )
    .bind(project)
    .bind(kind)
    .bind(before_seq.unwrap_or(i64::MAX))
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    decode::events(&found)
}

/// When `subject` last changed after `after_seq`.
pub(super) async fn last_change(
    pool: &PgPool,
    project: i64,
    subject: &str,
    after_seq: i64,
) -> sqlx::Result<Option<Millis>> {
    sqlx::query_scalar(
        "SELECT max(at) FROM events WHERE project = $1 AND subject = $2 AND seq > $3",
    )
    .bind(project)
    .bind(subject)
    .bind(after_seq)
    .fetch_one(pool)
    .await
}

/// The project's generation: the sequence number of its newest event.
pub(super) async fn generation(pool: &PgPool, project: i64) -> sqlx::Result<i64> {
    // The counter moves in the same transaction as the events it numbers.
    sqlx::query_scalar("SELECT last_seq FROM projects WHERE id = $1")
        .bind(project)
        .fetch_one(pool)
        .await
}

/// Whether the log holds an event with this id.
pub(super) async fn has(conn: &mut PgConnection, project: i64, id: &str) -> sqlx::Result<bool> {
    let found: Option<i32> =
        sqlx::query_scalar("SELECT 1 FROM events WHERE project = $1 AND id = $2")
            .bind(project)
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
    Ok(found.is_some())
}

/// Whether the log holds an event of a kind not among `kinds`.
pub(super) async fn any_beyond(
    conn: &mut PgConnection,
    project: i64,
    kinds: &[&str],
) -> sqlx::Result<bool> {
    let found: Option<i32> =
        sqlx::query_scalar("SELECT 1 FROM events WHERE project = $1 AND kind <> ALL($2) LIMIT 1")
            .bind(project)
            .bind(kinds)
            .fetch_optional(&mut *conn)
            .await?;
    Ok(found.is_some())
}

/// The event with this id, as the log holds it.
pub(super) async fn by_id(
    conn: &mut PgConnection,
    project: i64,
    id: &str,
) -> sqlx::Result<Option<Event>> {
    let found = sqlx::query(
        "SELECT seq, id, at, actor, kind, data FROM events WHERE project = $1 AND id = $2",
    )
    .bind(project)
    .bind(id)
    .fetch_all(&mut *conn)
    .await
    .and_then(|found| decode::events(&found));
    Ok(found?.into_iter().next())
}

/// How many events at or after `seq` are of a kind not among `kinds`.
pub(super) async fn count_beyond_from(
    conn: &mut PgConnection,
    project: i64,
    seq: i64,
    kinds: &[&str],
) -> sqlx::Result<usize> {
    let n: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM events WHERE project = $1 AND seq >= $2 AND kind <> ALL($3)",
    )
    .bind(project)
    .bind(seq)
    .bind(kinds)
    .fetch_one(&mut *conn)
    .await?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// Counts a repeat, at `at`, of the security event at `seq`.
pub(super) async fn count_repeat(
    pool: &PgPool,
    project: i64,
    seq: i64,
    at: Millis,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO refusal_repeats (project, seq, count, last_at) VALUES ($1, $2, 1, $3) \
         ON CONFLICT (project, seq) DO UPDATE SET count = refusal_repeats.count + 1, \
         last_at = greatest(refusal_repeats.last_at, excluded.last_at)",
    )
    .bind(project)
    .bind(seq)
    .bind(at)
    .execute(pool)
    .await?;
    Ok(())
}

/// The repeats counted on the security events at `seqs` (those with none are absent).
pub(super) async fn repeats(
    pool: &PgPool,
    project: i64,
    seqs: &[i64],
) -> sqlx::Result<Vec<Repeats>> {
    let found: Vec<(i64, i64, i64)> = sqlx::query_as(
        "SELECT seq, count, last_at FROM refusal_repeats \
         WHERE project = $1 AND seq = ANY($2)",
    )
    .bind(project)
    .bind(seqs)
    .fetch_all(pool)
    .await?;
    Ok(found
        .into_iter()
        .map(|(seq, count, last_at)| Repeats {
            seq,
            count,
            last_at,
        })
        .collect())
}
