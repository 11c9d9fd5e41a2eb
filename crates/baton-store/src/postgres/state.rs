//! The project state in PostgreSQL: the `state` projection, the fold of every
//! `state.changed` event (`baton_core::state`), kept whole as JSON, and beside it its
//! digest, the newest entries of each list; one row of each a project.

use baton_core::state::{DIGEST_ITEMS, ProjectState, StateDigest};
use baton_core::{Change, Event};
use sqlx::AssertSqlSafe;
use sqlx::postgres::PgConnection;

use crate::decode;

/// Applies a change of the project state to its row and its digest; any other change is not this family's.
pub(super) async fn project(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
) -> sqlx::Result<()> {
    match &event.change {
        Change::State(_) => advance(conn, project, event).await,
        _ => Ok(()),
    }
}

/// The project state: the fold of every `state.changed` event, as its projection keeps it.
pub(super) async fn read(conn: &mut PgConnection, project: i64) -> sqlx::Result<ProjectState> {
    let data: Option<String> = sqlx::query_scalar("SELECT data FROM state WHERE project = $1")
        .bind(project)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(match data {
        Some(data) => decode::folded(&data)?,
        None => ProjectState::default(),
    })
}

/// The state's digest as its projection keeps it; made from the whole state when a
/// database older than the digest has not changed the project's state since.
pub(super) async fn digest(conn: &mut PgConnection, project: i64) -> sqlx::Result<StateDigest> {
    let data: Option<String> =
        sqlx::query_scalar("SELECT data FROM state_digest WHERE project = $1")
            .bind(project)
            .fetch_optional(&mut *conn)
            .await?;
    Ok(match data {
        Some(data) => decode::folded(&data)?,
        None => read(conn, project).await?.digest(DIGEST_ITEMS),
    })
}

/// Folds one state event into the project's state projection and its digest.
pub(super) async fn advance(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
) -> sqlx::Result<()> {
    let mut state = read(conn, project).await?;
    state.apply(event);
    let (data, digest) = decode::state_rows(&state);
    for (table, data) in [("state", data), ("state_digest", digest)] {
        let sql = format!(
            "INSERT INTO {table} (project, data) VALUES ($1, $2) \
             ON CONFLICT (project) DO UPDATE SET data = excluded.data"
        );
        sqlx::query(AssertSqlSafe(sql))
            .bind(project)
            .bind(data)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// This family's projection rows as text, in a stable order, for `projection_dump`
/// (`$1`: the project).
pub(super) const DUMP: &[&str] = &[
    "SELECT 's|' || data FROM state WHERE project = $1",
    "SELECT 'g|' || data FROM state_digest WHERE project = $1",
];
