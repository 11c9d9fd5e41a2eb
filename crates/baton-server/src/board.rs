//! The board: a read-only page embedded in the binary, served at `/`. It renders
//! `GET /v1/projects/{project}/status` — the same `baton/status@1` document `baton status
//! --json` prints — and long-polls `…/status/wait` to follow the log. The page, its
//! script and its style are plain files under `web/`, compiled in: nothing is fetched at
//! run time.

use async_trait::async_trait;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use baton_core::{ProjectName, Record, Refusal};
use baton_store::{Database, Store};
use schemars::JsonSchema;
use serde::Serialize;

const PAGE: &str = include_str!("../../../web/index.html");
const SCRIPT: &str = include_str!("../../../web/board.js");
const STYLE: &str = include_str!("../../../web/board.css");

/// What the page may load and reach: itself, nothing else (agent text is never markup,
/// and a script slipped into it would not run).
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                      connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                      form-action 'none'; frame-ancestors 'none'";

fn asset(kind: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

pub async fn page() -> Response {
    asset("text/html; charset=utf-8", PAGE)
}

pub async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

pub async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

/// What the page asks first: the project it may show without a key, if any.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BoardConfig {
    /// The project `baton board` serves without a key; `null` on `baton serve` (the page
    /// asks for a project and a read key).
    pub project: Option<String>,
}

/// The one project of an embedded store, as a [`Database`] the server can serve.
pub struct OneProject {
    pub name: ProjectName,
    pub store: Store,
}

#[async_trait]
impl Database for OneProject {
    async fn project(&self, name: &ProjectName) -> baton_store::Result<Store> {
        if name == &self.name {
            Ok(self.store.clone())
        } else {
            Err(Refusal::not_found(Record::Project, name.as_str()).into())
        }
    }

    async fn add_project(&self, _: &ProjectName) -> baton_store::Result<bool> {
        Ok(false)
    }

    async fn projects(&self) -> baton_store::Result<Vec<ProjectName>> {
        Ok(vec![self.name.clone()])
    }
}
