//! The log: the only source of truth. Replaying it rebuilds exactly what live writes
//! projected (the handoff metrics included); writers queue on it without gaps, a locked
//! store is busy and then writable, a wait wakes when another writer commits, and what
//! happened to a subject is found by the subject's id.

use std::time::Duration;

use baton_core::DeliveryStatus::{Delivered, Pending};
use baton_core::MessageType::{Info, Request};
use baton_core::metrics::{MessageFacts, Replay, Tally};
use baton_core::state::StateOp;
use baton_core::{Change, MessageType};
use baton_store::{DEFAULT_BUSY_TIMEOUT, NewEvent, Sent, Store, StoreError, Verb};

use crate::portable::inject;
use crate::{
    Backend, Dice, WINDOW, cast, clock_passes, draft, envelope, generation, name, now_ms, send,
    status,
};

/// This family's stories, each run on every backend by `every_backend!` (`main.rs`).
macro_rules! stories {
    ($attrs:tt $backend:ty) => {
        crate::on_backend!($attrs $backend; log;
            stores: [
                the_handoff_metrics_are_a_projection_of_the_log,
                a_send_is_found_by_its_event_id,
                a_subjects_events_and_last_change_are_found_whatever_their_kind,
                a_wait_wakes_when_another_writer_commits,
                racing_writers_queue_and_the_log_has_no_gaps,
            ];
            backends: [
                the_log_is_the_truth,
                a_locked_store_is_busy_then_writable,
            ];
        );
    };
}
pub(crate) use stories;

/// Plays `turns` random commands (sends, replies, fetches, steps, registrations), many of
/// them refused; a refusal must be one a user can act on, never an engine failure.
pub(crate) async fn random_mix(store: &Store, dice: &mut Dice, turns: usize) {
    const PEOPLE: [&str; 5] = ["planner", "exec-1", "exec-2", "observer", "late-1"];
    const VERBS: [Verb; 5] = [
        Verb::Ack,
        Verb::Complete,
        Verb::HandBack,
        Verb::Refuse,
        Verb::Archive,
    ];
    let mut sent: Vec<String> = Vec::new();
    for _ in 0..turns {
        let outcome = match dice.below(10) {
            0..=3 => {
                let from = dice.pick(&PEOPLE);
                let mut to = vec![dice.pick(&PEOPLE)];
                if dice.one_in(2) {
                    to.push(dice.pick(&PEOPLE));
                }
                let mut d = draft(
                    &to,
                    dice.pick(&MessageType::ALL),
                    dice.pick(&["alpha", "beta"]),
                    &format!("note {}", dice.below(4)),
                );
                if !sent.is_empty() && dice.one_in(3) {
                    d.reply_to = Some(dice.pick(&sent));
                }
                if dice.one_in(5) {
                    d.idempotency_key = Some(format!("k{}", dice.below(3)));
                }
                let window = dice.pick(&[0, WINDOW]);
                store.send(&name(from), d, window).await.map(|s| {
                    if !s.duplicate {
                        sent.push(s.id);
                    }
                })
            }
            4..=5 if !sent.is_empty() => {
                let reader = dice.pick(&[None, Some("exec-1"), Some("exec-2"), Some("planner")]);
                let reader = reader.map(name);
                let id = dice.pick(&sent);
                store.fetch(reader.as_ref(), &id).await.map(drop)
            }
            6..=8 if !sent.is_empty() => {
                let who = name(dice.pick(&PEOPLE));
                let id = dice.pick(&sent);
                let verb = dice.pick(&VERBS);
                let note = dice.one_in(2).then_some("because");
                store.step(&who, &id, verb, note).await.map(drop)
            }
            _ => {
                let who = name(dice.pick(&["planner", "late-1", "late-2"]));
                let role = dice.pick(&["planner", "executor"]);
                store
                    .add_participant("@local", &who, role, None)
                    .await
                    .map(drop)
            }
        };
        if let Err(e) = outcome {
            assert!(
                !matches!(
                    e,
                    StoreError::Engine(_)
                        | StoreError::Busy { .. }
                        | StoreError::Unavailable { .. }
                ),
                "an engine failure where a refusal was due: {e:?}"
            );
        }
    }
}

