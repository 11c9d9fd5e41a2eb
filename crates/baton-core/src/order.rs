//! The Work Order lifecycle: AWL's nine states and its transition table, who
//! may take each step, the events that record every step, and the order as the fold of
//! those events.
//!
//! The table and the roles are the reference's (the `agent-work-layer` desk,
//! `lifecycle.ts`): `offered → accepted → working → submitted → approved`, with `blocked`
//! (a question) between working and working, `declined`, `cancelled` from any open state,
//! and `expired`. Only the order's `to` accepts, declines, starts and reports; only its
//! `from` approves, reworks and cancels; `from` or `escalate_to` answers a question. The
//! actor is always the acting identity, passed in by the caller, never read from an
//! argument.
//!
//! Time is an argument: an open order whose deadline has passed *reads* as `expired`
//! ([`Order::status_at`]) without anything being written, and no step may follow. `limit`
//! findings on a report (over budget, past the deadline) are recorded with it and expire
//! the order with an `expire` event. This module writes nothing and reads no clock.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::awl::{Finding, has_invalid, stamp};
use crate::delivery::{
    DeliveryAction, DeliveryStatus, RequestAction, RequestStatus, request_transition,
    transition as delivery_transition,
};
use crate::event::Change;
use crate::message::Envelope;
use crate::names::Passname;
use crate::pool::Address;
use crate::refusal::{
    Action, Blocker, Document, Field, InvalidTransition, MayAct, Record, Refusal,
};
use crate::time::Millis;

/// Where an order stands, as recorded. `expired` may also be derived: see
/// [`Order::status_at`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    /// Waits on other orders (its contract's `after`) to be approved: not yet offered.
    Waiting,
    /// One it waited on ended without approval: its sender decides (proceed or cancel).
    Held,
    /// Sent to its worker, not yet taken.
    Offered,
    /// The worker took responsibility; work has not started.
    Accepted,
    Working,
    /// The worker asked a question (a `blocked` report) and waits for an answer.
    Blocked,
    /// A `done` or `failed` report waits for review.
    Submitted,
    Approved,
    Declined,
    /// Past its deadline, or a report broke a limit.
    Expired,
    Cancelled,
}

impl OrderStatus {
    pub const ALL: [OrderStatus; 11] = [
        Self::Waiting,
        Self::Held,
        Self::Offered,
        Self::Accepted,
        Self::Working,
        Self::Blocked,
        Self::Submitted,
        Self::Approved,
        Self::Declined,
        Self::Expired,
        Self::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Waiting => "waiting",
            Self::Held => "held",
            Self::Offered => "offered",
            Self::Accepted => "accepted",
            Self::Working => "working",
            Self::Blocked => "blocked",
            Self::Submitted => "submitted",
            Self::Approved => "approved",
            Self::Declined => "declined",
            Self::Expired => "expired",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// The terminal statuses: an order in one is closed (what `order list` leaves out
    /// without `--all`).
    pub fn closed() -> impl Iterator<Item = Self> {
        Self::ALL.into_iter().filter(|s| s.is_terminal())
    }

    /// Nothing follows a terminal status.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Approved | Self::Declined | Self::Expired | Self::Cancelled
        )
    }
}

impl fmt::Display for OrderStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A step in the table. A report is three actions, one per report status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderAction {
    Accept,
    Decline,
    Start,
    ReportDone,
    ReportFailed,
    ReportBlocked,
    Answer,
    Approve,
    Rework,
    Cancel,
    /// The sender's decision on a held order: stop waiting on what ended unapproved, and
    /// go on waiting for the rest (offered at once when nothing is left).
    Proceed,
    /// Baton's own step: a report broke a limit. No command takes it.
    Expire,
    /// Baton's own step: the last order a waiting one waited on was approved.
    Release,
    /// Baton's own step: an order a waiting one waited on ended without approval.
    Hold,
}

/// Who may take an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The order's `to`.
    Worker,
    /// The order's `from` (and, for `answer`, its `escalate_to`).
    Manager,
    /// Baton itself, following a rule.
    Desk,
}

impl OrderAction {
    pub const ALL: [OrderAction; 14] = [
        Self::Accept,
        Self::Decline,
        Self::Start,
        Self::ReportDone,
        Self::ReportFailed,
        Self::ReportBlocked,
        Self::Answer,
        Self::Approve,
        Self::Rework,
        Self::Cancel,
        Self::Proceed,
        Self::Expire,
        Self::Release,
        Self::Hold,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accept => "accept",
            Self::Decline => "decline",
            Self::Start => "start",
            Self::ReportDone => "report_done",
            Self::ReportFailed => "report_failed",
            Self::ReportBlocked => "report_blocked",
            Self::Answer => "answer",
            Self::Approve => "approve",
            Self::Rework => "rework",
            Self::Cancel => "cancel",
            Self::Proceed => "proceed",
            Self::Expire => "expire",
            Self::Release => "release",
            Self::Hold => "hold",
        }
    }

    /// The `baton order` subcommand that takes this step.
    pub fn command(self) -> &'static str {
        match self {
            Self::ReportDone | Self::ReportFailed | Self::ReportBlocked => "report",
            other => other.as_str(),
        }
    }

    pub fn role(self) -> Role {
        match self {
            Self::Accept
            | Self::Decline
            | Self::Start
            | Self::ReportDone
            | Self::ReportFailed
            | Self::ReportBlocked => Role::Worker,
            Self::Answer | Self::Approve | Self::Rework | Self::Cancel | Self::Proceed => {
                Role::Manager
            }
            Self::Expire | Self::Release | Self::Hold => Role::Desk,
        }
    }
}

