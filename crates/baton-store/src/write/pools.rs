//! The pool writes: a claim of one item, and `next`, which finds the most urgent item
//! ready for the caller and claims it in the same transaction. Both read the item inside
//! the write transaction and ask `baton_core::pool` (and, for an order,
//! `baton_core::order`) whether the claim stands: claimants queue on the write lock, the
//! first finds the item open and takes it, every later one finds it taken and is refused
//! with nothing appended.

use baton_core::authority::{self, Power};
use baton_core::order::{self, Order, OrderChange, OrderStatus};
use baton_core::pool::{self, Item};
use baton_core::{Change, Millis, Passname, Refusal, Topic};

use super::{now, registered};
use crate::{NewEvent, PoolQuery, Result, Store, Tx};

/// What a claim took: the item as it stands after, and the order it carries, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Taken {
    pub item: Item,
    pub order: Option<Order>,
}

impl Store {
    /// Claims for `by` the pool item `message` (a request sent to a pool, or the request
    /// carrying an order offered to one). With `expected_seq`, the order it carries must
    /// still be at that seq: a claimant that read it before another moved it loses.
    pub async fn claim(
        &self,
        by: &Passname,
        message: &str,
        expected_seq: Option<i64>,
    ) -> Result<Taken> {
        self.recorded(by.as_str(), async {
            let mut tx = self.begin().await?;
            let taken = claim_in(tx.as_mut(), by, message, expected_seq, now()).await?;
            tx.commit().await?;
            Ok(taken)
        })
        .await
    }

    /// Claims for `by` the most urgent item ready for it in its role's pool (on `topic`,
    /// when given): refused as `NothingReady` when there is none. The choice and the claim
    /// are one transaction, so two callers never take one item.
    pub async fn next(&self, by: &Passname, topic: Option<&Topic>) -> Result<Taken> {
        self.recorded(by.as_str(), async {
            let mut tx = self.begin().await?;
            let at = now();
            let claimant = registered(tx.as_mut(), by.as_str()).await?;
            // Taking work takes `accept`: one that may take none is refused before it
            // looks (and recorded), not told that nothing is ready.
            authority::authorize(&claimant, Power::Accept, None)?;
            let pool = pool::Pool::of_role(&claimant.role);
            let candidates = tx
                .pool_items(&PoolQuery {
                    pool: Some(pool.clone()),
                    topic: topic.cloned(),
                    open_at: Some(at),
                    ..PoolQuery::default()
                })
                .await?;
            for item in pool::by_urgency(&candidates, &claimant, at) {
                // An order not on offer (one that waits on others) is not ready yet.
                if let Some(id) = &item.order {
                    let order = tx.order(id).await?;
                    if !order.is_some_and(|o| o.status_at(at) == OrderStatus::Offered) {
                        continue;
                    }
                }
                let taken = claim_in(tx.as_mut(), by, &item.message, None, at).await?;
                tx.commit().await?;
                return Ok(taken);
            }
            Err(Refusal::NothingReady {
                actor: by.clone(),
                pool,
                topic: topic.cloned(),
            }
            .into())
        })
        .await
    }
}

/// A claim inside the caller's transaction: the pool's rules, then an order's, then the
/// claim and the order's own change appended.
async fn claim_in(
    tx: &mut dyn Tx,
    by: &Passname,
    message: &str,
    expected_seq: Option<i64>,
    at: Millis,
) -> Result<Taken> {
    let claimant = registered(tx, by.as_str()).await?;
    let query = PoolQuery {
        message: Some(message.to_owned()),
        limit: Some(1),
        ..PoolQuery::default()
    };
    let item = tx.pool_items(&query).await?.pop();
    let shown = item
        .as_ref()
        .and_then(|i| i.order.clone())
        .unwrap_or_else(|| message.to_owned());
    let claimed = pool::plan_claim(item.as_ref(), &shown, &claimant)?;
    let order_claim = match &claimed.order {
        Some(id) => {
            let current = order::found(tx.order(id).await?, id)?;
            Some(order::plan_claim(&current, by, expected_seq, at)?)
        }
        None => None,
    };
    tx.append(NewEvent::new(by.as_str(), Change::Claimed(claimed), at))
        .await?;
    let order = match order_claim {
        Some(claim) => {
            let id = claim.order.clone();
            let change = Change::Order(OrderChange::Claimed(Box::new(claim)));
            tx.append(NewEvent::new(by.as_str(), change, at)).await?;
            Some(order::found(tx.order(&id).await?, &id)?)
        }
        None => None,
    };
    let item = tx
        .pool_items(&query)
        .await?
        .pop()
        .expect("a claimed item stays in its table");
    Ok(Taken { item, order })
}
