//! Refusals in the tools' own words: the text of an `isError` result, the words
//! `baton_app::ops::hints` gives every edge, spelled by naming a tool or an argument —
//! never a command-line flag. An operation the session has no tool for is named as its
//! command line, marked (CLI).

use baton_app::ops::hints::{self, Next, Spell};
use baton_core::Refusal;
use baton_store::StoreError;

use crate::profile::Profile;

/// How MCP spells a refusal's words, for a session holding the tools `has` says.
struct Tools<'a> {
    has: &'a dyn Fn(&str) -> bool,
}

/// Fields and arguments by their names, as the tools take them.
impl Spell for Tools<'_> {
    fn run(&self, next: &Next) -> Option<String> {
        let tool = next.op.tool.filter(|t| (self.has)(t))?;
        Some(format!("`{tool}`"))
    }

    /// A step by its tool's name, even out of this session's profile (saying which has
    /// it); an order's step by its `action`.
    fn step(&self, next: &Next) -> String {
        if let Some(action) = next.action() {
            return action.to_owned();
        }
        match next.op.tool {
            Some(tool) if (self.has)(tool) => format!("`{tool}`"),
            Some(tool) => match Profile::holding(tool) {
                Some(profile) => format!("`{tool}` (in the {} profile)", profile.as_str()),
                None => format!("`{tool}`"),
            },
            None => format!("`baton {}` (CLI)", next.words().join(" ")),
        }
    }

    fn choices(&self, steps: &[Next]) -> String {
        let names: Vec<String> = steps.iter().map(|s| self.step(s)).collect();
        if steps.iter().all(|s| s.action().is_some()) {
            format!(" (`action`): {}", names.join(", "))
        } else {
            format!(": {}", names.join(", "))
        }
    }

    fn again(&self, next: &Next) -> String {
        match next.op.tool {
            Some(tool) => format!("call `{tool}` again"),
            None => "call it again".to_owned(),
        }
    }
}

/// A refusal of a call about `id` (a message or order id; empty when none), as the text
/// of an `isError` result, for a session holding every tool.
#[cfg(test)]
fn refusal(id: &str, r: &Refusal) -> String {
    refusal_in(id, r, &|_| true)
}

/// [`refusal`] for a session holding the tools `has` says.
fn refusal_in(id: &str, r: &Refusal, has: &dyn Fn(&str) -> bool) -> String {
    let about = Some(id).filter(|id| !id.is_empty());
    hints::explain(r, about).text(&Tools { has })
}

