//! Every participant as an A2A 1.0 agent: its Agent Card at
//! `/v1/projects/{project}/a2a/{participant}/.well-known/agent-card.json` and the JSON-RPC
//! binding at `/v1/projects/{project}/a2a/{participant}`.
//!
//! An edge like the others: the key names the caller, and every method is a typed
//! operation run through the one dispatcher (`SendMessage` is `send` or `reply`,
//! `CancelTask` the sender's `complete`, the reads `thread`, `show`, `search`). A task is
//! a request from the caller to the participant, its id the request's; its state is read
//! from the inbox each time ([`map`]), so it outlives connections and restarts. This
//! module holds no rule and no state of its own.

pub mod map;
pub mod outbound;
pub mod wire;

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use baton_app::doc::{Agents, ReceiptShown, Search, Sent, Show, Thread};
use baton_app::ops::{self, Typed, Who};
use baton_app::{App, Caller};
use baton_core::{DeliveryStatus, MessageType, Passname, Refusal, RefusalKind};
use baton_store::StoreError;
use serde_json::{Map, Value, json};

use crate::Server;
use crate::auth::Authed;
use crate::error::{ApiError, ErrorDetail};
use wire::{Artifact, Message, Part, Role, RpcError, Task, TaskState, TaskStatus};

/// The topic of a task whose first message names no `contextId`.
pub const DEFAULT_TOPIC: &str = "a2a";
/// The most messages of a task's thread read for one answer (its history and notes).
const MAX_THREAD: usize = 50;
/// The longest `messageId` taken (it is the send's idempotency key).
const MAX_MESSAGE_ID: usize = 128;
/// The domain of the reasons Baton's own errors give (its error codes, upper case).
const BATON_DOMAIN: &str = "baton";

/// The A2A routes, under the project's path `p`.
pub fn routes(p: impl Fn(&str) -> String) -> Router<Arc<Server>> {
    Router::new()
        .route(
            &p("/a2a/{participant}/.well-known/agent-card.json"),
            axum::routing::get(card),
        )
        .route(&p("/a2a/{participant}"), axum::routing::post(rpc))
        .route(
            &p("/a2a/.well-known/agent-card.json"),
            axum::routing::get(no_card_here),
        )
}

/// The caller (the key's participant) speaking to `agent` (the participant in the path).
struct Session<'a> {
    app: &'a App,
    caller: &'a Caller,
    agent: Passname,
}

impl Session<'_> {
    /// Runs the typed operation `T` as the caller, through the one dispatcher.
    async fn call<T: Typed>(&self, input: Value) -> Result<T::Output, StoreError> {
        let who = Who {
            actor: self.caller.participant.as_str(),
            scope: self.caller.scope,
        };
        self.app.call::<T>(who, input).await
    }
}

// ---- the Agent Card -------------------------------------------------------------------------

/// The URL clients reach the server at: the operator's `--public-url` when it has one
/// (behind a proxy the request's headers are the proxy's to say, not the client's),
/// else the scheme and host this request's headers name.
fn origin(server: &Server, headers: &HeaderMap) -> String {
    if let Some(url) = &server.options.public_url {
        return url.trim_end_matches('/').to_owned();
    }
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.len() <= 255
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b))
        })
        .unwrap_or("localhost");
    let https = headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
        .is_some_and(|p| p.eq_ignore_ascii_case("https"));
    format!("{}://{host}", if https { "https" } else { "http" })
}

/// `GET …/a2a/{participant}/.well-known/agent-card.json`: the participant as an agent,
/// for a key of its project (a keyless caller learns nothing of projects or participants).
async fn card(
    State(server): State<Arc<Server>>,
    a: Authed,
    Path(path): Path<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    let name = param(&path, "participant");
    let session = Session {
        app: &a.app,
        caller: &a.caller,
        agent: match Passname::new(name) {
            Ok(p) => p,
            Err(_) => return unknown(name).into_response(),
        },
    };
    let agents = match session.call::<ops::AgentList>(json!({})).await {
        Ok(agents) => agents,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let Some(row) = find(&agents, &session.agent) else {
        return unknown(name).into_response();
    };
    let url = format!(
        "{}/v1/projects/{}/a2a/{}",
        origin(&server, &headers),
        a.project,
        row.name
    );
    let card = agent_card(row, a.project.as_str(), url);
    let body = serde_json::to_vec(&card).expect("a card serializes");
    let tag = etag(&body);
    let cached = [
        (header::CACHE_CONTROL, CARD_CACHE.to_owned()),
        (header::ETAG, tag.clone()),
    ];
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|h| matches_tag(h, &tag))
    {
        return (StatusCode::NOT_MODIFIED, cached).into_response();
    }
    let json = [(header::CONTENT_TYPE, "application/json".to_owned())];
    (cached, json, body).into_response()
}

