//! One error type for every command, and the one place that turns a refusal into the
//! command line's words and an exit code.
//!
//! The core and the store say *what* was refused, as data; [`explain`] says it the way
//! this edge is used — naming flags (`--reason TEXT`) and commands (`baton show ID`).
//! The exit code follows from the refusal's kind alone.

use std::fmt;

use baton_core::refusal::{Action, Blocker, blocker_text};
use baton_core::{DeliveryAction, Field, InvalidTransition, Record, Refusal, RefusalKind};
use baton_store::StoreError;

/// The class of a failure; it alone decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Anything else: I/O, a broken store.
    Failed,
    /// Bad usage, or no project here.
    Usage,
    /// Input refused by validation, or a step the lifecycle does not allow.
    Refused,
    NotFound,
    Forbidden,
    /// A conflict with existing state that running again will not change (a reused
    /// idempotency key, an agent added again with another role, an order id taken).
    Conflict,
    /// Contention: the store was busy, or another writer moved an order first. Running the
    /// same command again may succeed; this alone exits 6.
    Contention,
    /// `baton run` was not admitted: the writer lock or every slot is held. Nothing ran;
    /// try again later or pass `--wait` (75 is EX_TEMPFAIL in sysexits.h).
    NotAdmitted,
    /// A command run by `baton run` or `baton evidence run` did not end well: the exit
    /// code is the command's own (or 125, 127, 128+N, 4: see `baton run --help`).
    Run(u8),
}

impl ErrorKind {
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Failed => 1,
            Self::Usage => 2,
            Self::Refused => 3,
            Self::NotFound => 4,
            Self::Forbidden => 5,
            Self::Conflict => 3,
            Self::Contention => 6,
            Self::NotAdmitted => 75,
            Self::Run(code) => code,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Failed => "failed",
            Self::Usage => "usage",
            Self::Refused => "refused",
            Self::NotFound => "not_found",
            Self::Forbidden => "forbidden",
            Self::Conflict => "conflict",
            Self::Contention => "contention",
            Self::NotAdmitted => "not_admitted",
            Self::Run(_) => "run",
        }
    }
}

impl From<RefusalKind> for ErrorKind {
    fn from(kind: RefusalKind) -> Self {
        match kind {
            RefusalKind::Invalid => Self::Refused,
            RefusalKind::NotFound => Self::NotFound,
            RefusalKind::Forbidden => Self::Forbidden,
            RefusalKind::Conflict => Self::Conflict,
            RefusalKind::Unauthenticated => Self::Forbidden,
        }
    }
}

/// A run that ended badly: which run, and how.
#[derive(Debug, Clone)]
pub struct RunEnd {
    pub run: String,
    pub status: baton_core::run::RunStatus,
}

#[derive(Debug)]
pub struct CommandError {
    pub kind: ErrorKind,
    pub message: String,
    /// Whether the same command may succeed if run again unchanged.
    pub retryable: bool,
    /// For a run that did not end `done`.
    pub run: Option<RunEnd>,
}

pub type CommandResult<T = ()> = Result<T, CommandError>;

impl CommandError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retryable: false,
            run: None,
        }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Usage, message)
    }

    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Refused, message)
    }

    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Failed, message)
    }

    /// A refusal in this edge's words, `explained` differently where the command knows
    /// more than the refusal says (a file name, say).
    pub fn from_refusal(refusal: &Refusal, message: String) -> Self {
        Self::new(refusal.kind().into(), message)
    }
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<StoreError> for CommandError {
    fn from(e: StoreError) -> Self {
        let kind = match &e {
            StoreError::Refused(r) if r.is_retryable() => ErrorKind::Contention,
            StoreError::Refused(r) => r.kind().into(),
            StoreError::Busy { .. } | StoreError::Reconnecting { .. } => ErrorKind::Contention,
            StoreError::Missing { .. }
            | StoreError::TooNew { .. }
            | StoreError::Unavailable { .. }
            | StoreError::NotAStore { .. }
            | StoreError::Corrupt { .. }
            | StoreError::Url { .. }
            | StoreError::ReadOnly
            | StoreError::Full
            | StoreError::Engine(_) => ErrorKind::Failed,
        };
        Self {
            kind,
            retryable: e.is_retryable(),
            message: explain(&e),
            run: None,
        }
    }
}

impl From<Refusal> for CommandError {
    fn from(r: Refusal) -> Self {
        StoreError::Refused(r).into()
    }
}

