//! How a request in a participant's inbox reads as an A2A task: the task's state from the
//! recipient's delivery status, the sender's own end and the thread. Pure: the facts in,
//! the state out; the one place this mapping is written.

use baton_core::{DeliveryStatus, RequestStatus};

use super::wire::TaskState;

/// What a task's state is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// The recipient's delivery status.
    pub recipient: DeliveryStatus,
    /// The sender's own end of the request.
    pub sender: Option<RequestStatus>,
    /// The status the recipient's last note named (`completed`, `refused`, `handed_back`):
    /// what an archived delivery had reached.
    pub noted: Option<DeliveryStatus>,
    /// The recipient's last word in the thread is a question the sender has not answered.
    pub asked: bool,
}

/// The task's state.
///
/// | delivery | task |
/// |---|---|
/// | pending | SUBMITTED |
/// | delivered (fetched, being worked on) | WORKING |
/// | delivered or pending, a question back in the thread | INPUT_REQUIRED |
/// | completed | COMPLETED |
/// | refused | REJECTED |
/// | handed back | FAILED |
/// | pending or delivered, the sender closed its end | CANCELED |
/// | archived | what its last note named (COMPLETED without one) |
pub fn state(facts: Facts) -> TaskState {
    use DeliveryStatus as D;
    match facts.recipient {
        D::Completed => TaskState::Completed,
        D::Refused => TaskState::Rejected,
        D::HandedBack => TaskState::Failed,
        D::Archived => match facts.noted {
            Some(D::Refused) => TaskState::Rejected,
            Some(D::HandedBack) => TaskState::Failed,
            _ => TaskState::Completed,
        },
        D::Pending | D::Delivered | D::Acknowledged => {
            if matches!(
                facts.sender,
                Some(RequestStatus::Completed | RequestStatus::Archived)
            ) {
                TaskState::Canceled
            } else if facts.asked {
                TaskState::InputRequired
            } else if facts.recipient == D::Pending {
                TaskState::Submitted
            } else {
                TaskState::Working
            }
        }
    }
}

/// The notes a recipient's step posts name the status they reached (`{"completed": ID}`):
/// those markers, in the order a later one wins.
pub const MARKERS: [DeliveryStatus; 3] = [
    DeliveryStatus::Completed,
    DeliveryStatus::Refused,
    DeliveryStatus::HandedBack,
];

#[cfg(test)]
mod tests {
    use super::*;
    use DeliveryStatus as D;
    use TaskState as T;

    fn facts(recipient: D) -> Facts {
        Facts {
            recipient,
            sender: Some(RequestStatus::Open),
            noted: None,
            asked: false,
        }
    }

    #[test]
    fn each_delivery_status_reads_as_its_task_state() {
        let table = [
            (D::Pending, T::Submitted),
            (D::Delivered, T::Working),
            (D::Acknowledged, T::Working),
            (D::Completed, T::Completed),
            (D::Refused, T::Rejected),
            (D::HandedBack, T::Failed),
            (D::Archived, T::Completed),
        ];
        for (delivery, task) in table {
            assert_eq!(state(facts(delivery)), task, "{delivery}");
        }
    }

    #[test]
    fn a_question_back_asks_for_input_until_the_recipient_finishes() {
        for (delivery, task) in [
            (D::Pending, T::InputRequired),
            (D::Delivered, T::InputRequired),
            (D::Completed, T::Completed),
            (D::HandedBack, T::Failed),
        ] {
            let asked = Facts {
                asked: true,
                ..facts(delivery)
            };
            assert_eq!(state(asked), task, "{delivery}");
        }
    }

    #[test]
    fn the_sender_closing_an_unfinished_request_cancels_it_and_nothing_finished() {
        for sender in [RequestStatus::Completed, RequestStatus::Archived] {
            for (delivery, task) in [
                (D::Pending, T::Canceled),
                (D::Delivered, T::Canceled),
                (D::Completed, T::Completed),
                (D::Refused, T::Rejected),
            ] {
                let closed = Facts {
                    sender: Some(sender),
                    asked: true,
                    ..facts(delivery)
                };
                assert_eq!(state(closed), task, "{delivery} after {sender}");
            }
        }
    }

    #[test]
    fn an_archived_delivery_keeps_the_state_its_note_named() {
        for (noted, task) in [
            (None, T::Completed),
            (Some(D::Completed), T::Completed),
            (Some(D::Refused), T::Rejected),
            (Some(D::HandedBack), T::Failed),
        ] {
            let archived = Facts {
                noted,
                ..facts(D::Archived)
            };
            assert_eq!(state(archived), task, "{noted:?}");
        }
    }
}
