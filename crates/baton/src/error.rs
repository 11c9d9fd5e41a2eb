//! One error type for every command, and the one place that maps errors to exit codes.

use std::fmt;

use baton_store::StoreError;

/// The class of a failure; it alone decides the exit code (SPEC §8).
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
    /// A conflict with existing state, or contention: running again may succeed.
    Conflict,
    /// `baton run` was not admitted: the writer lock or every slot is held. Nothing ran;
    /// try again later or pass `--wait` (75 is EX_TEMPFAIL in sysexits.h).
    NotAdmitted,
}

impl ErrorKind {
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Failed => 1,
            Self::Usage => 2,
            Self::Refused => 3,
            Self::NotFound => 4,
            Self::Forbidden => 5,
            Self::Conflict => 6,
            Self::NotAdmitted => 75,
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
            Self::NotAdmitted => "not_admitted",
        }
    }
}

#[derive(Debug)]
pub struct CommandError {
    pub kind: ErrorKind,
    pub message: String,
    /// Whether the same command may succeed if run again unchanged.
    pub retryable: bool,
}

pub type CommandResult<T = ()> = Result<T, CommandError>;

impl CommandError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retryable: false,
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
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<StoreError> for CommandError {
    fn from(e: StoreError) -> Self {
        let kind = match &e {
            StoreError::NotFound(_) | StoreError::UnknownParticipant(_) => ErrorKind::NotFound,
            StoreError::Invalid(_) | StoreError::Transition(_) => ErrorKind::Refused,
            StoreError::Forbidden(_) => ErrorKind::Forbidden,
            StoreError::Conflict(_) | StoreError::Busy { .. } => ErrorKind::Conflict,
            StoreError::Unavailable { .. } | StoreError::Engine(_) => ErrorKind::Failed,
        };
        Self {
            kind,
            retryable: e.is_retryable(),
            message: e.to_string(),
        }
    }
}

impl From<std::io::Error> for CommandError {
    fn from(e: std::io::Error) -> Self {
        Self::failed(e.to_string())
    }
}
