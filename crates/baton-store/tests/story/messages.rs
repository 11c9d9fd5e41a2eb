//! Messages: who may send to whom, each recipient's delivery and the sender's own end of
//! a request, replies and reasons, duplicates, threads, ids by prefix, and search.

use std::fmt::Debug;

use baton_core::DeliveryStatus::{
    Acknowledged, Archived, Completed, Delivered, HandedBack, Pending, Refused,
};
use baton_core::MessageType::{Info, Request};
use baton_core::message::DEFAULT_PAYLOAD_CAP;
use baton_core::{
    DeliveryStatus, Draft, Field, MessageType, Millis, Passname, Payload, Record, Refusal,
    RefusalKind, RequestStatus, Topic,
};
use baton_store::{End, SearchQuery, Sent, Store, StoreError, Verb, Window};

use crate::{
    WINDOW, allowed, assert_variant, cast, clock_passes, draft, envelope, generation, ids, name,
    recipients, refused, send, status, step_name, transition_error,
};

use Filter as F;

/// This family's stories, each run on every backend by `every_backend!` (`main.rs`).
macro_rules! stories {
    ($attrs:tt $backend:ty) => {
        crate::on_backend!($attrs $backend; messages;
            stores: [
                participants_register_once_and_gate_every_message,
                a_request_reaches_each_recipient_and_the_outbox_tracks_each,
                ids_are_listed_by_their_first_characters_in_either_case,
                fetching_delivers_once_and_only_to_a_pending_recipient,
                invalid_transitions_are_refused_and_write_nothing,
                a_reason_is_required_and_threaded_back_to_the_sender,
                a_note_reply_names_the_step_that_was_taken,
                the_sender_closes_its_own_end_of_a_request,
                duplicates_return_the_original,
                an_unaddressable_send_is_refused,
                a_thread_comes_back_depth_first,
                search_filters_narrow_and_pages_walk_everything_once,
                a_search_over_many_messages_walks_them_all_newest_first,
                owed_and_waiting_lists_read_as_heads_and_envelopes_on_demand,
            ];
        );
    };
}
pub(crate) use stories;

/// What the resume packet reads: the head of every request a participant owes, oldest
/// first, then the first of its other owed messages, with the exact count of all it owes;
/// the head of every request it sent still open; and the envelopes of the ids it asks for,
/// in its order, the same as the inbox's.
pub(crate) async fn owed_and_waiting_lists_read_as_heads_and_envelopes_on_demand(store: &Store) {
    cast(store).await;
    let info = send(
        store,
        "planner",
        draft(&["exec-1"], Info, "news", "the export moved"),
    )
    .await;
    let mut requests = Vec::new();
    for i in 0..3 {
        let topic = format!("lane-{i}");
        let body = format!("fix lane {i}");
        requests.push(send(store, "planner", draft(&["exec-1"], Request, &topic, &body)).await);
    }
    let later = send(
        store,
        "planner",
        draft(&["exec-1"], Info, "news", "and again"),
    )
    .await;
    // A request no longer owed leaves both lists' heads.
    let done = &requests[1];
    store.fetch(Some(&name("exec-1")), done).await.unwrap();
    store
        .step(&name("exec-1"), done, Verb::Complete, None)
        .await
        .unwrap();
    for verb in [Verb::Complete, Verb::Archive] {
        store
            .step(&name("planner"), done, verb, None)
            .await
            .unwrap();
    }

    let (heads, total) = store.owed_heads(&name("exec-1"), 1).await.unwrap();
    let listed: Vec<&str> = heads.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(
        listed,
        [requests[0].as_str(), requests[2].as_str(), info.as_str()],
        "every request, then the first other message"
    );
    assert_eq!(total, 4, "two requests and two infos are owed");
    assert_eq!(
        (heads[1].kind, heads[1].topic.as_str(), heads[2].kind),
        (Request, "lane-2", Info)
    );
    let (all, _) = store.owed_heads(&name("exec-1"), 10).await.unwrap();
    assert_eq!(all.last().map(|h| h.id.as_str()), Some(later.as_str()));

    let waiting = store.waiting_heads(&name("planner")).await.unwrap();
    let outbox = store
        .outbox(&name("planner"), false, &Window::EVERYTHING)
        .await
        .unwrap();
    let waited: Vec<String> = waiting.iter().map(|h| h.id.clone()).collect();
    assert_eq!(waited, ids(&outbox), "the open requests the outbox lists");
    assert!(
        !waited.contains(done),
        "an archived request is not waited for"
    );
    assert!(
        waiting
            .iter()
            .zip(&outbox)
            .all(|(h, e)| h.request_status == e.request_status && h.created_at == e.created_at)
    );

    let asked = [
        requests[2].clone(),
        "m-unknown".to_owned(),
        requests[0].clone(),
    ];
    let read = store.envelopes(&asked).await.unwrap();
    let inbox = store
        .inbox(&name("exec-1"), false, &Window::EVERYTHING)
        .await
        .unwrap();
    let in_inbox = |id: &str| inbox.iter().find(|e| e.id == id).cloned().unwrap();
    assert_eq!(read, [in_inbox(&requests[2]), in_inbox(&requests[0])]);
}

