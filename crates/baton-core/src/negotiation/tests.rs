//! The negotiation's tests: input checks at their paths, the engine's table and its
//! properties against brute force, the planners and the fold.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::engine::{Goal, Model, Pick, compare};
use super::*;
use crate::event::{Change, Event};
use crate::names::Passname;
use crate::refusal::{Record, Refusal};

fn base_spec() -> Value {
    json!({
        "id": "db-choice", "rounds": 50,
        "issues": [{"name": "db", "options": ["sqlite", "postgres"]},
                   {"name": "deploy", "options": ["single", "multi-region"]}],
        "constraints": [{"db": "sqlite", "deploy": "multi-region"}],
        "parties": [{"name": "planner", "position": "planner.json"},
                    {"name": "ops", "position": "ops.json"}],
        "note": "extra fields are allowed"
    })
}

fn planner() -> Value {
    json!({"weights": {"db": 0.7, "deploy": 0.3},
           "utilities": {"db": {"sqlite": 1, "postgres": 0.2},
                         "deploy": {"single": 1, "multi-region": 0}},
           "floor": 0.5, "comment": "ignored"})
}

fn ops() -> Value {
    json!({"weights": {"db": 0.5, "deploy": 0.5},
           "utilities": {"db": {"sqlite": 0.6, "postgres": 1},
                         "deploy": {"single": 1, "multi-region": 0.8}},
           "floor": 0.7, "veto": [{"deploy": "multi-region"}]})
}

fn set(mut v: Value, pointer: &str, to: Value) -> Value {
    *v.pointer_mut(pointer)
        .unwrap_or_else(|| panic!("{pointer}")) = to;
    v
}

fn without(mut v: Value, pointer: &str) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    v.pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .unwrap()
        .remove(key);
    v
}

fn spec(v: &Value) -> Spec {
    Spec::from_value(v).unwrap()
}

fn refused_at(r: Refusal) -> (String, Problem) {
    match r {
        Refusal::NegotiationInput { path, problem, .. } => (path, problem),
        other => panic!("expected an input refusal, got {other:?}"),
    }
}

#[test]
fn a_malformed_spec_is_refused_at_the_path_of_its_first_problem() {
    let nine: Vec<Value> = (0..9)
        .map(|i| json!({"name": format!("i{i}"), "options": ["a"]}))
        .collect();
    let wide: Vec<Value> = (0..8)
        .map(|i| json!({"name": format!("i{i}"), "options": ["a","b","c","d","e","f","g","h","i"]}))
        .collect();
    let cases: Vec<(Value, &str, Problem)> = vec![
        (json!([]), "$", Problem::Expected(Expected::Object)),
        (
            without(base_spec(), "/rounds"),
            "$.rounds",
            Problem::Missing,
        ),
        (
            set(base_spec(), "/rounds", json!("50")),
            "$.rounds",
            Problem::Expected(Expected::WholeNumber),
        ),
        (
            set(base_spec(), "/rounds", json!(0)),
            "$.rounds",
            Problem::OutOfRange(Range::Rounds),
        ),
        (
            set(base_spec(), "/rounds", json!(2.5)),
            "$.rounds",
            Problem::OutOfRange(Range::Rounds),
        ),
        (
            set(base_spec(), "/issues", json!([])),
            "$.issues",
            Problem::Empty,
        ),
        (
            set(base_spec(), "/issues", json!(nine)),
            "$.issues",
            Problem::TooMany { max: MAX_ISSUES },
        ),
        (
            set(base_spec(), "/issues", json!(wide)),
            "$.issues",
            Problem::TooManyOutcomes { max: MAX_OUTCOMES },
        ),
        (
            set(base_spec(), "/issues/0/name", json!(3)),
            "$.issues[0].name",
            Problem::Expected(Expected::String),
        ),
        (
            set(base_spec(), "/issues/1/options/1", json!("single")),
            "$.issues[1].options[1]",
            Problem::Duplicate,
        ),
        (
            set(base_spec(), "/constraints/0", json!({"dbx": "sqlite"})),
            "$.constraints[0].dbx",
            Problem::UnknownIssue,
        ),
        (
            set(base_spec(), "/constraints/0", json!({"db": "mysql"})),
            "$.constraints[0].db",
            Problem::UnknownOption { issue: "db".into() },
        ),
        (
            set(base_spec(), "/parties", json!([{"name": "ops"}])),
            "$.parties",
            Problem::TooFew { min: MIN_PARTIES },
        ),
        (
            set(base_spec(), "/parties/1/name", json!("planner")),
            "$.parties[1].name",
            Problem::Duplicate,
        ),
        (
            set(base_spec(), "/parties/1/position", json!(7)),
            "$.parties[1].position",
            Problem::Expected(Expected::String),
        ),
    ];
    for (doc, path, want) in cases {
        let (got_path, got) = refused_at(Spec::from_value(&doc).unwrap_err());
        assert_eq!((got_path.as_str(), &got), (path, &want), "{doc}");
    }
    let bad_id = set(base_spec(), "/id", json!("DB choice"));
    let (path, problem) = refused_at(Spec::from_value(&bad_id).unwrap_err());
    assert_eq!(path, "$.id");
    assert!(matches!(problem, Problem::Name(_)), "{problem:?}");
    let bad_party = set(base_spec(), "/parties/0/name", json!("Planner"));
    let (path, _) = refused_at(Spec::from_value(&bad_party).unwrap_err());
    assert_eq!(path, "$.parties[0].name");
}

