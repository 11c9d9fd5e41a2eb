//! Reservations: paths held exclusive or shared with a TTL, renewed, released, refused in
//! the way, held by an accepted order for its worker, force-released once a holder is quiet.

use std::future::Future;

use baton_core::MessageType::Info;
use baton_core::message::DEFAULT_PAYLOAD_CAP;
use baton_core::order::{OrderRequest, OrderStatus};
use baton_core::{Millis, Passname, Payload, Refusal};
use baton_store::{DEFAULT_BUSY_TIMEOUT, Store, StoreError, Window};

use crate::orders::topic;
use crate::runs::{registration, run_started};
use crate::{Backend, assert_variant, cast, name, now_ms, refused};

/// This family's stories, each run on every backend by `every_backend!` (`main.rs`).
macro_rules! stories {
    ($attrs:tt $backend:ty) => {
        crate::on_backend!($attrs $backend; reservations;
            stores: [
                reservations_are_held_renewed_released_and_refused_in_the_way,
                a_reservation_lapses_at_its_expiry_not_before_and_not_after,
                an_accepted_order_holds_its_scope_for_its_worker_until_it_ends,
                a_quiet_holders_reservation_is_force_released_and_the_holder_told,
                sixteen_writers_reserving_one_path_one_wins,
            ];
            backends: [
                reservations_replay_to_the_same_rows,
            ];
        );
    };
}
pub(crate) use stories;

fn ask(paths: &[&str], exclusive: bool, ttl_ms: Millis) -> baton_core::reservation::Ask {
    baton_core::reservation::Ask {
        paths: paths.iter().map(|p| glob(p)).collect(),
        exclusive,
        reason: "work".into(),
        ttl_ms,
    }
}

fn glob(p: &str) -> baton_core::reservation::PathGlob {
    baton_core::reservation::PathGlob::new(p).expect("a glob")
}

fn releasing(ids: &[&str], globs: &[&str]) -> baton_core::reservation::Release {
    baton_core::reservation::Release {
        ids: ids.iter().map(|i| (*i).to_owned()).collect(),
        globs: globs.iter().map(|g| glob(g)).collect(),
    }
}

pub(crate) async fn live(store: &Store, holder: Option<&str>, at: Millis) -> Vec<String> {
    let q = baton_store::ReservationQuery {
        holder: holder.map(str::to_owned),
        live_at: Some(at),
        ..Default::default()
    };
    let found = store.reservations(&q).await.expect("the reservations");
    found
        .iter()
        .map(|r| format!("{} {}", r.holder, r.path))
        .collect()
}

/// Story: a participant holds paths exclusively or shared; another's reservation in the
/// way refuses the whole request, naming holder, id and expiry, and stores nothing;
/// reserving again renews; a release says what it released and releasing nothing is
/// refused; an observer may not reserve.
pub(crate) async fn reservations_are_held_renewed_released_and_refused_in_the_way(store: &Store) {
    use baton_core::reservation::{Hold, Status};
    cast(store).await;
    let made = store
        .reserve(&name("exec-1"), &ask(&["src/billing/**"], true, 60_000))
        .await
        .expect("a reservation");
    assert_eq!(made.len(), 1);
    let first = made[0].clone();
    assert!(first.id.starts_with("rsv-"), "{first:?}");
    assert_eq!(first.expires_at, Some(first.reserved_at + 60_000));
    assert!(first.exclusive && first.order.is_none());

    // In the way: the whole request is refused, naming holder, id and expiry.
    let err = refused(
        store,
        store.reserve(
            &name("exec-2"),
            &ask(&["docs/**", "src/billing/invoice.rs"], false, 60_000),
        ),
    )
    .await;
    let StoreError::Refused(Refusal::Reserved { conflicts }) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    assert_eq!(
        (
            conflicts[0].holder.as_str(),
            conflicts[0].reservation.as_str(),
            conflicts[0].expires_at
        ),
        ("exec-1", first.id.as_str(), first.expires_at)
    );
    assert!(live(store, Some("exec-2"), now_ms()).await.is_empty());

    // Shared beside shared; exclusive beside shared is refused.
    store
        .reserve(&name("exec-2"), &ask(&["docs/**"], false, 60_000))
        .await
        .unwrap();
    store
        .reserve(&name("exec-1"), &ask(&["docs/*.md"], false, 60_000))
        .await
        .unwrap();
    assert_variant!(
        refused(
            store,
            store.reserve(&name("exec-1"), &ask(&["docs/a.md"], true, 60_000))
        )
        .await,
        StoreError::Refused(Refusal::Reserved { .. })
    );

    // Again: renewed, the same reservation with a new expiry from now.
    let renewed = store
        .reserve(&name("exec-1"), &ask(&["src/billing/**"], true, 120_000))
        .await
        .unwrap();
    assert_eq!(renewed[0].id, first.id);
    assert_eq!(renewed[0].expires_at, Some(renewed[0].renewed_at + 120_000));
    assert!(renewed[0].renewed_at >= first.reserved_at);

    // Releasing: nothing released is said; another's is not released by hand.
    assert_variant!(
        refused(
            store,
            store.release(&name("exec-1"), &releasing(&[], &["tests/**"]))
        )
        .await,
        StoreError::Refused(Refusal::NotReleased { .. })
    );
    assert_variant!(
        refused(
            store,
            store.release(&name("exec-2"), &releasing(&[&first.id], &[]))
        )
        .await,
        StoreError::Refused(Refusal::Unreleased {
            hold: Hold::Others,
            ..
        })
    );
    let released = store
        .release(&name("exec-1"), &releasing(&[], &["src/billing/**"]))
        .await
        .unwrap();
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].status_at(now_ms()), Status::Released);
    assert_eq!(released[0].released_by.as_deref(), Some("exec-1"));
    // Every one it holds by hand.
    let rest = store
        .release(&name("exec-2"), &releasing(&[], &[]))
        .await
        .unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(live(store, None, now_ms()).await, ["exec-1 docs/*.md"]);

    // An observer has no power to record anything.
    assert_variant!(
        refused(
            store,
            store.reserve(&name("observer"), &ask(&["x/**"], true, 60_000))
        )
        .await,
        StoreError::Refused(Refusal::Beyond { .. })
    );
}

