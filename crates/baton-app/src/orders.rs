//! Work Orders: offering one after its document passed the rules, taking a
//! lifecycle step (a report checked against its order first), reading an order with its
//! steps, listing, and waiting for the next step.

use std::time::Duration;

use baton_core::after::Wait;
use baton_core::awl::{
    DocumentKind, Environment, Finding, has_invalid, order_findings, report_findings,
};
use baton_core::order::{self, Order, OrderAction, OrderRequest, OrderStatus, newest_report};
use baton_core::refusal::Document;
use baton_core::{Event, Field, Passname, Payload, Record, Refusal, Topic};
use baton_store::{OrderQuery, OrderWritten};
use serde_json::{Map, Value};

use crate::{App, Result, wait};

/// A lifecycle step as a participant asks for it; a report carries its document.
#[derive(Debug, Clone)]
pub enum OrderStep {
    Accept,
    Decline {
        reason: Option<String>,
    },
    Start,
    Report {
        document: Value,
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
    /// A held order's sender goes on without what ended unapproved.
    Proceed,
}

/// An order as read: where it stands, its document, its steps and the newest report
/// among them.
#[derive(Debug, Clone)]
pub struct OrderView {
    pub order: Order,
    pub document: Map<String, Value>,
    pub events: Vec<Event>,
    pub report: Option<Value>,
    /// What the gateway forwarded and held for it.
    pub effects: baton_core::effect::Effects,
    /// What it still waits on, when it is not offered yet.
    pub waits: Vec<Wait>,
}

impl App {
    /// A document's findings under the project's contract mode, checked off the async
    /// threads (the contract rules may ask git).
    async fn findings(
        &self,
        doc: Value,
        rules: impl FnOnce(&Value, &dyn Environment) -> Vec<Finding> + Send + 'static,
    ) -> Result<(Value, Vec<Finding>)> {
        let env = self.host.environment.clone();
        tokio::task::spawn_blocking(move || {
            let findings = rules(&doc, env.as_ref());
            (doc, findings)
        })
        .await
        .map_err(|e| baton_store::StoreError::Engine(format!("checking a document failed: {e}")))
    }

    /// A checked document as stored: within the payload cap.
    fn capped(&self, doc: Value) -> Result<Payload> {
        Payload::from_value(doc, self.settings.payload_cap).map_err(|error| {
            Refusal::Payload {
                field: Field::Document,
                error,
            }
            .into()
        })
    }

    /// The order `text` names: its id, or a prefix of it ([`App::resolve`]).
    pub async fn load_order(&self, text: &str) -> Result<Order> {
        let id = self.resolve(Record::Order, text).await?;
        Ok(order::found(self.store().order(&id).await?, &id)?)
    }

    /// Offers the Work Order `doc` as `me` on `topic` (default `work-order`): refused
    /// with its findings when the AWL or contract rules find it invalid, nothing stored.
    pub async fn offer(
        &self,
        me: &Passname,
        doc: Value,
        topic: Option<&str>,
    ) -> Result<OrderWritten> {
        if DocumentKind::of(&doc) == DocumentKind::Report {
            return Err(Refusal::WrongDocument {
                expected: Document::WorkOrder,
            }
            .into());
        }
        let mode = self.settings.contract;
        // A sub-order of an order in this project is checked against it (C1–C3, C5: never
        // a tool the parent stages); its siblings' budgets (C4) are `handoff check`'s.
        let parent = match doc.get("parent_id").and_then(Value::as_str) {
            Some(id) => match self.store().order(id).await? {
                Some(p) => Some(Value::Object(self.order_document(&p).await?)),
                None => None,
            },
            None => None,
        };
        let (doc, findings) = self
            .findings(doc, move |d, env| {
                order_findings(d, parent.as_ref().map(|p| (p, &[][..])), env, mode)
            })
            .await?;
        if has_invalid(&findings) {
            return Err(Refusal::Findings {
                document: Document::WorkOrder,
                findings,
            }
            .into());
        }
        let topic = Topic::new(topic.unwrap_or("work-order")).map_err(|error| Refusal::Name {
            field: Field::Topic,
            error,
        })?;
        // Its worker holds the scope's allowed paths once it accepts: each must be a glob.
        baton_core::reservation::scope_globs(&doc)?;
        let payload = self.capped(doc)?;
        self.store().create_order(me, topic, payload).await
    }

    /// A report on `order` as a step request, checked as `baton order report` checks it:
    /// whose order it is first (a report on someone else's order is forbidden whatever it
    /// holds), then the document against the stored order.
    async fn report(&self, me: &Passname, order: &Order, doc: Value) -> Result<OrderRequest> {
        if !order.may(me.as_str(), OrderAction::ReportDone) {
            let refusal = Refusal::OrderRole {
                actor: me.to_string(),
                action: OrderAction::ReportDone,
                order: order.id.clone(),
                may: order.who_may(OrderAction::ReportDone),
            };
            return self.refuse(me, refusal).await;
        }
        let order_doc = self.order_document(order).await?;
        let mode = self.settings.contract;
        let (doc, findings) = self
            .findings(doc, move |d, env| {
                report_findings(d, &Value::Object(order_doc), &[], env, mode)
            })
            .await?;
        if has_invalid(&findings) {
            return Err(Refusal::Findings {
                document: Document::WorkReport,
                findings,
            }
            .into());
        }
        // The report is stored in the step's event: the payload cap bounds it too.
        let report = Value::Object(self.capped(doc)?.object().clone());
        Ok(OrderRequest::Report { report, findings })
    }

