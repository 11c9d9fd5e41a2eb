//! The tool server: one method per tool, each a thin call into the [`Store`] (or the
//! shared reads of `baton_store::recall` and `baton_store::receipt`) as the participant
//! fixed at startup. No tool takes the actor as an argument. The resume packet is also a
//! prompt (`resume`) and a resource (`baton://resume`), so a client can load it at start.
//!
//! Every tool returns `Result<Json<T>, String>`: `Ok` becomes structured content (with its
//! text copy), described by the output schema rmcp derives from `T`; `Err` becomes an
//! `isError` result whose text says what to do next. Unknown tools and malformed requests
//! are rmcp's to answer, as protocol errors.

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::awl::{
    DocumentKind, Environment, Finding, FindingKind, has_invalid, order_findings, report_findings,
};
use baton_core::message::reply_recipients;
use baton_core::order::{Order, OrderAction, OrderRequest, allowed};
use baton_core::packet::DEFAULT_MAX_BYTES;
use baton_core::packet::floor_char_boundary;
use baton_core::state::StateOp;
use baton_core::{Draft, Event, MessageType, Millis, Passname, Payload, PayloadError, Topic};
use baton_store::recall::{self, SubjectError};
use baton_store::receipt::{self, POLL, Waited};
use baton_store::{Fetched, SearchQuery, Store, StoreError, Verb};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    ListResourcesResult, PaginatedRequestParams, Prompt, PromptArgument, PromptMessage,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, Role, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Json, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use serde_json::{Map, Value};

use crate::refusal::{explain, explain_order, explain_state, unknown_participant};
use crate::wire::*;
use crate::{Project, Settings};

/// The resume packet as a resource.
pub const RESUME_URI: &str = "baton://resume";

#[derive(Clone)]
pub struct BatonTools {
    store: Arc<dyn Store>,
    project: Project,
    /// The project as the resume packet names it.
    place: String,
    me: Passname,
    settings: Settings,
    instructions: String,
    tool_router: ToolRouter<Self>,
}

impl BatonTools {
    pub fn new(store: Arc<dyn Store>, project: Project, me: Passname, settings: Settings) -> Self {
        let instructions = format!(
            "Baton: the durable inbox and memory of this project. You act as `{me}`. \
             Start with `resume` (also the `resume` prompt and the {RESUME_URI} resource): \
             what you owe, the focus, constraints, decisions and open alerts. \
             `inbox` is what you owe, `outbox` what you wait for. `show` an id to read it, \
             then `ack` an info or message, or `complete` / `hand_back` a request. \
             In message rows `status` is yours and `request_status` the sender's end. \
             A `type` defaults to message; a `topic` is a lowercase slug; an \
             `idempotency_key` makes repeats return the first id; a `note` or `reason` on \
             `complete` or `hand_back` is posted to the sender, and a step's `end` says \
             whether it moved your delivery (`recipient`) or your request (`sender`). \
             Archived messages stay in the record. `search` takes RFC 3339 times or ages \
             (2h) and a page's `next` as `cursor`. Paths are from the project root; \
             `receipt_write` hashes a path's file. \
             Record what the next session must know with `decide`, `constrain` (what was \
             tried, the result) and `note` (stale once its subject changes), and where a \
             step's output landed with `receipt_write`. \
             Work Orders: `order` takes a step as you, one of the order's `allowed` \
             actions: `create` (`document`: the Work Order, from you), then its worker may \
             `accept`, `decline`, `start` and `report` (`document`: the Work Report), and its \
             sender may `answer` a blocked one (`text`), `approve`, `rework` (`reason`) or \
             `cancel`; `expect_seq` (default: its seq now) refuses a step on an order that \
             moved on. `order_show` reads an order; with `since` (a seq) it waits for newer \
             steps and lists only those."
        );
        Self {
            store,
            place: project.root.display().to_string(),
            project,
            me,
            settings,
            instructions,
            tool_router: Self::router(),
        }
    }

    /// The tools, their schemas compacted (see [`compact`]).
    pub fn router() -> ToolRouter<Self> {
        let mut router = Self::tool_router();
        for route in router.map.values_mut() {
            let tool = &mut route.attr;
            tool.input_schema = Arc::new(compact(&tool.input_schema, Side::Input));
            tool.output_schema = tool
                .output_schema
                .as_ref()
                .map(|s| Arc::new(compact(s, Side::Output)));
        }
        router
    }

    /// The resume packet, as `baton resume` prints it.
    async fn packet(&self, max_bytes: usize) -> baton_store::Result<recall::Resume> {
        recall::resume(
            self.store.as_ref(),
            self.project.clock.as_ref(),
            &self.me,
            &self.place,
            max_bytes,
            now(),
        )
        .await
    }

