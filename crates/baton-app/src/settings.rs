//! What a project's `config.toml` says, as a value. Parsed from text the caller read; this
//! module reads no file.

use std::time::Duration;

use baton_core::awl::ContractMode;
use baton_core::message::DEFAULT_PAYLOAD_CAP;
use baton_core::run::HealthPolicy;
use baton_store::DEFAULT_BUSY_TIMEOUT;
use serde::Deserialize;

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
# A helper (subagent) seen through hooks with no hook for this long stops counting as
# active: helpers whose end was never reported do not pile up as work in progress.
helper_idle = "15m"
# A session or helper seen through hooks with no hook for this long is ended by the
# reaper (`baton reap`); a later hook makes it running again.
session_ended_after = "1h"
# How many `baton run`s may run at once in this checkout (`--slots` overrides it).
slots = 2

[orders]
# Whether every Work Order must carry the `x-baton` handoff contract (base revision, test
# command, acceptance owner, stop conditions...): "required", or "optional" for plain AWL.
contract = "required"
# How long `baton order approve` waits for an upstream MCP server to start and answer one
# held effect; one that does not is recorded as a failed effect, with this setting named.
effect_timeout = "60s"

[webhooks]
# Whether a webhook may be set to a loopback, private or link-local address (a local test
# setup); otherwise only public addresses are taken. `baton serve` delivers to them only
# with --allow-private-webhooks.
allow_private = false

[reservations]
# How long a reservation lasts when `baton reserve` is given no --ttl, and the longest
# one may ask for. Reserving the same glob again renews it.
default_ttl = "1h"
max_ttl = "24h"
# How long a holder's runs and sessions must have been quiet before an owner may
# force-release its reservations (`baton release --force`).
force_after = "10m"
# What the git guard (`baton init --git-guard`) does when it cannot read the store:
# "open" lets the commit through with a one-line warning, "closed" refuses it.
guard = "open"
"#;

/// A project's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub busy_timeout: Duration,
    /// Largest payload accepted, in bytes of JSON (documents included).
    pub payload_cap: usize,
    /// Identical sends within this window return the original id.
    pub duplicate_window: Duration,
    pub heartbeat: Duration,
    pub idle_after: Duration,
    pub stalled_after: Duration,
    /// A helper quiet this long no longer counts as active (`[runs] helper_idle`).
    pub helper_idle: Duration,
    /// A session or helper quiet this long is ended by the reaper
    /// (`[runs] session_ended_after`).
    pub session_ended_after: Duration,
    pub slots: u32,
    /// Whether orders and reports must carry the `x-baton` contract.
    pub contract: ContractMode,
    /// How long a request on a topic may stay open before it reaches the human queue
    /// (`[queue.targets]`, e.g. `review = "4h"`).
    pub service_targets: std::collections::BTreeMap<String, Duration>,
    /// How long an approval waits for an upstream to start and answer one effect
    /// (`[orders] effect_timeout`).
    pub effect_timeout: Duration,
    /// Whether webhooks may go to loopback, private and link-local addresses
    /// (`[webhooks] allow_private = true`; `baton serve --allow-private-webhooks`).
    pub private_webhooks: bool,
    /// What a server lets outside A2A agents be (`baton serve --agent-key-env`,
    /// `--allow-private-agents`): the variables their keys may be read from, and whether
    /// they may be at private addresses. `None` where no server decides — the operator
    /// administering the store where it is, who names any variable and any address;
    /// a server reads and reaches only what its own admission allows.
    pub outside_agents: Option<baton_core::participant::Admission>,
    /// `[reservations]`: the default and longest time to live, the quiet a force-release
    /// waits out, and whether the git guard refuses a commit when the store cannot be read.
    pub reservations: Reservations,
}

/// `[reservations]` in `config.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservations {
    pub default_ttl: Duration,
    pub max_ttl: Duration,
    pub force_after: Duration,
    pub guard_fails_closed: bool,
}

