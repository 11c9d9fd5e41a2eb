//! Participants and their authority: registering one, its policy, the list, and the
//! security events that record what was refused as beyond it.

use baton_core::time::rfc3339;
use baton_core::{Change, Event, Participant, Passname, Power};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A participant's authority: what it may do and where.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PolicyView {
    /// Its powers: request, send, accept, approve, effects.
    pub may: Vec<Power>,
    /// The topics they reach (`billing`, `billing-*`); absent, every topic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topics: Option<Vec<String>>,
    /// True when it is the role's default (it follows the role).
    pub default: bool,
}

impl PolicyView {
    pub fn of(p: &Participant) -> Self {
        let policy = p.policy();
        Self {
            may: policy.may.iter().copied().collect(),
            topics: policy
                .topics
                .map(|t| t.iter().map(|p| p.as_str().to_owned()).collect()),
            default: p.policy.is_none(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AgentAdded {
    pub name: Passname,
    pub role: String,
    /// False when it was registered already, with the same role.
    pub created: bool,
    /// True when the policy given was set (it differed from the one held).
    pub policy_set: bool,
    pub policy: PolicyView,
    /// The outside A2A agent it stands for, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a2a: Option<baton_core::participant::OutsideAgent>,
}
doc!(AgentAdded, "baton/agent-add@1");

impl AgentAdded {
    pub fn new(added: &baton_store::Added) -> Self {
        let p = &added.participant;
        Self {
            name: p.name.clone(),
            role: p.role.clone(),
            created: added.created,
            policy_set: added.policy_set,
            policy: PolicyView::of(p),
            a2a: None,
        }
    }
}

/// A participant's policy after a change.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AgentPolicy {
    pub name: Passname,
    pub role: String,
    pub policy: PolicyView,
}
doc!(AgentPolicy, "baton/agent-policy@1");

impl AgentPolicy {
    pub fn new(p: &Participant) -> Self {
        Self {
            name: p.name.clone(),
            role: p.role.clone(),
            policy: PolicyView::of(p),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AgentRow {
    pub name: Passname,
    pub role: String,
    pub added_at: String,
    pub policy: PolicyView,
    /// The outside A2A agent it stands for, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a2a: Option<baton_core::participant::OutsideAgent>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Agents {
    pub items: Vec<AgentRow>,
}
doc!(Agents, "baton/agent-list@1");

impl Agents {
    /// The participants `all`, each with the outside agent `outside` names for it.
    pub fn new(
        all: &[Participant],
        outside: &[(Passname, baton_core::participant::OutsideAgent)],
    ) -> Self {
        Self {
            items: all
                .iter()
                .map(|p| AgentRow {
                    name: p.name.clone(),
                    role: p.role.clone(),
                    added_at: rfc3339(p.added_at),
                    policy: PolicyView::of(p),
                    a2a: outside
                        .iter()
                        .find(|(name, _)| *name == p.name)
                        .map(|(_, agent)| agent.clone()),
                })
                .collect(),
        }
    }
}

/// One action refused as beyond authority.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SecurityEventRow {
    /// The event's place in the log: pass it as `before` for the page after this one.
    pub seq: i64,
    pub at: String,
    pub participant: Passname,
    /// What was tried: a power (`request`, `approve` …) or what a key's scope did not allow.
    pub action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    pub code: String,
    pub reason: String,
    /// How many times it was refused: this event and the repeats counted on it (the same
    /// refusal again within a minute of it).
    pub count: i64,
    /// When it was last refused.
    pub last_at: String,
}

/// The newest security events, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SecurityEvents {
    pub items: Vec<SecurityEventRow>,
}
doc!(SecurityEvents, "baton/security-events@1");

impl SecurityEvents {
    pub fn new(events: &[Event], repeats: &[baton_store::Repeats]) -> Self {
        Self {
            items: events
                .iter()
                .filter_map(|e| match &e.change {
                    Change::Denied(d) => {
                        let repeated = repeats.iter().find(|r| r.seq == e.seq);
                        Some(SecurityEventRow {
                            seq: e.seq,
                            at: rfc3339(e.at),
                            participant: d.participant.clone(),
                            action: d.action.clone(),
                            topic: d.topic.as_ref().map(|t| t.to_string()),
                            code: d.code.clone(),
                            reason: d.reason.clone(),
                            count: 1 + repeated.map_or(0, |r| r.count),
                            last_at: rfc3339(repeated.map_or(e.at, |r| r.last_at.max(e.at))),
                        })
                    }
                    _ => None,
                })
                .collect(),
        }
    }
}
