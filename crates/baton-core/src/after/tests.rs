use serde_json::json;

use super::*;
use crate::order::{Created, fold};
use OrderAction as A;
use OrderStatus as S;

const NOW: Millis = 1_735_700_000_000; // 2025-01-01T02:53:20Z, before every deadline here

/// An order `id` from the planner to impl-1, waiting on `after`, recorded `status`.
fn order(id: &str, after: &[&str], status: S) -> Order {
    let mut created = Created::from_document(
        &json!({"id": id, "from": "planner", "to": "impl-1", "goal": "g",
                "deadline": "2025-01-02T00:00:00Z"}),
        format!("msg-{id}"),
    )
    .unwrap();
    created.after = after.iter().map(|s| (*s).to_owned()).collect();
    let mut o = fold(None, &OrderChange::Created(Box::new(created)), 1, 1_000).unwrap();
    o.status = status;
    o
}

fn wait(id: &str, status: S) -> Wait {
    Wait {
        order: id.into(),
        status,
    }
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn an_order_with_something_to_wait_on_starts_waiting() {
    assert_eq!(order("wo_2", &["wo_1"], S::Offered).status, S::Offered);
    let created = Created::from_document(
        &json!({"id": "wo_2", "from": "planner", "to": "impl-1"}),
        "m".into(),
    )
    .map(|mut c| {
        c.after = names(&["wo_1"]);
        c
    })
    .unwrap();
    let o = fold(None, &OrderChange::Created(Box::new(created)), 1, 1).unwrap();
    assert_eq!(o.status, S::Waiting);
}

/// Creation: (named, what the store found for each, what it waits on or why not).
#[test]
fn creation_waits_on_what_is_not_yet_approved_and_refuses_the_rest() {
    let open = Some(order("wo_1", &[], S::Working));
    let approved = Some(order("wo_0", &[], S::Approved));
    let cancelled = Some(order("wo_x", &[], S::Cancelled));
    let mut expired = order("wo_e", &[], S::Working);
    expired.deadline_at = Some(NOW - 1);
    type Row<'a> = (
        &'a [&'a str],
        Vec<Option<Order>>,
        Result<Vec<String>, (usize, Problem)>,
    );
    let rows: Vec<Row> = vec![
        (&["wo_1"], vec![open.clone()], Ok(names(&["wo_1"]))),
        (
            &["wo_0", "wo_1"],
            vec![approved.clone(), open.clone()],
            Ok(names(&["wo_1"])),
        ),
        (&["wo_0"], vec![approved.clone()], Ok(vec![])),
        (&["wo_9"], vec![None], Err((0, Problem::Unknown))),
        (
            &["wo_1", "wo_x"],
            vec![open.clone(), cancelled],
            Err((1, Problem::Ended(S::Cancelled))),
        ),
        (
            &["wo_e"],
            vec![Some(expired)],
            Err((0, Problem::Ended(S::Expired))),
        ),
        (&["wo_new"], vec![None], Err((0, Problem::Itself))),
        (
            &["wo_1", "wo_1"],
            vec![open.clone(), open.clone()],
            Err((1, Problem::Repeated)),
        ),
        (&[""], vec![None], Err((0, Problem::Unknown))),
    ];
    for (named, found, want) in rows {
        let got = plan_offer("wo_new", &names(named), &found, NOW).map_err(|r| match r {
            Refusal::After { index, problem, .. } => (index, problem),
            other => panic!("unexpected refusal {other}"),
        });
        assert_eq!(got, want, "{named:?}");
    }
    let many: Vec<String> = (0..=MAX_AFTER).map(|i| format!("wo_{i}")).collect();
    let found = vec![open; MAX_AFTER + 1];
    assert!(matches!(
        plan_offer("wo_new", &many, &found, NOW),
        Err(Refusal::After { index, problem: Problem::TooMany, .. }) if index == MAX_AFTER
    ));
}

#[test]
fn the_contract_names_its_own_bad_entries() {
    let doc = json!({"id": "wo_2", "x-baton": {"after": ["wo_1", "wo_2", "wo_1", " "]}});
    let found: Vec<(String, String)> = findings(&doc)
        .into_iter()
        .map(|f| (f.rule, f.path))
        .collect();
    assert_eq!(
        found,
        [
            ("B11".to_owned(), "/x-baton/after/1".to_owned()),
            ("B11".to_owned(), "/x-baton/after/2".to_owned()),
            ("B11".to_owned(), "/x-baton/after/3".to_owned()),
        ]
    );
    assert!(findings(&json!({"id": "wo_2", "x-baton": {"after": ["wo_1"]}})).is_empty());
    assert!(findings(&json!({"id": "wo_2"})).is_empty());
}