/// How long a client may keep a card before asking again (with `If-None-Match`): a card
/// changes when the participant's policy does, which is rare; `private` because it is
/// answered to a key.
const CARD_CACHE: &str = "private, max-age=300";

/// A strong entity tag of a card's bytes. SipHash with fixed keys: the same bytes give the
/// same tag on every server of one build; another build may tag them differently, which
/// costs a client one download, never a stale card.
fn etag(body: &[u8]) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    body.hash(&mut hasher);
    format!("\"{:016x}-{:x}\"", hasher.finish(), body.len())
}

/// Whether an `If-None-Match` value names `tag` (or is `*`); a weak tag matches its strong
/// twin, as the weak comparison of a GET allows.
fn matches_tag(header: &str, tag: &str) -> bool {
    header.split(',').map(str::trim).any(|candidate| {
        candidate == "*" || candidate.strip_prefix("W/").unwrap_or(candidate) == tag
    })
}

/// `GET …/a2a/.well-known/agent-card.json`: where a client resolving the card relative to
/// an agent's URL given without its trailing slash looks. Which participant it meant is
/// not in the URL, so no card is guessed: the answer says which URL to give.
async fn no_card_here(a: Authed) -> Response {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "no agent card here: each participant's card is at \
             /v1/projects/{}/a2a/PARTICIPANT/.well-known/agent-card.json",
            a.project
        ),
    )
    .hinted(
        "give an A2A client the agent's URL with a trailing slash (…/a2a/PARTICIPANT/), or \
         the card's own URL",
    )
    .into_response()
}

fn param<'a>(path: &'a [(String, String)], name: &str) -> &'a str {
    path.iter()
        .find(|(n, _)| n == name)
        .map_or("", |(_, v)| v.as_str())
}

fn unknown(name: &str) -> ApiError {
    Refusal::UnknownParticipant {
        name: name.to_owned(),
    }
    .into()
}

fn find<'a>(agents: &'a Agents, name: &Passname) -> Option<&'a baton_app::doc::AgentRow> {
    agents.items.iter().find(|r| &r.name == name)
}

/// The card of participant `row`: its role, the topics it takes work on as skills, one
/// JSON-RPC interface at `url`, a Baton key as bearer.
fn agent_card(row: &baton_app::doc::AgentRow, project: &str, url: String) -> wire::AgentCard {
    let takes_work = row
        .policy
        .may
        .contains(&baton_core::authority::Power::Accept);
    let skills = if !takes_work {
        // A card lists at least one skill; this one says there is no work to hand over.
        vec![wire::AgentSkill {
            id: "no-requests".into(),
            name: "takes no requests".into(),
            description: format!(
                "`{}` is {} and may not take requests on: a task sent to it is refused. \
                 Hand work to a participant whose card lists topics.",
                row.name,
                article(&row.role)
            ),
            tags: vec!["baton".into()],
        }]
    } else {
        match &row.policy.topics {
            Some(topics) => topics
                .iter()
                .map(|t| wire::AgentSkill {
                    id: t.clone(),
                    name: t.clone(),
                    description: format!(
                        "Takes requests on topic `{t}`: name it as the first message's contextId."
                    ),
                    tags: vec![t.clone()],
                })
                .collect(),
            None => vec![wire::AgentSkill {
                id: "any-topic".into(),
                name: "any topic".into(),
                description: format!(
                    "Takes requests on any topic: the first message's contextId names it \
                     (`{DEFAULT_TOPIC}` when absent)."
                ),
                tags: vec!["baton".into()],
            }],
        }
    };
    let mut schemes = Map::new();
    schemes.insert(
        wire::SCHEME.into(),
        json!({"httpAuthSecurityScheme": {
            "scheme": "Bearer",
            "bearerFormat": "Baton key",
            "description": "A key of this project (`baton key issue NAME`): the caller is the key's participant."
        }}),
    );
    wire::AgentCard {
        name: row.name.to_string(),
        description: format!(
            "`{}`, {} of Baton project `{project}`. A task is a request in its inbox: it \
             stays there, with its status, until the participant answers.",
            row.name,
            article(&row.role)
        ),
        supported_interfaces: vec![wire::AgentInterface {
            url,
            protocol_binding: "JSONRPC".into(),
            protocol_version: wire::VERSION.into(),
        }],
        version: env!("CARGO_PKG_VERSION").into(),
        capabilities: wire::AgentCapabilities {
            streaming: false,
            push_notifications: false,
            extended_agent_card: false,
        },
        security_schemes: schemes,
        security_requirements: vec![json!({"schemes": {wire::SCHEME: {"list": []}}})],
        default_input_modes: vec!["text/plain".into(), "application/json".into()],
        default_output_modes: vec!["text/plain".into(), "application/json".into()],
        skills,
    }
}

