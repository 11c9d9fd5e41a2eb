//! Pools: a request or a Work Order addressed to a role (`role:ROLE`) instead of one
//! participant, and the claim that makes it one participant's. What an address says, who
//! may claim an item, what a claim records, and which item is the most urgent.
//!
//! A pool item has no recipient until it is claimed; a claim is one step inside the write
//! transaction, checked against what the log says there (unclaimed, still open, an
//! order's seq as the claimant saw it), so exactly one claimant gets it and every other
//! is refused with nothing changed. Once claimed it is the claimant's like any item
//! addressed to it: a delivery of its own, and an order's worker.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::authority::{self, Power};
use crate::message::MessageType;
use crate::names::{Passname, Topic};
use crate::participant::Participant;
use crate::refusal::{Field, Refusal};
use crate::time::Millis;

/// The event kind of a claim.
pub const KIND: &str = "pool.claimed";

/// What an address that names a pool starts with.
pub const ROLE_PREFIX: &str = "role:";

/// The most candidates `next` weighs in one pass: the most urgent first, so a page of
/// them holds the one to take unless every one of them is beyond the caller's topics.
pub const NEXT_PAGE: u32 = 100;

/// A role pool: every participant holding the role may claim what is addressed to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Pool {
    role: String,
}

impl Pool {
    /// The pool of `role`.
    pub fn of_role(role: &str) -> Self {
        Self {
            role: role.to_owned(),
        }
    }

    pub fn role(&self) -> &str {
        &self.role
    }
}

impl fmt::Display for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{ROLE_PREFIX}{}", self.role)
    }
}

impl From<Pool> for String {
    fn from(p: Pool) -> Self {
        p.to_string()
    }
}

impl TryFrom<String> for Pool {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        match address(&s, Field::To) {
            Ok(Address::Pool(p)) => Ok(p),
            _ => Err(format!("{s:?} is not a pool (role:ROLE)")),
        }
    }
}

/// Where a request or an order goes: one participant, or a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    One(Passname),
    Pool(Pool),
}

/// Why an address naming a pool is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum AddressProblem {
    /// `KIND:` with a kind Baton has no pool of.
    #[error("only role pools exist: address one as role:ROLE")]
    Syntax,
    /// `role:` with nothing after it.
    #[error("it names no role")]
    NoRole,
    /// No registered participant holds the role.
    #[error("no participant holds role {role:?}; roles held: {}", if known.is_empty() { "none".to_owned() } else { known.join(", ") })]
    UnknownRole { role: String, known: Vec<String> },
    /// Only work goes to a pool: information and messages go to someone.
    #[error("only a request or an order goes to a pool, not {kind}")]
    NotARequest { kind: MessageType },
    /// A pool among other recipients.
    #[error("a pool is the only recipient of what is sent to it")]
    NotAlone,
}

/// Reads an address as typed: `role:ROLE` names a pool; anything else with a `:` is a
/// syntax Baton does not know; else it is a passname.
pub fn address(raw: &str, field: Field) -> Result<Address, Refusal> {
    let raw = raw.trim();
    if let Some(role) = raw.strip_prefix(ROLE_PREFIX) {
        let role = role.trim();
        if role.is_empty() {
            return Err(pool_refusal(field, raw, AddressProblem::NoRole));
        }
        return Ok(Address::Pool(Pool::of_role(role)));
    }
    if raw.contains(':') {
        return Err(pool_refusal(field, raw, AddressProblem::Syntax));
    }
    Passname::new(raw)
        .map(Address::One)
        .map_err(|error| Refusal::Name { field, error })
}

fn pool_refusal(field: Field, value: &str, problem: AddressProblem) -> Refusal {
    Refusal::PoolAddress {
        field,
        value: value.to_owned(),
        problem,
    }
}

/// Whether a pool may be sent a message of `kind` on `topic`, given the registered
/// participants holding its role (`members`) and every role held (`known`): only work
/// goes to a pool, the role must be held, and at least one holder must be able to take
/// it on (a request to a pool none of whose members could close it is refused as a
/// request to such a participant is).
pub fn sendable(
    pool: &Pool,
    kind: MessageType,
    topic: &Topic,
    members: &[Participant],
    known: &[String],
) -> Result<(), Refusal> {
    if kind != MessageType::Request {
        return Err(pool_refusal(
            Field::To,
            &pool.to_string(),
            AddressProblem::NotARequest { kind },
        ));
    }
    let Some(first) = members.first() else {
        return Err(pool_refusal(
            Field::To,
            &pool.to_string(),
            AddressProblem::UnknownRole {
                role: pool.role.clone(),
                known: known.to_vec(),
            },
        ));
    };
    if members
        .iter()
        .any(|m| authority::deliverable(m, kind, topic).is_ok())
    {
        return Ok(());
    }
    authority::deliverable(first, kind, topic)
}

