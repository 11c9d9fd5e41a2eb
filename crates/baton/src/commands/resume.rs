//! `baton resume`: the bounded packet a fresh agent reads first (SPEC §5.4).

use baton_core::MessageType;
use baton_core::packet::{self, DEFAULT_MAX_BYTES, Section};
use baton_core::state::Freshness;
use baton_store::{Envelope, Store};
use clap::Args;
use serde_json::{Value, json};

use crate::commands::Context;
use crate::commands::state::{note_line, notes_freshness};
use crate::error::CommandResult;
use crate::output::{Output, now, timestamp};

/// Print the resume packet: who and where; what I owe; focus; constraints; decisions; what
/// I wait for; open alerts; stale notes; stop conditions — never over --max-bytes.
///
/// Lists that do not fit end with "+N more" and the command that shows them all.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton --as impl-1 resume\n  baton --as impl-1 resume --max-bytes 2000 --json"
)]
pub struct ResumeArgs {
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_BYTES)]
    pub max_bytes: usize,
}

/// How many owed requests have their payload read for `resume_at` and stop conditions:
/// the packet shows only the first few anyway, and each read costs a query.
const PAYLOADS_READ: usize = 20;
/// How many of the newest notes are examined for staleness.
const NOTES_EXAMINED: usize = 50;

/// A string field of the payload, or of its `x-baton` contract extension.
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

pub async fn run(ctx: &Context, args: ResumeArgs) -> CommandResult<Output> {
    let me = ctx.me().await?;
    let role = ctx
        .store
        .participant(me.as_str())
        .await?
        .map(|p| p.role)
        .unwrap_or_default();
    let state = ctx.store.state().await?;
    let generation = ctx.store.generation().await?;

    let mut owed = ctx.store.inbox(&me, false).await?;
    // Requests carry responsibility: they come first, oldest first within each kind.
    owed.sort_by_key(|e| e.kind != MessageType::Request);
    let mut owed_lines = Vec::new();
    let mut stops = Vec::new();
    for (i, env) in owed.iter().enumerate() {
        if i < PAYLOADS_READ && env.kind == MessageType::Request {
            let payload = Value::Object(ctx.store.fetch(None, &env.id).await?.payload);
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
    let waiting: Vec<String> = ctx
        .store
        .outbox(&me, false)
        .await?
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
    let stale: Vec<String> = notes_freshness(ctx, &state, NOTES_EXAMINED)
        .await?
        .iter()
        .filter(|(_, f)| *f != Freshness::Current)
        .map(|(n, f)| note_line(n, f))
        .collect();

    let sections = [
        Section {
            title: "What I owe",
            items: owed_lines,
            more: "baton inbox",
            empty: Some("nothing"),
        },
        Section {
            title: "Focus",
            items: state.focus.iter().map(|(t, _)| t.clone()).collect(),
            more: "baton state show",
            empty: Some("(none set: baton focus set TEXT)"),
        },
        Section {
            title: "Active constraints",
            items: state
                .constraints
                .iter()
                .rev()
                .map(|c| format!("{}: {} (tried {} → {})", c.id, c.text, c.tried, c.result))
                .collect(),
            more: "baton state show",
            empty: Some("none recorded"),
        },
        Section {
            title: "Recent decisions",
            items: state
                .current_decisions()
                .map(|d| format!("{}: {} (why: {})", d.id, d.text, d.why))
                .collect(),
            more: "baton state show",
            empty: Some("none recorded"),
        },
        Section {
            title: "What I am waiting for",
            items: waiting,
            more: "baton outbox",
            empty: Some("nothing"),
        },
        Section {
            title: "Open alerts",
            items: state
                .alerts
                .iter()
                .map(|a| format!("{}: {} (since {})", a.id, a.message, timestamp(a.raised.at)))
                .collect(),
            more: "baton alerts",
            empty: Some("none"),
        },
        Section {
            title: "Stale notes (do not take as fact)",
            items: stale,
            more: "baton state show",
            empty: None,
        },
        Section {
            title: "Stop conditions",
            items: stops,
            more: "baton show ID",
            empty: Some("none stated by the requests I owe"),
        },
    ];
    let header = format!(
        "# Resume: {me}{} in {}\ngeneration {generation} · {}",
        if role.is_empty() {
            String::new()
        } else {
            format!(" ({role})")
        },
        ctx.project.root.display(),
        timestamp(now()),
    );
    let packet = packet::render(&header, &sections, args.max_bytes);
    Ok(Output::new(
        "baton/resume@1",
        json!({
            "participant": me,
            "generation": generation,
            "max_bytes": args.max_bytes,
            "bytes": packet.text.len(),
            "sections": packet.sections,
            "text": packet.text,
        }),
        packet.text,
    ))
}
