use baton_core::{InvalidTransition, Refusal};

/// Everything a store operation can fail with: a [`Refusal`] (a rule said no; nothing was
/// written), or a failure of the store itself. Variants carry data, never an edge's words;
/// each edge names the fix in its own terms.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// Another writer held the store longer than the busy timeout. Nothing was written.
    /// The holder is named where the system shows it (SQLite on Linux).
    #[error(
        "the store is busy: {} held it for longer than {timeout_ms} ms; nothing was written, retry",
        held_by(holder.as_ref())
    )]
    Busy {
        timeout_ms: u64,
        holder: Option<Holder>,
    },
    /// There is no store where one was expected (it is never created implicitly).
    #[error("there is no store at {path}")]
    Missing { path: String },
    /// The store was written by a newer Baton.
    #[error(
        "the store at {path} has schema version {found}, newer than this baton knows ({known})"
    )]
    TooNew {
        path: String,
        found: i64,
        known: i64,
    },
    #[error("the store at {path} cannot be used: {reason}")]
    Unavailable { path: String, reason: String },
    /// The file where a store was expected is not one: empty, or another program's file.
    /// Only creating a store (`baton init`) writes a new one; opening never does.
    #[error("{path} is not a Baton store: {reason}")]
    NotAStore { path: String, reason: String },
    /// SQLite found the file damaged (a corrupt page, a header that is not a database's).
    #[error("the store is damaged: {what}")]
    Corrupt { what: &'static str },
    /// A URL that names no backend this build has.
    #[error(
        "{url:?} names no store Baton can open: use sqlite:PATH for one project, or sqlite:DIR or postgres://USER@HOST/DATABASE for a database of projects"
    )]
    Url { url: String },
    /// A write to a store this process may only read (no permission to write its file or
    /// directory, or a read-only file system). Nothing was written; reads work.
    #[error(
        "the store is read-only to this process (no permission to write its file or its \
         directory, or a read-only file system): reads work, writes do not; nothing was written"
    )]
    ReadOnly,
    /// The disk holding the store has no room left: the write was rolled back whole, and
    /// everything committed before it is intact.
    #[error(
        "the disk holding the store is full: nothing was written; free some space and run it again"
    )]
    Full,
    /// A database named by several hosts has no writable primary now (a failover is
    /// under way). A write cut off by it may or may not have committed: retrying it with
    /// its idempotency key settles which, once.
    #[error(
        "the database's primary cannot be reached (a failover among {hosts}?); retry in a \
         moment, with the same idempotency key for a write"
    )]
    Reconnecting { hosts: String },
    #[error("store error: {0}")]
    Engine(String),
}

/// The process holding a store's write lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// Its command line, cut to a readable length.
    pub command: String,
}

fn held_by(holder: Option<&Holder>) -> String {
    match holder {
        Some(h) if h.command.is_empty() => format!("process {}", h.pid),
        Some(h) => format!("process {} ({})", h.pid, h.command),
        None => "another writer".to_owned(),
    }
}

impl StoreError {
    /// Whether running the same command again may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Busy { .. } | Self::Reconnecting { .. } => true,
            Self::Refused(r) => r.is_retryable(),
            _ => false,
        }
    }

    /// The refusal, when a rule said no.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            Self::Refused(r) => Some(r),
            _ => None,
        }
    }
}

impl From<InvalidTransition> for StoreError {
    fn from(t: InvalidTransition) -> Self {
        Self::Refused(Refusal::Transition(t))
    }
}