/// Story 1: Participants are registered once; messages name only registered participants.
pub(crate) async fn participants_register_once_and_gate_every_message(store: &Store) {
    let added = store
        .add_participant("@local", &name("planner"), "planner", None)
        .await
        .unwrap();
    assert!(added.created);
    assert_eq!(added.participant.name, name("planner"));
    assert_eq!(added.participant.role, "planner");
    store
        .add_participant("@local", &name("exec-1"), "executor", None)
        .await
        .unwrap();

    let listed: Vec<(String, String)> = store
        .participants()
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.name.to_string(), p.role))
        .collect();
    assert_eq!(
        listed,
        [
            ("exec-1".to_owned(), "executor".to_owned()),
            ("planner".to_owned(), "planner".to_owned()),
        ]
    );
    assert_eq!(
        store.participant("planner").await.unwrap(),
        Some(added.participant.clone())
    );
    assert_eq!(store.participant("nobody").await.unwrap(), None);

    // Adding the same name with the same role again is harmless and writes nothing.
    let before = generation(store).await;
    let again = store
        .add_participant("@local", &name("planner"), "planner", None)
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.participant, added.participant);
    assert_eq!(generation(store).await, before);

    // A different role is a conflict, and the role stays what it was.
    assert_variant!(
        refused(
            store,
            store.add_participant("@local", &name("planner"), "executor", None)
        )
        .await,
        StoreError::Refused(Refusal::RoleTaken { .. })
    );
    assert_eq!(
        store.participant("planner").await.unwrap().unwrap().role,
        "planner"
    );

    // Sending as or to someone unregistered stores nothing.
    let err = refused(
        store,
        store.send(
            &name("ghost"),
            draft(&["planner"], Info, "lane", "boo"),
            WINDOW,
        ),
    )
    .await;
    assert!(
        matches!(&err, StoreError::Refused(Refusal::UnknownParticipant { name }) if name == "ghost"),
        "{err:?}"
    );
    let err = refused(
        store,
        store.send(
            &name("planner"),
            draft(&["exec-1", "ghost"], Request, "lane", "do it"),
            WINDOW,
        ),
    )
    .await;
    assert!(
        matches!(&err, StoreError::Refused(Refusal::UnknownParticipant { name }) if name == "ghost"),
        "{err:?}"
    );
    let everything = SearchQuery {
        limit: 100,
        ..SearchQuery::default()
    };
    assert!(
        store
            .search(None, &everything)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        store
            .inbox(&name("exec-1"), true, &Window::EVERYTHING)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Story 2: A request to two executors reaches each inbox; the outbox tracks each recipient
/// separately.
pub(crate) async fn a_request_reaches_each_recipient_and_the_outbox_tracks_each(store: &Store) {
    cast(store).await;
    let id = send(
        store,
        "planner",
        draft(
            &["exec-1", "exec-2"],
            Request,
            "handoff",
            "migrate the export",
        ),
    )
    .await;

    for who in ["exec-1", "exec-2"] {
        let inbox = store
            .inbox(&name(who), false, &Window::EVERYTHING)
            .await
            .unwrap();
        assert_eq!(ids(&inbox), [id.as_str()], "{who}'s inbox");
        let env = &inbox[0];
        assert_eq!(env.status_for(&name(who)), Some(Pending));
        assert_eq!(env.from, name("planner"));
        assert_eq!(env.kind, Request);
        assert_eq!(env.topic.as_str(), "handoff");
        assert_eq!(env.excerpt, "migrate the export");
        assert_eq!((env.depth, env.reply_to.as_deref()), (0, None));
        assert_eq!(env.request_status, Some(RequestStatus::Open));
    }
    assert!(
        store
            .inbox(&name("planner"), true, &Window::EVERYTHING)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .inbox(&name("observer"), true, &Window::EVERYTHING)
            .await
            .unwrap()
            .is_empty()
    );

    let outbox = store
        .outbox(&name("planner"), false, &Window::EVERYTHING)
        .await
        .unwrap();
    assert_eq!(ids(&outbox), [id.as_str()]);
    assert_eq!(
        recipients(&outbox[0]),
        [("exec-1".into(), Pending), ("exec-2".into(), Pending)]
    );
    assert_eq!(outbox[0].replies, 0);

    // One recipient fetching moves only its own status.
    store.fetch(Some(&name("exec-1")), &id).await.unwrap();
    let outbox = store
        .outbox(&name("planner"), false, &Window::EVERYTHING)
        .await
        .unwrap();
    assert_eq!(
        recipients(&outbox[0]),
        [("exec-1".into(), Delivered), ("exec-2".into(), Pending)]
    );
    let inbox = store
        .inbox(&name("exec-1"), false, &Window::EVERYTHING)
        .await
        .unwrap();
    assert_eq!(ids(&inbox), [id.as_str()], "delivered is still owed");
    assert_eq!(inbox[0].status_for(&name("exec-1")), Some(Delivered));

    // Completing takes it out of that recipient's inbox only; the sender's end stays open.
    store
        .step(&name("exec-1"), &id, Verb::Complete, None)
        .await
        .unwrap();
    assert!(
        store
            .inbox(&name("exec-1"), false, &Window::EVERYTHING)
            .await
            .unwrap()
            .is_empty()
    );
    let all = store
        .inbox(&name("exec-1"), true, &Window::EVERYTHING)
        .await
        .unwrap();
    assert_eq!(ids(&all), [id.as_str()]);
    assert_eq!(all[0].status_for(&name("exec-1")), Some(Completed));
    assert_eq!(
        ids(&store
            .inbox(&name("exec-2"), false, &Window::EVERYTHING)
            .await
            .unwrap()),
        [id.as_str()]
    );
    let outbox = store
        .outbox(&name("planner"), false, &Window::EVERYTHING)
        .await
        .unwrap();
    assert_eq!(
        recipients(&outbox[0]),
        [("exec-1".into(), Completed), ("exec-2".into(), Pending)]
    );
    assert_eq!(outbox[0].request_status, Some(RequestStatus::Open));
    assert!(
        store
            .outbox(&name("exec-1"), true, &Window::EVERYTHING)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Story 3: Fetching delivers only to a pending recipient, and only once.
pub(crate) async fn fetching_delivers_once_and_only_to_a_pending_recipient(store: &Store) {
    cast(store).await;
    let id = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "handoff", "fix the date filter"),
    )
    .await;

    // The sender, an anonymous reader and a non-party read it without delivering it.
    for reader in [Some("planner"), None, Some("observer"), Some("exec-2")] {
        let before = generation(store).await;
        let reader_name = reader.map(name);
        let fetched = store.fetch(reader_name.as_ref(), &id).await.unwrap();
        assert_eq!(fetched.status, None, "{reader:?} is not a recipient");
        assert_eq!(fetched.payload["body"], "fix the date filter");
        assert_eq!(
            generation(store).await,
            before,
            "{reader:?}'s read wrote events"
        );
        assert_eq!(status(store, &id, "exec-1").await, Some(Pending));
    }

    // A recipient's status carries the time of the event that set it: the send's until
    // it moves.
    let sent_at = store.events_about(&id, "message.sent").await.unwrap()[0].at;
    assert_eq!(envelope(store, &id).await.to[0].changed_at, sent_at);
    clock_passes(sent_at).await;

    // The recipient's first fetch delivers it: one event, by the recipient.
    let before = generation(store).await;
    let fetched = store.fetch(Some(&name("exec-1")), &id).await.unwrap();
    assert_eq!(fetched.status, Some(Delivered));
    assert_eq!(
        fetched.envelope.status_for(&name("exec-1")),
        Some(Delivered)
    );
    assert_eq!(fetched.payload["body"], "fix the date filter");
    assert_eq!(generation(store).await, before + 1);
    let events = store.events(before, 10).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].actor, "exec-1");
    assert_eq!(events[0].change.kind(), "delivery.changed");
    assert_eq!(events[0].change.subject(), id);
    assert!(events[0].at > sent_at);
    assert_eq!(fetched.envelope.to[0].changed_at, events[0].at);
    assert_eq!(envelope(store, &id).await.to[0].changed_at, events[0].at);

    // A re-read is not a new fact.
    let fetched = store.fetch(Some(&name("exec-1")), &id).await.unwrap();
    assert_eq!(fetched.status, Some(Delivered));
    assert_eq!(generation(store).await, before + 1);

    // Nor does re-reading a finished delivery reopen it.
    store
        .step(&name("exec-1"), &id, Verb::Complete, None)
        .await
        .unwrap();
    let after_complete = generation(store).await;
    let fetched = store.fetch(Some(&name("exec-1")), &id).await.unwrap();
    assert_eq!(fetched.status, Some(Completed));
    assert_eq!(generation(store).await, after_complete);
}

