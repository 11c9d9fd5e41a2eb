//! Outside A2A agents as participants (`baton agent add NAME --a2a URL --key-env VAR`): a
//! loop beside the HTTP listener that, for each such participant, hands the requests in
//! its inbox to its agent with `SendMessage` and brings the agent's task back by polling
//! `GetTask`.
//!
//! The loop acts as the participant through the one dispatcher, as any edge does, and
//! records the hand-over itself in events no operation writes (`baton_core::handover`):
//! a send is claimed in the log before it is made, so no two servers on one database, and
//! no server after a restart, make a second while one may be in flight; where the request
//! landed is recorded as soon as the agent says, and is all the loop trusts afterwards. A
//! claimed send whose answer never came (the server stopped, the connection was cut) is
//! found with `ListTasks` by its context, the request's id. Then the participant's steps
//! follow the task (`complete` with the task's artifacts as the note, `hand-back`,
//! `refuse`, a `reply` for a question — one a round — whose answer in the thread is sent
//! on to the task and acknowledged).
//!
//! Each look at a request runs on its own task, at most [`PER_AGENT`] at once for one
//! agent and [`PER_PROJECT`] for one project, so a slow or dead agent delays only its own
//! requests. Everything an agent answers is held to the boundary a participant's input is
//! (`baton_core::json::boundary`) before anything reads it. Keys are read only from the
//! environment variables the operator lists (`baton serve --agent-key-env`). Failures wait
//! longer each time, as webhooks do; the backoff lives in memory.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use baton_app::App;
use baton_app::doc::{Inbox, Show};
use baton_app::ops::{self, Who};
use baton_core::handover::{self, HandoverChange};
use baton_core::key::Scope;
use baton_core::participant::OutsideAgent;
use baton_core::{MessageType, Passname, ProjectName};
use baton_store::StoreError;
use serde_json::{Value, json};
use tokio::task::JoinSet;

use super::wire::{self, TaskState};
use crate::Server;
use crate::webhooks::{HttpPoster, POST_TIMEOUT, Unanswered};

/// The longest answer read from an outside agent.
const MAX_ANSWER: u64 = 1 << 20;
/// The longest note or reason brought back from an agent's task, in characters.
const MAX_NOTE: usize = 4000;
/// Where the receipt people read names the agent's task (the loop never reads it).
const TASK_MARK: &str = "#task=";
/// Levels an agent's answer puts around what Baton keeps of it (the JSON-RPC result, a
/// task, its artifacts, their parts), beyond a payload's own limit.
const ANSWER_LEVELS: usize = 8;
/// Looks in flight at once at one agent (its scheme, host and port)...
const PER_AGENT: usize = 4;
/// ...and for one project.
const PER_PROJECT: usize = 16;

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

/// The loop's memory: when each request (`project/id`) is next looked at, which looks are
/// in flight, and what was said once.
#[derive(Default)]
struct Memory {
    waits: HashMap<String, Wait>,
    flying: HashSet<String>,
    per_agent: HashMap<String, usize>,
    per_project: HashMap<ProjectName, usize>,
    said: HashSet<String>,
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

/// Why a call to an agent brought no result.
enum Failed {
    /// Nothing reached the agent.
    Unsent(String),
    /// The call may have reached it; its answer did not come.
    Lost(String),
    /// It answered, with no result: an HTTP status, a JSON-RPC error, not JSON.
    Answered(String),
    /// It answered with what the boundary refuses (a U+0000, too deep, an inexact
    /// number, a repeated key).
    Unfit(String),
    /// Baton's own store failed or refused.
    Store(String),
}

impl Failed {
    fn said(&self) -> &str {
        match self {
            Self::Unsent(s)
            | Self::Lost(s)
            | Self::Answered(s)
            | Self::Unfit(s)
            | Self::Store(s) => s,
        }
    }
}

impl From<StoreError> for Failed {
    fn from(e: StoreError) -> Self {
        Self::Store(crate::error::ApiError::from(e).message)
    }
}

/// One look at one message to an outside agent's participant.
struct Look {
    app: App,
    project: ProjectName,
    name: Passname,
    agent: OutsideAgent,
    key: String,
    id: String,
}

impl Look {
    fn who(&self) -> Who<'_> {
        Who {
            actor: self.name.as_str(),
            scope: Scope::Write,
        }
    }
}

