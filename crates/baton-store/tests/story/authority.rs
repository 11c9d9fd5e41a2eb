//! Authority and keys: an action beyond a participant's authority is refused and recorded
//! once (a repeat is counted on its event), random operations keep authority's promises,
//! and a key holds only its token's hash, its last use kept beside the log.

use baton_core::DeliveryStatus::{Delivered, Pending};
use baton_core::MessageType::{Info, Request};
use baton_core::authority::{Denied, Policy, Power};
use baton_core::order::OrderRequest;
use baton_core::state::StateOp;
use baton_core::{Change, MessageType, Record, Refusal, RefusalKind};
use baton_store::{DEFAULT_BUSY_TIMEOUT, Store, StoreError, Verb};

use crate::orders::{FAR, order_doc, report_of, topic};
use crate::{
    Backend, Dice, WINDOW, assert_variant, cast, draft, envelope, generation, name, refusals,
    refused, send,
};

/// This family's stories, each run on every backend by `every_backend!` (`main.rs`).
macro_rules! stories {
    ($attrs:tt $backend:ty) => {
        crate::on_backend!($attrs $backend; authority;
            stores: [
                a_key_is_issued_revoked_alone_and_never_holds_its_token,
                an_action_beyond_authority_is_refused_and_recorded,
                a_refusal_repeated_is_counted_on_its_event_not_appended,
            ];
            backends: [
                random_operations_keep_authority_s_promises,
                a_keys_last_use_is_kept_beside_the_log,
            ];
        );
    };
}
pub(crate) use stories;

/// How many random sequences the authority story runs on each backend, and how long each
/// is.
const AUTHORITY_CASES: u64 = 24;

const AUTHORITY_STEPS: usize = 40;

