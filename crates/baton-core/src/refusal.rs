//! Why a request was refused, as data: every rule in the core that says no returns a
//! [`Refusal`], whose fields name what was wrong and never how to fix it at one edge.
//!
//! A refusal is worded once, above the core (`baton_app::ops::hints`), naming operations
//! and fields; each edge spells those words its own way (the CLI `--reason`, an MCP tool
//! `` `reason` ``, HTTP a JSON field). What a refusal *is* — its [`RefusalKind`], from
//! which the exit code and the HTTP status follow — is decided here by the variant alone.
//!
//! `Display` is the neutral sentence (fields by their canonical names), for logs and for an
//! edge that has nothing better to say.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::awl::{Finding, FindingKind};
use crate::delivery::{DeliveryAction, RequestAction};
use crate::message::{MessageType, PayloadError};
use crate::names::{NameError, Passname};
use crate::negotiation::{Input, Problem};
use crate::order::OrderAction;
use crate::run::RunStatus;

/// The class of a refusal. Exit codes and HTTP statuses derive from it and nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    /// The input broke a rule, or the lifecycle does not allow the step (exit 3, HTTP 422).
    Invalid,
    /// What was named does not exist, or did not come in time (exit 4, HTTP 404).
    NotFound,
    /// The actor may not do this (exit 5, HTTP 403).
    Forbidden,
    /// It conflicts with what is stored; read again and decide anew (exit 6, HTTP 409).
    Conflict,
    /// No valid key proved who is asking (exit 5, HTTP 401).
    Unauthenticated,
}

impl RefusalKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Invalid => "refused",
            Self::NotFound => "not_found",
            Self::Forbidden => "forbidden",
            Self::Conflict => "conflict",
            Self::Unauthenticated => "unauthenticated",
        }
    }
}

/// An input a user supplies: each edge names it in its own terms (`--why`, `` `why` ``).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Field {
    /// A message's recipients.
    To,
    Topic,
    /// The text of a `{"body": …}` payload.
    Body,
    /// A JSON payload.
    Payload,
    /// A tool's name, as a gateway's caller gave it.
    Tool,
    /// The arguments of a tool call made through a gateway.
    Arguments,
    /// A Work Order or Work Report.
    Document,
    /// Why a request is refused or handed back, or why an order is declined or cancelled.
    Reason,
    /// What the worker should change in a reworked order.
    ReworkReason,
    /// The answer to a blocked order's question.
    Answer,
    Focus,
    StreamName,
    StreamStatus,
    Decision,
    Why,
    Constraint,
    Tried,
    Result,
    Note,
    Subject,
    DependencyChange,
    /// A session's first action for its successor.
    ResumeAt,
    Step,
    Artifact,
    Alert,
    Role,
    /// A participant's passname, when registering it.
    Name,
    /// The acting identity.
    Actor,
    /// The `to` of a Work Order document.
    OrderTo,
    Cursor,
    /// A change to a participant's policy: its powers, its topics, or the role's default.
    Policy,
    /// The globs a reservation names.
    Paths,
    /// A reservation's time to live.
    Ttl,
}

impl Field {
    /// The canonical name: what an API field or a tool argument is called.
    pub fn name(self) -> &'static str {
        match self {
            Self::To => "to",
            Self::Topic => "topic",
            Self::Body => "body",
            Self::Payload => "payload",
            Self::Tool => "name",
            Self::Arguments => "arguments",
            Self::Document => "document",
            Self::Reason => "reason",
            Self::ReworkReason => "reason",
            Self::Answer => "text",
            Self::Focus => "text",
            Self::StreamName => "name",
            Self::StreamStatus => "status",
            Self::Decision => "text",
            Self::Why => "why",
            Self::Constraint => "text",
            Self::Tried => "tried",
            Self::Result => "result",
            Self::Note => "text",
            Self::Subject => "subject",
            Self::DependencyChange => "text",
            Self::ResumeAt => "resume_at",
            Self::Step => "step",
            Self::Artifact => "artifact",
            Self::Alert => "message",
            Self::Role => "role",
            Self::Name => "name",
            Self::Actor => "as",
            Self::OrderTo => "to",
            Self::Policy => "may",
            Self::Cursor => "cursor",
            Self::Paths => "paths",
            Self::Ttl => "ttl_seconds",
        }
    }

    /// What the value is, in words: for sentences about it.
    pub fn noun(self) -> &'static str {
        match self {
            Self::To => "recipients",
            Self::Topic => "topic",
            Self::Body => "body",
            Self::Payload => "payload",
            Self::Tool => "tool name",
            Self::Arguments => "tool arguments",
            Self::Document => "document",
            Self::Reason => "reason",
            Self::ReworkReason => "rework reason",
            Self::Answer => "answer",
            Self::Focus => "focus",
            Self::StreamName => "stream name",
            Self::StreamStatus => "status",
            Self::Decision => "decision",
            Self::Why => "why",
            Self::Constraint => "constraint",
            Self::Tried => "tried",
            Self::Result => "result",
            Self::Note => "note",
            Self::Subject => "subject",
            Self::DependencyChange => "dependency change",
            Self::ResumeAt => "first action",
            Self::Policy => "policy change",
            Self::Step => "step",
            Self::Artifact => "artifact",
            Self::Alert => "alert",
            Self::Role => "role",
            Self::Name => "passname",
            Self::Actor => "acting identity",
            Self::OrderTo => "order's \"to\"",
            Self::Cursor => "cursor",
            Self::Paths => "glob",
            Self::Ttl => "time to live",
        }
    }
}

