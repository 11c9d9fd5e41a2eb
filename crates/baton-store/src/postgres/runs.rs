//! The run ledger in PostgreSQL: the `runs` projection, each row the fold of its run's
//! `run.changed` events (`baton_core::run::fold`), kept whole as JSON, keyed by project.

use baton_core::Millis;
use baton_core::run::{self, Run, RunChange, Source};
use baton_core::{Change, Event};
use sqlx::postgres::{PgConnection, PgPool};
use sqlx::{Postgres, QueryBuilder};

use super::rows::load_folded;
use crate::decode;
use crate::{RunCount, RunQuery};

/// A row's source as SQL (a row older than sources is one of `baton run`'s).
const SOURCE: &str = "coalesce(data::json ->> 'source', 'wrapper')";

/// The row a helper's row is under, as SQL: the expression `runs_parent` indexes.
const PARENT: &str = "((data::jsonb) ->> 'parent')";

/// How many runs have each status and source, of the live ones and those ended since
/// `ended_since`, and how many of those had no event since `quiet_before`; with
/// `parents`, of those rows' helpers only. The live rows and the ended ones are read
/// apart, each from its own index (an `OR` of the two would read every row).
pub(super) async fn counts(
    pool: &PgPool,
    project: i64,
    ended_since: Millis,
    quiet_before: Millis,
    parents: Option<&[String]>,
) -> sqlx::Result<Vec<RunCount>> {
    let live = decode::live_runs();
    let of = |sql: &mut QueryBuilder<Postgres>| {
        if let Some(parents) = parents {
            sql.push(format!(" AND {PARENT} = ANY("))
                .push_bind(parents.to_vec())
                .push(")");
        }
    };
    let mut sql = QueryBuilder::<Postgres>::new(format!(
        "SELECT status, {SOURCE} AS source, {PARENT} AS parent, count(*) AS n, \
         sum(CASE WHEN (data::json ->> 'last_event_at')::bigint < "
    ));
    sql.push_bind(quiet_before)
        .push(" THEN 1 ELSE 0 END) AS quiet FROM (SELECT status, data FROM runs WHERE project = ")
        .push_bind(project)
        .push(format!(" AND status IN {live}"));
    of(&mut sql);
    sql.push(" UNION ALL SELECT status, data FROM runs WHERE project = ")
        .push_bind(project)
        .push(" AND ended_at >= ")
        .push_bind(ended_since)
        .push(format!(" AND status NOT IN {live}"));
    of(&mut sql);
    sql.push(") AS counted GROUP BY status, source, parent");
    let found = sql.build().fetch_all(pool).await?;
    decode::run_counts(&found)
}

/// The condition that leaves helpers out when `query` asks it (empty otherwise).
fn without_helpers(query: &RunQuery) -> String {
    if query.without_helpers {
        format!("AND {SOURCE} <> '{}'", Source::Helper.as_str())
    } else {
        String::new()
    }
}

/// Applies a run's change to its row; any other change is not this family's.
pub(super) async fn project(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
) -> sqlx::Result<()> {
    match &event.change {
        Change::Run(change) => apply(conn, project, event, change).await,
        _ => Ok(()),
    }
}

/// Applies one run event to the projection (live writes and replay alike).
async fn apply(
    conn: &mut PgConnection,
    project: i64,
    event: &Event,
    change: &RunChange,
) -> sqlx::Result<()> {
    let Some(id) = change.run() else {
        return Ok(());
    };
    let current = load(conn, project, id).await?;
    if let Some(run) = run::fold(current, change, event.seq, event.at, &event.actor) {
        save(conn, project, &run).await?;
    }
    Ok(())
}

pub(super) async fn load(
    conn: &mut PgConnection,
    project: i64,
    id: &str,
) -> sqlx::Result<Option<Run>> {
    load_folded(
        conn,
        "SELECT data FROM runs WHERE project = $1 AND id = $2",
        project,
        id,
    )
    .await
}

