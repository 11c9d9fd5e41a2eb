//! Table tests for the B rules and for bad input. The O/R/C rules are checked against the
//! reference implementation by the conformance test (crates/baton/tests/cli/awl_conformance.rs).

use serde_json::{Value, json};

use super::contract::{
    self, Environment, NoEnvironment, contract_required_findings, is_vague_action, programs,
};
use super::*;

/// A repository that has commit `abc123` and the programs `cargo` and `scripts/test.sh`.
struct Repo;

impl Environment for Repo {
    fn revision_exists(&self, rev: &str) -> Option<bool> {
        Some(rev == "abc123")
    }
    fn program_exists(&self, program: &str) -> Option<bool> {
        Some(matches!(program, "cargo" | "./scripts/test.sh" | "make"))
    }
}

fn order(x_baton: Value) -> Value {
    json!({
        "spec": "awl/work-order@0.1",
        "id": "wo_1",
        "created_at": "2025-01-01T00:00:00Z",
        "from": "planner",
        "to": "impl-1",
        "goal": "Keep the filters in the CSV export",
        "criteria": [{"id": "c1", "text": "The export has the filtered rows only"}],
        "budget": {"usd": 2},
        "deadline": "2025-01-02T00:00:00Z",
        "tools": ["repo/*"],
        "x-baton": x_baton,
    })
}

fn good_contract() -> Value {
    json!({
        "context": {
            "repository": "git@example.com:shop/web.git",
            "base_revision": "abc123",
            "reproduction": "Select status=open, then export CSV",
            "expected": "Exactly the rows matching the filter",
            "fixtures": ["tests/fixtures/orders.csv"]
        },
        "scope": {"allowed": ["src/export/"], "excluded": ["auth", "migrations"]},
        "execution": {"operator": "impl-1", "setup_command": "make deps", "test_command": "cargo test -p export"},
        "delivery": {"required": ["before", "after", "uncertainty"]},
        "acceptance": {"owner": "owner", "reviewers": ["reviewer"]},
        "stop_when": ["the filter semantics conflict with the documentation"],
        "decision": {"decision": "filter in SQL", "resume_at": "run cargo test -p export csv_filters"}
    })
}

fn rules(findings: &[Finding]) -> Vec<(String, String)> {
    let mut r: Vec<(String, String)> = findings
        .iter()
        .map(|f| (f.rule.clone(), f.path.clone()))
        .collect();
    r.sort();
    r
}

fn with(mut doc: Value, pointer: &str, value: Value) -> Value {
    *doc.pointer_mut(pointer).expect("path exists") = value;
    doc
}

#[test]
fn a_good_contract_and_a_plain_order_check_clean() {
    let o = order(good_contract());
    assert_eq!(check_order(&o), vec![]);
    assert_eq!(check_order_contract(&o, &Repo), vec![]);
    assert_eq!(contract_required_findings(&o), vec![]);
    let mut plain = o.clone();
    plain.as_object_mut().unwrap().remove("x-baton");
    assert_eq!(check_order_contract(&plain, &Repo), vec![]);
}

