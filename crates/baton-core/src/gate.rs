//! The review gate: the verdict grammar, what a round of review concludes from
//! its reviewers' verdicts, the events that record both, and the review packet's budget.
//!
//! A reviewer's output is text; [`parse_verdict`] turns it into a [`Verdict`] and never
//! fails: anything outside the grammar is [`Verdict::Invalid`] with the raw text kept.
//! `STOPPED` is not in the grammar: it comes from the run (a reviewer ended by a signal).
//! [`conclude`] decides what a round does (approve, send the fixes back once, hand it to
//! a person, or end the chain). This module runs nothing and reads no clock.

use serde::{Deserialize, Serialize};

use crate::packet::clip;

/// The one word that approves, alone on its output once trimmed.
pub const APPROVE: &str = "APPROVE";
/// The packet's budget, in bytes.
pub const PACKET_MAX_BYTES: usize = 256 * 1024;
/// The most lines of test output a packet carries.
pub const TEST_OUTPUT_LINES: usize = 200;
/// The longest raw text an INVALID verdict stores, in bytes.
pub const MAX_RAW_BYTES: usize = 4000;

/// What a reviewer said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "verdict", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    Approve,
    /// A numbered list of fixes, in the reviewer's order, without their numbers.
    Fix {
        fixes: Vec<String>,
    },
    /// Output outside the grammar, kept as it came (clipped to [`MAX_RAW_BYTES`]).
    Invalid {
        raw: String,
    },
    /// The reviewer was ended by a signal: the chain ends here.
    Stopped {
        signal: Option<i32>,
    },
}

impl Verdict {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Approve => "APPROVE",
            Self::Fix { .. } => "FIX",
            Self::Invalid { .. } => "INVALID",
            Self::Stopped { .. } => "STOPPED",
        }
    }
}

/// A numbered item's number and text: `12. text` (a `.` then at least one space).
fn numbered(line: &str) -> Option<(u64, &str)> {
    let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits > 9 {
        return None;
    }
    let rest = line[digits..].strip_prefix('.')?;
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let text = rest.trim();
    if text.is_empty() {
        return None;
    }
    Some((line[..digits].parse().ok()?, text))
}

/// The verdict in a reviewer's output.
///
/// - `APPROVE`, exactly (case matters), alone once the output is trimmed;
/// - a numbered list `1. …`, `2. …` numbered from 1 without gaps, every non-blank line an
///   item or an indented continuation of the item above it = FIX;
/// - anything else (empty output, prose around `APPROVE`, a gap in the numbering) =
///   INVALID, with the raw text.
pub fn parse_verdict(output: &str) -> Verdict {
    let trimmed = output.trim();
    if trimmed == APPROVE {
        return Verdict::Approve;
    }
    let invalid = || Verdict::Invalid {
        raw: clip(output, MAX_RAW_BYTES),
    };
    let mut fixes: Vec<String> = Vec::new();
    for line in trimmed.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if let Some((n, text)) = numbered(line.trim_end()) {
            if n != fixes.len() as u64 + 1 {
                return invalid();
            }
            fixes.push(text.to_owned());
        } else if line.starts_with([' ', '\t'])
            && let Some(last) = fixes.last_mut()
        {
            last.push(' ');
            last.push_str(line.trim());
        } else {
            return invalid();
        }
    }
    if fixes.is_empty() {
        return invalid();
    }
    Verdict::Fix { fixes }
}

/// The highest signal number a shell's `128+N` exit status stands for (Linux's realtime
/// signals end at 64).
const MAX_SIGNAL: i32 = 64;

/// The verdict of a reviewer's run, from how it ended: `status` and `signal` as the launch
/// wrapper saw them, `exit` the code it ended with, `output` what it printed and `reason`
/// why it failed. A reviewer ended by a signal is STOPPED whether the wrapper saw the
/// signal or only a shell's `128+N` exit (a reviewer run as `sh -c CMD` whose CMD was
/// killed): either way it said nothing, and a chain must not read the kill as a verdict.
/// Only a run that finished gives its output to the grammar; any other failure is INVALID.
pub fn verdict_of(
    status: crate::run::RunStatus,
    signal: Option<i32>,
    exit: Option<i32>,
    output: &str,
    reason: Option<&str>,
) -> Verdict {
    use crate::run::RunStatus;
    let shell_signal = exit
        .map(|code| code - 128)
        .filter(|n| (1..=MAX_SIGNAL).contains(n));
    match status {
        RunStatus::Stopped => Verdict::Stopped { signal },
        _ if status != RunStatus::Done && shell_signal.is_some() => Verdict::Stopped {
            signal: shell_signal,
        },
        RunStatus::Done => parse_verdict(output),
        _ => Verdict::Invalid {
            raw: clip(
                &format!("({}) {output}", reason.unwrap_or("the reviewer failed")),
                MAX_RAW_BYTES,
            ),
        },
    }
}

