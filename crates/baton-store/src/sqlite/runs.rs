//! The run ledger in SQLite: the `runs` projection, each row the fold of its run's
//! `run.changed` events (`baton_core::run::fold`), kept whole as JSON.

use baton_core::Millis;
use baton_core::run::{self, Run, RunChange, Source};
use baton_core::{Change, Event};
use rusqlite::{Connection, params};

use super::conn::{Builder, Sql, exec};
use super::rows::{column, load_folded, rows, scalar};
use crate::decode;
use crate::{RunCount, RunQuery};

/// Applies a run's change to its row; any other change is not this family's.
pub(super) fn project(conn: &Connection, event: &Event) -> Sql<()> {
    match &event.change {
        Change::Run(change) => apply(conn, event, change),
        _ => Ok(()),
    }
}

/// Applies one run event to the projection (live writes and replay alike).
fn apply(conn: &Connection, event: &Event, change: &RunChange) -> Sql<()> {
    let Some(id) = change.run() else {
        return Ok(());
    };
    let current = load(conn, id)?;
    if let Some(run) = run::fold(current, change, event.seq, event.at, &event.actor) {
        save(conn, &run)?;
    }
    Ok(())
}

pub(super) fn load(conn: &Connection, id: &str) -> Sql<Option<Run>> {
    load_folded(conn, "SELECT data FROM runs WHERE id = ?", id)
}

fn save(conn: &Connection, run: &Run) -> Sql<()> {
    let data = serde_json::to_string(run).expect("a run always serializes");
    exec(
        conn,
        "INSERT INTO runs (id, seq, status, participant, host, ended_at, data) \
         VALUES (?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT (id) DO UPDATE SET status = excluded.status, \
         participant = excluded.participant, host = excluded.host, \
         ended_at = excluded.ended_at, data = excluded.data",
        params![
            run.id,
            run.seq,
            run.status.as_str(),
            run.participant,
            run.host,
            run.ended_at,
            data
        ],
    )?;
    Ok(())
}

/// Whether `participant` has a live run (`RunStatus::is_live`) other than `except`.
pub(super) fn other_live(conn: &Connection, participant: &str, except: &str) -> Sql<bool> {
    let found: Option<i64> = scalar(
        conn,
        &format!(
            "SELECT 1 FROM runs WHERE participant = ? AND id != ? AND status IN {} LIMIT 1",
            decode::live_runs()
        ),
        [participant, except],
    )?;
    Ok(found.is_some())
}

/// A row's source as SQL (a row older than sources is one of `baton run`'s).
const SOURCE: &str = "coalesce(json_extract(data, '$.source'), 'wrapper')";

/// The row a helper's row is under, as SQL: the expression `runs_parent` indexes.
const PARENT: &str = "json_extract(data, '$.parent')";

/// How many runs have each status and source, of the live ones and those ended since
/// `ended_since`, and how many of those had no event since `quiet_before`; with
/// `parents`, of those rows' helpers only. The live rows and the ended ones are read
/// apart, each from its own index (an `OR` of the two would read every row).
pub(super) fn counts(
    conn: &Connection,
    ended_since: Millis,
    quiet_before: Millis,
    parents: Option<&[String]>,
) -> Sql<Vec<RunCount>> {
    let of = |sql: &mut Builder| {
        if let Some(parents) = parents {
            sql.push(&format!(" AND {PARENT} IN (SELECT value FROM json_each("))
                .bind(serde_json::to_string(parents).expect("strings are JSON"))
                .push("))");
        }
    };
    let live = decode::live_runs();
    let mut sql = Builder::new(&format!(
        "SELECT status, {SOURCE} AS source, {PARENT} AS parent, count(*) AS n, \
         sum(CASE WHEN json_extract(data, '$.last_event_at') < "
    ));
    sql.bind(quiet_before)
        .push(" THEN 1 ELSE 0 END) AS quiet FROM (SELECT status, data FROM runs WHERE status IN ")
        .push(&live);
    of(&mut sql);
    sql.push(" UNION ALL SELECT status, data FROM runs WHERE ended_at >= ")
        .bind(ended_since)
        .push(" AND status NOT IN ")
        .push(&live);
    of(&mut sql);
    sql.push(") GROUP BY status, source, parent");
    let found = rows(conn, &sql.sql, sql.params())?;
    Ok(decode::run_counts(&found)?)
}

