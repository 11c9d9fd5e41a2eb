//! The caller and the project as they stand, and the long polls that follow them: who a
//! key acts as, the status (which `baton board` serves without a key, on loopback), the
//! status once the log moves, and what is new for the caller.

use baton_core::authority::MEMORY;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    GET, Needs, Nothing, Operation, The, Typed, Who, local, op, participant, route, typed, wait_for,
};
use crate::doc::{Caller, News, Status};
use crate::{App, Result};

/// Who the caller is.
pub struct Me;

impl Typed for Me {
    type Input = Nothing;
    type Output = Caller;
    const OP: Operation = typed(
        "me",
        Needs::Read,
        route(GET, "/me"),
        "Who the key acts as, and its scope",
        &The::<Self>::ONE,
    )
    .idempotent();

    async fn run(_: &App, who: Who<'_>, _: Nothing) -> Result<Caller> {
        Ok(Caller {
            participant: participant(who.actor)?,
            scope: who.scope,
        })
    }
}

/// The project at one generation of the log.
pub struct StatusShow;

impl Typed for StatusShow {
    type Input = Nothing;
    type Output = Status;
    const OP: Operation = typed(
        "status",
        Needs::Read,
        route(GET, "/status"),
        "Everything at one generation of the log: runs, loads, orders, queue, alerts, metrics",
        &The::<Self>::ONE,
    )
    .idempotent()
    .on_board();

    async fn run(app: &App, _: Who<'_>, _: Nothing) -> Result<Status> {
        app.status().await
    }
}

/// A point in the log to wait past, and for how long.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AfterInput {
    /// The log position to wait past (0: from the start).
    #[serde(default)]
    pub after: i64,
    /// How long to wait (default 30, at most 300; 0 looks once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 300))]
    pub timeout_seconds: Option<f64>,
}

/// The status once the log is past `after`, or at the timeout.
pub struct StatusWait;

impl Typed for StatusWait {
    type Input = AfterInput;
    type Output = Status;
    const OP: Operation = typed(
        "status wait",
        Needs::Read,
        route(GET, "/status/wait"),
        "The status once the log is past `after` (or at the timeout)",
        &The::<Self>::ONE,
    )
    .idempotent()
    .on_board()
    .waits();

    async fn run(app: &App, _: Who<'_>, input: AfterInput) -> Result<Status> {
        let timeout = wait_for(Self::OP.name, input.timeout_seconds)?;
        app.status_after(input.after, timeout).await
    }
}

/// What is new for the caller after a point in the log.
pub struct NewsWait;

impl Typed for NewsWait {
    type Input = AfterInput;
    type Output = News;
    const OP: Operation = typed(
        "wait",
        Needs::Read,
        route(GET, "/wait"),
        "Wait for news: returns as soon as something after `after` concerns you",
        &The::<Self>::ONE,
    )
    .idempotent()
    .waits();

    async fn run(app: &App, who: Who<'_>, input: AfterInput) -> Result<News> {
        let timeout = wait_for(Self::OP.name, input.timeout_seconds)?;
        let me = participant(who.actor)?;
        Ok((&app.wait_news(&me, input.after, timeout).await?).into())
    }
}

/// This group's operations (the ledger and what a participant watches), in the order the edges list them: its
/// part of [`super::OPERATIONS`].
pub(super) const OPERATIONS: &[Operation] = &[
    NewsWait::OP,
    local("run", Needs::Power(MEMORY)),
    // A hook records what an agent did and never fails: it is an observation, recorded as
    // its participant, or as the local operator for a name no one registered.
    local("hook", Needs::Read),
    local("reap", Needs::Admin),
    Me::OP,
    StatusShow::OP,
    StatusWait::OP,
    op("metrics", Needs::Read),
    local("board", Needs::Read),
];
