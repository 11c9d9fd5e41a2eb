//! The run ledger: a run is the fold of its facts; hooks name sessions and helpers; a lost
//! run resurfaces what it held; the runs view, the failures lane and the counts by source.

use std::time::Duration;

use baton_core::DeliveryStatus::{Delivered, Pending};
use baton_core::MessageType::Request;
use baton_core::run::{
    HookCall, ProcessRef, Progress, Registration, Run, RunChange, RunStatus, TokenUsage,
};
use baton_core::{Change, Millis, Record, Refusal};
use baton_store::{DEFAULT_BUSY_TIMEOUT, RunQuery, Store, StoreError};

use crate::{
    Backend, assert_variant, cast, clock_passes, draft, envelope, generation, name, now_ms,
    refused, send, status,
};

/// This family's stories, each run on every backend by `every_backend!` (`main.rs`).
macro_rules! stories {
    ($attrs:tt $backend:ty) => {
        crate::on_backend!($attrs $backend; runs;
            stores: [
                a_run_is_the_fold_of_its_facts,
                a_hooks_event_is_its_participants_or_the_local_operators,
                the_runs_view_is_live_runs_and_the_newest_others_and_pages_walk_all,
                a_lost_run_resurfaces_what_it_held_once,
                an_untracked_run_of_the_participant_keeps_its_work_from_resurfacing,
                the_failures_lane_reads_failures_and_only_what_could_clear_them,
                sessions_and_helpers_are_rows_counted_by_source,
                ten_thousand_hooks_of_one_session_are_one_row_and_a_row_per_helper,
            ];
            backends: [
                runs_replay_to_the_same_rows,
            ];
        );
    };
}
pub(crate) use stories;

pub(crate) fn registration(id: &str, participant: Option<&str>) -> RunChange {
    RunChange::Registered(Box::new(Registration {
        run: id.into(),
        participant: participant.map(str::to_owned),
        command: vec!["claude".into(), "-p".into(), "fix the export".into()],
        heartbeat_ms: Some(15_000),
        ..Registration::default()
    }))
}

pub(crate) fn run_started(id: &str) -> RunChange {
    RunChange::Started {
        run: id.into(),
        process: ProcessRef {
            pid: 4242,
            start: Some(99),
        },
        pgid: 4242,
    }
}

async fn one_run(store: &Store, id: &str) -> Run {
    let query = RunQuery {
        id: Some(id.into()),
        ..RunQuery::default()
    };
    let mut runs = store.runs(&query).await.expect("the run");
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs.remove(0)
}

/// Story: a hook's event is recorded as the participant it names when one is registered
/// by that name, and as the local operator otherwise (a hook never fails over who called
/// it).
pub(crate) async fn a_hooks_event_is_its_participants_or_the_local_operators(store: &Store) {
    cast(store).await;
    for (who, session) in [("exec-1", "s-known"), ("ghost", "s-ghost")] {
        store
            .record_hook(
                who,
                HookCall {
                    agent: "claude".into(),
                    event: "PreToolUse".into(),
                    session: Some(session.into()),
                    ..HookCall::default()
                },
            )
            .await
            .expect("a hook is recorded");
    }
    let actors: Vec<(String, Option<String>)> = store
        .events(0, 1_000)
        .await
        .expect("the log")
        .into_iter()
        .filter_map(|e| match e.change {
            Change::Run(RunChange::Hook(call)) => Some((e.actor, call.session)),
            _ => None,
        })
        .collect();
    assert_eq!(
        actors,
        vec![
            ("exec-1".to_owned(), Some("s-known".to_owned())),
            ("@local".to_owned(), Some("s-ghost".to_owned())),
        ]
    );
}

