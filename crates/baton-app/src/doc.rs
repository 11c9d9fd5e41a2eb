//! The documents Baton prints: each `baton/*@1` JSON document as a typed struct, defined
//! once, built from a use case's result, and serialized by every edge that returns it
//! (the CLI's `--json`, and MCP where a tool returns the same document). Each derives a
//! JSON Schema, so the HTTP server's OpenAPI document comes from the same types.
//!
//! Unknown stays unknown: a value that does not apply is `null`, never a default. Field
//! order is the printed order.

use std::collections::BTreeMap;

use baton_core::negotiation::{
    Choices, Ended, Negotiation, Resolution, Status as NegotiationStatus,
};
use baton_core::order::{Order, OrderChange, OrderStatus, allowed};
use baton_core::packet::Shown as SectionShown;
use baton_core::run::{Health, Progress, RunStatus};
use baton_core::state::{
    Alert, Constraint, Decision, Freshness, Note, ProjectState, Provenance, Receipt, ReceiptRecord,
    StateOp, Stream,
};
use baton_core::time::rfc3339;
use baton_core::{
    Change, DeliveryStatus, Envelope, Event, Millis, Participant, Passname, Power, Recipient,
    RequestStatus, Topic,
};
use baton_core::{MessageType, awl::Finding};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::RunRow;

/// A printed document: its versioned schema name travels with it.
pub trait Doc: Serialize {
    /// The `schema` field, e.g. `baton/inbox@1`.
    fn schema(&self) -> &'static str;
    /// Takes `schema` as its own, for a document whose schema is the operation's that
    /// answered it (a [`Recorded`]); every other document keeps its type's.
    fn named(&mut self, schema: &'static str) {
        let _ = schema;
    }
}

macro_rules! doc {
    ($type:ty, $schema:literal) => {
        impl Doc for $type {
            fn schema(&self) -> &'static str {
                $schema
            }
        }
    };
}

// ---- messages -----------------------------------------------------------------------------

/// Whose status a message row reports.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RowStatus {
    /// The caller's own delivery status (null when the caller is not a recipient).
    Caller(Option<DeliveryStatus>),
    /// Every recipient's, by name (the outbox).
    Recipients(Map<String, Value>),
}

/// A message preview: never the payload, only its excerpt.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct MessageRow {
    pub id: String,
    pub from: Passname,
    pub to: Vec<Passname>,
    #[serde(rename = "type")]
    pub kind: MessageType,
    pub topic: Topic,
    pub status: RowStatus,
    pub size: u64,
    pub created_at: String,
    pub excerpt: String,
    pub reply_to: Option<String>,
    pub depth: u32,
    pub replies: u32,
    /// The sender's own end; requests only.
    pub request_status: Option<RequestStatus>,
}

impl MessageRow {
    /// A row showing `who`'s own status.
    pub fn for_caller(env: &Envelope, who: Option<&Passname>) -> Self {
        Self::new(env, RowStatus::Caller(who.and_then(|w| env.status_for(w))))
    }

    /// A row showing every recipient's status.
    pub fn for_sender(env: &Envelope) -> Self {
        let each = env
            .to
            .iter()
            .map(|r| (r.name.to_string(), Value::from(r.status.as_str())))
            .collect();
        Self::new(env, RowStatus::Recipients(each))
    }

    fn new(env: &Envelope, status: RowStatus) -> Self {
        Self {
            id: env.id.clone(),
            from: env.from.clone(),
            to: env.recipients(),
            kind: env.kind,
            topic: env.topic.clone(),
            status,
            size: env.size,
            created_at: rfc3339(env.created_at),
            excerpt: env.excerpt.clone(),
            reply_to: env.reply_to.clone(),
            depth: env.depth,
            replies: env.replies,
            request_status: env.request_status,
        }
    }
}

/// What `baton inbox` prints: what `participant` owes.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Inbox {
    pub participant: Passname,
    pub items: Vec<MessageRow>,
    /// The cursor of the next page (`--cursor`); null on the last page.
    #[serde(default)]
    pub next: Option<String>,
}
doc!(Inbox, "baton/inbox@1");

impl Inbox {
    pub fn new(me: &Passname, items: &[Envelope], next: Option<String>) -> Self {
        Self {
            participant: me.clone(),
            next,
            items: items
                .iter()
                .map(|e| MessageRow::for_caller(e, Some(me)))
                .collect(),
        }
    }
}

/// What `baton outbox` prints: the requests `participant` waits on, each recipient's
/// status.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Outbox {
    pub participant: Passname,
    pub items: Vec<MessageRow>,
    /// The cursor of the next page (`--cursor`); null on the last page.
    #[serde(default)]
    pub next: Option<String>,
}
doc!(Outbox, "baton/outbox@1");

impl Outbox {
    pub fn new(me: &Passname, items: &[Envelope], next: Option<String>) -> Self {
        Self {
            participant: me.clone(),
            next,
            items: items.iter().map(MessageRow::for_sender).collect(),
        }
    }
}

/// One recipient of a message: its status, and when the status was set.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RecipientRow {
    pub name: Passname,
    pub status: DeliveryStatus,
    /// The time of the event that set `status` (the send's, while it is the first).
    pub changed_at: String,
}

impl RecipientRow {
    /// Every recipient of `env`, in the order they were addressed.
    pub fn all(env: &Envelope) -> Vec<Self> {
        env.to.iter().map(Self::from).collect()
    }
}

impl From<&Recipient> for RecipientRow {
    fn from(r: &Recipient) -> Self {
        Self {
            name: r.name.clone(),
            status: r.status,
            changed_at: rfc3339(r.changed_at),
        }
    }
}

/// A message of a thread: its row for the caller, and every recipient's status.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ThreadRow {
    #[serde(flatten)]
    pub message: MessageRow,
    pub recipients: Vec<RecipientRow>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Thread {
    pub id: String,
    pub items: Vec<ThreadRow>,
}
doc!(Thread, "baton/thread@1");

