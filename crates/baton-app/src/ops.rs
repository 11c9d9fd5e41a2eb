//! Every operation a user or agent can do, declared once: its name, what it takes of the
//! caller's authority, whether it needs this machine, whether repeating it changes
//! nothing more, and the roles whose MCP profile holds it. The edges read their shape from
//! here — which MCP tools a role is offered, which tools change nothing (what a read key
//! may call) and are idempotent — instead of keeping lists of their own.
//!
//! The power an operation takes is enforced once, in the store's write path, by the
//! core's rules (`baton_core::authority`); a declaration names that power so the edges
//! and the tests can be held to it (every write takes one, memory writes included).

use baton_core::authority::{MEMORY, Power};

/// What an operation takes of the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// It changes nothing: any participant may, with any key.
    Read,
    /// A step on what was sent to oneself (acknowledge, hand back, refuse, archive) or on
    /// one's own request: no power, only being its party. Whatever a participant was sent
    /// it can always close.
    Own,
    /// This power (on the operation's topic, where it has one).
    Power(Power),
    /// One of these, as the input decides: a request takes `request` and a message
    /// `send`; a recipient's completion `accept`; an order's worker steps `accept` and
    /// its sender `approve`.
    OneOf(&'static [Power]),
    /// Administration: the machine holding the store, or an admin key.
    Admin,
}

impl Needs {
    /// Whether the operation writes.
    pub fn writes(self) -> bool {
        self != Self::Read
    }
}

/// Where an operation can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Wherever the store is reached: locally, or over a server.
    Anywhere,
    /// Only where the project's checkout and processes are: it runs a process, reads the
    /// checkout or opens the store's files.
    Local,
}

/// A participant role with an MCP profile of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Executor,
    Planner,
    Reviewer,
    Owner,
}

impl Role {
    pub const ALL: [Role; 4] = [Self::Executor, Self::Planner, Self::Reviewer, Self::Owner];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Executor => "executor",
            Self::Planner => "planner",
            Self::Reviewer => "reviewer",
            Self::Owner => "owner",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// One operation.
#[derive(Debug, Clone, Copy)]
pub struct Operation {
    /// Its name: the command's words (`order approve`).
    pub name: &'static str,
    /// Its MCP tool, when agents reach it over MCP.
    pub tool: Option<&'static str>,
    pub needs: Needs,
    pub reach: Reach,
    /// Repeating it with the same input changes nothing more.
    pub idempotent: bool,
    /// The roles whose MCP profile holds its tool.
    pub roles: &'static [Role],
}

use Needs::*;
use Reach::*;
use Role::*;

const EVERY_ROLE: &[Role] = &Role::ALL;
const REQUEST_OR_SEND: &[Power] = &[Power::Request, Power::Send];
const ACCEPT_OR_APPROVE: &[Power] = &[Power::Accept, Power::Approve, Power::Request];

const fn op(name: &'static str, needs: Needs) -> Operation {
    Operation {
        name,
        tool: None,
        needs,
        reach: Anywhere,
        idempotent: false,
        roles: &[],
    }
}

const fn tool(
    name: &'static str,
    tool: &'static str,
    needs: Needs,
    idempotent: bool,
    roles: &'static [Role],
) -> Operation {
    Operation {
        name,
        tool: Some(tool),
        needs,
        reach: Anywhere,
        idempotent,
        roles,
    }
}

const fn local(name: &'static str, needs: Needs) -> Operation {
    Operation {
        name,
        tool: None,
        needs,
        reach: Local,
        idempotent: false,
        roles: &[],
    }
}

/// Every operation.
pub const OPERATIONS: &[Operation] = &[
    // The inbox: messages and their lifecycle.
    tool("inbox", "inbox", Read, true, EVERY_ROLE),
    tool("outbox", "outbox", Read, true, &[Planner, Owner]),
    // Showing marks a pending delivery delivered: a write of one's own, done once.
    tool("show", "show", Own, true, EVERY_ROLE),
    tool("send", "send", OneOf(REQUEST_OR_SEND), false, &[Planner]),
    tool("reply", "reply", Power(Power::Send), false, EVERY_ROLE),
    tool(
        "ack",
        "ack",
        Own,
        true,
        &[Executor, Planner, Reviewer, Owner],
    ),
    tool(
        "complete",
        "complete",
        OneOf(&[Power::Accept]),
        true,
        &[Executor, Planner, Reviewer, Owner],
    ),
    tool("hand-back", "hand_back", Own, true, &[Executor, Reviewer]),
    op("refuse", Own),
    tool("archive", "archive", Own, true, &[Planner, Owner]),
    tool("search", "search", Read, true, &[Reviewer]),
    tool("thread", "thread", Read, true, &[Reviewer]),
    op("wait", Read),
    // Project memory.
    tool("resume", "resume", Read, true, EVERY_ROLE),
    tool("focus", "focus", Power(MEMORY), true, &[]),
    tool("decide", "decide", Power(MEMORY), false, &[Planner, Owner]),
    tool("constrain", "constrain", Power(MEMORY), false, &[Executor]),
    tool("note", "note", Power(MEMORY), false, &[Executor, Reviewer]),
    op("stream", Power(MEMORY)),
    op("session end", Power(MEMORY)),
    op("state", Read),
    op("state render", Read),
    op("state import", Power(MEMORY)),
    op("alerts", Read),
    op("alerts ack", Power(MEMORY)),
    tool(
        "receipt write",
        "receipt_write",
        Power(MEMORY),
        true,
        &[Executor],
    ),
    tool("receipt wait", "receipt_wait", Power(MEMORY), true, &[]),
    op("receipt show", Read),
    local("receipt verify", Read),
    // Work Orders.
    tool(
        "order",
        "order",
        OneOf(ACCEPT_OR_APPROVE),
        false,
        &[Executor, Planner, Owner],
    ),
    tool(
        "order show",
        "order_show",
        Read,
        true,
        &[Executor, Planner, Reviewer, Owner],
    ),
    op("order list", Read),
    // Approving an order that holds effects runs them: where the upstream can be started.
    op("order approve", Power(Power::Approve)),
    local("gateway", Power(Power::Accept)),
    local("handoff", Read),
    local("check", Read),
    local("evidence run", Power(MEMORY)),
    // The gate.
    local("review", Power(Power::Approve)),
    tool("need", "need", Power(MEMORY), false, &[Executor, Reviewer]),
    tool("queue", "queue", Read, true, &[Owner]),
    op("queue ack", Power(MEMORY)),
    // Track records are read from this machine's store only (no route serves them).
    local("record", Read),
    local("negotiate", Power(MEMORY)),
    // The ledger.
    local("run", Power(MEMORY)),
    op("runs", Read),
    // A hook records what an agent did and never fails: it is an observation, recorded as
    // its participant, or as the local operator for a name no one registered.
    local("hook", Read),
    local("reap", Admin),
    op("status", Read),
    op("metrics", Read),
    local("board", Read),
    // Administration.
    local("init", Admin),
    local("project", Admin),
    op("agent add", Admin),
    op("agent list", Read),
    op("agent policy", Admin),
    op("agent webhook", Admin),
    op("agent webhooks", Admin),
    op("key issue", Admin),
    op("key list", Admin),
    op("key revoke", Admin),
    op("security-events", Admin),
    local("export", Read),
    local("import", Admin),
    local("serve", Admin),
    local("mcp", Read),
    // The demo makes a throwaway project of its own, and its cast runs inside it.
    local("demo", Admin),
    local("demo-part", Admin),
];

/// The operation reached as MCP tool `tool`.
pub fn by_tool(tool: &str) -> Option<&'static Operation> {
    OPERATIONS.iter().find(|o| o.tool == Some(tool))
}

