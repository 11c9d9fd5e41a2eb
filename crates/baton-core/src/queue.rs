//! The human queue: the short list that needs a person, computed from facts,
//! never curated. Six sources feed four lanes; an item is suppressed when a person
//! acknowledged it after its latest signal, or (a failed run) when a later run for the same
//! order or with the same title succeeded; items about one order are deduplicated keeping
//! the newest signal; each lane shows at most [`PER_LANE`], newest first, and counts what it
//! held back. The caller gathers the facts; this module reads no clock.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::time::Millis;

/// The most items a lane shows.
pub const PER_LANE: usize = 5;
/// How far back a failed run counts.
pub const FAILED_RUNS_WINDOW_MS: Millis = 2 * 60 * 60 * 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// Runs that failed in the last two hours.
    Failures,
    /// Reviews still asking for changes after the fix round (or INVALID).
    Reviews,
    /// Needs raised by hand or by an agent session; requests past their service target.
    Needs,
    /// Orders waiting on their owner: submitted, or blocked with a question.
    Approvals,
}

impl Lane {
    pub const ALL: [Lane; 4] = [Self::Failures, Self::Reviews, Self::Needs, Self::Approvals];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Failures => "failures",
            Self::Reviews => "reviews",
            Self::Needs => "needs",
            Self::Approvals => "approvals",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.as_str() == s)
    }
}

/// Where an item came from: the six sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    FailedRun,
    Review,
    NeedByHand,
    NeedBySession,
    WaitingOnOwner,
    PastTarget,
    /// An approved order's staged effect that failed, or started with no recorded end.
    Effect,
}

impl Source {
    pub fn lane(self) -> Lane {
        match self {
            Self::FailedRun | Self::Effect => Lane::Failures,
            Self::Review => Lane::Reviews,
            Self::NeedByHand | Self::NeedBySession | Self::PastTarget => Lane::Needs,
            Self::WaitingOnOwner => Lane::Approvals,
        }
    }
}

/// One thing a person may need to look at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Item {
    /// Stable across reads: what `baton queue ack` names (`run:ID`, `review:ORDER`,
    /// `need:ID`, `order:ORDER`, `late:ID`, `effect:REF@ORDER`).
    pub id: String,
    pub source: Source,
    pub order: Option<String>,
    pub text: String,
    /// When its newest signal happened.
    pub at: Millis,
    /// A label worth seeing at a glance (`disagreement`).
    pub label: Option<String>,
}

/// A run as the queue sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFact {
    pub id: String,
    pub order: Option<String>,
    /// What the run was (its agent and command): a later success with the same title
    /// clears a failure.
    pub title: String,
    pub succeeded: bool,
    pub failed: bool,
    pub ended_at: Option<Millis>,
    pub reason: Option<String>,
}

/// The runs the queue is computed from, kept as they are read: every failed run, and of
/// the successes only the newest for each title and for each order, which is all a
/// failure's clearing asks ("a later success with the same title or order"). Runs that
/// neither failed nor succeeded are dropped. So the queue's memory follows its failures,
/// not every run in the window.
#[derive(Debug, Default)]
pub struct RunFacts {
    failed: Vec<RunFact>,
    by_title: HashMap<String, RunFact>,
    by_order: HashMap<String, RunFact>,
}

impl RunFacts {
    pub fn push(&mut self, run: RunFact) {
        if run.failed {
            self.failed.push(run);
            return;
        }
        if !run.succeeded {
            return;
        }
        let newer = |kept: Option<&RunFact>| kept.is_none_or(|k| k.ended_at < run.ended_at);
        if let Some(order) = &run.order
            && newer(self.by_order.get(order))
        {
            self.by_order.insert(order.clone(), run.clone());
        }
        if newer(self.by_title.get(&run.title)) {
            self.by_title.insert(run.title.clone(), run);
        }
    }

    /// The kept runs, each once.
    pub fn into_runs(self) -> Vec<RunFact> {
        let mut runs = self.failed;
        let mut seen = std::collections::HashSet::new();
        for run in self
            .by_title
            .into_values()
            .chain(self.by_order.into_values())
        {
            if seen.insert(run.id.clone()) {
                runs.push(run);
            }
        }
        runs
    }
}

