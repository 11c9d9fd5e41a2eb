//! Baton as an MCP server: small typed tools over the [`Store`], for one participant, and
//! the resume packet as a prompt and a resource so a client can load it at start.
//!
//! This is the only crate that knows MCP (rmcp changes fast, so it stays thin): the tool
//! server in `tools`, their wire types in `wire`, and tool errors in the tools' own words
//! in `refusal`. It never reads configuration or the environment and never writes to
//! stdout itself: on stdio, stdout carries the protocol and nothing else. The caller opens
//! the store, settles who is acting and passes the settings it needs as plain values.

mod refusal;
mod tools;
mod wire;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use baton_core::Passname;
use baton_core::awl::{ContractMode, Environment};
use baton_store::Store;
use baton_store::recall::PathClock;
use rmcp::ServiceExt;

pub use tools::BatonTools;

/// What the tools need from the project's configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Largest payload accepted, in bytes of JSON.
    pub payload_cap: usize,
    /// Identical sends within this window return the original id.
    pub duplicate_window: Duration,
    /// Whether orders and reports must carry the `x-baton` contract (`orders.contract`).
    pub contract: ContractMode,
}

/// The project the tools serve, beyond its store.
#[derive(Clone)]
pub struct Project {
    /// Its root directory: note subjects and receipt artifacts are paths from here, and
    /// the resume packet names it.
    pub root: PathBuf,
    /// When a path last changed, for the staleness of notes in the resume packet.
    pub clock: Arc<dyn PathClock>,
    /// What the contract rules ask of the world (does a revision exist, is a program on
    /// PATH), for checking orders and reports as `baton handoff check` does.
    pub environment: Arc<dyn Environment + Send + Sync>,
}

/// Why the server stopped other than by its client closing stdin.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The client never completed the handshake (or stdin closed before it did).
    #[error("the MCP session did not start: {0}")]
    Start(String),
    #[error("the MCP session failed: {0}")]
    Run(String),
}

/// Serves the tools on stdin/stdout as `me` until the client closes stdin.
pub async fn serve_stdio(
    store: Arc<dyn Store>,
    project: Project,
    me: Passname,
    settings: Settings,
) -> Result<(), ServeError> {
    let running = BatonTools::new(store, project, me, settings)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| ServeError::Start(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| ServeError::Run(e.to_string()))?;
    Ok(())
}
