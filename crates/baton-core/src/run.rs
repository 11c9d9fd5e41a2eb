//! The run ledger: what a run is, the facts its producers record about it, and
//! what is derived from those facts at read time.
//!
//! Producers (`baton run`, the hooks, the reaper) write [`RunChange`]s; [`check`] says
//! whether a change may follow the run's current status and [`fold`] applies it, so a
//! backend's `runs` projection is the fold of the log and nothing else. Health is never
//! stored: [`health`] computes it from the facts and `now`. This module also reads the
//! agents' output — `PROGRESS n/total` lines and the token usage in Claude Code's
//! `stream-json` and Codex's `exec --json` streams — as pure functions of the lines.
//! Unknown stays unknown: a count nobody reported is `None`, never `0`.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::delivery::{DeliveryStatus, resurface};
use crate::event::Change;
use crate::names::Passname;
use crate::refusal::{Record, Refusal};
use crate::state::StateOp;
use crate::time::Millis;

/// What a producer knows about a run. Written, never computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The row exists; the process does not yet.
    Registered,
    Running,
    /// Exited 0 with every expected receipt.
    Done,
    /// Could not start, exited non-zero, went over budget or missed a receipt.
    Failed,
    /// Ended by a signal.
    Stopped,
    /// The process that records the run is gone and no exit was recorded.
    Lost,
    /// An agent process found on the machine that was not started through `baton run`.
    Untracked,
    /// A session or helper seen through hooks that said it ended (`SessionEnd`,
    /// `SubagentStop`), or that the reaper ended when it fell silent.
    Ended,
}

impl RunStatus {
    pub const ALL: [RunStatus; 8] = [
        Self::Registered,
        Self::Running,
        Self::Done,
        Self::Failed,
        Self::Stopped,
        Self::Lost,
        Self::Untracked,
        Self::Ended,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Registered => "registered",
            Self::Running => "running",
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
            Self::Lost => "lost",
            Self::Untracked => "untracked",
            Self::Ended => "ended",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Whether a process may still be behind the run. An untracked process counts: it
    /// was found running, and until the reaper finds it gone it may hold its
    /// participant's work (so what that participant fetched does not resurface).
    pub fn is_live(self) -> bool {
        matches!(self, Self::Registered | Self::Running | Self::Untracked)
    }

    /// A run that ended badly: what the human queue's failures lane lists.
    pub fn is_failure(self) -> bool {
        matches!(self, Self::Failed | Self::Lost)
    }

    /// A run that ended well: what clears an earlier failure of the same command or order.
    pub fn clears_failures(self) -> bool {
        self == Self::Done
    }

    /// The statuses that hold `rule`, for a store to select by (`live`, `failure`).
    pub fn all_where(rule: fn(Self) -> bool) -> impl Iterator<Item = Self> {
        Self::ALL.into_iter().filter(move |s| rule(*s))
    }

    /// The statuses an exit may record.
    pub fn is_exit(self) -> bool {
        matches!(self, Self::Done | Self::Failed | Self::Stopped)
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A process, named so that a reused pid is not mistaken for it: the pid and the start
/// time the kernel reports for it (clock ticks since boot, `/proc/PID/stat` field 22).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProcessRef {
    pub pid: u32,
    /// `None` where the platform does not say.
    pub start: Option<u64>,
}

/// Token counts as an agent reported them. Each part is `None` until reported.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct TokenUsage {
    /// Every input token the model processed, cached ones included.
    pub input: Option<u64>,
    /// The part of `input` served from a prompt cache.
    pub cached_input: Option<u64>,
    pub output: Option<u64>,
}

impl TokenUsage {
    /// Input plus output, when both were reported.
    pub fn total(&self) -> Option<u64> {
        Some(self.input? + self.output?)
    }

    /// What is known to have been spent: the parts reported so far. A budget is over
    /// when this is, whatever the unreported parts turn out to be.
    pub fn known(&self) -> u64 {
        self.input.unwrap_or(0) + self.output.unwrap_or(0)
    }

    fn is_empty(&self) -> bool {
        self.input.is_none() && self.cached_input.is_none() && self.output.is_none()
    }

    fn plus(self, other: Self) -> Self {
        let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        Self {
            input: add(self.input, other.input),
            cached_input: add(self.cached_input, other.cached_input),
            output: add(self.output, other.output),
        }
    }

    /// What `self` holds beyond `before`, field by field (never below zero).
    fn minus(self, before: Self) -> Self {
        let minus = |a: Option<u64>, b: Option<u64>| a.map(|a| a.saturating_sub(b.unwrap_or(0)));
        Self {
            input: minus(self.input, before.input),
            cached_input: minus(self.cached_input, before.cached_input),
            output: minus(self.output, before.output),
        }
    }

    fn max(self, other: Self) -> Self {
        let max = |a: Option<u64>, b: Option<u64>| a.max(b);
        Self {
            input: max(self.input, other.input),
            cached_input: max(self.cached_input, other.cached_input),
            output: max(self.output, other.output),
        }
    }
}

/// Steps done out of a declared total. There is no progress without a denominator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Progress {
    pub done: u64,
    pub total: u64,
}

/// Reads a `PROGRESS n/total` (or `PROGRESS n` when `declared` steps were given) line.
/// Anything else — no denominator, `n > total`, a zero total — reports nothing.
pub fn parse_progress(line: &str, declared: Option<u64>) -> Option<Progress> {
    let rest = line.trim().strip_prefix("PROGRESS")?;
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let word = rest.split_whitespace().next()?;
    let (done, total) = match word.split_once('/') {
        Some((n, t)) => (n.parse().ok()?, t.parse().ok()?),
        None => (word.parse().ok()?, declared?),
    };
    (total > 0 && done <= total).then_some(Progress { done, total })
}

/// The longest line [`OutputParser`] reads; longer ones pass through unread.
pub const MAX_PARSED_LINE: usize = 16 * 1024 * 1024;

/// What the command line says about the Codex thread a run works on: `codex exec …`
/// starts a new one (its prior total is zero), `codex exec resume …` continues one whose
/// prior total the `exec --json` stream does not state. Anything else is unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CodexThread {
    New,
    Resumed,
    #[default]
    Unknown,
}

/// Reads [`CodexThread`] from the command `baton run` starts. Only a direct `codex exec`
/// (or its alias `codex e`) is known; a script that calls Codex is not.
pub fn codex_thread(command: &[String]) -> CodexThread {
    let Some(program) = command.first() else {
        return CodexThread::Unknown;
    };
    if program.rsplit('/').next() != Some("codex") {
        return CodexThread::Unknown;
    }
    let Some(exec) = command[1..].iter().position(|a| a == "exec" || a == "e") else {
        return CodexThread::Unknown;
    };
    if command[exec + 2..].iter().any(|a| a == "resume") {
        CodexThread::Resumed
    } else {
        CodexThread::New
    }
}

/// Reads an agent's output line by line: progress from `PROGRESS` lines (plain, or in the
/// text of Claude Code and Codex JSON events), token usage from their JSON events. The
/// usage reported is what this run spent, never a thread's history.
///
/// Claude Code (`--output-format stream-json`) repeats one API response's `usage` on every
/// content block of that response (same `message.id`), so usage is kept per message id
/// (largest value of each field) and summed, subagents' messages included. A `result`
/// event may restate figures cumulative over the process (several of them with
/// `--input-format stream-json`), so results are never summed: the largest one is taken
/// where it is larger than the messages' sum.
///
/// Codex (`exec --json`) reports the thread's cumulative usage on `turn.completed` (older
/// versions: `token_count` events with `total_token_usage` and `last_token_usage`). A
/// thread's spend is its newest total less its prior total: zero for a new thread, the
/// total before the first turn when a `token_count` event states it, and otherwise the
/// first total seen — so the first turn of a resumed thread is unknown, not guessed, and
/// a thread that reported only that one total reports nothing. An all-zero report —
/// what Codex prints when it has none — is ignored.
#[derive(Debug, Clone, Default)]
pub struct OutputParser {
    declared_steps: Option<u64>,
    claude_messages: BTreeMap<String, TokenUsage>,
    claude_anonymous: TokenUsage,
    claude_result: TokenUsage,
    /// What the command line says about the first Codex thread.
    codex_first: CodexThread,
    codex_threads: Vec<CodexAccount>,
}

