//! Reservations: reserving paths of the checkout (or renewing them), releasing them,
//! force-releasing a quiet holder's, listing who holds what, and the git guard's two
//! questions — what of a commit's paths others hold, and recording a commit that went in
//! past the guard. The rules are `baton_core::reservation`'s; the settings (TTLs, the
//! quiet a force waits out) are the project's; the symbolic links are the host's.

use std::collections::BTreeSet;

use baton_core::order::OrderStatus;
use baton_core::reservation::{self, Ask, PathGlob, Problem, Release, Reservation};
use baton_core::time::rfc3339;
use baton_core::{Field, Millis, Passname, Record, Refusal};
use baton_store::{Force, ReservationQuery};

use crate::doc::{ReservationRow, Reservations};
use crate::host::PathProblem;
use crate::settings::Reservations as Limits;
use crate::{App, Result};

/// The most reservations a list answers unless asked for fewer.
pub const RESERVATIONS_PAGE: u32 = 200;

/// The most reservations the status lists.
pub const STATUS_RESERVATIONS: usize = 50;

/// A staged path and the live reservation of another that holds it exclusively.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    pub path: String,
    pub reservation: Reservation,
}

/// How many orders offered to a participant the resume packet looks at for paths
/// another holds.
const OFFERS_EXAMINED: usize = 20;

/// The resume packet's two reservation lists for `me`: the paths it holds, and the paths
/// of orders offered to it that another holds (what its acceptance would be refused for).
pub(crate) async fn packet_lines(
    store: &baton_store::Store,
    me: &Passname,
    now: Millis,
) -> Result<(Vec<String>, Vec<String>)> {
    let until = |r: &Reservation| match (&r.order, r.expires_at) {
        (Some(order), _) => format!("until order {order} ends"),
        (None, Some(at)) => format!("until {}", rfc3339(at)),
        (None, None) => String::new(),
    };
    let mine = store
        .reservations(&ReservationQuery {
            holder: Some(me.to_string()),
            live_at: Some(now),
            limit: Some(RESERVATIONS_PAGE),
            ..ReservationQuery::default()
        })
        .await?;
    let hold = mine
        .iter()
        .map(|r| {
            let mode = if r.exclusive { "exclusive" } else { "shared" };
            let why = match (&r.order, r.reason.is_empty()) {
                (Some(order), _) => format!(", for order {order}"),
                (None, false) => format!(": {}", r.reason),
                (None, true) => String::new(),
            };
            format!("{} ({mode}, {}) {}{why}", r.path, r.id, until(r))
        })
        .collect();
    let offered = store
        .orders(&baton_store::OrderQuery {
            party: Some(me.to_string()),
            ..baton_store::OrderQuery::default()
        })
        .await?;
    let mut blocked = Vec::new();
    for order in offered
        .iter()
        .filter(|o| o.to == me.as_str() && o.status_at(now) == OrderStatus::Offered)
        .take(OFFERS_EXAMINED)
    {
        let Some((_, payload)) = store.message(&order.message).await? else {
            continue;
        };
        let globs =
            reservation::scope_globs(&serde_json::Value::Object(payload)).unwrap_or_default();
        if globs.is_empty() {
            continue;
        }
        let near = store
            .reservations(&ReservationQuery::near_globs(&globs, now))
            .await?;
        for glob in &globs {
            for r in near.iter().filter(|r| r.blocks(me, glob, true, now)) {
                blocked.push(format!(
                    "order {} needs {glob}: {} holds {} ({}, {})",
                    order.id,
                    r.holder,
                    r.path,
                    r.id,
                    until(r)
                ));
            }
        }
    }
    Ok((hold, blocked))
}

/// Each reservation list's share of the packet: a worker holds its orders' scopes, which
/// the orders themselves already show, so the lists a successor must not miss (what it
/// owes and waits on, what was decided) keep the room; the rest are `baton reservations`.
const RESERVATION_SHARE: usize = 3;

