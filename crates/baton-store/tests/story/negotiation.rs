//! Negotiations: parties, and a settled negotiation opened again.

use baton_core::Refusal;
use baton_store::{Store, StoreError};

use crate::{assert_variant, cast, name, refused};

/// This family's stories, each run on every backend by `every_backend!` (`main.rs`).
macro_rules! stories {
    ($attrs:tt $backend:ty) => {
        crate::on_backend!($attrs $backend; negotiation;
            stores: [
                a_negotiation_takes_participants_and_opens_again_once_settled,
            ];
        );
    };
}
pub(crate) use stories;

/// A negotiation's parties are participants unless its spec declares them external, and a
/// settled one opens again under its id, the sitting before it kept.
pub(crate) async fn a_negotiation_takes_participants_and_opens_again_once_settled(store: &Store) {
    cast(store).await;
    let spec = |external: bool| {
        serde_json::json!({
            "id": "db", "rounds": 10,
            "issues": [{"name": "db", "options": ["sqlite", "postgres"]}],
            "parties": [{"name": "planner"}, {"name": "vendor", "external": external}]
        })
    };
    let position = serde_json::json!({
        "weights": {"db": 1}, "utilities": {"db": {"sqlite": 1, "postgres": 1}}, "floor": 0.5
    });
    let positions = [
        (name("planner"), position.clone()),
        (name("vendor"), position),
    ];
    let err = refused(store, store.negotiate("planner", &spec(false), &positions)).await;
    assert_variant!(err, StoreError::Refused(Refusal::NegotiationInput { .. }));
    let first = store
        .negotiate("planner", &spec(true), &positions)
        .await
        .expect("an external party's position, handed over with the spec");
    assert!(first.settlement.is_some() && first.earlier.is_empty());
    let again = store
        .open_negotiation("planner", &spec(true))
        .await
        .expect("a settled negotiation opens again");
    assert!(again.settlement.is_none());
    assert_eq!(again.earlier.len(), 1);
    assert_eq!(store.negotiation("db").await.unwrap(), Some(again));
    let err = refused(store, store.open_negotiation("planner", &spec(true))).await;
    assert_variant!(err, StoreError::Refused(Refusal::NegotiationExists { .. }));
}