impl fmt::Display for OrderAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The reference's table. Cancel and expire apply to every open status.
fn next_status(status: OrderStatus, action: OrderAction) -> Option<OrderStatus> {
    use OrderAction as A;
    use OrderStatus as S;
    if status.is_terminal() {
        return None;
    }
    match (status, action) {
        (_, A::Cancel) => Some(S::Cancelled),
        (_, A::Expire) => Some(S::Expired),
        (S::Offered, A::Accept) => Some(S::Accepted),
        (S::Offered, A::Decline) => Some(S::Declined),
        (S::Accepted, A::Start) => Some(S::Working),
        (S::Working, A::ReportDone | A::ReportFailed) => Some(S::Submitted),
        (S::Working, A::ReportBlocked) => Some(S::Blocked),
        (S::Blocked, A::Answer) => Some(S::Working),
        (S::Submitted, A::Approve) => Some(S::Approved),
        (S::Submitted, A::Rework) => Some(S::Working),
        (S::Waiting, A::Release) => Some(S::Offered),
        (S::Waiting, A::Hold) => Some(S::Held),
        (S::Held, A::Proceed) => Some(S::Waiting),
        _ => None,
    }
}

/// Applies `action` to an order in `status`, or says why not and what is allowed.
pub fn transition(
    status: OrderStatus,
    action: OrderAction,
) -> Result<OrderStatus, InvalidTransition> {
    next_status(status, action).ok_or_else(|| InvalidTransition {
        action: Action::Order(action),
        status: status.as_str(),
        blocker: match (status, action.command()) {
            (OrderStatus::Expired, _) => Some(Blocker::Expired),
            (OrderStatus::Offered, "start" | "report") => Some(Blocker::AcceptFirst),
            (OrderStatus::Waiting | OrderStatus::Held, _) if action.role() == Role::Worker => {
                Some(Blocker::NotOffered)
            }
            (OrderStatus::Blocked, "report") => Some(Blocker::AnswerFirst),
            _ => None,
        },
        allowed: allowed_actions(status)
            .into_iter()
            .map(Action::Order)
            .collect(),
    })
}

/// The actions that move an order in `status`, one per command (a report is
/// `report_done` here), in table order.
pub fn allowed_actions(status: OrderStatus) -> Vec<OrderAction> {
    let mut out: Vec<OrderAction> = Vec::new();
    for action in OrderAction::ALL {
        if action.role() != Role::Desk
            && next_status(status, action).is_some()
            && !out.iter().any(|a| a.command() == action.command())
        {
            out.push(action);
        }
    }
    out
}

/// The commands that move an order in `status`, each once, in table order.
pub fn allowed(status: OrderStatus) -> Vec<&'static str> {
    allowed_actions(status)
        .into_iter()
        .map(OrderAction::command)
        .collect()
}

// ---- events -------------------------------------------------------------------------------

/// A change to an order, as recorded in the log (`order.changed`). Every change carries
/// the order's own `seq`, from 1 at creation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum OrderChange {
    Created(Box<Created>),
    Stepped(Box<Step>),
    /// An order offered to a pool was claimed: its claimant is its worker from here on.
    Claimed(Box<Claim>),
}

/// A claim of an order offered to a pool (`crate::pool`): `by` becomes its worker; its
/// status stays `offered`, its seq moves on, so a claimant that read an older seq loses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub order: String,
    pub seq: i64,
    pub by: String,
}

/// An order was offered. The document itself is the payload of the request `message`
/// that carried it to its worker; these are the fields the lifecycle needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Created {
    pub order: String,
    pub seq: i64,
    pub from: String,
    pub to: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_to: Option<String>,
    pub goal: String,
    /// The document's `deadline`, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// The request message that carries the document.
    pub message: String,
    /// The orders it waits on (its contract's `after`, less those already approved): it
    /// starts `waiting` when there are any, else `offered`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
}

impl Created {
    /// The lifecycle's fields of an order document (assumed to have passed the AWL
    /// rules; this checks only what the lifecycle cannot do without).
    pub fn from_document(doc: &Value, message: String) -> Result<Self, Refusal> {
        let text = |key: &str| doc.get(key).and_then(Value::as_str).map(str::to_owned);
        let need = |key: &'static str| {
            text(key)
                .filter(|s| !s.is_empty())
                .ok_or(Refusal::DocumentField { field: key })
        };
        Ok(Self {
            order: need("id")?,
            seq: 1,
            from: need("from")?,
            to: need("to")?,
            escalate_to: text("escalate_to"),
            goal: text("goal").unwrap_or_default(),
            deadline: text("deadline"),
            message,
            after: Vec::new(),
        })
    }
}

