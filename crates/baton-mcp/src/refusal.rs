//! Tool errors in the tools' own words: the text of an `isError` result says what to do
//! next by naming a tool or an argument, never a command-line flag.
//!
//! The store words its refusals for the CLI (`--to`, `` `baton show ID` ``); the few
//! phrases that name a flag or a command are translated here, and the unit tests below
//! drive a real store into each refusal so a rewording that leaks a flag is caught.

use baton_core::InvalidTransition;
use baton_store::StoreError;

/// CLI phrases in store refusals, and what a tool caller does instead.
const IN_TOOL_TERMS: &[(&str, &str)] = &[
    ("`baton show ID`", "`show`"),
    ("complete or hand-back", "`complete` or `hand_back`"),
    ("(--to NAME)", "(`to`)"),
    ("in --to", "in `to`"),
    ("(--reason TEXT)", "(`reason`)"),
    ("--note is for", "`note` is for"),
    ("reply with `baton send --reply-to ID`", "call `reply`"),
    // Project state: the core names the CLI flag that carried each field.
    (
        "see `baton state show` for the decisions there are",
        "`resume` lists the current ones",
    ),
    ("--why", "`why`"),
    ("--tried", "`tried`"),
    ("--result", "`result`"),
    ("--subject", "`subject`"),
    ("--step", "`step`"),
    ("--artifact", "`artifact`"),
    // Orders: the lifecycle's words for the step's own arguments.
    ("see `baton order list --all`", "check `id`"),
    (
        "an answer cannot be empty",
        "`text` (the answer) cannot be empty",
    ),
    (
        "a rework reason (what the worker should change) cannot be empty",
        "`reason` (what the worker should change) cannot be empty",
    ),
];

fn in_tool_terms(text: &str) -> String {
    IN_TOOL_TERMS
        .iter()
        .fold(text.to_owned(), |text, (cli, tool)| text.replace(cli, tool))
}

/// The tool that takes a lifecycle step named by its CLI command.
fn tool_for(command: &str) -> String {
    match command {
        "hand-back" => "`hand_back`".to_owned(),
        // No tool refuses yet; say where the step is available.
        "refuse" => "`baton refuse` (CLI)".to_owned(),
        other => format!("`{other}`"),
    }
}

