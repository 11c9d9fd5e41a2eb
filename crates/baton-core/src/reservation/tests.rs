use proptest::prelude::*;

use super::*;

fn glob(text: &str) -> PathGlob {
    PathGlob::new(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn name(n: &str) -> Passname {
    Passname::new(n).unwrap()
}

fn held(
    id: &str,
    holder: &str,
    path: &str,
    exclusive: bool,
    at: Millis,
    ttl: Millis,
) -> Reservation {
    Reservation {
        id: id.into(),
        seq: 1,
        holder: name(holder),
        path: glob(path),
        exclusive,
        reason: String::new(),
        order: None,
        reserved_at: at,
        renewed_at: at,
        expires_at: Some(at + ttl),
        released_at: None,
        released_by: None,
        forced: None,
    }
}

fn problem(text: &str) -> Problem {
    match PathGlob::new(text) {
        Err(Refusal::ReservationInput {
            field: Field::Paths,
            problem,
            ..
        }) => problem,
        other => panic!("{text}: {other:?}"),
    }
}

#[test]
fn a_glob_is_normalized_and_anything_leaving_the_checkout_is_refused() {
    for (raw, kept) in [
        ("src/billing/**", "src/billing/**"),
        ("./src//lib.rs", "src/lib.rs"),
        ("src/billing/", "src/billing"),
        ("src/*/", "src/*/**"),
        ("  docs/*.md ", "docs/*.md"),
        ("./", "**"),
        ("**/*.rs", "**/*.rs"),
    ] {
        assert_eq!(glob(raw).as_str(), kept, "{raw}");
    }
    assert_eq!(problem(""), Problem::Empty);
    assert_eq!(problem("/etc/passwd"), Problem::Absolute);
    assert_eq!(problem("~/notes"), Problem::Absolute);
    assert_eq!(problem("C:/x"), Problem::Absolute);
    assert_eq!(problem("../other/**"), Problem::Parent);
    assert_eq!(problem("src/../../x"), Problem::Parent);
    assert_eq!(problem("!src/**"), Problem::Negation);
    assert_eq!(problem("src\\lib.rs"), Problem::Backslash);
    assert_eq!(problem("src/\u{7}"), Problem::Control);
    assert!(matches!(problem("src/[ab"), Problem::Syntax(_)));
    assert!(matches!(problem("src/a**"), Problem::Syntax(_)));
    assert_eq!(
        problem(&"a/".repeat(300)),
        Problem::TooLong {
            max: MAX_GLOB_BYTES
        }
    );
}

#[test]
fn a_glob_covers_what_it_matches_and_a_named_directory_covers_its_contents() {
    let cases = [
        ("src/billing", "src/billing/invoice.rs", true),
        ("src/billing", "src/billing", true),
        ("src/billing", "src/billingx.rs", false),
        ("src/*.rs", "src/lib.rs", true),
        ("src/*.rs", "src/a/lib.rs", false),
        ("src/**", "src/a/b/c.rs", true),
        ("**/*.md", "README.md", true),
        ("**/*.md", "docs/a/b.md", true),
        ("**/*.md", "docs/a/b.rs", false),
        ("src/*/tests", "src/a/tests/x.rs", true),
        ("src/*/tests", "src/a/b/tests/x.rs", false),
        ("docs/*.md", "docs/x.md/y", false),
        ("**", "anything/at/all", true),
    ];
    for (g, path, covered) in cases {
        assert_eq!(glob(g).covers(path), covered, "{g} covers {path}");
    }
}

#[test]
fn overlap_is_decided_component_by_component() {
    let cases = [
        ("src/**", "docs/**", false),
        ("src/**", "src/lib.rs", true),
        ("src/*.rs", "src/lib.rs", true),
        ("src/*.rs", "src/lib.md", false),
        ("src/*.rs", "src/*.md", false),
        ("src/a*.rs", "src/*b.rs", true),
        ("src/billing", "src/billing/x.rs", true),
        ("src/billing", "src/*/x.rs", true),
        ("src/billing", "src", true),
        // A name may be a directory: `docs/readme.md/x.rs` would be covered by both.
        ("**/*.rs", "docs/readme.md", true),
        ("**/*.rs", "docs/*.md", false),
        ("**/*.rs", "docs/lib.rs", true),
        ("**/*.rs", "docs", true),
        ("**", "x", true),
        ("a/*/c", "a/b/d", false),
        ("a/*/c", "a/**/c", true),
        ("docs/*.md", "docs/x.md/y", false),
        ("src/[ab].rs", "src/c.rs", false),
        ("src/[ab].rs", "src/a.rs", true),
    ];
    for (a, b, overlap) in cases {
        assert_eq!(glob(a).overlaps(&glob(b)), overlap, "{a} ~ {b}");
        assert_eq!(glob(b).overlaps(&glob(a)), overlap, "{b} ~ {a}");
    }
}

fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_owned()),
        Just("b".to_owned()),
        Just("ab".to_owned()),
        Just("a.rs".to_owned()),
        Just("b.md".to_owned()),
        Just("*".to_owned()),
        Just("*.rs".to_owned()),
        Just("a*".to_owned()),
        Just("?".to_owned()),
        Just("**".to_owned()),
    ]
}