    /// Records one state change as this participant.
    async fn record(&self, op: StateOp) -> Result<Json<Recorded>, String> {
        let events = self
            .store
            .change_state(self.me.as_str(), &[op])
            .await
            .map_err(explain_state)?;
        let event = events
            .last()
            .ok_or("nothing was recorded: call the tool again")?;
        Ok(Json(Recorded {
            id: event.change.subject().to_owned(),
            generation: event.seq,
        }))
    }

    fn rows(&self, items: &[baton_store::Envelope]) -> Vec<Row> {
        items.iter().map(|e| Row::new(e, &self.me)).collect()
    }

    async fn step(
        &self,
        id: &str,
        verb: Verb,
        note: Option<&str>,
    ) -> Result<Json<Stepped>, String> {
        let stepped = self
            .store
            .step(&self.me, id, verb, note)
            .await
            .map_err(|e| explain(id, e))?;
        Ok(Json(stepped.into()))
    }

    /// Stores a draft, naming the registered participants when a recipient is unknown.
    async fn deliver(&self, draft: Draft) -> Result<Json<Sent>, String> {
        let reply_to = draft.reply_to.clone().unwrap_or_default();
        let window = i64::try_from(self.settings.duplicate_window.as_millis()).unwrap_or(i64::MAX);
        match self.store.send(&self.me, draft, window).await {
            Ok(sent) => Ok(Json(Sent {
                id: sent.id,
                duplicate: sent.duplicate,
            })),
            Err(StoreError::UnknownParticipant(name)) => {
                let mut registered: Vec<String> = match self.store.participants().await {
                    Ok(all) => all.into_iter().map(|p| p.name.to_string()).collect(),
                    Err(_) => Vec::new(),
                };
                registered.sort();
                Err(unknown_participant(&name, &registered))
            }
            Err(e) => Err(explain(&reply_to, e)),
        }
    }

    fn payload(
        &self,
        body: Option<String>,
        payload: Option<Map<String, Value>>,
    ) -> Result<Payload, String> {
        let cap = self.settings.payload_cap;
        let (field, parsed) = match (body, payload) {
            (Some(text), None) => ("body", Payload::body(&text, cap)),
            (None, Some(object)) => ("payload", Payload::from_value(Value::Object(object), cap)),
            (Some(_), Some(_)) => return Err("pass `body` or `payload`, not both".into()),
            (None, None) => {
                return Err("pass `body` (text) or `payload` (a JSON object)".into());
            }
        };
        parsed.map_err(|e| match e {
            PayloadError::TooLarge { .. } => {
                format!("`{field}`: {e} (messages.payload_cap in .baton/config.toml)")
            }
            _ => format!("`{field}`: {e}"),
        })
    }

    // ---- orders ----

    async fn load_order(&self, id: &str) -> Result<Order, String> {
        self.store
            .order(id)
            .await
            .map_err(|e| explain_order(id, e))?
            .ok_or_else(|| format!("no order {id:?} in this project: check `id`"))
    }

    /// An order as a step leaves it.
    fn stepped(&self, order: &Order) -> OrderStepped {
        let status = order.status_at(now());
        OrderStepped {
            id: order.id.clone(),
            status: status.as_str().to_owned(),
            seq: order.seq,
            allowed: allowed(status).into_iter().map(str::to_owned).collect(),
            note: order.note.clone(),
        }
    }

    /// An order with `events` as its steps.
    fn view(&self, order: &Order, events: &[Event]) -> OrderView {
        OrderView {
            order: self.stepped(order),
            steps: events.iter().filter_map(OrderStep::new).collect(),
            document: None,
            report: newest_report(events),
        }
    }

    /// A document's findings under the project's contract mode, checked off the thread
    /// that serves the other calls (the contract rules may ask git).
    async fn check(
        &self,
        doc: Value,
        rules: impl FnOnce(&Value, &dyn Environment) -> Vec<Finding> + Send + 'static,
    ) -> Result<(Value, Vec<Finding>), String> {
        let env = Arc::clone(&self.project.environment);
        tokio::task::spawn_blocking(move || {
            let findings = rules(&doc, env.as_ref());
            (doc, findings)
        })
        .await
        .map_err(|e| format!("checking `document` failed ({e}): call the tool again"))
    }

    /// A checked document as stored: within the payload cap.
    fn capped(&self, doc: Value) -> Result<Payload, String> {
        Payload::from_value(doc, self.settings.payload_cap)
            .map_err(|e| format!("`document`: {e} (messages.payload_cap in .baton/config.toml)"))
    }