fn article(role: &str) -> String {
    let an = role.starts_with(['a', 'e', 'i', 'o', 'u']);
    format!("{} {role}", if an { "an" } else { "a" })
}

// ---- JSON-RPC -------------------------------------------------------------------------------

/// `POST …/a2a/{participant}`: one JSON-RPC request, answered with HTTP 200 and its result
/// or error (a request without a valid key is refused before, as every route refuses it).
async fn rpc(
    State(server): State<Arc<Server>>,
    a: Authed,
    Path(path): Path<Vec<(String, String)>>,
    request: axum::extract::Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, body_limit(&server)).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                "the request body is over the server's limit",
            )
            .into_response();
        }
    };
    match answer(&a, param(&path, "participant"), &parts, &bytes).await {
        Some((id, answer)) => Json(wire::response(id, answer)).into_response(),
        // A notification: JSON-RPC answers it with nothing, and no A2A method is one.
        None => StatusCode::NO_CONTENT.into_response(),
    }
}

/// The largest body taken: a payload at the cap, wrapped in a little JSON.
fn body_limit(server: &Server) -> usize {
    server
        .settings
        .payload_cap
        .saturating_mul(2)
        .saturating_add(64 * 1024)
}

/// The version a request asks for: its `A2A-Version` header or query parameter; none
/// means 0.3, as the protocol says.
fn asked_version(parts: &axum::http::request::Parts) -> String {
    let header = parts
        .headers
        .get(wire::VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty());
    let query = parts.uri.query().and_then(|q| {
        q.split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| k.eq_ignore_ascii_case(wire::VERSION_HEADER))
            .map(|(_, v)| v)
            .filter(|v| !v.is_empty())
    });
    header.or(query).unwrap_or("0.3").to_owned()
}