/// The kind of record a lookup names, or missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Record {
    Message,
    /// The message a reply names as its parent.
    Parent,
    Order,
    Run,
    Decision,
    /// An active stream.
    Stream,
    /// An open alert.
    Alert,
    /// A step's receipt.
    Receipt,
    /// A project in a store that holds several.
    Project,
    /// A key, by its id.
    Key,
    Negotiation,
    Reservation,
}

impl Record {
    pub fn noun(self) -> &'static str {
        match self {
            Self::Message | Self::Parent => "message",
            Self::Order => "order",
            Self::Run => "run",
            Self::Decision => "decision",
            Self::Stream => "active stream",
            Self::Alert => "open alert",
            Self::Receipt => "receipt for step",
            Self::Project => "project",
            Self::Key => "key",
            Self::Negotiation => "negotiation",
            Self::Reservation => "reservation",
        }
    }
}

/// A lifecycle step, named by each edge as it offers it (`hand-back`, `` `hand_back` ``).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Action {
    /// A recipient's step on its delivery.
    Delivery(DeliveryAction),
    /// The sender's step on its own end of a request.
    Request(RequestAction),
    /// A step of a Work Order.
    Order(OrderAction),
}

impl Action {
    /// The canonical name of the step (`baton` subcommands and tool actions share it, but
    /// for `hand_back`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Delivery(a) => a.name(),
            Self::Request(a) => a.name(),
            Self::Order(a) => a.command(),
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What was refused a step, beyond the table: why the table says no here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Blocker {
    /// The message must be fetched (read) before this step.
    FetchFirst,
    /// A request is discharged with complete or hand back, not acknowledged.
    RequestsAreDischarged,
    /// Only a request is completed or handed back; an info or message is acknowledged.
    OnlyRequests,
    /// The order's deadline passed, or a report broke a limit.
    Expired,
    /// The order must be accepted first.
    AcceptFirst,
    /// The order's question needs an answer first.
    AnswerFirst,
    /// The order waits on other orders: it is not offered yet.
    NotOffered,
}

/// A refused lifecycle step: what was asked, where things stand, and what may be done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvalidTransition {
    pub action: Action,
    /// The status the record is in.
    #[serde(with = "fixed")]
    pub status: fixed::Word,
    pub blocker: Option<Blocker>,
    /// The steps that would change the status, in table order.
    pub allowed: Vec<Action>,
}

impl InvalidTransition {
    /// What the step was taken on, in words.
    pub fn subject(&self) -> &'static str {
        match self.action {
            Action::Delivery(_) => "this message",
            Action::Request(_) => "your own end of this request",
            Action::Order(_) => "this order",
        }
    }
}

impl fmt::Display for InvalidTransition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot {} {}: its status is {}",
            self.action,
            self.subject(),
            self.status
        )?;
        if let Some(b) = self.blocker {
            write!(f, " ({})", blocker_text(b))?;
        }
        let allowed: Vec<&str> = self.allowed.iter().map(|a| a.name()).collect();
        if allowed.is_empty() {
            f.write_str("; allowed next: nothing (it is final)")
        } else {
            write!(f, "; allowed next: {}", allowed.join(", "))
        }
    }
}

impl std::error::Error for InvalidTransition {}

