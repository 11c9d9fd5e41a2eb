//! `baton handoff new`: a template with every field explained, or a Work Order or Work
//! Report filled from what Baton knows, what a person must decide left a `<fill in: …>`
//! placeholder (which `handoff check` names, B10).

use baton_app::doc::HandoffTemplate;
use baton_core::awl;
use serde_json::{Value, json};

use super::NewArgs;
use super::evidence::evidence_records;
use crate::cli::GlobalArgs;
use crate::commands::Context;
use crate::error::{CommandError, CommandResult};
use crate::host::Workspace;
use crate::output::{Output, now};
use crate::project::Project;

fn order_template() -> Value {
    json!({
        "spec": "awl/work-order@0.1 (the lowest version with every field you use: 0.2 for handoff, 0.3 for continues, 0.4 for staged)",
        "id": "<fill in: a unique id for this order, e.g. wo_2025_001 (1-128 characters)>",
        "created_at": "<fill in: when the order was written, RFC 3339 with a zone: 2025-01-01T09:00:00Z>",
        "from": "<fill in: who hands the work over: a passname, e.g. planner>",
        "to": "<fill in: who does the work: a passname, e.g. impl-1>",
        "goal": "<fill in: one sentence: what is true when the work is done>",
        "criteria": [
            {"id": "c1", "text": "<fill in: an observable acceptance criterion; a report must cite evidence for each>"}
        ],
        "budget": {
            "usd": "<fill in: upper limit in US dollars, a number; set at least one of usd, tokens, tool_calls, seconds>",
            "tool_calls": "<fill in: upper limit on tool calls, an integer>"
        },
        "deadline": "<fill in: when the order expires, RFC 3339, later than created_at>",
        "tools": ["<fill in: tool patterns the worker may use: server/tool, server/* or *>"],
        "staged": ["<fill in: optional (0.4): tools whose calls are held until the report is approved; covered by tools>"],
        "escalate_to": "<fill in: optional: who answers when the worker is blocked and `from` is away>",
        "context": [{"uri": "<fill in: optional: a document or file the worker should read>", "note": "<fill in: why>"}],
        "handoff": {
            "summary": "<fill in: optional (0.2): what the next worker should know>",
            "decisions": [{"text": "<fill in: a decision already made>", "why": "<fill in: its reason>"}],
            "tried": [{"text": "<fill in: something tried before>", "result": "<fill in: what happened>"}],
            "open_questions": ["<fill in: what is still unknown>"],
            "next_step": "<fill in: the first thing to do>"
        },
        "output_schema": {"type": "object", "description": "<fill in: optional: a JSON Schema 2020-12 the report's result.output must satisfy>"},
        "metadata": {"<fill in: optional>": "<fill in: free-form data for your own tools>"},
        "x-baton": {
            "context": {
                "repository": "<fill in: the authorized repository, e.g. git@host:org/repo.git>",
                "base_revision": "<fill in: the verified commit to start from; `git rev-parse HEAD`>",
                "reproduction": "<fill in: the steps or command that show the problem>",
                "expected": "<fill in: what correct output looks like>",
                "fixtures": ["<fill in: sanitized fixture paths in the repository>"]
            },
            "scope": {
                "allowed": ["<fill in: what may change: files, modules>"],
                "excluded": ["<fill in: what must not change: auth, migrations, deployment...>"]
            },
            "execution": {
                "operator": "<fill in: who runs it and is authorized to>",
                "setup_command": "<fill in: a verified command from this repository; never invent one>",
                "test_command": "<fill in: a verified command from this repository, e.g. cargo test -p export>",
                "permissions": "<fill in: existing authorized access only; never paste credentials>"
            },
            "delivery": {"required": ["before", "change", "after", "uncertainty", "review"]},
            "acceptance": {
                "owner": "<fill in: who decides the result is right: not the implementer (`to`)>",
                "reviewers": ["<fill in: who reviews the diff and the evidence: not the implementer>"]
            },
            "stop_when": ["<fill in: a condition under which the worker stops and reports instead of guessing>"],
            "decision": {
                "decision": "<fill in: the decision this work carries out>",
                "evidence": ["<fill in: why it was taken>"],
                "rejected": [{"option": "<fill in: an alternative>", "reason": "<fill in: why not>"}],
                "invariants": ["<fill in: what must stay true>"],
                "resume_at": "<fill in: the concrete first action, e.g. run cargo test -p export csv_filters; never 'continue'>",
                "rollback": "<fill in: how to undo it>"
            }
        }
    })
}

