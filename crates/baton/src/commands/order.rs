//! `baton order`: the Work Order lifecycle at the command line. Documents are
//! checked with the rules and the environment `baton handoff check` uses; the lifecycle
//! is `baton_core::order`'s, and the store takes each step in one transaction. The actor
//! is always `--as`/`BATON_AS`, never an argument.

use std::path::{Path, PathBuf};

use baton_app::doc::{EffectRow, EventRow};
use baton_app::ops::{OrderInput, OrderShow, OrderShowInput, OrderTake, OrderVerb};
use baton_core::awl::{Finding, FindingKind};
use baton_core::order::OrderChange;
use baton_core::order::allowed;
use baton_core::refusal::Document;
use baton_core::{Change, Field, Refusal};
use baton_store::StoreError;
use clap::{Args, Subcommand};
use serde_json::{Map, Value};

use crate::cases::Failure;
use crate::commands::Context;
use crate::commands::handoff::read_document;
use crate::error::{CommandError, CommandResult, ErrorKind, refusal as explain};
use crate::output::{Output, table};

/// Offer, take, report on and review Work Orders (the handoff contract's lifecycle).
///
/// States: offered → accepted → working → submitted → approved, with blocked (a question)
/// between working and working, declined, cancelled, and expired (past the deadline, or a
/// report over a limit). An order whose contract names orders it waits on
/// (`x-baton.after`) is waiting until each is approved, then offered; held when one ends
/// unapproved, until its sender proceeds or cancels. The order's `to` accepts, declines,
/// starts and reports; its `from` approves, reworks, cancels and proceeds; `from` or
/// `escalate_to` answers a question.
#[derive(Subcommand, Debug)]
pub enum OrderCommand {
    /// Offer a Work Order: check it (AWL rules; the `x-baton` contract as the project's
    /// `orders.contract` requires), send it to its `to` as a request, and record it as
    /// offered (seq 1). Its `from` must be you; invalid findings exit 3 and store nothing.
    #[command(
        after_help = "Examples:\n  baton --as planner order create order.json\n  \
                            baton --as planner order create order.json --to role:executor"
    )]
    Create(CreateArgs),
    /// List the open orders you are party to (from, to or escalate_to; every order without
    /// --as), oldest first.
    ///
    /// With --ready, only those ready to take: offered, nothing they wait on pending; with
    /// --explain too, the orders not offered yet and what each waits on (an order it waits
    /// on that ended unapproved makes it held).
    #[command(after_help = "Examples:\n  baton --as impl-1 order list\n  \
                            baton --json order list --all\n  \
                            baton order list --ready --explain")]
    List(ListArgs),
    /// Show an order: its status now, the steps allowed next, its document and every step.
    #[command(after_help = "Example:\n  baton order show wo_42")]
    Show(IdArgs),
    /// Accept an offered order (its `to` only).
    #[command(after_help = "Example:\n  baton --as impl-1 order accept wo_42")]
    Accept(StepArgs),
    /// Decline an offered order (its `to` only).
    #[command(
        after_help = "Example:\n  baton --as impl-1 order decline wo_42 --reason 'no access to the fixtures'"
    )]
    Decline(OptionalReasonArgs),
    /// Start work on an accepted order (its `to` only).
    #[command(after_help = "Example:\n  baton --as impl-1 order start wo_42")]
    Start(StepArgs),
    /// Report on an order (its `to` only): a Work Report, checked against the order (R1–R16,
    /// the evidence protocol). `done`/`failed` submit it, `blocked` asks its questions.
    /// Invalid findings exit 3 and store nothing; `limit` findings are recorded and expire
    /// the order. A report on an accepted order starts it first.
    #[command(after_help = "Example:\n  baton --as impl-1 order report wo_42 report.json")]
    Report(ReportArgs),
    /// Answer a blocked order's question (its `from` or `escalate_to`); work resumes.
    #[command(
        after_help = "Example:\n  baton --as planner order answer wo_42 --text 'Keep UTC timestamps'"
    )]
    Answer(AnswerArgs),
    /// Approve a submitted order (its `from` only) and run its staged effects: approve
    /// means ship.
    ///
    /// First the newest report's `effects` are reconciled with what `baton gateway` held
    /// (same refs, tools and arguments, same order): on any difference nothing runs and
    /// the approval is refused, listing them (exit 3). Then each held call runs once, in
    /// order, through the upstream server command the gateway used; a `{"$ref": REF,
    /// "pointer": P}` in its arguments is filled from the earlier effect's result (the
    /// MCP `CallToolResult`, e.g. `/structuredContent/id`). With --effects only those run
    /// and the rest are dropped. A failed effect stops the sequence (exit 1; what ran,
    /// failed and did not run is listed and recorded). An effect that started with no
    /// recorded end is `uncertain` and never runs again by itself. Approving an approved
    /// order again goes on with effects that never started.
    #[command(after_help = "Examples:\n  baton --as planner order approve wo_42\n  \
                            baton --as planner order approve wo_42 --effects 'github/create_issue#1'")]
    Approve(ApproveArgs),
    /// Send a submitted order back to work with a reason (its `from` only).
    #[command(
        after_help = "Example:\n  baton --as planner order rework wo_42 --reason 'the header row is missing'"
    )]
    Rework(ReworkArgs),
    /// Cancel an open order (its `from` only).
    #[command(
        after_help = "Example:\n  baton --as planner order cancel wo_42 --reason 'superseded by wo_43'"
    )]
    Cancel(OptionalReasonArgs),
    /// Go on with a held order without the orders it waited on that ended unapproved (its
    /// `from` only): it waits on the rest, or is offered at once when none is left.
    #[command(after_help = "Example:\n  baton --as planner order proceed wo_43")]
    Proceed(StepArgs),
    /// Wait until an order has a step newer than --since; exit 4 at the timeout.
    ///
    /// Prints the new steps as soon as one exists (it polls the store every 50 ms).
    #[command(after_help = "Example:\n  baton order wait wo_42 --since 3 --timeout 10m")]
    Wait(WaitArgs),
}