/// A blocker in neutral words (an edge may name its own commands instead).
pub fn blocker_text(b: Blocker) -> &'static str {
    match b {
        Blocker::FetchFirst => "fetch it first",
        Blocker::RequestsAreDischarged => {
            "a request is discharged with complete or hand-back, not acknowledged"
        }
        Blocker::OnlyRequests => {
            "only a request is completed or handed back; acknowledge an info or message"
        }
        Blocker::Expired => "its deadline passed or a report broke a limit",
        Blocker::AcceptFirst => "accept it first",
        Blocker::AnswerFirst => "its question needs an answer first",
        Blocker::NotOffered => "it waits on other orders and is not offered yet",
    }
}

/// Which kind of handoff document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Document {
    WorkOrder,
    WorkReport,
}

impl Document {
    pub fn noun(self) -> &'static str {
        match self {
            Self::WorkOrder => "a Work Order",
            Self::WorkReport => "a Work Report",
        }
    }
}

/// Who may take an order step, for the refusal of someone else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MayAct {
    Worker(String),
    Sender(String),
    SenderOrEscalation { sender: String, escalation: String },
}

impl fmt::Display for MayAct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Worker(w) => write!(f, "its worker ({w})"),
            Self::Sender(s) => write!(f, "its sender ({s})"),
            Self::SenderOrEscalation { sender, escalation } => write!(
                f,
                "its sender ({sender}) or its escalation contact ({escalation})"
            ),
        }
    }
}

