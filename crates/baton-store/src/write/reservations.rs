//! The reservation writes: reserve (or renew), release, force-release, the bypass a git
//! hook saw, and what an order's steps do to its worker's reservations. Each gathers the
//! live reservations that could overlap inside its transaction, asks
//! `baton_core::reservation` what to append, appends it and commits: two writers racing
//! for one path queue on the write lock, and the second finds the first's reservation.

use baton_core::authority;
use baton_core::order::{Order, OrderStatus};
use baton_core::reservation::{self, Ask, PathGlob, Release, Reservation, ReservationChange};
use baton_core::{
    Change, Draft, Event, MessageType, Millis, Passname, Payload, Record, Refusal, Topic,
};

use super::{authorize, now, registered, send_in};
use crate::{NewEvent, ReservationQuery, Result, Store, Tx};

/// The topic of the message that tells a holder its reservation was force-released.
pub const FORCED_TOPIC: &str = "reservations";

/// A new reservation's id.
fn new_id() -> String {
    format!(
        "{}{}",
        reservation::ID_PREFIX,
        crate::new_id().to_string().to_lowercase()
    )
}

/// Appends `changes` as `actor` at `at`, then reads back the reservations they touched.
async fn append_all(
    tx: &mut dyn Tx,
    actor: &str,
    changes: Vec<ReservationChange>,
    at: Millis,
) -> Result<Vec<Reservation>> {
    let ids: Vec<String> = changes.iter().map(|c| c.subject().to_owned()).collect();
    for change in changes {
        tx.append(NewEvent::new(actor, Change::Reservation(change), at))
            .await?;
    }
    let mut found = tx
        .reservations(&ReservationQuery {
            ids: Some(ids.clone()),
            ..ReservationQuery::default()
        })
        .await?;
    found.sort_by_key(|r| ids.iter().position(|id| *id == r.id));
    Ok(found)
}

/// A force-release: which reservation, why, and how long its holder must have been quiet.
#[derive(Debug, Clone, PartialEq)]
pub struct Force {
    pub id: String,
    pub reason: String,
    pub quiet_ms: Millis,
}

impl Store {
    /// Reserves `ask`'s globs for `actor` (renewing those it holds), all or none: refused,
    /// naming every conflict, when another's live reservation stands in the way.
    pub async fn reserve(&self, actor: &Passname, ask: &Ask) -> Result<Vec<Reservation>> {
        self.recorded(actor.as_str(), async {
            let mut tx = self.begin().await?;
            authorize(tx.as_mut(), actor.as_str(), authority::MEMORY, None).await?;
            let at = now();
            let held = tx
                .reservations(&ReservationQuery::near_globs(&ask.paths, at))
                .await?;
            let changes = reservation::plan_reserve(actor, ask, &held, at, new_id)?;
            let made = append_all(tx.as_mut(), actor.as_str(), changes, at).await?;
            tx.commit().await?;
            Ok(made)
        })
        .await
    }

    /// Releases `actor`'s reservations `what` names; releasing nothing is refused.
    pub async fn release(&self, actor: &Passname, what: &Release) -> Result<Vec<Reservation>> {
        self.recorded(actor.as_str(), async {
            let mut tx = self.begin().await?;
            authorize(tx.as_mut(), actor.as_str(), authority::MEMORY, None).await?;
            let at = now();
            let mut held = tx
                .reservations(&ReservationQuery {
                    holder: Some(actor.to_string()),
                    live_at: Some(at),
                    ..ReservationQuery::default()
                })
                .await?;
            if !what.ids.is_empty() {
                held.extend(
                    tx.reservations(&ReservationQuery {
                        ids: Some(what.ids.clone()),
                        ..ReservationQuery::default()
                    })
                    .await?
                    .into_iter()
                    .filter(|r| r.holder != *actor),
                );
            }
            let changes = reservation::plan_release(actor, what, &held, at)?;
            let released = append_all(tx.as_mut(), actor.as_str(), changes, at).await?;
            tx.commit().await?;
            Ok(released)
        })
        .await
    }

