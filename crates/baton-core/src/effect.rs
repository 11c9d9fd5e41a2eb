//! Staged effects: what the gateway in front of a worker's MCP server lets
//! through, holds or refuses, and what approving the report runs — once, in order.
//!
//! A Work Order names the tools its worker may call (`tools`), the calls that only run on
//! approval (`staged`) and a `budget`. The gateway asks [`plan_call`] about each
//! `tools/call`: a call outside `tools`, or past the budget, is refused; a staged call is
//! held (its tool and arguments recorded, nothing forwarded) under the placeholder
//! `SERVER/TOOL#N`; any other call is forwarded and recorded as evidence `SERVER/TOOL@N`.
//! Approval reconciles the report's `effects` with what was held ([`plan_approval`]) and
//! then runs the held calls one by one ([`next`], [`plan_start`], [`resolve`],
//! [`plan_finish`]). An effect that started and has no recorded finish is uncertain: it is
//! never run again. Reworking, declining, cancelling or expiring the order drops what is
//! held ([`plan_drop`]). Everything here is a fold of `effect.changed` events about the
//! order.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::awl::rules::{effect_references, tool_allowed};
use crate::event::{Change, Event};
use crate::order::{Order, OrderAction, OrderStatus};
use crate::refusal::{Field, Refusal};
use crate::time::Millis;

/// The event kind of every change here.
pub const KIND: &str = "effect.changed";

/// What an order allows its worker, read from its document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gate {
    pub tools: Vec<String>,
    pub staged: Vec<String>,
    /// `budget.tool_calls`: calls forwarded or held, together.
    pub tool_calls: Option<u64>,
    /// `budget.seconds`, counted from the order's creation.
    pub seconds: Option<u64>,
    /// A sub-order's parent and what it stages: never callable here (rule C5), whatever
    /// the sub-order's own `tools` say.
    pub parent: Option<(String, Vec<String>)>,
}

impl Gate {
    /// The gate an order document sets (fields missing or malformed allow nothing more).
    pub fn of(document: &Map<String, Value>) -> Self {
        let strings = |key: &str| -> Vec<String> {
            document
                .get(key)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let budget = |unit: &str| {
            document
                .get("budget")
                .and_then(|b| b.get(unit))
                .and_then(Value::as_f64)
                .map(|n| n.max(0.0).floor() as u64)
        };
        Self {
            tools: strings("tools"),
            staged: strings("staged"),
            tool_calls: budget("tool_calls"),
            seconds: budget("seconds"),
            parent: None,
        }
    }

    /// The gate of a sub-order of `parent`, whose document is `parent_document`.
    pub fn under(mut self, parent: &str, parent_document: &Map<String, Value>) -> Self {
        self.parent = Some((parent.to_owned(), Gate::of(parent_document).staged));
        self
    }

    /// The parent order that stages `tool`, if any.
    fn parent_stages(&self, tool: &str) -> Option<&str> {
        let (parent, staged) = self.parent.as_ref()?;
        tool_allowed(tool, &staged.iter().map(String::as_str).collect::<Vec<_>>())
            .then_some(parent.as_str())
    }

    fn allows(&self, tool: &str) -> bool {
        tool_allowed(
            tool,
            &self.tools.iter().map(String::as_str).collect::<Vec<_>>(),
        )
    }

    /// Whether a call to `tool` is held until approval.
    pub fn stages(&self, tool: &str) -> bool {
        tool_allowed(
            tool,
            &self.staged.iter().map(String::as_str).collect::<Vec<_>>(),
        )
    }

    /// Whether the gateway lists `tool` (`SERVER/TOOL`) at all.
    pub fn lists(&self, tool: &str) -> bool {
        self.allows(tool) && self.parent_stages(tool).is_none()
    }
}

/// A change to an order's effects, as recorded (`effect.changed`, subject the order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum EffectChange {
    /// The gateway forwarded a call: evidence (`tool_call`) a report cites as `reference`.
    Forwarded {
        order: String,
        reference: String,
        tool: String,
    },
    /// The gateway refused a call, and why.
    Refused {
        order: String,
        tool: String,
        reason: String,
    },
    /// The gateway held a staged call: it runs only when the report is approved, through
    /// `upstream` (the command the gateway started).
    Held {
        order: String,
        reference: String,
        tool: String,
        arguments: Map<String, Value>,
        upstream: Vec<String>,
    },
    /// Held calls that will never run: the order went back to its worker or ended, or the
    /// approval left them out.
    Dropped {
        order: String,
        references: Vec<String>,
        reason: String,
    },
    /// An approved effect is about to be sent upstream.
    Started { order: String, reference: String },
    /// What the upstream answered (the `CallToolResult`), or why it could not be run.
    Finished {
        order: String,
        reference: String,
        ok: bool,
        result: Value,
    },
}

