//! A participant's webhook: setting it, and where each delivery stands.

use baton_core::Passname;
use baton_core::time::rfc3339;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A participant's webhook after a change.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct WebhookSet {
    pub participant: Passname,
    /// The URL now; absent when it was removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The signing secret: in this answer only (it signs `x-baton-signature`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}
doc!(WebhookSet, "baton/webhook-set@1");

/// Where one webhook's delivery stands (never its secret).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct WebhookRow {
    pub participant: Passname,
    pub url: String,
    /// Everything up to this seq was told or did not concern it.
    pub cursor: i64,
    /// Failed attempts in a row.
    pub failures: u32,
    /// When it is tried again, after a failure.
    pub next_attempt_at: Option<String>,
    pub last_error: Option<String>,
    pub delivered_at: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Webhooks {
    pub items: Vec<WebhookRow>,
}
doc!(Webhooks, "baton/webhooks@1");

impl Webhooks {
    pub fn new(all: &[baton_core::webhook::Webhook]) -> Self {
        Self {
            items: all
                .iter()
                .map(|w| WebhookRow {
                    participant: w.participant.clone(),
                    url: w.url.clone(),
                    cursor: w.cursor,
                    failures: w.failures,
                    next_attempt_at: (w.failures > 0).then(|| rfc3339(w.next_at)),
                    last_error: w.last_error.clone(),
                    delivered_at: w.delivered_at.map(rfc3339),
                })
                .collect(),
        }
    }
}
