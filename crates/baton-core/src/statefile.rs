//! `STATE.md`: the project state rendered for people, with a machine block for tools.
//!
//! The file is a projection, never the truth. Its first line carries the state generation
//! and a checksum of the machine block; the machine block sits last, so a file cut short
//! loses its end marker or its checksum and reads as truncated. People edit the tables;
//! [`import_ops`] compares the tables with the machine block and turns the differences
//! into state operations — or refuses, naming each row it cannot accept.

use serde::{Deserialize, Serialize};

use crate::state::{ProjectState, StateOp, Subject};
use crate::time::Millis;

pub const SECTIONS: [&str; 6] = [
    "Focus",
    "Streams",
    "Decisions",
    "Constraints",
    "Notes",
    "Machine block",
];
const STREAM_HEADER: [&str; 2] = ["Stream", "Status"];
const DECISION_HEADER: [&str; 4] = ["Id", "Decision", "Why", "Status"];
const CONSTRAINT_HEADER: [&str; 4] = ["Id", "Constraint", "Tried", "Result"];
const NOTE_HEADER: [&str; 4] = ["Id", "Note", "Subject", "Written"];
const END: &str = "<!-- baton:end -->";
/// The Id people write on a row they add.
pub const NEW_ROW: &str = "new";

/// What the machine block holds: the parts of the state a person can see and edit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub generation: i64,
    pub focus: Option<String>,
    pub streams: Vec<(String, String)>,
    pub decisions: Vec<SnapDecision>,
    pub constraints: Vec<SnapConstraint>,
    pub notes: Vec<SnapNote>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapDecision {
    pub id: String,
    pub text: String,
    pub why: String,
    pub superseded_by: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapConstraint {
    pub id: String,
    pub text: String,
    pub tried: String,
    pub result: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapNote {
    pub id: String,
    pub text: String,
    pub subject: String,
    pub written_at: Millis,
}

impl Snapshot {
    pub fn of(state: &ProjectState) -> Self {
        Self {
            generation: state.generation,
            focus: state.focus.as_ref().map(|(t, _)| t.clone()),
            streams: state
                .streams
                .values()
                .map(|s| (s.name.clone(), s.status.clone()))
                .collect(),
            decisions: state
                .decisions
                .iter()
                .map(|d| SnapDecision {
                    id: d.id.clone(),
                    text: d.text.clone(),
                    why: d.why.clone(),
                    superseded_by: d.superseded_by.clone(),
                })
                .collect(),
            constraints: state
                .constraints
                .iter()
                .map(|c| SnapConstraint {
                    id: c.id.clone(),
                    text: c.text.clone(),
                    tried: c.tried.clone(),
                    result: c.result.clone(),
                })
                .collect(),
            notes: state
                .notes
                .iter()
                .map(|n| SnapNote {
                    id: n.id.clone(),
                    text: n.text.clone(),
                    subject: n.subject.label().to_owned(),
                    written_at: n.written.at,
                })
                .collect(),
        }
    }
}

fn checksum(block: &str) -> String {
    format!("blake3:{}", blake3::hash(block.as_bytes()).to_hex())
}

/// A table cell: one line, pipes escaped.
fn cell(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace("\r\n", "<br>")
        .replace('\n', "<br>")
}

fn uncell(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out.replace("<br>", "\n")
}

fn table(out: &mut String, header: &[&str], rows: Vec<Vec<String>>) {
    out.push_str(&format!("| {} |\n", header.join(" | ")));
    out.push_str(&format!("|{}\n", " --- |".repeat(header.len())));
    for row in rows {
        let cells: Vec<String> = row.iter().map(|c| cell(c)).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
}

/// The decision status markers a file may carry.
fn decision_status(d: &SnapDecision) -> String {
    match &d.superseded_by {
        Some(newer) => format!("superseded by {newer}"),
        None => "current".to_owned(),
    }
}

/// Renders the file. `timestamp` formats a time for people (the core reads no clock and
/// knows no calendar).
pub fn render(snapshot: &Snapshot, timestamp: impl Fn(Millis) -> String) -> String {
    let block = serde_json::to_string_pretty(snapshot).expect("a snapshot serializes");
    let mut out = format!(
        "<!-- baton:state v1 generation={} checksum={} -->\n# Project state\n\n\
         Rendered by `baton state render`. Edit the tables (add rows with Id `{NEW_ROW}`), then \
         `baton state import`. Do not rename sections or columns.\n",
        snapshot.generation,
        checksum(&block)
    );
    out.push_str("\n## Focus\n\n");
    out.push_str(&cell(snapshot.focus.as_deref().unwrap_or("")));
    out.push_str("\n\n## Streams\n\n");
    table(
        &mut out,
        &STREAM_HEADER,
        snapshot
            .streams
            .iter()
            .map(|(n, s)| vec![n.clone(), s.clone()])
            .collect(),
    );
    out.push_str("\n## Decisions\n\n");
    table(
        &mut out,
        &DECISION_HEADER,
        snapshot
            .decisions
            .iter()
            .map(|d| {
                vec![
                    d.id.clone(),
                    d.text.clone(),
                    d.why.clone(),
                    decision_status(d),
                ]
            })
            .collect(),
    );
    out.push_str("\n## Constraints\n\n");
    table(
        &mut out,
        &CONSTRAINT_HEADER,
        snapshot
            .constraints
            .iter()
            .map(|c| {
                vec![
                    c.id.clone(),
                    c.text.clone(),
                    c.tried.clone(),
                    c.result.clone(),
                ]
            })
            .collect(),
    );
    out.push_str("\n## Notes\n\n");
    table(
        &mut out,
        &NOTE_HEADER,
        snapshot
            .notes
            .iter()
            .map(|n| {
                vec![
                    n.id.clone(),
                    n.text.clone(),
                    n.subject.clone(),
                    timestamp(n.written_at),
                ]
            })
            .collect(),
    );
    out.push_str(
        "\n## Machine block\n\nWritten by Baton; `baton check` verifies it against the checksum \
         above. Do not edit.\n\n```json\n",
    );
    out.push_str(&block);
    out.push_str("\n```\n");
    out.push_str(END);
    out.push('\n');
    out
}

/// What `baton check` concludes about a file, before comparing it with the store.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// Cut short or corrupted: the reasons. Never to be parsed as intent.
    Truncated(Vec<String>),
    /// Structurally whole, but the prose drifted from the schema: the findings.
    Drifted(Vec<String>),
    /// Whole and on schema: the human tables and the machine snapshot.
    Valid {
        tables: Box<Tables>,
        snapshot: Box<Snapshot>,
    },
}

/// The editable part, as a person left it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tables {
    pub focus: String,
    pub streams: Vec<Vec<String>>,
    pub decisions: Vec<Vec<String>>,
    pub constraints: Vec<Vec<String>>,
    pub notes: Vec<Vec<String>>,
}

fn split_row(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut cells = Vec::new();
    let mut current = String::new();
    let mut escaped = false;
    for c in inner.chars() {
        if escaped {
            current.push('\\');
            current.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '|' {
            cells.push(uncell(current.trim()));
            current.clear();
        } else {
            current.push(c);
        }
    }
    cells.push(uncell(current.trim()));
    cells
}

/// Parses a table out of a section's lines: the header row, the separator, the rows.
fn parse_table(
    section: &str,
    lines: &[&str],
    header: &[&str],
    findings: &mut Vec<String>,
) -> Vec<Vec<String>> {
    let rows: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.trim_start().starts_with('|'))
        .collect();
    let Some(first) = rows.first() else {
        findings.push(format!("section {section:?} has no table"));
        return Vec::new();
    };
    let got = split_row(first);
    if got != header {
        findings.push(format!(
            "section {section:?}: table header is | {} |, expected | {} |",
            got.join(" | "),
            header.join(" | ")
        ));
        return Vec::new();
    }
    rows.iter()
        .skip(2)
        .map(|r| split_row(r))
        .filter(|cells| {
            if cells.len() != header.len() {
                findings.push(format!(
                    "section {section:?}: a row has {} cells, expected {}: {:?}",
                    cells.len(),
                    header.len(),
                    cells.join(" | ")
                ));
                false
            } else {
                true
            }
        })
        .collect()
}

/// Reads a rendered (and possibly hand-edited) file.
pub fn parse(text: &str) -> Parsed {
    let mut broken = Vec::new();
    let mut lines = text.lines();
    let header = lines.next().unwrap_or("");
    let fields = header
        .strip_prefix("<!-- baton:state v1 ")
        .and_then(|h| h.strip_suffix(" -->"));
    let Some(fields) = fields else {
        return Parsed::Truncated(vec![
            "the first line is not a Baton state header (`<!-- baton:state v1 … -->`)".into(),
        ]);
    };
    let mut generation = None;
    let mut sum = None;
    for part in fields.split_whitespace() {
        if let Some(g) = part.strip_prefix("generation=") {
            generation = g.parse::<i64>().ok();
        } else if let Some(c) = part.strip_prefix("checksum=") {
            sum = Some(c.to_owned());
        }
    }
    let (Some(generation), Some(sum)) = (generation, sum) else {
        return Parsed::Truncated(vec!["the header lacks its generation or checksum".into()]);
    };
    if !text.trim_end().ends_with(END) {
        broken.push(format!(
            "the end marker `{END}` is missing: the file was cut short"
        ));
    }
    let block = text
        .find("\n```json\n")
        .map(|start| &text[start + 9..])
        .and_then(|rest| rest.find("\n```\n").map(|end| &rest[..end]));
    let snapshot = match block {
        None => {
            broken.push("the machine block (```json … ```) is missing or unterminated".into());
            None
        }
        Some(block) => {
            if checksum(block) != sum {
                broken.push(
                    "the machine block does not match the header's checksum: it was cut or changed"
                        .into(),
                );
                None
            } else {
                match serde_json::from_str::<Snapshot>(block) {
                    Ok(s) if s.generation == generation => Some(s),
                    Ok(_) => {
                        broken.push(
                            "the machine block's generation differs from the header's".into(),
                        );
                        None
                    }
                    Err(e) => {
                        broken.push(format!("the machine block is not a state snapshot: {e}"));
                        None
                    }
                }
            }
        }
    };
    if !broken.is_empty() {
        return Parsed::Truncated(broken);
    }
    let snapshot = snapshot.expect("no findings means a snapshot");

    // The prose: sections in order, tables with their headers, known status markers.
    let mut findings = Vec::new();
    let mut sections: Vec<(String, Vec<&str>)> = Vec::new();
    for line in text.lines().skip(1) {
        if let Some(title) = line.strip_prefix("## ") {
            sections.push((title.trim().to_owned(), Vec::new()));
        } else if let Some((_, body)) = sections.last_mut() {
            body.push(line);
        }
    }
    let titles: Vec<&str> = sections.iter().map(|(t, _)| t.as_str()).collect();
    if titles != SECTIONS {
        findings.push(format!(
            "sections are [{}], expected [{}] in that order",
            titles.join(", "),
            SECTIONS.join(", ")
        ));
        return Parsed::Drifted(findings);
    }
    let body = |i: usize| sections[i].1.as_slice();
    let focus = body(0)
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let tables = Tables {
        focus: uncell(&focus),
        streams: parse_table("Streams", body(1), &STREAM_HEADER, &mut findings),
        decisions: parse_table("Decisions", body(2), &DECISION_HEADER, &mut findings),
        constraints: parse_table("Constraints", body(3), &CONSTRAINT_HEADER, &mut findings),
        notes: parse_table("Notes", body(4), &NOTE_HEADER, &mut findings),
    };
    for row in &tables.decisions {
        let status = row[3].as_str();
        let known = status == "current"
            || status
                .strip_prefix("superseded by D-")
                .is_some_and(|n| n.parse::<u32>().is_ok())
            || (row[0] == NEW_ROW
                && (status.is_empty()
                    || status
                        .strip_prefix("supersedes D-")
                        .is_some_and(|n| n.parse::<u32>().is_ok())));
        if !known {
            findings.push(format!(
                "decision {}: unknown status marker {status:?} (use `current`, `superseded by D-N`, \
                 or on a new row `supersedes D-N`)",
                row[0]
            ));
        }
    }
    if findings.is_empty() {
        Parsed::Valid {
            tables: Box::new(tables),
            snapshot: Box::new(snapshot),
        }
    } else {
        Parsed::Drifted(findings)
    }
}

/// What a STATE.md file is worth, against the store it was rendered from.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Valid {
        tables: Box<Tables>,
        snapshot: Box<Snapshot>,
    },
    /// Cut short or corrupted: never to be read as intent.
    Truncated(Vec<String>),
    /// Whole, but rendered before the store's state moved on (`file` < `store`).
    Stale { file: i64, store: i64 },
    /// Whole, but its prose drifted from the schema: a person must restore it.
    Drifted(Vec<String>),
}