    async fn create_order(&self, doc: Map<String, Value>) -> Result<Json<OrderStepped>, String> {
        let doc = Value::Object(doc);
        if DocumentKind::of(&doc) == DocumentKind::Report {
            return Err("`document` is a Work Report: `create` takes a Work Order \
                        (a report goes with action `report`)"
                .into());
        }
        let mode = self.settings.contract;
        let (doc, findings) = self
            .check(doc, move |d, env| order_findings(d, None, env, mode))
            .await?;
        if has_invalid(&findings) {
            return Err(refused("a Work Order", &findings));
        }
        let topic = topic("work-order")?;
        let written = self
            .store
            .create_order(&self.me, topic, self.capped(doc)?)
            .await
            .map_err(|e| explain_order("", e))?;
        Ok(Json(self.stepped(&written.order)))
    }

    /// A report on `order` as a step request, checked as `baton order report` checks it:
    /// whose order it is first, then the document against the stored order.
    async fn report(
        &self,
        order: &Order,
        doc: Option<Map<String, Value>>,
    ) -> Result<OrderRequest, String> {
        if !order.may(self.me.as_str(), OrderAction::ReportDone) {
            return Err(format!(
                "{} may not report on order {}: only its worker ({}) may; nothing was stored",
                self.me, order.id, order.to
            ));
        }
        let doc = doc.ok_or("`document`: `report` needs the Work Report (a JSON object)")?;
        let order_doc = self
            .store
            .fetch(None, &order.message)
            .await
            .map_err(|e| explain_order(&order.id, e))?
            .payload;
        let mode = self.settings.contract;
        let (doc, findings) = self
            .check(Value::Object(doc), move |d, env| {
                report_findings(d, &Value::Object(order_doc), &[], env, mode)
            })
            .await?;
        if has_invalid(&findings) {
            return Err(refused("a Work Report on this order", &findings));
        }
        // The report is stored in the step's event: the payload cap bounds it too.
        let report = Value::Object(self.capped(doc)?.object().clone());
        Ok(OrderRequest::Report { report, findings })
    }
}

/// The newest report among `events`.
fn newest_report(events: &[Event]) -> Option<Map<String, Value>> {
    use baton_core::Change;
    use baton_core::order::OrderChange;
    events.iter().rev().find_map(|e| match &e.change {
        Change::Order(OrderChange::Stepped(s)) => match &s.report {
            Some(Value::Object(report)) => Some(report.clone()),
            _ => None,
        },
        _ => None,
    })
}

/// A document refused for its `invalid` findings, each at its path in `document`.
fn refused(what: &str, findings: &[Finding]) -> String {
    let lines: Vec<String> = findings
        .iter()
        .filter(|f| f.kind == FindingKind::Invalid)
        .map(|f| {
            let at = match f.path.as_str() {
                "/" | "" => "`document`".to_owned(),
                path => format!("`document{path}`"),
            };
            format!("- {} at {at}: {}", f.rule, f.message)
        })
        .collect();
    format!(
        "`document` is refused as {what}; nothing was stored. Fix these and call `order` again:\n{}",
        lines.join("\n")
    )
}

fn recipients(to: &[String]) -> Result<Vec<Passname>, String> {
    to.iter()
        .map(|n| Passname::new(n.trim()).map_err(|e| format!("`to`: {e}")))
        .collect()
}

fn topic(t: &str) -> Result<Topic, String> {
    Topic::new(t).map_err(|e| format!("`topic`: {e}"))
}

fn now() -> Millis {
    jiff::Timestamp::now().as_millisecond()
}

/// An RFC 3339 time, or an age such as `2h` meaning that long before `now`.
fn time(field: &str, text: &str, now: Millis) -> Result<Millis, String> {
    if let Ok(ts) = text.parse::<jiff::Timestamp>() {
        return Ok(ts.as_millisecond());
    }
    text.parse::<jiff::SignedDuration>()
        .ok()
        .filter(|d| !d.is_negative())
        .and_then(|d| i64::try_from(d.as_millis()).ok())
        .map(|ago| now.saturating_sub(ago))
        .ok_or_else(|| {
            format!(
                "`{field}`: {text:?} is neither an RFC 3339 time (2026-11-29T10:00:00Z) nor an age (2h, 3d)"
            )
        })
}

