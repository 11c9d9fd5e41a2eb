//! Work Orders: the lifecycle round, offers checked and listed by party, steps from one view
//! taken once, and order rows rebuilt from the log.

use baton_core::MessageType::Request;
use baton_core::message::DEFAULT_PAYLOAD_CAP;
use baton_core::order::{OrderChange, OrderRequest, OrderStatus};
use baton_core::{Change, Field, Payload, Record, Refusal, Topic};
use baton_store::{DEFAULT_BUSY_TIMEOUT, OrderQuery, Store, StoreError, Window};

use crate::log::replayed;
use crate::{Backend, assert_variant, cast, ids, name, refused};

/// This family's stories, each run on every backend by `every_backend!` (`main.rs`).
macro_rules! stories {
    ($attrs:tt $backend:ty) => {
        crate::on_backend!($attrs $backend; orders;
            stores: [
                an_order_goes_round_its_lifecycle,
                an_offer_is_checked_and_orders_list_by_party,
                steps_from_the_same_view_one_is_taken_the_others_find_it_moved,
            ];
            backends: [
                orders_replay_to_the_same_rows,
            ];
        );
    };
}
pub(crate) use stories;

/// A Work Order from `from` to `to` (the lifecycle reads `id`, `from`, `to`,
/// `escalate_to` and `deadline`; the AWL rules are the caller's).
pub(crate) fn order_doc(id: &str, from: &str, to: &str, deadline: &str) -> Payload {
    let mut doc: serde_json::Value = serde_json::from_str(include_str!(
        "../../../baton-core/tests/fixtures/work-order.json"
    ))
    .expect("the shared Work Order parses");
    for (field, value) in [
        ("id", id),
        ("from", from),
        ("to", to),
        ("deadline", deadline),
    ] {
        doc[field] = value.into();
    }
    doc["escalate_to"] = "observer".into();
    Payload::from_value(doc, DEFAULT_PAYLOAD_CAP).expect("a valid payload")
}

pub(crate) const FAR: &str = "2999-01-01T00:00:00Z";

pub(crate) fn report_of(from: &str, status: &str) -> OrderRequest {
    OrderRequest::Report {
        report: serde_json::json!({"order_id": "wo_1", "from": from, "status": status}),
        findings: vec![],
    }
}

pub(crate) fn topic(t: &str) -> Topic {
    Topic::new(t).expect("a valid topic")
}

/// Takes a step that must succeed, expecting the order at `seq`, and returns the new status.
async fn order_step(
    store: &Store,
    who: &str,
    id: &str,
    seq: i64,
    request: OrderRequest,
) -> OrderStatus {
    store
        .order_step(&name(who), id, seq, request)
        .await
        .unwrap_or_else(|e| panic!("{who}: {e}"))
        .order
        .status
}