/// Story (property): random operations by random participants of every role, some with
/// policies narrowed to a topic, on one store. A forbidden refusal adds exactly one event,
/// its security event; any other refusal adds nothing; and at the end every request
/// sent to a participant and not yet closed can be closed by it: completed, unless its
/// policy changed after the send (then handed back, which is always open).
pub(crate) async fn random_operations_keep_authority_s_promises<B: Backend>() {
    const WHO: [&str; 5] = ["planner", "impl-1", "rev", "own", "obs"];
    const TOPICS: [&str; 3] = ["csv-export", "billing", "work-order"];
    let mut forbidden = 0;
    let mut other_refusals = 0;
    let mut checked = 0;
    for case in 0..AUTHORITY_CASES {
        let backend = B::fresh(DEFAULT_BUSY_TIMEOUT).await;
        let store = backend.store();
        let seed = 0x9E37_79B9_7F4A_7C15 ^ (case + 1);
        let mut dice = Dice(seed);
        for (who, role) in [
            ("planner", "planner"),
            ("impl-1", "executor"),
            ("rev", "reviewer"),
            ("own", "owner"),
            ("obs", "observer"),
        ] {
            store
                .add_participant("@local", &name(who), role, None)
                .await
                .unwrap();
        }
        let mut sent: Vec<String> = Vec::new();
        // When each message was sent and each participant's policy last changed: work
        // sent after a recipient's last change must be completable by it.
        let mut sent_at: std::collections::HashMap<String, usize> = Default::default();
        let mut policy_at: std::collections::HashMap<String, usize> = Default::default();
        for step in 0..AUTHORITY_STEPS {
            let who = name(dice.pick(&WHO));
            let before = generation(store).await;
            let security = store
                .events_of_kind("security.refused", None, 500)
                .await
                .unwrap()
                .len();
            let on_record = refusals(store).await;
            let what = dice.below(8);
            let result: baton_store::Result<()> = match what {
                0 | 1 => {
                    let kind = dice.pick(&[Request, Info, MessageType::Message]);
                    let to = dice.pick(&WHO);
                    let mut d = draft(&[to], kind, dice.pick(&TOPICS), &format!("{case}-{step}"));
                    if !sent.is_empty() && dice.below(3) == 0 {
                        d.reply_to = Some(dice.pick(&sent));
                    }
                    store.send(&who, d, 0).await.map(|s| {
                        sent_at.insert(s.id.clone(), step);
                        sent.push(s.id);
                    })
                }
                2 if !sent.is_empty() => {
                    let id = dice.pick(&sent);
                    store.fetch(Some(&who), &id).await.map(drop)
                }
                3 if !sent.is_empty() => {
                    let id = dice.pick(&sent);
                    let verb = dice.pick(&[
                        Verb::Ack,
                        Verb::Complete,
                        Verb::HandBack,
                        Verb::Refuse,
                        Verb::Archive,
                    ]);
                    let note = matches!(verb, Verb::HandBack | Verb::Refuse).then_some("why");
                    store.step(&who, &id, verb, note).await.map(drop)
                }
                4 => {
                    let op = StateOp::Decide {
                        text: format!("decision {step}"),
                        why: "random".into(),
                        supersedes: None,
                    };
                    store.change_state(who.as_str(), &[op]).await.map(drop)
                }
                5 => {
                    use baton_core::gate::{GateChange, NeedSource};
                    let need = GateChange::Need {
                        id: format!("n{case}-{step}"),
                        text: "look".into(),
                        order: None,
                        source: NeedSource::Hand,
                        run: None,
                    };
                    store.record_gate(who.as_str(), &[need]).await.map(drop)
                }
                6 => {
                    // The local operator narrows someone to one topic, or restores its role's.
                    let topics = Policy::topics(&[dice.pick(&["csv-*", "billing"])]).unwrap();
                    let policy = (dice.below(2) == 0).then(|| Policy {
                        may: [Power::Send, Power::Accept, Power::Request].into(),
                        topics: Some(topics),
                    });
                    policy_at.insert(who.to_string(), step);
                    store.set_policy("@local", &who, policy).await.map(drop)
                }
                _ => Ok(()),
            };
            let after = generation(store).await;
            let security_after = store
                .events_of_kind("security.refused", None, 500)
                .await
                .unwrap()
                .len();
            let context = format!("seed {seed:#x} step {step}: {who} op {what}: {result:?}");
            match &result {
                Err(StoreError::Refused(r)) if r.kind() == RefusalKind::Forbidden => {
                    forbidden += 1;
                    // Its refusal on record: an event of its own, or a repeat counted on
                    // the one it repeats; nothing else.
                    assert_eq!(refusals(store).await, on_record + 1, "{context}");
                    assert!(
                        (after, security_after) == (before + 1, security + 1)
                            || (after, security_after) == (before, security),
                        "{context}"
                    );
                }
                Err(StoreError::Refused(_)) => {
                    other_refusals += 1;
                    assert_eq!(after, before, "{context}");
                }
                Err(e) => panic!("{context}: the store failed: {e}"),
                Ok(()) => assert_eq!(security_after, security, "{context}"),
            }
        }
        // Whatever was delivered to a participant it can close.
        for id in &sent {
            let env = envelope(store, id).await;
            if env.kind != Request {
                continue;
            }
            for recipient in &env.to {
                if !matches!(recipient.status, Pending | Delivered) {
                    continue;
                }
                let who = &recipient.name;
                // What is still pending it reads first, as it would.
                store.fetch(Some(who), id).await.unwrap();
                let changed_since = policy_at
                    .get(who.as_str())
                    .is_some_and(|at| *at >= sent_at[id.as_str()]);
                checked += 1;
                let closed = match store.step(who, id, Verb::Complete, None).await {
                    Ok(_) => Ok(()),
                    // Only a policy narrowed after the send may keep it from completing;
                    // handing back is always open.
                    Err(StoreError::Refused(Refusal::Beyond { .. })) if changed_since => store
                        .step(who, id, Verb::HandBack, Some("my policy changed"))
                        .await
                        .map(drop),
                    Err(e) => Err(e),
                };
                assert!(
                    closed.is_ok(),
                    "seed {seed:#x}: {who} cannot close {id}: {closed:?}"
                );
            }
        }
    }
    println!(
        "{AUTHORITY_CASES} cases of {AUTHORITY_STEPS} operations: {forbidden} forbidden, \
         {other_refusals} other refusals, {checked} delivered requests closed"
    );
    assert!(
        forbidden > 0 && other_refusals > 0,
        "the cases tried nothing refused"
    );
    assert!(checked > 0, "no delivered request was left to close");
}

