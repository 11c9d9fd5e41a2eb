//! `baton --db URL project add|list`: the projects of a shared store, administered where
//! the database is (no key: whoever can reach the database is its administrator).

use baton_app::doc::{ProjectAdded, Projects};
use baton_core::{Field, ProjectName, Refusal};
use clap::Subcommand;

use crate::cli::GlobalArgs;
use crate::error::{CommandError, CommandResult};
use crate::output::Output;

/// Add and list the projects of a shared store (`--db URL`, or BATON_DB).
#[derive(Subcommand, Debug)]
pub enum ProjectCommand {
    /// Add a project; adding it again is harmless.
    #[command(after_help = "Example:\n  baton --db sqlite:/srv/baton project add shop")]
    Add { name: String },
    /// List the store's projects.
    #[command(after_help = "Example:\n  baton --db sqlite:/srv/baton project list")]
    List,
}

pub async fn run(g: &GlobalArgs, cmd: ProjectCommand) -> CommandResult<Output> {
    let Some(url) = &g.db else {
        return Err(CommandError::usage(
            "`baton project` administers a shared store: pass --db URL (or set BATON_DB)",
        ));
    };
    let db = baton_store::database(url, baton_store::DEFAULT_BUSY_TIMEOUT).await?;
    match cmd {
        ProjectCommand::Add { name } => {
            let name = ProjectName::new(&name).map_err(|error| Refusal::Name {
                field: Field::Name,
                error,
            })?;
            let created = db.add_project(&name).await?;
            let human = if created {
                format!(
                    "Added project {name}. Next: baton --db URL --project {name} agent add NAME --role ROLE"
                )
            } else {
                format!("Project {name} exists already; nothing changed.")
            };
            Ok(Output::of(&ProjectAdded { name, created }, human))
        }
        ProjectCommand::List => {
            let items = db.projects().await?;
            let human = if items.is_empty() {
                "No projects: baton --db URL project add NAME".to_owned()
            } else {
                items
                    .iter()
                    .map(ProjectName::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            Ok(Output::of(&Projects { items }, human))
        }
    }
}