/// Story 17: A Work Order goes round its lifecycle: offered as a request in its worker's
/// inbox, every step an event with the order's own seq from 1, reports counted; the wrong
/// party, a step the table does not allow and a stale view are refused and write nothing.
pub(crate) async fn an_order_goes_round_its_lifecycle(store: &Store) {
    cast(store).await;
    let offered = store
        .create_order(
            &name("planner"),
            topic("csv"),
            order_doc("wo_1", "planner", "exec-1", FAR),
        )
        .await
        .expect("an offer");
    let order = &offered.order;
    assert_eq!(
        (order.status, order.seq, order.attempt),
        (OrderStatus::Offered, 1, 0)
    );
    let inbox = store
        .inbox(&name("exec-1"), false, &Window::EVERYTHING)
        .await
        .unwrap();
    assert_eq!(ids(&inbox), std::slice::from_ref(&order.message));
    assert_eq!(inbox[0].kind, Request);
    let fetched = store.fetch(None, &order.message).await.unwrap();
    assert_eq!(
        fetched.payload["id"], "wo_1",
        "the request carries the document"
    );
    assert_eq!(offered.events.len(), 2, "the message and the offer");

    // Refusals, each writing nothing.
    for (who, expected, request, want) in [
        ("exec-2", 1, OrderRequest::Accept, "forbidden"),
        ("planner", 1, OrderRequest::Accept, "forbidden"),
        ("exec-1", 1, OrderRequest::Start, "transition"),
        ("exec-1", 0, OrderRequest::Accept, "conflict"),
        (
            "observer",
            1,
            OrderRequest::Answer { text: "x".into() },
            "transition",
        ),
    ] {
        let err = refused(
            store,
            store.order_step(&name(who), "wo_1", expected, request),
        )
        .await;
        let got = match err {
            StoreError::Refused(Refusal::OrderRole { .. }) => "forbidden",
            StoreError::Refused(Refusal::Transition(_)) => "transition",
            StoreError::Refused(Refusal::Moved { .. }) => "conflict",
            other => panic!("{who}: unexpected {other:?}"),
        };
        assert_eq!(got, want, "{who} expecting seq {expected}");
    }
    assert_variant!(
        refused(
            store,
            store.order_step(&name("exec-1"), "wo_9", 1, OrderRequest::Accept)
        )
        .await,
        StoreError::Refused(Refusal::NotFound {
            record: Record::Order,
            ..
        })
    );

    let round = [
        ("exec-1", OrderRequest::Accept, OrderStatus::Accepted),
        ("exec-1", OrderRequest::Start, OrderStatus::Working),
        (
            "exec-1",
            report_of("exec-1", "blocked"),
            OrderStatus::Blocked,
        ),
        (
            "observer",
            OrderRequest::Answer { text: "UTC".into() },
            OrderStatus::Working,
        ),
        (
            "exec-1",
            report_of("exec-1", "done"),
            OrderStatus::Submitted,
        ),
        (
            "planner",
            OrderRequest::Rework {
                reason: "keep the header".into(),
            },
            OrderStatus::Working,
        ),
        (
            "exec-1",
            report_of("exec-1", "done"),
            OrderStatus::Submitted,
        ),
        ("planner", OrderRequest::Approve, OrderStatus::Approved),
    ];
    for (i, (who, request, want)) in round.into_iter().enumerate() {
        assert_eq!(
            order_step(store, who, "wo_1", i as i64 + 1, request).await,
            want
        );
        let awaiting = store.metrics().await.unwrap().awaiting_approval;
        assert_eq!(
            awaiting,
            u64::from(want == OrderStatus::Submitted),
            "after {want:?}"
        );
    }
    let order = store.order("wo_1").await.unwrap().expect("the order");
    assert_eq!(
        (order.status, order.seq, order.attempt),
        (OrderStatus::Approved, 9, 3)
    );
    // Three submissions, one approval: the wait runs from the last submission.
    let m = store.metrics().await.unwrap();
    assert_eq!((m.awaiting_approval, m.tally.approval_wait.count), (0, 1));
    assert_eq!(m.tally, replayed(store).await);
    let events = store.order_events_since("wo_1", 0).await.unwrap();
    let seqs: Vec<i64> = events
        .iter()
        .map(|e| match &e.change {
            Change::Order(c) => c.seq(),
            other => panic!("not an order event: {other:?}"),
        })
        .collect();
    assert_eq!(seqs, (1..=9).collect::<Vec<_>>());
    assert_eq!(store.order_events_since("wo_1", 7).await.unwrap().len(), 2);
    assert_eq!(events[3].actor, "exec-1");
    assert!(matches!(
        &events[5].change,
        Change::Order(OrderChange::Stepped(s)) if s.attempt == Some(2)
    ));
    assert_variant!(
        refused(
            store,
            store.order_step(
                &name("planner"),
                "wo_1",
                9,
                OrderRequest::Cancel { reason: None }
            )
        )
        .await,
        StoreError::Refused(Refusal::Transition(_))
    );
}

