//! `baton hook claude|codex EVENT`: what an agent's lifecycle hook calls. It appends one
//! event tied to the session and, when known, the run, and must never slow the agent
//! down or break it: its event goes to the spool beside the store (no wait for the write
//! lock, no read of the database), it waits at most 100 ms for the store where it needs
//! it (a packet, a need), spends at most 150 ms in all,
//! always exits 0 and prints nothing on stdout — except the resume packet with `--inject`
//! where the agent reads a hook's stdout into its context (`SessionStart`,
//! `UserPromptSubmit`). The payload is read as it streams in, keeping only the session
//! and the tool, so its size does not matter.
//!
//! This module also writes the agents' configuration for `baton init --claude|--codex`:
//! the hooks, the MCP server, and a marked section in AGENTS.md (and CLAUDE.md), merged
//! into what is there and never clobbering it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_app::doc::{self, Written};
use baton_core::run::HookCall;
use clap::{Args, ValueEnum};
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value, json};

use crate::cli::GlobalArgs;
use crate::error::{CommandError, CommandResult};
use crate::output::Output;
use crate::project::Project;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Agent {
    Claude,
    Codex,
}

impl Agent {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Claude => "claude",
            Self::Codex => "codex",
        }
    }
}

/// Record an agent hook call (run by the agent, not by people). Always exits 0.
///
/// Reads the hook's JSON on stdin (or as the last argument, as Codex's `notify` passes it)
/// and appends an event tied to the session and, when BATON_RUN is set, the run, to the
/// spool beside the store (the next command folds it into the log; a hook never waits for
/// another writer). Waits at most 100 ms for the store where it reads it and 150 ms in all; on timeout
/// the event is dropped with one
/// line on stderr. Prints nothing, except that --inject prints the resume packet of
/// BATON_AS (or --as) where the agent adds a hook's output to its context: SessionStart
/// (also after a compaction) and UserPromptSubmit. Elsewhere --inject is accepted and
/// prints nothing.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples (normally written by `baton init --claude|--codex`):\n  \
    baton hook claude SessionStart --inject\n  baton hook codex PostToolUse"
)]
pub struct HookArgs {
    pub agent: Agent,
    /// The hook event: SessionStart, UserPromptSubmit, PreToolUse, PostToolUse,
    /// SubagentStart, SubagentStop, PreCompact, Stop, SessionEnd, Notification (raises a
    /// need in `baton queue` with its message), …
    pub event: String,
    /// Print the resume packet (SessionStart and UserPromptSubmit only; elsewhere nothing).
    #[arg(long)]
    pub inject: bool,
    /// The hook's JSON, when it comes as an argument instead of on stdin.
    pub payload: Option<String>,
}

/// The whole budget of one hook call, and the part of it spent waiting for the store.
pub const TOTAL_BUDGET: Duration = Duration::from_millis(150);
/// A hook no longer waits for the write lock (its event is spooled) and, when it only
/// records, never opens the database: this bounds what still does, the packet of
/// `--inject` and a `Notification`'s need, written directly.
pub const STORE_WAIT: Duration = Duration::from_millis(100);
/// How long the payload is read at most, so the store still has its part of the budget.
const PAYLOAD_WAIT: Duration = Duration::from_millis(100);
/// Longest session id, tool name or event name recorded.
const MAX_FIELD: usize = 128;

/// Never fails: whatever goes wrong is one line on stderr and exit 0.
pub async fn run(g: &GlobalArgs, args: HookArgs) -> CommandResult<Output> {
    let text = match tokio::time::timeout(TOTAL_BUDGET, record(g, &args)).await {
        Ok(Ok(text)) => text,
        Ok(Err(e)) => {
            eprintln!("baton hook: event dropped: {e}");
            String::new()
        }
        Err(_) => {
            eprintln!(
                "baton hook: event dropped: over the {} ms budget",
                TOTAL_BUDGET.as_millis()
            );
            String::new()
        }
    };
    let human = text.clone();
    Ok(Output::of(&doc::Hook { text }, human))
}

