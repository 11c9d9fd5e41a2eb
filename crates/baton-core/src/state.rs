//! Project state: focus, streams, decisions, constraints, notes with
//! provenance, receipts and alerts — a fold over the state events of the log.
//!
//! Writers describe what they want as [`StateOp`]s; [`ProjectState::plan`] checks each one
//! against the current state and turns it into the [`Change`] to append (assigning the
//! next `D-N`, `C-N` or `N-N`), so numbering and validation live here, not in a backend.

/// The most state changes one write may make: a STATE.md import, a session's end, one
/// command. A hand-edited file with thousands of new rows is refused rather than held
/// under the write lock while every other writer waits.
pub const MAX_CHANGES_PER_WRITE: usize = 1000;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::event::{Change, Event};
use crate::refusal::{Field, Record, Refusal};
use crate::time::Millis;

/// A request to change the project state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum StateOp {
    Focus {
        text: String,
    },
    Stream {
        name: String,
        status: String,
    },
    StreamDone {
        name: String,
    },
    Decide {
        text: String,
        why: String,
        #[serde(default)]
        supersedes: Option<String>,
    },
    Constrain {
        text: String,
        tried: String,
        result: String,
    },
    Note {
        text: String,
        subject: Subject,
    },
    DependencyChange {
        text: String,
    },
    /// The first action the actor's next session takes: where its session stopped. One
    /// per participant; a newer one replaces it.
    ResumeAt {
        text: String,
    },
    Receipt(ReceiptRecord),
    /// Someone waits for a step's receipt until `deadline`; the reaper alerts when it passes
    /// unmet, even if the waiter is gone. Nothing is recorded when the receipt exists.
    Expect {
        step: String,
        deadline: Millis,
    },
    /// Raises the alert unless one with the same key is open.
    Alert {
        key: String,
        message: String,
    },
    AlertAck {
        id: String,
    },
}

/// What a note is about. Its staleness is judged against this subject's later changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum Subject {
    /// A path in the repository, relative to the project root.
    Path(String),
    /// A message or order id: stale after a later event on it.
    Record(String),
}

