//! Typed Work Orders and Work Reports. A document is read only after its shape rule (O1 or
//! R1) passes, so unknown top-level fields (other than `x-*` and `metadata`) and unknown
//! spec versions never reach these types. Written documents carry the lowest version
//! that has every field they use (or the version they were read with, when higher).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Number, Value};

use super::rules::{order_shape, report_shape};
use super::{Finding, UNREADABLE};

macro_rules! versions {
    ($name:ident, $prefix:literal, [$($variant:ident => $text:literal),+]) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => concat!($prefix, $text)),+ }
            }

            /// `None` for a version Baton does not read.
            pub fn parse(s: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.as_str() == s)
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::parse(&s).ok_or_else(|| {
                    serde::de::Error::custom(format!("unknown spec version {s:?}"))
                })
            }
        }
    };
}

versions!(OrderVersion, "awl/work-order@", [V0_1 => "0.1", V0_2 => "0.2", V0_3 => "0.3", V0_4 => "0.4"]);
versions!(ReportVersion, "awl/work-report@", [V0_1 => "0.1", V0_2 => "0.2", V0_3 => "0.3"]);

fn used(doc: &Value, key: &str) -> bool {
    doc.get(key).is_some_and(|v| !v.is_null())
}

impl OrderVersion {
    /// The lowest version that defines every field `order` uses: `staged` came in 0.4,
    /// `continues` in 0.3, `handoff` in 0.2.
    pub fn lowest_for(order: &Value) -> Self {
        if used(order, "staged") {
            Self::V0_4
        } else if used(order, "continues") {
            Self::V0_3
        } else if used(order, "handoff") {
            Self::V0_2
        } else {
            Self::V0_1
        }
    }
}

impl ReportVersion {
    /// The lowest version that defines every field `report` uses: `effects` came in 0.3,
    /// `handoff` in 0.2.
    pub fn lowest_for(report: &Value) -> Self {
        if used(report, "effects") {
            Self::V0_3
        } else if used(report, "handoff") {
            Self::V0_2
        } else {
            Self::V0_1
        }
    }
}

/// A JSON value that was present, even as `null` (absent stays `None`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Criterion {
    pub id: String,
    pub text: String,
}

/// A budget (upper limits) or a cost (what was spent). Numbers are kept as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Amounts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<Number>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextRef {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandoffDecision {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
}

/// What the next worker should know. At least one field is set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Handoff {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decisions: Option<Vec<HandoffDecision>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tried: Option<Vec<Attempt>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_questions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_step: Option<String>,
}

/// A Work Order: what a job is and what it may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkOrder {
    /// The version read; `None` for a document Baton built (the lowest fitting is written).
    #[serde(default, skip_serializing)]
    pub spec: Option<OrderVersion>,
    pub id: String,
    pub created_at: String,
    pub from: String,
    pub to: String,
    pub goal: String,
    pub criteria: Vec<Criterion>,
    pub budget: Amounts,
    pub deadline: String,
    pub tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Vec<ContextRef>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<Handoff>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continues: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// `x-*` extension fields, `x-baton` among them.
    #[serde(flatten)]
    pub extensions: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportStatus {
    Done,
    Blocked,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceType {
    ToolCall,
    Artifact,
    Citation,
    Note,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub criterion: String,
    #[serde(rename = "type")]
    pub kind: EvidenceType,
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Artifact {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkResult {
    pub summary: String,
    /// Present even when `null` (a schema may require it).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Vec<Artifact>>,
}

/// A staged call that runs only if the report is approved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    #[serde(rename = "ref")]
    pub reference: String,
    pub tool: String,
    pub arguments: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reversible: Option<bool>,
}

/// A Work Report: what was done, and the proof.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkReport {
    #[serde(default, skip_serializing)]
    pub spec: Option<ReportVersion>,
    pub order_id: String,
    pub from: String,
    pub status: ReportStatus,
    pub result: WorkResult,
    pub evidence: Vec<Evidence>,
    pub cost: Amounts,
    pub finished_at: String,
    pub tools_used: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects: Option<Vec<Effect>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub questions: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<Handoff>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(flatten)]
    pub extensions: BTreeMap<String, Value>,
}

fn typed<T: serde::de::DeserializeOwned>(doc: &Value) -> Result<T, Vec<Finding>> {
    serde_json::from_value(doc.clone()).map_err(|e| {
        vec![Finding::invalid(
            UNREADABLE,
            "/",
            format!("cannot read the document: {e}"),
        )]
    })
}

/// `doc` with `spec` first, set to `version`.
fn with_spec(doc: Value, version: &'static str) -> Value {
    let mut out = Map::new();
    out.insert("spec".into(), Value::from(version));
    if let Value::Object(fields) = doc {
        out.extend(fields.into_iter().filter(|(k, _)| k != "spec"));
    }
    Value::Object(out)
}

impl WorkOrder {
    /// Reads an order whose shape (O1) is valid; otherwise the O1 findings.
    pub fn from_json(doc: &Value) -> Result<Self, Vec<Finding>> {
        let shape = order_shape(doc);
        if !shape.is_empty() {
            return Err(shape);
        }
        typed(doc)
    }

    /// The document, with `spec` the lowest version that fits (or the one read, if higher).
    pub fn to_json(&self) -> Value {
        let doc = serde_json::to_value(self).unwrap_or(Value::Null);
        let lowest = OrderVersion::lowest_for(&doc);
        let version = self.spec.map_or(lowest, |read| read.max(lowest));
        with_spec(doc, version.as_str())
    }

    /// The `x-baton` contract, when there is one.
    pub fn contract(&self) -> Option<&Value> {
        self.extensions.get("x-baton")
    }
}

impl WorkReport {
    /// Reads a report whose shape (R1) is valid; otherwise the R1 findings.
    pub fn from_json(doc: &Value) -> Result<Self, Vec<Finding>> {
        let shape = report_shape(doc);
        if !shape.is_empty() {
            return Err(shape);
        }
        typed(doc)
    }

    pub fn to_json(&self) -> Value {
        let doc = serde_json::to_value(self).unwrap_or(Value::Null);
        let lowest = ReportVersion::lowest_for(&doc);
        let version = self.spec.map_or(lowest, |read| read.max(lowest));
        with_spec(doc, version.as_str())
    }
}