/// One step of the lifecycle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub order: String,
    pub seq: i64,
    pub action: OrderAction,
    /// The status before the step (an order past its deadline is `expired` here).
    pub was: OrderStatus,
    pub status: OrderStatus,
    /// A rework's reason, an answer's text, a decline's or cancel's reason, or why Baton
    /// expired the order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// On a report: which report this is (1 for the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// On a report: the Work Report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<Value>,
    /// On a report or an expiry: the `limit` findings recorded with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// On a hold: the orders waited on that ended unapproved; on a proceed: the orders no
    /// longer waited on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
}

impl OrderChange {
    pub fn order(&self) -> &str {
        match self {
            Self::Created(c) => &c.order,
            Self::Stepped(s) => &s.order,
            Self::Claimed(c) => &c.order,
        }
    }

    /// The order's own sequence number for this change.
    pub fn seq(&self) -> i64 {
        match self {
            Self::Created(c) => c.seq,
            Self::Stepped(s) => s.seq,
            Self::Claimed(c) => c.seq,
        }
    }
}

// ---- the fold -----------------------------------------------------------------------------

/// An order as the log knows it: the fold of its changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Order {
    pub id: String,
    pub from: String,
    pub to: String,
    pub escalate_to: Option<String>,
    pub goal: String,
    pub deadline: Option<String>,
    /// The deadline as an instant; `None` when it does not parse as the reference's
    /// `Date.parse` would (such an order never expires by time).
    pub deadline_at: Option<Millis>,
    /// The request message carrying the document.
    pub message: String,
    /// As recorded; read [`Order::status_at`] for what it is now.
    pub status: OrderStatus,
    /// The order's newest `seq`.
    pub seq: i64,
    /// Reports so far.
    pub attempt: u32,
    /// The log position of the creation (orders list in this order).
    pub log_seq: i64,
    pub created_at: Millis,
    pub updated_at: Millis,
    /// The newest step's note.
    pub note: Option<String>,
    /// The `limit` findings recorded with the newest report.
    pub findings: Vec<Finding>,
}

impl Order {
    /// The status at `now`: an open order whose deadline has passed is `expired`.
    pub fn status_at(&self, now: Millis) -> OrderStatus {
        if !self.status.is_terminal() && self.deadline_at.is_some_and(|d| now > d) {
            OrderStatus::Expired
        } else {
            self.status
        }
    }

    /// Who may take `action` on this order.
    pub fn who_may(&self, action: OrderAction) -> MayAct {
        match (action.role(), &self.escalate_to) {
            (Role::Worker, _) => MayAct::Worker(self.to.clone()),
            (_, Some(e)) if action == OrderAction::Answer => MayAct::SenderOrEscalation {
                sender: self.from.clone(),
                escalation: e.clone(),
            },
            _ => MayAct::Sender(self.from.clone()),
        }
    }

    /// Whether `actor` may take `action` on this order (the table aside).
    pub fn may(&self, actor: &str, action: OrderAction) -> bool {
        match action.role() {
            Role::Worker => actor == self.to,
            Role::Manager => {
                actor == self.from
                    || (action == OrderAction::Answer && self.escalate_to.as_deref() == Some(actor))
            }
            Role::Desk => false,
        }
    }
}

/// Applies a change recorded at `at` by log event `log_seq`. Lenient, as replay must not
/// fail: [`plan`] validates at write time. Returns the row to store, if any.
pub fn fold(
    current: Option<Order>,
    change: &OrderChange,
    log_seq: i64,
    at: Millis,
) -> Option<Order> {
    match change {
        OrderChange::Created(c) => Some(Order {
            id: c.order.clone(),
            from: c.from.clone(),
            to: c.to.clone(),
            escalate_to: c.escalate_to.clone(),
            goal: c.goal.clone(),
            deadline: c.deadline.clone(),
            deadline_at: c.deadline.as_deref().and_then(stamp::instant),
            message: c.message.clone(),
            status: if c.after.is_empty() {
                OrderStatus::Offered
            } else {
                OrderStatus::Waiting
            },
            seq: c.seq,
            attempt: 0,
            log_seq,
            created_at: at,
            updated_at: at,
            note: None,
            findings: Vec::new(),
        }),
        OrderChange::Stepped(s) => {
            let mut order = current?;
            order.status = s.status;
            order.seq = s.seq;
            order.updated_at = at;
            order.note = s.note.clone();
            if let Some(attempt) = s.attempt {
                order.attempt = attempt;
                order.findings = s.findings.clone();
            }
            Some(order)
        }
        OrderChange::Claimed(c) => {
            let mut order = current?;
            order.to = c.by.clone();
            order.seq = c.seq;
            order.updated_at = at;
            Some(order)
        }
    }
}

