//! Outside A2A agents as participants (`baton agent add NAME --a2a URL --key-env VAR`): a
//! loop beside the HTTP listener that, for each such participant, hands the requests in
//! its inbox to its agent with `SendMessage` and brings the agent's task back by polling
//! `GetTask`.
//!
//! The loop acts as the participant through the one dispatcher, as any edge does: it reads
//! a request (`show`, which marks it delivered), records where the request landed as a
//! receipt whose step is the request's id (the artifact `URL#task=ID`), and takes the
//! participant's steps as the task moves (`complete` with the task's artifacts as the
//! note, `hand-back`, `refuse`, a `reply` for a question, whose answer in the thread is
//! sent on to the task and acknowledged). A request is handed over at
//! least once: a `SendMessage` whose receipt was not recorded is sent again, with the same
//! `messageId` (the request's id). Failures wait longer each time, as webhooks do. Nothing
//! of it is kept but the log; the backoff lives in memory.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_app::App;
use baton_app::doc::{Inbox, ReceiptShown, Show};
use baton_app::ops::{self, Who};
use baton_core::key::Scope;
use baton_core::participant::OutsideAgent;
use baton_core::{MessageType, Passname, ProjectName, RefusalKind};
use baton_store::StoreError;
use serde_json::{Value, json};

use super::wire::{self, TaskState};
use crate::Server;
use crate::webhooks::HttpPoster;

/// The longest answer read from an outside agent.
const MAX_ANSWER: u64 = 1 << 20;
/// The longest note or reason brought back from an agent's task, in characters.
const MAX_NOTE: usize = 4000;
/// Where a receipt's artifact names the agent's task.
const TASK_MARK: &str = "#task=";

/// The key an environment variable holds, by the variable's name (the binary reads its
/// environment; this crate reads none).
pub type KeyOf = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// What the loop needs beyond the server: an HTTP client, and where keys are found.
pub struct Outside {
    pub poster: Arc<HttpPoster>,
    pub key: KeyOf,
}

/// The first wait before a task that has not moved is asked about again; it doubles each
/// time the task is found unmoved, up to [`MAX_POLL`].
const FIRST_POLL: Duration = Duration::from_secs(1);
const MAX_POLL: Duration = Duration::from_secs(60);

/// When each request (`project/id`) is next looked at, and why it waits.
#[derive(Default)]
struct Waits {
    each: HashMap<String, Wait>,
}

struct Wait {
    /// Looks in a row that found the task unmoved, or calls that failed.
    count: u32,
    at: Instant,
    /// The last failure said on stderr (empty while the task merely waits).
    said: String,
}

/// How a look at a request ended.
enum Looked {
    /// A step was taken (or the request was handed over): look again soon.
    Moved,
    /// The agent's task is where it was.
    Unmoved,
}

/// Hands requests to outside agents and brings their tasks back, every `tick`, until
/// dropped (the caller aborts it at shutdown; a hand-over cut short is sent again).
pub async fn run(server: Arc<Server>, outside: Outside, tick: Duration) {
    let mut waits = Waits::default();
    let mut turn = 0usize;
    loop {
        if let Err(e) = round(&server, &outside, &mut waits, &mut turn).await {
            eprintln!("baton serve: outside agents: {e}");
        }
        tokio::time::sleep(tick).await;
    }
}

/// One pass over the next projects in turn (no more than half of those a server keeps
/// open, as webhook rounds take them): each outside agent's participant's requests that
/// are due.
async fn round(
    server: &Server,
    outside: &Outside,
    waits: &mut Waits,
    turn: &mut usize,
) -> Result<(), String> {
    let all = server
        .database
        .projects()
        .await
        .map_err(|e| e.to_string())?;
    let size = (server.options.open_projects / 2).max(1);
    let projects: Vec<ProjectName> = if all.len() <= size {
        all
    } else {
        let start = *turn % all.len();
        *turn = turn.wrapping_add(size);
        all.iter().cycle().skip(start).take(size).cloned().collect()
    };
    let mut skipped = Vec::new();
    for project in projects {
        if let Err(e) = project_round(server, outside, waits, &project).await {
            skipped.push(format!("project {project}: {e}"));
        }
    }
    if skipped.is_empty() {
        Ok(())
    } else {
        Err(format!("skipped {}", skipped.join("; ")))
    }
}