/// One Codex thread's totals as this run saw them.
#[derive(Debug, Clone, Default)]
struct CodexAccount {
    thread: Option<String>,
    /// The thread's total before this run, when known.
    prior: Option<TokenUsage>,
    first: Option<TokenUsage>,
    latest: Option<TokenUsage>,
}

impl CodexAccount {
    /// What this run added to the thread, when that can be told.
    fn spent(&self) -> Option<TokenUsage> {
        let latest = self.latest?;
        match self.prior {
            Some(prior) => Some(latest.minus(prior)),
            None => {
                let first = self.first?;
                (latest != first).then(|| latest.minus(first))
            }
        }
    }

    fn total(&mut self, total: TokenUsage, last: Option<TokenUsage>) {
        if self.first.is_none() {
            self.first = Some(total);
            // The stream says what the thread held before this turn.
            if let Some(last) = last {
                self.prior = Some(total.minus(last));
            }
        }
        self.latest = Some(total);
    }
}

/// What one line told.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Parsed {
    pub progress: Option<Progress>,
    /// The run's token usage so far, when this line changed it.
    pub tokens: Option<TokenUsage>,
}

impl OutputParser {
    pub fn new(declared_steps: Option<u64>) -> Self {
        Self {
            declared_steps,
            ..Self::default()
        }
    }

    /// A parser for the output of `command` (see [`codex_thread`]).
    pub fn for_command(declared_steps: Option<u64>, command: &[String]) -> Self {
        Self {
            codex_first: codex_thread(command),
            ..Self::new(declared_steps)
        }
    }

    /// Token usage this run spent so far; `None` when nothing reported any.
    pub fn usage(&self) -> Option<TokenUsage> {
        let claude = self
            .claude_messages
            .values()
            .fold(self.claude_anonymous, |sum, u| sum.plus(*u))
            .max(self.claude_result);
        let total = self
            .codex_threads
            .iter()
            .filter_map(CodexAccount::spent)
            .fold(claude, TokenUsage::plus);
        (!total.is_empty()).then_some(total)
    }

    /// The Codex thread totals are read into: the newest, or a first one.
    fn codex_thread(&mut self) -> &mut CodexAccount {
        if self.codex_threads.is_empty() {
            self.start_codex_thread(None);
        }
        self.codex_threads.last_mut().expect("one thread")
    }

    fn start_codex_thread(&mut self, thread: Option<String>) {
        let prior = match (self.codex_threads.is_empty(), self.codex_first) {
            (true, CodexThread::New) => Some(TokenUsage::default()),
            _ => None,
        };
        self.codex_threads.push(CodexAccount {
            thread,
            prior,
            ..CodexAccount::default()
        });
    }

    pub fn line(&mut self, line: &str) -> Parsed {
        let trimmed = line.trim();
        if !trimmed.starts_with('{') {
            return Parsed {
                progress: parse_progress(trimmed, self.declared_steps),
                tokens: None,
            };
        }
        let Ok(value) = serde_json::from_str::<Value>(trimmed) else {
            return Parsed::default();
        };
        let before = self.usage();
        let mut progress = None;
        for text in self.read_event(&value) {
            for l in text.lines() {
                if let Some(p) = parse_progress(l, self.declared_steps) {
                    progress = Some(p);
                }
            }
        }
        let after = self.usage();
        Parsed {
            progress,
            tokens: (after != before).then_some(after).flatten(),
        }
    }

    /// Records the usage an event carries and returns the agent's text in it.
    fn read_event<'a>(&mut self, v: &'a Value) -> Vec<&'a str> {
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            // Claude Code: one assistant message (or one content block of it), a
            // subagent's included.
            "assistant" => {
                let Some(message) = v.get("message") else {
                    return Vec::new();
                };
                if let Some(usage) = message.get("usage").and_then(claude_usage) {
                    match message.get("id").and_then(Value::as_str) {
                        Some(id) => {
                            let seen = self.claude_messages.entry(id.to_owned()).or_default();
                            *seen = seen.max(usage);
                        }
                        None => self.claude_anonymous = self.claude_anonymous.plus(usage),
                    }
                }
                message
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|block| block.get("text").and_then(Value::as_str))
                    .collect()
            }
            // Claude Code: the end of one query; its usage may be cumulative.
            "result" => {
                if let Some(usage) = v.get("usage").and_then(claude_usage) {
                    self.claude_result = self.claude_result.max(usage);
                }
                Vec::new()
            }
            // Codex `exec --json`: a thread begins (new or resumed: the event is the same).
            "thread.started" => {
                let id = v
                    .get("thread_id")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let same = self
                    .codex_threads
                    .last()
                    .is_some_and(|t| t.thread.is_some() && t.thread == id);
                let unnamed = self
                    .codex_threads
                    .last()
                    .is_some_and(|t| t.thread.is_none() && t.first.is_none());
                if unnamed {
                    self.codex_thread().thread = id;
                } else if !same {
                    self.start_codex_thread(id);
                }
                Vec::new()
            }
            // Codex `exec --json`: the thread's cumulative usage.
            "turn.completed" => {
                if let Some(usage) = v.get("usage").and_then(codex_usage) {
                    self.codex_thread().total(usage, None);
                }
                Vec::new()
            }
            "item.completed" => {
                let item = v.get("item");
                let is_message = item
                    .and_then(|i| i.get("type"))
                    .and_then(Value::as_str)
                    .is_some_and(|t| t == "agent_message");
                item.filter(|_| is_message)
                    .and_then(|i| i.get("text"))
                    .and_then(Value::as_str)
                    .into_iter()
                    .collect()
            }
            _ => {
                // Older Codex `--json` (`{"msg": {"type": "token_count", ...}}`) and its
                // session files (`{"payload": {"type": "token_count", ...}}`): the
                // thread's total and the last turn's part of it.
                let inner = v.get("msg").or_else(|| v.get("payload"));
                if let Some(info) = inner
                    .filter(|i| i.get("type").and_then(Value::as_str) == Some("token_count"))
                    .and_then(|i| i.get("info"))
                    && let Some(total) = info.get("total_token_usage").and_then(codex_usage)
                {
                    let last = info.get("last_token_usage").and_then(codex_usage);
                    self.codex_thread().total(total, last);
                }
                Vec::new()
            }
        }
    }
}

fn count(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// Claude's `usage`: `input_tokens` excludes the cache, so every input part is added.
fn claude_usage(u: &Value) -> Option<TokenUsage> {
    let fresh = count(u, "input_tokens");
    let written = count(u, "cache_creation_input_tokens");
    let read = count(u, "cache_read_input_tokens");
    let input = match (fresh, written, read) {
        (None, None, None) => None,
        (a, b, c) => Some(a.unwrap_or(0) + b.unwrap_or(0) + c.unwrap_or(0)),
    };
    let usage = TokenUsage {
        input,
        cached_input: read,
        output: count(u, "output_tokens"),
    };
    (!usage.is_empty()).then_some(usage)
}

/// Codex's usage: `input_tokens` already includes `cached_input_tokens`.
fn codex_usage(u: &Value) -> Option<TokenUsage> {
    let usage = TokenUsage {
        input: count(u, "input_tokens"),
        cached_input: count(u, "cached_input_tokens"),
        output: count(u, "output_tokens"),
    };
    let all_zero = usage.input.unwrap_or(0) == 0 && usage.output.unwrap_or(0) == 0;
    (!usage.is_empty() && !all_zero).then_some(usage)
}

/// The known spend, when it is over `budget`.
pub fn over_budget(tokens: Option<&TokenUsage>, budget: Option<u64>) -> Option<u64> {
    let spent = tokens?.known();
    (spent > budget?).then_some(spent)
}

/// What a run declares when its row is written (and what the reaper records for an
/// untracked process).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Registration {
    pub run: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub participant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<String>,
    /// The program's name (`claude`, `codex`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The `baton run` process that records the run's facts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<ProcessRef>,
    /// The agent's process, when already known (an untracked one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
    /// How often the monitor promised a heartbeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expect_receipts: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub writer: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<u32>,
}

