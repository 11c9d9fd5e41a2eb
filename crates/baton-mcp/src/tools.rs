//! The tool server: one method per tool, each parsing its arguments, calling one use case
//! of [`App`] as the participant fixed at startup, and rendering the result. No tool takes
//! the actor as an argument. The resume packet is also a prompt (`resume`) and a resource
//! (`baton://resume`), so a client can load it at start.
//!
//! Every tool returns `Result<Json<T>, String>`: `Ok` becomes structured content (with its
//! text copy), described by the output schema rmcp derives from `T`; `Err` becomes an
//! `isError` result whose text says what to do next. Unknown tools and malformed requests
//! are rmcp's to answer, as protocol errors.

use std::sync::Arc;
use std::time::Duration;

use baton_app::ops::{self, Operation, Who};
use baton_app::{App, Layout};
use baton_core::key::Scope;
use baton_core::order::{Order, allowed};
use baton_core::packet::DEFAULT_MAX_BYTES;
use baton_core::time::instant;
use baton_core::{Event, Millis, Passname};
use baton_store::{OrderWritten, SearchQuery, StoreError};
use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    ListResourcesResult, PaginatedRequestParams, Prompt, PromptArgument, PromptMessage,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, Role, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Json, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use schemars::generate::SchemaSettings;
use serde_json::Value;

use crate::explain::explain;
use crate::profile::Profile;
use crate::wire::*;

/// The resume packet as a resource.
pub const RESUME_URI: &str = "baton://resume";

#[derive(Clone)]
pub struct BatonTools {
    app: App,
    me: Passname,
    instructions: String,
    tool_router: ToolRouter<Self>,
    /// The profile served; `None` when the tools were narrowed otherwise (a read key).
    profile: Option<Profile>,
    /// What the caller's key allows: everything on stdio (the machine holding the store),
    /// the key's scope over HTTP.
    scope: Scope,
}

impl BatonTools {
    pub fn new(app: App, me: Passname) -> Self {
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
             Archived messages stay in the record. `show` returns a payload over `max_bytes` \
             as `truncated` (the cut JSON text and both sizes) instead of `payload`. \
             `search` takes RFC 3339 times or ages (2h) and a page's `next` as `cursor` (empty \
             on the last page). Paths are from the project root; \
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
            app,
            me,
            instructions,
            tool_router: Self::router(),
            profile: None,
            scope: Scope::Admin,
        }
    }

    /// Only `profile`'s tools: a tool outside it is refused naming a profile that has it.
    pub fn with_profile(app: App, me: Passname, profile: Profile) -> Self {
        let mut tools = Self::new(app, me);
        tools
            .tool_router
            .map
            .retain(|name, _| profile.has(name.as_ref()));
        tools.profile = Some(profile);
        tools
    }

    /// Acting with a key of `scope` (over HTTP).
    pub fn scoped(mut self, scope: Scope) -> Self {
        self.scope = scope;
        self
    }

    /// Only the tools that change nothing (annotated read-only): what a read key may call.
    pub fn read_only(app: App, me: Passname) -> Self {
        let mut tools = Self::new(app, me).scoped(Scope::Read);
        tools.tool_router.map.retain(|_, route| {
            route
                .attr
                .annotations
                .as_ref()
                .and_then(|a| a.read_only_hint)
                == Some(true)
        });
        tools
    }

    /// The tools, their schemas compacted (see [`compact`]) and their annotations those of
    /// their operation's declaration (`baton_app::ops`): a tool that writes nothing is
    /// read-only, one whose repetition changes nothing more is idempotent, none destroys
    /// and none reaches outside the project.
    pub fn router() -> ToolRouter<Self> {
        let mut router = Self::tool_router();
        for op in ops::every_typed() {
            if let Some(route) = Self::typed(op) {
                router.add_route(route);
            }
        }
        for route in router.map.values_mut() {
            let tool = &mut route.attr;
            let declared = baton_app::ops::by_tool(&tool.name)
                .unwrap_or_else(|| panic!("tool {} has no operation declared", tool.name));
            let hints = rmcp::model::ToolAnnotations::new().open_world(false);
            tool.annotations = Some(if declared.needs.writes() {
                hints.destructive(false).idempotent(declared.idempotent)
            } else {
                hints.read_only(true)
            });
            tool.input_schema = Arc::new(compact(&tool.input_schema, Side::Input));
            tool.output_schema = tool
                .output_schema
                .as_ref()
                .map(|s| Arc::new(compact(s, Side::Output)));
        }
        router
    }

    /// The tool of the typed operation `op` (`baton_app::ops`), made from its declaration:
    /// its name, its summary, its input and output schemas, and one handler that runs it
    /// through the dispatcher as this participant with this key's scope.
    fn typed(op: &'static Operation) -> Option<ToolRoute<Self>> {
        let name = op.tool?;
        let declared = op.typed?;
        let mut inline = SchemaSettings::draft2020_12()
            .with(|s| s.inline_subschemas = true)
            .into_generator();
        let object = |schema: schemars::Schema| match schema.to_value() {
            Value::Object(object) => object,
            other => panic!("{name}: a schema that is not an object: {other}"),
        };
        let input = object(declared.call.input(&mut inline));
        let output = object(declared.call.output(&mut inline));
        let attr = rmcp::model::Tool::new(name, declared.summary, Arc::new(input))
            .with_raw_output_schema(Arc::new(output));
        Some(ToolRoute::new_dyn(
            attr,
            move |context: ToolCallContext<'_, Self>| {
                Box::pin(async move {
                    let arguments = context.arguments.unwrap_or_default();
                    Ok(context.service.dispatch(op, arguments).await.into())
                })
            },
        ))
    }

    /// Runs the typed operation `op` as this participant with this key's scope.
    async fn dispatch(
        &self,
        op: &'static Operation,
        arguments: rmcp::model::JsonObject,
    ) -> rmcp::model::CallToolResult {
        // A refusal about a message or an order names it in its hint.
        let id = arguments
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let who = Who {
            actor: self.me.as_str(),
            scope: self.scope,
        };
        match self.app.dispatch(who, op, Value::Object(arguments)).await {
            // What does not apply is left out, never `null`, as every tool answers.
            Ok(Value::Object(mut answer)) => {
                answer.retain(|_, v| !v.is_null());
                rmcp::model::CallToolResult::structured(Value::Object(answer))
            }
            Ok(answer) => rmcp::model::CallToolResult::structured(answer),
            Err(e) => rmcp::model::CallToolResult::error(vec![rmcp::model::ContentBlock::text(
                explain(&id, e),
            )]),
        }
    }

    fn rows(&self, items: &[baton_core::Envelope]) -> Vec<Row> {
        items.iter().map(|e| Row::new(e, &self.me)).collect()
    }

    /// An order as a step leaves it.
    fn stepped(&self, order: &Order) -> OrderStepped {
        let status = order.status_at(self.app.now());
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
            report: baton_app::newest_report(events).and_then(|r| match r {
                Value::Object(report) => Some(report),
                _ => None,
            }),
        }
    }
}