fn report_template() -> Value {
    json!({
        "spec": "awl/work-report@0.1 (0.2 if you use handoff, 0.3 if you use effects)",
        "order_id": "<fill in: the id of the order this answers>",
        "from": "<fill in: the worker: the order's `to`>",
        "status": "<fill in: done | blocked (ask questions) | failed (say what went wrong in error)>",
        "result": {
            "summary": "<fill in: what was done>",
            "output": "<fill in: optional: the result, matching the order's output_schema>",
            "artifacts": [{"uri": "<fill in: where an output landed>", "media_type": "<fill in: optional>", "note": "<fill in: optional>"}]
        },
        "evidence": [{"criterion": "c1", "type": "<fill in: tool_call | artifact | citation | note>", "ref": "<fill in: e.g. a receipt step from `baton evidence run`>", "note": "<fill in: what it shows>"}],
        "cost": {"usd": "<fill in: what was spent, for every unit the order's budget sets>", "tool_calls": "<fill in: an integer>"},
        "started_at": "<fill in: optional: RFC 3339>",
        "finished_at": "<fill in: RFC 3339 with a zone>",
        "tools_used": ["<fill in: exact tool names used: server/tool>"],
        "effects": [{"ref": "<fill in: server/tool#n, as the gateway named the held call>", "tool": "<fill in: server/tool>", "arguments": {}, "reversible": false}],
        "attempt": "<fill in: optional: 1 for the first report, 2 after one rework...>",
        "questions": ["<fill in: for a blocked report: what you need answered>"],
        "error": "<fill in: for a failed report: what went wrong>",
        "x-baton": {
            "evidence": {
                "before": {"command": "<fill in: the reproduction you ran>", "exit_code": "<fill in: its exit code, or null if unknown>", "output": "<fill in: what it printed>", "base_revision": "<fill in: the commit you started from>", "receipt": "<fill in: optional: the receipt step from `baton evidence run`>"},
                "change": [{"file": "<fill in: a file changed>", "reason": "<fill in: why this file had to change>"}],
                "after": {"command": "<fill in: the same reproduction and the focused tests>", "exit_code": "<fill in: actual exit code>", "output": "<fill in: what it printed>", "receipt": "<fill in: optional>"},
                "uncertainty": ["<fill in: a check not run, and why>; or {\"none\": true} to claim nothing was left untested; an empty list is refused"],
                "review": {"commit": "<fill in: the commit to review>", "acceptance_owner": "<fill in: the order's acceptance owner>"}
            }
        }
    })
}

pub(super) fn new(args: NewArgs) -> Output {
    let (what, doc) = if args.report.is_some() {
        ("report", report_template())
    } else {
        ("order", order_template())
    };
    let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    Output::of(
        &HandoffTemplate {
            kind: what.to_owned(),
            template: doc,
        },
        text,
    )
}

/// A placeholder where a person must decide.
fn fill(what: &str) -> Value {
    Value::from(format!(
        "{} {what}>",
        baton_core::awl::contract::PLACEHOLDER
    ))
}