/// Where a waiting order stands as read: (recorded, what it waits on, read).
#[test]
fn a_dependency_that_ended_unapproved_reads_as_held() {
    let rows = [
        (S::Waiting, vec![wait("wo_1", S::Working)], S::Waiting),
        (
            S::Waiting,
            vec![wait("wo_1", S::Working), wait("wo_3", S::Declined)],
            S::Held,
        ),
        (S::Waiting, vec![wait("wo_1", S::Expired)], S::Held),
        (S::Held, vec![wait("wo_1", S::Cancelled)], S::Held),
        (S::Offered, vec![], S::Offered),
    ];
    for (recorded, waits, want) in rows {
        let o = order("wo_2", &["wo_1"], recorded);
        assert_eq!(status_at(&o, &waits, NOW), want, "{recorded} {waits:?}");
    }
}

#[test]
fn a_worker_cannot_take_an_order_not_yet_offered_and_is_told_what_it_waits_on() {
    let waits = [wait("wo_1", S::Submitted)];
    let o = order("wo_2", &["wo_1"], S::Waiting);
    for request in [
        OrderRequest::Accept,
        OrderRequest::Decline { reason: None },
        OrderRequest::Start,
    ] {
        let err = plan(&o, &waits, "impl-1", request, 1, NOW).unwrap_err();
        assert_eq!(
            err,
            Refusal::Waits {
                order: "wo_2".into(),
                held: false,
                on: waits.to_vec()
            }
        );
        assert_eq!(
            err.to_string(),
            "order wo_2 is waiting: it waits on wo_1 (submitted)"
        );
    }
    let failed = [wait("wo_1", S::Cancelled)];
    let err = plan(&o, &failed, "impl-1", OrderRequest::Accept, 1, NOW).unwrap_err();
    assert!(matches!(err, Refusal::Waits { held: true, .. }), "{err}");
    // Someone else is told who may act, as on any order.
    let err = plan(&o, &waits, "impl-2", OrderRequest::Accept, 1, NOW).unwrap_err();
    assert!(matches!(err, Refusal::OrderRole { .. }), "{err}");
    // The sender may cancel a waiting order.
    let steps = plan(
        &o,
        &waits,
        "planner",
        OrderRequest::Cancel { reason: None },
        1,
        NOW,
    )
    .unwrap();
    assert_eq!(steps[0].status, S::Cancelled);
}

fn actions(steps: &[Step]) -> Vec<(i64, A, S, S, Vec<String>)> {
    steps
        .iter()
        .map(|s| (s.seq, s.action, s.was, s.status, s.after.clone()))
        .collect()
}

#[test]
fn proceeding_drops_what_ended_and_offers_the_order_when_nothing_is_left() {
    let proceed = || OrderRequest::Proceed { after: Vec::new() };
    // Held, one ended and one still open: it goes back to waiting on the open one.
    let o = order("wo_3", &["wo_1", "wo_2"], S::Held);
    let waits = [wait("wo_1", S::Cancelled), wait("wo_2", S::Working)];
    let steps = plan(&o, &waits, "planner", proceed(), 1, NOW).unwrap();
    assert_eq!(
        actions(&steps),
        [(2, A::Proceed, S::Held, S::Waiting, names(&["wo_1"]))]
    );
    // Held on the only one: proceed, then offered.
    let waits = [wait("wo_1", S::Declined)];
    let steps = plan(&o, &waits, "planner", proceed(), 1, NOW).unwrap();
    assert_eq!(
        actions(&steps),
        [
            (2, A::Proceed, S::Held, S::Waiting, names(&["wo_1"])),
            (3, A::Release, S::Waiting, S::Offered, vec![]),
        ]
    );
    // Held only as read (the one it waits on is past its deadline): the hold is recorded.
    let o = order("wo_3", &["wo_1"], S::Waiting);
    let waits = [wait("wo_1", S::Expired)];
    let steps = plan(&o, &waits, "planner", proceed(), 1, NOW).unwrap();
    assert_eq!(
        actions(&steps),
        [
            (2, A::Hold, S::Waiting, S::Held, names(&["wo_1"])),
            (3, A::Proceed, S::Held, S::Waiting, names(&["wo_1"])),
            (4, A::Release, S::Waiting, S::Offered, vec![]),
        ]
    );
    // Nothing ended: there is nothing to decide.
    let waits = [wait("wo_1", S::Working)];
    let err = plan(&o, &waits, "planner", proceed(), 1, NOW).unwrap_err();
    assert!(matches!(err, Refusal::Transition(_)), "{err}");
    // Only the sender decides, and on a view that is current.
    let held = order("wo_3", &["wo_1"], S::Held);
    let failed = [wait("wo_1", S::Cancelled)];
    let err = plan(&held, &failed, "impl-1", proceed(), 1, NOW).unwrap_err();
    assert!(matches!(err, Refusal::OrderRole { .. }), "{err}");
    let err = plan(&held, &failed, "planner", proceed(), 0, NOW).unwrap_err();
    assert!(matches!(err, Refusal::Moved { .. }), "{err}");
}

