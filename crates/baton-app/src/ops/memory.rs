//! Project memory's writes as typed operations: focus, streams, decisions, constraints,
//! notes, a session's hand-over, and the acknowledgements of alerts and queue items. Each
//! is one declaration and one use case; the edges are made from them.

use baton_core::authority::MEMORY;
use baton_core::gate::NeedSource;
use baton_core::state::StateOp;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Method, Needs, Operation, Role, Route, The, Typed, Who, local, typed};
use crate::doc::{AlertAcked, QueueNoted, Recorded};
use crate::{App, Result};

/// A memory write's row: it takes `send` (no topic) and is reached anywhere.
const fn memory(
    name: &'static str,
    path: &'static str,
    summary: &'static str,
    call: &'static dyn super::Call,
) -> Operation {
    let route = Route {
        method: Method::Post,
        path,
    };
    typed(name, Needs::Power(MEMORY), route, summary, call)
}

async fn record(app: &App, actor: &str, ops: &[StateOp]) -> Result<Recorded> {
    let recorded = app.record(actor, ops).await?;
    Ok(Recorded::new("", &recorded))
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FocusInput {
    /// What matters now.
    pub text: String,
}

pub struct Focus;

impl Typed for Focus {
    type Input = FocusInput;
    type Output = Recorded;
    const OP: Operation = memory(
        "focus",
        "/focus",
        "Set the project's focus: what matters now.",
        &The::<Self>::ONE,
    )
    .naming("baton/focus@1")
    .offered("focus", &[])
    .idempotent();

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: FocusInput) -> Result<Recorded> {
        record(app, actor, &[StateOp::Focus { text: input.text }]).await
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamInput {
    pub name: String,
    pub status: String,
}

pub struct Stream;

impl Typed for Stream {
    type Input = StreamInput;
    type Output = Recorded;
    const OP: Operation = memory(
        "stream",
        "/streams",
        "Start or update a stream of work.",
        &The::<Self>::ONE,
    )
    .naming("baton/stream@1")
    .idempotent();

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: StreamInput) -> Result<Recorded> {
        let op = StateOp::Stream {
            name: input.name,
            status: input.status,
        };
        record(app, actor, &[op]).await
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamDoneInput {
    pub name: String,
}

pub struct StreamDone;

impl Typed for StreamDone {
    type Input = StreamDoneInput;
    type Output = Recorded;
    const OP: Operation = memory(
        "stream done",
        "/streams/{name}/done",
        "Finish a stream: it leaves the active view.",
        &The::<Self>::ONE,
    )
    .naming("baton/stream@1")
    .idempotent();

    async fn run(
        app: &App,
        Who { actor, .. }: Who<'_>,
        input: StreamDoneInput,
    ) -> Result<Recorded> {
        record(app, actor, &[StateOp::StreamDone { name: input.name }]).await
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecideInput {
    pub text: String,
    pub why: String,
    /// The `D-N` it replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<String>,
}

impl DecideInput {
    fn op(self) -> StateOp {
        StateOp::Decide {
            text: self.text,
            why: self.why,
            supersedes: self.supersedes.map(|d| d.trim().to_owned()),
        }
    }
}

pub struct Decide;

impl Typed for Decide {
    type Input = DecideInput;
    type Output = Recorded;
    const OP: Operation = memory(
        "decide",
        "/decisions",
        "Record a decision D-N (it may supersede one).",
        &The::<Self>::ONE,
    )
    .naming("baton/decide@1")
    .offered("decide", &[Role::Planner, Role::Owner]);

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: DecideInput) -> Result<Recorded> {
        record(app, actor, &[input.op()]).await
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConstrainInput {
    pub text: String,
    pub tried: String,
    pub result: String,
}

impl ConstrainInput {
    fn op(self) -> StateOp {
        StateOp::Constrain {
            text: self.text,
            tried: self.tried,
            result: self.result,
        }
    }
}

pub struct Constrain;

impl Typed for Constrain {
    type Input = ConstrainInput;
    type Output = Recorded;
    const OP: Operation = memory(
        "constrain",
        "/constraints",
        "Record a constraint C-N.",
        &The::<Self>::ONE,
    )
    .naming("baton/constrain@1")
    .offered("constrain", &[Role::Executor]);

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: ConstrainInput) -> Result<Recorded> {
        record(app, actor, &[input.op()]).await
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoteInput {
    pub text: String,
    /// An id, or a path from the project root.
    pub subject: String,
}

pub struct Note;

impl Typed for Note {
    type Input = NoteInput;
    type Output = Recorded;
    const OP: Operation = memory(
        "note",
        "/notes",
        "Note N-N on a message, order or path.",
        &The::<Self>::ONE,
    )
    .naming("baton/note@1")
    .offered("note", &[Role::Executor, Role::Reviewer]);

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: NoteInput) -> Result<Recorded> {
        let recorded = app
            .note(actor, input.text, &input.subject, app.root())
            .await?;
        Ok(Recorded::new("", &recorded))
    }
}

/// A session's hand-over: what it finished, decided, learned and changed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Handover {
    /// Streams finished.
    #[serde(default)]
    pub completed: Vec<String>,
    #[serde(default)]
    pub decisions: Vec<DecideInput>,
    #[serde(default)]
    pub constraints: Vec<ConstrainInput>,
    #[serde(default)]
    pub dependency_changes: Vec<String>,
    /// The first action the next session takes: a concrete step ("run cargo test -p
    /// export csv_filters"), never "continue". The newest one heads this participant's
    /// resume packet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_at: Option<String>,
}

pub struct SessionEnd;

impl Typed for SessionEnd {
    type Input = Handover;
    type Output = Recorded;
    const OP: Operation = memory(
        "session end",
        "/session-end",
        "Hand a session over in one transaction.",
        &The::<Self>::ONE,
    )
    .naming("baton/session-end@1");

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: Handover) -> Result<Recorded> {
        let mut ops: Vec<StateOp> = Vec::new();
        ops.extend(
            input
                .completed
                .into_iter()
                .map(|name| StateOp::StreamDone { name }),
        );
        ops.extend(input.decisions.into_iter().map(DecideInput::op));
        ops.extend(input.constraints.into_iter().map(ConstrainInput::op));
        ops.extend(
            input
                .dependency_changes
                .into_iter()
                .map(|text| StateOp::DependencyChange { text }),
        );
        if let Some(text) = input.resume_at {
            if baton_core::awl::contract::is_vague_action(&text) {
                return Err(baton_core::Refusal::Input {
                    operation: "session end",
                    problem: format!(
                        "`resume_at` {text:?} names no concrete action: say what to run or \
                         read first (\"run cargo test -p export csv_filters\")"
                    ),
                }
                .into());
            }
            ops.push(StateOp::ResumeAt { text });
        }
        if ops.is_empty() {
            return Err(baton_core::Refusal::Input {
                operation: "session end",
                problem: "nothing to hand over: give `completed`, `decisions`, `constraints`, \
                          `dependency_changes` or `resume_at`"
                    .into(),
            }
            .into());
        }
        record(app, actor, &ops).await
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdInput {
    pub id: String,
}

pub struct AckAlert;

impl Typed for AckAlert {
    type Input = IdInput;
    type Output = AlertAcked;
    const OP: Operation = memory(
        "alerts ack",
        "/alerts/{id}/ack",
        "Acknowledge an alert.",
        &The::<Self>::ONE,
    )
    .idempotent();

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: IdInput) -> Result<AlertAcked> {
        app.record(
            actor,
            &[StateOp::AlertAck {
                id: input.id.clone(),
            }],
        )
        .await?;
        Ok(AlertAcked { id: input.id })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ItemInput {
    /// The queue item's id.
    pub item: String,
}

pub struct AckItem;

impl Typed for AckItem {
    type Input = ItemInput;
    type Output = QueueNoted;
    const OP: Operation = memory(
        "queue ack",
        "/queue/{item}/ack",
        "Acknowledge a queue item until a newer signal.",
        &The::<Self>::ONE,
    )
    .idempotent();

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: ItemInput) -> Result<QueueNoted> {
        let event = app.ack_item(actor, &input.item).await?;
        Ok(QueueNoted {
            item: input.item,
            seq: Some(event.seq),
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NeedInput {
    /// What is needed.
    pub text: String,
    /// The order it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<String>,
}

pub struct Need;

impl Typed for Need {
    type Input = NeedInput;
    type Output = QueueNoted;
    const OP: Operation = memory(
        "need",
        "/needs",
        "Raise a need for a person (the human queue).",
        &The::<Self>::ONE,
    )
    .offered("need", &[Role::Executor, Role::Reviewer]);

    async fn run(app: &App, Who { actor, .. }: Who<'_>, input: NeedInput) -> Result<QueueNoted> {
        let item = app
            .raise_need(
                actor,
                &input.text,
                input.order.as_deref(),
                NeedSource::Hand,
                None,
            )
            .await?;
        Ok(QueueNoted { item, seq: None })
    }
}

/// This group's operations (the project memory and the human queue), in the order the edges list them: its
/// part of [`super::OPERATIONS`].
pub(super) const OPERATIONS: &[Operation] = &[
    Focus::OP,
    Decide::OP,
    Constrain::OP,
    Note::OP,
    Stream::OP,
    StreamDone::OP,
    SessionEnd::OP,
    local("state render", Needs::Read),
    local("state import", Needs::Power(MEMORY)),
    AckAlert::OP,
    Need::OP,
    AckItem::OP,
];
