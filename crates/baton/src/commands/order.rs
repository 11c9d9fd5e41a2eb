//! `baton order`: the Work Order lifecycle (SPEC §5.2) at the command line. Documents are
//! checked with the rules and the environment `baton handoff check` uses; the lifecycle
//! is `baton_core::order`'s, and the store takes each step in one transaction. The actor
//! is always `--as`/`BATON_AS`, never an argument.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use baton_core::awl::{
    DocumentKind, Finding, FindingKind, has_invalid, order_findings, report_findings,
};
use baton_core::order::{Order, OrderAction, OrderRefused, OrderRequest, allowed};
use baton_core::{Event, Millis, Passname, Payload, Topic};
use baton_store::receipt::POLL;
use baton_store::{OrderQuery, OrderWritten, Store};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::commands::Context;
use crate::commands::handoff::{Workspace, read_document};
use crate::error::{CommandError, CommandResult, ErrorKind};
use crate::output::{Output, now, table, timestamp};
use crate::project::parse_duration;

/// Offer, take, report on and review Work Orders (the handoff contract's lifecycle).
///
/// States: offered → accepted → working → submitted → approved, with blocked (a question)
/// between working and working, declined, cancelled, and expired (past the deadline, or a
/// report over a limit). The order's `to` accepts, declines, starts and reports; its
/// `from` approves, reworks and cancels; `from` or `escalate_to` answers a question.
#[derive(Subcommand, Debug)]
pub enum OrderCommand {
    /// Offer a Work Order: check it (AWL rules; the `x-baton` contract as the project's
    /// `orders.contract` requires), send it to its `to` as a request, and record it as
    /// offered (seq 1). Its `from` must be you; invalid findings exit 3 and store nothing.
    #[command(after_help = "Example:\n  baton --as planner order create order.json")]
    Create(CreateArgs),
    /// List the open orders you are party to (from, to or escalate_to; every order without
    /// --as), oldest first.
    #[command(after_help = "Examples:\n  baton --as impl-1 order list\n  \
                            baton --json order list --all")]
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
    /// Approve a submitted order (its `from` only).
    #[command(after_help = "Example:\n  baton --as planner order approve wo_42")]
    Approve(StepArgs),
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
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Closed orders too (approved, declined, expired, cancelled).
    #[arg(long)]
    pub all: bool,
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
        OrderCommand::Accept(a) => step(ctx, a, OrderRequest::Accept).await,
        OrderCommand::Decline(a) => {
            step(ctx, a.step, OrderRequest::Decline { reason: a.reason }).await
        }
        OrderCommand::Start(a) => step(ctx, a, OrderRequest::Start).await,
        OrderCommand::Report(a) => report(ctx, a).await,
        OrderCommand::Answer(a) => step(ctx, a.step, OrderRequest::Answer { text: a.text }).await,
        OrderCommand::Approve(a) => step(ctx, a, OrderRequest::Approve).await,
        OrderCommand::Rework(a) => {
            step(ctx, a.step, OrderRequest::Rework { reason: a.reason }).await
        }
        OrderCommand::Cancel(a) => {
            step(ctx, a.step, OrderRequest::Cancel { reason: a.reason }).await
        }
        OrderCommand::Wait(args) => wait(ctx, args).await,
    }
}

// ---- reading ------------------------------------------------------------------------------

async fn load(ctx: &Context, id: &str) -> CommandResult<Order> {
    ctx.store.order(id).await?.ok_or_else(|| {
        CommandError::new(
            ErrorKind::NotFound,
            OrderRefused::NoSuchOrder(id.to_owned()).to_string(),
        )
    })
}

/// The order's document: the payload of the request that carried it.
async fn document(ctx: &Context, order: &Order) -> CommandResult<Value> {
    let fetched = ctx.store.fetch(None, &order.message).await?;
    Ok(Value::Object(fetched.payload))
}

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

// ---- create, list, show -------------------------------------------------------------------

