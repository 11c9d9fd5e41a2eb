//! One error type for every command, and the one place that turns a refusal into the
//! command line's words and an exit code.
//!
//! The core and the store say *what* was refused, as data, and `baton_app::ops::hints`
//! words it once for every edge; this edge spells those words its own way — flags
//! (`--reason`) for fields, `baton show ID` for an operation. The exit code follows from
//! the refusal's kind alone.

use std::fmt;

use baton_app::ops::hints::{self, Next, Spell};
use baton_core::{Field, Refusal, RefusalKind};
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
        Field::Paths => "GLOB",
        Field::Ttl => "--ttl",
        Field::ResumeAt => "--resume-at",
        // Positional arguments: named by what they are.
        other => other.noun(),
    }
}

/// How the command line spells a refusal's words: flags for fields, `baton WORDS …` for
/// an operation (a command this binary has), a step by its command's name.
struct CommandLine;

impl Spell for CommandLine {
    fn field(&self, field: Field) -> String {
        flag(field).to_owned()
    }

    fn input(&self, name: &'static str) -> String {
        format!("--{}", name.replace('_', "-"))
    }

    fn id(&self) -> String {
        "the id".to_owned()
    }

    fn at(&self, _: Field, path: &str) -> String {
        if path.is_empty() { "/" } else { path }.to_owned()
    }

    fn run(&self, next: &Next) -> Option<String> {
        crate::cli::has_command(&next.words()).then(|| format!("`{}`", next.command_line()))
    }

    fn step(&self, next: &Next) -> String {
        next.action()
            .map_or_else(|| next.words().join(" "), str::to_owned)
    }

    fn again(&self, _: &Next) -> String {
        "run it again".to_owned()
    }
}

/// What only the command line says of a refusal, after its words.
fn cli_note(r: &Refusal) -> Option<&'static str> {
    match r {
        // The command line builds each input whole: only another version's server says so.
        Refusal::Input { .. } => Some(
            "; is the server another version of Baton? (`baton --version` and the server's \
             `/v1/openapi.json`)",
        ),
        _ => None,
    }
}

/// A refusal in the command line's words.
pub fn refusal(r: &Refusal) -> String {
    let mut text = hints::explain(r, None).text(&CommandLine);
    text.extend(cli_note(r));
    text
}

#[cfg(test)]
mod tests {
    use baton_app::ops::hints::{Named, Noting, Part, every_refusal, explain};
    use baton_core::Record;
    use clap::CommandFactory;

    use super::*;

    fn parses(next: &Next) {
        let mut argv = vec!["baton".to_owned()];
        argv.extend(next.argv());
        if let Err(e) = crate::cli::Cli::command().try_get_matches_from(&argv) {
            panic!("`{}` does not parse: {e}", argv.join(" "));
        }
    }

    /// Every refusal in the command line's words: each command it names parses as this
    /// binary's, and so does each command another edge names where it has no way of its
    /// own (an alternative's last).
    #[test]
    fn every_refusal_names_commands_this_binary_has() {
        for r in every_refusal() {
            let noting = Noting::new(&CommandLine);
            let explained = explain(&r, None);
            let text = explained.text(&noting);
            assert!(!text.is_empty(), "{r:?}");
            for named in noting.named.into_inner() {
                match named {
                    Named::Run(next) => parses(&next),
                    Named::Step(next) => assert!(
                        crate::cli::has_command(&next.words()),
                        "{r:?}: no command `baton {}`",
                        next.words().join(" ")
                    ),
                    Named::Again(_) => {}
                    Named::Elsewhere(next) => {
                        panic!("{r:?}: the command line has no `{}`", next.command_line())
                    }
                }
            }
            for part in explained.parts() {
                if let Part::Run(alternatives) = part {
                    parses(alternatives.last().unwrap());
                }
            }
        }
    }

    #[test]
    fn a_refusal_names_the_fix_in_flags_and_commands() {
        let cases = [
            (
                Refusal::not_found(Record::Order, "wo_9"),
                "no order wo_9 in this project: check the id or see `baton order list --all`",
            ),
            (
                Refusal::SenderNote,
                "--note is for a recipient's completion; to tell the recipients something, \
                 call `baton send --reply-to ID --body TEXT`",
            ),
            (
                Refusal::Missing(Field::Topic),
                "--topic is required (unless it is a reply: `baton send --reply-to ID --body TEXT`)",
            ),
        ];
        for (r, words) in cases {
            assert_eq!(refusal(&r), words);
        }
        let beyond = every_refusal()
            .into_iter()
            .find(|r| matches!(r, Refusal::Beyond { .. }))
            .unwrap();
        assert!(
            refusal(&beyond)
                .contains("An owner can widen it: `baton agent policy impl-1 --may request,…`"),
            "{}",
            refusal(&beyond)
        );
    }
}