fn transition(id: &str, t: &InvalidTransition) -> String {
    let allowed = if t.allowed.is_empty() {
        "nothing (it is final)".to_owned()
    } else {
        t.allowed
            .iter()
            .map(|c| tool_for(c))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let what = match t.what {
        "this message" => "your delivery",
        other => other,
    };
    format!(
        "cannot {} {id}: {what} is {}{}; allowed next: {allowed}",
        tool_for(t.action),
        t.status,
        in_tool_terms(t.why),
    )
}

/// A store refusal of an operation on message `id`, as an `isError` text.
pub fn explain(id: &str, e: StoreError) -> String {
    match e {
        StoreError::Transition(t) => transition(id, &t),
        StoreError::NotFound(text) => {
            format!("{text}: check `id` (`inbox`, `outbox`, `search` and `thread` list ids)")
        }
        StoreError::Busy { .. } => format!("{e}: call the tool again"),
        other => in_tool_terms(&other.to_string()),
    }
}

/// A store refusal of a change to the project state (focus, decisions, constraints, notes,
/// receipts), as an `isError` text. Not-found here is a decision, never a message id.
pub fn explain_state(e: StoreError) -> String {
    match e {
        StoreError::NotFound(text) => in_tool_terms(&text),
        other => explain("", other),
    }
}

/// A store refusal of a step on order `id` (empty for an offer), as an `isError` text:
/// the allowed `action`s, who may act, or how to retry after another writer moved it on.
pub fn explain_order(id: &str, e: StoreError) -> String {
    match e {
        StoreError::Transition(t) => format!(
            "cannot {} order {id}: it is {}{}; allowed next (`action`): {}",
            t.action,
            t.status,
            t.why,
            if t.allowed.is_empty() {
                "nothing (it is closed)".to_owned()
            } else {
                t.allowed.join(", ")
            }
        ),
        StoreError::Conflict(text) if !id.is_empty() => format!(
            "{}, then call `order` again with `expect_seq` set to its `seq`",
            text.replace(&format!("(`baton order show {id}`)"), "with `order_show`")
        ),
        StoreError::NotFound(text) | StoreError::Invalid(text) | StoreError::Forbidden(text) => {
            in_tool_terms(&text)
        }
        other => explain("", other),
    }
}

/// An unknown recipient, with the names that would have worked.
pub fn unknown_participant(name: &str, registered: &[String]) -> String {
    format!(
        "`to`: no participant {name:?} in this project; registered: {}",
        if registered.is_empty() {
            "none".to_owned()
        } else {
            registered.join(", ")
        }
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use baton_core::{Draft, MessageType, Passname, Payload, Topic};
    use baton_store::{SqliteStore, Store, Verb};

    use super::*;

    fn name(n: &str) -> Passname {
        Passname::new(n).unwrap()
    }

    async fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::create(&dir.path().join("baton.db"), Duration::from_secs(5))
            .await
            .unwrap();
        for (n, role) in [("planner", "planner"), ("impl-1", "executor")] {
            store.add_participant("test", &name(n), role).await.unwrap();
        }
        (dir, store)
    }

    async fn request(store: &SqliteStore) -> String {
        let draft = Draft {
            to: vec![name("impl-1")],
            kind: MessageType::Request,
            topic: Topic::new("lane").unwrap(),
            reply_to: None,
            payload: Payload::body("do it", 1024).unwrap(),
            idempotency_key: None,
        };
        store.send(&name("planner"), draft, 0).await.unwrap().id
    }

    /// Every refusal a tool can meet, as the store words it today.
    async fn refusals() -> Vec<String> {
        let (_dir, store) = store().await;
        let id = request(&store).await;
        let mut texts = Vec::new();
        let mut keep = |id: &str, r: baton_store::Result<baton_store::Stepped>| {
            texts.push(explain(id, r.expect_err("the step is refused")));
        };
        let executor = name("impl-1");
        let planner = name("planner");
        keep(&id, store.step(&executor, &id, Verb::Complete, None).await);
        keep(&id, store.step(&executor, &id, Verb::Ack, None).await);
        keep(
            &id,
            store.step(&executor, &id, Verb::HandBack, Some(" ")).await,
        );
        keep(&id, store.step(&planner, &id, Verb::Ack, None).await);
        keep(
            &id,
            store.step(&planner, &id, Verb::Complete, Some("x")).await,
        );
        keep(&id, store.step(&planner, &id, Verb::Archive, None).await);
        keep("nope", store.step(&executor, "nope", Verb::Ack, None).await);
        store.fetch(Some(&executor), &id).await.unwrap();
        keep(&id, store.step(&executor, &id, Verb::Ack, None).await);
        let self_send = Draft {
            to: vec![planner.clone()],
            kind: MessageType::Message,
            topic: Topic::new("lane").unwrap(),
            reply_to: None,
            payload: Payload::body("hi", 1024).unwrap(),
            idempotency_key: None,
        };
        texts.push(explain(
            "",
            store.send(&planner, self_send, 0).await.unwrap_err(),
        ));
        texts
    }

    #[tokio::test]
    async fn refusals_name_tools_and_arguments_never_flags() {
        let texts = refusals().await;
        for text in &texts {
            assert!(!text.contains("--"), "a CLI flag leaked: {text}");
            assert!(
                !text.contains("`baton show"),
                "a CLI command leaked: {text}"
            );
        }
        let all = texts.join("\n");
        for expected in [
            "cannot `complete` ", // pending: fetch first
            "fetch it first with `show`",
            "allowed next: `show`, `baton refuse` (CLI)",
            "`complete` or `hand_back`",
            "(`reason`)",
            "`note` is for",
            "call `reply`",
            "check `id`",
            "in `to`",
        ] {
            assert!(all.contains(expected), "{expected:?} missing from:\n{all}");
        }
    }

    #[tokio::test]
    async fn state_refusals_name_arguments_and_tools_never_flags() {
        use baton_core::state::{ReceiptRecord, StateOp, Subject};
        let (_dir, store) = store().await;
        let decide = |supersedes: Option<&str>| StateOp::Decide {
            text: "Use SQLite".into(),
            why: "one file".into(),
            supersedes: supersedes.map(str::to_owned),
        };
        store
            .change_state("planner", &[decide(None)])
            .await
            .unwrap();
        store
            .change_state("planner", &[decide(Some("D-1"))])
            .await
            .unwrap();
        let refused = [
            StateOp::Focus { text: " ".into() },
            StateOp::Decide {
                text: "x".into(),
                why: "".into(),
                supersedes: None,
            },
            decide(Some("D-9")),
            decide(Some("D-1")),
            StateOp::Constrain {
                text: "x".into(),
                tried: "".into(),
                result: "r".into(),
            },
            StateOp::Constrain {
                text: "x".into(),
                tried: "t".into(),
                result: "".into(),
            },
            StateOp::Note {
                text: "x".into(),
                subject: Subject::Path("".into()),
            },
            StateOp::Receipt(ReceiptRecord {
                step: "".into(),
                artifact: "a".into(),
                hash: None,
                size: None,
                run: None,
            }),
            StateOp::Receipt(ReceiptRecord {
                step: "s".into(),
                artifact: " ".into(),
                hash: None,
                size: None,
                run: None,
            }),
        ];
        let mut texts = Vec::new();
        for op in refused {
            let e = store
                .change_state("planner", std::slice::from_ref(&op))
                .await
                .expect_err("refused");
            texts.push(explain_state(e));
        }
        for text in &texts {
            assert!(!text.contains("--"), "a CLI flag leaked: {text}");
            assert!(!text.contains("baton "), "a CLI command leaked: {text}");
            assert!(!text.contains("check `id`"), "not a message id: {text}");
        }
        let all = texts.join("\n");
        for expected in [
            "`why` must not be empty",
            "no decision D-9: `resume` lists the current ones",
            "supersede D-2 instead",
            "`tried` must not be empty",
            "`result` must not be empty",
            "`subject` must not be empty",
            "`step` must not be empty",
            "`artifact` must not be empty",
        ] {
            assert!(all.contains(expected), "{expected:?} missing from:\n{all}");
        }
    }

    #[tokio::test]
    async fn order_refusals_say_who_may_act_what_is_allowed_and_how_to_retry() {
        use baton_core::order::OrderRequest;
        let (_dir, store) = store().await;
        let doc = serde_json::json!({"id": "wo_1", "from": "planner", "to": "impl-1", "goal": "g"});
        let doc = Payload::from_value(doc, 4096).unwrap();
        let topic = Topic::new("work-order").unwrap();
        store
            .create_order(&name("planner"), topic, doc)
            .await
            .unwrap();
        let (planner, executor) = (name("planner"), name("impl-1"));
        let refused = [
            (&executor, 1, OrderRequest::Approve),
            (&executor, 1, OrderRequest::Start),
            (&executor, 7, OrderRequest::Accept),
            (&planner, 1, OrderRequest::Answer { text: " ".into() }),
            (
                &planner,
                1,
                OrderRequest::Rework {
                    reason: String::new(),
                },
            ),
        ];
        let mut texts = Vec::new();
        for (who, seq, request) in refused {
            let e = store
                .order_step(who, "wo_1", seq, request)
                .await
                .expect_err("refused");
            texts.push(explain_order("wo_1", e));
        }
        let e = store
            .order_step(&executor, "wo_9", 1, OrderRequest::Accept)
            .await
            .expect_err("no such order");
        texts.push(explain_order("wo_9", e));
        for text in &texts {
            assert!(!text.contains("--"), "a CLI flag leaked: {text}");
            assert!(!text.contains("baton "), "a CLI command leaked: {text}");
        }
        let all = texts.join("\n");
        for expected in [
            "impl-1 may not approve order wo_1: only its sender (planner) may",
            "cannot start order wo_1: it is offered (accept it first); allowed next (`action`): accept, decline, cancel",
            "read it again with `order_show` and decide anew, then call `order` again with `expect_seq`",
            "`text` (the answer) cannot be empty",
            "`reason` (what the worker should change) cannot be empty",
            "no order wo_9 in this project: check `id`",
        ] {
            assert!(all.contains(expected), "{expected:?} missing from:\n{all}");
        }
    }

    #[test]
    fn unknown_recipients_list_the_registered_names() {
        let text = unknown_participant("ghost", &["impl-1".into(), "planner".into()]);
        assert_eq!(
            text,
            "`to`: no participant \"ghost\" in this project; registered: impl-1, planner"
        );
    }
}
