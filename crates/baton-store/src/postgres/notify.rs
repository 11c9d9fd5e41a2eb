//! Commits, told: every write transaction that appended events notifies the channel
//! `baton_events` with `PROJECT:SEQ` (delivered when it commits), and one listening
//! connection per database fans those out to the waits in this process. A wait wakes when
//! its project's generation moves, not on a timer; if the listening connection cannot be
//! had, waits fall back to looking every [`crate::POLL`]. Once listening, a lost connection
//! is opened again from the pool, so the listener follows the primary the pool follows
//! (`hosts.rs`) after a failover.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::postgres::{PgListener, PgPool};
use tokio::sync::{OnceCell, broadcast};

/// The channel every project's commits are told on.
pub(super) const CHANNEL: &str = "baton_events";
/// However a notification may be lost (the listening connection reconnecting), a wait
/// also looks at the generation this often.
const SAFETY: Duration = Duration::from_secs(1);

/// The database's one listener, started by the first wait.
#[derive(Debug, Default)]
pub(super) struct Notifier {
    commits: OnceCell<Option<broadcast::Sender<(i64, i64)>>>,
}

impl Notifier {
    /// A receiver of `(project, seq)` commits, or `None` when nothing can listen.
    async fn subscribe(&self, pool: &PgPool) -> Option<broadcast::Receiver<(i64, i64)>> {
        let sender = self
            .commits
            .get_or_init(|| async {
                let mut listener = PgListener::connect_with(pool).await.ok()?;
                listener.listen(CHANNEL).await.ok()?;
                let (sender, _) = broadcast::channel(1024);
                let fan_out = sender.clone();
                tokio::spawn(async move {
                    loop {
                        let notice = match listener.recv().await {
                            Ok(notice) => notice,
                            Err(sqlx::Error::PoolClosed) => return,
                            // No connection now (the server restarting, a failover):
                            // the next `recv` opens one again. Waits look at the
                            // generation meanwhile (`SAFETY`).
                            Err(_) => {
                                tokio::time::sleep(SAFETY).await;
                                continue;
                            }
                        };
                        let told = notice.payload().split_once(':').and_then(|(p, s)| {
                            Some((p.parse::<i64>().ok()?, s.parse::<i64>().ok()?))
                        });
                        if let Some(commit) = told {
                            // No receiver now is fine: nobody waits.
                            let _ = fan_out.send(commit);
                        }
                    }
                });
                Some(sender)
            })
            .await;
        sender.as_ref().map(broadcast::Sender::subscribe)
    }
}

/// Waits until `project`'s generation passes `seen` or `timeout` passes, woken by commits;
/// `generation` reads it. Returns the generation then.
pub(super) async fn changed<F, Fut>(
    notifier: &Arc<Notifier>,
    pool: &PgPool,
    project: i64,
    seen: i64,
    timeout: Duration,
    generation: F,
) -> crate::Result<i64>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = crate::Result<i64>>,
{
    let deadline = Instant::now() + timeout;
    // Subscribe before reading: a commit between the two is not missed.
    let mut commits = notifier.subscribe(pool).await;
    loop {
        let now = generation().await?;
        let left = deadline.saturating_duration_since(Instant::now());
        if now > seen || left.is_zero() {
            return Ok(now);
        }
        let Some(receiver) = commits.as_mut() else {
            tokio::time::sleep(crate::POLL.min(left)).await;
            continue;
        };
        let until = left.min(SAFETY);
        let woke = tokio::time::timeout(until, async {
            loop {
                match receiver.recv().await {
                    Ok((p, seq)) if p == project && seq > seen => return,
                    Ok(_) => continue,
                    // Missed some: look at the generation.
                    Err(broadcast::error::RecvError::Lagged(_)) => return,
                    Err(broadcast::error::RecvError::Closed) => {
                        std::future::pending::<()>().await;
                    }
                }
            }
        })
        .await;
        if woke.is_err() && commits.as_ref().is_some_and(|r| r.is_closed()) {
            commits = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backend, Store};
    use baton_core::{Draft, MessageType, Passname, Payload, Topic};

    /// A commit is told on the channel, with its project and seq: waits wake on it.
    #[tokio::test]
    #[cfg_attr(
        not(baton_test_postgres),
        ignore = "PostgreSQL not found: apt-get install postgresql, or set BATON_TEST_POSTGRES"
    )]
    async fn a_commit_is_told_to_the_listener() {
        let (store, schema) = crate::postgres::tests::test_store("notify").await;
        let mut commits = store
            .notifier
            .subscribe(&store.pool)
            .await
            .expect("a listening connection");
        let writes = Store::new(store.clone());
        for who in ["planner", "impl-1"] {
            writes
                .add_participant("@test", &Passname::new(who).unwrap(), "x", None)
                .await
                .unwrap();
        }
        let draft = Draft {
            to: vec![Passname::new("impl-1").unwrap()],
            kind: MessageType::Info,
            topic: Topic::new("t").unwrap(),
            reply_to: None,
            payload: Payload::body("hi", 1024).unwrap(),
            idempotency_key: None,
        };
        writes
            .send(&Passname::new("planner").unwrap(), draft, 0)
            .await
            .unwrap();
        let generation = store.generation().await.unwrap();
        let mut told = Vec::new();
        while told.last().map(|(_, s)| *s) != Some(generation) {
            let commit = tokio::time::timeout(Duration::from_secs(10), commits.recv())
                .await
                .expect("told within 10 s")
                .unwrap();
            told.push(commit);
        }
        assert!(told.iter().all(|(p, _)| *p == store.project), "{told:?}");
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
            .execute(&store.pool)
            .await;
    }
}
