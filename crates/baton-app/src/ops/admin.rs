//! Administration and the project-wide reads as typed operations: participants, their
//! policies and webhooks, keys, security events, the state, alerts, receipts and runs.

use baton_core::key::Scope;
use baton_core::participant::OutsideAgent;
use baton_core::{Refusal, time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{GET, Needs, Operation, POST, The, Typed, Who, local, route, typed};
use crate::doc::{
    AgentAdded, AgentPolicy, Agents, Alerts, KeyIssued, KeyRevoked, KeyRow, Keys, OrderRow, Orders,
    ReceiptShown, RunDoc, Runs, SecurityEvents, State, WebhookSet, Webhooks,
};
use crate::{App, PolicyEdit, Result};

/// No input.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Nothing {}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentInput {
    pub name: String,
    pub role: String,
    /// Its powers (request, send, accept, approve, effects; `none` for none); absent, its
    /// role's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub may: Option<Vec<String>>,
    /// The topics they reach (`billing`, `billing-*`, `*`); absent, every topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topics: Option<Vec<String>>,
    /// The URL of an outside A2A agent it stands for: requests to it are handed to that
    /// agent (with `key_env`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a2a: Option<String>,
    /// The environment variable of the server holding the outside agent's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_env: Option<String>,
}

pub struct AgentAdd;

impl Typed for AgentAdd {
    type Input = AgentInput;
    type Output = AgentAdded;
    const OP: Operation = typed(
        "agent add",
        Needs::Admin,
        route(POST, "/participants"),
        "Register a participant (idempotent for the same role)",
        &The::<Self>::ONE,
    )
    .idempotent();

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: AgentInput) -> Result<AgentAdded> {
        let outside = match (&input.a2a, &input.key_env) {
            (Some(url), Some(key_env)) => Some(match &app.settings.outside_agents {
                // A server: only the variables and addresses its operator allows.
                Some(admission) => admission.admit(url, key_env)?,
                None => OutsideAgent::new(url, key_env)?,
            }),
            (None, None) => None,
            _ => {
                return Err(Refusal::Input {
                    operation: Self::OP.name,
                    problem: "an outside agent takes both `a2a` (its URL) and `key_env`".into(),
                }
                .into());
            }
        };
        let edit = PolicyEdit {
            may: input.may,
            topics: input.topics,
            default: false,
        };
        let added = app
            .add_participant_as(actor, &input.name, &input.role, &edit, outside)
            .await?;
        let a2a = app.outside_agent(&added.participant.name).await?;
        Ok(AgentAdded {
            a2a,
            ..AgentAdded::new(&added)
        })
    }
}

pub struct AgentList;

impl Typed for AgentList {
    type Input = Nothing;
    type Output = Agents;
    const OP: Operation = typed(
        "agent list",
        Needs::Read,
        route(GET, "/participants"),
        "The project's participants, their roles and policies",
        &The::<Self>::ONE,
    )
    .idempotent();

    async fn run(app: &App, _: Who<'_>, _: Nothing) -> Result<Agents> {
        Ok(Agents::new(
            &app.participants().await?,
            &app.outside_agents().await?,
        ))
    }
}

/// A change to a participant's policy: each field given replaces the current one;
/// `default` starts from the role's default (alone, it returns to it).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyInput {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub may: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topics: Option<Vec<String>>,
    #[serde(default)]
    pub default: bool,
}

pub struct AgentPolicySet;

impl Typed for AgentPolicySet {
    type Input = PolicyInput;
    type Output = AgentPolicy;
    const OP: Operation = typed(
        "agent policy",
        Needs::Admin,
        route(POST, "/participants/{name}/policy"),
        "Change what a participant may do and on which topics",
        &The::<Self>::ONE,
    )
    .idempotent();

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: PolicyInput) -> Result<AgentPolicy> {
        let edit = PolicyEdit {
            may: input.may,
            topics: input.topics,
            default: input.default,
        };
        Ok(AgentPolicy::new(
            &app.set_policy(actor, &input.name, &edit).await?,
        ))
    }
}

/// A participant's webhook: a URL (http or https) to set, with a new secret; `null` to
/// remove it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookInput {
    pub name: String,
    pub url: Option<String>,
}

pub struct AgentWebhook;

