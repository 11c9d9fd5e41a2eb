//! The tools' inputs and outputs as they cross the wire: serde shapes with JSON Schemas.
//!
//! These are edge types: they borrow the core's enums for their values and spell their
//! schemas from the core's own lists (`MessageType::ALL`, `DeliveryStatus::ALL`), so a new
//! status shows up here without a second list to keep in step. Descriptions are short on
//! purpose: every byte of a schema is read into an agent's context by `tools/list`.

use std::borrow::Cow;

use baton_core::{DeliveryStatus, MessageType, Millis, RequestStatus};
use baton_store::Envelope;
use rmcp::handler::server::common::FromContextPart;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::JsonObject;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What `show` prints when no `max_bytes` is given.
pub const DEFAULT_SHOW_BYTES: usize = 8192;

/// A schema as generated, less what costs bytes and tells a client nothing: the root
/// `$schema` (2020-12 is MCP's default dialect), every `format` (`uint32` and the like are
/// not standard formats, and `minimum` already says what matters) and every
/// `additionalProperties: true` (the default).
pub fn compact(schema: &JsonObject) -> JsonObject {
    let mut schema = schema.clone();
    schema.remove("$schema");
    trim(&mut schema);
    schema
}

fn trim(schema: &mut JsonObject) {
    schema.remove("format");
    if schema.get("additionalProperties") == Some(&Value::Bool(true)) {
        schema.remove("additionalProperties");
    }
    for (key, value) in schema.iter_mut() {
        match (key.as_str(), value) {
            ("properties" | "$defs", Value::Object(named)) => {
                for sub in named.values_mut() {
                    if let Value::Object(sub) = sub {
                        trim(sub);
                    }
                }
            }
            ("items" | "additionalProperties", Value::Object(sub)) => trim(sub),
            ("anyOf" | "oneOf" | "allOf", Value::Array(subs)) => {
                for sub in subs {
                    if let Value::Object(sub) = sub {
                        trim(sub);
                    }
                }
            }
            _ => {}
        }
    }
}

// ---- schemas spelled from the core's lists ----

fn names<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> Vec<Value> {
    all.iter().map(|v| Value::from(name(*v))).collect()
}

fn kind(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "enum": names(&MessageType::ALL, MessageType::as_str) })
}

fn nullable_kind(_: &mut SchemaGenerator) -> Schema {
    let mut values = names(&MessageType::ALL, MessageType::as_str);
    values.push(Value::Null);
    json_schema!({ "enum": values })
}

fn nullable_status(_: &mut SchemaGenerator) -> Schema {
    let mut values = names(&DeliveryStatus::ALL, DeliveryStatus::as_str);
    values.push(Value::Null);
    json_schema!({ "enum": values })
}

fn nullable_request_status(_: &mut SchemaGenerator) -> Schema {
    let mut values = names(&RequestStatus::ALL, RequestStatus::as_str);
    values.push(Value::Null);
    json_schema!({ "enum": values })
}

// ---- inputs ----

/// A tool's arguments, or what is wrong with them in words that name the argument
/// (`` `max_bytes`: invalid type: string "10", expected usize ``).
///
/// The tool turns an `Err` into an `isError` result, so a model can fix its call; rmcp's
/// own extractor would not name the field. The type is called `Parameters` because that
/// is the name `#[tool]` looks for to derive a tool's input schema from `T`.
pub struct Parameters<T>(pub Result<T, String>);

impl<T: JsonSchema> JsonSchema for Parameters<T> {
    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        T::json_schema(generator)
    }
}

