use proptest::prelude::*;

use super::*;
use crate::authority::{Policy, TopicPattern};
use crate::order::{self, Order, OrderStatus};

fn name(n: &str) -> Passname {
    Passname::new(n).unwrap()
}

fn topic(t: &str) -> Topic {
    Topic::new(t).unwrap()
}

fn member(n: &str, role: &str) -> Participant {
    Participant {
        name: name(n),
        role: role.into(),
        added_at: 0,
        policy: None,
    }
}

fn on_topics(mut p: Participant, topics: &[&str]) -> Participant {
    let mut policy = Policy::for_role(&p.role);
    policy.topics = Some(
        topics
            .iter()
            .map(|t| TopicPattern::new(t).unwrap())
            .collect(),
    );
    p.policy = Some(policy);
    p
}

fn item(id: &str, seq: i64, deadline_at: Option<Millis>) -> Item {
    Item {
        message: id.into(),
        pool: Pool::of_role("executor"),
        from: name("planner"),
        topic: topic("lane"),
        order: None,
        deadline_at,
        seq,
        created_at: seq,
        claimed_by: None,
        claimed_at: None,
        open: true,
    }
}

fn address_problem(raw: &str) -> AddressProblem {
    match address(raw, Field::To) {
        Err(Refusal::PoolAddress { problem, .. }) => problem,
        other => panic!("{raw}: {other:?}"),
    }
}

#[test]
fn an_address_is_a_participant_or_a_role_pool_and_nothing_else() {
    assert_eq!(
        address("impl-1", Field::To),
        Ok(Address::One(name("impl-1")))
    );
    assert_eq!(
        address(" role:executor ", Field::To),
        Ok(Address::Pool(Pool::of_role("executor")))
    );
    assert_eq!(Pool::of_role("executor").to_string(), "role:executor");
    assert_eq!(address_problem("role:"), AddressProblem::NoRole);
    assert_eq!(address_problem("topic:billing"), AddressProblem::Syntax);
    assert_eq!(address_problem("team:a"), AddressProblem::Syntax);
    assert!(matches!(
        address("Not A Name", Field::OrderTo),
        Err(Refusal::Name {
            field: Field::OrderTo,
            ..
        })
    ));
}

#[test]
fn a_pool_is_sent_work_only_when_its_role_is_held_by_someone_who_may_take_it() {
    let pool = Pool::of_role("executor");
    let known = vec!["executor".to_owned(), "planner".to_owned()];
    let members = [member("impl-1", "executor")];
    assert_eq!(
        sendable(
            &pool,
            MessageType::Request,
            &topic("lane"),
            &members,
            &known
        ),
        Ok(())
    );
    let refused = |kind, members: &[Participant]| {
        sendable(&pool, kind, &topic("lane"), members, &known).unwrap_err()
    };
    assert!(matches!(
        refused(MessageType::Info, &members),
        Refusal::PoolAddress {
            problem: AddressProblem::NotARequest { .. },
            ..
        }
    ));
    assert!(matches!(
        refused(MessageType::Request, &[]),
        Refusal::PoolAddress {
            problem: AddressProblem::UnknownRole { .. },
            ..
        }
    ));
    // Every holder confined to other topics: refused as a request to one of them is.
    let elsewhere = [on_topics(member("impl-1", "executor"), &["docs"])];
    assert!(matches!(
        refused(MessageType::Request, &elsewhere),
        Refusal::Unwilling { .. }
    ));
    // One holder that may take it is enough.
    let mixed = [elsewhere[0].clone(), member("impl-2", "executor")];
    assert_eq!(
        sendable(&pool, MessageType::Request, &topic("lane"), &mixed, &known),
        Ok(())
    );
}

#[test]
fn a_claim_is_refused_once_taken_closed_or_outside_the_pool() {
    let executor = member("impl-1", "executor");
    let open = item("m1", 1, None);
    let claimed = plan_claim(Some(&open), "m1", &executor).unwrap();
    assert_eq!(claimed.by, name("impl-1"));
    assert_eq!(claimed.pool, Pool::of_role("executor"));

    let problem = |item: Option<&Item>, who: &Participant| match plan_claim(item, "m1", who) {
        Err(Refusal::Claim { problem, .. }) => problem,
        other => panic!("{other:?}"),
    };
    let mut taken = open.clone();
    taken.claimed_by = Some(name("impl-2"));
    taken.open = false;
    assert_eq!(
        problem(Some(&taken), &executor),
        ClaimProblem::Taken { by: name("impl-2") }
    );
    let mut closed = open.clone();
    closed.open = false;
    assert_eq!(problem(Some(&closed), &executor), ClaimProblem::Closed);
    assert_eq!(problem(None, &executor), ClaimProblem::NotPooled);
    let mut own = open.clone();
    own.from = name("impl-1");
    assert!(matches!(
        problem(Some(&own), &executor),
        ClaimProblem::Own { .. }
    ));
    assert!(!ready_for(&own, &executor, 0));
    assert!(matches!(
        problem(Some(&open), &member("rev", "reviewer")),
        ClaimProblem::NotInPool { .. }
    ));
    // Holding the role is not enough: the policy must let it take work on the topic.
    assert!(matches!(
        plan_claim(
            Some(&open),
            "m1",
            &on_topics(member("impl-3", "executor"), &["docs"])
        ),
        Err(Refusal::Beyond { .. })
    ));
}

