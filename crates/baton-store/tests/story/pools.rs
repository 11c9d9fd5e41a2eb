//! Pools: requests and orders sent to a role, claimed by exactly one of its holders; `next`
//! takes the most urgent ready item; what a claim refuses, and that it writes nothing then.

use std::future::Future;

use baton_core::MessageType::{Info, Request};
use baton_core::order::{OrderRequest, OrderStatus};
use baton_core::pool::{AddressProblem, ClaimProblem, Pool};
use baton_core::{DeliveryStatus, Refusal, RequestStatus, Verb};
use baton_store::{DEFAULT_BUSY_TIMEOUT, PoolQuery, Store, StoreError, Taken};

use crate::orders::{FAR, order_doc, topic};
use crate::{Backend, assert_variant, cast, draft, name, now_ms, refused};

/// This family's stories, run on each backend by `every_backend!` in `main.rs`.
macro_rules! stories {
    ($attrs:tt $backend:ty) => {
        crate::on_backend!($attrs $backend; pools;
            stores: [
                a_request_in_a_pool_is_claimed_once_and_is_then_its_claimants,
                a_pool_refuses_what_is_not_its_own,
                a_pool_send_repeats_only_to_the_same_pool,
                an_order_in_a_pool_becomes_its_claimants_to_accept,
                next_takes_the_most_urgent_ready_item,
                sixteen_claimants_one_item_one_wins,
            ];
            backends: [
                pools_replay_to_the_same_rows,
            ];
        );
    };
}
pub(crate) use stories;

fn executors() -> Option<Pool> {
    Some(Pool::of_role("executor"))
}

/// Sends a request on `topic` to the executors' pool; its message id.
async fn pooled(store: &Store, on: &str, body: &str) -> String {
    let sent = store
        .send_to(
            &name("planner"),
            executors().as_ref(),
            draft(&[], Request, on, body),
            0,
        )
        .await
        .expect("a send to the pool");
    sent.id
}

/// The open items of the executors' pool, by message id, the most urgent first.
async fn waiting(store: &Store) -> Vec<String> {
    store
        .pool_items(&PoolQuery {
            pool: executors(),
            open_at: Some(now_ms()),
            ..PoolQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.message)
        .collect()
}

/// Story: a request sent to a role's pool has no recipient until one holder claims it;
/// then it is that holder's like anything sent to it, and every later claim is refused
/// with nothing written.
pub(crate) async fn a_request_in_a_pool_is_claimed_once_and_is_then_its_claimants(store: &Store) {
    cast(store).await;
    let id = pooled(store, "billing", "fix invoice rounding").await;
    let env = crate::envelope(store, &id).await;
    assert!(env.to.is_empty(), "nobody's until claimed: {env:?}");
    assert_eq!(env.pool, executors());
    assert_eq!(waiting(store).await, std::slice::from_ref(&id));
    let owed = |who: &'static str| async move {
        store
            .owed(&name(who), 10)
            .await
            .unwrap()
            .0
            .iter()
            .map(|e| e.id.clone())
            .collect::<Vec<_>>()
    };
    assert!(owed("exec-1").await.is_empty());

    let Taken { item, order } = store.claim(&name("exec-1"), &id, None).await.unwrap();
    assert_eq!(item.claimed_by, Some(name("exec-1")));
    assert!(!item.open && order.is_none());
    assert_eq!(owed("exec-1").await, std::slice::from_ref(&id));
    assert!(owed("exec-2").await.is_empty());
    assert!(waiting(store).await.is_empty());
    assert_eq!(
        crate::status(store, &id, "exec-1").await,
        Some(DeliveryStatus::Pending)
    );

    // The loser is refused, retryably, naming the winner; nothing is written.
    let lost = assert_variant!(
        refused(store, store.claim(&name("exec-2"), &id, None)).await,
        StoreError::Refused(Refusal::Claim {
            problem: ClaimProblem::Taken { .. },
            ..
        })
    );
    assert!(lost.is_retryable(), "{lost}");

    // The claimant takes its steps as any recipient does.
    store.fetch(Some(&name("exec-1")), &id).await.unwrap();
    store
        .step(&name("exec-1"), &id, Verb::Complete, Some("done"))
        .await
        .unwrap();
    assert_eq!(
        crate::status(store, &id, "exec-1").await,
        Some(DeliveryStatus::Completed)
    );
}