#[test]
fn a_spec_run_in_one_go_needs_every_partys_position_file() {
    let files = spec(&base_spec()).position_files().unwrap();
    assert_eq!(files[1].1, "ops.json");
    let missing = spec(&without(base_spec(), "/parties/1/position"));
    let (path, problem) = refused_at(missing.position_files().unwrap_err());
    assert_eq!(
        (path.as_str(), problem),
        ("$.parties[1].position", Problem::NoPosition)
    );
}

#[test]
fn a_malformed_position_is_refused_at_its_path_without_its_values() {
    let s = spec(&base_spec());
    let cases: Vec<(Value, &str, Problem)> = vec![
        (json!("weights"), "$", Problem::Expected(Expected::Object)),
        (
            without(planner(), "/weights"),
            "$.weights",
            Problem::Missing,
        ),
        (
            set(planner(), "/weights/db", json!("heavy")),
            "$.weights.db",
            Problem::Expected(Expected::Number),
        ),
        (
            set(planner(), "/weights/db", json!(-0.25)),
            "$.weights.db",
            Problem::OutOfRange(Range::Weight),
        ),
        (
            set(planner(), "/weights", json!({"my issue": 1})),
            "$.weights[\"my issue\"]",
            Problem::UnknownIssue,
        ),
        (
            set(planner(), "/utilities/db/sqlite", json!(1.5)),
            "$.utilities.db.sqlite",
            Problem::OutOfRange(Range::Utility),
        ),
        (
            set(planner(), "/utilities/db", json!({"mysql": 1})),
            "$.utilities.db.mysql",
            Problem::UnknownOption { issue: "db".into() },
        ),
        (
            without(planner(), "/utilities/deploy"),
            "$.utilities.deploy",
            Problem::Missing,
        ),
        (without(planner(), "/floor"), "$.floor", Problem::Missing),
        (
            set(planner(), "/floor", json!(-1)),
            "$.floor",
            Problem::OutOfRange(Range::Floor),
        ),
        (
            set(ops(), "/veto/0/deploy", json!("mars")),
            "$.veto[0].deploy",
            Problem::UnknownOption {
                issue: "deploy".into(),
            },
        ),
        (
            set(ops(), "/veto/0", json!({})),
            "$.veto[0]",
            Problem::Empty,
        ),
    ];
    for (doc, path, want) in cases {
        let r = Position::from_value(&doc, &s, "planner").unwrap_err();
        let text = r.to_string();
        assert!(text.starts_with("planner's position: "), "{text}");
        for value in ["1.5", "-0.25", "heavy"] {
            assert!(!text.contains(value), "{text} echoes a value");
        }
        assert_eq!(refused_at(r), (path.to_owned(), want), "{doc}");
    }
    // An issue that weighs nothing needs no utilities; an option left out is worth 0.
    let lean = json!({"weights": {"db": 1}, "utilities": {"db": {"sqlite": 1}}, "floor": 0});
    let p = Position::from_value(&lean, &s, "planner").unwrap();
    let outcome = Choices(vec![
        ("db".into(), "postgres".into()),
        ("deploy".into(), "single".into()),
    ]);
    assert_eq!(p.utility(&s, &outcome), 0.0);
}

