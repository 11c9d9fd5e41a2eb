//! Story 12: the store follows the pure lifecycle of `baton_core::delivery`, step for step:
//! random turns of a sender, two recipients and an outsider, checked against a model of
//! the core's transitions (a property test, run on every backend).

use std::fmt::Debug;

use baton_core::DeliveryStatus::Pending;
use baton_core::MessageType::Request;
use baton_core::delivery::{request_transition, transition};
use baton_core::{
    DeliveryAction, DeliveryStatus, MessageType, Passname, Refusal, RefusalKind, RequestAction,
    RequestStatus,
};
use baton_store::{DEFAULT_BUSY_TIMEOUT, StoreError, Verb};
use proptest::prelude::*;

use crate::{Backend, cast, draft, envelope, generation, name, refusals, send};

/// This family's stories, each run on every backend by `every_backend!` (`main.rs`).
macro_rules! stories {
    ($attrs:tt $backend:ty) => {
        crate::on_backend!($attrs $backend; delivery;
            models: [
                the_store_follows_the_delivery_model,
            ];
        );
    };
}
pub(crate) use stories;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Actor {
    Sender,
    First,
    Second,
    Outsider,
}

impl Actor {
    fn passname(self) -> Passname {
        name(match self {
            Self::Sender => "planner",
            Self::First => "exec-1",
            Self::Second => "exec-2",
            Self::Outsider => "observer",
        })
    }