impl EffectChange {
    pub fn order(&self) -> &str {
        match self {
            Self::Forwarded { order, .. }
            | Self::Refused { order, .. }
            | Self::Held { order, .. }
            | Self::Dropped { order, .. }
            | Self::Started { order, .. }
            | Self::Finished { order, .. } => order,
        }
    }
}

/// Where one held call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EffectStatus {
    /// Waiting for approval.
    Held,
    /// Started with no recorded finish: it may or may not have happened upstream.
    Uncertain,
    Ran,
    Failed,
    Dropped,
}

impl EffectStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Held => "held",
            Self::Uncertain => "uncertain",
            Self::Ran => "ran",
            Self::Failed => "failed",
            Self::Dropped => "dropped",
        }
    }
}

impl fmt::Display for EffectStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One held call and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// `SERVER/TOOL#N`.
    pub reference: String,
    /// `SERVER/TOOL`.
    pub tool: String,
    pub arguments: Map<String, Value>,
    pub upstream: Vec<String>,
    pub status: EffectStatus,
    /// The upstream's answer once it ran or failed.
    pub result: Option<Value>,
}

/// An order's effects: the fold of its `effect.changed` events.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Effects {
    /// Calls forwarded or held: what `budget.tool_calls` counts.
    pub calls: u64,
    /// Forwarded calls, as evidence references, oldest first.
    pub forwarded: Vec<String>,
    /// Held calls, oldest first.
    pub effects: Vec<Effect>,
}

/// How an effect event moves its order in and out of the orders with a stuck effect (the
/// human queue's source, kept by each store as a projection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StuckBy {
    /// A start (until it ends) or a failure: the order is stuck.
    Stuck,
    /// A good end: the order stays stuck only while another of its effects is
    /// ([`Effects::stuck`], over its effects as the event leaves them).
    Recheck,
}

/// What `change` does to whether its order is stuck; `None`: nothing.
pub fn stuck_by(change: &EffectChange) -> Option<StuckBy> {
    match change {
        EffectChange::Started { .. } | EffectChange::Finished { ok: false, .. } => {
            Some(StuckBy::Stuck)
        }
        EffectChange::Finished { ok: true, .. } => Some(StuckBy::Recheck),
        _ => None,
    }
}

impl Effects {
    /// The fold of `events` (other kinds are skipped).
    pub fn replay(events: &[Event]) -> Self {
        let mut effects = Self::default();
        for event in events {
            if let Change::Effect(change) = &event.change {
                effects.apply(change);
            }
        }
        effects
    }

    pub fn apply(&mut self, change: &EffectChange) {
        let status = |effects: &mut Self, reference: &str, status: EffectStatus| {
            if let Some(e) = effects
                .effects
                .iter_mut()
                .find(|e| e.reference == reference)
            {
                e.status = status;
            }
        };
        match change {
            EffectChange::Forwarded { reference, .. } => {
                self.calls += 1;
                self.forwarded.push(reference.clone());
            }
            EffectChange::Refused { .. } => {}
            EffectChange::Held {
                reference,
                tool,
                arguments,
                upstream,
                ..
            } => {
                self.calls += 1;
                self.effects.push(Effect {
                    reference: reference.clone(),
                    tool: tool.clone(),
                    arguments: arguments.clone(),
                    upstream: upstream.clone(),
                    status: EffectStatus::Held,
                    result: None,
                });
            }
            EffectChange::Dropped { references, .. } => {
                for r in references {
                    status(self, r, EffectStatus::Dropped);
                }
            }
            EffectChange::Started { reference, .. } => {
                status(self, reference, EffectStatus::Uncertain);
            }
            EffectChange::Finished {
                reference,
                ok,
                result,
                ..
            } => {
                if let Some(e) = self.effects.iter_mut().find(|e| &e.reference == reference) {
                    e.status = if *ok {
                        EffectStatus::Ran
                    } else {
                        EffectStatus::Failed
                    };
                    e.result = Some(result.clone());
                }
            }
        }
    }