/// Why a request was refused. Nothing was written.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum Refusal {
    // ---- not found ----
    #[error("no {} {id} in this project", record.noun())]
    NotFound { record: Record, id: String },
    #[error("unknown participant {name:?}")]
    UnknownParticipant { name: String },
    /// A message names a recipient that is not registered; `registered` would have done.
    #[error("no participant {name:?} in this project")]
    NoRecipient {
        name: String,
        registered: Vec<String>,
    },
    /// A receipt names an artifact that cannot be read.
    #[error("{artifact}: {reason}")]
    NoArtifact { artifact: String, reason: String },
    /// A note's subject is neither a record nor an existing path.
    #[error("{subject:?} is neither a message or order id in this project nor an existing path")]
    NoSubject { subject: String },
    /// A wait ran out: the step's receipt did not arrive. `alert` is the alert's message.
    #[error("{alert}")]
    NoReceipt { step: String, alert: String },
    /// A wait ran out: the order took no step after `since` (it is at `seq`).
    #[error("order {order} has no step after seq {since} within {seconds}s (it is at seq {seq})")]
    NoStep {
        order: String,
        since: i64,
        seq: i64,
        seconds: f64,
    },

    // ---- invalid input ----
    /// A prefix begins more than one id of its kind: `candidates` (the first few, and
    /// `more` when there are others).
    #[error("{prefix} begins more than one {}: {}{}", record.noun(), candidates.join(", "), if *more { ", …" } else { "" })]
    Ambiguous {
        record: Record,
        prefix: String,
        candidates: Vec<String>,
        more: bool,
    },
    /// A text that equals no id and is too short to name one by its prefix.
    #[error("{prefix} is too short to name a {} by: give at least {min} characters of its id", record.noun())]
    ShortPrefix {
        record: Record,
        prefix: String,
        min: usize,
    },
    #[error("{} must not be empty", .0.noun())]
    Missing(Field),
    #[error("{} must be at most {max} characters (got {len})", field.noun())]
    TooLong {
        field: Field,
        max: usize,
        len: usize,
    },
    #[error("{error}")]
    Name { field: Field, error: NameError },
    #[error("{error}")]
    Payload { field: Field, error: PayloadError },
    #[error(
        "role {role:?} is not valid: use planner, executor, reviewer, owner, observer or another word of at most 64 characters"
    )]
    Role { role: String },
    #[error("{name} cannot send to itself")]
    SelfSend { name: Passname },
    /// A receipt's artifact is a path outside the project (symlinks resolved).
    #[error(
        "{artifact:?} is outside the project ({root}): an artifact is a path inside it or a URI (scheme://…)"
    )]
    ArtifactOutside { artifact: String, root: String },
    /// A note's subject is a path outside the project.
    #[error("{subject:?} is outside the project ({root})")]
    Outside { subject: String, root: String },
    #[error(
        "topic pattern {pattern:?} is not valid: use a topic (billing), a prefix (billing-*) or * for every topic"
    )]
    TopicPattern { pattern: String },
    #[error("unknown power {name:?}: use request, send, accept, approve, effects or none")]
    PowerName { name: String },
    #[error("webhook URL {url:?} is refused: {why}")]
    WebhookUrl { url: String, why: String },
    /// An outside agent's URL is not one this server reaches.
    #[error("outside agent URL {url:?} is refused: {why}")]
    AgentUrl { url: String, why: String },
    /// An outside agent's key would be read from a variable the server's operator did not
    /// list: only the operator chooses which of its environment variables hold keys.
    #[error(
        "{name:?} is not an environment variable this server reads outside agents' keys from \
         (its operator lists them: {listed})"
    )]
    KeyEnvNotListed { name: String, listed: String },
    /// An outside agent's key is named by an environment variable: `A-Z`, `0-9`, `_`.
    #[error(
        "{name:?} is not an environment variable's name: use A-Z, 0-9 and _ (not first), at most 64"
    )]
    KeyEnv { name: String },
    #[error("cursor {cursor:?} is not one this store issued")]
    Cursor { cursor: String },
    /// Filtering by "my status" without saying who I am.
    #[error("a status filter is the caller's own status: say who is asking")]
    StatusNeedsIdentity,
    /// An operation's input that does not fit its type (a field missing, unknown or of the
    /// wrong type): what serde says of it.
    #[error("the input of {operation} does not fit: {problem}")]
    Input {
        #[serde(with = "fixed")]
        operation: fixed::Word,
        problem: String,
    },
    #[error(transparent)]
    Transition(InvalidTransition),
    /// The sender of an info or message tried to change its status.
    #[error("you sent {id} as {} {kind}: only its recipients change its status", article(*kind))]
    NotARequest { id: String, kind: MessageType },
    /// A note on the sender's own end: notes are posted by recipients.
    #[error("a note is for a recipient's completion; to tell the recipients something, reply")]
    SenderNote,
    #[error("{decision} is already superseded by {by}: supersede {by} instead")]
    Superseded { decision: String, by: String },
    /// One write that would add more than a write may.
    #[error(
        "one write may make at most {max} state changes, and this one makes {got}; nothing was \
         changed: split it into smaller writes"
    )]
    TooManyChanges { max: usize, got: usize },
    /// Edits to a STATE.md file that cannot be imported (each named); nothing was changed.
    #[error("the file has edits that cannot be imported; nothing was changed: {}", refused.join("; "))]
    StateEdits { refused: Vec<String> },
    #[error("the order has no {field:?}")]
    DocumentField {
        #[serde(with = "fixed")]
        field: fixed::Word,
    },
    #[error("a report's status is done, failed or blocked, not {status:?}")]
    ReportStatus { status: Option<String> },
    /// A document with `invalid` findings: refused as a whole.
    #[error("the document is refused as {}: {}", document.noun(), invalid_list(findings))]
    Findings {
        document: Document,
        findings: Vec<Finding>,
    },
    /// A document of the other kind than the step takes.
    #[error("the document is {}, not {}", other(*expected).noun(), expected.noun())]
    WrongDocument { expected: Document },
    #[error("an exit records done, failed or stopped, not {0}")]
    NotAnExit(RunStatus),
    /// A line of a portable log that is not an event, or does not hold with the rest of
    /// the log: the whole log is refused.
    #[error("line {line} is refused ({problem}); nothing was imported")]
    LogLine { line: usize, problem: String },
    /// A portable log that does not continue the log of a project with a history of its
    /// own (it shares no event with it, or lacks some the project wrote since the first it
    /// shares): another project's log, taken only when a merge is asked for.
    #[error(
        "the log does not continue this project's, which has a history of its own (it \
         shares no event with it, or lacks events this project wrote since the first it \
         shares): it is another project's log; nothing was imported"
    )]
    ForeignLog,
    /// A negotiation spec or position that does not hold: the JSON path of the first
    /// problem, and what it is (never the value: a position is private).
    #[error("{input}: {path}: {problem}")]
    NegotiationInput {
        input: Input,
        path: String,
        problem: Problem,
    },
    #[error("negotiation {id} is settled: nothing more can be submitted")]
    NegotiationSettled { id: String },

    // ---- forbidden ----
    /// An action beyond the actor's authority policy; `topic` is `None` for a write that
    /// has none (project memory).
    #[error("{actor} ({role}) may not {}{}: its policy allows {policy}", power.doing(), on_topic(topic.as_ref()))]
    Beyond {
        actor: Passname,
        role: String,
        power: crate::authority::Power,
        topic: Option<crate::names::Topic>,
        policy: Box<crate::authority::Policy>,
    },
    /// A request or an order sent to a recipient whose policy would not let it take it on:
    /// refused at the send, so nothing lands in an inbox its owner cannot close.
    #[error(
        "{recipient} ({role}) may not take on requests or orders on topic {topic}: its policy allows {policy}"
    )]
    Unwilling {
        recipient: Passname,
        role: String,
        topic: crate::names::Topic,
        policy: Box<crate::authority::Policy>,
    },
    /// The order's worker tried to review or approve its own work.
    #[error(
        "{actor} is the worker of order {order}: its work is reviewed and approved by someone else"
    )]
    OwnWork { actor: String, order: String },
    /// Two reviewers of one round that are one reviewer: the same command.
    #[error("both reviewers are {command:?}: a second review needs a second, different reviewer")]
    SameReviewer { command: String },
    #[error("{who} is neither a recipient nor the sender of {id}")]
    NotAParty { who: Passname, id: String },
    /// The sender of a request tried a recipient's step.
    #[error(
        "you sent {id}: as its sender you complete or archive your own end; the other steps are its recipients'"
    )]
    SenderSteps { id: String },
    #[error("{actor} may not {} order {order}: only {may} may", action.command())]
    OrderRole {
        actor: String,
        action: OrderAction,
        order: String,
        may: MayAct,
    },
    #[error(
        "{actor} may not offer an order from {from:?}: the order's \"from\" must be the acting identity ({actor})"
    )]
    OfferFrom { actor: String, from: String },
    #[error(
        "the report says it is from {from:?}, but {actor} is reporting: a report is its author's own word"
    )]
    ReportFrom { actor: String, from: String },

    /// The request carried no key, or one that is unknown, revoked or expired. Which of
    /// these it was is not said: a guesser learns nothing.
    #[error("a valid key is required")]
    Unauthenticated,
    /// The key's scope does not allow the action.
    #[error("this key's scope is {scope}: it may not {action}")]
    Scope {
        scope: crate::key::Scope,
        #[serde(with = "fixed")]
        action: fixed::Word,
    },
    #[error("{party} is not a party to negotiation {id} (its parties: {})", parties.join(", "))]
    NotANegotiator {
        id: String,
        party: String,
        parties: Vec<String>,
    },
    /// A participant's position is submitted by that participant alone (another may submit
    /// only an external party's).
    #[error(
        "{actor} cannot submit {party}'s position to negotiation {id}: a participant submits its own"
    )]
    OwnPosition {
        id: String,
        actor: String,
        party: String,
    },
    /// An actor named in a request: on a server the actor comes only from the key.
    #[error("the acting participant comes from the key, never from the request")]
    ActorInRequest,
    /// A gateway works for the order's worker only.
    #[error(
        "{actor} is not the worker of order {order} ({worker} is): a gateway acts for the worker"
    )]
    NotTheWorker {
        order: String,
        actor: String,
        worker: String,
    },

    // ---- staged effects ----
    #[error("order {order} is {status}: a gateway serves an accepted or working order")]
    GatewayClosed {
        order: String,
        status: crate::order::OrderStatus,
    },
    #[error(
        "the report's effects differ from what the gateway held on order {order}, so nothing ran: {}",
        mismatches.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    EffectsDiffer {
        order: String,
        mismatches: Vec<crate::effect::Mismatch>,
    },
    #[error("order {order} holds no effect {reference} awaiting approval")]
    NoEffect { order: String, reference: String },
    #[error(
        "order {order} holds {count} staged effect(s): approving runs them, which needs the upstream server here"
    )]
    EffectsNeedRunner { order: String, count: usize },

    // ---- conflicts ----
    #[error("participant {name} already exists with role {role:?}")]
    RoleTaken { name: Passname, role: String },
    #[error(
        "idempotency key {key:?} was already used for message {id} with different content or recipients"
    )]
    KeyReused { key: String, id: String },
    #[error("order {id} already exists: give a new order a new id")]
    OrderExists { id: String },
    /// Another writer moved the order since the caller read it.
    #[error("order {order} moved on: you expected seq {expected}, it is at {seq}")]
    Moved {
        order: String,
        expected: i64,
        seq: i64,
    },
    #[error("run {id} already exists")]
    RunExists { id: String },
    #[error("negotiation {id} is open, waiting for positions: it can be opened again once settled")]
    NegotiationExists { id: String },
    #[error("{party} already submitted its position to negotiation {id}")]
    PositionSubmitted { id: String, party: String },
    /// An effect may start only once, when held on an approved order.
    #[error("effect {reference} of order {order} is {}: it does not run again", status.map_or("not held", |s| s.as_str()))]
    EffectNotHeld {
        order: String,
        reference: String,
        status: Option<crate::effect::EffectStatus>,
    },
    #[error("run {run} is {status}: it cannot record {what}")]
    RunStatus {
        run: String,
        status: RunStatus,
        #[serde(with = "fixed")]
        what: fixed::Word,
    },

    // ---- orders that wait on orders (`crate::after`) ----
    /// An order's `x-baton.after` names an order it cannot wait on: nothing was stored.
    #[error("x-baton.after[{index}] names order {order:?}, which {problem}: nothing was stored")]
    After {
        index: usize,
        order: String,
        problem: crate::after::Problem,
    },
    /// A worker's step on an order that is not offered yet: it waits on `on`.
    #[error("order {order} is {}: it waits on {}", if *held { "held" } else { "waiting" }, on.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    Waits {
        order: String,
        held: bool,
        on: Vec<crate::after::Wait>,
    },

    // ---- reservations (`crate::reservation`) ----
    /// Another's live reservation stands in the way of every glob named: nothing was
    /// reserved. Retryable: it may lapse or be released.
    #[error("{}: nothing was reserved", conflicts.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Reserved {
        conflicts: Vec<crate::reservation::Conflict>,
    },
    #[error("{} {value:?} is refused: {problem}", field.noun())]
    ReservationInput {
        field: Field,
        value: String,
        problem: crate::reservation::Problem,
    },
    /// A release that would release nothing: `holder` holds none of `asked` (every one it
    /// holds by hand, when `asked` is empty); `held` is what it does hold.
    #[error("{holder} holds no live reservation{}{}; it holds {}", if asked.is_empty() { "" } else { " of " }, asked.join(", "), if held.is_empty() { "none".to_owned() } else { held.join(", ") })]
    NotReleased {
        holder: String,
        asked: Vec<String>,
        held: Vec<String>,
    },
    #[error("reservation {id} of {holder} is not released: {hold}")]
    Unreleased {
        id: String,
        holder: String,
        hold: crate::reservation::Hold,
    },
    #[error("{actor} ({role}) may not force-release reservation {id}: only an owner may")]
    ForceRelease {
        actor: Passname,
        role: String,
        id: String,
    },

    // ---- pools (`crate::pool`) ----
    #[error("{} {value:?} is refused: {problem}", field.noun())]
    PoolAddress {
        field: Field,
        value: String,
        problem: crate::pool::AddressProblem,
    },
    /// A claim that cannot be made; a lost race (`Taken`) is retryable on another item.
    #[error("{item} cannot be claimed: {problem}")]
    Claim {
        item: String,
        problem: crate::pool::ClaimProblem,
    },
    /// A worker's step on an order still in its pool: it is nobody's until claimed.
    #[error("order {order} is offered to {pool} and nobody has claimed it")]
    Unclaimed { order: String, pool: String },
    /// `next` found nothing the caller may take.
    #[error("nothing is ready for {actor} in pool {pool}{}", topic.as_ref().map_or_else(String::new, |t| format!(" on topic {t}")))]
    NothingReady {
        actor: Passname,
        pool: crate::pool::Pool,
        topic: Option<crate::names::Topic>,
    },
}

