//! The machine Baton runs on, as the use cases see it (`baton_app::host`): git and the
//! work tree for note staleness and the contract rules, the file system for receipts and
//! note subjects, the wall clock, and `/proc` for the reaper. Everything here touches the
//! machine; nothing here decides.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};

use baton_app::{Clock, Files, Hashed, Host, PathClock, PathProblem, Processes};
use baton_core::Millis;
use baton_core::awl::Environment;
use baton_core::run::{ProcessRef, Registration};

use crate::project::Project;

/// The task-local diff `base..head` in the git work tree at `root`, file by file (a file
/// whose path has a `test` component or name counts as a test), or why it could not be
/// read.
pub fn diff(
    root: &Path,
    base: &str,
    head: &str,
) -> Result<Vec<baton_core::gate::FileDiff>, String> {
    if base.starts_with('-') || head.starts_with('-') {
        return Err(format!("{base}..{head} is not a revision range"));
    }
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["diff", "--no-color", "--no-ext-diff"])
        .arg(format!("{base}..{head}"))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("git could not be run: {e}"))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "`git diff {base}..{head}` failed: {}",
            why.lines().next().unwrap_or("no output")
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut files: Vec<baton_core::gate::FileDiff> = Vec::new();
    for line in text.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            let path = rest
                .trim_end()
                .rsplit_once(" b/")
                .map_or(rest.trim_end(), |(_, b)| b)
                .to_owned();
            let test = path
                .split('/')
                .any(|c| c == "tests" || c == "test" || c.contains("_test") || c.contains("test_"));
            files.push(baton_core::gate::FileDiff {
                path,
                test,
                body: String::new(),
            });
        }
        if let Some(f) = files.last_mut() {
            f.body.push_str(line);
        }
    }
    Ok(files)
}

/// The host of the project at `project`: its git work tree, files, clock.
pub fn of(project: &Project) -> Host {
    Host {
        root: project.root.clone(),
        environment: Arc::new(Workspace::discover(Some(project))),
        paths: Arc::new(GitClock {
            root: project.root.clone(),
        }),
        files: Arc::new(LocalFiles {
            root: project.root.clone(),
        }),
        clock: Arc::new(SystemClock),
    }
}

/// The wall clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        jiff::Timestamp::now().as_millisecond()
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
        let committed = Command::new("git")
            .arg("-C")
            .arg(&self.root)
            .args(["log", "-1", "--format=%ct", "--", path])
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse::<i64>().ok())
            .map(|secs| secs * 1000);
        modified.max(committed)
    }
}

/// The project's files on the local file system.
pub struct LocalFiles {
    root: PathBuf,
}

impl LocalFiles {
    fn root(&self) -> PathBuf {
        self.root
            .canonicalize()
            .unwrap_or_else(|_| self.root.clone())
    }
}

impl Files for LocalFiles {
    fn resolve(&self, base: &Path, path: &str) -> Result<String, PathProblem> {
        let absolute = base
            .join(path)
            .canonicalize()
            .map_err(|_| PathProblem::Missing)?;
        absolute
            .strip_prefix(self.root())
            .map(|p| p.display().to_string())
            .map_err(|_| PathProblem::Outside)
    }

    fn hash(&self, base: &Path, path: &str) -> std::io::Result<Hashed> {
        let path = base.join(path);
        // Bounded: a regular file only (never a device or a pipe, which may not end, and
        // whose opening may block), checked before opening and again on what was opened;
        // and no more than the length it had then (a file still growing is cut there).
        let not_regular = || {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a regular file (a device, a pipe or a directory cannot be hashed)",
            )
        };
        if !std::fs::metadata(&path)?.is_file() {
            return Err(not_regular());
        }
        let file = std::fs::File::open(&path)?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(not_regular());
        }
        let mut file = file.take(meta.len());
        let mut hasher = blake3::Hasher::new();
        let mut buf = vec![0u8; 64 * 1024];
        let mut size = 0u64;
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            size += n as u64;
        }
        let absolute = path.canonicalize()?;
        let stored = absolute.strip_prefix(self.root()).map_or_else(
            |_| absolute.display().to_string(),
            |p| p.display().to_string(),
        );
        Ok(Hashed {
            path: stored,
            hash: hasher.finalize().to_hex().to_string(),
            size,
        })
    }
}

/// Answers B2 and B3 from git and the file system, rooted at the repository. The
/// repository is found the first time a rule asks (one `git` process), not when a command
/// starts: most commands never ask.
pub struct Workspace {
    start: PathBuf,
    found: OnceLock<(PathBuf, bool)>,
}

impl Workspace {
    pub fn discover(project: Option<&Project>) -> Self {
        let start = match project {
            Some(p) => p.root.clone(),
            None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
        };
        Self {
            start,
            found: OnceLock::new(),
        }
    }