/// The newest Work Report among an order's events.
pub fn newest_report(events: &[crate::Event]) -> Option<Value> {
    events.iter().rev().find_map(|e| match &e.change {
        Change::Order(OrderChange::Stepped(s)) => s.report.clone(),
        _ => None,
    })
}

// ---- planning a step ----------------------------------------------------------------------

/// What a participant asks to do to an order.
#[derive(Debug, Clone, PartialEq)]
pub enum OrderRequest {
    Accept,
    Decline {
        reason: Option<String>,
    },
    Start,
    /// A Work Report that passed the rules; `findings` are its `limit` findings (an
    /// `invalid` one is refused here too).
    Report {
        report: Value,
        findings: Vec<Finding>,
    },
    Answer {
        text: String,
    },
    Approve,
    Rework {
        reason: String,
    },
    Cancel {
        reason: Option<String>,
    },
    /// A held order's sender goes on without what ended unapproved (`after` is the
    /// orders dropped, filled in by [`crate::after::plan`]).
    Proceed {
        after: Vec<String>,
    },
}

impl OrderRequest {
    /// The command, for messages.
    pub fn command(&self) -> &'static str {
        match self {
            Self::Accept => "accept",
            Self::Decline { .. } => "decline",
            Self::Start => "start",
            Self::Report { .. } => "report",
            Self::Answer { .. } => "answer",
            Self::Approve => "approve",
            Self::Rework { .. } => "rework",
            Self::Cancel { .. } => "cancel",
            Self::Proceed { .. } => "proceed",
        }
    }
}

fn required(text: &str, field: Field) -> Result<String, Refusal> {
    let text = text.trim();
    if text.is_empty() {
        return Err(Refusal::Missing(field));
    }
    Ok(text.to_owned())
}

/// A proceed's note: what the order no longer waits on.
fn dropped_note(after: &[String]) -> Option<String> {
    (!after.is_empty()).then(|| format!("goes on without {}", after.join(", ")))
}

fn optional(text: Option<String>) -> Option<String> {
    text.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty())
}

/// Appends the step `action` takes from `status`, numbered after the last one.
fn next_step<'a>(
    order: &Order,
    steps: &'a mut Vec<Step>,
    status: &mut OrderStatus,
    action: OrderAction,
) -> Result<&'a mut Step, Refusal> {
    let next = transition(*status, action)?;
    steps.push(Step {
        order: order.id.clone(),
        seq: order.seq + steps.len() as i64 + 1,
        action,
        was: *status,
        status: next,
        note: None,
        attempt: None,
        report: None,
        findings: Vec::new(),
        after: Vec::new(),
    });
    *status = next;
    Ok(steps.last_mut().expect("a step was just pushed"))
}

/// The steps that carry out `request` by `actor` on `order` at `now`, numbered after the
/// order's newest `seq`, which must still be `expected_seq`. Checks, in order: the
/// caller's view is current, the input, the actor's role, the table.
///
/// A report on an `accepted` order starts it first (two steps, as the reference does); a
/// report with `limit` findings is followed by an `expire` step.
pub fn plan(
    order: &Order,
    actor: &str,
    request: OrderRequest,
    expected_seq: i64,
    now: Millis,
) -> Result<Vec<Step>, Refusal> {
    use OrderAction as A;
    if order.seq != expected_seq {
        return Err(Refusal::Moved {
            order: order.id.clone(),
            expected: expected_seq,
            seq: order.seq,
        });
    }
    let request_after = match &request {
        OrderRequest::Proceed { after } => after.clone(),
        _ => Vec::new(),
    };
    let (action, note, report) = match request {
        OrderRequest::Accept => (A::Accept, None, None),
        OrderRequest::Decline { reason } => (A::Decline, optional(reason), None),
        OrderRequest::Start => (A::Start, None, None),
        OrderRequest::Answer { text } => (A::Answer, Some(required(&text, Field::Answer)?), None),
        OrderRequest::Approve => (A::Approve, None, None),
        OrderRequest::Rework { reason } => (
            A::Rework,
            Some(required(&reason, Field::ReworkReason)?),
            None,
        ),
        OrderRequest::Cancel { reason } => (A::Cancel, optional(reason), None),
        OrderRequest::Proceed { after } => (A::Proceed, dropped_note(&after), None),
        OrderRequest::Report { report, findings } => {
            if has_invalid(&findings) {
                return Err(Refusal::Findings {
                    document: Document::WorkReport,
                    findings,
                });
            }
            let action = match report.get("status").and_then(Value::as_str) {
                Some("done") => A::ReportDone,
                Some("failed") => A::ReportFailed,
                Some("blocked") => A::ReportBlocked,
                other => {
                    return Err(Refusal::ReportStatus {
                        status: other.map(str::to_owned),
                    });
                }
            };
            (action, None, Some((report, findings)))
        }
    };
    if action.role() == Role::Worker && order.to.starts_with(crate::pool::ROLE_PREFIX) {
        return Err(Refusal::Unclaimed {
            order: order.id.clone(),
            pool: order.to.clone(),
        });
    }
    if !order.may(actor, action) {
        return Err(Refusal::OrderRole {
            actor: actor.to_owned(),
            action,
            order: order.id.clone(),
            may: order.who_may(action),
        });
    }
    if let Some((report, _)) = &report {
        let from = report.get("from").and_then(Value::as_str).unwrap_or("");
        if from != actor {
            return Err(Refusal::ReportFrom {
                actor: actor.to_owned(),
                from: from.to_owned(),
            });
        }
    }

    let mut status = order.status_at(now);
    let mut steps = Vec::new();
    match report {
        None => {
            let step = next_step(order, &mut steps, &mut status, action)?;
            step.note = note;
            step.after = request_after;
        }
        Some((report, findings)) => {
            if status == OrderStatus::Accepted {
                next_step(order, &mut steps, &mut status, A::Start)?;
            }
            let step = next_step(order, &mut steps, &mut status, action)?;
            step.attempt = Some(order.attempt + 1);
            step.report = Some(report);
            step.findings = findings.clone();
            if !findings.is_empty() {
                let why = findings
                    .iter()
                    .map(|f| format!("{} {}: {}", f.rule, f.path, f.message))
                    .collect::<Vec<_>>()
                    .join("; ");
                let expiry = next_step(order, &mut steps, &mut status, A::Expire)?;
                expiry.note = Some(format!("the report broke a limit: {why}"));
                expiry.findings = findings;
            }
        }
    }
    Ok(steps)
}