/// A case: its name, the document, and the `(rule, path)` findings it must produce.
type Case = (&'static str, Value, Vec<(&'static str, &'static str)>);

#[test]
fn b_rules_each_fire_at_their_path() {
    let cases: Vec<Case> = vec![
        (
            "owner is the implementer",
            with(
                order(good_contract()),
                "/x-baton/acceptance/owner",
                json!("impl-1"),
            ),
            vec![("B1", "/x-baton/acceptance/owner")],
        ),
        (
            "a reviewer is the implementer",
            with(
                order(good_contract()),
                "/x-baton/acceptance/reviewers",
                json!(["x", "impl-1"]),
            ),
            vec![("B1", "/x-baton/acceptance/reviewers/1")],
        ),
        (
            "unknown revision",
            with(
                order(good_contract()),
                "/x-baton/context/base_revision",
                json!("deadbeef"),
            ),
            vec![("B2", "/x-baton/context/base_revision")],
        ),
        (
            "invented test command",
            with(
                order(good_contract()),
                "/x-baton/execution/test_command",
                json!("cd app && pytst -q"),
            ),
            vec![("B3", "/x-baton/execution/test_command")],
        ),
        (
            "a script in the repository is fine",
            with(
                order(good_contract()),
                "/x-baton/execution/setup_command",
                json!("FOO=1 ./scripts/test.sh"),
            ),
            vec![],
        ),
        (
            "empty stop_when",
            with(order(good_contract()), "/x-baton/stop_when", json!([])),
            vec![("B4", "/x-baton/stop_when")],
        ),
        (
            "vague resume_at",
            with(
                order(good_contract()),
                "/x-baton/decision/resume_at",
                json!("Keep going!"),
            ),
            vec![("B5", "/x-baton/decision/resume_at")],
        ),
        (
            "a secret in the goal",
            with(
                order(good_contract()),
                "/goal",
                json!("use key AKIAABCDEFGHIJKLMNOP to deploy"),
            ),
            vec![("B6", "/goal")],
        ),
        (
            "shape",
            with(
                order(good_contract()),
                "/x-baton/scope",
                json!({"allowed": "src", "extra": 1}),
            ),
            vec![("B8", "/x-baton/scope"), ("B8", "/x-baton/scope/allowed")],
        ),
    ];
    for (name, doc, want) in cases {
        let got = check_order_contract(&doc, &Repo);
        let mut want: Vec<(String, String)> = want
            .into_iter()
            .map(|(r, p)| (r.to_owned(), p.to_owned()))
            .collect();
        want.sort();
        assert_eq!(rules(&got), want, "{name}");
    }
}

#[test]
fn an_environment_that_cannot_tell_leaves_b2_and_b3_unchecked() {
    let o = with(
        order(good_contract()),
        "/x-baton/context/base_revision",
        json!("nope"),
    );
    let o = with(o, "/x-baton/execution/test_command", json!("pytst"));
    assert_eq!(check_order_contract(&o, &NoEnvironment), vec![]);
}

#[test]
fn commands_name_their_programs() {
    assert_eq!(programs("cargo test"), vec!["cargo"]);
    assert_eq!(
        programs("cd app && make test | tee log"),
        vec!["make", "tee"]
    );
    assert_eq!(
        programs("RUST_LOG=debug exec ./run.sh --x"),
        vec!["./run.sh"]
    );
    assert_eq!(programs("'my tool' arg; true"), vec!["my tool"]);
}

#[test]
fn resume_at_must_be_an_action() {
    for vague in [
        "",
        "continue",
        "Continue.",
        "keep going",
        "carry on with the work",
        "resume where we left off",
        "TBD",
        "...",
    ] {
        assert!(is_vague_action(vague), "{vague:?}");
    }
    for concrete in [
        "run cargo test -p export",
        "continue with fixing src/export.rs:120",
        "open docs/API.md and add the filter section",
    ] {
        assert!(!is_vague_action(concrete), "{concrete:?}");
    }
}

#[test]
fn secrets_are_named_never_echoed() {
    let secrets = [
        "AKIAIOSFODNN7EXAMPLE",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "AIzaSyA1234567890abcdefghijklmnopqrstuv",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE...",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "glpat-abcdefghij0123456789",
        "xoxb-1234567890-abcdefghij",
        "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
        "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
        "postgres://admin:hunter2@db.internal:5432/shop",
    ];
    for s in secrets {
        let doc = json!({"metadata": {"note": s}});
        let found = secrets::scan(&doc);
        assert_eq!(found.len(), 1, "{s:?}: {found:?}");
        assert_eq!(found[0].path, "/metadata/note");
        assert_eq!(found[0].rule, "B6");
        assert!(
            !found[0].message.contains(s),
            "the message echoes the secret"
        );
        assert!(!found[0].message.contains("hunter2"));
    }
    for fine in [
        "postgres://user:${DB_PASSWORD}@localhost/db",
        "https://example.com/path",
        "task-runner sk-short",
        "use the AWS console",
    ] {
        assert_eq!(secrets::scan(&json!({"a": fine})), vec![], "{fine:?}");
    }
    // A secret as a field name is found too.
    let doc = json!({"metadata": {"ghp_abcdefghijklmnopqrstuvwxyz0123456789": 1}});
    assert_eq!(
        secrets::scan(&doc)[0].path,
        "/metadata/ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    );
}

fn report(evidence: Value) -> Value {
    json!({
        "spec": "awl/work-report@0.1",
        "order_id": "wo_1",
        "from": "impl-1",
        "status": "done",
        "result": {"summary": "Filters kept"},
        "evidence": [{"criterion": "c1", "type": "note"}],
        "cost": {"usd": 1},
        "finished_at": "2025-01-01T12:00:00Z",
        "tools_used": [],
        "x-baton": {"evidence": evidence},
    })
}

fn good_evidence() -> Value {
    json!({
        "before": {"command": "cargo test -p export", "exit_code": 101, "output": "1 failed", "base_revision": "abc123"},
        "change": [{"file": "src/export.rs", "reason": "apply the filter to the query"}],
        "after": {"command": "cargo test -p export", "exit_code": 0, "output": "12 passed", "receipt": "evidence-01J"},
        "uncertainty": {"none": true},
        "review": {"commit": "def456", "acceptance_owner": "owner"}
    })
}

#[test]
fn the_evidence_protocol() {
    let o = order(good_contract());
    let ok = report(good_evidence());
    assert_eq!(check_report(&ok, &o), vec![]);
    assert_eq!(check_report_contract(&ok, Some(&o), &Repo), vec![]);
    assert_eq!(contract_required_findings(&ok), vec![]);

    let empty = with(ok.clone(), "/x-baton/evidence/uncertainty", json!([]));
    assert_eq!(
        rules(&check_report_contract(&empty, Some(&o), &Repo)),
        vec![("B7".to_owned(), "/x-baton/evidence/uncertainty".to_owned())]
    );
    let listed = with(
        ok.clone(),
        "/x-baton/evidence/uncertainty",
        json!(["did not test on Windows: no machine"]),
    );
    assert_eq!(check_report_contract(&listed, Some(&o), &Repo), vec![]);
    let not_none = with(
        ok.clone(),
        "/x-baton/evidence/uncertainty",
        json!({"none": false}),
    );
    assert_eq!(
        rules(&check_report_contract(&not_none, Some(&o), &Repo))[0].0,
        "B8"
    );

    let mut missing = ok.clone();
    missing["x-baton"]["evidence"]
        .as_object_mut()
        .unwrap()
        .remove("after");
    assert_eq!(
        rules(&check_report_contract(&missing, Some(&o), &Repo)),
        vec![("B7".to_owned(), "/x-baton/evidence".to_owned())]
    );
    assert_eq!(
        contract::missing_contract_fields(&missing),
        vec!["/x-baton/evidence/after"]
    );

    let self_review = with(
        ok.clone(),
        "/x-baton/evidence/review/acceptance_owner",
        json!("impl-1"),
    );
    assert_eq!(
        rules(&check_report_contract(&self_review, Some(&o), &Repo))[0].0,
        "B1"
    );
    let wrong_owner = with(
        ok.clone(),
        "/x-baton/evidence/review/acceptance_owner",
        json!("someone"),
    );
    assert_eq!(
        rules(&check_report_contract(&wrong_owner, Some(&o), &Repo))[0].0,
        "B1"
    );
    let bad_rev = with(ok, "/x-baton/evidence/before/base_revision", json!("zzz"));
    assert_eq!(
        rules(&check_report_contract(&bad_rev, Some(&o), &Repo))[0].0,
        "B2"
    );
}

#[test]
fn the_required_contract_lists_what_is_missing() {
    let mut o = order(json!({"acceptance": {"owner": "owner"}}));
    let missing = contract::missing_contract_fields(&o);
    assert!(missing.contains(&"/x-baton/stop_when".to_owned()));
    assert!(missing.contains(&"/x-baton/context/base_revision".to_owned()));
    assert!(!missing.contains(&"/x-baton/acceptance/owner".to_owned()));
    o.as_object_mut().unwrap().remove("x-baton");
    assert_eq!(
        contract::missing_contract_fields(&o).len(),
        contract::REQUIRED_ORDER_FIELDS.len()
    );
    assert!(
        contract_required_findings(&o)
            .iter()
            .all(|f| f.rule == "B9")
    );
}

#[test]
fn bad_input_is_one_clear_finding_never_a_panic() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("malformed", b"{\"spec\": ".to_vec(), "not JSON"),
        ("not an object", b"[1, 2]".to_vec(), "must be a JSON object"),
        ("a string", b"\"order\"".to_vec(), "must be a JSON object"),
        (
            "invalid UTF-8",
            vec![b'{', b'"', 0xff, 0xfe, b'"', b':', b'1', b'}'],
            "not UTF-8",
        ),
        (
            "deep nesting",
            {
                let mut v = "[".repeat(10_000);
                v.push_str(&"]".repeat(10_000));
                v.into_bytes()
            },
            "nested too deeply",
        ),
        (
            "too large",
            {
                let mut v = b"{\"x\": \"".to_vec();
                v.extend(std::iter::repeat_n(b'a', 50 * 1024 * 1024));
                v.extend_from_slice(b"\"}");
                v
            },
            "largest accepted",
        ),
        ("empty", Vec::new(), "not JSON"),
    ];
    for (name, bytes, want) in cases {
        let f = parse_document(&bytes).expect_err(name);
        assert_eq!(
            (f.rule.as_str(), f.path.as_str(), f.kind),
            (UNREADABLE, "/", FindingKind::Invalid),
            "{name}"
        );
        assert!(f.message.contains(want), "{name}: {}", f.message);
    }
}

