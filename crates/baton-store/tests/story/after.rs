//! Orders that wait on orders: an order naming others in its contract's `after` waits,
//! out of its worker's inbox, until each is approved; one that ends unapproved holds it
//! and tells its sender, who proceeds or cancels; what it names must be this project's
//! and still able to be approved; the edges rebuild from the log.

use baton_core::MessageType::Info;
use baton_core::after::{Problem, Wait};
use baton_core::message::DEFAULT_PAYLOAD_CAP;
use baton_core::order::{OrderRequest, OrderStatus};
use baton_core::pool::Pool;
use baton_core::{Payload, Refusal};
use baton_store::{DEFAULT_BUSY_TIMEOUT, OrderQuery, PoolQuery, Store, StoreError, Window};

use crate::orders::{FAR, order_doc, report_of, topic};
use crate::{Backend, cast, ids, name, refused};

/// This family's stories, each run on every backend by `every_backend!` (`main.rs`).
macro_rules! stories {
    ($attrs:tt $backend:ty) => {
        crate::on_backend!($attrs $backend; after;
            stores: [
                an_order_is_offered_once_every_order_it_waits_on_is_approved,
                an_after_naming_what_cannot_be_waited_on_is_refused,
                an_order_waited_on_that_ends_unapproved_holds_and_tells_the_sender,
                a_pooled_order_is_open_to_claim_once_it_is_offered,
            ];
            backends: [
                waits_replay_to_the_same_rows,
            ];
        );
    };
}
pub(crate) use stories;

/// An order from the planner to `to` that waits on `after`.
fn waiting_doc(id: &str, to: &str, after: &[&str]) -> Payload {
    let mut doc = serde_json::Value::Object(order_doc(id, "planner", to, FAR).object().clone());
    doc["x-baton"]["after"] = after.iter().map(|a| (*a).to_owned()).collect();
    Payload::from_value(doc, DEFAULT_PAYLOAD_CAP).expect("a valid payload")
}

async fn offer(store: &Store, id: &str, to: &str, after: &[&str]) -> OrderStatus {
    store
        .create_order(&name("planner"), topic("csv"), waiting_doc(id, to, after))
        .await
        .unwrap_or_else(|e| panic!("offering {id}: {e}"))
        .order
        .status
}

async fn status(store: &Store, id: &str) -> OrderStatus {
    store.order(id).await.unwrap().expect("the order").status
}

async fn step(store: &Store, who: &str, id: &str, request: OrderRequest) -> OrderStatus {
    let seq = store.order(id).await.unwrap().expect("the order").seq;
    store
        .order_step(&name(who), id, seq, request)
        .await
        .unwrap_or_else(|e| panic!("{who} on {id}: {e}"))
        .order
        .status
}

/// Approves `id`, which `worker` takes from offered to submitted first.
async fn approve(store: &Store, worker: &str, id: &str) {
    step(store, worker, id, OrderRequest::Accept).await;
    step(store, worker, id, report_of(worker, "done")).await;
    assert_eq!(
        step(store, "planner", id, OrderRequest::Approve).await,
        OrderStatus::Approved
    );
}

async fn inbox(store: &Store, who: &str) -> Vec<String> {
    ids(&store
        .inbox(&name(who), false, &Window::EVERYTHING)
        .await
        .unwrap())
}

async fn ready(store: &Store) -> Vec<String> {
    let query = OrderQuery {
        only: vec![OrderStatus::Offered],
        ..OrderQuery::default()
    };
    store
        .orders(&query)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.id)
        .collect()
}

