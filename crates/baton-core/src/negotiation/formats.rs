//! The negotiation's documents: the spec (issues and their options, hard constraints, a
//! round limit, the parties), each party's private position (weights, utilities, a floor,
//! vetoes) with its utility and answer to an outcome, and the settlement the engine
//! returns (the trail of offers and how it ended). Reading them from JSON is `input.rs`.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::names::Passname;

/// Some issues, each with one option, in the spec's order of issues: a hard constraint, a
/// veto or (naming every issue) an outcome. Serialized as a JSON object `{issue: option}`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Choices(pub Vec<(String, String)>);

impl Choices {
    /// Whether `outcome` (a whole outcome) makes every one of these choices.
    pub fn matched_by(&self, outcome: &Choices) -> bool {
        self.0
            .iter()
            .all(|(issue, option)| outcome.option(issue) == Some(option.as_str()))
    }

    pub fn option(&self, issue: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(i, _)| i == issue)
            .map(|(_, o)| o.as_str())
    }

    /// `db=postgres deploy=single`.
    pub fn text(&self) -> String {
        self.0
            .iter()
            .map(|(i, o)| format!("{i}={o}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Serialize for Choices {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (issue, option) in &self.0 {
            map.serialize_entry(issue, option)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Choices {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Pairs;
        impl<'de> Visitor<'de> for Pairs {
            type Value = Choices;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of issue to option")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Choices, A::Error> {
                let mut pairs = Vec::new();
                while let Some(pair) = map.next_entry::<String, String>()? {
                    pairs.push(pair);
                }
                Ok(Choices(pairs))
            }
        }
        deserializer.deserialize_map(Pairs)
    }
}

/// What is being negotiated, by whom, within how many offers. Public to every party.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    pub id: String,
    /// The most offers the trail may hold.
    pub rounds: u32,
    pub issues: Vec<Issue>,
    /// Partial outcomes that are never acceptable: no offer ever makes one.
    #[serde(default)]
    pub constraints: Vec<Choices>,
    pub parties: Vec<Party>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Issue {
    pub name: String,
    pub options: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Party {
    pub name: Passname,
    /// Where its position is, for `baton negotiate SPEC.json` (relative to the spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<String>,
    /// Not a participant of the project (a vendor, another team): declared so, its
    /// position is submitted for it by a participant. Every other party is a participant.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub external: bool,
}

impl Spec {
    pub fn party(&self, name: &str) -> Option<&Party> {
        self.parties.iter().find(|p| p.name.as_str() == name)
    }

    pub(super) fn issue(&self, name: &str) -> Option<(usize, &Issue)> {
        self.issues.iter().enumerate().find(|(_, i)| i.name == name)
    }
}

/// One party's private preferences. Stored only in its `submitted` event; never shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Position {
    /// Issue → weight (≥ 0); an issue left out weighs 0.
    pub weights: BTreeMap<String, f64>,
    /// Issue → option → utility in [0, 1]; an option left out is worth 0.
    pub utilities: BTreeMap<String, BTreeMap<String, f64>>,
    /// The least utility this party accepts.
    pub floor: f64,
    /// Partial outcomes this party rejects outright.
    #[serde(default)]
    pub veto: Vec<Choices>,
}

impl Position {
    /// What `option` of `issue` adds to this party's utility: `w · u`.
    pub(super) fn gain(&self, issue: &str, option: &str) -> f64 {
        let weight = self.weights.get(issue).copied().unwrap_or(0.0);
        let utility = self
            .utilities
            .get(issue)
            .and_then(|u| u.get(option))
            .copied()
            .unwrap_or(0.0);
        weight * utility
    }

    /// `U(o) = Σ wᵢ·uᵢ(oᵢ)`, summed in the spec's order of issues (the engine sums in the
    /// same order, so the same outcome always has the same utility to the last bit).
    pub fn utility(&self, spec: &Spec, outcome: &Choices) -> f64 {
        let mut total = 0.0;
        for issue in &spec.issues {
            if let Some(option) = outcome.option(&issue.name) {
                total += self.gain(&issue.name, option);
            }
        }
        total
    }

    /// The first of this party's vetoes `outcome` matches.
    pub fn vetoed(&self, outcome: &Choices) -> Option<&Choices> {
        self.veto.iter().find(|v| v.matched_by(outcome))
    }

    /// Accept when `U(o) ≥ floor` and no veto matches; a veto outranks a reject.
    pub fn answer(&self, spec: &Spec, outcome: &Choices) -> Answer {
        if self.vetoed(outcome).is_some() {
            Answer::Veto
        } else if self.utility(spec, outcome) >= self.floor {
            Answer::Accept
        } else {
            Answer::Reject
        }
    }
}

// ---- what a settlement is -----------------------------------------------------------------

/// A party's answer to an offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Accept,
    Reject,
    Veto,
}

impl Answer {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accept => "accept",
            Self::Reject => "reject",
            Self::Veto => "veto",
        }
    }
}

/// One offer of the trail and every party's answer to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offer {
    /// 1, 2, …: one offer a round.
    pub round: u32,
    /// A party's passname, or [`MEDIATOR`](super::MEDIATOR).
    pub proposer: String,
    pub outcome: Choices,
    /// Party → answer, in passname order.
    pub answers: BTreeMap<String, Answer>,
}

/// Why a negotiation ended without an agreement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// No feasible outcome meets every floor and no veto: nothing could be agreed.
    NoZone,
    /// An agreement existed, but the round limit came first.
    RoundLimit,
}

/// A veto a party used in the trail: who, and the partial outcome it vetoed (never why).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Veto {
    pub party: String,
    pub vetoed: Choices,
}

/// How a negotiation ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Resolution {
    Agreement {
        outcome: Choices,
    },
    /// What a person reads: the issues the offers could not agree on and the vetoes used.
    WalkAway {
        ended: Ended,
        unsettled: Vec<String>,
        vetoes: Vec<Veto>,
    },
}

/// The engine's result: the trail of offers and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settlement {
    pub trail: Vec<Offer>,
    pub resolution: Resolution,
}