/// Story: a pool send repeated within the window returns the original; the same words to
/// another pool are a send of their own.
pub(crate) async fn a_pool_send_repeats_only_to_the_same_pool(store: &Store) {
    cast(store).await;
    store
        .add_participant("@local", &name("rev"), "reviewer", None)
        .await
        .unwrap();
    let send = |pool: &'static str| async move {
        store
            .send_to(
                &name("planner"),
                Some(&Pool::of_role(pool)),
                draft(&[], Request, "billing", "same words"),
                crate::WINDOW,
            )
            .await
            .unwrap()
    };
    let first = send("executor").await;
    let again = send("executor").await;
    assert!(again.duplicate && again.id == first.id, "{again:?}");
    let elsewhere = send("reviewer").await;
    assert!(
        !elsewhere.duplicate && elsewhere.id != first.id,
        "{elsewhere:?}"
    );
}

/// Story: what a pool refuses at the send and at the claim, each writing nothing.
pub(crate) async fn a_pool_refuses_what_is_not_its_own(store: &Store) {
    cast(store).await;
    let nobody = Pool::of_role("nobody");
    let err = refused(
        store,
        store.send_to(
            &name("planner"),
            Some(&nobody),
            draft(&[], Request, "billing", "x"),
            0,
        ),
    )
    .await;
    assert_variant!(
        err,
        StoreError::Refused(Refusal::PoolAddress {
            problem: AddressProblem::UnknownRole { .. },
            ..
        })
    );
    assert_variant!(
        refused(
            store,
            store.send_to(
                &name("planner"),
                executors().as_ref(),
                draft(&[], Info, "billing", "x"),
                0,
            )
        )
        .await,
        StoreError::Refused(Refusal::PoolAddress {
            problem: AddressProblem::NotARequest { .. },
            ..
        })
    );
    assert_variant!(
        refused(
            store,
            store.send_to(
                &name("planner"),
                executors().as_ref(),
                draft(&["exec-1"], Request, "billing", "x"),
                0,
            )
        )
        .await,
        StoreError::Refused(Refusal::PoolAddress {
            problem: AddressProblem::NotAlone,
            ..
        })
    );
    let id = pooled(store, "billing", "x").await;
    // Its sender may not take its own work.
    assert_variant!(
        refused(store, store.claim(&name("planner"), &id, None)).await,
        StoreError::Refused(Refusal::Claim {
            problem: ClaimProblem::Own { .. },
            ..
        })
    );
    // Not the claimant's role: forbidden, and recorded as such.
    assert_variant!(
        refused(store, store.claim(&name("observer"), &id, None)).await,
        StoreError::Refused(Refusal::Claim {
            problem: ClaimProblem::NotInPool { .. },
            ..
        })
    );
    // A message sent to someone is no pool's.
    let direct = crate::send(
        store,
        "planner",
        draft(&["exec-1"], Request, "billing", "y"),
    )
    .await;
    assert_variant!(
        refused(store, store.claim(&name("exec-2"), &direct, None)).await,
        StoreError::Refused(Refusal::Claim {
            problem: ClaimProblem::NotPooled,
            ..
        })
    );
    // Withdrawn by its sender: closed, and out of the pool.
    store
        .step(&name("planner"), &id, Verb::Complete, None)
        .await
        .unwrap();
    assert!(waiting(store).await.is_empty());
    assert_variant!(
        refused(store, store.claim(&name("exec-1"), &id, None)).await,
        StoreError::Refused(Refusal::Claim {
            problem: ClaimProblem::Closed,
            ..
        })
    );
    assert_eq!(
        crate::envelope(store, &id).await.request_status,
        Some(RequestStatus::Completed)
    );
    // An order cancelled while in its pool leaves it, and its sender's end closes.
    let offered = store
        .create_order(
            &name("planner"),
            topic("csv"),
            order_doc("wo_gone", "planner", "role:executor", FAR),
        )
        .await
        .unwrap();
    store
        .order_step(
            &name("planner"),
            "wo_gone",
            1,
            OrderRequest::Cancel { reason: None },
        )
        .await
        .unwrap();
    assert!(waiting(store).await.is_empty());
    assert_eq!(
        crate::envelope(store, &offered.order.message)
            .await
            .request_status,
        Some(RequestStatus::Completed)
    );
    assert_variant!(
        refused(
            store,
            store.claim(&name("exec-1"), &offered.order.message, None)
        )
        .await,
        StoreError::Refused(Refusal::Claim {
            problem: ClaimProblem::Closed,
            ..
        })
    );
    // Nothing is ready now.
    assert_variant!(
        refused(store, store.next(&name("exec-1"), None)).await,
        StoreError::Refused(Refusal::NothingReady { .. })
    );
    // One that may take no work is refused before it looks, and recorded.
    assert_variant!(
        refused(store, store.next(&name("observer"), None)).await,
        StoreError::Refused(Refusal::Beyond { .. })
    );
}