#[test]
fn text_that_is_not_json_names_where_it_broke() {
    let r = parse_json(
        "{\n  \"weights\": ,",
        Input::Position {
            party: "ops".into(),
        },
    );
    let (path, problem) = refused_at(r.unwrap_err());
    assert_eq!(path, "$");
    assert!(
        matches!(problem, Problem::NotJson { line: 2, .. }),
        "{problem:?}"
    );
    let r = check_size("{}", 1, Input::Spec).unwrap_err();
    assert_eq!(refused_at(r).1, Problem::TooLarge { max: 1 });
}

fn positions(list: &[(&str, Value)], s: &Spec) -> BTreeMap<String, Position> {
    list.iter()
        .map(|(name, v)| {
            (
                (*name).to_owned(),
                Position::from_value(v, s, name).unwrap(),
            )
        })
        .collect()
}

fn one_issue(rounds: u32) -> Spec {
    spec(&json!({
        "id": "pick", "rounds": rounds,
        "issues": [{"name": "x", "options": ["a", "b", "c"]}],
        "parties": [{"name": "p1"}, {"name": "p2"}]
    }))
}

fn on_x(a: f64, b: f64, c: f64, veto: Value) -> Value {
    json!({"weights": {"x": 1}, "utilities": {"x": {"a": a, "b": b, "c": c}},
           "floor": 0.5, "veto": veto})
}

fn offers(s: &Settlement) -> Vec<(u32, &str, String, Vec<Answer>)> {
    s.trail
        .iter()
        .map(|o| {
            (
                o.round,
                o.proposer.as_str(),
                o.outcome.text(),
                o.answers.values().copied().collect(),
            )
        })
        .collect()
}

use Answer::{Accept, Reject, Veto as Vetoed};

#[test]
fn the_engine_settles_each_kind_of_negotiation_as_the_table_says() {
    // A party's opening offer that every party accepts is the agreement (parties offer
    // in passname order: ops before planner).
    let s = spec(&base_spec());
    let settled = settle(
        &s,
        &positions(&[("planner", planner()), ("ops", ops())], &s),
    );
    assert_eq!(
        offers(&settled),
        [
            (
                1,
                "ops",
                "db=postgres deploy=single".into(),
                vec![Accept, Reject]
            ),
            (
                2,
                "planner",
                "db=sqlite deploy=single".into(),
                vec![Accept, Accept]
            ),
        ]
    );
    assert_eq!(
        settled.resolution,
        Resolution::Agreement {
            outcome: settled.trail[1].outcome.clone()
        }
    );

    // Openings rejected, a zone between them: the mediator proposes it.
    let s = one_issue(50);
    let mediated = settle(
        &s,
        &positions(
            &[
                ("p1", on_x(1.0, 0.6, 0.0, json!([]))),
                ("p2", on_x(0.0, 0.6, 1.0, json!([]))),
            ],
            &s,
        ),
    );
    assert_eq!(
        offers(&mediated),
        [
            (1, "p1", "x=a".into(), vec![Accept, Reject]),
            (2, "p2", "x=c".into(), vec![Reject, Accept]),
            (3, MEDIATOR, "x=b".into(), vec![Accept, Accept]),
        ]
    );

    // The same with a round limit of two: the limit ends it first.
    let s = one_issue(2);
    let limited = settle(
        &s,
        &positions(
            &[
                ("p1", on_x(1.0, 0.6, 0.0, json!([]))),
                ("p2", on_x(0.0, 0.6, 1.0, json!([]))),
            ],
            &s,
        ),
    );
    assert_eq!(limited.trail.len(), 2);
    assert!(matches!(
        limited.resolution,
        Resolution::WalkAway {
            ended: Ended::RoundLimit,
            ..
        }
    ));

    // A veto closes the only zone: walk away, naming the issue and who vetoed what.
    let s = one_issue(50);
    let vetoed = settle(
        &s,
        &positions(
            &[
                ("p1", on_x(0.6, 1.0, 0.0, json!([]))),
                ("p2", on_x(0.0, 0.9, 1.0, json!([{"x": "b"}]))),
            ],
            &s,
        ),
    );
    assert_eq!(
        offers(&vetoed),
        [
            (1, "p1", "x=b".into(), vec![Accept, Vetoed]),
            (2, "p2", "x=c".into(), vec![Reject, Accept]),
        ]
    );
    assert_eq!(
        vetoed.resolution,
        Resolution::WalkAway {
            ended: Ended::NoZone,
            unsettled: vec!["x".into()],
            vetoes: vec![Veto {
                party: "p2".into(),
                vetoed: Choices(vec![("x".into(), "b".into())]),
            }],
        }
    );
}