impl Subject {
    pub fn label(&self) -> &str {
        match self {
            Self::Path(p) | Self::Record(p) => p,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReceiptRecord {
    pub step: String,
    /// A path relative to the project root, or a URI.
    pub artifact: String,
    /// Hex blake3 of the artifact's bytes; `None` for a URI Baton cannot read.
    pub hash: Option<String>,
    pub size: Option<u64>,
    #[serde(default)]
    pub run: Option<String>,
}

/// The alert key prefix for a step whose receipt did not arrive: `receipt-missing:STEP`.
pub const RECEIPT_MISSING: &str = "receipt-missing:";

impl ProjectState {
    /// Expectations whose deadline passed without a receipt, oldest deadline first.
    pub fn overdue(&self, now: Millis) -> Vec<(&str, Millis)> {
        let mut late: Vec<(&str, Millis)> = self
            .expected
            .iter()
            .filter(|(_, deadline)| **deadline < now)
            .map(|(step, deadline)| (step.as_str(), *deadline))
            .collect();
        late.sort_by_key(|(_, d)| *d);
        late
    }
}

/// Longest text accepted in one state item, in characters.
pub const MAX_TEXT: usize = 2000;

fn text(field: Field, value: &str) -> Result<String, Refusal> {
    let value = value.trim();
    if value.is_empty() {
        return Err(Refusal::Missing(field));
    }
    let len = value.chars().count();
    if len > MAX_TEXT {
        return Err(Refusal::TooLong {
            field,
            max: MAX_TEXT,
            len,
        });
    }
    Ok(value.to_owned())
}

/// Who wrote an item and when: every state item carries its provenance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Provenance {
    pub seq: i64,
    pub at: Millis,
    pub actor: String,
}

impl Provenance {
    fn of(event: &Event) -> Self {
        Self {
            seq: event.seq,
            at: event.at,
            actor: event.actor.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Decision {
    pub id: String,
    pub text: String,
    pub why: String,
    pub supersedes: Option<String>,
    pub superseded_by: Option<String>,
    pub written: Provenance,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Constraint {
    pub id: String,
    pub text: String,
    pub tried: String,
    pub result: String,
    pub written: Provenance,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Note {
    pub id: String,
    pub text: String,
    pub subject: Subject,
    pub written: Provenance,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stream {
    pub name: String,
    pub status: String,
    pub written: Provenance,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Receipt {
    #[serde(flatten)]
    pub record: ReceiptRecord,
    pub written: Provenance,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Alert {
    pub id: String,
    pub key: String,
    pub message: String,
    pub raised: Provenance,
}

/// The project state as of `generation`: the fold of every state event.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProjectState {
    /// The seq of the newest state event (0 when none).
    pub generation: i64,
    pub focus: Option<(String, Provenance)>,
    /// Active streams by name.
    pub streams: BTreeMap<String, Stream>,
    pub decisions: Vec<Decision>,
    pub constraints: Vec<Constraint>,
    pub notes: Vec<Note>,
    pub dependency_changes: Vec<(String, Provenance)>,
    /// Each participant's newest `resume_at`: the first action its next session takes.
    #[serde(default)]
    pub resume_at: BTreeMap<String, (String, Provenance)>,
    /// The newest receipt of each step.
    pub receipts: BTreeMap<String, Receipt>,
    /// Receipts awaited and not yet written nor alerted about: step → deadline.
    pub expected: BTreeMap<String, Millis>,
    /// Open alerts, oldest first.
    pub alerts: Vec<Alert>,
    /// How many alerts were ever raised (numbers `A-N` are never reused).
    pub alerts_raised: u32,
}

impl ProjectState {
    /// Folds `events` (any kinds; non-state ones are skipped) in order.
    pub fn replay<'a>(events: impl IntoIterator<Item = &'a Event>) -> Self {
        let mut state = Self::default();
        for e in events {
            state.apply(e);
        }
        state
    }

    /// Applies one event. Non-state events change nothing.
    pub fn apply(&mut self, event: &Event) {
        let Change::State(change) = &event.change else {
            return;
        };
        let p = Provenance::of(event);
        self.generation = event.seq;
        match change {
            StateChange::Focus { text } => self.focus = Some((text.clone(), p)),
            StateChange::Stream { name, status } => {
                self.streams.insert(
                    name.clone(),
                    Stream {
                        name: name.clone(),
                        status: status.clone(),
                        written: p,
                    },
                );
            }
            StateChange::StreamDone { name } => {
                self.streams.remove(name);
            }
            StateChange::Decision {
                id,
                text,
                why,
                supersedes,
            } => {
                if let Some(old) = supersedes
                    && let Some(d) = self.decisions.iter_mut().find(|d| &d.id == old)
                {
                    d.superseded_by = Some(id.clone());
                }
                self.decisions.push(Decision {
                    id: id.clone(),
                    text: text.clone(),
                    why: why.clone(),
                    supersedes: supersedes.clone(),
                    superseded_by: None,
                    written: p,
                });
            }
            StateChange::Constraint {
                id,
                text,
                tried,
                result,
            } => self.constraints.push(Constraint {
                id: id.clone(),
                text: text.clone(),
                tried: tried.clone(),
                result: result.clone(),
                written: p,
            }),
            StateChange::Note { id, text, subject } => self.notes.push(Note {
                id: id.clone(),
                text: text.clone(),
                subject: subject.clone(),
                written: p,
            }),
            StateChange::DependencyChange { text } => {
                self.dependency_changes.push((text.clone(), p));
            }
            StateChange::ResumeAt { text } => {
                self.resume_at.insert(p.actor.clone(), (text.clone(), p));
            }
            StateChange::Expected { step, deadline } => {
                self.expected.insert(step.clone(), *deadline);
            }
            StateChange::Receipt(record) => {
                self.expected.remove(&record.step);
                self.receipts.insert(
                    record.step.clone(),
                    Receipt {
                        record: record.clone(),
                        written: p,
                    },
                );
            }
            StateChange::AlertRaised { id, key, message } => {
                // The alert is the loud failure of an expectation: it is settled.
                if let Some(step) = key.strip_prefix(RECEIPT_MISSING) {
                    self.expected.remove(step);
                }
                self.alerts_raised += 1;
                self.alerts.push(Alert {
                    id: id.clone(),
                    key: key.clone(),
                    message: message.clone(),
                    raised: p,
                });
            }
            StateChange::AlertAcked { id } => self.alerts.retain(|a| &a.id != id),
        }
    }

    /// Checks `op` against this state and returns the change to append, or `None` when
    /// there is nothing to record (an alert that is already open).
    pub fn plan(&self, op: &StateOp) -> Result<Option<StateChange>, Refusal> {
        Ok(Some(match op {
            StateOp::Focus { text: t } => StateChange::Focus {
                text: text(Field::Focus, t)?,
            },
            StateOp::Stream { name, status } => StateChange::Stream {
                name: text(Field::StreamName, name)?,
                status: text(Field::StreamStatus, status)?,
            },
            StateOp::StreamDone { name } => {
                let name = name.trim();
                if !self.streams.contains_key(name) {
                    return Err(Refusal::not_found(Record::Stream, name));
                }
                StateChange::StreamDone {
                    name: name.to_owned(),
                }
            }
            StateOp::Decide {
                text: t,
                why,
                supersedes,
            } => {
                if let Some(old) = supersedes {
                    let d = self
                        .decisions
                        .iter()
                        .find(|d| &d.id == old)
                        .ok_or_else(|| Refusal::not_found(Record::Decision, old))?;
                    if let Some(newer) = &d.superseded_by {
                        return Err(Refusal::Superseded {
                            decision: old.clone(),
                            by: newer.clone(),
                        });
                    }
                }
                StateChange::Decision {
                    id: format!("D-{}", self.decisions.len() + 1),
                    text: text(Field::Decision, t)?,
                    why: text(Field::Why, why)?,
                    supersedes: supersedes.clone(),
                }
            }
            StateOp::Constrain {
                text: t,
                tried,
                result,
            } => StateChange::Constraint {
                id: format!("C-{}", self.constraints.len() + 1),
                text: text(Field::Constraint, t)?,
                tried: text(Field::Tried, tried)?,
                result: text(Field::Result, result)?,
            },
            StateOp::Note { text: t, subject } => StateChange::Note {
                id: format!("N-{}", self.notes.len() + 1),
                text: text(Field::Note, t)?,
                subject: match subject {
                    Subject::Path(p) => Subject::Path(text(Field::Subject, p)?),
                    Subject::Record(r) => Subject::Record(text(Field::Subject, r)?),
                },
            },
            StateOp::DependencyChange { text: t } => StateChange::DependencyChange {
                text: text(Field::DependencyChange, t)?,
            },
            StateOp::ResumeAt { text: t } => StateChange::ResumeAt {
                text: text(Field::ResumeAt, t)?,
            },
            StateOp::Receipt(record) => {
                text(Field::Step, &record.step)?;
                text(Field::Artifact, &record.artifact)?;
                StateChange::Receipt(record.clone())
            }
            StateOp::Expect { step, deadline } => {
                let step = text(Field::Step, step)?;
                if self.receipts.contains_key(&step) {
                    return Ok(None);
                }
                StateChange::Expected {
                    step,
                    deadline: *deadline,
                }
            }
            StateOp::Alert { key, message } => {
                if self.alerts.iter().any(|a| &a.key == key) {
                    return Ok(None);
                }
                StateChange::AlertRaised {
                    id: format!("A-{}", self.alerts_raised + 1),
                    key: key.clone(),
                    message: text(Field::Alert, message)?,
                }
            }
            StateOp::AlertAck { id } => {
                if !self.alerts.iter().any(|a| &a.id == id) {
                    return Err(Refusal::not_found(Record::Alert, id));
                }
                StateChange::AlertAcked { id: id.clone() }
            }
        }))
    }

    /// Decisions not superseded, newest first.
    pub fn current_decisions(&self) -> impl Iterator<Item = &Decision> {
        self.decisions
            .iter()
            .rev()
            .filter(|d| d.superseded_by.is_none())
    }
}

/// How many of each list a [`StateDigest`] keeps: the newest ones, what a bounded view
/// (the resume packet) shows first.
pub const DIGEST_ITEMS: usize = 50;

/// How many subjects a [`StateDigest`] keeps each participant's newest note on: the
/// subjects it wrote of most recently.
pub const NOTED_SUBJECTS: usize = 100;

/// The newest entries of each list the resume packet shows, with how many there are in
/// all: kept beside the whole state in the same transaction, so a bounded view reads a
/// few kilobytes however long the project has run. Constraints are the exception: what
/// was tried and failed is kept whole, so a reader can find every one on its own topics
/// and paths.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StateDigest {
    pub generation: i64,
    pub focus: Option<(String, Provenance)>,
    /// Every constraint, newest first.
    pub constraints: Vec<Constraint>,
    pub constraints_total: usize,
    /// Decisions not superseded, newest first.
    pub decisions: Vec<Decision>,
    pub decisions_total: usize,
    /// Newest first.
    pub notes: Vec<Note>,
    pub notes_total: usize,
    /// Each participant's newest note on each subject (at most [`NOTED_SUBJECTS`] of
    /// them), newest first; `None` in a digest kept before it held them.
    #[serde(default)]
    pub notes_by_author: Option<BTreeMap<String, Vec<Note>>>,
    /// Open alerts, oldest first (the first `alerts.len()` of them).
    pub alerts: Vec<Alert>,
    pub alerts_total: usize,
    /// Each participant's newest `resume_at`.
    #[serde(default)]
    pub resume_at: BTreeMap<String, (String, Provenance)>,
}

impl StateDigest {
    /// Whether every list is whole (nothing past the kept entries).
    pub fn is_whole(&self) -> bool {
        self.constraints.len() == self.constraints_total
            && self.decisions.len() == self.decisions_total
            && self.notes.len() == self.notes_total
            && self.alerts.len() == self.alerts_total
            && self.notes_by_author.is_some()
    }

    /// `who`'s newest note on each subject, newest first.
    pub fn notes_of(&self, who: &str) -> &[Note] {
        self.notes_by_author
            .as_ref()
            .and_then(|by| by.get(who))
            .map_or(&[], Vec::as_slice)
    }
}

impl ProjectState {
    /// The newest `n` of each list (all of them for `usize::MAX`), every constraint, and
    /// each participant's newest note on each subject.
    pub fn digest(&self, n: usize) -> StateDigest {
        StateDigest {
            generation: self.generation,
            focus: self.focus.clone(),
            constraints: self.constraints.iter().rev().cloned().collect(),
            constraints_total: self.constraints.len(),
            decisions: self.current_decisions().take(n).cloned().collect(),
            decisions_total: self.current_decisions().count(),
            notes: self.notes.iter().rev().take(n).cloned().collect(),
            notes_total: self.notes.len(),
            notes_by_author: Some(self.notes_by_author()),
            alerts: self.alerts.iter().take(n).cloned().collect(),
            alerts_total: self.alerts.len(),
            resume_at: self.resume_at.clone(),
        }
    }

    /// Each author's newest note on each subject, newest first, at most
    /// [`NOTED_SUBJECTS`] an author: a note an author wrote again on the same subject is
    /// replaced by the newer one.
    fn notes_by_author(&self) -> BTreeMap<String, Vec<Note>> {
        let mut by: BTreeMap<String, Vec<Note>> = BTreeMap::new();
        for note in self.notes.iter().rev() {
            let mine = by.entry(note.written.actor.clone()).or_default();
            if mine.len() < NOTED_SUBJECTS && !mine.iter().any(|n| n.subject == note.subject) {
                mine.push(note.clone());
            }
        }
        by
    }
}

/// A change to the project state, as recorded in the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum StateChange {
    Focus {
        text: String,
    },
    Stream {
        name: String,
        status: String,
    },
    StreamDone {
        name: String,
    },
    Decision {
        id: String,
        text: String,
        why: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        supersedes: Option<String>,
    },
    Constraint {
        id: String,
        text: String,
        tried: String,
        result: String,
    },
    Note {
        id: String,
        text: String,
        subject: Subject,
    },
    DependencyChange {
        text: String,
    },
    ResumeAt {
        text: String,
    },
    Receipt(ReceiptRecord),
    Expected {
        step: String,
        deadline: Millis,
    },
    AlertRaised {
        id: String,
        key: String,
        message: String,
    },
    AlertAcked {
        id: String,
    },
}

impl StateChange {
    /// The id or name the change is about, recorded as the event's subject.
    pub fn subject(&self) -> &str {
        match self {
            Self::Focus { .. } => "focus",
            Self::Stream { name, .. } | Self::StreamDone { name } => name,
            Self::Decision { id, .. }
            | Self::Constraint { id, .. }
            | Self::Note { id, .. }
            | Self::AlertRaised { id, .. }
            | Self::AlertAcked { id } => id,
            Self::DependencyChange { .. } => "dependencies",
            Self::ResumeAt { .. } => "resume-at",
            Self::Receipt(r) => &r.step,
            Self::Expected { step, .. } => step,
        }
    }
}

/// Whether a note can still be taken as fact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "freshness", rename_all = "snake_case")]
pub enum Freshness {
    Current,
    /// The subject changed at `changed_at`, after the note was written.
    Stale {
        changed_at: Millis,
    },
    /// The subject cannot be examined (a path outside git and missing, say).
    Unknown,
}

/// A note is stale when its subject's last change is later than the note.
pub fn freshness(note: &Note, subject_changed_at: Option<Millis>) -> Freshness {
    match subject_changed_at {
        Some(t) if t > note.written.at => Freshness::Stale { changed_at: t },
        Some(_) => Freshness::Current,
        None => Freshness::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: i64, change: StateChange) -> Event {
        Event {
            seq,
            id: format!("e{seq}"),
            at: seq * 1000,
            actor: "planner".into(),
            change: Change::State(change),
        }
    }

    /// Plans and applies ops in order, as a store would inside one transaction.
    fn run(ops: &[StateOp]) -> Result<ProjectState, Refusal> {
        let mut state = ProjectState::default();
        for (i, op) in ops.iter().enumerate() {
            if let Some(change) = state.plan(op)? {
                state.apply(&event(i as i64 + 1, change));
            }
        }
        Ok(state)
    }

    fn decide(text: &str, supersedes: Option<&str>) -> StateOp {
        StateOp::Decide {
            text: text.into(),
            why: "because".into(),
            supersedes: supersedes.map(str::to_owned),
        }
    }

    #[test]
    fn decisions_are_numbered_and_superseded_ones_stay_readable() {
        let state = run(&[
            decide("SQLite", None),
            decide("WAL", None),
            decide("PostgreSQL", Some("D-1")),
        ])
        .unwrap();
        let ids: Vec<_> = state.decisions.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["D-1", "D-2", "D-3"]);
        assert_eq!(state.decisions[0].superseded_by.as_deref(), Some("D-3"));
        let current: Vec<_> = state.current_decisions().map(|d| d.id.as_str()).collect();
        assert_eq!(current, ["D-3", "D-2"]);
    }

    #[test]
    fn superseding_twice_or_a_missing_decision_is_refused() {
        let err = run(&[
            decide("a", None),
            decide("b", Some("D-1")),
            decide("c", Some("D-1")),
        ])
        .unwrap_err();
        assert_eq!(
            err,
            Refusal::Superseded {
                decision: "D-1".into(),
                by: "D-2".into()
            }
        );
        assert_eq!(
            run(&[decide("a", Some("D-9"))]).unwrap_err(),
            Refusal::not_found(Record::Decision, "D-9")
        );
    }

    #[test]
    fn empty_text_is_refused_by_field() {
        let err = run(&[StateOp::Constrain {
            text: "x".into(),
            tried: " ".into(),
            result: "r".into(),
        }])
        .unwrap_err();
        assert_eq!(err, Refusal::Missing(Field::Tried));
    }

    #[test]
    fn an_open_alert_is_raised_once_and_again_after_its_ack() {
        let alert = StateOp::Alert {
            key: "receipt:build".into(),
            message: "no receipt".into(),
        };
        let state = run(&[alert.clone(), alert.clone()]).unwrap();
        assert_eq!(state.alerts.len(), 1);
        assert_eq!(state.plan(&alert).unwrap(), None);
        let state = run(&[alert.clone(), StateOp::AlertAck { id: "A-1".into() }, alert]).unwrap();
        let ids: Vec<_> = state.alerts.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["A-2"]);
    }

    #[test]
    fn an_expectation_is_met_by_its_receipt_or_settled_by_its_alert() {
        let expect = |step: &str| StateOp::Expect {
            step: step.into(),
            deadline: 5_000,
        };
        let receipt = StateOp::Receipt(ReceiptRecord {
            step: "build".into(),
            artifact: "out".into(),
            hash: None,
            size: None,
            run: None,
        });
        let state = run(&[expect("build"), expect("deploy")]).unwrap();
        assert_eq!(state.overdue(4_000), vec![]);
        assert_eq!(
            state.overdue(6_000),
            vec![("build", 5_000), ("deploy", 5_000)]
        );
        let state = run(&[expect("build"), receipt.clone()]).unwrap();
        assert!(state.expected.is_empty(), "the receipt meets it");
        assert_eq!(
            state.plan(&expect("build")).unwrap(),
            None,
            "nothing to expect once it exists"
        );
        let alert = StateOp::Alert {
            key: format!("{RECEIPT_MISSING}deploy"),
            message: "late".into(),
        };
        let state = run(&[expect("deploy"), alert]).unwrap();
        assert!(state.expected.is_empty(), "the alert settles it");
    }

    #[test]
    fn done_streams_leave_the_active_view() {
        let state = run(&[
            StateOp::Stream {
                name: "export".into(),
                status: "fixing".into(),
            },
            StateOp::Stream {
                name: "docs".into(),
                status: "drafting".into(),
            },
            StateOp::StreamDone {
                name: "export".into(),
            },
        ])
        .unwrap();
        assert_eq!(state.streams.keys().collect::<Vec<_>>(), ["docs"]);
        assert!(
            run(&[StateOp::StreamDone {
                name: "nope".into()
            }])
            .is_err()
        );
    }

    #[test]
    fn each_participant_keeps_its_newest_resume_at() {
        let at = |text: &str| StateOp::ResumeAt { text: text.into() };
        let mut state = ProjectState::default();
        for (seq, (actor, op)) in [
            ("planner", at("run cargo test -p export")),
            ("impl-1", at("read src/auth.rs first")),
            ("planner", at("answer order wo-3's question")),
        ]
        .into_iter()
        .enumerate()
        {
            let change = state.plan(&op).unwrap().unwrap();
            let mut e = event(seq as i64 + 1, change);
            e.actor = actor.into();
            state.apply(&e);
        }
        let newest: Vec<(&str, &str)> = state
            .resume_at
            .iter()
            .map(|(who, (text, _))| (who.as_str(), text.as_str()))
            .collect();
        assert_eq!(
            newest,
            [
                ("impl-1", "read src/auth.rs first"),
                ("planner", "answer order wo-3's question")
            ]
        );
        assert_eq!(state.resume_at["planner"].1.seq, 3);
        assert_eq!(
            state.plan(&at("  ")).unwrap_err(),
            Refusal::Missing(Field::ResumeAt)
        );
    }

    #[test]
    fn the_digest_keeps_every_constraint_and_each_authors_newest_note_on_a_subject() {
        let mut state = ProjectState::default();
        let mut seq = 0;
        let mut add = |state: &mut ProjectState, actor: &str, op: StateOp| {
            seq += 1;
            let change = state.plan(&op).unwrap().unwrap();
            let mut e = event(seq, change);
            e.actor = actor.into();
            state.apply(&e);
        };
        let note = |text: &str, path: &str| StateOp::Note {
            text: text.into(),
            subject: Subject::Path(path.into()),
        };
        for i in 0..DIGEST_ITEMS + 5 {
            let op = StateOp::Constrain {
                text: format!("c{i}"),
                tried: "t".into(),
                result: "r".into(),
            };
            add(&mut state, "impl-1", op);
        }
        add(&mut state, "planner", note("old", "src/a.rs"));
        add(&mut state, "impl-1", note("theirs", "src/a.rs"));
        add(&mut state, "planner", note("b", "src/b.rs"));
        add(&mut state, "planner", note("new", "src/a.rs"));
        let d = state.digest(DIGEST_ITEMS);
        assert_eq!(d.constraints.len(), DIGEST_ITEMS + 5);
        assert_eq!(d.constraints[0].text, format!("c{}", DIGEST_ITEMS + 4));
        let mine: Vec<&str> = d
            .notes_of("planner")
            .iter()
            .map(|n| n.text.as_str())
            .collect();
        assert_eq!(
            mine,
            ["new", "b"],
            "the newest on each subject, newest first"
        );
        let theirs: Vec<&str> = d
            .notes_of("impl-1")
            .iter()
            .map(|n| n.text.as_str())
            .collect();
        assert_eq!(theirs, ["theirs"]);
        assert!(d.notes_of("owner").is_empty());
        assert!(d.is_whole());
    }

    #[test]
    fn a_note_is_stale_only_when_its_subject_changed_later() {
        let state = run(&[StateOp::Note {
            text: "uses v2 API".into(),
            subject: Subject::Path("src/a.rs".into()),
        }])
        .unwrap();
        let note = &state.notes[0];
        assert_eq!(
            freshness(note, Some(note.written.at - 1)),
            Freshness::Current
        );
        assert_eq!(
            freshness(note, Some(note.written.at + 1)),
            Freshness::Stale {
                changed_at: note.written.at + 1
            }
        );
        assert_eq!(freshness(note, None), Freshness::Unknown);
    }

    #[test]
    fn state_changes_round_trip_through_the_log_format() {
        let change = Change::State(StateChange::Note {
            id: "N-1".into(),
            text: "t".into(),
            subject: Subject::Record("01J".into()),
        });
        assert_eq!(change.kind(), "state.changed");
        assert_eq!(change.subject(), "N-1");
        assert_eq!(
            Change::from_parts(change.kind(), change.data()).unwrap(),
            change
        );
    }
}
