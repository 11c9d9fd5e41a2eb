//! Recall: the resume packet and the freshness of notes. The CLI, the MCP
//! server and the agent hooks all read the packet through [`crate::App::resume`], so an
//! agent reads the same packet whichever way it asks.
//!
//! The packet answers what a successor must know, each list ranked by what is most
//! urgent and headed by its exact counts: where my last session stopped, what I owe
//! (requests, orders to work on or conclude, needs on my orders), the constraints on my
//! topics and paths, the decisions in force, what I wait for, my runs lost with work
//! held, my stale notes. How the budget is shared among them is `packet::render`'s.
//!
//! A path's history lives outside the store (the work tree, git): it comes from the
//! host's [`PathClock`]; everything else comes from the store.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use baton_core::gate::GateChange;
use baton_core::order::{Order, OrderStatus};
use baton_core::packet::{self, Packet, Section};
use baton_core::state::{Alert, Freshness, Note, StateDigest, Subject, freshness};
use baton_core::time::rfc3339;
use baton_core::{Change, Envelope, MessageType, Millis, Passname, RequestStatus};
use baton_store::{MessageHead, OrderQuery, RunQuery, Store};
use serde_json::Value;

use crate::Result;
use crate::doc::RunDoc;
use crate::host::PathClock;

/// How many of the most urgent requests and orders have their payload read for
/// `resume_at` and stop conditions: the packet shows no more than its share of them.
const PAYLOADS_READ: usize = 20;
/// How many of the newest notes (anyone's) the packet examines for staleness besides
/// the reader's own.
const NOTES_EXAMINED: usize = 50;
/// How many entries of the owed and waiting lists have their envelopes read at first (and
/// how many infos and messages owed are read at all): a list the packet shows every entry
/// read of is read again whole. Every list's heads are read whole, so its counts are exact
/// and its ranking is the whole list's.
const FIRST_READ: usize = 32;

/// `notes` (newest first) with their freshness. The records' last changes are read
/// together, in one read where the store can.
pub(crate) async fn notes_freshness<'a>(
    store: &Store,
    clock: &dyn PathClock,
    notes: impl Iterator<Item = &'a Note>,
) -> Result<Vec<(Note, Freshness)>> {
    let notes: Vec<&Note> = notes.collect();
    let records: Vec<(String, i64)> = notes
        .iter()
        .filter_map(|n| match &n.subject {
            Subject::Record(id) => Some((id.clone(), n.written.seq)),
            Subject::Path(_) => None,
        })
        .collect();
    let mut changes = store.last_changes(&records).await?.into_iter();
    // A path asked about once, however many notes name it.
    let mut paths: HashMap<&str, Option<Millis>> = HashMap::new();
    let mut out = Vec::with_capacity(notes.len());
    for note in notes {
        let changed = match &note.subject {
            Subject::Path(path) => *paths
                .entry(path.as_str())
                .or_insert_with(|| clock.changed_at(path)),
            Subject::Record(_) => Some(changes.next().flatten().unwrap_or(note.written.at)),
        };
        out.push((note.clone(), freshness(note, changed)));
    }
    Ok(out)
}

/// One line per note; a stale one says so with both times, never as plain fact.
pub fn note_line(note: &Note, f: &Freshness) -> String {
    match f {
        Freshness::Current => format!("{} ({}): {}", note.id, note.subject.label(), note.text),
        Freshness::Stale { changed_at } => format!(
            "{} STALE ({} changed {} after the note of {}): {}",
            note.id,
            note.subject.label(),
            rfc3339(*changed_at),
            rfc3339(note.written.at),
            note.text
        ),
        Freshness::Unknown => format!(
            "{} UNVERIFIED ({} cannot be examined): {}",
            note.id,
            note.subject.label(),
            note.text
        ),
    }
}

/// A field of the payload, or of its `x-baton` contract extension.
fn contract_field<'a>(payload: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let direct = path.iter().try_fold(payload, |v, k| v.get(k));
    direct.or_else(|| {
        path.iter()
            .try_fold(payload.get("x-baton")?, |v, k| v.get(k))
    })
}

/// The resume packet and the store generation it was read at.
pub struct Resume {
    pub packet: Packet,
    pub generation: i64,
}

const OWED: &str = "What I owe";
const FOCUS: &str = "Focus";
const CONSTRAINTS: &str = "Active constraints";
const DECISIONS: &str = "Recent decisions";
const WAITING: &str = "What I am waiting for";
const LIVE: &str = "My sessions and runs not ended";
const LOST: &str = "My lost runs";
const ALERTS: &str = "Open alerts";
const STALE: &str = "Stale notes (do not take as fact)";
const STOPS: &str = "Stop conditions";

