//! Hand-overs to outside A2A agents: what a server records, and only a server, about a
//! request it hands to the agent a participant stands for (`handover.changed`, about the
//! request; no operation writes it, so no participant can), and the rules its loop keeps.
//!
//! A send is claimed before it is made (`Sending`, appended only when no other send for
//! the request may still be in flight), so two servers on one database never hand the same
//! request over twice, and a server stopped between the send and its answer finds, after
//! restart, that a send was made. Where the request landed (`Landed`) is what the loop
//! trusts afterwards. A send that ended without a task (`Ended`) may be made again. The
//! agent's questions are posted one per round (`Asked`): a round ends when the sender's
//! answer is sent on to the task.

use serde::{Deserialize, Serialize};

use crate::event::Event;
use crate::names::Passname;
use crate::time::Millis;

/// The kind of the events that record hand-overs.
pub const KIND: &str = "handover.changed";

/// The longest a server waits for an agent's answer to `SendMessage`. A2A sets no bound
/// (an agent may answer only once its model has); this one is long enough for an agent
/// that works before it answers, and short enough that a lost answer is looked for.
pub const SEND_TIMEOUT_MS: Millis = 10 * 60 * 1000;

/// How long a claimed send holds the request against other sends: its timeout and a
/// minute for the clocks of servers sharing a database. Past it, no send made under the
/// claim can still be in flight.
pub const CLAIM_MS: Millis = SEND_TIMEOUT_MS + 60 * 1000;

/// A step of a hand-over, as recorded in the log (`handover.changed`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum HandoverChange {
    /// A server is about to send `message` (the request itself, or the sender's answer in
    /// its thread) to the agent at `url`: the claim, recorded before the call.
    Sending {
        request: String,
        participant: Passname,
        url: String,
        message: String,
    },
    /// The agent's task for the request: where it landed.
    Landed {
        request: String,
        participant: Passname,
        url: String,
        task: String,
    },
    /// The send of `message` ended: the agent took it (`taken`: an answer sent on), or
    /// did not (it answered an error, or could not be reached), and it may be made again.
    Ended {
        request: String,
        participant: Passname,
        message: String,
        #[serde(default)]
        taken: bool,
    },
    /// The agent's question (its task's status message `status`) is posted to the
    /// sender, in round `round` (the answers sent on to the task before it).
    Asked {
        request: String,
        participant: Passname,
        round: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<String>,
    },
}

impl HandoverChange {
    /// The request it is about.
    pub fn request(&self) -> &str {
        match self {
            Self::Sending { request, .. }
            | Self::Landed { request, .. }
            | Self::Ended { request, .. }
            | Self::Asked { request, .. } => request,
        }
    }

    pub fn participant(&self) -> &Passname {
        match self {
            Self::Sending { participant, .. }
            | Self::Landed { participant, .. }
            | Self::Ended { participant, .. }
            | Self::Asked { participant, .. } => participant,
        }
    }
}

/// A send claimed and not ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Send {
    pub message: String,
    pub url: String,
    /// When it was claimed.
    pub at: Millis,
}

/// Where a request's hand-over stands: the fold of its `handover.changed` events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Handover {
    /// The agent (its URL) and its task, once it landed.
    pub landed: Option<(String, String)>,
    /// The send claimed last, unless it ended (or, for the request, landed).
    pub sending: Option<Send>,
    /// The answers sent on to the task (each message's id, once).
    pub answers: Vec<String>,
    /// The last question posted: its round and the status message it came from.
    pub asked: Option<(u32, Option<String>)>,
}

impl Handover {
    /// The fold of a request's hand-over events, oldest first.
    pub fn replay(events: &[Event]) -> Self {
        let mut h = Self::default();
        for event in events {
            if let crate::event::Change::Handover(change) = &event.change {
                h.apply(change, event.at);
            }
        }
        h
    }

    fn apply(&mut self, change: &HandoverChange, at: Millis) {
        match change {
            HandoverChange::Sending {
                request,
                url,
                message,
                ..
            } => {
                if message != request && !self.answers.contains(message) {
                    self.answers.push(message.clone());
                }
                self.sending = Some(Send {
                    message: message.clone(),
                    url: url.clone(),
                    at,
                });
            }
            HandoverChange::Landed { url, task, .. } => {
                if self.landed.is_none() {
                    self.landed = Some((url.clone(), task.clone()));
                }
                if self
                    .sending
                    .as_ref()
                    .is_some_and(|s| s.message == *change.request())
                {
                    self.sending = None;
                }
            }
            HandoverChange::Ended {
                request,
                message,
                taken,
                ..
            } => {
                if self.sending.as_ref().is_some_and(|s| s.message == *message) {
                    self.sending = None;
                }
                if message != request && !taken {
                    self.answers.retain(|m| m != message);
                }
            }
            HandoverChange::Asked { round, status, .. } => {
                self.asked = Some((*round, status.clone()));
            }
        }
    }

    /// The send that may still be in flight at `now`: claimed less than [`CLAIM_MS`] ago
    /// and not ended.
    pub fn in_flight(&self, now: Millis) -> Option<&Send> {
        self.sending
            .as_ref()
            .filter(|s| now.saturating_sub(s.at) < CLAIM_MS)
    }