/// Story 4: A step the lifecycle forbids is refused with the current status and what is
/// allowed, and writes nothing.
pub(crate) async fn invalid_transitions_are_refused_and_write_nothing(store: &Store) {
    cast(store).await;
    let exec = name("exec-1");
    let request = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "t", "a request"),
    )
    .await;
    let info = send(store, "planner", draft(&["exec-1"], Info, "t", "an info")).await;

    // Acknowledging an unread request: fetch it first.
    let t = transition_error(refused(store, store.step(&exec, &request, Verb::Ack, None)).await);
    assert_eq!(t.status, "pending");
    assert!(allowed(&t).contains(&"show"), "{t}");
    assert!(!allowed(&t).contains(&"ack"), "{t}");
    assert_eq!(status(store, &request, "exec-1").await, Some(Pending));

    // An info is acknowledged, never completed or handed back; nothing is archived unread.
    store.fetch(Some(&exec), &info).await.unwrap();
    let t = transition_error(refused(store, store.step(&exec, &info, Verb::Complete, None)).await);
    assert_eq!(t.status, "delivered");
    assert!(allowed(&t).contains(&"ack"), "{t}");
    let t = transition_error(
        refused(
            store,
            store.step(&exec, &info, Verb::HandBack, Some("no reply is posted")),
        )
        .await,
    );
    assert_eq!(t.status, "delivered");
    let t = transition_error(refused(store, store.step(&exec, &info, Verb::Archive, None)).await);
    assert_eq!(t.status, "delivered");
    assert_eq!(status(store, &info, "exec-1").await, Some(Delivered));

    // A delivered request is discharged, not acknowledged, and not archived before that.
    store.fetch(Some(&exec), &request).await.unwrap();
    for verb in [Verb::Ack, Verb::Archive] {
        let t = transition_error(refused(store, store.step(&exec, &request, verb, None)).await);
        assert_eq!(t.status, "delivered");
        assert_eq!(allowed(&t), ["refuse", "complete", "hand_back"]);
    }

    // Final statuses allow only what the table lists.
    store.step(&exec, &info, Verb::Ack, None).await.unwrap();
    assert_eq!(status(store, &info, "exec-1").await, Some(Acknowledged));
    let t = transition_error(refused(store, store.step(&exec, &info, Verb::Ack, None)).await);
    assert_eq!((t.status, allowed(&t)), ("acknowledged", vec!["archive"]));
    store.step(&exec, &info, Verb::Archive, None).await.unwrap();
    let t = transition_error(refused(store, store.step(&exec, &info, Verb::Archive, None)).await);
    assert_eq!(t.status, "archived");
    assert!(t.allowed.is_empty());
    assert_eq!(status(store, &info, "exec-1").await, Some(Archived));
}