/// Whether `asked` is this edge's major.minor (a patch is ignored).
fn speaks(asked: &str) -> bool {
    let mut parts = asked.split('.');
    let major_minor = (parts.next(), parts.next());
    major_minor == (Some("1"), Some("0")) && parts.all(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// The answer to one frame: its id and its result or error, or `None` for a notification
/// (a request without `id`), which is neither run nor answered: every A2A method is a
/// request whose caller waits for its answer, so a frame without an id is taken as a
/// mistake that must change nothing.
async fn answer(
    a: &Authed,
    agent: &str,
    parts: &axum::http::request::Parts,
    bytes: &[u8],
) -> Option<(Value, Result<Value, RpcError>)> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Some((
            Value::Null,
            Err(RpcError::parse("the body is not UTF-8 text")),
        ));
    };
    // The boundary every edge holds JSON to; a frame wraps a message's data part in five
    // levels (params, message, parts, a part, data).
    let value = match baton_core::json::boundary(text, 5) {
        Ok(value) => value,
        Err(baton_core::json::Unfit::NotJson(e)) => {
            return Some((Value::Null, Err(RpcError::parse(e))));
        }
        Err(baton_core::json::Unfit::Refused(e)) => {
            return Some((Value::Null, Err(RpcError::invalid_request(e.to_string()))));
        }
    };
    // A request is an object: serde would build one from an array's items in order, and a
    // JSON-RPC batch has no place in A2A.
    if !value.is_object() {
        return Some((
            Value::Null,
            Err(RpcError::invalid_request(
                "a request is one JSON object (batches are not taken)",
            )),
        ));
    }
    let request: wire::Request = match serde_json::from_value(value) {
        Ok(r) => r,
        Err(e) => {
            return Some((Value::Null, Err(RpcError::invalid_request(e.to_string()))));
        }
    };
    let id = match request.id {
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => Some(id),
        None => None,
        Some(_) => {
            return Some((
                Value::Null,
                Err(RpcError::invalid_request("`id` is a string or a number")),
            ));
        }
    };
    let answered = id.clone().unwrap_or(Value::Null);
    if request.jsonrpc.as_deref() != Some("2.0") {
        return Some((
            answered,
            Err(RpcError::invalid_request("`jsonrpc` must be \"2.0\"")),
        ));
    }
    let Some(method) = request.method else {
        return Some((
            answered,
            Err(RpcError::invalid_request("`method` is missing")),
        ));
    };
    let id = id?;
    let params = match request.params {
        None => json!({}),
        Some(params @ Value::Object(_)) => params,
        Some(_) => {
            return Some((
                id,
                Err(RpcError::invalid_params(
                    "`params` is an object of named fields",
                )),
            ));
        }
    };
    let asked = asked_version(parts);
    if !speaks(&asked) {
        return Some((id, Err(RpcError::version(&asked))));
    }
    let Ok(agent) = Passname::new(agent) else {
        return Some((id, Err(RpcError::invalid_params(unknown(agent).message))));
    };
    let session = Session {
        app: &a.app,
        caller: &a.caller,
        agent,
    };
    let answer = match method.as_str() {
        "SendMessage" => send_message(&session, params).await,
        "GetTask" => get_task(&session, params).await,
        "ListTasks" => list_tasks(&session, params).await,
        "CancelTask" => cancel_task(&session, params).await,
        "SendStreamingMessage" | "SubscribeToTask" => Err(RpcError::unsupported("streaming")),
        "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig" => Err(RpcError::push_not_supported()),
        // The card says `extendedAgentCard: false`, so the protocol's answer is
        // "unsupported", not "not configured".
        "GetExtendedAgentCard" => Err(RpcError::unsupported("an extended agent card")),
        other => Err(RpcError::method_not_found(other)),
    };
    Some((id, answer))
}

/// `params` as `T`, or invalid params naming what does not fit.
fn params<T: serde::de::DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params).map_err(|e| RpcError::invalid_params(e.to_string()))
}

/// A store's answer as a JSON-RPC error: a rule's refusal (a permanent conflict, such as a
/// `messageId` reused for other content, included) is invalid params, a power the caller
/// lacks an invalid request, anything retryable or failed internal. Baton's own error
/// rides in `data` twice: as a `google.rpc.ErrorInfo` (its code the reason, in domain
/// `baton`) for any client, and whole (`code`, `message`, `hint`, `refusal`) as a
/// `google.protobuf.Struct`.
fn store_error(e: StoreError) -> RpcError {
    let kind = match &e {
        StoreError::Refused(r) if r.is_retryable() => None,
        StoreError::Refused(r) => Some(r.kind()),
        _ => None,
    };
    let api = ApiError::from(e);
    let detail = ErrorDetail {
        code: api.code,
        message: api.message.clone(),
        hint: api.hint,
        retryable: api.retryable,
        refusal: api.refusal.map(|r| *r),
    };
    let error = match kind {
        Some(RefusalKind::Invalid | RefusalKind::NotFound | RefusalKind::Conflict) => {
            RpcError::invalid_params(api.message)
        }
        Some(RefusalKind::Forbidden | RefusalKind::Unauthenticated) => {
            RpcError::invalid_request(api.message)
        }
        None => RpcError::internal(api.message),
    };
    let mut metadata = Map::new();
    if let Some(hint) = &detail.hint {
        metadata.insert("hint".into(), json!(hint));
    }
    if detail.retryable {
        metadata.insert("retryable".into(), json!("true"));
    }
    error
        .with_detail(json!({
            "@type": wire::ERROR_INFO,
            "reason": detail.code.to_ascii_uppercase(),
            "domain": BATON_DOMAIN,
            "metadata": metadata,
        }))
        .with_detail(json!({ "@type": wire::STRUCT, "value": detail }))
}