async fn project_round(
    server: &Server,
    outside: &Outside,
    waits: &mut Waits,
    project: &ProjectName,
) -> Result<(), String> {
    let app = server.app(project).await.map_err(|e| e.to_string())?;
    let agents = app.outside_agents().await.map_err(|e| e.to_string())?;
    for (name, agent) in agents {
        let who = Who {
            actor: name.as_str(),
            scope: Scope::Write,
        };
        let inbox: Inbox = app
            .call::<ops::InboxList>(who, json!({ "limit": 100 }))
            .await
            .map_err(|e| e.to_string())?;
        for row in inbox
            .items
            .iter()
            .filter(|r| matches!(r.kind, MessageType::Request | MessageType::Message))
        {
            let key = format!("{project}/{}", row.id);
            if waits.each.get(&key).is_some_and(|w| Instant::now() < w.at) {
                continue;
            }
            let looked = if row.kind == MessageType::Request {
                hand_over(&app, who, &agent, outside, &row.id).await
            } else {
                answer(&app, who, &agent, outside, &row.id).await
            };
            match looked {
                Ok(Looked::Moved) => {
                    waits.each.remove(&key);
                }
                Ok(Looked::Unmoved) => waits.unmoved(key),
                Err(e) => waits.failed(project, &name, &row.id, key, e),
            }
        }
    }
    Ok(())
}

impl Waits {
    /// The task has not moved: the next look waits twice as long as the last, from
    /// [`FIRST_POLL`] to [`MAX_POLL`].
    fn unmoved(&mut self, key: String) {
        let count = self
            .each
            .remove(&key)
            .filter(|w| w.said.is_empty())
            .map_or(0, |w| w.count);
        let wait = FIRST_POLL.saturating_mul(1 << count.min(10)).min(MAX_POLL);
        self.each.insert(
            key,
            Wait {
                count: count.saturating_add(1),
                at: Instant::now() + wait,
                said: String::new(),
            },
        );
    }

    /// A call failed: the next try waits longer (as a webhook's does); said on stderr
    /// when it first fails and when its reason changes.
    fn failed(
        &mut self,
        project: &ProjectName,
        name: &Passname,
        id: &str,
        key: String,
        error: String,
    ) {
        let (count, said) = self
            .each
            .remove(&key)
            .filter(|w| !w.said.is_empty())
            .map_or((0, String::new()), |w| (w.count, w.said));
        if said != error {
            eprintln!(
                "baton serve: project {project}: request {id} to {name} (an outside agent): \
                 {error}; retrying with backoff"
            );
        }
        let wait = baton_core::webhook::backoff(count);
        let at = Instant::now() + Duration::from_millis(u64::try_from(wait).unwrap_or(0));
        self.each.insert(
            key,
            Wait {
                count: count.saturating_add(1),
                at,
                said: error,
            },
        );
    }
}