async fn create(ctx: &Context, args: CreateArgs) -> CommandResult<Output> {
    let me = ctx.me().await?;
    let doc = read(&args.file, "a Work Order")?;
    if DocumentKind::of(&doc) == DocumentKind::Report {
        return Err(CommandError::refused(format!(
            "{} is a Work Report; `order create` takes a Work Order (a report goes to \
             `baton order report ID FILE`)",
            args.file.display()
        )));
    }
    let env = Workspace::discover(Some(&ctx.project));
    let findings = order_findings(&doc, None, &env, ctx.project.config.contract);
    if has_invalid(&findings) {
        return Err(refusal(&args.file, "a Work Order", &findings));
    }
    let topic =
        Topic::new(&args.topic).map_err(|e| CommandError::refused(format!("--topic: {e}")))?;
    let payload = Payload::from_value(doc, ctx.project.config.payload_cap).map_err(|e| {
        CommandError::refused(format!(
            "{}: {e} (messages.payload_cap in .baton/config.toml)",
            args.file.display()
        ))
    })?;
    let written = ctx.store.create_order(&me, topic, payload).await?;
    let o = &written.order;
    Ok(Output::new(
        "baton/order-step@1",
        json!({ "order": order_row(o, now()), "events": events_json(&written.events) }),
        format!(
            "{}: offered to {} (seq 1, request {})",
            o.id, o.to, o.message
        ),
    ))
}

async fn list(ctx: &Context, args: ListArgs) -> CommandResult<Output> {
    let me = ctx.maybe_me().await?;
    let query = OrderQuery {
        party: me.as_ref().map(Passname::to_string),
        closed: args.all,
    };
    let at = now();
    let orders: Vec<Order> = ctx
        .store
        .orders(&query)
        .await?
        .into_iter()
        .filter(|o| args.all || !o.status_at(at).is_terminal())
        .collect();
    let rows: Vec<Vec<String>> = orders
        .iter()
        .map(|o| {
            vec![
                o.id.clone(),
                o.status_at(at).to_string(),
                o.from.clone(),
                o.to.clone(),
                o.seq.to_string(),
                o.attempt.to_string(),
                o.deadline.clone().unwrap_or_else(|| "-".into()),
                o.goal.clone(),
            ]
        })
        .collect();
    let human = if orders.is_empty() {
        "No open orders.".to_owned()
    } else {
        table(
            &[
                "ID", "STATUS", "FROM", "TO", "SEQ", "REPORTS", "DEADLINE", "GOAL",
            ],
            &rows,
        )
    };
    Ok(Output::new(
        "baton/orders@1",
        json!({ "items": orders.iter().map(|o| order_row(o, at)).collect::<Vec<_>>() }),
        human,
    ))
}

async fn show(ctx: &Context, id: &str) -> CommandResult<Output> {
    let order = load(ctx, id).await?;
    let doc = document(ctx, &order).await?;
    let events = ctx.store.order_events_since(id, 0).await?;
    let at = now();
    let status = order.status_at(at);
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
    let rows: Vec<Vec<String>> = events.iter().map(step_cells).collect();
    human.push('\n');
    human.push_str(&table(
        &["SEQ", "STEP", "STATUS", "BY", "AT", "NOTE"],
        &rows,
    ));
    let report = events
        .iter()
        .rev()
        .find_map(|e| step_of(e).and_then(|s| s.report.clone()));
    Ok(Output::new(
        "baton/order@1",
        json!({
            "order": order_row(&order, at),
            "document": doc,
            "report": report,
            "events": events_json(&events),
        }),
        human,
    ))
}

// ---- steps --------------------------------------------------------------------------------

async fn step(ctx: &Context, args: StepArgs, request: OrderRequest) -> CommandResult<Output> {
    let me = ctx.me().await?;
    let order = load(ctx, &args.id).await?;
    let expected = args.expect_seq.unwrap_or(order.seq);
    let written = ctx
        .store
        .order_step(&me, &args.id, expected, request)
        .await?;
    Ok(stepped(&written))
}

async fn report(ctx: &Context, args: ReportArgs) -> CommandResult<Output> {
    let me = ctx.me().await?;
    let order = load(ctx, &args.step.id).await?;
    // Whose order it is decides first: a report for someone else's order is forbidden
    // whatever the file holds.
    if !order.may(me.as_str(), OrderAction::ReportDone) {
        return Err(CommandError::new(
            ErrorKind::Forbidden,
            format!(
                "{me} may not report on order {}: only its worker ({}) may; nothing was stored",
                order.id, order.to
            ),
        ));
    }
    let doc = read(&args.file, "a Work Report")?;
    let order_doc = document(ctx, &order).await?;
    let env = Workspace::discover(Some(&ctx.project));
    let findings = report_findings(&doc, &order_doc, &[], &env, ctx.project.config.contract);
    if has_invalid(&findings) {
        return Err(refusal(
            &args.file,
            "a Work Report on this order",
            &findings,
        ));
    }
    // The report is stored in the step's event: the payload cap bounds it as it does a message.
    let report = Payload::from_value(doc, ctx.project.config.payload_cap)
        .map_err(|e| {
            CommandError::refused(format!(
                "{}: {e} (messages.payload_cap in .baton/config.toml)",
                args.file.display()
            ))
        })?
        .object()
        .clone();
    let expected = args.step.expect_seq.unwrap_or(order.seq);
    let request = OrderRequest::Report {
        report: Value::Object(report),
        findings,
    };
    let written = ctx
        .store
        .order_step(&me, &args.step.id, expected, request)
        .await?;
    Ok(stepped(&written))
}