    /// `git ARGS` in the repository, trimmed, when it succeeds with some output.
    fn git(&self, args: &[&str]) -> Option<String> {
        let (root, git) = self.repository();
        if !git {
            return None;
        }
        Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    }

    /// The commit checked out (`git rev-parse HEAD`).
    pub fn head(&self) -> Option<String> {
        self.git(&["rev-parse", "HEAD"])
    }

    /// Where the repository lives: its `origin` remote, else its top directory.
    pub fn location(&self) -> Option<String> {
        self.git(&["remote", "get-url", "origin"]).or_else(|| {
            let (root, git) = self.repository();
            git.then(|| root.display().to_string())
        })
    }

    /// The test command the repository's own files say it uses: `cargo test`, `npm test`,
    /// `go test ./...`, `pytest` or `make test`, looked for in that order at its top.
    pub fn test_command(&self) -> Option<&'static str> {
        let root = self.repository().0;
        let has = |f: &str| root.join(f).is_file();
        let make_test = || {
            std::fs::read_to_string(root.join("Makefile"))
                .is_ok_and(|m| m.lines().any(|l| l.starts_with("test:")))
        };
        if has("Cargo.toml") {
            Some("cargo test")
        } else if has("package.json") {
            Some("npm test")
        } else if has("go.mod") {
            Some("go test ./...")
        } else if has("pyproject.toml") || has("pytest.ini") || has("setup.cfg") {
            Some("pytest")
        } else if make_test() {
            Some("make test")
        } else {
            None
        }
    }

    /// The repository's top directory, and whether it is a git work tree.
    fn repository(&self) -> (&Path, bool) {
        let (root, git) = self.found.get_or_init(|| {
            let top = Command::new("git")
                .arg("-C")
                .arg(&self.start)
                .args(["rev-parse", "--show-toplevel"])
                .stderr(Stdio::null())
                .output()
                .ok()
                .filter(|o| o.status.success())
                .and_then(|o| String::from_utf8(o.stdout).ok())
                .map(|s| PathBuf::from(s.trim()));
            match top {
                Some(root) => (root, true),
                None => (self.start.clone(), false),
            }
        });
        (root, *git)
    }
}

