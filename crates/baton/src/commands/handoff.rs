//! Work Order and Work Report documents at the command line: `baton handoff
//! new|check|render` and `baton evidence run`. The rules live in `baton_core::awl`; this
//! file reads files, asks git and PATH what the rules need to know, and prints.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use baton_app::doc::{EvidenceRun, HandoffCheck, HandoffRender, HandoffTemplate};
use baton_core::awl::{
    self, ContractMode, DocumentKind, Finding, FindingKind, SubOrder, has_invalid, order_findings,
    report_findings,
};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};

use crate::cli::GlobalArgs;
use crate::commands::Context;
use crate::error::{CommandError, CommandResult, ErrorKind};
use crate::host::Workspace;
use crate::output::{Output, now, table, timestamp};
use crate::project::Project;

/// Write, check and render Work Orders and Work Reports (the handoff contract).
#[derive(Subcommand, Debug)]
pub enum HandoffCommand {
    /// Print a Work Order (or `--report`: a Work Report) template, every field explained.
    #[command(
        after_help = "Examples:\n  baton handoff new > order.json\n  baton handoff new --report > report.json"
    )]
    New(NewArgs),
    /// Check an order, a report against its order, or a sub-order against its parent.
    ///
    /// Prints the findings (rule, kind, path, message); exits 3 when any is `invalid`.
    #[command(after_help = "Examples:\n  baton handoff check order.json\n  \
                            baton handoff check report.json --order order.json\n  \
                            baton handoff check sub.json --parent order.json --sibling other-sub.json\n  \
                            baton --json handoff check order.json")]
    Check(CheckArgs),
    /// Render a document as Markdown for a person to review (goal, acceptance and stop
    /// conditions first, constraints recapped last, the JSON embedded).
    #[command(after_help = "Example:\n  baton handoff render order.json > HANDOFF.md")]
    Render(RenderArgs),
}