/// A short printable field, or nothing.
fn short(value: Option<&Value>) -> Option<String> {
    value
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty() && s.len() <= MAX_FIELD && !s.contains(char::is_control))
        .map(str::to_owned)
}

/// What Baton keeps of a hook payload: its top-level session and tool fields as they were
/// read. Claude Code and Codex hooks say `session_id`; Codex's notify says `thread-id`.
#[derive(Debug, Clone, Default)]
struct Found {
    session_id: Option<String>,
    thread_id: Option<String>,
    tool: Option<String>,
    /// A `Notification`'s text, clipped to what a need holds.
    message: Option<String>,
    /// A `Notification`'s kind (`permission_prompt`, `idle_prompt`, `auth_success`, …).
    notification_type: Option<String>,
    /// The helper (subagent) a hook fired in, and its kind.
    agent_id: Option<String>,
    agent_type: Option<String>,
}

impl Found {
    fn session(&self) -> Option<String> {
        self.session_id.clone().or_else(|| self.thread_id.clone())
    }
}

/// Reads a payload object's top-level keys as they stream past, storing the wanted ones
/// into the shared [`Found`] at once and skipping every other value without keeping it:
/// a payload cut short, or too big to finish within the budget, keeps what came first.
struct Fields<'a>(&'a Mutex<Found>);

impl<'de> DeserializeSeed<'de> for Fields<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Fields<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a hook payload object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            let wanted = matches!(
                key.as_str(),
                "session_id"
                    | "thread-id"
                    | "thread_id"
                    | "tool_name"
                    | "message"
                    | "notification_type"
                    | "agent_id"
                    | "agent_type"
            );
            if !wanted {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let value = map.next_value::<Value>()?;
            let mut found = self.0.lock().expect("not poisoned");
            if key == "message" {
                if found.message.is_none() {
                    found.message = value.as_str().map(|m| {
                        baton_core::packet::clip(m.trim(), baton_app::MAX_NEED_BYTES - 64)
                    });
                }
                continue;
            }
            let value = short(Some(&value));
            let slot = match key.as_str() {
                "session_id" => &mut found.session_id,
                "tool_name" => &mut found.tool,
                "notification_type" => &mut found.notification_type,
                "agent_id" => &mut found.agent_id,
                "agent_type" => &mut found.agent_type,
                _ => &mut found.thread_id,
            };
            if slot.is_none() {
                *slot = value;
            }
        }
        Ok(())
    }
}

/// Reads the payload for at most [`PAYLOAD_WAIT`]. Stdin is read on a thread so an agent
/// that never closes it, or a payload of any size, cannot hold the hook.
async fn payload(args: &HookArgs) -> Found {
    let found = Arc::new(Mutex::new(Found::default()));
    match &args.payload {
        Some(raw) => {
            let mut de = serde_json::Deserializer::from_str(raw);
            let _ = Fields(&found).deserialize(&mut de);
        }
        None => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let shared = Arc::clone(&found);
            std::thread::spawn(move || {
                let stdin = std::io::stdin().lock();
                let mut de = serde_json::Deserializer::from_reader(stdin);
                let _ = Fields(&shared).deserialize(&mut de);
                let _ = tx.send(());
            });
            let _ = tokio::time::timeout(PAYLOAD_WAIT, rx).await;
        }
    }
    found.lock().expect("not poisoned").clone()
}