// ---- the methods ----------------------------------------------------------------------------

/// What a message's parts send: its text parts joined as `body`, its data parts as
/// `data` (a message of text alone sends `{"body": TEXT}`). Files are not taken.
fn carried(message: &Message) -> Result<Value, RpcError> {
    let mut texts = Vec::new();
    let mut data = Vec::new();
    for part in &message.parts {
        let fields = part.content_fields();
        if fields.len() > 1 {
            return Err(RpcError::invalid_params(format!(
                "a part carries one content, not {}: send each as a part of its own",
                fields.join(" and ")
            )));
        }
        match part {
            Part { raw: Some(_), .. } => return Err(RpcError::content_type("file (raw)")),
            Part { url: Some(_), .. } => return Err(RpcError::content_type("file (url)")),
            Part { text: Some(t), .. } => texts.push(t.as_str()),
            Part { data: Some(d), .. } => data.push(d.clone()),
            _ => return Err(RpcError::invalid_params("a part carries no content")),
        }
    }
    if texts.is_empty() && data.is_empty() {
        return Err(RpcError::invalid_params("the message has no parts"));
    }
    let body = texts.join("\n");
    Ok(if data.is_empty() {
        json!({ "body": body })
    } else if texts.is_empty() {
        json!({ "payload": { "data": data } })
    } else {
        json!({ "payload": { "body": body, "data": data } })
    })
}

/// `SendMessage`: a message without `taskId` is a request to the participant (its
/// `messageId` the idempotency key, its `contextId` the topic); with one, a reply in the
/// task's thread. Answers the task.
async fn send_message(s: &Session<'_>, params_value: Value) -> Result<Value, RpcError> {
    let request: wire::SendMessageRequest = params(params_value)?;
    let configuration = request.configuration.unwrap_or_default();
    if configuration.task_push_notification_config.is_some() {
        return Err(RpcError::push_not_supported());
    }
    let message = request.message;
    if message.message_id.is_empty() || message.message_id.len() > MAX_MESSAGE_ID {
        return Err(RpcError::invalid_params(format!(
            "`messageId` must be 1 to {MAX_MESSAGE_ID} bytes"
        )));
    }
    let mut input = carried(&message)?;
    let fields = input.as_object_mut().expect("an object");
    fields.insert("type".into(), json!(MessageType::Request.as_str()));
    fields.insert("idempotency_key".into(), json!(message.message_id));
    let id = match &message.task_id {
        Some(task) => {
            // A follow-up: a message in the task's thread, to the participant.
            let current = load(s, task, Some(0))
                .await?
                .ok_or_else(|| RpcError::task_not_found(task))?;
            if current.status.state.is_final() {
                return Err(RpcError::unsupported(&format!(
                    "a message to a task that is {}",
                    current.status.state.as_str()
                )));
            }
            if let Some(context) = &message.context_id
                && context != &current.context_id
            {
                return Err(RpcError::invalid_params(format!(
                    "task {task:?} is in context {:?}, not {context:?}",
                    current.context_id
                )));
            }
            fields.insert("type".into(), json!(MessageType::Message.as_str()));
            fields.insert("id".into(), json!(task));
            fields.insert("to".into(), json!([s.agent]));
            s.call::<ops::Reply>(input).await.map_err(store_error)?;
            task.clone()
        }
        None => {
            let topic = message.context_id.as_deref().unwrap_or(DEFAULT_TOPIC);
            fields.insert("topic".into(), json!(topic));
            fields.insert("to".into(), json!([s.agent]));
            let Sent { id, .. } = s
                .call::<ops::SendMessage>(input)
                .await
                .map_err(store_error)?;
            id
        }
    };
    let task = load(s, &id, configuration.history_length)
        .await?
        .ok_or_else(|| {
            RpcError::invalid_params(format!(
                "`messageId` {:?} was used before for another message",
                message.message_id
            ))
        })?;
    Ok(json!({ "task": task }))
}

async fn get_task(s: &Session<'_>, params_value: Value) -> Result<Value, RpcError> {
    let request: wire::TaskIdRequest = params(params_value)?;
    let task = load(s, &request.id, request.history_length)
        .await?
        .ok_or_else(|| RpcError::task_not_found(&request.id))?;
    Ok(serde_json::to_value(task).expect("a task serializes"))
}

