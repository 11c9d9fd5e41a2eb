//! The documents Baton prints: each `baton/*@1` JSON document as a typed struct, defined
//! once, built from a use case's result, and serialized by every edge that returns it
//! (the CLI's `--json`, and MCP where a tool returns the same document). Each derives a
//! JSON Schema, so the HTTP server's OpenAPI document comes from the same types.
//!
//! Unknown stays unknown: a value that does not apply is `null`, never a default. Field
//! order is the printed order.
//!
//! One file per family of use cases, named as the use-case files are; this one holds the
//! [`Doc`] trait, the error document every edge reports, and `to_json`.

use baton_core::run::RunStatus;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A printed document: its versioned schema name travels with it.
pub trait Doc: Serialize {
    /// The `schema` field, e.g. `baton/inbox@1`.
    fn schema(&self) -> &'static str;
    /// Takes `schema` as its own, for a document whose schema is the operation's that
    /// answered it (a [`Recorded`]); every other document keeps its type's.
    fn named(&mut self, schema: &'static str) {
        let _ = schema;
    }
}

macro_rules! doc {
    ($type:ty, $schema:literal) => {
        impl $crate::doc::Doc for $type {
            fn schema(&self) -> &'static str {
                $schema
            }
        }
    };
}

mod authority;
mod effects;
mod handoff;
mod keys;
mod ledger;
mod memory;
mod messages;
mod negotiation;
mod news;
mod orders;
mod pools;
mod portable;
mod project;
mod queue;
mod recall;
mod receipts;
mod reservations;
mod review;
mod status;
mod webhooks;

pub use authority::*;
pub use effects::*;
pub use handoff::*;
pub use keys::*;
pub use ledger::*;
pub use memory::*;
pub use messages::*;
pub use negotiation::*;
pub use news::*;
pub use orders::*;
pub use pools::*;
pub use portable::*;
pub use project::*;
pub use queue::*;
pub use recall::*;
pub use receipts::*;
pub use reservations::*;
pub use review::*;
pub use status::*;
pub use webhooks::*;

/// An error, as every edge reports one: `kind` decides the exit code and the HTTP status.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ErrorBody {
    /// One of `failed`, `usage`, `refused`, `not_found`, `forbidden`, `conflict`,
    /// `not_admitted`, `run`.
    pub kind: String,
    pub message: String,
    pub retryable: bool,
    pub exit_code: u8,
    /// For `run`: the run's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// For `run`: how it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<RunStatus>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Error {
    pub error: ErrorBody,
}
doc!(Error, "baton/error@1");

/// Serializes `doc` with its `schema` field first: what `--json` prints.
pub fn to_json(doc: &dyn ErasedDoc) -> Value {
    let mut out = Map::new();
    out.insert("schema".into(), Value::from(doc.schema_name()));
    if let Value::Object(fields) = doc.value() {
        out.extend(fields);
    }
    Value::Object(out)
}

/// A [`Doc`] behind a pointer (`dyn Doc` is not object-safe through `Serialize`).
pub trait ErasedDoc {
    fn schema_name(&self) -> &'static str;
    fn value(&self) -> Value;
}

impl<T: Doc> ErasedDoc for T {
    fn schema_name(&self) -> &'static str {
        self.schema()
    }

    fn value(&self) -> Value {
        serde_json::to_value(self).expect("a document always serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every document derives a JSON Schema (what the HTTP server's OpenAPI document will
    /// be built from), and every schema is an object with the fields it prints.
    #[test]
    fn every_document_has_an_object_schema_naming_its_fields() {
        let schemas = [
            schemars::schema_for!(Inbox),
            schemars::schema_for!(Outbox),
            schemars::schema_for!(Thread),
            schemars::schema_for!(Search),
            schemars::schema_for!(Show),
            schemars::schema_for!(Sent),
            schemars::schema_for!(Step),
            schemars::schema_for!(AgentAdded),
            schemars::schema_for!(Agents),
            schemars::schema_for!(AgentPolicy),
            schemars::schema_for!(SecurityEvents),
            schemars::schema_for!(WebhookSet),
            schemars::schema_for!(Webhooks),
            schemars::schema_for!(crate::Delivery),
            schemars::schema_for!(Recorded),
            schemars::schema_for!(State),
            schemars::schema_for!(StateRendered),
            schemars::schema_for!(Checked),
            schemars::schema_for!(StateImport),
            schemars::schema_for!(Resume),
            schemars::schema_for!(ReceiptWritten),
            schemars::schema_for!(ReceiptShown),
            schemars::schema_for!(ReceiptsVerified),
            schemars::schema_for!(AlertAcked),
            schemars::schema_for!(Alerts),
            schemars::schema_for!(Runs),
            schemars::schema_for!(Reap),
            schemars::schema_for!(Hook),
            schemars::schema_for!(OrderStepped),
            schemars::schema_for!(Orders),
            schemars::schema_for!(OrderShown),
            schemars::schema_for!(NegotiationShown),
            schemars::schema_for!(HandoffCheck),
            schemars::schema_for!(HandoffTemplate),
            schemars::schema_for!(HandoffRender),
            schemars::schema_for!(EvidenceRun),
            schemars::schema_for!(Init),
            schemars::schema_for!(Demo),
            schemars::schema_for!(News),
            schemars::schema_for!(ImportDone),
            schemars::schema_for!(KeyIssued),
            schemars::schema_for!(Keys),
            schemars::schema_for!(KeyRevoked),
            schemars::schema_for!(ProjectAdded),
            schemars::schema_for!(Projects),
            schemars::schema_for!(Error),
            schemars::schema_for!(ReviewPacket),
            schemars::schema_for!(Review),
            schemars::schema_for!(Queue),
            schemars::schema_for!(QueueNoted),
            schemars::schema_for!(TrackRecords),
            schemars::schema_for!(Status),
        ];
        for schema in schemas {
            let value = schema.as_value();
            assert_eq!(value["type"], "object", "{value}");
            assert!(value.get("properties").is_some(), "{value}");
        }
        // A negotiation's schema has the result a person reads, and no field for a
        // weight, a utility or a floor.
        let negotiation = schemars::schema_for!(NegotiationShown);
        let fields = &negotiation.as_value()["properties"];
        for field in ["result", "outcome", "trail", "unsettled", "vetoes"] {
            assert!(fields.get(field).is_some(), "negotiation lacks {field}");
        }
        fn field_names(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(map) => {
                    if let Some(Value::Object(props)) = map.get("properties") {
                        out.extend(props.keys().cloned());
                    }
                    map.values().for_each(|v| field_names(v, out));
                }
                Value::Array(items) => items.iter().for_each(|v| field_names(v, out)),
                _ => {}
            }
        }
        let mut names = Vec::new();
        field_names(negotiation.as_value(), &mut names);
        assert!(names.contains(&"answers".to_owned()), "{names:?}");
        for name in &names {
            for private in ["weight", "utilit", "floor", "position"] {
                assert!(!name.contains(private), "negotiation schema has {name}");
            }
        }
        // The shown message's flattened row is part of its schema.
        let show = schemars::schema_for!(Show);
        for field in ["id", "excerpt", "recipients", "payload", "truncated"] {
            assert!(
                show.as_value()["properties"].get(field).is_some(),
                "show lacks {field}"
            );
        }
    }
}
