//! The run ledger: runs with their health and tokens, the reaper's pass, a hook.

use baton_core::Millis;
use baton_core::run::{Health, Progress, RunStatus};
use baton_core::time::rfc3339;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::HelperCounts;
use crate::RunRow;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Tokens {
    pub input: Option<u64>,
    pub cached_input: Option<u64>,
    pub output: Option<u64>,
    /// Input plus output, when both were reported.
    pub total: Option<u64>,
}

/// A run as `baton runs` lists it: recorded facts, and health derived now.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RunDoc {
    pub id: String,
    pub status: RunStatus,
    /// Derived now for a live run; `null` once it ended (done, failed, stopped).
    pub health: Option<Health>,
    pub participant: Option<String>,
    pub order: Option<String>,
    pub agent: Option<String>,
    pub command: Vec<String>,
    pub host: Option<String>,
    pub pid: Option<u32>,
    pub monitor_pid: Option<u32>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub reason: Option<String>,
    pub progress: Option<Progress>,
    pub tokens: Option<Tokens>,
    pub budget_tokens: Option<u64>,
    pub session: Option<String>,
    /// `wrapper` (`baton run`), `untracked`, `session` or `helper` (seen through hooks;
    /// their pid is unknown, so nothing offers to stop them).
    pub source: baton_core::run::Source,
    /// A helper's session or run.
    pub parent: Option<String>,
    /// A helper's kind, as its agent names it.
    pub agent_type: Option<String>,
    /// The tools its hooks named (the first 32).
    pub tools: Vec<String>,
    /// Its agent's `notify` reached Baton but none of its hooks did: the agent skipped
    /// them (Codex runs only hooks a person has reviewed and trusted).
    #[serde(default)]
    pub hooks_skipped: bool,
    /// A session's or run's helpers, counted (on `status` and the board).
    pub helpers: Option<HelperCounts>,
    /// What it is, in a line: its command, or for a session or helper what its hooks say
    /// (its kind, its helpers, the tools it used).
    pub what: String,
    pub registered_at: String,
    pub started_at: Option<String>,
    pub heartbeat_at: Option<String>,
    pub last_event_at: String,
    pub ended_at: Option<String>,
    /// How long since its last event, while it has not ended.
    pub idle_ms: Option<i64>,
}

impl RunDoc {
    pub fn new(row: &RunRow, now: Millis) -> Self {
        let run = &row.run;
        Self {
            id: run.id.clone(),
            status: run.status,
            health: row.health,
            participant: run.participant.clone(),
            order: run.order.clone(),
            agent: run.agent.clone(),
            command: run.command.clone(),
            host: run.host.clone(),
            pid: run.process.map(|p| p.pid),
            monitor_pid: run.monitor.map(|p| p.pid),
            exit_code: run.exit_code,
            signal: run.signal,
            reason: run.reason.clone(),
            progress: run.progress,
            tokens: run.tokens.map(|t| Tokens {
                input: t.input,
                cached_input: t.cached_input,
                output: t.output,
                total: t.total(),
            }),
            budget_tokens: run.budget_tokens,
            session: run.session.clone(),
            source: run.source,
            parent: run.parent.clone(),
            agent_type: run.agent_type.clone(),
            tools: run.tools.clone(),
            hooks_skipped: baton_core::run::hooks_skipped(run),
            helpers: None,
            what: describe(run, None),
            registered_at: rfc3339(run.registered_at),
            started_at: run.started_at.map(rfc3339),
            heartbeat_at: run.heartbeat_at.map(rfc3339),
            last_event_at: rfc3339(run.last_event_at),
            ended_at: run.ended_at.map(rfc3339),
            idle_ms: run
                .ended_at
                .is_none()
                .then(|| (now - run.last_event_at).max(0)),
        }
    }
}

impl RunDoc {
    /// Where it comes from, in a word: `wrapper`, `untracked`, or the agent's
    /// `claude-session`, `codex-helper`, …
    pub fn source_label(&self) -> String {
        use baton_core::run::Source;
        match (self.source, self.agent.as_deref()) {
            (Source::Session | Source::Helper, Some(agent)) => {
                format!("{agent}-{}", self.source.as_str())
            }
            (source, _) => source.as_str().to_owned(),
        }
    }

    /// With its helpers counted.
    pub fn with_helpers(mut self, run: &baton_core::run::Run, helpers: HelperCounts) -> Self {
        self.what = describe(run, Some(&helpers));
        self.helpers = Some(helpers);
        self
    }
}

/// A run in a line: its command; for a session or helper (which has none), its kind, its
/// helpers and the tools it used.
fn describe(run: &baton_core::run::Run, helpers: Option<&HelperCounts>) -> String {
    let mut parts: Vec<String> = Vec::new();
    // First, so a narrow column still shows it.
    if baton_core::run::hooks_skipped(run) {
        parts.push("hooks skipped".to_owned());
    }
    if !run.command.is_empty() {
        parts.push(run.command.join(" "));
    }
    if run.command.is_empty() {
        parts.extend(run.agent_type.clone());
    }
    if let Some(h) = helpers {
        parts.push(format!(
            "helpers {} active, {} idle, {} ended",
            h.active, h.idle, h.ended
        ));
    }
    if run.command.is_empty() && !run.tools.is_empty() {
        parts.push(format!("tools: {}", run.tools.join(", ")));
    }
    parts.join(" · ")
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Runs {
    pub items: Vec<RunDoc>,
    /// With `--all`, the cursor of the next page (`--cursor`); null on the last page and
    /// in the default view.
    pub next: Option<String>,
}
doc!(Runs, "baton/runs@1");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReapedRun {
    pub run: String,
    /// Messages its participant had fetched during the run, back to pending.
    pub resurfaced: Vec<String>,
    /// Alerts raised (an alert already open is not raised again).
    pub alerts: Vec<String>,
}

/// What one reaper pass did.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Reap {
    pub lost: Vec<ReapedRun>,
    pub untracked: Vec<String>,
    pub gone: Vec<String>,
    pub overdue: Vec<String>,
    /// Sessions and helpers seen through hooks that fell silent, now ended.
    pub ended: Vec<String>,
    /// Alerts raised for ended sessions whose participant holds work.
    pub held: Vec<String>,
}
doc!(Reap, "baton/reap@1");

impl From<&crate::Pass> for Reap {
    fn from(p: &crate::Pass) -> Self {
        Self {
            lost: p
                .lost
                .iter()
                .map(|r| ReapedRun {
                    run: r.run.clone(),
                    resurfaced: r.resurfaced.clone(),
                    alerts: r.alerts.clone(),
                })
                .collect(),
            untracked: p.untracked.clone(),
            gone: p.gone.clone(),
            overdue: p.overdue.clone(),
            ended: p.ended.clone(),
            held: p.held.clone(),
        }
    }
}

/// What a hook prints: the resume packet when it injects one, else nothing.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Hook {
    pub text: String,
}
doc!(Hook, "baton/hook@1");
