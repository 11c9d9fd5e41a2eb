//! The human queue as use cases: gathering the six sources' facts from the store
//! for `baton_core::queue::compute`, raising a need, acknowledging an item. Shared by the
//! CLI, `baton mcp` and the HTTP server.

use std::collections::HashMap;

use baton_core::effect::EffectStatus;
use baton_core::gate::{GateChange, NeedSource, Outcome};
use baton_core::message::MessageType;
use baton_core::order::OrderStatus;
use baton_core::queue::{
    self, FAILED_RUNS_WINDOW_MS, Facts, Item, Lane, LaneShown, RunFact, RunFacts, Source,
};
use baton_core::{Change, Event, Field, Refusal};
use baton_store::{RunQuery, Window};

use crate::{App, Result};

/// Gate events read at a time for the track records.
const GATE_PAGE: u32 = 1000;

/// The longest need, in bytes.
pub const MAX_NEED_BYTES: usize = 2000;

impl App {
    /// The queue now: every lane (or just `lane`).
    pub async fn queue(&self, lane: Option<Lane>) -> Result<Vec<LaneShown>> {
        let now = self.now();
        let since = now - FAILED_RUNS_WINDOW_MS;
        // The window's failures and what could clear them, kept once each (`RunFacts`).
        let mut kept = RunFacts::default();
        for r in self.store().failures(since).await? {
            kept.push(RunFact {
                title: r.command.join(" "),
                succeeded: r.status.clears_failures(),
                failed: r.status.is_failure(),
                id: r.id,
                order: r.order,
                ended_at: r.ended_at,
                reason: r.reason,
            });
        }
        let runs = kept.into_runs();

        // Open work only: the orders open as recorded and those with a stuck effect, the
        // needs no one acknowledged, and acknowledgements of what is left.
        let attention = self.store().attention().await?;
        let mut open: Vec<baton_core::order::Order> = self
            .store()
            .orders(&baton_store::OrderQuery::default())
            .await?;
        for id in &attention.stuck {
            if !open.iter().any(|o| &o.id == id)
                && let Some(order) = self.store().order(id).await?
            {
                open.push(order);
            }
        }
        let mut items: Vec<Item> = Vec::new();
        for e in &attention.needs {
            if let Change::Gate(GateChange::Need {
                id,
                text,
                order,
                source,
                ..
            }) = &e.change
            {
                items.push(Item {
                    id: format!("need:{id}"),
                    source: match source {
                        NeedSource::Hand => Source::NeedByHand,
                        NeedSource::Session => Source::NeedBySession,
                    },
                    order: order.clone(),
                    text: format!("{} needs: {text}", e.actor),
                    at: e.at,
                    label: None,
                });
            }
        }
        // The latest conclusion of each order still waiting for approval.
        for o in &open {
            if o.status_at(now) != OrderStatus::Submitted {
                continue;
            }
            let gate = self.store().events_about(&o.id, "gate.changed").await?;
            let concluded = gate.iter().rev().find_map(|e| match &e.change {
                Change::Gate(GateChange::Concluded {
                    outcome,
                    disagreement,
                    ..
                }) => Some((e.at, *outcome, *disagreement)),
                _ => None,
            });
            if let Some((at, Outcome::Unresolved, disagreement)) = concluded {
                items.push(Item {
                    id: format!("review:{}", o.id),
                    source: Source::Review,
                    text: format!(
                        "the review of {} is unresolved{}",
                        o.id,
                        if disagreement {
                            ": the reviewers disagree"
                        } else {
                            ""
                        }
                    ),
                    order: Some(o.id.clone()),
                    at,
                    label: disagreement.then(|| "disagreement".to_owned()),
                });
            }
        }
        // What the waiting orders wait on: a held one is its sender's decision.
        let waits = self.waits(&open).await?;
        for (o, waits) in open.iter().zip(&waits) {
            let status = baton_core::after::status_at(o, waits, now);
            let ended: Vec<String> = waits
                .iter()
                .filter(|w| w.failed())
                .map(ToString::to_string)
                .collect();
            let held = format!(
                "is held as {} ended unapproved, for its sender to proceed or cancel",
                ended.join(", ")
            );
            let waiting = match status {
                OrderStatus::Submitted => Some("waits for its owner's approval"),
                OrderStatus::Blocked => Some("waits for an answer to its question"),
                OrderStatus::Held => Some(held.as_str()),
                _ => None,
            };
            if let Some(what) = waiting {
                items.push(Item {
                    id: format!("order:{}", o.id),
                    source: Source::WaitingOnOwner,
                    order: Some(o.id.clone()),
                    text: format!("{} {what} ({}): {}", o.id, o.from, o.goal),
                    at: o.updated_at,
                    label: None,
                });
            }
            // Approved, with an effect that failed or may or may not have happened: a
            // person decides (Baton never runs it again by itself).
            if o.status == OrderStatus::Approved && attention.stuck.contains(&o.id) {
                let effects = self.store().effects(&o.id).await?;
                if let Some(stuck) = effects.stuck() {
                    let why = match stuck.status {
                        EffectStatus::Uncertain => {
                            "started with no recorded end: check the upstream before anything else runs".to_owned()
                        }
                        _ => format!(
                            "failed: {}",
                            stuck.result.as_ref().map_or_else(String::new, baton_core::effect::failure)
                        ),
                    };
                    items.push(Item {
                        id: format!("effect:{}@{}", stuck.reference, o.id),
                        source: Source::Effect,
                        order: Some(o.id.clone()),
                        text: format!("{} effect {} {why}", o.id, stuck.reference),
                        at: o.updated_at,
                        label: Some(stuck.status.as_str().to_owned()),
                    });
                }
            }
            // Past the order's deadline while still open as recorded.
            if status == OrderStatus::Expired
                && !o.status.is_terminal()
                && let Some(deadline) = o.deadline_at
            {
                items.push(Item {
                    id: format!("late:{}", o.id),
                    source: Source::PastTarget,
                    order: Some(o.id.clone()),
                    text: format!("{} passed its deadline while {}", o.id, o.status),
                    at: deadline,
                    label: None,
                });
            }
        }
        // Requests open past their topic's service target.
        if !self.settings.service_targets.is_empty() {
            for p in self.store().participants().await? {
                for env in self
                    .store()
                    .outbox(&p.name, false, &Window::EVERYTHING)
                    .await?
                {
                    let Some(target) = self.settings.service_targets.get(env.topic.as_str()) else {
                        continue;
                    };
                    let due = env.created_at + target.as_millis() as i64;
                    if env.kind == MessageType::Request
                        && env.request_status == Some(baton_core::RequestStatus::Open)
                        && due < now
                    {
                        items.push(Item {
                            id: format!("late:{}", env.id),
                            source: Source::PastTarget,
                            order: None,
                            text: format!(
                                "request {} from {} on {} is open past its target",
                                env.id, env.from, env.topic
                            ),
                            at: due,
                            label: None,
                        });
                    }
                }
            }
        }
        let mut facts = Facts {
            now,
            runs,
            items,
            acks: HashMap::new(),
        };
        let ids: Vec<String> = queue::candidates(&facts)
            .into_iter()
            .map(|i| i.id)
            .collect();
        let acked = self.store().acks(&ids).await?;
        facts.acks = ids
            .into_iter()
            .zip(acked)
            .filter_map(|(id, at)| Some((id, at?)))
            .collect();
        let lanes = queue::compute(&facts);
        Ok(lanes
            .into_iter()
            .filter(|l| lane.is_none_or(|want| want == l.lane))
            .collect())
    }