fn a_glob() -> impl Strategy<Value = PathGlob> {
    prop::collection::vec(component(), 1..4).prop_map(|parts| glob(&parts.join("/")))
}

fn a_path() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("a"),
            Just("b"),
            Just("ab"),
            Just("a.rs"),
            Just("b.md"),
            Just("c")
        ],
        1..5,
    )
    .prop_map(|parts| parts.join("/"))
}

proptest! {
    /// Sound: a path both globs cover is never missed by the overlap test, so a conflict
    /// is never missed at reservation time.
    #[test]
    fn two_globs_covering_one_path_always_overlap(a in a_glob(), b in a_glob(), path in a_path()) {
        if a.covers(&path) && b.covers(&path) {
            prop_assert!(a.overlaps(&b), "{a} and {b} both cover {path}");
        }
        prop_assert_eq!(a.overlaps(&b), b.overlaps(&a));
    }

    /// Every path a glob covers begins with its fixed prefix: what a store narrows its
    /// lookups by.
    #[test]
    fn a_covered_path_begins_with_the_globs_prefix(a in a_glob(), path in a_path()) {
        if a.covers(&path) {
            let prefix = a.prefix();
            prop_assert!(
                prefix.is_empty() || path == prefix || path.starts_with(&format!("{prefix}/")),
                "{a} covers {path} outside its prefix {prefix:?}"
            );
        }
    }
}

#[test]
fn a_reservation_is_live_until_the_instant_it_expires_and_never_after() {
    let r = held("rsv_1", "impl-1", "src/**", true, 1_000, 60_000);
    assert_eq!(r.expires_at, Some(61_000));
    assert_eq!(r.status_at(1_000), Status::Live);
    assert_eq!(r.status_at(60_999), Status::Live, "never early");
    assert_eq!(r.status_at(61_000), Status::Expired, "never late");
    assert_eq!(r.status_at(61_001), Status::Expired);
    let released = Reservation {
        released_at: Some(2_000),
        ..r.clone()
    };
    assert_eq!(released.status_at(1_500), Status::Released);
    // The event says when, from its own time.
    let renewed = ReservationChange::Renewed {
        id: "rsv_1".into(),
        ttl_ms: 30_000,
        exclusive: true,
        reason: String::new(),
    };
    assert_eq!(renewed.expires_at(50_000), Some(80_000));
    let for_order = ReservationChange::Reserved {
        id: "rsv_2".into(),
        holder: name("impl-1"),
        path: glob("src/**"),
        exclusive: true,
        reason: String::new(),
        ttl_ms: None,
        order: Some("wo_1".into()),
        until: Some(9_000),
    };
    // An order is open at its deadline and expired after it: so is what it holds.
    assert_eq!(for_order.expires_at(1), Some(9_001));
    let mut open_ended = for_order.clone();
    if let ReservationChange::Reserved { until, .. } = &mut open_ended {
        *until = None;
    }
    assert_eq!(open_ended.expires_at(1), None);
}

#[test]
fn a_ttl_is_positive_and_within_the_projects_maximum() {
    assert_eq!(ttl(None, 3600, 86_400), Ok(3_600_000));
    assert_eq!(ttl(Some(1), 3600, 86_400), Ok(1000));
    assert_eq!(ttl(Some(86_400), 3600, 86_400), Ok(86_400_000));
    for (given, problem) in [
        (0, Problem::NotPositive),
        (-5, Problem::NotPositive),
        (
            86_401,
            Problem::Beyond {
                max_seconds: 86_400,
            },
        ),
    ] {
        match ttl(Some(given), 3600, 86_400) {
            Err(Refusal::ReservationInput {
                field: Field::Ttl,
                problem: p,
                ..
            }) => assert_eq!(p, problem, "{given}"),
            other => panic!("{given}: {other:?}"),
        }
    }
}

