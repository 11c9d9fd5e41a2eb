//! The portable log's rules: what a line must be, and what an import of a whole log may
//! add to a project. A log is read and judged whole, against what the store holds, before
//! any of it is written; one refusal imports nothing.
//!
//! What an import never takes: keys (a credential is issued where it is used), and — when
//! the log is another project's, merged on purpose — the roles, policies, outside agents
//! and webhooks of the participants this project has already (authority and where news
//! goes stay the project's own). A line whose id the project holds must be that event,
//! whole; a log is this project's only when it continues this project's log.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::event::{Change, Event};
use crate::message::Payload;
use crate::refusal::Refusal;
use crate::state::{StateChange, Subject};

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
    /// The log's events the store holds already (by id), as the store holds them.
    pub events: HashMap<String, Event>,
    /// How many of the store's events other than setup are at or after the first of
    /// [`Holding::events`] in its log: a log that continues this project's holds them all.
    pub since_first: usize,
    /// The participants the log names that the store has, with their roles.
    pub roles: HashMap<String, String>,
    /// The messages the log names (sends, replies, deliveries) that the store has.
    pub messages: HashSet<String>,
    /// The ids of the store's decisions, constraints, notes and alerts.
    pub items: HashSet<String>,
}

/// What importing a log will do.
#[derive(Debug, Default)]
pub struct Plan {
    /// The events to append, in the log's order.
    pub events: Vec<Event>,
    /// Events the store holds already (by id, with the same contents).
    pub skipped: usize,
    /// Events never imported: keys, and on a merge the setup (policy, outside agent,
    /// webhook) of participants the project has already and where requests landed with
    /// outside agents.
    pub left_out: usize,
    /// The log's decisions, constraints, notes and alerts that have another id in this
    /// project (a merge, where this project uses their ids for items of its own): the
    /// log's id → this project's. References to them are rewritten alike.
    pub renamed: BTreeMap<String, String>,
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
            Change::Webhook(change) => {
                wants.participants.insert(change.participant().to_string());
            }
            Change::MessageSent(m) => {
                wants.participants.insert(m.from.to_string());
                wants
                    .participants
                    .extend(m.to.iter().map(ToString::to_string));
                wants.messages.insert(m.id.clone());
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

/// The id a state change gives the item it records (a decision, constraint, note or
/// alert), if it records one.
fn item_id(change: &mut Change) -> Option<&mut String> {
    match change {
        Change::State(
            StateChange::Decision { id, .. }
            | StateChange::Constraint { id, .. }
            | StateChange::Note { id, .. }
            | StateChange::AlertRaised { id, .. },
        ) => Some(id),
        _ => None,
    }
}

/// Rewrites what `change` says of another item by the ids `renamed` gives it: the
/// decision it supersedes, the alert it acknowledges, the record a note is about.
fn follow(change: &mut Change, renamed: &BTreeMap<String, String>) {
    let Change::State(state) = change else { return };
    let reference = match state {
        StateChange::Decision {
            supersedes: Some(old),
            ..
        } => old,
        StateChange::AlertAcked { id } => id,
        StateChange::Note {
            subject: Subject::Record(record),
            ..
        } => record,
        _ => return,
    };
    if let Some(new) = renamed.get(reference.as_str()) {
        reference.clone_from(new);
    }
}

/// The `D`, `C`, `N` or `A` of an item id (`D-12`).
fn prefix(id: &str) -> &str {
    id.split_once('-').map_or(id, |(p, _)| p)
}

/// New ids for a merge's items: for each prefix the lowest number neither project uses.
struct Fresh {
    taken: HashSet<String>,
    next: HashMap<String, u64>,
}

impl Fresh {
    fn id(&mut self, prefix: &str) -> String {
        let n = self.next.entry(prefix.to_owned()).or_insert(1);
        loop {
            let id = format!("{prefix}-{n}");
            *n += 1;
            if self.taken.insert(id.clone()) {
                return id;
            }
        }
    }
}

/// Judges a whole log against what the store holds and says what importing it appends.
/// Refused, naming the line: an event this project holds with other contents (same id,
/// another time, actor or change); a time outside 1970 to 9999; an id used twice for
/// different events; a message whose payload is over `payload_cap` or whose size or hash
/// does not match it, or whose id is another message's here; a message, delivery, reply,
/// policy, outside agent or webhook naming a participant or message that neither the
/// store nor the log has; a participant the log gives another role than the store does;
/// without `merge`, a decision, constraint, note or alert whose id this project uses for
/// another. Refused whole, unless `merge`: another project's log, one that is not the own
/// log of a store with a history of its own (see [`continues`]).
/// With `merge`, the setup of participants the store has already (policy, outside agent,
/// webhook) is left out, and items whose ids the store uses take new ids.
pub fn plan(
    lines: Vec<(usize, Event)>,
    holding: &Holding,
    merge: bool,
    payload_cap: usize,
) -> Result<Plan, Refusal> {
    if !merge && holding.history && !lines.is_empty() && !continues(&lines, holding) {
        return Err(Refusal::ForeignLog);
    }
    let mut fresh = Fresh {
        taken: holding.items.clone(),
        next: HashMap::new(),
    };
    for (_, event) in &lines {
        if !holding.events.contains_key(&event.id)
            && let Some(id) = item_id(&mut event.change.clone())
        {
            fresh.taken.insert(id.clone());
        }
    }
    let mut seen: HashMap<String, Event> = HashMap::new();
    let mut roles = holding.roles.clone();
    let mut messages = holding.messages.clone();
    let mut items = holding.items.clone();
    let mut plan = Plan::default();
    for (line, mut event) in lines {
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
        follow(&mut event.change, &plan.renamed);
        let stored = holding.events.get(&event.id);
        let held = stored.is_some();
        if let Some(stored) = stored {
            // An item a merge renamed carries the project's id: the two are the same
            // event, and what the log says of it follows.
            let theirs = item_id(&mut stored.change.clone()).cloned();
            if let (Some(mine), Some(theirs)) = (item_id(&mut event.change), theirs)
                && *mine != theirs
                && prefix(mine) == prefix(&theirs)
            {
                plan.renamed.insert(mine.clone(), theirs.clone());
                *mine = theirs;
            }
            if (event.at, &event.actor, &event.change) != (stored.at, &stored.actor, &stored.change)
            {
                return Err(refused(format!(
                    "event {} is in this project already, with other contents",
                    event.id
                )));
            }
        }
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
        // Setup the project has already for a participant is its own: a merge never
        // changes it.
        let own_setup = |name: &str| !held && merge && holding.roles.contains_key(name);
        let mut take = true;
        match &mut event.change {
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
                take = !own_setup(name.as_str());
            }
            // Whom a participant stands for is its setup, like its policy: held to the
            // live rule, and a merge keeps the project's own.
            Change::A2aAgent { name, agent } => {
                known(&roles, name.as_str())?;
                if let Some(agent) = agent {
                    crate::participant::OutsideAgent::new(&agent.url, &agent.key_env)
                        .map_err(|e| refused(format!("its outside agent is refused: {e}")))?;
                }
                take = !own_setup(name.as_str());
            }
            // Where a participant is told of news, and the secret it is signed with: setup
            // too, never chosen for a participant of this project by another's log.
            Change::Webhook(change) => {
                let name = change.participant().as_str();
                known(&roles, name)?;
                take = !own_setup(name);
            }
            Change::MessageSent(m) => {
                if !held && messages.contains(&m.id) {
                    return Err(refused(format!(
                        "message {} is another message in this project already",
                        m.id
                    )));
                }
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
            // Where a request landed with an outside agent is what this project's server
            // found with the operator's key: another project's log never says it here.
            Change::Handover(change) => {
                message_known(&messages, change.request())?;
                take = !merge || held;
            }
            Change::Reservation(crate::reservation::ReservationChange::Reserved {
                holder, ..
            }) => known(&roles, holder.as_str())?,
            Change::Claimed(claimed) => {
                message_known(&messages, &claimed.message)?;
                known(&roles, claimed.by.as_str())?;
            }
            change @ Change::State(_) => {
                if let Some(id) = item_id(change) {
                    if !held && items.contains(id.as_str()) {
                        if !merge {
                            return Err(refused(format!(
                                "{id} is another item in this project already"
                            )));
                        }
                        let new = fresh.id(prefix(id));
                        plan.renamed.insert(id.clone(), new.clone());
                        *id = new;
                    }
                    items.insert(id.clone());
                }
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

/// Whether `lines` are the store's own log: they share an event with it and, when they
/// bring anything new, hold every event past setup it wrote since the first they share
/// (each compared whole as it is planned). One event of the project's, copied into a log
/// of another's making, is not enough; an older export of the project, all of it held,
/// is.
fn continues(lines: &[(usize, Event)], holding: &Holding) -> bool {
    let adds = lines
        .iter()
        .any(|(_, e)| !holding.events.contains_key(&e.id) && !matches!(e.change, Change::Key(_)));
    let shared: HashSet<&str> = lines
        .iter()
        .map(|(_, e)| e.id.as_str())
        .filter(|id| holding.events.contains_key(*id))
        .collect();
    let past_setup = shared
        .iter()
        .filter(|id| !SETUP_KINDS.contains(&holding.events[**id].change.kind()))
        .count();
    !shared.is_empty() && (!adds || past_setup == holding.since_first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: &str, seq: i64, change: Change) -> Event {
        Event {
            seq,
            id: id.into(),
            at: 1_700_000_000_000,
            actor: "planner".into(),
            change,
        }
    }

    fn state(change: StateChange) -> Change {
        Change::State(change)
    }

    fn alert(id: &str) -> Change {
        state(StateChange::AlertRaised {
            id: id.into(),
            key: format!("k-{id}"),
            message: "m".into(),
        })
    }

    fn lines(events: &[Event]) -> Vec<(usize, Event)> {
        events
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, e)| (i + 1, e))
            .collect()
    }

    #[test]
    fn a_merge_renames_alerts_and_what_acknowledges_them() {
        let holding = Holding {
            history: true,
            items: ["A-1".to_owned(), "A-2".to_owned()].into(),
            ..Holding::default()
        };
        let log = [
            event("e1", 1, alert("A-1")),
            event("e2", 2, state(StateChange::AlertAcked { id: "A-1".into() })),
            event("e3", 3, alert("A-2")),
        ];
        let planned = plan(lines(&log), &holding, true, 1 << 20).unwrap();
        assert_eq!(
            planned.renamed,
            BTreeMap::from([("A-1".into(), "A-3".into()), ("A-2".into(), "A-4".into())])
        );
        assert_eq!(planned.events[0].change.subject(), "A-3");
        assert_eq!(
            planned.events[1].change,
            state(StateChange::AlertAcked { id: "A-3".into() })
        );
        // Without a merge, an id the project uses is refused.
        let holding = Holding {
            items: ["A-1".to_owned()].into(),
            ..Holding::default()
        };
        let refused = plan(lines(&log[..1]), &holding, false, 1 << 20).unwrap_err();
        assert!(
            refused.to_string().contains("A-1 is another item"),
            "{refused}"
        );
    }

    #[test]
    fn a_merge_never_brings_where_another_projects_requests_landed() {
        let holding = Holding {
            history: true,
            messages: ["m1".to_owned()].into(),
            ..Holding::default()
        };
        let landed = event(
            "e1",
            1,
            Change::Handover(crate::handover::HandoverChange::Landed {
                request: "m1".into(),
                participant: crate::names::Passname::new("impl-1").unwrap(),
                url: "https://agent.example/a2a".into(),
                task: "victim".into(),
            }),
        );
        let planned = plan(lines(&[landed]), &holding, true, 1 << 20).unwrap();
        assert!(planned.events.is_empty(), "{:?}", planned.events);
        assert_eq!(planned.left_out, 1);
    }

    #[test]
    fn a_log_is_this_projects_only_when_it_holds_what_the_project_wrote_since() {
        let focus = |text: &str| state(StateChange::Focus { text: text.into() });
        let shared = event("e1", 7, focus("one"));
        let holding = |since_first| Holding {
            history: true,
            events: [("e1".to_owned(), shared.clone())].into(),
            since_first,
            ..Holding::default()
        };
        let log = [shared.clone(), event("e2", 8, focus("two"))];
        // The project wrote one event since the first shared one: the log holds it.
        assert_eq!(
            plan(lines(&log), &holding(1), false, 1 << 20)
                .unwrap()
                .events
                .len(),
            1
        );
        // It wrote more the log does not hold: another project's log (or a diverged one).
        assert_eq!(
            plan(lines(&log), &holding(2), false, 1 << 20).unwrap_err(),
            Refusal::ForeignLog
        );
        assert!(plan(lines(&log), &holding(2), true, 1 << 20).is_ok());
        // An older export, all of it held, brings nothing new: taken.
        assert!(plan(lines(&log[..1]), &holding(2), false, 1 << 20).is_ok());
        // A shared id with other contents is refused, merge or not.
        let mut other = shared.clone();
        other.change = focus("forged");
        for merge in [false, true] {
            let refused = plan(lines(&[other.clone()]), &holding(1), merge, 1 << 20).unwrap_err();
            assert!(
                refused.to_string().contains("with other contents"),
                "{refused}"
            );
        }
    }
}
