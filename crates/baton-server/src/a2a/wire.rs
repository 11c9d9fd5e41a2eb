//! A2A 1.0's JSON, as far as Baton speaks it: the Agent Card, messages and their parts,
//! tasks with their status and artifacts, and the JSON-RPC frame. The shapes are the
//! protocol's ProtoJSON (camelCase fields, `TASK_STATE_*` and `ROLE_*` enums, a part's
//! content named by its field). Nothing here reads the store or decides anything.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The protocol version this edge speaks (major.minor; a patch is ignored).
pub const VERSION: &str = "1.0";
/// The header (or query parameter) a client names its version in.
pub const VERSION_HEADER: &str = "A2A-Version";
/// The security scheme the card names: a Baton key as an HTTP bearer token.
pub const SCHEME: &str = "baton-key";

// ---- JSON-RPC -------------------------------------------------------------------------------

/// A JSON-RPC 2.0 request, held loosely so each misfit gets its own error code.
#[derive(Debug, Deserialize)]
pub struct Request {
    #[serde(default)]
    pub jsonrpc: Option<String>,
    #[serde(default)]
    pub id: Option<Value>,
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub params: Option<Value>,
}

/// A JSON-RPC error: A2A's codes and the standard ones. `data` is A2A's error details: a
/// list of ProtoJSON `Any` objects, each naming its type in `@type`.
#[derive(Debug, Clone, Serialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// The type of the detail an A2A error names itself by, and Baton's own errors too.
pub const ERROR_INFO: &str = "type.googleapis.com/google.rpc.ErrorInfo";
/// The type of a detail carrying a JSON object.
pub const STRUCT: &str = "type.googleapis.com/google.protobuf.Struct";
/// The domain of A2A's own error reasons.
pub const A2A_DOMAIN: &str = "a2a-protocol.org";
/// The most characters of a caller's method name said back in an error.
const MAX_ECHO: usize = 64;

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// An A2A error: its code, its message, and a `google.rpc.ErrorInfo` naming its type
    /// (`reason`, e.g. `TASK_NOT_FOUND`) in A2A's domain, as the protocol asks.
    fn a2a(code: i64, reason: &str, message: impl Into<String>) -> Self {
        Self::new(code, message).with_detail(
            serde_json::json!({"@type": ERROR_INFO, "reason": reason, "domain": A2A_DOMAIN}),
        )
    }

    /// Adds `detail` (an object with its `@type`) to the error's details.
    pub fn with_detail(mut self, detail: Value) -> Self {
        debug_assert!(detail.get("@type").is_some(), "a detail names its type");
        match &mut self.data {
            Some(Value::Array(details)) => details.push(detail),
            _ => self.data = Some(Value::Array(vec![detail])),
        }
        self
    }

    pub fn parse(message: impl Into<String>) -> Self {
        Self::new(-32700, message)
    }
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(-32600, message)
    }
    /// No such method: its name said back cut short (it is the caller's, of any length).
    pub fn method_not_found(method: &str) -> Self {
        let mut shown: String = method.chars().take(MAX_ECHO).collect();
        if shown.len() < method.len() {
            shown.push('…');
        }
        Self::new(-32601, format!("no method {shown:?}"))
    }
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(-32602, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(-32603, message)
    }
    pub fn task_not_found(id: &str) -> Self {
        Self::a2a(-32001, "TASK_NOT_FOUND", format!("task {id:?} not found"))
    }
    pub fn not_cancelable(id: &str, state: &str) -> Self {
        Self::a2a(
            -32002,
            "TASK_NOT_CANCELABLE",
            format!("task {id:?} is {state}: it can no longer be canceled"),
        )
    }
    pub fn push_not_supported() -> Self {
        Self::a2a(
            -32003,
            "PUSH_NOTIFICATION_NOT_SUPPORTED",
            "push notifications are not supported",
        )
    }
    pub fn unsupported(what: &str) -> Self {
        Self::a2a(
            -32004,
            "UNSUPPORTED_OPERATION",
            format!("{what} is not supported"),
        )
    }
    pub fn content_type(what: &str) -> Self {
        Self::a2a(
            -32005,
            "CONTENT_TYPE_NOT_SUPPORTED",
            format!("{what} parts are not taken: send text or data parts"),
        )
    }
    pub fn version(asked: &str) -> Self {
        Self::a2a(
            -32009,
            "VERSION_NOT_SUPPORTED",
            format!("A2A version {asked:?} is not supported: this agent speaks {VERSION}"),
        )
    }
}

/// A JSON-RPC response: its result or its error.
pub fn response(id: Value, answer: Result<Value, RpcError>) -> Value {
    match answer {
        Ok(result) => serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => serde_json::json!({"jsonrpc": "2.0", "id": id, "error": error}),
    }
}