impl Refusal {
    /// Whether running the same command again may succeed: a lost race (another writer
    /// moved the order first), or a path another holds (it may lapse or be released).
    /// Every other conflict is permanent.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Moved { .. }
                | Self::Reserved { .. }
                | Self::Claim {
                    problem: crate::pool::ClaimProblem::Taken { .. },
                    ..
                }
        )
    }

    pub fn kind(&self) -> RefusalKind {
        use RefusalKind as K;
        match self {
            Self::NotFound { .. }
            | Self::UnknownParticipant { .. }
            | Self::NoRecipient { .. }
            | Self::NoArtifact { .. }
            | Self::NoSubject { .. }
            | Self::NoReceipt { .. }
            | Self::NoStep { .. }
            | Self::NoEffect { .. }
            | Self::NotReleased { .. }
            | Self::NothingReady { .. } => K::NotFound,
            Self::Ambiguous { .. }
            | Self::ShortPrefix { .. }
            | Self::Missing(_)
            | Self::TooLong { .. }
            | Self::Name { .. }
            | Self::Payload { .. }
            | Self::Role { .. }
            | Self::SelfSend { .. }
            | Self::Outside { .. }
            | Self::ArtifactOutside { .. }
            | Self::Cursor { .. }
            | Self::TopicPattern { .. }
            | Self::PowerName { .. }
            | Self::WebhookUrl { .. }
            | Self::AgentUrl { .. }
            | Self::KeyEnvNotListed { .. }
            | Self::KeyEnv { .. }
            | Self::StatusNeedsIdentity
            | Self::Input { .. }
            | Self::Transition(_)
            | Self::NotARequest { .. }
            | Self::SenderNote
            | Self::Superseded { .. }
            | Self::StateEdits { .. }
            | Self::TooManyChanges { .. }
            | Self::DocumentField { .. }
            | Self::ReportStatus { .. }
            | Self::Findings { .. }
            | Self::WrongDocument { .. }
            | Self::NotAnExit(_)
            | Self::LogLine { .. }
            | Self::ForeignLog
            | Self::NegotiationInput { .. }
            | Self::NegotiationSettled { .. }
            | Self::GatewayClosed { .. }
            | Self::EffectsDiffer { .. }
            | Self::EffectsNeedRunner { .. }
            | Self::SameReviewer { .. }
            | Self::ReservationInput { .. }
            | Self::PoolAddress { .. }
            | Self::Unclaimed { .. }
            | Self::Claim {
                problem:
                    crate::pool::ClaimProblem::NotPooled | crate::pool::ClaimProblem::Own { .. },
                ..
            }
            | Self::After { .. } => K::Invalid,
            Self::Beyond { .. }
            | Self::Unwilling { .. }
            | Self::OwnWork { .. }
            | Self::NotAParty { .. }
            | Self::SenderSteps { .. }
            | Self::OrderRole { .. }
            | Self::OfferFrom { .. }
            | Self::ReportFrom { .. }
            | Self::Scope { .. }
            | Self::NotANegotiator { .. }
            | Self::OwnPosition { .. }
            | Self::ActorInRequest
            | Self::NotTheWorker { .. }
            | Self::ForceRelease { .. }
            | Self::Claim {
                problem: crate::pool::ClaimProblem::NotInPool { .. },
                ..
            } => K::Forbidden,
            Self::Unauthenticated => K::Unauthenticated,
            Self::RoleTaken { .. }
            | Self::KeyReused { .. }
            | Self::OrderExists { .. }
            | Self::Moved { .. }
            | Self::RunExists { .. }
            | Self::NegotiationExists { .. }
            | Self::PositionSubmitted { .. }
            | Self::RunStatus { .. }
            | Self::EffectNotHeld { .. }
            | Self::Reserved { .. }
            | Self::Unreleased { .. }
            | Self::Claim {
                problem: crate::pool::ClaimProblem::Taken { .. } | crate::pool::ClaimProblem::Closed,
                ..
            }
            | Self::Waits { .. } => K::Conflict,
        }
    }

    pub fn not_found(record: Record, id: impl Into<String>) -> Self {
        Self::NotFound {
            record,
            id: id.into(),
        }
    }
}

