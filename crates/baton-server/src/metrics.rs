//! `/metrics` in Prometheus text: each project's handoff metrics (read from the
//! store's projection: one row and counts of live work per project), and what only the
//! server sees — requests by route
//! and status with their latency, refusals by code, duplicate sends, failed
//! authentications.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use baton_core::ProjectName;
use baton_core::metrics::{Metrics, Summary};

use crate::Server;
use crate::error::ErrorCode;

/// What the server counts of the requests it answers.
#[derive(Debug, Default)]
pub struct Traffic {
    /// (route, status) → count.
    requests: BTreeMap<(String, u16), u64>,
    /// route → (count, total seconds).
    latency: BTreeMap<String, (u64, f64)>,
    /// error code → count.
    refusals: BTreeMap<&'static str, u64>,
    /// project → sends answered with an earlier message's id.
    pub duplicates: BTreeMap<String, u64>,
}

/// Counts every request: its route (the template, never the concrete path), status,
/// latency, and the error code of a refusal.
pub async fn count(State(server): State<Arc<Server>>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let started = Instant::now();
    let response = next.run(request).await;
    let seconds = started.elapsed().as_secs_f64();
    let code = response.extensions().get::<ErrorCode>().map(|c| c.0);
    let mut traffic = server.traffic.lock().unwrap_or_else(|e| e.into_inner());
    *traffic
        .requests
        .entry((route.clone(), response.status().as_u16()))
        .or_default() += 1;
    let entry = traffic.latency.entry(route).or_default();
    entry.0 += 1;
    entry.1 += seconds;
    if let Some(code) = code {
        *traffic.refusals.entry(code).or_default() += 1;
    }
    response
}

fn help(out: &mut String, name: &str, kind: &str, text: &str) {
    let _ = writeln!(out, "# HELP {name} {text}\n# TYPE {name} {kind}");
}

fn summary(out: &mut String, name: &str, text: &str, rows: &[(&ProjectName, Summary)]) {
    help(out, name, "summary", text);
    for (project, s) in rows {
        let _ = writeln!(
            out,
            "{name}_sum{{project=\"{project}\"}} {}\n{name}_count{{project=\"{project}\"}} {}",
            s.sum_ms as f64 / 1000.0,
            s.count
        );
    }
}