/// Runs every story against `$backend`: `stores` take `&Store`, `backends` take the
/// backend itself; the delivery model is checked as a property test.
/// A participant refused over and over grows the log by one event: the same refusal within
/// the window is counted on it, and a different one is an event of its own.
pub(crate) async fn a_refusal_repeated_is_counted_on_its_event_not_appended(store: &Store) {
    cast(store).await;
    let before = generation(store).await;
    for _ in 0..1000 {
        store
            .send(
                &name("exec-1"),
                draft(&["planner"], Request, "lane", "ask again"),
                WINDOW,
            )
            .await
            .expect_err("an executor's request");
    }
    assert_eq!(generation(store).await, before + 1, "one event for 1,000");
    let events = store
        .events_of_kind("security.refused", None, 10)
        .await
        .unwrap();
    assert_eq!(events.len(), 1);
    let repeats = store.repeats(&[events[0].seq]).await.unwrap();
    assert_eq!(repeats.len(), 1);
    assert_eq!(repeats[0].count, 999, "the count says how many");
    assert!(repeats[0].last_at >= events[0].at);
    // Another refusal (another topic) is an event of its own, with no repeats yet.
    store
        .send(
            &name("exec-1"),
            draft(&["planner"], Request, "other-lane", "ask"),
            WINDOW,
        )
        .await
        .expect_err("an executor's request");
    let events = store
        .events_of_kind("security.refused", None, 10)
        .await
        .unwrap();
    assert_eq!(events.len(), 2);
    assert!(store.repeats(&[events[0].seq]).await.unwrap().is_empty());
}

