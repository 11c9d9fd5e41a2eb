//! Negotiation through real `baton` processes: a round from files in one go, the
//! open / submit / show flow with `--as`, a walk-away that prints the short list and exits
//! 2, and malformed input refused with exit 3 naming the JSON path. Every value in the
//! positions below has four decimals, so it cannot hide in a timestamp's milliseconds: no
//! output may contain one.

use std::process::Output;

use serde_json::{Value, json};

use crate::common::{Project, code, stderr};

/// The parties of [`spec`], registered.
const PARTIES: &[(&str, &str)] = &[("planner", "planner"), ("ops", "executor")];

/// Every weight, utility and floor the positions below use (0 and 1 aside).
const PRIVATE: &[&str] = &[
    "0.6875", "0.3125", "0.1875", "0.4375", "0.5625", "0.8125", "0.9375", "0.0625",
];

fn spec(id: &str, rounds: u32) -> Value {
    json!({
        "id": id, "rounds": rounds,
        "issues": [{"name": "db", "options": ["sqlite", "postgres"]},
                   {"name": "deploy", "options": ["single", "multi-region"]}],
        "constraints": [{"db": "sqlite", "deploy": "multi-region"}],
        "parties": [{"name": "planner", "position": "positions/planner.json"},
                    {"name": "ops", "position": "positions/ops.json"}]
    })
}

/// Wants sqlite on a single region; postgres is worth little to it.
fn planner() -> Value {
    json!({"weights": {"db": 0.6875, "deploy": 0.3125},
           "utilities": {"db": {"sqlite": 1, "postgres": 0.1875},
                         "deploy": {"single": 1, "multi-region": 0.0625}},
           "floor": 0.5625})
}

/// Wants postgres, accepts sqlite on a single region, vetoes multi-region.
fn ops(floor: f64) -> Value {
    json!({"weights": {"db": 0.4375, "deploy": 0.5625},
           "utilities": {"db": {"sqlite": 0.8125, "postgres": 1},
                         "deploy": {"single": 1, "multi-region": 0.9375}},
           "floor": floor, "veto": [{"deploy": "multi-region"}]})
}

/// Wants postgres on many regions, and nothing less than most of it.
fn demanding_planner() -> Value {
    json!({"weights": {"db": 0.6875, "deploy": 0.3125},
           "utilities": {"db": {"sqlite": 0.1875, "postgres": 1},
                         "deploy": {"single": 0.0625, "multi-region": 1}},
           "floor": 0.8125})
}

fn write(p: &Project, name: &str, doc: &Value) -> String {
    let path = p.path().join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, serde_json::to_vec_pretty(doc).unwrap()).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Writes the spec and both positions; returns the spec's path.
fn files(p: &Project, spec_doc: &Value, planner_doc: &Value, ops_doc: &Value) -> String {
    write(p, "positions/planner.json", planner_doc);
    write(p, "positions/ops.json", ops_doc);
    write(p, "spec.json", spec_doc)
}

