//! `baton hook claude|codex EVENT`: what an agent's lifecycle hook calls. It appends one
//! event tied to the session and, when known, the run, and must never slow the agent
//! down or break it: it waits at most 25 ms for the store, spends at most 150 ms in all,
//! always exits 0 and prints nothing on stdout — except the resume packet for
//! `SessionStart` and `PreCompact` with `--inject`.
//!
//! This module also writes the agents' configuration for `baton init --claude|--codex`:
//! the hooks, the MCP server, and a marked section in AGENTS.md (and CLAUDE.md), merged
//! into what is there and never clobbering it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use baton_app::doc::{self, Written};
use baton_core::run::HookCall;
use clap::{Args, ValueEnum};
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
/// and appends an event tied to the session and, when BATON_RUN is set, the run. Waits at
/// most 25 ms for the store and 150 ms in all; on timeout the event is dropped with one
/// line on stderr. Prints nothing, except that SessionStart and PreCompact with --inject
/// print the resume packet of BATON_AS (or --as) for the agent's context.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples (normally written by `baton init --claude|--codex`):\n  \
    baton hook claude SessionStart --inject\n  baton hook codex PostToolUse"
)]
pub struct HookArgs {
    pub agent: Agent,
    /// The hook event: SessionStart, UserPromptSubmit, PreToolUse, PostToolUse,
    /// SubagentStart, SubagentStop, PreCompact, Stop, SessionEnd, …
    pub event: String,
    /// For SessionStart and PreCompact: print the resume packet.
    #[arg(long)]
    pub inject: bool,
    /// The hook's JSON, when it comes as an argument instead of on stdin.
    pub payload: Option<String>,
}

/// The whole budget of one hook call, and the part of it spent waiting for the store.
pub const TOTAL_BUDGET: Duration = Duration::from_millis(150);
pub const STORE_WAIT: Duration = Duration::from_millis(25);
/// The most hook input read; the agents' payloads are far smaller.
const MAX_INPUT: u64 = 1024 * 1024;
/// Longest session id, tool name or event name recorded.
const MAX_FIELD: usize = 128;

/// Never fails: whatever goes wrong is one line on stderr and exit 0.
pub async fn run(g: &GlobalArgs, args: HookArgs) -> CommandResult<Output> {
    let started = Instant::now();
    let deadline = started + TOTAL_BUDGET;
    let text = match tokio::time::timeout(TOTAL_BUDGET, record(g, &args, deadline)).await {
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

/// A short printable field from the payload, or nothing.
fn field(v: &Value, keys: &[&str]) -> Option<String> {
    keys.iter()
        .find_map(|k| v.get(k).and_then(Value::as_str))
        .map(str::trim)
        .filter(|s| !s.is_empty() && s.len() <= MAX_FIELD && !s.contains(char::is_control))
        .map(str::to_owned)
}

/// Reads the payload within what is left of the budget. Stdin is read on a thread so an
/// agent that never closes it cannot hold the hook.
async fn payload(args: &HookArgs, deadline: Instant) -> Option<Value> {
    let raw = match &args.payload {
        Some(p) => p.clone(),
        None => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = std::io::stdin().take(MAX_INPUT).read_to_string(&mut text);
                let _ = tx.send(text);
            });
            let left = deadline.saturating_duration_since(Instant::now());
            tokio::time::timeout(left, rx).await.ok()?.ok()?
        }
    };
    serde_json::from_str::<Value>(&raw)
        .ok()
        .filter(Value::is_object)
}

async fn record(g: &GlobalArgs, args: &HookArgs, deadline: Instant) -> CommandResult<String> {
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
    let input = payload(args, deadline).await;
    let input = input.as_ref().unwrap_or(&Value::Null);
    let project = Project::locate(g.project.as_deref())?;
    let app = project.app_with(STORE_WAIT).await?;
    let run = std::env::var("BATON_RUN")
        .ok()
        .filter(|r| !r.is_empty() && r.len() <= MAX_FIELD);
    let call = HookCall {
        run,
        agent: args.agent.as_str().to_owned(),
        event: event.to_owned(),
        // Claude Code and Codex hooks say `session_id`; Codex's notify says `thread-id`.
        session: field(input, &["session_id", "thread-id", "thread_id"]),
        tool: field(input, &["tool_name"]),
    };
    let packet = app.hook(g.as_name.as_deref(), call, args.inject).await?;
    Ok(packet.unwrap_or_default())
}

// ---------------------------------------------------------------------------------------
// `baton init --claude | --codex`
// ---------------------------------------------------------------------------------------

/// The Claude Code hook events Baton listens to; `true` where it injects the packet.
const CLAUDE_EVENTS: [(&str, bool); 9] = [
    ("SessionStart", true),
    ("UserPromptSubmit", false),
    ("PreToolUse", false),
    ("PostToolUse", false),
    ("SubagentStart", false),
    ("SubagentStop", false),
    ("PreCompact", true),
    ("Stop", false),
    ("SessionEnd", false),
];
const CODEX_EVENTS: [(&str, bool); 5] = [
    ("SessionStart", true),
    ("UserPromptSubmit", false),
    ("PreToolUse", false),
    ("PostToolUse", false),
    ("Stop", false),
];

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
fn merge_hooks(
    doc: &mut Map<String, Value>,
    agent: Agent,
    events: &[(&str, bool)],
) -> Result<(), String> {
    let hooks = doc
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or("its \"hooks\" is not an object")?;
    for (event, inject) in events {
        let groups = hooks
            .entry(*event)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .ok_or_else(|| format!("its hooks.{event} is not a list"))?;
        groups.retain(|g| !is_ours(g, agent));
        groups.push(json!({
            "hooks": [{ "type": "command", "command": hook_command(agent, event, *inject), "timeout": 5 }]
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

/// `.codex/config.toml`: the MCP server (replacing only `[mcp_servers.baton]`) and the
/// hooks feature flag when it is not set either way.
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
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            toml_edit::Item::Table(t)
        })
        .as_table_mut()
        .ok_or_else(|| {
            CommandError::refused(format!("{}: mcp_servers is not a table", path.display()))
        })?;
    let mut baton = toml_edit::Table::new();
    baton["command"] = toml_edit::value("baton");
    let mut args = toml_edit::Array::new();
    args.push("mcp");
    baton["args"] = toml_edit::value(args);
    servers.insert("baton", toml_edit::Item::Table(baton));
    let features = doc
        .entry("features")
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
        .as_table_mut()
        .ok_or_else(|| {
            CommandError::refused(format!("{}: features is not a table", path.display()))
        })?;
    if !features.contains_key("codex_hooks") {
        features["codex_hooks"] = toml_edit::value(true);
    }
    write_if_changed(path, existing.as_deref(), &doc.to_string())
}

/// Writes the agents' configuration into the checkout at `root`.
pub fn install(root: &Path, claude: bool, codex: bool) -> CommandResult<Vec<Written>> {
    let mut written = Vec::new();
    let at = |p: &str| -> PathBuf { root.join(p) };
    if claude {
        written.push(edit_json(&at(".claude/settings.json"), |doc| {
            merge_hooks(doc, Agent::Claude, &CLAUDE_EVENTS)
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
            merge_hooks(doc, Agent::Codex, &CODEX_EVENTS)
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
        merge_hooks(&mut doc, Agent::Claude, &CLAUDE_EVENTS).unwrap();
        merge_hooks(&mut doc, Agent::Claude, &CLAUDE_EVENTS).unwrap();
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
