//! Participants: the passnames registered in a project, each with a role.

use serde::Serialize;

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
}

/// Registering `name` with `role`, given who holds the name now: the change to append, or
/// `None` when it is already registered with that role (adding it again is harmless).
pub fn plan_add(
    existing: Option<&Participant>,
    name: &Passname,
    role: &str,
) -> Result<Option<Change>, Refusal> {
    let role = role.trim();
    if role.is_empty() || role.chars().count() > MAX_ROLE_CHARS || role.contains(char::is_control) {
        return Err(Refusal::Role {
            role: role.to_owned(),
        });
    }
    match existing {
        Some(p) if p.role == role => Ok(None),
        Some(p) => Err(Refusal::RoleTaken {
            name: name.clone(),
            role: p.role.clone(),
        }),
        None => Ok(Some(Change::ParticipantAdded {
            name: name.clone(),
            role: role.to_owned(),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_takes_one_role() {
        let planner = Passname::new("planner").unwrap();
        assert!(matches!(
            plan_add(None, &planner, " planner "),
            Ok(Some(Change::ParticipantAdded { role, .. })) if role == "planner"
        ));
        let existing = Participant {
            name: planner.clone(),
            role: "planner".into(),
            added_at: 0,
        };
        assert_eq!(plan_add(Some(&existing), &planner, "planner"), Ok(None));
        assert!(matches!(
            plan_add(Some(&existing), &planner, "executor"),
            Err(Refusal::RoleTaken { .. })
        ));
        for bad in ["", "  ", "a\u{7}", &"r".repeat(65)] {
            assert!(
                matches!(plan_add(None, &planner, bad), Err(Refusal::Role { .. })),
                "{bad:?}"
            );
        }
    }
}