impl From<std::io::Error> for CommandError {
    fn from(e: std::io::Error) -> Self {
        Self::failed(e.to_string())
    }
}

/// A store error in the command line's words.
pub fn explain(e: &StoreError) -> String {
    match e {
        StoreError::Refused(r) => refusal(r),
        StoreError::Missing { path } => format!(
            "the store at {path} cannot be used: the database file is missing; run `baton init` to create it"
        ),
        StoreError::TooNew { path, found, known } => format!(
            "the store at {path} cannot be used: its schema version {found} is newer than this baton knows ({known}); upgrade baton"
        ),
        StoreError::NotAStore { path, reason } => format!(
            "{path} is not a Baton store ({reason}); it was left untouched. Only `baton init` \
             creates a store: move the file aside and run `baton init`, or restore the store \
             from a `baton export` log with `baton import`"
        ),
        StoreError::Corrupt { what } => format!(
            "the store is damaged ({what}); nothing was changed. Restore it: run `baton init` \
             in a fresh directory and `baton import` your latest `baton export` log there; \
             `sqlite3 .baton/baton.db 'PRAGMA integrity_check'` shows what is broken"
        ),
        StoreError::Reconnecting { hosts } => format!(
            "no host of the database takes writes now ({hosts}): a failover is under way or \
             every host is down. Run the command again in a moment; give a send the same \
             --idempotency-key so it is stored once"
        ),
        other => other.to_string(),
    }
}

/// The flag (or argument) that carries a field on the command line.
pub fn flag(field: Field) -> &'static str {
    match field {
        Field::To => "--to",
        Field::Topic => "--topic",
        Field::Body => "--body",
        Field::Payload => "--payload",
        Field::Document => "the document",
        Field::Reason | Field::ReworkReason => "--reason",
        Field::Answer => "--text",
        Field::Why => "--why",
        Field::Tried => "--tried",
        Field::Result => "--result",
        Field::Subject => "--subject",
        Field::Step => "--step",
        Field::Artifact => "--artifact",
        Field::StreamStatus => "status",
        Field::Role => "--role",
        Field::Actor => "--as",
        Field::Cursor => "--cursor",
        Field::Policy => "--may, --topics or --default",
        // Positional arguments: named by what they are.
        other => other.noun(),
    }
}

/// The name of a step as the command that takes it.
fn command(action: Action) -> &'static str {
    match action {
        Action::Delivery(DeliveryAction::HandBack) => "hand-back",
        other => other.name(),
    }
}

fn transition(t: &InvalidTransition) -> String {
    let why = match t.blocker {
        None => String::new(),
        Some(Blocker::FetchFirst) => " (fetch it first with `baton show ID`)".to_owned(),
        Some(Blocker::RequestsAreDischarged) => {
            " (a request is discharged with complete or hand-back, not acknowledged)".to_owned()
        }
        Some(b) => format!(" ({})", blocker_text(b)),
    };
    let allowed: Vec<&str> = t.allowed.iter().map(|a| command(*a)).collect();
    format!(
        "cannot {} {}: its status is {}{why}; allowed next: {}",
        command(t.action),
        t.subject(),
        t.status,
        if allowed.is_empty() {
            "nothing (it is final)".to_owned()
        } else {
            allowed.join(", ")
        }
    )
}