    /// The effects not dropped, in the order they were held.
    pub fn live(&self) -> impl Iterator<Item = &Effect> {
        self.effects
            .iter()
            .filter(|e| e.status != EffectStatus::Dropped)
    }

    /// How many effects await approval.
    pub fn awaiting(&self) -> usize {
        self.effects
            .iter()
            .filter(|e| e.status == EffectStatus::Held)
            .count()
    }

    /// The first effect a person must look at: it failed, or it started with no recorded
    /// end (Baton never runs either again by itself).
    pub fn stuck(&self) -> Option<&Effect> {
        self.effects
            .iter()
            .find(|e| matches!(e.status, EffectStatus::Uncertain | EffectStatus::Failed))
    }

    fn get(&self, reference: &str) -> Option<&Effect> {
        self.effects.iter().find(|e| e.reference == reference)
    }

    /// The next number for `kind` (`#` held, `@` forwarded) of `tool`, from 1.
    fn next_number(&self, tool: &str, mark: char) -> usize {
        let prefix = format!("{tool}{mark}");
        let held = self.effects.iter().map(|e| &e.reference);
        let seen = match mark {
            '#' => held.filter(|r| r.starts_with(&prefix)).count(),
            _ => self
                .forwarded
                .iter()
                .filter(|r| r.starts_with(&prefix))
                .count(),
        };
        seen + 1
    }
}

/// Why the gateway refused a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum CallRefused {
    /// The tool matches none of the order's `tools` patterns.
    NotAllowed { tool: String, patterns: Vec<String> },
    /// The order's parent stages the tool: a sub-order never runs it (rule C5).
    ParentStages { tool: String, parent: String },
    /// Another call would pass `budget.<unit>`.
    Budget { unit: String, limit: u64, used: u64 },
}

impl fmt::Display for CallRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAllowed { tool, patterns } => write!(
                f,
                "{tool} is not allowed by this order: its tools are [{}]",
                patterns.join(", ")
            ),
            Self::ParentStages { tool, parent } => write!(
                f,
                "{tool} is staged by the parent order {parent}: a sub-order never runs it"
            ),
            Self::Budget { unit, limit, used } => write!(
                f,
                "the order's budget of {limit} {unit} is spent ({used} used): no more calls"
            ),
        }
    }
}

/// What the gateway does with one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Send it upstream; it is recorded as evidence under this reference.
    Forward {
        reference: String,
    },
    /// Do not send it: it is held under this placeholder until approval.
    Hold {
        reference: String,
    },
    Refuse(CallRefused),
}

/// A `tools/call` the gateway received.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// `SERVER/TOOL`.
    pub tool: String,
    pub arguments: Map<String, Value>,
    /// The upstream server's command, which approval runs a held call through.
    pub upstream: Vec<String>,
}

/// The longest tool name a gateway records.
pub const MAX_TOOL_NAME: usize = 256;

/// Checks what a gateway's caller sent before anything about it is recorded: a tool name
/// within [`MAX_TOOL_NAME`] bytes, and arguments held to a payload's rules (at most `cap`
/// bytes as canonical JSON, nesting within the limit, no U+0000 in a string).
pub fn check_call(call: &Call, cap: usize) -> Result<(), Refusal> {
    if call.tool.len() > MAX_TOOL_NAME {
        return Err(Refusal::TooLong {
            field: Field::Tool,
            max: MAX_TOOL_NAME,
            len: call.tool.len(),
        });
    }
    // The name is checked as the JSON string it will be stored as.
    let name = Value::from(call.tool.as_str()).to_string();
    crate::json::check_text(&name, 1).map_err(|e| Refusal::Payload {
        field: Field::Tool,
        error: e.into(),
    })?;
    let text = Value::Object(call.arguments.clone()).to_string();
    crate::message::Payload::parse(&text, cap).map_err(|error| Refusal::Payload {
        field: Field::Arguments,
        error,
    })?;
    Ok(())
}