/// Renders the metrics of every project and of the server.
pub async fn render(server: &Server) -> Result<String, baton_store::StoreError> {
    let mut projects: Vec<(ProjectName, Metrics)> = Vec::new();
    let mut live: Vec<(ProjectName, Vec<(baton_core::run::Source, u64)>)> = Vec::new();
    // A project that cannot be read (a damaged or foreign file in the store's directory)
    // is listed as unavailable; the others are counted as ever.
    let mut unavailable: Vec<ProjectName> = Vec::new();
    for name in server.database.projects().await? {
        let read = match server.app(&name).await {
            Ok(app) => match (app.metrics().await, app.live_by_source().await) {
                (Ok(metrics), Ok(by_source)) => Ok((metrics, by_source)),
                (Err(e), _) | (_, Err(e)) => Err(e),
            },
            Err(e) => Err(e),
        };
        match read {
            Ok((metrics, by_source)) => {
                live.push((name.clone(), by_source));
                projects.push((name, metrics));
            }
            Err(_) => unavailable.push(name),
        }
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut out = String::new();
    help(
        &mut out,
        "baton_project_unavailable",
        "gauge",
        "1 for a project whose store could not be read at this scrape.",
    );
    for project in &unavailable {
        let _ = writeln!(out, "baton_project_unavailable{{project=\"{project}\"}} 1");
    }
    let gauge = |out: &mut String, name: &str, text: &str, value: &dyn Fn(&Metrics) -> f64| {
        help(out, name, "gauge", text);
        for (project, m) in &projects {
            let _ = writeln!(out, "{name}{{project=\"{project}\"}} {}", value(m));
        }
    };
    help(
        &mut out,
        "baton_live_runs",
        "gauge",
        "Live rows of the ledger by source: wrapper (baton run), untracked, session and \
         helper (sessions and helpers seen through hooks; helpers quiet past runs.helper_idle \
         left out).",
    );
    for (project, by_source) in &live {
        for (source, n) in by_source {
            let _ = writeln!(
                out,
                "baton_live_runs{{project=\"{project}\",source=\"{}\"}} {n}",
                source.as_str()
            );
        }
    }
    gauge(
        &mut out,
        "baton_events",
        "Events in the project's log.",
        &|f| f.generation as f64,
    );
    gauge(
        &mut out,
        "baton_pending_deliveries",
        "Deliveries stored and not yet fetched.",
        &|f| f.pending as f64,
    );
    gauge(
        &mut out,
        "baton_open_requests",
        "Requests whose sender's end is open.",
        &|f| f.open_requests as f64,
    );
    gauge(
        &mut out,
        "baton_oldest_open_request_seconds",
        "How long the oldest open request has waited (0 when none is open).",
        &|f| f.oldest_open_request_ms(now).unwrap_or(0) as f64 / 1000.0,
    );
    gauge(
        &mut out,
        "baton_orders_awaiting_approval",
        "Orders submitted and waiting for their sender.",
        &|f| f.awaiting_approval as f64,
    );
    gauge(&mut out, "baton_requests", "Requests sent.", &|f| {
        f.tally.requests as f64
    });
    gauge(
        &mut out,
        "baton_replies_to_requests",
        "Replies to requests: questions, answers and notes (clarification).",
        &|f| f.tally.replies_to_requests as f64,
    );
    gauge(
        &mut out,
        "baton_max_thread_depth",
        "The deepest reply in any thread.",
        &|f| f64::from(f.tally.max_thread_depth),
    );
    let rows = |pick: fn(&Metrics) -> Summary| -> Vec<(&ProjectName, Summary)> {
        projects.iter().map(|(p, f)| (p, pick(f))).collect()
    };
    summary(
        &mut out,
        "baton_created_to_delivered_seconds",
        "From a message's sending to its fetch by a recipient.",
        &rows(|f| f.tally.created_to_delivered),
    );
    summary(
        &mut out,
        "baton_delivered_to_completed_seconds",
        "From a request's fetch to its completion by that recipient.",
        &rows(|f| f.tally.delivered_to_completed),
    );
    summary(
        &mut out,
        "baton_approval_wait_seconds",
        "From an order's submission to its approval.",
        &rows(|f| f.tally.approval_wait),
    );
    help(
        &mut out,
        "baton_completed_requests",
        "gauge",
        "Requests completed by their recipients, per topic.",
    );
    for (project, m) in &projects {
        for (topic, n) in &m.tally.completed_by_topic {
            let _ = writeln!(
                out,
                "baton_completed_requests{{project=\"{project}\",topic=\"{topic}\"}} {n}"
            );
        }
    }

    let traffic = server.traffic.lock().unwrap_or_else(|e| e.into_inner());
    help(
        &mut out,
        "baton_duplicate_sends_total",
        "counter",
        "Sends answered with an earlier identical message's id.",
    );
    for (project, n) in &traffic.duplicates {
        let _ = writeln!(
            out,
            "baton_duplicate_sends_total{{project=\"{project}\"}} {n}"
        );
    }
    help(
        &mut out,
        "baton_refusals_total",
        "counter",
        "Requests refused, by error code (validation refusals are `refused`).",
    );
    for (code, n) in &traffic.refusals {
        let _ = writeln!(out, "baton_refusals_total{{code=\"{code}\"}} {n}");
    }
    help(
        &mut out,
        "baton_failed_authentications_total",
        "counter",
        "Requests without a valid key (credential incidents).",
    );
    let _ = writeln!(
        out,
        "baton_failed_authentications_total {}",
        server.failed_authentications()
    );
    help(
        &mut out,
        "baton_connections_open",
        "gauge",
        "Connections open now.",
    );
    let _ = writeln!(out, "baton_connections_open {}", server.connections.open());
    help(
        &mut out,
        "baton_connections_shed_total",
        "counter",
        "Connections closed to stay under --max-connections (without a valid key first).",
    );
    let _ = writeln!(
        out,
        "baton_connections_shed_total {}",
        server.connections.shed()
    );
    help(
        &mut out,
        "baton_http_requests_total",
        "counter",
        "Requests answered, by route and status.",
    );
    for ((route, status), n) in &traffic.requests {
        let _ = writeln!(
            out,
            "baton_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
        );
    }
    help(
        &mut out,
        "baton_http_request_duration_seconds",
        "summary",
        "Time to answer, by route.",
    );
    for (route, (n, seconds)) in &traffic.latency {
        let _ = writeln!(
            out,
            "baton_http_request_duration_seconds_sum{{route=\"{route}\"}} {seconds}\nbaton_http_request_duration_seconds_count{{route=\"{route}\"}} {n}"
        );
    }
    Ok(out)
}

/// Whether `/metrics` answers: with an operator token configured, only a caller that
/// presents it — from this machine too, since a reverse proxy on this host makes every
/// caller look local; without one, a peer on this machine.
fn allowed(token: Option<&str>, presented: Option<&str>, peer: std::net::IpAddr) -> bool {
    match (token, presented) {
        // Compared as hashes: equal length, so the time says nothing of the token.
        (Some(token), Some(presented)) => {
            baton_core::key::hash(token) == baton_core::key::hash(presented)
        }
        (Some(_), None) => false,
        (None, _) => peer.is_loopback(),
    }
}

/// `GET /metrics`.
pub async fn endpoint(
    State(server): State<Arc<Server>>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    headers: axum::http::HeaderMap,
) -> Response {
    // Every project's name and counts: for this machine, or for the operator's token.
    let presented = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if !allowed(server.options.metrics_token, presented, peer.ip()) {
        return crate::error::ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "/metrics names every project: it answers the token of `baton serve --metrics-token-env` when one is set, otherwise this machine",
        )
        .into_response();
    }
    match render(&server).await {
        Ok(text) => ([("content-type", "text/plain; version=0.0.4")], text).into_response(),
        Err(e) => {
            eprintln!("baton serve: metrics failed: {e}");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn metrics_answer_this_machine_or_the_operator_s_token() {
        let here = "127.0.0.1".parse().unwrap();
        let away: std::net::IpAddr = "192.0.2.7".parse().unwrap();
        assert!(super::allowed(None, None, here));
        assert!(!super::allowed(None, None, away));
        assert!(!super::allowed(None, Some("guess"), away));
        assert!(super::allowed(Some("t0k"), Some("t0k"), away));
        assert!(!super::allowed(Some("t0k"), Some("guess"), away));
        assert!(!super::allowed(Some("t0k"), Some("guess"), here));
        assert!(!super::allowed(Some("t0k"), None, away));
        // With a token, this machine needs it too (a proxy here makes every caller local).
        assert!(!super::allowed(Some("t0k"), None, here));
        assert!(super::allowed(Some("t0k"), Some("t0k"), here));
    }
}