/// Story 14: A run is the fold of the facts its producers record, in order; a fact that
/// cannot follow the run's status is refused and writes nothing, and an untracked process
/// is recorded once.
pub(crate) async fn a_run_is_the_fold_of_its_facts(store: &Store) {
    cast(store).await;
    store
        .record_run(
            "exec-1",
            &[registration("r1", Some("exec-1")), run_started("r1")],
        )
        .await
        .expect("register and start");
    let tokens = TokenUsage {
        input: Some(1_000),
        cached_input: None,
        output: Some(50),
    };
    store
        .record_run(
            "exec-1",
            &[RunChange::Reported {
                run: "r1".into(),
                progress: Some(Progress { done: 2, total: 5 }),
                tokens: Some(tokens),
            }],
        )
        .await
        .expect("a report");
    let run = one_run(store, "r1").await;
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(run.process.map(|p| p.pid), Some(4242));
    assert_eq!(run.progress, Some(Progress { done: 2, total: 5 }));
    assert_eq!(run.tokens, Some(tokens));
    assert_eq!(run.exit_code, None, "no exit is known yet");

    let exit = RunChange::Exited {
        run: "r1".into(),
        status: RunStatus::Done,
        exit_code: Some(0),
        signal: None,
        reason: None,
    };
    store
        .record_run("exec-1", std::slice::from_ref(&exit))
        .await
        .expect("the exit");
    assert_variant!(
        refused(store, store.record_run("exec-1", &[exit])).await,
        StoreError::Refused(Refusal::RunStatus { .. })
    );
    assert_variant!(
        refused(store, store.record_run("exec-1", &[run_started("nope")])).await,
        StoreError::Refused(Refusal::NotFound {
            record: Record::Run,
            ..
        })
    );
    // A batch is all or nothing.
    assert_variant!(
        refused(
            store,
            store.record_run("exec-1", &[registration("r2", None), run_started("r1")])
        )
        .await,
        StoreError::Refused(Refusal::RunStatus { .. })
    );
    assert!(
        store
            .runs(&RunQuery {
                id: Some("r2".into()),
                ..RunQuery::default()
            })
            .await
            .unwrap()
            .is_empty()
    );

    let untracked = RunChange::Untracked(Box::new(Registration {
        run: "pid-77-1".into(),
        command: vec!["codex".into()],
        process: Some(ProcessRef {
            pid: 77,
            start: Some(1),
        }),
        ..Registration::default()
    }));
    let first = store
        .record_run("@reaper", std::slice::from_ref(&untracked))
        .await
        .unwrap();
    let again = store.record_run("@reaper", &[untracked]).await.unwrap();
    assert_eq!((first.len(), again.len()), (1, 0));

    let live = store
        .runs(&RunQuery {
            live: true,
            ..RunQuery::default()
        })
        .await
        .unwrap();
    let live: Vec<_> = live.iter().map(|r| (r.id.as_str(), r.status)).collect();
    assert_eq!(live, [("pid-77-1", RunStatus::Untracked)]);
    assert_eq!(store.runs(&RunQuery::default()).await.unwrap().len(), 2);
}

/// Story 15: When a run is lost, what its participant fetched during the run is pending
/// again, with one alert each for the loss and the resurfacing; reaping it again does
/// nothing, and what was fetched before the run stays delivered.
pub(crate) async fn a_lost_run_resurfaces_what_it_held_once(store: &Store) {
    cast(store).await;
    let before = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "csv", "before"),
    )
    .await;
    let during = send(
        store,
        "planner",
        draft(&["exec-1"], Request, "csv", "during"),
    )
    .await;
    let fetched = store.fetch(Some(&name("exec-1")), &before).await.unwrap();
    clock_passes(envelope(store, &before).await.created_at.max(now_ms())).await;
    store
        .record_run(
            "exec-1",
            &[registration("r1", Some("exec-1")), run_started("r1")],
        )
        .await
        .unwrap();
    assert_eq!(fetched.status, Some(Delivered));
    store.fetch(Some(&name("exec-1")), &during).await.unwrap();

    let reaped = store
        .reap_lost("@reaper", "r1", "the monitor is gone")
        .await
        .unwrap()
        .expect("a live run is reaped");
    assert_eq!(reaped.resurfaced, std::slice::from_ref(&during));
    assert_eq!(reaped.alerts.len(), 2, "{reaped:?}");
    assert_eq!(status(store, &during, "exec-1").await, Some(Pending));
    assert_eq!(status(store, &before, "exec-1").await, Some(Delivered));
    assert_eq!(one_run(store, "r1").await.status, RunStatus::Lost);
    let state = store.state().await.unwrap();
    assert_eq!(state.alerts.len(), 2);

    let generation_before = generation(store).await;
    assert_eq!(
        store.reap_lost("@reaper", "r1", "again").await.unwrap(),
        None
    );
    assert_eq!(
        generation(store).await,
        generation_before,
        "a second reap wrote"
    );
}

