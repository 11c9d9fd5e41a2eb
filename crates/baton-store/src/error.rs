use baton_core::{InvalidTransition, NameError, PayloadError};

/// Everything a store operation can refuse. Each variant is something the user can act
/// on; the binary maps each to one exit code.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    NotFound(String),
    #[error("unknown participant {0:?}: register it with `baton agent add {0} --role ROLE`")]
    UnknownParticipant(String),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Transition(#[from] InvalidTransition),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    Conflict(String),
    /// Another writer held the store longer than the busy timeout. Nothing was written.
    #[error(
        "the store is busy: another writer held it for longer than {timeout_ms} ms; nothing was written, retry"
    )]
    Busy { timeout_ms: u64 },
    #[error("the store at {path} cannot be used: {reason}")]
    Unavailable { path: String, reason: String },
    #[error("store error: {0}")]
    Engine(String),
}

impl StoreError {
    /// Whether running the same command again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Busy { .. })
    }
}

impl From<NameError> for StoreError {
    fn from(e: NameError) -> Self {
        Self::Invalid(e.to_string())
    }
}

impl From<PayloadError> for StoreError {
    fn from(e: PayloadError) -> Self {
        Self::Invalid(e.to_string())
    }
}