/// Where the command `top` (a command line's first word: `order`, `review`) runs: only
/// here when every operation it names needs this machine, anywhere otherwise (a command
/// with one local operation, such as `receipt verify`, refuses that one when it runs);
/// `None` for a command nothing declares.
pub fn command_reach(top: &str) -> Option<Reach> {
    let mut ops = OPERATIONS
        .iter()
        .filter(|o| o.name == top || o.name.strip_prefix(top).is_some_and(|r| r.starts_with(' ')))
        .peekable();
    ops.peek()?;
    Some(if ops.all(|o| o.reach == Local) {
        Local
    } else {
        Anywhere
    })
}

/// Every MCP tool.
pub fn tools() -> impl Iterator<Item = &'static str> {
    OPERATIONS.iter().filter_map(|o| o.tool)
}

/// The MCP tools `role`'s profile holds.
pub fn profile(role: Role) -> impl Iterator<Item = &'static str> {
    OPERATIONS
        .iter()
        .filter(move |o| o.roles.contains(&role))
        .filter_map(|o| o.tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_operation_and_each_tool_is_declared_once() {
        let mut names: Vec<&str> = OPERATIONS.iter().map(|o| o.name).collect();
        names.sort();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count, "an operation is declared twice");
        let mut tools: Vec<&str> = tools().collect();
        tools.sort();
        let count = tools.len();
        tools.dedup();
        assert_eq!(tools.len(), count, "a tool is declared twice");
    }

    #[test]
    fn a_tool_in_a_profile_is_reachable_anywhere_and_only_admin_needs_no_participant() {
        for o in OPERATIONS {
            if o.tool.is_some() {
                assert_eq!(o.reach, Anywhere, "{}", o.name);
                assert_ne!(o.needs, Admin, "{}: MCP acts as a participant", o.name);
            }
        }
    }

    #[test]
    fn a_command_runs_only_here_when_all_it_does_needs_this_machine() {
        assert_eq!(command_reach("review"), Some(Local));
        assert_eq!(command_reach("evidence"), Some(Local));
        assert_eq!(command_reach("receipt"), Some(Anywhere));
        assert_eq!(command_reach("order"), Some(Anywhere));
        assert_eq!(command_reach("orders"), None);
    }

    #[test]
    fn each_role_can_close_what_its_part_of_the_round_leaves_open() {
        // A planner sends requests and closes its own end of them; an executor takes
        // work on and closes or hands back what it was sent; a reviewer reads, answers
        // and closes; an owner decides and closes.
        let holds = |role: Role, tools: &[&str]| {
            let profile: Vec<&str> = profile(role).collect();
            for t in tools {
                assert!(profile.contains(t), "{} lacks {t}", role.as_str());
            }
        };
        holds(
            Planner,
            &["send", "show", "complete", "archive", "outbox", "order"],
        );
        holds(
            Executor,
            &["inbox", "show", "ack", "complete", "hand_back", "order"],
        );
        holds(Reviewer, &["inbox", "show", "ack", "complete", "hand_back"]);
        holds(
            Owner,
            &["inbox", "show", "ack", "complete", "archive", "order"],
        );
    }
}
