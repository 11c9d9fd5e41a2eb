//! The tools' inputs and outputs as they cross the wire: serde shapes with JSON Schemas.
//!
//! These are edge types: they borrow the core's enums for their values, and input schemas
//! spell them from the core's own lists (`MessageType::ALL`, `DeliveryStatus::ALL`), so a
//! new status shows up here without a second list to keep in step. Descriptions are short
//! on purpose: every byte of a schema is read into an agent's context by `tools/list`,
//! whose whole result must stay under 12 KiB; [`compact`] removes what tells a client
//! nothing. An output field that does not apply is absent (`skip_serializing_if`), never
//! `null`, so its schema can say `string` and stay true.

use std::borrow::Cow;

use baton_core::state::ReceiptRecord;
use baton_core::{DeliveryStatus, Envelope, MessageType, Millis, RequestStatus};
use rmcp::handler::server::common::FromContextPart;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::JsonObject;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What `show` prints when no `max_bytes` is given.
pub const DEFAULT_SHOW_BYTES: usize = 8192;

/// Which side of a tool a schema describes: what it accepts, or what it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Input,
    Output,
}

/// A schema as generated, less what costs bytes and tells a client nothing it can act on.
/// Every rule keeps the schema true of what the tool accepts or writes:
///
/// - the root `$schema` goes (2020-12 is MCP's default dialect), and `$defs` are inlined
///   where they are used (each is used once per tool);
/// - every `format` goes (`uint32` and the like are not standard formats), as do
///   `additionalProperties: true`, `default: null` and a flag's `default: false` (each is
///   what absence means);
/// - a property missing from `required` loses `null` from its type: an optional input is
///   absent when unset, and an output field is optional only when it is skipped when
///   `None` (the serialize-mode schema keeps a written `null` required, so it keeps its
///   `null`);
/// - outputs lose every `description` (what their fields mean is said once, in the
///   server's instructions), and no output property is `null` (a field that does not
///   apply is left out);
/// - outputs also lose `required` and `minimum: 0` (counts and sizes), and a nested
///   object with `properties` loses its `type: object` (the root keeps it, as MCP asks):
///   a client reads what is there, and a validator accepts the same documents less
///   strictly, never wrongly.
pub fn compact(schema: &JsonObject, side: Side) -> JsonObject {
    let mut schema = schema.clone();
    schema.remove("$schema");
    let defs = match schema.remove("$defs") {
        Some(Value::Object(defs)) => defs,
        _ => Map::new(),
    };
    trim(&mut schema, &defs, side);
    if side == Side::Output {
        schema.insert("type".into(), Value::from("object"));
    }
    schema
}

fn trim(schema: &mut JsonObject, defs: &JsonObject, side: Side) {
    if let Some(Value::String(target)) = schema.remove("$ref") {
        let def = target
            .strip_prefix("#/$defs/")
            .and_then(|name| defs.get(name))
            .and_then(Value::as_object);
        match def {
            Some(def) => {
                for (key, value) in def {
                    schema.entry(key.clone()).or_insert_with(|| value.clone());
                }
            }
            // Not ours to inline: leave it as it was.
            None => {
                schema.insert("$ref".into(), Value::String(target));
            }
        }
    }
    schema.remove("format");
    if schema.get("additionalProperties") == Some(&Value::Bool(true)) {
        schema.remove("additionalProperties");
    }
    if schema.get("default") == Some(&Value::Null)
        || (schema.get("type") == Some(&Value::from("boolean"))
            && schema.get("default") == Some(&Value::Bool(false)))
    {
        schema.remove("default");
    }
    if side == Side::Output {
        // Outputs are data the model reads after the call; what their fields mean is said
        // once, in the server's instructions.
        schema.remove("description");
        if schema.get("minimum") == Some(&Value::from(0)) {
            schema.remove("minimum");
        }
        if schema.contains_key("properties") && schema.get("type") == Some(&Value::from("object")) {
            schema.remove("type");
        }
    }
    let required: Vec<Value> = match side {
        Side::Input => schema.get("required").and_then(Value::as_array).cloned(),
        Side::Output => schema.remove("required").and_then(|r| match r {
            Value::Array(names) => Some(names),
            _ => None,
        }),
    }
    .unwrap_or_default();
    for (key, value) in schema.iter_mut() {
        match (key.as_str(), value) {
            ("properties", Value::Object(named)) => {
                for (name, sub) in named.iter_mut() {
                    if let Value::Object(sub) = sub {
                        // Outputs leave out what does not apply, so no output
                        // property is ever `null`.
                        if side == Side::Output || !required.contains(&Value::String(name.clone()))
                        {
                            drop_null(sub);
                        }
                        trim(sub, defs, side);
                    }
                }
            }
            ("items" | "additionalProperties", Value::Object(sub)) => trim(sub, defs, side),
            ("anyOf" | "oneOf" | "allOf", Value::Array(subs)) => {
                for sub in subs {
                    if let Value::Object(sub) = sub {
                        trim(sub, defs, side);
                    }
                }
            }
            _ => {}
        }
    }
}

