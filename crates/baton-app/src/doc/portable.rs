//! Export and import: what an import did.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What `baton import` did.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ImportDone {
    pub imported: usize,
    /// Events the log held already (same id): left as they were.
    pub skipped: usize,
    /// Events never imported: keys (issue them again where they are used), and on a
    /// merge the setup (policy, outside agent, webhook) of participants this project had
    /// already.
    pub left_out: usize,
    /// The log's decisions, constraints, notes and alerts that have another id in this
    /// project (a merge, where this project used their ids already): the log's id → this
    /// project's. What the log says of them follows.
    pub renamed: std::collections::BTreeMap<String, String>,
}
doc!(ImportDone, "baton/import@1");
