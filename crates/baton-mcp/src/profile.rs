//! Tool profiles: each role sees only the tools it uses, so `tools/list` (read into an
//! agent's context every session) stays under [`PROFILE_BUDGET`]. A tool outside the
//! profile is refused with the name of a profile that has it.

/// What any role profile's `tools/list` result must stay under, in bytes.
pub const PROFILE_BUDGET: usize = 8 * 1024;

/// Every tool the server has, in no particular order.
pub const ALL_TOOLS: &[&str] = &[
    "inbox",
    "outbox",
    "show",
    "send",
    "reply",
    "ack",
    "complete",
    "hand_back",
    "archive",
    "search",
    "thread",
    "resume",
    "focus",
    "decide",
    "constrain",
    "note",
    "receipt_write",
    "receipt_wait",
    "order",
    "order_show",
    "need",
    "queue",
];

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

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Executor => "executor",
            Self::Planner => "planner",
            Self::Reviewer => "reviewer",
            Self::Owner => "owner",
            Self::All => "all",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// The profile a participant of `role` gets by default: its own, or every tool for a
    /// role without one.
    pub fn for_role(role: &str) -> Self {
        Self::parse(role).unwrap_or(Self::All)
    }

    /// The tools it holds.
    pub fn tools(self) -> &'static [&'static str] {
        match self {
            Self::Executor => &[
                "inbox",
                "show",
                "reply",
                "ack",
                "complete",
                "hand_back",
                "resume",
                "constrain",
                "note",
                "receipt_write",
                "order",
                "order_show",
                "need",
            ],
            Self::Planner => &[
                "inbox",
                "outbox",
                "show",
                "send",
                "reply",
                "search",
                "resume",
                "decide",
                "order",
                "order_show",
                "queue",
            ],
            Self::Reviewer => &[
                "inbox",
                "show",
                "reply",
                "ack",
                "complete",
                "hand_back",
                "search",
                "thread",
                "resume",
                "note",
                "order_show",
                "need",
            ],
            Self::Owner => &[
                "inbox",
                "outbox",
                "show",
                "reply",
                "ack",
                "search",
                "resume",
                "decide",
                "order",
                "order_show",
                "queue",
            ],
            Self::All => ALL_TOOLS,
        }
    }

    pub fn has(self, tool: &str) -> bool {
        self.tools().contains(&tool)
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
    fn every_profile_holds_known_tools_and_every_tool_has_a_role_or_all() {
        for p in Profile::ALL {
            for t in p.tools() {
                assert!(ALL_TOOLS.contains(t), "{} names {t}", p.as_str());
            }
        }
        let router = crate::BatonTools::router();
        let mut names: Vec<&str> = router.map.keys().map(|k| k.as_ref()).collect();
        names.sort();
        let mut all = ALL_TOOLS.to_vec();
        all.sort();
        assert_eq!(names, all);
    }
}
