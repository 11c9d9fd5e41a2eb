//! The tool server: one tool per operation that declares one (`baton_app::ops`), each run
//! through the one dispatcher as the participant fixed at startup, with its key's scope.
//! No tool takes the actor as an argument. The resume packet is also a prompt (`resume`)
//! and a resource (`baton://resume`), so a client can load it at start.
//!
//! A tool's answer is its operation's document as structured content (with its text
//! copy), described by the output schema made from the document's type; a refusal is an
//! `isError` result whose text says what to do next. Unknown tools and malformed requests
//! are rmcp's to answer, as protocol errors.

use std::sync::Arc;

use baton_app::App;
use baton_app::ops::{self, Operation, Who};
use baton_core::Passname;
use baton_core::key::Scope;
use baton_core::packet::DEFAULT_MAX_BYTES;
use baton_store::StoreError;
use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    ListResourcesResult, PaginatedRequestParams, Prompt, PromptArgument, PromptMessage,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, Role, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool_handler};
use schemars::generate::SchemaSettings;
use serde_json::Value;

use crate::explain::explain;
use crate::profile::Profile;
use crate::schema::{Side, compact, shallow};

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
             Archived messages stay in the record. `show` cuts a payload over `max_bytes` \
             (default 8192): `payload_text` is the cut JSON text and `truncated` both sizes. \
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
             moved on; the answer's `order` says where it stands and what is `allowed` next. \
             `order_show` reads an order; with `since` (a seq) it waits for newer steps and \
             lists only those. \
             Before editing files, `reserve` their `paths` (gitignore-style globs from the \
             project root; `shared` lets others hold them shared too; `ttl_seconds` defaults \
             to the project's; reserving again renews): another's reservation in the way is \
             refused, naming its holder, id and expiry, and nothing is reserved. `release` \
             what you are done with (`names`: ids or globs; none: all yours); an accepted \
             order's scope is held for its worker until the order ends."
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

    /// The tools: one for each operation that declares one (`baton_app::ops`), made from
    /// its declaration (see [`BatonTools::typed`]).
    pub fn router() -> ToolRouter<Self> {
        let mut router = ToolRouter::new();
        for op in ops::every_typed() {
            if let Some(route) = Self::typed(op) {
                router.add_route(route);
            }
        }
        router
    }

    /// The tool of the typed operation `op`, made from its declaration: its name, its
    /// summary, its input and output schemas compacted (see [`compact`]), its annotations
    /// (a tool that writes nothing is read-only, one whose repetition changes nothing more
    /// is idempotent, none destroys and none reaches outside the project), and one handler
    /// that runs it through the dispatcher as this participant with this key's scope.
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
        let input = compact(&object(declared.call.input(&mut inline)), Side::Input);
        let output = Arc::new(compact(
            &object(declared.call.output(&mut inline)),
            Side::Output,
        ));
        // Each hint is said only where it differs from MCP's default (`idempotentHint`
        // defaults to false): `tools/list` is read into every session's context.
        let hints = rmcp::model::ToolAnnotations::new().open_world(false);
        let annotations = match (op.changes(), op.idempotent) {
            (true, true) => hints.destructive(false).idempotent(true),
            (true, false) => hints.destructive(false),
            (false, _) => hints.read_only(true),
        };
        let attr = rmcp::model::Tool::new(name, declared.summary, Arc::new(input))
            .with_raw_output_schema(Arc::new(shallow(&output)))
            .with_annotations(annotations);
        Some(ToolRoute::new_dyn(
            attr,
            move |context: ToolCallContext<'_, Self>| {
                let output = Arc::clone(&output);
                Box::pin(async move {
                    let arguments = context.arguments.unwrap_or_default();
                    let answered = context.service.dispatch(op, arguments, &output).await;
                    Ok(answered.into())
                })
            },
        ))
    }

    /// Runs the typed operation `op` as this participant with this key's scope; its
    /// answer as `output` (its whole compacted schema) describes it.
    async fn dispatch(
        &self,
        op: &'static Operation,
        arguments: rmcp::model::JsonObject,
        output: &rmcp::model::JsonObject,
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
            Ok(mut answer) => {
                prune(&mut answer, output);
                rmcp::model::CallToolResult::structured(answer)
            }
            Err(e) => rmcp::model::CallToolResult::error(vec![rmcp::model::ContentBlock::text(
                explain(&id, e, &|tool| self.tool_router.has_route(tool)),
            )]),
        }
    }
}

/// `value` without the `null`s of the fields `schema` names: what does not apply is left
/// out, never `null`, as the compacted output schema says. It looks into the objects and
/// arrays the schema describes, and leaves free-form values (a message's payload, a Work
/// Order) as they were written.
fn prune(value: &mut Value, schema: &rmcp::model::JsonObject) {
    let branches = ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| schema.get(*k).and_then(Value::as_array))
        .flatten()
        .filter_map(Value::as_object);
    for branch in branches {
        prune(value, branch);
    }
    match value {
        Value::Object(fields) => {
            let Some(Value::Object(properties)) = schema.get("properties") else {
                return;
            };
            fields.retain(|k, v| !(v.is_null() && properties.contains_key(k)));
            for (k, v) in fields.iter_mut() {
                if let Some(Value::Object(inner)) = properties.get(k) {
                    prune(v, inner);
                }
            }
        }
        Value::Array(items) => {
            if let Some(Value::Object(inner)) = schema.get("items") {
                for item in items {
                    prune(item, inner);
                }
            }
        }
        _ => {}
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
                format!(
                    "no prompt {:?}: the one prompt is `resume`",
                    crate::frame::clip(&request.name, crate::frame::ECHO)
                ),
                None,
            ));
        }
        let arguments = request.arguments.unwrap_or_default();
        if let Some(unknown) = arguments.keys().find(|k| *k != "max_bytes") {
            let unknown = crate::frame::clip(unknown, crate::frame::ECHO);
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
                        format!(
                            "`max_bytes`: {} is not a byte count such as \"6000\"",
                            crate::frame::clip(&value.to_string(), crate::frame::ECHO)
                        ),
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
                    crate::frame::clip(&request.uri, crate::frame::ECHO)
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
        let mut listed: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        let mut declared: Vec<&str> = baton_app::ops::tools().collect();
        listed.sort_unstable();
        declared.sort_unstable();
        assert_eq!(
            listed, declared,
            "a tool for each declared one, and no other"
        );
        described(
            &tools,
            "show",
            &format!("default {}", baton_app::ops::SHOW_BYTES),
        );
        described(&tools, "resume", &format!("default {DEFAULT_MAX_BYTES}"));
        let wait = baton_app::ops::DEFAULT_WAIT.as_secs();
        let most = baton_app::ops::MAX_WAIT.as_secs();
        described(&tools, "receipt_wait", &format!("Default {wait}"));
        described(&tools, "receipt_wait", &format!("\"maximum\":{most}"));
        described(
            &tools,
            "order",
            r#""enum":["create","accept","decline","start","report","answer","approve","rework","cancel"]"#,
        );
        described(&tools, "order_show", &format!("\"maximum\":{most}"));
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
                    "status": {"type": "string"},
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
        assert_eq!(
            input["properties"]["always"].get("minimum"),
            None,
            "an unsigned count's minimum: 0 goes from inputs too"
        );
        assert_eq!(
            input["properties"]["written_null"]["type"],
            serde_json::json!(["string", "null"])
        );
    }
}