// ---- offering an order and the request that carries it -----------------------------------

/// The lifecycle's fields of an order `doc` offered by `actor`, and its worker: the offer
/// must come from the acting identity and go to a participant. The document passed the
/// AWL rules already; `message` is filled in once the request carrying it is sent.
pub fn plan_offer(doc: &Value, actor: &Passname) -> Result<(Created, Address), Refusal> {
    let mut created = Created::from_document(doc, String::new())?;
    if created.from != actor.as_str() {
        return Err(Refusal::OfferFrom {
            actor: actor.to_string(),
            from: created.from,
        });
    }
    let to = crate::pool::address(&created.to, Field::OrderTo)?;
    if let Address::Pool(pool) = &to {
        // As the pool's canonical spelling, so every reader compares it alike.
        created.to = pool.to_string();
    }
    Ok((created, to))
}

/// The claim of `order`, offered to a pool, by `by` at `now`: its seq must still be
/// `expected_seq` when the claimant names one, and it must still be on offer.
pub fn plan_claim(
    order: &Order,
    by: &Passname,
    expected_seq: Option<i64>,
    now: Millis,
) -> Result<Claim, Refusal> {
    if let Some(expected) = expected_seq
        && expected != order.seq
    {
        return Err(Refusal::Moved {
            order: order.id.clone(),
            expected,
            seq: order.seq,
        });
    }
    if order.status_at(now) != OrderStatus::Offered
        || !order.to.starts_with(crate::pool::ROLE_PREFIX)
    {
        return Err(Refusal::Claim {
            item: order.id.clone(),
            problem: crate::pool::ClaimProblem::Closed,
        });
    }
    Ok(Claim {
        order: order.id.clone(),
        seq: order.seq + 1,
        by: by.to_string(),
    })
}

/// An order id names one order: offering it again is a conflict.
pub fn ensure_new(existing: Option<&Order>, id: &str) -> Result<(), Refusal> {
    match existing {
        Some(_) => Err(Refusal::OrderExists { id: id.to_owned() }),
        None => Ok(()),
    }
}

/// The order `id`, or the refusal that names it missing.
pub fn found(order: Option<Order>, id: &str) -> Result<Order, Refusal> {
    order.ok_or_else(|| Refusal::not_found(Record::Order, id))
}

/// The changes that keep the order's `request` message (`env`) in step with the order
/// after a step: once the worker acts on the order it has read the request
/// (`delivered`); when the order ends, the worker's end closes (`completed` when approved,
/// `refused` otherwise) and so does the sender's. Without them an approved order would
/// stay in the worker's inbox and resume packet as work still owed.
pub fn follow_request(order: &Order, env: &Envelope) -> Result<Vec<Change>, Refusal> {
    let mut changes = Vec::new();
    // An order still in its pool has no worker yet: only the sender's end follows it.
    if let Ok(worker) = Passname::new(&order.to) {
        changes.extend(follow_worker(order, env, &worker)?);
    }
    if order.status.is_terminal() && env.request_status == Some(RequestStatus::Open) {
        changes.push(Change::RequestChanged {
            message: order.message.clone(),
            status: request_transition(RequestStatus::Open, RequestAction::Complete)?,
        });
    }
    Ok(changes)
}