/// Adds the packet's two reservation sections — the paths its reader holds, and the offers
/// others' reservations block — after its sessions and runs (each hidden when empty).
pub(crate) fn packet_sections(
    sections: &mut Vec<baton_core::packet::Section>,
    (hold, blocked): &(Vec<String>, Vec<String>),
) {
    use baton_core::packet::Section;
    let at = sections
        .iter()
        .position(|s| s.title == "My sessions and runs not ended")
        .map_or(sections.len(), |i| i + 1);
    sections.splice(
        at..at,
        [
            Section {
                want: RESERVATION_SHARE,
                ..Section::of("Paths I hold", hold.clone(), "baton reservations", None)
            },
            Section {
                want: RESERVATION_SHARE,
                ..Section::of(
                    "Blocked by others' reservations",
                    blocked.clone(),
                    "baton reservations",
                    None,
                )
            },
        ],
    );
}

impl App {
    /// Reserves `paths` for `me` (renewing those it holds), exclusively unless `shared`,
    /// for `ttl_seconds` (the project's default when absent).
    pub async fn reserve(
        &self,
        me: &Passname,
        paths: &[String],
        shared: bool,
        ttl_seconds: Option<i64>,
        reason: Option<&str>,
    ) -> Result<Vec<Reservation>> {
        let limits = &self.settings.reservations;
        let globs = reservation::globs(paths)?;
        for glob in &globs {
            self.inside(glob)?;
        }
        let ask = Ask {
            paths: globs,
            exclusive: !shared,
            reason: reservation::reason(reason)?,
            ttl_ms: reservation::ttl(
                ttl_seconds,
                Limits::seconds(limits.default_ttl),
                Limits::seconds(limits.max_ttl),
            )?,
        };
        self.store().reserve(me, &ask).await
    }

    /// Refuses a glob whose fixed part goes through a symbolic link out of the checkout,
    /// where the checkout is (a server has none to look at).
    fn inside(&self, glob: &PathGlob) -> Result<()> {
        let prefix = glob.prefix();
        let mut at = String::new();
        for component in prefix.split('/').filter(|c| !c.is_empty()) {
            if !at.is_empty() {
                at.push('/');
            }
            at.push_str(component);
            match self.host.files.resolve(&self.host.root, &at) {
                Ok(_) => {}
                Err(PathProblem::Missing) => break,
                Err(PathProblem::Outside) => {
                    return Err(Refusal::ReservationInput {
                        field: Field::Paths,
                        value: glob.to_string(),
                        problem: Problem::Symlink,
                    }
                    .into());
                }
            }
        }
        Ok(())
    }

    /// Releases `me`'s reservations that `names` name — ids (or their unique prefixes)
    /// and globs — or, with none named, every one it holds by hand.
    pub async fn release(&self, me: &Passname, names: &[String]) -> Result<Vec<Reservation>> {
        let mut what = Release::default();
        for name in names {
            if name.trim().starts_with(reservation::ID_PREFIX) {
                what.ids
                    .push(self.resolve(Record::Reservation, name.trim()).await?);
            } else {
                let glob = PathGlob::new(name)?;
                if !what.globs.contains(&glob) {
                    what.globs.push(glob);
                }
            }
        }
        self.store().release(me, &what).await
    }

    /// Force-releases reservation `id` (or its unique prefix) as `me`, an owner, once its
    /// holder has been quiet for `reservations.force_after`; the holder is told `reason`.
    pub async fn force_release(
        &self,
        me: &Passname,
        id: &str,
        reason: &str,
    ) -> Result<Reservation> {
        let id = self.resolve(Record::Reservation, id.trim()).await?;
        let force = Force {
            id,
            reason: reason.to_owned(),
            quiet_ms: i64::try_from(self.settings.reservations.force_after.as_millis())
                .unwrap_or(i64::MAX),
        };
        self.store().force_release(me, &force).await
    }

    /// The live reservations (with `all`, every one, released and expired too), oldest
    /// first, at most `limit`; `holder` narrows them to one holder's.
    pub async fn reservations(
        &self,
        all: bool,
        holder: Option<&str>,
        limit: Option<u32>,
    ) -> Result<Vec<Reservation>> {
        self.store()
            .reservations(&ReservationQuery {
                holder: holder.map(str::to_owned),
                live_at: (!all).then(|| self.now()),
                limit: Some(limit.unwrap_or(RESERVATIONS_PAGE)),
                ..ReservationQuery::default()
            })
            .await
    }

