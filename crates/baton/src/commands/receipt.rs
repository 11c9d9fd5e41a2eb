//! Receipts: where a step's output landed, hashed so it can be verified, and
//! waits that fail loud at their deadline. Also `baton alerts`.

use baton_app::Verdict;
use baton_app::doc::ReceiptsVerified;
use clap::{Args, Subcommand};

use crate::commands::Context;
use crate::error::{CommandError, CommandResult};
use crate::output::{Output, table, timestamp};

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

pub async fn receipt(ctx: &Context, cmd: ReceiptCommand) -> CommandResult<Output> {
    match cmd {
        ReceiptCommand::Write {
            step,
            artifact,
            run,
        } => {
            // A path is taken from the working directory; it is stored relative to the root.
            let input = baton_app::ops::ReceiptInput {
                step,
                artifact: ctx.rooted(&artifact)?,
                run,
            };
            let doc = ctx.call::<baton_app::ops::ReceiptWrite>(input).await?;
            let human = format!("Receipt for {}: {}", doc.receipt.step, doc.receipt.artifact);
            Ok(Output::of(&doc, human))
        }
        ReceiptCommand::Show { step } => {
            let input = baton_app::ops::StepInput { step };
            let doc = ctx.call::<baton_app::ops::ReceiptShow>(input).await?;
            let r = &doc.receipt;
            let human = format!(
                "step:     {}\nartifact: {}\nblake3:   {}\nsize:     {}\nrun:      {}\nwritten:  {} by {}",
                r.record.step,
                r.record.artifact,
                r.record.hash.as_deref().unwrap_or("unknown (a URI)"),
                r.record.size.map_or("unknown".into(), |s| s.to_string()),
                r.record.run.as_deref().unwrap_or("-"),
                timestamp(r.written.at),
                r.written.actor
            );
            Ok(Output::of(&doc, human))
        }
        ReceiptCommand::Verify { step } => {
            let verified = ctx.app()?.verify_receipts(step.as_deref()).await?;
            let bad: Vec<String> = verified
                .iter()
                .filter_map(|v| match v.verdict {
                    Verdict::Changed => Some(format!(
                        "{}: {} changed since its receipt",
                        v.step, v.artifact
                    )),
                    Verdict::Missing => Some(format!("{}: {} is missing", v.step, v.artifact)),
                    _ => None,
                })
                .collect();
            if !bad.is_empty() {
                return Err(CommandError::refused(format!(
                    "receipt verification failed:\n  - {}",
                    bad.join("\n  - ")
                )));
            }
            let rows: Vec<Vec<String>> = verified
                .iter()
                .map(|v| {
                    vec![
                        v.step.clone(),
                        v.verdict.as_str().to_owned(),
                        v.artifact.clone(),
                    ]
                })
                .collect();
            Ok(Output::of(
                &ReceiptsVerified::new(&verified),
                table(&["STEP", "VERDICT", "ARTIFACT"], &rows),
            ))
        }
        ReceiptCommand::Wait { step, timeout } => {
            let input = baton_app::ops::ReceiptWaitInput {
                step: step.clone(),
                timeout_seconds: Some(super::wait_seconds(&timeout)?),
            };
            let doc = ctx.call::<baton_app::ops::ReceiptWait>(input).await?;
            let human = format!("Receipt for {step}: {}", doc.receipt.record.artifact);
            Ok(Output::of(&doc, human))
        }
    }
}

pub async fn alerts(ctx: &Context, args: AlertsArgs) -> CommandResult<Output> {
    match args.command {
        Some(AlertsCommand::Ack { id }) => {
            let input = baton_app::ops::IdInput { id: id.clone() };
            let doc = ctx.call::<baton_app::ops::AckAlert>(input).await?;
            let human = format!("{id} acknowledged");
            Ok(Output::of(&doc, human))
        }
        None => {
            let doc = ctx
                .call::<baton_app::ops::AlertList>(baton_app::ops::Nothing {})
                .await?;
            let rows: Vec<Vec<String>> = doc
                .items
                .iter()
                .map(|a| vec![a.id.clone(), timestamp(a.raised.at), a.message.clone()])
                .collect();
            let human = if rows.is_empty() {
                "No open alerts.".to_owned()
            } else {
                table(&["ID", "RAISED", "ALERT"], &rows)
            };
            Ok(Output::of(&doc, human))
        }
    }
}