#[derive(Args, Debug)]
pub struct NewArgs {
    /// A Work Report template instead of a Work Order; with an ORDER id, a report on that
    /// order filled from what Baton knows (you, the time, its criteria and acceptance
    /// owner, HEAD, and the order's `baton evidence run --order ORDER` records as the
    /// before and after evidence).
    #[arg(long, value_name = "ORDER", num_args = 0..=1, conflicts_with_all = ["to", "goal"])]
    pub report: Option<Option<String>>,
    /// Write an order to NAME, filled from what Baton knows: `from` is you (--as), the id,
    /// the time, the repository, its HEAD and its test command. Needs --goal.
    #[arg(long, value_name = "NAME", requires = "goal")]
    pub to: Option<String>,
    /// The order's goal: one sentence of what is true when the work is done.
    #[arg(long, value_name = "TEXT", requires = "to")]
    pub goal: Option<String>,
    /// An acceptance criterion (repeatable; c1, c2, … in order).
    #[arg(long, value_name = "TEXT")]
    pub criterion: Vec<String>,
    /// How long the worker has, from now (e.g. 2d, 6h).
    #[arg(long, value_name = "AGE", default_value = "2d")]
    pub deadline: String,
    /// A tool pattern the worker may use (repeatable): SERVER/TOOL, SERVER/* or *.
    #[arg(long, value_name = "PATTERN")]
    pub tool: Vec<String>,
    /// A budget limit (repeatable): usd=5, tokens=200000, tool_calls=50, seconds=3600.
    #[arg(long, value_name = "UNIT=N")]
    pub budget: Vec<String>,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The order or report to check.
    pub file: PathBuf,
    /// The order a report answers (required for a report).
    #[arg(long, value_name = "ORDER_FILE")]
    pub order: Option<PathBuf>,
    /// The parent of a sub-order: checks C1–C5.
    #[arg(long, value_name = "PARENT_FILE")]
    pub parent: Option<PathBuf>,
    /// The parent's other sub-orders (for C4): an order, or {"order": …, "state": …}.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub sibling: Vec<PathBuf>,
    /// The order's own sub-orders, for a report (rule R13), in the same form.
    #[arg(long = "sub-order", value_name = "FILE", num_args = 1..)]
    pub sub_order: Vec<PathBuf>,
    /// What the file is; default: from its `spec` (a report's prefix, else an order).
    #[arg(long, value_enum)]
    pub kind: Option<KindArg>,
    /// Whether the `x-baton` contract is required; default: the project's
    /// `orders.contract`, or optional outside a project.
    #[arg(long, value_enum)]
    pub contract: Option<ContractArg>,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum KindArg {
    Order,
    Report,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum ContractArg {
    Required,
    Optional,
}

#[derive(Args, Debug)]
pub struct RenderArgs {
    /// The order or report to render.
    pub file: PathBuf,
}

/// Run a command and record what ran as evidence a report can cite.
#[derive(Subcommand, Debug)]
pub enum EvidenceCommand {
    /// Run CMD, pass its output through, and record the command line, exit code, last 200
    /// lines of output, repository revision and times as a receipt. Exits with CMD's code.
    #[command(after_help = "Example:\n  baton evidence run --order wo_42 -- cargo test -p export")]
    Run(EvidenceRunArgs),
}

#[derive(Args, Debug)]
pub struct EvidenceRunArgs {
    /// The order this evidence is for.
    #[arg(long, value_name = "ID")]
    pub order: Option<String>,
    /// The command and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<String>,
}

pub async fn handoff(g: &GlobalArgs, cmd: HandoffCommand) -> CommandResult<Output> {
    match cmd {
        HandoffCommand::New(args) if args.to.is_some() => filled(g, args),
        HandoffCommand::New(NewArgs {
            report: Some(Some(order)),
            ..
        }) => filled_report(g, &order).await,
        HandoffCommand::New(args) => Ok(new(args)),
        HandoffCommand::Check(args) => check(g, args),
        HandoffCommand::Render(args) => render(args),
    }
}

// ---- reading ------------------------------------------------------------------------------

/// A document from a file, or the one B0 finding that says why it cannot be read.
pub(crate) fn read_document(path: &Path) -> CommandResult<Result<Value, Finding>> {
    // Over the cap, the head (one byte past it) is what the B0 finding is made from.
    let read = crate::files::read_bounded(path, awl::MAX_DOCUMENT_BYTES)
        .map_err(|e| read_error(path, e))?;
    Ok(awl::parse_document(&read.bytes))
}

fn read_error(path: &Path, e: std::io::Error) -> CommandError {
    let kind = if e.kind() == std::io::ErrorKind::NotFound {
        ErrorKind::NotFound
    } else {
        ErrorKind::Failed
    };
    CommandError::new(kind, format!("{}: {e}", path.display()))
}

/// A document another one is checked against: it must be readable and a valid order.
fn read_order(path: &Path, role: &str) -> CommandResult<Value> {
    let doc = read_document(path)?.map_err(|f| refused_with(path, role, &[f]))?;
    let findings = awl::check_order(&doc);
    if has_invalid(&findings) {
        return Err(refused_with(path, role, &findings));
    }
    Ok(doc)
}

fn refused_with(path: &Path, role: &str, findings: &[Finding]) -> CommandError {
    let lines: Vec<String> = findings
        .iter()
        .map(|f| format!("  {} {} {}: {}", f.kind.as_str(), f.rule, f.path, f.message))
        .collect();
    CommandError::refused(format!(
        "{} ({role}) is not a valid Work Order; fix it first:\n{}",
        path.display(),
        lines.join("\n")
    ))
}

/// A sibling or sub-order file: a bare order (state `offered`) or `{"order", "state"}`.
fn read_sub_orders(paths: &[PathBuf], role: &str) -> CommandResult<Vec<(Value, String)>> {
    let mut out = Vec::new();
    for p in paths {
        let doc = read_document(p)?.map_err(|f| refused_with(p, role, &[f]))?;
        let (order, state) = match (doc.get("order"), doc.get("state").and_then(Value::as_str)) {
            (Some(order), Some(state)) if doc.as_object().is_some_and(|o| o.len() == 2) => {
                (order.clone(), state.to_owned())
            }
            _ => (doc, "offered".to_owned()),
        };
        let findings = awl::check_order(&order);
        if has_invalid(&findings) {
            return Err(refused_with(p, role, &findings));
        }
        out.push((order, state));
    }
    Ok(out)
}

// ---- check --------------------------------------------------------------------------------

fn check(g: &GlobalArgs, args: CheckArgs) -> CommandResult<Output> {
    let project = match Project::locate(g.project.as_deref()) {
        Ok(p) => Some(p),
        Err(e) if e.kind == ErrorKind::Usage => None,
        Err(e) => return Err(e),
    };
    let mode = match args.contract {
        Some(ContractArg::Required) => ContractMode::Required,
        Some(ContractArg::Optional) => ContractMode::Optional,
        None => project
            .as_ref()
            .map_or(ContractMode::Optional, |p| p.config.contract),
    };
    let doc = match read_document(&args.file)? {
        Ok(doc) => doc,
        Err(f) => return findings_output(&args.file, None, vec![f]),
    };
    let env = Workspace::discover(project.as_ref());
    let kind = match args.kind {
        Some(KindArg::Order) => DocumentKind::Order,
        Some(KindArg::Report) => DocumentKind::Report,
        None => DocumentKind::of(&doc),
    };
    let findings = match kind {
        DocumentKind::Order => {
            if args.order.is_some() || !args.sub_order.is_empty() {
                return Err(CommandError::usage(
                    "--order and --sub-order are for checking a report; this document is an order",
                ));
            }
            match &args.parent {
                Some(parent) => {
                    let parent = read_order(parent, "--parent")?;
                    let siblings = read_sub_orders(&args.sibling, "--sibling")?;
                    let subs: Vec<SubOrder<'_>> = siblings
                        .iter()
                        .map(|(order, state)| SubOrder { order, state })
                        .collect();
                    order_findings(&doc, Some((&parent, &subs)), &env, mode)
                }
                None if !args.sibling.is_empty() => {
                    return Err(CommandError::usage(
                        "--sibling needs --parent: siblings are the parent's other sub-orders",
                    ));
                }
                None => order_findings(&doc, None, &env, mode),
            }
        }
        DocumentKind::Report => {
            let Some(order_file) = &args.order else {
                return Err(CommandError::usage(
                    "a report is checked against its order: pass --order ORDER_FILE",
                ));
            };
            if args.parent.is_some() || !args.sibling.is_empty() {
                return Err(CommandError::usage(
                    "--parent and --sibling are for checking a sub-order; this document is a report",
                ));
            }
            let order = read_order(order_file, "--order")?;
            let subs = read_sub_orders(&args.sub_order, "--sub-order")?;
            let subs: Vec<SubOrder<'_>> = subs
                .iter()
                .map(|(order, state)| SubOrder { order, state })
                .collect();
            report_findings(&doc, &order, &subs, &env, mode)
        }
    };
    findings_output(&args.file, Some(kind), findings)
}

/// The findings as output; with any `invalid` one the command exits 3 after printing them
/// (the findings are the answer either way, so they go to stdout, not to the error stream).
fn findings_output(
    file: &Path,
    kind: Option<DocumentKind>,
    findings: Vec<Finding>,
) -> CommandResult<Output> {
    let what = match kind {
        Some(DocumentKind::Order) => "order",
        Some(DocumentKind::Report) => "report",
        None => "document",
    };
    let invalid = findings
        .iter()
        .filter(|f| f.kind == FindingKind::Invalid)
        .count();
    let limit = findings.len() - invalid;
    let human = if findings.is_empty() {
        format!("{}: {what}, no findings", file.display())
    } else {
        let rows: Vec<Vec<String>> = findings
            .iter()
            .map(|f| {
                vec![
                    f.kind.as_str().to_owned(),
                    f.rule.clone(),
                    f.path.clone(),
                    f.message.clone(),
                ]
            })
            .collect();
        format!(
            "{}: {what}, {} finding{} ({invalid} invalid, {limit} limit)\n{}",
            file.display(),
            findings.len(),
            if findings.len() == 1 { "" } else { "s" },
            table(&["KIND", "RULE", "PATH", "MESSAGE"], &rows)
        )
    };
    let out = Output::of(&HandoffCheck { findings }, human);
    // The findings are the answer either way; an invalid one also sets the exit code.
    Ok(if invalid > 0 {
        out.with_exit(ErrorKind::Refused)
    } else {
        out
    })
}

// ---- new ----------------------------------------------------------------------------------

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

fn new(args: NewArgs) -> Output {
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
fn filled(g: &GlobalArgs, args: NewArgs) -> CommandResult<Output> {
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

/// The most evidence records `handoff new --report` reads: the newest ones (records are
/// named by a ULID, so names sort by time).
const MAX_EVIDENCE_READ: usize = 1000;

/// The `baton evidence run --order ORDER` records under `.baton/evidence/`, oldest first,
/// among the newest [`MAX_EVIDENCE_READ`] records of the project.
fn evidence_records(root: &Path, order: &str) -> Vec<Value> {
    let dir = root.join(crate::project::DIR).join("evidence");
    let mut names: Vec<std::ffi::OsString> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_str().is_some_and(|n| n.ends_with(".json")))
        .collect();
    names.sort_unstable_by(|a, b| b.cmp(a));
    names.truncate(MAX_EVIDENCE_READ);
    let mut found: Vec<Value> = names
        .iter()
        .filter_map(|name| {
            crate::files::read_bounded(&dir.join(name), awl::MAX_DOCUMENT_BYTES)
                .ok()
                .filter(|r| !r.over)
                .and_then(|r| serde_json::from_slice::<Value>(&r.bytes).ok())
        })
        .filter(|r| r.get("order").and_then(Value::as_str) == Some(order))
        .collect();
    // By time, not by text: RFC 3339 drops trailing zeros (`…:10Z` is before `…:10.02Z`).
    found.sort_by_key(|v| {
        let text = |key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
        (
            baton_core::time::instant(&text("started_at"), 0),
            text("step"),
        )
    });
    found
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
async fn filled_report(g: &GlobalArgs, order_id: &str) -> CommandResult<Output> {
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

// ---- render -------------------------------------------------------------------------------

fn render(args: RenderArgs) -> CommandResult<Output> {
    let doc = match read_document(&args.file)? {
        Ok(doc) => doc,
        Err(f) => return findings_output(&args.file, None, vec![f]),
    };
    let markdown = match DocumentKind::of(&doc) {
        DocumentKind::Order => render_order(&doc),
        DocumentKind::Report => render_report(&doc),
    };
    let human = markdown.clone();
    Ok(Output::of(&HandoffRender { markdown }, human))
}

fn s<'v>(v: &'v Value, pointer: &str) -> Option<&'v str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn list(v: &Value, pointer: &str) -> Vec<String> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn bullets(out: &mut String, items: &[String], empty: &str) {
    if items.is_empty() {
        out.push_str(&format!("- {empty}\n"));
    }
    for i in items {
        out.push_str(&format!("- {}\n", one_line(i)));
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn field_line(out: &mut String, label: &str, value: Option<&str>) {
    if let Some(v) = value {
        out.push_str(&format!("- **{label}:** {}\n", one_line(v)));
    }
}

fn amounts(v: Option<&Value>) -> String {
    let Some(Value::Object(o)) = v else {
        return "none".into();
    };
    o.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn machine_block(out: &mut String, doc: &Value) {
    out.push_str("\n## Machine-readable document\n\n```json\n");
    out.push_str(&serde_json::to_string_pretty(doc).unwrap_or_default());
    out.push_str("\n```\n");
}

fn render_order(doc: &Value) -> String {
    let mut out = String::new();
    let id = s(doc, "/id").unwrap_or("(no id)");
    out.push_str(&format!("# Work Order {id}\n\n"));
    out.push_str(&format!(
        "{} → {} · deadline {} · {}\n\n",
        s(doc, "/from").unwrap_or("?"),
        s(doc, "/to").unwrap_or("?"),
        s(doc, "/deadline").unwrap_or("?"),
        s(doc, "/spec").unwrap_or("no spec")
    ));
    out.push_str(&format!(
        "## Goal\n\n{}\n\n",
        one_line(s(doc, "/goal").unwrap_or("(none)"))
    ));
    out.push_str("## Acceptance criteria\n\n");
    let criteria: Vec<String> = doc
        .pointer("/criteria")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| {
                    format!(
                        "**{}** {}",
                        s(c, "/id").unwrap_or("?"),
                        s(c, "/text").unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    bullets(&mut out, &criteria, "(none)");
    let c = "/x-baton";
    if let Some(owner) = s(doc, &format!("{c}/acceptance/owner")) {
        out.push_str(&format!("\nAccepted by **{}**", one_line(owner)));
        let reviewers = list(doc, &format!("{c}/acceptance/reviewers"));
        if !reviewers.is_empty() {
            out.push_str(&format!(", reviewed by {}", reviewers.join(", ")));
        }
        out.push_str(".\n");
    }
    out.push_str("\n## Stop when\n\n");
    bullets(
        &mut out,
        &list(doc, &format!("{c}/stop_when")),
        "(no stop conditions given)",
    );
    if let Some(resume) = s(doc, &format!("{c}/decision/resume_at")) {
        out.push_str(&format!("\n## Start here\n\n{}\n", one_line(resume)));
    }
    if doc.pointer(&format!("{c}/context")).is_some() {
        out.push_str("\n## Context\n\n");
        for (label, key) in [
            ("Repository", "repository"),
            ("Base revision", "base_revision"),
            ("Reproduction", "reproduction"),
            ("Expected", "expected"),
        ] {
            field_line(&mut out, label, s(doc, &format!("{c}/context/{key}")));
        }
        let fixtures = list(doc, &format!("{c}/context/fixtures"));
        if !fixtures.is_empty() {
            out.push_str(&format!("- **Fixtures:** {}\n", fixtures.join(", ")));
        }
    }
    if doc.pointer(&format!("{c}/execution")).is_some() {
        out.push_str("\n## Execution\n\n");
        for (label, key) in [
            ("Operator", "operator"),
            ("Setup", "setup_command"),
            ("Test", "test_command"),
            ("Permissions", "permissions"),
        ] {
            field_line(&mut out, label, s(doc, &format!("{c}/execution/{key}")));
        }
    }
    if let Some(d) = doc.pointer(&format!("{c}/decision")) {
        out.push_str("\n## Decision\n\n");
        field_line(&mut out, "Decision", s(d, "/decision"));
        let evidence = list(d, "/evidence");
        if !evidence.is_empty() {
            out.push_str(&format!("- **Because:** {}\n", evidence.join("; ")));
        }
        if let Some(Value::Array(rejected)) = d.get("rejected") {
            for r in rejected {
                out.push_str(&format!(
                    "- **Rejected:** {} — {}\n",
                    s(r, "/option").unwrap_or("?"),
                    s(r, "/reason").unwrap_or("?")
                ));
            }
        }
        field_line(&mut out, "Rollback", s(d, "/rollback"));
    }
    if let Some(h) = doc.get("handoff") {
        out.push_str("\n## Handoff\n\n");
        field_line(&mut out, "Summary", s(h, "/summary"));
        field_line(&mut out, "Next step", s(h, "/next_step"));
        for q in list(h, "/open_questions") {
            out.push_str(&format!("- **Open question:** {}\n", one_line(&q)));
        }
    }
    let delivery = list(doc, &format!("{c}/delivery/required"));
    if !delivery.is_empty() {
        out.push_str(&format!(
            "\n## Evidence required\n\n{}\n",
            delivery.join(", ")
        ));
    }
    // The constraints again, last: a long document's middle is what readers lose.
    out.push_str("\n## Constraints (recap)\n\n");
    let allowed = list(doc, &format!("{c}/scope/allowed"));
    let excluded = list(doc, &format!("{c}/scope/excluded"));
    if !allowed.is_empty() {
        out.push_str(&format!("- **May change:** {}\n", allowed.join("; ")));
    }
    if !excluded.is_empty() {
        out.push_str(&format!("- **Must not change:** {}\n", excluded.join("; ")));
    }
    for inv in list(doc, &format!("{c}/decision/invariants")) {
        out.push_str(&format!("- **Invariant:** {}\n", one_line(&inv)));
    }
    out.push_str(&format!(
        "- **Tools:** {}\n",
        list(doc, "/tools").join(", ")
    ));
    let staged = list(doc, "/staged");
    if !staged.is_empty() {
        out.push_str(&format!(
            "- **Held until approval:** {}\n",
            staged.join(", ")
        ));
    }
    out.push_str(&format!("- **Budget:** {}\n", amounts(doc.get("budget"))));
    out.push_str(&format!(
        "- **Deadline:** {}\n",
        s(doc, "/deadline").unwrap_or("?")
    ));
    let stops = list(doc, &format!("{c}/stop_when"));
    if !stops.is_empty() {
        out.push_str(&format!("- **Stop when:** {}\n", stops.join("; ")));
    }
    machine_block(&mut out, doc);
    out
}

fn render_report(doc: &Value) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "# Work Report for {}\n\n{} · status **{}** · finished {}\n\n",
        s(doc, "/order_id").unwrap_or("?"),
        s(doc, "/from").unwrap_or("?"),
        s(doc, "/status").unwrap_or("?"),
        s(doc, "/finished_at").unwrap_or("?")
    ));
    out.push_str(&format!(
        "## Summary\n\n{}\n\n## Evidence per criterion\n\n",
        one_line(s(doc, "/result/summary").unwrap_or("(none)"))
    ));
    let evidence: Vec<String> = doc
        .pointer("/evidence")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|e| {
                    format!(
                        "**{}** ({}) {} {}",
                        s(e, "/criterion").unwrap_or("?"),
                        s(e, "/type").unwrap_or("?"),
                        s(e, "/ref").unwrap_or(""),
                        s(e, "/note").unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    bullets(&mut out, &evidence, "(no evidence)");
    for q in list(doc, "/questions") {
        out.push_str(&format!("- **Question:** {}\n", one_line(&q)));
    }
    field_line(&mut out, "Error", s(doc, "/error"));
    if let Some(ev) = doc.pointer("/x-baton/evidence") {
        out.push_str("\n## Verification record\n\n");
        for part in ["before", "after"] {
            if let Some(run) = ev.get(part) {
                out.push_str(&format!(
                    "- **{part}:** `{}` → exit {} {}\n",
                    s(run, "/command").unwrap_or("?"),
                    run.get("exit_code")
                        .map_or("unknown".to_owned(), |c| c.to_string()),
                    s(run, "/receipt")
                        .map(|r| format!("(receipt {r})"))
                        .unwrap_or_default()
                ));
            }
        }
        if let Some(Value::Array(changes)) = ev.get("change") {
            for c in changes {
                out.push_str(&format!(
                    "- **changed** {}: {}\n",
                    s(c, "/file").unwrap_or("?"),
                    s(c, "/reason").unwrap_or("?")
                ));
            }
        }
        match ev.get("uncertainty") {
            Some(Value::Array(items)) if !items.is_empty() => {
                for i in items {
                    out.push_str(&format!(
                        "- **not checked:** {}\n",
                        i.as_str().unwrap_or("?")
                    ));
                }
            }
            Some(Value::Object(_)) => out.push_str("- **not checked:** nothing (claimed)\n"),
            _ => out.push_str("- **not checked:** NOT STATED\n"),
        }
        if let Some(r) = ev.get("review") {
            out.push_str(&format!(
                "- **review:** commit {} for {}\n",
                s(r, "/commit").unwrap_or("?"),
                s(r, "/acceptance_owner").unwrap_or("?")
            ));
        }
    }
    out.push_str("\n## Cost and tools (recap)\n\n");
    out.push_str(&format!("- **Cost:** {}\n", amounts(doc.get("cost"))));
    out.push_str(&format!(
        "- **Tools used:** {}\n",
        list(doc, "/tools_used").join(", ")
    ));
    if let Some(Value::Array(effects)) = doc.get("effects") {
        for e in effects {
            out.push_str(&format!(
                "- **Runs on approval:** {} ({})\n",
                s(e, "/ref").unwrap_or("?"),
                s(e, "/tool").unwrap_or("?")
            ));
        }
    }
    machine_block(&mut out, doc);
    out
}

// ---- evidence run -------------------------------------------------------------------------

/// Lines of output kept in the record.
const TAIL_LINES: usize = 200;

pub async fn evidence(ctx: &Context, cmd: EvidenceCommand, as_json: bool) -> CommandResult<Output> {
    let EvidenceCommand::Run(args) = cmd;
    let actor = ctx.actor().await?;
    let order = match &args.order {
        Some(text) => Some(ctx.order_named(text).await?),
        None => None,
    };
    let revision = Command::new("git")
        .arg("-C")
        .arg(&ctx.project.root)
        .args(["rev-parse", "HEAD"])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned());
    let started = now();
    let mut child = match Command::new(&args.command[0])
        .args(&args.command[1..])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        // Nothing ran, so there is no evidence to record.
        Err(e) => {
            return Err(CommandError::new(
                ErrorKind::Run(127),
                format!("{}: {e}", args.command[0]),
            ));
        }
    };
    let tail = Arc::new(Mutex::new((VecDeque::<String>::new(), 0u64)));
    let pumps: Vec<_> = [
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .enumerate()
    .filter_map(|(i, r)| r.map(|r| (i, r)))
    .map(|(i, r)| {
        let tail = Arc::clone(&tail);
        std::thread::spawn(move || pump(r, i == 1, &tail))
    })
    .collect();
    let status = child.wait()?;
    for p in pumps {
        let _ = p.join();
    }
    let finished = now();
    let code = exit_code(&status);
    let (lines, total) = {
        let guard = tail.lock().unwrap_or_else(|e| e.into_inner());
        (guard.0.iter().cloned().collect::<Vec<_>>(), guard.1)
    };
    let id = baton_store::new_id().to_string();
    let step = format!("evidence-{id}");
    let record = json!({
        "schema": "baton/evidence@1",
        "step": step,
        "order": order,
        "command": args.command,
        "exit_code": status.code(),
        "signal": signal_of(&status),
        "output_tail": lines,
        "output_lines": total,
        "revision": revision,
        "started_at": timestamp(started),
        "finished_at": timestamp(finished),
        "by": actor,
    });
    // The record is an artifact like any other: written under .baton/evidence/, hashed,
    // and pointed to by a receipt, so `baton receipt verify` notices an edit.
    let dir = ctx.project.root.join(crate::project::DIR).join("evidence");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{id}.json"));
    write_durably(
        &path,
        &serde_json::to_vec_pretty(&record).unwrap_or_default(),
    )?;
    let root = ctx.project.root.clone();
    let (receipt, _) = ctx
        .app()?
        .write_receipt(
            &actor,
            &root,
            step.clone(),
            path.display().to_string(),
            None,
        )
        .await?;
    // The command's output is stdout; Baton's own word goes to stderr.
    let doc = EvidenceRun {
        step: step.clone(),
        exit_code: code,
        receipt,
    };
    let note = if as_json {
        baton_app::doc::to_json(&doc).to_string()
    } else {
        format!(
            "baton: {step}: `{}` exited {code} (cite it as ref \"{step}\")",
            args.command.join(" ")
        )
    };
    let out = Output::nothing().with_note(note);
    Ok(match u8::try_from(code) {
        Ok(0) => out,
        Ok(code) => out.with_exit(ErrorKind::Run(code)),
        Err(_) => out.with_exit(ErrorKind::Failed),
    })
}

fn pump(mut reader: Box<dyn Read + Send>, is_err: bool, tail: &Mutex<(VecDeque<String>, u64)>) {
    let mut buf = BufReader::new(&mut reader);
    let mut line = Vec::new();
    loop {
        line.clear();
        match buf.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if is_err {
                    let mut e = std::io::stderr().lock();
                    let _ = e.write_all(&line);
                    let _ = e.flush();
                } else {
                    let mut o = std::io::stdout().lock();
                    let _ = o.write_all(&line);
                    let _ = o.flush();
                }
                let text = String::from_utf8_lossy(&line)
                    .trim_end_matches(['\n', '\r'])
                    .to_owned();
                let mut guard = tail.lock().unwrap_or_else(|e| e.into_inner());
                guard.0.push_back(text);
                guard.1 += 1;
                if guard.0.len() > TAIL_LINES {
                    guard.0.pop_front();
                }
            }
        }
    }
}

fn signal_of(status: &std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

/// The command's exit code; 128+N when a signal stopped it.
fn exit_code(status: &std::process::ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + signal_of(status).unwrap_or(0))
}

/// Temp file, fsync, rename: a crash leaves the old file or the new one, never half.
fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    crate::files::write_atomically(path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_records_are_ordered_by_time_not_by_text() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(crate::project::DIR).join("evidence");
        std::fs::create_dir_all(&dir).unwrap();
        // As text, "…:10.02Z" sorts before "…:10Z"; as time it is 20 ms after.
        for (file, step, at) in [
            ("b.json", "evidence-b", "2026-11-30T18:45:10.02Z"),
            ("a.json", "evidence-a", "2026-11-30T18:45:10Z"),
            ("c.json", "evidence-c", "2026-11-30T18:45:09.5Z"),
        ] {
            let record = json!({"order": "wo_1", "step": step, "started_at": at});
            std::fs::write(dir.join(file), record.to_string()).unwrap();
        }
        let steps: Vec<Value> = evidence_records(root.path(), "wo_1")
            .into_iter()
            .map(|r| r["step"].clone())
            .collect();
        assert_eq!(steps, ["evidence-c", "evidence-a", "evidence-b"]);
    }
}