// ---- messages and tasks ---------------------------------------------------------------------

/// A message's role: the client's (`user`) or the agent's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    #[serde(rename = "ROLE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "ROLE_USER")]
    User,
    #[serde(rename = "ROLE_AGENT")]
    Agent,
}

/// One part of a message or artifact: text, structured data, or a file (by bytes or
/// URL), which Baton does not take in.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

impl Part {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: Some(text.into()),
            ..Self::default()
        }
    }

    pub fn data(data: Value) -> Self {
        Self {
            data: Some(data),
            media_type: Some("application/json".into()),
            ..Self::default()
        }
    }

    pub fn url(url: impl Into<String>) -> Self {
        Self {
            url: Some(url.into()),
            ..Self::default()
        }
    }

    /// The content fields the part sets. A part's content is a `oneof`: a valid part sets
    /// exactly one of `text`, `data`, `raw` and `url`.
    pub fn content_fields(&self) -> Vec<&'static str> {
        [
            ("text", self.text.is_some()),
            ("data", self.data.is_some()),
            ("raw", self.raw.is_some()),
            ("url", self.url.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub message_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    pub role: Role,
    #[serde(default)]
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_task_ids: Vec<String>,
}

/// A task's state, as the protocol names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskState {
    #[serde(rename = "TASK_STATE_SUBMITTED")]
    Submitted,
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
    #[serde(rename = "TASK_STATE_COMPLETED")]
    Completed,
    #[serde(rename = "TASK_STATE_FAILED")]
    Failed,
    #[serde(rename = "TASK_STATE_CANCELED")]
    Canceled,
    #[serde(rename = "TASK_STATE_REJECTED")]
    Rejected,
}

impl TaskState {
    pub const ALL: [TaskState; 7] = [
        Self::Submitted,
        Self::Working,
        Self::InputRequired,
        Self::Completed,
        Self::Failed,
        Self::Canceled,
        Self::Rejected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Submitted => "TASK_STATE_SUBMITTED",
            Self::Working => "TASK_STATE_WORKING",
            Self::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            Self::Completed => "TASK_STATE_COMPLETED",
            Self::Failed => "TASK_STATE_FAILED",
            Self::Canceled => "TASK_STATE_CANCELED",
            Self::Rejected => "TASK_STATE_REJECTED",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Whether nothing more will happen to it.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Canceled | Self::Rejected
        )
    }
}

/// What `ListTasks` may filter on: any state, one Baton's tasks take, or one of the
/// protocol's they never take (`TASK_STATE_AUTH_REQUIRED`: the key is checked before any
/// task exists, so no task waits for authentication).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateFilter {
    Any,
    Is(TaskState),
    Never,
}

impl StateFilter {
    /// The filter `status` names, or `None` when it names no task state.
    pub fn parse(status: Option<&str>) -> Option<Self> {
        match status {
            None | Some("" | "TASK_STATE_UNSPECIFIED") => Some(Self::Any),
            Some("TASK_STATE_AUTH_REQUIRED") => Some(Self::Never),
            Some(name) => TaskState::parse(name).map(Self::Is),
        }
    }

    pub fn admits(self, state: TaskState) -> bool {
        match self {
            Self::Any => true,
            Self::Is(wanted) => wanted == state,
            Self::Never => false,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub artifact_id: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
}

// ---- requests' params -----------------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    pub message: Message,
    #[serde(default)]
    pub configuration: Option<SendMessageConfiguration>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    #[serde(default)]
    pub history_length: Option<i64>,
    #[serde(default)]
    pub task_push_notification_config: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdRequest {
    pub id: String,
    #[serde(default)]
    pub history_length: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest {
    #[serde(default)]
    pub context_id: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub page_size: Option<i64>,
    #[serde(default)]
    pub page_token: Option<String>,
    #[serde(default)]
    pub history_length: Option<i64>,
    #[serde(default)]
    pub include_artifacts: Option<bool>,
    /// RFC 3339: only tasks whose status changed after it.
    #[serde(default)]
    pub status_timestamp_after: Option<String>,
}

// ---- the Agent Card -------------------------------------------------------------------------

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    pub name: String,
    pub description: String,
    pub supported_interfaces: Vec<AgentInterface>,
    pub version: String,
    pub capabilities: AgentCapabilities,
    pub security_schemes: Map<String, Value>,
    pub security_requirements: Vec<Value>,
    pub default_input_modes: Vec<String>,
    pub default_output_modes: Vec<String>,
    pub skills: Vec<AgentSkill>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInterface {
    pub url: String,
    pub protocol_binding: String,
    pub protocol_version: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    pub streaming: bool,
    pub push_notifications: bool,
    pub extended_agent_card: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSkill {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
}