#[test]
fn what_is_stored_of_a_settlement_holds_no_weight_utility_or_floor() {
    let s = spec(&base_spec());
    let settled = settle(
        &s,
        &positions(&[("planner", planner()), ("ops", ops())], &s),
    );
    let change = Change::Negotiation(NegotiationChange::Settled {
        negotiation: "db-choice".into(),
        settlement: settled,
    });
    let text = change.data().to_string();
    for word in [
        "weight", "utilit", "floor", "0.7", "0.3", "0.5", "0.2", "0.8",
    ] {
        assert!(!text.contains(word), "{word} in {text}");
    }
    assert_eq!(
        Change::from_parts(change.kind(), change.data()).unwrap(),
        change
    );
    assert_eq!(change.subject(), "db-choice");
}

fn event(seq: i64, change: Change) -> Event {
    Event {
        seq,
        id: format!("e{seq}"),
        at: seq,
        actor: "@local".into(),
        change,
    }
}

fn name(s: &str) -> Passname {
    Passname::new(s).unwrap()
}

/// Every party of `spec`, as the participants it names.
fn everyone(spec: &Spec) -> Vec<Passname> {
    spec.parties.iter().map(|p| p.name.clone()).collect()
}

/// Opens `spec` (every party registered) after `before`, and submits `positions` in
/// the given order, each party its own, through the planners.
fn sitting(
    before: Option<Negotiation>,
    spec_value: &Value,
    submissions: &[(String, Value)],
) -> Negotiation {
    let spec = Spec::from_value(spec_value).unwrap();
    let registered = everyone(&spec);
    let opened = plan_open(before.as_ref(), spec, &registered).unwrap();
    let seq = before.as_ref().map_or(1, |b| b.log_seq + 10);
    let mut n = Negotiation::fold(before, &event(seq, opened));
    let id = n.as_ref().unwrap().id().to_owned();
    for (party, position) in submissions {
        for change in plan_submit(n.as_ref(), &id, Some(party), &name(party), position).unwrap() {
            let seq = n.as_ref().unwrap().log_seq + 1;
            n = Negotiation::fold(n, &event(seq, change));
        }
    }
    n.unwrap()
}

/// Opens `spec` and submits `positions` in the given order, through the planners.
fn through_planners(spec_value: &Value, submissions: &[(String, Value)]) -> Negotiation {
    sitting(None, spec_value, submissions)
}