/// `n` and its noun, singular or plural.
fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// An entry of a ranked list: when it is due (if ever), when it began, and what it says.
struct Ranked {
    due: Option<Millis>,
    since: Millis,
    says: Says,
    /// The message whose payload holds its `resume_at` and stop conditions.
    message: Option<String>,
    /// What its stop conditions are said to be of.
    of: String,
}

/// What an entry's line is made of.
enum Says {
    /// Its line, made from what was read whole (orders, needs).
    Line(String),
    /// The message of this id: its line is made from its envelope, read only for the
    /// entries the packet may show.
    Message(String),
}

/// Most urgent first: what has a deadline, by deadline; then the oldest.
fn rank(list: &mut [Ranked]) {
    list.sort_by_key(|r| (r.due.is_none(), r.due, r.since));
}

/// The orders `me` is party to and has a part in now, by that part.
#[derive(Default)]
struct MyOrders {
    /// Offered to me, accepted or being worked on.
    to_work: Vec<Order>,
    /// Mine to conclude: submitted (approve, rework, decline) or blocked (answer).
    to_conclude: Vec<Order>,
    /// Mine, at their workers.
    given: Vec<Order>,
    /// Mine to work on, at their senders (submitted or blocked).
    at_sender: Vec<Order>,
    /// The request message of every open order read, by message id: those messages are
    /// shown as their orders.
    messages: HashMap<String, String>,
    /// Orders by id, for the needs that name one.
    by_id: HashMap<String, Order>,
}

async fn my_orders(store: &Store, me: &Passname, now: Millis) -> Result<MyOrders> {
    let mut mine = MyOrders::default();
    let orders = store
        .orders(&OrderQuery {
            party: Some(me.to_string()),
            ..Default::default()
        })
        .await?;
    for order in orders {
        mine.messages
            .insert(order.message.clone(), order.id.clone());
        let status = order.status_at(now);
        let worker = order.to == me.as_str();
        let sender = order.from == me.as_str();
        use OrderStatus::*;
        match status {
            Offered | Accepted | Working if worker => mine.to_work.push(order.clone()),
            Submitted | Blocked if sender => mine.to_conclude.push(order.clone()),
            Offered | Accepted | Working if sender => mine.given.push(order.clone()),
            Submitted | Blocked if worker => mine.at_sender.push(order.clone()),
            _ => {}
        }
        mine.by_id.insert(order.id.clone(), order);
    }
    Ok(mine)
}

/// What `me` owes from its inbox, as heads: the open requests (every one, so the counts
/// are exact and the ranking whole) and the first infos and messages it has not read.
struct Inbox {
    requests: Vec<MessageHead>,
    /// The topics of orders' requests (shown as their orders).
    order_topics: Vec<String>,
    infos: Vec<MessageHead>,
    infos_total: usize,
}

/// Reads what `me` owes: the head of every request and of the first `infos` infos and
/// messages.
async fn inbox(store: &Store, me: &Passname, infos: u32, orders: &MyOrders) -> Result<Inbox> {
    let (heads, total) = store.owed_heads(me, infos).await?;
    let (requests, infos): (Vec<MessageHead>, Vec<MessageHead>) = heads
        .into_iter()
        .partition(|h| h.kind == MessageType::Request);
    let count = requests.len();
    let (of_orders, requests): (Vec<MessageHead>, Vec<MessageHead>) = requests
        .into_iter()
        .partition(|h| orders.messages.contains_key(&h.id));
    Ok(Inbox {
        order_topics: of_orders.iter().map(|h| h.topic.to_string()).collect(),
        infos_total: usize::try_from(total).unwrap_or(usize::MAX) - count,
        requests,
        infos,
    })
}

/// The requests `me` sent whose own end is still open, other than orders', as heads (every
/// one), and the topics of its open orders' requests.
async fn outbox(
    store: &Store,
    me: &Passname,
    orders: &MyOrders,
) -> Result<(Vec<MessageHead>, Vec<String>)> {
    let (of_orders, open): (Vec<MessageHead>, Vec<MessageHead>) = store
        .waiting_heads(me)
        .await?
        .into_iter()
        .filter(|h| h.request_status == Some(RequestStatus::Open))
        .partition(|h| orders.messages.contains_key(&h.id));
    Ok((
        open,
        of_orders.iter().map(|h| h.topic.to_string()).collect(),
    ))
}