/// The gateway's word on `call` by `actor` on `order` at `now`: the change to record and
/// the decision. Refused outright (nothing to record) when the order is not the actor's to
/// work on, or not accepted or working.
pub fn plan_call(
    gate: &Gate,
    order: &Order,
    effects: &Effects,
    actor: &str,
    call: Call,
    now: Millis,
) -> Result<(EffectChange, Decision), Refusal> {
    may_work(order, actor, now)?;
    let id = order.id.clone();
    let refuse = |why: CallRefused| {
        let change = EffectChange::Refused {
            order: id.clone(),
            tool: call.tool.clone(),
            reason: why.to_string(),
        };
        Ok((change, Decision::Refuse(why)))
    };
    if !gate.allows(&call.tool) {
        return refuse(CallRefused::NotAllowed {
            tool: call.tool.clone(),
            patterns: gate.tools.clone(),
        });
    }
    if let Some(parent) = gate.parent_stages(&call.tool) {
        return refuse(CallRefused::ParentStages {
            tool: call.tool.clone(),
            parent: parent.to_owned(),
        });
    }
    if let Some(limit) = gate.tool_calls
        && effects.calls >= limit
    {
        return refuse(CallRefused::Budget {
            unit: "tool_calls".into(),
            limit,
            used: effects.calls,
        });
    }
    if let Some(limit) = gate.seconds {
        let used = (now - order.created_at).max(0) as u64 / 1000;
        if used >= limit {
            return refuse(CallRefused::Budget {
                unit: "seconds".into(),
                limit,
                used,
            });
        }
    }
    if gate.stages(&call.tool) {
        let reference = format!("{}#{}", call.tool, effects.next_number(&call.tool, '#'));
        let change = EffectChange::Held {
            order: id,
            reference: reference.clone(),
            tool: call.tool,
            arguments: call.arguments,
            upstream: call.upstream,
        };
        return Ok((change, Decision::Hold { reference }));
    }
    let reference = format!("{}@{}", call.tool, effects.next_number(&call.tool, '@'));
    let change = EffectChange::Forwarded {
        order: id,
        reference: reference.clone(),
        tool: call.tool,
    };
    Ok((change, Decision::Forward { reference }))
}

/// A gateway serves only the order's worker, while the order is accepted or working.
pub fn may_work(order: &Order, actor: &str, now: Millis) -> Result<(), Refusal> {
    if actor != order.to {
        return Err(Refusal::NotTheWorker {
            order: order.id.clone(),
            actor: actor.to_owned(),
            worker: order.to.clone(),
        });
    }
    let status = order.status_at(now);
    if !matches!(status, OrderStatus::Accepted | OrderStatus::Working) {
        return Err(Refusal::GatewayClosed {
            order: order.id.clone(),
            status,
        });
    }
    Ok(())
}

/// One way the report's `effects` and the gateway's log differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mismatch {
    /// Position in the lists, from 0.
    pub index: usize,
    /// What the report lists there (`ref tool`), if anything.
    pub reported: Option<String>,
    /// What the gateway held there, if anything.
    pub held: Option<String>,
    /// `ref`, `tool`, `arguments`, `missing` (held, not reported) or `extra` (reported,
    /// never held).
    pub what: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |s: &Option<String>| s.clone().unwrap_or_else(|| "nothing".into());
        write!(
            f,
            "effect {}: the report lists {}, the gateway held {} ({})",
            self.index + 1,
            show(&self.reported),
            show(&self.held),
            self.what
        )
    }
}

/// The differences between the report's `effects` (as written) and the held calls not
/// dropped, in order: same refs, tools and arguments. Empty when they agree.
pub fn reconcile(reported: &[Value], effects: &Effects) -> Vec<Mismatch> {
    let held: Vec<&Effect> = effects.live().collect();
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
    let mut out = Vec::new();
    for index in 0..reported.len().max(held.len()) {
        let r = reported.get(index);
        let h = held.get(index);
        let reported_as = r.map(|r| format!("{} {}", text(r, "ref"), text(r, "tool")));
        let held_as = h.map(|h| format!("{} {}", h.reference, h.tool));
        let what = match (r, h) {
            (Some(_), None) => Some("extra"),
            (None, Some(_)) => Some("missing"),
            (Some(r), Some(h)) if text(r, "ref") != h.reference => Some("ref"),
            (Some(r), Some(h)) if text(r, "tool") != h.tool => Some("tool"),
            (Some(r), Some(h))
                if r.get("arguments") != Some(&Value::Object(h.arguments.clone())) =>
            {
                Some("arguments")
            }
            _ => None,
        };
        if let Some(what) = what {
            out.push(Mismatch {
                index,
                reported: reported_as,
                held: held_as,
                what: what.into(),
            });
        }
    }
    out
}