/// Authority: what a role's default or a set policy does not allow is refused before
/// anything is written, and the refusal alone is recorded, as a security event.
pub(crate) async fn an_action_beyond_authority_is_refused_and_recorded(store: &Store) {
    cast(store).await;
    let security = |events: Vec<baton_core::Event>| -> Vec<Denied> {
        events
            .into_iter()
            .map(|e| match e.change {
                Change::Denied(d) => d,
                other => panic!("not a security event: {other:?}"),
            })
            .collect()
    };
    assert!(
        store
            .events_of_kind("security.refused", None, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // An executor does not ask for work by default; the refusal writes one event, its own.
    let before = generation(store).await;
    let err = store
        .send(
            &name("exec-1"),
            draft(&["planner"], Request, "lane", "ask 1"),
            WINDOW,
        )
        .await
        .expect_err("an executor's request");
    assert_variant!(
        err,
        StoreError::Refused(Refusal::Beyond {
            power: Power::Request,
            ..
        })
    );
    assert_eq!(
        generation(store).await,
        before + 1,
        "only the security event"
    );
    let recorded = security(
        store
            .events_of_kind("security.refused", None, 10)
            .await
            .unwrap(),
    );
    assert_eq!(recorded.len(), 1);
    assert_eq!(
        (
            recorded[0].participant.as_str(),
            recorded[0].action.as_str(),
            recorded[0].code.as_str()
        ),
        ("exec-1", "request", "forbidden")
    );
    // Information it may send.
    send(store, "exec-1", draft(&["planner"], Info, "lane", "ask 2")).await;

    // Work sent to it while it still takes work on; the policy narrows after.
    let to_it = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "lane", "ask 5"),
    )
    .await;
    store.fetch(Some(&name("exec-1")), &to_it).await.unwrap();

    // A policy reaching some topics: requests there, and nowhere else.
    let asks = Policy::for_role("executor").amend(
        Some([Power::Send, Power::Request].into()),
        Some(Policy::topics(&["billing-*"]).unwrap()),
    );
    let set = store
        .set_policy("@local", &name("exec-1"), Some(asks.clone()))
        .await
        .unwrap();
    assert_eq!(set.policy.as_ref(), Some(&asks));
    let billing = draft(&["exec-2"], Request, "billing-api", "ask 3");
    let id = send(store, "exec-1", billing).await;
    let before = generation(store).await;
    assert_variant!(
        store
            .send(
                &name("exec-1"),
                draft(&["exec-2"], Request, "lane", "ask 4"),
                WINDOW
            )
            .await
            .unwrap_err(),
        StoreError::Refused(Refusal::Beyond { .. })
    );
    assert_eq!(generation(store).await, before + 1);
    // No new work reaches it, refused at the send as the sender's attempt.
    let before = generation(store).await;
    assert_variant!(
        store
            .send(
                &name("planner"),
                draft(&["exec-1"], Request, "lane", "ask 6"),
                WINDOW
            )
            .await
            .unwrap_err(),
        StoreError::Refused(Refusal::Unwilling { .. })
    );
    assert_eq!(
        generation(store).await,
        before + 1,
        "only the security event"
    );
    // It no longer takes on work: completing what it was sent is refused.
    assert_variant!(
        store
            .step(&name("exec-1"), &to_it, Verb::Complete, None)
            .await
            .unwrap_err(),
        StoreError::Refused(Refusal::Beyond {
            power: Power::Accept,
            ..
        })
    );
    // Giving work back takes no power.
    store
        .step(
            &name("exec-1"),
            &to_it,
            Verb::HandBack,
            Some("not mine to take"),
        )
        .await
        .unwrap();
    // exec-2 completes what exec-1 asked of it.
    store.fetch(Some(&name("exec-2")), &id).await.unwrap();
    store
        .step(&name("exec-2"), &id, Verb::Complete, None)
        .await
        .unwrap();

    // Back to the role's default; setting it again changes nothing.
    store
        .set_policy("@local", &name("exec-1"), None)
        .await
        .unwrap();
    let before = generation(store).await;
    let reset = store
        .set_policy("@local", &name("exec-1"), None)
        .await
        .unwrap();
    assert_eq!((reset.policy, generation(store).await), (None, before));

    // An order's sender answers with `approve`: a planner stripped of it cannot.
    store
        .create_order(
            &name("planner"),
            topic("csv"),
            order_doc("wo_a", "planner", "exec-1", FAR),
        )
        .await
        .unwrap();
    for step in [
        OrderRequest::Accept,
        OrderRequest::Start,
        report_of("exec-1", "done"),
    ] {
        let seq = store.order("wo_a").await.unwrap().unwrap().seq;
        store
            .order_step(&name("exec-1"), "wo_a", seq, step)
            .await
            .unwrap();
    }
    let asks_only = Policy::for_role("planner").amend(Some([Power::Request].into()), None);
    store
        .set_policy("@local", &name("planner"), Some(asks_only))
        .await
        .unwrap();
    let seq = store.order("wo_a").await.unwrap().unwrap().seq;
    let before = generation(store).await;
    assert_variant!(
        store
            .order_step(&name("planner"), "wo_a", seq, OrderRequest::Approve)
            .await
            .unwrap_err(),
        StoreError::Refused(Refusal::Beyond {
            power: Power::Approve,
            ..
        })
    );
    assert_eq!(generation(store).await, before + 1);
    assert_eq!(
        store.order("wo_a").await.unwrap().unwrap().seq,
        seq,
        "the order did not move"
    );

    let all = security(
        store
            .events_of_kind("security.refused", None, 10)
            .await
            .unwrap(),
    );
    assert_eq!(all.len(), 5, "newest first: {all:?}");
    let actions: Vec<&str> = all.iter().map(|d| d.action.as_str()).collect();
    assert_eq!(
        actions,
        [
            "approve",
            "accept",
            "send a request to exec-1",
            "request",
            "request"
        ]
    );
    let older = store
        .events_of_kind(
            "security.refused",
            Some(
                store
                    .events_of_kind("security.refused", None, 1)
                    .await
                    .unwrap()[0]
                    .seq,
            ),
            10,
        )
        .await
        .unwrap();
    assert_eq!(older.len(), 4, "a page before a seq");
    // Only registered participants hold a policy.
    assert_variant!(
        store
            .set_policy("@local", &name("ghost"), None)
            .await
            .unwrap_err(),
        StoreError::Refused(Refusal::UnknownParticipant { .. })
    );
}

