//! The run ledger's use cases: its writes, the runs with their health, the
//! receipts a run owed, an agent hook's event, and the reaper's pass.

use std::collections::HashSet;

use baton_core::packet::DEFAULT_MAX_BYTES;
use baton_core::run::{Health, HookCall, Run, RunChange, RunStatus, health};
use baton_core::state::{RECEIPT_MISSING, StateOp};
use baton_core::time::rfc3339;
use baton_core::{Change, Event, Passname, Refusal};
use baton_store::{Reaped, RunQuery, StoreError};
use serde::Serialize;

use crate::host::Processes;
use crate::{App, Result};

/// Runs read at a time by [`App::each_run`].
const RUN_PAGE: u32 = 500;

/// A run and its health, judged now (`None` once it ended).
#[derive(Debug, Clone)]
pub struct RunRow {
    pub run: Run,
    pub health: Option<Health>,
}

/// What one reaper pass did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Pass {
    pub lost: Vec<Reaped>,
    pub untracked: Vec<String>,
    pub gone: Vec<String>,
    /// Alerts raised for waits whose deadline passed with no receipt.
    pub overdue: Vec<String>,
    /// Sessions and helpers seen through hooks that fell silent, now ended.
    pub ended: Vec<String>,
    /// Alerts raised for ended sessions whose participant holds work.
    pub held: Vec<String>,
}

impl Pass {
    pub fn is_empty(&self) -> bool {
        self.lost.is_empty()
            && self.untracked.is_empty()
            && self.gone.is_empty()
            && self.overdue.is_empty()
            && self.ended.is_empty()
    }
}

/// How many ended runs the default view of the ledger shows beside the live ones.
pub const RECENT_RUNS: u32 = 50;

/// The actor recorded for the reaper's facts.
pub const REAPER: &str = "@reaper";

impl App {
    /// Records facts about runs as `actor`, in one transaction.
    pub async fn record_run(&self, actor: &str, changes: &[RunChange]) -> Result<Vec<Event>> {
        self.store().record_run(actor, changes).await
    }

    /// The runs `baton runs` shows, oldest first, each with its health now: by default
    /// the live runs and the newest `RECENT_RUNS` others (a bounded read, however long the
    /// ledger); with `all`, a page of `limit` of every run after `cursor`, and the cursor
    /// of the next page (none on the last).
    pub async fn runs_view(
        &self,
        all: bool,
        cursor: Option<&str>,
        limit: u32,
    ) -> Result<(Vec<RunRow>, Option<String>)> {
        if !all {
            let query = RunQuery {
                recent: Some(RECENT_RUNS),
                ..RunQuery::default()
            };
            return Ok((self.runs(&query).await?, None));
        }
        let query = RunQuery {
            after_seq: cursor.map(baton_store::decode_cursor).transpose()?,
            limit: Some(limit.saturating_add(1)),
            ..RunQuery::default()
        };
        let mut rows = self.runs(&query).await?;
        let next = if rows.len() > limit as usize {
            rows.truncate(limit as usize);
            rows.last().map(|r| baton_store::encode_cursor(r.run.seq))
        } else {
            None
        };
        Ok((rows, next))
    }

    /// Runs matching `query`, oldest first, each with its health now.
    pub async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRow>> {
        let now = self.now();
        let policy = self.settings.health_policy();
        Ok(self
            .store()
            .runs(query)
            .await?
            .into_iter()
            .map(|run| RunRow {
                health: health(&run, now, &policy),
                run,
            })
            .collect())
    }

    /// Hands every run matching `query` to `each`, oldest first, read a page of
    /// [`RUN_PAGE`] at a time: for a caller that folds any number of runs in bounded
    /// memory (`query`'s own `after_seq` and `limit` are replaced).
    pub(crate) async fn each_run(&self, query: RunQuery, mut each: impl FnMut(Run)) -> Result<()> {
        let mut query = RunQuery {
            limit: Some(RUN_PAGE),
            after_seq: None,
            ..query
        };
        loop {
            let page = self.store().runs(&query).await?;
            let full = page.len() == RUN_PAGE as usize;
            query.after_seq = page.last().map(|r| r.seq);
            page.into_iter().for_each(&mut each);
            if !full {
                return Ok(());
            }
        }
    }

    /// The `expected` steps with no receipt written during run `id` (after its
    /// registration at `registered_seq`, and not attributed to another run).
    pub async fn missing_receipts(
        &self,
        expected: &[String],
        registered_seq: i64,
        id: &str,
    ) -> Result<Vec<String>> {
        if expected.is_empty() {
            return Ok(Vec::new());
        }
        let state = self.state().await?;
        Ok(expected
            .iter()
            .filter(|step| {
                !state.receipts.get(step.as_str()).is_some_and(|r| {
                    r.written.seq > registered_seq
                        && r.record.run.as_deref().is_none_or(|run| run == id)
                })
            })
            .cloned()
            .collect())
    }