/// Story: a reservation is live up to the instant it expires and not at it: every read
/// decides it from its time and TTL, whatever ran meanwhile.
pub(crate) async fn a_reservation_lapses_at_its_expiry_not_before_and_not_after(store: &Store) {
    cast(store).await;
    let made = store
        .reserve(&name("exec-1"), &ask(&["lib/**"], true, 5_000))
        .await
        .unwrap();
    let expires = made[0].expires_at.expect("an expiry");
    assert_eq!(
        live(store, Some("exec-1"), expires - 1).await.len(),
        1,
        "never early"
    );
    assert!(
        live(store, Some("exec-1"), expires).await.is_empty(),
        "never late"
    );
    let all = store
        .reservations(&baton_store::ReservationQuery::default())
        .await
        .unwrap();
    assert_eq!(
        all[0].status_at(expires),
        baton_core::reservation::Status::Expired
    );
}

fn scoped_order(id: &str, to: &str, allowed: &[&str], deadline: &str) -> Payload {
    Payload::from_value(
        serde_json::json!({
            "spec": "awl/work-order@0.1", "id": id, "created_at": "2025-01-01T00:00:00Z",
            "from": "planner", "to": to, "goal": "Keep the CSV filters",
            "criteria": [{"id": "c1", "text": "filtered rows only"}], "budget": {"usd": 2},
            "deadline": deadline, "tools": ["repo/*"],
            "x-baton": {"scope": {"allowed": allowed, "excluded": ["migrations"]}}
        }),
        DEFAULT_PAYLOAD_CAP,
    )
    .expect("a valid payload")
}

