//! Negotiation: settling a disagreement between agents with arithmetic instead
//! of a consensus loop or a person. It owns the formats (a spec: issues and their options,
//! hard constraints, a round limit, the parties; a position per party: weights, utilities,
//! a floor, vetoes), their validation (each refusal names the JSON path of the first
//! problem), utility and acceptance, the engine that settles a negotiation, the events that
//! record one and the fold of those events.
//!
//! The engine is alternating offers with a mediator. Each party in turn (in passname order)
//! offers its best feasible outcome that nobody has offered yet; when every party accepts
//! an offer, that is the agreement. After every party has offered, the mediator proposes
//! the outcome every party accepts that is fairest to the worst-off party (leximin over each
//! party's share of what it could gain above its floor). Nothing depends on the order in
//! which positions were submitted or listed, nor on hash-map iteration: every tie is broken
//! by a fixed order, ending in the spec's own order of issues and options.
//!
//! This module does no I/O, reads no clock and draws no random number. Nothing it returns
//! for display holds a weight, a utility or a floor: those live only in the positions,
//! which only the engine reads ([`Negotiation`] keeps them private).
//!
//! `formats.rs` holds the documents (spec, position, settlement), `input.rs` reads them
//! from JSON, `engine.rs` settles, `fold.rs` records and folds; this file is the surface.

mod engine;
mod fold;
mod formats;
mod input;
#[cfg(test)]
mod tests;

pub use engine::settle;
pub use fold::{Negotiation, NegotiationChange, Sitting, Status, plan_open, plan_submit};
pub use formats::{
    Answer, Choices, Ended, Issue, Offer, Party, Position, Resolution, Settlement, Spec, Veto,
};
pub use input::{Expected, Input, Problem, Range, check_size, parse_json};

/// At most this many issues.
pub const MAX_ISSUES: usize = 8;
/// At most this many options per issue.
pub const MAX_OPTIONS: usize = 64;
/// At most this many outcomes in all (eight issues of eight options): the engine's search
/// is bounded by it whatever the positions.
pub const MAX_OUTCOMES: u64 = 1 << 24;
pub const MIN_PARTIES: usize = 2;
pub const MAX_PARTIES: usize = 16;
pub const MAX_ROUNDS: u64 = 1000;
/// Weights above this could overflow a utility; nobody needs them.
pub const MAX_WEIGHT: f64 = 1e6;
/// Longest issue or option name, in characters.
pub const MAX_NAME: usize = 64;
/// Who the trail names as the proposer of the mediator's offer (`@` is never in a
/// passname, so no party can be confused with it).
pub const MEDIATOR: &str = "@mediator";
