//! Project memory: state changes (focus, streams, decisions, constraints, notes, alerts),
//! what a note is about, the state with each note's freshness, and the resume packet.

use std::path::Path;

use baton_core::state::{Alert, Freshness, Note, ProjectState, StateOp, Subject};
use baton_core::statefile::{self, Verdict};
use baton_core::{Event, Passname, Refusal};

use crate::host::PathProblem;
use crate::recall::{self, Resume};
use crate::{App, Result};

/// What a state change recorded: each event's subject (`D-3`, `C-1`, `N-2`, a stream's
/// name) and the generation after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub events: Vec<Event>,
}

impl Recorded {
    /// The ids the events recorded, in order.
    pub fn ids(&self) -> Vec<String> {
        self.events
            .iter()
            .map(|e| e.change.subject().to_owned())
            .collect()
    }

    /// The store's generation after the write; `None` when nothing was written.
    pub fn generation(&self) -> Option<i64> {
        self.events.last().map(|e| e.seq)
    }
}

/// What importing a STATE.md did: the changes its edits make, and the ids recorded (none
/// on a dry run).
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    pub ops: Vec<StateOp>,
    pub recorded: Vec<String>,
}

impl App {
    /// Applies state changes as `actor`, all in one transaction or none.
    pub async fn record(&self, actor: &str, ops: &[StateOp]) -> Result<Recorded> {
        let max = baton_core::state::MAX_CHANGES_PER_WRITE;
        if ops.len() > max {
            return Err(Refusal::TooManyChanges {
                max,
                got: ops.len(),
            }
            .into());
        }
        let events = self.store().change_state(actor, ops).await?;
        Ok(Recorded { events })
    }

    /// What a note's `subject` names: a message or order id when one exists; otherwise a
    /// path that exists (relative to `base`), stored relative to the project root.
    pub async fn note_subject(&self, base: &Path, subject: &str) -> Result<Subject> {
        if self.store().last_change(subject, 0).await?.is_some() {
            return Ok(Subject::Record(subject.to_owned()));
        }
        match self.host.files.resolve(base, subject) {
            Ok(path) => Ok(Subject::Path(path)),
            Err(PathProblem::Missing) => Err(Refusal::NoSubject {
                subject: subject.to_owned(),
            }
            .into()),
            Err(PathProblem::Outside) => Err(Refusal::Outside {
                subject: subject.to_owned(),
                root: self.host.root.display().to_string(),
            }
            .into()),
        }
    }

    /// Writes a note as `actor` on `subject` (an id, or a path relative to `base`).
    pub async fn note(
        &self,
        actor: &str,
        text: String,
        subject: &str,
        base: &Path,
    ) -> Result<Recorded> {
        let subject = self.note_subject(base, subject).await?;
        self.record(actor, &[StateOp::Note { text, subject }]).await
    }

    /// The project state.
    pub async fn state(&self) -> Result<ProjectState> {
        self.store().state().await
    }

    /// `baton state show`'s document: the state and every note with its freshness.
    pub async fn state_shown(&self) -> Result<crate::doc::State> {
        let state = self.state().await?;
        let notes = self.notes(&state, usize::MAX).await?;
        Ok(crate::doc::State::new(&state, notes))
    }

    /// The newest `limit` notes of `state` with their freshness, newest first.
    pub async fn notes(
        &self,
        state: &ProjectState,
        limit: usize,
    ) -> Result<Vec<(Note, Freshness)>> {
        let newest = state.notes.iter().rev().take(limit);
        recall::notes_freshness(self.store(), self.host.paths.as_ref(), newest).await
    }

    /// `me`'s resume packet, within `max_bytes`.
    pub async fn resume(&self, me: &Passname, max_bytes: usize) -> Result<Resume> {
        let place = self.host.root.display().to_string();
        let live = self.live_of(me.as_str()).await?;
        recall::resume(
            self.store(),
            self.host.paths.as_ref(),
            me,
            &place,
            &live,
            max_bytes,
            self.now(),
        )
        .await
    }

    /// The verdict on a rendered STATE.md (its bytes as read): valid, truncated, stale
    /// against the store's state now, or drifted.
    pub async fn judge_state_file(&self, bytes: &[u8]) -> Result<Verdict> {
        let generation = self.state().await?.generation;
        Ok(statefile::judge(bytes, generation))
    }

    /// Applies the edits made to a STATE.md's tables as `actor` (with `dry_run`, only says
    /// what they would be) when the file is valid and current; otherwise its verdict.
    pub async fn import_state_file(
        &self,
        actor: &str,
        bytes: &[u8],
        dry_run: bool,
    ) -> Result<std::result::Result<Imported, Verdict>> {
        let (tables, snapshot) = match self.judge_state_file(bytes).await? {
            Verdict::Valid { tables, snapshot } => (tables, snapshot),
            other => return Ok(Err(other)),
        };
        let ops = statefile::import_ops(&tables, &snapshot)
            .map_err(|refused| Refusal::StateEdits { refused })?;
        let max = baton_core::state::MAX_CHANGES_PER_WRITE;
        if ops.len() > max {
            // Refused for a dry run too: the import as it stands could never be applied.
            return Err(Refusal::TooManyChanges {
                max,
                got: ops.len(),
            }
            .into());
        }
        let recorded = if dry_run || ops.is_empty() {
            Vec::new()
        } else {
            self.record(actor, &ops).await?.ids()
        };
        Ok(Ok(Imported { ops, recorded }))
    }

    /// The open alerts.
    pub async fn alerts(&self) -> Result<Vec<Alert>> {
        Ok(self.state().await?.alerts)
    }
}