/// The open needs raised about orders `me` gave, oldest first, as (id, order, text, at).
async fn needs(
    store: &Store,
    me: &Passname,
    orders: &MyOrders,
) -> Result<Vec<(String, String, String, Millis)>> {
    let mut out = Vec::new();
    let mut others: HashMap<String, bool> = HashMap::new();
    for event in store.attention().await?.needs {
        let Change::Gate(GateChange::Need {
            id,
            text,
            order: Some(order),
            ..
        }) = &event.change
        else {
            continue;
        };
        let gave = match orders.by_id.get(order) {
            Some(o) => o.from == me.as_str(),
            None => match others.get(order) {
                Some(gave) => *gave,
                None => {
                    let gave = store
                        .order(order)
                        .await?
                        .is_some_and(|o| o.from == me.as_str());
                    others.insert(order.clone(), gave);
                    gave
                }
            },
        };
        if gave {
            out.push((format!("need:{id}"), order.clone(), text.clone(), event.at));
        }
    }
    Ok(out)
}

/// The run an alert is about, for the reaper's alerts (`run-lost:RUN`, `resurfaced:RUN`),
/// and whether it held work.
fn alert_run(alert: &Alert) -> Option<(&str, bool)> {
    if let Some(run) = alert.key.strip_prefix("run-lost:") {
        Some((run, false))
    } else {
        alert.key.strip_prefix("resurfaced:").map(|run| (run, true))
    }
}

/// My lost runs (by id, oldest alert first) with their alerts, and everyone else's alerts.
async fn alerts<'a>(
    store: &Store,
    me: &Passname,
    open: &'a [Alert],
) -> Result<(BTreeMap<String, Vec<&'a Alert>>, Vec<&'a Alert>)> {
    let mut whose: HashMap<&str, bool> = HashMap::new();
    let mut mine: BTreeMap<String, Vec<&Alert>> = BTreeMap::new();
    let mut others = Vec::new();
    for alert in open {
        let Some((run, _)) = alert_run(alert) else {
            others.push(alert);
            continue;
        };
        let is_mine = match whose.get(run) {
            Some(m) => *m,
            None => {
                let m = store
                    .runs(&RunQuery {
                        id: Some(run.to_owned()),
                        ..RunQuery::default()
                    })
                    .await?
                    .first()
                    .is_some_and(|r| r.participant.as_deref() == Some(me.as_str()));
                whose.insert(run, m);
                m
            }
        };
        if is_mine {
            mine.entry(run.to_owned()).or_default().push(alert);
        } else {
            others.push(alert);
        }
    }
    Ok((mine, others))
}

/// Whether `text` names `word` whole: not as part of a longer name or path.
fn names(text: &str, word: &str) -> bool {
    let part = |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '/');
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        // A sentence's full stop after a name is not part of it.
        let after_ends = match after {
            Some('.') => text[at + word.len() + 1..]
                .chars()
                .next()
                .is_none_or(|c| !part(c)),
            Some(c) => !part(c),
            None => true,
        };
        before.is_none_or(|c| !part(c)) && after_ends
    })
}

/// Everything the packet is built from, read once (the lists that may be read longer are
/// read again by [`resume`]).
struct Gathered {
    header: String,
    digest: StateDigest,
    orders: MyOrders,
    inbox: Inbox,
    outbox: Vec<MessageHead>,
    /// The envelopes read of the messages the owed and waiting lists show, by id.
    envelopes: HashMap<String, Envelope>,
    /// How many entries of the owed list (ranked, then infos) and of the waiting list have
    /// their envelopes read.
    owed_read: usize,
    waiting_read: usize,
    /// The topics of the open orders `me` gave.
    given_topics: Vec<String>,
    needs: Vec<(String, String, String, Millis)>,
    payloads: HashMap<String, Value>,
    effects: HashMap<String, usize>,
    live: Vec<String>,
    stale_mine: Vec<String>,
    stale_others: Vec<String>,
    mine_examined: BTreeSet<String>,
}