impl Thread {
    /// The thread `id` belongs to, as `reader` sees it.
    pub fn new(id: &str, items: &[Envelope], reader: Option<&Passname>) -> Self {
        Self {
            id: id.to_owned(),
            items: items
                .iter()
                .map(|e| ThreadRow {
                    message: MessageRow::for_caller(e, reader),
                    recipients: RecipientRow::all(e),
                })
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Search {
    pub items: Vec<MessageRow>,
    /// The cursor of the next page; null on the last page.
    pub next: Option<String>,
}
doc!(Search, "baton/search@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Truncated {
    pub shown_bytes: usize,
    pub total_bytes: usize,
}

/// What `baton show` prints: the row, each recipient's status and the payload — or,
/// when cut at the byte cap, the text shown and both sizes.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Show {
    #[serde(flatten)]
    pub message: MessageRow,
    pub recipients: Vec<RecipientRow>,
    pub payload: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_text: Option<String>,
    pub truncated: Option<Truncated>,
    /// The idempotency key the send named; shown to its sender only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}
doc!(Show, "baton/show@1");

impl Show {
    pub fn new(shown: &crate::Shown, reader: Option<&Passname>) -> Self {
        let env = &shown.fetched.envelope;
        let cut = shown.is_cut();
        // A key is its sender's: only the sender is shown it.
        let own = reader == Some(&env.from);
        Self {
            idempotency_key: env.idempotency_key.clone().filter(|_| own),
            message: MessageRow::for_caller(env, reader),
            recipients: RecipientRow::all(env),
            payload: (!cut).then(|| shown.fetched.payload.clone()),
            payload_text: cut.then(|| shown.text.clone()),
            truncated: cut.then_some(Truncated {
                shown_bytes: shown.text.len(),
                total_bytes: shown.total_bytes,
            }),
        }
    }
}

/// A send's result: the new message's id, or the original's for a duplicate.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Sent {
    pub id: String,
    /// True when `id` is an earlier identical send's.
    pub duplicate: bool,
}
doc!(Sent, "baton/send@1");

impl From<baton_store::Sent> for Sent {
    fn from(s: baton_store::Sent) -> Self {
        Self {
            id: s.id,
            duplicate: s.duplicate,
        }
    }
}

/// A status step's result: which end moved, from what to what, and the reply that
/// carried its note.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Step {
    pub id: String,
    /// `recipient` or `sender`.
    pub end: String,
    pub from: String,
    pub status: String,
    pub reply: Option<String>,
}
doc!(Step, "baton/step@1");

impl From<baton_store::Stepped> for Step {
    fn from(s: baton_store::Stepped) -> Self {
        Self {
            id: s.id,
            end: s.end.as_str().to_owned(),
            from: s.from.to_owned(),
            status: s.status.to_owned(),
            reply: s.reply,
        }
    }
}

// ---- participants -------------------------------------------------------------------------

/// A participant's authority: what it may do and where.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PolicyView {
    /// Its powers: request, send, accept, approve, effects.
    pub may: Vec<Power>,
    /// The topics they reach (`billing`, `billing-*`); absent, every topic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topics: Option<Vec<String>>,
    /// True when it is the role's default (it follows the role).
    pub default: bool,
}

