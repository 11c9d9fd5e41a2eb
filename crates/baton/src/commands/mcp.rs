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
#[derive(Args, Debug)]
#[command(after_help = "Example (an MCP client's server entry):\n  \
                        {\"command\": \"baton\", \"args\": [\"--as\", \"impl-1\", \"mcp\"]}")]
pub struct McpArgs {
    /// The tools offered: executor, planner, reviewer, owner (each under 8 KB of
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
    let me = ctx.me().await?;
    let profile = match &args.profile {
        Some(p) => Profile::parse(p).ok_or_else(|| {
            CommandError::usage(format!(
                "--profile {p:?}: use executor, planner, reviewer, owner or all"
            ))
        })?,
        None => {
            let participants = ctx.app.participants().await?;
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
    baton_mcp::serve_stdio(ctx.app, me, profile)
        .await
        .map_err(|e| CommandError::failed(e.to_string()))?;
    // Nothing more goes to stdout: the session is over and the client may still read it.
    Ok(Output::nothing())
}
