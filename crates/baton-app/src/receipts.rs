//! Receipts: where a step's output landed, hashed where it lies; a wait that
//! fails loud at its deadline, once; and re-hashing to verify. Paths arrive relative to a
//! `base` the edge chooses (the CLI's working directory, the MCP server's project root)
//! and are stored relative to the project root.

use std::path::{Path, PathBuf};
use std::time::Duration;

use baton_core::state::{RECEIPT_MISSING, Receipt, ReceiptRecord, StateOp};
use baton_core::{Event, Record, Refusal};
use serde::Serialize;

use crate::host::PathProblem;
use crate::{App, Result, wait};

/// Whether an artifact names a URI (recorded as given) rather than a local path.
pub fn is_uri(artifact: &str) -> bool {
    artifact.contains("://")
}

/// How one receipt's artifact compares with what was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Ok,
    Changed,
    Missing,
    /// A URI: Baton cannot read it.
    Unverifiable,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Changed => "changed",
            Self::Missing => "missing",
            Self::Unverifiable => "unverifiable (URI)",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub step: String,
    pub artifact: String,
    pub verdict: Verdict,
}

impl App {
    /// The receipt for `artifact`: a URI as given, with unknown hash and size; a path
    /// (relative to `base`) hashed off the async threads.
    async fn receipt_record(
        &self,
        base: &Path,
        step: String,
        artifact: String,
        run: Option<String>,
    ) -> Result<ReceiptRecord> {
        if is_uri(&artifact) {
            return Ok(ReceiptRecord {
                step,
                artifact,
                hash: None,
                size: None,
                run,
            });
        }
        // The same rule as a note's subject: a path must resolve (symlinks included) inside
        // the project; output that lives elsewhere is recorded by its URI.
        let inside = match self.host.files.resolve(base, &artifact) {
            Ok(inside) => inside,
            Err(PathProblem::Missing) => {
                return Err(Refusal::NoArtifact {
                    artifact,
                    reason: "no such file".to_owned(),
                }
                .into());
            }
            Err(PathProblem::Outside) => {
                return Err(Refusal::ArtifactOutside {
                    artifact,
                    root: self.host.root.display().to_string(),
                }
                .into());
            }
        };
        let files = self.host.files.clone();
        let (base, path): (PathBuf, String) = (self.host.root.clone(), inside);
        let hashed = tokio::task::spawn_blocking(move || files.hash(&base, &path))
            .await
            .map_err(|e| Refusal::NoArtifact {
                artifact: artifact.clone(),
                reason: e.to_string(),
            })?
            .map_err(|e| Refusal::NoArtifact {
                artifact: artifact.clone(),
                reason: e.to_string(),
            })?;
        Ok(ReceiptRecord {
            step,
            artifact: hashed.path,
            hash: Some(hashed.hash),
            size: Some(hashed.size),
            run,
        })
    }

    /// Records where `step`'s output landed, as `actor`.
    pub async fn write_receipt(
        &self,
        actor: &str,
        base: &Path,
        step: String,
        artifact: String,
        run: Option<String>,
    ) -> Result<(ReceiptRecord, Event)> {
        let record = self.receipt_record(base, step, artifact, run).await?;
        let recorded = self
            .record(actor, &[StateOp::Receipt(record.clone())])
            .await?;
        let event = recorded
            .events
            .into_iter()
            .last()
            .expect("a receipt always writes its event");
        Ok((record, event))
    }

    /// The newest receipt of `step`.
    pub async fn receipt(&self, step: &str) -> Result<Receipt> {
        self.state()
            .await?
            .receipts
            .remove(step)
            .ok_or_else(|| Refusal::not_found(Record::Receipt, step).into())
    }

    /// Re-hashes the artifacts of `step` (or of every step).
    pub async fn verify_receipts(&self, step: Option<&str>) -> Result<Vec<Verified>> {
        let receipts: Vec<Receipt> = match step {
            Some(s) => vec![self.receipt(s).await?],
            None => self.state().await?.receipts.into_values().collect(),
        };
        let files = self.host.files.clone();
        let root = self.host.root.clone();
        let verified = tokio::task::spawn_blocking(move || {
            receipts
                .into_iter()
                .map(|r| {
                    let verdict = match &r.record.hash {
                        None => Verdict::Unverifiable,
                        Some(want) => match files.hash(&root, &r.record.artifact) {
                            Ok(got) if &got.hash == want => Verdict::Ok,
                            Ok(_) => Verdict::Changed,
                            Err(_) => Verdict::Missing,
                        },
                    };
                    Verified {
                        step: r.record.step,
                        artifact: r.record.artifact,
                        verdict,
                    }
                })
                .collect()
        })
        .await
        .map_err(|e| baton_store::StoreError::Engine(e.to_string()))?;
        Ok(verified)
    }

    /// Waits until `step` has a receipt or `timeout` passes. At the deadline it raises the
    /// alert `receipt-missing:STEP` as `actor` — once while that alert is open, however
    /// many waits miss — and refuses with [`Refusal::NoReceipt`].
    pub async fn wait_receipt(
        &self,
        actor: &str,
        step: &str,
        timeout: Duration,
    ) -> Result<Receipt> {
        // Recorded, so the condition outlives this process: if it dies, the reaper raises
        // the alert at the deadline instead (nothing is recorded when the receipt exists).
        let deadline = self
            .now()
            .saturating_add(i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX));
        self.record(
            actor,
            &[StateOp::Expect {
                step: step.to_owned(),
                deadline,
            }],
        )
        .await?;
        let arrived = wait::until(
            self.store(),
            timeout,
            || self.waiting(&format!("a receipt for step {step:?}")),
            || async { Ok(self.state().await?.receipts.remove(step)) },
        )
        .await?;
        if let Some(receipt) = arrived {
            return Ok(receipt);
        }
        let alert = format!(
            "no receipt for step {step:?} within {}s",
            timeout.as_secs_f64()
        );
        self.record(
            actor,
            &[StateOp::Alert {
                key: format!("{RECEIPT_MISSING}{step}"),
                message: alert.clone(),
            }],
        )
        .await?;
        Err(Refusal::NoReceipt {
            step: step.to_owned(),
            alert,
        }
        .into())
    }
}