/// `CancelTask`: the sender closes its end of a request the participant has not finished.
async fn cancel_task(s: &Session<'_>, params_value: Value) -> Result<Value, RpcError> {
    let request: wire::TaskIdRequest = params(params_value)?;
    let task = load(s, &request.id, Some(0))
        .await?
        .ok_or_else(|| RpcError::task_not_found(&request.id))?;
    if task.status.state.is_final() {
        return Err(RpcError::not_cancelable(
            &request.id,
            task.status.state.as_str(),
        ));
    }
    s.call::<ops::Complete>(json!({ "id": request.id }))
        .await
        .map_err(store_error)?;
    let task = load(s, &request.id, request.history_length)
        .await?
        .ok_or_else(|| RpcError::task_not_found(&request.id))?;
    Ok(serde_json::to_value(task).expect("a task serializes"))
}

/// `ListTasks`: the caller's requests to the participant (`contextId` the topic, `status`
/// a state, `statusTimestampAfter` a time), the newest status change first, a page at a
/// time. A task's place in the list is (when its recipient's status last changed, its
/// id), and the page token is the place of the page's last task: a token keeps its place
/// while tasks arrive and move, so paging on shows no task twice and skips none that
/// stayed put (one that moves goes to the front, where the next list finds it).
/// `totalSize` counts every task the filters keep; placing each task reads it, and a
/// `status` filter reads its state too.
async fn list_tasks(s: &Session<'_>, params_value: Value) -> Result<Value, RpcError> {
    let request: wire::ListTasksRequest = params(params_value)?;
    let filter = wire::StateFilter::parse(request.status.as_deref()).ok_or_else(|| {
        RpcError::invalid_params(format!(
            "`status` {:?} is not a task state",
            request.status.as_deref().unwrap_or_default()
        ))
    })?;
    let after = match request.status_timestamp_after.as_deref() {
        None | Some("") => None,
        Some(text) => Some(baton_core::time::timestamp(text).ok_or_else(|| {
            RpcError::invalid_params(format!(
                "`statusTimestampAfter` {text:?} is not an RFC 3339 time"
            ))
        })?),
    };
    let size = request.page_size.unwrap_or(50);
    if !(1..=100).contains(&size) {
        return Err(RpcError::invalid_params("`pageSize` must be 1 to 100"));
    }
    let size = usize::try_from(size).expect("1 to 100");
    let token = match request.page_token.as_deref().filter(|t| !t.is_empty()) {
        None => None,
        Some(token) => Some(Place::parse(token).ok_or_else(|| {
            RpcError::invalid_params(format!(
                "`pageToken` {token:?} is not one this list gave: start again without it"
            ))
        })?),
    };
    // Every request of the caller's to the participant (in the context), placed.
    let mut places = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut query = json!({
            "from": s.caller.participant,
            "to": s.agent,
            "type": MessageType::Request.as_str(),
            "limit": 100,
        });
        if let Some(topic) = &request.context_id {
            query["topic"] = json!(topic);
        }
        if let Some(after) = &cursor {
            query["cursor"] = json!(after);
        }
        let page: Search = s
            .call::<ops::SearchMessages>(query)
            .await
            .map_err(store_error)?;
        for row in page.items {
            let shown: Show = s
                .call::<ops::ShowMessage>(json!({ "id": row.id, "max_bytes": 0 }))
                .await
                .map_err(store_error)?;
            if let Some(changed) = status_time(&shown.recipients, &s.agent) {
                places.push(Place {
                    changed,
                    id: row.id,
                });
            }
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    places.retain(|p| after.is_none_or(|after| p.changed > after));
    places.sort_unstable_by(|a, b| b.cmp(a));
    let start = match &token {
        None => 0,
        Some(token) => places.partition_point(|p| p >= token),
    };
    // Each kept task counts; those from `start` fill the page; one kept after it means
    // another page.
    let (mut total, mut after_page) = (0, 0);
    let mut tasks = Vec::new();
    let mut last = None;
    for (at, place) in places.iter().enumerate() {
        let wanted = at >= start && tasks.len() < size;
        let kept = if filter == wire::StateFilter::Any && !wanted {
            true
        } else {
            match load(s, &place.id, request.history_length).await? {
                Some(mut task) if filter.admits(task.status.state) => {
                    if wanted {
                        if request.include_artifacts != Some(true) {
                            task.artifacts.clear();
                        }
                        tasks.push(task);
                        last = Some(place);
                    }
                    true
                }
                _ => false,
            }
        };
        if kept {
            total += 1;
            if at >= start && !wanted {
                after_page += 1;
            }
        }
    }
    let next = match last {
        Some(last) if after_page > 0 => last.token(),
        _ => String::new(),
    };
    Ok(json!({
        "tasks": tasks,
        "nextPageToken": next,
        "pageSize": size,
        "totalSize": total,
    }))
}

/// Where a task stands in `ListTasks`: newest status change first, then the greater id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Place {
    changed: baton_core::Millis,
    id: String,
}

