use super::*;

fn fix(items: &[&str]) -> Verdict {
    Verdict::Fix {
        fixes: items.iter().map(|s| (*s).to_owned()).collect(),
    }
}

fn invalid(raw: &str) -> Verdict {
    Verdict::Invalid {
        raw: raw.to_owned(),
    }
}

#[test]
fn the_verdict_grammar() {
    let table: &[(&str, Verdict)] = &[
        ("APPROVE", Verdict::Approve),
        ("APPROVE\n", Verdict::Approve),
        ("  \n APPROVE \n\n", Verdict::Approve),
        // Mixed case is not the word.
        ("Approve", invalid("Approve")),
        ("approve\n", invalid("approve\n")),
        // Prose around APPROVE.
        ("APPROVE, looks good", invalid("APPROVE, looks good")),
        ("Looks good.\nAPPROVE", invalid("Looks good.\nAPPROVE")),
        ("APPROVE APPROVE", invalid("APPROVE APPROVE")),
        // Empty output.
        ("", invalid("")),
        ("   \n\t\n", invalid("   \n\t\n")),
        // Numbered lists.
        ("1. add a test", fix(&["add a test"])),
        (
            "1. add a test\n2. rename x\n",
            fix(&["add a test", "rename x"]),
        ),
        (
            "1. add a test\n\n2. rename x",
            fix(&["add a test", "rename x"]),
        ),
        (
            "1. add a test\n   for the empty filter\n2. rename x",
            fix(&["add a test for the empty filter", "rename x"]),
        ),
        // Numbering gaps, a list not starting at 1, repeats.
        ("1. a\n3. b", invalid("1. a\n3. b")),
        ("2. a\n3. b", invalid("2. a\n3. b")),
        ("1. a\n1. b", invalid("1. a\n1. b")),
        ("0. a", invalid("0. a")),
        // Prose around a list, or a malformed item.
        ("Fixes:\n1. a", invalid("Fixes:\n1. a")),
        ("1. a\nthanks", invalid("1. a\nthanks")),
        ("1.a", invalid("1.a")),
        ("1) a", invalid("1) a")),
        ("1. ", invalid("1. ")),
        ("- a", invalid("- a")),
        // A list and APPROVE together are neither.
        ("1. a\nAPPROVE", invalid("1. a\nAPPROVE")),
    ];
    for (output, expected) in table {
        assert_eq!(&parse_verdict(output), expected, "output {output:?}");
    }
}

#[test]
fn invalid_output_is_kept_clipped() {
    let long = "x".repeat(MAX_RAW_BYTES * 2);
    let Verdict::Invalid { raw } = parse_verdict(&long) else {
        panic!("long prose is invalid");
    };
    assert!(raw.len() <= MAX_RAW_BYTES);
    assert!(raw.starts_with("xxx"));
}

#[test]
fn what_a_round_concludes() {
    use Outcome::*;
    let stopped = Verdict::Stopped { signal: Some(9) };
    let table: Vec<(u32, Vec<Verdict>, Outcome, bool)> = vec![
        (1, vec![Verdict::Approve], Approved, false),
        (2, vec![Verdict::Approve], Approved, false),
        (1, vec![fix(&["a"])], Rework, false),
        // The second round never sends work back.
        (2, vec![fix(&["a"])], Unresolved, false),
        (1, vec![invalid("meh")], Unresolved, false),
        (2, vec![invalid("meh")], Unresolved, false),
        (1, vec![stopped.clone()], Stopped, false),
        (2, vec![stopped.clone()], Stopped, false),
        // Two reviewers: both must approve; different verdicts are a disagreement.
        (1, vec![Verdict::Approve, Verdict::Approve], Approved, false),
        (1, vec![Verdict::Approve, fix(&["a"])], Rework, true),
        (2, vec![Verdict::Approve, fix(&["a"])], Unresolved, true),
        (1, vec![Verdict::Approve, invalid("?")], Unresolved, true),
        (1, vec![fix(&["a"]), fix(&["b"])], Rework, false),
        (1, vec![Verdict::Approve, stopped], Stopped, true),
    ];
    for (round, verdicts, outcome, disagreement) in table {
        let c = conclude(round, &verdicts);
        assert_eq!(
            (c.outcome, c.disagreement),
            (outcome, disagreement),
            "round {round} {verdicts:?}"
        );
        assert_eq!(c.reason.is_some(), outcome == Rework);
    }
}

