//! The review gate: the packet a reviewer reads, each verdict, the review.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `baton review --packet-only`: the packet a reviewer would read, and its size.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ReviewPacket {
    pub order: String,
    pub round: u32,
    /// Where the packet was written (a reviewer reads it on stdin and finds the path in
    /// `BATON_PACKET`).
    pub path: String,
    pub bytes: usize,
    pub max_bytes: usize,
    /// How much of the diff fitted.
    pub diff: baton_core::gate::DiffKept,
    pub test_lines_dropped: usize,
    pub packet: String,
}
doc!(ReviewPacket, "baton/review-packet@1");

/// One reviewer's verdict in a round.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReviewerVerdict {
    pub reviewer: String,
    /// The ledger row that ran the reviewer; `null` when it could not start.
    pub run: Option<String>,
    #[serde(flatten)]
    pub verdict: baton_core::gate::Verdict,
}

/// `baton review`: what the round concluded.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Review {
    pub order: String,
    pub round: u32,
    pub outcome: baton_core::gate::Outcome,
    /// The reviewers gave different verdicts.
    pub disagreement: bool,
    /// The rework reason sent to the worker (a first-round FIX), else `null`.
    pub rework: Option<String>,
    /// The order lands in the human queue (`baton queue`).
    pub queued: bool,
    pub verdicts: Vec<ReviewerVerdict>,
}
doc!(Review, "baton/review@1");
