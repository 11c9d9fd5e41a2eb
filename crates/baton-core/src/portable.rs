//! The portable log's rules: what a line must be, and what an import of a whole log may
//! add to a project. A log is read and judged whole, against what the store holds, before
//! any of it is written; one refusal imports nothing.
//!
//! What an import never takes: keys (a credential is issued where it is used), and — when
//! the log is another project's, merged on purpose — the roles and policies of the
//! participants this project has already (authority stays the project's own).

use std::collections::{HashMap, HashSet};

use crate::event::{Change, Event};
use crate::message::Payload;
use crate::refusal::Refusal;
use crate::state::StateChange;

/// The latest time an event may carry: the end of year 9999 (UTC), as RFC 3339 can say.
const LATEST: crate::Millis = 253_402_300_799_999;

/// Levels an event puts around the documents it carries (`data`, a message, an order's
/// report), beyond a payload's own limit.
const EVENT_LEVELS: usize = 4;

/// The event on line `number` (from 1) of a portable log: the line held to the boundary
/// every edge holds its input to (nesting, exact numbers, no repeated key, no U+0000),
/// then read as an event.
pub fn parse_line(number: usize, text: &str) -> Result<Event, Refusal> {
    let refused = |problem: String| Refusal::LogLine {
        line: number,
        problem,
    };
    let value = crate::json::boundary(text, EVENT_LEVELS).map_err(|e| refused(e.to_string()))?;
    serde_json::from_value(value).map_err(|e| refused(e.to_string()))
}

/// Event kinds a project's setup writes (`init`, `agent add`, `key issue`), and refusals:
/// a store holding only these has no history of its own, so any project's log may be
/// imported into it (a move to a new store).
pub const SETUP_KINDS: &[&str] = &[
    "participant.added",
    "participant.policy",
    "participant.a2a",
    "key.changed",
    "security.refused",
];

/// What a log refers to that only the store can say: the store reads these and answers
/// with a [`Holding`].
#[derive(Debug, Default)]
pub struct Wants {
    pub events: HashSet<String>,
    pub participants: HashSet<String>,
    pub messages: HashSet<String>,
}

/// What the store holds of what a log refers to.
#[derive(Debug, Default)]
pub struct Holding {
    /// Whether the store's log holds more than setup ([`SETUP_KINDS`]).
    pub history: bool,
    /// Which of the log's event ids the store holds already.
    pub events: HashSet<String>,
    /// The participants the log names that the store has, with their roles.
    pub roles: HashMap<String, String>,
    /// The messages the log refers to that the store has.
    pub messages: HashSet<String>,
    /// The ids of the store's decisions, constraints and notes.
    pub items: HashSet<String>,
}

/// What importing a log will do.
#[derive(Debug, Default)]
pub struct Plan {
    /// The events to append, in the log's order.
    pub events: Vec<Event>,
    /// Events the store holds already (by id).
    pub skipped: usize,
    /// Events never imported: keys, and on a merge the authority of participants the
    /// project has already.
    pub left_out: usize,
}

/// What `lines` refer to beyond themselves.
pub fn wants(lines: &[(usize, Event)]) -> Wants {
    let mut wants = Wants::default();
    for (_, event) in lines {
        wants.events.insert(event.id.clone());
        match &event.change {
            Change::ParticipantAdded { name, .. }
            | Change::PolicySet { name, .. }
            | Change::A2aAgent { name, .. } => {
                wants.participants.insert(name.to_string());
            }
            Change::MessageSent(m) => {
                wants.participants.insert(m.from.to_string());
                wants
                    .participants
                    .extend(m.to.iter().map(ToString::to_string));
                wants.messages.extend(m.reply_to.clone());
            }
            Change::DeliveryChanged {
                message,
                participant,
                ..
            } => {
                wants.messages.insert(message.clone());
                wants.participants.insert(participant.to_string());
            }
            Change::RequestChanged { message, .. } => {
                wants.messages.insert(message.clone());
            }
            _ => {}
        }
    }
    wants
}