/// One step of request `id` to the participant `who` stands as: hand it over when no
/// receipt says where it landed, else ask the agent how its task stands; then take the
/// step the task's state calls for.
async fn hand_over(
    app: &App,
    who: Who<'_>,
    agent: &OutsideAgent,
    outside: &Outside,
    id: &str,
) -> Result<Looked, String> {
    let said = |e: StoreError| crate::error::ApiError::from(e).message;
    // Reading it delivers it: the participant (its agent) has the payload.
    let shown: Show = app
        .call::<ops::ShowMessage>(who, json!({ "id": id }))
        .await
        .map_err(said)?;
    let task = match landed(app, who, id).await? {
        Some(task) => {
            outside
                .call(agent, "GetTask", json!({ "id": task }))
                .await?
        }
        None => {
            let message = wire::Message {
                message_id: id.to_owned(),
                context_id: Some(shown.message.topic.to_string()),
                task_id: None,
                role: wire::Role::User,
                parts: super::payload_parts(&shown),
                metadata: None,
                extensions: Vec::new(),
                reference_task_ids: Vec::new(),
            };
            let params = json!({
                "message": message,
                "configuration": { "returnImmediately": true },
            });
            let answer = outside.call(agent, "SendMessage", params).await?;
            if let Some(reply) = answer.get("message") {
                // The agent answered at once, without a task: its answer completes it.
                let note = text_of(reply.get("parts"));
                return step(app, who, id, TaskState::Completed, note).await;
            }
            let task = answer
                .get("task")
                .cloned()
                .ok_or("the agent answered SendMessage with neither a task nor a message")?;
            let task_id = task
                .get("id")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty() && t.len() <= 256 && !t.contains(char::is_control))
                .ok_or("the agent's task has no usable id")?;
            let artifact = format!("{}{TASK_MARK}{task_id}", agent.url);
            app.call::<ops::ReceiptWrite>(who, json!({ "step": id, "artifact": artifact }))
                .await
                .map_err(said)?;
            task
        }
    };
    let state = task
        .pointer("/status/state")
        .and_then(Value::as_str)
        .and_then(TaskState::parse);
    let Some(state) = state else {
        return Ok(Looked::Unmoved); // unspecified, or a state Baton has no step for
    };
    let note = match state {
        TaskState::Completed => {
            let artifacts: Vec<String> = task
                .get("artifacts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|a| text_of(a.get("parts")))
                .filter(|t| !t.is_empty())
                .collect();
            artifacts.join("\n").chars().take(MAX_NOTE).collect()
        }
        _ => text_of(task.pointer("/status/message/parts")),
    };
    let question = task
        .pointer("/status/message/messageId")
        .and_then(Value::as_str)
        .map(str::to_owned);
    match state {
        TaskState::InputRequired => ask(app, who, id, note, question).await,
        _ => step(app, who, id, state, note).await,
    }
}

/// The agent's task request `id` landed in, from its receipt.
async fn landed(app: &App, who: Who<'_>, id: &str) -> Result<Option<String>, String> {
    match app
        .call::<ops::ReceiptShow>(who, json!({ "step": id }))
        .await
    {
        Ok(ReceiptShown { receipt }) => Ok(receipt
            .record
            .artifact
            .rsplit_once(TASK_MARK)
            .map(|(_, task)| task.to_owned())),
        Err(StoreError::Refused(r)) if r.kind() == RefusalKind::NotFound => Ok(None),
        Err(e) => Err(crate::error::ApiError::from(e).message),
    }
}

/// A message to the participant in the thread of a request it handed over (the sender's
/// answer to the agent's question): sent on to the agent's task with `SendMessage`
/// (its id the `messageId`), then acknowledged. A message outside such a thread is left
/// to whoever reads the inbox.
async fn answer(
    app: &App,
    who: Who<'_>,
    agent: &OutsideAgent,
    outside: &Outside,
    id: &str,
) -> Result<Looked, String> {
    let said = |e: StoreError| crate::error::ApiError::from(e).message;
    let thread: baton_app::doc::Thread = app
        .call::<ops::ThreadOf>(who, json!({ "id": id }))
        .await
        .map_err(said)?;
    let me = who.actor;
    // Up from the message to the request the participant was sent.
    let mut at = thread.items.iter().find(|r| r.message.id == id);
    let request = loop {
        let Some(row) = at else { break None };
        if row.message.kind == MessageType::Request
            && row.message.to.iter().any(|p| p.as_str() == me)
        {
            break Some(row.message.id.clone());
        }
        at = row
            .message
            .reply_to
            .as_ref()
            .and_then(|parent| thread.items.iter().find(|r| &r.message.id == parent));
    };
    let Some(request) = request else {
        return Ok(Looked::Unmoved);
    };
    let Some(task) = landed(app, who, &request).await? else {
        return Ok(Looked::Unmoved);
    };
    let shown: Show = app
        .call::<ops::ShowMessage>(who, json!({ "id": id }))
        .await
        .map_err(said)?;
    let message = wire::Message {
        message_id: id.to_owned(),
        context_id: None,
        task_id: Some(task),
        role: wire::Role::User,
        parts: super::payload_parts(&shown),
        metadata: None,
        extensions: Vec::new(),
        reference_task_ids: Vec::new(),
    };
    let params = json!({ "message": message, "configuration": { "returnImmediately": true } });
    outside.call(agent, "SendMessage", params).await?;
    app.call::<ops::Ack>(who, json!({ "id": id }))
        .await
        .map_err(said)?;
    Ok(Looked::Moved)
}