/// One hook call from an agent: tied to its session and, when known, its run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HookCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// `claude` or `codex`.
    pub agent: String,
    /// The hook's event name, e.g. `SessionStart` or `PreToolUse`.
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The helper (subagent) the hook fired in, and its kind, when it fired in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
    /// The ledger row it is about ([`HookCall::row_of`]); absent from hooks recorded
    /// before sessions had rows, which are about their run, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row: Option<String>,
}

/// Where a hook's row comes from: a run of `baton run`, a session seen through hooks, or a
/// helper inside either.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Started through `baton run`.
    #[default]
    Wrapper,
    /// Found running by the reaper, started without `baton run`.
    Untracked,
    /// An agent's session seen through its hooks.
    Session,
    /// A helper (subagent) of a session or run, seen through its hooks.
    Helper,
}

impl Source {
    pub const ALL: [Source; 4] = [Self::Wrapper, Self::Untracked, Self::Session, Self::Helper];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Wrapper => "wrapper",
            Self::Untracked => "untracked",
            Self::Session => "session",
            Self::Helper => "helper",
        }
    }
}

/// How many tool names a session's row keeps (the first ones used).
pub const MAX_TOOLS: usize = 32;

impl HookCall {
    /// The ledger row a hook is about: inside `baton run`, that run (a helper's own row
    /// under it); otherwise the agent's session (`claude:SESSION`) or a helper of it
    /// (`claude:SESSION/AGENT_ID`). `None` when the hook names neither a run nor a
    /// session.
    ///
    /// A Codex helper is a thread of its own, whose id is the helper's `agent_id`, and
    /// Codex's `notify` names only that thread: outside `baton run` such a helper's row is
    /// `codex:THREAD`, so what its thread's notify says lands on the helper's row.
    pub fn row_of(
        run: Option<&str>,
        agent: &str,
        session: Option<&str>,
        agent_id: Option<&str>,
    ) -> Option<String> {
        if let (None, Some(thread), true) = (run, agent_id, agent == "codex") {
            return Some(format!("{agent}:{thread}"));
        }
        let base = match (run, session) {
            (Some(run), _) => run.to_owned(),
            (None, Some(session)) => format!("{agent}:{session}"),
            (None, None) => return None,
        };
        Some(match agent_id {
            Some(helper) => format!("{base}/{helper}"),
            None => base,
        })
    }

    /// Whether this hook ends its row: a session's end, or its helper's.
    fn ends(&self) -> bool {
        match self.agent_id {
            Some(_) => self.event == "SubagentStop",
            None => self.event == "SessionEnd",
        }
    }

    /// Whether this is Codex's `notify` (a finished turn) rather than a lifecycle hook.
    /// Codex runs `notify` whatever it does with hooks, so a row that heard only from it
    /// had its hooks skipped ([`hooks_skipped`]).
    pub fn is_notify(&self) -> bool {
        self.event == NOTIFY_EVENT
    }

    /// Whether this hook makes a row of its own when its row is not there yet. Not a
    /// `SubagentStop` of a helper never started and of no kind: Claude Code's compaction
    /// ends internal forks that way, which are no helper of anyone's.
    fn makes_row(&self) -> bool {
        !(self.agent_id.is_some() && self.event == "SubagentStop" && self.agent_type.is_none())
    }
}

/// The event name `baton hook codex` records Codex's `notify` under: the `type` of its
/// payload, as `baton init --codex` tells a person to configure it.
pub const NOTIFY_EVENT: &str = "agent-turn-complete";

/// Whether a row's hooks were skipped: it heard from its agent's `notify`, which runs
/// whatever the agent does with hooks, and never from a lifecycle hook. Codex runs only
/// the hooks a person has reviewed (trusted), and says nothing when it skips the others.
pub fn hooks_skipped(run: &Run) -> bool {
    run.notified && !run.hooked
}

/// Whether the agents read a hook's stdout into the model's context for `event`: Claude
/// Code and Codex do for `SessionStart` (which also fires after a compaction, with
/// `source: compact`) and `UserPromptSubmit`; elsewhere stdout is not context.
pub fn hook_injects(event: &str) -> bool {
    matches!(event, "SessionStart" | "UserPromptSubmit")
}

/// A fact about a run, as recorded in the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum RunChange {
    Registered(Box<Registration>),
    Started {
        run: String,
        process: ProcessRef,
        pgid: u32,
    },
    /// The monitor is alive; `active_at` is when the agent last wrote output.
    Heartbeat {
        run: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        active_at: Option<Millis>,
    },
    /// Progress or token usage read from the agent's output.
    Reported {
        run: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        progress: Option<Progress>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens: Option<TokenUsage>,
    },
    Exited {
        run: String,
        status: RunStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Written by the reaper: the process is gone and no exit was recorded.
    Lost {
        run: String,
        reason: String,
    },
    Untracked(Box<Registration>),
    Hook(HookCall),
    /// Written by the reaper: a session or helper seen through hooks fell silent.
    Ended {
        run: String,
        reason: String,
    },
}

impl RunChange {
    /// The run the change is about (a hook may not know it).
    pub fn run(&self) -> Option<&str> {
        match self {
            Self::Registered(r) | Self::Untracked(r) => Some(&r.run),
            Self::Started { run, .. }
            | Self::Heartbeat { run, .. }
            | Self::Reported { run, .. }
            | Self::Exited { run, .. }
            | Self::Lost { run, .. }
            | Self::Ended { run, .. } => Some(run),
            Self::Hook(h) => h.row.as_deref().or(h.run.as_deref()),
        }
    }

    /// The event's subject: the run, else the hook's session, else `hook`.
    pub fn subject(&self) -> &str {
        match self {
            Self::Hook(h) => h
                .row
                .as_deref()
                .or(h.run.as_deref())
                .or(h.session.as_deref())
                .unwrap_or("hook"),
            other => other.run().unwrap_or("run"),
        }
    }
}

/// A run as the ledger knows it: the fold of its changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub id: String,
    /// The seq of the event that created the row.
    pub seq: i64,
    pub status: RunStatus,
    pub participant: Option<String>,
    pub order: Option<String>,
    pub agent: Option<String>,
    pub command: Vec<String>,
    pub cwd: Option<String>,
    pub host: Option<String>,
    pub monitor: Option<ProcessRef>,
    pub process: Option<ProcessRef>,
    pub pgid: Option<u32>,
    pub registered_at: Millis,
    pub started_at: Option<Millis>,
    pub heartbeat_at: Option<Millis>,
    /// The newest sign of activity: a change other than a heartbeat, agent output, a hook.
    pub last_event_at: Millis,
    /// When an exit or a loss was recorded.
    pub ended_at: Option<Millis>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub reason: Option<String>,
    pub tokens: Option<TokenUsage>,
    pub budget_tokens: Option<u64>,
    pub steps: Option<u64>,
    pub progress: Option<Progress>,
    pub heartbeat_ms: Option<u64>,
    pub expect_receipts: Vec<String>,
    pub writer: bool,
    pub slot: Option<u32>,
    pub session: Option<String>,
    /// Where the row comes from.
    #[serde(default)]
    pub source: Source,
    /// A helper's session or run row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// A helper's kind, as its agent names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
    /// The tools its hooks named, the first [`MAX_TOOLS`] of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// A lifecycle hook (any but `notify`) landed on it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hooked: bool,
    /// Its agent's `notify` landed on it ([`NOTIFY_EVENT`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub notified: bool,
}