/// Story 5: Handing back and refusing need a reason; the reason (and a completion note) is
/// posted to the sender as a threaded reply.
pub(crate) async fn a_reason_is_required_and_threaded_back_to_the_sender(store: &Store) {
    cast(store).await;
    let (exec1, exec2) = (name("exec-1"), name("exec-2"));
    let id = send(
        store,
        "planner",
        draft(
            &["exec-1", "exec-2"],
            Request,
            "handoff",
            "export the report",
        ),
    )
    .await;
    store.fetch(Some(&exec1), &id).await.unwrap();

    for note in [None, Some(""), Some("   ")] {
        assert_variant!(
            refused(store, store.step(&exec1, &id, Verb::HandBack, note)).await,
            StoreError::Refused(Refusal::Missing(Field::Reason))
        );
        assert_variant!(
            refused(store, store.step(&exec2, &id, Verb::Refuse, note)).await,
            StoreError::Refused(Refusal::Missing(Field::Reason))
        );
    }
    assert_eq!(status(store, &id, "exec-1").await, Some(Delivered));
    assert_eq!(status(store, &id, "exec-2").await, Some(Pending));

    // Handing back posts the blocker as a message in the thread, to the sender.
    let stepped = store
        .step(&exec1, &id, Verb::HandBack, Some("blocked on fixtures"))
        .await
        .unwrap();
    assert_eq!(
        (stepped.end, stepped.from, stepped.status),
        (End::Recipient, "delivered", "handed_back")
    );
    let blocker = stepped.reply.expect("a reply carrying the reason");
    let env = envelope(store, &blocker).await;
    assert_eq!(env.from, exec1);
    assert_eq!(recipients(&env), [("planner".into(), Pending)]);
    assert_eq!(env.kind, MessageType::Message);
    assert_eq!(env.topic.as_str(), "handoff");
    assert_eq!((env.reply_to.as_deref(), env.depth), (Some(id.as_str()), 1));
    let fetched = store.fetch(None, &blocker).await.unwrap();
    assert_eq!(fetched.payload["body"], "blocked on fixtures");

    // Refusing from pending does the same.
    let stepped = store
        .step(&exec2, &id, Verb::Refuse, Some("out of scope"))
        .await
        .unwrap();
    assert_eq!((stepped.from, stepped.status), ("pending", "refused"));
    let refusal = stepped.reply.expect("a reply carrying the reason");
    assert_eq!(
        envelope(store, &refusal).await.reply_to.as_deref(),
        Some(id.as_str())
    );

    let inbox = ids(&store
        .inbox(&name("planner"), false, &Window::EVERYTHING)
        .await
        .unwrap());
    assert_eq!(inbox, [blocker.clone(), refusal.clone()]);
    let thread = store.thread(&id).await.unwrap();
    assert_eq!(ids(&thread), [id.clone(), blocker, refusal]);
    assert_eq!(thread[0].replies, 2);
    let env = envelope(store, &id).await;
    assert_eq!(
        recipients(&env),
        [("exec-1".into(), HandedBack), ("exec-2".into(), Refused)]
    );

    // A completion note is posted as an info; a completion without one posts nothing.
    let noted = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "handoff", "noted"),
    )
    .await;
    store.fetch(Some(&exec1), &noted).await.unwrap();
    let stepped = store
        .step(&exec1, &noted, Verb::Complete, Some("fixed in 4f2a91c"))
        .await
        .unwrap();
    let report = stepped.reply.expect("a reply carrying the note");
    let env = envelope(store, &report).await;
    assert_eq!(env.kind, Info);
    assert_eq!(
        (env.reply_to.as_deref(), env.depth),
        (Some(noted.as_str()), 1)
    );
    assert_eq!(recipients(&env), [("planner".into(), Pending)]);
    assert_eq!(
        store.fetch(None, &report).await.unwrap().payload["body"],
        "fixed in 4f2a91c"
    );

    let quiet = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "handoff", "quiet"),
    )
    .await;
    store.fetch(Some(&exec1), &quiet).await.unwrap();
    let before = generation(store).await;
    let stepped = store
        .step(&exec1, &quiet, Verb::Complete, None)
        .await
        .unwrap();
    assert_eq!(stepped.reply, None);
    assert_eq!(generation(store).await, before + 1);
}

