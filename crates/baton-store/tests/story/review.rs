//! Review and staged effects: verdicts, needs and acknowledgements appended together, and
//! what waits for a person read from open work only.

use baton_core::Change;
use baton_store::{DEFAULT_BUSY_TIMEOUT, NewEvent, Store};

use crate::portable::inject;
use crate::{Backend, cast, now_ms};

/// This family's stories, each run on every backend by `every_backend!` (`main.rs`).
macro_rules! stories {
    ($attrs:tt $backend:ty) => {
        crate::on_backend!($attrs $backend; review;
            stores: [
                gate_events_are_appended_together_and_read_back_by_kind,
            ];
            backends: [
                what_waits_for_a_person_is_open_work_only,
            ];
        );
    };
}
pub(crate) use stories;

/// Story 21c: What waits for a person is read from open work only. A need stays open
/// until its item is acknowledged; an order is stuck while an effect of it failed or
/// started with no recorded end, and leaves once every one settled well. Acknowledgements
/// are found by item, and the two projections are what a replay of the log gives.
pub(crate) async fn what_waits_for_a_person_is_open_work_only<B: Backend>() {
    use baton_core::effect::EffectChange;
    use baton_core::gate::{GateChange, NeedSource};
    let backend = B::fresh(DEFAULT_BUSY_TIMEOUT).await;
    let store = backend.store();
    cast(store).await;
    let need = |id: &str, order: Option<&str>| GateChange::Need {
        id: id.into(),
        text: format!("about {id}"),
        order: order.map(str::to_owned),
        source: NeedSource::Hand,
        run: None,
    };
    let ack = |item: &str| GateChange::Acked { item: item.into() };
    store
        .record_gate("planner", &[need("n1", None), need("n2", Some("wo_1"))])
        .await
        .unwrap();
    store
        .record_gate("planner", &[ack("need:n1"), ack("order:wo_1")])
        .await
        .unwrap();
    let open = store.attention().await.unwrap();
    let ids: Vec<&str> = open.needs.iter().map(|e| e.change.subject()).collect();
    assert_eq!(ids, ["n2"], "n1 was acknowledged");
    let acks = store
        .acks(&["need:n1".into(), "need:n2".into(), "order:wo_1".into()])
        .await
        .unwrap();
    assert!(
        acks[0].is_some() && acks[1].is_none() && acks[2].is_some(),
        "{acks:?}"
    );

    let effect = |change: EffectChange| NewEvent::new("@gateway", Change::Effect(change), now_ms());
    let held = |order: &str, reference: &str| EffectChange::Held {
        order: order.into(),
        reference: reference.into(),
        tool: "deploy".into(),
        arguments: serde_json::Map::new(),
        upstream: vec!["upstream".into()],
    };
    let started = |order: &str, reference: &str| EffectChange::Started {
        order: order.into(),
        reference: reference.into(),
    };
    let finished = |order: &str, reference: &str, ok: bool| EffectChange::Finished {
        order: order.into(),
        reference: reference.into(),
        ok,
        result: serde_json::json!({}),
    };
    inject(
        store,
        vec![
            effect(held("wo_a", "deploy#1")),
            effect(held("wo_a", "deploy#2")),
            effect(held("wo_b", "deploy#1")),
            effect(held("wo_c", "deploy#1")),
            // wo_a: one ran, the other started and never finished.
            effect(started("wo_a", "deploy#1")),
            effect(finished("wo_a", "deploy#1", true)),
            effect(started("wo_a", "deploy#2")),
            // wo_b failed; wo_c started and then ran.
            effect(started("wo_b", "deploy#1")),
            effect(finished("wo_b", "deploy#1", false)),
            effect(started("wo_c", "deploy#1")),
        ],
    )
    .await;
    assert_eq!(
        store.attention().await.unwrap().stuck,
        ["wo_a", "wo_b", "wo_c"]
    );
    inject(store, vec![effect(finished("wo_c", "deploy#1", true))]).await;
    // wo_a's first effect finishing well again leaves its second one stuck.
    inject(store, vec![effect(finished("wo_a", "deploy#1", true))]).await;
    assert_eq!(store.attention().await.unwrap().stuck, ["wo_a", "wo_b"]);

    let live = backend.projection_dump().await;
    assert!(live.iter().any(|r| r.starts_with("n|n2|")), "{live:?}");
    assert!(live.iter().any(|r| r == "u|wo_b"), "{live:?}");
    backend.rebuild_projections().await;
    assert_eq!(backend.projection_dump().await, live, "replay differs");
}

/// Story: review verdicts, needs and acknowledgements are appended together as
/// `gate.changed` events and read back by kind, newest first, with the raw text of an
/// INVALID verdict intact.
pub(crate) async fn gate_events_are_appended_together_and_read_back_by_kind(store: &Store) {
    use baton_core::gate::{GateChange, NeedSource, Outcome, Verdict};
    cast(store).await;
    let changes = [
        GateChange::Reviewed {
            order: "wo_1".into(),
            round: 1,
            reviewer: "sh review.sh".into(),
            run: Some("r1".into()),
            verdict: Verdict::Invalid {
                raw: "looks fine\nAPPROVE".into(),
            },
        },
        GateChange::Concluded {
            order: "wo_1".into(),
            round: 1,
            outcome: Outcome::Unresolved,
            disagreement: false,
        },
        GateChange::Need {
            id: "n1".into(),
            text: "which fixture?".into(),
            order: None,
            source: NeedSource::Hand,
            run: None,
        },
    ];
    let written = store.record_gate("planner", &changes).await.unwrap();
    assert_eq!(written.len(), 3);
    store
        .record_gate(
            "planner",
            &[GateChange::Acked {
                item: "need:n1".into(),
            }],
        )
        .await
        .unwrap();
    let read = store
        .events_of_kind("gate.changed", None, 10)
        .await
        .unwrap();
    let back: Vec<GateChange> = read
        .iter()
        .rev()
        .map(|e| match &e.change {
            Change::Gate(g) => g.clone(),
            other => panic!("not a gate event: {other:?}"),
        })
        .collect();
    assert_eq!(back[..3], changes);
    assert_eq!(
        back[3],
        GateChange::Acked {
            item: "need:n1".into()
        }
    );
    assert_eq!(read[3].change.subject(), "wo_1");
}
