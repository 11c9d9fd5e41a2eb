//! Tool profiles: each role sees only the tools it uses, so `tools/list` (read into an
//! agent's context every session) stays under [`PROFILE_BUDGET`]. A tool outside the
//! profile is refused with the name of a profile that has it. Which role holds which tool
//! is the operations' declaration (`baton_app::ops`), not a list of this crate's.

use baton_app::ops::{self, Role};

/// What any role profile's `tools/list` result must stay under, in bytes: 7.5 KB, so
/// each profile keeps the promised 8 KB with room for one more tool.
pub const PROFILE_BUDGET: usize = 7680;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// A worker: what it owes, its orders, its records, raising a need.
    Executor,
    /// Sends work and follows it: orders out, the queue, decisions.
    Planner,
    /// Reads and answers: the order under review, notes, a need.
    Reviewer,
    /// Decides: approvals, the queue, decisions.
    Owner,
    /// Every tool (over the role budgets by design: for people and test clients).
    All,
}

impl Profile {
    pub const ALL: [Profile; 5] = [
        Self::Executor,
        Self::Planner,
        Self::Reviewer,
        Self::Owner,
        Self::All,
    ];

    /// Its name: its role's, or `all`.
    pub fn as_str(self) -> &'static str {
        self.role().map_or("all", Role::as_str)
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// The profile a participant of `role` gets by default: its own, or every tool for a
    /// role without one.
    pub fn for_role(role: &str) -> Self {
        Self::parse(role).unwrap_or(Self::All)
    }

    /// The role whose tools it holds; `None` for every tool.
    fn role(self) -> Option<Role> {
        match self {
            Self::Executor => Some(Role::Executor),
            Self::Planner => Some(Role::Planner),
            Self::Reviewer => Some(Role::Reviewer),
            Self::Owner => Some(Role::Owner),
            Self::All => None,
        }
    }

    /// The tools it holds.
    pub fn tools(self) -> Vec<&'static str> {
        match self.role() {
            Some(role) => ops::profile(role).collect(),
            None => ops::tools().collect(),
        }
    }

    pub fn has(self, tool: &str) -> bool {
        match self.role() {
            Some(role) => ops::by_tool(tool).is_some_and(|o| o.roles.contains(&role)),
            None => ops::by_tool(tool).is_some(),
        }
    }

    /// The first profile (roles first) that has `tool`.
    pub fn holding(tool: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.has(tool))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_has_exactly_the_declared_tools() {
        let router = crate::BatonTools::router();
        let mut names: Vec<&str> = router.map.keys().map(|k| k.as_ref()).collect();
        names.sort();
        let mut all = Profile::All.tools();
        all.sort();
        assert_eq!(names, all);
    }

    /// REFERENCE.md's tables of the tools and of the role profiles are the declarations'.
    #[test]
    fn the_reference_lists_the_declared_tools_and_profiles() {
        let reference = include_str!("../../../docs/REFERENCE.md");
        let mut tools = String::from("| tool | what it does |\n|---|---|\n");
        for op in ops::OPERATIONS {
            if let (Some(tool), Some(declared)) = (op.tool, op.typed) {
                tools.push_str(&format!("| `{tool}` | {} |\n", declared.summary));
            }
        }
        let mut profiles = String::from("| profile | tools |\n|---|---|\n");
        for profile in Profile::ALL.into_iter().filter(|p| *p != Profile::All) {
            profiles.push_str(&format!(
                "| {} | {} |\n",
                profile.as_str(),
                profile.tools().join(", ")
            ));
        }
        for table in [tools, profiles] {
            assert!(
                reference.contains(&table),
                "docs/REFERENCE.md should hold this table, made from the declarations:\n{table}"
            );
        }
    }
}
