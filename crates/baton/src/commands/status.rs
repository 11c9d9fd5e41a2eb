//! `baton status`: the board in a terminal — the `baton/status@1` document the app gathers,
//! as a compact table within 100 columns; `--watch` redraws it whenever the log moves.

use std::io::Write;
use std::time::Duration;

use baton_app::doc::{EffectRow, Latency, Status};
use baton_app::ops::{AfterInput, Nothing, StatusShow, StatusWait};
use baton_core::time::age;
use clap::Args;

use crate::commands::Context;
use crate::error::CommandResult;
use crate::output::{Output, table, visible};

/// Show the project at a glance: runs with their health, idle time, progress and tokens;
/// what each participant owes and waits on; orders by status with their held effects; the
/// human queue; open alerts; the paths reserved now; and the handoff metrics (oldest open
/// request first).
///
/// Runs and closed orders are those of the last hour. Unknown values read `-` (null in
/// JSON). `--watch` redraws in place each time the log moves (and every few seconds, so
/// ages stay current) until interrupted; with `--json` it prints one document a line.
/// `baton board` shows the same document in a browser.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  baton status\n  baton status --watch\n  baton --json status")]
pub struct StatusArgs {
    /// Redraw whenever the log moves, until interrupted.
    #[arg(long)]
    pub watch: bool,
}

/// The widest line the table prints.
pub const WIDTH: usize = 100;
/// How often `--watch` redraws when nothing moved (ages and health change with time).
const REFRESH: Duration = Duration::from_secs(5);

pub async fn run(ctx: &Context, args: StatusArgs, json: bool) -> CommandResult<Output> {
    let mut status = ctx.call::<StatusShow>(Nothing {}).await?;
    if !args.watch {
        return Ok(Output::of(&status, render(&status)));
    }
    let mut stdout = std::io::stdout();
    loop {
        let frame = Output::of(&status, render(&status)).render(json);
        // Home and clear, then the frame: it replaces the last one in place.
        let written = if json {
            stdout.write_all(frame.as_bytes())
        } else {
            stdout.write_all(format!("\x1b[H\x1b[2J{frame}").as_bytes())
        };
        match written.and_then(|()| stdout.flush()) {
            Ok(()) => {}
            // The reader went away (`| head`): stop quietly.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(Output::nothing()),
            Err(e) => return Err(e.into()),
        }
        status = ctx
            .call::<StatusWait>(AfterInput {
                after: status.generation,
                timeout_seconds: Some(REFRESH.as_secs_f64()),
            })
            .await?;
    }
}