impl Place {
    /// The page token of a page ending here: the time in hex, a dot, the id.
    fn token(&self) -> String {
        format!("{:x}.{}", self.changed, self.id)
    }

    fn parse(token: &str) -> Option<Self> {
        let (changed, id) = token.split_once('.')?;
        let changed = i64::from_str_radix(changed, 16).ok()?;
        (!id.is_empty()).then(|| Self {
            changed,
            id: id.to_owned(),
        })
    }
}

/// When `agent`'s delivery status, among `recipients`, last changed.
fn status_time(
    recipients: &[baton_app::doc::RecipientRow],
    agent: &Passname,
) -> Option<baton_core::Millis> {
    let recipient = recipients.iter().find(|r| &r.name == agent)?;
    baton_core::time::timestamp(&recipient.changed_at)
}

// ---- a task, read from the inbox ------------------------------------------------------------

/// The text and data of a stored payload, as parts: `body` a text part, a `data` list one
/// data part each, anything else one data part; a note's status marker left out.
pub(crate) fn payload_parts(shown: &Show) -> Vec<Part> {
    let Some(payload) = &shown.payload else {
        return vec![Part::text(shown.payload_text.clone().unwrap_or_default())];
    };
    let mut rest = payload.clone();
    for marker in map::MARKERS {
        if rest.get(marker.as_str()).and_then(Value::as_str) == shown.message.reply_to.as_deref() {
            rest.remove(marker.as_str());
        }
    }
    let mut parts = Vec::new();
    if let Some(Value::String(body)) = rest.remove("body") {
        parts.push(Part::text(body));
    }
    match rest.remove("data") {
        Some(Value::Array(items)) if rest.is_empty() => {
            parts.extend(items.into_iter().map(Part::data));
        }
        Some(other) => {
            rest.insert("data".into(), other);
        }
        None => {}
    }
    if !rest.is_empty() {
        parts.push(Part::data(Value::Object(rest)));
    }
    parts
}

/// The status a note names (`{"completed": PARENT}`), when `shown` is one.
fn marker(shown: &Show) -> Option<DeliveryStatus> {
    let payload = shown.payload.as_ref()?;
    let parent = shown.message.reply_to.as_deref()?;
    map::MARKERS
        .into_iter()
        .find(|m| payload.get(m.as_str()).and_then(Value::as_str) == Some(parent))
}