/// What approving the newest report does to the effects: refused with the differences
/// when the report's `effects` and the gateway's log disagree, or when `chosen` names an
/// effect that is not held; otherwise the held effects not chosen are dropped.
pub fn plan_approval(
    order: &str,
    reported: &[Value],
    effects: &Effects,
    chosen: Option<&[String]>,
) -> Result<Option<EffectChange>, Refusal> {
    let mismatches = reconcile(reported, effects);
    if !mismatches.is_empty() {
        return Err(Refusal::EffectsDiffer {
            order: order.to_owned(),
            mismatches,
        });
    }
    let Some(chosen) = chosen else {
        return Ok(None);
    };
    for reference in chosen {
        if effects
            .get(reference)
            .is_none_or(|e| e.status != EffectStatus::Held)
        {
            return Err(Refusal::NoEffect {
                order: order.to_owned(),
                reference: reference.clone(),
            });
        }
    }
    let left_out: Vec<String> = effects
        .effects
        .iter()
        .filter(|e| e.status == EffectStatus::Held && !chosen.contains(&e.reference))
        .map(|e| e.reference.clone())
        .collect();
    Ok((!left_out.is_empty()).then(|| EffectChange::Dropped {
        order: order.to_owned(),
        references: left_out,
        reason: "left out of the approval".into(),
    }))
}

/// Whether a step of the order's lifecycle drops what is held: the work goes back to the
/// worker (rework) or the order ends without approval.
pub fn drops_on(action: OrderAction) -> bool {
    matches!(
        action,
        OrderAction::Rework | OrderAction::Decline | OrderAction::Cancel | OrderAction::Expire
    )
}

/// Drops every held effect of `order`, saying why; `None` when nothing is held.
pub fn plan_drop(order: &str, effects: &Effects, reason: &str) -> Option<EffectChange> {
    let references: Vec<String> = effects
        .effects
        .iter()
        .filter(|e| e.status == EffectStatus::Held)
        .map(|e| e.reference.clone())
        .collect();
    (!references.is_empty()).then(|| EffectChange::Dropped {
        order: order.to_owned(),
        references,
        reason: reason.to_owned(),
    })
}

/// What an approved order's effects need next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Run this held effect.
    Run(Effect),
    /// Every effect ran (or none was held).
    Done,
    /// The sequence stops at an effect that failed or is uncertain; later ones wait.
    Stopped(Effect),
}

/// The next step of running an approved order's effects, in the order they were held: a
/// failed or uncertain effect stops the sequence (it is never run again by itself).
pub fn next(effects: &Effects) -> Next {
    for effect in effects.live() {
        match effect.status {
            EffectStatus::Ran | EffectStatus::Dropped => {}
            EffectStatus::Held => return Next::Run(effect.clone()),
            EffectStatus::Failed | EffectStatus::Uncertain => return Next::Stopped(effect.clone()),
        }
    }
    Next::Done
}

/// Marks `reference` started, once: only a held effect of an approved order starts.
pub fn plan_start(
    order: &Order,
    effects: &Effects,
    reference: &str,
) -> Result<EffectChange, Refusal> {
    if order.status != OrderStatus::Approved {
        return Err(Refusal::EffectNotHeld {
            order: order.id.clone(),
            reference: reference.to_owned(),
            status: None,
        });
    }
    match effects.get(reference) {
        Some(e) if e.status == EffectStatus::Held => Ok(EffectChange::Started {
            order: order.id.clone(),
            reference: reference.to_owned(),
        }),
        found => Err(Refusal::EffectNotHeld {
            order: order.id.clone(),
            reference: reference.to_owned(),
            status: found.map(|e| e.status),
        }),
    }
}