/// A failed call about `id`, as the text of an `isError` result, in a session holding
/// the tools `has` says.
pub fn explain(id: &str, e: StoreError, has: &dyn Fn(&str) -> bool) -> String {
    match &e {
        StoreError::Refused(r) => refusal_in(id, r, has),
        StoreError::Busy { .. } | StoreError::Reconnecting { .. } => {
            format!("{e}: call the tool again")
        }
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use baton_core::DeliveryAction as D;
    use baton_core::order::OrderAction;
    use baton_core::refusal::{Action, Blocker, MayAct};
    use baton_core::{Field, InvalidTransition, Record};

    use super::*;

    /// Every refusal a tool can meet, rendered: no command-line flag or command leaks.
    #[test]
    fn refusals_name_tools_and_arguments_never_flags() {
        let t = |action, status, blocker, allowed: Vec<Action>| {
            Refusal::Transition(InvalidTransition {
                action,
                status,
                blocker,
                allowed,
            })
        };
        let cases = [
            (
                t(
                    Action::Delivery(D::Acknowledge),
                    "pending",
                    Some(Blocker::FetchFirst),
                    vec![Action::Delivery(D::Fetch), Action::Delivery(D::Refuse)],
                ),
                "cannot `ack` m1: your delivery is pending (fetch it first with `show`); allowed next: `show`, `baton refuse` (CLI)",
            ),
            (
                t(
                    Action::Delivery(D::Acknowledge),
                    "delivered",
                    Some(Blocker::RequestsAreDischarged),
                    vec![],
                ),
                "`complete` or `hand_back`",
            ),
            (
                t(
                    Action::Order(OrderAction::Start),
                    "offered",
                    Some(Blocker::AcceptFirst),
                    vec![
                        Action::Order(OrderAction::Accept),
                        Action::Order(OrderAction::Decline),
                    ],
                ),
                "cannot start order m1: it is offered (accept it first); allowed next (`action`): accept, decline",
            ),
            (Refusal::Missing(Field::Reason), "(`reason`)"),
            (Refusal::Missing(Field::Why), "`why` must not be empty"),
            (Refusal::Missing(Field::Tried), "`tried` must not be empty"),
            (
                Refusal::Missing(Field::Answer),
                "`text` (the answer) cannot be empty",
            ),
            (Refusal::SenderNote, "call `reply`"),
            (
                Refusal::not_found(Record::Message, "m9"),
                "no message m9 in this project: check `id`",
            ),
            (
                Refusal::not_found(Record::Decision, "D-9"),
                "no decision D-9: `resume` lists the current ones",
            ),
            (
                Refusal::not_found(Record::Order, "wo_9"),
                "no order wo_9 in this project: check `id`",
            ),
            (
                Refusal::NoRecipient {
                    name: "ghost".into(),
                    registered: vec!["impl-1".into(), "planner".into()],
                },
                "`to`: no participant \"ghost\" in this project; registered: impl-1, planner",
            ),
            (
                Refusal::Moved {
                    order: "wo_1".into(),
                    expected: 7,
                    seq: 1,
                },
                "read it again with `order_show` and decide anew, then call `order` again with `expect_seq`",
            ),
            (
                Refusal::OrderRole {
                    actor: "impl-1".into(),
                    action: OrderAction::Approve,
                    order: "wo_1".into(),
                    may: MayAct::Sender("planner".into()),
                },
                "impl-1 may not approve order wo_1: only its sender (planner) may",
            ),
            (
                Refusal::SelfSend {
                    name: baton_core::Passname::new("planner").unwrap(),
                },
                "in `to`",
            ),
        ];
        for (refused, expected) in cases {
            let text = refusal("m1", &refused);
            assert!(text.contains(expected), "{expected:?} missing from: {text}");
            // A command line is named only as one, for what no tool does.
            let pieces: Vec<&str> = text.split(" (CLI)").collect();
            let (last, marked) = pieces.split_last().unwrap();
            let mut unmarked: String = marked
                .iter()
                .map(|t| t.rsplit_once("`baton ").map_or(*t, |(t, _)| t))
                .collect();
            unmarked.push_str(last);
            assert!(!unmarked.contains("--"), "a CLI flag leaked: {text}");
            assert!(
                !text.contains("`baton show") && !text.contains("baton state"),
                "a CLI command leaked: {text}"
            );
        }
    }

    /// Every refusal, rendered for a session of each profile: each tool a hint tells the
    /// agent to call is one that session holds; a step it names out of the profile is a
    /// tool some profile holds, said so; anything else is named as a command line.
    #[test]
    fn every_refusal_names_tools_the_session_holds() {
        use baton_app::ops::hints::{Named, Noting, every_refusal};
        let router = crate::BatonTools::router();
        for profile in Profile::ALL {
            let has = |tool: &str| profile.has(tool);
            let tools = Tools { has: &has };
            for about in [None, Some("m1")] {
                for r in every_refusal() {
                    let noting = Noting::new(&tools);
                    let text = hints::explain(&r, about).text(&noting);
                    assert!(!text.contains("--") || text.contains("(CLI)"), "{text}");
                    for named in noting.named.into_inner() {
                        match named {
                            Named::Run(next) => {
                                let tool = next.op.tool.unwrap();
                                assert!(
                                    profile.tools().contains(&tool) && router.has_route(tool),
                                    "{}: {tool} named in {text}",
                                    profile.as_str()
                                );
                            }
                            Named::Step(next) if next.action().is_none() => {
                                if let Some(tool) = next.op.tool {
                                    assert!(router.has_route(tool), "{tool}");
                                    assert!(
                                        profile.has(tool)
                                            || text.contains(&format!("`{tool}` (in the ")),
                                        "{}: {text}",
                                        profile.as_str()
                                    );
                                } else {
                                    assert!(text.contains("(CLI)"), "{text}");
                                }
                            }
                            Named::Step(next) => {
                                assert_eq!(next.op.tool, Some("order"), "{text}")
                            }
                            Named::Elsewhere(next) => assert!(
                                next.op.tool.is_none_or(|t| !profile.has(t)),
                                "{}: {} named on the command line in {text}",
                                profile.as_str(),
                                next.command_line()
                            ),
                            Named::Again(_) => {}
                        }
                    }
                }
            }
        }
    }
}