impl Run {
    fn new(r: &Registration, status: RunStatus, seq: i64, at: Millis) -> Self {
        Self {
            id: r.run.clone(),
            seq,
            status,
            participant: r.participant.clone(),
            order: r.order.clone(),
            agent: r.agent.clone(),
            command: r.command.clone(),
            cwd: r.cwd.clone(),
            host: r.host.clone(),
            monitor: r.monitor,
            process: r.process,
            pgid: None,
            registered_at: at,
            started_at: (status == RunStatus::Untracked).then_some(at),
            heartbeat_at: None,
            last_event_at: at,
            ended_at: None,
            exit_code: None,
            signal: None,
            reason: None,
            tokens: None,
            budget_tokens: r.budget_tokens,
            steps: r.steps,
            progress: None,
            heartbeat_ms: r.heartbeat_ms,
            expect_receipts: r.expect_receipts.clone(),
            writer: r.writer,
            slot: r.slot,
            session: None,
            source: if status == RunStatus::Untracked {
                Source::Untracked
            } else {
                Source::Wrapper
            },
            parent: None,
            agent_type: None,
            tools: Vec::new(),
            hooked: false,
            notified: false,
        }
    }

    /// The row a hook makes of a session or helper seen for the first time, as `actor`:
    /// a registration of what the hook says (no command, no pid), running from `at`.
    fn seen(h: &HookCall, id: &str, actor: &str, seq: i64, at: Millis) -> Self {
        let helper = h.agent_id.is_some();
        let registration = Registration {
            run: id.to_owned(),
            participant: Passname::new(actor).ok().map(|p| p.to_string()),
            agent: Some(h.agent.clone()),
            ..Registration::default()
        };
        Self {
            started_at: Some(at),
            session: h.session.clone(),
            source: if helper {
                Source::Helper
            } else {
                Source::Session
            },
            parent: helper
                .then(|| HookCall::row_of(h.run.as_deref(), &h.agent, h.session.as_deref(), None))
                .flatten(),
            agent_type: h.agent_type.clone(),
            ..Self::new(&registration, RunStatus::Running, seq, at)
        }
    }
}

/// Whether `change` may follow `current` (the run's row, if it has one).
pub fn check(current: Option<&Run>, change: &RunChange) -> Result<(), Refusal> {
    use RunStatus as S;
    let (what, allowed): (&'static str, &[RunStatus]) = match change {
        RunChange::Registered(r) | RunChange::Untracked(r) => {
            return match current {
                Some(_) => Err(Refusal::RunExists { id: r.run.clone() }),
                None => Ok(()),
            };
        }
        RunChange::Hook(_) => return Ok(()),
        RunChange::Started { .. } => ("a start", &[S::Registered]),
        // A heartbeat after a loss proves the reaper wrong: the run is running again.
        RunChange::Heartbeat { .. } | RunChange::Reported { .. } => {
            ("activity", &[S::Registered, S::Running, S::Lost])
        }
        RunChange::Exited { status, .. } => {
            if !status.is_exit() {
                return Err(Refusal::NotAnExit(*status));
            }
            ("an exit", &[S::Registered, S::Running, S::Lost])
        }
        RunChange::Lost { .. } => ("a loss", &[S::Registered, S::Running, S::Untracked]),
        RunChange::Ended { .. } => ("an end", &[S::Running]),
    };
    let run = change.run().unwrap_or_default();
    let current = current.ok_or_else(|| Refusal::not_found(Record::Run, run))?;
    if allowed.contains(&current.status) {
        Ok(())
    } else {
        Err(Refusal::RunStatus {
            run: run.to_owned(),
            status: current.status,
            what,
        })
    }
}

