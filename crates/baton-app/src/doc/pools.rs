//! The pool documents: an item as every list shows it, what a claim (or `next`) took, and
//! what waits in a pool.

use baton_core::pool::Item;
use baton_core::time::rfc3339;
use baton_core::{Millis, Passname};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::OrderRow;

/// One item of a pool.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PoolRow {
    /// The request's message id.
    pub message: String,
    /// `role:ROLE`.
    pub pool: String,
    pub from: Passname,
    pub topic: String,
    pub excerpt: String,
    /// The order it carries, if any.
    pub order: Option<String>,
    pub deadline: Option<String>,
    pub created_at: String,
    pub claimed_by: Option<Passname>,
    pub claimed_at: Option<String>,
}

impl PoolRow {
    pub fn new(item: &Item, excerpt: String) -> Self {
        Self {
            message: item.message.clone(),
            pool: item.pool.to_string(),
            from: item.from.clone(),
            topic: item.topic.to_string(),
            excerpt,
            order: item.order.clone(),
            deadline: item.deadline_at.map(rfc3339),
            created_at: rfc3339(item.created_at),
            claimed_by: item.claimed_by.clone(),
            claimed_at: item.claimed_at.map(rfc3339),
        }
    }
}

/// What `baton next` and `baton claim` print: the item now the caller's, and the order it
/// carries (its worker now the caller, at its new seq).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Claimed {
    pub item: PoolRow,
    pub order: Option<OrderRow>,
}
doc!(Claimed, "baton/claimed@1");

impl Claimed {
    pub fn new(taken: &baton_store::Taken, excerpt: String, now: Millis) -> Self {
        Self {
            item: PoolRow::new(&taken.item, excerpt),
            order: taken.order.as_ref().map(|o| OrderRow::new(o, now)),
        }
    }
}

/// What `baton pool` prints: the items ready in a pool, the most urgent first.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PoolItems {
    pub pool: String,
    pub items: Vec<PoolRow>,
}
doc!(PoolItems, "baton/pool@1");

/// What waits unclaimed in every pool, the most urgent first: the status's section.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct PoolsWaiting {
    pub items: Vec<PoolRow>,
    /// More wait than the list holds: `baton pool --role ROLE` lists a pool's.
    pub more: bool,
}