/// An optional property's schema without `null`: `["string", "null"]` becomes `"string"`,
/// a `null` leaves an `enum`, and `anyOf: [X, {"type": "null"}]` becomes X.
fn drop_null(schema: &mut JsonObject) {
    if let Some(Value::Array(types)) = schema.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            schema.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = schema.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if let Some(Value::Array(subs)) = schema.get_mut("anyOf") {
        let null = serde_json::json!({"type": "null"});
        subs.retain(|s| s != &null);
        if let [Value::Object(_)] = subs.as_slice() {
            let Some(Value::Array(mut subs)) = schema.remove("anyOf") else {
                return;
            };
            if let Some(Value::Object(only)) = subs.pop() {
                for (key, value) in only {
                    schema.entry(key).or_insert(value);
                }
            }
        }
    }
}

// ---- schemas spelled from the core's lists ----

fn names<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> Vec<Value> {
    all.iter().map(|v| Value::from(name(*v))).collect()
}

// An optional field says so by being absent from `required` (and, for an output, by being
// skipped when `None`), so these spell the values only.

fn status(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "enum": names(&DeliveryStatus::ALL, DeliveryStatus::as_str) })
}

/// Types and statuses in rows are plain strings: their values are the inputs' enums, and
/// spelling them again in every row schema cost more of the `tools/list` budget than they
/// told.
fn string(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string" })
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
    /// Also finished ones.
    #[serde(default)]
    pub all: bool,
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutboxInput {
    /// Also archived ones.
    #[serde(default)]
    pub all: bool,
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    pub cursor: Option<String>,
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
    /// Bytes, default 8192.
    pub max_bytes: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchInput {
    pub text: Option<String>,
    pub topic: Option<String>,
    #[serde(rename = "type", default)]
    #[schemars(schema_with = "baton_app::ops::message_kinds")]
    pub kind: Option<MessageType>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    /// Yours.
    #[serde(default)]
    #[schemars(schema_with = "status")]
    pub status: Option<DeliveryStatus>,
    /// Default 50.
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<u32>,
    pub cursor: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeInput {
    /// Bytes, default 6000.
    pub max_bytes: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceiptWriteInput {
    pub step: String,
    /// A path or a URI.
    pub artifact: String,
    pub run: Option<String>,
}

/// What `receipt_wait` waits when no `timeout_seconds` is given, and the most it waits.
pub const DEFAULT_WAIT_SECONDS: u32 = 60;
pub const MAX_WAIT_SECONDS: u32 = 300;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceiptWaitInput {
    pub step: String,
    /// Default 60.
    #[schemars(range(min = 1, max = 300))]
    pub timeout_seconds: Option<u32>,
}

// A step of the order lifecycle, as the `order` tool's `action` (a doc comment here would
// be a description in the schema); an order's `allowed` names these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OrderVerb {
    Create,
    Accept,
    Decline,
    Start,
    Report,
    Answer,
    Approve,
    Rework,
    Cancel,
}

impl OrderVerb {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Accept => "accept",
            Self::Decline => "decline",
            Self::Start => "start",
            Self::Report => "report",
            Self::Answer => "answer",
            Self::Approve => "approve",
            Self::Rework => "rework",
            Self::Cancel => "cancel",
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OrderInput {
    pub action: OrderVerb,
    pub id: Option<String>,
    pub document: Option<Map<String, Value>>,
    pub text: Option<String>,
    pub reason: Option<String>,
    pub expect_seq: Option<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OrderShowInput {
    pub id: String,
    pub since: Option<i64>,
    /// Default 60.
    #[schemars(range(min = 1, max = 300))]
    pub timeout_seconds: Option<u32>,
}

// ---- outputs ----

#[derive(Debug, Serialize, JsonSchema)]
pub struct Row {
    pub id: String,
    pub from: String,
    // Recipient name → its status; the data says as much.
    pub to: Map<String, Value>,
    #[serde(rename = "type")]
    #[schemars(schema_with = "string")]
    pub kind: MessageType,
    pub topic: String,
    // Yours (the instructions say so once, not in every row schema).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "string")]
    pub status: Option<DeliveryStatus>,
    // The sender's end.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "string")]
    pub request_status: Option<RequestStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
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
pub fn timestamp(ms: Millis) -> String {
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
    /// Empty when done.
    pub next: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Shown {
    #[serde(flatten)]
    pub message: Row,
    /// Absent when truncated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<Cut>,
}

impl Shown {
    /// A message as `show` returns it: the whole payload, or the text cut at the cap.
    pub fn new(shown: baton_app::Shown, me: &baton_core::Passname) -> Self {
        let message = Row::new(&shown.fetched.envelope, me);
        if !shown.is_cut() {
            return Self {
                message,
                payload: Some(shown.fetched.payload),
                truncated: None,
            };
        }
        Self {
            message,
            payload: None,
            truncated: Some(Cut {
                shown_bytes: shown.text.len(),
                total_bytes: shown.total_bytes,
                text: shown.text,
            }),
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Cut {
    /// Payload JSON, cut.
    pub text: String,
    pub shown_bytes: usize,
    pub total_bytes: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Resumed {
    pub generation: i64,
    pub bytes: usize,
    pub text: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Receipt {
    pub step: String,
    pub artifact: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    pub written_at: String,
    pub by: String,
}

impl Receipt {
    /// `record` as written at `at` by `by`.
    pub fn new(record: ReceiptRecord, at: Millis, by: String) -> Self {
        Self {
            step: record.step,
            artifact: record.artifact,
            hash: record.hash,
            size: record.size,
            run: record.run,
            written_at: timestamp(at),
            by,
        }
    }
}

impl From<baton_core::state::Receipt> for Receipt {
    fn from(r: baton_core::state::Receipt) -> Self {
        Self::new(r.record, r.written.at, r.written.actor)
    }
}

/// An order after a step: where it stands now (`status` reads `expired` past its deadline)
/// and the `action`s allowed next; `note` is the newest step's.
#[derive(Debug, Serialize, JsonSchema)]
pub struct OrderStepped {
    pub id: String,
    pub status: String,
    pub seq: i64,
    pub allowed: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// An order as `order_show` reads it: the same, with its steps (every one, or those after
/// `since`), its document (unless waiting) and the newest report among the steps.
#[derive(Debug, Serialize, JsonSchema)]
pub struct OrderView {
    #[serde(flatten)]
    pub order: OrderStepped,
    pub steps: Vec<OrderStep>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<Map<String, Value>>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct OrderStep {
    pub seq: i64,
    pub action: String,
    pub status: String,
    pub by: String,
    pub at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl OrderStep {
    /// An order's event as a step; `None` for any other event.
    pub fn new(event: &baton_core::Event) -> Option<Self> {
        use baton_core::Change;
        use baton_core::order::OrderChange;
        let (seq, action, status, note) = match &event.change {
            Change::Order(OrderChange::Created(c)) => (c.seq, "create", "offered", None),
            Change::Order(OrderChange::Stepped(s)) => {
                (s.seq, s.action.as_str(), s.status.as_str(), s.note.clone())
            }
            _ => return None,
        };
        Some(Self {
            seq,
            action: action.to_owned(),
            status: status.to_owned(),
            by: event.actor.clone(),
            at: timestamp(event.at),
            note,
        })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueInput {
    /// failures, reviews, needs or approvals (default: all four).
    pub lane: Option<String>,
}

/// The human queue as the `queue` tool returns it: what does not apply is left out.
#[derive(Debug, Serialize, JsonSchema)]
pub struct QueueView {
    pub lanes: Vec<QueueLaneView>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct QueueLaneView {
    /// failures, reviews, needs or approvals.
    pub lane: String,
    pub items: Vec<QueueItemView>,
    /// Items beyond the five shown.
    pub held_back: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct QueueItemView {
    pub id: String,
    pub source: baton_core::queue::Source,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order: Option<String>,
    pub text: String,
    pub at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

impl QueueView {
    pub fn of(lanes: &[baton_core::queue::LaneShown]) -> Self {
        Self {
            lanes: lanes
                .iter()
                .map(|l| QueueLaneView {
                    lane: l.lane.as_str().to_owned(),
                    held_back: l.held_back,
                    items: l
                        .items
                        .iter()
                        .map(|i| QueueItemView {
                            id: i.id.clone(),
                            source: i.source,
                            order: i.order.clone(),
                            text: i.text.clone(),
                            at: baton_core::time::rfc3339(i.at),
                            label: i.label.clone(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}
