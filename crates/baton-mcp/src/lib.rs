//! Baton as an MCP server: small typed tools over the use cases ([`baton_app::App`]), for
//! one participant, and the resume packet as a prompt and a resource so a client can load
//! it at start.
//!
//! This is the only crate that knows MCP (rmcp changes fast, so it stays thin): the tool
//! server in `tools`, their wire types in `wire`, and refusals in the tools' own words in
//! `explain`. Each tool parses its arguments, calls one use case and renders the result:
//! no flow lives here. It never reads configuration or the environment and never writes to
//! stdout itself: on stdio, stdout carries the protocol and nothing else.

mod explain;
mod framing;
mod gateway;
mod tools;
mod wire;

use baton_app::App;
use baton_core::Passname;
use rmcp::ServiceExt;

pub use gateway::{Upstream, serve_gateway};
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
/// message. With `read_only` (a read key) only the read-only tools are listed and
/// callable. The caller has authenticated the request; `Host` is not checked here, since
/// the key, not the address, proves who asks.
pub async fn serve_http<B>(
    app: App,
    me: Passname,
    read_only: bool,
    request: http::Request<B>,
) -> HttpResponse
where
    B: http_body::Body + Send + 'static,
    B::Error: std::fmt::Display,
    B::Data: Send + 'static,
{
    use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let tools = if read_only {
        BatonTools::read_only(app, me)
    } else {
        BatonTools::new(app, me)
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
    service.handle(request).await
}

/// Serves the tools on stdin/stdout as `me` until the client closes stdin. A line that is
/// not a JSON-RPC message is answered with a JSON-RPC error (see `framing`).
pub async fn serve_stdio(app: App, me: Passname) -> Result<(), ServeError> {
    let (stdin, stdout) = rmcp::transport::stdio();
    let (streams, framed) = framing::frame(stdin, stdout);
    let running = BatonTools::new(app, me).serve(streams).await;
    let ended = match running {
        Ok(running) => running
            .waiting()
            .await
            .map(|_| ())
            .map_err(|e| ServeError::Run(e.to_string())),
        Err(e) => Err(ServeError::Start(e.to_string())),
    };
    framed.finish().await;
    ended
}
