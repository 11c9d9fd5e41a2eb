//! `baton agent add|list`: the project's participants.

use baton_app::doc::{AgentAdded, Agents};
use clap::{Args, Subcommand};

use crate::commands::Context;
use crate::error::CommandResult;
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
            let actor = ctx.actor().await?;
            let added = ctx
                .app
                .add_participant(&actor, &args.name, &args.role)
                .await?;
            let p = &added.participant;
            let human = if added.created {
                format!("Added {} ({})", p.name, p.role)
            } else {
                format!(
                    "{} is already registered ({}); nothing changed",
                    p.name, p.role
                )
            };
            let doc = AgentAdded {
                name: p.name.clone(),
                role: p.role.clone(),
                created: added.created,
            };
            Ok(Output::of(&doc, human))
        }
        AgentCommand::List(_) => {
            let all = ctx.app.participants().await?;
            let rows: Vec<Vec<String>> = all
                .iter()
                .map(|p| vec![p.name.to_string(), p.role.clone(), timestamp(p.added_at)])
                .collect();
            let human = if all.is_empty() {
                "No participants yet: baton agent add NAME --role ROLE".to_owned()
            } else {
                table(&["NAME", "ROLE", "ADDED"], &rows)
            };
            Ok(Output::of(&Agents::new(&all), human))
        }
    }
}
