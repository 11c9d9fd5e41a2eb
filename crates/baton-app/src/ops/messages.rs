//! Sending as typed operations: a message (or a reply naming its parent), and a reply
//! reached by its parent's id. Both are one use case, [`App::send`].

use baton_core::authority::Power;
use baton_core::{MessageType, Refusal};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Method, Needs, Operation, Role, Route, The, Typed, Who, participant, typed};
use crate::doc::Sent;
use crate::{App, Body, Outgoing, Result};

/// A message type's schema: its names only (what each promises is said in the
/// instructions an agent reads once, not in every schema that takes one).
pub fn message_kinds(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<Value> = MessageType::ALL
        .iter()
        .map(|k| Value::from(k.as_str()))
        .collect();
    json_schema!({ "enum": names })
}

/// What a message carries: `body`, text sent as `{"body": TEXT}`, or `payload`, an object.
fn carried(
    operation: &'static str,
    body: Option<String>,
    payload: Option<Map<String, Value>>,
) -> Result<Body> {
    match (body, payload) {
        (Some(text), None) => Ok(Body::Text(text)),
        (None, Some(object)) => Ok(Body::Object(object)),
        _ => Err(Refusal::Input {
            operation,
            problem: "give `body` or `payload` (text, or a JSON object): one of them".into(),
        }
        .into()),
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendInput {
    /// Recipients; a reply defaults to the other side of its parent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "message_kinds")]
    pub kind: Option<MessageType>,
    /// A reply defaults to its parent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// Or `payload`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

pub struct SendMessage;

impl Typed for SendMessage {
    type Input = SendInput;
    type Output = Sent;
    const OP: Operation = typed(
        "send",
        Needs::OneOf(&[Power::Request, Power::Send]),
        Route {
            method: Method::Post,
            path: "/messages",
        },
        "Send a request (moves work), info or message.",
        &The::<Self>::ONE,
    )
    .offered("send", &[Role::Planner]);

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: SendInput) -> Result<Sent> {
        let out = Outgoing {
            to: input.to,
            kind: input.kind.unwrap_or(MessageType::Message),
            topic: input.topic,
            reply_to: input.reply_to,
            body: carried("send", input.body, input.payload)?,
            idempotency_key: input.idempotency_key,
        };
        Ok(app.send(&participant(actor)?, out).await?.into())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplyInput {
    pub id: String,
    /// Default: the other side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Vec<String>>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "message_kinds")]
    pub kind: Option<MessageType>,
    /// Default: the parent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

pub struct Reply;

impl Typed for Reply {
    type Input = ReplyInput;
    type Output = Sent;
    const OP: Operation = typed(
        "reply",
        Needs::Power(Power::Send),
        Route {
            method: Method::Post,
            path: "/messages/{id}/reply",
        },
        "Reply in a message's thread.",
        &The::<Self>::ONE,
    )
    .offered(
        "reply",
        &[Role::Executor, Role::Planner, Role::Reviewer, Role::Owner],
    );

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: ReplyInput) -> Result<Sent> {
        let out = Outgoing {
            to: input.to.unwrap_or_default(),
            kind: input.kind.unwrap_or(MessageType::Message),
            topic: input.topic,
            reply_to: Some(input.id),
            body: carried("reply", input.body, input.payload)?,
            idempotency_key: input.idempotency_key,
        };
        Ok(app.send(&participant(actor)?, out).await?.into())
    }
}

/// This group's operations (sending and replying), in the order the edges list them: its
/// part of [`super::OPERATIONS`].
pub(super) const OPERATIONS: &[Operation] = &[SendMessage::OP, Reply::OP];