/// Builds `me`'s resume packet for the project at `place`, within `max_bytes`.
///
/// Every list whose count the packet states is read whole (what `me` owes and waits for
/// are its open items, not the history): the orders whole, the requests as their heads
/// (id, topic, time), so the counts are exact and each list is ranked whole; only the
/// envelopes of the first entries of each ranked list are read, for their lines. The state
/// comes from its digest. A list read in part (the envelopes past the first entries, the
/// infos and messages past the first, the digest's newest decisions, notes and alerts)
/// that the packet showed all of is read again whole and the packet built again, so the
/// packet is always the one whole lists give.
pub(crate) async fn resume(
    store: &Store,
    clock: &dyn PathClock,
    me: &Passname,
    place: &str,
    live: &[RunDoc],
    max_bytes: usize,
    now: Millis,
) -> Result<Resume> {
    let role = store
        .participant(me.as_str())
        .await?
        .map(|p| p.role)
        .unwrap_or_default();
    let generation = store.generation().await?;
    let mut digest = store.state_digest().await?;
    if digest.notes_by_author.is_none() {
        // A digest kept before it held each author's notes.
        digest = store.state().await?.digest(baton_core::state::DIGEST_ITEMS);
    }
    let mut header = format!(
        "# Resume: {me}{} in {place}\ngeneration {generation} · {}",
        if role.is_empty() {
            String::new()
        } else {
            format!(" ({role})")
        },
        rfc3339(now),
    );
    // The first action my last session left: the one line read before any list.
    if let Some((text, p)) = digest.resume_at.get(me.as_str()) {
        header.push_str(&format!(
            "\nWhere my last session stopped ({}): {}",
            rfc3339(p.at),
            packet::clip(text, packet::MAX_ITEM_BYTES)
        ));
    }
    let orders = my_orders(store, me, now).await?;
    let inbox = inbox(store, me, FIRST_READ as u32, &orders).await?;
    let (outbox, given_topics) = outbox(store, me, &orders).await?;
    let needs = needs(store, me, &orders).await?;
    let mut effects = HashMap::new();
    for order in orders
        .to_conclude
        .iter()
        .filter(|o| o.status_at(now) == OrderStatus::Submitted)
    {
        let held = store.effects(&order.id).await?.awaiting();
        if held > 0 {
            effects.insert(order.id.clone(), held);
        }
    }
    let mut g = Gathered {
        header,
        digest,
        orders,
        inbox,
        outbox,
        envelopes: HashMap::new(),
        owed_read: FIRST_READ,
        waiting_read: FIRST_READ,
        given_topics,
        needs,
        payloads: HashMap::new(),
        effects,
        live: live.iter().map(live_line).collect(),
        stale_mine: Vec::new(),
        stale_others: Vec::new(),
        mine_examined: BTreeSet::new(),
    };
    g.payloads = payloads(store, &owed_ranked(&g, now)).await?;
    read_envelopes(store, &mut g, now).await?;
    examine_notes(store, clock, me, &mut g).await?;
    let reserved = crate::reservations::packet_lines(store, me, now).await?;
    let pooled = crate::pools::packet_lines(store, me, now).await?;
    loop {
        let (mine, others) = alerts(store, me, &g.digest.alerts).await?;
        let mut sections = sections(&g, me, &mine, &others, now);
        crate::reservations::packet_sections(&mut sections, &reserved);
        crate::pools::packet_section(&mut sections, &pooled);
        let packet = packet::render(&g.header, &sections, max_bytes);
        let short: Vec<&str> = packet
            .read_short(&sections)
            .into_iter()
            .map(|i| sections[i].title)
            .collect();
        let mut again = false;
        if short.contains(&OWED) && g.owed_read < usize::MAX {
            if g.inbox.infos.len() < g.inbox.infos_total {
                let all = u32::try_from(g.inbox.infos_total).unwrap_or(u32::MAX);
                g.inbox = self::inbox(store, me, all, &g.orders).await?;
            }
            g.owed_read = usize::MAX;
            again = true;
        }
        if short.contains(&WAITING) && g.waiting_read < usize::MAX {
            g.waiting_read = usize::MAX;
            again = true;
        }
        if again {
            read_envelopes(store, &mut g, now).await?;
        }
        if [DECISIONS, ALERTS, LOST, STALE]
            .iter()
            .any(|t| short.contains(t))
            && !g.digest.is_whole()
        {
            g.digest = store.state().await?.digest(usize::MAX);
            examine_notes(store, clock, me, &mut g).await?;
            again = true;
        }
        if !again {
            return Ok(Resume { packet, generation });
        }
    }
}

