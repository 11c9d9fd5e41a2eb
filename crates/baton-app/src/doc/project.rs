//! The project on this machine: what `baton init` wrote, and the demo's steps.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A file `baton init` wrote.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Written {
    pub path: String,
    /// `created`, `updated` or `unchanged`.
    pub result: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Init {
    pub root: String,
    pub created: bool,
    /// `created`, `updated` or `unchanged`.
    pub gitignore: String,
    pub agents: Vec<Written>,
    /// What the configured agents require once, by hand (approving the MCP server,
    /// trusting the project and its hooks, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<String>,
}
doc!(Init, "baton/init@1");

/// One step of the demo: a process (`baton …`, or `git …` setting up the repository), as
/// a person would type it, and what it printed on stdout.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct DemoStep {
    pub command: String,
    pub exit_code: Option<i32>,
    pub stdout: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Demo {
    pub project: String,
    pub kept: bool,
    /// The Work Order the round was about.
    pub order: String,
    /// The negotiation the executor and the reviewer settled.
    pub negotiation: String,
    pub steps: Vec<DemoStep>,
}
doc!(Demo, "baton/demo@1");
