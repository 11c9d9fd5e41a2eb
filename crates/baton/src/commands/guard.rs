//! The git guard: `baton init --git-guard` installs pre-commit, pre-push and post-commit
//! hooks in the repository's hooks directory (shared by every worktree); each runs
//! `baton guard HOOK`. Before a commit or a push it refuses one that touches paths
//! another participant holds exclusively, naming holder, reservation and the ways out;
//! after a commit (which `--no-verify` does not skip) it records a commit that went in
//! over another's reservation. The committer is `BATON_AS` (`--as`), or no one.
//!
//! When the reservations cannot be read — no project, a store that does not open, a
//! server that does not answer — the guard lets the commit through with a one-line warning,
//! unless `reservations.guard = "closed"`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use baton_app::doc::{GuardChecked, Written};
use clap::{Args, ValueEnum};

use crate::cli::GlobalArgs;
use crate::commands::Context;
use crate::error::{CommandError, CommandResult, ErrorKind};
use crate::output::Output;
use crate::project::Project;

/// Which git hook is calling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Hook {
    PreCommit,
    PrePush,
    PostCommit,
}

impl Hook {
    const ALL: [Hook; 3] = [Self::PreCommit, Self::PrePush, Self::PostCommit];

    fn file(self) -> &'static str {
        match self {
            Self::PreCommit => "pre-commit",
            Self::PrePush => "pre-push",
            Self::PostCommit => "post-commit",
        }
    }
}

/// What the git hooks `baton init --git-guard` installs run (not for typing).
///
/// pre-commit and pre-push refuse (exit 1) a commit or a push that touches paths another
/// participant holds exclusively; post-commit records a commit that went in over one
/// (`git commit --no-verify` skips pre-commit, not post-commit). The committer is BATON_AS.
#[derive(Args, Debug)]
#[command(after_help = "Example (what .git/hooks/pre-commit runs):\n  baton guard pre-commit")]
pub struct GuardArgs {
    #[arg(value_enum)]
    pub hook: Hook,
    /// For pre-push: the remote's name and URL, as git passes them.
    #[arg(hide = true)]
    pub rest: Vec<String>,
}

/// The first line of every hook Baton writes: how it knows its own.
const MARKER: &str = "# baton git guard";

/// The hook's script: Baton's binary as installed (or the one on PATH), the project's
/// root, and a guard that fails open when neither runs.
fn script(hook: Hook, baton: &Path, root: &Path) -> String {
    let quote = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', r"'\''"));
    format!(
        "#!/bin/sh\n{MARKER} (written by `baton init --git-guard`; run it again to update).\n\
         # Refuses what touches paths another participant holds exclusively; the committer\n\
         # is BATON_AS. `git commit --no-verify` skips the check, and Baton records it.\n\
         baton={baton}\n\
         [ -x \"$baton\" ] || baton=$(command -v baton) || {{\n  \
         echo 'baton guard: baton is not installed here; the {hook} check was skipped' >&2\n  \
         exit 0\n}}\n\
         if [ -z \"$BATON_URL\" ] && [ -z \"$BATON_PROJECT\" ]; then\n  \
         export BATON_PROJECT={root}\n\
         fi\n\
         exec \"$baton\" guard {hook} \"$@\"\n",
        baton = quote(baton),
        root = quote(root),
        hook = hook.file(),
    )
}

/// Where git looks for the repository's hooks (`core.hooksPath`, or the common git
/// directory's `hooks/`, shared by every worktree).
fn hooks_dir(root: &Path) -> CommandResult<PathBuf> {
    let out = git(root, &["rev-parse", "--git-path", "hooks"])?;
    let dir = PathBuf::from(out.trim());
    Ok(if dir.is_absolute() {
        dir
    } else {
        root.join(dir)
    })
}

