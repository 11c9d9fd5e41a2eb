//! The reservation documents: a reservation as every list shows it, what a reserve or a
//! release changed, the list, and the git guard's answers.

use baton_core::Millis;
use baton_core::reservation::{Reservation, Status};
use baton_core::time::rfc3339;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One reservation, as it stands when read.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReservationRow {
    pub id: String,
    pub holder: String,
    /// The glob, relative to the checkout.
    pub path: String,
    /// `exclusive` or `shared`.
    pub mode: String,
    /// `live`, `expired` or `released`, at the time of the answer.
    pub status: Status,
    pub reason: String,
    /// The order it is held for, until that order ends.
    pub order: Option<String>,
    pub reserved_at: String,
    pub renewed_at: String,
    /// When it lapses unless renewed; `null` for an order's without a deadline.
    pub expires_at: Option<String>,
    pub released_at: Option<String>,
    pub released_by: Option<String>,
    /// Why it was force-released.
    pub forced: Option<String>,
}

impl ReservationRow {
    pub fn new(r: &Reservation, now: Millis) -> Self {
        Self {
            id: r.id.clone(),
            holder: r.holder.to_string(),
            path: r.path.to_string(),
            mode: if r.exclusive { "exclusive" } else { "shared" }.to_owned(),
            status: r.status_at(now),
            reason: r.reason.clone(),
            order: r.order.clone(),
            reserved_at: rfc3339(r.reserved_at),
            renewed_at: rfc3339(r.renewed_at),
            expires_at: r.expires_at.map(rfc3339),
            released_at: r.released_at.map(rfc3339),
            released_by: r.released_by.clone(),
            forced: r.forced.clone(),
        }
    }

    pub fn rows(all: &[Reservation], now: Millis) -> Vec<Self> {
        all.iter().map(|r| Self::new(r, now)).collect()
    }
}

/// What a reserve made or renewed.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Reserved {
    pub items: Vec<ReservationRow>,
}
doc!(Reserved, "baton/reserve@1");

/// What a release released.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Released {
    pub items: Vec<ReservationRow>,
}
doc!(Released, "baton/release@1");

/// Reservations, oldest first.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct Reservations {
    pub items: Vec<ReservationRow>,
    /// More match than the list holds: ask with a larger `limit`.
    pub more: bool,
}
doc!(Reservations, "baton/reservations@1");

/// A path of a commit that another participant holds exclusively.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct HeldPath {
    pub path: String,
    pub reservation: ReservationRow,
}

/// What the git guard asked about: the paths others hold exclusively (none: the commit
/// may go in).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct GuardChecked {
    pub held: Vec<HeldPath>,
}
doc!(GuardChecked, "baton/guard-check@1");

/// A commit seen past the guard, recorded.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct GuardRecorded {
    pub commit: String,
    pub generation: Option<i64>,
}
doc!(GuardRecorded, "baton/guard-record@1");