/// Story 5b: Whatever step a recipient's note rides on, the reply that carries it must not
/// claim a different step: either the store refuses the note (writing nothing), or the
/// reply's payload names the status that was actually reached, as it does for
/// `completed`, `refused` and `handed_back`.
pub(crate) async fn a_note_reply_names_the_step_that_was_taken(store: &Store) {
    cast(store).await;
    let exec = name("exec-1");
    let request = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "t", "a request"),
    )
    .await;
    let info = send(store, "planner", draft(&["exec-1"], Info, "t", "an info")).await;
    let refuse_me = send(store, "planner", draft(&["exec-1"], Info, "t", "refuse me")).await;
    store.fetch(Some(&exec), &request).await.unwrap();
    store.fetch(Some(&exec), &info).await.unwrap();

    let mut mislabelled = Vec::new();
    for (id, verb) in [
        (&request, Verb::Complete),
        (&refuse_me, Verb::Refuse),
        (&info, Verb::Ack),
        (&info, Verb::Archive),
        (&request, Verb::Archive),
    ] {
        let before = generation(store).await;
        match store.step(&exec, id, verb, Some("a note")).await {
            Err(StoreError::Refused(r))
                if r.kind() == RefusalKind::Invalid && !matches!(r, Refusal::Transition(_)) =>
            {
                let after = generation(store).await;
                assert_eq!(after, before, "a refused note wrote events");
            }
            Err(other) => panic!("{} with a note: {other:?}", step_name(verb)),
            Ok(stepped) => {
                let reply = stepped.reply.expect("a note is posted as a reply");
                let payload = store.fetch(None, &reply).await.unwrap().payload;
                let claimed: Vec<&String> = payload.keys().filter(|k| *k != "body").collect();
                if claimed != [stepped.status] || payload[stepped.status] != id.as_str() {
                    mislabelled.push(format!(
                        "`{}` moved the delivery to {} but its reply says {payload:?}",
                        step_name(verb),
                        stepped.status
                    ));
                }
            }
        }
    }
    assert!(mislabelled.is_empty(), "{mislabelled:#?}");
}

/// Story 6: The sender closes its own end of a request (complete, then archive); the other
/// steps are its recipients', and a third participant takes none.
pub(crate) async fn the_sender_closes_its_own_end_of_a_request(store: &Store) {
    cast(store).await;
    let planner = name("planner");
    let id = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "handoff", "ship it"),
    )
    .await;

    for (verb, note) in [
        (Verb::Ack, None),
        (Verb::HandBack, Some("not mine")),
        (Verb::Refuse, Some("not mine")),
    ] {
        assert_variant!(
            refused(store, store.step(&planner, &id, verb, note)).await,
            StoreError::Refused(Refusal::SenderSteps { .. })
        );
    }
    for verb in [Verb::Ack, Verb::Complete, Verb::Archive] {
        assert_variant!(
            refused(store, store.step(&name("observer"), &id, verb, None)).await,
            StoreError::Refused(Refusal::NotAParty { .. })
        );
    }
    // Its own end is completed before it is archived, and a note goes in a reply instead.
    let t = transition_error(refused(store, store.step(&planner, &id, Verb::Archive, None)).await);
    assert_eq!((t.status, allowed(&t)), ("open", vec!["complete"]));
    assert_variant!(
        refused(
            store,
            store.step(&planner, &id, Verb::Complete, Some("thanks"))
        )
        .await,
        StoreError::Refused(Refusal::SenderNote)
    );

    let stepped = store
        .step(&planner, &id, Verb::Complete, None)
        .await
        .unwrap();
    assert_eq!(
        (stepped.end, stepped.from, stepped.status, stepped.reply),
        (End::Sender, "open", "completed", None)
    );
    let env = envelope(store, &id).await;
    assert_eq!(env.request_status, Some(RequestStatus::Completed));
    assert_eq!(
        recipients(&env),
        [("exec-1".into(), Pending)],
        "independent ends"
    );
    assert_eq!(
        ids(&store
            .outbox(&planner, false, &Window::EVERYTHING)
            .await
            .unwrap()),
        [id.as_str()]
    );
    // The bounded view lists at most its limit and counts every open one.
    let (first, total) = store.waiting(&planner, 10).await.unwrap();
    assert_eq!((ids(&first), total), (vec![id.clone()], 1));
    let (first, total) = store.waiting(&planner, 0).await.unwrap();
    assert_eq!((first.len(), total), (0, 1));

    let stepped = store
        .step(&planner, &id, Verb::Archive, None)
        .await
        .unwrap();
    assert_eq!(
        (stepped.end, stepped.from, stepped.status),
        (End::Sender, "completed", "archived")
    );
    assert!(
        store
            .outbox(&planner, false, &Window::EVERYTHING)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.waiting(&planner, 10).await.unwrap().1, 0);
    let all = store
        .outbox(&planner, true, &Window::EVERYTHING)
        .await
        .unwrap();
    assert_eq!(ids(&all), [id.as_str()]);
    assert_eq!(all[0].request_status, Some(RequestStatus::Archived));
    let t = transition_error(refused(store, store.step(&planner, &id, Verb::Archive, None)).await);
    assert!(t.allowed.is_empty());

    // An info has no sender's end to close.
    let info = send(store, "planner", draft(&["exec-1"], Info, "handoff", "fyi")).await;
    assert_variant!(
        refused(store, store.step(&planner, &info, Verb::Complete, None)).await,
        StoreError::Refused(Refusal::NotARequest { .. })
    );
}

