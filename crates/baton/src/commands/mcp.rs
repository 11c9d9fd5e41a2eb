//! `baton mcp`: serve the project's inbox and memory to an agent as an MCP server on stdio.

use baton_mcp::Profile;
use clap::Args;

use crate::cli::GlobalArgs;
use crate::commands::Context;
use crate::error::{CommandError, CommandResult};
use crate::output::Output;

/// Serve this project to an MCP client on stdin/stdout, acting as one participant.
///
/// The identity (--as NAME or BATON_AS) is fixed when the server starts and must be a
/// registered participant; no tool takes the actor as an argument. Stdout carries the
/// protocol only; messages about the server go to stderr. The payload cap and duplicate
/// window come from .baton/config.toml, as for `baton send`. Note subjects and receipt
/// artifacts are paths from the project root. The resume packet is a tool, a prompt and
/// the resource baton://resume. It serves until the client closes stdin.
///
/// Codex starts stdio servers with only a whitelist of the environment (HOME, PATH, USER,
/// LANG, TERM, TMPDIR, …) plus the names the entry lists in `env_vars`; the entry
/// `baton init --codex` writes forwards BATON_AS, BATON_PROJECT and BATON_RUN.
#[derive(Args, Debug)]
#[command(after_help = "Example (an MCP client's server entry):\n  \
                        {\"command\": \"baton\", \"args\": [\"--as\", \"impl-1\", \"mcp\"]}")]
pub struct McpArgs {
    /// The tools offered: executor, planner, reviewer, owner (each under 7.5 KB of
    /// `tools/list`), or all. Default: the participant's role's profile (all for a role
    /// without one). A tool outside the profile is refused naming a profile that has it.
    #[arg(long, value_name = "PROFILE")]
    pub profile: Option<String>,
}

pub async fn run(g: &GlobalArgs, args: McpArgs) -> CommandResult<Output> {
    if g.json {
        return Err(CommandError::usage(
            "--json does not apply to `baton mcp`: its stdout carries the MCP protocol only",
        ));
    }
    let ctx = Context::open(g).await?;
    // An MCP client starts the server with the environment it chooses: Codex passes only
    // a whitelist plus the names its entry forwards, so say where the identity comes from.
    let Some(me) = ctx.maybe_me().await? else {
        return Err(CommandError::usage(
            "who is acting? `baton mcp` needs --as NAME in the server's args or BATON_AS in \
             its environment; Codex passes BATON_AS only when the server entry forwards it \
             (`env_vars`, written by `baton init --codex`), Claude Code passes the environment \
             `claude` was started with",
        ));
    };
    let profile = match &args.profile {
        Some(p) => Profile::parse(p).ok_or_else(|| {
            CommandError::usage(format!(
                "--profile {p:?}: use executor, planner, reviewer, owner or all"
            ))
        })?,
        None => {
            let participants = ctx.app()?.participants().await?;
            let role = participants
                .iter()
                .find(|p| p.name == me)
                .map_or("", |p| p.role.as_str());
            Profile::for_role(role)
        }
    };
    eprintln!(
        "baton mcp: serving {} as {me} on stdio (profile {})",
        ctx.project.root.display(),
        profile.as_str()
    );
    baton_mcp::serve_stdio(ctx.app()?.clone(), me, profile)
        .await
        .map_err(|e| CommandError::failed(e.to_string()))?;
    // Nothing more goes to stdout: the session is over and the client may still read it.
    Ok(Output::nothing())
}
