//! Participants: the passnames registered in a project, each with a role.

use serde::{Deserialize, Serialize};

use crate::authority::Policy;
use crate::event::Change;
use crate::names::Passname;
use crate::refusal::Refusal;
use crate::time::Millis;

/// Longest role, in characters.
pub const MAX_ROLE_CHARS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Participant {
    pub name: Passname,
    pub role: String,
    pub added_at: Millis,
    /// The policy set for it; `None`, its role's default ([`Participant::policy`]).
    pub policy: Option<Policy>,
}

/// The kind of the event that makes a participant an outside A2A agent.
pub const A2A_KIND: &str = "participant.a2a";
/// Longest name of the environment variable holding an outside agent's key.
pub const MAX_KEY_ENV: usize = 64;

/// An outside agent a participant stands for: requests to the participant are handed to
/// the A2A agent at `url`, with the key the server finds in its environment variable
/// `key_env` (the key itself is never stored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OutsideAgent {
    pub url: String,
    pub key_env: String,
}

impl OutsideAgent {
    /// The agent at `url` (an http or https URL) with its key in `key_env` (an
    /// environment variable's name: `A-Z`, `0-9` and `_`, not starting with a digit).
    pub fn new(url: &str, key_env: &str) -> Result<Self, Refusal> {
        let url = crate::webhook::check_url(url).map_err(|refusal| match refusal {
            Refusal::WebhookUrl { url, why } => Refusal::AgentUrl { url, why },
            other => other,
        })?;
        if !env_name(key_env) {
            return Err(Refusal::KeyEnv {
                name: key_env.chars().take(80).collect(),
            });
        }
        Ok(Self {
            url,
            key_env: key_env.to_owned(),
        })
    }
}

/// Whether `name` is an environment variable's name as Baton takes one: `A-Z`, `0-9` and
/// `_`, not starting with a digit, at most [`MAX_KEY_ENV`] bytes.
fn env_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_KEY_ENV
        && !bytes[0].is_ascii_digit()
        && bytes
            .iter()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
}

/// What a server lets outside agents be — the operator's choice, never a project's:
/// the environment variables that may hold their keys (each a name, or a prefix ending
/// in `*`), and whether their URLs may name loopback, private or link-local addresses
/// (a server for local testing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admission {
    key_envs: Vec<String>,
    pub private: bool,
}

impl Admission {
    /// Admits keys from the variables `key_envs` names (`BATON_AGENT_KEY`, or `AGENT_*`
    /// for every variable starting `AGENT_`); refused naming the first entry that is
    /// neither.
    pub fn new(key_envs: &[String], private: bool) -> Result<Self, Refusal> {
        for entry in key_envs {
            let name = entry.strip_suffix('*').unwrap_or(entry);
            if !env_name(name) {
                return Err(Refusal::KeyEnv {
                    name: entry.chars().take(80).collect(),
                });
            }
        }
        Ok(Self {
            key_envs: key_envs.to_vec(),
            private,
        })
    }

    /// Whether an outside agent's key may be read from the variable `name`.
    pub fn allows_key(&self, name: &str) -> bool {
        env_name(name)
            && self
                .key_envs
                .iter()
                .any(|entry| match entry.strip_suffix('*') {
                    Some(prefix) => name.starts_with(prefix),
                    None => entry == name,
                })
    }

    /// The outside agent at `url` with its key in `key_env`, when this server would
    /// reach it: a well-formed URL at an address it reaches, and a variable its operator
    /// listed.
    pub fn admit(&self, url: &str, key_env: &str) -> Result<OutsideAgent, Refusal> {
        let agent = OutsideAgent::new(url, key_env)?;
        if !self.allows_key(&agent.key_env) {
            let listed = if self.key_envs.is_empty() {
                "none".to_owned()
            } else {
                self.key_envs.join(", ")
            };
            return Err(Refusal::KeyEnvNotListed {
                name: agent.key_env,
                listed,
            });
        }
        crate::webhook::check_destination_for(
            crate::webhook::Destination::OutsideAgent,
            &agent.url,
            self.private,
        )?;
        Ok(agent)
    }
}

/// The outside agent `name` stands for now, from its `participant.a2a` events (oldest
/// first): the last one's.
pub fn outside_agent(events: &[crate::event::Event]) -> Option<OutsideAgent> {
    events.iter().rev().find_map(|e| match &e.change {
        Change::A2aAgent { agent, .. } => Some(agent.clone()),
        _ => None,
    })?
}

/// Making `name` stand for `agent`, given the agent it stands for now: the change to
/// append, or none when it is the same.
pub fn plan_outside(
    current: Option<&OutsideAgent>,
    name: &Passname,
    agent: OutsideAgent,
) -> Option<Change> {
    (current != Some(&agent)).then(|| Change::A2aAgent {
        name: name.clone(),
        agent: Some(agent),
    })
}