/// The verdict on a file's bytes, given the store's state generation now.
pub fn judge(bytes: &[u8], store_generation: i64) -> Verdict {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Verdict::Truncated(vec!["the file is not UTF-8 text".into()]);
    };
    match parse(text) {
        Parsed::Truncated(why) => Verdict::Truncated(why),
        Parsed::Drifted(why) => Verdict::Drifted(why),
        Parsed::Valid { tables, snapshot } => {
            let store = store_generation;
            if snapshot.generation < store {
                Verdict::Stale {
                    file: snapshot.generation,
                    store,
                }
            } else {
                Verdict::Valid { tables, snapshot }
            }
        }
    }
}

/// Turns a person's edits into state operations, or lists every edit that cannot be
/// accepted (decisions and constraints are immutable; nothing is deleted but streams).
pub fn import_ops(tables: &Tables, snapshot: &Snapshot) -> Result<Vec<StateOp>, Vec<String>> {
    let mut ops = Vec::new();
    let mut refused = Vec::new();
    let focus = tables.focus.trim();
    if focus != snapshot.focus.as_deref().unwrap_or("") {
        if focus.is_empty() {
            refused.push("focus: it cannot be emptied; write the new focus instead".into());
        } else {
            ops.push(StateOp::Focus {
                text: focus.to_owned(),
            });
        }
    }
    for row in &tables.streams {
        let (name, status) = (row[0].trim(), row[1].trim());
        match snapshot.streams.iter().find(|(n, _)| n == name) {
            Some((_, old)) if old == status => {}
            _ => ops.push(StateOp::Stream {
                name: name.to_owned(),
                status: status.to_owned(),
            }),
        }
    }
    for (name, _) in &snapshot.streams {
        if !tables.streams.iter().any(|r| r[0].trim() == name) {
            ops.push(StateOp::StreamDone { name: name.clone() });
        }
    }
    for row in &tables.decisions {
        if row[0] == NEW_ROW {
            ops.push(StateOp::Decide {
                text: row[1].clone(),
                why: row[2].clone(),
                supersedes: row[3].strip_prefix("supersedes ").map(str::to_owned),
            });
        } else {
            match snapshot.decisions.iter().find(|d| d.id == row[0]) {
                None => refused.push(format!(
                    "decision {}: no such decision; give a new row the Id `{NEW_ROW}`",
                    row[0]
                )),
                Some(d) if d.text != row[1] || d.why != row[2] || decision_status(d) != row[3] => {
                    refused.push(format!(
                        "decision {}: decisions are immutable; add a `{NEW_ROW}` row with status \
                         `supersedes {}` instead of editing it",
                        d.id, d.id
                    ))
                }
                Some(_) => {}
            }
        }
    }
    for d in &snapshot.decisions {
        if !tables.decisions.iter().any(|r| r[0] == d.id) {
            refused.push(format!(
                "decision {}: decisions are never deleted; restore its row",
                d.id
            ));
        }
    }
    for row in &tables.constraints {
        if row[0] == NEW_ROW {
            ops.push(StateOp::Constrain {
                text: row[1].clone(),
                tried: row[2].clone(),
                result: row[3].clone(),
            });
        } else {
            match snapshot.constraints.iter().find(|c| c.id == row[0]) {
                None => refused.push(format!(
                    "constraint {}: no such constraint; give a new row the Id `{NEW_ROW}`",
                    row[0]
                )),
                Some(c) if c.text != row[1] || c.tried != row[2] || c.result != row[3] => refused
                    .push(format!(
                        "constraint {}: constraints are immutable; add a `{NEW_ROW}` row instead",
                        c.id
                    )),
                Some(_) => {}
            }
        }
    }
    for c in &snapshot.constraints {
        if !tables.constraints.iter().any(|r| r[0] == c.id) {
            refused.push(format!(
                "constraint {}: constraints are never deleted; restore its row",
                c.id
            ));
        }
    }
    for row in &tables.notes {
        if row[0] == NEW_ROW {
            ops.push(StateOp::Note {
                text: row[1].clone(),
                subject: Subject::Path(row[2].clone()),
            });
        } else if !snapshot
            .notes
            .iter()
            .any(|n| n.id == row[0] && n.text == row[1] && n.subject == row[2])
        {
            refused.push(format!(
                "note {}: notes are immutable; add a `{NEW_ROW}` row instead",
                row[0]
            ));
        }
    }
    for n in &snapshot.notes {
        if !tables.notes.iter().any(|r| r[0] == n.id) {
            refused.push(format!(
                "note {}: notes are never deleted; restore its row",
                n.id
            ));
        }
    }
    if refused.is_empty() {
        Ok(ops)
    } else {
        Err(refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_judged_against_the_store_generation() {
        let text = render(&snapshot(), |ms| ms.to_string());
        assert!(matches!(judge(text.as_bytes(), 7), Verdict::Valid { .. }));
        assert_eq!(
            judge(text.as_bytes(), 9),
            Verdict::Stale { file: 7, store: 9 }
        );
        assert!(matches!(judge(b"\xff\xfe", 7), Verdict::Truncated(_)));
        let cut = &text.as_bytes()[..text.len() / 2];
        assert!(matches!(judge(cut, 7), Verdict::Truncated(_)));
    }

    fn snapshot() -> Snapshot {
        Snapshot {
            generation: 7,
            focus: Some("Ship the export | fix".into()),
            streams: vec![("export".into(), "fixing".into())],
            decisions: vec![
                SnapDecision {
                    id: "D-1".into(),
                    text: "SQLite".into(),
                    why: "embedded".into(),
                    superseded_by: Some("D-2".into()),
                },
                SnapDecision {
                    id: "D-2".into(),
                    text: "WAL".into(),
                    why: "readers".into(),
                    superseded_by: None,
                },
            ],
            constraints: vec![SnapConstraint {
                id: "C-1".into(),
                text: "no network".into(),
                tried: "curl".into(),
                result: "refused".into(),
            }],
            notes: vec![SnapNote {
                id: "N-1".into(),
                text: "uses v2".into(),
                subject: "src/a.rs".into(),
                written_at: 5,
            }],
        }
    }

    fn rendered() -> String {
        render(&snapshot(), |ms| format!("t{ms}"))
    }

    #[test]
    fn a_rendered_file_parses_back_to_its_snapshot_and_no_edits() {
        match parse(&rendered()) {
            Parsed::Valid {
                tables,
                snapshot: s,
            } => {
                assert_eq!(*s, snapshot());
                assert_eq!(tables.focus, "Ship the export | fix");
                assert_eq!(import_ops(&tables, &s), Ok(vec![]));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_cut_of_the_file_reads_as_truncated() {
        let text = rendered();
        for cut in (0..text.len() - 1).filter(|i| text.is_char_boundary(*i)) {
            let part = &text[..cut];
            assert!(
                matches!(parse(part), Parsed::Truncated(_)),
                "cut at {cut} was not truncated"
            );
        }
    }

    #[test]
    fn a_changed_machine_block_reads_as_truncated() {
        let text = rendered().replace("\"WAL\"", "\"WAL2\"");
        let Parsed::Truncated(why) = parse(&text) else {
            panic!()
        };
        assert!(why[0].contains("checksum"), "{why:?}");
    }

    #[test]
    fn renamed_or_reordered_sections_and_headers_drift() {
        for (from, to, says) in [
            ("## Streams", "## Threads", "sections are"),
            (
                "| Id | Decision | Why | Status |",
                "| Id | Choice | Why | Status |",
                "table header",
            ),
            (
                "| D-2 | WAL | readers | current |",
                "| D-2 | WAL | readers | maybe |",
                "unknown status marker",
            ),
        ] {
            let text = rendered().replace(from, to);
            match parse(&text) {
                Parsed::Drifted(f) => assert!(f.iter().any(|x| x.contains(says)), "{f:?}"),
                other => panic!("{from} → {to}: {other:?}"),
            }
        }
        let text = rendered()
            .replace("## Decisions", "## Tmp")
            .replace("## Constraints", "## Decisions")
            .replace("## Tmp", "## Constraints");
        assert!(matches!(parse(&text), Parsed::Drifted(_)));
    }

    #[test]
    fn edits_become_operations_and_forbidden_edits_are_named() {
        let text = rendered()
            .replace(
                "| export | fixing |",
                "| export | reviewing |\n| docs | drafting |",
            )
            .replace(
                "| D-2 | WAL | readers | current |",
                "| D-2 | WAL | readers | current |\n| new | Postgres | teams | supersedes D-2 |",
            );
        let Parsed::Valid { tables, snapshot } = parse(&text) else {
            panic!()
        };
        let ops = import_ops(&tables, &snapshot).unwrap();
        assert_eq!(ops.len(), 3, "{ops:?}");
        assert!(ops.contains(&StateOp::Decide {
            text: "Postgres".into(),
            why: "teams".into(),
            supersedes: Some("D-2".into())
        }));

        let text = rendered().replace(
            "| C-1 | no network | curl | refused |",
            "| C-1 | no network | wget | refused |",
        );
        let Parsed::Valid { tables, snapshot } = parse(&text) else {
            panic!()
        };
        let refused = import_ops(&tables, &snapshot).unwrap_err();
        assert!(
            refused[0].contains("C-1") && refused[0].contains("immutable"),
            "{refused:?}"
        );
    }
}
