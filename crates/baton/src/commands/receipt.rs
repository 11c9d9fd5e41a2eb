//! Receipts (SPEC §5.5): where a step's output landed, hashed so it can be verified, and
//! waits that fail loud at their deadline. Also `baton alerts`.

use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use baton_core::state::{ReceiptRecord, StateOp};
use baton_store::Store;
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

fn is_uri(artifact: &str) -> bool {
    artifact.contains("://")
}

/// blake3 and size of a file, streamed.
fn hash_file(path: &Path) -> std::io::Result<(String, u64)> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((hasher.finalize().to_hex().to_string(), size))
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
            let record = if is_uri(&artifact) {
                ReceiptRecord {
                    step,
                    artifact,
                    hash: None,
                    size: None,
                    run,
                }
            } else {
                let path = std::env::current_dir()?.join(&artifact);
                let (hash, size) = hash_file(&path).map_err(|e| {
                    CommandError::new(
                        ErrorKind::NotFound,
                        format!(
                            "--artifact {artifact}: {e}; write the receipt after the output exists"
                        ),
                    )
                })?;
                let root = ctx.project.root.canonicalize()?;
                let absolute = path.canonicalize()?;
                let stored = absolute.strip_prefix(&root).map_or_else(
                    |_| absolute.display().to_string(),
                    |p| p.display().to_string(),
                );
                ReceiptRecord {
                    step,
                    artifact: stored,
                    hash: Some(hash),
                    size: Some(size),
                    run,
                }
            };
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
                        match hash_file(&path) {
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

/// Polls the store's generation (one cheap query) and reads the state only when it moved.
const POLL: Duration = Duration::from_millis(50);

async fn wait(ctx: &Context, step: &str, timeout: Duration) -> CommandResult<Output> {
    let deadline = Instant::now() + timeout;
    let mut seen = -1;
    loop {
        let generation = ctx.store.generation().await?;
        if generation != seen {
            seen = generation;
            if let Some(r) = ctx.store.state().await?.receipts.get(step) {
                return Ok(Output::new(
                    "baton/receipt@1",
                    json!({ "receipt": r }),
                    format!("Receipt for {step}: {}", r.record.artifact),
                ));
            }
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        tokio::time::sleep(POLL.min(deadline - now)).await;
    }
    let actor = actor(ctx).await?;
    let message = format!(
        "no receipt for step {step:?} within {}s",
        timeout.as_secs_f64()
    );
    ctx.store
        .change_state(
            &actor,
            &[StateOp::Alert {
                key: format!("receipt-missing:{step}"),
                message: message.clone(),
            }],
        )
        .await?;
    Err(CommandError::new(
        ErrorKind::NotFound,
        format!("{message}; the step did not say where its output went (see `baton alerts`)"),
    ))
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
