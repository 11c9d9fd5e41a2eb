//! Errors as HTTP answers: a status derived from the refusal's kind alone, and a JSON body
//! `{"error": {"code", "message", "hint"}}` whose `code` is stable (the kind) and whose hint
//! names JSON fields and endpoints — this edge's words, as the CLI names flags and MCP
//! names tools.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use baton_app::ops::Method;
use baton_app::ops::hints::{self, Arg, Next, Spell};
use baton_core::{Refusal, RefusalKind};
use baton_store::StoreError;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::routes::PROJECT;

/// What every failed request answers.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ErrorDetail {
    /// Stable: `refused`, `not_found`, `forbidden`, `conflict`, `unauthenticated`, `busy`,
    /// `bad_request`, `too_large`, `timeout` or `failed`.
    pub code: &'static str,
    pub message: String,
    /// What to do next, when there is something to say.
    pub hint: Option<String>,
    /// Present and true when the same request may succeed if sent again: the store was
    /// busy, or another writer moved the order first (`conflict`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retryable: bool,
    /// The refusal as data, when the store or a rule refused: what Baton's own command
    /// line reads to word it in its own terms (flags and commands, not these routes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<serde_json::Value>,
}

/// A failed request.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub hint: Option<String>,
    pub retryable: bool,
    /// Boxed: most answers carry none, and an error is moved through every handler.
    pub refusal: Option<Box<serde_json::Value>>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            hint: None,
            retryable: false,
            refusal: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// Marks it as one that asking again may answer differently (busy, stopping).
    pub fn retryable(mut self) -> Self {
        self.retryable = true;
        self
    }

    pub fn hinted(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// The status a refusal of this kind answers with.
pub fn status(kind: RefusalKind) -> StatusCode {
    match kind {
        RefusalKind::Invalid => StatusCode::UNPROCESSABLE_ENTITY,
        RefusalKind::NotFound => StatusCode::NOT_FOUND,
        RefusalKind::Forbidden => StatusCode::FORBIDDEN,
        RefusalKind::Conflict => StatusCode::CONFLICT,
        RefusalKind::Unauthenticated => StatusCode::UNAUTHORIZED,
    }
}

/// How HTTP spells a refusal's words: JSON fields, and an operation as its route under
/// `/v1/projects/{project}` (its input as the query or the JSON body); an operation with
/// no route is named as its command line, marked (CLI).
struct Routes;

/// Fields by their JSON names.
impl Spell for Routes {
    fn run(&self, next: &Next) -> Option<String> {
        let route = next.op.typed?.route;
        let params: Vec<&str> = route.params().collect();
        // A path's field given a value is filled in; one to fill stays `{field}`.
        let path: Vec<String> = route
            .path
            .split('/')
            .map(|segment| {
                let field = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}'));
                match next.args().find(|(name, _)| Some(*name) == field) {
                    Some((_, Arg::Is(value))) => value.clone(),
                    _ => segment.to_owned(),
                }
            })
            .collect();
        let given: Map<String, Value> = next
            .args()
            .filter(|(name, _)| !params.contains(name))
            .map(|(name, arg)| {
                let value = match arg {
                    Arg::Is(v) => Value::from(v.as_str()),
                    Arg::Yes => Value::Bool(true),
                    Arg::Plus(v) => json!([v, "…"]),
                    Arg::Fill(placeholder) => Value::from(*placeholder),
                };
                ((*name).to_owned(), value)
            })
            .collect();
        let (method, rest) = match route.method {
            Method::Get => {
                let query: Vec<String> = given
                    .iter()
                    .map(|(k, v)| match v {
                        Value::String(s) => format!("{k}={s}"),
                        other => format!("{k}={other}"),
                    })
                    .collect();
                let query = if query.is_empty() {
                    String::new()
                } else {
                    format!("?{}", query.join("&"))
                };
                ("GET", query)
            }
            Method::Post => ("POST", String::new()),
        };
        let body = if route.method == Method::Post && !given.is_empty() {
            format!(" {}", Value::Object(given))
        } else {
            String::new()
        };
        Some(format!(
            "`{method} {PROJECT}{}{rest}`{body}",
            path.join("/")
        ))
    }

    fn step(&self, next: &Next) -> String {
        self.run(next).unwrap_or_else(|| self.elsewhere(next))
    }

    fn again(&self, _: &Next) -> String {
        "send the request again".to_owned()
    }
}

/// What only HTTP says of a refusal, before the words every edge says.
fn http_note(r: &Refusal) -> Option<&'static str> {
    match r {
        Refusal::Unauthenticated => {
            Some("send `Authorization: Bearer TOKEN` with a key issued by `baton key issue`")
        }
        _ => None,
    }
}