/// The task `id` as the caller sees it: `None` unless it is a request the caller sent to
/// the participant (whatever else it is, and whether it exists at all, reads alike). Its
/// history holds the last `history` messages (all, up to [`MAX_THREAD`], when `None`).
async fn load(s: &Session<'_>, id: &str, history: Option<i64>) -> Result<Option<Task>, RpcError> {
    let me = &s.caller.participant;
    let thread: Thread = match s.call::<ops::ThreadOf>(json!({ "id": id })).await {
        Ok(thread) => thread,
        Err(StoreError::Refused(r))
            if matches!(r.kind(), RefusalKind::NotFound | RefusalKind::Invalid) =>
        {
            return Ok(None);
        }
        Err(e) => return Err(store_error(e)),
    };
    // Ids are opaque to A2A: the whole id, never a prefix.
    let Some(root) = thread.items.iter().find(|r| r.message.id == id) else {
        return Ok(None);
    };
    let Some(recipient) = root.recipients.iter().find(|r| r.name == s.agent) else {
        return Ok(None);
    };
    if root.message.kind != MessageType::Request || &root.message.from != me {
        return Ok(None);
    }
    // The task's messages: the request and what replies to it, between the two parties.
    let mut under = vec![id.to_owned()];
    let mut ids = vec![id.to_owned()];
    for row in &thread.items {
        if row
            .message
            .reply_to
            .as_ref()
            .is_some_and(|p| under.contains(p))
        {
            under.push(row.message.id.clone());
            let between = (&row.message.from == me && row.message.to.contains(&s.agent))
                || (row.message.from == s.agent && row.message.to.contains(me));
            if between {
                ids.push(row.message.id.clone());
            }
        }
    }
    if ids.len() > MAX_THREAD {
        // The request and the newest after it.
        let newest = ids.split_off(ids.len() - (MAX_THREAD - 1));
        ids.truncate(1);
        ids.extend(newest);
    }
    let mut shown = Vec::with_capacity(ids.len());
    for message in &ids {
        let show: Show = s
            .call::<ops::ShowMessage>(json!({ "id": message }))
            .await
            .map_err(store_error)?;
        shown.push(show);
    }
    let context = root.message.topic.to_string();
    // A message keeps the id its sender gave it (the send's idempotency key, shown to the
    // sender alone: the caller's own messages), and Baton's id otherwise.
    let as_message = |show: &Show| Message {
        message_id: show
            .idempotency_key
            .clone()
            .unwrap_or_else(|| show.message.id.clone()),
        context_id: Some(context.clone()),
        task_id: Some(id.to_owned()),
        role: if &show.message.from == me {
            Role::User
        } else {
            Role::Agent
        },
        parts: payload_parts(show),
        metadata: None,
        extensions: Vec::new(),
        reference_task_ids: Vec::new(),
    };
    let from_agent = |show: &&Show| show.message.from == s.agent;
    let notes: Vec<(&Show, DeliveryStatus)> = shown
        .iter()
        .filter(from_agent)
        .filter_map(|show| marker(show).map(|m| (show, m)))
        .collect();
    let last = shown.iter().skip(1).last();
    let question = last.filter(|l| {
        l.message.from == s.agent && l.message.kind == MessageType::Message && marker(l).is_none()
    });
    let state = map::state(map::Facts {
        recipient: recipient.status,
        sender: root.message.request_status,
        noted: notes.last().map(|(_, m)| *m),
        asked: question.is_some(),
    });
    let said = match state {
        TaskState::InputRequired => question,
        TaskState::Failed | TaskState::Rejected => notes.last().map(|(show, _)| *show),
        _ => None,
    };
    let mut artifacts: Vec<Artifact> = shown
        .iter()
        .filter(from_agent)
        .filter(|show| show.message.kind == MessageType::Info)
        .map(|show| Artifact {
            artifact_id: show.message.id.clone(),
            name: if marker(show) == Some(DeliveryStatus::Completed) {
                "completion note".into()
            } else {
                "info".into()
            },
            description: None,
            parts: payload_parts(show),
        })
        .collect();
    // A receipt written for the task (`baton receipt write --step TASK`).
    match s.call::<ops::ReceiptShow>(json!({ "step": id })).await {
        Ok(ReceiptShown { receipt }) => artifacts.push(Artifact {
            artifact_id: format!("receipt-{id}"),
            name: "receipt".into(),
            description: Some(format!("where step {id} landed")),
            parts: vec![
                Part::url(receipt.record.artifact.clone()),
                Part::data(serde_json::to_value(&receipt.record).expect("a receipt serializes")),
            ],
        }),
        Err(StoreError::Refused(r)) if r.kind() == RefusalKind::NotFound => {}
        Err(e) => return Err(store_error(e)),
    }
    let keep = match history {
        Some(n) => usize::try_from(n.max(0)).unwrap_or(usize::MAX),
        None => MAX_THREAD,
    };
    let skip = shown.len().saturating_sub(keep);
    Ok(Some(Task {
        id: id.to_owned(),
        context_id: context.clone(),
        status: TaskStatus {
            state,
            message: said.map(as_message),
            timestamp: Some(recipient.changed_at.clone()),
        },
        artifacts,
        history: shown.iter().skip(skip).map(as_message).collect(),
    }))
}