/// An RFC 3339 time, or an age such as `2h` meaning that long before `now`.
fn time(field: &str, text: &str, now: Millis) -> Result<Millis, String> {
    instant(text, now).ok_or_else(|| {
        format!(
            "`{field}`: {text:?} is not a time: use {}",
            baton_core::time::INSTANT_FORMS
        )
    })
}

/// A list's page size: 50 unless asked, at most 100 (a tool's answer enters a context).
fn list_page(limit: Option<u32>) -> u32 {
    limit.unwrap_or(50).clamp(1, 100)
}

/// A wait's length in seconds, within what a tool call may wait.
fn wait_seconds(seconds: Option<u32>) -> Result<Duration, String> {
    let seconds = seconds.unwrap_or(DEFAULT_WAIT_SECONDS);
    if !(1..=MAX_WAIT_SECONDS).contains(&seconds) {
        return Err(format!(
            "`timeout_seconds`: {seconds} is out of range: use 1 to {MAX_WAIT_SECONDS}"
        ));
    }
    Ok(Duration::from_secs(seconds.into()))
}

#[tool_router]
impl BatonTools {
    #[tool(description = "Messages you owe, oldest first.")]
    async fn inbox(&self, Parameters(input): Parameters<InboxInput>) -> Result<Json<Page>, String> {
        let input = input?;
        let (items, next) = self
            .app
            .inbox(
                &self.me,
                input.all,
                input.cursor.as_deref(),
                list_page(input.limit),
            )
            .await
            .map_err(|e| explain("", e))?;
        Ok(Json(Page {
            items: self.rows(&items),
            next,
        }))
    }

    #[tool(description = "Your open requests, each recipient's status.")]
    async fn outbox(
        &self,
        Parameters(input): Parameters<OutboxInput>,
    ) -> Result<Json<Page>, String> {
        let input = input?;
        let (items, next) = self
            .app
            .outbox(
                &self.me,
                input.all,
                input.cursor.as_deref(),
                list_page(input.limit),
            )
            .await
            .map_err(|e| explain("", e))?;
        Ok(Json(Page {
            items: self.rows(&items),
            next,
        }))
    }