/// The freshness of `me`'s newest note on each subject, and of the newest notes of
/// others: the lines of those not current, mine apart.
async fn examine_notes(
    store: &Store,
    clock: &dyn PathClock,
    me: &Passname,
    g: &mut Gathered,
) -> Result<()> {
    let mine = g.digest.notes_of(me.as_str());
    g.mine_examined = mine.iter().map(|n| n.id.clone()).collect();
    let others = g
        .digest
        .notes
        .iter()
        .filter(|n| n.written.actor != me.as_str())
        .take(NOTES_EXAMINED);
    let examined = notes_freshness(store, clock, mine.iter().chain(others)).await?;
    let (mut stale_mine, mut stale_others) = (Vec::new(), Vec::new());
    for (note, f) in examined.iter().filter(|(_, f)| *f != Freshness::Current) {
        if g.mine_examined.contains(&note.id) {
            stale_mine.push(note_line(note, f));
        } else {
            stale_others.push(note_line(note, f));
        }
    }
    g.stale_mine = stale_mine;
    g.stale_others = stale_others;
    Ok(())
}

/// Reads the envelopes of the first `owed_read` entries of the owed list (ranked, then the
/// infos and messages) and the first `waiting_read` of the waiting list that are not read
/// yet, in one read.
async fn read_envelopes(store: &Store, g: &mut Gathered, now: Millis) -> Result<()> {
    let owed = owed_ranked(g, now);
    let owed = owed
        .iter()
        .map(|r| &r.says)
        .filter_map(|says| match says {
            Says::Message(id) => Some(id),
            Says::Line(_) => None,
        })
        .take(g.owed_read)
        .chain(
            g.inbox
                .infos
                .iter()
                .map(|h| &h.id)
                .take(g.owed_read.saturating_sub(owed.len())),
        );
    let waiting = waiting_ranked(g, now);
    let waiting = waiting
        .iter()
        .filter_map(|r| match &r.says {
            Says::Message(id) => Some(id),
            Says::Line(_) => None,
        })
        .take(g.waiting_read);
    let ids: Vec<String> = owed
        .chain(waiting)
        .filter(|id| !g.envelopes.contains_key(*id))
        .cloned()
        .collect();
    for envelope in store.envelopes(&ids).await? {
        g.envelopes.insert(envelope.id.clone(), envelope);
    }
    Ok(())
}

/// The lines of `list`'s entries up to the first whose envelope was not read (a message's
/// line made by `line`), and how many entries are left unlisted.
fn lines_read(
    list: impl IntoIterator<Item = Says>,
    envelopes: &HashMap<String, Envelope>,
    line: impl Fn(&Envelope) -> String,
) -> (Vec<String>, usize) {
    let mut lines = Vec::new();
    let mut unlisted = 0;
    for says in list {
        let made = match says {
            _ if unlisted > 0 => None,
            Says::Line(text) => Some(text),
            Says::Message(id) => envelopes.get(&id).map(&line),
        };
        match made {
            Some(text) => lines.push(text),
            None => unlisted += 1,
        }
    }
    (lines, unlisted)
}

/// The payloads of the most urgent requests and orders `me` owes.
async fn payloads(store: &Store, ranked: &[Ranked]) -> Result<HashMap<String, Value>> {
    let ids: Vec<String> = ranked
        .iter()
        .filter_map(|r| r.message.clone())
        .take(PAYLOADS_READ)
        .collect();
    let read = store.payloads(&ids).await?;
    Ok(ids
        .into_iter()
        .zip(read)
        .filter_map(|(id, p)| p.map(|p| (id, Value::Object(p))))
        .collect())
}

fn resume_at(payload: Option<&Value>) -> Option<&str> {
    let payload = payload?;
    contract_field(payload, &["decision", "resume_at"])
        .or_else(|| contract_field(payload, &["resume_at"]))
        .and_then(Value::as_str)
}

fn due(order: &Order) -> String {
    order
        .deadline_at
        .map(|d| format!(" (due {})", &rfc3339(d)[..10]))
        .unwrap_or_default()
}