impl PolicyView {
    pub fn of(p: &Participant) -> Self {
        let policy = p.policy();
        Self {
            may: policy.may.iter().copied().collect(),
            topics: policy
                .topics
                .map(|t| t.iter().map(|p| p.as_str().to_owned()).collect()),
            default: p.policy.is_none(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AgentAdded {
    pub name: Passname,
    pub role: String,
    /// False when it was registered already, with the same role.
    pub created: bool,
    /// True when the policy given was set (it differed from the one held).
    pub policy_set: bool,
    pub policy: PolicyView,
    /// The outside A2A agent it stands for, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a2a: Option<baton_core::participant::OutsideAgent>,
}
doc!(AgentAdded, "baton/agent-add@1");

impl AgentAdded {
    pub fn new(added: &baton_store::Added) -> Self {
        let p = &added.participant;
        Self {
            name: p.name.clone(),
            role: p.role.clone(),
            created: added.created,
            policy_set: added.policy_set,
            policy: PolicyView::of(p),
            a2a: None,
        }
    }
}

/// A participant's policy after a change.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AgentPolicy {
    pub name: Passname,
    pub role: String,
    pub policy: PolicyView,
}
doc!(AgentPolicy, "baton/agent-policy@1");

impl AgentPolicy {
    pub fn new(p: &Participant) -> Self {
        Self {
            name: p.name.clone(),
            role: p.role.clone(),
            policy: PolicyView::of(p),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AgentRow {
    pub name: Passname,
    pub role: String,
    pub added_at: String,
    pub policy: PolicyView,
    /// The outside A2A agent it stands for, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a2a: Option<baton_core::participant::OutsideAgent>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Agents {
    pub items: Vec<AgentRow>,
}
doc!(Agents, "baton/agent-list@1");

impl Agents {
    /// The participants `all`, each with the outside agent `outside` names for it.
    pub fn new(
        all: &[Participant],
        outside: &[(Passname, baton_core::participant::OutsideAgent)],
    ) -> Self {
        Self {
            items: all
                .iter()
                .map(|p| AgentRow {
                    name: p.name.clone(),
                    role: p.role.clone(),
                    added_at: rfc3339(p.added_at),
                    policy: PolicyView::of(p),
                    a2a: outside
                        .iter()
                        .find(|(name, _)| *name == p.name)
                        .map(|(_, agent)| agent.clone()),
                })
                .collect(),
        }
    }
}

/// One action refused as beyond authority.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SecurityEventRow {
    /// The event's place in the log: pass it as `before` for the page after this one.
    pub seq: i64,
    pub at: String,
    pub participant: Passname,
    /// What was tried: a power (`request`, `approve` …) or what a key's scope did not allow.
    pub action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    pub code: String,
    pub reason: String,
    /// How many times it was refused: this event and the repeats counted on it (the same
    /// refusal again within a minute of it).
    pub count: i64,
    /// When it was last refused.
    pub last_at: String,
}

/// The newest security events, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SecurityEvents {
    pub items: Vec<SecurityEventRow>,
}
doc!(SecurityEvents, "baton/security-events@1");

impl SecurityEvents {
    pub fn new(events: &[Event], repeats: &[baton_store::Repeats]) -> Self {
        Self {
            items: events
                .iter()
                .filter_map(|e| match &e.change {
                    Change::Denied(d) => {
                        let repeated = repeats.iter().find(|r| r.seq == e.seq);
                        Some(SecurityEventRow {
                            seq: e.seq,
                            at: rfc3339(e.at),
                            participant: d.participant.clone(),
                            action: d.action.clone(),
                            topic: d.topic.as_ref().map(|t| t.to_string()),
                            code: d.code.clone(),
                            reason: d.reason.clone(),
                            count: 1 + repeated.map_or(0, |r| r.count),
                            last_at: rfc3339(repeated.map_or(e.at, |r| r.last_at.max(e.at))),
                        })
                    }
                    _ => None,
                })
                .collect(),
        }
    }
}

/// A participant's webhook after a change.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct WebhookSet {
    pub participant: Passname,
    /// The URL now; absent when it was removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The signing secret: in this answer only (it signs `x-baton-signature`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}
doc!(WebhookSet, "baton/webhook-set@1");

/// Where one webhook's delivery stands (never its secret).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct WebhookRow {
    pub participant: Passname,
    pub url: String,
    /// Everything up to this seq was told or did not concern it.
    pub cursor: i64,
    /// Failed attempts in a row.
    pub failures: u32,
    /// When it is tried again, after a failure.
    pub next_attempt_at: Option<String>,
    pub last_error: Option<String>,
    pub delivered_at: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Webhooks {
    pub items: Vec<WebhookRow>,
}
doc!(Webhooks, "baton/webhooks@1");

impl Webhooks {
    pub fn new(all: &[baton_core::webhook::Webhook]) -> Self {
        Self {
            items: all
                .iter()
                .map(|w| WebhookRow {
                    participant: w.participant.clone(),
                    url: w.url.clone(),
                    cursor: w.cursor,
                    failures: w.failures,
                    next_attempt_at: (w.failures > 0).then(|| rfc3339(w.next_at)),
                    last_error: w.last_error.clone(),
                    delivered_at: w.delivered_at.map(rfc3339),
                })
                .collect(),
        }
    }
}

// ---- project memory -----------------------------------------------------------------------

/// What a state change recorded (`focus`, `stream`, `decide`, `constrain`, `note`,
/// `session end`): the ids it wrote and the generation after.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Recorded {
    #[serde(skip)]
    pub schema: &'static str,
    pub recorded: Vec<String>,
    pub generation: Option<i64>,
}

impl Doc for Recorded {
    fn schema(&self) -> &'static str {
        self.schema
    }

    fn named(&mut self, schema: &'static str) {
        self.schema = schema;
    }
}

impl Recorded {
    /// `schema` is the command's: `baton/focus@1`, `baton/decide@1`, ….
    pub fn new(schema: &'static str, recorded: &crate::Recorded) -> Self {
        Self {
            schema,
            recorded: recorded.ids(),
            generation: recorded.generation(),
        }
    }
}

/// A note with its freshness.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct NoteRow {
    #[serde(flatten)]
    pub note: Note,
    #[serde(flatten)]
    pub freshness: Freshness,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct DependencyChange {
    pub text: String,
    pub written: Provenance,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Expected {
    pub step: String,
    pub deadline: String,
}

/// What `baton state show` prints.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct State {
    pub generation: i64,
    pub focus: Option<String>,
    pub streams: Vec<Stream>,
    pub decisions: Vec<Decision>,
    pub constraints: Vec<Constraint>,
    pub notes: Vec<NoteRow>,
    pub dependency_changes: Vec<DependencyChange>,
    pub expected_receipts: Vec<Expected>,
}
doc!(State, "baton/state@1");

impl State {
    pub fn new(state: &ProjectState, notes: Vec<(Note, Freshness)>) -> Self {
        Self {
            generation: state.generation,
            focus: state.focus.as_ref().map(|(t, _)| t.clone()),
            streams: state.streams.values().cloned().collect(),
            decisions: state.decisions.clone(),
            constraints: state.constraints.clone(),
            notes: notes
                .into_iter()
                .map(|(note, freshness)| NoteRow { note, freshness })
                .collect(),
            dependency_changes: state
                .dependency_changes
                .iter()
                .map(|(text, written)| DependencyChange {
                    text: text.clone(),
                    written: written.clone(),
                })
                .collect(),
            expected_receipts: state
                .expected
                .iter()
                .map(|(step, deadline)| Expected {
                    step: step.clone(),
                    deadline: rfc3339(*deadline),
                })
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StateRendered {
    pub path: String,
    pub generation: i64,
    pub bytes: usize,
}
doc!(StateRendered, "baton/state-render@1");

/// A valid STATE.md (the other verdicts are errors).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Checked {
    pub file: String,
    pub verdict: String,
    pub generation: i64,
}
doc!(Checked, "baton/check@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StateImport {
    pub dry_run: bool,
    pub changes: Vec<StateOp>,
    pub recorded: Vec<String>,
}
doc!(StateImport, "baton/state-import@1");

/// The resume packet: its text (what an agent reads), with per-section counts.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Resume {
    pub participant: Passname,
    pub generation: i64,
    pub max_bytes: usize,
    pub bytes: usize,
    pub sections: Vec<Section>,
    pub text: String,
}
doc!(Resume, "baton/resume@1");

/// What the packet showed of one section.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Section {
    pub title: String,
    pub shown: usize,
    pub total: usize,
}

impl From<SectionShown> for Section {
    fn from(s: SectionShown) -> Self {
        Self {
            title: s.title.to_owned(),
            shown: s.shown,
            total: s.total,
        }
    }
}

impl Resume {
    pub fn new(me: &Passname, max_bytes: usize, r: crate::recall::Resume) -> Self {
        Self {
            participant: me.clone(),
            generation: r.generation,
            max_bytes,
            bytes: r.packet.text.len(),
            sections: r.packet.sections.into_iter().map(Section::from).collect(),
            text: r.packet.text,
        }
    }
}

// ---- receipts and alerts ------------------------------------------------------------------

/// A receipt just written.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReceiptWritten {
    pub receipt: ReceiptRecord,
    pub generation: Option<i64>,
}
doc!(ReceiptWritten, "baton/receipt@1");

/// A receipt as stored, with who wrote it when.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReceiptShown {
    pub receipt: Receipt,
}
doc!(ReceiptShown, "baton/receipt@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct VerifiedRow {
    pub step: String,
    pub verdict: String,
    pub artifact: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReceiptsVerified {
    pub verified: Vec<VerifiedRow>,
}
doc!(ReceiptsVerified, "baton/receipt-verify@1");

impl ReceiptsVerified {
    pub fn new(all: &[crate::Verified]) -> Self {
        Self {
            verified: all
                .iter()
                .map(|v| VerifiedRow {
                    step: v.step.clone(),
                    verdict: v.verdict.as_str().to_owned(),
                    artifact: v.artifact.clone(),
                })
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AlertAcked {
    pub id: String,
}
doc!(AlertAcked, "baton/alert-ack@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Alerts {
    pub items: Vec<Alert>,
}
doc!(Alerts, "baton/alerts@1");

// ---- the run ledger -----------------------------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Tokens {
    pub input: Option<u64>,
    pub cached_input: Option<u64>,
    pub output: Option<u64>,
    /// Input plus output, when both were reported.
    pub total: Option<u64>,
}

/// A run as `baton runs` lists it: recorded facts, and health derived now.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RunDoc {
    pub id: String,
    pub status: RunStatus,
    /// Derived now for a live run; `null` once it ended (done, failed, stopped).
    pub health: Option<Health>,
    pub participant: Option<String>,
    pub order: Option<String>,
    pub agent: Option<String>,
    pub command: Vec<String>,
    pub host: Option<String>,
    pub pid: Option<u32>,
    pub monitor_pid: Option<u32>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub reason: Option<String>,
    pub progress: Option<Progress>,
    pub tokens: Option<Tokens>,
    pub budget_tokens: Option<u64>,
    pub session: Option<String>,
    /// `wrapper` (`baton run`), `untracked`, `session` or `helper` (seen through hooks;
    /// their pid is unknown, so nothing offers to stop them).
    pub source: baton_core::run::Source,
    /// A helper's session or run.
    pub parent: Option<String>,
    /// A helper's kind, as its agent names it.
    pub agent_type: Option<String>,
    /// The tools its hooks named (the first 32).
    pub tools: Vec<String>,
    /// Its agent's `notify` reached Baton but none of its hooks did: the agent skipped
    /// them (Codex runs only hooks a person has reviewed and trusted).
    #[serde(default)]
    pub hooks_skipped: bool,
    /// A session's or run's helpers, counted (on `status` and the board).
    pub helpers: Option<HelperCounts>,
    /// What it is, in a line: its command, or for a session or helper what its hooks say
    /// (its kind, its helpers, the tools it used).
    pub what: String,
    pub registered_at: String,
    pub started_at: Option<String>,
    pub heartbeat_at: Option<String>,
    pub last_event_at: String,
    pub ended_at: Option<String>,
    /// How long since its last event, while it has not ended.
    pub idle_ms: Option<i64>,
}

impl RunDoc {
    pub fn new(row: &RunRow, now: Millis) -> Self {
        let run = &row.run;
        Self {
            id: run.id.clone(),
            status: run.status,
            health: row.health,
            participant: run.participant.clone(),
            order: run.order.clone(),
            agent: run.agent.clone(),
            command: run.command.clone(),
            host: run.host.clone(),
            pid: run.process.map(|p| p.pid),
            monitor_pid: run.monitor.map(|p| p.pid),
            exit_code: run.exit_code,
            signal: run.signal,
            reason: run.reason.clone(),
            progress: run.progress,
            tokens: run.tokens.map(|t| Tokens {
                input: t.input,
                cached_input: t.cached_input,
                output: t.output,
                total: t.total(),
            }),
            budget_tokens: run.budget_tokens,
            session: run.session.clone(),
            source: run.source,
            parent: run.parent.clone(),
            agent_type: run.agent_type.clone(),
            tools: run.tools.clone(),
            hooks_skipped: baton_core::run::hooks_skipped(run),
            helpers: None,
            what: describe(run, None),
            registered_at: rfc3339(run.registered_at),
            started_at: run.started_at.map(rfc3339),
            heartbeat_at: run.heartbeat_at.map(rfc3339),
            last_event_at: rfc3339(run.last_event_at),
            ended_at: run.ended_at.map(rfc3339),
            idle_ms: run
                .ended_at
                .is_none()
                .then(|| (now - run.last_event_at).max(0)),
        }
    }
}

impl RunDoc {
    /// Where it comes from, in a word: `wrapper`, `untracked`, or the agent's
    /// `claude-session`, `codex-helper`, …
    pub fn source_label(&self) -> String {
        use baton_core::run::Source;
        match (self.source, self.agent.as_deref()) {
            (Source::Session | Source::Helper, Some(agent)) => {
                format!("{agent}-{}", self.source.as_str())
            }
            (source, _) => source.as_str().to_owned(),
        }
    }

    /// With its helpers counted.
    pub fn with_helpers(mut self, run: &baton_core::run::Run, helpers: HelperCounts) -> Self {
        self.what = describe(run, Some(&helpers));
        self.helpers = Some(helpers);
        self
    }
}

/// A run in a line: its command; for a session or helper (which has none), its kind, its
/// helpers and the tools it used.
fn describe(run: &baton_core::run::Run, helpers: Option<&HelperCounts>) -> String {
    let mut parts: Vec<String> = Vec::new();
    // First, so a narrow column still shows it.
    if baton_core::run::hooks_skipped(run) {
        parts.push("hooks skipped".to_owned());
    }
    if !run.command.is_empty() {
        parts.push(run.command.join(" "));
    }
    if run.command.is_empty() {
        parts.extend(run.agent_type.clone());
    }
    if let Some(h) = helpers {
        parts.push(format!(
            "helpers {} active, {} idle, {} ended",
            h.active, h.idle, h.ended
        ));
    }
    if run.command.is_empty() && !run.tools.is_empty() {
        parts.push(format!("tools: {}", run.tools.join(", ")));
    }
    parts.join(" · ")
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Runs {
    pub items: Vec<RunDoc>,
    /// With `--all`, the cursor of the next page (`--cursor`); null on the last page and
    /// in the default view.
    pub next: Option<String>,
}
doc!(Runs, "baton/runs@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReapedRun {
    pub run: String,
    /// Messages its participant had fetched during the run, back to pending.
    pub resurfaced: Vec<String>,
    /// Alerts raised (an alert already open is not raised again).
    pub alerts: Vec<String>,
}

/// What one reaper pass did.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Reap {
    pub lost: Vec<ReapedRun>,
    pub untracked: Vec<String>,
    pub gone: Vec<String>,
    pub overdue: Vec<String>,
    /// Sessions and helpers seen through hooks that fell silent, now ended.
    pub ended: Vec<String>,
    /// Alerts raised for ended sessions whose participant holds work.
    pub held: Vec<String>,
}
doc!(Reap, "baton/reap@1");

impl From<&crate::Pass> for Reap {
    fn from(p: &crate::Pass) -> Self {
        Self {
            lost: p
                .lost
                .iter()
                .map(|r| ReapedRun {
                    run: r.run.clone(),
                    resurfaced: r.resurfaced.clone(),
                    alerts: r.alerts.clone(),
                })
                .collect(),
            untracked: p.untracked.clone(),
            gone: p.gone.clone(),
            overdue: p.overdue.clone(),
            ended: p.ended.clone(),
            held: p.held.clone(),
        }
    }
}

/// What a hook prints: the resume packet when it injects one, else nothing.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Hook {
    pub text: String,
}
doc!(Hook, "baton/hook@1");

// ---- orders -------------------------------------------------------------------------------

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
}

