//! Staged effects: a held call as a row, and what an approval ran.

use baton_core::Millis;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{EventRow, OrderRow};

/// A held call: its placeholder, tool, arguments (secrets masked), where it stands and
/// the size of its result once it ran.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EffectRow {
    #[serde(rename = "ref")]
    pub reference: String,
    pub tool: String,
    pub arguments: Map<String, Value>,
    /// held, uncertain (started, no recorded end), ran, failed or dropped.
    pub status: baton_core::effect::EffectStatus,
    pub result_bytes: Option<usize>,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// The upstream server command it runs through.
    pub upstream: Vec<String>,
}

impl EffectRow {
    pub fn new(e: &baton_core::effect::Effect) -> Self {
        let error = e.result.as_ref().and_then(|r| match r.get("error") {
            Some(Value::String(why)) => Some(why.clone()),
            _ if e.status == baton_core::effect::EffectStatus::Failed => {
                Some(baton_core::effect::failure(r))
            }
            _ => None,
        });
        Self {
            reference: e.reference.clone(),
            tool: e.tool.clone(),
            arguments: baton_core::effect::masked(&e.arguments),
            status: e.status,
            result_bytes: e.result.as_ref().map(baton_core::effect::size),
            error,
            upstream: e.upstream.clone(),
        }
    }

    pub fn all(effects: &baton_core::effect::Effects) -> Vec<Self> {
        effects.effects.iter().map(Self::new).collect()
    }
}

/// An approval: the step it recorded (none when it went on with an approved order's
/// effects), each effect after it, and where the sequence stopped, if it did.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Approved {
    pub order: OrderRow,
    pub events: Vec<EventRow>,
    pub effects: Vec<EffectRow>,
    /// The effect that failed or is uncertain, which stopped the sequence.
    pub stopped_at: Option<String>,
}
doc!(Approved, "baton/approval@1");

impl Approved {
    pub fn new(approval: &crate::Approval, now: Millis) -> Self {
        Self {
            order: OrderRow::new(&approval.order, now),
            events: approval
                .written
                .as_ref()
                .map(|w| EventRow::all(&w.events))
                .unwrap_or_default(),
            effects: EffectRow::all(&approval.effects),
            stopped_at: approval.stopped.as_ref().map(|e| e.reference.clone()),
        }
    }
}