    /// The live reservations at `now`, the first [`STATUS_RESERVATIONS`] of them: what
    /// the status (and the board) shows.
    pub(crate) async fn held_now(&self, now: Millis) -> Result<Reservations> {
        let mut found = self
            .store()
            .reservations(&ReservationQuery {
                live_at: Some(now),
                limit: Some(STATUS_RESERVATIONS as u32 + 1),
                ..ReservationQuery::default()
            })
            .await?;
        let more = found.len() > STATUS_RESERVATIONS;
        found.truncate(STATUS_RESERVATIONS);
        Ok(Reservations {
            items: ReservationRow::rows(&found, now),
            more,
        })
    }

    /// What of `paths` (files relative to the checkout) others hold exclusively now:
    /// what the git guard refuses a commit for. `me` is who commits (`None`: no one
    /// registered, so every holder is another).
    pub async fn held_by_others(&self, me: Option<&str>, paths: &[String]) -> Result<Vec<Held>> {
        let paths: BTreeSet<String> = paths
            .iter()
            .map(|p| p.trim_matches('/').to_owned())
            .filter(|p| !p.is_empty())
            .collect();
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now();
        let candidates = self
            .store()
            .reservations(&ReservationQuery {
                live_at: Some(now),
                near: Some(paths.iter().cloned().collect()),
                ..ReservationQuery::default()
            })
            .await?;
        let others: Vec<(Reservation, reservation::Matcher)> = candidates
            .into_iter()
            .filter(|r| r.exclusive && Some(r.holder.as_str()) != me)
            .map(|r| {
                let matcher = r.path.matcher();
                (r, matcher)
            })
            .collect();
        let mut held = Vec::new();
        for path in &paths {
            if let Some((r, _)) = others.iter().find(|(_, m)| m.covers(path)) {
                held.push(Held {
                    path: path.clone(),
                    reservation: r.clone(),
                });
            }
        }
        Ok(held)
    }

    /// Records that `commit` touched `held` paths past the git guard, as `actor`.
    pub async fn record_bypass(&self, actor: &str, commit: &str, held: &[Held]) -> Result<i64> {
        let paths: Vec<String> = held.iter().map(|h| h.path.clone()).collect();
        let mut ids: Vec<String> = held.iter().map(|h| h.reservation.id.clone()).collect();
        ids.dedup();
        let event = self
            .store()
            .record_bypass(actor, commit, &paths, &ids)
            .await?;
        Ok(event.seq)
    }
}

#[cfg(test)]
mod tests {
    use baton_core::packet::{self, DEFAULT_MAX_BYTES, Section};

    use super::packet_sections;

    fn items(what: &str, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("{what}-{i:03}: {}", "x".repeat(50)))
            .collect()
    }

    /// A worker holding many paths on a long history: its reservation lists show three
    /// lines each and count the rest, and what it owes, waits on and must not contradict
    /// keep their full shares of the budget, each line whole.
    #[test]
    fn many_reservations_leave_the_must_know_lists_their_shares() {
        let mut sections = vec![
            Section::of("What I owe", items("owed", 60), "baton inbox", None),
            Section::of("Recent decisions", items("d", 60), "baton state show", None),
            Section::of(
                "What I am waiting for",
                items("w", 60),
                "baton outbox",
                None,
            ),
            Section::of(
                "My sessions and runs not ended",
                Vec::new(),
                "baton runs",
                None,
            ),
        ];
        let lists = (items("src/held", 40), items("order blocked", 40));
        packet_sections(&mut sections, &lists);
        let p = packet::render("# Resume: impl-1", &sections, DEFAULT_MAX_BYTES);
        assert!(p.text.len() <= DEFAULT_MAX_BYTES, "{}", p.text.len());
        let shown: Vec<(&str, usize)> = p
            .sections
            .iter()
            .map(|s| (s.title, s.shown))
            .filter(|(_, n)| *n > 0)
            .collect();
        assert_eq!(
            shown[1..],
            [
                ("Recent decisions", 20),
                ("What I am waiting for", 20),
                ("Paths I hold", 3),
                ("Blocked by others' reservations", 3),
            ],
            "{}",
            p.text
        );
        for (what, n) in [("owed", 20), ("d", 20), ("w", 20)] {
            for line in &items(what, n) {
                assert!(p.text.contains(line.as_str()), "{line} cut: {}", p.text);
            }
        }
        assert!(
            p.text.contains("+37 more: `baton reservations`"),
            "{}",
            p.text
        );
    }
}