/// The tally a [`Replay`] of the whole log gives, the messages' facts read from their
/// envelopes: what the store's projection, advanced event by event, must equal.
pub(crate) async fn replayed(store: &Store) -> Tally {
    let mut replay = Replay::default();
    for event in store.events(0, u32::MAX).await.unwrap() {
        let (parent, message) = match &event.change {
            Change::MessageSent(m) => match &m.reply_to {
                Some(p) => {
                    let parent = envelope(store, p).await;
                    (Some((parent.kind, parent.depth)), None)
                }
                None => (None, None),
            },
            Change::DeliveryChanged { message, .. } => {
                let sent = envelope(store, message).await;
                let facts = MessageFacts {
                    at: sent.created_at,
                    kind: sent.kind,
                    topic: sent.topic.to_string(),
                };
                (None, Some(facts))
            }
            _ => (None, None),
        };
        replay.apply(&event, parent, message);
    }
    replay.tally
}

/// Story: the handoff metrics are a projection of the log: the tally moves with each
/// send, fetch and completion (and equals a replay of the log), and the live work —
/// deliveries pending, requests open and the oldest of them — is counted as it stands.
pub(crate) async fn the_handoff_metrics_are_a_projection_of_the_log(store: &Store) {
    cast(store).await;
    let m = store.metrics().await.unwrap();
    assert_eq!((m.pending, m.open_requests), (0, 0));
    assert_eq!(m.tally, Tally::default());

    let r1 = send(
        store,
        "planner",
        draft(&["exec-1", "exec-2"], Request, "alpha", "first"),
    )
    .await;
    let r2 = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "beta", "second"),
    )
    .await;
    send(store, "planner", draft(&["exec-1"], Info, "alpha", "fyi")).await;
    let mut question = draft(&["planner"], MessageType::Message, "alpha", "which file?");
    question.reply_to = Some(r1.clone());
    send(store, "exec-1", question).await;
    let m = store.metrics().await.unwrap();
    assert_eq!(m.pending, 5, "r1 twice, r2, the info and the question");
    assert_eq!(m.open_requests, 2);
    assert_eq!(m.oldest_open_request.as_ref().map(|(_, id)| id), Some(&r1));
    assert_eq!(
        (m.tally.requests, m.tally.replies_to_requests),
        (2, 1),
        "the question replies to a request"
    );
    assert_eq!(m.tally.max_thread_depth, 1);

    let exec_1 = name("exec-1");
    store.fetch(Some(&exec_1), &r1).await.unwrap();
    clock_passes(now_ms() + 3).await;
    store
        .step(&exec_1, &r1, Verb::Complete, None)
        .await
        .unwrap();
    store
        .step(&name("planner"), &r1, Verb::Complete, None)
        .await
        .unwrap();
    let m = store.metrics().await.unwrap();
    assert_eq!(m.pending, 4);
    assert_eq!(m.open_requests, 1, "the sender closed r1");
    assert_eq!(m.oldest_open_request.as_ref().map(|(_, id)| id), Some(&r2));
    let t = &m.tally;
    assert_eq!(
        (t.created_to_delivered.count, t.delivered_to_completed.count),
        (1, 1)
    );
    assert!(t.delivered_to_completed.sum_ms >= 3, "{t:?}");
    assert_eq!(t.completed_by_topic.get("alpha"), Some(&1));
    assert_eq!(t.delivery_trend.points().count(), 1);
    assert_eq!(m.generation, generation(store).await);
    assert_eq!(m.tally, replayed(store).await);
}