/// The agent's question, as a reply in the request's thread to its sender, once (the
/// question's message id keys it).
async fn ask(
    app: &App,
    who: Who<'_>,
    id: &str,
    question: String,
    message: Option<String>,
) -> Result<Looked, String> {
    let body = if question.is_empty() {
        "the outside agent asks for more input".to_owned()
    } else {
        question
    };
    let key = format!("a2a-input-{}", message.unwrap_or_else(|| body.clone()));
    let key: String = key.chars().take(128).collect();
    app.call::<ops::Reply>(
        who,
        json!({ "id": id, "type": "message", "body": body, "idempotency_key": key }),
    )
    .await
    .map(|sent| {
        // Asked once; while the question stands, the task has not moved.
        if sent.duplicate {
            Looked::Unmoved
        } else {
            Looked::Moved
        }
    })
    .map_err(|e| crate::error::ApiError::from(e).message)
}

/// The participant's step for a task that reached `state` (none while it is submitted
/// or working), with `note` as its note or reason.
async fn step(
    app: &App,
    who: Who<'_>,
    id: &str,
    state: TaskState,
    note: String,
) -> Result<Looked, String> {
    let reason = |fallback: &str| json!({ "id": id, "reason": if note.is_empty() { fallback } else { note.as_str() } });
    let done = match state {
        TaskState::Submitted | TaskState::Working | TaskState::InputRequired => {
            return Ok(Looked::Unmoved);
        }
        TaskState::Completed => {
            let mut input = json!({ "id": id });
            if !note.is_empty() {
                input["note"] = json!(note);
            }
            app.call::<ops::Complete>(who, input).await.map(|_| ())
        }
        TaskState::Rejected => app
            .call::<ops::Refuse>(who, reason("the outside agent rejected the task"))
            .await
            .map(|_| ()),
        TaskState::Failed | TaskState::Canceled => {
            let fallback = if state == TaskState::Failed {
                "the outside agent's task failed"
            } else {
                "the outside agent canceled the task"
            };
            app.call::<ops::HandBack>(who, reason(fallback))
                .await
                .map(|_| ())
        }
    };
    done.map(|()| Looked::Moved)
        .map_err(|e| crate::error::ApiError::from(e).message)
}

/// The text of A2A parts: text parts as they are, data parts as JSON, one a line, cut at
/// [`MAX_NOTE`] characters.
fn text_of(parts: Option<&Value>) -> String {
    let lines: Vec<String> = parts
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| match (p.get("text"), p.get("data")) {
            (Some(Value::String(t)), _) => Some(t.clone()),
            (_, Some(data)) => Some(data.to_string()),
            _ => None,
        })
        .collect();
    lines.join("\n").chars().take(MAX_NOTE).collect()
}

impl Outside {
    /// Calls `method` of the agent `agent` with `params`: its result, or why there is
    /// none (the agent's error, an HTTP status, no answer).
    async fn call(
        &self,
        agent: &OutsideAgent,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        let key = (self.key)(&agent.key_env).ok_or_else(|| {
            format!(
                "the environment variable {} holding its key is not set for baton serve",
                agent.key_env
            )
        })?;
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        let headers = vec![
            ("authorization", format!("Bearer {key}")),
            ("content-type", "application/json".to_owned()),
            (wire::VERSION_HEADER, wire::VERSION.to_owned()),
        ];
        let (status, bytes) = self
            .poster
            .exchange(
                &agent.url,
                headers,
                serde_json::to_vec(&body).expect("JSON"),
                MAX_ANSWER,
            )
            .await?;
        if status != 200 {
            return Err(format!("{method} was answered HTTP {status}"));
        }
        let answer: Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{method} was answered with something not JSON: {e}"))?;
        if let Some(error) = answer.get("error") {
            let text: String = error.to_string().chars().take(300).collect();
            return Err(format!("{method} failed: {text}"));
        }
        answer
            .get("result")
            .cloned()
            .ok_or_else(|| format!("{method} was answered without a result"))
    }
}