/// What to do next about a refusal, naming fields and routes.
fn hint(r: &Refusal) -> Option<String> {
    let said = hints::explain(r, None).hint(&Routes);
    match (http_note(r), said) {
        (Some(note), Some(said)) => Some(format!("{note}; {said}")),
        (note, said) => said.or(note.map(str::to_owned)),
    }
}

impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> Self {
        Self {
            status: status(r.kind()),
            code: r.kind().as_str(),
            hint: hint(&r),
            retryable: r.is_retryable(),
            message: r.to_string(),
            refusal: serde_json::to_value(&r).ok().map(Box::new),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Refused(r) => r.into(),
            StoreError::Busy { .. } => {
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "busy", e.to_string())
                    .retryable()
                    .hinted("retry: nothing was written")
            }
            // A failover: the answer is retryable, and a write cut off by it is settled
            // by retrying it with its idempotency key. The database's hosts are the
            // server's business, not the client's.
            StoreError::Reconnecting { .. } => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "reconnecting",
                "the database is failing over: none of its hosts takes writes yet",
            )
            .retryable()
            .hinted("retry in a moment; retry a write with the same idempotency_key"),
            // An operator's to fix; the client may retry once there is room.
            StoreError::Full => {
                eprintln!("baton serve: {e}");
                Self::new(StatusCode::INSUFFICIENT_STORAGE, "full", e.to_string())
                    .hinted("the server's disk is full: nothing was written; retry later")
            }
            // What failed inside the store is for the server's log, not for the client.
            other => {
                eprintln!("baton serve: store failure: {other}");
                Self::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "failed",
                    "the store failed; the server's log says why",
                )
            }
        }
    }
}

/// The error code of a failed answer, left on the response for the request counter.
#[derive(Debug, Clone, Copy)]
pub struct ErrorCode(pub &'static str);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let retry = self.status == StatusCode::SERVICE_UNAVAILABLE;
        let code = ErrorCode(self.code);
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
                hint: self.hint,
                retryable: self.retryable,
                refusal: self.refusal.map(|r| *r),
            },
        };
        let mut response = (self.status, Json(body)).into_response();
        response.extensions_mut().insert(code);
        if retry {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            // A 503 may come before the request's body was read (the key checked while
            // the store is failing over, say); the connection then cannot be reused, and
            // saying so keeps a client from retrying on a connection about to close.
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"baton\""),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use baton_app::ops::hints::{Named, Noting, every_refusal, explain};

    use super::*;

    /// Every refusal's hint over HTTP: each route it names is one the server routes and
    /// documents, and what has no route is named as its command line.
    #[test]
    fn every_refusal_names_routes_the_server_has() {
        let (_, document) = crate::routes::typed(crate::api::Api::new()).finish();
        for r in every_refusal() {
            let noting = Noting::new(&Routes);
            let hint = explain(&r, None).hint(&noting).unwrap_or_default();
            for named in noting.named.into_inner() {
                match named {
                    Named::Run(next) | Named::Step(next) if next.op.typed.is_some() => {
                        let route = next.op.typed.unwrap().route;
                        let method = match route.method {
                            Method::Get => "get",
                            Method::Post => "post",
                        };
                        let path = format!("{PROJECT}{}", route.path);
                        assert!(
                            document["paths"][&path][method].is_object(),
                            "{method} {path}, named in {hint:?}, is not in the OpenAPI document"
                        );
                        assert!(hint.contains(&format!("{} {PROJECT}", method.to_uppercase())));
                    }
                    Named::Step(next) | Named::Elsewhere(next) => {
                        assert!(next.op.typed.is_none(), "{hint}");
                        assert!(hint.contains(&format!("`{}` (CLI)", next.command_line())));
                    }
                    Named::Run(next) => panic!("{} has no route: {hint}", next.op.name),
                    Named::Again(_) => {}
                }
            }
        }
    }

    #[test]
    fn a_hint_names_the_route_and_its_fields() {
        let hint = |r: Refusal| ApiError::from(r).hint.unwrap_or_default();
        assert_eq!(
            hint(Refusal::not_found(baton_core::Record::Order, "wo_9")),
            "check `id` or see `GET /v1/projects/{project}/orders?all=true`"
        );
        let beyond = every_refusal()
            .into_iter()
            .find(|r| matches!(r, Refusal::Beyond { .. }))
            .unwrap();
        assert!(hint(beyond).ends_with(
            "`POST /v1/projects/{project}/participants/impl-1/policy` {\"may\":[\"request\",\"…\"]}"
        ));
        assert!(hint(Refusal::Unauthenticated).contains("Authorization: Bearer"));
    }
}