/// The runs the failures lane decides from: each run that failed or was lost at or after
/// `since`, oldest first, then for each the newest later success of the same command and
/// the newest for the same order (what could clear it), each run once. Read from indexes
/// that hold only failures and only successes (migration 18), so the successes of a busy
/// window are not read. The conditions repeat the indexes' own, as the planner needs.
pub(super) fn failures(conn: &Connection, since: Millis) -> Sql<Vec<Run>> {
    let failed: Vec<String> = column(
        conn,
        // Named: the planner would otherwise walk every failure ever by `runs_status`.
        &format!(
            "SELECT data FROM runs INDEXED BY runs_failed \
             WHERE status IN {} AND ended_at >= ? ORDER BY ended_at",
            decode::failed_runs()
        ),
        [since],
    )?;
    let mut found: Vec<Run> = failed
        .iter()
        .map(|d| decode::folded(d))
        .collect::<sqlx::Result<_>>()?;
    let mut seen: std::collections::HashSet<String> = found.iter().map(|r| r.id.clone()).collect();
    for failure in found.clone() {
        for path in ["$.command", "$.order"] {
            // The path is one of two constants, written into the statement: an index on an
            // expression serves only a query that spells the same expression.
            let clearing: Option<String> = scalar(
                conn,
                &format!(
                    "SELECT s.data FROM runs s WHERE s.status = {done} \
                     AND json_extract(s.data, '{path}') = \
                         (SELECT json_extract(f.data, '{path}') FROM runs f WHERE f.id = ?1) \
                     AND s.ended_at > ?2 ORDER BY s.ended_at DESC LIMIT 1",
                    done = decode::clearing_run()
                ),
                params![failure.id, failure.ended_at],
            )?;
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

pub(super) fn query(conn: &Connection, query: &RunQuery) -> Sql<Vec<Run>> {
    if let Some(recent) = query.recent {
        // Live runs, and the newest others found walking the `seq` index back from the end.
        let data: Vec<String> = column(
            conn,
            &format!(
                "SELECT data FROM (SELECT data, seq FROM runs WHERE status IN {live} {helpers} \
                 UNION ALL SELECT data, seq FROM \
                 (SELECT data, seq FROM runs WHERE status NOT IN {live} {helpers} \
                 ORDER BY seq DESC LIMIT ?)) ORDER BY seq",
                live = decode::live_runs(),
                helpers = without_helpers(query),
            ),
            [i64::from(recent)],
        )?;
        return Ok(data
            .iter()
            .map(|d| decode::folded(d))
            .collect::<sqlx::Result<_>>()?);
    }
    let mut sql = Builder::new("SELECT data FROM runs WHERE 1 = 1 ");
    sql.push(&without_helpers(query));
    if let Some(id) = &query.id {
        sql.push(" AND id = ").bind(id.clone());
    }
    let live = decode::live_runs();
    if query.live {
        sql.push(" AND status IN ").push(&live);
    }
    if let Some(since) = query.ended_since {
        sql.push(" AND (status IN ")
            .push(&live)
            .push(" OR ended_at >= ")
            .bind(since)
            .push(")");
    }
    if let Some(after) = query.after_seq {
        sql.push(" AND seq > ").bind(after);
    }
    sql.push(" ORDER BY seq");
    if let Some(limit) = query.limit {
        sql.push(" LIMIT ").bind(i64::from(limit));
    }
    let data: Vec<String> = column(conn, &sql.sql, sql.params())?;
    Ok(data
        .iter()
        .map(|d| decode::folded(d))
        .collect::<sqlx::Result<_>>()?)
}

/// The condition that leaves helpers out when `query` asks it (empty otherwise).
fn without_helpers(query: &RunQuery) -> String {
    if query.without_helpers {
        format!("AND {SOURCE} != '{}'", Source::Helper.as_str())
    } else {
        String::new()
    }
}

/// This family's projection rows as text, in a stable order, for `projection_dump`.
pub(super) const DUMP: &[&str] = &[
    "SELECT 'r|' || id || '|' || seq || '|' || status || '|' || coalesce(participant, '') \
     || '|' || coalesce(host, '') || '|' || coalesce(ended_at, '') || '|' || data \
     FROM runs ORDER BY id",
];
