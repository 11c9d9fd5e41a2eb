//! `baton agent add|list`: the project's participants.

use baton_core::Passname;
use baton_core::event::LOCAL_OPERATOR;
use baton_store::Store;
use clap::{Args, Subcommand};
use serde_json::json;

use crate::commands::Context;
use crate::error::{CommandError, CommandResult};
use crate::output::{Output, table, timestamp};

/// Register and list participants.
#[derive(Subcommand, Debug)]
pub enum AgentCommand {
    Add(AddArgs),
    List(ListArgs),
}

/// Register a participant under a passname.
///
/// A passname is a lowercase slug ([a-z0-9][a-z0-9-]{0,63}). Roles: planner, executor,
/// reviewer, owner, observer, or another word. Adding the same name and role again is
/// harmless; the same name with another role is refused (exit 6).
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  baton agent add impl-1 --role executor")]
pub struct AddArgs {
    pub name: String,
    #[arg(long)]
    pub role: String,
}

/// List the registered participants.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  baton agent list --json")]
pub struct ListArgs {}

pub async fn run(ctx: &Context, cmd: AgentCommand) -> CommandResult<Output> {
    match cmd {
        AgentCommand::Add(args) => {
            let name =
                Passname::new(&args.name).map_err(|e| CommandError::refused(e.to_string()))?;
            let actor = ctx.maybe_me().await?;
            let actor = actor.as_ref().map_or(LOCAL_OPERATOR, Passname::as_str);
            let added = ctx.store.add_participant(actor, &name, &args.role).await?;
            let p = &added.participant;
            let human = if added.created {
                format!("Added {} ({})", p.name, p.role)
            } else {
                format!(
                    "{} is already registered ({}); nothing changed",
                    p.name, p.role
                )
            };
            Ok(Output::new(
                "baton/agent-add@1",
                json!({ "name": p.name, "role": p.role, "created": added.created }),
                human,
            ))
        }
        AgentCommand::List(_) => {
            let all = ctx.store.participants().await?;
            let rows: Vec<Vec<String>> = all
                .iter()
                .map(|p| vec![p.name.to_string(), p.role.clone(), timestamp(p.added_at)])
                .collect();
            let human = if all.is_empty() {
                "No participants yet: baton agent add NAME --role ROLE".to_owned()
            } else {
                table(&["NAME", "ROLE", "ADDED"], &rows)
            };
            let items: Vec<_> = all
                .iter()
                .map(|p| json!({"name": p.name, "role": p.role, "added_at": timestamp(p.added_at)}))
                .collect();
            Ok(Output::new(
                "baton/agent-list@1",
                json!({ "items": items }),
                human,
            ))
        }
    }
}