/// What `me` owes, most urgent first (the infos and messages come after them).
fn owed_ranked(g: &Gathered, now: Millis) -> Vec<Ranked> {
    let mut list: Vec<Ranked> = Vec::new();
    for head in &g.inbox.requests {
        list.push(Ranked {
            due: None,
            since: head.created_at,
            says: Says::Message(head.id.clone()),
            message: Some(head.id.clone()),
            of: format!("{} ({})", head.id, head.topic),
        });
    }
    for order in &g.orders.to_work {
        list.push(Ranked {
            due: order.deadline_at,
            since: order.created_at,
            says: Says::Line(format!(
                "order {} {} from {}: {}{}",
                order.id,
                order.status_at(now),
                order.from,
                order.goal,
                due(order),
            )),
            message: Some(order.message.clone()),
            of: format!("order {}", order.id),
        });
    }
    for order in &g.orders.to_conclude {
        let status = order.status_at(now);
        let ask = match status {
            OrderStatus::Blocked => "asks a question",
            _ => "reported: approve, rework or decline",
        };
        let line = match g.effects.get(&order.id) {
            // As the effects' own line has always read, so it is found the same way.
            Some(held) => format!(
                "order {} ({}): {} await approval — approving runs them; {status} by {}{}",
                order.id,
                order.goal,
                counted(*held, "staged effect", "staged effects"),
                order.to,
                due(order),
            ),
            None => format!(
                "order {} {status} by {}, {ask}: {}{}",
                order.id,
                order.to,
                order.goal,
                due(order),
            ),
        };
        list.push(Ranked {
            due: order.deadline_at,
            since: order.created_at,
            says: Says::Line(line),
            message: None,
            of: String::new(),
        });
    }
    for (id, order, text, at) in &g.needs {
        list.push(Ranked {
            due: None,
            since: *at,
            says: Says::Line(format!("{id} need on my order {order}: {text}")),
            message: None,
            of: String::new(),
        });
    }
    rank(&mut list);
    list
}

/// The owed lines read (with their first actions) and how many more are owed, and the
/// stop conditions of those whose payloads were read.
fn owed_lines(g: &Gathered, now: Millis) -> (Vec<String>, usize, Vec<String>) {
    let ranked = owed_ranked(g, now);
    let mut stops = Vec::new();
    for r in &ranked {
        let payload = r.message.as_ref().and_then(|m| g.payloads.get(m));
        if let Some(Value::Array(items)) = payload.and_then(|p| contract_field(p, &["stop_when"])) {
            stops.extend(
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|s| format!("{}: {s}", r.of)),
            );
        }
    }
    let (messages, says): (Vec<Option<String>>, Vec<Says>) =
        ranked.into_iter().map(|r| (r.message, r.says)).unzip();
    let infos = g.inbox.infos.iter().map(|h| Says::Message(h.id.clone()));
    let (mut lines, _) = lines_read(says.into_iter().chain(infos), &g.envelopes, |env| {
        format!(
            "{} [{}] {} from {}: {}",
            env.id, env.topic, env.kind, env.from, env.excerpt
        )
    });
    for (line, message) in lines.iter_mut().zip(messages) {
        let payload = message.as_ref().and_then(|m| g.payloads.get(m));
        if let Some(at) = resume_at(payload) {
            line.push_str(&format!(" — resume at: {at}"));
        }
    }
    let owed = g.inbox.requests.len()
        + g.orders.to_work.len()
        + g.orders.to_conclude.len()
        + g.needs.len()
        + g.inbox.infos_total;
    let unlisted = owed - lines.len();
    (lines, unlisted, stops)
}

/// What `me` waits for, most urgent first: its open requests and its orders at their
/// workers, then its orders back at their senders.
fn waiting_ranked(g: &Gathered, now: Millis) -> Vec<Ranked> {
    let mut list: Vec<Ranked> = Vec::new();
    for head in &g.outbox {
        list.push(Ranked {
            due: None,
            since: head.created_at,
            says: Says::Message(head.id.clone()),
            message: None,
            of: String::new(),
        });
    }
    for order in &g.orders.given {
        list.push(Ranked {
            due: order.deadline_at,
            since: order.created_at,
            says: Says::Line(format!(
                "order {} {} to {}: {}{}",
                order.id,
                order.status_at(now),
                order.to,
                order.goal,
                due(order),
            )),
            message: None,
            of: String::new(),
        });
    }
    rank(&mut list);
    // Then my orders back at their senders: waited for, on work I did.
    let mut back: Vec<Ranked> = Vec::new();
    for order in &g.orders.at_sender {
        let what = match order.status_at(now) {
            OrderStatus::Blocked => "my question waits for an answer",
            _ => "my report waits for review",
        };
        back.push(Ranked {
            due: order.deadline_at,
            since: order.created_at,
            says: Says::Line(format!(
                "order {} from {}, {what}: {}{}",
                order.id,
                order.from,
                order.goal,
                due(order),
            )),
            message: None,
            of: String::new(),
        });
    }
    rank(&mut back);
    list.extend(back);
    list
}

