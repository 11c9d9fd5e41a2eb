//! Receipts and alerts.

use baton_core::state::{Alert, Receipt, ReceiptRecord};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A receipt just written.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReceiptWritten {
    pub receipt: ReceiptRecord,
    pub generation: Option<i64>,
}
doc!(ReceiptWritten, "baton/receipt@1");

/// A receipt as stored, with who wrote it when.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReceiptShown {
    pub receipt: Receipt,
}
doc!(ReceiptShown, "baton/receipt@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct VerifiedRow {
    pub step: String,
    pub verdict: String,
    pub artifact: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReceiptsVerified {
    pub verified: Vec<VerifiedRow>,
}
doc!(ReceiptsVerified, "baton/receipt-verify@1");

impl ReceiptsVerified {
    pub fn new(all: &[crate::Verified]) -> Self {
        Self {
            verified: all
                .iter()
                .map(|v| VerifiedRow {
                    step: v.step.clone(),
                    verdict: v.verdict.as_str().to_owned(),
                    artifact: v.artifact.clone(),
                })
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AlertAcked {
    pub id: String,
}
doc!(AlertAcked, "baton/alert-ack@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Alerts {
    pub items: Vec<Alert>,
}
doc!(Alerts, "baton/alerts@1");