/// Who may conclude a review of `order`: the one who may approve it or send it back, its
/// sender. The worker never reviews its own work, and no one else concludes for the
/// sender; the reviewers themselves are commands the sender runs (`baton review
/// --reviewer CMD`). Checked before any reviewer runs, so a review refused here costs no
/// reviewer call and records nothing but the security event.
pub fn may_conclude(order: &crate::order::Order, actor: &str) -> Result<(), crate::Refusal> {
    use crate::order::OrderAction;
    if actor == order.to {
        return Err(crate::Refusal::OwnWork {
            actor: actor.to_owned(),
            order: order.id.clone(),
        });
    }
    if !order.may(actor, OrderAction::Approve) {
        return Err(crate::Refusal::OrderRole {
            actor: actor.to_owned(),
            action: OrderAction::Approve,
            order: order.id.clone(),
            may: order.who_may(OrderAction::Approve),
        });
    }
    Ok(())
}

/// One round's reviewers are different reviewers: two commands that are the same once
/// trimmed are one reviewer asked twice, which proves nothing twice.
pub fn distinct_reviewers<S: AsRef<str>>(commands: &[S]) -> Result<(), crate::Refusal> {
    for (i, a) in commands.iter().enumerate() {
        let a = a.as_ref().trim();
        if commands[..i].iter().any(|b| b.as_ref().trim() == a) {
            return Err(crate::Refusal::SameReviewer {
                command: a.to_owned(),
            });
        }
    }
    Ok(())
}

/// What a round of review decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every reviewer approved: the order waits for its owner's approval.
    Approved,
    /// The first round asked for fixes: the order goes back to its worker once.
    Rework,
    /// Not approved and not sent back: a person decides (the human queue).
    Unresolved,
    /// A reviewer was stopped by a signal: the chain ends, nothing follows.
    Stopped,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approved => "approved",
            Self::Rework => "rework",
            Self::Unresolved => "unresolved",
            Self::Stopped => "stopped",
        }
    }
}

/// A round's conclusion: the outcome, whether the reviewers disagreed, and the rework
/// reason (the fixes, numbered afresh) when the order goes back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conclusion {
    pub outcome: Outcome,
    pub disagreement: bool,
    pub reason: Option<String>,
}

/// What round `round` (1 = the first review of the order) concludes from its verdicts,
/// one per reviewer in order. Every reviewer must approve; a FIX in the first round sends
/// every reviewer's fixes back (and only then); INVALID alone gives the worker nothing to
/// fix, so a person decides; a stopped reviewer ends the chain.
pub fn conclude(round: u32, verdicts: &[Verdict]) -> Conclusion {
    let names: Vec<&str> = verdicts.iter().map(Verdict::name).collect();
    let disagreement = names.windows(2).any(|w| w[0] != w[1]);
    let stopped = verdicts
        .iter()
        .any(|v| matches!(v, Verdict::Stopped { .. }));
    let fixes: Vec<&String> = verdicts
        .iter()
        .flat_map(|v| match v {
            Verdict::Fix { fixes } => fixes.iter().collect(),
            _ => Vec::new(),
        })
        .collect();
    let (outcome, reason) = if stopped {
        (Outcome::Stopped, None)
    } else if !verdicts.is_empty() && verdicts.iter().all(|v| *v == Verdict::Approve) {
        (Outcome::Approved, None)
    } else if round == 1 && !fixes.is_empty() {
        let reason = fixes
            .iter()
            .enumerate()
            .map(|(i, f)| format!("{}. {f}", i + 1))
            .collect::<Vec<_>>()
            .join("\n");
        (Outcome::Rework, Some(reason))
    } else {
        (Outcome::Unresolved, None)
    };
    Conclusion {
        outcome,
        disagreement,
        reason,
    }
}

