//! Recall: the resume packet (SPEC §5.4) and the freshness of notes. The CLI, the MCP
//! server and the agent hooks all read the packet through [`crate::App::resume`], so an
//! agent reads the same packet whichever way it asks.
//!
//! A path's history lives outside the store (the work tree, git): it comes from the
//! host's [`PathClock`]; everything else comes from the store.

use baton_core::packet::{self, Packet, Section};
use baton_core::state::{Freshness, Note, Subject, freshness};
use baton_core::time::rfc3339;
use baton_core::{Envelope, MessageType, Millis, Passname};
use baton_store::Store;
use serde_json::Value;

use crate::Result;
use crate::host::PathClock;

/// How many owed requests have their payload read for `resume_at` and stop conditions:
/// the packet shows only the first few anyway, and each read costs a query.
const PAYLOADS_READ: usize = 20;
/// How many of the newest notes the packet examines for staleness.
const NOTES_EXAMINED: usize = 50;

/// `notes` (newest first) with their freshness. The records' last changes are read
/// together, in one read where the store can.
pub(crate) async fn notes_freshness<'a>(
    store: &dyn Store,
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

/// What the first reading takes of the owed and waiting lists: as many lines of about
/// 90 bytes as a default packet holds. The state's lists come from its digest.
const FIRST_READ: u32 = 64;

/// The resume packet and the store generation it was read at.
pub struct Resume {
    pub packet: Packet,
    pub generation: i64,
}

/// How much of each list a reading takes.
#[derive(Clone, Copy)]
enum Reading {
    /// The first lines of the owed and waiting lists, and the state's digest.
    First,
    /// As many lines as `max_bytes` could show, and the whole state.
    Whole(usize),
}

/// Builds `me`'s resume packet for the project at `place`, within `max_bytes`.
///
/// The packet shows a few kilobytes however long the history, so it is built from a first
/// reading of each list (a page of the owed and waiting lists, the state's digest); only
/// when the packet showed every line read of a list that has more is it built again from
/// a whole reading. Either way the packet is the one the whole reading gives: a section cut
/// by the byte cap shows the same lines whatever lies past them.
pub(crate) async fn resume(
    store: &dyn Store,
    clock: &dyn PathClock,
    me: &Passname,
    place: &str,
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
    let sections = sections(store, clock, me, now, Reading::First).await?;
    let mut packet = packet::render(&header, &sections, max_bytes);
    if packet.read_short(&sections) {
        let sections = self::sections(store, clock, me, now, Reading::Whole(max_bytes)).await?;
        packet = packet::render(&header, &sections, max_bytes);
    }
    Ok(Resume { packet, generation })
}

/// The packet's sections, in order, from a reading of `how` much.
async fn sections(
    store: &dyn Store,
    clock: &dyn PathClock,
    me: &Passname,
    now: Millis,
    how: Reading,
) -> Result<Vec<Section>> {
    let (limit, state) = match how {
        Reading::First => (FIRST_READ, store.state_digest().await?),
        Reading::Whole(max_bytes) => (
            whole_read_limit(max_bytes),
            store.state().await?.digest(usize::MAX),
        ),
    };

    // Requests carry responsibility: they come first, oldest first within each kind. Only
    // as many are read as could fit: the rest are counted, not loaded.
    let (owed, owed_total) = store.owed(me, limit).await?;
    let mut owed_lines = Vec::new();
    let mut stops = Vec::new();
    let read: Vec<String> = owed
        .iter()
        .take(PAYLOADS_READ)
        .filter(|env| env.kind == MessageType::Request)
        .map(|env| env.id.clone())
        .collect();
    let mut payloads = store.payloads(&read).await?.into_iter();
    for (i, env) in owed.iter().enumerate() {
        if i < PAYLOADS_READ && env.kind == MessageType::Request {
            let payload = match payloads.next().flatten() {
                Some(payload) => Value::Object(payload),
                None => Value::Null,
            };
            let resume_at = contract_field(&payload, &["decision", "resume_at"])
                .or_else(|| contract_field(&payload, &["resume_at"]))
                .and_then(Value::as_str);
            owed_lines.push(owed_line(env, resume_at));
            if let Some(Value::Array(items)) = contract_field(&payload, &["stop_when"]) {
                stops.extend(
                    items
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|s| format!("{} ({}): {s}", env.id, env.topic)),
                );
            }
        } else {
            owed_lines.push(owed_line(env, None));
        }
    }
    let (waiting, waiting_total) = store.waiting(me, limit).await?;
    let waiting: Vec<String> = waiting
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
    // Orders I gave whose report is in, with what their approval would run.
    let mut awaiting = Vec::new();
    let mine = store
        .orders(&baton_store::OrderQuery {
            party: Some(me.to_string()),
            closed: false,
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
    let stale: Vec<String> = notes_freshness(store, clock, state.notes.iter().take(NOTES_EXAMINED))
        .await?
        .iter()
        .filter(|(_, f)| *f != Freshness::Current)
        .map(|(n, f)| note_line(n, f))
        .collect();
    let unlisted = |total: u64, read: usize| usize::try_from(total).unwrap_or(usize::MAX) - read;

    Ok(vec![
        Section {
            title: "What I owe",
            unlisted: unlisted(owed_total, owed_lines.len()),
            items: owed_lines,
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
            title: "Active constraints",
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
            title: "Recent decisions",
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
            title: "What I am waiting for",
            unlisted: unlisted(waiting_total, waiting.len()),
            items: waiting,
            more: "baton outbox",
            empty: Some("nothing"),
        },
        Section::of(
            "Effects awaiting my approval",
            awaiting,
            "baton order show ID",
            None,
        ),
        Section {
            title: "Open alerts",
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
            stale,
            "baton state show",
            None,
        ),
        Section::of(
            "Stop conditions",
            stops,
            "baton show ID",
            Some("none stated by the requests I owe"),
        ),
    ])
}
