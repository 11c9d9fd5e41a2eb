//! The handoff and evidence commands' documents: a check, a template, a rendering, an
//! evidence run.

use baton_core::awl::Finding;
use baton_core::state::ReceiptRecord;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HandoffCheck {
    pub findings: Vec<Finding>,
}
doc!(HandoffCheck, "baton/handoff-check@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HandoffTemplate {
    /// `order` or `report`.
    pub kind: String,
    pub template: Value,
}
doc!(HandoffTemplate, "baton/handoff-template@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HandoffRender {
    pub markdown: String,
}
doc!(HandoffRender, "baton/handoff-render@1");

/// What `baton evidence run` says on stderr: the step its receipt is under.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EvidenceRun {
    pub step: String,
    pub exit_code: i32,
    pub receipt: ReceiptRecord,
}
doc!(EvidenceRun, "baton/evidence-run@1");