#[derive(Args, Debug)]
pub struct CreateArgs {
    /// The Work Order (JSON).
    pub file: PathBuf,
    /// The topic of the request that carries it.
    #[arg(long, default_value = "work-order")]
    pub topic: String,
    /// Its worker in place of the document's `to`: a passname, or a pool (`role:ROLE`)
    /// whose holders may claim it (`baton next`, `baton claim`).
    #[arg(long, value_name = "NAME|role:ROLE")]
    pub to: Option<String>,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Closed orders too (approved, declined, expired, cancelled).
    #[arg(long, conflicts_with = "ready")]
    pub all: bool,
    /// Only the orders ready to take: offered, nothing they wait on pending.
    #[arg(long)]
    pub ready: bool,
    /// With --ready: also the orders not offered yet, and what each waits on.
    #[arg(long, requires = "ready")]
    pub explain: bool,
}

#[derive(Args, Debug)]
pub struct IdArgs {
    /// The order's id.
    pub id: String,
}

#[derive(Args, Debug)]
pub struct StepArgs {
    /// The order's id.
    pub id: String,
    /// Refuse (exit 6) unless the order is still at this seq: the one you decided on.
    /// Default: the seq read just before the step.
    #[arg(long, value_name = "SEQ")]
    pub expect_seq: Option<i64>,
}

#[derive(Args, Debug)]
pub struct ApproveArgs {
    #[command(flatten)]
    pub step: StepArgs,
    /// Run only these held effects (`SERVER/TOOL#N`, repeatable); the others are dropped.
    #[arg(long, value_name = "REF", num_args = 1..)]
    pub effects: Option<Vec<String>>,
}

#[derive(Args, Debug)]
pub struct OptionalReasonArgs {
    #[command(flatten)]
    pub step: StepArgs,
    /// Why; recorded with the step.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
}

#[derive(Args, Debug)]
pub struct ReworkArgs {
    #[command(flatten)]
    pub step: StepArgs,
    /// What the worker should change (required).
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
}

#[derive(Args, Debug)]
pub struct AnswerArgs {
    #[command(flatten)]
    pub step: StepArgs,
    /// The answer to the worker's question.
    #[arg(long, value_name = "TEXT")]
    pub text: String,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    #[command(flatten)]
    pub step: StepArgs,
    /// The Work Report (JSON).
    pub file: PathBuf,
}

#[derive(Args, Debug)]
pub struct WaitArgs {
    /// The order's id.
    pub id: String,
    /// The newest seq you have seen.
    #[arg(long, value_name = "SEQ")]
    pub since: i64,
    /// How long to wait, e.g. 30s or 10m.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub timeout: String,
}

