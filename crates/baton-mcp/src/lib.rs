//! Baton as an MCP server: small typed tools over the use cases ([`baton_app::App`]), for
//! one participant, and the resume packet as a prompt and a resource so a client can load
//! it at start.
//!
//! This is the only crate that knows MCP (rmcp changes fast, so it stays thin): the tool
//! server in `tools`, their schemas compacted in `schema`, and refusals in the tools' own words in
//! `explain`. Each tool parses its arguments, calls one use case and renders the result:
//! no flow lives here. It never reads configuration or the environment and never writes to
//! stdout itself: on stdio, stdout carries the protocol and nothing else.

mod demo;
mod explain;
mod frame;
mod gateway;
mod profile;
mod schema;
mod tools;

use baton_app::App;
use baton_core::Passname;
use rmcp::ServiceExt;

pub use demo::{agent_session, serve_demo_upstream};
/// The one boundary of every MCP edge, for the fuzz targets.
pub use frame::judge_text;
pub use gateway::{Upstream, serve_gateway};
pub use profile::{PROFILE_BUDGET, Profile};
pub use tools::BatonTools;

/// Why the server stopped other than by its client closing stdin.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The client never completed the handshake (or stdin closed before it did).
    #[error("the MCP session did not start: {0}")]
    Start(String),
    #[error("the MCP session failed: {0}")]
    Run(String),
    /// The use case refused (the gateway's order is not the caller's to work on).
    #[error("{0}")]
    Refused(String),
}

/// An MCP response over HTTP.
pub type HttpResponse =
    http::Response<http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>>;

/// Serves one HTTP request of MCP's Streamable HTTP transport as `me`, statelessly: each
/// POST is answered by a tool server made for it (no session to keep, so any server
/// behind a load balancer can answer any request), in JSON when the answer is one
/// message. A write key is offered `profile`'s tools, as `baton mcp` offers them on
/// stdio; a read key (its `scope`) only the read-only tools, listed and callable.
/// The body passes the same gate as a line on stdio ([`frame::judge_text`]) before rmcp
/// reads it, within `max_body` bytes. The caller has authenticated the request and
/// checked its `Host` and `Origin`.
pub async fn serve_http<B>(
    app: App,
    me: Passname,
    profile: Profile,
    scope: baton_core::key::Scope,
    request: http::Request<B>,
) -> HttpResponse
where
    B: http_body::Body + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
    B::Data: Send + 'static,
{
    use http_body_util::{BodyExt, Full, Limited};
    use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let max_body = frame::max_frame(app.settings().payload_cap);
    let (parts, body) = request.into_parts();
    let bytes = match Limited::new(body, max_body).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            let message =
                format!("the request body could not be read within {max_body} bytes: {e}");
            return answer(
                http::StatusCode::PAYLOAD_TOO_LARGE,
                frame::error_value(None, -32600, message),
            );
        }
    };
    let mut id = None;
    if parts.method == http::Method::POST {
        let text = String::from_utf8_lossy(&bytes);
        id = baton_core::json::top_level_scalar(&text, "id");
        match frame::judge_text(&text) {
            frame::Verdict::Pass(_) => {}
            frame::Verdict::Answer(refused) => {
                return answer(http::StatusCode::BAD_REQUEST, refused);
            }
            frame::Verdict::Ignore => {
                return answer(http::StatusCode::ACCEPTED, serde_json::Value::Null);
            }
        }
    }
    let request = http::Request::from_parts(parts, Full::new(bytes));
    let tools = if scope.allows(baton_core::key::Scope::Write) {
        BatonTools::with_profile(app, me, profile).scoped(scope)
    } else {
        BatonTools::read_only(app, me)
    };
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .disable_allowed_hosts();
    let service = StreamableHttpService::new(
        move || Ok(tools.clone()),
        std::sync::Arc::new(NeverSessionManager::default()),
        config,
    );
    shaped(service.handle(request).await, id).await
}

/// rmcp's own refusals of a request — 406 without `Accept: application/json,
/// text/event-stream`, 415 without a JSON body, 405 for a method it does not serve — are
/// plain text: said again as a JSON-RPC error, with the same status and the request's id
/// where it was readable, so a client reads MCP's own shape whatever it got wrong.
async fn shaped(response: HttpResponse, id: Option<serde_json::Value>) -> HttpResponse {
    use http_body_util::BodyExt;
    let json = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    if !response.status().is_client_error() || json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(never) => match never {},
    };
    let message = String::from_utf8_lossy(&text).trim().to_owned();
    let mut shaped = answer(
        parts.status,
        frame::error_value(id, frame::INVALID_REQUEST, message),
    );
    if let Some(allow) = parts.headers.get(http::header::ALLOW) {
        shaped
            .headers_mut()
            .insert(http::header::ALLOW, allow.clone());
    }
    shaped
}

/// A request refused before MCP reads it (over HTTP: a `Host` or `Origin` the server does
/// not answer to), as `status` with a JSON-RPC error saying `why`: MCP's own shape, so a
/// client reports the reason rather than failing to parse the answer.
pub fn refused(status: http::StatusCode, why: String) -> HttpResponse {
    answer(status, frame::error_value(None, frame::SERVER_ERROR, why))
}

/// An answer made here rather than by rmcp: a JSON-RPC error with its status, or an empty
/// `202 Accepted` for a notification.
fn answer(status: http::StatusCode, body: serde_json::Value) -> HttpResponse {
    use http_body_util::{BodyExt, Full};
    let bytes = match body {
        serde_json::Value::Null => bytes::Bytes::new(),
        body => bytes::Bytes::from(body.to_string()),
    };
    http::Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(bytes).boxed())
        .expect("a response of a status, a header and bytes")
}

/// Serves `profile`'s tools on stdin/stdout as `me` until the client closes stdin.
pub async fn serve_stdio(app: App, me: Passname, profile: Profile) -> Result<(), ServeError> {
    let cap = frame::max_frame(app.settings().payload_cap);
    serve_gated(BatonTools::with_profile(app, me, profile), cap).await
}

/// Serves `service` on stdin/stdout until the client closes stdin. Every line passes the
/// [`frame`] gate first (at most `cap` bytes, checked as untrusted JSON), so a request the
/// server cannot take is still answered and nothing unbounded reaches the service.
pub(crate) async fn serve_gated<S: rmcp::ServerHandler>(
    service: S,
    cap: usize,
) -> Result<(), ServeError> {
    let (server_in, feed) = tokio::io::duplex(64 * 1024);
    let (server_out, drain) = tokio::io::duplex(64 * 1024);
    let (answers, answered) = tokio::sync::mpsc::unbounded_channel();
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let gate = tokio::spawn(frame::gate(stdin, feed, answers, cap));
    let merge = tokio::spawn(frame::merge(
        tokio::io::BufReader::new(drain),
        answered,
        tokio::io::stdout(),
    ));
    let running = match service.serve((server_in, server_out)).await {
        Ok(running) => running,
        Err(e) => {
            // No session (the client closed stdin before its handshake, or broke it): what
            // the gate answered meanwhile is still written before the error is told.
            gate.abort();
            let _ = merge.await;
            return Err(ServeError::Start(e.to_string()));
        }
    };
    running
        .waiting()
        .await
        .map_err(|e| ServeError::Run(e.to_string()))?;
    // The client closed stdin, so the gate has ended (abort only covers a server that
    // stopped by itself); the merge ends once the last answers are written.
    gate.abort();
    let _ = merge.await;
    Ok(())
}