/// `text` made [`visible`], cut to `max` characters (the cut marked).
fn fit(text: &str, max: usize) -> String {
    let text = visible(text);
    if text.chars().count() <= max {
        return text;
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn duration(ms: i64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else {
        age(0, ms)
    }
}

fn latency(l: &Latency) -> String {
    match (l.mean_ms, l.max_ms) {
        (Some(mean), Some(max)) => format!(
            "mean {} max {} (n={})",
            duration(mean),
            duration(max),
            l.count
        ),
        _ => "-".to_owned(),
    }
}

/// The status as text, every line within [`WIDTH`] columns (agent text is clipped; the
/// JSON document has all of it).
pub fn render(s: &Status) -> String {
    let mut out = String::new();
    out.push_str(&format!("generation {} at {}\n", s.generation, s.at));
    let empty = s.runs.is_empty()
        && s.participants.is_empty()
        && s.orders.is_empty()
        && s.metrics.requests == 0;
    if empty {
        out.push_str(
            "Nothing here yet. Register agents (`baton agent add NAME --role ROLE`), send a \
             request\n(`baton --as NAME send --to OTHER --type request …`) or start one through \
             `baton run`.\n",
        );
    }

    let c = &s.run_counts;
    out.push_str(&format!(
        "\nRUNS  running {} (stalled {})  registered {}  done {}  failed {}  stopped {}  lost {}  untracked {}  ended {}\n",
        c.running, c.stalled, c.registered, c.done, c.failed, c.stopped, c.lost, c.untracked, c.ended
    ));
    let (by, h) = (&c.sources, &c.helpers);
    if by.sessions + by.helpers > 0 {
        out.push_str(&format!(
            "      from baton run {}  untracked {}  sessions {}  helpers {} (active {}  idle {}  ended {})\n",
            by.wrapper, by.untracked, by.sessions, by.helpers, h.active, h.idle, h.ended
        ));
    }
    if !s.runs.is_empty() {
        let rows: Vec<Vec<String>> = s
            .runs
            .iter()
            .map(|r| {
                vec![
                    visible(&r.id),
                    r.status.to_string(),
                    dash(r.health),
                    fit(r.participant.as_deref().unwrap_or("-"), 12),
                    dash(r.idle_ms.map(duration)),
                    dash(r.progress.map(|p| format!("{}/{}", p.done, p.total))),
                    dash(r.tokens.as_ref().and_then(|t| t.total)),
                    fit(&r.what, 40),
                ]
            })
            .collect();
        out.push_str(&narrow(&table(
            &[
                "ID", "STATUS", "HEALTH", "WHO", "IDLE", "PROGRESS", "TOKENS", "COMMAND",
            ],
            &rows,
        )));
        if s.runs.iter().any(|r| r.hooks_skipped) {
            out.push_str(&narrow(crate::commands::runs::HOOKS_SKIPPED));
        }
    }

    if !s.participants.is_empty() {
        out.push_str("\nPARTICIPANTS\n");
        let rows: Vec<Vec<String>> = s
            .participants
            .iter()
            .map(|p| {
                vec![
                    fit(&p.name, 40),
                    fit(&p.role, 20),
                    p.owed.to_string(),
                    p.waiting.to_string(),
                ]
            })
            .collect();
        out.push_str(&narrow(&table(&["NAME", "ROLE", "OWED", "WAITING"], &rows)));
    }

    if !s.orders.is_empty() {
        out.push_str("\nORDERS\n");
        let mut rows = Vec::new();
        for g in &s.orders {
            for o in &g.items {
                rows.push(vec![
                    g.status.to_string(),
                    fit(&o.order.id, 20),
                    fit(&o.order.to, 12),
                    effect_counts(&o.effects),
                    fit(&o.order.goal, 60),
                ]);
            }
        }
        out.push_str(&narrow(&table(
            &["STATUS", "ID", "TO", "EFFECTS", "GOAL"],
            &rows,
        )));
    }

    let queued: usize = s.queue.iter().map(|l| l.items.len() + l.held_back).sum();
    out.push_str(&format!("\nQUEUE ({queued})\n"));
    for lane in &s.queue {
        if lane.items.is_empty() {
            continue;
        }
        let more = if lane.held_back > 0 {
            format!(", +{} held back", lane.held_back)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  {} ({}{more})\n",
            lane.lane.as_str(),
            lane.items.len()
        ));
        for i in &lane.items {
            out.push_str(&format!("    {}\n", fit(&one_line(&i.text), WIDTH - 4)));
        }
    }

    if !s.alerts.is_empty() {
        out.push_str(&format!("\nALERTS ({})\n", s.alerts.len()));
        for a in &s.alerts {
            out.push_str(&format!(
                "  {}\n",
                fit(&one_line(&format!("{} {}", a.id, a.message)), WIDTH - 2)
            ));
        }
    }

    if !s.reviews.is_empty() {
        out.push_str(&format!("\nREVIEWS NOT CONCLUDED ({})\n", s.reviews.len()));
        for r in &s.reviews {
            out.push_str(&format!(
                "  {}\n",
                fit(
                    &one_line(&format!(
                        "{} round {} started {}: {} (run `baton review` again)",
                        r.order,
                        r.round,
                        r.started_at,
                        r.reviewers.join(" | ")
                    )),
                    WIDTH - 2
                )
            ));
        }
    }

    if !s.pools.items.is_empty() {
        out.push_str(&format!(
            "\nWAITING IN POOLS ({}{})\n",
            s.pools.items.len(),
            if s.pools.more {
                "+, see `baton pool --role ROLE`"
            } else {
                ""
            }
        ));
        for p in &s.pools.items {
            let id = p.order.as_deref().unwrap_or(&p.message);
            let due = p
                .deadline
                .as_ref()
                .map_or_else(String::new, |d| format!(" due {d}"));
            out.push_str(&format!(
                "  {}\n",
                fit(
                    &one_line(&format!(
                        "{} {id} {} from {}{due}: {}",
                        p.pool, p.topic, p.from, p.excerpt
                    )),
                    WIDTH - 2
                )
            ));
        }
    }

    if !s.reservations.items.is_empty() {
        let held = &s.reservations;
        out.push_str(&format!(
            "\nRESERVED PATHS ({}{})\n",
            held.items.len(),
            if held.more {
                "+, see `baton reservations`"
            } else {
                ""
            }
        ));
        for r in &held.items {
            let until = match (&r.order, &r.expires_at) {
                (Some(order), _) => format!("until order {order} ends"),
                (None, Some(at)) => format!("until {at}"),
                (None, None) => String::new(),
            };
            out.push_str(&format!(
                "  {}\n",
                fit(
                    &one_line(&format!("{} {} {} {until}", r.path, r.holder, r.mode)),
                    WIDTH - 2
                )
            ));
        }
    }

    let m = &s.metrics;
    out.push_str("\nMETRICS\n");
    out.push_str(&format!(
        "  oldest open request  {}\n",
        m.oldest_open_request.as_ref().map_or_else(
            || "-".to_owned(),
            |o| format!("{} ({} old)", fit(&o.id, 40), duration(o.age_ms))
        )
    ));
    out.push_str(&format!(
        "  open requests {}  pending deliveries {}  awaiting approval {}  requests {}\n",
        m.open_requests, m.pending_deliveries, m.orders_awaiting_approval, m.requests
    ));
    out.push_str(&format!(
        "  created→delivered    {}\n",
        latency(&m.created_to_delivered)
    ));
    out.push_str(&format!(
        "  delivered→completed  {}\n",
        latency(&m.delivered_to_completed)
    ));
    out.push_str(&format!(
        "  approval wait        {}\n",
        latency(&m.approval_wait)
    ));
    out.push_str(&format!(
        "  clarification {}  thread depth {}  security refusals {}\n",
        dash(m.clarification_rate.map(|r| format!("{r:.2}"))),
        m.max_thread_depth,
        m.security_refusals
    ));
    let v = &s.trends.verdicts;
    out.push_str(&format!(
        "  verdicts approve {}  fix {}  invalid {}  stopped {}\n",
        v.approve, v.fix, v.invalid, v.stopped
    ));
    if !m.completed_by_topic.is_empty() {
        let topics: Vec<String> = m
            .completed_by_topic
            .iter()
            .map(|(t, n)| format!("{} {n}", fit(t, 30)))
            .collect();
        out.push_str(&format!(
            "  completed  {}\n",
            fit(&topics.join("  "), WIDTH - 13)
        ));
    }
    out
}

/// A table with each line cut to [`WIDTH`]: its last column gives way.
fn narrow(table: &str) -> String {
    table.lines().map(|l| fit(l, WIDTH) + "\n").collect()
}

/// Agent text on one line: newlines shown as `\n` (as tables do).
fn one_line(text: &str) -> String {
    text.replace('\n', "\\n")
}

/// An order's effects counted by status (`1 ran, 1 held`); `-` when it has none.
fn effect_counts(effects: &[EffectRow]) -> String {
    use baton_core::effect::EffectStatus as S;
    let counts: Vec<String> = [S::Held, S::Uncertain, S::Ran, S::Failed, S::Dropped]
        .into_iter()
        .filter_map(|status| {
            let n = effects.iter().filter(|e| e.status == status).count();
            (n > 0).then(|| format!("{n} {status}"))
        })
        .collect();
    if counts.is_empty() {
        "-".to_owned()
    } else {
        counts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use baton_core::effect::EffectStatus::{Dropped, Held, Ran};

    use super::*;

    #[test]
    fn effects_are_counted_by_what_became_of_them() {
        let row = |status| EffectRow {
            reference: "notes/publish#1".into(),
            tool: "notes/publish".into(),
            arguments: Default::default(),
            status,
            result_bytes: None,
            error: None,
            upstream: Vec::new(),
        };
        assert_eq!(effect_counts(&[]), "-");
        assert_eq!(effect_counts(&[row(Ran)]), "1 ran");
        assert_eq!(
            effect_counts(&[row(Held), row(Ran), row(Held), row(Dropped)]),
            "2 held, 1 ran, 1 dropped"
        );
    }
}
