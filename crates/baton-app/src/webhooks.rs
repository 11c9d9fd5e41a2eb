//! Webhooks: setting a participant's URL (its signing secret is shown once), listing
//! them, and one delivery round — claim a due webhook, tell its endpoint what concerns its
//! participant since its cursor (metadata only), settle. The server runs the rounds; the
//! HTTP client is a [`Poster`] it passes in.

use async_trait::async_trait;
use baton_core::order::OrderChange;
use baton_core::time::rfc3339;
use baton_core::webhook::{self, Notice, Webhook};
use baton_core::{Change, Event, Field, Passname, ProjectName, Refusal};
use baton_store::{Settled, StoreError};
use serde::Serialize;

use crate::doc::WebhookSet;
use crate::{App, Result};

/// How many events one POST tells at most; the rest go in the next.
pub const BATCH: usize = 100;
/// How long a claim holds a webhook: longer than any POST may take.
pub const LEASE_MS: i64 = 60_000;

/// The HTTP client that delivers: POSTs `body` with `headers` to `url` and answers the
/// status, or why no answer came. Bounded in time by the implementation.
#[async_trait]
pub trait Poster: Send + Sync {
    async fn post(
        &self,
        url: &str,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
    ) -> std::result::Result<u16, String>;
}

/// What a webhook's endpoint receives (`baton/webhook@1`).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Delivery {
    pub schema: &'static str,
    /// Unique per POST; a retry of the same events gets a new one.
    pub delivery: String,
    pub project: String,
    pub participant: Passname,
    pub events: Vec<Notice>,
}

/// How one claimed webhook went in a round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub participant: Passname,
    /// Events told (0 when nothing concerned it).
    pub told: usize,
    pub settled: Settled,
}

impl App {
    /// Sets `name`'s webhook to `url` (a new secret each time, in the answer only: it is
    /// shown now and never again) or, with `url` `None`, removes it.
    pub async fn set_webhook(
        &self,
        actor: &str,
        name: &str,
        url: Option<&str>,
    ) -> Result<WebhookSet> {
        let name = Passname::new(name.trim()).map_err(|error| Refusal::Name {
            field: Field::Name,
            error,
        })?;
        if let Some(url) = url {
            baton_core::webhook::check_destination(url, self.settings.private_webhooks)?;
        }
        let secret = match url {
            Some(_) => {
                let mut bytes = [0u8; 32];
                getrandom::fill(&mut bytes).map_err(|e| {
                    StoreError::Engine(format!("no randomness for a webhook secret: {e}"))
                })?;
                let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                format!("whsec_{hex}")
            }
            None => String::new(),
        };
        let hook = self
            .store()
            .set_webhook(actor, &name, url, secret.clone())
            .await?;
        Ok(WebhookSet {
            participant: name,
            url: hook.map(|h| h.url),
            secret: url.map(|_| secret),
        })
    }

    pub async fn webhooks(&self) -> Result<Vec<Webhook>> {
        self.store().webhooks().await
    }

    /// One delivery round for `project`: claims the due webhooks, at most `max`, and tells
    /// each what concerns its participant since its cursor. Different endpoints are told
    /// at once; webhooks sharing an endpoint (its scheme, host and port) one after the
    /// other. A failing or slow endpoint delays only its own webhooks; writes never wait
    /// for any of it.
    pub async fn deliver_webhooks(
        &self,
        project: &ProjectName,
        poster: &dyn Poster,
        max: usize,
    ) -> Result<Vec<Attempt>> {
        let mut claimed: Vec<Webhook> = Vec::new();
        while claimed.len() < max {
            let now = self.now();
            let Some(hook) = self.store().claim_webhook(now, now + LEASE_MS).await? else {
                break;
            };
            claimed.push(hook);
        }
        let mut endpoints: std::collections::BTreeMap<String, Vec<Webhook>> = Default::default();
        for hook in claimed {
            endpoints
                .entry(webhook::endpoint(&hook.url))
                .or_default()
                .push(hook);
        }
        let rounds = endpoints.into_values().map(|hooks| async move {
            let mut attempts = Vec::new();
            for hook in hooks {
                let attempt = self.deliver(project, &hook, poster).await?;
                self.store()
                    .settle_webhook(&hook, attempt.settled.clone())
                    .await?;
                attempts.push(attempt);
            }
            Ok::<_, StoreError>(attempts)
        });
        let mut attempts = Vec::new();
        for told in futures::future::join_all(rounds).await {
            attempts.extend(told?);
        }
        Ok(attempts)
    }