#[test]
fn submissions_are_refused_when_they_cannot_count() {
    let open = through_planners(&base_spec(), &[("ops".into(), ops())]);
    assert_eq!(open.status(), Status::Open);
    assert_eq!(open.waiting_for(), [&name("planner")]);
    let cases: Vec<(Option<&Negotiation>, &str, Value, RefusalKindOf)> = vec![
        (None, "planner", planner(), RefusalKindOf::NotFound),
        (Some(&open), "owner", planner(), RefusalKindOf::NotAParty),
        (Some(&open), "ops", ops(), RefusalKindOf::Twice),
        (
            Some(&open),
            "planner",
            json!({"weights": 1}),
            RefusalKindOf::Input,
        ),
    ];
    for (current, party, position, want) in cases {
        let r =
            plan_submit(current, "db-choice", Some(party), &name(party), &position).unwrap_err();
        assert_eq!(RefusalKindOf::of(&r), want, "{r}");
    }
    let r = plan_submit(
        Some(&open),
        "db-choice",
        Some("ops"),
        &name("planner"),
        &planner(),
    )
    .unwrap_err();
    assert_eq!(RefusalKindOf::of(&r), RefusalKindOf::ForAnother);
    let settled = through_planners(
        &base_spec(),
        &[("ops".into(), ops()), ("planner".into(), planner())],
    );
    assert_eq!(settled.status(), Status::Agreement);
    let r = plan_submit(
        Some(&settled),
        "db-choice",
        Some("ops"),
        &name("ops"),
        &ops(),
    )
    .unwrap_err();
    assert_eq!(RefusalKindOf::of(&r), RefusalKindOf::Settled);
    let r = plan_open(
        Some(&open),
        spec(&base_spec()),
        &everyone(&spec(&base_spec())),
    )
    .unwrap_err();
    assert_eq!(
        r,
        Refusal::NegotiationExists {
            id: "db-choice".into()
        }
    );
}

/// [`base_spec`] with ops declared external.
fn external_ops() -> Value {
    let mut v = base_spec();
    v["parties"][1]["external"] = json!(true);
    v
}

#[test]
fn a_party_is_a_participant_unless_declared_external() {
    let s = spec(&base_spec());
    let r = plan_open(None, s.clone(), &[name("planner")]).unwrap_err();
    assert_eq!(
        refused_at(r),
        ("$.parties[1].name".to_owned(), Problem::Unregistered)
    );
    let external = external_ops();
    assert!(plan_open(None, spec(&external), &[name("planner")]).is_ok());
    let r = Spec::from_value(&{
        let mut v = base_spec();
        v["parties"][1]["external"] = json!("yes");
        v
    });
    assert_eq!(
        refused_at(r.unwrap_err()),
        (
            "$.parties[1].external".to_owned(),
            Problem::Expected(Expected::Boolean)
        )
    );
}

#[test]
fn a_participant_submits_an_external_partys_position_for_it() {
    let external = external_ops();
    let opened = plan_open(None, spec(&external), &[name("planner")]).unwrap();
    let n = Negotiation::fold(None, &event(1, opened));
    let changes = plan_submit(
        n.as_ref(),
        "db-choice",
        Some("planner"),
        &name("ops"),
        &ops(),
    );
    assert!(changes.is_ok(), "{changes:?}");
}

#[test]
fn a_settled_negotiation_opens_again_under_its_id_keeping_what_came_before() {
    let both = [("ops".into(), ops()), ("planner".into(), planner())];
    let first = through_planners(&base_spec(), &both);
    assert_eq!(first.status(), Status::Agreement);
    let again = sitting(Some(first.clone()), &base_spec(), &[]);
    assert_eq!(again.status(), Status::Open);
    assert_eq!(again.waiting_for().len(), 2, "positions start afresh");
    assert_eq!(again.earlier.len(), 1);
    assert_eq!(
        Some(&again.earlier[0].settlement),
        first.settlement.as_ref()
    );
    let settled = sitting(Some(first), &base_spec(), &both);
    assert_eq!(settled.status(), Status::Agreement);
    assert_eq!(settled.earlier.len(), 1);
}

