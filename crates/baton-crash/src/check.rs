//! The checks every store gets after a kill: SQLite's own integrity check, and the
//! projections the killed writers left against a replay of the log (no event without
//! its projection, nor the reverse).

use std::path::Path;
use std::time::Duration;

use baton_store::{PostgresDatabase, SqliteStore};

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("a tokio runtime: {e}"))
}

/// `None` when the SQLite store at `db` is sound; what is wrong otherwise.
pub fn sqlite(db: &Path) -> Result<Option<String>, String> {
    runtime()?.block_on(async {
        let store = match SqliteStore::open(db, Duration::from_secs(5)).await {
            Ok(store) => store,
            Err(e) => return Ok(Some(format!("the store does not open: {e}"))),
        };
        let check = store
            .integrity_check()
            .await
            .map_err(|e| format!("integrity check: {e}"))?;
        if check != "ok" {
            return Ok(Some(format!("PRAGMA integrity_check: {check}")));
        }
        let live = store
            .projection_dump()
            .await
            .map_err(|e| format!("dump projections: {e}"))?;
        store
            .rebuild_projections()
            .await
            .map_err(|e| format!("rebuild projections: {e}"))?;
        let replayed = store
            .projection_dump()
            .await
            .map_err(|e| format!("dump projections: {e}"))?;
        Ok(differ(&live, &replayed))
    })
}

/// As [`sqlite`], for project `project` of the PostgreSQL database at `url` (PostgreSQL
/// checks its own pages; the projections are compared with a replay).
pub fn postgres(url: &str, project: &str) -> Result<Option<String>, String> {
    runtime()?.block_on(async {
        let database = PostgresDatabase::connect(url, Duration::from_secs(5))
            .await
            .map_err(|e| format!("connect to PostgreSQL: {e}"))?;
        let name = baton_core::names::ProjectName::new(project)
            .map_err(|e| format!("project name {project}: {e:?}"))?;
        let store = match database.store(&name).await {
            Ok(store) => store,
            Err(e) => return Ok(Some(format!("the project does not open: {e}"))),
        };
        let live = store
            .projection_dump()
            .await
            .map_err(|e| format!("dump projections: {e}"))?;
        store
            .rebuild_projections()
            .await
            .map_err(|e| format!("rebuild projections: {e}"))?;
        let replayed = store
            .projection_dump()
            .await
            .map_err(|e| format!("dump projections: {e}"))?;
        Ok(differ(&live, &replayed))
    })
}

/// The first row the live projections and the replay disagree on.
fn differ(live: &[String], replayed: &[String]) -> Option<String> {
    if live == replayed {
        return None;
    }
    let first = live.iter().zip(replayed).find(|(a, b)| a != b).map_or_else(
        || format!("{} rows live, {} replayed", live.len(), replayed.len()),
        |(a, b)| format!("live {a:?}, replayed {b:?}"),
    );
    Some(format!(
        "projections differ from a replay of the log: {first}"
    ))
}