fn git(dir: &Path, args: &[&str]) -> CommandResult<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| CommandError::failed(format!("git could not be run: {e}")))?;
    if !out.status.success() {
        return Err(CommandError::usage(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Installs the guard's hooks for the repository holding `root`. A hook of the same
/// name that is not Baton's is kept as it is, and the returned steps say what to add to
/// it.
pub fn install(root: &Path) -> CommandResult<(Vec<Written>, Vec<String>)> {
    let dir = hooks_dir(root).map_err(|e| {
        CommandError::usage(format!(
            "--git-guard needs a git repository at {}: {e}",
            root.display()
        ))
    })?;
    std::fs::create_dir_all(&dir)?;
    let baton = std::env::current_exe()?;
    let root = root.canonicalize()?;
    let mut written = Vec::new();
    let mut steps = Vec::new();
    for hook in Hook::ALL {
        let path = dir.join(hook.file());
        let old = std::fs::read_to_string(&path).ok();
        let new = script(hook, &baton, &root);
        let shown = path.display().to_string();
        let result = match old.as_deref() {
            Some(text) if !text.lines().nth(1).is_some_and(|l| l.starts_with(MARKER)) => {
                steps.push(format!(
                    "{shown} is not Baton's and was kept: add `baton guard {}` to it",
                    hook.file()
                ));
                "kept"
            }
            Some(text) if text == new => "unchanged",
            Some(_) => "updated",
            None => "created",
        };
        if matches!(result, "updated" | "created") {
            crate::files::write_atomically(&path, new.as_bytes())?;
            executable(&path)?;
        }
        written.push(Written {
            path: shown,
            result: result.into(),
        });
    }
    Ok((written, steps))
}

#[cfg(unix)]
fn executable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

#[cfg(not(unix))]
fn executable(_: &Path) -> std::io::Result<()> {
    Ok(())
}

/// The paths (relative to the work tree's top) that `hook` is about, and the commit a
/// post-commit is about.
fn touched(hook: Hook) -> CommandResult<(Vec<String>, Option<String>)> {
    let here = Path::new(".");
    let split = |out: String| -> Vec<String> {
        out.split('\0')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect()
    };
    match hook {
        // Renames as a deletion and an addition: both paths are touched.
        Hook::PreCommit => Ok((
            split(git(
                here,
                &["diff", "--cached", "--name-only", "-z", "--no-renames"],
            )?),
            None,
        )),
        Hook::PostCommit => {
            let commit = git(here, &["rev-parse", "HEAD"])?.trim().to_owned();
            let paths = split(git(
                here,
                &[
                    "diff-tree",
                    "--no-commit-id",
                    "--name-only",
                    "-r",
                    "-z",
                    "--no-renames",
                    "--root",
                    &commit,
                ],
            )?);
            Ok((paths, Some(commit)))
        }
        // `<local ref> <local sha> <remote ref> <remote sha>` a line on stdin: the commits
        // each push would add to its remote.
        Hook::PrePush => {
            let mut lines = String::new();
            std::io::stdin().read_to_string(&mut lines)?;
            let zero = |sha: &str| sha.bytes().all(|b| b == b'0');
            let mut paths = Vec::new();
            for line in lines.lines() {
                let words: Vec<&str> = line.split_whitespace().collect();
                let [_, local, _, remote] = words[..] else {
                    continue;
                };
                if zero(local) {
                    continue;
                }
                let mut args = vec!["log", "--format=", "--name-only", "-z", "--no-renames"];
                let range;
                if zero(remote) {
                    args.extend([local, "--not", "--remotes"]);
                } else {
                    range = format!("{remote}..{local}");
                    args.push(&range);
                }
                paths.extend(split(git(here, &args)?));
            }
            paths.sort();
            paths.dedup();
            Ok((paths, None))
        }
    }
}

/// Whether the guard refuses when it cannot read the reservations: the project's
/// `reservations.guard`, open wherever that cannot be read.
fn fails_closed(g: &GlobalArgs) -> bool {
    Project::locate(g.project.as_deref())
        .map(|p| p.config.reservations.guard_fails_closed)
        .unwrap_or(false)
}

pub async fn run(g: &GlobalArgs, args: GuardArgs) -> CommandResult<Output> {
    let hook = args.hook;
    let checked = async {
        let (paths, commit) = touched(hook)?;
        let ctx = Context::open(g).await?;
        if let Some(commit) = commit {
            let input = baton_app::ops::BypassInput { commit, paths };
            let doc = ctx.call::<baton_app::ops::GuardRecord>(input).await?;
            return Ok::<_, CommandError>(Err(doc));
        }
        let input = baton_app::ops::GuardInput { paths };
        Ok(Ok(ctx.call::<baton_app::ops::GuardCheck>(input).await?))
    }
    .await;
    match checked {
        Ok(Ok(doc)) if doc.held.is_empty() => Ok(Output::of(&doc, String::new())),
        Ok(Ok(doc)) => Err(CommandError::new(ErrorKind::Refused, refusal(hook, &doc))),
        Ok(Err(recorded)) => {
            let human = match recorded.generation {
                Some(_) => format!(
                    "baton guard: commit {} touched paths others hold exclusively, past the \
                     guard; Baton recorded it (`baton reservations` shows who holds them)",
                    &recorded.commit[..recorded.commit.len().min(12)]
                ),
                None => String::new(),
            };
            // After the commit: the record as --json prints it, a word on stderr, never a
            // failure.
            let out = Output::of(&recorded, String::new());
            Ok(if human.is_empty() {
                out
            } else {
                out.with_note(human)
            })
        }
        // After the commit there is nothing to hold back: the pre-commit check said
        // what it could not read (`--no-verify` asked for no check).
        Err(_) if hook == Hook::PostCommit => Ok(Output::nothing()),
        Err(e) if !fails_closed(g) => {
            let first = e.message.lines().next().unwrap_or("").to_owned();
            Ok(Output::nothing().with_note(format!(
                "baton guard: could not read the reservations ({first}); the {} check was \
                 skipped",
                hook.file()
            )))
        }
        Err(e) => Err(CommandError::new(
            ErrorKind::Refused,
            format!(
                "baton guard: could not read the reservations ({}); refused, as \
                 reservations.guard = \"closed\" asks. `git {} --no-verify` goes ahead unchecked",
                e.message.lines().next().unwrap_or(""),
                if hook == Hook::PrePush {
                    "push"
                } else {
                    "commit"
                }
            ),
        )),
    }
}

/// The refusal of a commit or push: each path with who holds it, and the ways out.
fn refusal(hook: Hook, doc: &GuardChecked) -> String {
    let what = if hook == Hook::PrePush {
        "this push"
    } else {
        "this commit"
    };
    let mut out = format!("{what} touches paths another participant holds exclusively:");
    for held in &doc.held {
        let r = &held.reservation;
        let until = match (&r.order, &r.expires_at) {
            (Some(order), _) => format!("until order {order} ends"),
            (None, Some(at)) => format!("until {at}"),
            (None, None) => "with no end".to_owned(),
        };
        out.push_str(&format!(
            "\n  {}: held by {} (reservation {}, {} {until}{})",
            held.path,
            r.holder,
            r.id,
            r.path,
            if r.reason.is_empty() {
                String::new()
            } else {
                format!(", {:?}", r.reason)
            }
        ));
    }
    let first = &doc.held[0].reservation;
    out.push_str(&format!(
        "\nTo resolve: leave those paths out of the commit (git restore --staged PATH), ask {} \
         to release them (`baton release {}`) or wait until they lapse; an owner may \
         force-release a holder gone quiet (`baton release --force {} --reason TEXT`). \
         `git {} --no-verify` skips this check, and Baton records the commit.",
        first.holder,
        first.id,
        first.id,
        if hook == Hook::PrePush {
            "push"
        } else {
            "commit"
        }
    ));
    out
}