/// Story: an order offered to a pool is claimed at the seq its claimant read; the
/// claimant is its worker from then, and a claim from a stale view loses.
pub(crate) async fn an_order_in_a_pool_becomes_its_claimants_to_accept(store: &Store) {
    cast(store).await;
    let planner = name("planner");
    let written = store
        .create_order(
            &planner,
            topic("csv"),
            order_doc("wo_1", "planner", "role:executor", FAR),
        )
        .await
        .unwrap();
    assert_eq!(written.order.to, "role:executor");
    // Nobody's to accept until claimed.
    assert_variant!(
        refused(
            store,
            store.order_step(&name("exec-1"), "wo_1", 1, OrderRequest::Accept)
        )
        .await,
        StoreError::Refused(Refusal::Unclaimed { .. })
    );
    let taken = store
        .claim(&name("exec-2"), &written.order.message, Some(1))
        .await
        .unwrap();
    let order = taken.order.expect("the order it carries");
    assert_eq!(
        (order.to.as_str(), order.seq, order.status),
        ("exec-2", 2, OrderStatus::Offered)
    );
    assert_eq!(taken.item.order.as_deref(), Some("wo_1"));
    // A claim from the view at seq 1 loses to it.
    assert_variant!(
        refused(
            store,
            store.claim(&name("exec-1"), &written.order.message, Some(1))
        )
        .await,
        StoreError::Refused(Refusal::Claim {
            problem: ClaimProblem::Taken { .. },
            ..
        })
    );
    store
        .order_step(&name("exec-2"), "wo_1", 2, OrderRequest::Accept)
        .await
        .unwrap();
    let listed = store
        .orders(&baton_store::OrderQuery {
            party: Some("exec-2".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 1, "its worker's list holds it");
    assert_eq!(
        crate::status(store, &written.order.message, "exec-2").await,
        Some(DeliveryStatus::Delivered),
        "the carrying request follows the order"
    );
}

/// Story: `next` takes the soonest deadline first, then the oldest, skipping what the
/// caller may not take, and the store's order is the core's.
pub(crate) async fn next_takes_the_most_urgent_ready_item(store: &Store) {
    cast(store).await;
    let planner = name("planner");
    let plain = pooled(store, "billing", "no deadline, oldest").await;
    for (id, deadline) in [
        ("wo_late", "2998-01-01T00:00:00Z"),
        ("wo_soon", "2997-01-01T00:00:00Z"),
    ] {
        store
            .create_order(
                &planner,
                topic("csv"),
                order_doc(id, "planner", "role:executor", deadline),
            )
            .await
            .unwrap();
    }
    let items = store
        .pool_items(&PoolQuery {
            pool: executors(),
            open_at: Some(now_ms()),
            ..PoolQuery::default()
        })
        .await
        .unwrap();
    let mut by_core = items.clone();
    by_core.sort_by_key(baton_core::pool::urgency);
    assert_eq!(
        items, by_core,
        "the store lists in the core's urgency order"
    );

    let first = store.next(&name("exec-1"), None).await.unwrap();
    assert_eq!(first.item.order.as_deref(), Some("wo_soon"));
    // A topic narrows it.
    let on_billing = store
        .next(&name("exec-2"), Some(&topic("billing")))
        .await
        .unwrap();
    assert_eq!(on_billing.item.message, plain);
    let last = store.next(&name("exec-2"), None).await.unwrap();
    assert_eq!(last.item.order.as_deref(), Some("wo_late"));
    assert_variant!(
        refused(store, store.next(&name("exec-1"), None)).await,
        StoreError::Refused(Refusal::NothingReady { .. })
    );
}

/// Story: sixteen claimants racing `next` for one item and `claim` for another: each time
/// exactly one gets it, and every other is refused having written nothing.
pub(crate) async fn sixteen_claimants_one_item_one_wins(store: &Store) {
    cast(store).await;
    let names: Vec<_> = (0..16).map(|n| name(&format!("w-{n}"))).collect();
    for who in &names {
        store
            .add_participant("@local", who, "executor", None)
            .await
            .unwrap();
    }
    for round in 0..3 {
        let id = pooled(store, "billing", &format!("round {round}")).await;
        let before = crate::generation(store).await;
        let claims: Vec<_> = names
            .iter()
            .map(|who| Box::pin(store.claim(who, &id, None)))
            .collect();
        let results = all(claims).await;
        let winners = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(winners, 1, "round {round}: {results:?}");
        assert!(results.iter().all(|r| match r {
            Ok(_) => true,
            Err(StoreError::Refused(r)) => r.is_retryable(),
            Err(_) => false,
        }));
        assert_eq!(
            crate::generation(store).await,
            before + 1,
            "one claim written"
        );
    }
    let id = pooled(store, "billing", "for next").await;
    let nexts: Vec<_> = names
        .iter()
        .map(|who| Box::pin(store.next(who, None)))
        .collect();
    let results = all(nexts).await;
    let won: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(won.len(), 1, "{results:?}");
    assert_eq!(won[0].item.message, id);
    assert!(
        results
            .iter()
            .filter_map(|r| r.as_ref().err())
            .all(|e| matches!(e, StoreError::Refused(Refusal::NothingReady { .. })))
    );
}

/// Polls every future until each is done, all interleaved on one task.
async fn all<T, F: Future<Output = T> + Unpin>(mut racing: Vec<F>) -> Vec<T> {
    let mut done: Vec<Option<T>> = racing.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in racing.iter_mut().enumerate() {
            if done[i].is_none() {
                match std::pin::Pin::new(&mut *f).poll(cx) {
                    std::task::Poll::Ready(r) => done[i] = Some(r),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    done.into_iter().map(Option::unwrap).collect()
}

/// Story: the pool's rows a rebuild replays, or an import of the log makes, are the ones
/// the live writes made.
pub(crate) async fn pools_replay_to_the_same_rows<B: Backend>() {
    let backend = B::fresh(DEFAULT_BUSY_TIMEOUT).await;
    let store = backend.store();
    an_order_in_a_pool_becomes_its_claimants_to_accept(store).await;
    pooled(store, "billing", "still open").await;
    let live = backend.projection_dump().await;
    assert_eq!(
        live.iter().filter(|r| r.starts_with("q|")).count(),
        2,
        "{live:?}"
    );
    backend.rebuild_projections().await;
    assert_eq!(backend.projection_dump().await, live);
    // The log carried to a fresh store (export, import) gives the same rows there.
    let log = store.events(0, 10_000).await.unwrap();
    let lines = log
        .into_iter()
        .enumerate()
        .map(|(i, e)| (i + 1, e))
        .collect();
    let carried = B::fresh(DEFAULT_BUSY_TIMEOUT).await;
    carried
        .store()
        .import(lines, false, baton_core::message::DEFAULT_PAYLOAD_CAP)
        .await
        .expect("the log imports whole");
    assert_eq!(carried.projection_dump().await, live);
}