impl OrderRow {
    pub fn new(o: &Order, now: Millis) -> Self {
        let status = o.status_at(now);
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
            order: OrderRow::new(&view.order, now),
            document: view.document.clone(),
            report: view.report.clone(),
            events: EventRow::all(&view.events),
            effects: EffectRow::all(&view.effects),
            tool_calls: view.effects.forwarded.clone(),
        }
    }
}

/// A held call: its placeholder, tool, arguments (secrets masked), where it stands and
/// the size of its result once it ran.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EffectRow {
    #[serde(rename = "ref")]
    pub reference: String,
    pub tool: String,
    pub arguments: Map<String, Value>,
    /// held, uncertain (started, no recorded end), ran, failed or dropped.
    pub status: baton_core::effect::EffectStatus,
    pub result_bytes: Option<usize>,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// The upstream server command it runs through.
    pub upstream: Vec<String>,
}

impl EffectRow {
    pub fn new(e: &baton_core::effect::Effect) -> Self {
        let error = e.result.as_ref().and_then(|r| match r.get("error") {
            Some(Value::String(why)) => Some(why.clone()),
            _ if e.status == baton_core::effect::EffectStatus::Failed => {
                Some(baton_core::effect::failure(r))
            }
            _ => None,
        });
        Self {
            reference: e.reference.clone(),
            tool: e.tool.clone(),
            arguments: baton_core::effect::masked(&e.arguments),
            status: e.status,
            result_bytes: e.result.as_ref().map(baton_core::effect::size),
            error,
            upstream: e.upstream.clone(),
        }
    }

