//! Participants: the passnames registered in a project, each with a role.

use serde::Serialize;

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