fn ask(paths: &[&str], exclusive: bool) -> Ask {
    Ask {
        paths: paths.iter().map(|p| glob(p)).collect(),
        exclusive,
        reason: "work".into(),
        ttl_ms: 60_000,
    }
}

fn ids() -> impl FnMut() -> String {
    let mut n = 0;
    move || {
        n += 1;
        format!("rsv_new{n}")
    }
}

#[test]
fn a_conflict_names_every_holder_reservation_and_expiry_and_reserves_nothing() {
    let held = vec![
        held("rsv_a", "impl-1", "src/billing/**", true, 0, 100_000),
        held("rsv_b", "impl-3", "docs/**", false, 0, 100_000),
    ];
    let me = name("impl-2");
    let refused = plan_reserve(
        &me,
        &ask(&["src/billing/invoice.rs", "docs/a.md", "tests/**"], true),
        &held,
        10,
        ids(),
    )
    .unwrap_err();
    let Refusal::Reserved { conflicts } = &refused else {
        panic!("{refused:?}")
    };
    let named: Vec<(&str, &str, Option<Millis>)> = conflicts
        .iter()
        .map(|c| (c.reservation.as_str(), c.holder.as_str(), c.expires_at))
        .collect();
    assert_eq!(
        named,
        [
            ("rsv_a", "impl-1", Some(100_000)),
            ("rsv_b", "impl-3", Some(100_000))
        ]
    );
    assert_eq!(refused.kind(), crate::RefusalKind::Conflict);
    assert!(
        refused.is_retryable(),
        "exit 6: once it lapses, it may succeed"
    );
    let text = refused.to_string();
    assert!(
        text.contains("impl-1") && text.contains("rsv_a") && text.contains("1970-01-01T00:01:40Z"),
        "{text}"
    );
    // Shared beside shared is no conflict; the holder's own never is.
    let shared = plan_reserve(&me, &ask(&["docs/a.md"], false), &held, 10, ids()).unwrap();
    assert!(matches!(
        &shared[..],
        [ReservationChange::Reserved {
            exclusive: false,
            ..
        }]
    ));
    let own = plan_reserve(
        &name("impl-1"),
        &ask(&["src/billing/x.rs"], true),
        &held,
        10,
        ids(),
    )
    .unwrap();
    assert_eq!(own.len(), 1);
    // Once it has expired, it stands in no one's way.
    assert!(
        plan_reserve(
            &me,
            &ask(&["src/billing/x.rs"], true),
            &held,
            100_000,
            ids()
        )
        .is_ok()
    );
}

#[test]
fn reserving_a_glob_one_holds_renews_it() {
    let held = vec![held("rsv_a", "impl-1", "src/**", false, 0, 1000)];
    let planned = plan_reserve(
        &name("impl-1"),
        &ask(&["src/**", "lib/**"], true),
        &held,
        500,
        ids(),
    )
    .unwrap();
    assert_eq!(
        planned[0],
        ReservationChange::Renewed {
            id: "rsv_a".into(),
            ttl_ms: 60_000,
            exclusive: true,
            reason: "work".into()
        }
    );
    assert!(matches!(&planned[1], ReservationChange::Reserved { id, .. } if id == "rsv_new1"));
}

