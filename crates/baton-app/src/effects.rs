//! Staged effects: the gateway's questions (may it serve this order, what to do
//! with a call) and "approve means ship" — approval, then each held call run once, in
//! order, through the upstream server the gateway used.

use async_trait::async_trait;
use baton_core::effect::{self, Call, Decision, Effect, Effects, Gate, Next};
use baton_core::order::{self, Order, OrderStatus};
use baton_core::{Passname, Payload, Refusal};
use baton_store::OrderWritten;
use serde_json::{Map, Value, json};

use crate::{App, Result};

/// Calls a tool on an upstream MCP server: what approval runs a held effect through.
#[async_trait]
pub trait ToolRunner: Send + Sync {
    /// Calls `tool` (the upstream's own name, without `SERVER/`) with `arguments` on the
    /// server that `upstream` (a command line) starts. `Ok` holds the `CallToolResult` as
    /// JSON (it may say `"isError": true`); `Err` says why no answer came.
    async fn call(
        &self,
        upstream: &[String],
        tool: &str,
        arguments: Map<String, Value>,
    ) -> std::result::Result<Value, String>;
}

/// What an approval did: the step it recorded (none when the order was approved already
/// and this run only went on with its effects), and the effects after it.
#[derive(Debug, Clone)]
pub struct Approval {
    /// The order after the approval.
    pub order: Order,
    pub written: Option<OrderWritten>,
    pub effects: Effects,
    /// The effect the sequence stopped at (failed, or uncertain), if it did.
    pub stopped: Option<Effect>,
}

impl App {
    /// The gate of order `id` for a gateway acting as `me`: refused (with why) unless
    /// `me` is its worker and it is accepted or working.
    pub async fn gateway_gate(&self, me: &Passname, id: &str) -> Result<Gate> {
        let order = self.load_order(id).await?;
        if let Err(refusal) = effect::may_work(&order, me.as_str(), self.now()) {
            return self.refuse(me, refusal).await;
        }
        let document = self.order_document(&order).await?;
        let gate = Gate::of(&document);
        // A sub-order's gateway refuses what its parent stages, whatever slipped past C5.
        let parent = document.get("parent_id").and_then(Value::as_str);
        Ok(match parent {
            Some(parent) => match self.store().order(parent).await? {
                Some(p) => gate.under(parent, &self.order_document(&p).await?),
                None => gate,
            },
            None => gate,
        })
    }

    /// What the gateway does with `call` on order `id`; recorded before it is answered.
    /// A call whose name or arguments break the payload rules is refused before anything
    /// about it is stored.
    pub async fn gateway_call(
        &self,
        me: &Passname,
        id: &str,
        gate: &Gate,
        call: Call,
    ) -> Result<Decision> {
        effect::check_call(&call, self.settings().payload_cap)?;
        self.store().gateway_call(me, id, gate, call).await
    }

    /// Approves order `id` as `me` and runs what it holds (with `chosen`, only those), once
    /// and in order, through `runner`; a failed or uncertain effect stops the sequence.
    /// On an order approved already, goes on with the effects that never started.
    /// Without a runner, an order holding effects is refused before anything changes.
    pub async fn approve(
        &self,
        me: &Passname,
        id: &str,
        expect_seq: Option<i64>,
        chosen: Option<&[String]>,
        runner: Option<&dyn ToolRunner>,
    ) -> Result<Approval> {
        let order = self.load_order(id).await?;
        let id = &order.id.clone();
        let held = self.store().effects(id).await?;
        let written = if order.status == OrderStatus::Approved && runner.is_some() {
            if !order.may(me.as_str(), order::OrderAction::Approve) {
                let refusal = Refusal::OrderRole {
                    actor: me.to_string(),
                    action: order::OrderAction::Approve,
                    order: order.id.clone(),
                    may: order.who_may(order::OrderAction::Approve),
                };
                return self.refuse(me, refusal).await;
            }
            None
        } else {
            let to_run = chosen.map_or(held.awaiting(), <[String]>::len);
            if runner.is_none() && to_run > 0 {
                return Err(Refusal::EffectsNeedRunner {
                    order: id.to_owned(),
                    count: to_run,
                }
                .into());
            }
            let expected = expect_seq.unwrap_or(order.seq);
            Some(self.store().approve(me, id, expected, chosen).await?)
        };
        let mut effects = self.store().effects(id).await?;
        let mut stopped = None;
        if let Some(runner) = runner {
            loop {
                match effect::next(&effects) {
                    Next::Done => break,
                    Next::Stopped(e) => {
                        stopped = Some(e);
                        break;
                    }
                    Next::Run(e) => effects = self.run_effect(me, id, &e, runner).await?,
                }
            }
        }
        let order = match &written {
            Some(w) => w.order.clone(),
            None => order,
        };
        Ok(Approval {
            order,
            written,
            effects,
            stopped,
        })
    }

    /// Runs one approved effect: recorded as started first (so a crash leaves it
    /// uncertain, never run twice), its `$ref`s filled from earlier results, then its end.
    async fn run_effect(
        &self,
        me: &Passname,
        id: &str,
        e: &Effect,
        runner: &dyn ToolRunner,
    ) -> Result<Effects> {
        let effects = self.store().start_effect(me, id, &e.reference).await?;
        let tool = e.tool.split_once('/').map_or(e.tool.as_str(), |(_, t)| t);
        let (ok, result) = match effect::resolve(&e.arguments, &effects) {
            Err(why) => (false, json!({ "error": why })),
            Ok(arguments) => match runner.call(&e.upstream, tool, arguments).await {
                // An upstream's answer is untrusted input like any other: held to a
                // payload's rules (size, depth, no U+0000) before it is stored. (The
                // gateway's upstream is held to them on its text too, numbers included.)
                Ok(result) => {
                    let fitted = Payload::from_value(result.clone(), self.settings.payload_cap)
                        .map_err(|e| e.to_string())
                        .and_then(|payload| {
                            baton_core::json::check_text(
                                payload.text(),
                                baton_core::json::MAX_DEPTH,
                            )
                            .map_err(|e| e.to_string())
                        });
                    match fitted {
                        Ok(()) => {
                            let failed =
                                result.get("isError").and_then(Value::as_bool) == Some(true);
                            (!failed, result)
                        }
                        Err(refused) => (
                            false,
                            json!({ "error": format!("the upstream's answer is refused: {refused}") }),
                        ),
                    }
                }
                Err(why) => (false, json!({ "error": why })),
            },
        };
        self.store()
            .finish_effect(me, id, &e.reference, ok, result)
            .await
    }
}
