//! The tool server: one method per tool, each a thin call into the [`Store`] as the
//! participant fixed at startup. No tool takes the actor as an argument.
//!
//! Every tool returns `Result<Json<T>, String>`: `Ok` becomes structured content (with its
//! text copy), described by the output schema rmcp derives from `T`; `Err` becomes an
//! `isError` result whose text says what to do next. Unknown tools and malformed requests
//! are rmcp's to answer, as protocol errors.

use std::sync::Arc;

use baton_core::message::reply_recipients;
use baton_core::{Draft, MessageType, Millis, Passname, Payload, PayloadError, Topic};
use baton_store::{Fetched, SearchQuery, Store, StoreError, Verb};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{Json, ServerHandler, tool, tool_handler, tool_router};
use serde_json::{Map, Value};

use crate::Settings;
use crate::refusal::{explain, unknown_participant};
use crate::wire::*;

#[derive(Clone)]
pub struct BatonTools {
    store: Arc<dyn Store>,
    me: Passname,
    settings: Settings,
    instructions: String,
    tool_router: ToolRouter<Self>,
}

impl BatonTools {
    pub fn new(store: Arc<dyn Store>, me: Passname, settings: Settings) -> Self {
        let instructions = format!(
            "Baton: the durable inbox of this project. You act as `{me}`. \
             `inbox` is what you owe, `outbox` what you wait for. `show` an id to read it, \
             then `ack` an info or message, or `complete` / `hand_back` a request."
        );
        Self {
            store,
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
            tool.input_schema = Arc::new(compact(&tool.input_schema));
            tool.output_schema = tool.output_schema.as_ref().map(|s| Arc::new(compact(s)));
        }
        router
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
        description = "What you owe: pending or delivered messages to you, oldest first. `show` reads one.",
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
        description = "What you wait for: your requests, each recipient's status, reply counts.",
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
        description = "Read a message and its payload (cut to max_bytes); marks it delivered to you.",
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
        description = "Send: a request moves responsibility, an info knowledge; a message is dialogue.",
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
        description = "Reply to a message: by default to its other side, on its topic.",
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
        description = "Acknowledge an info or message you have read (no work moved).",
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
        description = "Complete a request: as recipient, your end is done; as sender, you are satisfied.",
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
        description = "Move a finished message out of your view (it stays in the record).",
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
        description = "The whole thread a message belongs to, depth-first from its root.",
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

    // Resume (SPEC §5.4) belongs here: a read-only `resume` tool with `max_bytes`, plus the
    // same packet as a `baton://resume` resource and a `resume` prompt. It waits until
    // gathering the packet's sections is a library call (today it lives in the binary's
    // `commands/resume.rs`; `baton_core::packet::render` budgets them), so the CLI and MCP
    // print one packet. Until then there is deliberately no stand-in.
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for BatonTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("baton", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_declares_compact_object_schemas_for_input_and_output() {
        let tools = BatonTools::router().list_all();
        assert_eq!(tools.len(), 11);
        let show = tools.iter().find(|t| t.name == "show").expect("show");
        let default = format!("default {DEFAULT_SHOW_BYTES}");
        assert!(
            Value::Object(show.input_schema.as_ref().clone())
                .to_string()
                .contains(&default),
            "the max_bytes description states {default}"
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
                assert!(
                    !text.contains("$schema") && !text.contains("\"format\""),
                    "{text}"
                );
            }
        }
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