    /// Takes a lifecycle step on order `id` as `me`, provided it is still at
    /// `expect_seq` (default: its seq now).
    pub async fn take_step(
        &self,
        me: &Passname,
        id: &str,
        expect_seq: Option<i64>,
        step: OrderStep,
    ) -> Result<OrderWritten> {
        let order = self.load_order(id).await?;
        let id = order.id.as_str();
        let request = match step {
            OrderStep::Accept => OrderRequest::Accept,
            OrderStep::Decline { reason } => OrderRequest::Decline { reason },
            OrderStep::Start => OrderRequest::Start,
            OrderStep::Report { document } => self.report(me, &order, document).await?,
            OrderStep::Answer { text } => OrderRequest::Answer { text },
            OrderStep::Approve => {
                // Approval reconciles and runs staged effects: one path for every edge.
                let approval = self.approve(me, id, expect_seq, None, None).await?;
                return Ok(approval
                    .written
                    .expect("an approval without a runner records a step"));
            }
            OrderStep::Rework { reason } => OrderRequest::Rework { reason },
            OrderStep::Cancel { reason } => OrderRequest::Cancel { reason },
            // What it goes on without is the store's to read, in the step's transaction.
            OrderStep::Proceed => OrderRequest::Proceed { after: Vec::new() },
        };
        let expected = expect_seq.unwrap_or(order.seq);
        self.store().order_step(me, id, expected, request).await
    }

    /// The order's document: the payload of the request that carried it.
    pub(crate) async fn order_document(&self, order: &Order) -> Result<Map<String, Value>> {
        let (_, payload) = self
            .store()
            .message(&order.message)
            .await?
            .ok_or_else(|| Refusal::not_found(baton_core::Record::Message, &order.message))?;
        Ok(payload)
    }

    /// An order with its document and every step.
    pub async fn order_view(&self, id: &str) -> Result<OrderView> {
        let order = self.load_order(id).await?;
        let document = self.order_document(&order).await?;
        let events = self.store().order_events_since(&order.id, 0).await?;
        let report = newest_report(&events);
        let effects = self.store().effects(&order.id).await?;
        let waits = self
            .waits(std::slice::from_ref(&order))
            .await?
            .pop()
            .unwrap_or_default();
        Ok(OrderView {
            order,
            document,
            events,
            report,
            effects,
            waits,
        })
    }

    /// What each of `orders` still waits on (nothing for one offered or past), each with
    /// its status now, in the same order.
    pub async fn waits(&self, orders: &[Order]) -> Result<Vec<Vec<Wait>>> {
        let ids: Vec<String> = orders
            .iter()
            .filter(|o| matches!(o.status, OrderStatus::Waiting | OrderStatus::Held))
            .map(|o| o.id.clone())
            .collect();
        let rows = if ids.is_empty() {
            Vec::new()
        } else {
            self.store().waits(&ids).await?
        };
        let now = self.now();
        Ok(orders
            .iter()
            .map(|o| {
                rows.iter()
                    .filter(|(id, _)| *id == o.id)
                    .map(|(_, on)| Wait::of(on, now))
                    .collect()
            })
            .collect())
    }

    /// The orders offered and not yet taken that `party` is party to (every one without
    /// one), oldest first: ready, as nothing they waited on is pending. With `explain`,
    /// also the open orders not offered yet, each with what it waits on.
    pub async fn ready_orders(
        &self,
        party: Option<&Passname>,
        explain: bool,
    ) -> Result<(Vec<Order>, Option<Vec<(Order, Vec<Wait>)>>)> {
        let now = self.now();
        let query = |only: Vec<OrderStatus>| OrderQuery {
            party: party.map(Passname::to_string),
            only,
            ..OrderQuery::default()
        };
        let ready: Vec<Order> = self
            .store()
            .orders(&query(vec![OrderStatus::Offered]))
            .await?
            .into_iter()
            .filter(|o| o.status_at(now) == OrderStatus::Offered)
            .collect();
        if !explain {
            return Ok((ready, None));
        }
        let waiting: Vec<Order> = self
            .store()
            .orders(&query(vec![OrderStatus::Waiting, OrderStatus::Held]))
            .await?
            .into_iter()
            .filter(|o| !o.status_at(now).is_terminal())
            .collect();
        let waits = self.waits(&waiting).await?;
        Ok((ready, Some(waiting.into_iter().zip(waits).collect())))
    }

    /// The open orders `party` is party to (every order without one), oldest first;
    /// with `all`, closed ones too. An order past its deadline reads as closed.
    pub async fn orders(&self, party: Option<&Passname>, all: bool) -> Result<Vec<Order>> {
        let query = OrderQuery {
            party: party.map(Passname::to_string),
            closed: all,
            ..OrderQuery::default()
        };
        let now = self.now();
        Ok(self
            .store()
            .orders(&query)
            .await?
            .into_iter()
            .filter(|o| all || !o.status_at(now).is_terminal())
            .collect())
    }

    /// Waits until order `id` has a step after `since`; refuses with
    /// [`Refusal::NoStep`] at the deadline.
    pub async fn wait_order(
        &self,
        id: &str,
        since: i64,
        timeout: Duration,
    ) -> Result<OrderWritten> {
        let order = self.load_order(id).await?;
        let id = order.id.as_str();
        let events = wait::until(
            self.store(),
            timeout,
            || self.waiting(&format!("a step of order {id} after {since}")),
            || async {
                let events = self.store().order_events_since(id, since).await?;
                Ok((!events.is_empty()).then_some(events))
            },
        )
        .await?;
        match events {
            Some(events) => Ok(OrderWritten {
                order: order::found(self.store().order(id).await?, id)?,
                events,
            }),
            None => Err(Refusal::NoStep {
                order: id.to_owned(),
                since,
                seq: order.seq,
                seconds: timeout.as_secs_f64(),
            }
            .into()),
        }
    }
}