/// Everything the queue is computed from.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub now: Millis,
    pub runs: Vec<RunFact>,
    /// Every other source, already shaped as items (reviews, needs, owners, late requests).
    pub items: Vec<Item>,
    /// Acknowledgements: item id → when (the newest), for at least every candidate.
    pub acks: HashMap<String, Millis>,
}

/// A lane as shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct LaneShown {
    pub lane: Lane,
    pub items: Vec<Item>,
    /// Items beyond [`PER_LANE`].
    pub held_back: usize,
}

/// Every item before acknowledgements are applied: the failed runs no later success
/// cleared, then the other sources' items. What the caller looks up acknowledgements for.
pub fn candidates(facts: &Facts) -> Vec<Item> {
    let since = facts.now - FAILED_RUNS_WINDOW_MS;
    let mut items: Vec<Item> = facts
        .runs
        .iter()
        .filter(|r| r.failed && r.ended_at.is_some_and(|at| at >= since))
        .filter(|r| {
            let at = r.ended_at.unwrap_or(0);
            // A later success for the same order, or with the same title, clears it.
            !facts.runs.iter().any(|s| {
                s.succeeded
                    && s.ended_at.is_some_and(|e| e > at)
                    && (s.title == r.title || (r.order.is_some() && s.order == r.order))
            })
        })
        .map(|r| Item {
            id: format!("run:{}", r.id),
            source: Source::FailedRun,
            order: r.order.clone(),
            text: format!(
                "{} failed{}",
                r.title,
                r.reason
                    .as_deref()
                    .map(|w| format!(": {w}"))
                    .unwrap_or_default()
            ),
            at: r.ended_at.unwrap_or(0),
            label: None,
        })
        .collect();
    items.extend(facts.items.iter().cloned());
    items
}

