//! The write commands of the command line, each a scenario: a starting point made once, a
//! loop of the command that prints one line per acknowledged write, and what must hold
//! after the loop was killed. Every trial runs on a copy of the starting point.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::process::{Baton, Killed, XorShift, copy_dir, kill_loop};
use crate::{Counter, Options, Tally, check};

mod after;
mod pools;
mod reservations;

/// What a check found, each under the counter it goes in.
type Findings = Vec<(Counter, String)>;

/// One command under test.
pub struct Scenario {
    pub name: &'static str,
    /// Makes the starting point (an initialised project) every trial copies.
    prepare: fn(&Baton, &Path) -> Result<(), String>,
    /// The loop, `sh -c` with `$1` the `baton` executable, run in the project.
    script: &'static str,
    /// Kill instants in ms after the loop starts; `None`: from 0 to half again as long as
    /// the loop takes unkilled (measured on copies first).
    delay: Option<(u64, u64)>,
    /// What must hold after the kill; each finding under its counter. Says in a few words
    /// what the kill left (for `--verbose`).
    check: fn(&Baton, &Path, &Killed, &mut Findings) -> Result<String, String>,
}

pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "send",
        prepare: team,
        script: SEND_LOOP,
        delay: Some((20, 1500)),
        check: check_send,
    },
    Scenario {
        name: "complete",
        prepare: requests,
        script: COMPLETE_LOOP,
        delay: Some((20, 1500)),
        check: check_complete,
    },
    Scenario {
        name: "order-steps",
        prepare: orders,
        script: ORDER_LOOP,
        delay: Some((20, 2500)),
        check: check_orders,
    },
    Scenario {
        name: "approve",
        prepare: held_effects,
        script: APPROVE,
        delay: None,
        check: check_approve,
    },
    Scenario {
        name: "state-render",
        prepare: memory,
        script: RENDER_LOOP,
        delay: Some((20, 1500)),
        check: check_render,
    },
    Scenario {
        name: "receipt-write",
        prepare: team,
        script: RECEIPT_LOOP,
        delay: Some((20, 1500)),
        check: check_receipts,
    },
    Scenario {
        name: "run-exit",
        prepare: team,
        script: RUN_LOOP,
        delay: Some((20, 1500)),
        check: check_runs,
    },
    Scenario {
        name: "import",
        prepare: log_parts,
        script: IMPORT_LOOP,
        delay: None,
        check: check_import,
    },
    Scenario {
        name: "reserve-release",
        prepare: team,
        script: reservations::RESERVE_LOOP,
        delay: Some((20, 2500)),
        check: reservations::check_reserve,
    },
    Scenario {
        name: "claim-next",
        prepare: team,
        script: pools::CLAIM_LOOP,
        delay: Some((20, 2500)),
        check: pools::check_claims,
    },
    Scenario {
        name: "guard-record",
        prepare: reservations::guarded,
        script: reservations::BYPASS_LOOP,
        delay: Some((20, 2500)),
        check: reservations::check_bypass,
    },
    Scenario {
        name: "order-after",
        prepare: after::pairs,
        script: after::AFTER_LOOP,
        delay: Some((20, 4000)),
        check: after::check_after,
    },
];

/// Who the projects hold.
const TEAM: &[(&str, &str)] = &[
    ("planner", "planner"),
    ("impl-1", "executor"),
    ("owner", "owner"),
];

fn team(baton: &Baton, dir: &Path) -> Result<(), String> {
    baton.ok(dir, None, &["init"])?;
    for (name, role) in TEAM {
        baton.ok(dir, None, &["agent", "add", name, "--role", role])?;
    }
    Ok(())
}

/// Runs the trials of one scenario.
pub fn run(scenario: &Scenario, options: &Options) -> Result<Tally, String> {
    let baton = Baton {
        exe: options.baton.clone(),
    };
    let mut tally = Tally::new(scenario.name);
    let start = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    (scenario.prepare)(&baton, start.path())
        .map_err(|e| format!("{}: preparing the starting point: {e}", scenario.name))?;
    let (min, max) = match scenario.delay {
        Some(range) => range,
        None => {
            // The median of three unkilled runs; kills spread to half as long again, so
            // some land after the command acknowledged.
            let mut taken = [
                unkilled(&baton, start.path(), scenario)?,
                unkilled(&baton, start.path(), scenario)?,
                unkilled(&baton, start.path(), scenario)?,
            ];
            taken.sort_unstable();
            (0, (taken[1].as_millis() as u64 * 3 / 2).max(2))
        }
    };
    let mut rng = XorShift::stream(options.seed, scenario.name);
    let trials = u64::from(options.trials);
    for trial in 0..trials {
        let delay = rng.delay(trial, trials, min, max);
        let label = format!("trial {trial} (kill after {} ms)", delay.as_millis());
        let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
        copy_dir(start.path(), dir.path())?;
        tally.trials += 1;
        let killed = match kill_loop(&baton, dir.path(), scenario.script, &[], delay) {
            Ok(killed) => killed,
            Err(e) => {
                tally.problem(&label, Counter::Other, e);
                continue;
            }
        };
        tally.killed_mid_run += u64::from(killed.mid_run);
        tally.acknowledged += killed.acknowledged.len() as u64;
        let mut findings = Vec::new();
        let left =
            (scenario.check)(&baton, dir.path(), &killed, &mut findings).unwrap_or_else(|e| {
                findings.push((Counter::Other, e));
                String::new()
            });
        match check::sqlite(&dir.path().join(".baton/baton.db")) {
            Ok(None) => {}
            Ok(Some(p)) => findings.push((Counter::Integrity, p)),
            Err(e) => findings.push((Counter::Other, e)),
        }
        if options.verbose {
            eprintln!(
                "crash: {}: {label}: {} acknowledged, {left}, {}{}",
                scenario.name,
                killed.acknowledged.len(),
                if killed.mid_run {
                    "killed mid-run"
                } else {
                    "had finished"
                },
                if findings.is_empty() {
                    ""
                } else {
                    ", PROBLEMS"
                }
            );
        }
        for (counter, what) in findings {
            tally.problem(&label, counter, what);
        }
    }
    Ok(tally)
}