/// Story 11: The log is the truth: replaying it rebuilds exactly the projections the live writes
/// made, and the log itself cannot be rewritten.
pub(crate) async fn the_log_is_the_truth<B: Backend>() {
    for seed in [1, 7, 2024] {
        let backend = B::fresh(DEFAULT_BUSY_TIMEOUT).await;
        let store = backend.store();
        cast(store).await;
        random_mix(store, &mut Dice(seed), 200).await;
        // State changes between the messages: the state's projection is replayed too.
        for i in 0..3 {
            store
                .change_state(
                    "planner",
                    &[
                        StateOp::Decide {
                            text: format!("decision {seed}.{i}"),
                            why: "replayed".into(),
                            supersedes: None,
                        },
                        StateOp::Stream {
                            name: format!("s{}", i % 2),
                            status: format!("step {i}"),
                        },
                    ],
                )
                .await
                .unwrap();
            random_mix(store, &mut Dice(seed + i), 20).await;
        }

        let live = backend.projection_dump().await;
        assert!(
            live.iter()
                .any(|row| row.starts_with("d|") && !row.contains("|pending|")),
            "seed {seed}: the mix moved no delivery, so the replay proves little"
        );
        // The search index and the state are among the projections compared.
        assert!(
            live.iter().any(|row| row.starts_with("t|")),
            "no words indexed"
        );
        assert!(
            live.iter()
                .any(|row| row.starts_with("s|") && row.contains("decision")),
            "no state projected"
        );
        // The metrics' tally, advanced with each write, is what a replay of the log gives.
        let tally = store.metrics().await.unwrap().tally;
        assert!(
            tally.requests > 0 && tally.created_to_delivered.count > 0,
            "seed {seed}: the mix moved no metric, so the comparison proves little"
        );
        assert_eq!(
            tally,
            replayed(store).await,
            "seed {seed}: the tally differs"
        );
        let generation_before = generation(store).await;
        backend.rebuild_projections().await;
        assert_eq!(
            backend.projection_dump().await,
            live,
            "seed {seed}: replay differs"
        );
        assert_eq!(generation(store).await, generation_before);

        // The log refuses to be rewritten or shortened.
        let log = store.events(0, u32::MAX).await.unwrap();
        assert_eq!(log.len() as i64, generation_before);
        for sql in [
            "UPDATE events SET actor = 'mallory' WHERE seq = 1",
            "UPDATE events SET data = '{}'",
            "DELETE FROM events WHERE seq = (SELECT max(seq) FROM events)",
            "DELETE FROM events",
        ] {
            let err = backend
                .behind_the_back(sql)
                .await
                .expect_err("the event log must refuse this");
            assert!(err.contains("append-only"), "{sql}: {err}");
        }
        assert_eq!(store.events(0, u32::MAX).await.unwrap(), log);
    }
}

/// Story 13: A writer that finds the store locked for longer than its busy timeout gets a
/// retryable `Busy`, writes nothing, and succeeds once the lock is gone.
pub(crate) async fn a_locked_store_is_busy_then_writable<B: Backend>() {
    let backend = B::fresh(Duration::from_millis(200)).await;
    let store = backend.store();
    cast(store).await;
    let exec = name("exec-1");
    let waiting = send(
        store,
        "planner",
        draft(&["exec-1"], Info, "busy", "read me"),
    )
    .await;
    let blocked = draft(&["exec-1"], Request, "busy", "while locked");
    let before = generation(store).await;

    let lock = backend.hold_write_lock().await;
    let sending = store.send(&name("planner"), blocked.clone(), WINDOW).await;
    let fetching = store.fetch(Some(&exec), &waiting).await;
    // Readers are not blocked by a writer.
    assert_eq!(generation(store).await, before);
    assert_eq!(status(store, &waiting, "exec-1").await, Some(Pending));
    B::release(lock).await;

    for (what, err) in [
        ("send", sending.map(drop).unwrap_err()),
        ("fetch", fetching.map(drop).unwrap_err()),
    ] {
        assert!(matches!(err, StoreError::Busy { .. }), "{what}: {err:?}");
        assert!(err.is_retryable(), "{what}: {err}");
        assert!(!err.to_string().contains("locked"), "{what}: {err}");
    }

    let sent = store
        .send(&name("planner"), blocked, WINDOW)
        .await
        .expect("a send once the lock is released");
    assert!(!sent.duplicate, "the busy send must not have been stored");
    assert_eq!(generation(store).await, before + 1);
    let fetched = store.fetch(Some(&exec), &waiting).await.unwrap();
    assert_eq!(fetched.status, Some(Delivered));
}

/// Story 21: Writers queue: eight sends racing on one store all commit, and the log numbers
/// their events one after another, with no gap and no number used twice.
pub(crate) async fn racing_writers_queue_and_the_log_has_no_gaps(store: &Store) {
    cast(store).await;
    let before = generation(store).await;
    let planner = name("planner");
    let send = |n: u32| {
        store.send(
            &planner,
            draft(&["exec-1"], Info, "race", &format!("writer {n}")),
            WINDOW,
        )
    };
    let sent = tokio::join!(
        send(1),
        send(2),
        send(3),
        send(4),
        send(5),
        send(6),
        send(7),
        send(8)
    );
    let sent: Vec<Sent> = [
        sent.0, sent.1, sent.2, sent.3, sent.4, sent.5, sent.6, sent.7,
    ]
    .into_iter()
    .map(|r| r.expect("a writer that queued"))
    .collect();
    assert!(sent.iter().all(|s| !s.duplicate), "{sent:?}");
    let seqs: Vec<i64> = store
        .events(before, 100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, (before + 1..=before + 8).collect::<Vec<_>>());
    assert_eq!(generation(store).await, before + 8);
}

