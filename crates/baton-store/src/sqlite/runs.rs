//! The run ledger in SQLite: the `runs` projection (each row the fold of its run's
//! `run.changed` events, kept whole as JSON) and the writes that go with it. Events are
//! appended only through the parent module's `append`.

use baton_core::delivery::resurface;
use baton_core::run::{self, Run, RunChange, RunRefused, RunStatus};
use baton_core::state::{StateError, StateOp};
use baton_core::{Change, DeliveryStatus, Event, Passname};
use sqlx::sqlite::SqliteConnection;
use sqlx::{QueryBuilder, Sqlite};

use super::{SqliteStore, append, load_folded, now, read_state};
use crate::{Reaped, Result, RunQuery, StoreError};

const LIVE: &str = "('registered', 'running', 'untracked')";

/// Applies one run event to the projection (live writes and replay alike).
pub(super) async fn project(
    conn: &mut SqliteConnection,
    event: &Event,
    change: &RunChange,
) -> sqlx::Result<()> {
    let Some(id) = change.run() else {
        return Ok(());
    };
    let current = load(conn, id).await?;
    if let Some(run) = run::fold(current, change, event.seq, event.at) {
        save(conn, &run).await?;
    }
    Ok(())
}

async fn load(conn: &mut SqliteConnection, id: &str) -> sqlx::Result<Option<Run>> {
    load_folded(conn, "SELECT data FROM runs WHERE id = ?", id).await
}

async fn save(conn: &mut SqliteConnection, run: &Run) -> sqlx::Result<()> {
    let data = serde_json::to_string(run).expect("a run always serializes");
    sqlx::query(
        "INSERT INTO runs (id, seq, status, participant, host, ended_at, data) \
         VALUES (?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT (id) DO UPDATE SET status = excluded.status, \
         participant = excluded.participant, host = excluded.host, \
         ended_at = excluded.ended_at, data = excluded.data",
    )
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

fn refused(e: RunRefused) -> StoreError {
    match e {
        RunRefused::NoSuchRun(_) => StoreError::NotFound(e.to_string()),
        RunRefused::Exists(_) | RunRefused::Status { .. } => StoreError::Conflict(e.to_string()),
        RunRefused::NotAnExit(_) => StoreError::Invalid(e.to_string()),
    }
}

/// How many message ids an alert names before "+N more".
const IDS_IN_ALERT: usize = 10;

impl SqliteStore {
    pub(super) async fn record_run_changes(
        &self,
        actor: &str,
        changes: &[RunChange],
    ) -> Result<Vec<Event>> {
        let mut tx = self.write().await?;
        let at = now();
        let mut written = Vec::new();
        for change in changes {
            if let Some(id) = change.run() {
                let current = load(&mut tx, id).await.map_err(|e| self.err(e))?;
                match run::check(current.as_ref(), change) {
                    Ok(()) => {}
                    Err(RunRefused::Exists(_)) if matches!(change, RunChange::Untracked(_)) => {
                        continue;
                    }
                    Err(e) => return Err(refused(e)),
                }
            }
            let event = append(&mut tx, actor, Change::Run(change.clone()), at)
                .await
                .map_err(|e| self.err(e))?;
            written.push(event);
        }
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(written)
    }

    pub(super) async fn query_runs(&self, query: &RunQuery) -> Result<Vec<Run>> {
        let mut sql = QueryBuilder::<Sqlite>::new("SELECT data FROM runs WHERE 1 = 1");
        if let Some(id) = &query.id {
            sql.push(" AND id = ").push_bind(id.clone());
        }
        if query.live {
            sql.push(" AND status IN ").push(LIVE);
        }
        if let Some(since) = query.ended_since {
            sql.push(" AND (status IN ")
                .push(LIVE)
                .push(" OR ended_at >= ")
                .push_bind(since)
                .push(")");
        }
        sql.push(" ORDER BY seq");
        let rows: Vec<String> = sql
            .build_query_scalar()
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.err(e))?;
        rows.iter()
            .map(|d| {
                serde_json::from_str(d)
                    .map_err(|e| StoreError::Engine(format!("a run row is unreadable: {e}")))
            })
            .collect()
    }

    pub(super) async fn reap(&self, actor: &str, id: &str, reason: &str) -> Result<Option<Reaped>> {
        let mut tx = self.write().await?;
        let Some(run) = load(&mut tx, id).await.map_err(|e| self.err(e))? else {
            return Err(refused(RunRefused::NoSuchRun(id.to_owned())));
        };
        if !matches!(run.status, RunStatus::Registered | RunStatus::Running) {
            return Ok(None);
        }
        let at = now();
        let lost = RunChange::Lost {
            run: id.to_owned(),
            reason: reason.to_owned(),
        };
        append(&mut tx, actor, Change::Run(lost), at)
            .await
            .map_err(|e| self.err(e))?;

        let mut resurfaced = Vec::new();
        let participant = run
            .participant
            .as_deref()
            .and_then(|p| Passname::new(p).ok());
        if let Some(who) = &participant {
            let other_live: Option<i64> = sqlx::query_scalar(
                "SELECT 1 FROM runs WHERE participant = ? AND id != ? \
                 AND status IN ('registered', 'running') LIMIT 1",
            )
            .bind(who.as_str())
            .bind(id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| self.err(e))?;
            if other_live.is_none() {
                let held: Vec<String> = sqlx::query_scalar(
                    "SELECT message_id FROM deliveries WHERE participant = ? AND status = ? \
                     AND updated_at >= ? ORDER BY updated_at, message_id",
                )
                .bind(who.as_str())
                .bind(DeliveryStatus::Delivered.as_str())
                .bind(run.registered_at)
                .fetch_all(&mut *tx)
                .await
                .map_err(|e| self.err(e))?;
                for message in held {
                    let Some(status) = resurface(DeliveryStatus::Delivered) else {
                        continue;
                    };
                    let change = Change::DeliveryChanged {
                        message: message.clone(),
                        participant: who.clone(),
                        status,
                        note: Some(format!("resurfaced by the reaper: run {id} was lost")),
                    };
                    append(&mut tx, actor, change, at)
                        .await
                        .map_err(|e| self.err(e))?;
                    resurfaced.push(message);
                }
            }
        }

        let mut ops = vec![StateOp::Alert {
            key: format!("run-lost:{id}"),
            message: format!("run {id} was lost: {reason}"),
        }];
        if let (Some(who), false) = (&participant, resurfaced.is_empty()) {
            let mut ids = resurfaced
                .iter()
                .take(IDS_IN_ALERT)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            if resurfaced.len() > IDS_IN_ALERT {
                ids.push_str(&format!(" +{} more", resurfaced.len() - IDS_IN_ALERT));
            }
            ops.push(StateOp::Alert {
                key: format!("resurfaced:{id}"),
                message: format!(
                    "{} message(s) {who} fetched during lost run {id} are pending again: {ids}",
                    resurfaced.len()
                ),
            });
        }
        let mut state = read_state(&mut tx).await.map_err(|e| self.err(e))?;
        let mut alerts = Vec::new();
        for op in &ops {
            let planned = state
                .plan(op)
                .map_err(|e: StateError| StoreError::Invalid(e.to_string()))?;
            if let Some(change) = planned {
                let event = append(&mut tx, actor, Change::State(change.clone()), at)
                    .await
                    .map_err(|e| self.err(e))?;
                state.apply(&event);
                alerts.push(change.subject().to_owned());
            }
        }
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(Some(Reaped {
            run: id.to_owned(),
            resurfaced,
            alerts,
        }))
    }
}
