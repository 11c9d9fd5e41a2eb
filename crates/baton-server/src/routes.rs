//! The routes: each handler parses its request, calls one use case as the key's
//! participant, and answers with the document the CLI prints for the same command.

use std::sync::Arc;

use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Path, Request};
use axum::http::{Method, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use baton_core::Refusal;
use baton_core::key::Scope;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::Server;
use crate::api::{Api, Nothing};
use crate::auth::{Acting, Authed, keyless};
use crate::board::{self, BoardConfig};
use crate::error::ApiError;

/// A JSON body, bounded by the body limit, refused whole when it names an actor (the key
/// says who acts; the attempt is a security event) or does not fit its type (the error
/// names the field).
pub struct Body<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        // The key was checked before the body is read (extractors run in order).
        let acting = request.extensions().get::<Acting>().cloned();
        let bytes = axum::body::Bytes::from_request(request, state)
            .await
            .map_err(|e: BytesRejection| match e.status() {
                StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "too_large",
                    "the request body is over the server's limit",
                )
                .hinted("send a smaller payload (messages.payload_cap)"),
                _ => ApiError::bad_request(e.body_text()),
            })?;
        // The same boundary as every edge (`baton_core::json::boundary`): nesting within
        // the limit (a body wraps a payload in at most two levels), numbers kept exactly,
        // no duplicate keys, no NUL; checked on the text, before anything is parsed or
        // stored. A payload one level too deep passes here and is refused by the
        // payload's own check (422), as the command line refuses it.
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| ApiError::bad_request("the body is not JSON: it is not UTF-8 text"))?;
        let value = baton_core::json::boundary(text, 2).map_err(|unfit| match unfit {
            // Like a body that is not JSON: the request itself cannot be taken (400).
            baton_core::json::Unfit::Refused(e) => {
                ApiError::bad_request(format!("the body is refused: {e}"))
            }
            baton_core::json::Unfit::NotJson(e) => {
                ApiError::bad_request(format!("the body is not JSON: {e}"))
            }
        })?;
        if let Value::Object(fields) = &value
            && ["as", "actor", "as_name"]
                .iter()
                .any(|k| fields.contains_key(*k))
        {
            // A passname is a claim: naming one is an attempt at authority the key does not
            // give, recorded like any other (in a transaction of its own; nothing applied).
            let refusal = Refusal::ActorInRequest;
            if let Some(acting) = acting {
                acting
                    .app
                    .record_refusal(&acting.participant, &refusal)
                    .await?;
            }
            return Err(refusal.into());
        }
        let parsed = T::deserialize(&value).map_err(|e| {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "refused", e.to_string())
        })?;
        Ok(Self(parsed))
    }
}

/// Who a keyless read on `baton board` acts as.
const BOARD: &str = "@board";

/// The one handler of every typed operation (`baton_app::ops`): the key, then the body
/// through the same boundary as every request (an empty body is `{}`), the path's fields
/// added to it, then the dispatcher, as the key's participant with the key's scope.
pub async fn dispatch(
    op: &'static baton_app::ops::Operation,
    server: Arc<Server>,
    request: Request,
) -> axum::response::Response {
    match dispatched(op, server, request).await {
        Ok(answer) => Json(answer).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn dispatched(
    op: &'static baton_app::ops::Operation,
    server: Arc<Server>,
    request: Request,
) -> Result<Value, ApiError> {
    let (mut parts, body) = request.into_parts();
    // Who asks: the key's participant, or on `baton board` the keyless reader of what the
    // board shows.
    let (app, actor, scope, project) = match keyless(&mut parts, &server).await? {
        Some(app) if op.on_board => (app, BOARD.to_owned(), Scope::Read, None),
        _ => {
            let a = Authed::from_request_parts(&mut parts, &server).await?;
            let actor = a.caller.participant.to_string();
            (a.app, actor, a.caller.scope, Some(a.project))
        }
    };
    let Path(params) = Path::<Vec<(String, String)>>::from_request_parts(&mut parts, &server)
        .await
        .map_err(|e| ApiError::bad_request(e.body_text()))?;
    let params: Vec<(String, String)> =
        params.into_iter().filter(|(n, _)| n != "project").collect();
    let declared = op.typed.expect("a typed operation");
    let input = if declared.route.method == baton_app::ops::Method::Get {
        declared
            .call
            .query(parts.uri.query().unwrap_or(""), params)?
    } else {
        if parts.uri.query().is_some_and(|q| !q.is_empty()) {
            return Err(ApiError::bad_request(
                "a POST takes its input in the JSON body, not the query string",
            ));
        }
        let request = Request::from_parts(parts, body);
        let empty = request
            .headers()
            .get(axum::http::header::CONTENT_LENGTH)
            .is_some_and(|l| l == "0");
        let mut input = if empty {
            Value::Object(Map::new())
        } else {
            let Body(value) = Body::<Value>::from_request(request, &server).await?;
            value
        };
        let Value::Object(fields) = &mut input else {
            return Err(ApiError::bad_request("the body is not a JSON object"));
        };
        for (name, value) in params {
            if fields.insert(name.clone(), Value::String(value)).is_some() {
                return Err(ApiError::bad_request(format!(
                    "`{name}` is named by the path: leave it out of the body"
                )));
            }
        }
        input
    };
    let who = baton_app::ops::Who {
        actor: &actor,
        scope,
    };
    // A read may be cut when the server begins to stop (a long poll must not hold the
    // stop up); a write that began finishes.
    let answer = if op.needs.writes() {
        app.dispatch(who, op, input).await?
    } else {
        unless_stopping(&server, app.dispatch(who, op, input)).await?
    };
    // A send that found an earlier identical one: counted for `/metrics`.
    if let Some(project) = project
        && answer.get("duplicate") == Some(&Value::Bool(true))
    {
        server.duplicate(&project);
    }
    Ok(answer)
}

/// On a keyless server (`baton board`, bound to loopback), a request must name a loopback
/// host: a page whose name was made to point here (DNS rebinding) names its own host, and
/// is refused before it reads anything.
async fn loopback_host(
    axum::extract::State(server): axum::extract::State<Arc<Server>>,
    request: Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if server.keyless.is_some() {
        let host = request
            .headers()
            .get(axum::http::header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        let name = match host.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => host.split(':').next().unwrap_or(""),
        };
        if !matches!(name, "localhost" | "127.0.0.1" | "::1") {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "the board answers requests for localhost or 127.0.0.1 only",
            )
            .into_response();
        }
    }
    next.run(request).await
}

/// Runs a long poll that only reads unless the server begins to stop first; then it
/// answers 503 `stopping` (retryable: ask again, of this server once it is back or of
/// another), so the stop does not wait out the poll. A receipt's wait is not cut: it
/// writes an alert at its deadline, and a write that began finishes.
async fn unless_stopping<T, E: Into<ApiError>>(
    server: &Server,
    wait: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, ApiError> {
    tokio::select! {
        done = wait => done.map_err(Into::into),
        () = server.stopped() => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "stopping",
            "the server is stopping; nothing was waited for",
        )
        .retryable()
        .hinted("ask again: this server once it is back, or another on the same store")),
    }
}