    /// Raises a need for a person as `actor`, optionally about `order` (which must exist);
    /// returns its queue item id.
    pub async fn raise_need(
        &self,
        actor: &str,
        text: &str,
        order: Option<&str>,
        source: NeedSource,
        run: Option<String>,
    ) -> Result<String> {
        let text = text.trim();
        if text.is_empty() {
            return Err(Refusal::Missing(Field::Note).into());
        }
        if text.len() > MAX_NEED_BYTES {
            return Err(Refusal::TooLong {
                field: Field::Note,
                max: MAX_NEED_BYTES,
                len: text.len(),
            }
            .into());
        }
        let order = match order {
            Some(text) => Some(self.load_order(text).await?.id),
            None => None,
        };
        let id = baton_store::new_id().to_string();
        self.store()
            .record_gate(
                actor,
                &[GateChange::Need {
                    id: id.clone(),
                    text: text.to_owned(),
                    order,
                    source,
                    run,
                }],
            )
            .await?;
        Ok(format!("need:{id}"))
    }

    /// Acknowledges queue item `item` as `actor`: it stays away until a newer signal.
    pub async fn ack_item(&self, actor: &str, item: &str) -> Result<Event> {
        let mut events = self
            .store()
            .record_gate(
                actor,
                &[GateChange::Acked {
                    item: item.to_owned(),
                }],
            )
            .await?;
        Ok(events.remove(0))
    }
}

impl App {
    /// Every worker's track record (or just `worker`'s), computed from the log.
    pub async fn track_records(
        &self,
        worker: Option<&str>,
    ) -> Result<Vec<baton_core::record::TrackRecord>> {
        use baton_core::order::{OrderAction, OrderChange};
        use baton_core::record::{OrderFacts, RunFacts, track_records};
        let now = self.now();
        let mut orders = Vec::new();
        for o in self.orders(None, true).await? {
            let events = self.store().order_events_since(&o.id, 0).await?;
            let mut reworks = 0;
            let mut usd = 0.0;
            for e in &events {
                if let Change::Order(OrderChange::Stepped(s)) = &e.change {
                    reworks += u32::from(s.action == OrderAction::Rework);
                    usd += s
                        .report
                        .as_ref()
                        .and_then(|r| r.pointer("/cost/usd"))
                        .and_then(serde_json::Value::as_f64)
                        .unwrap_or(0.0);
                }
            }
            orders.push(OrderFacts {
                worker: o.to.clone(),
                approved: o.status == OrderStatus::Approved,
                expired: o.status_at(now) == OrderStatus::Expired,
                reworks,
                usd,
            });
        }
        let mut runs: Vec<RunFacts> = Vec::new();
        self.each_run(
            RunQuery {
                ended_since: Some(0),
                ..RunQuery::default()
            },
            |r| {
                if let Some(worker) = r.participant {
                    runs.push(RunFacts {
                        worker,
                        failed: r.status.is_failure(),
                        tokens: r.tokens.as_ref().and_then(|t| t.total()),
                    });
                }
            },
        )
        .await?;
        // Every INVALID verdict, a page of gate events at a time (newest first).
        let mut invalid: Vec<String> = Vec::new();
        let mut before = None;
        loop {
            let page = self
                .store()
                .events_of_kind("gate.changed", before, GATE_PAGE)
                .await?;
            before = page.last().map(|e| e.seq);
            invalid.extend(page.iter().filter_map(|e| match &e.change {
                Change::Gate(GateChange::Reviewed {
                    reviewer,
                    verdict: baton_core::gate::Verdict::Invalid { .. },
                    ..
                }) => Some(reviewer.clone()),
                _ => None,
            }));
            if page.len() < GATE_PAGE as usize {
                break;
            }
        }
        Ok(track_records(&orders, &runs, &invalid)
            .into_iter()
            .filter(|r| worker.is_none_or(|w| r.worker == w))
            .collect())
    }
}