impl From<InvalidTransition> for Refusal {
    fn from(t: InvalidTransition) -> Self {
        Self::Transition(t)
    }
}

fn on_topic(topic: Option<&crate::names::Topic>) -> String {
    topic.map_or_else(String::new, |t| format!(" on topic {t}"))
}

fn article(kind: MessageType) -> &'static str {
    if kind == MessageType::Info { "an" } else { "a" }
}

fn other(d: Document) -> Document {
    match d {
        Document::WorkOrder => Document::WorkReport,
        Document::WorkReport => Document::WorkOrder,
    }
}

fn invalid_list(findings: &[Finding]) -> String {
    findings
        .iter()
        .filter(|f| f.kind == FindingKind::Invalid)
        .map(|f| format!("{} {}: {}", f.rule, f.path, f.message))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The `invalid` findings of a refused document.
pub fn invalid(findings: &[Finding]) -> impl Iterator<Item = &Finding> {
    findings.iter().filter(|f| f.kind == FindingKind::Invalid)
}

/// Serde for the fixed words some refusals carry as `&'static str` (a status's name, a
/// key scope's action): read back (a refusal a server sent to the command line) each word
/// is kept once for the life of the process, so a refusal costs the same either way.
pub mod fixed {
    use std::collections::HashSet;
    use std::sync::Mutex;

    use serde::{Deserialize, Deserializer, Serializer};

    /// A fixed word. Named so serde's derive does not take the field for a borrow of its
    /// input (it reads `&str` in a field's type as one).
    pub type Word = &'static str;

    static WORDS: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);

    /// `word` as a `&'static str`: the one already kept, or this one, kept now.
    pub fn keep(word: String) -> &'static str {
        let mut words = WORDS.lock().unwrap_or_else(|e| e.into_inner());
        let words = words.get_or_insert_with(HashSet::new);
        if let Some(kept) = words.get(word.as_str()) {
            return kept;
        }
        let kept: &'static str = Box::leak(word.into_boxed_str());
        words.insert(kept);
        kept
    }

    pub fn serialize<S: Serializer>(word: &&'static str, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(word)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
        String::deserialize(d).map(keep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::DeliveryAction as D;

    /// A refusal travels as data (a server's answer carries it so Baton's command line
    /// words it in its own terms): what is read back is the refusal that was sent, its
    /// fixed words included, and so are its kind and its sentence.
    #[test]
    fn a_refusal_read_back_from_its_json_is_the_same_refusal() {
        let samples = vec![
            Refusal::Missing(Field::Why),
            Refusal::StatusNeedsIdentity,
            Refusal::Input {
                operation: "decide",
                problem: "missing field `why`".into(),
            },
            Refusal::Transition(InvalidTransition {
                action: Action::Delivery(D::Complete),
                status: "pending",
                blocker: Some(Blocker::FetchFirst),
                allowed: vec![Action::Delivery(D::Fetch)],
            }),
            Refusal::Scope {
                scope: crate::key::Scope::Read,
                action: "send messages",
            },
            Refusal::Name {
                field: Field::Topic,
                error: crate::names::Topic::new("Bad Topic").unwrap_err(),
            },
            Refusal::Beyond {
                actor: Passname::new("impl-1").unwrap(),
                role: "executor".into(),
                power: crate::authority::Power::Request,
                topic: None,
                policy: Box::new(crate::authority::Policy::for_role("executor")),
            },
            Refusal::OrderRole {
                actor: "impl-2".into(),
                action: crate::order::OrderAction::Approve,
                order: "wo_1".into(),
                may: MayAct::Sender("planner".into()),
            },
        ];
        for refusal in samples {
            let text = serde_json::to_string(&refusal).unwrap();
            let back: Refusal = serde_json::from_str(&text).unwrap();
            assert_eq!(back, refusal, "{text}");
            assert_eq!(
                (back.kind(), back.to_string()),
                (refusal.kind(), refusal.to_string())
            );
        }
    }

    #[test]
    fn the_variant_alone_decides_the_kind() {
        let cases = [
            (
                Refusal::not_found(Record::Order, "wo_1"),
                RefusalKind::NotFound,
            ),
            (Refusal::Missing(Field::Why), RefusalKind::Invalid),
            (
                Refusal::SenderSteps { id: "01J".into() },
                RefusalKind::Forbidden,
            ),
            (
                Refusal::Moved {
                    order: "wo_1".into(),
                    expected: 1,
                    seq: 2,
                },
                RefusalKind::Conflict,
            ),
        ];
        for (refusal, kind) in cases {
            assert_eq!(refusal.kind(), kind, "{refusal}");
        }
    }

    #[test]
    fn the_neutral_sentence_names_no_command_line_flag() {
        let t = InvalidTransition {
            action: Action::Delivery(D::Acknowledge),
            status: "pending",
            blocker: Some(Blocker::FetchFirst),
            allowed: vec![Action::Delivery(D::Fetch), Action::Delivery(D::Refuse)],
        };
        assert_eq!(
            t.to_string(),
            "cannot ack this message: its status is pending (fetch it first); allowed next: show, refuse"
        );
        for text in [
            t.to_string(),
            Refusal::Missing(Field::Why).to_string(),
            Refusal::SenderNote.to_string(),
        ] {
            assert!(!text.contains("--") && !text.contains("baton "), "{text}");
        }
    }
}
