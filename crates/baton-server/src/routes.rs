//! The routes: each handler parses its request, calls one use case as the key's
//! participant, and answers with the document the CLI prints for the same command.

use std::net::SocketAddr;
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

/// The hosts a server answers to beyond the names of the address a request came in on
/// (see [`Hosts::named`]): its public URL's host, and the hosts allowed by name. Each is a
/// host in lowercase (an IPv6 address without brackets) and the ports it is asked for
/// on: `None` is a `Host` without a port; no ports at all means any.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hosts(Vec<(String, Vec<Option<u16>>)>);

impl Hosts {
    pub(crate) fn new(options: &crate::Options) -> Result<Self, String> {
        let mut hosts = Vec::new();
        if let Some(url) = &options.public_url {
            let (scheme, rest) = url
                .split_once("://")
                .ok_or_else(|| format!("the public URL {:?} has no scheme", clip(url)))?;
            let default = match scheme.to_ascii_lowercase().as_str() {
                "http" => 80,
                "https" => 443,
                _ => {
                    return Err(format!(
                        "the public URL {:?} is not http:// or https://",
                        clip(url)
                    ));
                }
            };
            let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
            let (host, port) = authority_of(authority)
                .ok_or_else(|| format!("the public URL {:?} names no host", clip(url)))?;
            // A client asking for the scheme's default port may leave the port out.
            let ports = match port {
                Some(port) if port != default => vec![Some(port)],
                _ => vec![None, Some(default)],
            };
            hosts.push((host, ports));
        }
        for allowed in &options.allow_hosts {
            let (host, port) = authority_of(allowed)
                .ok_or_else(|| format!("{:?} is not HOST or HOST:PORT", clip(allowed)))?;
            hosts.push((host, port.map(|p| vec![Some(p)]).unwrap_or_default()));
        }
        Ok(Self(hosts))
    }

    /// Whether `authority` (a `Host` header, or an `Origin`'s host and port) names this
    /// server on a connection that came in at `local`: that address itself
    /// (`127.0.0.1:7878`), its loopback names when it is loopback (`localhost:7878`,
    /// `[::1]:7878`), or a host of [`Hosts`]. A page whose name was pointed at this
    /// address (DNS rebinding) names its own host, which is none of these.
    fn named(&self, local: Option<SocketAddr>, authority: &str) -> bool {
        let Some((host, port)) = authority_of(authority) else {
            return false;
        };
        if let Some(local) = local {
            // A dual-stack listener sees an IPv4 client at an IPv4-mapped address.
            let ip = local.ip().to_canonical();
            let loopback =
                ip.is_loopback() && matches!(host.as_str(), "localhost" | "127.0.0.1" | "::1");
            if (loopback || host == ip.to_string()) && port == Some(local.port()) {
                return true;
            }
        }
        self.0
            .iter()
            .any(|(h, ports)| *h == host && (ports.is_empty() || ports.contains(&port)))
    }
}

/// `HOST` or `HOST:PORT` (an IPv6 host in brackets) as a lowercase host without brackets
/// and its port; `None` when it is neither.
fn authority_of(text: &str) -> Option<(String, Option<u16>)> {
    let text = text.trim().to_ascii_lowercase();
    let (host, port) = match text.strip_prefix('[') {
        Some(v6) => {
            let (host, rest) = v6.split_once(']')?;
            host.parse::<std::net::Ipv6Addr>().ok()?;
            (host, rest)
        }
        None => match text.split_once(':') {
            Some((host, _)) => (host, &text[host.len()..]),
            None => (text.as_str(), ""),
        },
    };
    let port = match port {
        "" => None,
        port => Some(port.strip_prefix(':')?.parse::<u16>().ok()?),
    };
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':');
    (!host.is_empty() && host.chars().all(plain)).then(|| (host.to_owned(), port))
}

/// At most a short prefix of what a refusal names, so an answer never echoes a long
/// header back.
fn clip(text: &str) -> String {
    baton_core::packet::clip(text, 64)
}

/// Why a request may not reach the MCP endpoint or the board, if it may not: its `Host`
/// is not one this server answers to ([`Hosts::named`]), or it comes from a page whose
/// `Origin` is not (MCP's transport asks for both). A program sends no `Origin`.
fn foreign(server: &Server, request: &Request) -> Option<String> {
    let local = request.extensions().get::<crate::Local>().map(|l| l.0);
    let header = |name| {
        request
            .headers()
            .get(name)
            .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
    };
    // HTTP/2 names the host in the URI rather than in `Host`.
    let host = header(axum::http::header::HOST)
        .or_else(|| request.uri().authority().map(ToString::to_string))
        .unwrap_or_default();
    if !server.hosts.named(local, &host) {
        return Some(format!(
            "this server does not answer to the host {:?}: ask it by the address it listens \
             on, or name that host when starting it (`baton serve --public-url URL` or \
             `--allow-host HOST`)",
            clip(&host)
        ));
    }
    let origin = header(axum::http::header::ORIGIN)?;
    let authority = origin
        .split_once("://")
        .map(|(_, rest)| rest.trim_end_matches('/'));
    if authority.is_some_and(|a| server.hosts.named(local, a)) {
        return None;
    }
    Some(format!(
        "a page of another origin ({:?}) may not reach this server",
        clip(&origin)
    ))
}

