//! Recall: the resume packet and the freshness of notes. The CLI, the MCP
//! server and the agent hooks all read the packet through [`crate::App::resume`], so an
//! agent reads the same packet whichever way it asks.
//!
//! A path's history lives outside the store (the work tree, git): it comes from the
//! host's [`PathClock`]; everything else comes from the store.

use baton_core::packet::{self, Packet, Section};
use baton_core::state::{Freshness, Note, StateDigest, Subject, freshness};
use baton_core::time::rfc3339;
use baton_core::{Envelope, MessageType, Millis, Passname};
use baton_store::Store;
use serde_json::Value;

use crate::Result;
use crate::doc::RunDoc;
use crate::host::PathClock;

/// How many owed requests have their payload read for `resume_at` and stop conditions:
/// the packet shows only the first few anyway, and each read costs a query.
const PAYLOADS_READ: usize = 20;
/// How many of the newest notes the packet examines for staleness.
const NOTES_EXAMINED: usize = 50;

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
    let mut out = Vec::with_capacity(notes.len());
    for note in notes {
        let changed = match &note.subject {
            Subject::Path(path) => clock.changed_at(path),
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

fn owed_line(env: &Envelope, resume_at: Option<&str>) -> String {
    let mut line = format!(
        "{} {} from {} [{}]: {}",
        env.id, env.kind, env.from, env.topic, env.excerpt
    );
    if let Some(r) = resume_at {
        line.push_str(&format!(" — resume at: {r}"));
    }
    line
}

/// The shortest owed or waiting line is well over 50 bytes (a 26-character id, type,
/// sender, topic), so a packet of `max_bytes` never shows more than this many of either.
fn whole_read_limit(max_bytes: usize) -> u32 {
    u32::try_from(max_bytes / 50 + 1).unwrap_or(u32::MAX)
}

/// What the first reading takes of the owed and waiting lists; a list the packet showed
/// all of is read again, [`GROWTH`] times as long, up to [`whole_read_limit`]. The owed
/// list's first reading holds every request whose payload is read, so the stop conditions
/// never depend on how much of it was read.
const FIRST_OWED: u32 = 32;
const FIRST_WAITING: u32 = 8;
const GROWTH: u32 = 4;
const _: () = assert!(FIRST_OWED as usize >= PAYLOADS_READ);

/// The resume packet and the store generation it was read at.
pub struct Resume {
    pub packet: Packet,
    pub generation: i64,
}

/// The titles of the sections read in part: the owed and waiting lists, and the state's
/// lists the digest keeps only the newest of.
const OWED: &str = "What I owe";
const WAITING: &str = "What I am waiting for";
const CONSTRAINTS: &str = "Active constraints";
const DECISIONS: &str = "Recent decisions";
const ALERTS: &str = "Open alerts";

/// A list read in part: the lines of its first `limit` entries, and how many there are.
struct Part {
    lines: Vec<String>,
    total: u64,
    limit: u32,
}

impl Part {
    fn unlisted(&self) -> usize {
        usize::try_from(self.total).unwrap_or(usize::MAX) - self.lines.len()
    }
}

/// Builds `me`'s resume packet for the project at `place`, within `max_bytes`.
///
/// The packet shows a few kilobytes however long the history, so it is built from a first
/// reading of each list (a few owed and waiting lines, the state's digest); a list the
/// packet showed every line of, having more, is read again, longer (the state whole), and
/// the packet built again. The packet is always the one whole lists give: a section cut by
/// the byte cap shows the same lines whatever lies past them (`packet::render` is greedy,
/// in order).
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
    let header = format!(
        "# Resume: {me}{} in {place}\ngeneration {generation} · {}",
        if role.is_empty() {
            String::new()
        } else {
            format!(" ({role})")
        },
        rfc3339(now),
    );
    let whole = whole_read_limit(max_bytes);
    let mut state = store.state_digest().await?;
    let (mut owed, mut stops) = owed(store, me, FIRST_OWED.min(whole)).await?;
    let mut waiting = waiting(store, me, FIRST_WAITING.min(whole)).await?;
    let awaiting = awaiting(store, me, now).await?;
    let stale: Vec<String> = notes_freshness(store, clock, state.notes.iter().take(NOTES_EXAMINED))
        .await?
        .iter()
        .filter(|(_, f)| *f != Freshness::Current)
        .map(|(n, f)| note_line(n, f))
        .collect();
    let live: Vec<String> = live.iter().map(live_line).collect();
    let reserved = crate::reservations::packet_lines(store, me, now).await?;
    let longer = |part: &Part| (part.limit < whole).then(|| (part.limit * GROWTH).min(whole));
    loop {
        let mut sections = sections(
            &owed,
            stops.clone(),
            &waiting,
            &live,
            &state,
            &awaiting,
            &stale,
        );
        crate::reservations::packet_sections(&mut sections, &reserved);
        let packet = packet::render(&header, &sections, max_bytes);
        let short: Vec<&str> = packet
            .read_short(&sections)
            .into_iter()
            .map(|i| sections[i].title)
            .collect();
        let mut again = false;
        if short.contains(&OWED)
            && let Some(limit) = longer(&owed)
        {
            (owed, stops) = self::owed(store, me, limit).await?;
            again = true;
        }
        if short.contains(&WAITING)
            && let Some(limit) = longer(&waiting)
        {
            waiting = self::waiting(store, me, limit).await?;
            again = true;
        }
        if [CONSTRAINTS, DECISIONS, ALERTS]
            .iter()
            .any(|t| short.contains(t))
            && !state.is_whole()
        {
            state = store.state().await?.digest(usize::MAX);
            again = true;
        }
        if !again {
            return Ok(Resume { packet, generation });
        }
    }
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

/// The first `limit` lines of what `me` owes (requests first, oldest first within each
/// kind), and the stop conditions of the first few requests.
async fn owed(store: &Store, me: &Passname, limit: u32) -> Result<(Part, Vec<String>)> {
    let (owed, total) = store.owed(me, limit).await?;
    let ids: Vec<String> = owed
        .iter()
        .take(PAYLOADS_READ)
        .filter(|env| env.kind == MessageType::Request)
        .map(|env| env.id.clone())
        .collect();
    let mut payloads = store.payloads(&ids).await?.into_iter();
    let mut lines = Vec::new();
    let mut stops = Vec::new();
    for (i, env) in owed.iter().enumerate() {
        if i < PAYLOADS_READ && env.kind == MessageType::Request {
            let payload = match payloads.next().flatten() {
                Some(payload) => Value::Object(payload),
                None => Value::Null,
            };
            let resume_at = contract_field(&payload, &["decision", "resume_at"])
                .or_else(|| contract_field(&payload, &["resume_at"]))
                .and_then(Value::as_str);
            lines.push(owed_line(env, resume_at));
            if let Some(Value::Array(items)) = contract_field(&payload, &["stop_when"]) {
                stops.extend(
                    items
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|s| format!("{} ({}): {s}", env.id, env.topic)),
                );
            }
        } else {
            lines.push(owed_line(env, None));
        }
    }
    Ok((
        Part {
            lines,
            total,
            limit,
        },
        stops,
    ))
}

/// The first `limit` of `me`'s open requests, oldest first.
async fn waiting(store: &Store, me: &Passname, limit: u32) -> Result<Part> {
    let (waiting, total) = store.waiting(me, limit).await?;
    let lines = waiting
        .iter()
        .map(|e| {
            let ends =
                e.to.iter()
                    .map(|r| format!("{}:{}", r.name, r.status))
                    .collect::<Vec<_>>()
                    .join(", ");
            format!(
                "{} [{}] to {ends} ({} replies): {}",
                e.id, e.topic, e.replies, e.excerpt
            )
        })
        .collect();
    Ok(Part {
        lines,
        total,
        limit,
    })
}

/// Orders `me` gave whose report is in, with what their approval would run.
async fn awaiting(store: &Store, me: &Passname, now: Millis) -> Result<Vec<String>> {
    let mut awaiting = Vec::new();
    let mine = store
        .orders(&baton_store::OrderQuery {
            party: Some(me.to_string()),
            ..Default::default()
        })
        .await?;
    for order in mine.iter().filter(|o| {
        o.from == me.as_str() && o.status_at(now) == baton_core::order::OrderStatus::Submitted
    }) {
        let held = store.effects(&order.id).await?.awaiting();
        if held > 0 {
            awaiting.push(format!(
                "order {} ({}): {held} staged effect{} await approval — approving runs them",
                order.id,
                order.goal,
                if held == 1 { "" } else { "s" }
            ));
        }
    }
    Ok(awaiting)
}

/// The packet's sections, in order.
fn sections(
    owed: &Part,
    stops: Vec<String>,
    waiting: &Part,
    live: &[String],
    state: &StateDigest,
    awaiting: &[String],
    stale: &[String],
) -> Vec<Section> {
    vec![
        Section {
            title: OWED,
            unlisted: owed.unlisted(),
            items: owed.lines.clone(),
            more: "baton inbox",
            empty: Some("nothing"),
        },
        Section::of(
            "Focus",
            state.focus.iter().map(|(t, _)| t.clone()).collect(),
            "baton state show",
            Some("(none set: baton focus set TEXT)"),
        ),
        Section {
            title: CONSTRAINTS,
            unlisted: state.constraints_total - state.constraints.len(),
            items: state
                .constraints
                .iter()
                .map(|c| format!("{}: {} (tried {} → {})", c.id, c.text, c.tried, c.result))
                .collect(),
            more: "baton state show",
            empty: Some("none recorded"),
        },
        Section {
            title: DECISIONS,
            unlisted: state.decisions_total - state.decisions.len(),
            items: state
                .decisions
                .iter()
                .map(|d| format!("{}: {} (why: {})", d.id, d.text, d.why))
                .collect(),
            more: "baton state show",
            empty: Some("none recorded"),
        },
        Section {
            title: WAITING,
            unlisted: waiting.unlisted(),
            items: waiting.lines.clone(),
            more: "baton outbox",
            empty: Some("nothing"),
        },
        Section::of(
            "My sessions and runs not ended",
            live.to_vec(),
            "baton runs",
            None,
        ),
        Section::of(
            "Effects awaiting my approval",
            awaiting.to_vec(),
            "baton order show ID",
            None,
        ),
        Section {
            title: ALERTS,
            unlisted: state.alerts_total - state.alerts.len(),
            items: state
                .alerts
                .iter()
                .map(|a| format!("{}: {} (since {})", a.id, a.message, rfc3339(a.raised.at)))
                .collect(),
            more: "baton alerts",
            empty: Some("none"),
        },
        Section::of(
            "Stale notes (do not take as fact)",
            stale.to_vec(),
            "baton state show",
            None,
        ),
        Section::of(
            "Stop conditions",
            stops,
            "baton show ID",
            Some("none stated by the requests I owe"),
        ),
    ]
}
