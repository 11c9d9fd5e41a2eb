//! `baton review`: the review gate at the command line. It gathers the packet
//! (the app's facts, git's diff, the core's budget), runs each reviewer under the launch
//! wrapper of `baton run` (a ledger row, the packet on stdin), reads each verdict with the
//! core's grammar, and hands the round to the app, which records it and sends a first FIX
//! back to the worker.

use std::path::PathBuf;

use baton_app::doc::{Review, ReviewPacket, ReviewerVerdict};
use baton_app::{ReviewStart, Reviewed};
use baton_core::gate::{
    Outcome, PACKET_MAX_BYTES, Packet, PacketParts, Verdict, render_packet, verdict_of,
};
use clap::Args;

use crate::commands::Context;
use crate::commands::run::{RunArgs, Wiring, launch};
use crate::error::{CommandError, CommandResult, ErrorKind};
use crate::output::Output;

/// Review a submitted order with one or two reviewer commands, each in isolation.
///
/// Each reviewer gets a packet, not a conversation: the brief's path, the task-local diff
/// (the order's base_revision..the report's commit), the last 200 lines of test output and
/// the worker's report, within 256 KB. It reads the packet on stdin (its path is in
/// BATON_PACKET) and runs under `baton run`, so it is a ledger row. Its output must be
/// exactly APPROVE, or a numbered list of fixes (1. …, 2. …); anything else is INVALID. A
/// reviewer ended by a signal is STOPPED and ends the chain.
///
/// The first round's fixes go back to the worker once (a rework with the fixes as the
/// reason). With two reviewers both must approve. Exit status: 0 when approved or sent
/// back; 2 when unresolved (a second non-APPROVE, or INVALID): the order is in `baton
/// queue`; 128+N when a reviewer was stopped by signal N.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    baton --as planner review wo_42 --reviewer 'claude -p \"review this packet\"'\n  \
    baton --as planner review wo_42 --reviewer ./review-a.sh --reviewer ./review-b.sh\n  \
    baton --json review wo_42 --packet-only")]
pub struct ReviewArgs {
    /// The order to review (it must be submitted).
    pub order: String,
    /// A reviewer command, run with `sh -c` (at most two).
    #[arg(long = "reviewer", value_name = "CMD")]
    pub reviewers: Vec<String>,
    /// Print the packet (and its size) and run nothing.
    #[arg(long)]
    pub packet_only: bool,
}

/// Builds and writes the packet: `.baton/review/ORDER/` holds the brief and the packet.
fn packet(ctx: &Context, start: &ReviewStart) -> CommandResult<(PathBuf, Packet)> {
    let dir = ctx
        .project
        .root
        .join(".baton")
        .join("review")
        .join(&start.order.id);
    std::fs::create_dir_all(&dir)?;
    let brief = dir.join("brief.json");
    let document = serde_json::Value::Object(start.document.clone());
    std::fs::write(
        &brief,
        serde_json::to_string_pretty(&document).unwrap_or_default(),
    )?;
    let (range, diff) = match (&start.base, &start.head) {
        (Some(base), Some(head)) => (
            Some(format!("{base}..{head}")),
            crate::host::diff(&ctx.project.root, base, head),
        ),
        _ => (
            None,
            Err("the order names no base_revision or the report no commit".to_owned()),
        ),
    };
    let parts = PacketParts {
        order: start.order.id.clone(),
        brief: brief.display().to_string(),
        range,
        diff,
        test_output: start.test_output.clone(),
        report: serde_json::to_string_pretty(&start.report).unwrap_or_default(),
    };
    let packet = render_packet(&parts, PACKET_MAX_BYTES);
    let path = dir.join(format!("packet-{}.md", start.round));
    std::fs::write(&path, &packet.text)?;
    Ok((path, packet))
}