/// A review started and not concluded: its round, when it started and its reviewers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlight {
    pub round: u32,
    pub started_at: crate::Millis,
    pub reviewers: Vec<String>,
}

/// The review of an order in flight, from the order's gate events in log order: the
/// newest round started with no conclusion of that round after it. A review whose
/// process was killed stays in flight until a round of the same number concludes.
pub fn in_flight(events: &[crate::Event]) -> Option<InFlight> {
    let mut open: Option<InFlight> = None;
    for event in events {
        match &event.change {
            crate::Change::Gate(GateChange::Started {
                round, reviewers, ..
            }) => {
                open = Some(InFlight {
                    round: *round,
                    started_at: event.at,
                    reviewers: reviewers.clone(),
                });
            }
            crate::Change::Gate(GateChange::Concluded { round, .. })
                if open.as_ref().is_some_and(|o| o.round == *round) =>
            {
                open = None;
            }
            _ => {}
        }
    }
    open
}

/// How a gate event moves a need raised for a person: open from its event until its
/// queue item (`need:ID`) is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeedMove<'a> {
    Opened(&'a str),
    Closed(&'a str),
}

/// What `change` does to the open needs; `None`: nothing.
pub fn need_move(change: &GateChange) -> Option<NeedMove<'_>> {
    match change {
        GateChange::Need { id, .. } => Some(NeedMove::Opened(id)),
        GateChange::Acked { item } => item.strip_prefix("need:").map(NeedMove::Closed),
        GateChange::Started { .. } | GateChange::Reviewed { .. } | GateChange::Concluded { .. } => {
            None
        }
    }
}

/// Gate events: a reviewer's verdict, a round's conclusion, a need raised for a person,
/// a queue item acknowledged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum GateChange {
    /// One reviewer's verdict in a round.
    Reviewed {
        order: String,
        round: u32,
        /// The reviewer command as given (it names the reviewer).
        reviewer: String,
        /// The run that ran it, when it was started.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run: Option<String>,
        #[serde(flatten)]
        verdict: Verdict,
    },
    /// A round began: recorded with the check that its actor may conclude it, before any
    /// reviewer runs, so a review cut short (its process killed) is seen as started and not
    /// concluded until a later round of the same number concludes it.
    Started {
        order: String,
        round: u32,
        /// The reviewer commands, in order.
        reviewers: Vec<String>,
    },
    /// What the round concluded.
    Concluded {
        order: String,
        round: u32,
        outcome: Outcome,
        #[serde(default)]
        disagreement: bool,
    },
    /// A person is needed: raised by hand, or by an agent session (hook or MCP).
    Need {
        id: String,
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        order: Option<String>,
        source: NeedSource,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run: Option<String>,
    },
    /// A queue item was seen by a person; it stays away until a newer signal.
    Acked { item: String },
}

/// Where a need came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NeedSource {
    /// Raised by a call to `need`, on any edge: the command, REST or the MCP tool.
    Hand,
    /// Raised by an agent session's hook (a permission prompt, a stop with questions).
    Session,
}

impl GateChange {
    /// The subject: the order, the need, or the acknowledged item.
    pub fn subject(&self) -> &str {
        match self {
            Self::Started { order, .. }
            | Self::Reviewed { order, .. }
            | Self::Concluded { order, .. } => order,
            Self::Need { id, .. } => id,
            Self::Acked { item } => item,
        }
    }
}

// ---- the packet ---------------------------------------------------------------------------

/// One file of the task-local diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDiff {
    pub path: String,
    /// A test file: its body is kept longer than others'.
    pub test: bool,
    /// The file's unified diff (headers and hunks).
    pub body: String,
}

/// What a packet is made of, gathered by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketParts {
    pub order: String,
    /// Where the brief (the order's document) lies.
    pub brief: String,
    /// `BASE..HEAD`, when the order and report name both.
    pub range: Option<String>,
    /// The diff, file by file; `None` when it could not be read (with why).
    pub diff: Result<Vec<FileDiff>, String>,
    /// The test output (evidence), whole: the packet keeps its last lines.
    pub test_output: String,
    /// The worker's report (JSON text).
    pub report: String,
}