pub async fn run(ctx: &Context, cmd: OrderCommand) -> CommandResult<Output> {
    match cmd {
        OrderCommand::Create(args) => create(ctx, args).await,
        OrderCommand::List(args) => list(ctx, args).await,
        OrderCommand::Show(args) => show(ctx, &args.id).await,
        OrderCommand::Accept(a) => step(ctx, a, OrderVerb::Accept, |_| {}).await,
        OrderCommand::Decline(a) => {
            step(ctx, a.step, OrderVerb::Decline, |i| i.reason = a.reason).await
        }
        OrderCommand::Start(a) => step(ctx, a, OrderVerb::Start, |_| {}).await,
        OrderCommand::Report(a) => report(ctx, a).await,
        OrderCommand::Answer(a) => {
            step(ctx, a.step, OrderVerb::Answer, |i| i.text = Some(a.text)).await
        }
        OrderCommand::Approve(a) => approve(ctx, a).await,
        OrderCommand::Rework(a) => {
            step(ctx, a.step, OrderVerb::Rework, |i| {
                i.reason = Some(a.reason)
            })
            .await
        }
        OrderCommand::Cancel(a) => {
            step(ctx, a.step, OrderVerb::Cancel, |i| i.reason = a.reason).await
        }
        OrderCommand::Proceed(a) => step(ctx, a, OrderVerb::Proceed, |_| {}).await,
        OrderCommand::Wait(args) => wait(ctx, args).await,
    }
}

// ---- documents ----------------------------------------------------------------------------

/// A document that must be readable, or exit 3 naming why.
fn read(path: &Path, what: &str) -> CommandResult<Value> {
    read_document(path)?.map_err(|f| refusal(path, what, &[f]))
}

fn refusal(path: &Path, what: &str, findings: &[Finding]) -> CommandError {
    let lines: Vec<String> = findings
        .iter()
        .filter(|f| f.kind == FindingKind::Invalid)
        .map(|f| format!("  {} {} {}: {}", f.kind.as_str(), f.rule, f.path, f.message))
        .collect();
    CommandError::refused(format!(
        "{} is refused as {what}; nothing was stored. Fix these and run again (`baton handoff \
         check` shows every finding):\n{}",
        path.display(),
        lines.join("\n")
    ))
}

/// A refusal of the document in `path`, naming the file.
fn about_file(path: &Path, e: Failure) -> CommandError {
    let Failure::Store(StoreError::Refused(r)) = &e else {
        return e.into();
    };
    match r {
        Refusal::Findings { document, findings } => {
            let what = match document {
                Document::WorkOrder => "a Work Order",
                Document::WorkReport => "a Work Report on this order",
            };
            refusal(path, what, findings)
        }
        Refusal::WrongDocument { .. } => CommandError::from_refusal(
            r,
            format!(
                "{} is a Work Report; `order create` takes a Work Order (a report goes to \
                 `baton order report ID FILE`)",
                path.display()
            ),
        ),
        Refusal::Payload {
            field: Field::Document,
            ..
        } => CommandError::from_refusal(r, format!("{}: {}", path.display(), explain(r))),
        _ => e.into(),
    }
}

// ---- create, list, show -------------------------------------------------------------------

/// The document in `path` as the object an order takes, or exit 3 naming the file.
fn object(path: &Path, what: &str) -> CommandResult<Map<String, Value>> {
    match read(path, what)? {
        Value::Object(object) => Ok(object),
        _ => Err(CommandError::refused(format!(
            "{} is refused as {what}: it is not a JSON object; nothing was stored",
            path.display()
        ))),
    }
}

async fn create(ctx: &Context, args: CreateArgs) -> CommandResult<Output> {
    ctx.me().await?;
    let mut input = OrderInput::new(OrderVerb::Create, None);
    let mut document = object(&args.file, "a Work Order")?;
    if let Some(to) = args.to {
        document.insert("to".to_owned(), Value::String(to));
    }
    input.document = Some(document);
    input.topic = Some(args.topic);
    let written = crate::cases::call::<OrderTake>(ctx.cases.as_ref(), input)
        .await
        .map_err(|e| about_file(&args.file, e))?;
    let o = &written.order;
    let human = if o.status == baton_core::order::OrderStatus::Waiting {
        let on: Vec<&str> = o.waits_on.iter().map(|w| w.order.as_str()).collect();
        format!(
            "{}: waiting on {} before it is offered to {} (seq 1, request {})",
            o.id,
            on.join(", "),
            o.to,
            o.message
        )
    } else {
        format!(
            "{}: offered to {} (seq 1, request {})",
            o.id, o.to, o.message
        )
    };
    Ok(Output::of(&written, human))
}

