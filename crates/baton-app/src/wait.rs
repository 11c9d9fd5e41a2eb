//! The one way a use case waits for the store to change: every wait (a receipt, an
//! order's next step) polls here.

use std::future::Future;
use std::time::{Duration, Instant};

use baton_store::Store;

use crate::Result;

/// How often a wait looks at the store's generation (one cheap query); it reads more only
/// when the generation moved. SQLite has no change notification to wait on.
pub const POLL: Duration = Duration::from_millis(50);

/// Runs `check` whenever the store's generation moves (and once at the start) until it
/// yields a value or `timeout` passes; `None` at the deadline.
pub async fn until<T, F, Fut>(
    store: &dyn Store,
    timeout: Duration,
    mut check: F,
) -> Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    let mut seen = -1;
    loop {
        let generation = store.generation().await?;
        if generation != seen {
            seen = generation;
            if let Some(found) = check().await? {
                return Ok(Some(found));
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(POLL.min(deadline - now)).await;
    }
}