/// Registering `name` with `role` (and `policy`, when one is given), given who holds the
/// name now: the changes to append — none when it is registered already with that role
/// and that policy (adding it again is harmless); a given policy that differs is set.
pub fn plan_add(
    existing: Option<&Participant>,
    name: &Passname,
    role: &str,
    policy: Option<Policy>,
) -> Result<Vec<Change>, Refusal> {
    let role = role.trim();
    if role.is_empty() || role.chars().count() > MAX_ROLE_CHARS || role.contains(char::is_control) {
        return Err(Refusal::Role {
            role: role.to_owned(),
        });
    }
    let mut changes = Vec::new();
    match existing {
        Some(p) if p.role != role => {
            return Err(Refusal::RoleTaken {
                name: name.clone(),
                role: p.role.clone(),
            });
        }
        Some(_) => {}
        None => changes.push(Change::ParticipantAdded {
            name: name.clone(),
            role: role.to_owned(),
        }),
    }
    let current = existing.and_then(|p| p.policy.as_ref());
    if let Some(policy) = policy
        && current != Some(&policy)
    {
        changes.push(Change::PolicySet {
            name: name.clone(),
            policy: Some(policy),
        });
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outside_agent_names_a_url_and_the_variable_holding_its_key() {
        let agent = OutsideAgent::new(" https://agents.example.org/a2a ", "RESEARCH_KEY").unwrap();
        assert_eq!(agent.url, "https://agents.example.org/a2a");
        for bad in [
            "",
            "research_key",
            "1KEY",
            "KEY-1",
            "A KEY",
            &"K".repeat(65),
        ] {
            assert!(
                matches!(
                    OutsideAgent::new("https://a.example", bad),
                    Err(Refusal::KeyEnv { .. })
                ),
                "{bad:?}"
            );
        }
        assert!(matches!(
            OutsideAgent::new("ftp://a.example", "KEY"),
            Err(Refusal::AgentUrl { .. })
        ));
        assert!(OutsideAgent::new("https://user:pw@a.example", "KEY").is_err());
    }

    #[test]
    fn the_last_outside_agent_set_stands_and_setting_it_again_changes_nothing() {
        let name = Passname::new("researcher").unwrap();
        let one = OutsideAgent::new("https://one.example", "ONE").unwrap();
        let two = OutsideAgent::new("https://two.example", "TWO").unwrap();
        let event = |seq, change| crate::event::Event {
            seq,
            id: format!("e{seq}"),
            at: 0,
            actor: "@local".into(),
            change,
        };
        let first = plan_outside(None, &name, one.clone()).unwrap();
        assert_eq!(plan_outside(Some(&one), &name, one.clone()), None);
        let second = plan_outside(Some(&one), &name, two.clone()).unwrap();
        assert_eq!(outside_agent(&[]), None);
        assert_eq!(
            outside_agent(&[event(1, first), event(2, second)]),
            Some(two)
        );
    }

    #[test]
    fn a_name_takes_one_role() {
        let planner = Passname::new("planner").unwrap();
        assert!(matches!(
            plan_add(None, &planner, " planner ", None).as_deref(),
            Ok([Change::ParticipantAdded { role, .. }]) if role == "planner"
        ));
        let existing = Participant {
            name: planner.clone(),
            role: "planner".into(),
            added_at: 0,
            policy: None,
        };
        assert_eq!(
            plan_add(Some(&existing), &planner, "planner", None),
            Ok(vec![])
        );
        assert!(matches!(
            plan_add(Some(&existing), &planner, "executor", None),
            Err(Refusal::RoleTaken { .. })
        ));
        // A policy given with the role is set, once.
        let narrow = Policy::for_role("observer");
        assert!(matches!(
            plan_add(Some(&existing), &planner, "planner", Some(narrow.clone())).as_deref(),
            Ok([Change::PolicySet { .. }])
        ));
        assert!(matches!(
            plan_add(None, &planner, "planner", Some(narrow.clone())).as_deref(),
            Ok([Change::ParticipantAdded { .. }, Change::PolicySet { .. }])
        ));
        let holding = Participant {
            policy: Some(narrow.clone()),
            ..existing.clone()
        };
        assert_eq!(
            plan_add(Some(&holding), &planner, "planner", Some(narrow)),
            Ok(vec![])
        );
        for bad in ["", "  ", "a\u{7}", &"r".repeat(65)] {
            assert!(
                matches!(
                    plan_add(None, &planner, bad, None),
                    Err(Refusal::Role { .. })
                ),
                "{bad:?}"
            );
        }
    }
}

#[cfg(test)]
mod admission_tests {
    use super::*;

    #[test]
    fn only_the_variables_the_operator_lists_may_hold_an_outside_agents_key() {
        let admission =
            Admission::new(&["RESEARCHER_KEY".into(), "AGENT_KEY_*".into()], false).unwrap();
        for listed in ["RESEARCHER_KEY", "AGENT_KEY_A", "AGENT_KEY_"] {
            assert!(admission.allows_key(listed), "{listed}");
        }
        for other in [
            "PGPASSWORD",
            "BATON_DB",
            "PATH",
            "RESEARCHER_KEY2",
            "AGENT_KEY",
        ] {
            assert!(!admission.allows_key(other), "{other}");
            assert!(
                matches!(
                    admission.admit("https://agent.example.com/", other),
                    Err(Refusal::KeyEnvNotListed { .. })
                ),
                "{other}"
            );
        }
        assert!(!Admission::default().allows_key("RESEARCHER_KEY"));
        assert!(Admission::new(&["lower".into()], false).is_err());
        assert!(Admission::new(&["*".into()], false).is_err());
        assert!(matches!(
            admission.admit("http://127.0.0.1:9/", "RESEARCHER_KEY"),
            Err(Refusal::AgentUrl { .. })
        ));
        assert!(
            admission
                .admit("https://agent.example.com/", "AGENT_KEY_A")
                .is_ok()
        );
    }
}