/// An order waiting on two is out of its worker's inbox and not ready; its worker's accept
/// is refused naming what it waits on; the first approval leaves it waiting, the second
/// offers it, in the approving step's transaction.
pub(crate) async fn an_order_is_offered_once_every_order_it_waits_on_is_approved(store: &Store) {
    cast(store).await;
    assert_eq!(
        offer(store, "wo_1", "exec-1", &[]).await,
        OrderStatus::Offered
    );
    assert_eq!(
        offer(store, "wo_2", "exec-1", &[]).await,
        OrderStatus::Offered
    );
    assert_eq!(
        offer(store, "wo_3", "exec-2", &["wo_1", "wo_2"]).await,
        OrderStatus::Waiting
    );
    assert!(inbox(store, "exec-2").await.is_empty(), "not offered yet");
    assert_eq!(ready(store).await, ["wo_1", "wo_2"]);
    let waits = store.waits(&["wo_3".to_owned()]).await.unwrap();
    let on: Vec<&str> = waits.iter().map(|(_, o)| o.id.as_str()).collect();
    assert_eq!(on, ["wo_1", "wo_2"]);
    let err = refused(
        store,
        store.order_step(&name("exec-2"), "wo_3", 1, OrderRequest::Accept),
    )
    .await;
    let StoreError::Refused(Refusal::Waits { order, held, on }) = err else {
        panic!("{err:?}")
    };
    assert_eq!((order.as_str(), held), ("wo_3", false));
    assert_eq!(
        on,
        [
            Wait {
                order: "wo_1".into(),
                status: OrderStatus::Offered
            },
            Wait {
                order: "wo_2".into(),
                status: OrderStatus::Offered
            }
        ]
    );

    approve(store, "exec-1", "wo_1").await;
    assert_eq!(status(store, "wo_3").await, OrderStatus::Waiting);
    approve(store, "exec-1", "wo_2").await;
    let offered = store.order("wo_3").await.unwrap().unwrap();
    assert_eq!((offered.status, offered.seq), (OrderStatus::Offered, 2));
    assert_eq!(
        inbox(store, "exec-2").await,
        std::slice::from_ref(&offered.message)
    );
    assert_eq!(ready(store).await, ["wo_3"]);
    assert!(store.waits(&["wo_3".to_owned()]).await.unwrap().is_empty());
    assert_eq!(
        step(store, "exec-2", "wo_3", OrderRequest::Accept).await,
        OrderStatus::Accepted
    );
    // An order naming only approved orders is offered at once.
    assert_eq!(
        offer(store, "wo_4", "exec-2", &["wo_1"]).await,
        OrderStatus::Offered
    );
}

/// What `after` names must be an order of this project that may still be approved, not
/// the order itself: each refused naming the entry, with nothing stored.
pub(crate) async fn an_after_naming_what_cannot_be_waited_on_is_refused(store: &Store) {
    cast(store).await;
    offer(store, "wo_1", "exec-1", &[]).await;
    step(
        store,
        "exec-1",
        "wo_1",
        OrderRequest::Decline { reason: None },
    )
    .await;
    offer(store, "wo_2", "exec-1", &[]).await;
    for (after, index, problem) in [
        (&["wo_2", "wo_9"][..], 1, Problem::Unknown),
        (&["wo_1"][..], 0, Problem::Ended(OrderStatus::Declined)),
        (&["wo_5"][..], 0, Problem::Itself),
        (&["wo_2", "wo_2"][..], 1, Problem::Repeated),
    ] {
        let err = refused(
            store,
            store.create_order(
                &name("planner"),
                topic("csv"),
                waiting_doc("wo_5", "exec-2", after),
            ),
        )
        .await;
        let StoreError::Refused(Refusal::After {
            index: i,
            problem: p,
            ..
        }) = err
        else {
            panic!("{after:?}: {err:?}")
        };
        assert_eq!((i, p), (index, problem), "{after:?}");
    }
    assert!(store.order("wo_5").await.unwrap().is_none());
}