fn shown(fetched: Fetched, me: &Passname, max_bytes: usize) -> Shown {
    let message = Row::new(&fetched.envelope, me);
    let text = Value::Object(fetched.payload.clone()).to_string();
    if text.len() <= max_bytes {
        return Shown {
            message,
            payload: Some(fetched.payload),
            truncated: None,
        };
    }
    let cut = floor_char_boundary(&text, max_bytes);
    Shown {
        message,
        payload: None,
        truncated: Some(Cut {
            shown_bytes: cut,
            total_bytes: text.len(),
            text: text[..cut].to_owned(),
        }),
    }
}

#[tool_router]
impl BatonTools {
    #[tool(
        description = "Messages you owe, oldest first.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn inbox(
        &self,
        Parameters(input): Parameters<InboxInput>,
    ) -> Result<Json<Messages>, String> {
        let input = input?;
        let items = self
            .store
            .inbox(&self.me, input.all)
            .await
            .map_err(|e| explain("", e))?;
        Ok(Json(Messages {
            items: self.rows(&items),
        }))
    }

    #[tool(
        description = "Your open requests, each recipient's status.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn outbox(
        &self,
        Parameters(input): Parameters<OutboxInput>,
    ) -> Result<Json<Messages>, String> {
        let input = input?;
        let items = self
            .store
            .outbox(&self.me, input.all)
            .await
            .map_err(|e| explain("", e))?;
        Ok(Json(Messages {
            items: self.rows(&items),
        }))
    }

    #[tool(
        description = "Read a message; marks it delivered.",
        annotations(
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn show(&self, Parameters(input): Parameters<ShowInput>) -> Result<Json<Shown>, String> {
        let input = input?;
        let fetched = self
            .store
            .fetch(Some(&self.me), &input.id)
            .await
            .map_err(|e| explain(&input.id, e))?;
        let max = input.max_bytes.unwrap_or(DEFAULT_SHOW_BYTES);
        Ok(Json(shown(fetched, &self.me, max)))
    }

    #[tool(
        description = "Send a request (moves work), info or message.",
        annotations(destructive_hint = false, open_world_hint = false)
    )]
    async fn send(&self, Parameters(input): Parameters<SendInput>) -> Result<Json<Sent>, String> {
        let input = input?;
        if input.to.is_empty() {
            return Err("`to`: name at least one recipient".into());
        }
        let draft = Draft {
            to: recipients(&input.to)?,
            kind: input.kind.unwrap_or(MessageType::Message),
            topic: topic(&input.topic)?,
            reply_to: None,
            payload: self.payload(input.body, input.payload)?,
            idempotency_key: input.idempotency_key,
        };
        self.deliver(draft).await
    }

    #[tool(
        description = "Reply in a message's thread.",
        annotations(destructive_hint = false, open_world_hint = false)
    )]
    async fn reply(&self, Parameters(input): Parameters<ReplyInput>) -> Result<Json<Sent>, String> {
        let input = input?;
        // Read without fetching: replying is not reading the parent.
        let parent = self
            .store
            .fetch(None, &input.id)
            .await
            .map_err(|e| explain(&input.id, e))?
            .envelope;
        let to = match &input.to {
            Some(names) if !names.is_empty() => recipients(names)?,
            _ => {
                let parent_to: Vec<Passname> = parent.to.iter().map(|r| r.name.clone()).collect();
                reply_recipients(&parent.from, &parent_to, &self.me)
            }
        };
        let draft = Draft {
            to,
            kind: input.kind.unwrap_or(MessageType::Message),
            topic: match &input.topic {
                Some(t) => topic(t)?,
                None => parent.topic.clone(),
            },
            reply_to: Some(input.id),
            payload: self.payload(input.body, input.payload)?,
            idempotency_key: input.idempotency_key,
        };
        self.deliver(draft).await
    }

    #[tool(
        description = "Acknowledge an info or message you read.",
        annotations(
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn ack(&self, Parameters(input): Parameters<IdInput>) -> Result<Json<Stepped>, String> {
        let input = input?;
        self.step(&input.id, Verb::Ack, None).await
    }

    #[tool(
        description = "Complete a request (as recipient or sender).",
        annotations(
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn complete(
        &self,
        Parameters(input): Parameters<CompleteInput>,
    ) -> Result<Json<Stepped>, String> {
        let input = input?;
        self.step(&input.id, Verb::Complete, input.note.as_deref())
            .await
    }

    #[tool(
        description = "Hand a request back: you cannot proceed.",
        annotations(
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn hand_back(
        &self,
        Parameters(input): Parameters<HandBackInput>,
    ) -> Result<Json<Stepped>, String> {
        let input = input?;
        self.step(&input.id, Verb::HandBack, Some(&input.reason))
            .await
    }

    #[tool(
        description = "Archive a finished message.",
        annotations(
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn archive(
        &self,
        Parameters(input): Parameters<IdInput>,
    ) -> Result<Json<Stepped>, String> {
        let input = input?;
        self.step(&input.id, Verb::Archive, None).await
    }

    #[tool(
        description = "Search messages, newest first, by page.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn search(
        &self,
        Parameters(input): Parameters<SearchInput>,
    ) -> Result<Json<Page>, String> {
        let input = input?;
        let limit = input.limit.unwrap_or(50);
        if !(1..=100).contains(&limit) {
            return Err(format!("`limit`: {limit} is out of range: use 1 to 100"));
        }
        let now = now();
        let query = SearchQuery {
            topic: input.topic,
            kind: input.kind,
            from: input.from,
            to: input.to,
            since: input.since.map(|t| time("since", &t, now)).transpose()?,
            until: input.until.map(|t| time("until", &t, now)).transpose()?,
            status: input.status,
            text: input.text,
            limit,
            cursor: input.cursor.filter(|c| !c.is_empty()),
        };
        let page = self
            .store
            .search(Some(&self.me), &query)
            .await
            .map_err(|e| explain("", e))?;
        Ok(Json(Page {
            items: self.rows(&page.items),
            next: page.next,
        }))
    }

    #[tool(
        description = "A message's whole thread, depth-first.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn thread(
        &self,
        Parameters(input): Parameters<IdInput>,
    ) -> Result<Json<Messages>, String> {
        let input = input?;
        let items = self
            .store
            .thread(&input.id)
            .await
            .map_err(|e| explain(&input.id, e))?;
        Ok(Json(Messages {
            items: self.rows(&items),
        }))
    }

    #[tool(
        description = "Start here: what you owe and the project's memory.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn resume(
        &self,
        Parameters(input): Parameters<ResumeInput>,
    ) -> Result<Json<Resumed>, String> {
        let input = input?;
        let r = self
            .packet(input.max_bytes.unwrap_or(DEFAULT_MAX_BYTES))
            .await
            .map_err(|e| explain("", e))?;
        Ok(Json(Resumed {
            generation: r.generation,
            bytes: r.packet.text.len(),
            text: r.packet.text,
        }))
    }

    #[tool(
        description = "Set the project's focus: what matters now.",
        annotations(
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn focus(
        &self,
        Parameters(input): Parameters<FocusInput>,
    ) -> Result<Json<Recorded>, String> {
        let input = input?;
        self.record(StateOp::Focus { text: input.text }).await
    }

    #[tool(
        description = "Record a decision D-N (it may supersede one).",
        annotations(destructive_hint = false, open_world_hint = false)
    )]
    async fn decide(
        &self,
        Parameters(input): Parameters<DecideInput>,
    ) -> Result<Json<Recorded>, String> {
        let input = input?;
        self.record(StateOp::Decide {
            text: input.text,
            why: input.why,
            supersedes: input.supersedes.map(|d| d.trim().to_owned()),
        })
        .await
    }

    #[tool(
        description = "Record a constraint C-N.",
        annotations(destructive_hint = false, open_world_hint = false)
    )]
    async fn constrain(
        &self,
        Parameters(input): Parameters<ConstrainInput>,
    ) -> Result<Json<Recorded>, String> {
        let input = input?;
        self.record(StateOp::Constrain {
            text: input.text,
            tried: input.tried,
            result: input.result,
        })
        .await
    }

    #[tool(
        description = "Note N-N on a message, order or path.",
        annotations(destructive_hint = false, open_world_hint = false)
    )]
    async fn note(
        &self,
        Parameters(input): Parameters<NoteInput>,
    ) -> Result<Json<Recorded>, String> {
        let input = input?;
        let root = &self.project.root;
        let subject = recall::note_subject(self.store.as_ref(), root, root, &input.subject)
            .await
            .map_err(|e| match e {
                SubjectError::Store(e) => explain("", e),
                other => format!(
                    "`subject`: {:?} {other}; give a message or order id, or a path from the project root",
                    input.subject
                ),
            })?;
        self.record(StateOp::Note {
            text: input.text,
            subject,
        })
        .await
    }

    #[tool(
        description = "Record where a step's output landed.",
        annotations(
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn receipt_write(
        &self,
        Parameters(input): Parameters<ReceiptWriteInput>,
    ) -> Result<Json<Receipt>, String> {
        let input = input?;
        let artifact = input.artifact.clone();
        let root = self.project.root.clone();
        // Hashing reads the whole file: off the thread that serves the other calls.
        let record = tokio::task::spawn_blocking(move || {
            receipt::record(&root, &root, input.step, input.artifact, input.run)
        })
        .await
        .map_err(|e| format!("hashing `artifact` failed ({e}): call the tool again"))?
        .map_err(|e| {
            format!(
                "`artifact`: {artifact:?}: {e}; give a path from the project root after the output exists, or a URI"
            )
        })?;
        let events = self
            .store
            .change_state(self.me.as_str(), &[StateOp::Receipt(record.clone())])
            .await
            .map_err(explain_state)?;
        let written = events
            .last()
            .ok_or("nothing was recorded: call the tool again")?;
        Ok(Json(Receipt::new(
            record,
            written.at,
            written.actor.clone(),
        )))
    }

    #[tool(
        description = "Wait for a step's receipt; a miss raises one alert.",
        annotations(
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn receipt_wait(
        &self,
        Parameters(input): Parameters<ReceiptWaitInput>,
    ) -> Result<Json<Receipt>, String> {
        let input = input?;
        let step = input.step.trim();
        if step.is_empty() {
            return Err("`step` must not be empty".into());
        }
        let seconds = input.timeout_seconds.unwrap_or(DEFAULT_WAIT_SECONDS);
        if !(1..=MAX_WAIT_SECONDS).contains(&seconds) {
            return Err(format!(
                "`timeout_seconds`: {seconds} is out of range: use 1 to {MAX_WAIT_SECONDS}"
            ));
        }
        let timeout = Duration::from_secs(seconds.into());
        match receipt::wait(self.store.as_ref(), self.me.as_str(), step, timeout)
            .await
            .map_err(explain_state)?
        {
            Waited::Arrived(r) => Ok(Json(r.into())),
            Waited::Missed { alert } => Err(format!(
                "{alert}; alert `receipt-missing:{step}` is open (raised once, however often a wait misses). \
                 Check that the step ran and called `receipt_write`, then call `receipt_wait` again"
            )),
        }
    }

    #[tool(
        description = "Take a Work Order step, as you.",
        annotations(destructive_hint = false, open_world_hint = false)
    )]
    async fn order(
        &self,
        Parameters(input): Parameters<OrderInput>,
    ) -> Result<Json<OrderStepped>, String> {
        use OrderVerb as V;
        let input = input?;
        let verb = input.action;
        let stray = [
            ("id", input.id.is_some() && verb == V::Create),
            (
                "expect_seq",
                input.expect_seq.is_some() && verb == V::Create,
            ),
            (
                "document",
                input.document.is_some() && !matches!(verb, V::Create | V::Report),
            ),
            ("text", input.text.is_some() && verb != V::Answer),
            (
                "reason",
                input.reason.is_some() && !matches!(verb, V::Decline | V::Rework | V::Cancel),
            ),
        ];
        if let Some((name, _)) = stray.iter().find(|(_, stray)| *stray) {
            return Err(format!(
                "`{name}` is not for action `{}`: leave it out",
                verb.as_str()
            ));
        }
        if verb == V::Create {
            let doc = input
                .document
                .ok_or("`document`: `create` needs the Work Order (a JSON object)")?;
            return self.create_order(doc).await;
        }
        let id = input
            .id
            .ok_or_else(|| format!("`id`: `{}` needs the order's id", verb.as_str()))?;
        let order = self.load_order(&id).await?;
        let request = match verb {
            V::Accept => OrderRequest::Accept,
            V::Decline => OrderRequest::Decline {
                reason: input.reason,
            },
            V::Start => OrderRequest::Start,
            V::Report => self.report(&order, input.document).await?,
            V::Answer => OrderRequest::Answer {
                text: input.text.ok_or("`text`: `answer` needs the answer")?,
            },
            V::Approve => OrderRequest::Approve,
            V::Rework => OrderRequest::Rework {
                reason: input
                    .reason
                    .ok_or("`reason`: `rework` needs what the worker should change")?,
            },
            V::Cancel => OrderRequest::Cancel {
                reason: input.reason,
            },
            // Offered above: an order is created from its document, never from an id.
            V::Create => return Err("`id` is not for action `create`: leave it out".into()),
        };
        let expected = input.expect_seq.unwrap_or(order.seq);
        let written = self
            .store
            .order_step(&self.me, &id, expected, request)
            .await
            .map_err(|e| explain_order(&id, e))?;
        Ok(Json(self.stepped(&written.order)))
    }

    #[tool(
        description = "A Work Order and its steps; or wait for steps after since.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn order_show(
        &self,
        Parameters(input): Parameters<OrderShowInput>,
    ) -> Result<Json<OrderView>, String> {
        let input = input?;
        let id = input.id;
        let order = self.load_order(&id).await?;
        let Some(since) = input.since else {
            if input.timeout_seconds.is_some() {
                return Err("`timeout_seconds` is for waiting: give `since` too".into());
            }
            let events = self
                .store
                .order_events_since(&id, 0)
                .await
                .map_err(|e| explain_order(&id, e))?;
            let document = self
                .store
                .fetch(None, &order.message)
                .await
                .map_err(|e| explain_order(&id, e))?
                .payload;
            let mut view = self.view(&order, &events);
            view.document = Some(document);
            return Ok(Json(view));
        };
        let seconds = input.timeout_seconds.unwrap_or(DEFAULT_WAIT_SECONDS);
        if !(1..=MAX_WAIT_SECONDS).contains(&seconds) {
            return Err(format!(
                "`timeout_seconds`: {seconds} is out of range: use 1 to {MAX_WAIT_SECONDS}"
            ));
        }
        let deadline = Instant::now() + Duration::from_secs(seconds.into());
        // As `baton order wait`: read the order's events only when the store moved.
        let mut seen = -1;
        loop {
            let generation = self
                .store
                .generation()
                .await
                .map_err(|e| explain_order(&id, e))?;
            if generation != seen {
                seen = generation;
                let events = self
                    .store
                    .order_events_since(&id, since)
                    .await
                    .map_err(|e| explain_order(&id, e))?;
                if !events.is_empty() {
                    let order = self.load_order(&id).await?;
                    return Ok(Json(self.view(&order, &events)));
                }
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            tokio::time::sleep(POLL.min(deadline - now)).await;
        }
        Err(format!(
            "order {id} has no step after seq {since} within {seconds}s (it is at seq {}): \
             call `order_show` again",
            order.seq
        ))
    }
}

