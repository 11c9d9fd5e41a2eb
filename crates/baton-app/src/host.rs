//! What the use cases ask of the machine they run on, as traits the caller implements:
//! when a path changed, what a file hashes to, whether a revision or a program exists,
//! which processes live, what time it is. The binary supplies the real ones (git, the
//! file system, `/proc`); tests may supply their own. Nothing in this crate touches the
//! machine directly.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_core::Millis;
use baton_core::awl::Environment;
use baton_core::run::{ProcessRef, Registration};

/// When a path in the project last changed (newest commit or work-tree modification).
pub trait PathClock: Send + Sync {
    fn changed_at(&self, path: &str) -> Option<Millis>;
}

/// The wall clock.
pub trait Clock: Send + Sync {
    fn now(&self) -> Millis;
}

/// Why a path was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathProblem {
    /// Nothing exists there.
    Missing,
    /// It exists, outside the project root.
    Outside,
}

/// A file hashed where it lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hashed {
    /// As recorded: relative to the project root, or absolute when outside it.
    pub path: String,
    /// Hex blake3 of its bytes.
    pub hash: String,
    pub size: u64,
}

/// The project's files.
pub trait Files: Send + Sync {
    /// `path` (relative to `base`), which must exist inside the project: relative to the
    /// project root.
    fn resolve(&self, base: &Path, path: &str) -> Result<String, PathProblem>;
    /// Hashes the file at `path` (relative to `base`). Fails when it cannot be read.
    fn hash(&self, base: &Path, path: &str) -> std::io::Result<Hashed>;
}

/// The processes on this machine, for the reaper.
pub trait Processes: Send + Sync {
    /// This machine's name, as recorded on runs.
    fn host(&self) -> Option<String>;
    /// Whether the process is still the one recorded; `None` when this machine cannot
    /// say.
    fn alive(&self, process: &ProcessRef) -> Option<bool>;
    /// The reaper's own process id.
    fn me(&self) -> u32;
    /// Coding agents running here that are not `tracked` (nor children of a tracked
    /// process or of another agent), as untracked registrations.
    fn untracked_agents(&self, tracked: &std::collections::HashSet<u32>) -> Vec<Registration>;
}

/// Everything the use cases need from the machine, and where the project lives.
#[derive(Clone)]
pub struct Host {
    /// The project root: note subjects and receipt artifacts are stored relative to it,
    /// and the resume packet names it.
    pub root: PathBuf,
    /// What the contract rules ask of the world (does a revision exist, is a program on
    /// PATH).
    pub environment: Arc<dyn Environment + Send + Sync>,
    pub paths: Arc<dyn PathClock>,
    pub files: Arc<dyn Files>,
    pub clock: Arc<dyn Clock>,
}
