//! Participants in PostgreSQL: the `participants` projection (each one's name, role and
//! authority policy), keyed by project, and the reads over it.

use baton_core::{Change, Event, Participant, Passname, Policy};
use sqlx::postgres::{PgConnection, PgPool};

use crate::decode;

/// Applies a participant's addition or policy to its row; any other change is not this family's.
pub(super) async fn project(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
) -> sqlx::Result<()> {
    match &event.change {
        Change::ParticipantAdded { name, role } => added(conn, project, event, name, role).await,
        Change::PolicySet { name, policy } => {
            policy_set(conn, project, name, policy.as_ref()).await
        }
        _ => Ok(()),
    }
}

/// Projects a participant's registration (a role given again replaces its role).
pub(super) async fn added(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
    name: &Passname,
    role: &str,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO participants (project, name, role, added_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (project, name) DO UPDATE SET role = excluded.role",
    )
    .bind(project)
    .bind(name.as_str())
    .bind(role)
    .bind(event.at)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Projects a participant's policy set (`None`: back to its role's default).
pub(super) async fn policy_set(
    conn: &mut PgConnection,
    project: i64,
    name: &Passname,
    policy: Option<&Policy>,
) -> sqlx::Result<()> {
    sqlx::query("UPDATE participants SET policy = $1 WHERE project = $2 AND name = $3")
        .bind(decode::policy_text(policy))
        .bind(project)
        .bind(name.as_str())
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Every participant, by name (byte-wise, as SQLite orders them).
pub(super) async fn all(pool: &PgPool, project: i64) -> sqlx::Result<Vec<Participant>> {
    let found = sqlx::query(
        "SELECT name, role, added_at, policy FROM participants WHERE project = $1 \
         ORDER BY name COLLATE \"C\"",
    )
    .bind(project)
    .fetch_all(pool)
    .await?;
    found.iter().map(decode::participant).collect()
}

/// Participant `name`, if it is registered.
pub(super) async fn load(
    conn: &mut PgConnection,
    project: i64,
    name: &str,
) -> sqlx::Result<Option<Participant>> {
    let row = sqlx::query(
        "SELECT name, role, added_at, policy FROM participants WHERE project = $1 AND name = $2",
    )
    .bind(project)
    .bind(name)
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(decode::participant).transpose()
}

/// This family's projection rows as text, in a stable order, for `projection_dump`
/// (`$1`: the project).
pub(super) const DUMP: &[&str] = &[
    "SELECT 'p|' || name || '|' || role || '|' || added_at || '|' || coalesce(policy, '') \
     FROM participants \
     WHERE project = $1 ORDER BY name COLLATE \"C\"",
];
