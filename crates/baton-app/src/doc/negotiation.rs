//! A negotiation as a person reads it: the trail, the result, never a position.

use baton_core::Passname;
use baton_core::negotiation::{
    Choices, Ended, Negotiation, Resolution, Status as NegotiationStatus,
};
use baton_core::time::rfc3339;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One offer of a negotiation's trail: who proposed which outcome, and each party's answer.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OfferRow {
    pub round: u32,
    /// A party's passname, or `@mediator`.
    pub proposer: String,
    /// Issue → option.
    pub outcome: Map<String, Value>,
    /// Party → `accept`, `reject` or `veto`, in passname order.
    pub answers: Map<String, Value>,
}

/// A veto used in the trail: who vetoed which partial outcome (never why).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct VetoRow {
    pub party: String,
    /// Issue → option.
    pub vetoed: Map<String, Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct NegotiationParty {
    pub name: Passname,
    /// Whether its position is in (never what it holds).
    pub submitted: bool,
    /// Not a participant: declared external in the spec.
    pub external: bool,
}

/// A settled sitting of a negotiation opened again since.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct NegotiationSitting {
    /// `agreement` or `walk_away`.
    pub result: NegotiationStatus,
    /// The agreed outcome, issue → option; null on a walk-away.
    pub outcome: Option<Map<String, Value>>,
    pub opened_at: String,
    pub settled_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct NegotiationIssue {
    pub name: String,
    pub options: Vec<String>,
}

/// A negotiation as anyone may read it: the spec's public part, who has submitted, the
/// trail and the result. Never a weight, a utility or a floor.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct NegotiationShown {
    pub id: String,
    /// `open` (waiting for positions), `agreement` or `walk_away`.
    pub result: NegotiationStatus,
    /// The agreed outcome, issue → option; null unless agreed.
    pub outcome: Option<Map<String, Value>>,
    /// On a walk-away: the issues the offers could not agree on.
    pub unsettled: Vec<String>,
    /// On a walk-away: who vetoed what.
    pub vetoes: Vec<VetoRow>,
    /// On a walk-away: `no_zone` (no feasible outcome meets every floor and veto) or
    /// `round_limit` (the limit came first); null otherwise.
    pub ended: Option<Ended>,
    pub trail: Vec<OfferRow>,
    pub parties: Vec<NegotiationParty>,
    pub issues: Vec<NegotiationIssue>,
    /// The round limit.
    pub rounds: u32,
    pub opened_at: String,
    pub settled_at: Option<String>,
    /// The sittings settled before this one under the same id, oldest first.
    pub earlier: Vec<NegotiationSitting>,
}
doc!(NegotiationShown, "baton/negotiation@1");

fn choices_map(choices: &Choices) -> Map<String, Value> {
    choices
        .0
        .iter()
        .map(|(issue, option)| (issue.clone(), Value::from(option.as_str())))
        .collect()
}

impl NegotiationShown {
    pub fn new(n: &Negotiation) -> Self {
        let settlement = n.settlement.as_ref();
        let (outcome, unsettled, vetoes, ended) = match settlement.map(|s| &s.resolution) {
            Some(Resolution::Agreement { outcome }) => {
                (Some(choices_map(outcome)), Vec::new(), Vec::new(), None)
            }
            Some(Resolution::WalkAway {
                ended,
                unsettled,
                vetoes,
            }) => (
                None,
                unsettled.clone(),
                vetoes
                    .iter()
                    .map(|v| VetoRow {
                        party: v.party.clone(),
                        vetoed: choices_map(&v.vetoed),
                    })
                    .collect(),
                Some(*ended),
            ),
            None => (None, Vec::new(), Vec::new(), None),
        };
        let trail = settlement
            .map(|s| {
                s.trail
                    .iter()
                    .map(|o| OfferRow {
                        round: o.round,
                        proposer: o.proposer.clone(),
                        outcome: choices_map(&o.outcome),
                        answers: o
                            .answers
                            .iter()
                            .map(|(party, a)| (party.clone(), Value::from(a.as_str())))
                            .collect(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            id: n.id().to_owned(),
            result: n.status(),
            outcome,
            unsettled,
            vetoes,
            ended,
            trail,
            parties: n
                .spec
                .parties
                .iter()
                .map(|p| NegotiationParty {
                    name: p.name.clone(),
                    submitted: n.has_submitted(p.name.as_str()),
                    external: p.external,
                })
                .collect(),
            issues: n
                .spec
                .issues
                .iter()
                .map(|i| NegotiationIssue {
                    name: i.name.clone(),
                    options: i.options.clone(),
                })
                .collect(),
            rounds: n.spec.rounds,
            opened_at: rfc3339(n.opened_at),
            settled_at: n.settled_at.map(rfc3339),
            earlier: n
                .earlier
                .iter()
                .map(|s| NegotiationSitting {
                    result: s.settlement.status(),
                    outcome: match &s.settlement.resolution {
                        Resolution::Agreement { outcome } => Some(choices_map(outcome)),
                        Resolution::WalkAway { .. } => None,
                    },
                    opened_at: rfc3339(s.opened_at),
                    settled_at: rfc3339(s.settled_at),
                })
                .collect(),
        }
    }
}