/// How long the scenario's loop takes when nobody kills it, on a copy of the start.
fn unkilled(baton: &Baton, start: &Path, scenario: &Scenario) -> Result<Duration, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    copy_dir(start, dir.path())?;
    let began = Instant::now();
    let killed = kill_loop(
        baton,
        dir.path(),
        scenario.script,
        &[],
        Duration::from_secs(60),
    )?;
    if killed.mid_run {
        return Err(format!("{}: the loop takes over a minute", scenario.name));
    }
    Ok(began.elapsed())
}

/// Records a finding.
fn push(findings: &mut Findings, counter: Counter, what: String) {
    findings.push((counter, what));
}

// ---------------------------------------------------------------------------------------
// send

/// Sends `msg-1`, `msg-2`, … in order, one `baton` process each; prints each id `baton
/// send` printed after committing.
const SEND_LOOP: &str = r#"i=1
while :; do
  "$1" --as planner send --to impl-1 --type info --topic crash --body "msg-$i" || exit $?
  i=$((i + 1))
done"#;

/// Every message on the `crash` topic as `(id, body)`, paging through `baton search`,
/// as `who`, with `extra` filters.
fn stored_messages(
    baton: &Baton,
    dir: &Path,
    who: &str,
    extra: &[&str],
) -> Result<Vec<(String, String)>, String> {
    let mut stored = Vec::new();
    let mut cursor = String::new();
    loop {
        let mut args = vec!["search", "--topic", "crash", "--limit", "100"];
        args.extend_from_slice(extra);
        if !cursor.is_empty() {
            args.extend(["--cursor", &cursor]);
        }
        let page = baton.json(dir, Some(who), &args)?;
        for item in page["items"].as_array().into_iter().flatten() {
            // The bodies are short, so the excerpt is the whole body.
            stored.push((
                item["id"].as_str().unwrap_or_default().to_owned(),
                item["excerpt"].as_str().unwrap_or_default().to_owned(),
            ));
        }
        cursor = page["next"].as_str().unwrap_or_default().to_owned();
        if cursor.is_empty() {
            return Ok(stored);
        }
    }
}

fn check_send(
    baton: &Baton,
    dir: &Path,
    killed: &Killed,
    findings: &mut Findings,
) -> Result<String, String> {
    let stored = stored_messages(baton, dir, "impl-1", &[])?;
    let mut ids: HashMap<&str, u32> = HashMap::new();
    let mut bodies: HashMap<&str, u32> = HashMap::new();
    for (id, body) in &stored {
        *ids.entry(id).or_default() += 1;
        *bodies.entry(body).or_default() += 1;
    }
    for (what, counts) in [("id", &ids), ("body", &bodies)] {
        for (x, n) in counts.iter().filter(|(_, n)| **n > 1) {
            push(
                findings,
                Counter::Duplicated,
                format!("{what} {x} is stored {n} times"),
            );
        }
    }
    for (n, id) in killed.acknowledged.iter().enumerate() {
        let body = format!("msg-{}", n + 1);
        if !stored.iter().any(|(s, b)| s == id && *b == body) {
            push(
                findings,
                Counter::Lost,
                format!("acknowledged send {id} ({body}) is not stored"),
            );
        }
    }
    // The loop is sequential: the store holds the first k messages, the acknowledged
    // ones and at most one more, committed before its id could be printed.
    let expected: HashSet<String> = (1..=bodies.len()).map(|n| format!("msg-{n}")).collect();
    if bodies.keys().any(|b| !expected.contains(*b)) {
        push(
            findings,
            Counter::Other,
            "the store holds a gap or a stranger".into(),
        );
    }
    if bodies.len() > killed.acknowledged.len() + 1 {
        push(
            findings,
            Counter::Other,
            format!(
                "{} stored but {} acknowledged: one send can be in flight, not more",
                bodies.len(),
                killed.acknowledged.len()
            ),
        );
    }
    Ok(format!("{} stored", bodies.len()))
}

// ---------------------------------------------------------------------------------------
// complete

const REQUESTS: usize = 120;