    #[tool(description = "Read a message; marks it delivered.")]
    async fn show(&self, Parameters(input): Parameters<ShowInput>) -> Result<Json<Shown>, String> {
        let input = input?;
        let max = input.max_bytes.unwrap_or(DEFAULT_SHOW_BYTES);
        let shown = self
            .app
            .show(Some(&self.me), &input.id, Some(max), Layout::Compact)
            .await
            .map_err(|e| explain(&input.id, e))?;
        Ok(Json(Shown::new(shown, &self.me)))
    }

    #[tool(description = "Search messages, newest first, by page.")]
    async fn search(
        &self,
        Parameters(input): Parameters<SearchInput>,
    ) -> Result<Json<Page>, String> {
        let input = input?;
        let limit = input.limit.unwrap_or(50);
        if !(1..=100).contains(&limit) {
            return Err(format!("`limit`: {limit} is out of range: use 1 to 100"));
        }
        let now = self.app.now();
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
            .app
            .search(Some(&self.me), &query)
            .await
            .map_err(|e| explain("", e))?;
        Ok(Json(Page {
            items: self.rows(&page.items),
            next: page.next,
        }))
    }

    #[tool(description = "A message's whole thread, depth-first.")]
    async fn thread(
        &self,
        Parameters(input): Parameters<IdInput>,
    ) -> Result<Json<Messages>, String> {
        let input = input?;
        let items = self
            .app
            .thread(&input.id)
            .await
            .map_err(|e| explain(&input.id, e))?;
        Ok(Json(Messages {
            items: self.rows(&items),
        }))
    }

    #[tool(description = "Start here: what you owe and the project's memory.")]
    async fn resume(
        &self,
        Parameters(input): Parameters<ResumeInput>,
    ) -> Result<Json<Resumed>, String> {
        let input = input?;
        let r = self
            .app
            .resume(&self.me, input.max_bytes.unwrap_or(DEFAULT_MAX_BYTES))
            .await
            .map_err(|e| explain("", e))?;
        Ok(Json(Resumed {
            generation: r.generation,
            bytes: r.packet.text.len(),
            text: r.packet.text,
        }))
    }

    #[tool(description = "Record where a step's output landed.")]
    async fn receipt_write(
        &self,
        Parameters(input): Parameters<ReceiptWriteInput>,
    ) -> Result<Json<Receipt>, String> {
        let input = input?;
        let (record, event) = self
            .app
            .write_receipt(
                self.me.as_str(),
                self.app.root(),
                input.step,
                input.artifact,
                input.run,
            )
            .await
            .map_err(|e| explain("", e))?;
        Ok(Json(Receipt::new(record, event.at, event.actor)))
    }

    #[tool(description = "Wait for a step's receipt; a miss raises one alert.")]
    async fn receipt_wait(
        &self,
        Parameters(input): Parameters<ReceiptWaitInput>,
    ) -> Result<Json<Receipt>, String> {
        let input = input?;
        let step = input.step.trim();
        if step.is_empty() {
            return Err("`step` must not be empty".into());
        }
        let timeout = wait_seconds(input.timeout_seconds)?;
        let receipt = self
            .app
            .wait_receipt(self.me.as_str(), step, timeout)
            .await
            .map_err(|e| explain("", e))?;
        Ok(Json(receipt.into()))
    }

