//! `baton`: the handoff layer for AI agents. One file per subcommand under `commands/`;
//! this file parses arguments, runs the command and turns its error into an exit code.

mod cases;
mod child;
mod cli;
mod commands;
mod error;
mod files;
mod host;
mod output;
mod project;
mod remote;

use std::io::Write;
use std::process::ExitCode;

use baton_app::doc::{self, ErrorBody};

use crate::cli::Cli;
use crate::error::CommandError;

fn main() -> ExitCode {
    let cli = match Cli::parse_lazily() {
        Ok(cli) => cli,
        Err(e) => return usage(e),
    };
    let as_json = cli.global.json;
    if !as_json {
        output::text_only();
    }
    // A command does one thing at a time, on one thread. A server answers many clients at
    // once, and its store runs SQLite in the calling thread: it gets a thread a core.
    let mut builder = if matches!(cli.command, cli::Command::Serve(_)) {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return report(&CommandError::failed(e.to_string()), as_json),
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(out) => {
            if let Some(note) = &out.note {
                let _ = writeln!(std::io::stderr(), "{}", output::visible(note));
            }
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(out.render(as_json).as_bytes())
                .and_then(|()| stdout.flush())
            {
                // A closed pipe (`baton inbox | head`) is not an error worth a message.
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    report(&CommandError::from(e), as_json)
                }
                _ => out
                    .exit
                    .map_or(ExitCode::SUCCESS, |kind| ExitCode::from(kind.exit_code())),
            }
        }
        Err(e) => report(&e, as_json),
    }
}

/// A command line clap refused: its own text, or with `--json` (anywhere before `--`) a
/// `baton/error@1` document like every other error. Help and version print as usual.
fn usage(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind as Clap;
    let as_json = std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json");
    if !as_json || matches!(e.kind(), Clap::DisplayHelp | Clap::DisplayVersion) {
        e.exit();
    }
    let text = e.render().to_string();
    let message = text
        .trim()
        .strip_prefix("error: ")
        .unwrap_or(text.trim())
        .to_owned();
    report(&CommandError::usage(message), true)
}

/// Writes the error to stderr (as a `baton/error@1` document with `--json`) and returns
/// its exit code.
fn report(e: &CommandError, as_json: bool) -> ExitCode {
    let text = if as_json {
        let body = ErrorBody {
            kind: e.kind.as_str().to_owned(),
            message: e.message.clone(),
            retryable: e.retryable,
            exit_code: e.kind.exit_code(),
            run: e.run.as_ref().map(|r| r.run.clone()),
            status: e.run.as_ref().map(|r| r.status),
        };
        doc::to_json(&doc::Error { error: body }).to_string()
    } else {
        match &e.run {
            Some(end) => format!("baton: run {} {}: {}", end.run, end.status, e.message),
            None => format!("baton: {}", e.message),
        }
    };
    let text = if as_json {
        text
    } else {
        output::visible(&text)
    };
    let _ = writeln!(std::io::stderr(), "{text}");
    ExitCode::from(e.kind.exit_code())
}