    async fn deliver(
        &self,
        project: &ProjectName,
        hook: &Webhook,
        poster: &dyn Poster,
    ) -> Result<Attempt> {
        let news = self.news(&hook.participant, hook.cursor).await?;
        let mut events = news.events;
        let cursor = if events.len() > BATCH {
            events.truncate(BATCH);
            events.last().map_or(news.after, |e| e.seq)
        } else {
            news.after
        };
        let attempt = |told, settled| Attempt {
            participant: hook.participant.clone(),
            told,
            settled,
        };
        if events.is_empty() {
            return Ok(attempt(0, Settled::Passed { cursor }));
        }
        let mut notices = Vec::with_capacity(events.len());
        for event in &events {
            notices.push(self.notice(event).await?);
        }
        let told = notices.len();
        let body = Delivery {
            schema: "baton/webhook@1",
            delivery: baton_store::new_id().to_string(),
            project: project.to_string(),
            participant: hook.participant.clone(),
            events: notices,
        };
        let body = serde_json::to_vec(&body).expect("a delivery serializes");
        let now = self.now();
        let timestamp = now / 1000;
        let headers = vec![
            ("content-type", "application/json".to_owned()),
            (webhook::TIMESTAMP_HEADER, timestamp.to_string()),
            (
                webhook::SIGNATURE_HEADER,
                webhook::signature(&hook.secret, timestamp, &body),
            ),
        ];
        let error = match poster.post(&hook.url, headers, body).await {
            Ok(status) if (200..300).contains(&status) => {
                return Ok(attempt(told, Settled::Told { cursor, at: now }));
            }
            Ok(status) => format!("HTTP {status}"),
            Err(why) => why,
        };
        let failures = hook.failures.saturating_add(1);
        Ok(attempt(
            0,
            Settled::Failed {
                failures,
                next_at: now + webhook::backoff(hook.failures),
                error: error.chars().take(500).collect(),
            },
        ))
    }

    /// An event as a webhook tells it: its kind and subject, and the topic and parties of
    /// the message or order it is about — never a payload, a note or a report.
    async fn notice(&self, event: &Event) -> Result<Notice> {
        let mut notice = Notice {
            seq: event.seq,
            id: event.id.clone(),
            kind: event.change.kind().to_owned(),
            subject: event.change.subject().to_owned(),
            topic: None,
            from: None,
            to: Vec::new(),
            at: rfc3339(event.at),
        };
        let message = match &event.change {
            Change::MessageSent(m) => {
                notice.topic = Some(m.topic.to_string());
                notice.from = Some(m.from.to_string());
                notice.to = m.to.iter().map(ToString::to_string).collect();
                None
            }
            Change::DeliveryChanged { message, .. } | Change::RequestChanged { message, .. } => {
                Some(message.clone())
            }
            Change::Order(change) => {
                let id = match change {
                    OrderChange::Created(c) => &c.order,
                    OrderChange::Stepped(s) => &s.order,
                    OrderChange::Claimed(c) => &c.order,
                };
                let order = self.store().order(id).await?;
                order.map(|o| {
                    notice.from = Some(o.from.clone());
                    notice.to = vec![o.to.clone()];
                    o.message
                })
            }
            _ => None,
        };
        if let Some(id) = message
            && let Some((envelope, _)) = self.store().message(&id).await?
        {
            notice.topic = Some(envelope.topic.to_string());
            if notice.from.is_none() {
                notice.from = Some(envelope.from.to_string());
                notice.to = envelope
                    .recipients()
                    .iter()
                    .map(|r| r.to_string())
                    .collect();
            }
        }
        Ok(notice)
    }
}