#[derive(Debug, PartialEq)]
enum RefusalKindOf {
    NotFound,
    NotAParty,
    Twice,
    Settled,
    Input,
    ForAnother,
}

impl RefusalKindOf {
    fn of(r: &Refusal) -> Self {
        match r {
            Refusal::NotFound {
                record: Record::Negotiation,
                ..
            } => Self::NotFound,
            Refusal::NotANegotiator { .. } => Self::NotAParty,
            Refusal::PositionSubmitted { .. } => Self::Twice,
            Refusal::NegotiationSettled { .. } => Self::Settled,
            Refusal::NegotiationInput { .. } => Self::Input,
            Refusal::OwnPosition { .. } => Self::ForAnother,
            other => panic!("unexpected {other:?}"),
        }
    }
}

// ---- properties over random small instances ---------------------------------------------

const NAMES: [&str; 4] = ["ann", "bob", "cy", "dee"];

/// A small random negotiation as JSON: the spec and each party's position.
#[derive(Debug, Clone)]
struct Instance {
    spec: Value,
    positions: Vec<(String, Value)>,
}

fn weight() -> impl Strategy<Value = f64> {
    prop_oneof![Just(0.0), Just(0.5), Just(1.0), Just(2.0), 0.0..2.0f64]
}

fn utility() -> impl Strategy<Value = f64> {
    prop_oneof![Just(0.0), Just(0.25), Just(0.5), Just(1.0), 0.0..=1.0f64]
}

fn floor() -> impl Strategy<Value = f64> {
    prop_oneof![Just(0.0), Just(0.5), Just(1.0), Just(1.5), 0.0..3.0f64]
}

/// A partial outcome: each issue named with probability one half (maybe none).
fn partial(sizes: &[usize]) -> Vec<BoxedStrategy<Option<usize>>> {
    sizes
        .iter()
        .map(|&m| prop::option::weighted(0.4, 0..m).boxed())
        .collect()
}

fn clause_json(picks: &[Option<usize>]) -> Option<Value> {
    let map: Map<String, Value> = picks
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.map(|j| (format!("i{i}"), json!(format!("o{j}")))))
        .collect();
    (!map.is_empty()).then_some(Value::Object(map))
}

fn instance() -> impl Strategy<Value = Instance> {
    (
        prop::collection::vec(1usize..=4, 1..=4),
        2usize..=4,
        1u32..=6,
    )
        .prop_flat_map(|(sizes, n, rounds)| {
            let position = (
                prop::collection::vec(weight(), sizes.len()),
                sizes
                    .iter()
                    .map(|&m| prop::collection::vec(utility(), m))
                    .collect::<Vec<_>>(),
                floor(),
                prop::collection::vec(partial(&sizes), 0..=2),
            );
            (
                Just(sizes.clone()),
                Just(rounds),
                prop::collection::vec(partial(&sizes), 0..=2),
                prop::collection::vec(position, n),
            )
        })
        .prop_map(|(sizes, rounds, constraints, positions)| {
            let issues: Vec<Value> = sizes
                .iter()
                .enumerate()
                .map(|(i, &m)| {
                    json!({"name": format!("i{i}"),
                           "options": (0..m).map(|j| format!("o{j}")).collect::<Vec<_>>()})
                })
                .collect();
            let constraints: Vec<Value> =
                constraints.iter().filter_map(|c| clause_json(c)).collect();
            let parties: Vec<Value> = (0..positions.len())
                .map(|p| json!({"name": NAMES[p]}))
                .collect();
            let spec = json!({"id": "prop", "rounds": rounds, "issues": issues,
                              "constraints": constraints, "parties": parties});
            let positions = positions
                .into_iter()
                .enumerate()
                .map(|(p, (weights, utilities, floor, vetoes))| {
                    let weights: Map<String, Value> = weights
                        .iter()
                        .enumerate()
                        .map(|(i, w)| (format!("i{i}"), json!(w)))
                        .collect();
                    let utilities: Map<String, Value> = utilities
                        .iter()
                        .enumerate()
                        .map(|(i, us)| {
                            let per: Map<String, Value> = us
                                .iter()
                                .enumerate()
                                .map(|(j, u)| (format!("o{j}"), json!(u)))
                                .collect();
                            (format!("i{i}"), Value::Object(per))
                        })
                        .collect();
                    let veto: Vec<Value> = vetoes.iter().filter_map(|v| clause_json(v)).collect();
                    (
                        NAMES[p].to_owned(),
                        json!({"weights": weights, "utilities": utilities,
                               "floor": floor, "veto": veto}),
                    )
                })
                .collect();
            Instance { spec, positions }
        })
}