/// The waiting lines read, and how many more are waited for.
fn waiting_lines(g: &Gathered, now: Millis) -> (Vec<String>, usize) {
    let ranked = waiting_ranked(g, now);
    lines_read(ranked.into_iter().map(|r| r.says), &g.envelopes, |e| {
        let ends =
            e.to.iter()
                .map(|r| format!("{}:{}", r.name, r.status))
                .collect::<Vec<_>>()
                .join(", ");
        format!(
            "{} [{}] to {ends}: {} ({} replies)",
            e.id, e.topic, e.excerpt, e.replies
        )
    })
}

/// The topics and paths `me` works on: its open requests' and orders' topics, and the
/// subjects of its notes that are paths.
fn my_words(g: &Gathered, me: &Passname) -> BTreeSet<String> {
    let mut words: BTreeSet<String> = BTreeSet::new();
    words.extend(g.inbox.requests.iter().map(|e| e.topic.to_string()));
    words.extend(g.inbox.order_topics.iter().cloned());
    words.extend(g.outbox.iter().map(|e| e.topic.to_string()));
    words.extend(g.given_topics.iter().cloned());
    for note in g.digest.notes_of(me.as_str()) {
        if let Subject::Path(path) = &note.subject {
            words.insert(path.clone());
        }
    }
    words
}

/// A section read whole, with its share and the counts its heading states.
fn section(
    title: &'static str,
    summary: Option<String>,
    items: Vec<String>,
    more: &'static str,
    empty: Option<&'static str>,
    want: usize,
) -> Section {
    Section {
        summary,
        want,
        ..Section::of(title, items, more, empty)
    }
}