async fn list(ctx: &Context, args: ListArgs) -> CommandResult<Output> {
    let input = baton_app::ops::OrdersInput {
        all: args.all,
        ready: args.ready,
        explain: args.explain,
    };
    let doc = ctx.call::<baton_app::ops::OrderList>(input).await?;
    let rows: Vec<Vec<String>> = doc
        .items
        .iter()
        .map(|o| {
            vec![
                o.id.clone(),
                o.status.to_string(),
                o.from.clone(),
                o.to.clone(),
                o.seq.to_string(),
                o.attempt.to_string(),
                o.deadline.clone().unwrap_or_else(|| "-".into()),
                o.goal.clone(),
            ]
        })
        .collect();
    let mut human = match (doc.items.is_empty(), args.ready) {
        (true, false) => "No open orders.".to_owned(),
        (true, true) => "No order is ready.".to_owned(),
        (false, _) => table(
            &[
                "ID", "STATUS", "FROM", "TO", "SEQ", "REPORTS", "DEADLINE", "GOAL",
            ],
            &rows,
        ),
    };
    if let Some(waiting) = &doc.waiting {
        human.push_str("\n\n");
        if waiting.is_empty() {
            human.push_str("Nothing waits on another order.");
        } else {
            let rows: Vec<Vec<String>> = waiting
                .iter()
                .map(|o| {
                    let on: Vec<String> = o.waits_on.iter().map(ToString::to_string).collect();
                    vec![
                        o.id.clone(),
                        o.status.to_string(),
                        o.from.clone(),
                        o.to.clone(),
                        on.join(", "),
                    ]
                })
                .collect();
            human.push_str(&table(&["ID", "STATUS", "FROM", "TO", "WAITS ON"], &rows));
        }
    }
    Ok(Output::of(&doc, human))
}

async fn show(ctx: &Context, id: &str) -> CommandResult<Output> {
    let input = OrderShowInput {
        id: id.to_owned(),
        since: None,
        timeout_seconds: None,
    };
    let shown = ctx.call::<OrderShow>(input).await?;
    let order = &shown.order;
    let status = order.status;
    let mut human = format!(
        "Order {}: {status} (seq {}, {} report{})\n{} → {} · deadline {}\nGoal: {}\nAllowed next: {}\n",
        order.id,
        order.seq,
        order.attempt,
        if order.attempt == 1 { "" } else { "s" },
        order.from,
        order.to,
        order.deadline.as_deref().unwrap_or("-"),
        order.goal,
        join_or(&allowed(status), "nothing (it is closed)"),
    );
    for f in &order.findings {
        human.push_str(&format!("Limit {} {}: {}\n", f.rule, f.path, f.message));
    }
    let rows: Vec<Vec<String>> = shown.events.iter().map(step_cells).collect();
    human.push('\n');
    human.push_str(&table(
        &["SEQ", "STEP", "STATUS", "BY", "AT", "NOTE"],
        &rows,
    ));
    if !shown.effects.is_empty() {
        let rows: Vec<Vec<String>> = shown
            .effects
            .iter()
            .map(|e| {
                vec![
                    e.reference.clone(),
                    e.status.to_string(),
                    Value::Object(e.arguments.clone()).to_string(),
                    e.result_bytes.map_or("-".into(), |b| b.to_string()),
                    e.error.clone().unwrap_or_default(),
                ]
            })
            .collect();
        human.push_str("\n\nEffects (held by the gateway; approval runs them):\n");
        human.push_str(&table(
            &["REF", "STATUS", "ARGUMENTS", "RESULT BYTES", "ERROR"],
            &rows,
        ));
    }
    if !shown.tool_calls.is_empty() {
        human.push_str(&format!(
            "\n\nTool calls forwarded: {}",
            shown.tool_calls.join(", ")
        ));
    }
    Ok(Output::of(&shown, human))
}

// ---- steps --------------------------------------------------------------------------------

async fn step(
    ctx: &Context,
    args: StepArgs,
    action: OrderVerb,
    with: impl FnOnce(&mut OrderInput),
) -> CommandResult<Output> {
    ctx.me().await?;
    let mut input = OrderInput::new(action, Some(args.id));
    input.expect_seq = args.expect_seq;
    with(&mut input);
    let written = ctx.call::<OrderTake>(input).await?;
    Ok(stepped(&written, &written.events))
}

async fn report(ctx: &Context, args: ReportArgs) -> CommandResult<Output> {
    ctx.me().await?;
    let mut input = OrderInput::new(OrderVerb::Report, Some(args.step.id));
    input.expect_seq = args.step.expect_seq;
    input.document = Some(object(&args.file, "a Work Report")?);
    let written = crate::cases::call::<OrderTake>(ctx.cases.as_ref(), input)
        .await
        .map_err(|e| about_file(&args.file, e))?;
    Ok(stepped(&written, &written.events))
}

