//! The project state: its digest, written with the state, holds the newest of each list.

use baton_core::state::StateOp;
use baton_store::Store;

use crate::cast;

/// This family's stories, each run on every backend by `every_backend!` (`main.rs`).
macro_rules! stories {
    ($attrs:tt $backend:ty) => {
        crate::on_backend!($attrs $backend; state;
            stores: [
                the_state_digest_keeps_the_newest_of_each_list_and_their_counts,
            ];
        );
    };
}
pub(crate) use stories;

/// Story: the state's digest, written with the state, holds the newest of each list and
/// how many there are, so a bounded view never reads the whole state.
pub(crate) async fn the_state_digest_keeps_the_newest_of_each_list_and_their_counts(store: &Store) {
    use baton_core::state::{DIGEST_ITEMS, Subject};
    cast(store).await;
    let extra = DIGEST_ITEMS + 7;
    let mut ops = Vec::new();
    for i in 0..extra {
        ops.push(StateOp::Decide {
            text: format!("decision {i}"),
            why: "digest".into(),
            supersedes: (i == 3).then(|| "D-1".to_owned()),
        });
        ops.push(StateOp::Constrain {
            text: format!("constraint {i}"),
            tried: "a".into(),
            result: "b".into(),
        });
        ops.push(StateOp::Note {
            text: format!("note {i}"),
            subject: Subject::Path(format!("src/{i}.rs")),
        });
    }
    ops.push(StateOp::Alert {
        key: "k".into(),
        message: "an alert".into(),
    });
    store.change_state("planner", &ops).await.unwrap();

    let state = store.state().await.unwrap();
    let digest = store.state_digest().await.unwrap();
    assert_eq!(digest, state.digest(DIGEST_ITEMS));
    assert_eq!(digest.generation, state.generation);
    assert_eq!(digest.decisions.len(), DIGEST_ITEMS);
    // One decision superseded another: it no longer counts.
    assert_eq!(digest.decisions_total, extra - 1);
    assert_eq!(digest.decisions[0].text, format!("decision {}", extra - 1));
    assert_eq!(digest.constraints_total, extra);
    assert_eq!(digest.notes_total, extra);
    assert_eq!(digest.notes[0].text, format!("note {}", extra - 1));
    assert_eq!((digest.alerts.len(), digest.alerts_total), (1, 1));
    assert!(!digest.is_whole());
}
