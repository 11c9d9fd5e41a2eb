//! `baton board`: the board of this project's embedded store, served on loopback by the
//! HTTP server's own router (the same page and status document as `baton serve`).

use std::net::SocketAddr;

use baton_core::ProjectName;
use clap::Args;

use crate::cli::GlobalArgs;
use crate::error::{CommandError, CommandResult};
use crate::output::Output;
use crate::project::Project;

/// Serve this project's board: a read-only page that follows the log live (runs, loads,
/// orders and held effects, the human queue, alerts, metrics), at http://HOST:PORT/.
///
/// It needs no key, so it listens on a loopback address only. The page renders the same
/// `baton/status@1` document `baton status --json` prints, from
/// /v1/projects/NAME/status. On SIGINT or SIGTERM it stops.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  baton board\n  baton board --bind 127.0.0.1:0")]
pub struct BoardArgs {
    /// The loopback address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:7879", value_name = "HOST:PORT")]
    pub bind: SocketAddr,
}

/// The project's name on the board: its directory's, or `local` when that is no name.
fn name_of(project: &Project) -> ProjectName {
    project
        .root
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_lowercase)
        .and_then(|n| ProjectName::new(&n).ok())
        .unwrap_or_else(|| ProjectName::new("local").expect("a valid project name"))
}

pub async fn run(g: &GlobalArgs, args: BoardArgs) -> CommandResult<Output> {
    if g.db.is_some() {
        return Err(CommandError::usage(
            "`baton board` shows this project's embedded store; a shared store's board is at / on `baton serve`",
        ));
    }
    if !args.bind.ip().is_loopback() {
        return Err(CommandError::usage(format!(
            "--bind {}: the board needs no key, so it listens on loopback only (127.0.0.1 or ::1); \
             to share it, use `baton serve` with read keys",
            args.bind
        )));
    }
    let project = Project::locate(g.project.as_deref())?;
    let store = project.open_store(project.config.busy_timeout).await?;
    let name = name_of(&project);
    let (listener, bound, shutdown) = crate::commands::serve::listen(args.bind).await?;
    let server = baton_server::Server::keyless(store, name, project.config.clone());
    // The address goes to stderr, like `baton serve`'s.
    eprintln!("baton board: http://{bound}/");
    baton_server::serve(listener, server, shutdown).await?;
    Ok(Output::nothing())
}
