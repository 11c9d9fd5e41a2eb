//! A negotiation's events, their fold (which keeps the positions private) and the planners
//! that open one and take a position, settling it at the last.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::input::{JsonPath, problem};
use super::{Input, Position, Problem, Resolution, Settlement, Spec, settle};
use crate::event::{Change, Event};
use crate::names::Passname;
use crate::refusal::{Record, Refusal};
use crate::time::Millis;

/// A negotiation's events, all with the negotiation's id as their subject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum NegotiationChange {
    Opened {
        spec: Spec,
    },
    /// A party's position: the one place weights, utilities and floors are stored.
    Submitted {
        negotiation: String,
        party: Passname,
        position: Position,
    },
    /// The engine ran: the trail and how it ended.
    Settled {
        negotiation: String,
        settlement: Settlement,
    },
}

impl NegotiationChange {
    pub fn negotiation(&self) -> &str {
        match self {
            Self::Opened { spec } => &spec.id,
            Self::Submitted { negotiation, .. } | Self::Settled { negotiation, .. } => negotiation,
        }
    }
}

/// Where a negotiation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Waiting for positions.
    Open,
    Agreement,
    WalkAway,
}

/// A negotiation: the fold of its events. A settled negotiation opened again under its
/// id starts a new sitting; the sittings before are kept, settled, in `earlier`.
#[derive(Debug, Clone, PartialEq)]
pub struct Negotiation {
    pub spec: Spec,
    /// The log position of its newest `opened` event.
    pub log_seq: i64,
    pub opened_at: Millis,
    pub opened_by: String,
    /// Private: only the engine reads positions, so nothing shown can hold one.
    positions: BTreeMap<String, Position>,
    pub settlement: Option<Settlement>,
    pub settled_at: Option<Millis>,
    /// The sittings settled before this one, oldest first.
    pub earlier: Vec<Sitting>,
}

/// A settled sitting of a negotiation that was opened again after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sitting {
    pub spec: Spec,
    pub opened_at: Millis,
    pub settlement: Settlement,
    pub settled_at: Millis,
}

impl Negotiation {
    /// Applies one event to the negotiation so far (`None` before its `opened`). Lenient,
    /// as replay must not fail: [`plan_submit`] validates at write time.
    pub fn fold(current: Option<Self>, event: &Event) -> Option<Self> {
        let Change::Negotiation(change) = &event.change else {
            return current;
        };
        match change {
            NegotiationChange::Opened { spec } => {
                let mut earlier = Vec::new();
                if let Some(before) = current {
                    earlier = before.earlier;
                    if let (Some(settlement), Some(settled_at)) =
                        (before.settlement, before.settled_at)
                    {
                        earlier.push(Sitting {
                            spec: before.spec,
                            opened_at: before.opened_at,
                            settlement,
                            settled_at,
                        });
                    }
                }
                Some(Self {
                    spec: spec.clone(),
                    log_seq: event.seq,
                    opened_at: event.at,
                    opened_by: event.actor.clone(),
                    positions: BTreeMap::new(),
                    settlement: None,
                    settled_at: None,
                    earlier,
                })
            }
            NegotiationChange::Submitted {
                party, position, ..
            } => {
                let mut n = current?;
                n.positions.insert(party.to_string(), position.clone());
                Some(n)
            }
            NegotiationChange::Settled { settlement, .. } => {
                let mut n = current?;
                n.settlement = Some(settlement.clone());
                n.settled_at = Some(event.at);
                Some(n)
            }
        }
    }