/// Story: an order's worker holds the scope's allowed paths from its acceptance until the
/// order ends; an acceptance that another's reservation stands in the way of is refused
/// and changes nothing.
pub(crate) async fn an_accepted_order_holds_its_scope_for_its_worker_until_it_ends(store: &Store) {
    cast(store).await;
    let planner = name("planner");
    for (id, to, allowed) in [
        ("wo_1", "exec-1", &["src/export.rs", "notes/"][..]),
        ("wo_2", "exec-2", &["src/**"][..]),
    ] {
        store
            .create_order(
                &planner,
                topic("csv"),
                scoped_order(id, to, allowed, "2999-01-01T00:00:00Z"),
            )
            .await
            .unwrap();
    }
    assert!(
        live(store, None, now_ms()).await.is_empty(),
        "offered: nothing held"
    );
    store
        .order_step(&name("exec-1"), "wo_1", 1, OrderRequest::Accept)
        .await
        .unwrap();
    assert_eq!(
        live(store, None, now_ms()).await,
        ["exec-1 src/export.rs", "exec-1 notes"]
    );
    let held = store
        .reservations(&baton_store::ReservationQuery {
            order: Some("wo_1".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        held.iter()
            .all(|r| r.exclusive && r.order.as_deref() == Some("wo_1"))
    );
    assert_eq!(
        held[0].expires_at,
        Some(32_472_144_000_001),
        "the order's deadline"
    );
    // Another's reservation and another's acceptance are refused in its way.
    assert_variant!(
        refused(
            store,
            store.reserve(&name("exec-2"), &ask(&["src/*.rs"], false, 60_000))
        )
        .await,
        StoreError::Refused(Refusal::Reserved { .. })
    );
    let err = refused(
        store,
        store.order_step(&name("exec-2"), "wo_2", 1, OrderRequest::Accept),
    )
    .await;
    let StoreError::Refused(Refusal::Reserved { conflicts }) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(conflicts[0].order.as_deref(), Some("wo_1"));
    assert_eq!(
        store.order("wo_2").await.unwrap().unwrap().status,
        OrderStatus::Offered
    );
    // The worker's own reservations beside its order's are no conflict; releasing the
    // order's by hand is refused.
    store
        .reserve(&name("exec-1"), &ask(&["src/**"], true, 60_000))
        .await
        .unwrap();
    assert_variant!(
        refused(
            store,
            store.release(&name("exec-1"), &releasing(&[&held[0].id], &[]))
        )
        .await,
        StoreError::Refused(Refusal::Unreleased {
            hold: baton_core::reservation::Hold::Order(_),
            ..
        })
    );
    // Ended, what it held is released.
    store
        .order_step(&planner, "wo_1", 2, OrderRequest::Cancel { reason: None })
        .await
        .unwrap();
    assert_eq!(live(store, None, now_ms()).await, ["exec-1 src/**"]);
}

/// Story: a force-release takes an owner, a reason and a holder whose runs
/// have gone quiet; the holder is told why in its inbox, in the same transaction.
pub(crate) async fn a_quiet_holders_reservation_is_force_released_and_the_holder_told(
    store: &Store,
) {
    use baton_store::Force;
    cast(store).await;
    store
        .add_participant("@local", &name("boss"), "owner", None)
        .await
        .unwrap();
    let made = store
        .reserve(&name("exec-1"), &ask(&["src/**"], true, 600_000))
        .await
        .unwrap();
    let force = |quiet_ms: Millis| Force {
        id: made[0].id.clone(),
        reason: "exec-1 crashed".into(),
        quiet_ms,
    };
    assert_variant!(
        refused(store, store.force_release(&name("planner"), &force(0))).await,
        StoreError::Refused(Refusal::ForceRelease { .. })
    );
    // Its run is alive: not quiet for an hour.
    store
        .record_run(
            "exec-1",
            &[registration("r-1", Some("exec-1")), run_started("r-1")],
        )
        .await
        .unwrap();
    assert_variant!(
        refused(store, store.force_release(&name("boss"), &force(3_600_000))).await,
        StoreError::Refused(Refusal::Unreleased {
            hold: baton_core::reservation::Hold::Active { .. },
            ..
        })
    );
    let before = store
        .inbox(&name("exec-1"), false, &Window::EVERYTHING)
        .await
        .unwrap()
        .len();
    // Quiet for as long as asked (none).
    let released = store.force_release(&name("boss"), &force(0)).await.unwrap();
    assert_eq!(released.forced.as_deref(), Some("exec-1 crashed"));
    assert_eq!(released.released_by.as_deref(), Some("boss"));
    let inbox = store
        .inbox(&name("exec-1"), false, &Window::EVERYTHING)
        .await
        .unwrap();
    assert_eq!(inbox.len(), before + 1);
    let told = inbox.last().unwrap();
    assert_eq!((told.kind, told.topic.as_str()), (Info, "reservations"));
    assert!(told.excerpt.contains("exec-1 crashed"), "{told:?}");
    assert!(live(store, None, now_ms()).await.is_empty());
}

/// Story: sixteen writers reserving one path at once: exactly one holds it, and each other
/// is refused naming it.
pub(crate) async fn sixteen_writers_reserving_one_path_one_wins(store: &Store) {
    cast(store).await;
    for n in 0..16 {
        store
            .add_participant("@local", &name(&format!("w-{n}")), "executor", None)
            .await
            .unwrap();
    }
    let names: Vec<Passname> = (0..16).map(|n| name(&format!("w-{n}"))).collect();
    let asked = ask(&["src/hot.rs"], true, 60_000);
    let mut racing: Vec<_> = names
        .iter()
        .map(|who| Box::pin(store.reserve(who, &asked)))
        .collect();
    let mut done: Vec<Option<baton_store::Result<Vec<baton_core::reservation::Reservation>>>> =
        (0..16).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in racing.iter_mut().enumerate() {
            if done[i].is_none() {
                match f.as_mut().poll(cx) {
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
    let results: Vec<_> = done.into_iter().map(Option::unwrap).collect();
    let winners: Vec<&Vec<_>> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    let won = &winners[0][0];
    for r in &results {
        if let Err(e) = r {
            assert!(
                matches!(e, StoreError::Refused(Refusal::Reserved { conflicts }) if conflicts[0].reservation == won.id),
                "{e:?}"
            );
        }
    }
    assert_eq!(live(store, None, now_ms()).await.len(), 1);
}

/// Story: the reservations a rebuild replays are the ones the live writes made.
pub(crate) async fn reservations_replay_to_the_same_rows<B: Backend>() {
    let backend = B::fresh(DEFAULT_BUSY_TIMEOUT).await;
    let store = backend.store();
    an_accepted_order_holds_its_scope_for_its_worker_until_it_ends(store).await;
    store
        .reserve(&name("exec-2"), &ask(&["docs/**"], false, 60_000))
        .await
        .unwrap();
    store
        .reserve(&name("exec-2"), &ask(&["docs/**"], true, 90_000))
        .await
        .unwrap();
    let live = backend.projection_dump().await;
    assert_eq!(
        live.iter().filter(|r| r.starts_with("v|")).count(),
        4,
        "{live:?}"
    );
    backend.rebuild_projections().await;
    assert_eq!(backend.projection_dump().await, live);
}