async fn save(conn: &mut PgConnection, project: i64, run: &Run) -> sqlx::Result<()> {
    let data = serde_json::to_string(run).expect("a run always serializes");
    sqlx::query(
        "INSERT INTO runs (project, id, seq, status, participant, host, ended_at, data) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
         ON CONFLICT (project, id) DO UPDATE SET status = excluded.status, \
         participant = excluded.participant, host = excluded.host, \
         ended_at = excluded.ended_at, data = excluded.data",
    )
    .bind(project)
    .bind(&run.id)
    .bind(run.seq)
    .bind(run.status.as_str())
    .bind(&run.participant)
    .bind(&run.host)
    .bind(run.ended_at)
    .bind(data)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Whether `participant` has a live run (`RunStatus::is_live`) other than `except`.
pub(super) async fn other_live(
    conn: &mut PgConnection,
    project: i64,
    participant: &str,
    except: &str,
) -> sqlx::Result<bool> {
    let sql = format!(
        "SELECT 1 FROM runs WHERE project = $1 AND participant = $2 AND id != $3 \
         AND status IN {} LIMIT 1",
        decode::live_runs()
    );
    let found: Option<i32> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(project)
        .bind(participant)
        .bind(except)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(found.is_some())
}

/// The runs the failures lane decides from: each run that failed or was lost at or after
/// `since`, oldest first, then for each the newest later success of the same command and
/// the newest for the same order (what could clear it), each run once. Read from indexes
/// that hold only failures and only successes (migration 12).
pub(super) async fn failures(
    conn: &mut PgConnection,
    project: i64,
    since: Millis,
) -> sqlx::Result<Vec<Run>> {
    let sql = format!(
        "SELECT data FROM runs WHERE project = $1 AND status IN {} \
         AND ended_at >= $2 ORDER BY ended_at",
        decode::failed_runs()
    );
    let failed: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(project)
        .bind(since)
        .fetch_all(&mut *conn)
        .await?;
    let mut found: Vec<Run> = failed
        .iter()
        .map(|d| decode::folded(d))
        .collect::<sqlx::Result<_>>()?;
    let mut seen: std::collections::HashSet<String> = found.iter().map(|r| r.id.clone()).collect();
    // Each statement spells its index's expression.
    let done = decode::clearing_run();
    let clearing_sql = [
        format!(
            "SELECT s.data FROM runs s WHERE s.project = $1 AND s.status = {done} \
             AND ((s.data::jsonb) -> 'command') = \
                 (SELECT (f.data::jsonb) -> 'command' FROM runs f WHERE f.project = $1 AND f.id = $2) \
             AND s.ended_at > $3 ORDER BY s.ended_at DESC LIMIT 1"
        ),
        format!(
            "SELECT s.data FROM runs s WHERE s.project = $1 AND s.status = {done} \
             AND ((s.data::jsonb) ->> 'order') = \
                 (SELECT (f.data::jsonb) ->> 'order' FROM runs f WHERE f.project = $1 AND f.id = $2) \
             AND s.ended_at > $3 ORDER BY s.ended_at DESC LIMIT 1"
        ),
    ];
    for failure in found.clone() {
        for sql in &clearing_sql {
            let clearing: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.as_str()))
                .bind(project)
                .bind(&failure.id)
                .bind(failure.ended_at)
                .fetch_optional(&mut *conn)
                .await?;
            if let Some(data) = clearing {
                let run: Run = decode::folded(&data)?;
                if seen.insert(run.id.clone()) {
                    found.push(run);
                }
            }
        }
    }
    Ok(found)
}

pub(super) async fn query(pool: &PgPool, project: i64, query: &RunQuery) -> sqlx::Result<Vec<Run>> {
    if let Some(recent) = query.recent {
        // Live runs, and the newest others found walking the `seq` index back from the end.
        let sql = format!(
            "SELECT data FROM (SELECT data, seq FROM runs WHERE project = $1 AND status IN {live} \
             {helpers} UNION ALL (SELECT data, seq FROM runs \
             WHERE project = $1 AND status NOT IN {live} {helpers} \
             ORDER BY seq DESC LIMIT $2)) AS shown ORDER BY seq",
            live = decode::live_runs(),
            helpers = without_helpers(query),
        );
        let data: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .bind(project)
            .bind(i64::from(recent))
            .fetch_all(pool)
            .await?;
        return data.iter().map(|d| decode::folded(d)).collect();
    }
    let mut sql = QueryBuilder::<Postgres>::new("SELECT data FROM runs WHERE project = ");
    sql.push_bind(project);
    sql.push(" ").push(without_helpers(query));
    if let Some(id) = &query.id {
        sql.push(" AND id = ").push_bind(id.clone());
    }
    let live = decode::live_runs();
    if query.live {
        sql.push(" AND status IN ").push(&live);
    }
    if let Some(since) = query.ended_since {
        sql.push(" AND (status IN ")
            .push(&live)
            .push(" OR ended_at >= ")
            .push_bind(since)
            .push(")");
    }
    if let Some(after) = query.after_seq {
        sql.push(" AND seq > ").push_bind(after);
    }
    sql.push(" ORDER BY seq");
    if let Some(limit) = query.limit {
        sql.push(" LIMIT ").push_bind(i64::from(limit));
    }
    let data: Vec<String> = sql.build_query_scalar().fetch_all(pool).await?;
    data.iter().map(|d| decode::folded(d)).collect()
}

/// This family's projection rows as text, in a stable order, for `projection_dump`
/// (`$1`: the project).
pub(super) const DUMP: &[&str] = &[
    "SELECT 'r|' || id || '|' || seq || '|' || status || '|' || coalesce(participant, '') \
     || '|' || coalesce(host, '') || '|' || coalesce(ended_at::text, '') || '|' || data \
     FROM runs WHERE project = $1 ORDER BY id COLLATE \"C\"",
];
