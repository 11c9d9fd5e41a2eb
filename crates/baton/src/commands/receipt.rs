//! Receipts (SPEC §5.5): where a step's output landed, hashed so it can be verified, and
//! waits that fail loud at their deadline. Also `baton alerts`.

use std::time::Duration;

use baton_core::state::StateOp;
use baton_store::Store;
use baton_store::receipt::{self, Waited};
use clap::{Args, Subcommand};
use serde_json::json;

use crate::commands::Context;
use crate::error::{CommandError, CommandResult, ErrorKind};
use crate::output::{Output, table, timestamp};
use crate::project::parse_duration;

/// Record, show, verify and wait for step receipts.
#[derive(Subcommand, Debug)]
pub enum ReceiptCommand {
    /// Record where a step's output landed: a path (hashed with blake3) or a URI.
    #[command(
        after_help = "Example:\n  baton receipt write --step build --artifact target/release/app --run 01JD..."
    )]
    Write {
        #[arg(long)]
        step: String,
        #[arg(long, value_name = "PATH|URI")]
        artifact: String,
        #[arg(long, value_name = "RUN")]
        run: Option<String>,
    },
    /// Show the newest receipt of a step.
    #[command(after_help = "Example:\n  baton receipt show build")]
    Show { step: String },
    /// Re-hash the artifacts of one step (or all): a changed or missing one is an error.
    #[command(after_help = "Example:\n  baton receipt verify build")]
    Verify { step: Option<String> },
    /// Wait until a step's receipt exists; at the deadline exit 4 and raise one alert.
    #[command(after_help = "Example:\n  baton receipt wait --step build --timeout 10m")]
    Wait {
        #[arg(long)]
        step: String,
        #[arg(long, value_name = "DURATION")]
        timeout: String,
    },
}

/// List open alerts, or acknowledge one.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  baton alerts\n  baton alerts ack A-3")]
pub struct AlertsArgs {
    #[command(subcommand)]
    pub command: Option<AlertsCommand>,
}

#[derive(Subcommand, Debug)]
pub enum AlertsCommand {
    /// Clear an open alert; the same condition may raise a new one later.
    Ack { id: String },
}

async fn actor(ctx: &Context) -> CommandResult<String> {
    Ok(ctx.maybe_me().await?.map_or_else(
        || baton_core::event::LOCAL_OPERATOR.to_owned(),
        |m| m.to_string(),
    ))
}