#[test]
fn every_check_survives_hostile_values() {
    let hostile = [
        json!({}),
        json!({"spec": 5, "criteria": "x", "budget": [], "tools": {}, "staged": [1, null]}),
        json!({"output_schema": {"$ref": "#"}, "x-baton": []}),
        json!({"x-baton": {"stop_when": [1], "decision": {"resume_at": 3}, "context": "x"}}),
        json!({"effects": [{"arguments": {"a": {"$ref": 1}}}], "status": "done"}),
    ];
    for doc in &hostile {
        for other in &hostile {
            let _ = check_order(doc);
            let _ = check_report(doc, other);
            let _ = check_sub_order(
                doc,
                other,
                &[SubOrder {
                    order: other,
                    state: "offered",
                }],
            );
            let _ = check_own_cost(
                doc,
                other,
                &[SubOrder {
                    order: other,
                    state: "accepted",
                }],
            );
            let _ = check_order_contract(doc, &Repo);
            let _ = check_report_contract(doc, Some(other), &Repo);
            let _ = missing_contract_fields(doc);
        }
    }
    // A schema that refers to itself is refused by the engine's depth guard, not the stack.
    let o = json!({"type": "object", "properties": {"a": {"$ref": "#"}}, "$ref": "#"});
    let errors = schema::Validator::new(&o).errors(Some(&json!({"a": {"a": 1}})));
    assert!(
        errors
            .iter()
            .any(|e| e.keyword == "$ref" && e.message.contains("too deeply")),
        "the depth guard did not refuse the self-referring schema: {errors:?}"
    );
}