    fn recipient(self) -> Option<usize> {
        match self {
            Self::First => Some(0),
            Self::Second => Some(1),
            Self::Sender | Self::Outsider => None,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Act {
    Fetch,
    Step(Verb),
}

#[derive(Debug, Clone, Copy)]
struct Turn {
    actor: Actor,
    act: Act,
    note: bool,
}

/// Why the model refuses a turn.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Verdict {
    /// The lifecycle forbids it; carries the current status.
    Transition(&'static str),
    Invalid,
    Forbidden,
}

/// The pure lifecycle, tracked per participant: each recipient's delivery and the
/// sender's own end.
struct Model {
    kind: MessageType,
    deliveries: [DeliveryStatus; 2],
    request: Option<RequestStatus>,
}

impl Model {
    fn new(kind: MessageType) -> Self {
        Self {
            kind,
            deliveries: [Pending; 2],
            request: (kind == Request).then_some(RequestStatus::Open),
        }
    }

    /// Plays one turn: `Ok(events it appends)` or why it is refused.
    fn play(&mut self, turn: Turn) -> Result<i64, Verdict> {
        let verb = match turn.act {
            Act::Fetch => {
                let Some(i) = turn.actor.recipient() else {
                    return Ok(0);
                };
                let before = self.deliveries[i];
                let after = transition(before, DeliveryAction::Fetch, self.kind)
                    .expect("fetching is always allowed");
                self.deliveries[i] = after;
                return Ok(i64::from(after != before));
            }
            Act::Step(verb) => verb,
        };
        if matches!(verb, Verb::HandBack | Verb::Refuse) && !turn.note {
            return Err(Verdict::Invalid);
        }
        match (turn.actor.recipient(), turn.actor) {
            (Some(i), _) => {
                let action = match verb {
                    Verb::Ack => DeliveryAction::Acknowledge,
                    Verb::Complete => DeliveryAction::Complete,
                    Verb::HandBack => DeliveryAction::HandBack,
                    Verb::Refuse => DeliveryAction::Refuse,
                    Verb::Archive => DeliveryAction::Archive,
                };
                let next = transition(self.deliveries[i], action, self.kind)
                    .map_err(|e| Verdict::Transition(e.status))?;
                self.deliveries[i] = next;
                // The status change, plus the reply that carries a note.
                Ok(1 + i64::from(turn.note))
            }
            (None, Actor::Sender) => {
                // Only a request has a sender's end; of it, the sender only completes
                // and archives, and says anything more in a reply.
                let Some(current) = self.request else {
                    return Err(Verdict::Invalid);
                };
                let action = match verb {
                    Verb::Complete => RequestAction::Complete,
                    Verb::Archive => RequestAction::Archive,
                    _ => return Err(Verdict::Forbidden),
                };
                if turn.note {
                    return Err(Verdict::Invalid);
                }
                let next = request_transition(current, action)
                    .map_err(|e| Verdict::Transition(e.status))?;
                self.request = Some(next);
                Ok(1)
            }
            (None, _) => Err(Verdict::Forbidden),
        }
    }
}

fn refusal(err: &StoreError) -> Option<Verdict> {
    match err.refusal()? {
        Refusal::Transition(t) => Some(Verdict::Transition(t.status)),
        r if r.kind() == RefusalKind::Invalid => Some(Verdict::Invalid),
        r if r.kind() == RefusalKind::Forbidden => Some(Verdict::Forbidden),
        _ => None,
    }
}

fn turn() -> impl Strategy<Value = Turn> {
    let actor = prop::sample::select(vec![
        Actor::Sender,
        Actor::First,
        Actor::Second,
        Actor::Outsider,
    ]);
    let act = prop_oneof![
        2 => Just(Act::Fetch),
        5 => prop::sample::select(vec![
            Verb::Ack,
            Verb::Complete,
            Verb::HandBack,
            Verb::Refuse,
            Verb::Archive,
        ])
        .prop_map(Act::Step),
    ];
    (actor, act, prop::bool::weighted(0.7)).prop_map(|(actor, act, note)| Turn { actor, act, note })
}

fn message_type() -> impl Strategy<Value = MessageType> {
    prop::sample::select(MessageType::ALL.to_vec())
}

/// Plays `turns` on one message of type `kind` to two recipients, against the store and
/// the model together, comparing after every turn.
fn follows_the_delivery_model<B: Backend>(
    kind: MessageType,
    turns: &[Turn],
) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let backend = B::fresh(DEFAULT_BUSY_TIMEOUT).await;
        let store = backend.store();
        cast(store).await;
        let id = send(
            store,
            "planner",
            draft(&["exec-1", "exec-2"], kind, "model", "go"),
        )
        .await;
        let mut model = Model::new(kind);

        for (n, &turn) in turns.iter().enumerate() {
            let who = turn.actor.passname();
            let before = generation(store).await;
            let on_record = refusals(store).await;
            let outcome = match turn.act {
                Act::Fetch => store.fetch(Some(&who), &id).await.map(|f| f.status),
                Act::Step(verb) => store
                    .step(&who, &id, verb, turn.note.then_some("a note"))
                    .await
                    .map(|_| None),
            };
            let written = generation(store).await - before;
            let recorded = refusals(store).await - on_record;
            // Either both take the turn and the store wrote what the model expects, or both
            // refuse it for the same reason and the store wrote nothing but, for a forbidden
            // turn, its refusal on record (an event, or a repeat counted on one).
            let observed = match &outcome {
                Ok(_) => Ok(written),
                Err(err) => {
                    prop_assert!(
                        written <= recorded,
                        "turn {}: {} events written",
                        n,
                        written
                    );
                    Err((refusal(err), recorded))
                }
            };
            let expected = model
                .play(turn)
                .map_err(|why| (Some(why), i64::from(why == Verdict::Forbidden)));
            prop_assert_eq!(observed, expected, "turn {}: {:?}: {:?}", n, turn, outcome);
            if let (Act::Fetch, Ok(fetched)) = (turn.act, outcome) {
                let reader = turn.actor.recipient().map(|i| model.deliveries[i]);
                prop_assert_eq!(fetched, reader, "turn {}: {:?}", n, turn);
            }
            let env = envelope(store, &id).await;
            prop_assert_eq!(
                [
                    env.status_for(&name("exec-1")),
                    env.status_for(&name("exec-2"))
                ],
                model.deliveries.map(Some),
                "turn {}: {:?}",
                n,
                turn
            );
            prop_assert_eq!(env.request_status, model.request, "turn {}: {:?}", n, turn);
        }
        Ok(())
    })
}

/// The delivery model on backend `B`: 64 random sequences of up to 29 turns.
pub(crate) fn the_store_follows_the_delivery_model<B: Backend>() {
    proptest!(ProptestConfig::with_cases(64), |(
        kind in message_type(),
        turns in prop::collection::vec(turn(), 1..30),
    )| {
        follows_the_delivery_model::<B>(kind, &turns)?;
    });
}