/// Whether `change` is to be written: [`check`], except that an untracked process
/// already recorded writes nothing (the reaper sees it again on every pass).
pub fn plan(current: Option<&Run>, change: &RunChange) -> Result<bool, Refusal> {
    match check(current, change) {
        Ok(()) => Ok(true),
        Err(Refusal::RunExists { .. }) if matches!(change, RunChange::Untracked(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether the reaper ends `run` at `now`: a session or helper seen through hooks, still
/// running, with no hook for longer than `silent_ms`. Its pid is not known, so silence is
/// the only sign it is gone.
pub fn fell_silent(run: &Run, now: Millis, silent_ms: i64) -> bool {
    matches!(run.source, Source::Session | Source::Helper)
        && run.status == RunStatus::Running
        && now - run.last_event_at > silent_ms
}

/// How many message ids an alert names before "+N more".
const IDS_IN_ALERT: usize = 10;

/// What the reaper writes about one lost run.
#[derive(Debug, Clone, PartialEq)]
pub struct Reap {
    /// The loss, then each resurfaced delivery.
    pub changes: Vec<Change>,
    /// The alerts to raise (each once while open).
    pub alerts: Vec<StateOp>,
    /// The messages that are pending again.
    pub resurfaced: Vec<String>,
}

/// The reaper's decision on run `run`, whose process is gone without a recorded exit:
/// `None` when it is no longer live (an exit, or another reaper, got there first).
/// Otherwise the run is lost and the messages its participant had `held` (delivered
/// during the run; the caller passes none when another of its runs is live) go back to
/// pending, with an alert for the loss and one for what resurfaced.
pub fn plan_reap(run: &Run, reason: &str, held: &[String]) -> Option<Reap> {
    if !matches!(run.status, RunStatus::Registered | RunStatus::Running) {
        return None;
    }
    let id = &run.id;
    let mut changes = vec![Change::Run(RunChange::Lost {
        run: id.clone(),
        reason: reason.to_owned(),
    })];
    let participant = run
        .participant
        .as_deref()
        .and_then(|p| Passname::new(p).ok());
    let mut resurfaced = Vec::new();
    if let Some(who) = &participant {
        for message in held {
            let Some(status) = resurface(DeliveryStatus::Delivered) else {
                continue;
            };
            changes.push(Change::DeliveryChanged {
                message: message.clone(),
                participant: who.clone(),
                status,
                note: Some(format!("resurfaced by the reaper: run {id} was lost")),
            });
            resurfaced.push(message.clone());
        }
    }
    let mut alerts = vec![StateOp::Alert {
        key: format!("run-lost:{id}"),
        message: format!("run {id} was lost: {reason}"),
    }];
    if let (Some(who), false) = (&participant, resurfaced.is_empty()) {
        let mut ids = resurfaced
            .iter()
            .take(IDS_IN_ALERT)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if resurfaced.len() > IDS_IN_ALERT {
            ids.push_str(&format!(" +{} more", resurfaced.len() - IDS_IN_ALERT));
        }
        alerts.push(StateOp::Alert {
            key: format!("resurfaced:{id}"),
            message: format!(
                "{} message(s) {who} fetched during lost run {id} are pending again: {ids}",
                resurfaced.len()
            ),
        });
    }
    Some(Reap {
        changes,
        alerts,
        resurfaced,
    })
}

/// Applies a change recorded at `at` by event `seq`. Lenient (replay must not fail):
/// validation is [`check`]'s job at write time. Returns the row to store, if any.
///
/// A hook about a session or helper seen for the first time makes its row, as `actor`
/// (the participant it was recorded as); a hook about a run the ledger does not have
/// makes nothing.
pub fn fold(
    current: Option<Run>,
    change: &RunChange,
    seq: i64,
    at: Millis,
    actor: &str,
) -> Option<Run> {
    match change {
        RunChange::Registered(r) => Some(Run::new(r, RunStatus::Registered, seq, at)),
        RunChange::Untracked(r) => Some(Run::new(r, RunStatus::Untracked, seq, at)),
        RunChange::Hook(h) if current.is_none() => {
            let id = h.row.as_deref()?;
            // A run's own row comes from `baton run`; a helper inside it, or a session,
            // from its first hook.
            if h.run.as_deref() == Some(id) || !h.makes_row() {
                return None;
            }
            let mut run = Run::seen(h, id, actor, seq, at);
            hooked(&mut run, h, at);
            Some(run)
        }
        _ => {
            let mut run = current?;
            match change {
                RunChange::Registered(_) | RunChange::Untracked(_) => {}
                RunChange::Started { process, pgid, .. } => {
                    run.status = RunStatus::Running;
                    run.process = Some(*process);
                    run.pgid = Some(*pgid);
                    run.started_at = Some(at);
                    run.last_event_at = run.last_event_at.max(at);
                }
                RunChange::Heartbeat { active_at, .. } => {
                    run.heartbeat_at = Some(at);
                    if let Some(active) = active_at {
                        run.last_event_at = run.last_event_at.max(*active);
                    }
                    revive(&mut run);
                }
                RunChange::Reported {
                    progress, tokens, ..
                } => {
                    if progress.is_some() {
                        run.progress = *progress;
                    }
                    if tokens.is_some() {
                        run.tokens = *tokens;
                    }
                    run.last_event_at = run.last_event_at.max(at);
                    revive(&mut run);
                }
                RunChange::Exited {
                    status,
                    exit_code,
                    signal,
                    reason,
                    ..
                } => {
                    run.status = *status;
                    run.exit_code = *exit_code;
                    run.signal = *signal;
                    run.reason = reason.clone();
                    run.ended_at = Some(at);
                    run.last_event_at = run.last_event_at.max(at);
                }
                RunChange::Lost { reason, .. } => {
                    run.status = RunStatus::Lost;
                    run.reason = Some(reason.clone());
                    run.ended_at = Some(at);
                }
                RunChange::Ended { reason, .. } => {
                    run.status = RunStatus::Ended;
                    run.reason = Some(reason.clone());
                    run.ended_at = Some(at);
                }
                RunChange::Hook(h) => {
                    if h.session.is_some() {
                        run.session = h.session.clone();
                    }
                    hooked(&mut run, h, at);
                }
            }
            Some(run)
        }
    }
}

/// What a hook tells its row: activity, a tool used, and for a session or helper its end
/// (a hook after the end — a resumed session — makes it running again).
fn hooked(run: &mut Run, h: &HookCall, at: Millis) {
    run.last_event_at = run.last_event_at.max(at);
    if let Some(tool) = &h.tool
        && run.tools.len() < MAX_TOOLS
        && !run.tools.contains(tool)
    {
        run.tools.push(tool.clone());
    }
    if h.is_notify() {
        // A turn finished: no sign the row goes on after its end (Codex runs `notify`
        // apart from its hooks, so it may come after SessionEnd or SubagentStop).
        run.notified = true;
        return;
    }
    run.hooked = true;
    if matches!(run.source, Source::Session | Source::Helper) {
        if h.ends() {
            run.status = RunStatus::Ended;
            run.ended_at = Some(at);
        } else if run.status == RunStatus::Ended {
            run.status = RunStatus::Running;
            run.ended_at = None;
        }
    }
}

fn revive(run: &mut Run) {
    if run.status == RunStatus::Lost {
        run.status = RunStatus::Running;
        run.ended_at = None;
        run.reason = None;
    }
}

/// Derived at read time, never stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// Recent activity: the status can be trusted as current.
    Ok,
    /// Alive, but nothing happened for a while.
    Idle,
    /// Alive, and nothing happened for longer than the stall threshold.
    Stalled,
    Lost,
    /// Nobody can say: an untracked process, or a monitor that missed its heartbeats.
    Unknown,
}

impl Health {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Idle => "idle",
            Self::Stalled => "stalled",
            Self::Lost => "lost",
            Self::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The thresholds health is judged by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthPolicy {
    /// Quiet for longer than this: idle.
    pub idle_after_ms: i64,
    /// Quiet for longer than this: stalled.
    pub stalled_after_ms: i64,
    /// A monitor silent for this many of its heartbeat intervals is no longer believed.
    pub missed_heartbeats: i64,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        Self {
            idle_after_ms: 60_000,
            stalled_after_ms: 600_000,
            missed_heartbeats: 3,
        }
    }
}

/// A run's health at `now`, from its recorded facts only. `None` for a run that ended
/// (done, failed, stopped): health judges live runs, and an ended one has none to judge
/// (unknown stays unknown: not applicable is `-`/`null`, never a default).
pub fn health(run: &Run, now: Millis, policy: &HealthPolicy) -> Option<Health> {
    Some(match run.status {
        RunStatus::Lost => Health::Lost,
        RunStatus::Untracked => Health::Unknown,
        RunStatus::Done | RunStatus::Failed | RunStatus::Stopped | RunStatus::Ended => {
            return None;
        }
        RunStatus::Registered | RunStatus::Running => {
            let alive_at = run
                .heartbeat_at
                .unwrap_or(run.registered_at)
                .max(run.last_event_at);
            if let Some(every) = run.heartbeat_ms
                && now - alive_at > policy.missed_heartbeats * every as i64
            {
                return Some(Health::Unknown);
            }
            let quiet = now - run.last_event_at;
            if quiet > policy.stalled_after_ms {
                Health::Stalled
            } else if quiet > policy.idle_after_ms {
                Health::Idle
            } else {
                Health::Ok
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_needs_a_denominator() {
        // (line, declared steps, expected done/total)
        type Case<'a> = (&'a str, Option<u64>, Option<(u64, u64)>);
        let cases: &[Case] = &[
            ("PROGRESS 3/10", None, Some((3, 10))),
            ("  PROGRESS 3/10 parsing files", None, Some((3, 10))),
            ("PROGRESS 3/10", Some(5), Some((3, 10))),
            ("PROGRESS 4", Some(5), Some((4, 5))),
            ("PROGRESS 4", None, None),
            ("PROGRESS 6/5", None, None),
            ("PROGRESS 6", Some(5), None),
            ("PROGRESS 0/0", None, None),
            ("PROGRESS x/5", None, None),
            ("PROGRESSIVE 1/2", None, None),
            ("progress 1/2", None, None),
            ("step PROGRESS 1/2", None, None),
        ];
        for (line, declared, want) in cases {
            let got = parse_progress(line, *declared).map(|p| (p.done, p.total));
            assert_eq!(got, *want, "{line:?} with {declared:?} steps");
        }
    }

    /// In the shape `claude -p --output-format stream-json --verbose` prints (ids and
    /// numbers made up): the first response has a text block and a tool call, emitted as
    /// two lines that repeat the same `message.id` and `usage`.
    const CLAUDE: &str = include_str!("../tests/data/claude-stream.jsonl");
    /// In the shape `codex exec --json` prints (codex-rs `exec_events.rs`).
    const CODEX: &str = include_str!("../tests/data/codex-exec.jsonl");

    fn feed(parser: &mut OutputParser, text: &str) -> Vec<Parsed> {
        text.lines().map(|l| parser.line(l)).collect()
    }

    #[test]
    fn claude_usage_is_counted_once_per_message_and_the_result_is_kept() {
        let mut parser = OutputParser::new(None);
        let parsed = feed(&mut parser, CLAUDE);
        let usage = parser.usage().unwrap();
        // Result: input 12 + cache writes 2_000 + cache reads 30_000; output 420.
        assert_eq!(usage.input, Some(32_012));
        assert_eq!(usage.cached_input, Some(30_000));
        assert_eq!(usage.output, Some(420));
        assert_eq!(usage.total(), Some(32_432));
        // The progress line inside the assistant's text is read.
        assert!(
            parsed
                .iter()
                .any(|p| p.progress == Some(Progress { done: 1, total: 3 }))
        );
    }

    #[test]
    fn claude_usage_before_the_result_sums_distinct_messages() {
        let mut parser = OutputParser::new(None);
        let before_result: Vec<&str> = CLAUDE
            .lines()
            .take_while(|l| !l.contains("\"type\":\"result\""))
            .collect();
        for l in before_result {
            parser.line(l);
        }
        let usage = parser.usage().unwrap();
        // msg_1 (twice, counted once): 5 + 1_000 + 10_000 in, 200 out;
        // msg_2: 7 + 1_000 + 20_000 in, 220 out.
        assert_eq!(usage.input, Some(32_012));
        assert_eq!(usage.output, Some(420));
    }

    fn command(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn the_command_line_says_whether_a_codex_thread_is_new() {
        let cases = [
            ("codex exec --json fix-it", CodexThread::New),
            ("/usr/local/bin/codex e --json fix-it", CodexThread::New),
            (
                "codex -m o4 exec --json resume 0199a213 more",
                CodexThread::Resumed,
            ),
            ("codex exec resume --last --json", CodexThread::Resumed),
            ("codex fix-it", CodexThread::Unknown),
            ("sh -c codex-exec", CodexThread::Unknown),
            ("claude -p hi", CodexThread::Unknown),
        ];
        for (line, want) in cases {
            assert_eq!(codex_thread(&command(line)), want, "{line}");
        }
        assert_eq!(codex_thread(&[]), CodexThread::Unknown);
    }

    #[test]
    fn a_resumed_codex_thread_counts_only_what_this_run_added() {
        let total = |i: u64, o: u64| {
            format!(
                r#"{{"type":"turn.completed","usage":{{"input_tokens":{i},"cached_input_tokens":0,"output_tokens":{o}}}}}"#
            )
        };
        let started = r#"{"type":"thread.started","thread_id":"t-1"}"#;
        // Resumed: the first total holds the history, so alone it tells nothing.
        let mut resumed = OutputParser::for_command(None, &command("codex exec resume t-1 go"));
        resumed.line(started);
        assert_eq!(resumed.line(&total(50_000, 2_000)).tokens, None);
        assert_eq!(resumed.usage(), None, "unknown, not the thread's history");
        let next = resumed.line(&total(53_000, 2_100)).tokens.unwrap();
        assert_eq!((next.input, next.output), (Some(3_000), Some(100)));
        // New: the first total is this run's.
        let mut new = OutputParser::for_command(None, &command("codex exec go"));
        new.line(started);
        let first = new.line(&total(1_000, 10)).tokens.unwrap();
        assert_eq!((first.input, first.output), (Some(1_000), Some(10)));
        // A second thread in the same run is accounted apart, its first total unknown.
        new.line(r#"{"type":"thread.started","thread_id":"t-2"}"#);
        assert_eq!(new.line(&total(90_000, 900)).tokens, None);
        let both = new.line(&total(90_500, 950)).tokens.unwrap();
        assert_eq!((both.input, both.output), (Some(1_500), Some(60)));
    }

    #[test]
    fn several_claude_results_are_not_summed() {
        let result = |i: u64, o: u64| {
            format!(
                r#"{{"type":"result","subtype":"success","usage":{{"input_tokens":{i},"output_tokens":{o}}}}}"#
            )
        };
        let mut parser = OutputParser::new(None);
        parser.line(&result(100, 10));
        parser.line(&result(250, 30));
        let usage = parser.usage().unwrap();
        assert_eq!((usage.input, usage.output), (Some(250), Some(30)));
    }

    #[test]
    fn codex_usage_is_the_threads_cumulative_total() {
        let mut parser = OutputParser::for_command(Some(4), &command("codex exec --json go"));
        let parsed = feed(&mut parser, CODEX);
        let usage = parser.usage().unwrap();
        assert_eq!(usage.input, Some(26_549));
        assert_eq!(usage.cached_input, Some(22_272));
        assert_eq!(usage.output, Some(1_590));
        assert!(
            parsed
                .iter()
                .any(|p| p.progress == Some(Progress { done: 2, total: 4 }))
        );
    }

    #[test]
    fn unreported_usage_stays_unknown() {
        let mut parser = OutputParser::new(None);
        for line in [
            "plain text",
            "{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":0,\"cached_input_tokens\":0,\"output_tokens\":0}}",
            "{\"type\":\"assistant\",\"message\":{\"id\":\"m\",\"content\":[]}}",
            "{not json",
        ] {
            assert_eq!(parser.line(line).tokens, None, "{line}");
        }
        assert_eq!(parser.usage(), None);
        let half = TokenUsage {
            input: Some(10),
            cached_input: None,
            output: None,
        };
        assert_eq!(half.total(), None);
        assert_eq!(over_budget(Some(&half), Some(5)), Some(10));
        assert_eq!(over_budget(Some(&half), Some(10)), None);
        assert_eq!(over_budget(None, Some(0)), None);
        assert_eq!(over_budget(Some(&half), None), None);
    }

    #[test]
    fn older_codex_token_count_events_are_read() {
        let mut parser = OutputParser::new(None);
        // The stream states the prior total (total less the last turn): 80 in, 5 out.
        let line = r#"{"id":"0","msg":{"type":"token_count","info":{"total_token_usage":{"input_tokens":100,"cached_input_tokens":40,"output_tokens":7,"reasoning_output_tokens":3,"total_tokens":107},"last_token_usage":{"input_tokens":20,"cached_input_tokens":10,"output_tokens":2,"total_tokens":22}}}}"#;
        let parsed = parser.line(line);
        assert_eq!(parsed.tokens.and_then(|t| t.total()), Some(22));
    }

    #[test]
    fn a_lost_run_resurfaces_what_its_participant_held_once() {
        let mut reg = Registration {
            run: "r1".into(),
            participant: Some("impl-1".into()),
            ..Registration::default()
        };
        let run = fold(
            None,
            &RunChange::Registered(Box::new(reg.clone())),
            1,
            10,
            "@test",
        )
        .unwrap();
        let held: Vec<String> = (0..12).map(|i| format!("m{i}")).collect();
        let reap = plan_reap(&run, "gone", &held).unwrap();
        assert_eq!(reap.resurfaced, held);
        assert_eq!(
            reap.changes.len(),
            13,
            "the loss and one change per message"
        );
        assert!(matches!(
            &reap.changes[0],
            Change::Run(RunChange::Lost { .. })
        ));
        let StateOp::Alert { message, .. } = &reap.alerts[1] else {
            panic!("{:?}", reap.alerts)
        };
        assert!(
            message.starts_with("12 message(s) impl-1 fetched"),
            "{message}"
        );
        assert!(message.ends_with("m9 +2 more"), "{message}");
        // Nothing held: the loss alone. Not live any more: nothing at all.
        assert_eq!(plan_reap(&run, "gone", &[]).unwrap().alerts.len(), 1);
        reg.participant = None;
        let done = fold(
            Some(run),
            &RunChange::Exited {
                run: "r1".into(),
                status: RunStatus::Done,
                exit_code: Some(0),
                signal: None,
                reason: None,
            },
            2,
            20,
            "@test",
        )
        .unwrap();
        assert_eq!(plan_reap(&done, "gone", &held), None);
    }

    #[test]
    fn an_untracked_process_seen_again_writes_nothing() {
        let untracked = RunChange::Untracked(Box::new(Registration {
            run: "pid-1-2".into(),
            ..Registration::default()
        }));
        assert_eq!(plan(None, &untracked), Ok(true));
        let row = fold(None, &untracked, 1, 10, "@test").unwrap();
        assert_eq!(plan(Some(&row), &untracked), Ok(false));
        assert_eq!(
            plan(Some(&row), &registered("pid-1-2")),
            Err(Refusal::RunExists {
                id: "pid-1-2".into()
            })
        );
    }

    fn registered(id: &str) -> RunChange {
        RunChange::Registered(Box::new(Registration {
            run: id.into(),
            command: vec!["claude".into()],
            heartbeat_ms: Some(15_000),
            ..Registration::default()
        }))
    }

    fn replay(changes: &[(RunChange, Millis)]) -> Result<Option<Run>, Refusal> {
        let mut run = None;
        for (i, (change, at)) in changes.iter().enumerate() {
            check(run.as_ref(), change)?;
            run = fold(run, change, i as i64 + 1, *at, "@test");
        }
        Ok(run)
    }

    fn started(id: &str) -> RunChange {
        RunChange::Started {
            run: id.into(),
            process: ProcessRef {
                pid: 42,
                start: Some(7),
            },
            pgid: 42,
        }
    }

    fn exited(id: &str, status: RunStatus) -> RunChange {
        RunChange::Exited {
            run: id.into(),
            status,
            exit_code: Some(0),
            signal: None,
            reason: None,
        }
    }

    #[test]
    fn a_run_goes_registered_running_done() {
        let run = replay(&[
            (registered("r"), 1_000),
            (started("r"), 1_010),
            (exited("r", RunStatus::Done), 2_000),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(run.status, RunStatus::Done);
        assert_eq!(run.process.map(|p| p.pid), Some(42));
        assert_eq!(run.ended_at, Some(2_000));
        assert_eq!(run.tokens, None);
        assert_eq!(run.progress, None);
    }

    #[test]
    fn changes_out_of_order_are_refused() {
        let lost = RunChange::Lost {
            run: "r".into(),
            reason: "gone".into(),
        };
        let cases: Vec<(Vec<RunChange>, RunChange)> = vec![
            (vec![], started("r")),
            (vec![registered("r")], registered("r")),
            (vec![registered("r"), started("r")], started("r")),
            (
                vec![registered("r"), started("r"), exited("r", RunStatus::Done)],
                lost.clone(),
            ),
            (
                vec![registered("r"), started("r"), exited("r", RunStatus::Done)],
                exited("r", RunStatus::Failed),
            ),
            (vec![registered("r")], exited("r", RunStatus::Running)),
        ];
        for (history, next) in cases {
            let with_times: Vec<_> = history.into_iter().map(|c| (c, 0)).collect();
            let run = replay(&with_times).unwrap();
            assert!(
                check(run.as_ref(), &next).is_err(),
                "{next:?} after {run:?}"
            );
        }
        // A late exit corrects a loss the reaper inferred.
        let run = replay(&[
            (registered("r"), 0),
            (started("r"), 0),
            (lost, 5),
            (exited("r", RunStatus::Done), 6),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(run.status, RunStatus::Done);
    }

    /// A hook as the `baton hook` command makes it.
    fn hook(run: Option<&str>, session: &str, event: &str, helper: Option<&str>) -> RunChange {
        RunChange::Hook(HookCall {
            row: HookCall::row_of(run, "claude", Some(session), helper),
            run: run.map(str::to_owned),
            agent: "claude".into(),
            event: event.into(),
            session: Some(session.into()),
            tool: (event == "PostToolUse").then(|| "Bash".into()),
            agent_id: helper.map(str::to_owned),
            agent_type: helper.map(|_| "Explore".into()),
        })
    }

    /// Folds `changes` into the rows they are about, as a store's projection does.
    fn rows(changes: &[RunChange]) -> BTreeMap<String, Run> {
        let mut rows: BTreeMap<String, Run> = BTreeMap::new();
        for (i, change) in changes.iter().enumerate() {
            let Some(id) = change.run() else { continue };
            let current = rows.get(id).cloned();
            if let Some(run) = fold(current, change, i as i64 + 1, 100 * i as i64, "impl-1") {
                rows.insert(id.to_owned(), run);
            }
        }
        rows
    }

    #[test]
    fn a_session_seen_through_hooks_is_one_row_with_its_helpers_under_it() {
        let mut changes = vec![hook(None, "s1", "SessionStart", None)];
        changes.extend((0..10_000).map(|_| hook(None, "s1", "PostToolUse", None)));
        changes.push(hook(None, "s1", "SubagentStart", Some("a1")));
        changes.push(hook(None, "s1", "SubagentStop", Some("a1")));
        changes.push(hook(None, "s1", "SubagentStart", Some("a2")));
        let rows = rows(&changes);
        assert_eq!(rows.len(), 3, "{:?}", rows.keys());
        let session = &rows["claude:s1"];
        assert_eq!(
            (
                session.source,
                session.status,
                session.participant.as_deref()
            ),
            (Source::Session, RunStatus::Running, Some("impl-1"))
        );
        assert_eq!(session.tools, ["Bash"], "a tool is kept once");
        assert_eq!(session.process, None);
        let ended = &rows["claude:s1/a1"];
        assert_eq!(
            (ended.source, ended.status, ended.parent.as_deref()),
            (Source::Helper, RunStatus::Ended, Some("claude:s1"))
        );
        assert_eq!(ended.agent_type.as_deref(), Some("Explore"));
        assert_eq!(rows["claude:s1/a2"].status, RunStatus::Running);
        // A helper's end does not end its session; the session's own does, and a hook
        // after it revives it.
        let mut more = changes.clone();
        more.push(hook(None, "s1", "SessionEnd", None));
        assert_eq!(self::rows(&more)["claude:s1"].status, RunStatus::Ended);
        assert_eq!(
            health(&self::rows(&more)["claude:s1"], 0, &HealthPolicy::default()),
            None
        );
        more.push(hook(None, "s1", "UserPromptSubmit", None));
        assert_eq!(self::rows(&more)["claude:s1"].status, RunStatus::Running);
    }

    /// A hook of `agent` as `baton hook` makes it, with the helper's kind when given.
    fn agent_hook(
        agent: &str,
        run: Option<&str>,
        session: &str,
        event: &str,
        helper: Option<(&str, Option<&str>)>,
    ) -> RunChange {
        let agent_id = helper.map(|(id, _)| id);
        RunChange::Hook(HookCall {
            row: HookCall::row_of(run, agent, Some(session), agent_id),
            run: run.map(str::to_owned),
            agent: agent.into(),
            event: event.into(),
            session: Some(session.into()),
            tool: None,
            agent_id: agent_id.map(str::to_owned),
            agent_type: helper.and_then(|(_, kind)| kind.map(str::to_owned)),
        })
    }

    #[test]
    fn a_compactions_fork_that_only_stops_makes_no_helper_row() {
        // As Claude Code 2.1 sends `/compact`: PreCompact, then a SubagentStop for each
        // internal fork, with an agent_id, no agent_type and no SubagentStart before it.
        let fork = Some(("aae473b795447fffd", None));
        let rows = rows(&[
            agent_hook("claude", None, "s1", "SessionStart", None),
            agent_hook("claude", None, "s1", "PreCompact", None),
            agent_hook("claude", None, "s1", "SubagentStop", fork),
            agent_hook(
                "claude",
                None,
                "s1",
                "SubagentStop",
                Some(("a3706ee", None)),
            ),
        ]);
        assert_eq!(rows.keys().collect::<Vec<_>>(), ["claude:s1"]);
        // A helper that was started, or one whose stop names its kind (its start was
        // dropped), is a helper.
        let rows = self::rows(&[
            agent_hook("claude", None, "s1", "SubagentStart", Some(("a1", None))),
            agent_hook("claude", None, "s1", "SubagentStop", Some(("a1", None))),
            agent_hook(
                "claude",
                None,
                "s1",
                "SubagentStop",
                Some(("a2", Some("Explore"))),
            ),
        ]);
        assert_eq!(rows["claude:s1/a1"].status, RunStatus::Ended);
        assert_eq!(rows["claude:s1/a2"].source, Source::Helper);
    }

    #[test]
    fn a_row_that_heard_only_notify_had_its_hooks_skipped() {
        let notify =
            |run: Option<&str>, thread: &str| agent_hook("codex", run, thread, NOTIFY_EVENT, None);
        // Codex skipped every hook: only its notify spoke, for the session and for a run.
        let skipped = rows(&[
            notify(None, "t1"),
            registered("r1"),
            started("r1"),
            notify(Some("r1"), "t2"),
        ]);
        assert!(hooks_skipped(&skipped["codex:t1"]));
        assert_eq!(skipped["codex:t1"].status, RunStatus::Running);
        assert!(hooks_skipped(&skipped["r1"]));
        // Hooks ran: not skipped, whatever notify said; no notify: nothing to tell by.
        let ran = rows(&[
            agent_hook("codex", None, "t1", "SessionStart", None),
            notify(None, "t1"),
            agent_hook("codex", None, "t3", "SessionStart", None),
        ]);
        assert!(!hooks_skipped(&ran["codex:t1"]));
        assert!(!hooks_skipped(&ran["codex:t3"]));
        assert!(!hooks_skipped(&rows(&[registered("r2")])["r2"]));
    }

    #[test]
    fn a_codex_helper_is_the_row_of_its_thread_and_notify_revives_nothing() {
        // Codex 0.171, as it ran: the helper's hooks name the parent session and the
        // helper's thread (agent_id); its thread's notify names that thread alone, and
        // may come after SubagentStop, as the session's may after SessionEnd.
        let helper = Some(("t2", Some("default")));
        let rows = rows(&[
            agent_hook("codex", None, "t1", "SessionStart", None),
            agent_hook("codex", None, "t1", "SubagentStart", helper),
            agent_hook("codex", None, "t1", "UserPromptSubmit", helper),
            agent_hook("codex", None, "t1", "SubagentStop", helper),
            agent_hook("codex", None, "t2", NOTIFY_EVENT, None),
            agent_hook("codex", None, "t1", "SessionEnd", None),
            agent_hook("codex", None, "t1", NOTIFY_EVENT, None),
        ]);
        assert_eq!(rows.len(), 2, "{:?}", rows.keys());
        let thread = &rows["codex:t2"];
        assert_eq!(
            (thread.source, thread.status, thread.parent.as_deref()),
            (Source::Helper, RunStatus::Ended, Some("codex:t1"))
        );
        assert!(!hooks_skipped(thread));
        assert_eq!(rows["codex:t1"].status, RunStatus::Ended);
        // Inside `baton run`, a helper stays under the run.
        assert_eq!(
            HookCall::row_of(Some("r1"), "codex", Some("t1"), Some("t2")).as_deref(),
            Some("r1/t2")
        );
    }

    #[test]
    fn a_silent_session_or_helper_is_ended_once_and_a_run_never_by_silence() {
        let rows = rows(&[
            hook(None, "s1", "SessionStart", None),
            hook(None, "s1", "SubagentStart", Some("a1")),
            registered("r1"),
            started("r1"),
        ]);
        // Folded at 0..300 ms; an hour later.
        let later = 3_600_000 + 400;
        let silent = |id: &str| fell_silent(&rows[id], later, 3_600_000);
        assert!(silent("claude:s1") && silent("claude:s1/a1"));
        assert!(!silent("r1"), "a run's pid says whether it is gone");
        assert!(!fell_silent(&rows["claude:s1"], 1000, 3_600_000));
        let end = RunChange::Ended {
            run: "claude:s1".into(),
            reason: "quiet".into(),
        };
        let ended = fold(Some(rows["claude:s1"].clone()), &end, 9, later, "@reaper").unwrap();
        assert_eq!(ended.status, RunStatus::Ended);
        assert!(!fell_silent(&ended, later * 2, 3_600_000));
        assert!(matches!(
            check(Some(&ended), &end),
            Err(Refusal::RunStatus { .. })
        ));
    }

    #[test]
    fn a_session_inside_baton_run_is_that_runs_row() {
        assert_eq!(
            HookCall::row_of(Some("r1"), "claude", Some("s1"), None).as_deref(),
            Some("r1")
        );
        assert_eq!(
            HookCall::row_of(Some("r1"), "claude", Some("s1"), Some("a1")).as_deref(),
            Some("r1/a1")
        );
        assert_eq!(HookCall::row_of(None, "codex", None, None), None);
        // No row for a run the ledger does not have; the run's own row keeps its source
        // and is not ended by the session's end.
        assert!(rows(&[hook(Some("r1"), "s1", "SessionStart", None)]).is_empty());
        let rows = rows(&[
            registered("r1"),
            started("r1"),
            hook(Some("r1"), "s1", "SessionStart", None),
            hook(Some("r1"), "s1", "SubagentStart", Some("a1")),
            hook(Some("r1"), "s1", "SessionEnd", None),
        ]);
        assert_eq!(rows.len(), 2);
        let run = &rows["r1"];
        assert_eq!(
            (run.source, run.status, run.session.as_deref()),
            (Source::Wrapper, RunStatus::Running, Some("s1"))
        );
        assert_eq!(rows["r1/a1"].parent.as_deref(), Some("r1"));
    }

    #[test]
    fn health_is_derived_from_facts_and_now() {
        let policy = HealthPolicy::default();
        let base = replay(&[(registered("r"), 0), (started("r"), 0)])
            .unwrap()
            .unwrap();
        let at = |run: &Run, now| health(run, now, &policy).expect("a live run has health");
        let heartbeat = |run: &Run, t: Millis, active: Option<Millis>| {
            fold(
                Some(run.clone()),
                &RunChange::Heartbeat {
                    run: "r".into(),
                    active_at: active,
                },
                9,
                t,
                "@test",
            )
            .unwrap()
        };
        assert_eq!(at(&base, 1_000), Health::Ok);
        assert_eq!(
            at(&base, 45_001),
            Health::Unknown,
            "three heartbeats missed"
        );
        // Heartbeats keep it believed; without activity it goes idle, then stalled.
        let beating = heartbeat(&base, 599_000, None);
        assert_eq!(at(&beating, 599_001), Health::Idle);
        let beating = heartbeat(&base, 610_000, None);
        assert_eq!(at(&beating, 610_001), Health::Stalled);
        // The next event flips it back.
        let active = heartbeat(&base, 610_000, Some(609_000));
        assert_eq!(at(&active, 610_001), Health::Ok);
        // Ended runs are facts; lost and untracked say so.
        // An ended run has no health: not "ok" for a run that failed.
        for status in [RunStatus::Failed, RunStatus::Done, RunStatus::Stopped] {
            let ended = fold(Some(base.clone()), &exited("r", status), 3, 5, "@test").unwrap();
            assert_eq!(health(&ended, 10_000_000, &policy), None, "{status:?}");
        }
        let lost = fold(
            Some(base),
            &RunChange::Lost {
                run: "r".into(),
                reason: "gone".into(),
            },
            3,
            5,
            "@test",
        )
        .unwrap();
        assert_eq!(at(&lost, 6), Health::Lost);
    }

    #[test]
    fn run_changes_round_trip_through_the_log_format() {
        let change = crate::Change::Run(RunChange::Reported {
            run: "01R".into(),
            progress: Some(Progress { done: 1, total: 2 }),
            tokens: None,
        });
        assert_eq!(change.kind(), "run.changed");
        assert_eq!(change.subject(), "01R");
        assert_eq!(
            crate::Change::from_parts(change.kind(), change.data()).unwrap(),
            change
        );
        let hook = RunChange::Hook(HookCall {
            agent: "claude".into(),
            event: "Stop".into(),
            session: Some("s-1".into()),
            ..HookCall::default()
        });
        assert_eq!(hook.subject(), "s-1");
    }
}
