//! What commands print: a versioned JSON document with `--json`, a human rendering
//! otherwise. Commands build an [`Output`]; `main` writes it.

use baton_app::doc::{Doc, to_json};
use baton_app::doc::{MessageRow, RowStatus};
use baton_core::Millis;
use baton_core::time::age;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::ErrorKind;

/// A command's result, in both renderings.
pub struct Output {
    /// `None` when stdout belongs to a command Baton ran: nothing is printed, even with
    /// `--json`.
    pub json: Option<Value>,
    pub human: String,
    /// Set when the command printed its answer but must still exit non-zero (e.g.
    /// `handoff check` with invalid findings, or `evidence run` with its command's code).
    pub exit: Option<ErrorKind>,
    /// Baton's own word when stdout belongs to a command it ran: printed on stderr.
    pub note: Option<String>,
}

/// Set by `main` when this process prints text: a command's JSON document is then not
/// built (for a list, building and freeing it cost as much as reading it from the store).
static TEXT_ONLY: AtomicBool = AtomicBool::new(false);

/// This process prints text, never the JSON documents ([`Output::render`] with `false`).
pub fn text_only() {
    TEXT_ONLY.store(true, Ordering::Relaxed);
}

impl Output {
    /// `doc` rendered as `--json` prints it (its `schema` field first), and `human`.
    pub fn of(doc: &impl Doc, human: impl Into<String>) -> Self {
        let json = if TEXT_ONLY.load(Ordering::Relaxed) {
            // Never printed: the process prints text.
            Value::Null
        } else {
            to_json(doc)
        };
        Self {
            json: Some(json),
            human: human.into(),
            exit: None,
            note: None,
        }
    }

    /// Prints nothing on stdout: it belongs to the command Baton ran.
    pub fn nothing() -> Self {
        Self {
            json: None,
            human: String::new(),
            exit: None,
            note: None,
        }
    }

    /// Adds Baton's own word, printed on stderr.
    pub fn with_note(mut self, note: String) -> Self {
        self.note = Some(note);
        self
    }

    /// Prints as usual, then exits with `kind`'s code.
    pub fn with_exit(mut self, kind: ErrorKind) -> Self {
        self.exit = Some(kind);
        self
    }

    pub fn render(&self, as_json: bool) -> String {
        if as_json {
            match &self.json {
                Some(json) => format!("{json}\n"),
                None => String::new(),
            }
        } else if self.human.is_empty() || self.human.ends_with('\n') {
            visible(&self.human)
        } else {
            format!("{}\n", visible(&self.human))
        }
    }
}

/// Text for a terminal: every control character but newline and tab shown as a visible
/// escape (`\e`, `\r`, `\u{7}`, `\u{9b}`), so a string another agent wrote can neither
/// move the cursor, rewrite what is on screen nor set the clipboard (OSC 52). Every human
/// rendering passes through it on its way out (stdout, the note and errors on stderr);
/// JSON output is never escaped: it is exact, and JSON escapes controls itself.
pub fn visible(text: &str) -> String {
    if !text.chars().any(hidden) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\u{1b}' => out.push_str("\\e"),
            '\r' => out.push_str("\\r"),
            c if hidden(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// C0 and C1 controls and DEL, except newline and tab; and the bidirectional overrides
/// and isolates, which reorder what is shown.
fn hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

pub fn now() -> Millis {
    jiff::Timestamp::now().as_millisecond()
}

pub use baton_core::time::rfc3339 as timestamp;

/// `812 B`, `3.4 KiB`, `1.2 MiB`.
pub fn size(bytes: u64) -> String {
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1024 * 1024 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)),
    }
}

/// Left-aligned columns separated by two spaces; the last column is not padded. Cells are
/// made [`visible`] (and newlines shown as `\n`) before they are measured, so a hostile
/// cell neither breaks a row nor misaligns its column.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|cell| visible(cell).replace('\n', "\\n"))
                .collect()
        })
        .collect();
    let rows = rows.as_slice();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, cell) in cells.into_iter().enumerate() {
            out.push_str(cell);
            if i < last {
                let pad = widths[i] - cell.chars().count() + 2;
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// The human preview table: never the payload, only its excerpt.
pub fn preview_table(items: &[MessageRow], now: Millis) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|row| {
            let status = match &row.status {
                RowStatus::Caller(status) => status.map(|s| s.to_string()),
                RowStatus::Recipients(_) => None,
            };
            vec![
                row.id.clone(),
                row.from.to_string(),
                row.kind.to_string(),
                row.topic.to_string(),
                status.unwrap_or_else(|| "-".to_owned()),
                size(row.size),
                age_of(&row.created_at, now),
                row.depth.to_string(),
                row.excerpt.clone(),
            ]
        })
        .collect();
    table(
        &[
            "ID", "FROM", "TYPE", "TOPIC", "STATUS", "SIZE", "AGE", "DEPTH", "EXCERPT",
        ],
        &rows,
    )
}

/// The age of a document's RFC 3339 time (`-` when it is not one).
pub fn age_of(time: &str, now: Millis) -> String {
    time.parse::<jiff::Timestamp>()
        .map_or_else(|_| "-".to_owned(), |t| age(t.as_millisecond(), now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_shown_as_escapes() {
        assert_eq!(
            visible("ok\u{1b}]52;c;aGk=\u{7}\r\u{0}\u{9b}31m\u{202e}\nnext\tcol"),
            "ok\\e]52;c;aGk=\\u{7}\\r\\u{0}\\u{9b}31m\\u{202e}\nnext\tcol"
        );
        assert_eq!(visible("plain ünïcode"), "plain ünïcode");
    }

    #[test]
    fn tables_align_on_the_widest_cell() {
        let t = table(
            &["A", "BB"],
            &[vec!["xxx".into(), "y".into()], vec!["z".into(), "".into()]],
        );
        assert_eq!(t, "A    BB\nxxx  y\nz\n");
    }

    #[test]
    fn json_output_starts_with_the_schema() {
        let doc = baton_app::doc::AlertAcked { id: "A-1".into() };
        let out = Output::of(&doc, "1");
        assert_eq!(
            out.render(true),
            "{\"schema\":\"baton/alert-ack@1\",\"id\":\"A-1\"}\n"
        );
        assert_eq!(out.render(false), "1\n");
    }

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(3 * 1024 * 1024), "3.0 MiB");
    }
}
