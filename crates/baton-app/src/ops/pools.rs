//! Pools as typed operations: what waits in the caller's pool, a claim of one item, and
//! `next`, which claims the most urgent item ready for the caller.

use baton_core::authority::Power;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{GET, Needs, Operation, POST, Role, The, Typed, Who, participant, route, typed};
use crate::doc::{Claimed, PoolItems};
use crate::{App, Result};

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NextInput {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
}

pub struct NextItem;

impl Typed for NextItem {
    type Input = NextInput;
    type Output = Claimed;
    const OP: Operation = typed(
        "next",
        Needs::Power(Power::Accept),
        route(POST, "/pool/next"),
        "Claim your role pool's most urgent work.",
        &The::<Self>::ONE,
    )
    .offered("next", &[Role::Executor]);

    async fn run(app: &App, who: Who<'_>, input: NextInput) -> Result<Claimed> {
        let me = participant(who.actor)?;
        app.next(&me, input.topic.as_deref()).await
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimInput {
    /// An order or request sent to a pool.
    pub id: String,
    /// Refuse unless the order is still at this seq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_seq: Option<i64>,
}

pub struct ClaimItem;

impl Typed for ClaimItem {
    type Input = ClaimInput;
    type Output = Claimed;
    const OP: Operation = typed(
        "claim",
        Needs::Power(Power::Accept),
        route(POST, "/pool/{id}/claim"),
        "Claim one order or request sent to your role's pool.",
        &The::<Self>::ONE,
    );

    async fn run(app: &App, who: Who<'_>, input: ClaimInput) -> Result<Claimed> {
        let me = participant(who.actor)?;
        app.claim(&me, &input.id, input.expect_seq).await
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolInput {
    /// Only this topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// Another role's pool (default: your own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

pub struct PoolList;

impl Typed for PoolList {
    type Input = PoolInput;
    type Output = PoolItems;
    const OP: Operation = typed(
        "pool",
        Needs::Read,
        route(GET, "/pool"),
        "What waits in a role's pool, the most urgent first.",
        &The::<Self>::ONE,
    );

    async fn run(app: &App, who: Who<'_>, input: PoolInput) -> Result<PoolItems> {
        let me = participant(who.actor)?;
        app.pool(&me, input.role.as_deref(), input.topic.as_deref())
            .await
    }
}

/// Pools' operations (work sent to a role, claimed by one of its holders), in the order
/// the edges list them: part of [`super::OPERATIONS`].
pub(super) const OPERATIONS: &[Operation] = &[PoolList::OP, ClaimItem::OP, NextItem::OP];