impl<S, T: DeserializeOwned> FromContextPart<ToolCallContext<'_, S>> for Parameters<T> {
    fn from_context_part(context: &mut ToolCallContext<'_, S>) -> Result<Self, rmcp::ErrorData> {
        let arguments = Value::Object(context.arguments.take().unwrap_or_default());
        Ok(Self(serde_path_to_error::deserialize(arguments).map_err(
            |e| match e.path().to_string().as_str() {
                "." => format!("arguments: {}", e.inner()),
                path => format!("`{path}`: {}", e.inner()),
            },
        )))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InboxInput {
    /// Also list what you finished and have not archived.
    #[serde(default)]
    pub all: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutboxInput {
    /// Also list requests whose own end you archived.
    #[serde(default)]
    pub all: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdInput {
    pub id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowInput {
    pub id: String,
    /// Payload bytes shown, default 8192.
    pub max_bytes: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteInput {
    pub id: String,
    /// How; posted to the sender.
    pub note: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandBackInput {
    pub id: String,
    /// Posted to the sender.
    pub reason: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendInput {
    /// Passnames.
    pub to: Vec<String>,
    /// Default message.
    #[serde(rename = "type", default)]
    #[schemars(schema_with = "nullable_kind")]
    pub kind: Option<MessageType>,
    /// Lane, a lowercase slug.
    pub topic: String,
    /// Text; or give payload.
    pub body: Option<String>,
    pub payload: Option<Map<String, Value>>,
    /// Repeats with this key return the first id.
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplyInput {
    /// The message replied to.
    pub id: String,
    /// Default: the other side.
    pub to: Option<Vec<String>>,
    /// Default message.
    #[serde(rename = "type", default)]
    #[schemars(schema_with = "nullable_kind")]
    pub kind: Option<MessageType>,
    /// Default: the parent's.
    pub topic: Option<String>,
    pub body: Option<String>,
    pub payload: Option<Map<String, Value>>,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchInput {
    /// Matched in payload, topic, names.
    pub text: Option<String>,
    pub topic: Option<String>,
    #[serde(rename = "type", default)]
    #[schemars(schema_with = "nullable_kind")]
    pub kind: Option<MessageType>,
    pub from: Option<String>,
    pub to: Option<String>,
    /// RFC 3339 or an age (2h).
    pub since: Option<String>,
    /// RFC 3339 or an age (2h).
    pub until: Option<String>,
    /// Yours.
    #[serde(default)]
    #[schemars(schema_with = "nullable_status")]
    pub status: Option<DeliveryStatus>,
    /// Page size, default 50.
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    /// A page's `next`.
    pub cursor: Option<String>,
}

// ---- outputs ----

#[derive(Debug, Serialize, JsonSchema)]
pub struct Row {
    pub id: String,
    pub from: String,
    /// Recipient name: status.
    pub to: Map<String, Value>,
    #[serde(rename = "type")]
    #[schemars(schema_with = "kind")]
    pub kind: MessageType,
    pub topic: String,
    /// Yours.
    #[schemars(schema_with = "nullable_status")]
    pub status: Option<DeliveryStatus>,
    /// Sender's end.
    #[schemars(schema_with = "nullable_request_status")]
    pub request_status: Option<RequestStatus>,
    pub reply_to: Option<String>,
    pub depth: u32,
    pub replies: u32,
    pub size: u64,
    pub created_at: String,
    pub excerpt: String,
}

impl Row {
    pub fn new(env: &Envelope, me: &baton_core::Passname) -> Self {
        Self {
            id: env.id.clone(),
            from: env.from.to_string(),
            to: env
                .to
                .iter()
                .map(|r| (r.name.to_string(), Value::from(r.status.as_str())))
                .collect(),
            kind: env.kind,
            topic: env.topic.to_string(),
            status: env.status_for(me),
            request_status: env.request_status,
            reply_to: env.reply_to.clone(),
            depth: env.depth,
            replies: env.replies,
            size: env.size,
            created_at: timestamp(env.created_at),
            excerpt: env.excerpt.clone(),
        }
    }
}

/// RFC 3339 in UTC with milliseconds.
fn timestamp(ms: Millis) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| ms.to_string())
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Messages {
    pub items: Vec<Row>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Page {
    pub items: Vec<Row>,
    /// Cursor of the next page; empty if last.
    pub next: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Shown {
    #[serde(flatten)]
    pub message: Row,
    /// Null when cut: see truncated.
    pub payload: Option<Map<String, Value>>,
    pub truncated: Option<Cut>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Cut {
    /// The payload's JSON text, cut.
    pub text: String,
    pub shown_bytes: usize,
    pub total_bytes: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Sent {
    pub id: String,
    /// An earlier identical send: its id.
    pub duplicate: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Stepped {
    pub id: String,
    /// recipient or sender.
    pub end: String,
    pub from: String,
    pub status: String,
    /// Reply carrying the note.
    pub reply: Option<String>,
}

impl From<baton_store::Stepped> for Stepped {
    fn from(s: baton_store::Stepped) -> Self {
        Self {
            id: s.id,
            end: s.end.to_owned(),
            from: s.from.to_owned(),
            status: s.status.to_owned(),
            reply: s.reply,
        }
    }
}