async fn record(g: &GlobalArgs, args: &HookArgs) -> CommandResult<String> {
    let event = args.event.trim();
    if event.is_empty()
        || event.len() > MAX_FIELD
        || !event
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(CommandError::usage(format!(
            "{event:?} is not a hook event name"
        )));
    }
    let found = payload(args).await;
    let project = Project::locate(g.project.as_deref())?;
    let app = project.hook_app(STORE_WAIT).await?;
    let run = std::env::var("BATON_RUN")
        .ok()
        .filter(|r| !r.is_empty() && r.len() <= MAX_FIELD);
    // A session that asks for a person (Claude Code's `Notification`: a permission
    // prompt, idle waiting for input, a question for the user) raises a need in the human
    // queue; a notice that asks nothing (`auth_success`) does not. A payload without a
    // kind is from a version that notified only when it waited for a person.
    let asks = found.notification_type.as_deref().is_none_or(|kind| {
        matches!(
            kind,
            "permission_prompt" | "idle_prompt" | "elicitation_dialog"
        )
    });
    let need = (event == "Notification" && asks)
        .then_some(found.message.clone())
        .flatten()
        .filter(|m| !m.is_empty());
    if let Some(text) = need {
        let actor = g
            .as_name
            .clone()
            .unwrap_or_else(|| baton_core::event::LOCAL_OPERATOR.to_owned());
        app.raise_need(
            &actor,
            &format!("{} session: {text}", args.agent.as_str()),
            None,
            baton_core::gate::NeedSource::Session,
            run.clone(),
        )
        .await?;
    }
    let agent = args.agent.as_str();
    let session = found.session();
    let call = HookCall {
        row: HookCall::row_of(
            run.as_deref(),
            agent,
            session.as_deref(),
            found.agent_id.as_deref(),
        ),
        run,
        agent: agent.to_owned(),
        event: event.to_owned(),
        session,
        tool: found.tool,
        agent_id: found.agent_id,
        agent_type: found.agent_type,
    };
    let injects = args.inject && baton_core::run::hook_injects(&call.event);
    let packet = app.hook(g.as_name.as_deref(), call, args.inject).await?;
    if injects && packet.is_none() {
        // The agent's context gets nothing: say why, where a person looking finds it.
        match g.as_name.as_deref() {
            None => eprintln!(
                "baton hook: no resume packet: who is acting? start the agent with \
                 BATON_AS=NAME (see `baton agent list`)"
            ),
            Some(name) => eprintln!(
                "baton hook: no resume packet: {name} is not a participant of this project \
                 (`baton agent add {name} --role ROLE`)",
                name = crate::output::visible(name)
            ),
        }
    }
    Ok(packet.unwrap_or_default())
}

// ---------------------------------------------------------------------------------------
// `baton init --claude | --codex`
// ---------------------------------------------------------------------------------------

