//! What commands print: a versioned JSON document with `--json`, a human rendering
//! otherwise. Commands build an [`Output`]; `main` writes it.

use baton_core::time::age;
use baton_core::{Millis, Passname};
use baton_store::Envelope;
use serde_json::{Map, Value, json};

use crate::error::ErrorKind;

/// A command's result, in both renderings.
pub struct Output {
    pub schema: &'static str,
    pub json: Value,
    pub human: String,
    /// Set when the command printed its answer but must still exit non-zero (e.g.
    /// `handoff check` with invalid findings).
    pub exit: Option<ErrorKind>,
}

impl Output {
    /// `json` must be an object; the `schema` field (e.g. `baton/inbox@1`) is put first.
    pub fn new(schema: &'static str, json: Value, human: impl Into<String>) -> Self {
        Self {
            schema,
            json,
            human: human.into(),
            exit: None,
        }
    }

    /// Prints as usual, then exits with `kind`'s code.
    pub fn with_exit(mut self, kind: ErrorKind) -> Self {
        self.exit = Some(kind);
        self
    }

    pub fn render(&self, as_json: bool) -> String {
        if as_json {
            let mut doc = Map::new();
            doc.insert("schema".into(), Value::from(self.schema));
            if let Value::Object(fields) = &self.json {
                doc.extend(fields.clone());
            }
            let mut text = Value::Object(doc).to_string();
            text.push('\n');
            text
        } else if self.human.is_empty() || self.human.ends_with('\n') {
            self.human.clone()
        } else {
            format!("{}\n", self.human)
        }
    }
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

/// Left-aligned columns separated by two spaces; the last column is not padded.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
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

/// Whose status a message row reports.
#[derive(Clone, Copy)]
pub enum StatusOf<'a> {
    /// The caller's own delivery status (null when the caller is not a recipient).
    Caller(Option<&'a Passname>),
    /// Every recipient's, as `{name: status}` (the outbox).
    Recipients,
}

/// The JSON row every message list uses.
pub fn message_row(env: &Envelope, status_of: StatusOf<'_>) -> Value {
    let status = match status_of {
        StatusOf::Caller(who) => json!(who.and_then(|w| env.status_for(w))),
        StatusOf::Recipients => Value::Object(
            env.to
                .iter()
                .map(|r| (r.name.to_string(), json!(r.status)))
                .collect(),
        ),
    };
    json!({
        "id": env.id,
        "from": env.from,
        "to": env.to.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        "type": env.kind,
        "topic": env.topic,
        "status": status,
        "size": env.size,
        "created_at": timestamp(env.created_at),
        "excerpt": env.excerpt,
        "reply_to": env.reply_to,
        "depth": env.depth,
        "replies": env.replies,
        "request_status": env.request_status,
    })
}

/// The human preview table: never the payload, only its excerpt.
pub fn preview_table(items: &[Envelope], who: Option<&Passname>, now: Millis) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|env| {
            vec![
                env.id.clone(),
                env.from.to_string(),
                env.kind.to_string(),
                env.topic.to_string(),
                who.and_then(|w| env.status_for(w))
                    .map_or_else(|| "-".to_owned(), |s| s.to_string()),
                size(env.size),
                age(env.created_at, now),
                env.depth.to_string(),
                env.excerpt.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let out = Output::new("baton/x@1", json!({"id": "1"}), "1");
        assert_eq!(
            out.render(true),
            "{\"schema\":\"baton/x@1\",\"id\":\"1\"}\n"
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