/// Why the resume packet could not be read, as a protocol error (prompts and resources
/// have no `isError` result).
fn unreadable(e: StoreError) -> ErrorData {
    ErrorData::internal_error(format!("the resume packet could not be read: {e}"), None)
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for BatonTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_prompts()
                .enable_resources()
                .enable_tools()
                .build(),
        )
        .with_server_info(Implementation::new("baton", env!("CARGO_PKG_VERSION")))
        .with_instructions(self.instructions.clone())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let max_bytes = PromptArgument::new("max_bytes")
            .with_description(format!("Packet bytes, default {DEFAULT_MAX_BYTES}."))
            .with_required(false);
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            "resume",
            Some("Your resume packet: load it at the start of a session."),
            Some(vec![max_bytes]),
        )]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != "resume" {
            return Err(ErrorData::invalid_params(
                format!("no prompt {:?}: the one prompt is `resume`", request.name),
                None,
            ));
        }
        let arguments = request.arguments.unwrap_or_default();
        if let Some(unknown) = arguments.keys().find(|k| *k != "max_bytes") {
            return Err(ErrorData::invalid_params(
                format!("the `resume` prompt takes only `max_bytes`, not `{unknown}`"),
                None,
            ));
        }
        let max_bytes = match arguments.get("max_bytes") {
            None | Some(Value::Null) => DEFAULT_MAX_BYTES,
            // Prompt arguments are strings on the wire; a number is taken as meant.
            Some(value) => value
                .as_str()
                .and_then(|v| v.trim().parse().ok())
                .or_else(|| value.as_u64().and_then(|n| usize::try_from(n).ok()))
                .ok_or_else(|| {
                    ErrorData::invalid_params(
                        format!("`max_bytes`: {value} is not a byte count such as \"6000\""),
                        None,
                    )
                })?,
        };
        let r = self.packet(max_bytes).await.map_err(unreadable)?;
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, r.packet.text)])
                .with_description(format!(
                    "Resume packet of {} (generation {})",
                    self.me, r.generation
                ))
                .into(),
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![
            Resource::new(RESUME_URI, "resume")
                .with_description(format!(
                    "Your resume packet (at most {DEFAULT_MAX_BYTES} bytes): load it at start."
                ))
                .with_mime_type("text/markdown"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != RESUME_URI {
            return Err(ErrorData::resource_not_found(
                format!(
                    "no resource {:?}: the one resource is {RESUME_URI}",
                    request.uri
                ),
                None,
            ));
        }
        let r = self.packet(DEFAULT_MAX_BYTES).await.map_err(unreadable)?;
        let contents = ResourceContents::TextResourceContents {
            uri: RESUME_URI.to_owned(),
            mime_type: Some("text/markdown".to_owned()),
            text: r.packet.text,
            meta: None,
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte budget of the whole `tools/list` result (SPEC §8: an agent's context cost).
    const TOOLS_LIST_BUDGET: usize = 12 * 1024;

    fn described(tools: &[rmcp::model::Tool], name: &str, words: &str) {
        let tool = tools.iter().find(|t| t.name == name).expect(name);
        assert!(
            Value::Object(tool.input_schema.as_ref().clone())
                .to_string()
                .contains(words),
            "{name}: the input schema states {words:?}"
        );
    }

    #[test]
    fn every_tool_declares_compact_object_schemas_for_input_and_output() {
        let tools = BatonTools::router().list_all();
        assert_eq!(tools.len(), 20);
        described(&tools, "show", &format!("default {DEFAULT_SHOW_BYTES}"));
        described(&tools, "resume", &format!("default {DEFAULT_MAX_BYTES}"));
        described(
            &tools,
            "receipt_wait",
            &format!("Default {DEFAULT_WAIT_SECONDS}"),
        );
        described(
            &tools,
            "receipt_wait",
            &format!("\"maximum\":{MAX_WAIT_SECONDS}"),
        );
        described(
            &tools,
            "order",
            r#""enum":["create","accept","decline","start","report","answer","approve","rework","cancel"]"#,
        );
        described(
            &tools,
            "order_show",
            &format!("\"maximum\":{MAX_WAIT_SECONDS}"),
        );
        let listed = serde_json::to_vec(&serde_json::json!({ "tools": tools })).unwrap();
        // 12,214 bytes for 20 tools when the order tools came (`cargo test -- --nocapture`).
        println!(
            "tools/list: {} bytes for {} tools (budget {TOOLS_LIST_BUDGET})",
            listed.len(),
            tools.len()
        );
        assert!(
            listed.len() < TOOLS_LIST_BUDGET,
            "tools/list is {} bytes, over its budget of {TOOLS_LIST_BUDGET}",
            listed.len()
        );
        for tool in tools {
            let output = tool
                .output_schema
                .as_ref()
                .unwrap_or_else(|| panic!("{} declares no output schema", tool.name));
            for schema in [&tool.input_schema, output] {
                assert_eq!(
                    schema.get("type"),
                    Some(&Value::from("object")),
                    "{}",
                    tool.name
                );
                let text = Value::Object(schema.as_ref().clone()).to_string();
                for waste in ["$schema", "$defs", "$ref", "\"format\"", "null"] {
                    assert!(!text.contains(waste), "{}: {waste} in {text}", tool.name);
                }
            }
            let text = Value::Object(output.as_ref().clone()).to_string();
            assert!(!text.contains("\"required\""), "{}: {text}", tool.name);
        }
    }

    #[test]
    fn compaction_drops_null_only_where_a_field_may_be_absent() {
        let schema = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "required": ["always", "written_null"],
            "properties": {
                "always": {"type": "integer", "format": "uint64", "minimum": 0},
                "written_null": {"type": ["string", "null"]},
                "skipped": {"type": ["string", "null"], "default": null},
                "status": {"enum": ["a", "b", null]},
                "cut": {"anyOf": [{"$ref": "#/$defs/Cut"}, {"type": "null"}]},
            },
            "$defs": {"Cut": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        });
        let Value::Object(schema) = schema else {
            unreachable!()
        };
        let output = Value::Object(compact(&schema, Side::Output));
        assert_eq!(
            output,
            serde_json::json!({
                "type": "object",
                "properties": {
                    "always": {"type": "integer"},
                    "written_null": {"type": ["string", "null"]},
                    "skipped": {"type": "string"},
                    "status": {"enum": ["a", "b"]},
                    "cut": {"properties": {"n": {"type": "integer"}}},
                },
            })
        );
        let input = Value::Object(compact(&schema, Side::Input));
        assert_eq!(
            input["properties"]["cut"]["type"], "object",
            "inputs keep every type"
        );
        assert_eq!(
            input["required"],
            serde_json::json!(["always", "written_null"])
        );
        assert_eq!(input["properties"]["always"]["minimum"], 0);
        assert_eq!(
            input["properties"]["written_null"]["type"],
            serde_json::json!(["string", "null"])
        );
    }

    #[test]
    fn times_are_rfc_3339_or_ages() {
        let now = 10_000_000;
        assert_eq!(time("since", "2h", now), Ok(now - 7_200_000));
        assert_eq!(time("since", "1970-01-01T00:00:01Z", now), Ok(1000));
        let err = time("until", "soon", now).unwrap_err();
        assert!(err.starts_with("`until`:"), "{err}");
        assert!(time("since", "-2h", now).is_err());
    }
}
