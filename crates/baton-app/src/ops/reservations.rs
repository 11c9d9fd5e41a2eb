//! Reservations as typed operations: reserve paths (or renew them), release them (or
//! force-release a quiet holder's), list them, and the git guard's check of a commit's
//! paths and its record of a commit that went in past it.

use baton_core::authority::MEMORY;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    GET, Needs, Operation, POST, Role, The, Typed, Who, participant, refused, route, typed,
};
use crate::doc::{
    GuardChecked, GuardRecorded, HeldPath, Released, ReservationRow, Reservations, Reserved,
};
use crate::{App, Result};

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReserveInput {
    pub paths: Vec<String>,
    #[serde(default)]
    pub shared: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

pub struct Reserve;

impl Typed for Reserve {
    type Input = ReserveInput;
    type Output = Reserved;
    const OP: Operation = typed(
        "reserve",
        Needs::Power(MEMORY),
        route(POST, "/reservations"),
        "Hold paths (globs from the root) before editing; again: renew.",
        &The::<Self>::ONE,
    )
    .offered("reserve", &[Role::Executor, Role::Planner]);

    async fn run(app: &App, who: Who<'_>, input: ReserveInput) -> Result<Reserved> {
        let me = participant(who.actor)?;
        let made = app
            .reserve(
                &me,
                &input.paths,
                input.shared,
                input.ttl_seconds,
                input.reason.as_deref(),
            )
            .await?;
        Ok(Reserved {
            items: ReservationRow::rows(&made, app.now()),
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseInput {
    /// Ids or globs; none: all yours.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
}

pub struct Release;

impl Typed for Release {
    type Input = ReleaseInput;
    type Output = Released;
    const OP: Operation = typed(
        "release",
        Needs::Power(MEMORY),
        route(POST, "/reservations/release"),
        "Release your reservations.",
        &The::<Self>::ONE,
    )
    .offered("release", &[Role::Executor, Role::Planner]);

    async fn run(app: &App, who: Who<'_>, input: ReleaseInput) -> Result<Released> {
        let me = participant(who.actor)?;
        let released = app.release(&me, &input.names).await?;
        Ok(Released {
            items: ReservationRow::rows(&released, app.now()),
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForceInput {
    /// The reservation's id.
    pub id: String,
    /// Why: sent to its holder.
    pub reason: String,
}

/// An owner's release of another participant's reservation, once its holder is quiet.
pub struct ReleaseForce;

impl Typed for ReleaseForce {
    type Input = ForceInput;
    type Output = Released;
    const OP: Operation = typed(
        "release force",
        Needs::Power(MEMORY),
        route(POST, "/reservations/{id}/force"),
        "Release a reservation of a holder whose runs and sessions have gone quiet (owners).",
        &The::<Self>::ONE,
    );

    async fn run(app: &App, who: Who<'_>, input: ForceInput) -> Result<Released> {
        let me = participant(who.actor)?;
        let released = app.force_release(&me, &input.id, &input.reason).await?;
        Ok(Released {
            items: ReservationRow::rows(&[released], app.now()),
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReservationsInput {
    /// Released and expired ones too.
    #[serde(default)]
    pub all: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// Default 200, at most 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 1000))]
    pub limit: Option<u32>,
}

/// The most a list answers.
pub const MAX_RESERVATIONS_PAGE: u32 = 1000;

pub struct ReservationList;

impl Typed for ReservationList {
    type Input = ReservationsInput;
    type Output = Reservations;
    const OP: Operation = typed(
        "reservations",
        Needs::Read,
        route(GET, "/reservations"),
        "Who holds which paths, until when.",
        &The::<Self>::ONE,
    )
    .offered("reservations", &[Role::Owner])
    .idempotent()
    .on_board();

    async fn run(app: &App, _: Who<'_>, input: ReservationsInput) -> Result<Reservations> {
        let limit = input
            .limit
            .unwrap_or(crate::reservations::RESERVATIONS_PAGE);
        if limit == 0 || limit > MAX_RESERVATIONS_PAGE {
            return Err(refused(
                Self::OP.name,
                format!("`limit` {limit} is out of range: use 1 to {MAX_RESERVATIONS_PAGE}"),
            ));
        }
        let mut found = app
            .reservations(input.all, input.holder.as_deref(), Some(limit + 1))
            .await?;
        let more = found.len() > limit as usize;
        found.truncate(limit as usize);
        Ok(Reservations {
            items: ReservationRow::rows(&found, app.now()),
            more,
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GuardInput {
    /// Files relative to the checkout's root.
    pub paths: Vec<String>,
}

/// The git guard's question: which of a commit's paths others hold exclusively.
pub struct GuardCheck;

impl Typed for GuardCheck {
    type Input = GuardInput;
    type Output = GuardChecked;
    const OP: Operation = typed(
        "guard check",
        Needs::Read,
        route(POST, "/reservations/check"),
        "Which of these paths others hold exclusively: what the git guard refuses a commit for.",
        &The::<Self>::ONE,
    )
    .idempotent();

    async fn run(app: &App, who: Who<'_>, input: GuardInput) -> Result<GuardChecked> {
        let me = baton_core::Passname::new(who.actor).ok();
        let held = app
            .held_by_others(me.as_ref().map(|m| m.as_str()), &input.paths)
            .await?;
        let now = app.now();
        Ok(GuardChecked {
            held: held
                .iter()
                .map(|h| HeldPath {
                    path: h.path.clone(),
                    reservation: ReservationRow::new(&h.reservation, now),
                })
                .collect(),
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BypassInput {
    pub commit: String,
    /// The commit's files relative to the checkout's root.
    pub paths: Vec<String>,
}

/// The git guard's record of a commit that went in over others' reservations.
pub struct GuardRecord;

impl Typed for GuardRecord {
    type Input = BypassInput;
    type Output = GuardRecorded;
    const OP: Operation = typed(
        "guard record",
        Needs::Power(MEMORY),
        route(POST, "/reservations/bypassed"),
        "Record a commit that touched paths others hold exclusively, past the git guard.",
        &The::<Self>::ONE,
    );

    async fn run(app: &App, who: Who<'_>, input: BypassInput) -> Result<GuardRecorded> {
        let me = baton_core::Passname::new(who.actor).ok();
        let held = app
            .held_by_others(me.as_ref().map(|m| m.as_str()), &input.paths)
            .await?;
        let commit = input.commit.trim().to_owned();
        if commit.is_empty() || commit.len() > 64 || !commit.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Err(refused(Self::OP.name, "`commit` is a commit's hex id"));
        }
        let generation = if held.is_empty() {
            None
        } else {
            Some(app.record_bypass(who.actor, &commit, &held).await?)
        };
        Ok(GuardRecorded { commit, generation })
    }
}

/// This group's operations (reservations, and the git guard that holds commits to them), in the order the edges list them: its
/// part of [`super::OPERATIONS`].
pub(super) const OPERATIONS: &[Operation] = &[
    Reserve::OP,
    Release::OP,
    ReleaseForce::OP,
    ReservationList::OP,
    GuardCheck::OP,
    GuardRecord::OP,
];