/// The packet's sections, in order.
fn sections(
    g: &Gathered,
    me: &Passname,
    lost: &BTreeMap<String, Vec<&Alert>>,
    other_alerts: &[&Alert],
    now: Millis,
) -> Vec<Section> {
    let digest = &g.digest;
    let (owed, owed_unlisted, stops) = owed_lines(g, now);
    let owed_summary = [
        counted(
            g.inbox.requests.len(),
            "open request to me",
            "open requests to me",
        ),
        counted(
            g.orders.to_work.len(),
            "order to work on",
            "orders to work on",
        ),
        counted(
            g.orders.to_conclude.len(),
            "order to conclude",
            "orders to conclude",
        ),
        counted(g.needs.len(), "need on my orders", "needs on my orders"),
        counted(
            g.inbox.infos_total,
            "unread info or message",
            "unread infos and messages",
        ),
    ]
    .join(", ")
        + ", most urgent first · `baton inbox`, `baton order list`, `baton queue`";
    let words = my_words(g, me);
    let (mut on_mine, mut elsewhere) = (Vec::new(), Vec::new());
    for c in &digest.constraints {
        let line = format!("{}: {} (tried {} → {})", c.id, c.text, c.tried, c.result);
        let all = format!("{} {} {}", c.text, c.tried, c.result);
        if words.iter().any(|w| names(&all, w)) {
            on_mine.push(line);
        } else {
            elsewhere.push(line);
        }
    }
    let constraints_summary = format!(
        "{}, of {} · `baton state show`",
        counted(
            on_mine.len(),
            "constraint on my topics and paths",
            "constraints on my topics and paths"
        ),
        digest.constraints_total
    );
    on_mine.extend(elsewhere);
    let (waiting, waiting_unlisted) = waiting_lines(g, now);
    let waiting_summary = format!(
        "{}, {}{}, oldest first · `baton outbox`, `baton order list`",
        counted(
            g.outbox.len(),
            "open request from me",
            "open requests from me"
        ),
        counted(
            g.orders.given.len(),
            "order from me in progress",
            "orders from me in progress"
        ),
        if g.orders.at_sender.is_empty() {
            String::new()
        } else {
            format!(
                ", {}",
                counted(
                    g.orders.at_sender.len(),
                    "order of mine at its sender",
                    "orders of mine at their senders"
                )
            )
        }
    );
    let holding = lost
        .values()
        .filter(|alerts| {
            alerts
                .iter()
                .any(|a| alert_run(a).is_some_and(|(_, held)| held))
        })
        .count();
    let lost_alerts: usize = lost.values().map(Vec::len).sum();
    let lost_lines: Vec<String> = lost
        .iter()
        .map(|(run, alerts)| {
            let ids: Vec<&str> = alerts.iter().map(|a| a.id.as_str()).collect();
            // The resurfaced alert says what the run held; the loss alone, why it ended.
            let told = alerts
                .iter()
                .find(|a| alert_run(a).is_some_and(|(_, held)| held))
                .or_else(|| alerts.first())
                .map(|a| a.message.as_str())
                .unwrap_or_default();
            format!("{run} lost ({}): {told}", ids.join(", "))
        })
        .collect();
    let mut stale = g.stale_mine.clone();
    stale.extend(g.stale_others.iter().cloned());
    vec![
        Section {
            unlisted: owed_unlisted,
            ..section(
                OWED,
                Some(owed_summary),
                owed,
                "baton inbox",
                Some("nothing"),
                packet::DEFAULT_WANT,
            )
        },
        section(
            FOCUS,
            None,
            digest.focus.iter().map(|(t, _)| t.clone()).collect(),
            "baton state show",
            Some("(none set: baton focus set TEXT)"),
            1,
        ),
        section(
            CONSTRAINTS,
            (digest.constraints_total > 0).then_some(constraints_summary),
            on_mine,
            "baton state show",
            Some("none recorded"),
            packet::DEFAULT_WANT,
        ),
        Section {
            unlisted: digest.decisions_total - digest.decisions.len(),
            ..section(
                DECISIONS,
                (digest.decisions_total > 0).then(|| {
                    format!(
                        "{}, newest first · `baton state show`",
                        counted(
                            digest.decisions_total,
                            "decision in force",
                            "decisions in force"
                        )
                    )
                }),
                digest
                    .decisions
                    .iter()
                    .map(|d| format!("{}: {} (why: {})", d.id, d.text, d.why))
                    .collect(),
                "baton state show",
                Some("none recorded"),
                packet::DEFAULT_WANT,
            )
        },
        Section {
            unlisted: waiting_unlisted,
            ..section(
                WAITING,
                (!waiting.is_empty() || waiting_unlisted > 0).then_some(waiting_summary),
                waiting,
                "baton outbox",
                Some("nothing"),
                packet::DEFAULT_WANT,
            )
        },
        section(LIVE, None, g.live.clone(), "baton runs", None, 3),
        section(
            LOST,
            (!lost.is_empty()).then(|| {
                format!(
                    "{}, {} · `baton alerts`",
                    counted(holding, "run lost holding work", "runs lost holding work"),
                    counted(lost_alerts, "alert about my runs", "alerts about my runs")
                )
            }),
            lost_lines,
            "baton alerts",
            None,
            10,
        ),
        Section {
            unlisted: digest.alerts_total - digest.alerts.len(),
            ..section(
                ALERTS,
                None,
                other_alerts
                    .iter()
                    .map(|a| format!("{}: {} (since {})", a.id, a.message, rfc3339(a.raised.at)))
                    .collect(),
                "baton alerts",
                Some("none"),
                2,
            )
        },
        section(
            STALE,
            (!g.stale_mine.is_empty()).then(|| {
                format!(
                    "{} · `baton state show`",
                    counted(
                        g.stale_mine.len(),
                        "stale note of mine",
                        "stale notes of mine"
                    )
                )
            }),
            stale,
            "baton state show",
            None,
            packet::DEFAULT_WANT,
        ),
        section(
            STOPS,
            None,
            stops,
            "baton show ID",
            Some("none stated by the requests I owe"),
            3,
        ),
    ]
}

/// A session or run of mine that has not ended, in a line: a crashed session's row shows
/// as running and, past the idle limit, stalled, until the reaper ends it.
fn live_line(run: &RunDoc) -> String {
    let health = run.health.map(|h| format!(" ({h})")).unwrap_or_default();
    let what = if run.what.is_empty() {
        String::new()
    } else {
        format!(": {}", run.what)
    };
    format!(
        "{} {} {}{health}, last event {}{what}",
        run.id,
        run.source_label(),
        run.status,
        run.last_event_at
    )
}

#[cfg(test)]
mod tests {
    use super::names;

    #[test]
    fn a_word_is_named_only_whole() {
        for (text, word, named) in [
            ("on csv-export: streaming fails", "csv-export", true),
            ("on csv-export-v2: streaming fails", "csv-export", false),
            ("see src/export.rs.", "src/export.rs", true),
            ("see src/export.rs.bak", "src/export.rs", false),
            ("auth", "auth", true),
            ("author", "auth", false),
            ("the oauth flow", "auth", false),
        ] {
            assert_eq!(names(text, word), named, "{word:?} in {text:?}");
        }
    }
}