/// Story: a run counts as live as the core says (`RunStatus::is_live`), an untracked
/// process of the participant included: while one may still hold its work, what it
/// fetched does not resurface when another of its runs is lost.
pub(crate) async fn an_untracked_run_of_the_participant_keeps_its_work_from_resurfacing(
    store: &Store,
) {
    cast(store).await;
    store
        .record_run(
            "exec-1",
            &[registration("r1", Some("exec-1")), run_started("r1")],
        )
        .await
        .unwrap();
    // Fetched during the run, a clock tick after it was registered.
    clock_passes(now_ms()).await;
    let held = send(store, "planner", draft(&["exec-1"], Request, "csv", "held")).await;
    store.fetch(Some(&name("exec-1")), &held).await.unwrap();
    let untracked = RunChange::Untracked(Box::new(Registration {
        run: "pid-88-1".into(),
        participant: Some("exec-1".into()),
        command: vec!["codex".into()],
        process: Some(ProcessRef {
            pid: 88,
            start: Some(1),
        }),
        ..Registration::default()
    }));
    store.record_run("@reaper", &[untracked]).await.unwrap();
    let reaped = store
        .reap_lost("@reaper", "r1", "the monitor is gone")
        .await
        .unwrap()
        .expect("a live run is reaped");
    assert!(reaped.resurfaced.is_empty(), "{reaped:?}");
    assert_eq!(status(store, &held, "exec-1").await, Some(Delivered));
}