pub async fn receipt(ctx: &Context, cmd: ReceiptCommand) -> CommandResult<Output> {
    match cmd {
        ReceiptCommand::Write {
            step,
            artifact,
            run,
        } => {
            let cwd = std::env::current_dir()?;
            let record = receipt::record(&ctx.project.root, &cwd, step, artifact.clone(), run)
                .map_err(|e| {
                    CommandError::new(
                        ErrorKind::NotFound,
                        format!(
                            "--artifact {artifact}: {e}; write the receipt after the output exists"
                        ),
                    )
                })?;
            let actor = actor(ctx).await?;
            let events = ctx
                .store
                .change_state(&actor, &[StateOp::Receipt(record.clone())])
                .await?;
            Ok(Output::new(
                "baton/receipt@1",
                json!({ "receipt": record, "generation": events.last().map(|e| e.seq) }),
                format!("Receipt for {}: {}", record.step, record.artifact),
            ))
        }
        ReceiptCommand::Show { step } => {
            let state = ctx.store.state().await?;
            let r = state.receipts.get(&step).ok_or_else(|| {
                CommandError::new(ErrorKind::NotFound, format!("no receipt for step {step:?}"))
            })?;
            Ok(Output::new(
                "baton/receipt@1",
                json!({ "receipt": r }),
                format!(
                    "step:     {}\nartifact: {}\nblake3:   {}\nsize:     {}\nrun:      {}\nwritten:  {} by {}",
                    r.record.step,
                    r.record.artifact,
                    r.record.hash.as_deref().unwrap_or("unknown (a URI)"),
                    r.record.size.map_or("unknown".into(), |s| s.to_string()),
                    r.record.run.as_deref().unwrap_or("-"),
                    timestamp(r.written.at),
                    r.written.actor
                ),
            ))
        }
        ReceiptCommand::Verify { step } => {
            let state = ctx.store.state().await?;
            let receipts: Vec<_> = match &step {
                Some(s) => vec![state.receipts.get(s).ok_or_else(|| {
                    CommandError::new(ErrorKind::NotFound, format!("no receipt for step {s:?}"))
                })?],
                None => state.receipts.values().collect(),
            };
            let mut rows = Vec::new();
            let mut bad = Vec::new();
            for r in receipts {
                let verdict = match &r.record.hash {
                    None => "unverifiable (URI)".to_owned(),
                    Some(want) => {
                        let path = ctx.project.root.join(&r.record.artifact);
                        match receipt::hash_file(&path) {
                            Ok((got, _)) if &got == want => "ok".to_owned(),
                            Ok(_) => {
                                bad.push(format!(
                                    "{}: {} changed since its receipt",
                                    r.record.step, r.record.artifact
                                ));
                                "changed".to_owned()
                            }
                            Err(_) => {
                                bad.push(format!(
                                    "{}: {} is missing",
                                    r.record.step, r.record.artifact
                                ));
                                "missing".to_owned()
                            }
                        }
                    }
                };
                rows.push(vec![
                    r.record.step.clone(),
                    verdict,
                    r.record.artifact.clone(),
                ]);
            }
            if !bad.is_empty() {
                return Err(CommandError::refused(format!(
                    "receipt verification failed:\n  - {}",
                    bad.join("\n  - ")
                )));
            }
            Ok(Output::new(
                "baton/receipt-verify@1",
                json!({ "verified": rows.iter().map(|r| json!({"step": r[0], "verdict": r[1], "artifact": r[2]})).collect::<Vec<_>>() }),
                table(&["STEP", "VERDICT", "ARTIFACT"], &rows),
            ))
        }
        ReceiptCommand::Wait { step, timeout } => {
            let timeout = parse_duration("--timeout", &timeout).map_err(CommandError::usage)?;
            wait(ctx, &step, timeout).await
        }
    }
}

async fn wait(ctx: &Context, step: &str, timeout: Duration) -> CommandResult<Output> {
    let actor = actor(ctx).await?;
    match receipt::wait(&ctx.store, &actor, step, timeout).await? {
        Waited::Arrived(r) => Ok(Output::new(
            "baton/receipt@1",
            json!({ "receipt": r }),
            format!("Receipt for {step}: {}", r.record.artifact),
        )),
        Waited::Missed { alert } => Err(CommandError::new(
            ErrorKind::NotFound,
            format!("{alert}; the step did not say where its output went (see `baton alerts`)"),
        )),
    }
}

pub async fn alerts(ctx: &Context, args: AlertsArgs) -> CommandResult<Output> {
    match args.command {
        Some(AlertsCommand::Ack { id }) => {
            let actor = actor(ctx).await?;
            ctx.store
                .change_state(&actor, &[StateOp::AlertAck { id: id.clone() }])
                .await?;
            Ok(Output::new(
                "baton/alert-ack@1",
                json!({ "id": id }),
                format!("{id} acknowledged"),
            ))
        }
        None => {
            let state = ctx.store.state().await?;
            let rows: Vec<Vec<String>> = state
                .alerts
                .iter()
                .map(|a| vec![a.id.clone(), timestamp(a.raised.at), a.message.clone()])
                .collect();
            let human = if rows.is_empty() {
                "No open alerts.".to_owned()
            } else {
                table(&["ID", "RAISED", "ALERT"], &rows)
            };
            Ok(Output::new(
                "baton/alerts@1",
                json!({ "items": state.alerts }),
                human,
            ))
        }
    }
}