/// Records how a started effect ended; `result` is the upstream's `CallToolResult`, or
/// `{"error": TEXT}` when it could not be called.
pub fn plan_finish(
    order: &str,
    effects: &Effects,
    reference: &str,
    ok: bool,
    result: Value,
) -> Result<EffectChange, Refusal> {
    match effects.get(reference) {
        Some(e) if e.status == EffectStatus::Uncertain => Ok(EffectChange::Finished {
            order: order.to_owned(),
            reference: reference.to_owned(),
            ok,
            result,
        }),
        found => Err(Refusal::EffectNotHeld {
            order: order.to_owned(),
            reference: reference.to_owned(),
            status: found.map(|e| e.status),
        }),
    }
}

/// `arguments` with each `{"$ref": REF, "pointer": P}` replaced by the value at `P` in the
/// result (`CallToolResult`, e.g. `/structuredContent/id`) of the earlier effect `REF`,
/// which must have run. The error says which reference did not resolve.
pub fn resolve(
    arguments: &Map<String, Value>,
    effects: &Effects,
) -> Result<Map<String, Value>, String> {
    let mut value = Value::Object(arguments.clone());
    for (target, pointer, path) in effect_references(&value) {
        let result = effects
            .get(&target)
            .filter(|e| e.status == EffectStatus::Ran)
            .and_then(|e| e.result.as_ref())
            .ok_or_else(|| format!("{path}: {target} has not run, so its result is unknown"))?;
        let found = result
            .pointer(&pointer)
            .cloned()
            .ok_or_else(|| format!("{path}: {target}'s result has nothing at {pointer:?}"))?;
        if let Some(slot) = value.pointer_mut(&path) {
            *slot = found;
        }
    }
    match value {
        Value::Object(resolved) => Ok(resolved),
        _ => unreachable!("an object stays an object"),
    }
}