/// A refusal in the command line's words.
pub fn refusal(r: &Refusal) -> String {
    match r {
        Refusal::NotFound { record, id } => match record {
            Record::Message => format!("no message {id} in this project"),
            Record::Parent => format!("no message {id} to reply to in this project"),
            Record::Order => format!("no order {id} in this project: see `baton order list --all`"),
            Record::Run => format!("no run {id} in this project: see `baton runs --all`"),
            Record::Decision => {
                format!("no decision {id}: see `baton state show` for the decisions there are")
            }
            Record::Stream => {
                format!("no active stream {id:?}: see `baton state show` for the active streams")
            }
            Record::Alert => format!("no open alert {id} (see `baton alerts`)"),
            Record::Receipt => format!("no receipt for step {id:?}"),
            Record::Key => format!("no key {id} in this project (see `baton key list`)"),
            Record::Project => format!(
                "no project {id:?} in this store: add it with `baton --db URL project add {id}`"
            ),
            Record::Negotiation => format!(
                "no negotiation {id} in this project: open it with `baton negotiate open SPEC.json`"
            ),
            Record::Reservation => {
                format!("no reservation {id} in this project: see `baton reservations --all`")
            }
        },
        Refusal::UnknownParticipant { name } | Refusal::NoRecipient { name, .. } => format!(
            "unknown participant {name:?}: register it with `baton agent add {name} --role ROLE`"
        ),
        Refusal::NoArtifact { artifact, reason } => {
            format!("--artifact {artifact}: {reason}; write the receipt after the output exists")
        }
        Refusal::NoSubject { .. } | Refusal::Outside { .. } => format!("--subject {r}"),
        Refusal::ArtifactOutside { .. } => format!("--artifact {r}"),
        Refusal::NoReceipt { alert, .. } => {
            format!("{alert}; the step did not say where its output went (see `baton alerts`)")
        }
        Refusal::NoStep {
            order,
            since,
            seconds,
            ..
        } => format!(
            "order {order} has no step after seq {since} within {seconds}s; wait again or see `baton order show {order}`"
        ),
        Refusal::Missing(Field::To) => "a message needs at least one recipient (--to NAME)".into(),
        Refusal::Missing(Field::Topic) => {
            "--topic TOPIC is required (unless replying with --reply-to)".into()
        }
        Refusal::Missing(Field::Reason) => {
            "a reason is required (--reason TEXT): it is posted to the sender".into()
        }
        Refusal::Missing(Field::Answer) => "an answer cannot be empty (--text TEXT)".into(),
        Refusal::Missing(Field::ReworkReason) => {
            "a rework reason (what the worker should change) cannot be empty (--reason TEXT)".into()
        }
        Refusal::Missing(field) => format!("{} must not be empty", flag(*field)),
        Refusal::TooLong { field, max, len } => format!(
            "{} must be at most {max} characters (got {len})",
            flag(*field)
        ),
        Refusal::Name { field, error } => match field {
            Field::Name => error.to_string(),
            Field::OrderTo => {
                format!("the order's \"to\" must be a participant of this project: {error}")
            }
            other => format!("{}: {error}", flag(*other)),
        },
        Refusal::Payload { field, error } => match (field, error) {
            (Field::Document | Field::Payload, baton_core::PayloadError::TooLarge { .. }) => {
                format!("{error} (messages.payload_cap in .baton/config.toml)")
            }
            _ => error.to_string(),
        },
        Refusal::SelfSend { name } => {
            format!("{name} cannot send to itself: name another participant in --to")
        }
        Refusal::Ambiguous {
            prefix,
            candidates,
            more,
            record,
        } => format!(
            "{prefix} begins more than one {}; give more of the id:\n  {}{}",
            record.noun(),
            candidates.join("\n  "),
            if *more { "\n  …" } else { "" }
        ),
        Refusal::ShortPrefix { .. } => r.to_string(),
        Refusal::Cursor { cursor } => format!(
            "cursor {cursor:?} is not one this store issued: pass the `next` value of the previous page"
        ),
        Refusal::StatusNeedsIdentity => {
            "--status filters by your own status: pass --as NAME".into()
        }
        // The command line builds each input whole: only another version's server says so.
        Refusal::Input { operation, problem } => format!(
            "the input of `baton {operation}` does not fit ({problem}): is the server another \
             version of Baton? (`baton --version` and the server's `/v1/openapi.json`)"
        ),
        Refusal::Transition(t) => transition(t),
        Refusal::SenderNote => "--note is for a recipient's completion; to tell the recipients \
                                something, reply with `baton send --reply-to ID`"
            .into(),
        Refusal::DocumentField { field } => {
            format!("the order has no {field:?}: check it with `baton handoff check FILE`")
        }
        Refusal::Findings { .. } => format!("{r}: check it with `baton handoff check`"),
        Refusal::KeyReused { .. } => format!("{r}; use a new key for a new message"),
        Refusal::Moved { order, .. } => {
            format!("{r}; read it again (`baton order show {order}`) and decide anew")
        }
        Refusal::Beyond { actor, power, .. } => format!(
            "{r}. Nothing changed; the attempt is recorded (`baton security-events`). An owner can \
             widen it: baton agent policy {actor} --may {power},…"
        ),
        Refusal::Unwilling {
            recipient, topic, ..
        } => format!(
            "{r}. Nothing was sent; the attempt is recorded (`baton security-events`). Send it \
             on a topic {recipient} takes (--topic), or an owner widens its topics: baton agent \
             policy {recipient} --topics '{topic},…'"
        ),
        Refusal::OwnWork { order, .. } => format!(
            "{r}: nothing ran and the attempt is recorded (`baton security-events`); the order's \
             sender reviews it (`baton --as SENDER review {order} …`)"
        ),
        Refusal::SameReviewer { .. } => format!("{r}: give two different --reviewer commands"),
        Refusal::EffectsNeedRunner { order, .. } => format!(
            "{r}: approve it where its upstream server can be started — in the project, \
             without BATON_URL: baton order approve {order}"
        ),
        Refusal::NegotiationInput { .. } => {
            format!("{r}; nothing was stored: fix it and run again")
        }
        Refusal::NotANegotiator { id, party, parties } => format!(
            "--as {party} is not a party to negotiation {id}: its parties are {}",
            parties.join(", ")
        ),
        Refusal::PositionSubmitted { id, party } => format!(
            "{party} already submitted its position to negotiation {id}; a position counts \
             once (see `baton negotiate show {id}`)"
        ),
        Refusal::NegotiationSettled { id } => format!(
            "negotiation {id} is settled: nothing more can be submitted (see `baton negotiate show {id}`)"
        ),
        Refusal::NegotiationExists { id } => format!(
            "negotiation {id} is open, waiting for positions (see `baton negotiate show {id}`): \
             it can be opened again once settled"
        ),
        Refusal::OwnPosition { id, party, .. } => format!(
            "{party} is a participant: it submits its own position to negotiation {id} \
             (`--for` is for a party the spec declares external)"
        ),
        Refusal::EffectsDiffer { order, .. } => format!(
            "{r}. The worker's report must list exactly what its gateway held (see `baton \
             order show {order}`): rework the order so it reports again"
        ),
        Refusal::NoEffect { order, .. } => {
            format!("{r}: `baton order show {order}` lists its effects")
        }
        Refusal::ForeignLog => format!(
            "{r}. To add its work to this project, run `baton import --merge FILE`: its keys \
             are never imported, and this project's participants keep their roles, policies, \
             outside agents and webhooks"
        ),
        // Reservations.
        Refusal::Reserved { .. } => format!(
            "{r}. Run it again once that lapses or is released, reserve other paths, or ask \
             its holder (`baton reservations`)"
        ),
        Refusal::ReservationInput {
            field: Field::Document,
            ..
        } => format!("the order's x-baton.scope.allowed: {r}"),
        Refusal::ReservationInput {
            field: Field::Ttl,
            value,
            problem,
        } => format!("--ttl {value} is refused: {problem}"),
        Refusal::ReservationInput { value, problem, .. } => {
            format!("GLOB {value:?} is refused: {problem}")
        }
        Refusal::NotReleased { .. } => format!("{r} (see `baton reservations`)"),
        Refusal::Unreleased {
            id,
            hold: baton_core::reservation::Hold::Others,
            ..
        } => format!("{r}: `baton --as OWNER release --force {id} --reason TEXT`"),
        Refusal::Unreleased { .. } | Refusal::ForceRelease { .. } => r.to_string(),
        Refusal::Role { .. }
        | Refusal::TopicPattern { .. }
        | Refusal::PowerName { .. }
        | Refusal::WebhookUrl { .. }
        | Refusal::AgentUrl { .. }
        | Refusal::KeyEnvNotListed { .. }
        | Refusal::KeyEnv { .. }
        | Refusal::NotARequest { .. }
        | Refusal::Superseded { .. }
        | Refusal::TooManyChanges { .. }
        | Refusal::StateEdits { .. }
        | Refusal::ReportStatus { .. }
        | Refusal::WrongDocument { .. }
        | Refusal::NotAnExit(..)
        | Refusal::LogLine { .. }
        | Refusal::NotAParty { .. }
        | Refusal::SenderSteps { .. }
        | Refusal::OrderRole { .. }
        | Refusal::OfferFrom { .. }
        | Refusal::ReportFrom { .. }
        | Refusal::Unauthenticated
        | Refusal::Scope { .. }
        | Refusal::ActorInRequest
        | Refusal::NotTheWorker { .. }
        | Refusal::GatewayClosed { .. }
        | Refusal::RoleTaken { .. }
        | Refusal::OrderExists { .. }
        | Refusal::RunExists { .. }
        | Refusal::EffectNotHeld { .. }
        | Refusal::RunStatus { .. } => r.to_string(),
    }
}
