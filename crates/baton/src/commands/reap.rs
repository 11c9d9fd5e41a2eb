//! `baton reap`: reconciles the ledger with the processes on this machine (SPEC §6).
//!
//! A registered or running run whose `baton run` process is gone (checked by pid *and*
//! start time, so a reused pid is not mistaken for it) is lost; what its participant had
//! fetched during the run resurfaces as pending; agent processes not started through
//! `baton run` are recorded as untracked, keyed by pid. Each condition alerts once (the
//! store raises each alert in the same transaction as the fact). Processes are read from
//! `/proc`; runs recorded on another host are left alone.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use baton_core::run::{ProcessRef, Registration, Run, RunChange, RunStatus};
use baton_core::state::{RECEIPT_MISSING, StateOp};
use baton_store::{Reaped, RunQuery, Store};
use clap::Args;
use serde_json::{Value, json};

use crate::commands::Context;
use crate::error::{CommandError, CommandResult};
use crate::output::Output;
use crate::project::parse_duration;

/// Reconcile runs with the processes on this machine: lost runs, orphaned deliveries,
/// untracked agents.
///
/// A registered or running run whose `baton run` process is gone without a recorded exit
/// becomes lost (with an alert), and the messages its participant fetched during the run
/// are pending again (with an alert). Agent processes (claude, codex, …) not started
/// through `baton run` are recorded as untracked. Each condition alerts once; see
/// `baton alerts`.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  baton reap\n  baton reap --watch --interval 10s")]
pub struct ReapArgs {
    /// Keep reaping, once per --interval, until interrupted.
    #[arg(long)]
    pub watch: bool,
    /// Time between passes with --watch.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "5s",
        requires = "watch"
    )]
    pub interval: String,
}