/// `handoff new --to --goal …`: an order with everything Baton knows filled in; what a
/// person must decide stays a `<fill in: …>` placeholder, which `handoff check` names (B10).
pub(super) fn filled(g: &GlobalArgs, args: NewArgs) -> CommandResult<Output> {
    let from = g.as_name.clone().ok_or_else(|| {
        CommandError::usage("who hands the work over? pass --as NAME (or set BATON_AS)")
    })?;
    let (to, goal) = (args.to.unwrap_or_default(), args.goal.unwrap_or_default());
    let age = baton_core::time::duration(&args.deadline).ok_or_else(|| {
        CommandError::usage(format!(
            "--deadline {:?}: {}",
            args.deadline,
            baton_core::time::DURATION_FORMS
        ))
    })?;
    let mut budget = serde_json::Map::new();
    for b in &args.budget {
        let parsed = b.split_once('=').and_then(|(unit, n)| {
            let n: serde_json::Number = n.trim().parse().ok()?;
            awl::rules::UNITS
                .contains(&unit.trim())
                .then(|| (unit.trim().to_owned(), n))
        });
        let (unit, n) = parsed.ok_or_else(|| {
            CommandError::usage(format!(
                "--budget {b:?}: write UNIT=N with UNIT one of {}",
                awl::rules::UNITS.join(", ")
            ))
        })?;
        budget.insert(unit, Value::Number(n));
    }
    let budget = if budget.is_empty() {
        json!({"usd": fill("a limit in US dollars, or tokens, tool_calls or seconds")})
    } else {
        Value::Object(budget)
    };
    let criteria: Vec<Value> = if args.criterion.is_empty() {
        vec![json!({"id": "c1", "text": fill("an observable acceptance criterion")})]
    } else {
        args.criterion
            .iter()
            .enumerate()
            .map(|(i, t)| json!({"id": format!("c{}", i + 1), "text": t}))
            .collect()
    };
    let at = now();
    let env = Workspace::discover(Project::locate(g.project.as_deref()).ok().as_ref());
    let or_fill = |v: Option<String>, what: &str| v.map(Value::from).unwrap_or_else(|| fill(what));
    let doc = json!({
        "spec": "awl/work-order@0.1",
        "id": format!("wo_{}", baton_store::new_id().to_string().to_lowercase()),
        "created_at": baton_core::time::rfc3339(at),
        "from": from,
        "to": to,
        "goal": goal,
        "criteria": criteria,
        "budget": budget,
        "deadline": baton_core::time::rfc3339(at + age.as_millis() as i64),
        "tools": args.tool,
        "x-baton": {
            "context": {
                "repository": or_fill(env.location(), "the repository, e.g. git@host:org/repo.git"),
                "base_revision": or_fill(env.head(), "the commit to start from"),
                "reproduction": fill("the steps or command that show the problem"),
                "expected": fill("what correct output looks like")
            },
            "scope": {"allowed": [fill("what may change: files, modules")], "excluded": []},
            "execution": {
                "test_command": or_fill(env.test_command().map(str::to_owned), "the repository's test command")
            },
            "acceptance": {"owner": from},
            "stop_when": [fill("when the worker stops and reports instead of guessing")],
            "decision": {"resume_at": fill("the concrete first action")}
        }
    });
    let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    Ok(Output::of(
        &HandoffTemplate {
            kind: "order".to_owned(),
            template: doc,
        },
        text,
    ))
}
/// One side of the evidence (`before` or `after`) from an evidence record.
fn evidence_side(record: Option<&Value>, before: bool) -> Value {
    let Some(r) = record else {
        let mut side = json!({
            "command": fill("the command you ran"),
            "exit_code": fill("its exit code"),
            "output": fill("what it printed"),
        });
        if before {
            side["base_revision"] = fill("the commit you started from");
        }
        return side;
    };
    let command = r
        .get("command")
        .and_then(Value::as_array)
        .map(|c| {
            c.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    let output = r
        .get("output_tail")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    let mut side = json!({
        "command": command,
        "exit_code": r.get("exit_code").cloned().unwrap_or(Value::Null),
        "output": output,
        "receipt": r.get("step").cloned().unwrap_or(Value::Null),
    });
    if before {
        side["base_revision"] = r
            .get("revision")
            .cloned()
            .filter(|v| v.is_string())
            .unwrap_or_else(|| fill("the commit you started from"));
    }
    side
}

/// `handoff new --report ORDER`: a `done` report on ORDER filled from what Baton knows —
/// the caller, the time, one evidence entry per criterion citing the newest evidence record,
/// the order's `evidence run` records as before (oldest) and after (newest), HEAD and the
/// acceptance owner; the rest is `<fill in: …>`, which `handoff check` names (B10).
pub(super) async fn filled_report(g: &GlobalArgs, order_id: &str) -> CommandResult<Output> {
    let ctx = Context::open(g).await?;
    let me = ctx.me().await?;
    let view = ctx.app()?.order_view(order_id).await?;
    let order = Value::Object(view.document.clone());
    let records = evidence_records(&ctx.project.root, order_id);
    let newest = records.last().and_then(|r| r.get("step")).cloned();
    let criteria: Vec<Value> = order
        .get("criteria")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c.get("id").and_then(Value::as_str))
                .map(|id| {
                    let mut e = json!({"criterion": id, "type": "artifact",
                                       "note": fill("what the evidence shows for this criterion")});
                    e["ref"] = newest.clone().unwrap_or_else(|| fill("a receipt step"));
                    e
                })
                .collect()
        })
        .unwrap_or_default();
    let cost: serde_json::Map<String, Value> = order
        .get("budget")
        .and_then(Value::as_object)
        .map(|b| {
            b.keys()
                .map(|unit| (unit.clone(), fill(&format!("what was spent in {unit}"))))
                .collect()
        })
        .unwrap_or_default();
    let env = Workspace::discover(Some(&ctx.project));
    let owner = order
        .pointer("/x-baton/acceptance/owner")
        .cloned()
        .unwrap_or_else(|| order.get("from").cloned().unwrap_or(Value::Null));
    let doc = json!({
        "spec": "awl/work-report@0.1",
        "order_id": order_id,
        "from": me.as_str(),
        "status": "done",
        "result": {"summary": fill("what was done")},
        "evidence": criteria,
        "cost": cost,
        "finished_at": baton_core::time::rfc3339(now()),
        "tools_used": [],
        "x-baton": {"evidence": {
            "before": evidence_side(records.first(), true),
            "change": [{"file": fill("a file changed"), "reason": fill("why it had to change")}],
            "after": evidence_side(records.last().filter(|_| records.len() > 1), false),
            "uncertainty": [fill("a check not run and why (or replace the list with {\"none\": true})")],
            "review": {
                "commit": env.head().map(Value::from).unwrap_or_else(|| fill("the commit to review")),
                "acceptance_owner": owner
            }
        }}
    });
    let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    Ok(Output::of(
        &HandoffTemplate {
            kind: "report".to_owned(),
            template: doc,
        },
        text,
    ))
}
