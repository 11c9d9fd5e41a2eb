//! `baton init`: create `.baton/` here, with its store and config, and keep the database
//! out of git.

use std::path::Path;

use baton_app::Settings;
use baton_app::doc::Init;
use clap::Args;

use crate::cli::GlobalArgs;
use crate::error::CommandResult;
use crate::output::Output;
use crate::project::{CONFIG_FILE, DB_FILE, DEFAULT_CONFIG, DIR, Project};

/// Create a Baton project in the current directory (or --project DIR).
///
/// Creates `.baton/` with the store (SQLite, WAL mode) and `config.toml`, and adds the
/// database files to `.gitignore` (creating or appending; existing lines are kept).
/// Running it again is harmless: it creates only what is missing.
///
/// With --claude or --codex it also writes that agent's hook and MCP server configuration
/// (`.claude/settings.json` and `.mcp.json`; `.codex/hooks.json` and `.codex/config.toml`)
/// and a marked Baton section in AGENTS.md (and CLAUDE.md). Running it again updates
/// Baton's own entries and section only; everything else in those files is kept. It then
/// prints the steps each agent requires once, by hand (approving the MCP server, trusting
/// the project and its hooks, where Codex reads `notify`).
///
/// With --git-guard it installs git hooks (in the repository's hooks directory, which every
/// worktree shares) that refuse a commit or a push touching paths another participant
/// holds exclusively (`baton reserve`); the committer is BATON_AS. A hook of the same name
/// that is not Baton's is kept, and the steps say what to add to it.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  cd my-repo && baton init\n  baton init --claude --codex\n  baton init --git-guard"
)]
pub struct InitArgs {
    /// Configure Claude Code: hooks, the MCP server, CLAUDE.md and AGENTS.md sections.
    #[arg(long)]
    pub claude: bool,
    /// Configure Codex: hooks, the MCP server, an AGENTS.md section.
    #[arg(long)]
    pub codex: bool,
    /// Install git hooks (pre-commit, pre-push, post-commit, shared by every worktree)
    /// that refuse a commit touching paths another participant holds exclusively.
    #[arg(long)]
    pub git_guard: bool,
}

/// The lines `.gitignore` needs so the database never lands in a commit.
const IGNORED: [&str; 3] = [
    ".baton/baton.db",
    ".baton/baton.db-wal",
    ".baton/baton.db-shm",
];

pub async fn run(g: &GlobalArgs, args: InitArgs) -> CommandResult<Output> {
    let root = match &g.project {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    let dir = root.join(DIR);
    // An empty file holds nothing to keep: the store is made in it, and said so.
    let found = std::fs::metadata(dir.join(DB_FILE)).ok().map(|m| m.len());
    let existed = found.is_some_and(|len| len > 0);
    let was_empty = found == Some(0);
    std::fs::create_dir_all(&dir)?;
    let config_path = dir.join(CONFIG_FILE);
    if !config_path.exists() {
        std::fs::write(&config_path, DEFAULT_CONFIG)?;
    }
    let config = Project::locate(Some(&root))
        .map(|p| p.config)
        .unwrap_or_else(|_| Settings::default());
    let url = format!("sqlite:{}", dir.join(DB_FILE).display());
    baton_store::open(&url, config.busy_timeout, true).await?;
    let gitignore = ensure_ignored(&root.join(".gitignore"))?;
    let mut agents = crate::commands::hook::install(&root, args.claude, args.codex)?;
    let mut guard_steps = Vec::new();
    if args.git_guard {
        let (hooks, steps) = crate::commands::guard::install(&root)?;
        agents.extend(hooks);
        guard_steps = steps;
    }

    let root_text = root.display().to_string();
    let mut human = if existed {
        format!("Baton project already initialized at {root_text}/{DIR}; nothing was overwritten.")
    } else if was_empty {
        format!(
            "Initialized Baton project at {root_text}/{DIR}: its {DB_FILE} was an empty file, \
             and the store was made in it"
        )
    } else {
        format!("Initialized Baton project at {root_text}/{DIR}")
    };
    match gitignore {
        "created" => human.push_str("\nCreated .gitignore with the store's files."),
        "updated" => human.push_str("\nAdded the store's files to .gitignore."),
        _ => {}
    }
    for w in &agents {
        human.push_str(&format!("\n{} {}", w.result, w.path));
    }
    let mut steps = crate::commands::hook::one_time_steps(args.claude, args.codex);
    steps.extend(guard_steps);
    if !steps.is_empty() {
        human.push_str("\nOnce, by hand:");
        for step in &steps {
            human.push_str(&format!("\n  - {step}"));
        }
    }
    if !existed {
        human.push_str("\nNext: baton agent add NAME --role ROLE");
    }
    let doc = Init {
        root: root_text,
        created: !existed,
        gitignore: gitignore.to_owned(),
        agents,
        steps,
    };
    Ok(Output::of(&doc, human))
}

/// Adds the missing [`IGNORED`] lines to `.gitignore`; says whether it `created`,
/// `updated` or left it `unchanged`.
fn ensure_ignored(path: &Path) -> std::io::Result<&'static str> {
    let existing = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let text = existing.as_deref().unwrap_or("");
    let present: Vec<&str> = text.lines().map(str::trim).collect();
    let missing: Vec<&str> = IGNORED
        .into_iter()
        .filter(|line| !present.contains(line))
        .collect();
    if missing.is_empty() {
        return Ok("unchanged");
    }
    let mut addition = String::new();
    if !text.is_empty() && !text.ends_with('\n') {
        addition.push('\n');
    }
    addition.push_str("# Baton's local store\n");
    for line in missing {
        addition.push_str(line);
        addition.push('\n');
    }
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(addition.as_bytes())?;
    file.sync_all()?;
    Ok(if existing.is_some() {
        "updated"
    } else {
        "created"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gitignore_is_appended_to_never_clobbered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".gitignore");
        std::fs::write(&path, "target").unwrap();
        assert_eq!(ensure_ignored(&path).unwrap(), "updated");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("target\n# Baton's local store\n.baton/baton.db\n"),
            "{text}"
        );
        assert_eq!(ensure_ignored(&path).unwrap(), "unchanged");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }

    #[test]
    fn a_missing_gitignore_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".gitignore");
        assert_eq!(ensure_ignored(&path).unwrap(), "created");
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 4);
    }
}