/// Story 18: An offer is the acting identity's own, to a participant, under a new id; a
/// refused offer sends nothing. The list shows open orders, by party, oldest first.
pub(crate) async fn an_offer_is_checked_and_orders_list_by_party(store: &Store) {
    cast(store).await;
    let offer = |who: &str, doc| {
        let who = name(who);
        async move { store.create_order(&who, topic("csv"), doc).await }
    };
    assert_variant!(
        refused(
            store,
            offer("exec-2", order_doc("wo_1", "planner", "exec-1", FAR))
        )
        .await,
        StoreError::Refused(Refusal::OfferFrom { .. })
    );
    assert_variant!(
        refused(
            store,
            offer("planner", order_doc("wo_1", "planner", "nobody", FAR))
        )
        .await,
        StoreError::Refused(Refusal::UnknownParticipant { .. })
    );
    assert_variant!(
        refused(
            store,
            offer("planner", order_doc("wo_1", "planner", "Not A Name", FAR))
        )
        .await,
        StoreError::Refused(Refusal::Name {
            field: Field::OrderTo,
            ..
        })
    );
    assert_variant!(
        refused(
            store,
            offer("planner", order_doc("wo_1", "planner", "planner", FAR))
        )
        .await,
        StoreError::Refused(Refusal::SelfSend { .. })
    );
    offer("planner", order_doc("wo_1", "planner", "exec-1", FAR))
        .await
        .unwrap();
    assert_variant!(
        refused(
            store,
            offer("planner", order_doc("wo_1", "planner", "exec-2", FAR))
        )
        .await,
        StoreError::Refused(Refusal::OrderExists { .. })
    );
    offer("planner", order_doc("wo_2", "planner", "exec-2", FAR))
        .await
        .unwrap();
    order_step(
        store,
        "exec-2",
        "wo_2",
        1,
        OrderRequest::Decline { reason: None },
    )
    .await;

    let list = |party: Option<&str>, closed: bool| {
        let query = OrderQuery {
            party: party.map(str::to_owned),
            closed,
            ..OrderQuery::default()
        };
        async move {
            store
                .orders(&query)
                .await
                .unwrap()
                .into_iter()
                .map(|o| o.id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(list(None, false).await, ["wo_1"]);
    assert_eq!(list(None, true).await, ["wo_1", "wo_2"]);
    assert_eq!(list(Some("exec-2"), true).await, ["wo_2"]);
    assert_eq!(
        list(Some("observer"), true).await,
        ["wo_1", "wo_2"],
        "escalate_to"
    );
    assert!(list(Some("exec-2"), false).await.is_empty());
}

/// Story 22: Four steps on one order taken from the same view (each expecting the seq it
/// read): whichever the write lock lets in first is taken, and the others find the order
/// moved and write nothing. On SQLite the four run one after the other on this task; the
/// steps of separate processes racing for real are the command line's concurrency tests.
pub(crate) async fn steps_from_the_same_view_one_is_taken_the_others_find_it_moved(store: &Store) {
    cast(store).await;
    let exec = name("exec-1");
    for id in ["wo_1", "wo_2", "wo_3"] {
        store
            .create_order(
                &name("planner"),
                topic("csv"),
                order_doc(id, "planner", "exec-1", FAR),
            )
            .await
            .unwrap();
        let accept = || store.order_step(&exec, id, 1, OrderRequest::Accept);
        let raced = tokio::join!(accept(), accept(), accept(), accept());
        let (won, lost): (Vec<_>, Vec<_>) = [raced.0, raced.1, raced.2, raced.3]
            .into_iter()
            .partition(Result::is_ok);
        assert_eq!(
            won.len(),
            1,
            "{id}: exactly one step should be taken: {won:?}"
        );
        for err in lost {
            assert_variant!(err.unwrap_err(), StoreError::Refused(Refusal::Moved { .. }));
        }
        let order = store.order(id).await.unwrap().unwrap();
        assert_eq!(
            (order.seq, order.status),
            (2, OrderStatus::Accepted),
            "{id}"
        );
        assert_eq!(
            store.order_events_since(id, 1).await.unwrap().len(),
            1,
            "{id}: one step after the offer"
        );
    }
}

/// Story 19: Order rows, too, are a projection: replaying the log rebuilds them exactly.
pub(crate) async fn orders_replay_to_the_same_rows<B: Backend>() {
    let backend = B::fresh(DEFAULT_BUSY_TIMEOUT).await;
    let store = backend.store();
    an_order_goes_round_its_lifecycle(store).await;
    store
        .create_order(
            &name("planner"),
            topic("csv"),
            order_doc("wo_2", "planner", "exec-2", FAR),
        )
        .await
        .unwrap();
    let live = backend.projection_dump().await;
    assert_eq!(
        live.iter().filter(|r| r.starts_with("o|")).count(),
        2,
        "{live:?}"
    );
    backend.rebuild_projections().await;
    assert_eq!(backend.projection_dump().await, live);
}