    pub fn all(effects: &baton_core::effect::Effects) -> Vec<Self> {
        effects.effects.iter().map(Self::new).collect()
    }
}

/// An approval: the step it recorded (none when it went on with an approved order's
/// effects), each effect after it, and where the sequence stopped, if it did.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Approved {
    pub order: OrderRow,
    pub events: Vec<EventRow>,
    pub effects: Vec<EffectRow>,
    /// The effect that failed or is uncertain, which stopped the sequence.
    pub stopped_at: Option<String>,
}
doc!(Approved, "baton/approval@1");

impl Approved {
    pub fn new(approval: &crate::Approval, now: Millis) -> Self {
        Self {
            order: OrderRow::new(&approval.order, now),
            events: approval
                .written
                .as_ref()
                .map(|w| EventRow::all(&w.events))
                .unwrap_or_default(),
            effects: EffectRow::all(&approval.effects),
            stopped_at: approval.stopped.as_ref().map(|e| e.reference.clone()),
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

/// What is new for the caller since a point in the log, and where to look next.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct News {
    /// Pass this as `after` next time.
    pub after: i64,
    pub events: Vec<EventRow>,
}
doc!(News, "baton/news@1");

impl From<&crate::News> for News {
    fn from(n: &crate::News) -> Self {
        Self {
            after: n.after,
            events: EventRow::all(&n.events),
        }
    }
}

// ---- negotiations -------------------------------------------------------------------------

/// One offer of a negotiation's trail: who proposed which outcome, and each party's answer.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OfferRow {
    pub round: u32,
    /// A party's passname, or `@mediator`.
    pub proposer: String,
    /// Issue → option.
    pub outcome: Map<String, Value>,
    /// Party → `accept`, `reject` or `veto`, in passname order.
    pub answers: Map<String, Value>,
}

/// A veto used in the trail: who vetoed which partial outcome (never why).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct VetoRow {
    pub party: String,
    /// Issue → option.
    pub vetoed: Map<String, Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct NegotiationParty {
    pub name: Passname,
    /// Whether its position is in (never what it holds).
    pub submitted: bool,
    /// Not a participant: declared external in the spec.
    pub external: bool,
}

/// A settled sitting of a negotiation opened again since.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct NegotiationSitting {
    /// `agreement` or `walk_away`.
    pub result: NegotiationStatus,
    /// The agreed outcome, issue → option; null on a walk-away.
    pub outcome: Option<Map<String, Value>>,
    pub opened_at: String,
    pub settled_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct NegotiationIssue {
    pub name: String,
    pub options: Vec<String>,
}

/// A negotiation as anyone may read it: the spec's public part, who has submitted, the
/// trail and the result. Never a weight, a utility or a floor.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct NegotiationShown {
    pub id: String,
    /// `open` (waiting for positions), `agreement` or `walk_away`.
    pub result: NegotiationStatus,
    /// The agreed outcome, issue → option; null unless agreed.
    pub outcome: Option<Map<String, Value>>,
    /// On a walk-away: the issues the offers could not agree on.
    pub unsettled: Vec<String>,
    /// On a walk-away: who vetoed what.
    pub vetoes: Vec<VetoRow>,
    /// On a walk-away: `no_zone` (no feasible outcome meets every floor and veto) or
    /// `round_limit` (the limit came first); null otherwise.
    pub ended: Option<Ended>,
    pub trail: Vec<OfferRow>,
    pub parties: Vec<NegotiationParty>,
    pub issues: Vec<NegotiationIssue>,
    /// The round limit.
    pub rounds: u32,
    pub opened_at: String,
    pub settled_at: Option<String>,
    /// The sittings settled before this one under the same id, oldest first.
    pub earlier: Vec<NegotiationSitting>,
}
doc!(NegotiationShown, "baton/negotiation@1");

fn choices_map(choices: &Choices) -> Map<String, Value> {
    choices
        .0
        .iter()
        .map(|(issue, option)| (issue.clone(), Value::from(option.as_str())))
        .collect()
}

