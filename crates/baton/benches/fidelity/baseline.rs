//! The baselines, at the same byte budget as the packet: the history kept the ways the
//! posts warn against.
//!
//! - **HANDOFF.md**: the file each session appended its entry to (what it did, what it
//!   owed and waited for as it saw them, its next action), cut to the budget the way a
//!   reader with a byte limit reads it: its beginning is kept, whole lines, the rest left
//!   unread.
//! - **The log's newest events**: `baton export`'s lines (one event a line, as Baton
//!   stores them), the newest that fit the budget, oldest of them first.

/// The first whole lines of `text` that fit in `budget` bytes.
pub fn head(text: &str, budget: usize) -> String {
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        if out.len() + line.len() > budget {
            break;
        }
        out.push_str(line);
    }
    out
}

/// The last whole lines of `text` that fit in `budget` bytes, in their order.
pub fn tail(text: &str, budget: usize) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let mut used = 0;
    for line in text.split_inclusive('\n').rev() {
        if used + line.len() > budget {
            break;
        }
        used += line.len();
        kept.push(line);
    }
    kept.reverse();
    kept.concat()
}