/// The board's page and files, and every route of a keyless server (`baton board`),
/// answer only a request that names this server ([`foreign`]): a page whose name was
/// pointed here (DNS rebinding) is refused before it reads anything.
async fn named_host(
    axum::extract::State(server): axum::extract::State<Arc<Server>>,
    request: Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if let Some(why) = foreign(&server, &request) {
        return ApiError::new(StatusCode::FORBIDDEN, "forbidden", why).into_response();
    }
    next.run(request).await
}

/// [`named_host`] on every route of a keyless server.
async fn keyless_host(
    axum::extract::State(server): axum::extract::State<Arc<Server>>,
    request: Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if server.keyless.is_some() {
        return named_host(axum::extract::State(server), request, next).await;
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
/// key gets the read-only ones). A request that does not name this server, or comes from
/// a page of another origin ([`foreign`]), is refused first, with a JSON-RPC error.
async fn mcp(
    axum::extract::State(server): axum::extract::State<Arc<Server>>,
    request: axum::extract::Request,
) -> axum::response::Response {
    if let Some(why) = foreign(&server, &request) {
        return baton_mcp::refused(StatusCode::FORBIDDEN, why).map(axum::body::Body::new);
    }
    let (mut parts, body) = request.into_parts();
    let a = match Authed::from_request_parts(&mut parts, &server).await {
        Ok(a) => a,
        Err(e) => return e.into_response(),
    };
    let request = Request::from_parts(parts, body);
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

/// Where a project's routes are.
pub(crate) const PROJECT: &str = "/v1/projects/{project}";

/// `api` with every typed operation: its route and its document from its declaration.
pub(crate) fn typed(api: Api) -> Api {
    baton_app::ops::every_typed().fold(api, |api, op| api.operation(PROJECT, op))
}

/// Every route, and the OpenAPI document describing them.
pub fn router(server: Arc<Server>) -> Router {
    const P: &str = PROJECT;
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
    let (routes, document) = typed(api).finish();
    let document = Arc::new(document);
    // A body may carry a payload at the cap, wrapped in a little JSON.
    let limit = server
        .settings
        .payload_cap
        .saturating_mul(2)
        .saturating_add(64 * 1024);
    let board_host = axum::middleware::from_fn_with_state(Arc::clone(&server), named_host);
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
        .route("/", get(board::page).layer(board_host.clone()))
        .route("/board.js", get(board::script).layer(board_host.clone()))
        .route("/board.css", get(board::style).layer(board_host))
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
            keyless_host,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&server),
            crate::metrics::count,
        ))
        .with_state(server)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_named_by_the_address_its_loopback_names_the_public_url_or_the_allowed() {
        let options = crate::Options {
            public_url: Some("https://Baton.example.com/base".into()),
            allow_hosts: vec!["other.test:8443".into(), "any.test".into()],
            ..crate::Options::default()
        };
        let hosts = Hosts::new(&options).unwrap();
        let v4: SocketAddr = "127.0.0.1:7878".parse().unwrap();
        let v6: SocketAddr = "[::1]:7878".parse().unwrap();
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:7878".parse().unwrap();
        let lan: SocketAddr = "10.0.0.5:7878".parse().unwrap();
        for (local, host, named) in [
            (Some(v4), "127.0.0.1:7878", true),
            (Some(v4), "localhost:7878", true),
            (Some(v4), "LOCALHOST:7878", true),
            (Some(v4), "[::1]:7878", true),
            (Some(v6), "[::1]:7878", true),
            (Some(mapped), "127.0.0.1:7878", true),
            (Some(v4), "127.0.0.1:7879", false),
            (Some(v4), "127.0.0.1", false),
            (Some(v4), "evil.example.com:7878", false),
            (Some(v4), "evil.example.com", false),
            (Some(lan), "10.0.0.5:7878", true),
            (Some(lan), "localhost:7878", false),
            (None, "127.0.0.1:7878", false),
            (Some(lan), "baton.example.com", true),
            (Some(lan), "baton.example.com:443", true),
            (Some(lan), "baton.example.com:80", false),
            (Some(lan), "other.test:8443", true),
            (Some(lan), "other.test", false),
            (Some(lan), "any.test:1", true),
            (Some(lan), "any.test", true),
            (Some(v4), "", false),
            (Some(v4), "a b:7878", false),
            (Some(v4), "[::1:7878", false),
            (Some(v4), "localhost:7878:1", false),
        ] {
            assert_eq!(hosts.named(local, host), named, "{local:?} {host:?}");
        }
        for (public_url, allow, refused) in [
            (Some("ftp://baton.example.com"), "", "not http"),
            (Some("baton.example.com"), "", "no scheme"),
            (Some("https:///path"), "", "names no host"),
            (None, "a b", "not HOST or HOST:PORT"),
            (None, "host:99999", "not HOST or HOST:PORT"),
        ] {
            let options = crate::Options {
                public_url: public_url.map(Into::into),
                allow_hosts: (!allow.is_empty())
                    .then(|| allow.into())
                    .into_iter()
                    .collect(),
                ..crate::Options::default()
            };
            let e = Hosts::new(&options).unwrap_err();
            assert!(e.contains(refused), "{public_url:?} {allow:?}: {e}");
        }
    }
}
