//! The server's host: it has no checkout of anyone's repository. A path the client names
//! cannot be examined here, so receipts take URIs and notes take record ids; the contract
//! rules that ask the repository (B2, B3) are left unchecked, as `NoEnvironment` says, and
//! are checked where the checkout is (`baton handoff check`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_app::{Clock, Files, Hashed, Host, PathClock, PathProblem};
use baton_core::Millis;
use baton_core::awl::NoEnvironment;

struct WallClock;

impl Clock for WallClock {
    fn now(&self) -> Millis {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as Millis)
    }
}

struct NoPaths;

impl PathClock for NoPaths {
    fn changed_at(&self, _: &str) -> Option<Millis> {
        None
    }
}

impl Files for NoPaths {
    fn resolve(&self, _: &Path, _: &str) -> Result<String, PathProblem> {
        Err(PathProblem::Missing)
    }

    fn hash(&self, _: &Path, path: &str) -> std::io::Result<Hashed> {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "{path:?} is a path on the client: a server records an artifact by URI (scheme://…)"
            ),
        ))
    }
}

/// The host every project on the server shares.
pub fn server() -> Host {
    Host {
        root: PathBuf::from("/"),
        environment: Arc::new(NoEnvironment),
        paths: Arc::new(NoPaths),
        files: Arc::new(NoPaths),
        clock: Arc::new(WallClock),
    }
}