/// A hook event Baton installs: its name, whether it injects the packet, and how long the
/// agent lets it run (seconds).
type HookSpec = (&'static str, bool, u32);

/// How long an agent lets one of Baton's hooks run: far more than a hook's own budget
/// ([`TOTAL_BUDGET`]), so only a stuck process reaches it.
const HOOK_TIMEOUT_SECS: u32 = 5;

/// The longest SessionEnd timeout Codex accepts: it clamps a longer one to this, with a
/// warning on every start.
const CODEX_SESSION_END_TIMEOUT_SECS: u32 = 3;

/// The hook events Baton listens to for `agent`; `true` where it injects the packet. Only
/// SessionStart does: it also fires after a compaction (`source: compact`), which is when
/// the packet is needed again, and PreCompact's stdout is not added to the context.
/// Both agents call SessionEnd when a session ends (`codex exec` exiting included) and
/// SubagentStart/SubagentStop around a helper (Claude Code's `Agent`, Codex's
/// `spawn_agent`).
fn hook_events(agent: Agent) -> Vec<HookSpec> {
    let mut events = vec![
        ("SessionStart", true, HOOK_TIMEOUT_SECS),
        ("UserPromptSubmit", false, HOOK_TIMEOUT_SECS),
        ("PreToolUse", false, HOOK_TIMEOUT_SECS),
        ("PostToolUse", false, HOOK_TIMEOUT_SECS),
        ("SubagentStart", false, HOOK_TIMEOUT_SECS),
        ("SubagentStop", false, HOOK_TIMEOUT_SECS),
        ("PreCompact", false, HOOK_TIMEOUT_SECS),
        ("Stop", false, HOOK_TIMEOUT_SECS),
    ];
    match agent {
        Agent::Claude => events.extend([
            ("SessionEnd", false, HOOK_TIMEOUT_SECS),
            // A permission prompt or an idle session waiting for input: a need in
            // `baton queue`.
            ("Notification", false, HOOK_TIMEOUT_SECS),
        ]),
        Agent::Codex => events.extend([
            ("PostCompact", false, HOOK_TIMEOUT_SECS),
            ("SessionEnd", false, CODEX_SESSION_END_TIMEOUT_SECS),
        ]),
    }
    events
}

/// The markers around Baton's section of AGENTS.md and CLAUDE.md.
pub const BEGIN: &str = "<!-- baton:begin (written by `baton init`; edits inside are replaced) -->";
pub const END: &str = "<!-- baton:end -->";

const SECTION: &str = "## Baton (handoffs between agents)

This repository uses Baton (`.baton/`) for handoffs between agents.

- Start with `baton resume` (who you are is `--as NAME` or `BATON_AS`): what you owe,
  what you wait for, decisions, constraints and stop conditions, in one bounded packet.
- `baton inbox` lists what you owe; `baton show ID` fetches one; `baton complete ID --note`
  or `baton hand-back ID --reason` closes it.
- Before planning, read the constraints (`baton state show`); record decisions with
  `baton decide` and dead ends with `baton constrain`.
- When a step produces an output, record where it landed:
  `baton receipt write --step STEP --artifact PATH`.
- Report progress as a line `PROGRESS n/total` on stdout when the number of steps is known.
- Long-running agents are started with `baton run -- CMD…` so the ledger knows them
  (`baton runs`). The same operations are offered as MCP tools by `baton mcp`.";

fn hook_command(agent: Agent, event: &str, inject: bool) -> String {
    let mut command = format!("baton hook {} {event}", agent.as_str());
    if inject {
        command.push_str(" --inject");
    }
    command
}

fn is_ours(group: &Value, agent: Agent) -> bool {
    let prefix = format!("baton hook {} ", agent.as_str());
    group
        .get("hooks")
        .and_then(Value::as_array)
        .is_some_and(|hooks| {
            !hooks.is_empty()
                && hooks.iter().all(|h| {
                    h.get("command")
                        .and_then(Value::as_str)
                        .is_some_and(|c| c.starts_with(&prefix))
                })
        })
}

/// Puts Baton's hook groups into a `{"hooks": {EVENT: [groups]}}` document, replacing
/// only groups that are Baton's own.
fn merge_hooks(doc: &mut Map<String, Value>, agent: Agent) -> Result<(), String> {
    let hooks = doc
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or("its \"hooks\" is not an object")?;
    for (event, inject, timeout) in hook_events(agent) {
        let groups = hooks
            .entry(event)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .ok_or_else(|| format!("its hooks.{event} is not a list"))?;
        groups.retain(|g| !is_ours(g, agent));
        groups.push(json!({
            "hooks": [{ "type": "command", "command": hook_command(agent, event, inject), "timeout": timeout }]
        }));
    }
    Ok(())
}

/// Reads a JSON object file (missing: empty), lets `change` edit it, and writes it back
/// when it changed. A file that is not a JSON object is refused, never overwritten.
fn edit_json(
    path: &Path,
    change: impl FnOnce(&mut Map<String, Value>) -> Result<(), String>,
) -> CommandResult<Written> {
    let existing = read_optional(path)?;
    let mut doc = match &existing {
        None => Map::new(),
        Some(text) if text.trim().is_empty() => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            _ => {
                return Err(CommandError::refused(format!(
                    "{} is not a JSON object; fix or move it, then run `baton init` again \
                     (nothing was changed)",
                    path.display()
                )));
            }
        },
    };
    change(&mut doc).map_err(|e| {
        CommandError::refused(format!(
            "{}: {e}; fix it, then run `baton init` again (nothing was changed)",
            path.display()
        ))
    })?;
    let mut text = serde_json::to_string_pretty(&Value::Object(doc)).expect("JSON serializes");
    text.push('\n');
    write_if_changed(path, existing.as_deref(), &text)
}