#[test]
fn an_end_releases_or_holds_what_waits_on_it() {
    let approved = order("wo_1", &[], S::Approved);
    let declined = order("wo_1", &[], S::Declined);
    let open = order("wo_1", &[], S::Working);
    let alone = (order("wo_2", &["wo_1"], S::Waiting), vec![]);
    let with_other = (
        order("wo_3", &["wo_1", "wo_0"], S::Waiting),
        vec![wait("wo_0", S::Working)],
    );
    let held = (
        order("wo_4", &["wo_1"], S::Held),
        vec![wait("wo_9", S::Cancelled)],
    );
    // Past its own deadline it reads expired: nothing follows for it.
    let mut past = order("wo_5", &["wo_1"], S::Waiting);
    past.deadline_at = Some(NOW - 1);
    let all = [alone, with_other, held, (past, vec![])];
    let got = |ended: &Order| -> Vec<(String, A, S)> {
        follow(ended, &all, NOW)
            .into_iter()
            .map(|s| (s.order, s.action, s.status))
            .collect()
    };
    assert_eq!(
        got(&approved),
        [("wo_2".to_owned(), A::Release, S::Offered)]
    );
    assert_eq!(
        got(&declined),
        [
            ("wo_2".to_owned(), A::Hold, S::Held),
            ("wo_3".to_owned(), A::Hold, S::Held),
        ]
    );
    assert!(got(&open).is_empty());
    assert_eq!(follow(&declined, &all, NOW)[0].after, names(&["wo_1"]));
}

#[test]
fn the_pending_edges_follow_the_log() {
    let mut created = Created::from_document(
        &json!({"id": "wo_2", "from": "planner", "to": "impl-1"}),
        "m2".into(),
    )
    .unwrap();
    assert!(edits(&OrderChange::Created(Box::new(created.clone()))).is_empty());
    created.after = names(&["wo_1"]);
    assert_eq!(
        edits(&OrderChange::Created(Box::new(created))),
        [WaitEdit::Add {
            order: "wo_2".into(),
            message: "m2".into(),
            after: names(&["wo_1"])
        }]
    );
    let step = |action: A, was: S, status: S, after: &[&str]| {
        let mut s = desk_step(&order("wo_1", &[], was), action, 2, &names(after));
        s.action = action;
        s.status = status;
        OrderChange::Stepped(Box::new(s))
    };
    assert_eq!(
        edits(&step(A::Approve, S::Submitted, S::Approved, &[])),
        [
            WaitEdit::Satisfied {
                after: "wo_1".into()
            },
            WaitEdit::Clear {
                order: "wo_1".into()
            }
        ]
    );
    assert_eq!(
        edits(&step(A::Cancel, S::Waiting, S::Cancelled, &[])),
        [WaitEdit::Clear {
            order: "wo_1".into()
        }]
    );
    assert_eq!(
        edits(&step(A::Release, S::Waiting, S::Offered, &[])),
        [WaitEdit::Clear {
            order: "wo_1".into()
        }]
    );
    assert_eq!(
        edits(&step(A::Proceed, S::Held, S::Waiting, &["wo_0"])),
        [WaitEdit::Drop {
            order: "wo_1".into(),
            after: names(&["wo_0"])
        }]
    );
    assert!(edits(&step(A::Hold, S::Waiting, S::Held, &["wo_0"])).is_empty());
    assert!(edits(&step(A::Accept, S::Offered, S::Accepted, &[])).is_empty());
}