/// Story 23: A key is recorded for a registered participant with only its token's hash;
/// revoking it marks it alone and revoking again changes nothing; an unknown key or
/// participant is refused and writes nothing.
pub(crate) async fn a_key_is_issued_revoked_alone_and_never_holds_its_token(store: &Store) {
    use baton_core::key::{self, Scope};
    use baton_store::KeyIssue;
    cast(store).await;
    let issue = |id: &str, who: &str, token: &str| KeyIssue {
        id: id.into(),
        participant: name(who),
        scope: Scope::Write,
        hash: key::hash(token),
        expires_at: None,
    };
    let token = key::token("k1", &[9u8; 32]);
    let k1 = store
        .issue_key("@local", issue("k1", "exec-1", &token))
        .await
        .unwrap();
    assert!(key::matches(&k1, &token));
    store
        .issue_key(
            "@local",
            issue("k2", "planner", &key::token("k2", &[3u8; 32])),
        )
        .await
        .unwrap();
    assert_variant!(
        refused(store, store.issue_key("@local", issue("k3", "ghost", "t"))).await,
        StoreError::Refused(Refusal::UnknownParticipant { .. })
    );
    let revoked = store.revoke_key("@local", "k1").await.unwrap();
    assert!(revoked.revoked_at.is_some());
    let before = generation(store).await;
    store.revoke_key("@local", "k1").await.unwrap();
    assert_eq!(
        generation(store).await,
        before,
        "revoking again writes nothing"
    );
    assert_variant!(
        refused(store, store.revoke_key("@local", "k9")).await,
        StoreError::Refused(Refusal::NotFound {
            record: Record::Key,
            ..
        })
    );
    let keys = store.keys().await.unwrap();
    let live: Vec<(&str, bool)> = keys
        .iter()
        .map(|k| (k.id.as_str(), k.revoked_at.is_none()))
        .collect();
    assert_eq!(live, [("k1", false), ("k2", true)]);
    assert_eq!(
        store.key("k2").await.unwrap().unwrap().participant,
        name("planner")
    );
    let everything = store.events(0, 1000).await.unwrap();
    assert!(
        !serde_json::to_string(&everything).unwrap().contains(&token),
        "the token is never in the log"
    );
}

/// Story 23: A key's last use is kept beside the log, not in it: recording one writes no
/// event, a later use wins over an earlier one, and a rebuild of the projections keeps it.
pub(crate) async fn a_keys_last_use_is_kept_beside_the_log<B: Backend>() {
    use baton_core::key::{self, Scope};
    use baton_store::KeyIssue;
    let backend = B::fresh(DEFAULT_BUSY_TIMEOUT).await;
    let store = backend.store();
    cast(store).await;
    let issue = |id: &str| KeyIssue {
        id: id.into(),
        participant: name("exec-1"),
        scope: Scope::Write,
        hash: key::hash(id),
        expires_at: None,
    };
    store.issue_key("@local", issue("k1")).await.unwrap();
    store.issue_key("@local", issue("k2")).await.unwrap();
    let unused = store.key("k1").await.unwrap().unwrap();
    assert_eq!(unused.last_used_at, None, "issued, never used");
    let before = generation(store).await;
    store.key_used("k1", 5_000).await.unwrap();
    store.key_used("k1", 9_000).await.unwrap();
    store.key_used("k1", 7_000).await.unwrap();
    assert_eq!(generation(store).await, before, "a use is not an event");
    assert_eq!(
        store.key("k1").await.unwrap().unwrap().last_used_at,
        Some(9_000)
    );
    let uses: Vec<(String, Option<i64>)> = store
        .keys()
        .await
        .unwrap()
        .into_iter()
        .map(|k| (k.id, k.last_used_at))
        .collect();
    assert_eq!(uses, [("k1".into(), Some(9_000)), ("k2".into(), None)]);
    let live = backend.projection_dump().await;
    backend.rebuild_projections().await;
    assert_eq!(backend.projection_dump().await, live);
    assert_eq!(
        store.key("k1").await.unwrap().unwrap().last_used_at,
        Some(9_000),
        "a rebuild keeps the last use"
    );
    store.revoke_key("@local", "k1").await.unwrap();
    assert_eq!(
        store.key("k1").await.unwrap().unwrap().last_used_at,
        Some(9_000),
        "a revocation keeps it too"
    );
}