    #[tool(description = "Take a Work Order step, as you.")]
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
            let written = self
                .app
                .offer(&self.me, Value::Object(doc), None)
                .await
                .map_err(|e| explain("", e))?;
            return Ok(Json(self.stepped(&written.order)));
        }
        let id = input
            .id
            .ok_or_else(|| format!("`id`: `{}` needs the order's id", verb.as_str()))?;
        let step = match verb {
            V::Accept => baton_app::OrderStep::Accept,
            V::Decline => baton_app::OrderStep::Decline {
                reason: input.reason,
            },
            V::Start => baton_app::OrderStep::Start,
            V::Report => baton_app::OrderStep::Report {
                document: Value::Object(
                    input
                        .document
                        .ok_or("`document`: `report` needs the Work Report (a JSON object)")?,
                ),
            },
            V::Answer => baton_app::OrderStep::Answer {
                text: input.text.ok_or("`text`: `answer` needs the answer")?,
            },
            V::Approve => baton_app::OrderStep::Approve,
            V::Rework => baton_app::OrderStep::Rework {
                reason: input
                    .reason
                    .ok_or("`reason`: `rework` needs what the worker should change")?,
            },
            V::Cancel => baton_app::OrderStep::Cancel {
                reason: input.reason,
            },
            // Offered above: an order is created from its document, never from an id.
            V::Create => return Err("`id` is not for action `create`: leave it out".into()),
        };
        let written = self
            .app
            .take_step(&self.me, &id, input.expect_seq, step)
            .await
            .map_err(|e| explain(&id, e))?;
        Ok(Json(self.stepped(&written.order)))
    }

    #[tool(description = "What needs a person: four lanes, five items each, newest first.")]
    async fn queue(
        &self,
        Parameters(input): Parameters<QueueInput>,
    ) -> Result<Json<QueueView>, String> {
        let input = input?;
        let lane = match input.lane.as_deref() {
            Some(l) => Some(baton_core::queue::Lane::parse(l).ok_or_else(|| {
                format!("`lane`: {l:?} is not a lane: use failures, reviews, needs or approvals")
            })?),
            None => None,
        };
        let lanes = self.app.queue(lane).await.map_err(|e| explain("", e))?;
        Ok(Json(QueueView::of(&lanes)))
    }

    #[tool(description = "A Work Order and its steps; or wait for steps after since.")]
    async fn order_show(
        &self,
        Parameters(input): Parameters<OrderShowInput>,
    ) -> Result<Json<OrderView>, String> {
        let input = input?;
        let id = input.id;
        let Some(since) = input.since else {
            if input.timeout_seconds.is_some() {
                return Err("`timeout_seconds` is for waiting: give `since` too".into());
            }
            let shown = self
                .app
                .order_view(&id)
                .await
                .map_err(|e| explain(&id, e))?;
            let mut view = self.view(&shown.order, &shown.events);
            view.document = Some(shown.document);
            return Ok(Json(view));
        };
        let timeout = wait_seconds(input.timeout_seconds)?;
        let OrderWritten { order, events } = self
            .app
            .wait_order(&id, since, timeout)
            .await
            .map_err(|e| explain(&id, e))?;
        Ok(Json(self.view(&order, &events)))
    }
}

/// Why the resume packet could not be read, as a protocol error (prompts and resources
/// have no `isError` result).
fn unreadable(e: StoreError) -> ErrorData {
    ErrorData::internal_error(format!("the resume packet could not be read: {e}"), None)
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for BatonTools {
    async fn call_tool(
        &self,
        request: rmcp::model::CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if let Some(profile) = self.profile
            && !profile.has(&name)
            && let Some(holder) = Profile::holding(&name)
        {
            let text = format!(
                "`{name}` is not in the {} profile this server offers; `baton mcp --profile {}` has it",
                profile.as_str(),
                holder.as_str()
            );
            return Ok(
                rmcp::model::CallToolResult::error(vec![rmcp::model::ContentBlock::text(text)])
                    .into(),
            );
        }
        let context = rmcp::handler::server::tool::ToolCallContext::new(self, request, context);
        self.tool_router.call(context).await
    }

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
        let r = self
            .app
            .resume(&self.me, max_bytes)
            .await
            .map_err(unreadable)?;
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
        let r = self
            .app
            .resume(&self.me, DEFAULT_MAX_BYTES)
            .await
            .map_err(unreadable)?;
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

    use crate::profile::PROFILE_BUDGET;

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
        assert_eq!(tools.len(), 22);
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
        // Each role's profile stays under its budget: what an agent of that role reads
        // into its context every session (`cargo test -- --nocapture` prints the sizes).
        for profile in [
            Profile::Executor,
            Profile::Planner,
            Profile::Reviewer,
            Profile::Owner,
        ] {
            let held: Vec<&rmcp::model::Tool> =
                tools.iter().filter(|t| profile.has(&t.name)).collect();
            assert_eq!(held.len(), profile.tools().len());
            let listed = serde_json::to_vec(&serde_json::json!({ "tools": held })).unwrap();
            println!(
                "tools/list ({}): {} bytes for {} tools (budget {PROFILE_BUDGET})",
                profile.as_str(),
                listed.len(),
                held.len()
            );
            assert!(
                listed.len() < PROFILE_BUDGET,
                "the {} profile's tools/list is {} bytes, over its budget of {PROFILE_BUDGET}",
                profile.as_str(),
                listed.len()
            );
        }
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
    fn compaction_drops_null_from_outputs_and_from_optional_inputs() {
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
                    "written_null": {"type": "string"},
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