fn read_optional(path: &Path) -> CommandResult<Option<String>> {
    match crate::files::read_bounded(path, crate::files::MAX_FILE_BYTES) {
        Ok(read) if read.over => Err(CommandError::refused(format!(
            "{} is over the cap of {} bytes",
            path.display(),
            crate::files::MAX_FILE_BYTES
        ))),
        Ok(read) => String::from_utf8(read.bytes)
            .map(Some)
            .map_err(|_| CommandError::failed(format!("{}: not UTF-8 text", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CommandError::failed(format!("{}: {e}", path.display()))),
    }
}

/// Writes through a temporary file and a rename, so a crash leaves the old file or the
/// new one, never half of one.
fn write_if_changed(path: &Path, old: Option<&str>, new: &str) -> CommandResult<Written> {
    let shown = path.display().to_string();
    if old == Some(new) {
        return Ok(Written {
            path: shown,
            result: "unchanged".into(),
        });
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    crate::files::write_atomically(path, new.as_bytes())?;
    Ok(Written {
        path: shown,
        result: if old.is_some() { "updated" } else { "created" }.into(),
    })
}

/// Replaces the text between the markers, or appends a marked section.
fn with_section(existing: &str, section: &str) -> String {
    let block = format!("{BEGIN}\n{section}\n{END}\n");
    if let Some(start) = existing.find(BEGIN)
        && let Some(end_at) = existing[start..].find(END)
    {
        let end = start + end_at + END.len();
        let after = existing[end..]
            .strip_prefix('\n')
            .unwrap_or(&existing[end..]);
        return format!("{}{block}{after}", &existing[..start]);
    }
    let mut out = existing.to_owned();
    if !out.is_empty() {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push('\n');
    }
    out.push_str(&block);
    out
}

fn edit_markdown(path: &Path) -> CommandResult<Written> {
    let existing = read_optional(path)?;
    let new = with_section(existing.as_deref().unwrap_or(""), SECTION);
    write_if_changed(path, existing.as_deref(), &new)
}

/// The MCP server entry both agents get.
fn mcp_server() -> Value {
    json!({ "command": "baton", "args": ["mcp"] })
}

/// What Codex forwards to `baton mcp` by name: Codex starts a stdio MCP server with a
/// short whitelist of the environment (HOME, PATH, USER, …) plus what its entry names.
pub const CODEX_FORWARDED: [&str; 3] = ["BATON_AS", "BATON_PROJECT", "BATON_RUN"];

/// How long Codex lets one of Baton's tools run: the longest wait, and a little more.
pub const CODEX_TOOL_TIMEOUT_SECS: i64 = baton_app::ops::MAX_WAIT.as_secs() as i64 + 10;

/// `.codex/config.toml`: Baton's keys of `[mcp_servers.baton]` (other keys of that table
/// are kept), and `[features] hooks = true` only when neither `hooks` nor the deprecated
/// `codex_hooks` is set: a user's choice either way stands.
fn edit_codex_config(path: &Path) -> CommandResult<Written> {
    let existing = read_optional(path)?;
    let mut doc: toml_edit::DocumentMut =
        existing.as_deref().unwrap_or("").parse().map_err(|e| {
            CommandError::refused(format!(
                "{} is not valid TOML ({e}); fix it, then run `baton init --codex` again \
                 (nothing was changed)",
                path.display()
            ))
        })?;
    let not_a_table = |what: &str| {
        CommandError::refused(format!(
            "{}: {what} is not a table; fix it, then run `baton init --codex` again \
             (nothing was changed)",
            path.display()
        ))
    };
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            toml_edit::Item::Table(t)
        })
        .as_table_mut()
        .ok_or_else(|| not_a_table("mcp_servers"))?;
    let baton = servers
        .entry("baton")
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
        .as_table_mut()
        .ok_or_else(|| not_a_table("mcp_servers.baton"))?;
    // A command the user set (a path to their own `baton`) stands.
    if baton
        .get("command")
        .and_then(toml_edit::Item::as_str)
        .is_none()
    {
        baton["command"] = toml_edit::value("baton");
    }
    // `receipt_wait` and `order_show` may wait 300 s; Codex's default tool timeout is 60.
    if !baton.contains_key("tool_timeout_sec") {
        baton["tool_timeout_sec"] = toml_edit::value(CODEX_TOOL_TIMEOUT_SECS);
    }
    let args_ok = baton
        .get("args")
        .and_then(toml_edit::Item::as_array)
        .is_some_and(|a| a.len() == 1 && a.get(0).and_then(|v| v.as_str()) == Some("mcp"));
    if !args_ok {
        let mut args = toml_edit::Array::new();
        args.push("mcp");
        baton["args"] = toml_edit::value(args);
    }
    // The names the user listed stay; Baton's are added when missing.
    let mut names: Vec<String> = baton
        .get("env_vars")
        .and_then(toml_edit::Item::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let before = names.len();
    for name in CODEX_FORWARDED {
        if !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    if names.len() != before || baton.get("env_vars").is_none() {
        baton["env_vars"] = toml_edit::value(
            names
                .iter()
                .map(String::as_str)
                .collect::<toml_edit::Array>(),
        );
    }
    let features = doc
        .entry("features")
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
        .as_table_mut()
        .ok_or_else(|| not_a_table("features"))?;
    if !features.contains_key("hooks") && !features.contains_key("codex_hooks") {
        features["hooks"] = toml_edit::value(true);
    }
    write_if_changed(path, existing.as_deref(), &doc.to_string())
}

/// The steps the agents require once, by hand, before what `baton init` wrote takes
/// effect. Printed after every `baton init --claude|--codex`.
pub fn one_time_steps(claude: bool, codex: bool) -> Vec<String> {
    let mut steps = Vec::new();
    if claude {
        steps.push(
            "Claude Code: start `claude` here once, interactively, and approve the project MCP \
             server `baton` from .mcp.json (check with /mcp); hooks in .claude/settings.json \
             apply from the next session."
                .to_owned(),
        );
        steps.push(
            "Claude Code: start it with BATON_AS=NAME (or through `baton --as NAME run -- claude …`) \
             so the hooks and `baton mcp` know who is acting."
                .to_owned(),
        );
    }
    if codex {
        steps.push(
            "Codex: trust this project when Codex asks (it reads .codex/ only in trusted \
             projects), then review and trust Baton's hooks with /hooks: Codex skips, silently, \
             every hook nobody trusted (`baton runs` marks such a session `hooks skipped`). The \
             trust is kept in ~/.codex/config.toml ([hooks.state], by each hook's hash), so \
             unattended `codex exec` runs here use it too; or start them with \
             `codex exec --dangerously-bypass-hook-trust` where .codex/hooks.json is vetted."
                .to_owned(),
        );
        steps.push(format!(
            "Codex: start it with BATON_AS=NAME (or through `baton --as NAME run -- codex …`); \
             the MCP entry forwards {} by name.",
            CODEX_FORWARDED.join(", ")
        ));
        steps.push(format!(
            "Codex: `notify` is read only from ~/.codex/config.toml; to record each finished \
             turn (and see when hooks were skipped), add there: \
             notify = [\"baton\", \"hook\", \"codex\", \"{}\"]",
            baton_core::run::NOTIFY_EVENT
        ));
    }
    steps
}

/// Writes the agents' configuration into the checkout at `root`.
pub fn install(root: &Path, claude: bool, codex: bool) -> CommandResult<Vec<Written>> {
    let mut written = Vec::new();
    let at = |p: &str| -> PathBuf { root.join(p) };
    if claude {
        written.push(edit_json(&at(".claude/settings.json"), |doc| {
            merge_hooks(doc, Agent::Claude)
        })?);
        written.push(edit_json(&at(".mcp.json"), |doc| {
            doc.entry("mcpServers")
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
                .ok_or("its \"mcpServers\" is not an object")?
                .insert("baton".into(), mcp_server());
            Ok(())
        })?);
        written.push(edit_markdown(&at("CLAUDE.md"))?);
    }
    if codex {
        written.push(edit_json(&at(".codex/hooks.json"), |doc| {
            merge_hooks(doc, Agent::Codex)
        })?);
        written.push(edit_codex_config(&at(".codex/config.toml"))?);
    }
    if claude || codex {
        written.push(edit_markdown(&at("AGENTS.md"))?);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a hook keeps of a payload, read the way `payload` reads one.
    fn read(raw: &str) -> Found {
        let found = Mutex::new(Found::default());
        let mut de = serde_json::Deserializer::from_str(raw);
        let _ = Fields(&found).deserialize(&mut de);
        found.into_inner().expect("not poisoned")
    }

    /// Whatever an agent writes, a hook keeps short printable fields and a clipped message.
    fn kept_bounded(found: &Found) {
        for field in [
            &found.session_id,
            &found.thread_id,
            &found.tool,
            &found.notification_type,
            &found.agent_id,
            &found.agent_type,
        ]
        .into_iter()
        .flatten()
        {
            assert!(field.len() <= MAX_FIELD && !field.contains(char::is_control));
        }
        if let Some(message) = &found.message {
            assert!(message.len() <= baton_app::MAX_NEED_BYTES);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Fuzzing the hook payload reader: Claude Code's and Codex's payloads with values
        /// of any kind, and arbitrary text.
        #[test]
        fn a_hook_payload_of_any_shape_keeps_only_bounded_fields(
            session in proptest::prelude::any::<String>(),
            tool in "[ -~]{0,200}",
            message in proptest::prelude::any::<String>(),
            nested in 0..80usize,
            junk in proptest::prelude::any::<String>(),
            cut in 0..400usize,
        ) {
            let deep = format!("{}1{}", "[".repeat(nested), "]".repeat(nested));
            let payload = json!({
                "session_id": session, "tool_name": tool, "message": message,
                "agent_id": deep, "notification_type": {"x": [1, 2]},
                "tool_input": {"command": junk}, "thread-id": null,
            })
            .to_string();
            kept_bounded(&read(&payload));
            // Cut anywhere: what came first is kept, within its bounds.
            let at = (0..=cut.min(payload.len())).rev().find(|i| payload.is_char_boundary(*i)).unwrap_or(0);
            kept_bounded(&read(&payload[..at]));
            kept_bounded(&read(&junk));
        }
    }

    #[test]
    fn a_marked_section_is_appended_then_replaced_in_place() {
        let first = with_section("# Notes\nkeep me", "v1");
        assert_eq!(first, format!("# Notes\nkeep me\n\n{BEGIN}\nv1\n{END}\n"));
        let edited = first.replace("keep me", "keep me too") + "after\n";
        let second = with_section(&edited, "v2");
        assert_eq!(
            second,
            format!("# Notes\nkeep me too\n\n{BEGIN}\nv2\n{END}\nafter\n")
        );
        assert_eq!(with_section(&second, "v2"), second);
    }

    #[test]
    fn hooks_merge_beside_the_users_and_replace_only_batons() {
        let mut doc: Map<String, Value> = serde_json::from_value(json!({
            "model": "opus",
            "hooks": { "PreToolUse": [
                { "matcher": "Bash", "hooks": [{ "type": "command", "command": "./lint.sh" }] },
                { "hooks": [{ "type": "command", "command": "baton hook claude PreToolUse --old" }] }
            ]}
        }))
        .unwrap();
        merge_hooks(&mut doc, Agent::Claude).unwrap();
        merge_hooks(&mut doc, Agent::Claude).unwrap();
        let pre = doc["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 2, "{pre:?}");
        assert_eq!(pre[0]["hooks"][0]["command"], "./lint.sh");
        assert_eq!(
            pre[1]["hooks"][0]["command"],
            "baton hook claude PreToolUse"
        );
        assert_eq!(
            doc["hooks"]["SessionStart"][0]["hooks"][0]["command"],
            "baton hook claude SessionStart --inject"
        );
        assert_eq!(doc["model"], "opus");
    }
}