/// The queue: every lane, in [`Lane::ALL`] order.
pub fn compute(facts: &Facts) -> Vec<LaneShown> {
    let mut items = candidates(facts);
    // Acknowledged after the latest signal.
    items.retain(|i| facts.acks.get(&i.id).is_none_or(|acked| *acked < i.at));
    // One item per order: the newest signal (ties: the later source in the list).
    items.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| b.id.cmp(&a.id)));
    let mut seen_orders = std::collections::HashSet::new();
    items.retain(|i| match &i.order {
        Some(o) => seen_orders.insert(o.clone()),
        None => true,
    });
    Lane::ALL
        .into_iter()
        .map(|lane| {
            let all: Vec<Item> = items
                .iter()
                .filter(|i| i.source.lane() == lane)
                .cloned()
                .collect();
            let held_back = all.len().saturating_sub(PER_LANE);
            LaneShown {
                lane,
                items: all.into_iter().take(PER_LANE).collect(),
                held_back,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Millis = 10 * 60 * 60 * 1000;

    fn run(id: &str, order: Option<&str>, title: &str, ok: bool, at: Millis) -> RunFact {
        RunFact {
            id: id.into(),
            order: order.map(str::to_owned),
            title: title.into(),
            succeeded: ok,
            failed: !ok,
            ended_at: Some(at),
            reason: None,
        }
    }

    fn item(id: &str, source: Source, order: Option<&str>, at: Millis) -> Item {
        Item {
            id: id.into(),
            source,
            order: order.map(str::to_owned),
            text: id.into(),
            at,
            label: None,
        }
    }

    fn ids(facts: &Facts) -> Vec<String> {
        compute(facts)
            .into_iter()
            .flat_map(|l| l.items)
            .map(|i| i.id)
            .collect()
    }

    fn facts(runs: Vec<RunFact>, items: Vec<Item>) -> Facts {
        Facts {
            now: NOW,
            runs,
            items,
            acks: HashMap::new(),
        }
    }

    proptest::proptest! {
        /// Keeping only the failures and the newest success per title and per order
        /// gives the queue every run would.
        #[test]
        fn kept_runs_give_the_queue_all_runs_give(
            runs in proptest::collection::vec(
                (0u8..4, proptest::option::of(0u8..3), 0u8..3, 0i64..40),
                0..40,
            )
        ) {
            let all: Vec<RunFact> = runs
                .iter()
                .enumerate()
                .map(|(n, (kind, order, title, ago))| RunFact {
                    id: format!("r{n}"),
                    order: order.map(|o| format!("wo_{o}")),
                    title: format!("t{title}"),
                    succeeded: *kind == 0,
                    failed: *kind == 1 || *kind == 2,
                    ended_at: (*kind != 3).then_some(NOW - ago * 300_000),
                    reason: None,
                })
                .collect();
            let mut kept = RunFacts::default();
            for run in all.iter().cloned() {
                kept.push(run);
            }
            let kept = facts(kept.into_runs(), vec![]);
            proptest::prop_assert_eq!(ids(&kept), ids(&facts(all, vec![])));
        }
    }

    #[test]
    fn a_failed_run_counts_for_two_hours() {
        let f = facts(
            vec![
                run("r1", None, "make", false, NOW - 60_000),
                run("r2", None, "cargo", false, NOW - FAILED_RUNS_WINDOW_MS - 1),
            ],
            vec![],
        );
        assert_eq!(ids(&f), ["run:r1"]);
    }

    #[test]
    fn an_acknowledgement_after_the_latest_signal_suppresses_it() {
        let mut f = facts(vec![], vec![item("need:n1", Source::NeedByHand, None, 100)]);
        f.acks.insert("need:n1".into(), 100);
        assert!(ids(&f).is_empty());
        // A signal newer than the acknowledgement brings it back.
        f.acks.insert("need:n1".into(), 99);
        assert_eq!(ids(&f), ["need:n1"]);
    }

    #[test]
    fn a_later_success_for_the_same_order_or_title_suppresses_a_failure() {
        let failed = run("r1", Some("wo_1"), "claude", false, NOW - 1000);
        let same_order = run("r2", Some("wo_1"), "codex", true, NOW - 500);
        let same_title = run("r3", None, "claude", true, NOW - 500);
        let other = run("r4", Some("wo_2"), "codex", true, NOW - 500);
        let earlier = run("r5", Some("wo_1"), "claude", true, NOW - 2000);
        assert!(ids(&facts(vec![failed.clone(), same_order], vec![])).is_empty());
        assert!(ids(&facts(vec![failed.clone(), same_title], vec![])).is_empty());
        assert_eq!(ids(&facts(vec![failed.clone(), other], vec![])), ["run:r1"]);
        assert_eq!(ids(&facts(vec![failed, earlier], vec![])), ["run:r1"]);
    }

    #[test]
    fn items_about_one_order_keep_the_newest_signal() {
        let f = facts(
            vec![run("r1", Some("wo_1"), "claude", false, NOW - 300)],
            vec![
                item(
                    "order:wo_1",
                    Source::WaitingOnOwner,
                    Some("wo_1"),
                    NOW - 100,
                ),
                item("review:wo_1", Source::Review, Some("wo_1"), NOW - 200),
                item(
                    "order:wo_2",
                    Source::WaitingOnOwner,
                    Some("wo_2"),
                    NOW - 400,
                ),
            ],
        );
        assert_eq!(ids(&f), ["order:wo_1", "order:wo_2"]);
    }

    #[test]
    fn a_lane_shows_five_newest_first_and_counts_the_rest() {
        let items = (0..8)
            .map(|i| item(&format!("need:n{i}"), Source::NeedBySession, None, i))
            .collect();
        let lanes = compute(&facts(vec![], items));
        let needs = &lanes[2];
        assert_eq!(needs.lane, Lane::Needs);
        let shown: Vec<&str> = needs.items.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(
            shown,
            ["need:n7", "need:n6", "need:n5", "need:n4", "need:n3"]
        );
        assert_eq!(needs.held_back, 3);
        assert!(lanes.iter().all(|l| l.items.len() <= PER_LANE));
    }
}
