//! `baton key issue|list|revoke`: the keys that prove who is asking a server.

use baton_app::doc::KeyRow;
use baton_app::ops;
use baton_core::key::Scope;
use clap::{Args, Subcommand, ValueEnum};

use crate::commands::Context;
use crate::error::{CommandError, CommandResult};
use crate::output::{Output, table};
use crate::project::parse_duration;

/// Issue, list and revoke keys. A key names one participant; only its hash is stored.
#[derive(Subcommand, Debug)]
pub enum KeyCommand {
    /// Issue a key for a participant and print its token, alone on stdout — once: it is not
    /// stored.
    ///
    /// `read` keys change nothing; `write` keys act as the participant; `admin` keys also
    /// add participants and issue and revoke keys.
    #[command(
        after_help = "Examples:\n  TOKEN=$(baton key issue impl-1 --scope write --expires 30d)\n  \
                      baton --db postgres://db.internal/baton --project shop key issue owner --scope admin"
    )]
    Issue(IssueArgs),
    /// List the project's keys: id, participant, scope, created, last used, expiry, revoked.
    #[command(after_help = "Example:\n  baton key list --json")]
    List,
    /// Revoke one key; every other key keeps working.
    #[command(after_help = "Example:\n  baton key revoke 01jd3m...")]
    Revoke { id: String },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ScopeArg {
    Read,
    Write,
    Admin,
}

#[derive(Args, Debug)]
pub struct IssueArgs {
    /// The participant the key proves.
    pub name: String,
    #[arg(long, value_enum)]
    pub scope: ScopeArg,
    /// How long it lives, e.g. 30d or 12h; without it, until revoked.
    #[arg(long, value_name = "DURATION")]
    pub expires: Option<String>,
}

fn row_cells(k: &KeyRow) -> Vec<String> {
    vec![
        k.id.clone(),
        k.participant.to_string(),
        k.scope.to_string(),
        k.created_at.clone(),
        k.last_used_at.clone().unwrap_or_else(|| "never".into()),
        k.expires_at.clone().unwrap_or_else(|| "-".into()),
        match (&k.revoked_at, k.live) {
            (Some(at), _) => format!("revoked {at}"),
            (None, true) => "live".into(),
            (None, false) => "expired".into(),
        },
    ]
}

pub async fn run(ctx: &Context, cmd: KeyCommand) -> CommandResult<Output> {
    match cmd {
        KeyCommand::Issue(args) => {
            let scope = match args.scope {
                ScopeArg::Read => Scope::Read,
                ScopeArg::Write => Scope::Write,
                ScopeArg::Admin => Scope::Admin,
            };
            // Checked here, so a bad duration is worded as the flag's.
            if let Some(d) = &args.expires {
                parse_duration("--expires", d).map_err(CommandError::usage)?;
            }
            let input = ops::KeyInput {
                participant: args.name,
                scope,
                expires: args.expires,
            };
            let doc = ctx.call::<ops::KeyIssue>(input).await?;
            let key = &doc.key;
            // The token alone on stdout, so `TOKEN=$(baton key issue …)` keeps it; what it
            // is goes to stderr.
            let note = format!(
                "Key {} for {} ({}{}): its token is on stdout, shown this once",
                key.id,
                key.participant,
                key.scope,
                key.expires_at
                    .as_ref()
                    .map(|t| format!(", expires {t}"))
                    .unwrap_or_default(),
            );
            Ok(Output::of(&doc, doc.token.clone()).with_note(note))
        }
        KeyCommand::List => {
            let doc = ctx.call::<ops::KeyList>(ops::Nothing {}).await?;
            let items = &doc.items;
            let human = if items.is_empty() {
                "No keys: baton key issue NAME --scope write".to_owned()
            } else {
                table(
                    &[
                        "ID",
                        "PARTICIPANT",
                        "SCOPE",
                        "CREATED",
                        "LAST USED",
                        "EXPIRES",
                        "STATUS",
                    ],
                    &items.iter().map(row_cells).collect::<Vec<_>>(),
                )
            };
            Ok(Output::of(&doc, human))
        }
        KeyCommand::Revoke { id } => {
            let doc = ctx.call::<ops::KeyRevoke>(ops::KeyIdInput { id }).await?;
            let human = format!("Key {} of {} is revoked.", doc.key.id, doc.key.participant);
            Ok(Output::of(&doc, human))
        }
    }
}