/// A dependency declined holds what waits on it and tells its sender in an `info`; the
/// worker is refused, told it is held; the sender proceeds without it and the order is
/// offered. One the sender cancels itself holds what waits on it, untold.
pub(crate) async fn an_order_waited_on_that_ends_unapproved_holds_and_tells_the_sender(
    store: &Store,
) {
    cast(store).await;
    offer(store, "wo_1", "exec-1", &[]).await;
    offer(store, "wo_2", "exec-1", &[]).await;
    offer(store, "wo_3", "exec-2", &["wo_1", "wo_2"]).await;
    let before = inbox(store, "planner").await.len();
    step(
        store,
        "exec-1",
        "wo_1",
        OrderRequest::Decline {
            reason: Some("no access".into()),
        },
    )
    .await;
    let held = store.order("wo_3").await.unwrap().unwrap();
    assert_eq!((held.status, held.seq), (OrderStatus::Held, 2));
    let told = store
        .inbox(&name("planner"), false, &Window::EVERYTHING)
        .await
        .unwrap();
    assert_eq!(told.len(), before + 1, "the sender is told");
    let notice = told.last().unwrap();
    assert_eq!(notice.kind, Info);
    let text = store.fetch(None, &notice.id).await.unwrap().payload["body"].clone();
    assert!(
        text.as_str().unwrap().contains("wo_3") && text.as_str().unwrap().contains("declined"),
        "{text}"
    );
    assert!(
        inbox(store, "exec-2").await.is_empty(),
        "held is not offered"
    );
    let err = refused(
        store,
        store.order_step(&name("exec-2"), "wo_3", 2, OrderRequest::Accept),
    )
    .await;
    assert!(
        matches!(err, StoreError::Refused(Refusal::Waits { held: true, .. })),
        "{err:?}"
    );
    // Proceeding drops wo_1 and waits on wo_2 still.
    let proceed = || OrderRequest::Proceed { after: vec![] };
    assert_eq!(
        step(store, "planner", "wo_3", proceed()).await,
        OrderStatus::Waiting
    );
    let waits = store.waits(&["wo_3".to_owned()]).await.unwrap();
    assert_eq!(waits.len(), 1);
    assert_eq!(waits[0].1.id, "wo_2");
    approve(store, "exec-1", "wo_2").await;
    assert_eq!(status(store, "wo_3").await, OrderStatus::Offered);

    // The sender ends one itself: held, and no notice to itself.
    offer(store, "wo_6", "exec-1", &[]).await;
    offer(store, "wo_7", "exec-2", &["wo_6"]).await;
    let told = inbox(store, "planner").await.len();
    step(
        store,
        "planner",
        "wo_6",
        OrderRequest::Cancel { reason: None },
    )
    .await;
    assert_eq!(status(store, "wo_7").await, OrderStatus::Held);
    assert_eq!(inbox(store, "planner").await.len(), told);
    // Proceeding without the only one offers it at once; cancelling one held works too.
    assert_eq!(
        step(store, "planner", "wo_7", proceed()).await,
        OrderStatus::Offered
    );
    assert_eq!(inbox(store, "exec-2").await.len(), 2);
}

/// The pending edges and the statuses they led to rebuild from the log as written.
pub(crate) async fn waits_replay_to_the_same_rows<B: Backend>() {
    let backend = B::fresh(DEFAULT_BUSY_TIMEOUT).await;
    let store = backend.store();
    an_order_waited_on_that_ends_unapproved_holds_and_tells_the_sender(store).await;
    offer(store, "wo_8", "exec-1", &[]).await;
    offer(store, "wo_9", "exec-2", &["wo_8", "wo_3"]).await;
    let live = backend.projection_dump().await;
    let edges: Vec<&String> = live.iter().filter(|r| r.starts_with("a|")).collect();
    assert_eq!(edges.len(), 2, "{edges:?}");
    backend.rebuild_projections().await;
    assert_eq!(backend.projection_dump().await, live);
}

/// An order offered to a pool that waits on another is not in the pool's open items and
/// `next` does not take it; the approval that offers it opens it to the pool's claimants.
pub(crate) async fn a_pooled_order_is_open_to_claim_once_it_is_offered(store: &Store) {
    cast(store).await;
    offer(store, "wo_1", "exec-1", &[]).await;
    assert_eq!(
        offer(store, "wo_2", "role:executor", &["wo_1"]).await,
        OrderStatus::Waiting
    );
    let open = || async {
        store
            .pool_items(&PoolQuery {
                pool: Some(Pool::of_role("executor")),
                open_at: Some(crate::now_ms()),
                ..PoolQuery::default()
            })
            .await
            .unwrap()
            .into_iter()
            .filter_map(|item| item.order)
            .collect::<Vec<_>>()
    };
    assert!(
        open().await.is_empty(),
        "a waiting order is no one's to take"
    );
    // What several orders wait on is read in one answer, in the order they are asked for.
    offer(store, "wo_3", "exec-1", &["wo_1"]).await;
    let waits = store
        .waits(&["wo_3".to_owned(), "wo_2".to_owned()])
        .await
        .unwrap();
    let pairs: Vec<(&str, &str)> = waits
        .iter()
        .map(|(waiting, on)| (waiting.as_str(), on.id.as_str()))
        .collect();
    assert_eq!(pairs, [("wo_3", "wo_1"), ("wo_2", "wo_1")]);
    let err = refused(store, store.next(&name("exec-2"), None)).await;
    assert!(
        matches!(err, StoreError::Refused(Refusal::NothingReady { .. })),
        "{err:?}"
    );
    approve(store, "exec-1", "wo_1").await;
    assert_eq!(status(store, "wo_2").await, OrderStatus::Offered);
    assert_eq!(open().await, ["wo_2"]);
    let taken = store.next(&name("exec-2"), None).await.unwrap();
    assert_eq!(taken.order.map(|o| o.to), Some("exec-2".to_owned()));
}