impl Environment for Workspace {
    fn revision_exists(&self, revision: &str) -> Option<bool> {
        let (root, git) = self.repository();
        if !git || revision.starts_with('-') {
            return if git { Some(false) } else { None };
        }
        let status = Command::new("git")
            .arg("-C")
            .arg(root)
            .args(["rev-parse", "--verify", "--quiet"])
            .arg(format!("{revision}^{{commit}}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        Some(status.success())
    }

    fn program_exists(&self, program: &str) -> Option<bool> {
        if program.contains('/') {
            let path = Path::new(program);
            let path = if path.is_absolute() {
                path.to_owned()
            } else {
                self.repository().0.join(path)
            };
            return Some(path.is_file());
        }
        let path = std::env::var_os("PATH")?;
        Some(std::env::split_paths(&path).any(|dir| is_executable(&dir.join(program))))
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Program names taken for coding agents when looking for untracked ones.
const AGENTS: [&str; 7] = [
    "claude",
    "codex",
    "gemini",
    "aider",
    "opencode",
    "cursor-agent",
    "amp",
];
/// Interpreters an agent may run under (`node …/codex.js`).
const INTERPRETERS: [&str; 5] = ["node", "bun", "deno", "python3", "python"];

/// This machine's name, as recorded on runs.
pub fn host() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .filter(|h| !h.is_empty())
}

/// One line of `/proc/PID/stat`, the parts the reaper needs.
#[derive(Debug, Clone)]
struct Stat {
    pid: u32,
    comm: String,
    state: char,
    ppid: u32,
    start: u64,
}

fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may itself hold spaces or parentheses.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_owned();
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // Fields counted from 1 in proc(5): 3 state, 4 ppid, 22 starttime.
    Some(Stat {
        pid,
        comm,
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

/// When the kernel started process `pid` (clock ticks since boot), if it exists.
pub fn start_time(pid: u32) -> Option<u64> {
    stat(pid).map(|s| s.start)
}

/// Whether the process is still the one recorded. `None` when this machine cannot say
/// (no `/proc`).
pub fn alive(p: &ProcessRef) -> Option<bool> {
    if !Path::new("/proc/self/stat").exists() {
        return None;
    }
    Some(match stat(p.pid) {
        None => false,
        // A zombie has exited; only its parent has not collected it yet.
        Some(s) if s.state == 'Z' => false,
        Some(s) => p.start.is_none_or(|start| start == s.start),
    })
}

fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|bytes| {
            bytes
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn base_name(arg: &str) -> &str {
    let name = arg.rsplit('/').next().unwrap_or(arg);
    name.strip_suffix(".js")
        .or_else(|| name.strip_suffix(".mjs"))
        .or_else(|| name.strip_suffix(".cjs"))
        .or_else(|| name.strip_suffix(".py"))
        .unwrap_or(name)
}

/// Whether a process is a coding agent: by its name, its program, or the script an
/// interpreter runs.
fn is_agent(s: &Stat, argv: &[String]) -> bool {
    let named = |n: &str| AGENTS.contains(&n);
    if named(&s.comm) {
        return true;
    }
    let program = argv.first().map(|a| base_name(a)).unwrap_or("");
    if named(program) {
        return true;
    }
    (INTERPRETERS.contains(&s.comm.as_str()) || INTERPRETERS.contains(&program))
        && argv.get(1).is_some_and(|a| named(base_name(a)))
}

fn all_processes() -> HashMap<u32, Stat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(stat)
        .map(|s| (s.pid, s))
        .collect()
}

/// The processes of this machine, read from `/proc`, for the project whose checkout is at
/// `root`: an agent working elsewhere is another project's.
pub struct ProcTable {
    pub root: PathBuf,
}

impl ProcTable {
    /// Whether process `pid` works inside the project: its working directory is the root
    /// or under it (a process whose directory cannot be read is not counted).
    fn works_here(&self, pid: u32) -> bool {
        let root = std::fs::canonicalize(&self.root).unwrap_or_else(|_| self.root.clone());
        std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(&root))
    }
}

/// How many parents are walked to find that an agent process is already counted.
const PARENTS_WALKED: usize = 3;

impl Processes for ProcTable {
    fn host(&self) -> Option<String> {
        host()
    }

    fn alive(&self, process: &ProcessRef) -> Option<bool> {
        alive(process)
    }

    fn me(&self) -> u32 {
        std::process::id()
    }

    fn untracked_agents(&self, tracked: &HashSet<u32>) -> Vec<Registration> {
        let here = host();
        let processes = all_processes();
        let mut argv_of: HashMap<u32, Vec<String>> = HashMap::new();
        let agent = |pid: u32, argv_of: &mut HashMap<u32, Vec<String>>| -> bool {
            let Some(s) = processes.get(&pid) else {
                return false;
            };
            let argv = argv_of.entry(pid).or_insert_with(|| cmdline(pid));
            is_agent(s, argv)
        };
        let mut found = Vec::new();
        let mut pids: Vec<u32> = processes.keys().copied().collect();
        pids.sort_unstable();
        for pid in pids {
            let s = &processes[&pid];
            if s.state == 'Z' || !agent(pid, &mut argv_of) || !self.works_here(pid) {
                continue;
            }
            // Counted already when it, or one of its first parents, is a tracked run or
            // another agent (a wrapper's child is part of the wrapper).
            let mut covered = tracked.contains(&pid);
            let mut parent = s.ppid;
            for _ in 0..PARENTS_WALKED {
                if covered || parent <= 1 {
                    break;
                }
                covered = tracked.contains(&parent) || agent(parent, &mut argv_of);
                parent = processes.get(&parent).map_or(0, |p| p.ppid);
            }
            if covered {
                continue;
            }
            let argv = argv_of.get(&pid).cloned().unwrap_or_default();
            let command = if argv.is_empty() {
                vec![s.comm.clone()]
            } else {
                argv.iter()
                    .take(64)
                    .map(|a| baton_core::packet::clip(a, 1000))
                    .collect()
            };
            found.push(Registration {
                run: format!("pid-{pid}-{}", s.start),
                agent: Some(s.comm.clone()),
                command,
                host: here.clone(),
                process: Some(ProcessRef {
                    pid,
                    start: Some(s.start),
                }),
                ..Registration::default()
            });
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(comm: &str) -> Stat {
        Stat {
            pid: 10,
            comm: comm.into(),
            state: 'S',
            ppid: 1,
            start: 5,
        }
    }

    fn argv(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn agents_are_known_by_name_program_or_script() {
        assert!(is_agent(&s("claude"), &argv(&["claude", "-p"])));
        assert!(is_agent(
            &s("MainThread"),
            &argv(&["/usr/bin/codex", "exec"])
        ));
        assert!(is_agent(
            &s("node"),
            &argv(&["node", "/usr/lib/node_modules/@openai/codex/bin/codex.js"])
        ));
        assert!(!is_agent(&s("node"), &argv(&["node", "server.js"])));
        assert!(!is_agent(&s("bash"), &argv(&["bash", "-c", "claude"])));
        assert!(!is_agent(
            &s("baton"),
            &argv(&["baton", "run", "--", "claude"])
        ));
    }

    #[test]
    fn this_process_reads_as_alive_and_a_wrong_start_time_as_gone() {
        let me = std::process::id();
        let start = start_time(me).expect("a start time for this process");
        assert_eq!(
            alive(&ProcessRef {
                pid: me,
                start: Some(start)
            }),
            Some(true)
        );
        assert_eq!(
            alive(&ProcessRef {
                pid: me,
                start: Some(start + 1)
            }),
            Some(false),
            "a reused pid must not pass for the recorded process"
        );
    }
}