/// Runs one reviewer under the launch wrapper and reads its verdict.
async fn review_with(
    ctx: &Context,
    order: &str,
    path: &std::path::Path,
    reviewer: &str,
) -> CommandResult<Reviewed> {
    let args = RunArgs {
        order: Some(order.to_owned()),
        steps: None,
        budget_tokens: None,
        writer: false,
        slots: None,
        wait: true,
        expect_receipts: Vec::new(),
        command: vec!["sh".into(), "-c".into(), reviewer.to_owned()],
    };
    let wiring = Wiring {
        stdin: Some(std::fs::File::open(path)?),
        env: vec![("BATON_PACKET".into(), path.display().to_string())],
        capture: true,
        reviewer: Some(reviewer.to_owned()),
    };
    let launched = launch(ctx, &args, wiring).await?;
    let output = String::from_utf8_lossy(&launched.stdout);
    let verdict = verdict_of(
        launched.status,
        launched.signal,
        Some(launched.exit),
        &output,
        launched.reason.as_deref(),
    );
    Ok(Reviewed {
        reviewer: reviewer.to_owned(),
        run: Some(launched.run),
        verdict,
    })
}

pub async fn run(ctx: &Context, args: ReviewArgs) -> CommandResult<Output> {
    if !args.packet_only && !(1..=2).contains(&args.reviewers.len()) {
        return Err(CommandError::usage(
            "give one or two reviewers: --reviewer CMD [--reviewer CMD2] (or --packet-only)",
        ));
    }
    // Who reviews is settled before anything runs: a refused review costs no reviewer.
    let me = match args.packet_only {
        true => None,
        false => Some(ctx.me().await?),
    };
    let start = ctx
        .app()?
        .review_start(me.as_ref(), &args.order, &args.reviewers)
        .await?;
    let (path, packet) = packet(ctx, &start)?;
    if args.packet_only {
        let doc = ReviewPacket {
            order: start.order.id.clone(),
            round: start.round,
            path: path.display().to_string(),
            bytes: packet.text.len(),
            max_bytes: PACKET_MAX_BYTES,
            diff: packet.kept,
            test_lines_dropped: packet.test_lines_dropped,
            packet: packet.text.clone(),
        };
        return Ok(Output::of(&doc, packet.text));
    }
    let mut verdicts = Vec::new();
    for reviewer in &args.reviewers {
        verdicts.push(review_with(ctx, &start.order.id, &path, reviewer).await?);
    }
    let shown: Vec<ReviewerVerdict> = verdicts
        .iter()
        .map(|v| ReviewerVerdict {
            reviewer: v.reviewer.clone(),
            run: v.run.clone(),
            verdict: v.verdict.clone(),
        })
        .collect();
    let me = me.expect("a review that runs reviewers has its reviewer");
    let done = ctx.app()?.conclude_review(&me, &start, verdicts).await?;
    let c = &done.conclusion;
    let mut human = format!(
        "{}: review {} {}{}",
        done.order,
        done.round,
        c.outcome.as_str(),
        if c.disagreement {
            " (the reviewers disagree)"
        } else {
            ""
        }
    );
    for v in &shown {
        human.push_str(&format!("\n  {}: {}", v.reviewer, v.verdict.name()));
    }
    match c.outcome {
        Outcome::Approved => human.push_str("\nIt waits for its owner: `baton order approve`."),
        Outcome::Rework => human.push_str(&format!(
            "\nSent back to its worker with the fixes:\n{}",
            c.reason.as_deref().unwrap_or_default()
        )),
        Outcome::Unresolved => {
            human.push_str("\nUnresolved: a person decides (`baton queue --lane reviews`).")
        }
        Outcome::Stopped => human.push_str("\nA reviewer was stopped: the chain ends here."),
    }
    let doc = Review {
        order: done.order.clone(),
        round: done.round,
        outcome: c.outcome,
        disagreement: c.disagreement,
        rework: c.reason.clone(),
        queued: c.outcome == Outcome::Unresolved,
        verdicts: shown.clone(),
    };
    let mut output = Output::of(&doc, human);
    output.exit = match c.outcome {
        Outcome::Unresolved => Some(ErrorKind::Run(2)),
        Outcome::Stopped => {
            let sig = shown.iter().find_map(|v| match v.verdict {
                Verdict::Stopped { signal } => signal,
                _ => None,
            });
            Some(ErrorKind::Run(
                u8::try_from(128 + sig.unwrap_or(1)).unwrap_or(1),
            ))
        }
        _ => None,
    };
    Ok(output)
}
