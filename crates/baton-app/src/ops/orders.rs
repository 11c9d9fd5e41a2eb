//! Work Orders and receipts as typed operations: an order's steps (its creation
//! included), reading one (or waiting for its next steps), and writing and waiting for a
//! step's receipt.

use std::time::Duration;

use baton_core::authority::{MEMORY, Power};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{
    GET, Needs, Operation, POST, Role, The, Typed, Who, local, op, participant, refused, route,
    typed,
};
use crate::doc::{OrderShown, OrderStepped, ReceiptShown, ReceiptWritten};
use crate::{App, OrderStep, Result};

/// What a wait lasts unless asked, and the most it may: a server holds a request no
/// longer, and an agent's tool call must end within its client's timeout.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);
pub const MAX_WAIT: Duration = Duration::from_secs(300);

/// A wait of `seconds` (the default when absent; 0 looks once), refused out of range.
pub fn wait_for(operation: &'static str, seconds: Option<f64>) -> Result<Duration> {
    let Some(seconds) = seconds else {
        return Ok(DEFAULT_WAIT);
    };
    if !(seconds >= 0.0 && seconds <= MAX_WAIT.as_secs_f64()) {
        return Err(refused(
            operation,
            format!(
                "`timeout_seconds` {seconds} is out of range: use 0 (look once) to {}",
                MAX_WAIT.as_secs()
            ),
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

// A step of an order's lifecycle, as the `order` operation's `action`; an order's
// `allowed` names these. (A doc comment here would be a description in every schema.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OrderVerb {
    Create,
    Accept,
    Decline,
    Start,
    Report,
    Answer,
    Approve,
    Rework,
    Cancel,
}

impl OrderVerb {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Accept => "accept",
            Self::Decline => "decline",
            Self::Start => "start",
            Self::Report => "report",
            Self::Answer => "answer",
            Self::Approve => "approve",
            Self::Rework => "rework",
            Self::Cancel => "cancel",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OrderInput {
    pub action: OrderVerb,
    /// The order; not on `create`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// On `create` your Work Order, on `report` your Work Report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document: Option<Map<String, Value>>,
    /// On `create`: its topic (default `work-order`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// On `answer`: the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// On `rework`; optional on `decline` and `cancel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Refuse unless the order is still at this seq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_seq: Option<i64>,
}

impl OrderInput {
    /// `action` on the order `id` (none for `create`), nothing else set.
    pub fn new(action: OrderVerb, id: Option<String>) -> Self {
        Self {
            action,
            id,
            document: None,
            topic: None,
            text: None,
            reason: None,
            expect_seq: None,
        }
    }

    /// The step it asks for, or what is missing or does not belong.
    fn step(self) -> std::result::Result<(Option<String>, Step), String> {
        use OrderVerb as V;
        let verb = self.action;
        let stray = [
            ("id", self.id.is_some() && verb == V::Create),
            ("expect_seq", self.expect_seq.is_some() && verb == V::Create),
            ("topic", self.topic.is_some() && verb != V::Create),
            (
                "document",
                self.document.is_some() && !matches!(verb, V::Create | V::Report),
            ),
            ("text", self.text.is_some() && verb != V::Answer),
            (
                "reason",
                self.reason.is_some() && !matches!(verb, V::Decline | V::Rework | V::Cancel),
            ),
        ];
        if let Some((name, _)) = stray.iter().find(|(_, stray)| *stray) {
            return Err(format!(
                "`{name}` is not for action `{}`: leave it out",
                verb.as_str()
            ));
        }
        let document = |what: &str| {
            self.document.clone().map(Value::Object).ok_or_else(|| {
                format!(
                    "`document`: `{}` needs {what} (a JSON object)",
                    verb.as_str()
                )
            })
        };
        let step = match verb {
            V::Create => Step::Create {
                document: document("the Work Order")?,
                topic: self.topic.clone(),
            },
            V::Accept => Step::On(OrderStep::Accept),
            V::Decline => Step::On(OrderStep::Decline {
                reason: self.reason.clone(),
            }),
            V::Start => Step::On(OrderStep::Start),
            V::Report => Step::On(OrderStep::Report {
                document: document("the Work Report")?,
            }),
            V::Answer => Step::On(OrderStep::Answer {
                text: self
                    .text
                    .clone()
                    .ok_or("`text`: `answer` needs the answer")?,
            }),
            V::Approve => Step::On(OrderStep::Approve),
            V::Rework => Step::On(OrderStep::Rework {
                reason: self
                    .reason
                    .clone()
                    .ok_or("`reason`: `rework` needs what the worker should change")?,
            }),
            V::Cancel => Step::On(OrderStep::Cancel {
                reason: self.reason.clone(),
            }),
        };
        if verb != V::Create && self.id.is_none() {
            return Err(format!("`id`: `{}` needs the order's id", verb.as_str()));
        }
        Ok((self.id, step))
    }
}

enum Step {
    Create {
        document: Value,
        topic: Option<String>,
    },
    On(OrderStep),
}

pub struct OrderTake;

impl Typed for OrderTake {
    type Input = OrderInput;
    type Output = OrderStepped;
    // Creating takes `request`; the worker's steps `accept`, the sender's `approve`.
    const OP: Operation = typed(
        "order",
        Needs::OneOf(&[Power::Accept, Power::Approve, Power::Request]),
        route(POST, "/orders"),
        "Take a Work Order step as you: `create`, or an order's `allowed` action.",
        &The::<Self>::ONE,
    )
    .offered("order", &[Role::Executor, Role::Planner, Role::Owner]);

    async fn run(app: &App, who: Who<'_>, input: OrderInput) -> Result<OrderStepped> {
        let me = participant(who.actor)?;
        let expect_seq = input.expect_seq;
        let (id, step) = input
            .step()
            .map_err(|problem| refused(Self::OP.name, problem))?;
        let written = match (id, step) {
            (_, Step::Create { document, topic }) => {
                app.offer(&me, document, topic.as_deref()).await?
            }
            (Some(id), Step::On(step)) => app.take_step(&me, &id, expect_seq, step).await?,
            (None, Step::On(_)) => unreachable!("a step on an order names it"),
        };
        Ok(OrderStepped::new(&written, app.now()))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OrderShowInput {
    pub id: String,
    /// Wait for steps after this seq and list only those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<i64>,
    /// With `since`: seconds to wait (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 300))]
    pub timeout_seconds: Option<f64>,
}

pub struct OrderShow;

impl Typed for OrderShow {
    type Input = OrderShowInput;
    type Output = OrderShown;
    const OP: Operation = typed(
        "order show",
        Needs::Read,
        route(GET, "/orders/{id}"),
        "A Work Order and its steps.",
        &The::<Self>::ONE,
    )
    .offered(
        "order_show",
        &[Role::Executor, Role::Planner, Role::Reviewer, Role::Owner],
    )
    .idempotent()
    .waits();

    async fn run(app: &App, _: Who<'_>, input: OrderShowInput) -> Result<OrderShown> {
        let Some(since) = input.since else {
            if input.timeout_seconds.is_some() {
                return Err(refused(
                    Self::OP.name,
                    "`timeout_seconds` is for waiting: give `since` too",
                ));
            }
            return Ok(OrderShown::new(
                &app.order_view(&input.id).await?,
                app.now(),
            ));
        };
        let timeout = wait_for(Self::OP.name, input.timeout_seconds)?;
        let written = app.wait_order(&input.id, since, timeout).await?;
        let mut view = app.order_view(&input.id).await?;
        view.events = written.events;
        Ok(OrderShown::new(&view, app.now()))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceiptInput {
    pub step: String,
    /// A URI, or a path from the project root.
    pub artifact: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
}

pub struct ReceiptWrite;

impl Typed for ReceiptWrite {
    type Input = ReceiptInput;
    type Output = ReceiptWritten;
    const OP: Operation = typed(
        "receipt write",
        Needs::Power(MEMORY),
        route(POST, "/receipts"),
        "Record where a step's output landed.",
        &The::<Self>::ONE,
    )
    .offered("receipt_write", &[Role::Executor])
    .idempotent();

    async fn run(app: &App, who: Who<'_>, input: ReceiptInput) -> Result<ReceiptWritten> {
        let (receipt, event) = app
            .write_receipt(who.actor, app.root(), input.step, input.artifact, input.run)
            .await?;
        Ok(ReceiptWritten {
            receipt,
            generation: Some(event.seq),
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceiptWaitInput {
    pub step: String,
    /// Default 30, at most 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 300))]
    pub timeout_seconds: Option<f64>,
}

pub struct ReceiptWait;

impl Typed for ReceiptWait {
    type Input = ReceiptWaitInput;
    type Output = ReceiptShown;
    // A missed wait raises one alert: a write.
    const OP: Operation = typed(
        "receipt wait",
        Needs::Power(MEMORY),
        route(POST, "/receipts/{step}/wait"),
        "Wait for a step's receipt; a miss raises one alert.",
        &The::<Self>::ONE,
    )
    .offered("receipt_wait", &[])
    .idempotent()
    .waits();

    async fn run(app: &App, who: Who<'_>, input: ReceiptWaitInput) -> Result<ReceiptShown> {
        let step = input.step.trim();
        if step.is_empty() {
            return Err(refused(Self::OP.name, "`step` must not be empty"));
        }
        let timeout = wait_for(Self::OP.name, input.timeout_seconds)?;
        Ok(ReceiptShown {
            receipt: app.wait_receipt(who.actor, step, timeout).await?,
        })
    }
}

/// This group's operations (Work Orders, their receipts, the handoff, the review gate and negotiation), in the order the edges list them: its
/// part of [`super::OPERATIONS`].
pub(super) const OPERATIONS: &[Operation] = &[
    ReceiptWrite::OP,
    ReceiptWait::OP,
    local("receipt verify", Needs::Read),
    OrderTake::OP,
    OrderShow::OP,
    // Approving an order that holds effects runs them: where the upstream can be started.
    op("order approve", Needs::Power(Power::Approve)),
    local("gateway", Needs::Power(Power::Accept)),
    local("handoff", Needs::Read),
    local("check", Needs::Read),
    local("evidence run", Needs::Power(MEMORY)),
    local("review", Needs::Power(Power::Approve)),
    // Track records are read from this machine's store only (no route serves them).
    local("record", Needs::Read),
    local("negotiate", Needs::Power(MEMORY)),
];
