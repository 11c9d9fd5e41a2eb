//! Webhooks: one server claims a delivery, and settles it.

use baton_core::MessageType::Request;
use baton_core::Refusal;
use baton_store::{Settled, Store, StoreError};

use crate::{assert_variant, cast, draft, generation, name, send};

/// This family's stories, each run on every backend by `every_backend!` (`main.rs`).
macro_rules! stories {
    ($attrs:tt $backend:ty) => {
        crate::on_backend!($attrs $backend; webhooks;
            stores: [
                a_webhook_is_claimed_by_one_server_and_settled,
            ];
        );
    };
}
pub(crate) use stories;

/// Webhooks: the log is the outbox. A webhook is due when the log moved past its cursor
/// and its backoff ended; one claimer at a time holds it; a settled delivery moves the
/// cursor or schedules the next try.
pub(crate) async fn a_webhook_is_claimed_by_one_server_and_settled(store: &Store) {
    cast(store).await;
    let t0: i64 = 1_900_000_000_000;
    let lease = |t: i64| t + 60_000;
    assert!(store.claim_webhook(t0, lease(t0)).await.unwrap().is_none());
    let before = generation(store).await;
    assert_variant!(
        store
            .set_webhook("@local", &name("exec-1"), Some("ftp://h/"), "s".into())
            .await
            .unwrap_err(),
        StoreError::Refused(Refusal::WebhookUrl { .. })
    );
    assert_variant!(
        store
            .set_webhook("@local", &name("ghost"), Some("http://h/"), "s".into())
            .await
            .unwrap_err(),
        StoreError::Refused(Refusal::UnknownParticipant { .. })
    );
    assert_eq!(generation(store).await, before, "refusals write nothing");
    let hook = store
        .set_webhook(
            "@local",
            &name("exec-1"),
            Some("http://127.0.0.1:9/hook"),
            "s1".into(),
        )
        .await
        .unwrap()
        .expect("a webhook");
    assert_eq!(
        (hook.cursor, hook.set_seq),
        (before + 1, before + 1),
        "it starts now"
    );
    assert!(
        store.claim_webhook(t0, lease(t0)).await.unwrap().is_none(),
        "nothing happened since it was set"
    );

    send(
        store,
        "planner",
        draft(&["exec-1"], Request, "lane", "do it"),
    )
    .await;
    let (a, b) = tokio::join!(
        store.claim_webhook(t0, lease(t0)),
        store.claim_webhook(t0, lease(t0))
    );
    let claims = [a.unwrap(), b.unwrap()];
    assert_eq!(
        claims.iter().flatten().count(),
        1,
        "one claimer holds it: {claims:?}"
    );
    let claimed = claims.into_iter().flatten().next().unwrap();
    assert!(
        store
            .claim_webhook(t0 + 1, lease(t0))
            .await
            .unwrap()
            .is_none(),
        "leased"
    );

    // A failure waits out its backoff; a lease that ran out frees it as well.
    store
        .settle_webhook(
            &claimed,
            Settled::Failed {
                failures: 1,
                next_at: t0 + 1000,
                error: "HTTP 500".into(),
            },
        )
        .await
        .unwrap();
    assert!(
        store
            .claim_webhook(t0 + 999, lease(t0))
            .await
            .unwrap()
            .is_none()
    );
    let again = store
        .claim_webhook(t0 + 1000, lease(t0 + 1000))
        .await
        .unwrap()
        .expect("due after its backoff");
    assert_eq!(
        (again.failures, again.last_error.as_deref()),
        (1, Some("HTTP 500"))
    );
    let head = generation(store).await;
    store
        .settle_webhook(
            &again,
            Settled::Told {
                cursor: head,
                at: t0 + 1001,
            },
        )
        .await
        .unwrap();
    let told = store.webhook("exec-1").await.unwrap().unwrap();
    assert_eq!(
        (
            told.cursor,
            told.failures,
            told.delivered_at,
            told.last_error
        ),
        (head, 0, Some(t0 + 1001), None)
    );
    assert!(
        store
            .claim_webhook(t0 + 2000, lease(t0 + 2000))
            .await
            .unwrap()
            .is_none()
    );

    // Set anew: the cursor stays (what is pending goes to the new URL); a settlement of
    // the old claim no longer applies.
    let moved = store
        .set_webhook(
            "@local",
            &name("exec-1"),
            Some("https://hooks.example/x"),
            "s2".into(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (moved.cursor, moved.url.as_str()),
        (head, "https://hooks.example/x")
    );
    store
        .settle_webhook(&again, Settled::Passed { cursor: head + 99 })
        .await
        .unwrap();
    assert_eq!(store.webhook("exec-1").await.unwrap().unwrap().cursor, head);
    assert_eq!(store.webhooks().await.unwrap().len(), 1);

    // Removed once; removing again writes nothing.
    assert!(
        store
            .set_webhook("@local", &name("exec-1"), None, String::new())
            .await
            .unwrap()
            .is_none()
    );
    let after = generation(store).await;
    store
        .set_webhook("@local", &name("exec-1"), None, String::new())
        .await
        .unwrap();
    assert_eq!(generation(store).await, after);
    assert!(store.webhooks().await.unwrap().is_empty());
}
