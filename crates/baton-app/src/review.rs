//! The review gate as use cases: what a review of an order starts from (its
//! round, its brief, report, test output and revisions) and what it ends with (each
//! reviewer's verdict recorded, the round's conclusion, and the one rework a first-round
//! FIX sends). Running the reviewers is the edge's (the launch wrapper); the rules are
//! `baton_core::gate`'s.

use baton_core::gate::{self, Conclusion, GateChange, Outcome, Verdict};
use baton_core::order::{Order, OrderAction, OrderStatus};
use baton_core::refusal::Action;
use baton_core::{Change, Event, InvalidTransition, Passname};
use serde_json::{Map, Value};

use crate::{App, Result};

/// What a review of an order starts from.
#[derive(Debug, Clone)]
pub struct ReviewStart {
    pub order: Order,
    /// 1 for the first review, 2 after the fix round.
    pub round: u32,
    pub document: Map<String, Value>,
    pub report: Value,
    /// The order's `base_revision` and the report's commit, when both are named.
    pub base: Option<String>,
    pub head: Option<String>,
    /// The test output the report's evidence carries (before, then after).
    pub test_output: String,
}

/// One reviewer's verdict, as the edge observed it.
#[derive(Debug, Clone)]
pub struct Reviewed {
    pub reviewer: String,
    pub run: Option<String>,
    pub verdict: Verdict,
}

/// What a round of review did.
#[derive(Debug, Clone)]
pub struct ReviewDone {
    pub order: String,
    pub round: u32,
    pub conclusion: Conclusion,
    pub events: Vec<Event>,
}

fn text_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_str()
}

fn evidence_output(report: &Value) -> String {
    let mut out = String::new();
    for part in ["before", "after"] {
        let Some(e) = report.pointer(&format!("/x-baton/evidence/{part}")) else {
            continue;
        };
        let command = e.get("command").and_then(Value::as_str).unwrap_or("-");
        let code = e
            .get("exit_code")
            .map_or_else(|| "-".to_owned(), Value::to_string);
        out.push_str(&format!("$ {command}   # {part}, exit {code}\n"));
        if let Some(o) = e.get("output").and_then(Value::as_str) {
            out.push_str(o);
            if !o.ends_with('\n') {
                out.push('\n');
            }
        }
    }
    out
}

impl App {
    /// The round the next review of `order` would be: one more than the rounds that
    /// concluded (a stopped round ended the chain and does not count).
    async fn next_round(&self, order: &str) -> Result<u32> {
        let events = self.store().events_about(order, "gate.changed").await?;
        let done = events
            .iter()
            .filter(|e| {
                matches!(&e.change, Change::Gate(GateChange::Concluded { outcome, .. }) if *outcome != Outcome::Stopped)
            })
            .count();
        Ok(done as u32 + 1)
    }

    /// What a review of order `id` by `me` with `reviewers` starts from; refused before
    /// any reviewer runs unless `me` may conclude it (the order's sender, never its worker:
    /// a refusal is a security event), the reviewers are different commands and the order
    /// is submitted (a report waits for review). Without `me` it is only read: the packet
    /// of a review no one concludes.
    pub async fn review_start(
        &self,
        me: Option<&Passname>,
        id: &str,
        reviewers: &[String],
    ) -> Result<ReviewStart> {
        gate::distinct_reviewers(reviewers)?;
        let view = self.order_view(id).await?;
        let status = view.order.status_at(self.now());
        let report = match (&view.report, status) {
            (Some(r), OrderStatus::Submitted) => r.clone(),
            _ => {
                return Err(baton_core::Refusal::Transition(InvalidTransition {
                    action: Action::Order(OrderAction::Approve),
                    status: status.as_str(),
                    blocker: None,
                    allowed: Vec::new(),
                })
                .into());
            }
        };
        let round = self.next_round(&view.order.id).await?;
        if let Some(me) = me {
            // Authorized and recorded as begun before any reviewer runs.
            self.store()
                .begin_review(me, &view.order.id, round, reviewers)
                .await?;
        }
        let document = Value::Object(view.document.clone());
        Ok(ReviewStart {
            round,
            base: text_at(&document, &["x-baton", "context", "base_revision"]).map(str::to_owned),
            head: text_at(&report, &["x-baton", "evidence", "review", "commit"]).map(str::to_owned),
            test_output: evidence_output(&report),
            order: view.order,
            document: view.document,
            report,
        })
    }

    /// Records a round's verdicts and its conclusion as `me`; a first-round FIX sends the
    /// order back to its worker with the fixes as the rework reason, in the same
    /// transaction: a round is recorded whole or not at all.
    pub async fn conclude_review(
        &self,
        me: &Passname,
        start: &ReviewStart,
        verdicts: Vec<Reviewed>,
    ) -> Result<ReviewDone> {
        let order = start.order.id.clone();
        let conclusion = gate::conclude(
            start.round,
            &verdicts
                .iter()
                .map(|v| v.verdict.clone())
                .collect::<Vec<_>>(),
        );
        let mut changes: Vec<GateChange> = verdicts
            .into_iter()
            .map(|v| GateChange::Reviewed {
                order: order.clone(),
                round: start.round,
                reviewer: v.reviewer,
                run: v.run,
                verdict: v.verdict,
            })
            .collect();
        changes.push(GateChange::Concluded {
            order: order.clone(),
            round: start.round,
            outcome: conclusion.outcome,
            disagreement: conclusion.disagreement,
        });
        let events = self
            .store()
            .conclude_review(
                me,
                &order,
                start.order.seq,
                &changes,
                conclusion.reason.clone(),
            )
            .await?;
        Ok(ReviewDone {
            order,
            round: start.round,
            conclusion,
            events,
        })
    }
}