// ---- handlers -------------------------------------------------------------------------------

/// MCP over Streamable HTTP: the tools of `baton mcp`, as the key's participant (a read
/// key gets the read-only ones).
async fn mcp(a: Authed, request: axum::extract::Request) -> axum::response::Response {
    // A browser page of another origin must not reach MCP (DNS rebinding): an `Origin`
    // that is not this server's is refused, as MCP's transport asks.
    if let Some(origin) = request.headers().get(axum::http::header::ORIGIN) {
        let host = request
            .headers()
            .get(axum::http::header::HOST)
            .and_then(|h| h.to_str().ok());
        let authority = origin
            .to_str()
            .ok()
            .and_then(|o| o.split_once("://"))
            .map(|(_, rest)| rest.trim_end_matches('/'));
        if authority.is_none() || authority != host {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "a request from another origin may not reach MCP",
            )
            .into_response();
        }
    }
    let scope = a.caller.scope;
    let me = a.caller.participant.clone();
    // The key's participant gets its role's profile, as `baton mcp` gives it on stdio.
    let role = match a.app.participants().await {
        Ok(all) => all
            .into_iter()
            .find(|p| p.name == me)
            .map(|p| p.role)
            .unwrap_or_default(),
        Err(e) => return ApiError::from(e).into_response(),
    };
    let profile = baton_mcp::Profile::for_role(&role);
    baton_mcp::serve_http(a.app, me, profile, scope, request)
        .await
        .map(axum::body::Body::new)
}

async fn board_config(
    axum::extract::State(server): axum::extract::State<Arc<Server>>,
) -> Json<BoardConfig> {
    Json(BoardConfig {
        project: server.keyless.as_ref().map(ToString::to_string),
    })
}

/// What `GET /v1/health` answers.
#[derive(Debug, serde::Serialize, JsonSchema)]
pub struct Health {
    pub ok: bool,
}

async fn health() -> Json<Health> {
    Json(Health { ok: true })
}

// ---- the router -----------------------------------------------------------------------------

/// Every route, and the OpenAPI document describing them.
pub fn router(server: Arc<Server>) -> Router {
    const P: &str = "/v1/projects/{project}";
    let p = |path: &str| format!("{P}{path}");
    let api = Api::new()
        .route::<Nothing, Nothing, Health, _, _>(
            Method::GET,
            "/v1/health",
            "Whether the server answers",
            None,
            health,
        )
        .route::<Nothing, Nothing, BoardConfig, _, _>(
            Method::GET,
            "/v1/board",
            "What the board page asks first: the project it may show without a key",
            None,
            board_config,
        );
    // Every typed operation, its route and its document from its declaration.
    let api = baton_app::ops::every_typed().fold(api, |api, op| api.operation(P, op));
    let (routes, document) = api.finish();
    let document = Arc::new(document);
    // A body may carry a payload at the cap, wrapped in a little JSON.
    let limit = server
        .settings
        .payload_cap
        .saturating_mul(2)
        .saturating_add(64 * 1024);
    routes
        .merge(crate::a2a::routes(p))
        .route(
            &p("/mcp"),
            axum::routing::any(mcp).layer(tower_http::timeout::TimeoutLayer::with_status_code(
                StatusCode::SERVICE_UNAVAILABLE,
                std::time::Duration::from_secs(310),
            )),
        )
        .route("/metrics", get(crate::metrics::endpoint))
        .route("/", get(board::page))
        .route("/board.js", get(board::script))
        .route("/board.css", get(board::style))
        .route(
            "/v1/openapi.json",
            get(move || {
                let document = Arc::clone(&document);
                async move { Json(document.as_ref().clone()).into_response() }
            }),
        )
        .fallback(|| async {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint")
                .hinted("GET /v1/openapi.json lists every endpoint")
        })
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&server),
            loopback_host,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&server),
            crate::metrics::count,
        ))
        .with_state(server)
}