impl NegotiationShown {
    pub fn new(n: &Negotiation) -> Self {
        let settlement = n.settlement.as_ref();
        let (outcome, unsettled, vetoes, ended) = match settlement.map(|s| &s.resolution) {
            Some(Resolution::Agreement { outcome }) => {
                (Some(choices_map(outcome)), Vec::new(), Vec::new(), None)
            }
            Some(Resolution::WalkAway {
                ended,
                unsettled,
                vetoes,
            }) => (
                None,
                unsettled.clone(),
                vetoes
                    .iter()
                    .map(|v| VetoRow {
                        party: v.party.clone(),
                        vetoed: choices_map(&v.vetoed),
                    })
                    .collect(),
                Some(*ended),
            ),
            None => (None, Vec::new(), Vec::new(), None),
        };
        let trail = settlement
            .map(|s| {
                s.trail
                    .iter()
                    .map(|o| OfferRow {
                        round: o.round,
                        proposer: o.proposer.clone(),
                        outcome: choices_map(&o.outcome),
                        answers: o
                            .answers
                            .iter()
                            .map(|(party, a)| (party.clone(), Value::from(a.as_str())))
                            .collect(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            id: n.id().to_owned(),
            result: n.status(),
            outcome,
            unsettled,
            vetoes,
            ended,
            trail,
            parties: n
                .spec
                .parties
                .iter()
                .map(|p| NegotiationParty {
                    name: p.name.clone(),
                    submitted: n.has_submitted(p.name.as_str()),
                    external: p.external,
                })
                .collect(),
            issues: n
                .spec
                .issues
                .iter()
                .map(|i| NegotiationIssue {
                    name: i.name.clone(),
                    options: i.options.clone(),
                })
                .collect(),
            rounds: n.spec.rounds,
            opened_at: rfc3339(n.opened_at),
            settled_at: n.settled_at.map(rfc3339),
            earlier: n
                .earlier
                .iter()
                .map(|s| NegotiationSitting {
                    result: s.settlement.status(),
                    outcome: match &s.settlement.resolution {
                        Resolution::Agreement { outcome } => Some(choices_map(outcome)),
                        Resolution::WalkAway { .. } => None,
                    },
                    opened_at: rfc3339(s.opened_at),
                    settled_at: rfc3339(s.settled_at),
                })
                .collect(),
        }
    }
}

/// What `baton import` did.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ImportDone {
    pub imported: usize,
    /// Events the log held already (same id): left as they were.
    pub skipped: usize,
    /// Events never imported: keys (issue them again where they are used), and on a
    /// merge the setup (policy, outside agent, webhook) of participants this project had
    /// already.
    pub left_out: usize,
    /// The log's decisions, constraints, notes and alerts that have another id in this
    /// project (a merge, where this project used their ids already): the log's id → this
    /// project's. What the log says of them follows.
    pub renamed: std::collections::BTreeMap<String, String>,
}
doc!(ImportDone, "baton/import@1");

// ---- handoff documents --------------------------------------------------------------------

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HandoffCheck {
    pub findings: Vec<Finding>,
}
doc!(HandoffCheck, "baton/handoff-check@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HandoffTemplate {
    /// `order` or `report`.
    pub kind: String,
    pub template: Value,
}
doc!(HandoffTemplate, "baton/handoff-template@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HandoffRender {
    pub markdown: String,
}
doc!(HandoffRender, "baton/handoff-render@1");

/// What `baton evidence run` says on stderr: the step its receipt is under.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EvidenceRun {
    pub step: String,
    pub exit_code: i32,
    pub receipt: ReceiptRecord,
}
doc!(EvidenceRun, "baton/evidence-run@1");

// ---- keys and projects --------------------------------------------------------------------

/// Who a key acts as (`GET …/me`): the command line asks it once over a server.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Caller {
    pub participant: Passname,
    pub scope: baton_core::key::Scope,
}
doc!(Caller, "baton/caller@1");

/// A key as `baton key list` shows it: never its token.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct KeyRow {
    pub id: String,
    pub participant: Passname,
    pub scope: baton_core::key::Scope,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub revoked_at: Option<String>,
    /// When it last proved its participant (recorded to within a minute); `null` if never.
    pub last_used_at: Option<String>,
    /// Whether it still proves its participant now.
    pub live: bool,
}

impl KeyRow {
    pub fn new(k: &baton_core::key::Key, now: Millis) -> Self {
        Self {
            id: k.id.clone(),
            participant: k.participant.clone(),
            scope: k.scope,
            created_at: rfc3339(k.created_at),
            expires_at: k.expires_at.map(rfc3339),
            revoked_at: k.revoked_at.map(rfc3339),
            last_used_at: k.last_used_at.map(rfc3339),
            live: k.is_live(now),
        }
    }
}

/// A key just issued, with its token: shown this once, never stored.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct KeyIssued {
    #[serde(flatten)]
    pub key: KeyRow,
    pub token: String,
}
doc!(KeyIssued, "baton/key-issue@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Keys {
    pub items: Vec<KeyRow>,
}
doc!(Keys, "baton/key-list@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct KeyRevoked {
    #[serde(flatten)]
    pub key: KeyRow,
}
doc!(KeyRevoked, "baton/key-revoke@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ProjectAdded {
    pub name: baton_core::ProjectName,
    /// False when it existed already.
    pub created: bool,
}
doc!(ProjectAdded, "baton/project-add@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Projects {
    pub items: Vec<baton_core::ProjectName>,
}
doc!(Projects, "baton/project-list@1");

// ---- the project --------------------------------------------------------------------------

/// A file `baton init` wrote.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Written {
    pub path: String,
    /// `created`, `updated` or `unchanged`.
    pub result: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Init {
    pub root: String,
    pub created: bool,
    /// `created`, `updated` or `unchanged`.
    pub gitignore: String,
    pub agents: Vec<Written>,
    /// What the configured agents require once, by hand (approving the MCP server,
    /// trusting the project and its hooks, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<String>,
}
doc!(Init, "baton/init@1");

/// One step of the demo: a process (`baton …`, or `git …` setting up the repository), as
/// a person would type it, and what it printed on stdout.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct DemoStep {
    pub command: String,
    pub exit_code: Option<i32>,
    pub stdout: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Demo {
    pub project: String,
    pub kept: bool,
    /// The Work Order the round was about.
    pub order: String,
    /// The negotiation the executor and the reviewer settled.
    pub negotiation: String,
    pub steps: Vec<DemoStep>,
}
doc!(Demo, "baton/demo@1");

/// An error, as every edge reports one: `kind` decides the exit code and the HTTP status.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ErrorBody {
    /// One of `failed`, `usage`, `refused`, `not_found`, `forbidden`, `conflict`,
    /// `not_admitted`, `run`.
    pub kind: String,
    pub message: String,
    pub retryable: bool,
    pub exit_code: u8,
    /// For `run`: the run's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// For `run`: how it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<RunStatus>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Error {
    pub error: ErrorBody,
}
doc!(Error, "baton/error@1");

/// Serializes `doc` with its `schema` field first: what `--json` prints.
pub fn to_json(doc: &dyn ErasedDoc) -> Value {
    let mut out = Map::new();
    out.insert("schema".into(), Value::from(doc.schema_name()));
    if let Value::Object(fields) = doc.value() {
        out.extend(fields);
    }
    Value::Object(out)
}

/// A [`Doc`] behind a pointer (`dyn Doc` is not object-safe through `Serialize`).
pub trait ErasedDoc {
    fn schema_name(&self) -> &'static str;
    fn value(&self) -> Value;
}

impl<T: Doc> ErasedDoc for T {
    fn schema_name(&self) -> &'static str {
        self.schema()
    }

    fn value(&self) -> Value {
        serde_json::to_value(self).expect("a document always serializes")
    }
}