/// A message in a pool, as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    pub message: String,
    pub pool: Pool,
    /// Its sender, who may not claim it.
    pub from: Passname,
    pub topic: Topic,
    /// The order the message carries, if it carries one.
    pub order: Option<String>,
    /// The order's deadline as an instant, when it has one.
    pub deadline_at: Option<Millis>,
    /// The log position of the send.
    pub seq: i64,
    pub created_at: Millis,
    /// Who claimed it, once claimed.
    pub claimed_by: Option<Passname>,
    pub claimed_at: Option<Millis>,
    /// Unclaimed and still wanted: the sender has not closed its request.
    pub open: bool,
}

/// Why an item cannot be claimed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum ClaimProblem {
    /// Another claimant got it first.
    #[error("{by} claimed it first")]
    Taken { by: Passname },
    /// Its sender closed it, or the order it carries moved past `offered`.
    #[error("it is no longer open")]
    Closed,
    /// The message was addressed to participants, not to a pool.
    #[error("it was not sent to a pool")]
    NotPooled,
    /// The claimant sent it.
    #[error("{actor} sent it: work goes to someone else")]
    Own { actor: Passname },
    /// The claimant does not hold the pool's role.
    #[error("{actor} ({role}) is not in pool {pool}")]
    NotInPool {
        actor: Passname,
        role: String,
        pool: Pool,
    },
}

/// A claim, as the log records it (`pool.claimed`): `by` took `message` from `pool`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claimed {
    pub message: String,
    pub pool: Pool,
    pub by: Passname,
    /// The order the message carries, if any (its own `order.changed` follows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<String>,
}

fn claim_refusal(item: &str, problem: ClaimProblem) -> Refusal {
    Refusal::Claim {
        item: item.to_owned(),
        problem,
    }
}

/// Whether `claimant` may claim `item` now, and what the claim records. Checks, in
/// order: the item is a pool's and unclaimed (a lost race is refused first: it is
/// retryable elsewhere), still open, not the claimant's own, the claimant holds the
/// pool's role and may take on work on the item's topic. An order's own checks (its seq, its status) are
/// [`crate::order::plan_claim`]'s.
pub fn plan_claim(
    item: Option<&Item>,
    id: &str,
    claimant: &Participant,
) -> Result<Claimed, Refusal> {
    let Some(item) = item else {
        return Err(claim_refusal(id, ClaimProblem::NotPooled));
    };
    if let Some(by) = &item.claimed_by {
        return Err(claim_refusal(id, ClaimProblem::Taken { by: by.clone() }));
    }
    if !item.open {
        return Err(claim_refusal(id, ClaimProblem::Closed));
    }
    if item.from == claimant.name {
        return Err(claim_refusal(
            id,
            ClaimProblem::Own {
                actor: claimant.name.clone(),
            },
        ));
    }
    if claimant.role != item.pool.role {
        return Err(claim_refusal(
            id,
            ClaimProblem::NotInPool {
                actor: claimant.name.clone(),
                role: claimant.role.clone(),
                pool: item.pool.clone(),
            },
        ));
    }
    authority::authorize(claimant, Power::Accept, Some(&item.topic))?;
    Ok(Claimed {
        message: item.message.clone(),
        pool: item.pool.clone(),
        by: claimant.name.clone(),
        order: item.order.clone(),
    })
}

/// How urgent an item is, as a key that sorts the most urgent first: an item with a
/// deadline before any without, the sooner deadline first, then the older send.
pub fn urgency(item: &Item) -> (bool, Millis, i64) {
    (
        item.deadline_at.is_none(),
        item.deadline_at.unwrap_or(Millis::MAX),
        item.seq,
    )
}

/// Whether `item` is ready for `claimant` at `now`: open, unclaimed, another's, in its
/// pool, its order's deadline not passed, and on a topic it may take on work on.
pub fn ready_for(item: &Item, claimant: &Participant, now: Millis) -> bool {
    item.open
        && item.claimed_by.is_none()
        && item.from != claimant.name
        && item.pool.role == claimant.role
        && item.deadline_at.is_none_or(|d| now <= d)
        && authority::authorize(claimant, Power::Accept, Some(&item.topic)).is_ok()
}

/// The items among `candidates` ready for `claimant` at `now`, the most urgent first:
/// `next` claims the first of them whose order (if it carries one) is still on offer.
pub fn by_urgency<'a>(
    candidates: &'a [Item],
    claimant: &Participant,
    now: Millis,
) -> Vec<&'a Item> {
    let mut ready: Vec<&Item> = candidates
        .iter()
        .filter(|i| ready_for(i, claimant, now))
        .collect();
    ready.sort_by_key(|i| urgency(i));
    ready
}

#[cfg(test)]
mod tests;