    /// Force-releases a quiet holder's reservation and, in the same transaction, tells the
    /// holder why in an `info` from the actor.
    pub async fn force_release(&self, actor: &Passname, force: &Force) -> Result<Reservation> {
        self.recorded(actor.as_str(), async {
            let mut tx = self.begin().await?;
            authorize(tx.as_mut(), actor.as_str(), authority::MEMORY, None).await?;
            let me = registered(tx.as_mut(), actor.as_str()).await?;
            let at = now();
            let target = tx
                .reservations(&ReservationQuery {
                    ids: Some(vec![force.id.clone()]),
                    ..ReservationQuery::default()
                })
                .await?
                .pop()
                .ok_or_else(|| Refusal::not_found(Record::Reservation, &force.id))?;
            let active_at = tx.activity(target.holder.as_str()).await?;
            let change = reservation::plan_force(
                &me,
                &target,
                active_at,
                force.quiet_ms,
                &force.reason,
                at,
            )?;
            let mut released = append_all(tx.as_mut(), actor.as_str(), vec![change], at).await?;
            if target.holder != *actor {
                let notice =
                    reservation::forced_notice(&target, actor.as_str(), force.reason.trim());
                let draft = Draft {
                    to: vec![target.holder.clone()],
                    kind: MessageType::Info,
                    topic: Topic::new(FORCED_TOPIC).expect("a topic"),
                    reply_to: None,
                    payload: Payload::from_value(
                        serde_json::json!({ "body": notice }),
                        baton_core::message::DEFAULT_PAYLOAD_CAP,
                    )
                    .map_err(|error| Refusal::Payload {
                        field: baton_core::Field::Body,
                        error,
                    })?,
                    idempotency_key: None,
                };
                // The force's authority covers its notice.
                send_in(tx.as_mut(), actor, draft, 0, at, false, None).await?;
            }
            tx.commit().await?;
            Ok(released.pop().expect("the released reservation"))
        })
        .await
    }

    /// Records that `commit` touched `paths` held by others' `reservations` (ids) past the
    /// git guard.
    pub async fn record_bypass(
        &self,
        actor: &str,
        commit: &str,
        paths: &[String],
        reservations: &[String],
    ) -> Result<Event> {
        self.recorded(actor, async {
            let mut tx = self.begin().await?;
            authorize(tx.as_mut(), actor, authority::MEMORY, None).await?;
            let change = ReservationChange::Bypassed {
                commit: commit.to_owned(),
                paths: paths.to_vec(),
                reservations: reservations.to_vec(),
            };
            let event = tx
                .append(NewEvent::new(actor, Change::Reservation(change), now()))
                .await?;
            tx.commit().await?;
            Ok(event)
        })
        .await
    }
}

/// What an order's step does to reservations, inside the step's transaction: accepted,
/// its worker holds the scope's allowed globs (refused, and the step with it, when
/// another's reservation stands in the way); ended, what it held is released.
pub(super) async fn follow_order(
    tx: &mut dyn Tx,
    actor: &str,
    before: &Order,
    after: &Order,
    at: Millis,
) -> Result<()> {
    let accepted = before.status == OrderStatus::Offered && after.status == OrderStatus::Accepted;
    let ended = !before.status.is_terminal() && after.status.is_terminal();
    let changes = if accepted {
        let globs = scope_of(tx, after).await?;
        if globs.is_empty() {
            return Ok(());
        }
        let worker = Passname::new(&after.to).map_err(|_| Refusal::UnknownParticipant {
            name: after.to.clone(),
        })?;
        let held = tx
            .reservations(&ReservationQuery::near_globs(&globs, at))
            .await?;
        reservation::plan_for_order(
            &worker,
            &after.id,
            &globs,
            after.deadline_at,
            &held,
            at,
            new_id,
        )?
    } else if ended {
        let held = tx
            .reservations(&ReservationQuery {
                order: Some(after.id.clone()),
                live_at: Some(at),
                ..ReservationQuery::default()
            })
            .await?;
        reservation::plan_order_end(&after.id, &held, at)
    } else {
        return Ok(());
    };
    for change in changes {
        tx.append(NewEvent::new(actor, Change::Reservation(change), at))
            .await?;
    }
    Ok(())
}

/// The globs an order's scope allows, from the document its request carried.
async fn scope_of(tx: &mut dyn Tx, order: &Order) -> Result<Vec<PathGlob>> {
    let Some(event) = tx.event(&order.message).await? else {
        return Ok(Vec::new());
    };
    let Change::MessageSent(sent) = &event.change else {
        return Ok(Vec::new());
    };
    let document = serde_json::Value::Object(sent.payload.clone());
    // Checked when the order was offered; an order offered before that check holds what
    // of its scope is a glob.
    Ok(reservation::scope_globs(&document).unwrap_or_else(|_| {
        document
            .pointer("/x-baton/scope/allowed")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| PathGlob::new(v.as_str()?).ok())
            .collect()
    }))
}
