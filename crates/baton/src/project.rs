//! Finding the project (`.baton/`, like `.git/`), reading its `config.toml`, opening its
//! store and the use cases over it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use baton_app::{App, Settings};
use baton_store::Store;

use crate::error::{CommandError, CommandResult, ErrorKind};

pub const DIR: &str = ".baton";
pub const DB_FILE: &str = "baton.db";
pub const CONFIG_FILE: &str = "config.toml";

pub use baton_app::settings::{DEFAULT_CONFIG, parse_duration};

#[derive(Debug, Clone)]
pub struct Project {
    pub root: PathBuf,
    pub config: Settings,
}

impl Project {
    /// The project at `explicit` (from `--project` or `BATON_PROJECT`), or the nearest
    /// `.baton/` upward from the working directory.
    pub fn locate(explicit: Option<&Path>) -> CommandResult<Self> {
        let root = match explicit {
            Some(dir) => {
                if !dir.join(DIR).is_dir() {
                    return Err(CommandError::usage(format!(
                        "no Baton project at {} (no {DIR}/ there): run `baton init` in it",
                        dir.display()
                    )));
                }
                dir.to_owned()
            }
            None => {
                let cwd = std::env::current_dir()?;
                cwd.ancestors()
                    .find(|dir| dir.join(DIR).is_dir())
                    .map(Path::to_owned)
                    .ok_or_else(|| {
                        CommandError::usage(
                            "not inside a Baton project (no .baton/ here or above): run `baton init` first",
                        )
                    })?
            }
        };
        let config = Self::read_config(&root)?;
        Ok(Self { root, config })
    }

    fn read_config(root: &Path) -> CommandResult<Settings> {
        let path = root.join(DIR).join(CONFIG_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Settings::parse(&text).map_err(|e| {
                CommandError::new(ErrorKind::Failed, format!("{}: {e}", path.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Settings::default()),
            Err(e) => Err(CommandError::failed(format!("{}: {e}", path.display()))),
        }
    }

    pub fn db_path(&self) -> PathBuf {
        self.root.join(DIR).join(DB_FILE)
    }

    /// The store's URL: the embedded SQLite file.
    pub fn store_url(&self) -> String {
        format!("sqlite:{}", self.db_path().display())
    }

    /// Opens the project's store, waiting at most `busy_timeout` for another writer.
    pub async fn open_store(&self, busy_timeout: Duration) -> CommandResult<Store> {
        Ok(baton_store::open(&self.store_url(), busy_timeout, false).await?)
    }

    /// The project's use cases over its store, with the configured busy timeout. A wait
    /// that blocks says so on stderr ([`say_waiting`]).
    pub async fn open_app(&self) -> CommandResult<App> {
        let store = self.open_store(self.config.busy_timeout).await?;
        Ok(App::new(store, self.config.clone(), crate::host::of(self)).on_wait(say_waiting))
    }

    /// The use cases for an agent's hook: a short busy timeout, and its events spooled
    /// beside the store rather than wait for the write lock.
    pub async fn hook_app(&self, busy_timeout: Duration) -> CommandResult<App> {
        let store = baton_store::open_for_hooks(&self.store_url(), busy_timeout).await?;
        Ok(App::new(store, self.config.clone(), crate::host::of(self)).on_wait(say_waiting))
    }
}

/// The line a blocking wait prints on stderr before it blocks: whoever waits on this
/// process (a person, a script, a test) can tell it is in place before writing what it
/// waits for.
pub fn say_waiting(what: &str) {
    eprintln!("waiting for {what}");
}
