//! What both backends share about pools: the query a read or a write transaction asks,
//! the columns an item is read from, and how a row becomes a [`pool::Item`]. The SQL is
//! each backend's own (`sqlite/pools.rs`, `postgres/pools.rs`); the rules, and which
//! item is the most urgent, are `baton_core::pool`'s.

use baton_core::pool::{self, Pool};
use baton_core::{Millis, Passname, Topic};

use crate::decode::{Columns, decode};

/// Which pool items to read, the most urgent first: those with a deadline before those
/// without, the sooner first, then the older send ([`pool::urgency`] says the same of
/// one item; the store story holds the two to it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PoolQuery {
    /// Just this message.
    pub message: Option<String>,
    pub pool: Option<Pool>,
    pub topic: Option<Topic>,
    /// Only those still open at this instant: unclaimed, their request not closed by its
    /// sender, their deadline not passed.
    pub open_at: Option<Millis>,
    /// At most this many (else [`pool::NEXT_PAGE`]).
    pub limit: Option<u32>,
}

/// The columns an item is read from, in the order [`item`] reads them.
pub(crate) const POOL_COLUMNS: &str = "message_id, pool, from_name, topic, order_id, deadline_at, seq, created_at, claimed_by, claimed_at, open";

/// The urgency order, as SQL over the `pool_items` columns.
pub(crate) const URGENCY: &str = "deadline_at IS NULL, deadline_at, seq";

/// An item from a row of [`POOL_COLUMNS`].
pub(crate) fn item(row: &impl Columns) -> sqlx::Result<pool::Item> {
    let pool = row.text("pool")?;
    Ok(pool::Item {
        message: row.text("message_id")?,
        pool: Pool::try_from(pool.clone())
            .map_err(|_| sqlx::Error::Decode(format!("pool {pool:?}").into()))?,
        from: decode(Passname::try_from(row.text("from_name")?))?,
        topic: decode(Topic::try_from(row.text("topic")?))?,
        order: row.maybe_text("order_id")?,
        deadline_at: row.maybe_int("deadline_at")?,
        seq: row.int("seq")?,
        created_at: row.int("created_at")?,
        claimed_by: row
            .maybe_text("claimed_by")?
            .map(|n| decode(Passname::try_from(n)))
            .transpose()?,
        claimed_at: row.maybe_int("claimed_at")?,
        open: row.int("open")? != 0,
    })
}
