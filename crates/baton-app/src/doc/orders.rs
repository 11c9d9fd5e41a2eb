//! Work Orders: a row, its events, a step, the list and one order shown.

use baton_core::after::{self, Wait};
use baton_core::awl::Finding;
use baton_core::order::{Order, OrderChange, OrderStatus, allowed};
use baton_core::time::rfc3339;
use baton_core::{Change, Event, Millis};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::EffectRow;

/// An order as every order view shows it. `status` is the status now (an open order past
/// its deadline is `expired`); `recorded_status` is the last one written.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OrderRow {
    pub id: String,
    pub status: OrderStatus,
    pub recorded_status: OrderStatus,
    /// The commands allowed next.
    pub allowed: Vec<String>,
    pub from: String,
    pub to: String,
    pub escalate_to: Option<String>,
    pub goal: String,
    pub deadline: Option<String>,
    pub seq: i64,
    pub attempt: u32,
    /// The request message that carries the document.
    pub message: String,
    pub note: Option<String>,
    pub findings: Vec<Finding>,
    pub created_at: String,
    pub updated_at: String,
    /// What a waiting or held order still waits on, each with its status now.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits_on: Vec<Wait>,
}

impl OrderRow {
    pub fn new(o: &Order, now: Millis) -> Self {
        Self::waiting(o, &[], now)
    }

    /// `o`, which still waits on `waits`: held, as read, when one of them ended unapproved.
    pub fn waiting(o: &Order, waits: &[Wait], now: Millis) -> Self {
        let status = after::status_at(o, waits, now);
        Self {
            id: o.id.clone(),
            status,
            recorded_status: o.status,
            allowed: allowed(status).into_iter().map(str::to_owned).collect(),
            from: o.from.clone(),
            to: o.to.clone(),
            escalate_to: o.escalate_to.clone(),
            goal: o.goal.clone(),
            deadline: o.deadline.clone(),
            seq: o.seq,
            attempt: o.attempt,
            message: o.message.clone(),
            note: o.note.clone(),
            findings: o.findings.clone(),
            created_at: rfc3339(o.created_at),
            updated_at: rfc3339(o.updated_at),
            waits_on: waits.to_vec(),
        }
    }
}

/// An event as order views list it: its change's fields, with the log's kind, position,
/// actor and time.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EventRow {
    #[serde(flatten)]
    pub data: Map<String, Value>,
    pub kind: String,
    pub log_seq: i64,
    pub actor: String,
    pub at: String,
}

impl EventRow {
    pub fn new(e: &Event) -> Self {
        let data = match e.change.data() {
            Value::Object(o) => o,
            _ => Map::new(),
        };
        Self {
            data,
            kind: e.change.kind().to_owned(),
            log_seq: e.seq,
            actor: e.actor.clone(),
            at: rfc3339(e.at),
        }
    }

    pub fn all(events: &[Event]) -> Vec<Self> {
        events.iter().map(Self::new).collect()
    }
}

/// An order after a step (or a wait): where it stands and the events written.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OrderStepped {
    pub order: OrderRow,
    pub events: Vec<EventRow>,
}
doc!(OrderStepped, "baton/order-step@1");

impl OrderStepped {
    pub fn new(written: &baton_store::OrderWritten, now: Millis) -> Self {
        Self {
            order: OrderRow::new(&written.order, now),
            events: EventRow::all(&written.events),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Orders {
    pub items: Vec<OrderRow>,
    /// With `explain`: the open orders not offered yet, each with what it waits on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Vec<OrderRow>>,
}
doc!(Orders, "baton/orders@1");

/// An order with its document, newest report, every step, and its effects.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OrderShown {
    pub order: OrderRow,
    pub document: Map<String, Value>,
    /// The newest Work Report, when there is one.
    // Always an object, and said so: a bare `Value`'s schema is the boolean `true`, which
    // the strictest MCP clients refuse where a property's schema must be an object.
    #[schemars(with = "Option<Map<String, Value>>")]
    pub report: Option<Value>,
    pub events: Vec<EventRow>,
    /// The calls the gateway held for approval, in order.
    pub effects: Vec<EffectRow>,
    /// The calls the gateway forwarded, as evidence references (`SERVER/TOOL@N`).
    pub tool_calls: Vec<String>,
}
doc!(OrderShown, "baton/order@1");

impl OrderShown {
    pub fn new(view: &crate::OrderView, now: Millis) -> Self {
        Self {
            order: OrderRow::waiting(&view.order, &view.waits, now),
            document: view.document.clone(),
            report: view.report.clone(),
            events: EventRow::all(&view.events),
            effects: EffectRow::all(&view.effects),
            tool_calls: view.effects.forwarded.clone(),
        }
    }
}

/// An order step as a row: `create` for the offer.
pub fn order_step_of(event: &Event) -> Option<&baton_core::order::Step> {
    match &event.change {
        Change::Order(OrderChange::Stepped(s)) => Some(s),
        _ => None,
    }
}