/// Hands requests to outside agents and brings their tasks back, every `tick`, until
/// dropped (the caller aborts it at shutdown, and with it every look in flight; a send
/// cut short is found again by its claim).
pub async fn run(server: Arc<Server>, outside: Outside, tick: Duration) {
    let outside = Arc::new(outside);
    let memory = Arc::new(Mutex::new(Memory::default()));
    let mut looks = JoinSet::new();
    let mut turn = 0usize;
    loop {
        while looks.try_join_next().is_some() {}
        if let Err(e) = round(&server, &outside, &memory, &mut looks, &mut turn).await {
            eprintln!("baton serve: outside agents: {e}");
        }
        tokio::time::sleep(tick).await;
    }
}

/// One pass over the next projects in turn (no more than half of those a server keeps
/// open, as webhook rounds take them): each outside agent's participant's messages that
/// are due and not in flight start a look of their own, within the bounds.
async fn round(
    server: &Server,
    outside: &Arc<Outside>,
    memory: &Arc<Mutex<Memory>>,
    looks: &mut JoinSet<()>,
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
        if let Err(e) = project_round(server, outside, memory, looks, &project).await {
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
    outside: &Arc<Outside>,
    memory: &Arc<Mutex<Memory>>,
    looks: &mut JoinSet<()>,
    project: &ProjectName,
) -> Result<(), String> {
    let app = server.app(project).await.map_err(|e| e.to_string())?;
    let agents = app.outside_agents().await.map_err(|e| e.to_string())?;
    let admission = server.settings.outside_agents.clone().unwrap_or_default();
    for (name, agent) in agents {
        // Only a variable the operator listed is ever read.
        let key = if admission.allows_key(&agent.key_env) {
            (outside.key)(&agent.key_env)
        } else {
            None
        };
        let Some(key) = key else {
            let why = if admission.allows_key(&agent.key_env) {
                "is not set for baton serve"
            } else {
                "is not one baton serve reads keys from (its operator lists them with \
                 --agent-key-env)"
            };
            once(
                memory,
                format!(
                    "baton serve: project {project}: {name} stands for the outside agent at \
                     {}, whose key variable {} {why}; its requests wait",
                    agent.url, agent.key_env
                ),
            );
            continue;
        };
        let who = Who {
            actor: name.as_str(),
            scope: Scope::Write,
        };
        let inbox: Inbox = app
            .call::<ops::InboxList>(who, json!({ "limit": 100 }))
            .await
            .map_err(|e| e.to_string())?;
        let endpoint = baton_core::webhook::endpoint(&agent.url);
        for row in inbox
            .items
            .iter()
            .filter(|r| matches!(r.kind, MessageType::Request | MessageType::Message))
        {
            let waiting = format!("{project}/{}", row.id);
            {
                let mut m = memory.lock().unwrap_or_else(|e| e.into_inner());
                let due = m.waits.get(&waiting).is_none_or(|w| Instant::now() >= w.at);
                let room = m.per_agent.get(&endpoint).copied().unwrap_or(0) < PER_AGENT
                    && m.per_project.get(project).copied().unwrap_or(0) < PER_PROJECT;
                if !due || !room || m.flying.contains(&waiting) {
                    continue;
                }
                m.flying.insert(waiting.clone());
                *m.per_agent.entry(endpoint.clone()).or_default() += 1;
                *m.per_project.entry(project.clone()).or_default() += 1;
            }
            let look = Look {
                app: app.clone(),
                project: project.clone(),
                name: name.clone(),
                agent: agent.clone(),
                key: key.clone(),
                id: row.id.clone(),
            };
            let request = row.kind == MessageType::Request;
            let outside = Arc::clone(outside);
            let memory = Arc::clone(memory);
            let endpoint = endpoint.clone();
            looks.spawn(async move {
                // Released however the look ends, a panic included.
                let _flight = Flight {
                    memory: Arc::clone(&memory),
                    waiting: waiting.clone(),
                    endpoint,
                    project: look.project.clone(),
                };
                let looked = if request {
                    hand_over(&look, &outside).await
                } else {
                    answer(&look, &outside).await
                };
                let mut m = memory.lock().unwrap_or_else(|e| e.into_inner());
                match looked {
                    Ok(Looked::Moved) => {
                        m.waits.remove(&waiting);
                    }
                    Ok(Looked::Unmoved) => m.unmoved(waiting),
                    Err(e) => m.failed(&look, waiting, e.said().to_owned()),
                }
            });
        }
    }
    Ok(())
}

/// A look in flight: its place in the bounds, given back when dropped.
struct Flight {
    memory: Arc<Mutex<Memory>>,
    waiting: String,
    endpoint: String,
    project: ProjectName,
}

impl Drop for Flight {
    fn drop(&mut self) {
        let mut guard = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        let m = &mut *guard;
        m.flying.remove(&self.waiting);
        for count in [
            m.per_agent.get_mut(&self.endpoint),
            m.per_project.get_mut(&self.project),
        ]
        .into_iter()
        .flatten()
        {
            *count = count.saturating_sub(1);
        }
    }
}

/// Says `line` on stderr the first time only.
fn once(memory: &Mutex<Memory>, line: String) {
    let mut m = memory.lock().unwrap_or_else(|e| e.into_inner());
    if m.said.insert(line.clone()) {
        eprintln!("{line}");
    }
}

impl Memory {
    /// The task has not moved: the next look waits twice as long as the last, from
    /// [`FIRST_POLL`] to [`MAX_POLL`].
    fn unmoved(&mut self, key: String) {
        let count = self
            .waits
            .remove(&key)
            .filter(|w| w.said.is_empty())
            .map_or(0, |w| w.count);
        let wait = FIRST_POLL.saturating_mul(1 << count.min(10)).min(MAX_POLL);
        self.waits.insert(
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
    fn failed(&mut self, look: &Look, key: String, error: String) {
        let (count, said) = self
            .waits
            .remove(&key)
            .filter(|w| !w.said.is_empty())
            .map_or((0, String::new()), |w| (w.count, w.said));
        if said != error {
            eprintln!(
                "baton serve: project {}: message {} to {} (an outside agent): {error}; \
                 retrying with backoff",
                look.project, look.id, look.name
            );
        }
        let wait = baton_core::webhook::backoff(count);
        let at = Instant::now() + Duration::from_millis(u64::try_from(wait).unwrap_or(0));
        self.waits.insert(
            key,
            Wait {
                count: count.saturating_add(1),
                at,
                said: error,
            },
        );
    }
}

/// The time the claims are judged by (the store's clock, on this machine).
fn now() -> baton_core::Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as baton_core::Millis)
        .unwrap_or(0)
}

/// One step of request `look.id`: hand it over when no send was made, find the task a send
/// made when its answer never came, else ask the agent how its task stands; then take the
/// step the task's state calls for.
async fn hand_over(look: &Look, outside: &Outside) -> Result<Looked, Failed> {
    let app = &look.app;
    let id = look.id.as_str();
    let current = app.handover(id).await?;
    let task = match &current.landed {
        Some((url, task)) if *url == look.agent.url => {
            let answer = outside.call(look, "GetTask", json!({ "id": task }), POST_TIMEOUT);
            match answer.await {
                Ok(answer) => answer,
                Err(Failed::Unfit(problem)) => return unfit(look, &problem).await,
                Err(e) => return Err(e),
            }
        }
        Some((url, _)) => {
            return Err(Failed::Answered(format!(
                "it landed at the agent at {url}, which the participant no longer stands for"
            )));
        }
        None if current.in_flight(now()).is_some() => {
            // A send was claimed and its answer never recorded (a server stopped or cut
            // off while it waited, or one still waiting): the task it made, if any, is
            // found by its context, the request's id. None yet: look again later, and
            // send again only once no send under the claim can be in flight.
            match find_task(look, outside).await {
                Ok(Some(task)) => {
                    landed(look, &task).await?;
                    return Ok(Looked::Moved);
                }
                Ok(None) => return Ok(Looked::Unmoved),
                Err(Failed::Unfit(problem)) => return unfit(look, &problem).await,
                Err(e) => return Err(e),
            }
        }
        None => {
            // Reading it delivers it: the participant (its agent) has the payload.
            let shown: Show = app
                .call::<ops::ShowMessage>(look.who(), json!({ "id": id }))
                .await?;
            if !claim(look, id, id).await? {
                return Ok(Looked::Unmoved); // another server is handing it over
            }
            // Its own context: a send whose answer is lost is found by it.
            let sent = outside.send(look, id, &shown, Some(id.to_owned()), None);
            let answer = match sent.await {
                Ok(answer) => answer,
                Err(Failed::Unfit(problem)) => return unfit(look, &problem).await,
                // It may have reached the agent: the claim stands, and the task is looked
                // for by its context before anything is sent again.
                Err(e @ (Failed::Lost(_) | Failed::Store(_))) => return Err(e),
                Err(e @ (Failed::Unsent(_) | Failed::Answered(_))) => {
                    ended(look, id, id, false).await?;
                    return Err(e);
                }
            };
            if let Some(reply) = answer.get("message") {
                // The agent answered at once, without a task: its answer completes it.
                ended(look, id, id, true).await?;
                let note = text_of(reply.get("parts"));
                return step(look, TaskState::Completed, note).await;
            }
            let Some(task) = answer.get("task").cloned() else {
                return unfit(
                    look,
                    "it answered SendMessage with neither a task nor a message",
                )
                .await;
            };
            if !landed(look, &task).await? {
                return unfit(look, "its task has no usable id").await;
            }
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
        .map(|m| m.chars().take(128).collect::<String>());
    match state {
        TaskState::InputRequired => ask(look, note, question).await,
        _ => step(look, state, note).await,
    }
}

/// Claims the send of `message` (the request itself, or an answer in its thread) for
/// `request`: `false` when a send may still be in flight.
async fn claim(look: &Look, request: &str, message: &str) -> Result<bool, Failed> {
    let change = HandoverChange::Sending {
        request: request.to_owned(),
        participant: look.name.clone(),
        url: look.agent.url.clone(),
        message: message.to_owned(),
    };
    Ok(look.app.record_handover(look.name.as_str(), change).await?)
}

/// Records that request `look.id` landed in `task` (an agent's task object), and writes
/// the receipt people read; `false` when the task has no usable id.
async fn landed(look: &Look, task: &Value) -> Result<bool, Failed> {
    let Some(task_id) = task
        .get("id")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty() && t.len() <= 256 && !t.contains(char::is_control))
    else {
        return Ok(false);
    };
    look.app
        .record_handover(
            look.name.as_str(),
            HandoverChange::Landed {
                request: look.id.clone(),
                participant: look.name.clone(),
                url: look.agent.url.clone(),
                task: task_id.to_owned(),
            },
        )
        .await?;
    // For people: where it landed, as a receipt of the request. The loop never reads it
    // (any participant may write a receipt), so one written first stands.
    let artifact = format!("{}{TASK_MARK}{task_id}", look.agent.url);
    let _ = look
        .app
        .call::<ops::ReceiptWrite>(look.who(), json!({ "step": look.id, "artifact": artifact }))
        .await;
    Ok(true)
}

/// Records that the send of `message` for `request` ended (`taken`: the agent took it).
async fn ended(look: &Look, request: &str, message: &str, taken: bool) -> Result<(), Failed> {
    look.app
        .record_handover(
            look.name.as_str(),
            HandoverChange::Ended {
                request: request.to_owned(),
                participant: look.name.clone(),
                message: message.to_owned(),
                taken,
            },
        )
        .await?;
    Ok(())
}

/// The agent's task in the context of request `look.id`, if it made one: `ListTasks`.
async fn find_task(look: &Look, outside: &Outside) -> Result<Option<Value>, Failed> {
    let params = json!({ "contextId": look.id, "pageSize": 10 });
    let listed = outside
        .call(look, "ListTasks", params, POST_TIMEOUT)
        .await?;
    Ok(listed
        .get("tasks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|t| t.get("contextId").and_then(Value::as_str) == Some(look.id.as_str()))
        .cloned())
}

/// The agent answered what the boundary refuses, or what Baton cannot read: nothing of it
/// is kept, and the request is handed back saying why (in Baton's words only).
async fn unfit(look: &Look, problem: &str) -> Result<Looked, Failed> {
    let problem: String = problem
        .chars()
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .take(300)
        .collect();
    let reason = format!("the outside agent's answer was refused: {problem}");
    look.app
        .call::<ops::HandBack>(look.who(), json!({ "id": look.id, "reason": reason }))
        .await?;
    Ok(Looked::Moved)
}

/// A message to the participant in the thread of a request it handed over (the sender's
/// answer to the agent's question): claimed, sent on to the agent's task with
/// `SendMessage` (its id the `messageId`), then acknowledged. A message outside such a
/// thread is left to whoever reads the inbox.
async fn answer(look: &Look, outside: &Outside) -> Result<Looked, Failed> {
    let app = &look.app;
    let id = look.id.as_str();
    let thread: baton_app::doc::Thread = app
        .call::<ops::ThreadOf>(look.who(), json!({ "id": id }))
        .await?;
    let me = look.name.as_str();
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
    let current = app.handover(&request).await?;
    let Some((_, task)) = current.landed.clone() else {
        return Ok(Looked::Unmoved);
    };
    if current.answers.iter().any(|a| a == id) && current.in_flight(now()).is_none() {
        // Sent on and taken before (the acknowledgement was cut short).
        app.call::<ops::Ack>(look.who(), json!({ "id": id }))
            .await?;
        return Ok(Looked::Moved);
    }
    if !claim(look, &request, id).await? {
        return Ok(Looked::Unmoved);
    }
    let shown: Show = app
        .call::<ops::ShowMessage>(look.who(), json!({ "id": id }))
        .await?;
    match outside.send(look, id, &shown, None, Some(task)).await {
        // What it answers is read on the next look at the task.
        Ok(_) | Err(Failed::Unfit(_)) => {
            ended(look, &request, id, true).await?;
        }
        Err(e @ (Failed::Lost(_) | Failed::Store(_))) => return Err(e),
        Err(e @ (Failed::Unsent(_) | Failed::Answered(_))) => {
            ended(look, &request, id, false).await?;
            return Err(e);
        }
    }
    app.call::<ops::Ack>(look.who(), json!({ "id": id }))
        .await?;
    Ok(Looked::Moved)
}

/// The agent's question, as a reply in the request's thread to its sender: one a round,
/// a round ending when the sender's answer goes on to the task. The question is recorded
/// before it is posted, and posted with a key of its round, so a post cut short is made
/// once, later.
async fn ask(look: &Look, question: String, status: Option<String>) -> Result<Looked, Failed> {
    let app = &look.app;
    let current = app.handover(&look.id).await?;
    let round = current.round();
    if !current.asked_this_round() {
        if !current.asks_anew(status.as_deref()) {
            return Ok(Looked::Unmoved);
        }
        let recorded = app
            .record_handover(
                look.name.as_str(),
                HandoverChange::Asked {
                    request: look.id.clone(),
                    participant: look.name.clone(),
                    round,
                    status,
                },
            )
            .await?;
        if !recorded {
            return Ok(Looked::Unmoved);
        }
    }
    let body = if question.is_empty() {
        "the outside agent asks for more input".to_owned()
    } else {
        question
    };
    let key = format!("a2a-question-{}-{round}", look.id);
    let sent = app
        .call::<ops::Reply>(
            look.who(),
            json!({ "id": look.id, "type": "message", "body": body, "idempotency_key": key }),
        )
        .await?;
    // Asked once; while the question stands, the task has not moved.
    Ok(if sent.duplicate {
        Looked::Unmoved
    } else {
        Looked::Moved
    })
}

/// The participant's step for a task that reached `state` (none while it is submitted
/// or working), with `note` as its note or reason.
async fn step(look: &Look, state: TaskState, note: String) -> Result<Looked, Failed> {
    let app = &look.app;
    let who = look.who();
    let id = look.id.as_str();
    let reason = |fallback: &str| json!({ "id": id, "reason": if note.is_empty() { fallback } else { note.as_str() } });
    match state {
        TaskState::Submitted | TaskState::Working | TaskState::InputRequired => {
            return Ok(Looked::Unmoved);
        }
        TaskState::Completed => {
            let mut input = json!({ "id": id });
            if !note.is_empty() {
                input["note"] = json!(note);
            }
            app.call::<ops::Complete>(who, input).await.map(|_| ())?;
        }
        TaskState::Rejected => {
            app.call::<ops::Refuse>(who, reason("the outside agent rejected the task"))
                .await
                .map(|_| ())?;
        }
        TaskState::Failed | TaskState::Canceled => {
            let fallback = if state == TaskState::Failed {
                "the outside agent's task failed"
            } else {
                "the outside agent canceled the task"
            };
            app.call::<ops::HandBack>(who, reason(fallback))
                .await
                .map(|_| ())?;
        }
    }
    Ok(Looked::Moved)
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
    /// Sends message `id` as `shown` to `look`'s agent (`SendMessage`, not waiting for
    /// the work, but up to [`handover::SEND_TIMEOUT_MS`] for the answer), in `context`
    /// or to `task`.
    async fn send(
        &self,
        look: &Look,
        id: &str,
        shown: &Show,
        context: Option<String>,
        task: Option<String>,
    ) -> Result<Value, Failed> {
        let message = wire::Message {
            message_id: id.to_owned(),
            context_id: context,
            task_id: task,
            role: wire::Role::User,
            parts: super::payload_parts(shown),
            metadata: None,
            extensions: Vec::new(),
            reference_task_ids: Vec::new(),
        };
        let params = json!({ "message": message, "configuration": { "returnImmediately": true } });
        let timeout = Duration::from_millis(handover::SEND_TIMEOUT_MS.unsigned_abs());
        self.call(look, "SendMessage", params, timeout).await
    }

    /// Calls `method` of `look`'s agent with `params`, waiting at most `timeout`: its
    /// result, held to the boundary, or why there is none.
    async fn call(
        &self,
        look: &Look,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, Failed> {
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        let headers = vec![
            ("authorization", format!("Bearer {}", look.key)),
            ("content-type", "application/json".to_owned()),
            (wire::VERSION_HEADER, wire::VERSION.to_owned()),
        ];
        let (status, bytes) = self
            .poster
            .exchange(
                &look.agent.url,
                headers,
                serde_json::to_vec(&body).expect("JSON"),
                MAX_ANSWER,
                timeout,
            )
            .await
            .map_err(|e| match e {
                Unanswered::Unsent(why) => Failed::Unsent(why),
                Unanswered::Lost(why) => Failed::Lost(why),
            })?;
        if status != 200 {
            return Err(Failed::Answered(format!(
                "{method} was answered HTTP {status}"
            )));
        }
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| Failed::Answered(format!("{method} was answered with bytes not UTF-8")))?;
        // The same boundary a participant's input passes: nothing is read before it.
        let answer = baton_core::json::boundary(text, ANSWER_LEVELS).map_err(|e| match e {
            baton_core::json::Unfit::Refused(problem) => {
                Failed::Unfit(format!("its answer to {method}: {problem}"))
            }
            baton_core::json::Unfit::NotJson(e) => Failed::Answered(format!(
                "{method} was answered with something not JSON: {e}"
            )),
        })?;
        if let Some(error) = answer.get("error") {
            let text: String = error.to_string().chars().take(300).collect();
            return Err(Failed::Answered(format!("{method} failed: {text}")));
        }
        answer
            .get("result")
            .cloned()
            .ok_or_else(|| Failed::Answered(format!("{method} was answered without a result")))
    }
}