#[test]
fn both_reviewers_fixes_go_back_numbered_afresh() {
    let c = conclude(1, &[fix(&["a", "b"]), fix(&["c"])]);
    assert_eq!(c.reason.as_deref(), Some("1. a\n2. b\n3. c"));
}

fn parts(files: Vec<FileDiff>, test_output: &str, report: &str) -> PacketParts {
    PacketParts {
        order: "wo_1".into(),
        brief: ".baton/review/wo_1/brief.json".into(),
        range: Some("abc..def".into()),
        diff: Ok(files),
        test_output: test_output.into(),
        report: report.into(),
    }
}

fn file(path: &str, test: bool, changed: usize, context: usize) -> FileDiff {
    let mut body = format!("--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n");
    for i in 0..context {
        body.push_str(&format!(" unchanged context line {i} of {path}\n"));
    }
    for i in 0..changed {
        body.push_str(&format!("+changed line {i} of {path}\n"));
    }
    FileDiff {
        path: path.into(),
        test,
        body,
    }
}

#[test]
fn a_small_packet_is_whole() {
    let p = render_packet(
        &parts(vec![file("src/a.rs", false, 3, 3)], "ok\n", "{}"),
        PACKET_MAX_BYTES,
    );
    assert_eq!(p.kept, DiffKept::Whole);
    assert!(p.text.contains(" unchanged context line 0 of src/a.rs"));
    assert!(p.text.contains("Brief: .baton/review/wo_1/brief.json"));
    assert!(p.text.contains("## Report\n{}"));
}

#[test]
fn the_budget_drops_context_then_non_test_bodies_then_test_bodies() {
    let files = vec![
        file("src/a.rs", false, 200, 2000),
        file("tests/a.rs", true, 200, 2000),
    ];
    let whole = render_packet(&parts(files.clone(), "", "{}"), usize::MAX);
    let no_context = render_packet(&parts(files.clone(), "", "{}"), whole.text.len() - 1);
    assert_eq!(no_context.kept, DiffKept::NoContext);
    assert!(!no_context.text.contains("unchanged context line"));
    assert!(no_context.text.contains("+changed line 199 of src/a.rs"));
    assert!(no_context.text.contains("git diff abc..def"));

    let test_bodies = render_packet(&parts(files.clone(), "", "{}"), no_context.text.len() - 1);
    assert_eq!(test_bodies.kept, DiffKept::TestBodies);
    assert!(!test_bodies.text.contains("of src/a.rs"));
    assert!(test_bodies.text.contains("+changed line 199 of tests/a.rs"));
    assert!(
        test_bodies
            .text
            .contains("src/a.rs: `git diff abc..def -- src/a.rs`")
    );

    let paths = render_packet(&parts(files, "", "{}"), test_bodies.text.len() - 1);
    assert_eq!(paths.kept, DiffKept::PathsOnly);
    assert!(
        paths
            .text
            .contains("tests/a.rs: `git diff abc..def -- tests/a.rs`")
    );
}

#[test]
fn the_packet_never_exceeds_its_budget_and_keeps_200_test_lines() {
    let output: String = (0..1000).map(|i| format!("test line {i}\n")).collect();
    let files = (0..200)
        .map(|i| file(&format!("src/f{i}.rs"), i % 2 == 0, 500, 50))
        .collect();
    let report = "r".repeat(400 * 1024);
    let p = render_packet(&parts(files, &output, &report), PACKET_MAX_BYTES);
    assert!(p.text.len() <= PACKET_MAX_BYTES, "{}", p.text.len());
    assert_eq!(p.test_lines_dropped, 800);
    assert!(p.text.contains("test line 999"));
    assert!(!p.text.contains("test line 799\n"));
}

