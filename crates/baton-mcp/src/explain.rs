//! Refusals in the tools' own words: the text of an `isError` result says what to do next
//! by naming a tool or an argument, never a command-line flag. One mapping from the typed
//! refusal to the text; the refusal itself carries no edge's words.

use baton_core::refusal::{Action, Blocker, Document, blocker_text};
use baton_core::{DeliveryAction, Field, InvalidTransition, PayloadError, Record, Refusal};
use baton_store::StoreError;

/// An argument, as the tools name it.
fn arg(field: Field) -> String {
    format!("`{}`", field.name())
}

/// The tool that takes a lifecycle step.
fn tool(action: Action) -> String {
    match action {
        // No tool refuses yet; say where the step is available.
        Action::Delivery(DeliveryAction::Refuse) => "`baton refuse` (CLI)".to_owned(),
        other => format!("`{}`", other.name()),
    }
}

fn transition(id: &str, t: &InvalidTransition) -> String {
    if let Action::Order(_) = t.action {
        let why = t
            .blocker
            .map(|b| format!(" ({})", blocker_text(b)))
            .unwrap_or_default();
        let allowed: Vec<&str> = t.allowed.iter().map(|a| a.name()).collect();
        return format!(
            "cannot {} order {id}: it is {}{why}; allowed next (`action`): {}",
            t.action.name(),
            t.status,
            if allowed.is_empty() {
                "nothing (it is closed)".to_owned()
            } else {
                allowed.join(", ")
            }
        );
    }
    let why = match t.blocker {
        None => String::new(),
        Some(Blocker::FetchFirst) => " (fetch it first with `show`)".to_owned(),
        Some(Blocker::RequestsAreDischarged) => {
            " (a request is discharged with `complete` or `hand_back`, not acknowledged)".to_owned()
        }
        Some(b) => format!(" ({})", blocker_text(b)),
    };
    let whose = match t.action {
        Action::Request(_) => "your own end of this request",
        _ => "your delivery",
    };
    let allowed = if t.allowed.is_empty() {
        "nothing (it is final)".to_owned()
    } else {
        t.allowed
            .iter()
            .map(|a| tool(*a))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "cannot {} {id}: {whose} is {}{why}; allowed next: {allowed}",
        tool(t.action),
        t.status
    )
}

fn findings(document: Document, findings: &[baton_core::awl::Finding]) -> String {
    let what = match document {
        Document::WorkOrder => "a Work Order",
        Document::WorkReport => "a Work Report on this order",
    };
    let lines: Vec<String> = baton_core::refusal::invalid(findings)
        .map(|f| {
            let at = match f.path.as_str() {
                "/" | "" => "`document`".to_owned(),
                path => format!("`document{path}`"),
            };
            format!("- {} at {at}: {}", f.rule, f.message)
        })
        .collect();
    format!(
        "`document` is refused as {what}; nothing was stored. Fix these and call `order` again:\n{}",
        lines.join("\n")
    )
}