impl Instance {
    fn parsed(&self) -> (Spec, BTreeMap<String, Position>) {
        let spec = Spec::from_value(&self.spec).expect("a generated spec is valid");
        let positions = self
            .positions
            .iter()
            .map(|(name, v)| {
                let p = Position::from_value(v, &spec, name).expect("a valid position");
                (name.clone(), p)
            })
            .collect();
        (spec, positions)
    }
}

/// Every outcome of `spec`, by brute force.
fn outcomes(spec: &Spec) -> Vec<Choices> {
    let mut all = vec![Choices::default()];
    for issue in &spec.issues {
        all = all
            .into_iter()
            .flat_map(|c| {
                issue.options.iter().map(move |o| {
                    let mut next = c.clone();
                    next.0.push((issue.name.clone(), o.clone()));
                    next
                })
            })
            .collect();
    }
    all
}

fn feasible(spec: &Spec, o: &Choices) -> bool {
    !spec.constraints.iter().any(|c| c.matched_by(o))
}

/// The zone of agreement: feasible outcomes every party accepts.
fn zone(spec: &Spec, positions: &BTreeMap<String, Position>) -> Vec<Choices> {
    outcomes(spec)
        .into_iter()
        .filter(|o| feasible(spec, o))
        .filter(|o| {
            positions
                .values()
                .all(|p| p.answer(spec, o) == Answer::Accept)
        })
        .collect()
}

/// Every outcome as the search's picks, in the spec's order.
fn picks(model: &Model) -> Vec<Pick> {
    let mut all = vec![[0u8; MAX_ISSUES]];
    for (i, &m) in model.sizes.iter().enumerate() {
        all = all
            .into_iter()
            .flat_map(|p| {
                (0..m as u8).map(move |j| {
                    let mut next = p;
                    next[i] = j;
                    next
                })
            })
            .collect();
    }
    all
}