/// Story 19b: A send's event takes its message's id, and the log finds it by that id like
/// any other event: appending it again writes nothing. A send from a log made before the
/// two shared an id (its event's id differs from its message's) is found by its own id
/// too, so importing such a log twice also changes nothing.
pub(crate) async fn a_send_is_found_by_its_event_id(store: &Store) {
    cast(store).await;
    let id = send(
        store,
        "planner",
        draft(&["exec-1"], Info, "ids", "one id for both"),
    )
    .await;
    let log = store.events(0, u32::MAX).await.unwrap();
    let sent = log.last().expect("the send's event").clone();
    assert_eq!(sent.id, id, "the event takes its message's id");
    let before = generation(store).await;
    assert_eq!(
        inject(store, vec![NewEvent::from(sent.clone())])
            .await
            .imported,
        0
    );
    assert_eq!(generation(store).await, before);

    let Change::MessageSent(mut older) = sent.change.clone() else {
        panic!("a send's event: {sent:?}");
    };
    older.id = "01HZZZZZZZZZZZZZZZZZZZZZZY".into();
    let imported = NewEvent {
        id: "01HZZZZZZZZZZZZZZZZZZZZZZX".into(),
        at: sent.at,
        actor: sent.actor.clone(),
        change: Change::MessageSent(older),
    };
    assert_eq!(
        inject(store, vec![imported.clone()]).await.imported,
        1,
        "a send of its own"
    );
    let log = store.events(0, u32::MAX).await.unwrap();
    assert_eq!(log.last().unwrap().id, imported.id);
    let older_id = "01HZZZZZZZZZZZZZZZZZZZZZZY";
    assert_eq!(
        envelope(store, older_id).await.id,
        older_id,
        "its message is there"
    );
    assert_eq!(inject(store, vec![imported]).await.imported, 0);
    assert_eq!(
        inject(store, vec![NewEvent::from(sent.clone())])
            .await
            .imported,
        0
    );
    assert_eq!(generation(store).await, before + 1);
}

/// Story: what happened to a subject is found whatever the kind of its events: a message
/// with nothing but its send has that event and changed when it was sent, a delivery
/// after it is its last change, and an id nothing happened to has none.
pub(crate) async fn a_subjects_events_and_last_change_are_found_whatever_their_kind(store: &Store) {
    cast(store).await;
    let id = send(
        store,
        "planner",
        draft(&["exec-1"], MessageType::Info, "t", "only sent"),
    )
    .await;
    let sent = store.events_about(&id, "message.sent").await.unwrap();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let sent = &sent[0];
    assert!(matches!(&sent.change, Change::MessageSent(m) if m.id == id));
    assert_eq!(store.last_change(&id, 0).await.unwrap(), Some(sent.at));
    assert_eq!(store.last_change(&id, sent.seq).await.unwrap(), None);
    assert_eq!(store.last_change("m_nothing", 0).await.unwrap(), None);

    clock_passes(sent.at).await;
    store.fetch(Some(&name("exec-1")), &id).await.unwrap();
    let delivered = store.events(sent.seq, 10).await.unwrap();
    let delivered = delivered.last().expect("the delivery's event");
    assert!(delivered.at > sent.at);
    assert_eq!(store.last_change(&id, 0).await.unwrap(), Some(delivered.at));
    assert_eq!(
        store.last_change(&id, sent.seq).await.unwrap(),
        Some(delivered.at)
    );
    let batch = store
        .last_changes(&[
            (id.clone(), sent.seq),
            ("m_nothing".to_owned(), 0),
            (id.clone(), delivered.seq),
        ])
        .await
        .unwrap();
    assert_eq!(batch, vec![Some(delivered.at), None, None]);
    let steps = store.events_about(&id, "delivery.changed").await.unwrap();
    assert_eq!(steps.len(), 1, "{steps:?}");
}

/// Story 24: A wait for the store to move returns once another writer commits, with the
/// generation it moved to; with nothing written it returns at its timeout, unmoved.
pub(crate) async fn a_wait_wakes_when_another_writer_commits(store: &Store) {
    cast(store).await;
    let seen = generation(store).await;
    let idle = store
        .changed(seen, Duration::from_millis(100))
        .await
        .unwrap();
    assert_eq!(idle, seen, "nothing was written");
    let started = std::time::Instant::now();
    let (moved, id) = tokio::join!(store.changed(seen, Duration::from_secs(30)), async {
        send(store, "planner", draft(&["exec-1"], Info, "t", "wake up")).await
    });
    let moved = moved.unwrap();
    assert!(moved > seen, "{moved} after {seen}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "woken by the commit of {id}, not by the timeout"
    );
}