/// A refusal of a call about `id` (a message or order id; empty when none), as the text
/// of an `isError` result.
pub fn refusal(id: &str, r: &Refusal) -> String {
    match r {
        Refusal::NotFound { record, id } => match record {
            Record::Message | Record::Parent => {
                format!("{r}: check `id` (`inbox`, `outbox`, `search` and `thread` list ids)")
            }
            Record::Order => format!("{r}: check `id`"),
            Record::Decision => format!("no decision {id}: `resume` lists the current ones"),
            _ => r.to_string(),
        },
        Refusal::NoRecipient { name, registered } => format!(
            "`to`: no participant {name:?} in this project; registered: {}",
            if registered.is_empty() {
                "none".to_owned()
            } else {
                registered.join(", ")
            }
        ),
        Refusal::ArtifactOutside { .. } => format!("`artifact`: {r}"),
        Refusal::NoSubject { .. } | Refusal::Outside { .. } => {
            format!("`subject`: {r}; give a message or order id, or a path from the project root")
        }
        Refusal::NoArtifact { artifact, reason } => format!(
            "`artifact`: {artifact:?}: {reason}; give a path from the project root after the output exists, or a URI"
        ),
        Refusal::NoReceipt { step, alert } => format!(
            "{alert}; alert `receipt-missing:{step}` is open (raised once, however often a wait misses). \
             Check that the step ran and called `receipt_write`, then call `receipt_wait` again"
        ),
        Refusal::NoStep {
            order,
            since,
            seq,
            seconds,
        } => format!(
            "order {order} has no step after seq {since} within {seconds}s (it is at seq {seq}): \
             call `order_show` again"
        ),
        Refusal::Missing(Field::To) => "`to`: name at least one recipient".into(),
        Refusal::Missing(Field::Reason) => {
            "a reason is required (`reason`): it is posted to the sender".into()
        }
        Refusal::Missing(Field::Answer) => "`text` (the answer) cannot be empty".into(),
        Refusal::Missing(Field::ReworkReason) => {
            "`reason` (what the worker should change) cannot be empty".into()
        }
        Refusal::Missing(field) => format!("{} must not be empty", arg(*field)),
        Refusal::TooLong { field, max, len } => format!(
            "{} must be at most {max} characters (got {len})",
            arg(*field)
        ),
        Refusal::Name { field, error } => format!("{}: {error}", arg(*field)),
        Refusal::Payload { field, error } => match error {
            PayloadError::TooLarge { .. } => format!(
                "{}: {error} (messages.payload_cap in .baton/config.toml)",
                arg(*field)
            ),
            _ => format!("{}: {error}", arg(*field)),
        },
        Refusal::SelfSend { name } => {
            format!("{name} cannot send to itself: name another participant in `to`")
        }
        Refusal::Cursor { .. } => format!("`cursor`: {r}: pass the `next` of the previous page"),
        Refusal::Ambiguous { .. } => format!("{r}; give more of the id"),
        Refusal::ShortPrefix { .. } => r.to_string(),
        Refusal::Transition(t) => transition(id, t),
        Refusal::SenderNote => "`note` is for a recipient's completion; to tell the recipients \
                                something, call `reply`"
            .into(),
        Refusal::DocumentField { .. } => format!("`document`: {r}"),
        Refusal::Findings {
            document,
            findings: found,
        } => findings(*document, found),
        Refusal::WrongDocument { .. } => "`document` is a Work Report: `create` takes a Work \
                                          Order (a report goes with action `report`)"
            .into(),
        Refusal::Moved { .. } => format!(
            "{r}; read it again with `order_show` and decide anew, then call `order` again \
             with `expect_seq` set to its `seq`"
        ),
        Refusal::KeyReused { .. } => {
            format!("{r}; use a new `idempotency_key` for a new message")
        }
        Refusal::EffectsNeedRunner { .. } => format!(
            "{r}; this tool does not start servers: approve with `baton order approve` where \
             the upstream server runs"
        ),
        Refusal::Unwilling { topic, .. } => format!(
            "{r}. Nothing was sent and the attempt is recorded: send it on a `topic` the \
             recipient takes (not {topic}), or ask an owner to widen its policy"
        ),
        Refusal::UnknownParticipant { .. }
        | Refusal::Role { .. }
        | Refusal::TopicPattern { .. }
        | Refusal::PowerName { .. }
        | Refusal::WebhookUrl { .. }
        | Refusal::AgentUrl { .. }
        | Refusal::KeyEnvNotListed { .. }
        | Refusal::KeyEnv { .. }
        | Refusal::StatusNeedsIdentity
        | Refusal::NotARequest { .. }
        | Refusal::Superseded { .. }
        | Refusal::TooManyChanges { .. }
        | Refusal::StateEdits { .. }
        | Refusal::ReportStatus { .. }
        | Refusal::NotAnExit(..)
        | Refusal::LogLine { .. }
        | Refusal::ForeignLog
        | Refusal::NegotiationInput { .. }
        | Refusal::NegotiationSettled { .. }
        | Refusal::Beyond { .. }
        | Refusal::OwnWork { .. }
        | Refusal::SameReviewer { .. }
        | Refusal::NotAParty { .. }
        | Refusal::SenderSteps { .. }
        | Refusal::OrderRole { .. }
        | Refusal::OfferFrom { .. }
        | Refusal::ReportFrom { .. }
        | Refusal::Unauthenticated
        | Refusal::Scope { .. }
        | Refusal::NotANegotiator { .. }
        | Refusal::OwnPosition { .. }
        | Refusal::ActorInRequest
        | Refusal::NotTheWorker { .. }
        | Refusal::GatewayClosed { .. }
        | Refusal::EffectsDiffer { .. }
        | Refusal::NoEffect { .. }
        | Refusal::RoleTaken { .. }
        | Refusal::OrderExists { .. }
        | Refusal::RunExists { .. }
        | Refusal::NegotiationExists { .. }
        | Refusal::PositionSubmitted { .. }
        | Refusal::EffectNotHeld { .. }
        | Refusal::RunStatus { .. }
        // Its words are cut short where it is made (`baton_app::ops`).
        | Refusal::Input { .. } => r.to_string(),
        // Reservations.
        Refusal::Reserved { .. } => format!(
            "{r}. Call `reserve` again once it lapses or is released, reserve other paths, \
             or ask its holder"
        ),
        Refusal::ReservationInput { field, .. } => format!("{}: {r}", arg(*field)),
        Refusal::NotReleased { .. } => format!("{r}: name one of those in `names`"),
        Refusal::Unreleased { .. } | Refusal::ForceRelease { .. } => r.to_string(),
    }
}

/// A failed call about `id`, as the text of an `isError` result.
pub fn explain(id: &str, e: StoreError) -> String {
    match &e {
        StoreError::Refused(r) => refusal(id, r),
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
    use baton_core::refusal::MayAct;

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
            assert!(!text.contains("--"), "a CLI flag leaked: {text}");
            assert!(
                !text.contains("`baton show") && !text.contains("baton state"),
                "a CLI command leaked: {text}"
            );
        }
    }
}
