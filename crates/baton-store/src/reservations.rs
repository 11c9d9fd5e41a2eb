//! What both backends share about reservations: the query a read or a write transaction
//! asks, the columns a reservation is read from, and how a row becomes a
//! [`Reservation`]. The SQL is each backend's own (`sqlite/reservations.rs`,
//! `postgres/reservations.rs`); the rules are `baton_core::reservation`'s.

use baton_core::reservation::{PathGlob, Reservation};
use baton_core::{Millis, Passname};

use crate::decode::Columns;

/// Which reservations to read, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReservationQuery {
    /// Just these.
    pub ids: Option<Vec<String>>,
    pub holder: Option<String>,
    pub order: Option<String>,
    /// Only those live at this instant: not released, not expired.
    pub live_at: Option<Millis>,
    /// Only those that could cover a path under one of these fixed prefixes (a glob's
    /// [`PathGlob::prefix`], or a file's path): whose own prefix is one of theirs, one of
    /// the directories above one of theirs, or under one of theirs. A narrowing, never a
    /// decision: the core's overlap and cover tests decide.
    pub near: Option<Vec<String>>,
    /// At most this many.
    pub limit: Option<u32>,
}

impl ReservationQuery {
    /// The live reservations at `now` that could overlap `globs`: what a reservation is
    /// checked against.
    pub fn near_globs(globs: &[PathGlob], now: Millis) -> Self {
        Self {
            live_at: Some(now),
            near: Some(globs.iter().map(PathGlob::prefix).collect()),
            ..Self::default()
        }
    }
}

/// The prefixes a [`ReservationQuery::near`] looks up exactly (each given prefix, every
/// directory above it, and the empty prefix of a glob that begins with a wildcard), and
/// those it looks under; `None` when one of them is empty, so every row is near.
pub(crate) fn near(prefixes: &[String]) -> Option<(Vec<String>, Vec<String>)> {
    let mut exact = vec![String::new()];
    let mut under = Vec::new();
    for prefix in prefixes {
        if prefix.is_empty() {
            return None;
        }
        let mut at = prefix.as_str();
        loop {
            if !exact.iter().any(|e| e == at) {
                exact.push(at.to_owned());
            }
            match at.rfind('/') {
                Some(i) => at = &at[..i],
                None => break,
            }
        }
        under.push(prefix.clone());
    }
    Some((exact, under))
}

/// The bounds of the rows under `prefix`: every prefix beginning `prefix/` sorts at or
/// after the first and before the second (`0` follows `/` in every collation Baton uses,
/// bytewise).
pub(crate) fn under_bounds(prefix: &str) -> (String, String) {
    (format!("{prefix}/"), format!("{prefix}0"))
}

/// The columns a reservation is read from.
pub(crate) const RESERVATION_COLUMNS: &str = "id, seq, holder, path, exclusive, reason, \
     order_id, reserved_at, renewed_at, expires_at, released_at, released_by, forced";

/// A reservation from [`RESERVATION_COLUMNS`].
pub(crate) fn reservation(row: &impl Columns) -> sqlx::Result<Reservation> {
    let holder =
        Passname::try_from(row.text("holder")?).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    let path: PathGlob = serde_json::from_value(serde_json::Value::String(row.text("path")?))
        .map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    Ok(Reservation {
        id: row.text("id")?,
        seq: row.int("seq")?,
        holder,
        path,
        exclusive: row.int("exclusive")? != 0,
        reason: row.text("reason")?,
        order: row.maybe_text("order_id")?,
        reserved_at: row.int("reserved_at")?,
        renewed_at: row.int("renewed_at")?,
        expires_at: row.maybe_int("expires_at")?,
        released_at: row.maybe_int("released_at")?,
        released_by: row.maybe_text("released_by")?,
        forced: row.maybe_text("forced")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_is_looked_up_with_the_directories_above_it_and_under_it() {
        let (exact, under) = near(&["src/billing/x.rs".into(), "docs".into()]).unwrap();
        assert_eq!(
            exact,
            ["", "src/billing/x.rs", "src/billing", "src", "docs"]
        );
        assert_eq!(under, ["src/billing/x.rs", "docs"]);
        assert_eq!(near(&["src".into(), String::new()]), None);
        let (from, to) = under_bounds("src");
        assert!(from.as_str() <= "src/a" && "src/zzz/y" < to.as_str());
        assert!("src0" >= to.as_str() && "srca" > to.as_str());
    }
}