    /// Folds one negotiation's events, in log order.
    pub fn replay<'a>(events: impl IntoIterator<Item = &'a Event>) -> Option<Self> {
        events.into_iter().fold(None, Self::fold)
    }

    pub fn id(&self) -> &str {
        &self.spec.id
    }

    pub fn status(&self) -> Status {
        self.settlement
            .as_ref()
            .map_or(Status::Open, Settlement::status)
    }

    /// Whether `party` submitted its position (never what it holds).
    pub fn has_submitted(&self, party: &str) -> bool {
        self.positions.contains_key(party)
    }

    /// The parties yet to submit, in the spec's order.
    pub fn waiting_for(&self) -> Vec<&Passname> {
        self.spec
            .parties
            .iter()
            .map(|p| &p.name)
            .filter(|name| !self.has_submitted(name.as_str()))
            .collect()
    }
}

impl Settlement {
    /// How it ended: an agreement or a walk-away.
    pub fn status(&self) -> Status {
        match self.resolution {
            Resolution::Agreement { .. } => Status::Agreement,
            Resolution::WalkAway { .. } => Status::WalkAway,
        }
    }
}

/// Opens a negotiation, or a new sitting of a settled one under the same id: refused
/// while one under its id waits for positions, and at the first party that is neither
/// among `registered` (the spec's parties that are participants) nor declared external.
pub fn plan_open(
    existing: Option<&Negotiation>,
    spec: Spec,
    registered: &[Passname],
) -> Result<Change, Refusal> {
    if existing.is_some_and(|n| n.settlement.is_none()) {
        return Err(Refusal::NegotiationExists { id: spec.id });
    }
    if let Some(i) = spec
        .parties
        .iter()
        .position(|p| !p.external && !registered.contains(&p.name))
    {
        return Err(problem(
            &Input::Spec,
            &JsonPath::root().key("parties").index(i).key("name"),
            Problem::Unregistered,
        ));
    }
    Ok(Change::Negotiation(NegotiationChange::Opened { spec }))
}

/// `party`'s `position` (JSON, checked here against the spec) submitted to negotiation
/// `id` by `submitter`: the party itself, or a participant for an external party (`None`
/// when a spec is run in one go, every position handed over by whoever runs it). Refused
/// when there is no such negotiation, `party` is not one of its parties, the submitter is
/// another participant's stand-in, it is settled, or `party` submitted already. The last
/// position also settles it: the changes are the submission and, then, the settlement.
pub fn plan_submit(
    current: Option<&Negotiation>,
    id: &str,
    submitter: Option<&str>,
    party: &Passname,
    position: &Value,
) -> Result<Vec<Change>, Refusal> {
    let Some(negotiation) = current else {
        return Err(Refusal::not_found(Record::Negotiation, id));
    };
    let Some(named) = negotiation.spec.party(party.as_str()) else {
        return Err(Refusal::NotANegotiator {
            id: id.to_owned(),
            party: party.to_string(),
            parties: negotiation
                .spec
                .parties
                .iter()
                .map(|p| p.name.to_string())
                .collect(),
        });
    };
    if let Some(actor) = submitter.filter(|a| *a != party.as_str() && !named.external) {
        return Err(Refusal::OwnPosition {
            id: id.to_owned(),
            actor: actor.to_owned(),
            party: party.to_string(),
        });
    }
    if negotiation.settlement.is_some() {
        return Err(Refusal::NegotiationSettled { id: id.to_owned() });
    }
    if negotiation.has_submitted(party.as_str()) {
        return Err(Refusal::PositionSubmitted {
            id: id.to_owned(),
            party: party.to_string(),
        });
    }
    let position = Position::from_value(position, &negotiation.spec, party.as_str())?;
    let mut changes = vec![Change::Negotiation(NegotiationChange::Submitted {
        negotiation: id.to_owned(),
        party: party.clone(),
        position: position.clone(),
    })];
    let mut positions = negotiation.positions.clone();
    positions.insert(party.to_string(), position);
    if positions.len() == negotiation.spec.parties.len() {
        changes.push(Change::Negotiation(NegotiationChange::Settled {
            negotiation: id.to_owned(),
            settlement: settle(&negotiation.spec, &positions),
        }));
    }
    Ok(changes)
}
