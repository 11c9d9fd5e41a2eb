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
use std::time::Duration;

use baton_core::message::reply_recipients;
use baton_core::packet::DEFAULT_MAX_BYTES;
use baton_core::state::StateOp;
use baton_core::{Draft, MessageType, Millis, Passname, Payload, PayloadError, Topic};
use baton_store::recall::{self, SubjectError};
use baton_store::receipt::{self, Waited};
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

use crate::refusal::{explain, explain_state, unknown_participant};
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
             Record what the next session must know with `decide`, `constrain` and `note`, \
             and where a step's output landed with `receipt_write`."
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

/// The largest index ≤ `max` that starts a character.
fn floor_char_boundary(s: &str, max: usize) -> usize {
    (0..=max.min(s.len()))
        .rev()
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(0)
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
        description = "What you owe: messages to you not yet done, oldest first.",
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
        description = "What you wait for: your requests, each recipient's status.",
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
        description = "Read a message (payload cut to max_bytes); marks it delivered.",
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
        description = "Send a request (moves work), info (knowledge) or message.",
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
        description = "Reply in a message's thread (default: to its other side).",
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
        description = "Acknowledge an info or message you read (no work moved).",
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
        description = "Complete a request: your end as recipient, or as satisfied sender.",
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
        description = "Archive a finished message: out of view, kept in the record.",
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
        description = "Search messages, newest first, a page at a time.",
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
        description = "A message's whole thread, depth-first from its root.",
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
        description = "Start here: what you owe, focus, constraints, decisions, alerts.",
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
        description = "Set the project's focus: one line on what matters now.",
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
        description = "Record a constraint C-N: what was tried, what happened.",
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
        description = "Note N-N on a message, order or path; stale once it changes.",
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
        description = "Record where a step's output landed (a path is blake3-hashed).",
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
        assert_eq!(tools.len(), 18);
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
        let listed = serde_json::to_vec(&serde_json::json!({ "tools": tools })).unwrap();
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
                    "cut": {"type": "object", "properties": {"n": {"type": "integer"}}},
                },
            })
        );
        let input = Value::Object(compact(&schema, Side::Input));
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

    #[test]
    fn cuts_never_split_a_character() {
        let s = "aé"; // 'é' is two bytes, at 1..3
        assert_eq!(floor_char_boundary(s, 2), 1);
        assert_eq!(floor_char_boundary(s, 3), 3);
        assert_eq!(floor_char_boundary(s, 10), 3);
    }
}