    /// The round a question asked now belongs to: how many answers went on to the task.
    pub fn round(&self) -> u32 {
        u32::try_from(self.answers.len()).unwrap_or(u32::MAX)
    }

    /// Whether the agent's question, from its status message `status`, is a new one to
    /// post: none was posted in this round, and it is not the question the last answer
    /// answered (an agent still showing the old question while it reads the answer).
    pub fn asks_anew(&self, status: Option<&str>) -> bool {
        match &self.asked {
            None => true,
            Some((round, _)) if *round >= self.round() => false,
            Some((_, last)) => status.is_none() || last.as_deref() != status,
        }
    }

    /// Whether the question of this round was posted already (so posting it again, with
    /// the same idempotency key, only makes sure a post cut short is made).
    pub fn asked_this_round(&self) -> bool {
        self.asked
            .as_ref()
            .is_some_and(|(round, _)| *round >= self.round())
    }
}

/// Whether `change` is to be appended to a hand-over standing at `current` at `now`: a
/// send only when none may be in flight and, for the request itself, it has not landed;
/// a landing only once; an end only of the send in flight; a question once a round.
/// `false` means another server got there first (or this one, before a restart).
pub fn admits(current: &Handover, change: &HandoverChange, now: Millis) -> bool {
    match change {
        HandoverChange::Sending {
            request, message, ..
        } => {
            current.in_flight(now).is_none()
                && !(message == request && current.landed.is_some())
                && (message == request || current.landed.is_some())
        }
        HandoverChange::Landed { .. } => current.landed.is_none(),
        HandoverChange::Ended { message, .. } => current
            .sending
            .as_ref()
            .is_some_and(|s| s.message == *message),
        HandoverChange::Asked { round, .. } => {
            current.round() == *round && !current.asked_this_round()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Change;

    fn event(at: Millis, change: HandoverChange) -> Event {
        Event {
            seq: at,
            id: format!("e{at}"),
            at,
            actor: "researcher".into(),
            change: Change::Handover(change),
        }
    }

    fn who() -> Passname {
        Passname::new("researcher").unwrap()
    }

    fn sending(message: &str) -> HandoverChange {
        HandoverChange::Sending {
            request: "r".into(),
            participant: who(),
            url: "https://a/".into(),
            message: message.into(),
        }
    }

    #[test]
    fn a_request_is_sent_once_while_a_send_may_be_in_flight_and_never_after_it_landed() {
        let empty = Handover::default();
        assert!(admits(&empty, &sending("r"), 0));
        let claimed = Handover::replay(&[event(1000, sending("r"))]);
        assert!(!admits(&claimed, &sending("r"), 1000 + CLAIM_MS - 1));
        // Past the claim, no send made under it can still be waiting for its answer.
        assert!(admits(&claimed, &sending("r"), 1000 + CLAIM_MS));
        let ended = Handover::replay(&[
            event(1000, sending("r")),
            event(
                1001,
                HandoverChange::Ended {
                    request: "r".into(),
                    participant: who(),
                    message: "r".into(),
                    taken: false,
                },
            ),
        ]);
        assert!(admits(&ended, &sending("r"), 1002));
        let landed = HandoverChange::Landed {
            request: "r".into(),
            participant: who(),
            url: "https://a/".into(),
            task: "t".into(),
        };
        let done = Handover::replay(&[event(1000, sending("r")), event(1001, landed.clone())]);
        assert_eq!(done.landed, Some(("https://a/".into(), "t".into())));
        assert!(!admits(&done, &sending("r"), CLAIM_MS * 3));
        assert!(!admits(&done, &landed, 1002), "landed once");
        // An answer goes on only to a task that exists.
        assert!(!admits(&empty, &sending("answer"), 0));
        assert!(admits(&done, &sending("answer"), 1002));
    }

    #[test]
    fn one_question_a_round_and_a_round_ends_with_an_answer_sent_on() {
        let asked = |round, status: &str| HandoverChange::Asked {
            request: "r".into(),
            participant: who(),
            round,
            status: Some(status.into()),
        };
        let landed = HandoverChange::Landed {
            request: "r".into(),
            participant: who(),
            url: "https://a/".into(),
            task: "t".into(),
        };
        let mut log = vec![event(1, sending("r")), event(2, landed)];
        let h = Handover::replay(&log);
        assert!(h.asks_anew(Some("q1")));
        assert!(admits(&h, &asked(0, "q1"), 3));
        log.push(event(3, asked(0, "q1")));
        let h = Handover::replay(&log);
        // A new status message each look is not a new question: the sender has not answered.
        assert!(!h.asks_anew(Some("q2")));
        assert!(!admits(&h, &asked(0, "q2"), 4));
        assert!(h.asked_this_round());
        log.push(event(4, sending("answer-1")));
        log.push(event(
            5,
            HandoverChange::Ended {
                request: "r".into(),
                participant: who(),
                message: "answer-1".into(),
                taken: true,
            },
        ));
        let h = Handover::replay(&log);
        assert_eq!(h.round(), 1);
        assert_eq!(h.in_flight(6), None, "the answer went on");
        assert!(
            !h.asks_anew(Some("q1")),
            "the answered question, still shown"
        );
        assert!(h.asks_anew(Some("q2")));
        assert!(admits(&h, &asked(1, "q2"), 6));
    }
}