#[test]
fn versions_are_the_lowest_that_fit() {
    let o = order(good_contract());
    let typed = WorkOrder::from_json(&o).expect("valid order");
    assert_eq!(typed.to_json()["spec"], "awl/work-order@0.1");
    let mut built = typed.clone();
    built.spec = None;
    built.staged = Some(vec!["repo/push".into()]);
    assert_eq!(built.to_json()["spec"], "awl/work-order@0.4");
    built.staged = None;
    built.continues = Some("wo_0".into());
    assert_eq!(built.to_json()["spec"], "awl/work-order@0.3");
    assert_eq!(built.to_json()["x-baton"], o["x-baton"]);
    // A version read that is higher than needed is kept.
    let read =
        WorkOrder::from_json(&with(o.clone(), "/spec", json!("awl/work-order@0.4"))).unwrap();
    assert_eq!(read.to_json()["spec"], "awl/work-order@0.4");

    let unknown = with(o.clone(), "/spec", json!("awl/work-order@0.5"));
    assert_eq!(
        rules(&WorkOrder::from_json(&unknown).unwrap_err()),
        vec![("O1".to_owned(), "/spec".to_owned())]
    );
    let mut extra = o.clone();
    extra["notes"] = json!("x");
    extra["x-other"] = json!(1);
    extra["metadata"] = json!({"k": 1});
    assert_eq!(
        rules(&WorkOrder::from_json(&extra).unwrap_err()),
        vec![("O1".to_owned(), "/".to_owned())]
    );

    let r = report(good_evidence());
    let typed = WorkReport::from_json(&r).expect("valid report");
    assert_eq!(typed.to_json()["spec"], "awl/work-report@0.1");
    let mut with_effects = typed.clone();
    with_effects.spec = None;
    with_effects.effects = Some(vec![]);
    assert_eq!(with_effects.to_json()["spec"], "awl/work-report@0.3");
    assert_eq!(ReportVersion::parse("awl/work-report@0.4"), None);
}

#[test]
fn deep_instances_under_recursive_schemas_do_not_overflow() {
    // 128 levels (serde_json's own limit) under a schema that recurses with the instance.
    let schema = json!({"type": "array", "items": {"$ref": "#"}});
    let mut inst = json!([]);
    for _ in 0..127 {
        inst = json!([inst]);
    }
    let v = schema::Validator::new(&schema);
    assert!(v.errors(Some(&inst)).is_empty());
    let schema = json!({"anyOf": [{"type": "object", "additionalProperties": {"$ref": "#"}}, {"type": "string"}]});
    let mut inst = json!(1);
    for _ in 0..127 {
        inst = json!({"a": inst});
    }
    // The innermost 1 is neither an object nor a string: found, 128 levels down.
    let errors = schema::Validator::new(&schema).errors(Some(&inst));
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].keyword, "anyOf", "{errors:?}");
}