impl Typed for AgentWebhook {
    type Input = WebhookInput;
    type Output = WebhookSet;
    const OP: Operation = typed(
        "agent webhook",
        Needs::Admin,
        route(POST, "/participants/{name}/webhook"),
        "Set (with a new signing secret, shown once) or remove a participant's webhook",
        &The::<Self>::ONE,
    );

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: WebhookInput) -> Result<WebhookSet> {
        app.set_webhook(actor, &input.name, input.url.as_deref())
            .await
    }
}

pub struct AgentWebhooks;

impl Typed for AgentWebhooks {
    type Input = Nothing;
    type Output = Webhooks;
    const OP: Operation = typed(
        "agent webhooks",
        Needs::Admin,
        route(GET, "/webhooks"),
        "Every webhook and its delivery state (never its secret)",
        &The::<Self>::ONE,
    )
    .idempotent();

    async fn run(app: &App, _: Who<'_>, _: Nothing) -> Result<Webhooks> {
        Ok(Webhooks::new(&app.webhooks().await?))
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecurityInput {
    /// Events before this seq (the `seq` of the last one of the previous page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<i64>,
    /// At most this many (1 to 500; 50 unless given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

pub struct SecurityEventsList;

impl Typed for SecurityEventsList {
    type Input = SecurityInput;
    type Output = SecurityEvents;
    const OP: Operation = typed(
        "security-events",
        Needs::Admin,
        route(GET, "/security-events"),
        "Actions refused as beyond authority, newest first",
        &The::<Self>::ONE,
    )
    .idempotent();

    async fn run(app: &App, _: Who<'_>, input: SecurityInput) -> Result<SecurityEvents> {
        let (events, repeats) = app
            .security_events(input.before, input.limit.unwrap_or(50))
            .await?;
        Ok(SecurityEvents::new(&events, &repeats))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyInput {
    pub participant: String,
    pub scope: Scope,
    /// How long it lives, e.g. `30d`; without it, until revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
}

pub struct KeyIssue;

impl Typed for KeyIssue {
    type Input = KeyInput;
    type Output = KeyIssued;
    const OP: Operation = typed(
        "key issue",
        Needs::Admin,
        route(POST, "/keys"),
        "Issue a key: its token is in this answer only",
        &The::<Self>::ONE,
    );

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: KeyInput) -> Result<KeyIssued> {
        let expires = input
            .expires
            .as_deref()
            .map(|d| {
                time::duration(d).ok_or_else(|| Refusal::Input {
                    operation: "key issue",
                    problem: format!(
                        "`expires` {d:?} is not a duration: use {}",
                        time::DURATION_FORMS
                    ),
                })
            })
            .transpose()?;
        let (key, token) = app
            .issue_key(actor, &input.participant, input.scope, expires)
            .await?;
        Ok(KeyIssued {
            key: KeyRow::new(&key, app.now()),
            token,
        })
    }
}

pub struct KeyList;

impl Typed for KeyList {
    type Input = Nothing;
    type Output = Keys;
    const OP: Operation = typed(
        "key list",
        Needs::Admin,
        route(GET, "/keys"),
        "The project's keys (never their tokens)",
        &The::<Self>::ONE,
    )
    .idempotent();

    async fn run(app: &App, _: Who<'_>, _: Nothing) -> Result<Keys> {
        let now = app.now();
        let items = app
            .keys()
            .await?
            .iter()
            .map(|k| KeyRow::new(k, now))
            .collect();
        Ok(Keys { items })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyIdInput {
    pub id: String,
}

pub struct KeyRevoke;

impl Typed for KeyRevoke {
    type Input = KeyIdInput;
    type Output = KeyRevoked;
    const OP: Operation = typed(
        "key revoke",
        Needs::Admin,
        route(POST, "/keys/{id}/revoke"),
        "Revoke one key",
        &The::<Self>::ONE,
    )
    .idempotent();

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: KeyIdInput) -> Result<KeyRevoked> {
        let key = app.revoke_key(actor, &input.id).await?;
        Ok(KeyRevoked {
            key: KeyRow::new(&key, app.now()),
        })
    }
}

pub struct StateShow;

impl Typed for StateShow {
    type Input = Nothing;
    type Output = State;
    const OP: Operation = typed(
        "state show",
        Needs::Read,
        route(GET, "/state"),
        "Focus, streams, decisions, constraints, notes",
        &The::<Self>::ONE,
    )
    .idempotent();

    async fn run(app: &App, _: Who<'_>, _: Nothing) -> Result<State> {
        app.state_shown().await
    }
}

pub struct AlertList;

impl Typed for AlertList {
    type Input = Nothing;
    type Output = Alerts;
    const OP: Operation = typed(
        "alerts",
        Needs::Read,
        route(GET, "/alerts"),
        "Open alerts",
        &The::<Self>::ONE,
    )
    .idempotent();

    async fn run(app: &App, _: Who<'_>, _: Nothing) -> Result<Alerts> {
        Ok(Alerts {
            items: app.alerts().await?,
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepInput {
    pub step: String,
}

pub struct ReceiptShow;

impl Typed for ReceiptShow {
    type Input = StepInput;
    type Output = ReceiptShown;
    const OP: Operation = typed(
        "receipt show",
        Needs::Read,
        route(GET, "/receipts/{step}"),
        "A step's newest receipt",
        &The::<Self>::ONE,
    )
    .idempotent();

    async fn run(app: &App, _: Who<'_>, input: StepInput) -> Result<ReceiptShown> {
        Ok(ReceiptShown {
            receipt: app.receipt(&input.step).await?,
        })
    }
}

/// The most runs a page holds.
pub const MAX_RUNS_PAGE: u32 = 1000;

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunsInput {
    /// Every run ever recorded, a page at a time; without it, live runs and the newest
    /// others.
    #[serde(default)]
    pub all: bool,
    /// With `all`: the page after this cursor (the `next` of the previous page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// With `all`: runs per page (1 to 1000; 100 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

pub struct RunList;

impl Typed for RunList {
    type Input = RunsInput;
    type Output = Runs;
    const OP: Operation = typed(
        "runs",
        Needs::Read,
        route(GET, "/runs"),
        "Runs with their health",
        &The::<Self>::ONE,
    )
    .idempotent();

    async fn run(app: &App, _: Who<'_>, input: RunsInput) -> Result<Runs> {
        let now = app.now();
        let limit = input.limit.unwrap_or(100).clamp(1, MAX_RUNS_PAGE);
        let (rows, next) = app
            .runs_view(input.all, input.cursor.as_deref(), limit)
            .await?;
        Ok(Runs {
            next,
            items: rows.iter().map(|r| RunDoc::new(r, now)).collect(),
        })
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OrdersInput {
    /// Closed or finished ones too.
    #[serde(default)]
    pub all: bool,
}

pub struct OrderList;

impl Typed for OrderList {
    type Input = OrdersInput;
    type Output = Orders;
    const OP: Operation = typed(
        "order list",
        Needs::Read,
        route(GET, "/orders"),
        "The orders you are party to (every order, on this machine without --as)",
        &The::<Self>::ONE,
    )
    .idempotent();

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: OrdersInput) -> Result<Orders> {
        // A participant sees the orders it is party to; the machine's operator, all.
        let party = baton_core::Passname::new(actor).ok();
        let orders = app.orders(party.as_ref(), input.all).await?;
        let now = app.now();
        Ok(Orders {
            items: orders.iter().map(|o| OrderRow::new(o, now)).collect(),
        })
    }
}

/// This group's operations (administration and the project-wide reads), in the order the edges list them: its
/// part of [`super::OPERATIONS`].
pub(super) const OPERATIONS: &[Operation] = &[
    StateShow::OP,
    AlertList::OP,
    ReceiptShow::OP,
    OrderList::OP,
    RunList::OP,
    local("init", Needs::Admin),
    local("project", Needs::Admin),
    AgentAdd::OP,
    AgentList::OP,
    AgentPolicySet::OP,
    AgentWebhook::OP,
    AgentWebhooks::OP,
    KeyIssue::OP,
    KeyList::OP,
    KeyRevoke::OP,
    SecurityEventsList::OP,
    local("export", Needs::Read),
    local("import", Needs::Admin),
    local("serve", Needs::Admin),
    local("mcp", Needs::Read),
    // The demo makes a throwaway project of its own, and its cast runs inside it.
    local("demo", Needs::Admin),
    local("demo-part", Needs::Admin),
];