    /// Records an agent hook's call, as `me` when `me` is registered; with `inject`
    /// (where the agent reads a hook's stdout: [`baton_core::run::hook_injects`]) returns
    /// `me`'s resume packet for the agent.
    pub async fn hook(
        &self,
        me: Option<&str>,
        call: HookCall,
        inject: bool,
    ) -> Result<Option<String>> {
        // The name is checked here and looked up only as the event joins the log (maybe
        // later, from the spool): a hook that injects nothing reads nothing.
        let claimed = me.and_then(|name| Passname::new(name).ok());
        let actor = claimed
            .as_ref()
            .map_or(baton_core::event::LOCAL_OPERATOR, Passname::as_str);
        let wants_packet = inject && baton_core::run::hook_injects(&call.event);
        self.store().record_hook(actor, call).await?;
        let Some(name) = me.filter(|_| wants_packet) else {
            return Ok(None);
        };
        match self.identify(name).await {
            Ok(me) => Ok(Some(self.resume(&me, DEFAULT_MAX_BYTES).await?.packet.text)),
            Err(StoreError::Refused(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// One reaper pass over the runs recorded on this machine: a registered or running
    /// run whose `baton run` is gone is lost (what its participant held resurfaces); an
    /// untracked agent that exited is marked gone; agents running outside `baton run` are
    /// recorded as untracked; waits past their deadline alert. Each condition alerts once.
    pub async fn reap(&self, processes: &dyn Processes) -> Result<Pass> {
        let here = processes.host();
        let live = self
            .store()
            .runs(&RunQuery {
                live: true,
                ..RunQuery::default()
            })
            .await?;
        let mut done = Pass::default();
        let mut tracked: HashSet<u32> = HashSet::from([processes.me()]);
        for run in live.iter().filter(|r| r.host == here) {
            match run.status {
                RunStatus::Registered | RunStatus::Running => {
                    let Some(monitor) = run.monitor else { continue };
                    if processes.alive(&monitor) != Some(false) {
                        tracked.insert(monitor.pid);
                        tracked.extend(run.process.map(|p| p.pid));
                        continue;
                    }
                    let reason = lost_reason(run, processes);
                    if let Some(reaped) = self.store().reap_lost(REAPER, &run.id, &reason).await? {
                        done.lost.push(reaped);
                    }
                }
                RunStatus::Untracked => {
                    let Some(process) = run.process else { continue };
                    if processes.alive(&process) != Some(false) {
                        tracked.insert(process.pid);
                        continue;
                    }
                    let gone = RunChange::Lost {
                        run: run.id.clone(),
                        reason: format!("untracked process {} has exited", process.pid),
                    };
                    match self.record_run(REAPER, &[gone]).await {
                        Ok(_) => done.gone.push(run.id.clone()),
                        // Another reaper recorded it first.
                        Err(StoreError::Refused(Refusal::RunStatus { .. })) => {}
                        Err(e) => return Err(e),
                    }
                }
                _ => {}
            }
        }

        let found: Vec<RunChange> = processes
            .untracked_agents(&tracked)
            .into_iter()
            .map(|r| RunChange::Untracked(Box::new(r)))
            .collect();
        if !found.is_empty() {
            for event in self.record_run(REAPER, &found).await? {
                if let Change::Run(change) = &event.change {
                    done.untracked.extend(change.run().map(str::to_owned));
                }
            }
        }

        // Sessions and helpers seen through hooks have no pid: silence ends them, once; a
        // session whose participant holds work says so in an alert. The alert is raised
        // before the end is recorded: a pass killed between the two leaves the session
        // running, and the next pass raises nothing twice (an open alert is not raised
        // again) and ends it.
        let now = self.now();
        let silent_ms = self.settings().session_ended_after.as_millis() as i64;
        for run in live
            .iter()
            .filter(|r| baton_core::run::fell_silent(r, now, silent_ms))
        {
            let holder = run
                .participant
                .as_deref()
                .filter(|_| run.source == baton_core::run::Source::Session)
                .and_then(|p| Passname::new(p).ok());
            if let Some(who) = holder {
                let held = self.store().owed(&who, 0).await?.1;
                if held > 0 {
                    let alert = StateOp::Alert {
                        key: format!("session-ended:{}", run.id),
                        message: format!(
                            "session {} of {who} fell silent and was ended; {who} holds \
                             {held} message(s) not finished (`baton --as {who} inbox`)",
                            run.id
                        ),
                    };
                    done.held.extend(self.record(REAPER, &[alert]).await?.ids());
                }
            }
            let ended = RunChange::Ended {
                run: run.id.clone(),
                reason: format!(
                    "no hook for longer than {} (runs.session_ended_after)",
                    baton_core::time::age(run.last_event_at, now)
                ),
            };
            match self.record_run(REAPER, &[ended]).await {
                Ok(_) => done.ended.push(run.id.clone()),
                // Another reaper, or a hook, got there first.
                Err(StoreError::Refused(Refusal::RunStatus { .. })) => {}
                Err(e) => return Err(e),
            }
        }

        // Waits past their deadline: the waiter may be gone, the condition is not.
        let alerts: Vec<StateOp> = self
            .state()
            .await?
            .overdue(self.now())
            .into_iter()
            .map(|(step, deadline)| StateOp::Alert {
                key: format!("{RECEIPT_MISSING}{step}"),
                message: format!(
                    "no receipt for step {step:?} by its deadline {}",
                    rfc3339(deadline)
                ),
            })
            .collect();
        if !alerts.is_empty() {
            done.overdue = self.record(REAPER, &alerts).await?.ids();
        }
        Ok(done)
    }
}

/// Why a run is lost, in the ledger's words.
fn lost_reason(run: &Run, processes: &dyn Processes) -> String {
    let monitor = run.monitor.map_or(0, |m| m.pid);
    let agent = match run.process {
        Some(p) => match processes.alive(&p) {
            Some(true) => format!("; its command (pid {}) is still running", p.pid),
            _ => format!("; its command (pid {}) is gone too", p.pid),
        },
        None => "; its command never started".to_owned(),
    };
    format!("its `baton run` (pid {monitor}) is gone without recording an exit{agent}")
}