/// Story 7: A repeated send inside the window, or with a used idempotency key, returns the
/// original.
pub(crate) async fn duplicates_return_the_original(store: &Store) {
    cast(store).await;
    let planner = name("planner");
    let original = draft(&["exec-1"], Request, "dup", "do the thing");
    let first = send(store, "planner", original.clone()).await;

    let before = generation(store).await;
    let again = store
        .send(&planner, original.clone(), WINDOW)
        .await
        .unwrap();
    assert_eq!(
        again,
        Sent {
            id: first.clone(),
            duplicate: true
        }
    );
    assert_eq!(generation(store).await, before);

    // Another type, topic or parent is another message.
    let variants = [
        Draft {
            kind: Info,
            ..original.clone()
        },
        Draft {
            topic: Topic::new("other").unwrap(),
            ..original.clone()
        },
        Draft {
            reply_to: Some(first.clone()),
            ..original.clone()
        },
    ];
    for variant in variants {
        let sent = store.send(&planner, variant, WINDOW).await.unwrap();
        assert!(!sent.duplicate && sent.id != first, "{sent:?}");
    }

    // With no window, the same content is a new message.
    let before = generation(store).await;
    let sent = store.send(&planner, original.clone(), 0).await.unwrap();
    assert!(!sent.duplicate && sent.id != first, "{sent:?}");
    assert_eq!(generation(store).await, before + 1);

    // An idempotency key returns the original whatever the window.
    let keyed = Draft {
        idempotency_key: Some("k-1".into()),
        ..draft(&["exec-2"], Info, "dup", "keyed")
    };
    let key_first = store.send(&planner, keyed.clone(), 0).await.unwrap();
    assert!(!key_first.duplicate);
    for window in [0, WINDOW] {
        let before = generation(store).await;
        let again = store.send(&planner, keyed.clone(), window).await.unwrap();
        assert_eq!(
            again,
            Sent {
                id: key_first.id.clone(),
                duplicate: true
            }
        );
        assert_eq!(generation(store).await, before);
    }
    // A reused key with other content is a conflict, not a silent duplicate.
    let reused = Draft {
        payload: Payload::body("other content", DEFAULT_PAYLOAD_CAP).unwrap(),
        ..keyed.clone()
    };
    assert_variant!(
        refused(store, store.send(&planner, reused, 0)).await,
        StoreError::Refused(Refusal::KeyReused { .. })
    );
    // The key is read back with the message (the sender's documents show it); a send
    // without one has none.
    assert_eq!(
        envelope(store, &key_first.id)
            .await
            .idempotency_key
            .as_deref(),
        Some("k-1")
    );
    assert_eq!(envelope(store, &first).await.idempotency_key, None);
}

/// Story 8: A send that cannot be addressed is refused and stores nothing.
pub(crate) async fn an_unaddressable_send_is_refused(store: &Store) {
    cast(store).await;
    let planner = name("planner");
    let orphan = Draft {
        reply_to: Some("01JZZZZZZZZZZZZZZZZZZZZZZZ".into()),
        ..draft(&["exec-1"], MessageType::Message, "t", "about that")
    };
    assert_variant!(
        refused(store, store.send(&planner, orphan, WINDOW)).await,
        StoreError::Refused(Refusal::NotFound {
            record: Record::Parent,
            ..
        })
    );
    assert_variant!(
        refused(
            store,
            store.send(
                &planner,
                draft(&["exec-1", "planner"], Info, "t", "me too"),
                WINDOW
            )
        )
        .await,
        StoreError::Refused(Refusal::SelfSend { .. })
    );
    assert_variant!(
        refused(
            store,
            store.send(&planner, draft(&[], Info, "t", "anyone?"), WINDOW)
        )
        .await,
        StoreError::Refused(Refusal::Missing(Field::To))
    );
    // Nor can anyone read, step on or follow a message that does not exist.
    let missing = "01JZZZZZZZZZZZZZZZZZZZZZZZ";
    assert_variant!(
        refused(store, store.fetch(Some(&name("exec-1")), missing)).await,
        StoreError::Refused(Refusal::NotFound {
            record: Record::Message,
            ..
        })
    );
    assert_variant!(
        refused(
            store,
            store.step(&name("exec-1"), missing, Verb::Archive, None)
        )
        .await,
        StoreError::Refused(Refusal::NotFound {
            record: Record::Message,
            ..
        })
    );
    assert_variant!(
        refused(store, store.thread(missing)).await,
        StoreError::Refused(Refusal::NotFound {
            record: Record::Message,
            ..
        })
    );

    // A recipient named twice gets one delivery.
    let id = send(
        store,
        "planner",
        draft(&["exec-1", "exec-1"], Info, "t", "once"),
    )
    .await;
    assert_eq!(
        recipients(&envelope(store, &id).await),
        [("exec-1".into(), Pending)]
    );
}

/// What a prefix lookup lists: the ids of one kind in each range, byte for byte, a bounded
/// few of each, whatever the engine's collation.
pub(crate) async fn ids_are_listed_by_their_first_characters_in_either_case(store: &Store) {
    cast(store).await;
    let mut sent = Vec::new();
    for n in 0..12 {
        let body = format!("request {n}");
        sent.push(send(store, "planner", draft(&["exec-1"], Request, "csv", &body)).await);
    }
    sent.sort();
    let ids = |text: &str| {
        let spans = baton_core::id::spans(text);
        async move { store.ids(Record::Message, &spans).await.expect("the ids") }
    };
    let one = &sent[3];
    assert_eq!(ids(one).await, [one.as_str()], "the whole id, as typed");
    assert_eq!(
        ids(&one.to_lowercase()).await,
        [one.as_str()],
        "in lower case"
    );
    // Every id sent in the same second shares its first characters: a bounded few.
    let listed = ids(&one[..6].to_lowercase()).await;
    assert_eq!(listed.len(), baton_core::id::CANDIDATES + 1, "{listed:?}");
    assert_eq!(listed, sent[..listed.len()], "in order, from the first");
    assert!(ids("zz").await.is_empty());
    // Underscores and hyphens are characters like any other, not patterns.
    assert!(ids("01_").await.is_empty());
    assert!(
        store
            .ids(Record::Decision, &baton_core::id::spans("D-1"))
            .await
            .unwrap()
            .is_empty()
    );
}