/// How much of the diff a packet kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DiffKept {
    /// Every hunk with its context.
    Whole,
    /// Unchanged context lines dropped.
    NoContext,
    /// Non-test file bodies dropped too (their paths kept).
    TestBodies,
    /// Only the paths.
    PathsOnly,
}

/// A rendered packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    pub text: String,
    pub kept: DiffKept,
    /// Test output lines left out (beyond [`TEST_OUTPUT_LINES`]).
    pub test_lines_dropped: usize,
}

/// A hunk body without its unchanged context lines.
fn without_context(body: &str) -> String {
    body.lines()
        .filter(|l| !l.starts_with(' ') && !l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect()
}

fn recover(range: Option<&str>, path: &str, flags: &str) -> String {
    match range {
        Some(r) => format!("  {path}: `git diff{flags} {r} -- {path}`\n"),
        None => format!("  {path}\n"),
    }
}

fn diff_section(parts: &PacketParts, kept: DiffKept) -> String {
    let files = match &parts.diff {
        Ok(files) => files,
        Err(why) => return format!("## Diff\n(unavailable: {why})\n"),
    };
    let range = parts.range.as_deref();
    let mut out = format!("## Diff {}\n", range.unwrap_or(""));
    let mut recovered = String::new();
    for f in files {
        let body = match kept {
            DiffKept::Whole => Some(f.body.clone()),
            DiffKept::NoContext => Some(without_context(&f.body)),
            DiffKept::TestBodies if f.test => Some(without_context(&f.body)),
            _ => None,
        };
        match body {
            Some(b) => out.push_str(&b),
            None => recovered.push_str(&recover(range, &f.path, "")),
        }
    }
    if kept != DiffKept::Whole {
        out.push_str(&format!(
            "(unchanged context dropped to fit; recover it with `git diff {}`)\n",
            range.unwrap_or("BASE..HEAD")
        ));
    }
    if !recovered.is_empty() {
        out.push_str("Bodies dropped to fit (paths and the commands that recover them):\n");
        out.push_str(&recovered);
    }
    out
}

/// Renders the packet within `max_bytes`: the brief's path, the diff, the last
/// [`TEST_OUTPUT_LINES`] lines of test output, and the report. When it does not fit,
/// unchanged context goes first, then non-test file bodies, then test file bodies (each
/// replaced by the command that recovers it); the report and test output are clipped last.
pub fn render_packet(parts: &PacketParts, max_bytes: usize) -> Packet {
    let lines: Vec<&str> = parts.test_output.lines().collect();
    let dropped = lines.len().saturating_sub(TEST_OUTPUT_LINES);
    let tests = lines[dropped..].join("\n");
    let head = format!(
        "# Review packet for order {}\nBrief: {}\nAnswer with exactly APPROVE, or a numbered list of fixes (1. …, 2. …).\n\n",
        parts.order, parts.brief
    );
    let tests = format!(
        "## Test output (last {} lines{})\n{tests}\n",
        TEST_OUTPUT_LINES.min(lines.len()),
        if dropped > 0 {
            format!(", {dropped} earlier dropped")
        } else {
            String::new()
        }
    );
    let report = format!("## Report\n{}\n", parts.report);
    let mut kept = DiffKept::PathsOnly;
    let mut diff = diff_section(parts, kept);
    for k in [DiffKept::Whole, DiffKept::NoContext, DiffKept::TestBodies] {
        let d = diff_section(parts, k);
        if head.len() + d.len() + tests.len() + report.len() <= max_bytes {
            kept = k;
            diff = d;
            break;
        }
    }
    let mut text = head;
    let room = max_bytes.saturating_sub(text.len());
    if diff.len() + tests.len() + report.len() > room {
        // Even the paths do not fit: the test output and the report keep a quarter each.
        let tests = clip(&tests, room / 4);
        let report = clip(&report, room / 4);
        text.push_str(&clip(&diff, room - tests.len() - report.len()));
        text.push_str(&tests);
        text.push_str(&report);
    } else {
        text.push_str(&diff);
        text.push_str(&tests);
        text.push_str(&report);
    }
    Packet {
        text,
        kept,
        test_lines_dropped: dropped,
    }
}

#[cfg(test)]
mod tests;
