//! Project memory: what a state change recorded, the state, its rendering, a check and
//! an import.

use baton_core::state::{
    Constraint, Decision, Freshness, Note, ProjectState, Provenance, StateOp, Stream,
};
use baton_core::time::rfc3339;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Doc;

/// What a state change recorded (`focus`, `stream`, `decide`, `constrain`, `note`,
/// `session end`): the ids it wrote and the generation after.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Recorded {
    #[serde(skip)]
    pub schema: &'static str,
    pub recorded: Vec<String>,
    pub generation: Option<i64>,
}

impl Doc for Recorded {
    fn schema(&self) -> &'static str {
        self.schema
    }

    fn named(&mut self, schema: &'static str) {
        self.schema = schema;
    }
}

impl Recorded {
    /// `schema` is the command's: `baton/focus@1`, `baton/decide@1`, ….
    pub fn new(schema: &'static str, recorded: &crate::Recorded) -> Self {
        Self {
            schema,
            recorded: recorded.ids(),
            generation: recorded.generation(),
        }
    }
}

/// A note with its freshness.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct NoteRow {
    #[serde(flatten)]
    pub note: Note,
    #[serde(flatten)]
    pub freshness: Freshness,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct DependencyChange {
    pub text: String,
    pub written: Provenance,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Expected {
    pub step: String,
    pub deadline: String,
}

/// What `baton state show` prints.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct State {
    pub generation: i64,
    pub focus: Option<String>,
    pub streams: Vec<Stream>,
    pub decisions: Vec<Decision>,
    pub constraints: Vec<Constraint>,
    pub notes: Vec<NoteRow>,
    pub dependency_changes: Vec<DependencyChange>,
    pub expected_receipts: Vec<Expected>,
}
doc!(State, "baton/state@1");

impl State {
    pub fn new(state: &ProjectState, notes: Vec<(Note, Freshness)>) -> Self {
        Self {
            generation: state.generation,
            focus: state.focus.as_ref().map(|(t, _)| t.clone()),
            streams: state.streams.values().cloned().collect(),
            decisions: state.decisions.clone(),
            constraints: state.constraints.clone(),
            notes: notes
                .into_iter()
                .map(|(note, freshness)| NoteRow { note, freshness })
                .collect(),
            dependency_changes: state
                .dependency_changes
                .iter()
                .map(|(text, written)| DependencyChange {
                    text: text.clone(),
                    written: written.clone(),
                })
                .collect(),
            expected_receipts: state
                .expected
                .iter()
                .map(|(step, deadline)| Expected {
                    step: step.clone(),
                    deadline: rfc3339(*deadline),
                })
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StateRendered {
    pub path: String,
    pub generation: i64,
    pub bytes: usize,
}
doc!(StateRendered, "baton/state-render@1");

/// A valid STATE.md (the other verdicts are errors).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Checked {
    pub file: String,
    pub verdict: String,
    pub generation: i64,
}
doc!(Checked, "baton/check@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StateImport {
    pub dry_run: bool,
    pub changes: Vec<StateOp>,
    pub recorded: Vec<String>,
}
doc!(StateImport, "baton/state-import@1");
