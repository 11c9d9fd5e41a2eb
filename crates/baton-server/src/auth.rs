//! Who is asking: every request under `/v1/projects/{project}` carries `Authorization:
//! Bearer TOKEN`; the key names the participant and its scope. A project that does not
//! exist and a key of another project give the same answer (401): a caller learns nothing
//! about projects its key is not for.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts, Path};
use axum::http::header;
use axum::http::request::Parts;
use baton_app::{App, Caller};
use baton_core::{Passname, ProjectName, Refusal};
use baton_store::StoreError;

use crate::Server;
use crate::error::ApiError;

/// Who a request acts as, left on the request once its key is checked, so the body's
/// parser (which runs after) can record a body naming its own actor as a security event.
#[derive(Clone)]
pub struct Acting {
    pub app: App,
    pub participant: Passname,
}

/// An authenticated request: the project's use cases and who is acting.
pub struct Authed {
    pub app: App,
    pub caller: Caller,
    pub project: ProjectName,
}

/// On a server made with [`Server::keyless`] (which `baton board` binds to loopback
/// only), a request without a key for that one project: its use cases. `None` when the
/// request has a key, or names another project, or the server is not keyless.
pub async fn keyless(parts: &mut Parts, server: &Arc<Server>) -> Result<Option<App>, ApiError> {
    let Some(keyless) = &server.keyless else {
        return Ok(None);
    };
    if bearer(parts).is_some() {
        return Ok(None);
    }
    let params: Path<HashMap<String, String>> = Path::from_request_parts(parts, server)
        .await
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    if params.get("project").map(String::as_str) != Some(keyless.as_str()) {
        return Ok(None);
    }
    Ok(Some(server.app(keyless).await?))
}

fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

impl FromRequestParts<Arc<Server>> for Authed {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        server: &Arc<Server>,
    ) -> Result<Self, Self::Rejection> {
        let source = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip());
        let params: Path<HashMap<String, String>> =
            Path::from_request_parts(parts, server)
                .await
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
        // Every failure is counted and answered alike (401, or 429 once its address or
        // its key has failed too often); a valid key is never refused.
        let token = bearer(parts).map(str::to_owned);
        let failed = || server.failed_authentication(source, token.as_deref());
        let Some(token) = token.as_deref() else {
            return Err(failed());
        };
        let Some(name) = params.get("project").and_then(|p| ProjectName::new(p).ok()) else {
            return Err(failed());
        };
        let app = match server.app(&name).await {
            Ok(app) => app,
            Err(StoreError::Refused(Refusal::NotFound { .. })) => return Err(failed()),
            Err(e) => return Err(e.into()),
        };
        match app.authenticate(token).await {
            Ok(caller) => {
                if let Some(keyed) = parts.extensions.get::<crate::connections::Keyed>() {
                    keyed.set(&caller.key);
                }
                parts.extensions.insert(Acting {
                    app: app.clone(),
                    participant: caller.participant.clone(),
                });
                Ok(Self {
                    app,
                    caller,
                    project: name,
                })
            }
            Err(StoreError::Refused(Refusal::Unauthenticated)) => Err(failed()),
            Err(e) => Err(e.into()),
        }
    }
}