/// Why a result counts as failed: its `error`, or the text of an `isError` result.
pub fn failure(result: &Value) -> String {
    if let Some(why) = result.get("error").and_then(Value::as_str) {
        return why.to_owned();
    }
    let text: Vec<&str> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|c| {
            c.iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if text.is_empty() {
        "the tool answered with an error".into()
    } else {
        text.join(" ")
    }
}

/// The number of bytes a result takes, as shown beside an effect.
pub fn size(result: &Value) -> usize {
    result.to_string().len()
}

/// `arguments` for display: values under a key that names a secret (`password`,
/// `token`, `secret`, `api_key`, `authorization`, `credential`) and strings shaped like a
/// credential are shown as `***`.
pub fn masked(arguments: &Map<String, Value>) -> Map<String, Value> {
    const NAMES: [&str; 7] = [
        "password",
        "passwd",
        "token",
        "secret",
        "api_key",
        "authorization",
        "credential",
    ];
    fn walk(v: &Value) -> Value {
        match v {
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| {
                        let key = k.to_ascii_lowercase().replace('-', "_");
                        let secret = NAMES.iter().any(|n| key.contains(n));
                        (k.clone(), if secret { Value::from("***") } else { walk(v) })
                    })
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(walk).collect()),
            Value::String(s) if !crate::awl::secrets::scan_text(s).is_empty() => Value::from("***"),
            other => other.clone(),
        }
    }
    match walk(&Value::Object(arguments.clone())) {
        Value::Object(o) => o,
        _ => unreachable!("an object stays an object"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn order(status: OrderStatus) -> Order {
        Order {
            id: "wo_1".into(),
            from: "planner".into(),
            to: "impl-1".into(),
            escalate_to: None,
            goal: "ship".into(),
            deadline: None,
            deadline_at: None,
            message: "m".into(),
            status,
            seq: 3,
            attempt: 0,
            log_seq: 1,
            created_at: 0,
            updated_at: 0,
            note: None,
            findings: Vec::new(),
        }
    }

    fn gate() -> Gate {
        Gate::of(
            json!({"tools": ["files/*"], "staged": ["files/append"], "budget": {"tool_calls": 3}})
                .as_object()
                .unwrap(),
        )
    }

    fn call(tool: &str, args: Value) -> Call {
        Call {
            tool: tool.into(),
            arguments: args.as_object().cloned().unwrap_or_default(),
            upstream: vec!["up".into()],
        }
    }

    /// Asks the gate and folds what it records, as the write path does.
    fn ask(effects: &mut Effects, tool: &str, args: Value) -> Decision {
        let (change, decision) = plan_call(
            &gate(),
            &order(OrderStatus::Working),
            effects,
            "impl-1",
            call(tool, args),
            0,
        )
        .unwrap();
        effects.apply(&change);
        decision
    }

    #[test]
    fn reads_are_forwarded_writes_held_and_the_rest_refused_until_the_budget_is_spent() {
        let mut e = Effects::default();
        assert_eq!(
            ask(&mut e, "files/read", json!({})),
            Decision::Forward {
                reference: "files/read@1".into()
            }
        );
        assert_eq!(
            ask(&mut e, "files/append", json!({"line": "a"})),
            Decision::Hold {
                reference: "files/append#1".into()
            }
        );
        assert!(matches!(
            ask(&mut e, "mail/send", json!({})),
            Decision::Refuse(CallRefused::NotAllowed { .. })
        ));
        assert_eq!(
            ask(&mut e, "files/append", json!({"line": "b"})),
            Decision::Hold {
                reference: "files/append#2".into()
            }
        );
        assert_eq!(e.calls, 3, "a refused call is not spent");
        assert!(matches!(
            ask(&mut e, "files/read", json!({})),
            Decision::Refuse(CallRefused::Budget {
                limit: 3,
                used: 3,
                ..
            })
        ));
        assert_eq!(e.awaiting(), 2);
    }

    #[test]
    fn only_the_worker_of_a_working_order_gets_a_gateway() {
        let e = Effects::default();
        let worker = plan_call(
            &gate(),
            &order(OrderStatus::Working),
            &e,
            "other",
            call("files/read", json!({})),
            0,
        );
        assert!(matches!(worker, Err(Refusal::NotTheWorker { .. })));
        let submitted = plan_call(
            &gate(),
            &order(OrderStatus::Submitted),
            &e,
            "impl-1",
            call("files/read", json!({})),
            0,
        );
        assert!(matches!(submitted, Err(Refusal::GatewayClosed { .. })));
    }

    #[test]
    fn a_sub_order_never_calls_what_its_parent_stages() {
        let parent = json!({"staged": ["files/append"]});
        let g = gate().under("wo_0", parent.as_object().unwrap());
        assert!(!g.lists("files/append"));
        let (_, d) = plan_call(
            &g,
            &order(OrderStatus::Working),
            &Effects::default(),
            "impl-1",
            call("files/append", json!({})),
            0,
        )
        .unwrap();
        assert!(matches!(
            d,
            Decision::Refuse(CallRefused::ParentStages { .. })
        ));
    }

    fn held_two() -> Effects {
        let mut e = Effects::default();
        ask(&mut e, "files/append", json!({"line": "a"}));
        ask(
            &mut e,
            "files/append",
            json!({"line": {"$ref": "files/append#1", "pointer": "/structuredContent/n"}}),
        );
        e
    }

    #[test]
    fn approval_is_refused_on_any_difference_with_what_was_held() {
        let e = held_two();
        let one =
            json!({"ref": "files/append#1", "tool": "files/append", "arguments": {"line": "a"}});
        let two = json!({"ref": "files/append#2", "tool": "files/append",
                         "arguments": {"line": {"$ref": "files/append#1", "pointer": "/structuredContent/n"}}});
        assert!(
            plan_approval("wo_1", &[one.clone(), two.clone()], &e, None)
                .unwrap()
                .is_none()
        );
        let what = |reported: &[Value]| -> Vec<String> {
            match plan_approval("wo_1", reported, &e, None) {
                Err(Refusal::EffectsDiffer { mismatches, .. }) => {
                    mismatches.into_iter().map(|m| m.what).collect()
                }
                other => panic!("expected a mismatch, got {other:?}"),
            }
        };
        assert_eq!(what(std::slice::from_ref(&one)), ["missing"]);
        assert_eq!(what(&[two.clone(), one.clone()]), ["ref", "ref"]);
        let mut changed = one.clone();
        changed["arguments"]["line"] = json!("z");
        assert_eq!(what(&[changed, two.clone()]), ["arguments"]);
        assert_eq!(what(&[one.clone(), two.clone(), one.clone()]), ["extra"]);
    }

    #[test]
    fn a_partial_approval_drops_the_rest_and_names_an_unknown_ref() {
        let e = held_two();
        let reported: Vec<Value> = e
            .effects
            .iter()
            .map(|x| json!({"ref": x.reference, "tool": x.tool, "arguments": x.arguments}))
            .collect();
        let chosen = vec!["files/append#2".to_owned()];
        match plan_approval("wo_1", &reported, &e, Some(&chosen)).unwrap() {
            Some(EffectChange::Dropped { references, .. }) => {
                assert_eq!(references, ["files/append#1"])
            }
            other => panic!("{other:?}"),
        }
        let unknown = vec!["files/append#9".to_owned()];
        assert!(matches!(
            plan_approval("wo_1", &reported, &e, Some(&unknown)),
            Err(Refusal::NoEffect { .. })
        ));
    }

    #[test]
    fn effects_run_once_in_order_and_stop_at_an_uncertain_one() {
        let mut e = held_two();
        let approved = order(OrderStatus::Approved);
        assert!(matches!(next(&e), Next::Run(x) if x.reference == "files/append#1"));
        e.apply(&plan_start(&approved, &e, "files/append#1").unwrap());
        assert!(
            plan_start(&approved, &e, "files/append#1").is_err(),
            "started twice"
        );
        assert!(matches!(next(&e), Next::Stopped(x) if x.status == EffectStatus::Uncertain));
        e.apply(
            &plan_finish(
                "wo_1",
                &e,
                "files/append#1",
                true,
                json!({"structuredContent": {"n": 7}}),
            )
            .unwrap(),
        );
        let Next::Run(second) = next(&e) else {
            panic!("the second runs next")
        };
        assert_eq!(
            resolve(&second.arguments, &e).unwrap(),
            *json!({"line": 7}).as_object().unwrap()
        );
        assert!(plan_start(&order(OrderStatus::Submitted), &e, "files/append#2").is_err());
    }

    #[test]
    fn a_ref_to_an_effect_that_did_not_run_does_not_resolve() {
        let e = held_two();
        let err = resolve(&e.effects[1].arguments, &e).unwrap_err();
        assert!(err.contains("files/append#1 has not run"), "{err}");
    }

    #[test]
    fn rework_drops_what_is_held_and_secrets_are_masked() {
        let e = held_two();
        assert!(drops_on(OrderAction::Rework) && !drops_on(OrderAction::Approve));
        assert!(
            matches!(plan_drop("wo_1", &e, "reworked"), Some(EffectChange::Dropped { references, .. }) if references.len() == 2)
        );
        let shown = masked(
            json!({"api_token": "abc", "body": "ok", "n": {"password": 1}})
                .as_object()
                .unwrap(),
        );
        assert_eq!(
            Value::Object(shown),
            json!({"api_token": "***", "body": "ok", "n": {"password": "***"}})
        );
    }

    #[test]
    fn a_call_is_held_to_the_payload_rules_before_it_is_recorded() {
        assert_eq!(
            check_call(&call("git/push", json!({"branch": "main"})), 1024),
            Ok(())
        );
        let big = call("git/push", json!({"blob": "x".repeat(2000)}));
        assert!(matches!(
            check_call(&big, 1024),
            Err(Refusal::Payload {
                field: Field::Arguments,
                error: crate::message::PayloadError::TooLarge { .. }
            })
        ));
        let mut deep = json!("leaf");
        for _ in 0..crate::json::MAX_DEPTH + 1 {
            deep = json!({ "a": deep });
        }
        let deep = call("git/push", deep);
        assert!(matches!(
            check_call(&deep, usize::MAX),
            Err(Refusal::Payload {
                field: Field::Arguments,
                ..
            })
        ));
        let nul = call("git/push", json!({"branch": "ma\u{0}in"}));
        assert!(matches!(
            check_call(&nul, 1024),
            Err(Refusal::Payload {
                field: Field::Arguments,
                ..
            })
        ));
        let long = call(&format!("git/{}", "p".repeat(MAX_TOOL_NAME)), json!({}));
        assert!(matches!(
            check_call(&long, 1024),
            Err(Refusal::TooLong {
                field: Field::Tool,
                ..
            })
        ));
        let named = call("git/pu\u{0}sh", json!({}));
        assert!(matches!(
            check_call(&named, 1024),
            Err(Refusal::Payload {
                field: Field::Tool,
                ..
            })
        ));
    }
}