/// Judges a whole log against what the store holds and says what importing it appends.
/// Refused, naming the line: a time outside 1970 to 9999; an id used twice for different
/// events; a message whose payload is over `payload_cap` or whose size or hash does not
/// match it; a message, delivery or reply naming a participant or message that neither
/// the store nor the log has; a participant the log gives another role than the store
/// does; a decision, constraint or note whose id this project uses for another. Refused
/// whole: another project's log (it shares no event with a store that has a history of
/// its own) unless `merge`.
pub fn plan(
    lines: Vec<(usize, Event)>,
    holding: &Holding,
    merge: bool,
    payload_cap: usize,
) -> Result<Plan, Refusal> {
    if !merge
        && holding.history
        && !lines.is_empty()
        && lines.iter().all(|(_, e)| !holding.events.contains(&e.id))
    {
        return Err(Refusal::ForeignLog);
    }
    let mut seen: HashMap<String, Event> = HashMap::new();
    let mut roles = holding.roles.clone();
    let mut messages = holding.messages.clone();
    let mut items = holding.items.clone();
    let mut plan = Plan::default();
    for (line, event) in lines {
        let refused = |problem: String| Refusal::LogLine { line, problem };
        if !(0..=LATEST).contains(&event.at) {
            return Err(refused(format!(
                "its time {} ms is outside 1970 to 9999",
                event.at
            )));
        }
        if let Some(first) = seen.get(&event.id) {
            if (first.at, &first.actor, &first.change) != (event.at, &event.actor, &event.change) {
                return Err(refused(format!(
                    "event {} appears twice with different contents",
                    event.id
                )));
            }
            plan.skipped += 1;
            continue;
        }
        seen.insert(event.id.clone(), event.clone());
        let held = holding.events.contains(&event.id);
        let known = |roles: &HashMap<String, String>, name: &str| {
            if roles.contains_key(name) {
                Ok(())
            } else {
                Err(refused(format!(
                    "it names participant {name}, whom neither this project nor the log \
                     has added"
                )))
            }
        };
        let message_known = |messages: &HashSet<String>, id: &str| {
            if messages.contains(id) {
                Ok(())
            } else {
                Err(refused(format!(
                    "it refers to message {id}, which neither this project nor the log has"
                )))
            }
        };
        let mut take = true;
        match &event.change {
            Change::Key(_) => take = false,
            Change::ParticipantAdded { name, role } => match roles.get(name.as_str()) {
                Some(has) if has != role => {
                    return Err(refused(format!(
                        "it adds {name} as {role}, but {name} is {has} here"
                    )));
                }
                // The same participant added again: the project's own entry stands.
                Some(_) => take = held,
                None => {
                    roles.insert(name.to_string(), role.clone());
                }
            },
            Change::PolicySet { name, .. } => {
                known(&roles, name.as_str())?;
                take = held || !(merge && holding.roles.contains_key(name.as_str()));
            }
            // Whom a participant stands for is its setup, like its policy: held to the
            // live rule, and a merge keeps the project's own.
            Change::A2aAgent { name, agent } => {
                known(&roles, name.as_str())?;
                if let Some(agent) = agent {
                    crate::participant::OutsideAgent::new(&agent.url, &agent.key_env)
                        .map_err(|e| refused(format!("its outside agent is refused: {e}")))?;
                }
                take = held || !(merge && holding.roles.contains_key(name.as_str()));
            }
            Change::MessageSent(m) => {
                known(&roles, m.from.as_str())?;
                for to in &m.to {
                    known(&roles, to.as_str())?;
                }
                if let Some(parent) = &m.reply_to {
                    message_known(&messages, parent)?;
                }
                let payload =
                    Payload::from_value(serde_json::Value::Object(m.payload.clone()), payload_cap)
                        .map_err(|e| refused(format!("its payload is refused: {e}")))?;
                if payload.size() != m.size || payload.hash() != m.hash {
                    return Err(refused(format!(
                        "message {}'s payload does not match its recorded size and hash",
                        m.id
                    )));
                }
                messages.insert(m.id.clone());
            }
            Change::DeliveryChanged {
                message,
                participant,
                ..
            } => {
                message_known(&messages, message)?;
                known(&roles, participant.as_str())?;
            }
            Change::RequestChanged { message, .. } => message_known(&messages, message)?,
            Change::State(
                StateChange::Decision { id, .. }
                | StateChange::Constraint { id, .. }
                | StateChange::Note { id, .. },
            ) => {
                if !held && items.contains(id) {
                    return Err(refused(format!(
                        "{id} is another item in this project already"
                    )));
                }
                items.insert(id.clone());
            }
            _ => {}
        }
        if !take {
            plan.left_out += 1;
        } else if held {
            plan.skipped += 1;
        } else {
            plan.events.push(event);
        }
    }
    Ok(plan)
}
