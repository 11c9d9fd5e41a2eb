//! A message's status steps as typed operations: acknowledge, complete, hand back, refuse
//! and archive. Each is a step of the acting participant on what it was sent (or, for a
//! request's sender, on its own end); the core's lifecycle decides what is allowed.

use baton_core::Verb;
use baton_core::authority::Power;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Method, Needs, Operation, Role, Route, The, Typed, Who, participant, typed};
use crate::doc::Step;
use crate::{App, Result};

const fn step(
    name: &'static str,
    needs: Needs,
    path: &'static str,
    summary: &'static str,
    call: &'static dyn super::Call,
) -> Operation {
    let route = Route {
        method: Method::Post,
        path,
    };
    typed(name, needs, route, summary, call).idempotent()
}

async fn take(app: &App, actor: &str, id: &str, verb: Verb, note: Option<&str>) -> Result<Step> {
    let me = participant(actor)?;
    Ok(app.step(&me, id, verb, note).await?.into())
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageInput {
    pub id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteInput {
    pub id: String,
    /// Posted to the sender.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReasonInput {
    pub id: String,
    pub reason: String,
}

pub struct Ack;

impl Typed for Ack {
    type Input = MessageInput;
    type Output = Step;
    const OP: Operation = step(
        "ack",
        Needs::Own,
        "/messages/{id}/ack",
        "Acknowledge an info or message you read.",
        &The::<Self>::ONE,
    )
    .offered(
        "ack",
        &[Role::Executor, Role::Planner, Role::Reviewer, Role::Owner],
    );

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: MessageInput) -> Result<Step> {
        take(app, actor, &input.id, Verb::Ack, None).await
    }
}

pub struct Complete;

impl Typed for Complete {
    type Input = CompleteInput;
    type Output = Step;
    const OP: Operation = step(
        "complete",
        Needs::OneOf(&[Power::Accept]),
        "/messages/{id}/complete",
        "Complete a request (as recipient or sender).",
        &The::<Self>::ONE,
    )
    .offered(
        "complete",
        &[Role::Executor, Role::Planner, Role::Reviewer, Role::Owner],
    );

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: CompleteInput) -> Result<Step> {
        take(app, actor, &input.id, Verb::Complete, input.note.as_deref()).await
    }
}

pub struct HandBack;

impl Typed for HandBack {
    type Input = ReasonInput;
    type Output = Step;
    const OP: Operation = step(
        "hand-back",
        Needs::Own,
        "/messages/{id}/hand_back",
        "Hand a request back: you cannot proceed.",
        &The::<Self>::ONE,
    )
    .offered("hand_back", &[Role::Executor, Role::Reviewer]);

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: ReasonInput) -> Result<Step> {
        take(app, actor, &input.id, Verb::HandBack, Some(&input.reason)).await
    }
}

pub struct Refuse;

impl Typed for Refuse {
    type Input = ReasonInput;
    type Output = Step;
    const OP: Operation = step(
        "refuse",
        Needs::Own,
        "/messages/{id}/refuse",
        "Refuse a message you will not take (invalid, or beyond your authority).",
        &The::<Self>::ONE,
    );

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: ReasonInput) -> Result<Step> {
        take(app, actor, &input.id, Verb::Refuse, Some(&input.reason)).await
    }
}

pub struct Archive;

impl Typed for Archive {
    type Input = MessageInput;
    type Output = Step;
    const OP: Operation = step(
        "archive",
        Needs::Own,
        "/messages/{id}/archive",
        "Archive a finished message (it stays in the record).",
        &The::<Self>::ONE,
    )
    .offered("archive", &[Role::Planner, Role::Owner]);

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: MessageInput) -> Result<Step> {
        take(app, actor, &input.id, Verb::Archive, None).await
    }
}

/// This group's operations (the steps on a delivery), in the order the edges list them: its
/// part of [`super::OPERATIONS`].
pub(super) const OPERATIONS: &[Operation] =
    &[Ack::OP, Complete::OP, HandBack::OP, Refuse::OP, Archive::OP];