impl Default for Reservations {
    fn default() -> Self {
        Self {
            default_ttl: Duration::from_secs(3600),
            max_ttl: Duration::from_secs(24 * 3600),
            force_after: Duration::from_secs(600),
            guard_fails_closed: false,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawReservations {
    default_ttl: Option<String>,
    max_ttl: Option<String>,
    force_after: Option<String>,
    guard: Option<String>,
}

impl Reservations {
    fn parse(raw: RawReservations) -> Result<Self, String> {
        let mut out = Self::default();
        let positive = |what: &str, text: &str| {
            let d = parse_duration(what, text)?;
            if d.as_secs() == 0 {
                return Err(format!("{what} must be at least 1s"));
            }
            Ok(d)
        };
        if let Some(d) = raw.default_ttl {
            out.default_ttl = positive("reservations.default_ttl", &d)?;
        }
        if let Some(d) = raw.max_ttl {
            out.max_ttl = positive("reservations.max_ttl", &d)?;
        }
        if out.default_ttl > out.max_ttl {
            return Err(
                "reservations.default_ttl must not be longer than reservations.max_ttl".into(),
            );
        }
        if let Some(d) = raw.force_after {
            out.force_after = parse_duration("reservations.force_after", &d)?;
        }
        if let Some(g) = raw.guard {
            out.guard_fails_closed = match g.as_str() {
                "open" => false,
                "closed" => true,
                other => {
                    return Err(format!(
                        "reservations.guard: {other:?} must be \"open\" or \"closed\""
                    ));
                }
            };
        }
        Ok(out)
    }

    /// A duration in whole seconds, as the core takes a TTL.
    pub fn seconds(d: Duration) -> i64 {
        i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            payload_cap: DEFAULT_PAYLOAD_CAP,
            duplicate_window: Duration::from_secs(600),
            heartbeat: Duration::from_secs(15),
            idle_after: Duration::from_secs(60),
            stalled_after: Duration::from_secs(600),
            helper_idle: Duration::from_secs(15 * 60),
            session_ended_after: Duration::from_secs(60 * 60),
            slots: 2,
            contract: ContractMode::Required,
            service_targets: std::collections::BTreeMap::new(),
            private_webhooks: false,
            outside_agents: None,
            effect_timeout: Duration::from_secs(60),
            reservations: Reservations::default(),
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
    #[serde(default)]
    queue: RawQueue,
    #[serde(default)]
    webhooks: RawWebhooks,
    #[serde(default)]
    reservations: RawReservations,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawWebhooks {
    allow_private: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawQueue {
    #[serde(default)]
    targets: std::collections::BTreeMap<String, String>,
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
    helper_idle: Option<String>,
    session_ended_after: Option<String>,
    slots: Option<u32>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawOrders {
    contract: Option<String>,
    effect_timeout: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawMessages {
    payload_cap: Option<usize>,
    duplicate_window: Option<String>,
}

impl Settings {
    /// Parses a `config.toml`; a setting left out keeps its default. The error names the
    /// setting.
    pub fn parse(text: &str) -> Result<Self, String> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut settings = Settings::default();
        if let Some(d) = raw.store.busy_timeout {
            settings.busy_timeout = parse_duration("store.busy_timeout", &d)?;
        }
        if let Some(cap) = raw.messages.payload_cap {
            if cap == 0 {
                return Err("messages.payload_cap must be at least 1 byte".into());
            }
            settings.payload_cap = cap;
        }
        if let Some(d) = raw.messages.duplicate_window {
            settings.duplicate_window = parse_duration("messages.duplicate_window", &d)?;
        }
        if let Some(d) = raw.runs.heartbeat {
            settings.heartbeat = parse_duration("runs.heartbeat", &d)?;
            if settings.heartbeat.is_zero() {
                return Err("runs.heartbeat must be longer than 0s".into());
            }
        }
        if let Some(d) = raw.runs.idle_after {
            settings.idle_after = parse_duration("runs.idle_after", &d)?;
        }
        if let Some(d) = raw.runs.stalled_after {
            settings.stalled_after = parse_duration("runs.stalled_after", &d)?;
        }
        if let Some(d) = raw.runs.helper_idle {
            settings.helper_idle = parse_duration("runs.helper_idle", &d)?;
        }
        if let Some(d) = raw.runs.session_ended_after {
            settings.session_ended_after = parse_duration("runs.session_ended_after", &d)?;
        }
        if let Some(n) = raw.runs.slots {
            if n == 0 {
                return Err("runs.slots must be at least 1".into());
            }
            settings.slots = n;
        }
        if let Some(c) = raw.orders.contract {
            settings.contract = ContractMode::parse(&c).ok_or_else(|| {
                format!("orders.contract: {c:?} must be \"required\" or \"optional\"")
            })?;
        }
        if let Some(d) = raw.orders.effect_timeout {
            settings.effect_timeout = parse_duration("orders.effect_timeout", &d)?;
            if settings.effect_timeout.is_zero() {
                return Err("orders.effect_timeout must be longer than 0s".into());
            }
        }
        if let Some(private) = raw.webhooks.allow_private {
            settings.private_webhooks = private;
        }
        settings.reservations = Reservations::parse(raw.reservations)?;
        for (topic, d) in raw.queue.targets {
            let target = parse_duration(&format!("queue.targets.{topic}"), &d)?;
            settings.service_targets.insert(topic, target);
        }
        Ok(settings)
    }

    /// The duplicate window in milliseconds, as the store takes it.
    pub fn duplicate_window_ms(&self) -> i64 {
        i64::try_from(self.duplicate_window.as_millis()).unwrap_or(i64::MAX)
    }

    /// How the ledger's health is judged.
    pub fn health_policy(&self) -> HealthPolicy {
        HealthPolicy {
            idle_after_ms: self.idle_after.as_millis() as i64,
            stalled_after_ms: self.stalled_after.as_millis() as i64,
            ..HealthPolicy::default()
        }
    }
}

/// Parses a non-negative duration such as `5s`, `10m`, `1h 30m`, `3d` or `2w` with the
/// core's one parser ([`baton_core::time::duration`]).
pub fn parse_duration(what: &str, text: &str) -> Result<Duration, String> {
    baton_core::time::duration(text).ok_or_else(|| {
        format!(
            "{what}: {text:?} is not a duration: use {}",
            baton_core::time::DURATION_FORMS
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_config_file_parses_to_the_defaults() {
        assert_eq!(
            Settings::parse(DEFAULT_CONFIG).unwrap(),
            Settings::default()
        );
    }

    #[test]
    fn bad_settings_are_named() {
        let err = Settings::parse("[messages]\nduplicate_window = \"soon\"").unwrap_err();
        assert!(err.contains("messages.duplicate_window"), "{err}");
        let err = Settings::parse("[messages]\npayload_kap = 1").unwrap_err();
        assert!(err.contains("payload_kap"), "{err}");
    }
}