/// Story 9: A thread is a tree, listed depth-first from its root with depths and reply counts.
pub(crate) async fn a_thread_comes_back_depth_first(store: &Store) {
    cast(store).await;
    let message = MessageType::Message;
    let root = send(store, "planner", draft(&["exec-1"], message, "t", "root")).await;
    let unrelated = send(store, "planner", draft(&["exec-1"], message, "t", "other")).await;
    let first = send(
        store,
        "exec-1",
        Draft {
            reply_to: Some(root.clone()),
            ..draft(&["planner"], message, "t", "first reply")
        },
    )
    .await;
    let second = send(
        store,
        "exec-2",
        Draft {
            reply_to: Some(root.clone()),
            ..draft(&["planner"], message, "t", "second reply")
        },
    )
    .await;
    // Sent last, listed third: under the first reply, not after the second.
    let nested = send(
        store,
        "planner",
        Draft {
            reply_to: Some(first.clone()),
            ..draft(&["exec-1"], message, "t", "reply to the first")
        },
    )
    .await;

    for from in [&root, &second, &nested] {
        let thread = store.thread(from).await.unwrap();
        assert_eq!(
            ids(&thread),
            [root.clone(), first.clone(), nested.clone(), second.clone()]
        );
        let shape: Vec<(u32, u32, Option<&str>)> = thread
            .iter()
            .map(|e| (e.depth, e.replies, e.reply_to.as_deref()))
            .collect();
        assert_eq!(
            shape,
            [
                (0, 2, None),
                (1, 1, Some(root.as_str())),
                (2, 0, Some(first.as_str())),
                (1, 0, Some(root.as_str())),
            ]
        );
    }
    assert_eq!(ids(&store.thread(&unrelated).await.unwrap()), [unrelated]);
}