// ---- the review gate ----------------------------------------------------------------------

/// `baton review --packet-only`: the packet a reviewer would read, and its size.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ReviewPacket {
    pub order: String,
    pub round: u32,
    /// Where the packet was written (a reviewer reads it on stdin and finds the path in
    /// `BATON_PACKET`).
    pub path: String,
    pub bytes: usize,
    pub max_bytes: usize,
    /// How much of the diff fitted.
    pub diff: baton_core::gate::DiffKept,
    pub test_lines_dropped: usize,
    pub packet: String,
}
doc!(ReviewPacket, "baton/review-packet@1");

/// One reviewer's verdict in a round.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReviewerVerdict {
    pub reviewer: String,
    /// The ledger row that ran the reviewer; `null` when it could not start.
    pub run: Option<String>,
    #[serde(flatten)]
    pub verdict: baton_core::gate::Verdict,
}

/// `baton review`: what the round concluded.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Review {
    pub order: String,
    pub round: u32,
    pub outcome: baton_core::gate::Outcome,
    /// The reviewers gave different verdicts.
    pub disagreement: bool,
    /// The rework reason sent to the worker (a first-round FIX), else `null`.
    pub rework: Option<String>,
    /// The order lands in the human queue (`baton queue`).
    pub queued: bool,
    pub verdicts: Vec<ReviewerVerdict>,
}
doc!(Review, "baton/review@1");

// ---- the human queue ----------------------------------------------------------------------

/// One item of the human queue.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct QueueItem {
    /// What `baton queue ack` takes.
    pub id: String,
    pub source: baton_core::queue::Source,
    pub order: Option<String>,
    pub text: String,
    /// When its newest signal happened.
    pub at: String,
    pub label: Option<String>,
}

/// One lane: at most five items, newest signal first, and how many were held back.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct QueueLane {
    pub lane: baton_core::queue::Lane,
    pub items: Vec<QueueItem>,
    pub held_back: usize,
}

/// `baton queue`: what needs a person, computed from the log.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Queue {
    pub lanes: Vec<QueueLane>,
}
doc!(Queue, "baton/queue@1");

impl Queue {
    pub fn new(lanes: &[baton_core::queue::LaneShown]) -> Self {
        Self {
            lanes: lanes
                .iter()
                .map(|l| QueueLane {
                    lane: l.lane,
                    held_back: l.held_back,
                    items: l
                        .items
                        .iter()
                        .map(|i| QueueItem {
                            id: i.id.clone(),
                            source: i.source,
                            order: i.order.clone(),
                            text: i.text.clone(),
                            at: rfc3339(i.at),
                            label: i.label.clone(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// `baton need` and `baton queue ack`: the queue item written or acknowledged.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct QueueNoted {
    pub item: String,
    pub seq: Option<i64>,
}
doc!(QueueNoted, "baton/queue-noted@1");

/// `baton record`: each worker's track record, computed from the log.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TrackRecords {
    pub items: Vec<baton_core::record::TrackRecord>,
}
doc!(TrackRecords, "baton/record@1");

// ---- status: the board and `baton status` ------------------------------------------------

/// How many runs of each status, and of each health among the live ones.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct RunCounts {
    pub registered: usize,
    pub running: usize,
    pub done: usize,
    pub failed: usize,
    pub stopped: usize,
    pub lost: usize,
    pub untracked: usize,
    /// Sessions seen through hooks that ended.
    #[serde(default)]
    pub ended: usize,
    /// Live runs whose health is `stalled`.
    pub stalled: usize,
    /// The rows above and the helpers, by where they come from.
    #[serde(default)]
    pub sources: SourceCounts,
    /// Helpers (subagents seen through hooks), counted rather than listed.
    #[serde(default)]
    pub helpers: HelperCounts,
}

/// Live and recent rows of the ledger by where they come from.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct SourceCounts {
    /// Started through `baton run`.
    pub wrapper: usize,
    /// Agent processes found running outside it.
    pub untracked: usize,
    /// Sessions seen through hooks.
    pub sessions: usize,
    /// Helpers of sessions and runs.
    pub helpers: usize,
}

/// Helpers by what became of them: running with a recent hook, running but quiet past
/// `[runs] helper_idle` (no longer counted as active), and ended within the hour.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct HelperCounts {
    pub active: usize,
    pub idle: usize,
    pub ended: usize,
}

impl HelperCounts {
    /// Adds a count of helpers the store made: ended, or live and active or quiet.
    pub fn add(&mut self, c: &baton_store::RunCount) {
        let (n, quiet) = (c.n as usize, c.quiet as usize);
        if c.status == baton_core::run::RunStatus::Ended {
            self.ended += n;
        } else if c.status.is_live() {
            self.idle += quiet;
            self.active += n - quiet;
        }
    }
}

/// A participant's load: what it owes (messages delivered to it and not finished) and
/// what it waits on (its own requests still open).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ParticipantLoad {
    pub name: String,
    pub role: String,
    pub owed: usize,
    pub waiting: usize,
}

/// An order on the board: where it stands and the calls its gateway held.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct BoardOrder {
    pub order: OrderRow,
    /// Held calls, in order, with where each stands (held, uncertain, ran, failed,
    /// dropped).
    pub effects: Vec<EffectRow>,
}

/// The orders in one status.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OrderGroup {
    pub status: OrderStatus,
    pub items: Vec<BoardOrder>,
}

/// A latency as the board shows it: how many were observed, their mean and the largest.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Latency {
    pub count: u64,
    /// `null` when nothing was observed.
    pub mean_ms: Option<i64>,
    pub max_ms: Option<i64>,
}

impl From<baton_core::metrics::Summary> for Latency {
    fn from(s: baton_core::metrics::Summary) -> Self {
        let seen = s.count > 0;
        Self {
            count: s.count,
            mean_ms: seen.then(|| s.sum_ms / s.count as i64),
            max_ms: seen.then_some(s.max_ms),
        }
    }
}

/// The oldest request whose sender's end is open.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OldestRequest {
    pub id: String,
    pub sent_at: String,
    pub age_ms: i64,
}

/// The handoff metrics, from the log (oldest open request first). What only a server
/// sees (duplicate sends, refused requests, failed authentications) is on its `/metrics`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StatusMetrics {
    /// `null` when no request is open.
    pub oldest_open_request: Option<OldestRequest>,
    pub open_requests: usize,
    /// Deliveries stored and not yet fetched.
    pub pending_deliveries: u64,
    pub created_to_delivered: Latency,
    pub delivered_to_completed: Latency,
    /// From an order's submission to its approval.
    pub approval_wait: Latency,
    pub orders_awaiting_approval: usize,
    pub requests: u64,
    /// Replies to requests (questions, answers, notes) per request; `null` before any
    /// request.
    pub clarification_rate: Option<f64>,
    pub max_thread_depth: u32,
    /// Actions refused as beyond authority (security events in the log).
    pub security_refusals: u64,
    /// Requests completed by their recipients, per topic.
    pub completed_by_topic: BTreeMap<String, u64>,
}