/// The worker's delivery of the request, following the order.
fn follow_worker(order: &Order, env: &Envelope, worker: &Passname) -> Result<Vec<Change>, Refusal> {
    let mut actions: Vec<(DeliveryAction, Option<String>)> = Vec::new();
    let mut status = env.status_for(worker).unwrap_or(DeliveryStatus::Pending);
    let offered = matches!(
        order.status,
        OrderStatus::Offered | OrderStatus::Waiting | OrderStatus::Held
    );
    if status == DeliveryStatus::Pending && !offered {
        actions.push((DeliveryAction::Fetch, None));
        status = DeliveryStatus::Delivered;
    }
    if order.status.is_terminal() && status == DeliveryStatus::Delivered {
        let closing = if order.status == OrderStatus::Approved {
            DeliveryAction::Complete
        } else {
            DeliveryAction::Refuse
        };
        actions.push((
            closing,
            Some(format!("order {} {}", order.id, order.status.as_str())),
        ));
    }
    let mut changes = Vec::new();
    let mut current = env.status_for(worker).unwrap_or(DeliveryStatus::Pending);
    for (action, note) in actions {
        let next = delivery_transition(current, action, env.kind)?;
        changes.push(Change::DeliveryChanged {
            message: order.message.clone(),
            participant: worker.clone(),
            status: next,
            note,
        });
        current = next;
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::awl::FindingKind;
    use OrderAction as A;
    use OrderStatus as S;
    use proptest::prelude::*;
    use serde_json::json;

    /// The reference's table written out as data: (from, action, to). Cancel and expire
    /// from every open status.
    const TABLE: &[(S, A, S)] = &[
        (S::Offered, A::Accept, S::Accepted),
        (S::Offered, A::Decline, S::Declined),
        (S::Accepted, A::Start, S::Working),
        (S::Working, A::ReportDone, S::Submitted),
        (S::Working, A::ReportFailed, S::Submitted),
        (S::Working, A::ReportBlocked, S::Blocked),
        (S::Blocked, A::Answer, S::Working),
        (S::Submitted, A::Approve, S::Approved),
        (S::Submitted, A::Rework, S::Working),
        (S::Waiting, A::Release, S::Offered),
        (S::Waiting, A::Hold, S::Held),
        (S::Held, A::Proceed, S::Waiting),
    ];
    const OPEN: [S; 7] = [
        S::Waiting,
        S::Held,
        S::Offered,
        S::Accepted,
        S::Working,
        S::Blocked,
        S::Submitted,
    ];

    fn table(from: S, action: A) -> Option<S> {
        match action {
            A::Cancel if OPEN.contains(&from) => Some(S::Cancelled),
            A::Expire if OPEN.contains(&from) => Some(S::Expired),
            _ => TABLE
                .iter()
                .find(|(f, a, _)| *f == from && *a == action)
                .map(|(_, _, to)| *to),
        }
    }

    #[test]
    fn the_transition_function_is_the_table() {
        for status in S::ALL {
            for action in A::ALL {
                assert_eq!(
                    transition(status, action).ok(),
                    table(status, action),
                    "{status} --{action}-->"
                );
            }
        }
    }

    #[test]
    fn four_states_are_terminal_and_allow_nothing() {
        for status in S::ALL {
            assert_eq!(status.is_terminal(), !OPEN.contains(&status), "{status}");
            assert_eq!(allowed(status).is_empty(), status.is_terminal(), "{status}");
            assert_eq!(S::parse(status.as_str()), Some(status));
        }
    }

    #[test]
    fn refusals_name_the_status_and_the_allowed_steps() {
        let err = transition(S::Offered, A::ReportDone).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot report this order: its status is offered (accept it first); \
             allowed next: accept, decline, cancel"
        );
        assert_eq!(allowed(S::Working), ["report", "cancel"]);
        let err = transition(S::Approved, A::Cancel).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("allowed next: nothing (it is final)")
        );
    }

    /// Who may take each action: (action, the worker, the sender, the escalation contact,
    /// someone else).
    #[test]
    fn only_the_named_parties_may_act() {
        let o = order(S::Offered);
        let rows: &[(A, [bool; 4])] = &[
            (A::Accept, [true, false, false, false]),
            (A::Decline, [true, false, false, false]),
            (A::Start, [true, false, false, false]),
            (A::ReportDone, [true, false, false, false]),
            (A::ReportFailed, [true, false, false, false]),
            (A::ReportBlocked, [true, false, false, false]),
            (A::Answer, [false, true, true, false]),
            (A::Approve, [false, true, false, false]),
            (A::Rework, [false, true, false, false]),
            (A::Cancel, [false, true, false, false]),
            (A::Proceed, [false, true, false, false]),
            (A::Expire, [false, false, false, false]),
            (A::Release, [false, false, false, false]),
            (A::Hold, [false, false, false, false]),
        ];
        for (action, want) in rows {
            let got = ["impl-1", "planner", "owner", "impl-2"].map(|who| o.may(who, *action));
            assert_eq!(&got, want, "{action}");
        }
    }

    fn order(status: S) -> Order {
        let created = Created::from_document(
            &json!({"id": "wo_1", "from": "planner", "to": "impl-1", "escalate_to": "owner",
                    "goal": "g", "deadline": "2025-01-02T00:00:00Z"}),
            "01M".into(),
        )
        .unwrap();
        let mut o = fold(None, &OrderChange::Created(Box::new(created)), 7, 1_000).unwrap();
        o.status = status;
        o
    }

    const BEFORE_DEADLINE: Millis = 1_735_700_000_000; // 2025-01-01T02:53:20Z
    const AFTER_DEADLINE: Millis = 1_735_800_000_000; // 2025-01-02T06:40:00Z

    fn report(status: &str) -> OrderRequest {
        OrderRequest::Report {
            report: json!({"from": "impl-1", "status": status}),
            findings: vec![],
        }
    }

    fn run(o: &mut Order, who: &str, request: OrderRequest) -> Result<Vec<Step>, Refusal> {
        let steps = plan(o, who, request, o.seq, BEFORE_DEADLINE)?;
        for s in &steps {
            *o = fold(
                Some(o.clone()),
                &OrderChange::Stepped(Box::new(s.clone())),
                9,
                2_000,
            )
            .unwrap();
        }
        Ok(steps)
    }

    #[test]
    fn a_whole_round_numbers_its_steps_and_counts_its_reports() {
        let mut o = order(S::Offered);
        run(&mut o, "impl-1", OrderRequest::Accept).unwrap();
        // A report on an accepted order starts it first.
        let steps = run(&mut o, "impl-1", report("blocked")).unwrap();
        let actions: Vec<_> = steps.iter().map(|s| (s.seq, s.action)).collect();
        assert_eq!(actions, [(3, A::Start), (4, A::ReportBlocked)]);
        assert_eq!(steps[1].attempt, Some(1));
        run(
            &mut o,
            "owner",
            OrderRequest::Answer {
                text: "use UTC".into(),
            },
        )
        .unwrap();
        run(&mut o, "impl-1", report("done")).unwrap();
        let err = run(
            &mut o,
            "planner",
            OrderRequest::Rework {
                reason: "  ".into(),
            },
        )
        .unwrap_err();
        assert_eq!(err, Refusal::Missing(Field::ReworkReason));
        run(
            &mut o,
            "planner",
            OrderRequest::Rework {
                reason: "keep the header".into(),
            },
        )
        .unwrap();
        assert_eq!(o.note.as_deref(), Some("keep the header"));
        let steps = run(&mut o, "impl-1", report("done")).unwrap();
        assert_eq!(steps[0].attempt, Some(3));
        run(&mut o, "planner", OrderRequest::Approve).unwrap();
        assert_eq!((o.status, o.seq, o.attempt), (S::Approved, 9, 3));
    }

    #[test]
    fn a_stale_view_is_refused_before_anything_else() {
        let o = order(S::Offered);
        let err = plan(&o, "impl-2", OrderRequest::Accept, 0, BEFORE_DEADLINE).unwrap_err();
        assert_eq!(
            err,
            Refusal::Moved {
                order: "wo_1".into(),
                expected: 0,
                seq: 1
            }
        );
    }

    #[test]
    fn a_report_is_its_authors_own_word() {
        let mut o = order(S::Working);
        let forged = OrderRequest::Report {
            report: json!({"from": "impl-2", "status": "done"}),
            findings: vec![],
        };
        assert!(matches!(
            run(&mut o, "impl-1", forged),
            Err(Refusal::ReportFrom { .. })
        ));
        assert!(matches!(
            run(&mut o, "impl-2", report("done")),
            Err(Refusal::OrderRole { .. })
        ));
    }

    #[test]
    fn past_its_deadline_an_order_reads_expired_and_nothing_follows() {
        let o = order(S::Working);
        assert_eq!(o.status_at(BEFORE_DEADLINE), S::Working);
        assert_eq!(o.status_at(AFTER_DEADLINE), S::Expired);
        assert_eq!(order(S::Approved).status_at(AFTER_DEADLINE), S::Approved);
        let err = plan(
            &o,
            "planner",
            OrderRequest::Cancel { reason: None },
            1,
            AFTER_DEADLINE,
        )
        .unwrap_err();
        assert!(err.to_string().contains("its status is expired"), "{err}");
        // An unreadable deadline never expires the order.
        let mut odd = order(S::Working);
        odd.deadline_at = None;
        assert_eq!(odd.status_at(Millis::MAX), S::Working);
    }

    #[test]
    fn limit_findings_are_recorded_and_expire_the_order() {
        let mut o = order(S::Working);
        let over = Finding {
            rule: "R7".into(),
            kind: FindingKind::Limit,
            path: "/cost/usd".into(),
            message: "spent 3 usd, budget is 2".into(),
        };
        let request = OrderRequest::Report {
            report: json!({"from": "impl-1", "status": "done"}),
            findings: vec![over.clone()],
        };
        let steps = run(&mut o, "impl-1", request).unwrap();
        let actions: Vec<_> = steps.iter().map(|s| (s.action, s.status)).collect();
        assert_eq!(
            actions,
            [(A::ReportDone, S::Submitted), (A::Expire, S::Expired)]
        );
        assert_eq!(o.findings, [over]);
        assert!(steps[1].note.as_deref().unwrap().contains("R7 /cost/usd"));

        let invalid = OrderRequest::Report {
            report: json!({"from": "impl-1", "status": "done"}),
            findings: vec![Finding::invalid("R4", "/evidence", "no evidence")],
        };
        assert!(matches!(
            run(&mut order(S::Working), "impl-1", invalid),
            Err(Refusal::Findings { .. })
        ));
    }

    #[test]
    fn a_change_round_trips_through_the_event_log() {
        let o = order(S::Working);
        let steps = plan(&o, "impl-1", report("done"), 1, BEFORE_DEADLINE).unwrap();
        let change = crate::Change::Order(OrderChange::Stepped(Box::new(steps[0].clone())));
        assert_eq!(change.kind(), "order.changed");
        assert_eq!(change.subject(), "wo_1");
        let back = crate::Change::from_parts(change.kind(), change.data()).unwrap();
        assert_eq!(back, change);
    }

    /// What a participant can try, as data for the model.
    #[derive(Debug, Clone)]
    enum Try {
        Accept,
        Decline,
        Start,
        Report(&'static str),
        Answer,
        Approve,
        Rework,
        Cancel,
    }

    impl Try {
        fn request(&self) -> (A, OrderRequest) {
            match self {
                Self::Accept => (A::Accept, OrderRequest::Accept),
                Self::Decline => (A::Decline, OrderRequest::Decline { reason: None }),
                Self::Start => (A::Start, OrderRequest::Start),
                Self::Report(status) => (
                    match *status {
                        "done" => A::ReportDone,
                        "failed" => A::ReportFailed,
                        _ => A::ReportBlocked,
                    },
                    report(status),
                ),
                Self::Answer => (A::Answer, OrderRequest::Answer { text: "yes".into() }),
                Self::Approve => (A::Approve, OrderRequest::Approve),
                Self::Rework => (
                    A::Rework,
                    OrderRequest::Rework {
                        reason: "again".into(),
                    },
                ),
                Self::Cancel => (A::Cancel, OrderRequest::Cancel { reason: None }),
            }
        }
    }

    fn attempt() -> impl Strategy<Value = (&'static str, Try)> {
        let who = proptest::sample::select(vec!["impl-1", "planner", "owner", "impl-2"]);
        let what = prop_oneof![
            Just(Try::Accept),
            Just(Try::Decline),
            Just(Try::Start),
            proptest::sample::select(vec!["done", "failed", "blocked"]).prop_map(Try::Report),
            Just(Try::Answer),
            Just(Try::Approve),
            Just(Try::Rework),
            Just(Try::Cancel),
        ];
        (who, what)
    }

    proptest! {
        /// No sequence of attempts leaves the table or the roles: an accepted attempt by
        /// someone entitled moves along the table's rows (a report on an accepted order by
        /// way of start), numbers its steps after the last, and counts reports; a refused
        /// one changes nothing.
        #[test]
        fn no_sequence_leaves_the_table(attempts in proptest::collection::vec(attempt(), 0..40)) {
            let mut o = order(S::Offered);
            let mut reports = 0;
            for (who, what) in attempts {
                let (action, request) = what.request();
                let before = o.clone();
                match run(&mut o, who, request) {
                    Ok(steps) => {
                        prop_assert!(before.may(who, action));
                        let mut status = before.status;
                        for (i, step) in steps.iter().enumerate() {
                            prop_assert_eq!(step.seq, before.seq + 1 + i as i64);
                            prop_assert_eq!(step.was, status);
                            prop_assert_eq!(table(status, step.action), Some(step.status));
                            status = step.status;
                        }
                        prop_assert_eq!(steps.last().map(|s| s.action), Some(action));
                        prop_assert_eq!(o.status, status);
                        if matches!(what, Try::Report(_)) {
                            reports += 1;
                        }
                    }
                    Err(e) => {
                        prop_assert_eq!(&o, &before);
                        match e {
                            Refusal::OrderRole { .. } => prop_assert!(!before.may(who, action)),
                            Refusal::Transition(t) => {
                                prop_assert!(before.may(who, action));
                                prop_assert_eq!(t.status, before.status.as_str());
                                let direct = table(before.status, action);
                                let via_start = before.status == S::Accepted
                                    && matches!(what, Try::Report(_));
                                prop_assert!(direct.is_none() && !via_start);
                            }
                            other => prop_assert!(false, "unexpected refusal {other}"),
                        }
                    }
                }
                prop_assert_eq!(o.attempt, reports);
            }
        }
    }
}
