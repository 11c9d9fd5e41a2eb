//! Portable logs: an imported event keeps its id and time.

use baton_core::message::DEFAULT_PAYLOAD_CAP;
use baton_core::{Change, Millis};
use baton_store::{NewEvent, Store};

use crate::{generation, name};

/// This family's stories, each run on every backend by `every_backend!` (`main.rs`).
macro_rules! stories {
    ($attrs:tt $backend:ty) => {
        crate::on_backend!($attrs $backend; portable;
            stores: [
                an_imported_event_keeps_its_id_and_time,
            ];
        );
    };
}
pub(crate) use stories;

/// Appends `events` as an imported log (merged: a test's store has a history of its own).
pub(crate) async fn inject(store: &Store, events: Vec<NewEvent>) -> baton_store::Imported {
    let lines = events
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            let event = baton_core::Event {
                seq: 0,
                id: e.id,
                at: e.at,
                actor: e.actor,
                change: e.change,
            };
            (i + 1, event)
        })
        .collect();
    store
        .import(lines, true, DEFAULT_PAYLOAD_CAP)
        .await
        .unwrap()
}

/// Story 19: An event that already has an id and a time (an imported log) is appended as
/// given, through the same append as every write, and projected like a live one; the same
/// id again is skipped: importing twice changes nothing.
pub(crate) async fn an_imported_event_keeps_its_id_and_time(store: &Store) {
    let at: Millis = 1_700_000_000_000;
    let added = NewEvent {
        id: "01HZZZZZZZZZZZZZZZZZZZZZZZ".into(),
        at,
        actor: "@import".into(),
        change: Change::ParticipantAdded {
            name: name("planner"),
            role: "planner".into(),
        },
    };
    let done = inject(store, vec![added.clone()]).await;
    assert_eq!(done.imported, 1);
    let read = store.events(0, 10).await.unwrap();
    assert_eq!(
        (read[0].id.as_str(), read[0].at, read[0].seq),
        (added.id.as_str(), at, 1)
    );
    let planner = store.participant("planner").await.unwrap().unwrap();
    assert_eq!(planner.added_at, at, "projected from the imported event");
    let again = inject(store, vec![added]).await;
    assert_eq!(
        (again.imported, again.skipped),
        (0, 1),
        "the same event id twice"
    );
    assert_eq!(generation(store).await, 1);
}
