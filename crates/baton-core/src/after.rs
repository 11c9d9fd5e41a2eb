//! Orders that wait on orders: an order's contract names the orders it waits on
//! (`x-baton.after`); it is offered to its worker only once every one of them is approved,
//! and when one ends unapproved it is held for its sender's decision.
//!
//! An order starts `waiting` when any order it names is not yet approved. The approval of
//! the last one releases it (`release`, Baton's step: `offered`); one that is cancelled,
//! declined or expires holds it (`hold`: `held`) and its sender is told. Expiry is derived
//! from the deadline at read time, so a dependency that *reads* expired holds the order
//! as a read sees it ([`status_at`]) before anything is written. The sender decides: cancel
//! it, or `proceed` without what ended (it waits on the rest, or is offered at once).
//!
//! Cycles cannot form: an order may wait only on orders that exist when it is offered (an
//! unknown one is refused), so every edge points to an older order. Naming itself is the
//! one cycle a sender can write, and it is refused by name.
//!
//! The edges still pending are a projection of the log ([`edits`]): added when an order
//! is offered, removed when the order waited on is approved, when the waiting order ends,
//! is released, or goes on without them. This module writes nothing and reads no clock.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::awl::Finding;
use crate::order::{self, Order, OrderAction, OrderChange, OrderRequest, OrderStatus, Step};
use crate::refusal::Refusal;
use crate::time::Millis;

/// The most orders one order may wait on.
pub const MAX_AFTER: usize = 32;

/// Why an order named in `after` cannot be waited on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "problem", content = "status")]
pub enum Problem {
    /// No such order in this project (another project's orders are not seen).
    Unknown,
    /// The order being offered.
    Itself,
    /// Named before in the same list.
    Repeated,
    /// Past [`MAX_AFTER`].
    TooMany,
    /// It ended without approval: it never will be approved.
    Ended(OrderStatus),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown => f.write_str("is no order in this project"),
            Self::Itself => f.write_str("is this order itself: an order cannot wait on itself"),
            Self::Repeated => f.write_str("is named twice"),
            Self::TooMany => write!(f, "is past the most an order may wait on ({MAX_AFTER})"),
            Self::Ended(status) => write!(f, "is {status}: it will never be approved"),
        }
    }
}

/// An order another waits on, and where it stands now (expiry derived).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Wait {
    pub order: String,
    pub status: OrderStatus,
}

impl Wait {
    /// `order` as waited on, where it stands at `now`.
    pub fn of(order: &Order, now: Millis) -> Self {
        Self {
            order: order.id.clone(),
            status: order.status_at(now),
        }
    }

    /// It ended without approval: the order waiting on it is held.
    pub fn failed(&self) -> bool {
        failed(self.status)
    }
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.order, self.status)
    }
}

/// Ended, and not approved.
pub fn failed(status: OrderStatus) -> bool {
    status.is_terminal() && status != OrderStatus::Approved
}

