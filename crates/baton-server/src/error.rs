//! Errors as HTTP answers: a status derived from the refusal's kind alone, and a JSON body
//! `{"error": {"code", "message", "hint"}}` whose `code` is stable (the kind) and whose hint
//! names JSON fields and endpoints — this edge's words, as the CLI names flags and MCP
//! names tools.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use baton_core::refusal::{Action, Record};
use baton_core::{Field, Refusal, RefusalKind};
use baton_store::StoreError;
use schemars::JsonSchema;
use serde::Serialize;

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

fn field(f: Field) -> String {
    format!("`{}`", f.name())
}

/// What to do next about a refusal, naming fields and endpoints.
fn hint(r: &Refusal) -> Option<String> {
    Some(match r {
        Refusal::NotFound { record, .. } => match record {
            Record::Message | Record::Parent => {
                "GET …/inbox, …/outbox, …/search or …/messages/{id}/thread list message ids".into()
            }
            Record::Order => "GET …/orders?all=true lists the orders".into(),
            Record::Decision => "GET …/state lists the decisions".into(),
            Record::Key => "GET …/keys lists the keys".into(),
            Record::Project => "an administrator adds it: baton --db URL project add NAME".into(),
            _ => return None,
        },
        Refusal::UnknownParticipant { .. } => "GET …/participants lists who is registered".into(),
        Refusal::NoRecipient { registered, .. } => {
            format!("registered: {}", registered.join(", "))
        }
        Refusal::Missing(f) | Refusal::TooLong { field: f, .. } => format!("set {}", field(*f)),
        Refusal::Name { field: f, .. } | Refusal::Payload { field: f, .. } => {
            format!("correct {}", field(*f))
        }
        Refusal::Transition(t) => {
            let steps: Vec<String> = t
                .allowed
                .iter()
                .map(|a| match a {
                    Action::Order(_) => format!("POST …/orders/{{id}}/{}", a.name()),
                    _ => format!("POST …/messages/{{id}}/{}", a.name()),
                })
                .collect();
            if steps.is_empty() {
                "nothing follows: it is final".into()
            } else {
                format!("allowed next: {}", steps.join(", "))
            }
        }
        Refusal::Moved { .. } => {
            "GET the order again and decide anew; send `expect_seq` with its `seq`".into()
        }
        Refusal::Unauthenticated => {
            "send `Authorization: Bearer TOKEN` with a key issued by `baton key issue`".into()
        }
        Refusal::Scope { .. } => "ask an administrator for a key of a wider scope".into(),
        Refusal::Beyond { actor, .. } => format!(
            "nothing changed and the attempt is recorded; an admin key can widen the policy: \
             POST …/participants/{actor}/policy"
        ),
        Refusal::Unwilling { recipient, .. } => format!(
            "nothing was sent and the attempt is recorded; send it on a topic the recipient \
             takes, or an admin key can widen its policy: POST …/participants/{recipient}/policy"
        ),
        Refusal::ActorInRequest => "leave the actor out: the key says who is acting".into(),
        Refusal::EffectsNeedRunner { .. } => "the server starts no upstream servers: approve \
             with `baton order approve ID` where the upstream server runs"
            .into(),
        Refusal::Findings { .. } => "each finding names its rule and the path in `document`".into(),
        // Reservations.
        Refusal::Reserved { .. } => "GET …/reservations lists who holds what; retry once it \
             lapses or is released"
            .into(),
        Refusal::ReservationInput { field: f, .. } => format!("correct {}", field(*f)),
        Refusal::NotReleased { .. } => "GET …/reservations?holder=NAME lists what is held".into(),
        Refusal::Unreleased { .. } | Refusal::ForceRelease { .. } => return None,
        Refusal::NoArtifact { .. }
        | Refusal::NoSubject { .. }
        | Refusal::NoReceipt { .. }
        | Refusal::NoStep { .. }
        | Refusal::Role { .. }
        | Refusal::SelfSend { .. }
        | Refusal::ArtifactOutside { .. }
        | Refusal::Outside { .. }
        | Refusal::TopicPattern { .. }
        | Refusal::PowerName { .. }
        | Refusal::WebhookUrl { .. }
        | Refusal::AgentUrl { .. }
        | Refusal::KeyEnvNotListed { .. }
        | Refusal::KeyEnv { .. }
        | Refusal::Cursor { .. }
        | Refusal::Ambiguous { .. }
        | Refusal::ShortPrefix { .. }
        | Refusal::StatusNeedsIdentity
        | Refusal::Input { .. }
        | Refusal::NotARequest { .. }
        | Refusal::SenderNote
        | Refusal::Superseded { .. }
        | Refusal::TooManyChanges { .. }
        | Refusal::StateEdits { .. }
        | Refusal::DocumentField { .. }
        | Refusal::ReportStatus { .. }
        | Refusal::WrongDocument { .. }
        | Refusal::NotAnExit(..)
        | Refusal::LogLine { .. }
        | Refusal::ForeignLog
        | Refusal::NegotiationInput { .. }
        | Refusal::NegotiationSettled { .. }
        | Refusal::OwnWork { .. }
        | Refusal::SameReviewer { .. }
        | Refusal::NotAParty { .. }
        | Refusal::SenderSteps { .. }
        | Refusal::OrderRole { .. }
        | Refusal::OfferFrom { .. }
        | Refusal::ReportFrom { .. }
        | Refusal::NotANegotiator { .. }
        | Refusal::OwnPosition { .. }
        | Refusal::NotTheWorker { .. }
        | Refusal::GatewayClosed { .. }
        | Refusal::EffectsDiffer { .. }
        | Refusal::NoEffect { .. }
        | Refusal::RoleTaken { .. }
        | Refusal::KeyReused { .. }
        | Refusal::OrderExists { .. }
        | Refusal::RunExists { .. }
        | Refusal::NegotiationExists { .. }
        | Refusal::PositionSubmitted { .. }
        | Refusal::EffectNotHeld { .. }
        | Refusal::RunStatus { .. } => return None,
    })
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