/// The best outcome for `goal` by brute force: the highest rank, ties to the first.
fn brute_force(model: &Model, goal: Goal<'_>) -> Option<Pick> {
    let mut best: Option<(Vec<f64>, Pick)> = None;
    for pick in picks(model) {
        let outcome = model.choices(&pick);
        if !feasible(model.spec, &outcome) {
            continue;
        }
        let admitted = match goal {
            Goal::Offer { proposer, offered } => {
                !offered.contains(&pick)
                    && model.bidders[proposer].position.vetoed(&outcome).is_none()
            }
            Goal::Mediate => model
                .bidders
                .iter()
                .all(|b| b.position.answer(model.spec, &outcome) == Answer::Accept),
        };
        if !admitted {
            continue;
        }
        let u: Vec<f64> = model
            .bidders
            .iter()
            .map(|b| b.position.utility(model.spec, &outcome))
            .collect();
        let (mut rank, mut scratch) = (Vec::new(), Vec::new());
        model.rank(goal, &u, &mut rank, &mut scratch);
        if best
            .as_ref()
            .is_none_or(|(b, _)| compare(&rank, b) == Ordering::Greater)
        {
            best = Some((rank, pick));
        }
    }
    best.map(|(_, pick)| pick)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn the_search_finds_what_brute_force_ranks_first(inst in instance()) {
        let (spec, positions) = inst.parsed();
        let model = Model::new(&spec, &positions);
        prop_assert_eq!(model.search(Goal::Mediate), brute_force(&model, Goal::Mediate));
        let first = picks(&model)[0];
        for proposer in 0..model.bidders.len() {
            for offered in [&[][..], &[first][..]] {
                let goal = Goal::Offer { proposer, offered };
                prop_assert_eq!(model.search(goal), brute_force(&model, goal));
            }
        }
    }

    #[test]
    fn the_same_spec_and_positions_settle_the_same_whatever_the_order(
        inst in instance(),
        rotate in 0usize..4,
        reverse in any::<bool>(),
    ) {
        let mut submissions = inst.positions.clone();
        let forward = through_planners(&inst.spec, &submissions).settlement.unwrap();
        let len = submissions.len();
        submissions.rotate_left(rotate % len);
        if reverse {
            submissions.reverse();
        }
        let mut shuffled_spec = inst.spec.clone();
        let parties = shuffled_spec["parties"].as_array_mut().unwrap();
        let len = parties.len();
        parties.rotate_left(rotate % len);
        if !reverse {
            parties.reverse();
        }
        let again = through_planners(&shuffled_spec, &submissions).settlement.unwrap();
        prop_assert_eq!(forward, again);
    }

    #[test]
    fn every_settlement_is_safe_rational_efficient_and_walks_away_only_when_it_must(
        inst in instance(),
    ) {
        let (spec, positions) = inst.parsed();
        let settled = settle(&spec, &positions);
        let zone = zone(&spec, &positions);

        // The trail: numbered rounds within the limit, every party answers every offer
        // as its position says, and no offer breaches a hard constraint (safety).
        prop_assert!(settled.trail.len() <= spec.rounds as usize);
        for (i, offer) in settled.trail.iter().enumerate() {
            prop_assert_eq!(offer.round as usize, i + 1);
            prop_assert!(feasible(&spec, &offer.outcome), "offer {} breaches a constraint", offer.round);
            prop_assert_eq!(offer.answers.len(), positions.len());
            for (party, p) in &positions {
                prop_assert_eq!(offer.answers[party], p.answer(&spec, &offer.outcome));
            }
        }

        match &settled.resolution {
            Resolution::Agreement { outcome } => {
                // Individual rationality: every floor met, no veto matched.
                for p in positions.values() {
                    prop_assert_eq!(p.answer(&spec, outcome), Answer::Accept);
                }
                prop_assert_eq!(&settled.trail.last().unwrap().outcome, outcome);
                // Efficiency: no feasible outcome nobody vetoes is at least as good for
                // every party and better for one.
                let u: Vec<f64> = positions.values().map(|p| p.utility(&spec, outcome)).collect();
                for other in outcomes(&spec) {
                    if !feasible(&spec, &other) || positions.values().any(|p| p.vetoed(&other).is_some()) {
                        continue;
                    }
                    let v: Vec<f64> = positions.values().map(|p| p.utility(&spec, &other)).collect();
                    let dominates = v.iter().zip(&u).all(|(a, b)| a >= b)
                        && v.iter().zip(&u).any(|(a, b)| a > b);
                    prop_assert!(!dominates, "{} dominates {}", other.text(), outcome.text());
                }
            }
            Resolution::WalkAway { ended, unsettled, .. } => {
                prop_assert!(!unsettled.is_empty());
                match ended {
                    Ended::NoZone => prop_assert!(zone.is_empty(), "a zone existed"),
                    Ended::RoundLimit => {
                        prop_assert!(!zone.is_empty());
                        prop_assert_eq!(settled.trail.len(), spec.rounds as usize);
                    }
                }
            }
        }
        // Walk away exactly when there is no zone, or the limit ends it first: with
        // room for every party's offer and the mediator's, a zone means agreement.
        if zone.is_empty() {
            let no_zone = matches!(settled.resolution, Resolution::WalkAway { ended: Ended::NoZone, .. });
            prop_assert!(no_zone);
        } else if spec.rounds as usize > positions.len() {
            let agreed = matches!(settled.resolution, Resolution::Agreement { .. });
            prop_assert!(agreed);
        }
    }
}
