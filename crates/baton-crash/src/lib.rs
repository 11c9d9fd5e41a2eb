//! The crash harness: every command that writes is run as a real `baton` process (a loop
//! of them, in a process group of its own) and killed with SIGKILL at a random instant;
//! the store is then reopened by a fresh `baton` and checked. Every write the killed
//! processes acknowledged must be there exactly once, nothing may be stored twice, a file
//! Baton renders must be whole (the old one or the new one), `PRAGMA integrity_check` must
//! be `ok`, the projections must equal a replay of the log, and an approved effect must
//! have run at most once. `baton serve` is killed the same way under concurrent HTTP
//! senders, on SQLite and on PostgreSQL.
//!
//! It builds nothing and links no part of the binary: it drives the `baton` it is given,
//! as a user would, and reads the store only to check it. The kill instants come from one
//! seed, printed first, so a failing trial can be replayed (`--seed S --only CMD`).

mod check;
mod commands;
mod process;
mod serve;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

pub use process::XorShift;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Kills per command.
    pub trials: u32,
    /// Server kills per backend.
    pub server_kills: u32,
    /// Seeds every kill instant.
    pub seed: u64,
    /// Run only the command (or server backend) of this name.
    pub only: Option<String>,
    /// The `baton` executable under test.
    pub baton: PathBuf,
    /// The PostgreSQL database `baton serve` is killed on (a schema of its own is made
    /// and dropped); `None` leaves PostgreSQL out.
    pub postgres: Option<String>,
    /// Print a line per trial on stderr.
    pub verbose: bool,
}

/// What the trials of one command found.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub command: String,
    pub trials: u64,
    /// Kills that landed while the command (or the server) was still at work.
    pub killed_mid_run: u64,
    /// Writes the killed processes acknowledged (an id, a step, an HTTP 2xx…).
    pub acknowledged: u64,
    pub lost: u64,
    pub duplicated: u64,
    /// Rendered files found neither whole old nor whole new.
    pub torn: u64,
    /// `PRAGMA integrity_check` not `ok`, or projections unlike a replay of the log.
    pub integrity: u64,
    pub effects_twice: u64,
    /// What went wrong, one line each, with the trial and its kill instant.
    pub problems: Vec<String>,
}

impl Tally {
    fn new(command: &str) -> Self {
        Self {
            command: command.to_owned(),
            ..Self::default()
        }
    }

    /// No loss, duplicate, torn file, integrity failure, doubled effect or other problem.
    pub fn clean(&self) -> bool {
        self.lost == 0
            && self.duplicated == 0
            && self.torn == 0
            && self.integrity == 0
            && self.effects_twice == 0
            && self.problems.is_empty()
    }

    /// Records a problem of trial `trial` under one of the counters.
    fn problem(&mut self, trial: &str, counter: Counter, what: impl std::fmt::Display) {
        match counter {
            Counter::Lost => self.lost += 1,
            Counter::Duplicated => self.duplicated += 1,
            Counter::Torn => self.torn += 1,
            Counter::Integrity => self.integrity += 1,
            Counter::EffectsTwice => self.effects_twice += 1,
            Counter::Other => {}
        }
        self.problems
            .push(format!("{}: {trial}: {what}", self.command));
    }
}

/// Which column a problem counts in; `Other` is a command that failed on its own.
#[derive(Debug, Clone, Copy)]
enum Counter {
    Lost,
    Duplicated,
    Torn,
    Integrity,
    EffectsTwice,
    Other,
}

/// The names `--only` takes: each command, then each server backend.
pub fn names() -> Vec<&'static str> {
    let mut all: Vec<&str> = commands::SCENARIOS.iter().map(|s| s.name).collect();
    all.extend(["serve-sqlite", "serve-postgres"]);
    all
}

/// Runs every trial `options` asks for; a tally per command, in order.
///
/// # Errors
///
/// When `--only` names nothing, or a command's starting point could not be made (the
/// harness cannot run, which is not a finding about the store).
pub fn run(options: &Options) -> Result<Vec<Tally>, String> {
    if let Some(only) = &options.only
        && !names().contains(&only.as_str())
    {
        return Err(format!(
            "--only {only}: no such command; one of {}",
            names().join(", ")
        ));
    }
    let wanted = |name: &str| options.only.as_deref().is_none_or(|only| only == name);
    let mut tallies = Vec::new();
    for scenario in commands::SCENARIOS {
        if wanted(scenario.name) {
            let started = Instant::now();
            let tally = commands::run(scenario, options)?;
            if options.verbose {
                eprintln!(
                    "crash: {}: {} trials in {:.1} s",
                    scenario.name,
                    tally.trials,
                    started.elapsed().as_secs_f64()
                );
            }
            tallies.push(tally);
        }
    }
    if options.server_kills > 0 {
        if wanted("serve-sqlite") {
            tallies.push(serve::run(serve::Backend::Sqlite, options)?);
        }
        if wanted("serve-postgres")
            && let Some(url) = &options.postgres
        {
            tallies.push(serve::run(serve::Backend::Postgres(url.clone()), options)?);
        }
    }
    Ok(tallies)
}

/// The per-command table, then every problem on a line of its own.
pub fn table(tallies: &[Tally]) -> String {
    let header = [
        "command",
        "trials",
        "killed mid-run",
        "acknowledged",
        "lost",
        "duplicated",
        "torn files",
        "integrity failures",
        "effects run twice",
    ];
    let rows: Vec<[String; 9]> = tallies
        .iter()
        .map(|t| {
            [
                t.command.clone(),
                t.trials.to_string(),
                t.killed_mid_run.to_string(),
                t.acknowledged.to_string(),
                t.lost.to_string(),
                t.duplicated.to_string(),
                t.torn.to_string(),
                t.integrity.to_string(),
                t.effects_twice.to_string(),
            ]
        })
        .collect();
    let mut out = String::new();
    let line = |cells: &[&str]| format!("| {} |\n", cells.join(" | "));
    out.push_str(&line(&header));
    out.push_str(&line(
        &header.map(|h| if h == "command" { "---" } else { "---:" }),
    ));
    for row in &rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        out.push_str(&line(&cells));
    }
    for t in tallies {
        for p in &t.problems {
            let _ = writeln!(out, "problem: {p}");
        }
    }
    out
}