/// Story: the bounded view of the ledger is every live run and the newest `recent` ended
/// ones, oldest first; pages after a run's seq walk every run once.
pub(crate) async fn the_runs_view_is_live_runs_and_the_newest_others_and_pages_walk_all(
    store: &Store,
) {
    cast(store).await;
    let ended = |id: &str| RunChange::Exited {
        run: id.into(),
        status: RunStatus::Done,
        exit_code: Some(0),
        signal: None,
        reason: None,
    };
    // r1 stays live, oldest of all; r2..r6 end; r7 stays live, newest of all.
    let mut changes = vec![registration("r1", Some("exec-1"))];
    for i in 2..=6 {
        let id = format!("r{i}");
        changes.push(registration(&id, Some("exec-1")));
        changes.push(ended(&id));
    }
    changes.push(registration("r7", Some("exec-2")));
    store.record_run("exec-1", &changes).await.unwrap();
    let ids = |runs: Vec<Run>| runs.into_iter().map(|r| r.id).collect::<Vec<_>>();

    let view = store
        .runs(&RunQuery {
            recent: Some(2),
            ..RunQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(ids(view), ["r1", "r5", "r6", "r7"]);

    let mut walked = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .runs(&RunQuery {
                after_seq: after,
                limit: Some(3),
                ..RunQuery::default()
            })
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        after = Some(last.seq);
        walked.extend(ids(page));
        assert!(walked.len() <= 7, "the pages do not end: {walked:?}");
    }
    assert_eq!(walked, ["r1", "r2", "r3", "r4", "r5", "r6", "r7"]);
}

/// Story 16b: The failures lane reads each run that failed or was lost within its window,
/// and for each only what could clear it: the newest later success of the same command
/// and the newest for the same order. Earlier successes, other commands' successes and
/// failures before the window are not read.
pub(crate) async fn the_failures_lane_reads_failures_and_only_what_could_clear_them(store: &Store) {
    async fn ended(store: &Store, id: &str, command: &str, order: Option<&str>, end: RunChange) {
        let register = RunChange::Registered(Box::new(Registration {
            run: id.into(),
            command: command.split(' ').map(str::to_owned).collect(),
            order: order.map(str::to_owned),
            ..Registration::default()
        }));
        store
            .record_run("@launch", &[register, run_started(id), end])
            .await
            .unwrap();
        // Each run ends in a millisecond of its own: a clearing success ends later.
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let exit = |id: &str, status: RunStatus| RunChange::Exited {
        run: id.into(),
        status,
        exit_code: Some(i32::from(status != RunStatus::Done)),
        signal: None,
        reason: None,
    };
    cast(store).await;
    ended(
        store,
        "early-a",
        "make a",
        None,
        exit("early-a", RunStatus::Done),
    )
    .await;
    ended(
        store,
        "early-d",
        "make d",
        None,
        exit("early-d", RunStatus::Done),
    )
    .await;
    ended(store, "f0", "make z", None, exit("f0", RunStatus::Failed)).await;
    let window = now_ms();
    tokio::time::sleep(Duration::from_millis(3)).await;
    ended(
        store,
        "f1",
        "make a",
        Some("wo_1"),
        exit("f1", RunStatus::Failed),
    )
    .await;
    for i in 0..5 {
        let id = format!("b{i}");
        ended(store, &id, "make b", None, exit(&id, RunStatus::Done)).await;
    }
    ended(store, "a1", "make a", None, exit("a1", RunStatus::Done)).await;
    ended(store, "a2", "make a", None, exit("a2", RunStatus::Done)).await;
    ended(
        store,
        "o1",
        "make c",
        Some("wo_1"),
        exit("o1", RunStatus::Done),
    )
    .await;
    let lost = RunChange::Lost {
        run: "f2".into(),
        reason: "gone".into(),
    };
    ended(store, "f2", "make d", None, lost).await;
    ended(
        store,
        "d0",
        "make d",
        Some("wo_2"),
        exit("d0", RunStatus::Failed),
    )
    .await;

    let read: Vec<String> = store
        .failures(window)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(read, ["f1", "f2", "d0", "a2", "o1"]);
    let all: Vec<String> = store
        .failures(0)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(
        all,
        ["f0", "f1", "f2", "d0", "a2", "o1"],
        "f0 has nothing later to clear it"
    );
}

/// Story 16: Run rows, too, are a projection: replaying the log rebuilds them exactly.
pub(crate) async fn runs_replay_to_the_same_rows<B: Backend>() {
    let backend = B::fresh(DEFAULT_BUSY_TIMEOUT).await;
    let store = backend.store();
    a_run_is_the_fold_of_its_facts(store).await;
    store
        .record_run("exec-2", &[registration("r3", Some("exec-2"))])
        .await
        .unwrap();
    store.reap_lost("@reaper", "r3", "gone").await.unwrap();
    let live = backend.projection_dump().await;
    assert!(
        live.iter().filter(|r| r.starts_with("r|")).count() >= 3,
        "{live:?}"
    );
    backend.rebuild_projections().await;
    assert_eq!(backend.projection_dump().await, live);
}

/// Story: a session and its helpers seen through hooks are rows of the ledger; the store
/// counts live and recent rows by status and source (and those quiet since a time), and a
/// view can leave helpers out.
pub(crate) async fn sessions_and_helpers_are_rows_counted_by_source(store: &Store) {
    use baton_core::run::{HookCall, RunStatus, Source};
    cast(store).await;
    for (event, helper) in [
        ("SessionStart", None),
        ("SubagentStart", Some("a1")),
        ("SubagentStart", Some("a2")),
        ("PostToolUse", Some("a2")),
        ("SubagentStop", Some("a2")),
    ] {
        let call = HookCall {
            row: HookCall::row_of(None, "claude", Some("s1"), helper),
            run: None,
            agent: "claude".into(),
            event: event.into(),
            session: Some("s1".into()),
            tool: (event == "PostToolUse").then(|| "Read".into()),
            agent_id: helper.map(Into::into),
            agent_type: helper.map(|_| "Explore".into()),
        };
        store.record_hook("planner", call).await.unwrap();
    }
    let all = store.runs(&RunQuery::default()).await.unwrap();
    assert_eq!(all.len(), 3, "{all:?}");
    let row = |id: &str| {
        all.iter()
            .find(|r| r.id == id)
            .cloned()
            .unwrap_or_else(|| panic!("no row {id}"))
    };
    let session = row("claude:s1");
    assert_eq!(
        (
            session.source,
            session.status,
            session.participant.as_deref()
        ),
        (Source::Session, RunStatus::Running, Some("planner"))
    );
    let ended = row("claude:s1/a2");
    assert_eq!(
        (ended.status, ended.parent.as_deref(), ended.tools.clone()),
        (RunStatus::Ended, Some("claude:s1"), vec!["Read".to_owned()])
    );
    let mut counts = store.run_counts(0, Millis::MAX, None).await.unwrap();
    counts.sort_by_key(|c| (c.source.as_str(), c.status.as_str()));
    let seen: Vec<(Source, RunStatus, u64, u64)> = counts
        .iter()
        .map(|c| (c.source, c.status, c.n, c.quiet))
        .collect();
    assert_eq!(
        seen,
        [
            (Source::Helper, RunStatus::Ended, 1, 1),
            (Source::Helper, RunStatus::Running, 1, 1),
            (Source::Session, RunStatus::Running, 1, 1),
        ]
    );
    let none_quiet = store.run_counts(0, 0, None).await.unwrap();
    assert!(none_quiet.iter().all(|c| c.quiet == 0), "{none_quiet:?}");
    // Counted for their parent: the session's helpers only, live and ended alike.
    let of = |parents: &'static [&'static str]| async move {
        let parents: Vec<String> = parents.iter().map(|p| p.to_string()).collect();
        let mut counts = store
            .run_counts(0, Millis::MAX, Some(&parents))
            .await
            .unwrap();
        counts.sort_by_key(|c| c.status.as_str());
        counts
            .iter()
            .map(|c| (c.source, c.status, c.n, c.parent.clone()))
            .collect::<Vec<_>>()
    };
    let parent = Some("claude:s1".to_owned());
    assert_eq!(
        of(&["claude:s1"]).await,
        [
            (Source::Helper, RunStatus::Ended, 1, parent.clone()),
            (Source::Helper, RunStatus::Running, 1, parent),
        ]
    );
    assert_eq!(of(&["claude:s2"]).await, [], "no helpers under another row");
    let listed: Vec<String> = store
        .runs(&RunQuery {
            recent: Some(10),
            without_helpers: true,
            ..RunQuery::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, ["claude:s1"]);
}

/// Ten thousand hook events of one session, with helpers, stay one row for the session and
/// one per helper: the row folds its events, it does not grow with them.
pub(crate) async fn ten_thousand_hooks_of_one_session_are_one_row_and_a_row_per_helper(
    store: &Store,
) {
    use baton_core::run::{HookCall, MAX_TOOLS, RunStatus, Source};
    cast(store).await;
    let call = |event: &str, helper: Option<String>, tool: Option<String>| {
        RunChange::Hook(HookCall {
            row: HookCall::row_of(None, "claude", Some("s1"), helper.as_deref()),
            agent: "claude".into(),
            event: event.into(),
            session: Some("s1".into()),
            tool,
            agent_type: helper.as_ref().map(|_| "Explore".into()),
            agent_id: helper,
            ..HookCall::default()
        })
    };
    let mut changes = vec![call("SessionStart", None, None)];
    for h in 0..20 {
        changes.push(call("SubagentStart", Some(format!("a{h}")), None));
        changes.push(call("SubagentStop", Some(format!("a{h}")), None));
    }
    // More distinct tools than a row keeps.
    while changes.len() < 10_000 {
        let tool = format!("tool-{}", changes.len() % (MAX_TOOLS + 8));
        changes.push(call("PostToolUse", None, Some(tool)));
    }
    for chunk in changes.chunks(2500) {
        store.record_run("planner", chunk).await.unwrap();
    }
    let all = store.runs(&RunQuery::default()).await.unwrap();
    assert_eq!(all.len(), 21, "one session and twenty helpers");
    let session = all
        .iter()
        .find(|r| r.id == "claude:s1")
        .expect("the session's row");
    assert_eq!(
        (session.source, session.status, session.tools.len()),
        (Source::Session, RunStatus::Running, MAX_TOOLS)
    );
    let counts = store.run_counts(0, 0, None).await.unwrap();
    let helpers: u64 = counts
        .iter()
        .filter(|c| c.source == Source::Helper && c.status == RunStatus::Ended)
        .map(|c| c.n)
        .sum();
    assert_eq!(helpers, 20, "{counts:?}");
    assert!(store.generation().await.unwrap() >= 10_000);
}