#[test]
fn losing_a_race_is_retryable_and_the_rest_are_not() {
    let refusal = |problem| Refusal::Claim {
        item: "m1".into(),
        problem,
    };
    assert!(refusal(ClaimProblem::Taken { by: name("a") }).is_retryable());
    assert!(!refusal(ClaimProblem::Closed).is_retryable());
    assert_eq!(
        refusal(ClaimProblem::NotPooled).kind(),
        crate::RefusalKind::Invalid
    );
}

fn pooled_order(seq: i64, status: OrderStatus, deadline_at: Option<Millis>) -> Order {
    Order {
        id: "o1".into(),
        from: "planner".into(),
        to: "role:executor".into(),
        escalate_to: None,
        goal: String::new(),
        deadline: None,
        deadline_at,
        message: "m1".into(),
        status,
        seq,
        attempt: 0,
        log_seq: 1,
        created_at: 0,
        updated_at: 0,
        note: None,
        findings: Vec::new(),
    }
}

#[test]
fn an_order_is_claimed_at_the_seq_its_claimant_read_and_only_while_offered() {
    let by = name("impl-1");
    let offered = pooled_order(1, OrderStatus::Offered, None);
    let claim = order::plan_claim(&offered, &by, Some(1), 5).unwrap();
    assert_eq!((claim.seq, claim.by.as_str()), (2, "impl-1"));
    assert_eq!(order::plan_claim(&offered, &by, None, 5).unwrap().seq, 2);
    assert!(matches!(
        order::plan_claim(&offered, &by, Some(0), 5),
        Err(Refusal::Moved {
            expected: 0,
            seq: 1,
            ..
        })
    ));
    let past = pooled_order(1, OrderStatus::Offered, Some(4));
    assert!(matches!(
        order::plan_claim(&past, &by, None, 5),
        Err(Refusal::Claim {
            problem: ClaimProblem::Closed,
            ..
        })
    ));
    let cancelled = pooled_order(2, OrderStatus::Cancelled, None);
    assert!(order::plan_claim(&cancelled, &by, None, 5).is_err());
    // The fold makes the claimant the worker; a worker's step before any claim is refused.
    let change = crate::order::OrderChange::Claimed(Box::new(claim));
    let folded = order::fold(Some(offered.clone()), &change, 2, 6).unwrap();
    assert_eq!((folded.to.as_str(), folded.seq), ("impl-1", 2));
    assert!(matches!(
        order::plan(&offered, "impl-1", order::OrderRequest::Accept, 1, 5),
        Err(Refusal::Unclaimed { .. })
    ));
    assert!(order::plan(&folded, "impl-1", order::OrderRequest::Accept, 2, 6).is_ok());
}

#[test]
fn next_takes_the_soonest_deadline_then_the_oldest_send() {
    let executor = member("impl-1", "executor");
    let items = [
        item("old-no-deadline", 1, None),
        item("late", 2, Some(900)),
        item("soon", 3, Some(500)),
        item("soon-but-newer", 4, Some(500)),
    ];
    let pick = |items: &[Item], now| {
        by_urgency(items, &executor, now)
            .first()
            .map(|i| i.message.clone())
    };
    assert_eq!(pick(&items, 100).as_deref(), Some("soon"));
    // Past its deadline an order has expired: it is not ready.
    assert_eq!(pick(&items, 600).as_deref(), Some("late"));
    assert_eq!(pick(&items, 1000).as_deref(), Some("old-no-deadline"));
    // Claimed, closed, another pool's, or beyond the caller's topics: not ready.
    let mut others = items.to_vec();
    for i in &mut others {
        i.open = false;
    }
    assert_eq!(pick(&others, 100), None);
    let reviewer = member("rev", "reviewer");
    assert!(by_urgency(&items, &reviewer, 100).is_empty());
    let confined = on_topics(member("impl-2", "executor"), &["docs"]);
    assert!(by_urgency(&items, &confined, 100).is_empty());
}

proptest! {
    /// Whatever the items, every ready one is listed, and none after a less urgent one.
    #[test]
    fn next_never_passes_over_a_more_urgent_ready_item(
        specs in proptest::collection::vec((proptest::option::of(0i64..50), any::<bool>()), 0..20),
        now in 0i64..50,
    ) {
        let executor = member("impl-1", "executor");
        let items: Vec<Item> = specs
            .iter()
            .enumerate()
            .map(|(n, (deadline, open))| {
                let mut i = item(&format!("m{n}"), n as i64 + 1, *deadline);
                i.open = *open;
                i
            })
            .collect();
        let ready = by_urgency(&items, &executor, now);
        prop_assert_eq!(
            ready.len(),
            items.iter().filter(|i| ready_for(i, &executor, now)).count()
        );
        for pair in ready.windows(2) {
            prop_assert!(urgency(pair[0]) <= urgency(pair[1]));
        }
    }
}