fn printed(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Insists that no weight, utility or floor value appears anywhere in what `out` printed
/// (a refusal may name the path of a bad one, never its value).
fn private_values_absent(out: &Output) {
    let printed = printed(out);
    for value in PRIVATE {
        assert!(!printed.contains(value), "{value} printed:\n{printed}");
    }
}

/// Insists that a negotiation's answer holds no position at all: no value, no field.
fn no_position_shown(out: &Output) {
    private_values_absent(out);
    let printed = printed(out);
    for word in ["weight", "utilit", "floor\""] {
        assert!(!printed.contains(word), "{word} printed:\n{printed}");
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// Runs a command that must be refused with `want`; checks it stored and printed nothing
/// but, when forbidden (exit 5), its one security event.
fn refused(p: &Project, who: Option<&str>, args: &[&str], want: i32) -> String {
    let before = p.generation();
    let out = p.run(who, args);
    assert_eq!(code(&out), want, "baton {args:?}: {}", stderr(&out));
    let recorded = i64::from(want == 5);
    assert_eq!(
        p.generation(),
        before + recorded,
        "baton {args:?} wrote to the log"
    );
    assert!(out.stdout.is_empty(), "a refusal printed to stdout");
    private_values_absent(&out);
    stderr(&out)
}

#[test]
fn a_round_from_files_agrees_and_shows_no_position() {
    let p = Project::new(PARTIES);
    let spec_path = files(&p, &spec("db-choice", 50), &planner(), &ops(0.6875));

    let out = p.run(None, &["negotiate", &spec_path]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    no_position_shown(&out);
    let text = stdout(&out);
    assert!(
        text.starts_with("negotiation db-choice: agreement in round 2\n"),
        "{text}"
    );
    assert!(text.contains("db      sqlite"), "{text}");
    assert!(
        text.contains("1      ops       db=postgres deploy=single  accept  reject"),
        "{text}"
    );

    let shown = p.run(None, &["--json", "negotiate", "show", "db-choice"]);
    assert_eq!(code(&shown), 0);
    no_position_shown(&shown);
    let doc = json_of(&shown);
    assert_eq!(doc["schema"], "baton/negotiation@1");
    assert_eq!(doc["result"], "agreement");
    assert_eq!(doc["outcome"], json!({"db": "sqlite", "deploy": "single"}));
    assert_eq!(doc["unsettled"], json!([]));
    assert_eq!(doc["ended"], Value::Null);
    assert_eq!(
        doc["trail"],
        json!([
            {"round": 1, "proposer": "ops", "outcome": {"db": "postgres", "deploy": "single"},
             "answers": {"ops": "accept", "planner": "reject"}},
            {"round": 2, "proposer": "planner", "outcome": {"db": "sqlite", "deploy": "single"},
             "answers": {"ops": "accept", "planner": "accept"}}
        ])
    );
    assert_eq!(
        doc["parties"],
        json!([{"name": "planner", "submitted": true, "external": false},
               {"name": "ops", "submitted": true, "external": false}])
    );
    assert_eq!(doc["earlier"], json!([]));

    // The same id again, once settled, is a new sitting: the first one kept beside it.
    let out = p.run(None, &["--json", "negotiate", &spec_path]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let again = json_of(&out);
    assert_eq!(again["result"], "agreement");
    assert_eq!(again["earlier"][0]["result"], "agreement");
    assert_eq!(again["earlier"][0]["outcome"], doc["outcome"]);
}

#[test]
fn a_party_is_a_participant_or_declared_external_and_a_walk_away_can_be_bargained_again() {
    let p = Project::new(&[("planner", "planner"), ("owner", "owner")]);
    // ops is no participant here: refused at its name, nothing stored.
    let spec_path = files(&p, &spec("db-choice", 50), &planner(), &ops(0.6875));
    let err = refused(&p, None, &["negotiate", "open", &spec_path], 3);
    assert!(err.contains("$.parties[1].name"), "{err}");
    assert!(err.contains("not a participant"), "{err}");

    // Declared external, the planner submits ops's position for it; a participant's own
    // position is that participant's to submit.
    let mut external = spec("db-choice", 50);
    external["parties"][1]["external"] = json!(true);
    let spec_path = files(&p, &external, &demanding_planner(), &ops(0.6875));
    p.ok(None, &["negotiate", "open", &spec_path]);
    let ops_path = p.path().join("positions/ops.json");
    let planner_path = p.path().join("positions/planner.json");
    let (ops_path, planner_path) = (ops_path.to_str().unwrap(), planner_path.to_str().unwrap());
    let err = refused(
        &p,
        Some("owner"),
        &submit_args(&["db-choice", planner_path, "--for", "planner"]),
        5,
    );
    assert!(err.contains("declares external"), "{err}");
    p.ok(
        Some("planner"),
        &submit_args(&["db-choice", ops_path, "--for", "ops"]),
    );
    let out = p.run(Some("planner"), &submit_args(&["db-choice", planner_path]));
    assert_eq!(code(&out), 2, "a walk-away: {}", stderr(&out));

    // Walked away, it opens again under its id, this time with a planner who gives way.
    let spec_path = files(&p, &external, &planner(), &ops(0.6875));
    let out = p.run(None, &["--json", "negotiate", &spec_path]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(doc["result"], "agreement");
    assert_eq!(doc["earlier"][0]["result"], "walk_away");
    assert_eq!(doc["parties"][1]["external"], true);
}

#[test]
fn parties_submit_their_own_positions_and_the_last_one_settles_it() {
    let p = Project::new(&[
        ("planner", "planner"),
        ("ops", "executor"),
        ("owner", "owner"),
    ]);
    let spec_path = files(&p, &spec("db-choice", 50), &planner(), &ops(0.6875));
    let planner_path = p.path().join("positions/planner.json");
    let ops_path = p.path().join("positions/ops.json");
    let (planner_path, ops_path) = (planner_path.to_str().unwrap(), ops_path.to_str().unwrap());

    let out = p.run(None, &["negotiate", "open", &spec_path]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("negotiation db-choice: open, waiting for planner, ops\n"),
        "{}",
        stdout(&out)
    );

    // --as after the subcommand, as agents write it.
    let out = p.run(
        None,
        &[
            "negotiate",
            "submit",
            "db-choice",
            "--position",
            ops_path,
            "--as",
            "ops",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    no_position_shown(&out);
    let text = stdout(&out);
    assert!(
        text.contains("waiting for planner\nsubmitted: ops\n"),
        "{text}"
    );

    // Refusals store nothing: twice, not a party, no identity, no such negotiation.
    let args = submit_args(&["db-choice", ops_path]);
    let err = refused(&p, Some("ops"), &args, 3);
    assert!(err.contains("already submitted"), "{err}");
    let err = refused(&p, Some("owner"), &args, 5);
    assert!(err.contains("its parties are planner, ops"), "{err}");
    let err = refused(&p, None, &args, 2);
    assert!(err.contains("--as NAME"), "{err}");
    let args = submit_args(&["no-such", planner_path]);
    let err = refused(&p, Some("planner"), &args, 4);
    assert!(err.contains("no negotiation no-such"), "{err}");

    let shown = p.json(None, &["negotiate", "show", "db-choice"]);
    assert_eq!(shown["result"], "open");
    assert_eq!(shown["trail"], json!([]));

    let out = p.run(
        Some("planner"),
        &[
            "--json",
            "negotiate",
            "submit",
            "db-choice",
            "--position",
            planner_path,
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    no_position_shown(&out);
    let settled = json_of(&out);
    assert_eq!(settled["result"], "agreement");
    assert_eq!(settled["trail"].as_array().unwrap().len(), 2);

    // Settled: nothing more counts, and show reads the same result.
    let err = refused(
        &p,
        Some("planner"),
        &submit_args(&["db-choice", planner_path]),
        3,
    );
    assert!(err.contains("is settled"), "{err}");
    let shown = p.run(None, &["negotiate", "show", "db-choice"]);
    assert_eq!(code(&shown), 0);
    no_position_shown(&shown);
    assert!(stdout(&shown).starts_with("negotiation db-choice: agreement in round 2\n"));
}

fn submit_args<'a>(rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["negotiate", "submit", rest[0], "--position", rest[1]];
    args.extend_from_slice(&rest[2..]);
    args
}

#[test]
fn a_walk_away_prints_the_short_list_and_exits_2() {
    let p = Project::new(PARTIES);
    let spec_path = files(
        &p,
        &spec("db-choice", 50),
        &demanding_planner(),
        &ops(0.6875),
    );
    let out = p.run(None, &["negotiate", &spec_path]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    no_position_shown(&out);
    let text = stdout(&out);
    assert!(
        text.starts_with(
            "negotiation db-choice: walk away (no feasible outcome meets every party's floor \
             and vetoes); a person decides\nunsettled: deploy\nvetoed: ops vetoed deploy=multi-region\n"
        ),
        "{text}"
    );

    // --json prints the document, then exits 2 all the same.
    let spec_path = files(&p, &spec("again", 50), &demanding_planner(), &ops(0.6875));
    let out = p.run(None, &["--json", "negotiate", &spec_path]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    no_position_shown(&out);
    let doc = json_of(&out);
    assert_eq!(doc["result"], "walk_away");
    assert_eq!(doc["outcome"], Value::Null);
    assert_eq!(doc["ended"], "no_zone");
    assert_eq!(doc["unsettled"], json!(["deploy"]));
    assert_eq!(
        doc["vetoes"],
        json!([{"party": "ops", "vetoed": {"deploy": "multi-region"}}])
    );

    // The round limit can end it first: one offer, and a zone left unreached.
    let spec_path = files(&p, &spec("short", 1), &planner(), &ops(0.6875));
    let out = p.run(None, &["--json", "negotiate", &spec_path]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(doc["ended"], "round_limit");
    assert_eq!(doc["trail"].as_array().unwrap().len(), 1);

    // Reading a walk-away is not itself a failure.
    let shown = p.run(None, &["negotiate", "show", "db-choice"]);
    assert_eq!(code(&shown), 0);
    no_position_shown(&shown);
}

#[test]
fn malformed_input_exits_3_naming_the_file_and_path_and_stores_nothing() {
    let p = Project::new(PARTIES);
    let good = spec("db-choice", 50);
    let nine: Vec<Value> = (0..9)
        .map(|i| json!({"name": format!("i{i}"), "options": ["a"]}))
        .collect();
    let cases: Vec<(Value, Value, &str)> = vec![
        (
            {
                let mut s = good.clone();
                s["rounds"] = json!("many");
                s
            },
            planner(),
            "spec.json (the negotiation spec): $.rounds: must be a whole number",
        ),
        (
            {
                let mut s = good.clone();
                s["issues"] = json!(nine);
                s
            },
            planner(),
            "$.issues: must hold at most 8",
        ),
        (
            {
                let mut s = good.clone();
                s["parties"][1].as_object_mut().unwrap().remove("position");
                s
            },
            planner(),
            "$.parties[1].position: missing: every party needs its position file",
        ),
        (
            good.clone(),
            {
                let mut pos = planner();
                pos["utilities"]["db"]["sqlite"] = json!(1.5);
                pos
            },
            "planner.json (planner's position): $.utilities.db.sqlite: must be a number from 0 to 1",
        ),
        (
            good.clone(),
            {
                let mut pos = planner();
                pos["weights"]["db"] = json!("heavy");
                pos
            },
            "$.weights.db: must be a number",
        ),
        (
            good.clone(),
            {
                let mut pos = planner();
                pos["weights"]["region"] = json!(0.3125);
                pos
            },
            "$.weights.region: is not an issue of the spec",
        ),
    ];
    for (spec_doc, planner_doc, want) in cases {
        let spec_path = files(&p, &spec_doc, &planner_doc, &ops(0.6875));
        let err = refused(&p, None, &["negotiate", &spec_path], 3);
        assert!(err.contains(want), "want {want:?} in {err}");
    }
    let shown = p.run(None, &["negotiate", "show", "db-choice"]);
    assert_eq!(code(&shown), 4, "nothing was opened");

    // A submitted position is checked against the opened spec, and not JSON is refused.
    let spec_path = files(&p, &good, &planner(), &ops(0.6875));
    p.ok(None, &["negotiate", "open", &spec_path]);
    let bad = write(
        &p,
        "bad.json",
        &json!({"weights": {"db": 0.4375}, "utilities": {}, "floor": 0}),
    );
    let err = refused(&p, Some("ops"), &submit_args(&["db-choice", &bad]), 3);
    assert!(err.contains("$.utilities.db: missing"), "{err}");
    std::fs::write(p.path().join("broken.json"), "{\"weights\": ").unwrap();
    let broken = p.path().join("broken.json");
    let err = refused(
        &p,
        Some("ops"),
        &submit_args(&["db-choice", broken.to_str().unwrap()]),
        3,
    );
    assert!(err.contains("not valid JSON (line 1"), "{err}");

    // A position file over the payload cap is refused before it is read whole.
    let huge = p.path().join("huge.json");
    std::fs::write(&huge, vec![b' '; 300 * 1024]).unwrap();
    let err = refused(
        &p,
        Some("ops"),
        &submit_args(&["db-choice", huge.to_str().unwrap()]),
        3,
    );
    assert!(err.contains("over the cap"), "{err}");
}

#[test]
fn the_help_shows_the_formats_and_examples() {
    let p = Project::new(&[]);
    let help = p.ok(None, &["negotiate", "--help"]);
    for want in [
        "Examples:",
        "baton negotiate db-choice.json",
        "negotiate submit db-choice --position ops.json --as ops",
        "\"veto\"",
    ] {
        assert!(help.contains(want), "{want} missing from:\n{help}");
    }
    let out = p.run(None, &["negotiate"]);
    assert_eq!(code(&out), 2);
}
