//! Pools: a claim of one item sent to a role's pool, `next` (the most urgent item ready
//! for the caller, claimed), and what waits in a pool. The rules — who may claim, which
//! item is the most urgent — are `baton_core::pool`'s; the claim is the store's one
//! transaction.

use baton_core::order::OrderStatus;
use baton_core::pool::{self, Pool};
use baton_core::{Field, Passname, Record, Refusal, Topic};
use baton_store::{PoolQuery, Taken};

use crate::doc::{Claimed, PoolItems, PoolRow, PoolsWaiting};
use crate::{App, Result};

/// The most items a pool's list shows.
pub const POOL_PAGE: u32 = 100;

/// The most items the status shows waiting in pools.
pub const STATUS_POOL_ITEMS: usize = 50;

fn topic(text: Option<&str>) -> Result<Option<Topic>> {
    text.map(|t| {
        Topic::new(t).map_err(|error| {
            Refusal::Name {
                field: Field::Topic,
                error,
            }
            .into()
        })
    })
    .transpose()
}

/// The resume packet's lines for `me`: what waits ready for it in its role's pool, the
/// most urgent first (what `baton next` would claim first).
pub(crate) async fn packet_lines(
    store: &baton_store::Store,
    me: &Passname,
    now: baton_core::Millis,
) -> Result<Vec<String>> {
    let Some(p) = store.participant(me.as_str()).await? else {
        return Ok(Vec::new());
    };
    let items = store
        .pool_items(&PoolQuery {
            pool: Some(Pool::of_role(&p.role)),
            open_at: Some(now),
            limit: Some(POOL_PAGE),
            ..PoolQuery::default()
        })
        .await?;
    let items = on_offer(store, items, now).await?;
    Ok(items
        .iter()
        .filter(|i| pool::ready_for(i, &p, now))
        .map(|i| {
            let id = i.order.as_deref().unwrap_or(&i.message);
            let due = i.deadline_at.map_or_else(String::new, |d| {
                format!(", due {}", baton_core::time::rfc3339(d))
            });
            format!("{id} ({}, {}, from {}{due})", i.pool, i.topic, i.from)
        })
        .collect())
}

/// Puts the pool's section after the reservations' (or at the end).
pub(crate) fn packet_section(sections: &mut Vec<baton_core::packet::Section>, ready: &[String]) {
    use baton_core::packet::Section;
    let at = sections
        .iter()
        .position(|s| s.title == "Blocked by others' reservations")
        .map_or(sections.len(), |i| i + 1);
    sections.insert(
        at,
        Section::of(
            "Ready in my role's pool (baton next claims the first)",
            ready.to_vec(),
            "baton pool",
            None,
        ),
    );
}

/// `items` less those carrying an order not on offer at `now` (one that waits on others,
/// or ended): they are not ready, though still in their pool.
async fn on_offer(
    store: &baton_store::Store,
    items: Vec<pool::Item>,
    now: baton_core::Millis,
) -> Result<Vec<pool::Item>> {
    let mut kept = Vec::with_capacity(items.len());
    for item in items {
        if let Some(id) = &item.order {
            let order = store.order(id).await?;
            if !order.is_some_and(|o| o.status_at(now) == OrderStatus::Offered) {
                continue;
            }
        }
        kept.push(item);
    }
    Ok(kept)
}

impl App {
    /// Claims for `me` the order or request `id` (an order's id, or the message id, or a
    /// prefix of either) sent to its role's pool.
    pub async fn claim(&self, me: &Passname, id: &str, expect_seq: Option<i64>) -> Result<Claimed> {
        let order = match self.resolve(Record::Order, id).await {
            Ok(order) => self.store().order(&order).await?,
            Err(_) => None,
        };
        let message = match order {
            Some(order) => order.message,
            None => self.resolve(Record::Message, id).await?,
        };
        let taken = self.store().claim(me, &message, expect_seq).await?;
        self.claimed(&taken).await
    }

    /// Claims for `me` the most urgent item ready for it in its role's pool (on `topic`).
    pub async fn next(&self, me: &Passname, on: Option<&str>) -> Result<Claimed> {
        let topic = topic(on)?;
        let taken = self.store().next(me, topic.as_ref()).await?;
        self.claimed(&taken).await
    }

    /// What waits unclaimed in `role`'s pool (`me`'s own role's when none is named), on
    /// `topic` when given, the most urgent first.
    pub async fn pool(
        &self,
        me: &Passname,
        role: Option<&str>,
        on: Option<&str>,
    ) -> Result<PoolItems> {
        let topic = topic(on)?;
        let pool = match role {
            Some(role) => Pool::of_role(role.trim()),
            None => {
                let p = self
                    .store()
                    .participant(me.as_str())
                    .await?
                    .ok_or_else(|| Refusal::UnknownParticipant {
                        name: me.to_string(),
                    })?;
                Pool::of_role(&p.role)
            }
        };
        let items = self
            .store()
            .pool_items(&PoolQuery {
                pool: Some(pool.clone()),
                topic,
                open_at: Some(self.now()),
                limit: Some(POOL_PAGE),
                ..PoolQuery::default()
            })
            .await?;
        let items = on_offer(self.store(), items, self.now()).await?;
        let mut rows = Vec::with_capacity(items.len());
        for item in &items {
            rows.push(PoolRow::new(item, self.excerpt(&item.message).await?));
        }
        Ok(PoolItems {
            pool: pool.to_string(),
            items: rows,
        })
    }

    /// What waits unclaimed in every pool at `now`, the most urgent first: the status's.
    pub(crate) async fn pools_waiting(&self, now: baton_core::Millis) -> Result<PoolsWaiting> {
        let items = self
            .store()
            .pool_items(&PoolQuery {
                open_at: Some(now),
                limit: Some(STATUS_POOL_ITEMS as u32 + 1),
                ..PoolQuery::default()
            })
            .await?;
        let mut items = on_offer(self.store(), items, now).await?;
        let more = items.len() > STATUS_POOL_ITEMS;
        items.truncate(STATUS_POOL_ITEMS);
        let mut rows = Vec::with_capacity(items.len());
        for item in &items {
            rows.push(PoolRow::new(item, self.excerpt(&item.message).await?));
        }
        Ok(PoolsWaiting { items: rows, more })
    }

    async fn excerpt(&self, message: &str) -> Result<String> {
        Ok(self
            .store()
            .message(message)
            .await?
            .map(|(env, _)| env.excerpt)
            .unwrap_or_default())
    }

    async fn claimed(&self, taken: &Taken) -> Result<Claimed> {
        let excerpt = self.excerpt(&taken.item.message).await?;
        Ok(Claimed::new(taken, excerpt, self.now()))
    }
}