/// The orders a document's contract names in `after`, as written (strings only).
pub fn named(doc: &Value) -> Vec<String> {
    doc.pointer("/x-baton/after")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// The problem of `named[i]` that needs no store: past the bound, empty, the order `id`
/// itself, or a repeat.
fn shape_problem(id: &str, named: &[String], i: usize) -> Option<Problem> {
    let n = &named[i];
    if i >= MAX_AFTER {
        Some(Problem::TooMany)
    } else if n.trim().is_empty() {
        Some(Problem::Unknown)
    } else if n == id {
        Some(Problem::Itself)
    } else if named[..i].contains(n) {
        Some(Problem::Repeated)
    } else {
        None
    }
}

/// B11 on an order document: `after` past its bound, with an empty entry, a repeat, or
/// the order itself. (Unknown and ended orders need the store: [`plan_offer`].)
pub fn findings(doc: &Value) -> Vec<Finding> {
    let named = named(doc);
    let id = doc.get("id").and_then(Value::as_str).unwrap_or("");
    (0..named.len().min(MAX_AFTER + 1))
        .filter_map(|i| {
            let problem = shape_problem(id, &named, i)?;
            Some(Finding::invalid(
                "B11",
                format!("/x-baton/after/{i}"),
                format!("{:?} {problem}", named[i]),
            ))
        })
        .collect()
}

/// What a new order `id` waits on, given each of `named` as the store found it (in the
/// same order; `None` when unknown) at `now`: the ones not yet approved. Refused, naming
/// the entry, when one is unknown, ended unapproved, repeated or the order itself.
pub fn plan_offer(
    id: &str,
    named: &[String],
    found: &[Option<Order>],
    now: Millis,
) -> Result<Vec<String>, Refusal> {
    let refuse = |index: usize, problem: Problem| Refusal::After {
        index,
        order: named.get(index).cloned().unwrap_or_default(),
        problem,
    };
    if let Some((i, problem)) =
        (0..named.len()).find_map(|i| Some((i, shape_problem(id, named, i)?)))
    {
        return Err(refuse(i, problem));
    }
    let mut pending = Vec::new();
    for (i, name) in named.iter().enumerate() {
        let Some(Some(order)) = found.get(i) else {
            return Err(refuse(i, Problem::Unknown));
        };
        let status = order.status_at(now);
        if failed(status) {
            return Err(refuse(i, Problem::Ended(status)));
        }
        if status != OrderStatus::Approved {
            pending.push(name.clone());
        }
    }
    Ok(pending)
}

/// Where `order` stands at `now`, given what it still waits on: a waiting order with one
/// of them ended unapproved (an expiry read from its deadline included) is held.
pub fn status_at(order: &Order, waits: &[Wait], now: Millis) -> OrderStatus {
    match order.status_at(now) {
        OrderStatus::Waiting if waits.iter().any(Wait::failed) => OrderStatus::Held,
        status => status,
    }
}

/// A worker's step: it needs an offered order.
fn by_worker(request: &OrderRequest) -> bool {
    matches!(
        request,
        OrderRequest::Accept
            | OrderRequest::Decline { .. }
            | OrderRequest::Start
            | OrderRequest::Report { .. }
    )
}

/// The steps that carry out `request` by `actor` on `order`, which still waits on `waits`
/// (their statuses at `now`): [`order::plan`], but a worker's step on an order not yet
/// offered is refused naming what it waits on, and a sender's `proceed` drops what ended
/// unapproved — recording the hold first when it was only read from a deadline — and
/// releases the order when nothing is left to wait on.
pub fn plan(
    order: &Order,
    waits: &[Wait],
    actor: &str,
    request: OrderRequest,
    expected_seq: i64,
    now: Millis,
) -> Result<Vec<Step>, Refusal> {
    let status = status_at(order, waits, now);
    let waiting = matches!(status, OrderStatus::Waiting | OrderStatus::Held);
    if waiting && by_worker(&request) && order.may(actor, OrderAction::Accept) {
        if order.seq != expected_seq {
            return Err(Refusal::Moved {
                order: order.id.clone(),
                expected: expected_seq,
                seq: order.seq,
            });
        }
        return Err(Refusal::Waits {
            order: order.id.clone(),
            held: status == OrderStatus::Held,
            on: waits.to_vec(),
        });
    }
    let OrderRequest::Proceed { .. } = request else {
        return order::plan(order, actor, request, expected_seq, now);
    };
    let dropped: Vec<String> = waits
        .iter()
        .filter(|w| w.failed())
        .map(|w| w.order.clone())
        .collect();
    let mut view = order.clone();
    view.status = status;
    let mut steps = order::plan(
        &view,
        actor,
        OrderRequest::Proceed {
            after: dropped.clone(),
        },
        expected_seq,
        now,
    )?;
    if order.status == OrderStatus::Waiting {
        // Held only as read (a dependency past its deadline): the hold is recorded first.
        for step in &mut steps {
            step.seq += 1;
        }
        steps.insert(
            0,
            desk_step(order, OrderAction::Hold, order.seq + 1, &dropped),
        );
    }
    if waits.iter().all(Wait::failed) {
        let last = steps.last().expect("a proceed is one step");
        let mut after = order.clone();
        after.status = last.status;
        steps.push(desk_step(&after, OrderAction::Release, last.seq + 1, &[]));
    }
    Ok(steps)
}

/// Baton's own step on `order` (`release` or `hold`) numbered `seq`.
fn desk_step(order: &Order, action: OrderAction, seq: i64, after: &[String]) -> Step {
    let was = order.status;
    let status = order::transition(was, action).map_or(was, |s| s);
    let note = match action {
        OrderAction::Hold => Some(format!("held: {} ended without approval", after.join(", "))),
        OrderAction::Release => Some("offered: every order it waited on is approved".into()),
        _ => None,
    };
    Step {
        order: order.id.clone(),
        seq,
        action,
        was,
        status,
        note,
        attempt: None,
        report: None,
        findings: Vec::new(),
        after: after.to_vec(),
    }
}

/// What follows for the orders waiting on `ended`, which a step just closed at `now`: each
/// one still `waiting` (as recorded, and not past its own deadline) is released when
/// `ended` was approved and it waits on nothing else (`rest`: what else it waits on), or
/// held when `ended` was not approved.
pub fn follow(ended: &Order, waiting: &[(Order, Vec<Wait>)], now: Millis) -> Vec<Step> {
    if !ended.status.is_terminal() {
        return Vec::new();
    }
    let approved = ended.status == OrderStatus::Approved;
    waiting
        .iter()
        .filter(|(o, _)| o.status_at(now) == OrderStatus::Waiting)
        .filter_map(|(o, rest)| {
            let rest: Vec<&Wait> = rest.iter().filter(|w| w.order != ended.id).collect();
            if approved && rest.is_empty() {
                Some(desk_step(o, OrderAction::Release, o.seq + 1, &[]))
            } else if !approved {
                Some(desk_step(
                    o,
                    OrderAction::Hold,
                    o.seq + 1,
                    std::slice::from_ref(&ended.id),
                ))
            } else {
                None
            }
        })
        .collect()
}

/// What the sender of a held `order` is told: which order ended how, and the decision.
pub fn held_notice(order: &Order, ended: &Order) -> String {
    format!(
        "order {} ({}) is held: order {} it waited on is {}. Decide: proceed without it, \
         or cancel it.",
        order.id,
        order.goal,
        ended.id,
        ended.status.as_str()
    )
}

/// A change to the pending edges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitEdit {
    /// `order` (carried by `message`) waits on each of `after`.
    Add {
        order: String,
        message: String,
        after: Vec<String>,
    },
    /// `after` was approved: nothing waits on it any more.
    Satisfied { after: String },
    /// `order` waits on none of `after` any more.
    Drop { order: String, after: Vec<String> },
    /// `order` waits on nothing any more (offered, or ended).
    Clear { order: String },
}

/// The edits one order change makes to the pending edges (live writes and replay alike).
pub fn edits(change: &OrderChange) -> Vec<WaitEdit> {
    match change {
        OrderChange::Created(c) if !c.after.is_empty() => vec![WaitEdit::Add {
            order: c.order.clone(),
            message: c.message.clone(),
            after: c.after.clone(),
        }],
        // A claim names the worker of a pooled order; what it waits on is unchanged.
        OrderChange::Created(_) | OrderChange::Claimed(_) => Vec::new(),
        OrderChange::Stepped(s) => {
            let mut out = Vec::new();
            if s.status == OrderStatus::Approved {
                out.push(WaitEdit::Satisfied {
                    after: s.order.clone(),
                });
            }
            if s.status.is_terminal() || s.action == OrderAction::Release {
                out.push(WaitEdit::Clear {
                    order: s.order.clone(),
                });
            } else if s.action == OrderAction::Proceed && !s.after.is_empty() {
                out.push(WaitEdit::Drop {
                    order: s.order.clone(),
                    after: s.after.clone(),
                });
            }
            out
        }
    }
}

#[cfg(test)]
mod tests;