#[test]
fn releasing_nothing_says_so_and_another_holders_or_an_orders_is_not_released() {
    let mut order = held("rsv_o", "impl-1", "lib/**", true, 0, 1000);
    order.order = Some("wo_1".into());
    let held = vec![
        held("rsv_a", "impl-1", "src/**", true, 0, 1000),
        held("rsv_b", "impl-2", "docs/**", true, 0, 1000),
        order,
    ];
    let me = name("impl-1");
    let globs = |g: &[&str]| Release {
        ids: Vec::new(),
        globs: g.iter().map(|g| glob(g)).collect(),
    };
    let ids = |i: &[&str]| Release {
        ids: i.iter().map(|i| (*i).to_owned()).collect(),
        globs: Vec::new(),
    };
    let by_glob = plan_release(&me, &globs(&["src/**"]), &held, 10).unwrap();
    assert_eq!(
        by_glob,
        [ReservationChange::Released {
            id: "rsv_a".into(),
            forced: None
        }]
    );
    assert_eq!(
        plan_release(&me, &Release::default(), &held, 10)
            .unwrap()
            .len(),
        1,
        "an order's stays"
    );
    match plan_release(&me, &globs(&["tests/**"]), &held, 10) {
        Err(Refusal::NotReleased { asked, held, .. }) => {
            assert_eq!(asked, ["tests/**"]);
            assert_eq!(held, ["rsv_a src/**", "rsv_o lib/**"]);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        plan_release(&me, &ids(&["rsv_b"]), &held, 10),
        Err(Refusal::Unreleased {
            hold: Hold::Others,
            ..
        })
    ));
    assert!(matches!(
        plan_release(&me, &ids(&["rsv_o"]), &held, 10),
        Err(Refusal::Unreleased {
            hold: Hold::Order(_),
            ..
        })
    ));
    // Expired: nothing left to release.
    assert!(matches!(
        plan_release(&me, &ids(&["rsv_a"]), &held, 5_000),
        Err(Refusal::NotReleased { .. })
    ));
}

#[test]
fn a_force_release_takes_an_owner_a_reason_and_a_quiet_holder() {
    let target = held("rsv_a", "impl-1", "src/**", true, 0, 10_000_000);
    let member = |role: &str| Participant {
        name: name("boss"),
        role: role.into(),
        added_at: 0,
        policy: None,
    };
    let quiet = 600_000;
    let now = 5_000_000;
    assert!(matches!(
        plan_force(&member("executor"), &target, None, quiet, "stale", now),
        Err(Refusal::ForceRelease { .. })
    ));
    assert!(matches!(
        plan_force(&member("owner"), &target, None, quiet, " ", now),
        Err(Refusal::Missing(Field::Reason))
    ));
    assert!(matches!(
        plan_force(
            &member("owner"),
            &target,
            Some(now - 1000),
            quiet,
            "stale",
            now
        ),
        Err(Refusal::Unreleased {
            hold: Hold::Active { .. },
            ..
        })
    ));
    for active in [Some(now - quiet), None] {
        assert_eq!(
            plan_force(&member("owner"), &target, active, quiet, "stale", now).unwrap(),
            ReservationChange::Released {
                id: "rsv_a".into(),
                forced: Some("stale".into())
            }
        );
    }
}

#[test]
fn an_orders_scope_is_held_exclusively_until_it_ends() {
    let doc = serde_json::json!({"x-baton": {"scope": {"allowed": ["src/export.rs", "src/export.rs", "notes/"]}}});
    let globs = scope_globs(&doc).unwrap();
    assert_eq!(globs, [glob("src/export.rs"), glob("notes")]);
    let bad = serde_json::json!({"x-baton": {"scope": {"allowed": ["../elsewhere"]}}});
    assert!(matches!(
        scope_globs(&bad),
        Err(Refusal::ReservationInput {
            field: Field::Document,
            problem: Problem::Parent,
            ..
        })
    ));
    assert_eq!(scope_globs(&serde_json::json!({})).unwrap(), []);
    let others = vec![held("rsv_x", "impl-2", "src/**", false, 0, 1000)];
    assert!(matches!(
        plan_for_order(&name("impl-1"), "wo_1", &globs, None, &others, 10, ids()),
        Err(Refusal::Reserved { .. })
    ));
    let planned = plan_for_order(
        &name("impl-1"),
        "wo_1",
        &globs,
        Some(50),
        &others,
        5_000,
        ids(),
    )
    .unwrap();
    assert_eq!(planned.len(), 2);
    let rows: Vec<Reservation> = planned
        .iter()
        .map(|c| match c {
            ReservationChange::Reserved {
                id, path, order, ..
            } => Reservation {
                id: id.clone(),
                path: path.clone(),
                order: order.clone(),
                expires_at: c.expires_at(5_000),
                ..held("x", "impl-1", "a", true, 5_000, 1)
            },
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(plan_order_end("wo_1", &rows, 50).len(), 2);
    assert_eq!(plan_order_end("wo_2", &rows, 50).len(), 0);
}
