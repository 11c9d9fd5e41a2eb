//! Finding the project (`.baton/`, like `.git/`), reading its `config.toml`, opening its
//! store.

use std::path::{Path, PathBuf};
use std::time::Duration;

use baton_core::Millis;
use baton_core::message::DEFAULT_PAYLOAD_CAP;
use baton_store::SqliteStore;
use baton_store::recall::PathClock;
use baton_store::sqlite::DEFAULT_BUSY_TIMEOUT;
use serde::Deserialize;

use crate::error::{CommandError, CommandResult, ErrorKind};

pub const DIR: &str = ".baton";
pub const DB_FILE: &str = "baton.db";
pub const CONFIG_FILE: &str = "config.toml";

/// The config file `baton init` writes: every setting, at its default, explained.
pub const DEFAULT_CONFIG: &str = r#"# Baton project configuration. Every setting is shown at its default.

[store]
# How long a writer waits for another writer before giving up with a retryable error
# (exit 6). Writes are short; a wait this long means something is wrong.
busy_timeout = "5s"

[messages]
# Largest payload accepted, in bytes of JSON.
payload_cap = 262144
# A send identical to one made this recently (same sender, type, topic, payload and parent)
# returns the original id instead of storing a copy. "0s" turns this off.
duplicate_window = "10m"

[runs]
# How often `baton run` records that it and its agent are alive.
heartbeat = "15s"
# A live run with no activity (output, progress, tokens, a hook) for this long is idle,
# and for this long stalled. Health is computed when read, so changing these is safe.
idle_after = "60s"
stalled_after = "600s"
# How many `baton run`s may run at once in this checkout (`--slots` overrides it).
slots = 2

[orders]
# Whether every Work Order must carry the `x-baton` handoff contract (base revision, test
# command, acceptance owner, stop conditions...): "required", or "optional" for plain AWL.
contract = "required"
"#;

#[derive(Debug, Clone)]
pub struct Config {
    pub busy_timeout: Duration,
    pub payload_cap: usize,
    pub duplicate_window: Duration,
    pub heartbeat: Duration,
    pub idle_after: Duration,
    pub stalled_after: Duration,
    pub slots: u32,
    pub contract: baton_core::awl::ContractMode,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            payload_cap: DEFAULT_PAYLOAD_CAP,
            duplicate_window: Duration::from_secs(600),
            heartbeat: Duration::from_secs(15),
            idle_after: Duration::from_secs(60),
            stalled_after: Duration::from_secs(600),
            slots: 2,
            contract: baton_core::awl::ContractMode::Required,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    store: RawStore,
    #[serde(default)]
    messages: RawMessages,
    #[serde(default)]
    runs: RawRuns,
    #[serde(default)]
    orders: RawOrders,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawStore {
    busy_timeout: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawRuns {
    heartbeat: Option<String>,
    idle_after: Option<String>,
    stalled_after: Option<String>,
    slots: Option<u32>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawOrders {
    contract: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawMessages {
    payload_cap: Option<usize>,
    duplicate_window: Option<String>,
}

impl Config {
    pub fn parse(text: &str) -> Result<Self, String> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut config = Config::default();
        if let Some(d) = raw.store.busy_timeout {
            config.busy_timeout = parse_duration("store.busy_timeout", &d)?;
        }
        if let Some(cap) = raw.messages.payload_cap {
            if cap == 0 {
                return Err("messages.payload_cap must be at least 1 byte".into());
            }
            config.payload_cap = cap;
        }
        if let Some(d) = raw.messages.duplicate_window {
            config.duplicate_window = parse_duration("messages.duplicate_window", &d)?;
        }
        if let Some(d) = raw.runs.heartbeat {
            config.heartbeat = parse_duration("runs.heartbeat", &d)?;
            if config.heartbeat.is_zero() {
                return Err("runs.heartbeat must be longer than 0s".into());
            }
        }
        if let Some(d) = raw.runs.idle_after {
            config.idle_after = parse_duration("runs.idle_after", &d)?;
        }
        if let Some(d) = raw.runs.stalled_after {
            config.stalled_after = parse_duration("runs.stalled_after", &d)?;
        }
        if let Some(n) = raw.runs.slots {
            if n == 0 {
                return Err("runs.slots must be at least 1".into());
            }
            config.slots = n;
        }
        if let Some(c) = raw.orders.contract {
            config.contract = baton_core::awl::ContractMode::parse(&c).ok_or_else(|| {
                format!("orders.contract: {c:?} must be \"required\" or \"optional\"")
            })?;
        }
        Ok(config)
    }
}

/// Parses a non-negative duration such as `5s`, `10m` or `1h 30m`.
pub fn parse_duration(what: &str, text: &str) -> Result<Duration, String> {
    let d: jiff::SignedDuration = text
        .parse()
        .map_err(|e| format!("{what}: {text:?} is not a duration like \"5s\" or \"10m\": {e}"))?;
    Duration::try_from(d).map_err(|_| format!("{what}: {text:?} must not be negative"))
}

#[derive(Debug, Clone)]
pub struct Project {
    pub root: PathBuf,
    pub config: Config,
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

    fn read_config(root: &Path) -> CommandResult<Config> {
        let path = root.join(DIR).join(CONFIG_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Config::parse(&text).map_err(|e| {
                CommandError::new(ErrorKind::Failed, format!("{}: {e}", path.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
            Err(e) => Err(CommandError::failed(format!("{}: {e}", path.display()))),
        }
    }

    pub fn db_path(&self) -> PathBuf {
        self.root.join(DIR).join(DB_FILE)
    }

    /// How the project's paths change: for note staleness.
    pub fn clock(&self) -> GitClock {
        GitClock {
            root: self.root.clone(),
        }
    }

    pub async fn open_store(&self) -> CommandResult<SqliteStore> {
        Ok(SqliteStore::open(&self.db_path(), self.config.busy_timeout).await?)
    }
}

/// A path's last change: the later of its newest commit (`git log -1 --format=%ct`) and
/// its modification time in the work tree. `None` when neither can be read.
pub struct GitClock {
    root: PathBuf,
}

impl PathClock for GitClock {
    fn changed_at(&self, path: &str) -> Option<Millis> {
        let modified = std::fs::metadata(self.root.join(path))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as Millis);
        let committed = std::process::Command::new("git")
            .arg("-C")
            .arg(&self.root)
            .args(["log", "-1", "--format=%ct", "--", path])
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse::<i64>().ok())
            .map(|secs| secs * 1000);
        modified.max(committed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_config_file_parses_to_the_defaults() {
        let parsed = Config::parse(DEFAULT_CONFIG).unwrap();
        let default = Config::default();
        assert_eq!(parsed.busy_timeout, default.busy_timeout);
        assert_eq!(parsed.payload_cap, default.payload_cap);
        assert_eq!(parsed.duplicate_window, default.duplicate_window);
        assert_eq!(parsed.heartbeat, default.heartbeat);
        assert_eq!(parsed.idle_after, default.idle_after);
        assert_eq!(parsed.stalled_after, default.stalled_after);
        assert_eq!(parsed.slots, default.slots);
    }

    #[test]
    fn bad_settings_are_named() {
        let err = Config::parse("[messages]\nduplicate_window = \"soon\"").unwrap_err();
        assert!(err.contains("messages.duplicate_window"), "{err}");
        let err = Config::parse("[messages]\npayload_kap = 1").unwrap_err();
        assert!(err.contains("payload_kap"), "{err}");
    }
}