/// `doc` printed as the steps among `events`, one line each.
fn stepped(doc: &impl baton_app::doc::Doc, events: &[EventRow]) -> Output {
    let lines: Vec<String> = events
        .iter()
        .filter_map(change_of)
        .filter_map(|change| match change {
            Change::Order(OrderChange::Stepped(s)) => Some(s),
            _ => None,
        })
        .map(|s| {
            let mut line = format!("{}: {} → {} (seq {})", s.order, s.was, s.status, s.seq);
            if let Some(n) = s.attempt {
                line.push_str(&format!(", report {n}"));
            }
            if let Some(note) = &s.note {
                line.push_str(&format!(": {note}"));
            }
            line
        })
        .collect();
    Output::of(doc, lines.join("\n"))
}

async fn approve(ctx: &Context, args: ApproveArgs) -> CommandResult<Output> {
    let me = ctx.me().await?;
    // What had run before this approval, so the lines say what ran now.
    let input = OrderShowInput {
        id: args.step.id.clone(),
        since: None,
        timeout_seconds: None,
    };
    let ran_before: Vec<String> = ctx
        .call::<OrderShow>(input)
        .await?
        .effects
        .into_iter()
        .filter(|e| e.status == baton_core::effect::EffectStatus::Ran)
        .map(|e| e.reference)
        .collect();
    let doc = ctx
        .cases
        .approve(
            &me,
            &args.step.id,
            args.step.expect_seq,
            args.effects.as_deref(),
        )
        .await?;
    let mut lines: Vec<String> = if doc.events.is_empty() {
        vec![format!(
            "{}: approved already; going on with its effects",
            doc.order.id
        )]
    } else {
        vec![stepped(&doc, &doc.events).human]
    };
    for e in &doc.effects {
        if ran_before.contains(&e.reference) {
            lines.push(format!("  {} ran before; nothing ran now", e.reference));
        } else {
            lines.push(format!("  {} {} {}", e.reference, e.status, effect_note(e)));
        }
    }
    let out = Output::of(&doc, lines.join("\n"));
    let stopped = doc
        .stopped_at
        .as_ref()
        .and_then(|r| doc.effects.iter().find(|e| &e.reference == r));
    Ok(match stopped {
        Some(e) => out
            .with_note(format!(
                "stopped at {} ({}): the effects after it did not run; see `baton order show {}`",
                e.reference, e.status, doc.order.id
            ))
            .with_exit(ErrorKind::Failed),
        None => out,
    })
}

/// What an effect's line says after its status.
fn effect_note(e: &EffectRow) -> String {
    match (e.status, &e.error, e.result_bytes) {
        (baton_core::effect::EffectStatus::Failed, Some(why), _) => why.clone(),
        (_, _, Some(bytes)) => format!("({bytes} bytes)"),
        _ => String::new(),
    }
}

// ---- wait ---------------------------------------------------------------------------------

async fn wait(ctx: &Context, args: WaitArgs) -> CommandResult<Output> {
    let input = OrderShowInput {
        id: args.id,
        since: Some(args.since),
        timeout_seconds: Some(super::wait_seconds(&args.timeout)?),
    };
    let shown = ctx.call::<OrderShow>(input).await?;
    Ok(stepped(&shown, &shown.events))
}

// ---- rendering ----------------------------------------------------------------------------

/// The change an event row of a document records (its kind and data), when this baton
/// knows it.
fn change_of(row: &EventRow) -> Option<Change> {
    Change::from_parts(&row.kind, Value::Object(row.data.clone())).ok()
}

fn step_cells(event: &EventRow) -> Vec<String> {
    let (seq, what, status, note) = match change_of(event) {
        Some(Change::Order(OrderChange::Created(c))) if c.after.is_empty() => (
            c.seq,
            "offer".to_owned(),
            "offered".to_owned(),
            String::new(),
        ),
        Some(Change::Order(OrderChange::Created(c))) => (
            c.seq,
            "offer".to_owned(),
            "waiting".to_owned(),
            format!("waits on {}", c.after.join(", ")),
        ),
        Some(Change::Order(OrderChange::Stepped(s))) => (
            s.seq,
            match s.attempt {
                Some(n) => format!("{} #{n}", s.action),
                None => s.action.to_string(),
            },
            s.status.to_string(),
            s.note.clone().unwrap_or_default(),
        ),
        _ => (0, event.kind.clone(), String::new(), String::new()),
    };
    vec![
        seq.to_string(),
        what,
        status,
        event.actor.clone(),
        event.at.clone(),
        note,
    ]
}

fn join_or(items: &[&str], none: &str) -> String {
    if items.is_empty() {
        none.to_owned()
    } else {
        items.join(", ")
    }
}