/// The team, and `REQUESTS` requests from the planner to impl-1 that impl-1 has read, their
/// ids in `ids.txt` in order.
fn requests(baton: &Baton, dir: &Path) -> Result<(), String> {
    team(baton, dir)?;
    let mut ids = String::new();
    for i in 1..=REQUESTS {
        let id = baton.ok(
            dir,
            Some("planner"),
            &[
                "send",
                "--to",
                "impl-1",
                "--type",
                "request",
                "--topic",
                "crash",
                "--body",
                &format!("req-{i}"),
            ],
        )?;
        let id = id.trim();
        baton.ok(dir, Some("impl-1"), &["show", id])?;
        ids.push_str(id);
        ids.push('\n');
    }
    std::fs::write(dir.join("ids.txt"), ids).map_err(|e| format!("write ids.txt: {e}"))
}

/// Completes the requests in order; prints each id once `baton complete` exited 0.
const COMPLETE_LOOP: &str = r#"while read -r id; do
  "$1" --as impl-1 complete "$id" --note done >/dev/null || exit $?
  echo "$id"
done < ids.txt"#;

fn check_complete(
    baton: &Baton,
    dir: &Path,
    killed: &Killed,
    findings: &mut Findings,
) -> Result<String, String> {
    let ids: Vec<String> = std::fs::read_to_string(dir.join("ids.txt"))
        .map_err(|e| format!("read ids.txt: {e}"))?
        .lines()
        .map(str::to_owned)
        .collect();
    let completed: HashSet<String> =
        stored_messages(baton, dir, "impl-1", &["--status", "completed"])?
            .into_iter()
            .map(|(id, _)| id)
            .collect();
    for id in &killed.acknowledged {
        if !completed.contains(id) {
            push(
                findings,
                Counter::Lost,
                format!("acknowledged completion of {id} is not stored"),
            );
        }
    }
    // Completed in order: the acknowledged ones and at most the next.
    let k = killed.acknowledged.len();
    for (n, id) in ids.iter().enumerate() {
        if completed.contains(id) && n > k {
            push(
                findings,
                Counter::Other,
                format!("request {n} ({id}) is completed though the loop never got there"),
            );
        }
    }
    duplicate_events(baton, dir, findings)?;
    Ok(format!("{} completed", completed.len()))
}

// ---------------------------------------------------------------------------------------
// Shared checks

/// The project's event log, one JSON document per event.
fn events(baton: &Baton, dir: &Path) -> Result<Vec<Value>, String> {
    baton
        .ok(dir, None, &["export"])?
        .lines()
        .map(|l| serde_json::from_str(l).map_err(|e| format!("export printed {l:?}: {e}")))
        .collect()
}

/// No two events of the log record the same change (everything but their seq, id and
/// time): a write applied twice would.
fn duplicate_events(baton: &Baton, dir: &Path, findings: &mut Findings) -> Result<(), String> {
    let mut seen: HashMap<String, u32> = HashMap::new();
    for mut event in events(baton, dir)? {
        if let Some(map) = event.as_object_mut() {
            for field in ["seq", "id", "at"] {
                map.remove(field);
            }
        }
        *seen.entry(event.to_string()).or_default() += 1;
    }
    for (change, n) in seen.into_iter().filter(|(_, n)| *n > 1) {
        push(
            findings,
            Counter::Duplicated,
            format!("{n} events record {change}"),
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// order steps

const ORDERS: usize = 80;

/// The shared Work Order (`baton-core/tests/fixtures/work-order.json`) under the id `id`:
/// from the planner to impl-1, passing every rule, the contract included.
fn order_doc(id: &str) -> Value {
    let mut order: Value = serde_json::from_str(include_str!(
        "../../baton-core/tests/fixtures/work-order.json"
    ))
    .expect("the fixture is JSON");
    order["id"] = id.into();
    order["escalate_to"] = "owner".into();
    order
}

/// impl-1's report on `id` (`baton-core/tests/fixtures/work-report.json`): done, or blocked
/// with a question.
fn report_doc(id: &str, status: &str) -> Value {
    let mut report: Value = serde_json::from_str(include_str!(
        "../../baton-core/tests/fixtures/work-report.json"
    ))
    .expect("the fixture is JSON");
    report["order_id"] = id.into();
    report["status"] = status.into();
    if status == "blocked" {
        report["questions"] = json!(["Which time zone?"]);
    }
    report
}

fn write_json(dir: &Path, name: &str, doc: &Value) -> Result<(), String> {
    std::fs::write(dir.join(name), doc.to_string()).map_err(|e| format!("write {name}: {e}"))
}

/// The steps order `n` takes, in order, as `(who, action)` with the action as the order's
/// events name it: every step of the lifecycle is taken by some order.
fn path(n: usize) -> &'static [(&'static str, &'static str)] {
    match n % 4 {
        0 => &[
            ("impl-1", "accept"),
            ("impl-1", "start"),
            ("impl-1", "report_blocked"),
            ("planner", "answer"),
            ("impl-1", "report_done"),
            ("planner", "rework"),
            ("impl-1", "report_done"),
            ("planner", "approve"),
        ],
        1 => &[
            ("impl-1", "accept"),
            ("impl-1", "start"),
            ("impl-1", "report_done"),
            ("planner", "approve"),
        ],
        2 => &[("impl-1", "decline")],
        _ => &[("impl-1", "accept"), ("planner", "cancel")],
    }
}

/// The team and `ORDERS` orders offered to impl-1, with the reports the loop hands in, and
/// `steps.txt`: a line `ORDER WHO ACTION FILE` per step, in order.
fn orders(baton: &Baton, dir: &Path) -> Result<(), String> {
    team(baton, dir)?;
    let mut steps = String::new();
    for n in 1..=ORDERS {
        let id = format!("wo_{n}");
        write_json(dir, &format!("order-{n}.json"), &order_doc(&id))?;
        write_json(dir, &format!("done-{n}.json"), &report_doc(&id, "done"))?;
        write_json(
            dir,
            &format!("blocked-{n}.json"),
            &report_doc(&id, "blocked"),
        )?;
        baton.ok(
            dir,
            Some("planner"),
            &["order", "create", &format!("order-{n}.json")],
        )?;
        for (who, action) in path(n) {
            let file = match *action {
                "report_blocked" => format!("blocked-{n}.json"),
                "report_done" => format!("done-{n}.json"),
                _ => "-".into(),
            };
            steps.push_str(&format!("{id} {who} {action} {file}\n"));
        }
    }
    std::fs::write(dir.join("steps.txt"), steps).map_err(|e| format!("write steps.txt: {e}"))
}

/// Takes the steps in order, one `baton` each; prints `ORDER ACTION` once it exited 0.
const ORDER_LOOP: &str = r#"while read -r order who action file; do
  case "$action" in
    report_*) "$1" --as "$who" order report "$order" "$file" ;;
    answer) "$1" --as "$who" order answer "$order" --text UTC ;;
    rework) "$1" --as "$who" order rework "$order" --reason "keep the header row" ;;
    *) "$1" --as "$who" order "$action" "$order" ;;
  esac >/dev/null || exit $?
  echo "$order $action"
