//! Receipts (SPEC §5.5) as every edge writes and awaits them: where a step's output landed,
//! hashed where it lies, and a wait that fails loud at its deadline, once. The CLI and the
//! MCP server both call these, so a receipt and a missed wait read the same either way.
//!
//! Paths arrive relative to a `base` the caller chooses (the CLI's working directory, the
//! MCP server's project root) and are stored relative to the project root.

use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use baton_core::state::{RECEIPT_MISSING, Receipt, ReceiptRecord, StateOp};

use crate::{Result, Store};

/// How often a wait looks at the store's generation (one cheap query); it reads the state
/// only when the generation moved. SQLite has no change notification to wait on.
pub const POLL: Duration = Duration::from_millis(50);

/// Whether an artifact names a URI (recorded as given) rather than a local path.
pub fn is_uri(artifact: &str) -> bool {
    artifact.contains("://")
}

/// Hex blake3 and size of a file, streamed.
pub fn hash_file(path: &Path) -> std::io::Result<(String, u64)> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((hasher.finalize().to_hex().to_string(), size))
}

/// The receipt for `artifact`: a URI as given, with unknown hash and size; a path (relative
/// to `base`) hashed, and stored relative to the project `root`, or absolute when outside
/// it. Fails when the file cannot be read.
pub fn record(
    root: &Path,
    base: &Path,
    step: String,
    artifact: String,
    run: Option<String>,
) -> std::io::Result<ReceiptRecord> {
    if is_uri(&artifact) {
        return Ok(ReceiptRecord {
            step,
            artifact,
            hash: None,
            size: None,
            run,
        });
    }
    let path = base.join(&artifact);
    let (hash, size) = hash_file(&path)?;
    let absolute = path.canonicalize()?;
    let root = root.canonicalize()?;
    let stored = absolute.strip_prefix(&root).map_or_else(
        |_| absolute.display().to_string(),
        |p| p.display().to_string(),
    );
    Ok(ReceiptRecord {
        step,
        artifact: stored,
        hash: Some(hash),
        size: Some(size),
        run,
    })
}

/// How a wait ended.
#[derive(Debug)]
pub enum Waited {
    Arrived(Receipt),
    /// The deadline passed; `alert` is the message of the alert it raised (or found open).
    Missed {
        alert: String,
    },
}

/// Waits until `step` has a receipt or `timeout` passes. At the deadline it raises the
/// alert `receipt-missing:STEP` as `actor` — once while that alert is open, however many
/// waits miss.
pub async fn wait(store: &dyn Store, actor: &str, step: &str, timeout: Duration) -> Result<Waited> {
    let deadline = Instant::now() + timeout;
    // Recorded, so the condition outlives this process: if it dies, `baton reap` raises the
    // alert at the deadline instead (nothing is recorded when the receipt already exists).
    let deadline_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
        .saturating_add(timeout.as_millis() as i64);
    store
        .change_state(
            actor,
            &[StateOp::Expect {
                step: step.to_owned(),
                deadline: deadline_ms,
            }],
        )
        .await?;
    let mut seen = -1;
    loop {
        let generation = store.generation().await?;
        if generation != seen {
            seen = generation;
            if let Some(r) = store.state().await?.receipts.remove(step) {
                return Ok(Waited::Arrived(r));
            }
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        tokio::time::sleep(POLL.min(deadline - now)).await;
    }
    let alert = format!(
        "no receipt for step {step:?} within {}s",
        timeout.as_secs_f64()
    );
    store
        .change_state(
            actor,
            &[StateOp::Alert {
                key: format!("{RECEIPT_MISSING}{step}"),
                message: alert.clone(),
            }],
        )
        .await?;
    Ok(Waited::Missed { alert })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_hashed_and_stored_relative_to_the_root_a_uri_as_given() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("out")).unwrap();
        std::fs::write(root.path().join("out/a.txt"), b"result").unwrap();
        let base = root.path().join("out");
        let r = record(root.path(), &base, "build".into(), "a.txt".into(), None).unwrap();
        assert_eq!(r.artifact, "out/a.txt");
        assert_eq!(r.hash, Some(blake3::hash(b"result").to_hex().to_string()));
        assert_eq!(r.size, Some(6));
        let uri = "s3://bucket/a.txt".to_owned();
        let r = record(root.path(), &base, "up".into(), uri.clone(), None).unwrap();
        assert_eq!((r.artifact, r.hash, r.size), (uri, None, None));
        assert!(record(root.path(), &base, "x".into(), "missing".into(), None).is_err());
    }

    #[tokio::test]
    async fn a_missed_wait_raises_one_alert_however_often_it_misses() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            crate::SqliteStore::create(&dir.path().join("baton.db"), Duration::from_secs(5))
                .await
                .unwrap();
        for _ in 0..2 {
            let waited = wait(&store, "planner", "build", Duration::ZERO)
                .await
                .unwrap();
            assert!(matches!(waited, Waited::Missed { .. }), "{waited:?}");
        }
        assert_eq!(store.state().await.unwrap().alerts.len(), 1);
        let receipt = ReceiptRecord {
            step: "build".into(),
            artifact: "s3://bucket/app".into(),
            hash: None,
            size: None,
            run: None,
        };
        store
            .change_state("impl-1", &[StateOp::Receipt(receipt.clone())])
            .await
            .unwrap();
        match wait(&store, "planner", "build", Duration::ZERO)
            .await
            .unwrap()
        {
            Waited::Arrived(r) => {
                assert_eq!((r.record, r.written.actor.as_str()), (receipt, "impl-1"))
            }
            other => panic!("{other:?}"),
        }
    }
}