/// One observation of a trend: when, and the milliseconds it took.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct TrendPoint {
    pub at: String,
    pub ms: i64,
}

/// The board's small charts: the latest latencies over time and review verdicts by kind
/// (outcomes per topic are the metrics' `completed_by_topic`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Trends {
    pub created_to_delivered: Vec<TrendPoint>,
    pub delivered_to_completed: Vec<TrendPoint>,
    pub verdicts: Verdicts,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Verdicts {
    pub approve: u64,
    pub fix: u64,
    pub invalid: u64,
    pub stopped: u64,
}

impl From<baton_core::metrics::Verdicts> for Verdicts {
    fn from(v: baton_core::metrics::Verdicts) -> Self {
        Self {
            approve: v.approve,
            fix: v.fix,
            invalid: v.invalid,
            stopped: v.stopped,
        }
    }
}

/// `baton status` and the board: everything at one generation of the log.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Status {
    /// The log position every figure here is as of.
    pub generation: i64,
    /// When it was computed (ages and health are judged at this instant).
    pub at: String,
    /// Live runs and those that ended in the last hour, oldest first.
    pub runs: Vec<RunDoc>,
    pub run_counts: RunCounts,
    pub participants: Vec<ParticipantLoad>,
    /// Open orders and those closed in the last hour, by status in lifecycle order.
    pub orders: Vec<OrderGroup>,
    /// The human queue: at most five items a lane, each with its reason.
    pub queue: Vec<QueueLane>,
    pub alerts: Vec<Alert>,
    /// Reviews started and not concluded: one whose process was killed stays here until a
    /// round of the same number concludes.
    #[serde(default)]
    pub reviews: Vec<ReviewInFlight>,
    /// The paths held now, oldest first (at most 50; `more` says there are others).
    #[serde(default)]
    pub reservations: Reservations,
    pub metrics: StatusMetrics,
    pub trends: Trends,
}
doc!(Status, "baton/status@1");

/// A review started and not concluded.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReviewInFlight {
    pub order: String,
    pub round: u32,
    pub started_at: String,
    pub age_ms: i64,
    /// The reviewer commands, in order.
    pub reviewers: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every document derives a JSON Schema (what the HTTP server's OpenAPI document will
    /// be built from), and every schema is an object with the fields it prints.
    #[test]
    fn every_document_has_an_object_schema_naming_its_fields() {
        let schemas = [
            schemars::schema_for!(Inbox),
            schemars::schema_for!(Outbox),
            schemars::schema_for!(Thread),
            schemars::schema_for!(Search),
            schemars::schema_for!(Show),
            schemars::schema_for!(Sent),
            schemars::schema_for!(Step),
            schemars::schema_for!(AgentAdded),
            schemars::schema_for!(Agents),
            schemars::schema_for!(AgentPolicy),
            schemars::schema_for!(SecurityEvents),
            schemars::schema_for!(WebhookSet),
            schemars::schema_for!(Webhooks),
            schemars::schema_for!(crate::Delivery),
            schemars::schema_for!(Recorded),
            schemars::schema_for!(State),
            schemars::schema_for!(StateRendered),
            schemars::schema_for!(Checked),
            schemars::schema_for!(StateImport),
            schemars::schema_for!(Resume),
            schemars::schema_for!(ReceiptWritten),
            schemars::schema_for!(ReceiptShown),
            schemars::schema_for!(ReceiptsVerified),
            schemars::schema_for!(AlertAcked),
            schemars::schema_for!(Alerts),
            schemars::schema_for!(Runs),
            schemars::schema_for!(Reap),
            schemars::schema_for!(Hook),
            schemars::schema_for!(OrderStepped),
            schemars::schema_for!(Orders),
            schemars::schema_for!(OrderShown),
            schemars::schema_for!(NegotiationShown),
            schemars::schema_for!(HandoffCheck),
            schemars::schema_for!(HandoffTemplate),
            schemars::schema_for!(HandoffRender),
            schemars::schema_for!(EvidenceRun),
            schemars::schema_for!(Init),
            schemars::schema_for!(Demo),
            schemars::schema_for!(News),
            schemars::schema_for!(ImportDone),
            schemars::schema_for!(KeyIssued),
            schemars::schema_for!(Keys),
            schemars::schema_for!(KeyRevoked),
            schemars::schema_for!(ProjectAdded),
            schemars::schema_for!(Projects),
            schemars::schema_for!(Error),
            schemars::schema_for!(ReviewPacket),
            schemars::schema_for!(Review),
            schemars::schema_for!(Queue),
            schemars::schema_for!(QueueNoted),
            schemars::schema_for!(TrackRecords),
            schemars::schema_for!(Status),
        ];
        for schema in schemas {
            let value = schema.as_value();
            assert_eq!(value["type"], "object", "{value}");
            assert!(value.get("properties").is_some(), "{value}");
        }
        // A negotiation's schema has the result a person reads, and no field for a
        // weight, a utility or a floor.
        let negotiation = schemars::schema_for!(NegotiationShown);
        let fields = &negotiation.as_value()["properties"];
        for field in ["result", "outcome", "trail", "unsettled", "vetoes"] {
            assert!(fields.get(field).is_some(), "negotiation lacks {field}");
        }
        fn field_names(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(map) => {
                    if let Some(Value::Object(props)) = map.get("properties") {
                        out.extend(props.keys().cloned());
                    }
                    map.values().for_each(|v| field_names(v, out));
                }
                Value::Array(items) => items.iter().for_each(|v| field_names(v, out)),
                _ => {}
            }
        }
        let mut names = Vec::new();
        field_names(negotiation.as_value(), &mut names);
        assert!(names.contains(&"answers".to_owned()), "{names:?}");
        for name in &names {
            for private in ["weight", "utilit", "floor", "position"] {
                assert!(!name.contains(private), "negotiation schema has {name}");
            }
        }
        // The shown message's flattened row is part of its schema.
        let show = schemars::schema_for!(Show);
        for field in ["id", "excerpt", "recipients", "payload", "truncated"] {
            assert!(
                show.as_value()["properties"].get(field).is_some(),
                "show lacks {field}"
            );
        }
    }
}

mod reservations;
pub use reservations::*;
