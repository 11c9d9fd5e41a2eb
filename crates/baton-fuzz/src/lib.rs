//! The fuzz targets: every parser that reads what another agent wrote, each as a function
//! of arbitrary bytes that must never panic, and that holds what it accepts to being read
//! back the same.
//!
//! `fuzz/` runs them coverage-guided with `cargo fuzz` (libFuzzer; see
//! docs/RELIABILITY.md); `tests/targets.rs` replays the committed corpora in
//! `fuzz/corpus/TARGET/` and a fixed budget of generated inputs on every `cargo test`.

use std::collections::BTreeMap;

use baton_core::awl::{self, ContractMode, NoEnvironment};
use baton_core::message::{DEFAULT_PAYLOAD_CAP, Payload};
use baton_core::negotiation::{self, Input, Position, Spec};
use baton_core::{gate, json, portable, statefile};

/// A target: arbitrary bytes in, a panic on what it must never do.
pub type Target = fn(&[u8]);

/// Every target, by the name of its corpus directory.
pub const TARGETS: [(&str, Target); 9] = [
    ("payload", payload),
    ("http_body", http_body),
    ("mcp_frame", mcp_frame),
    ("awl", awl_document),
    ("verdict", verdict),
    ("statefile", state_file),
    ("import_line", import_line),
    ("negotiation", negotiation),
    ("glob", glob),
];

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// A message's payload: accepted, its canonical text is accepted again as the same.
pub fn payload(data: &[u8]) {
    let Some(raw) = text(data) else { return };
    if let Ok(payload) = Payload::parse(raw, DEFAULT_PAYLOAD_CAP) {
        let again = Payload::parse(payload.text(), DEFAULT_PAYLOAD_CAP)
            .expect("an accepted payload's own text is accepted");
        assert_eq!(again.object(), payload.object());
    }
}

/// An HTTP body, held to the boundary every edge uses (a payload inside two levels).
pub fn http_body(data: &[u8]) {
    let Some(raw) = text(data) else { return };
    if let Ok(value) = json::boundary(raw, 2) {
        let again = json::boundary(&value.to_string(), 2)
            .expect("what the boundary accepted, written out, is accepted again");
        assert_eq!(again, value);
    }
}

/// A line on `baton mcp`'s stdin, or an MCP POST's body.
pub fn mcp_frame(data: &[u8]) {
    if let Some(raw) = text(data) {
        let _ = baton_mcp::judge_text(raw);
    }
}

/// A Work Order or Report: read, then every check as an order and as a report on itself.
pub fn awl_document(data: &[u8]) {
    let Ok(doc) = awl::parse_document(data) else {
        return;
    };
    let _ = awl::order_findings(&doc, None, &NoEnvironment, ContractMode::Required);
    let _ = awl::report_findings(&doc, &doc, &[], &NoEnvironment, ContractMode::Optional);
}

/// A reviewer's output, read for its verdict.
pub fn verdict(data: &[u8]) {
    if let Some(raw) = text(data) {
        let _ = gate::parse_verdict(raw);
    }
}

/// A `STATE.md` as a person may have edited it: judged, and a valid one turned into the
/// edits it makes.
pub fn state_file(data: &[u8]) {
    if let statefile::Verdict::Valid { tables, snapshot } = statefile::judge(data, 0) {
        let _ = statefile::import_ops(&tables, &snapshot);
    }
}

/// A line of an imported log.
pub fn import_line(data: &[u8]) {
    if let Some(raw) = text(data) {
        let _ = portable::parse_line(1, raw);
    }
}

/// Two reservation globs and a path, a line each: an accepted glob reads back as itself,
/// overlap is symmetric, and two globs that both cover the path overlap (a conflict is
/// never missed).
pub fn glob(data: &[u8]) {
    use baton_core::reservation::PathGlob;
    let Some(raw) = text(data) else { return };
    let mut lines = raw.lines();
    let globs: Vec<PathGlob> = lines
        .by_ref()
        .take(2)
        .filter_map(|l| PathGlob::new(l).ok())
        .collect();
    for g in &globs {
        let again = PathGlob::new(g.as_str()).expect("an accepted glob's own text is accepted");
        assert_eq!(&again, g);
    }
    if let [a, b] = &globs[..] {
        assert_eq!(a.overlaps(b), b.overlaps(a), "{a} ~ {b}");
        if let Some(path) = lines.next()
            && a.covers(path)
            && b.covers(path)
        {
            assert!(a.overlaps(b), "{a} and {b} both cover {path}");
        }
    }
}

/// A negotiation spec, and the positions under its `positions` key, settled once every
/// party has one (as the engine is only ever run).
pub fn negotiation(data: &[u8]) {
    let Some(raw) = text(data) else { return };
    let Ok(value) = negotiation::parse_json(raw, Input::Spec) else {
        return;
    };
    let Ok(spec) = Spec::from_value(&value) else {
        return;
    };
    let mut positions = BTreeMap::new();
    for party in &spec.parties {
        let name = party.name.as_str();
        if let Ok(position) = Position::from_value(&value["positions"][name], &spec, name) {
            positions.insert(name.to_owned(), position);
        }
    }
    if positions.len() == spec.parties.len() {
        let _ = negotiation::settle(&spec, &positions);
    }
}
