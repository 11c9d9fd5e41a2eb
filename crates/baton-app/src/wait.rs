//! The one way a use case waits for the store to change: every wait (a receipt, an
//! order's next step) polls here.

use std::future::Future;
use std::time::{Duration, Instant};

use baton_store::Store;

use crate::Result;

pub use baton_store::POLL;

/// Runs `check` at once and again whenever the store's generation moves, until it yields a
/// value or `timeout` passes; `None` at the deadline. `waiting` is called once, when the
/// first check found nothing and the wait is about to block: any commit after that call
/// wakes it (the generation was read before the check). The store says when it moved
/// ([`baton_store::Backend::changed`]): by looking every [`POLL`] on SQLite, by being
/// told of each commit on PostgreSQL.
pub async fn until<T, F, Fut>(
    store: &Store,
    timeout: Duration,
    waiting: impl FnOnce(),
    mut check: F,
) -> Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    // Read before checking: a commit that lands after the check moves it.
    let mut seen = store.generation().await?;
    if let Some(found) = check().await? {
        return Ok(Some(found));
    }
    waiting();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        let generation = store.changed(seen, left).await?;
        if generation > seen {
            seen = generation;
            if let Some(found) = check().await? {
                return Ok(Some(found));
            }
        }
    }
}
