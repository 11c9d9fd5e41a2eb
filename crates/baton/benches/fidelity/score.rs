//! The score of a text a successor reads (Baton's packet, or a baseline) against the
//! oracle: the same rules for every text.
//!
//! - An item counts when its id (whole: `D-1` is not `D-12`) or its exact text is there.
//! - A count counts when the text states it exactly, as "N open requests to me" (each
//!   count's words are the oracle's), and the line stating it names a `baton` command
//!   to list the rest, unless every item it counts is there anyway. Only counts above
//!   zero are scored.
//! - An error is an item shown as current that is not: superseded, stale or ended — it
//!   is mentioned and no line mentioning it says so ("supersed…", "stale", or a word of
//!   an ending: completed, archived, approved, lost …) — or someone else's open work with
//!   no line naming one of its parties (or under a heading that names one).

use super::oracle::{Item, Oracle, Why};

/// How much of one category the text holds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Recall {
    pub found: usize,
    pub of: usize,
}

impl Recall {
    pub fn percent(self) -> Option<f64> {
        (self.of > 0).then(|| 100.0 * self.found as f64 / self.of as f64)
    }
}

#[derive(Debug, Clone, Default)]
pub struct Score {
    pub categories: Vec<(&'static str, Recall)>,
    pub counts: Recall,
    pub errors: usize,
    /// What the errors were, a few of them.
    pub error_examples: Vec<String>,
    /// Must-know items and counts the text lacks, a few of each category.
    pub missed: Vec<String>,
    pub bytes: usize,
}

/// Words that say an item ended.
const ENDED: &[&str] = &[
    "completed",
    "complete",
    "archived",
    "refused",
    "handed back",
    "handedback",
    "handed_back",
    "approved",
    "declined",
    "cancelled",
    "expired",
    "done",
    "failed",
    "lost",
    "ended",
    "closed",
    "resolved",
    "acknowledged",
    "acked",
    "exited",
    "stopped",
    "sessionend",
];

/// Whether `line` holds `id` whole (not inside a longer id or word).
fn has_id(line: &str, id: &str) -> bool {
    let part = |c: char| c.is_alphanumeric() || c == '-' || c == '_';
    line.match_indices(id).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + id.len()..].chars().next();
        before.is_none_or(|c| !part(c)) && after.is_none_or(|c| !part(c))
    })
}

fn mentions(line: &str, item: &Item) -> bool {
    has_id(line, &item.id) || item.text.as_deref().is_some_and(|t| line.contains(t))
}

/// Whether `count` is stated as exactly `n` in `line`.
fn states(line: &str, n: usize, one: &str, many: &str) -> bool {
    let words = if n == 1 { one } else { many };
    let phrase = format!("{n} {words}");
    line.match_indices(&phrase).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + phrase.len()..].chars().next();
        before.is_none_or(|c| !c.is_ascii_digit()) && after.is_none_or(|c| !c.is_alphanumeric())
    })
}

pub fn score(text: &str, oracle: &Oracle) -> Score {
    let lines: Vec<&str> = text.lines().collect();
    let found = |item: &Item| lines.iter().any(|l| mentions(l, item));
    let mut score = Score {
        bytes: text.len(),
        ..Score::default()
    };
    for category in &oracle.categories {
        let recall = Recall {
            found: category.must.iter().filter(|i| found(i)).count(),
            of: category.must.len(),
        };
        let missed: Vec<&str> = category
            .must
            .iter()
            .filter(|i| !found(i))
            .map(|i| i.id.as_str())
            .take(5)
            .collect();
        if !missed.is_empty() {
            score
                .missed
                .push(format!("{}: {}", category.name, missed.join(", ")));
        }
        score.categories.push((category.name, recall));
        for count in category.counts.iter().filter(|c| !c.items.is_empty()) {
            let n = count.items.len();
            score.counts.of += 1;
            let every = count.items.iter().all(found);
            if lines
                .iter()
                .any(|l| states(l, n, count.one, count.many) && (every || l.contains("`baton ")))
            {
                score.counts.found += 1;
            } else {
                score.missed.push(format!("the count {n} {}", count.many));
            }
        }
    }
    // The nearest heading above each line.
    let mut heading = "";
    let headed: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| {
            if l.starts_with('#') {
                heading = l;
            }
            (*l, heading)
        })
        .collect();
    for bad in &oracle.bad {
        let at: Vec<(&str, &str)> = headed
            .iter()
            .filter(|(l, _)| mentions(l, &bad.item))
            .copied()
            .collect();
        if at.is_empty() {
            continue;
        }
        let said = |(line, heading): &(&str, &str)| {
            let line = line.to_lowercase();
            match &bad.why {
                Why::Superseded => line.contains("supersed"),
                Why::Stale => line.contains("stale"),
                Why::Ended => ENDED.iter().any(|w| has_id(&line, w)),
                Why::Theirs(parties) => parties
                    .iter()
                    .any(|p| has_id(&line, p) || has_id(heading, p)),
            }
        };
        if !at.iter().any(said) {
            score.errors += 1;
            if score.error_examples.len() < 5 {
                score.error_examples.push(format!(
                    "{:?} {} in {:?}",
                    bad.why,
                    bad.item.id,
                    super::clip(at[0].0, 160)
                ));
            }
        }
    }
    score
}