/// One search filter, so a table of searches reads as data.
#[derive(Debug, Clone, Copy)]
enum Filter<'a> {
    Topic(&'a str),
    Kind(MessageType),
    Sender(&'a str),
    Recipient(&'a str),
    Since(Millis),
    Until(Millis),
    /// The caller's own delivery status.
    Mine(&'a str, DeliveryStatus),
    Text(&'a str),
}

/// The caller and the query (one page of up to 100) that `filters` describe.
fn search_for(filters: &[Filter<'_>]) -> (Option<Passname>, SearchQuery) {
    let mut caller = None;
    let mut q = SearchQuery {
        limit: 100,
        ..SearchQuery::default()
    };
    for filter in filters {
        match *filter {
            F::Topic(t) => q.topic = Some(t.into()),
            F::Kind(k) => q.kind = Some(k),
            F::Sender(n) => q.from = Some(n.into()),
            F::Recipient(n) => q.to = Some(n.into()),
            F::Since(t) => q.since = Some(t),
            F::Until(t) => q.until = Some(t),
            F::Mine(who, status) => (caller, q.status) = (Some(name(who)), Some(status)),
            F::Text(text) => q.text = Some(text.into()),
        }
    }
    (caller, q)
}

/// Story 10: Every search filter narrows the result; pages walk everything once, newest first.
pub(crate) async fn search_filters_narrow_and_pages_walk_everything_once(store: &Store) {
    cast(store).await;
    let exec1 = name("exec-1");
    let m1 = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "alpha", "migrate the export"),
    )
    .await;
    let m2 = send(
        store,
        "planner",
        draft(&["exec-2"], Info, "beta", "fixtures are ready"),
    )
    .await;
    clock_passes(envelope(store, &m2).await.created_at).await;
    let m3 = send(
        store,
        "exec-1",
        draft(
            &["planner"],
            MessageType::Message,
            "alpha",
            "a question about the EXPORT",
        ),
    )
    .await;
    let m4 = send(
        store,
        "planner",
        draft(&["exec-1", "exec-2"], Request, "alpha", "ship it"),
    )
    .await;
    let m5 = send(
        store,
        "exec-2",
        draft(&["exec-1"], Info, "beta", "zebra notes"),
    )
    .await;
    store.fetch(Some(&exec1), &m1).await.unwrap();
    let at3 = envelope(store, &m3).await.created_at;
    let newest_first = [&m5, &m4, &m3, &m2, &m1];

    let find = async |filters: &[Filter<'_>]| -> Vec<String> {
        let (caller, query) = search_for(filters);
        let page = store.search(caller.as_ref(), &query).await.unwrap();
        assert_eq!(page.next, None);
        ids(&page.items)
    };
    let all = find(&[]).await;
    assert_eq!(all, newest_first.map(String::clone));

    let cases: [(&[Filter], Vec<&String>); 14] = [
        (&[F::Topic("alpha")], vec![&m4, &m3, &m1]),
        (&[F::Kind(Info)], vec![&m5, &m2]),
        (&[F::Sender("planner")], vec![&m4, &m2, &m1]),
        (&[F::Recipient("exec-1")], vec![&m5, &m4, &m1]),
        (&[F::Since(at3)], vec![&m5, &m4, &m3]),
        (&[F::Until(at3)], vec![&m2, &m1]),
        (&[F::Mine("exec-1", Delivered)], vec![&m1]),
        (&[F::Mine("exec-1", Pending)], vec![&m5, &m4]),
        (&[F::Text("Export")], vec![&m3, &m1]),
        // Every word of the query starts a word of the payload, in any order and case.
        (&[F::Text("expo")], vec![&m3, &m1]),
        (&[F::Text("the QUESTION, export")], vec![&m3]),
        // Inside a word is not the start of one.
        (&[F::Text("xport")], vec![]),
        // Punctuation alone has no words: the payload's text is compared.
        (&[F::Text("\"body\":")], vec![&m5, &m4, &m3, &m2, &m1]),
        (
            &[F::Topic("alpha"), F::Kind(Request), F::Sender("planner")],
            vec![&m4, &m1],
        ),
    ];
    for (filters, want) in cases {
        let want: Vec<String> = want.into_iter().cloned().collect();
        assert_eq!(find(filters).await, want, "filtered by {filters:?}");
    }

    // Pages of two: 2, 2, 1, each message once, newest first, `next` empty at the end.
    let mut walked = Vec::new();
    let mut sizes = Vec::new();
    let mut cursor = None;
    loop {
        let query = SearchQuery {
            limit: 2,
            cursor: cursor.take(),
            ..Default::default()
        };
        let page = store.search(None, &query).await.unwrap();
        sizes.push(page.items.len());
        walked.extend(ids(&page.items));
        let Some(next) = page.next else {
            break;
        };
        assert!(sizes.len() < 5, "pagination does not end");
        cursor = Some(next);
    }
    assert_eq!(sizes, [2, 2, 1]);
    assert_eq!(walked, all);
    let exact = SearchQuery {
        limit: 5,
        ..Default::default()
    };
    assert_eq!(store.search(None, &exact).await.unwrap().next, None);

    for cursor in ["garbage", "", "c"] {
        let query = SearchQuery {
            limit: 2,
            cursor: Some(cursor.into()),
            ..Default::default()
        };
        assert_variant!(
            refused(store, store.search(None, &query)).await,
            StoreError::Refused(Refusal::Cursor { .. })
        );
    }
    // A status filter is the caller's own: without a caller it means nothing.
    let anonymous = SearchQuery {
        status: Some(Pending),
        limit: 10,
        ..Default::default()
    };
    assert_variant!(
        refused(store, store.search(None, &anonymous)).await,
        StoreError::Refused(Refusal::StatusNeedsIdentity)
    );
}

/// Story 10b: A search over more messages than one backend's recent window walks them all
/// once, newest first, whatever page size: on SQLite 150 messages are two moves of 64
/// words into the free-text index and 22 pending rows compared directly, and a page that
/// starts among the pending rows ends in the index. A word matches the same way on either
/// side, non-ASCII words included.
pub(crate) async fn a_search_over_many_messages_walks_them_all_newest_first(store: &Store) {
    cast(store).await;
    let mut sent = Vec::new();
    for i in 0..150 {
        let body = match i % 3 {
            0 => format!("export filter {i}"),
            1 => format!("Exporter note {i} über alles"),
            _ => format!("unrelated {i}"),
        };
        let topic = if i % 2 == 0 { "alpha" } else { "beta" };
        sent.push(send(store, "planner", draft(&["exec-1"], Info, topic, &body)).await);
    }
    let newest_first = |keep: &dyn Fn(usize) -> bool| -> Vec<String> {
        (0..150)
            .rev()
            .filter(|i| keep(*i))
            .map(|i| sent[i].clone())
            .collect()
    };
    let walk = async |filters: &[Filter<'_>], limit: u32| -> Vec<String> {
        let (caller, mut query) = search_for(filters);
        query.limit = limit;
        let mut walked = Vec::new();
        loop {
            let page = store.search(caller.as_ref(), &query).await.unwrap();
            assert!(page.items.len() <= limit as usize);
            walked.extend(ids(&page.items));
            let Some(next) = page.next else {
                return walked;
            };
            assert!(walked.len() <= 150, "pagination does not end");
            query.cursor = Some(next);
        }
    };
    for limit in [7, 9, 100] {
        assert_eq!(
            walk(&[F::Text("export")], limit).await,
            newest_first(&|i| i % 3 != 2),
            "pages of {limit}"
        );
    }
    assert_eq!(
        walk(&[F::Text("EXPORTER")], 10).await,
        newest_first(&|i| i % 3 == 1)
    );
    assert_eq!(
        walk(&[F::Text("üb"), F::Topic("alpha")], 8).await,
        newest_first(&|i| i % 3 == 1 && i % 2 == 0)
    );
    assert_eq!(
        walk(&[F::Text("filter 14")], 2).await,
        newest_first(&|i| i % 3 == 0 && i.to_string().starts_with("14"))
    );
    assert_eq!(walk(&[F::Text("ilter")], 5).await, Vec::<String>::new());
}
