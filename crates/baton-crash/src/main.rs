//! `baton-crash`: the crash harness's command line. Prints the seed first, then a table
//! per command, and exits 1 on any loss, duplicate, torn file, integrity failure or
//! effect run twice (2 when the harness itself cannot run).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Parser;

/// Kill `baton` with SIGKILL at random instants, restart it, and check that every
/// acknowledged write survived exactly once.
#[derive(Parser, Debug)]
#[command(name = "baton-crash")]
struct Args {
    /// Kills per command.
    #[arg(long, default_value_t = 20)]
    trials: u32,
    /// Kills of `baton serve` per backend (SQLite, and PostgreSQL with --postgres).
    #[arg(long, default_value_t = 10)]
    server_kills: u32,
    /// The seed of every kill instant (default: the clock); printed, so a run replays.
    #[arg(long)]
    seed: Option<u64>,
    /// Only this command: send, complete, order-steps, approve, state-render,
    /// receipt-write, run-exit, import, reserve-release, claim-next, guard-record, order-after,
    /// serve-sqlite, serve-postgres.
    #[arg(long, value_name = "CMD")]
    only: Option<String>,
    /// The `baton` executable (default: the one beside this program).
    #[arg(long, value_name = "PATH")]
    baton: Option<PathBuf>,
    /// The PostgreSQL database to kill `baton serve` on, in a schema of its own.
    #[arg(
        long,
        value_name = "URL",
        default_value = "postgres://postgres@127.0.0.1:5432/test"
    )]
    postgres: String,
    /// Leave PostgreSQL out.
    #[arg(long)]
    no_postgres: bool,
    /// A line per trial on stderr.
    #[arg(long, short)]
    verbose: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let baton = match args.baton {
        Some(path) => path,
        None => match std::env::current_exe() {
            Ok(me) => me.with_file_name("baton"),
            Err(e) => {
                eprintln!("baton-crash: cannot find my own executable ({e}); give --baton PATH");
                return ExitCode::from(2);
            }
        },
    };
    if !baton.is_file() {
        eprintln!(
            "baton-crash: no baton at {}: build it first (`cargo build --release -p baton`) \
             or give --baton PATH",
            baton.display()
        );
        return ExitCode::from(2);
    }
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    println!(
        "baton-crash: seed {seed}, {} trials per command, {} server kills per backend, baton {}",
        args.trials,
        args.server_kills,
        baton.display()
    );
    let options = baton_crash::Options {
        trials: args.trials,
        server_kills: args.server_kills,
        seed,
        only: args.only,
        baton,
        postgres: (!args.no_postgres).then_some(args.postgres),
        verbose: args.verbose,
    };
    match baton_crash::run(&options) {
        Ok(tallies) => {
            print!("{}", baton_crash::table(&tallies));
            if tallies.iter().all(baton_crash::Tally::clean) {
                println!("baton-crash: nothing acknowledged was lost, doubled or torn");
                ExitCode::SUCCESS
            } else {
                println!("baton-crash: FAILED (replay with --seed {seed})");
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("baton-crash: {e}");
            ExitCode::from(2)
        }
    }
}