done < steps.txt"#;

fn check_orders(
    baton: &Baton,
    dir: &Path,
    killed: &Killed,
    findings: &mut Findings,
) -> Result<String, String> {
    let mut acked: HashMap<String, usize> = HashMap::new();
    for line in &killed.acknowledged {
        let order = line.split(' ').next().unwrap_or_default();
        *acked.entry(order.to_owned()).or_default() += 1;
    }
    // Orders past the one in flight were never touched: the list says so in one read.
    let reached = killed
        .acknowledged
        .last()
        .and_then(|l| {
            l.split(' ')
                .next()?
                .strip_prefix("wo_")?
                .parse::<usize>()
                .ok()
        })
        .unwrap_or(0)
        + 1;
    let listed = baton.json(dir, Some("planner"), &["order", "list", "--all"])?;
    let listed = listed["items"].as_array().cloned().unwrap_or_default();
    if listed.len() != ORDERS {
        push(
            findings,
            Counter::Lost,
            format!("{} orders listed, not {ORDERS}", listed.len()),
        );
    }
    for order in &listed {
        let n: usize = order["id"]
            .as_str()
            .and_then(|id| id.strip_prefix("wo_")?.parse().ok())
            .unwrap_or(0);
        if n > reached && order["seq"] != 1 {
            push(
                findings,
                Counter::Other,
                format!("wo_{n} was stepped though the loop never got there: {order}"),
            );
        }
    }
    let mut unacknowledged = 0;
    for n in 1..=reached.min(ORDERS) {
        let id = format!("wo_{n}");
        let shown = baton.json(dir, None, &["order", "show", &id])?;
        let actions: Vec<&str> = shown["events"]
            .as_array()
            .into_iter()
            .flatten()
            .skip(1) // its creation
            .map(|e| e["action"].as_str().unwrap_or("?"))
            .collect();
        let want: Vec<&str> = path(n).iter().map(|(_, a)| *a).collect();
        if actions.len() > want.len() || actions[..] != want[..actions.len()] {
            push(
                findings,
                Counter::Duplicated,
                format!("{id} holds the steps {actions:?}, not a prefix of {want:?}"),
            );
            continue;
        }
        let acknowledged = acked.get(&id).copied().unwrap_or(0);
        if actions.len() < acknowledged {
            push(
                findings,
                Counter::Lost,
                format!(
                    "{id}: {acknowledged} steps acknowledged, {} stored ({actions:?})",
                    actions.len()
                ),
            );
        }
        unacknowledged += actions.len().saturating_sub(acknowledged);
        // The seqs of its steps: one each, no gap.
        let seqs: Vec<i64> = shown["events"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| e["seq"].as_i64().unwrap_or(-1))
            .collect();
        if seqs != (1..=seqs.len() as i64).collect::<Vec<_>>() {
            push(
                findings,
                Counter::Duplicated,
                format!("{id}'s seqs are {seqs:?}"),
            );
        }
    }
    if unacknowledged > 1 {
        push(
            findings,
            Counter::Other,
            format!("{unacknowledged} steps stored unacknowledged: one can be in flight, not more"),
        );
    }
    duplicate_events(baton, dir, findings)?;
    Ok(format!("{} steps unacknowledged", unacknowledged))
}

// ---------------------------------------------------------------------------------------
// approve with staged effects

const EFFECTS: usize = 6;
const UPSTREAM: &str = include_str!("upstream.py");