fn stepped(written: &OrderWritten) -> Output {
    let o = &written.order;
    let lines: Vec<String> = written
        .events
        .iter()
        .filter_map(step_of)
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
    Output::new(
        "baton/order-step@1",
        json!({ "order": order_row(o, now()), "events": events_json(&written.events) }),
        lines.join("\n"),
    )
}

// ---- wait ---------------------------------------------------------------------------------

async fn wait(ctx: &Context, args: WaitArgs) -> CommandResult<Output> {
    let timeout = parse_duration("--timeout", &args.timeout).map_err(CommandError::usage)?;
    let deadline = Instant::now() + timeout;
    load(ctx, &args.id).await?;
    // Like `receipt wait`: look at the store's generation (one cheap query) and read the
    // order's events only when it moved.
    let mut seen = -1;
    loop {
        let generation = ctx.store.generation().await?;
        if generation != seen {
            seen = generation;
            let events = ctx.store.order_events_since(&args.id, args.since).await?;
            if !events.is_empty() {
                let order = load(ctx, &args.id).await?;
                return Ok(stepped(&OrderWritten { order, events }));
            }
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        tokio::time::sleep(POLL.min(deadline - now)).await;
    }
    Err(CommandError::new(
        ErrorKind::NotFound,
        format!(
            "order {} has no step after seq {} within {}; wait again or see `baton order show {}`",
            args.id,
            args.since,
            human_duration(timeout),
            args.id
        ),
    ))
}

fn human_duration(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

// ---- rendering ----------------------------------------------------------------------------

fn step_of(event: &Event) -> Option<&baton_core::order::Step> {
    match &event.change {
        baton_core::Change::Order(baton_core::order::OrderChange::Stepped(s)) => Some(s),
        _ => None,
    }
}

fn step_cells(event: &Event) -> Vec<String> {
    use baton_core::Change;
    use baton_core::order::OrderChange;
    let (seq, what, status, note) = match &event.change {
        Change::Order(OrderChange::Created(c)) => (
            c.seq,
            "offer".to_owned(),
            "offered".to_owned(),
            String::new(),
        ),
        Change::Order(OrderChange::Stepped(s)) => (
            s.seq,
            match s.attempt {
                Some(n) => format!("{} #{n}", s.action),
                None => s.action.to_string(),
            },
            s.status.to_string(),
            s.note.clone().unwrap_or_default(),
        ),
        other => (0, other.kind().to_owned(), String::new(), String::new()),
    };
    vec![
        seq.to_string(),
        what,
        status,
        event.actor.clone(),
        timestamp(event.at),
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

/// The JSON row every order view uses. `status` is the status now (an open order past its
/// deadline is `expired`); `recorded_status` is the last one written.
fn order_row(o: &Order, at: Millis) -> Value {
    let status = o.status_at(at);
    json!({
        "id": o.id,
        "status": status,
        "recorded_status": o.status,
        "allowed": allowed(status),
        "from": o.from,
        "to": o.to,
        "escalate_to": o.escalate_to,
        "goal": o.goal,
        "deadline": o.deadline,
        "seq": o.seq,
        "attempt": o.attempt,
        "message": o.message,
        "note": o.note,
        "findings": o.findings,
        "created_at": timestamp(o.created_at),
        "updated_at": timestamp(o.updated_at),
    })
}

/// Each event's change with the log's `at`, `actor` and position.
fn events_json(events: &[Event]) -> Vec<Value> {
    events
        .iter()
        .map(|e| {
            let mut data = match e.change.data() {
                Value::Object(o) => o,
                _ => serde_json::Map::new(),
            };
            data.insert("kind".into(), json!(e.change.kind()));
            data.insert("log_seq".into(), json!(e.seq));
            data.insert("actor".into(), json!(e.actor));
            data.insert("at".into(), json!(timestamp(e.at)));
            Value::Object(data)
        })
        .collect()
}