#[test]
fn a_reviewer_ended_by_a_signal_is_stopped_whether_seen_or_told_by_its_shell() {
    use crate::run::RunStatus as R;
    let stopped = |signal| Verdict::Stopped {
        signal: Some(signal),
    };
    // Seen by the launch wrapper.
    assert_eq!(
        verdict_of(R::Stopped, Some(9), Some(137), "", None),
        stopped(9)
    );
    // Told only by `sh -c`'s exit status: 128 + SIGTERM, 128 + SIGKILL.
    assert_eq!(
        verdict_of(R::Failed, None, Some(143), "APPROVE", None),
        stopped(15)
    );
    assert_eq!(verdict_of(R::Failed, None, Some(137), "", None), stopped(9));
    // A failure that is not a signal gives no verdict, whatever it printed.
    for code in [1, 2, 127, 128, 200] {
        assert!(
            matches!(
                verdict_of(R::Failed, None, Some(code), "APPROVE", Some("exit")),
                Verdict::Invalid { .. }
            ),
            "{code}"
        );
    }
    assert_eq!(
        verdict_of(R::Done, None, Some(0), "APPROVE\n", None),
        Verdict::Approve
    );
}

#[test]
fn only_the_orders_sender_concludes_its_review_and_never_its_worker() {
    let order = crate::order::Order {
        id: "wo_1".into(),
        from: "planner".into(),
        to: "impl-1".into(),
        escalate_to: Some("owner".into()),
        goal: "g".into(),
        deadline: None,
        deadline_at: None,
        message: "m".into(),
        status: crate::order::OrderStatus::Submitted,
        seq: 5,
        attempt: 1,
        log_seq: 1,
        created_at: 0,
        updated_at: 0,
        note: None,
        findings: Vec::new(),
    };
    assert_eq!(may_conclude(&order, "planner"), Ok(()));
    assert!(matches!(
        may_conclude(&order, "impl-1"),
        Err(crate::Refusal::OwnWork { .. })
    ));
    for other in ["owner", "reviewer"] {
        let refused = may_conclude(&order, other).unwrap_err();
        assert!(
            matches!(refused, crate::Refusal::OrderRole { .. }),
            "{other}"
        );
        assert_eq!(refused.kind(), crate::RefusalKind::Forbidden);
    }
}

#[test]
fn two_reviewers_are_two_commands() {
    assert_eq!(distinct_reviewers(&["./a.sh", "./b.sh"]), Ok(()));
    assert_eq!(distinct_reviewers(&["./a.sh"]), Ok(()));
    assert!(matches!(
        distinct_reviewers(&["./a.sh", " ./a.sh "]),
        Err(crate::Refusal::SameReviewer { .. })
    ));
}

#[test]
fn a_review_is_in_flight_from_its_start_until_its_round_concludes() {
    let event = |seq: i64, change: GateChange| crate::Event {
        seq,
        id: format!("e{seq}"),
        at: seq * 1000,
        actor: "planner".into(),
        change: crate::Change::Gate(change),
    };
    let started = |seq, round| {
        event(
            seq,
            GateChange::Started {
                order: "wo_1".into(),
                round,
                reviewers: vec!["./r.sh".into()],
            },
        )
    };
    let concluded = |seq, round| {
        event(
            seq,
            GateChange::Concluded {
                order: "wo_1".into(),
                round,
                outcome: Outcome::Rework,
                disagreement: false,
            },
        )
    };
    assert_eq!(in_flight(&[]), None);
    let killed = [started(1, 1)];
    assert_eq!(
        in_flight(&killed),
        Some(InFlight {
            round: 1,
            started_at: 1000,
            reviewers: vec!["./r.sh".into()],
        })
    );
    // Started again after the kill, and concluded: nothing in flight.
    assert_eq!(
        in_flight(&[started(1, 1), started(2, 1), concluded(3, 1)]),
        None
    );
    // A conclusion of an earlier round does not close a later one.
    let later = [started(1, 1), concluded(2, 1), started(3, 2)];
    assert_eq!(in_flight(&later).map(|f| f.round), Some(2));
}