/// The team, an order from the owner to impl-1 that stages `files/append`, `EFFECTS`
/// calls held by `baton gateway` (each appending `effect-N` when it runs), and the report
/// listing them: the order waits for its approval.
fn held_effects(baton: &Baton, dir: &Path) -> Result<(), String> {
    use std::io::Write;
    team(baton, dir)?;
    std::fs::write(dir.join("upstream.py"), UPSTREAM).map_err(|e| format!("upstream.py: {e}"))?;
    let order = json!({
        "spec": "awl/work-order@0.4", "id": "wo_1", "created_at": "2025-01-01T00:00:00Z",
        "from": "owner", "to": "impl-1", "goal": "File the release notes",
        "criteria": [{"id": "c1", "text": "Notes filed"}],
        "budget": {"usd": 5}, "deadline": "2999-01-01T00:00:00Z",
        "tools": ["files/*"], "staged": ["files/append"],
        "x-baton": {
            "context": {"repository": "git@example.org:acme/shop.git", "base_revision": "abc123",
                        "reproduction": "-", "expected": "notes filed"},
            "scope": {"allowed": ["notes/"], "excluded": []},
            "execution": {"test_command": "sh -c true"},
            "acceptance": {"owner": "owner"},
            "stop_when": ["the notes are missing"], "decision": {"resume_at": "file the notes"}
        }
    });
    write_json(dir, "order.json", &order)?;
    baton.ok(dir, Some("owner"), &["order", "create", "order.json"])?;
    baton.ok(dir, Some("impl-1"), &["order", "accept", "wo_1"])?;
    baton.ok(dir, Some("impl-1"), &["order", "start", "wo_1"])?;
    // A session through the gateway, in raw JSON-RPC: the handshake, then the calls.
    let mut lines = vec![
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "baton-crash", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ];
    for n in 1..=EFFECTS {
        lines.push(json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                          "params": {"name": "append", "arguments": {"line": format!("effect-{n}")}}}));
    }
    let upstream = dir.join("upstream.txt");
    let mut gateway = baton
        .cmd(
            dir,
            Some("impl-1"),
            &[
                "gateway",
                "--order",
                "wo_1",
                "--name",
                "files",
                "--",
                "python3",
                "-B",
                "upstream.py",
            ],
        )
        .env("UPSTREAM_FILE", &upstream)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("baton gateway: {e}"))?;
    {
        let mut stdin = gateway.stdin.take().expect("piped");
        for line in &lines {
            writeln!(stdin, "{line}").map_err(|e| format!("write to the gateway: {e}"))?;
        }
    }
    let out = gateway
        .wait_with_output()
        .map_err(|e| format!("baton gateway: {e}"))?;
    let said = String::from_utf8_lossy(&out.stdout);
    for n in 1..=EFFECTS {
        if !said.contains(&format!("pending:files/append#{n}")) {
            return Err(format!(
                "the gateway did not hold call {n}: {said} {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    if upstream.exists() {
        return Err("the gateway ran a held call".into());
    }
    let effects: Vec<Value> = (1..=EFFECTS)
        .map(|n| {
            json!({"ref": format!("files/append#{n}"), "tool": "files/append",
                        "arguments": {"line": format!("effect-{n}")}})
        })
        .collect();
    let report = json!({
        "spec": "awl/work-report@0.3", "order_id": "wo_1", "from": "impl-1", "status": "done",
        "result": {"summary": "Notes staged"},
        "evidence": [{"criterion": "c1", "type": "note", "note": "staged through the gateway"}],
        "cost": {"usd": 0, "tool_calls": EFFECTS}, "finished_at": "2025-01-01T01:00:00Z",
        "tools_used": ["files/append"], "effects": effects,
        "x-baton": {"evidence": {
            "before": {"command": "sh -c true", "exit_code": 1, "output": "-", "base_revision": "abc123"},
            "change": [{"file": "notes/x", "reason": "notes"}],
            "after": {"command": "sh -c true", "exit_code": 0, "output": "-"},
            "uncertainty": {"none": true},
            "review": {"commit": "def456", "acceptance_owner": "owner"}
        }}
    });
    write_json(dir, "report.json", &report)?;
    baton.ok(
        dir,
        Some("impl-1"),
        &["order", "report", "wo_1", "report.json"],
    )?;
    Ok(())
}

/// One approval; `approved` once it exited 0.
const APPROVE: &str = r#"UPSTREAM_FILE="$PWD/upstream.txt" "$1" --as owner order approve wo_1 >/dev/null || exit $?
echo approved"#;

/// What the upstream ran: its file's lines.
fn ran(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("upstream.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Each effect's status, by its line.
fn effect_statuses(baton: &Baton, dir: &Path) -> Result<Vec<String>, String> {
    let shown = baton.json(dir, None, &["order", "show", "wo_1"])?;
    Ok(shown["effects"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| e["status"].as_str().unwrap_or("?").to_owned())
        .collect())
}

/// Effects run twice (a line more than once), and lines out of order.
fn runs_once(lines: &[String], when: &str, findings: &mut Findings) {
    for n in 1..=EFFECTS {
        let line = format!("effect-{n}");
        let times = lines.iter().filter(|l| **l == line).count();
        if times > 1 {
            push(
                findings,
                Counter::EffectsTwice,
                format!("{when}: effect {n} ran {times} times"),
            );
        }
    }
    let want: Vec<String> = (1..=lines.len()).map(|n| format!("effect-{n}")).collect();
    if lines.iter().collect::<HashSet<_>>().len() == lines.len() && lines != want.as_slice() {
        push(
            findings,
            Counter::Other,
            format!("{when}: the effects ran out of order: {lines:?}"),
        );
    }
}

fn check_approve(
    baton: &Baton,
    dir: &Path,
    killed: &Killed,
    findings: &mut Findings,
) -> Result<String, String> {
    let lines = ran(dir);
    runs_once(&lines, "after the kill", findings);
    let statuses = effect_statuses(baton, dir)?;
    let left = statuses.clone();
    if statuses.len() != EFFECTS {
        push(
            findings,
            Counter::Lost,
            format!(
                "{} effects held, not {EFFECTS}: {statuses:?}",
                statuses.len()
            ),
        );
        return Ok("effects not held".into());
    }
    for (n, status) in statuses.iter().enumerate() {
        let line = format!("effect-{}", n + 1);
        let present = lines.contains(&line);
        match (status.as_str(), present) {
            ("ran", false) => push(
                findings,
                Counter::Lost,
                format!("{line} is recorded as ran but did not run"),
            ),
            ("held", true) => push(
                findings,
                Counter::Other,
                format!("{line} ran but is recorded as held: the next approval would run it again"),
            ),
            _ => {}
        }
    }
    if !killed.acknowledged.is_empty() {
        if statuses.iter().any(|s| s != "ran") || lines.len() != EFFECTS {
            push(
                findings,
                Counter::Lost,
                format!(
                    "the approval was acknowledged, yet the effects stand {statuses:?} with {} run",
                    lines.len()
                ),
            );
        }
        return Ok(format!("effects {statuses:?}"));
    }
    // Approving again runs what is still held, once, and stops at an uncertain effect.
    let again = baton
        .cmd(dir, Some("owner"), &["order", "approve", "wo_1"])
        .env("UPSTREAM_FILE", dir.join("upstream.txt"))
        .output()
        .map_err(|e| format!("approve again: {e}"))?;
    let lines = ran(dir);
    runs_once(&lines, "after approving again", findings);
    let statuses = effect_statuses(baton, dir)?;
    match again.status.code() {
        Some(0) if statuses.iter().all(|s| s == "ran") && lines.len() == EFFECTS => {}
        Some(1) if statuses.iter().any(|s| s == "uncertain") => {}
        _ => push(
            findings,
            Counter::Other,
            format!(
                "approving again exited {} with the effects {statuses:?} and {} lines: {}",
                again.status,
                lines.len(),
                String::from_utf8_lossy(&again.stderr).trim()
            ),
        ),
    }
    Ok(format!(
        "effects {left:?}, then {statuses:?} on approving again"
    ))
}

// ---------------------------------------------------------------------------------------
// state render

const DECISIONS: usize = 40;

/// The team and some memory, so `STATE.md` is more than a few lines.
fn memory(baton: &Baton, dir: &Path) -> Result<(), String> {
    team(baton, dir)?;
    for n in 1..=DECISIONS {
        baton.ok(
            dir,
            Some("planner"),
            &[
                "decide",
                &format!("Decision {n}: keep the filters in the query"),
                "--why",
                "one code path for every export",
            ],
        )?;
    }
    Ok(())
}

/// Sets the focus to `focus-N` and renders `STATE.md`, N = 1, 2, …
const RENDER_LOOP: &str = r#"i=1
while :; do
  "$1" --as planner focus set "focus-$i" >/dev/null || exit $?
  echo "focus $i"
  "$1" state render >/dev/null || exit $?
  echo "render $i"
  i=$((i + 1))
done"#;

/// The number N of the first `focus-N` in `text`.
fn focus_number(text: &str) -> Option<u64> {
    let at = text.find("focus-")? + "focus-".len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn check_render(
    baton: &Baton,
    dir: &Path,
    killed: &Killed,
    findings: &mut Findings,
) -> Result<String, String> {
    let last = |what: &str| {
        killed
            .acknowledged
            .iter()
            .filter_map(|l| l.strip_prefix(what)?.trim().parse::<u64>().ok())
            .max()
            .unwrap_or(0)
    };
    let (focus, render) = (last("focus "), last("render "));
    let file = dir.join("STATE.md");
    match std::fs::read_to_string(&file) {
        Err(_) if render == 0 => {}
        Err(e) => push(
            findings,
            Counter::Lost,
            format!("render {render} was acknowledged, yet STATE.md cannot be read: {e}"),
        ),
        Ok(text) => {
            let out = baton.output(dir, None, &["--json", "check", "STATE.md"])?;
            // Valid, or stale (a conflict) when the focus moved after the render: whole
            // either way. Truncated or corrupted is refused; drifted, a usage error.
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let stale = said.contains("\"kind\":\"conflict\"");
            if !out.status.success() && !stale {
                push(
                    findings,
                    Counter::Torn,
                    format!("baton check STATE.md exits {}: {}", out.status, said.trim()),
                );
            }
            match focus_number(&text) {
                Some(n) if n >= render && n <= render + 1 => {}
                Some(n) if n < render => push(
                    findings,
                    Counter::Lost,
                    format!("STATE.md holds focus-{n}, render {render} was acknowledged"),
                ),
                other => push(
                    findings,
                    Counter::Torn,
                    format!(
                        "STATE.md holds focus {other:?} after render {render} was acknowledged"
                    ),
                ),
            }
        }
    }
    let state = baton.json(dir, None, &["state", "show"])?;
    let stored = focus_number(&state.to_string()).unwrap_or(0);
    if stored < focus {
        push(
            findings,
            Counter::Lost,
            format!("focus-{focus} was acknowledged, the store holds focus-{stored}"),
        );
    }
    Ok(format!("focus-{stored} stored"))
}

// ---------------------------------------------------------------------------------------
// receipt write

/// Writes `art-N.txt` and records its receipt as step `step-N`, N = 1, 2, …
const RECEIPT_LOOP: &str = r#"i=1
while :; do
  printf 'artifact %s\n' "$i" > "art-$i.txt"
  "$1" --as impl-1 receipt write --step "step-$i" --artifact "art-$i.txt" >/dev/null || exit $?
  echo "step-$i"
  i=$((i + 1))
done"#;

fn check_receipts(
    baton: &Baton,
    dir: &Path,
    killed: &Killed,
    findings: &mut Findings,
) -> Result<String, String> {
    // How many receipts each step has in the log.
    let mut per_step: HashMap<String, u32> = HashMap::new();
    for event in events(baton, dir)? {
        let text = event.to_string();
        if let Some(at) = text.find("\"step\":\"step-") {
            let rest = &text[at + "\"step\":\"".len()..];
            let step: String = rest.chars().take_while(|c| *c != '"').collect();
            *per_step.entry(step).or_default() += 1;
        }
    }
    for step in &killed.acknowledged {
        match per_step.get(step) {
            None => push(
                findings,
                Counter::Lost,
                format!("acknowledged receipt {step} is not stored"),
            ),
            Some(1) => {}
            Some(n) => push(
                findings,
                Counter::Duplicated,
                format!("{step} has {n} receipts"),
            ),
        }
    }
    if per_step.len() > killed.acknowledged.len() + 1 {
        push(
            findings,
            Counter::Other,
            format!(
                "{} receipts stored, {} acknowledged",
                per_step.len(),
                killed.acknowledged.len()
            ),
        );
    }
    // Every stored receipt still matches its artifact (the file was whole before the write).
    let out = baton.output(dir, None, &["receipt", "verify"])?;
    if !out.status.success() && !per_step.is_empty() {
        push(
            findings,
            Counter::Torn,
            format!(
                "receipt verify exits {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        );
    }
    duplicate_events(baton, dir, findings)?;
    Ok(format!("{} receipts", per_step.len()))
}

// ---------------------------------------------------------------------------------------
// run's exit recording

/// Runs `sh -c 'exit C' run-N C` through `baton run`, C = 3 for every third and 0 for the
/// others; prints `run-N C` once the wrapper exited with the command's code.
const RUN_LOOP: &str = r#"i=1
while :; do
  code=0
  if [ $((i % 3)) -eq 0 ]; then code=3; fi
  "$1" --as impl-1 run -- sh -c 'exit "$1"' "run-$i" "$code" >/dev/null
  rc=$?
  if [ "$rc" -ne "$code" ]; then echo "run-$i exited $rc, not $code" >&2; exit 100; fi
  echo "run-$i $code"
  i=$((i + 1))
done"#;

/// Every run, paging through `baton runs --all`.
fn runs(baton: &Baton, dir: &Path) -> Result<Vec<Value>, String> {
    let mut all = Vec::new();
    let mut cursor = String::new();
    loop {
        let mut args = vec!["runs", "--all"];
        if !cursor.is_empty() {
            args.extend(["--cursor", &cursor]);
        }
        let page = baton.json(dir, None, &args)?;
        all.extend(page["items"].as_array().into_iter().flatten().cloned());
        cursor = page["next"].as_str().unwrap_or_default().to_owned();
        if cursor.is_empty() {
            return Ok(all);
        }
    }
}

fn check_runs(
    baton: &Baton,
    dir: &Path,
    killed: &Killed,
    findings: &mut Findings,
) -> Result<String, String> {
    // The run a kill cut short has no recorded end: the reaper finds its wrapper gone.
    baton.ok(dir, None, &["reap"])?;
    let mut by_name: HashMap<String, Vec<Value>> = HashMap::new();
    for run in runs(baton, dir)? {
        let name = run["command"][3].as_str().unwrap_or("?").to_owned();
        by_name.entry(name).or_default().push(run);
    }
    for line in &killed.acknowledged {
        let (name, code) = line.split_once(' ').unwrap_or((line, "?"));
        let want = if code == "0" { "done" } else { "failed" };
        match by_name.get(name).map(Vec::as_slice) {
            None | Some([]) => push(
                findings,
                Counter::Lost,
                format!("{name} exited {code} and has no run"),
            ),
            Some([run]) => {
                if run["status"] != want
                    || run["exit_code"].as_i64().map(|c| c.to_string()).as_deref() != Some(code)
                {
                    push(
                        findings,
                        Counter::Lost,
                        format!(
                            "{name} exited {code}, its run says {} exit {}",
                            run["status"], run["exit_code"]
                        ),
                    );
                }
            }
            Some(more) => push(
                findings,
                Counter::Duplicated,
                format!("{name} has {} runs", more.len()),
            ),
        }
    }
    let acked: HashSet<&str> = killed
        .acknowledged
        .iter()
        .filter_map(|l| l.split(' ').next())
        .collect();
    let others: Vec<&Value> = by_name
        .iter()
        .filter(|(name, _)| !acked.contains(name.as_str()))
        .flat_map(|(_, runs)| runs)
        .collect();
    if others.len() > 1 {
        push(
            findings,
            Counter::Other,
            format!(
                "{} runs not acknowledged: one can be in flight, not more",
                others.len()
            ),
        );
    }
    for run in others {
        // Killed: lost (reaped) or, when the kill landed after its end was recorded, ended.
        let status = run["status"].as_str().unwrap_or("?");
        if !matches!(status, "lost" | "done" | "failed" | "stopped") {
            push(
                findings,
                Counter::Other,
                format!("the killed run {} is left {status} after a reap", run["id"]),
            );
        }
    }
    duplicate_events(baton, dir, findings)?;
    Ok(format!("{} runs", by_name.len()))
}

// ---------------------------------------------------------------------------------------
// import

const PART_EVENTS: usize = 10;
const PARTS: usize = 50;

/// A project with no history, and `part-1.jsonl` … : the first 10, 20, … events of another
/// project's log (a growing backup, each part holding the one before), and `whole.jsonl`.
fn log_parts(baton: &Baton, dir: &Path) -> Result<(), String> {
    let source = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    team(baton, source.path())?;
    let held = baton.ok(source.path(), None, &["export"])?.lines().count();
    for n in 1..=(PART_EVENTS * PARTS).saturating_sub(held) {
        baton.ok(
            source.path(),
            Some("planner"),
            &[
                "send",
                "--to",
                "impl-1",
                "--type",
                "info",
                "--topic",
                "crash",
                "--body",
                &format!("imported-{n}"),
            ],
        )?;
    }
    let log = baton.ok(source.path(), None, &["export"])?;
    let lines: Vec<&str> = log.lines().take(PART_EVENTS * PARTS).collect();
    for part in 1..=PARTS {
        let text: String = lines[..part * PART_EVENTS]
            .iter()
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(dir.join(format!("part-{part}.jsonl")), text)
            .map_err(|e| format!("write a part: {e}"))?;
    }
    std::fs::write(dir.join("whole.jsonl"), log).map_err(|e| format!("write the log: {e}"))?;
    baton.ok(dir, None, &["init"])?;
    Ok(())
}

/// Imports the parts in order; prints `part-N` once `baton import` exited 0.
const IMPORT_LOOP: &str = r#"i=1
while [ -f "part-$i.jsonl" ]; do
  "$1" import "part-$i.jsonl" >/dev/null || exit $?
  echo "part-$i"
  i=$((i + 1))
done"#;

fn event_ids(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["id"].as_str().unwrap_or("?").to_owned())
        .collect()
}

fn check_import(
    baton: &Baton,
    dir: &Path,
    killed: &Killed,
    findings: &mut Findings,
) -> Result<String, String> {
    let whole: Vec<Value> = std::fs::read_to_string(dir.join("whole.jsonl"))
        .map_err(|e| format!("read the log: {e}"))?
        .lines()
        .map(|l| serde_json::from_str(l).map_err(|e| format!("the log: {e}")))
        .collect::<Result<_, _>>()?;
    let source = event_ids(&whole);
    let have = event_ids(&events(baton, dir)?);
    let held: HashSet<&str> = have.iter().map(String::as_str).collect();
    if held.len() != have.len() {
        push(
            findings,
            Counter::Duplicated,
            format!("{} events, {} distinct ids", have.len(), held.len()),
        );
    }
    // All or nothing: the store holds the first m parts' events, for one m.
    let count = source
        .iter()
        .take(PART_EVENTS * PARTS)
        .filter(|id| held.contains(id.as_str()))
        .count();
    let prefix = source
        .iter()
        .take(count)
        .all(|id| held.contains(id.as_str()));
    if count % PART_EVENTS != 0 || !prefix {
        push(
            findings,
            Counter::Torn,
            format!("{count} of the log's events are held, not whole parts in order"),
        );
    }
    let acked = killed.acknowledged.len();
    if count < acked * PART_EVENTS {
        push(
            findings,
            Counter::Lost,
            format!("{acked} parts acknowledged, {count} events held"),
        );
    }
    if count > (acked + 1) * PART_EVENTS {
        push(
            findings,
            Counter::Other,
            format!(
                "{acked} parts acknowledged, {count} events held: one import can be in flight, not more"
            ),
        );
    }
    // Importing the whole log again adds the rest, each event once.
    baton.ok(dir, None, &["import", "whole.jsonl"])?;
    let have = event_ids(&events(baton, dir)?);
    let held: HashSet<&str> = have.iter().map(String::as_str).collect();
    if held.len() != have.len() {
        push(
            findings,
            Counter::Duplicated,
            format!(
                "after importing again: {} events, {} distinct ids",
                have.len(),
                held.len()
            ),
        );
    }
    if let Some(missing) = source.iter().find(|id| !held.contains(id.as_str())) {
        push(
            findings,
            Counter::Lost,
            format!("after importing the whole log, event {missing} is missing"),
        );
    }
    Ok(format!("{count} events imported before the kill"))
}