/// The actor recorded for the reaper's facts.
pub const REAPER: &str = "@reaper";

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
/// How many parents are walked to find that an agent process is already counted.
const PARENTS_WALKED: usize = 3;

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
fn alive(p: &ProcessRef) -> Option<bool> {
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

/// What one pass did.
#[derive(Debug, Default)]
struct Pass {
    lost: Vec<Reaped>,
    untracked: Vec<String>,
    gone: Vec<String>,
    /// Alerts raised for waits whose deadline passed with no receipt.
    overdue: Vec<String>,
}

impl Pass {
    fn is_empty(&self) -> bool {
        self.lost.is_empty()
            && self.untracked.is_empty()
            && self.gone.is_empty()
            && self.overdue.is_empty()
    }

    fn json(&self) -> Value {
        json!({
            "lost": self.lost,
            "untracked": self.untracked,
            "gone": self.gone,
            "overdue": self.overdue,
        })
    }

    fn human(&self) -> String {
        if self.is_empty() {
            return "Nothing to reap.".to_owned();
        }
        let mut lines = Vec::new();
        for r in &self.lost {
            let mut line = format!("lost: run {}", r.run);
            if !r.resurfaced.is_empty() {
                line.push_str(&format!(
                    "; {} message(s) pending again: {}",
                    r.resurfaced.len(),
                    r.resurfaced.join(", ")
                ));
            }
            if !r.alerts.is_empty() {
                line.push_str(&format!(" (alerts {})", r.alerts.join(", ")));
            }
            lines.push(line);
        }
        for id in &self.untracked {
            lines.push(format!("untracked: {id}"));
        }
        for id in &self.gone {
            lines.push(format!("gone: untracked {id} has exited"));
        }
        for alert in &self.overdue {
            lines.push(format!("overdue: {alert}"));
        }
        lines.join("\n")
    }
}

fn describe(run: &Run) -> String {
    let monitor = run.monitor.map_or(0, |m| m.pid);
    let agent = match run.process {
        Some(p) => match alive(&p) {
            Some(true) => format!("; its command (pid {}) is still running", p.pid),
            _ => format!("; its command (pid {}) is gone too", p.pid),
        },
        None => "; its command never started".to_owned(),
    };
    format!("its `baton run` (pid {monitor}) is gone without recording an exit{agent}")
}

async fn pass(ctx: &Context) -> CommandResult<Pass> {
    let store = &ctx.store;
    let here = host();
    let live = store
        .runs(&RunQuery {
            live: true,
            ..RunQuery::default()
        })
        .await?;
    let mut done = Pass::default();
    let mut tracked: HashSet<u32> = HashSet::from([std::process::id()]);
    let mut known_untracked: HashSet<String> = HashSet::new();
    for run in live.iter().filter(|r| r.host == here) {
        match run.status {
            RunStatus::Registered | RunStatus::Running => {
                let Some(monitor) = run.monitor else { continue };
                if alive(&monitor) != Some(false) {
                    tracked.insert(monitor.pid);
                    tracked.extend(run.process.map(|p| p.pid));
                    continue;
                }
                if let Some(reaped) = store.reap_lost(REAPER, &run.id, &describe(run)).await? {
                    done.lost.push(reaped);
                }
            }
            RunStatus::Untracked => {
                let Some(process) = run.process else { continue };
                if alive(&process) == Some(false) {
                    let gone = RunChange::Lost {
                        run: run.id.clone(),
                        reason: format!("untracked process {} has exited", process.pid),
                    };
                    match store.record_run(REAPER, &[gone]).await {
                        Ok(_) => done.gone.push(run.id.clone()),
                        // Another reaper recorded it first.
                        Err(baton_store::StoreError::Conflict(_)) => {}
                        Err(e) => return Err(e.into()),
                    }
                } else {
                    known_untracked.insert(run.id.clone());
                }
            }
            _ => {}
        }
    }

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
        if s.state == 'Z' || !agent(pid, &mut argv_of) {
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
        let id = format!("pid-{pid}-{}", s.start);
        if known_untracked.contains(&id) {
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
        found.push(RunChange::Untracked(Box::new(Registration {
            run: id,
            agent: Some(s.comm.clone()),
            command,
            host: here.clone(),
            process: Some(ProcessRef {
                pid,
                start: Some(s.start),
            }),
            ..Registration::default()
        })));
    }
    if !found.is_empty() {
        for event in store.record_run(REAPER, &found).await? {
            if let baton_core::Change::Run(change) = &event.change {
                done.untracked.extend(change.run().map(str::to_owned));
            }
        }
    }

    // Waits past their deadline: the waiter may be gone, the condition is not.
    let now = crate::output::now();
    let alerts: Vec<StateOp> = store
        .state()
        .await?
        .overdue(now)
        .into_iter()
        .map(|(step, deadline)| StateOp::Alert {
            key: format!("{RECEIPT_MISSING}{step}"),
            message: format!(
                "no receipt for step {step:?} by its deadline {}",
                crate::output::timestamp(deadline)
            ),
        })
        .collect();
    if !alerts.is_empty() {
        for event in store.change_state(REAPER, &alerts).await? {
            done.overdue.push(event.change.subject().to_owned());
        }
    }
    Ok(done)
}

pub async fn run(ctx: &Context, args: ReapArgs, as_json: bool) -> CommandResult<Output> {
    if !args.watch {
        let done = pass(ctx).await?;
        return Ok(Output::new("baton/reap@1", done.json(), done.human()));
    }
    let interval = parse_duration("--interval", &args.interval).map_err(CommandError::usage)?;
    if interval.is_zero() {
        return Err(CommandError::usage("--interval must be longer than 0s"));
    }
    let mut ticks = tokio::time::interval(interval.max(Duration::from_millis(100)));
    loop {
        ticks.tick().await;
        let done = pass(ctx).await?;
        if !done.is_empty() {
            let out = Output::new("baton/reap@1", done.json(), done.human());
            print!("{}", out.render(as_json));
            use std::io::Write;
            let _ = std::io::stdout().flush();
        }
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
