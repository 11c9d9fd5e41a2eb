//! The engine: alternating offers with a mediator, over the spec and positions compiled to
//! indexes and searched branch and bound. It reads no clock, draws no random number and
//! breaks every tie by a fixed order.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::{
    Answer, Choices, Ended, MAX_ISSUES, MAX_OPTIONS, MEDIATOR, Offer, Party, Position, Resolution,
    Settlement, Spec, Veto,
};

/// An outcome as option indexes, one per issue in the spec's order (the rest 0), so that
/// comparing two is the lexicographic order of outcomes.
pub(super) type Pick = [u8; MAX_ISSUES];

/// A partial outcome as `(issue, option)` indexes, by issue.
type Clause = Vec<(usize, u8)>;

/// One party, compiled: what each option adds to its utility.
pub(super) struct Bidder<'a> {
    name: &'a str,
    pub(super) position: &'a Position,
    /// `gain[issue][option] = w · u`.
    gain: Vec<Vec<f64>>,
    /// The largest gain of each issue.
    top: Vec<f64>,
    /// `rest[d]`: the largest gains of the issues the search chooses from its `d`th on,
    /// summed (to order options and for the average-share cut, never for an exact cut).
    rest: Vec<f64>,
    floor: f64,
    /// What one unit of utility adds to its share: one over how much it could gain
    /// above its floor at best (or 1 when its floor is out of reach).
    per_unit: f64,
    /// Its vetoes, each listed under the last issue (in the search's order) it names.
    vetoes_at: Vec<Vec<Clause>>,
}

impl Bidder<'_> {
    /// The share of what it could gain above its floor. Monotone in `u` (rounding is),
    /// which is what lets the search bound it.
    fn share(&self, u: f64) -> f64 {
        (u - self.floor) * self.per_unit
    }
}

/// What a search looks for.
#[derive(Clone, Copy)]
pub(super) enum Goal<'g> {
    /// A party's offer: its best feasible outcome it does not veto and nobody offered.
    Offer {
        proposer: usize,
        offered: &'g [Pick],
    },
    /// The mediator's: the fairest outcome every party accepts.
    Mediate,
}

/// The spec and positions compiled to indexes for the search.
pub(super) struct Model<'a> {
    pub(super) spec: &'a Spec,
    pub(super) sizes: Vec<usize>,
    /// The order the search chooses the issues in: the ones whose options matter most
    /// (pooled over the parties) first, so the deep levels, where most nodes are, decide
    /// little. Ties in the spec's order.
    seq: Vec<usize>,
    /// `at[issue]`: its place in `seq`.
    at: Vec<usize>,
    constraints_at: Vec<Vec<Clause>>,
    /// In passname order: the order of turns and of answers.
    pub(super) bidders: Vec<Bidder<'a>>,
    /// `pooled_rest[d]`: the sum over the issues chosen `d`th on of each one's largest
    /// pooled gain.
    pooled_rest: Vec<f64>,
    /// `offer_order[party][issue]`: the order a party's offer tries each issue's options
    /// in, largest gain to it first, so that its best is found at once.
    offer_order: Vec<Vec<Vec<u8>>>,
}

/// Option indexes of each issue, largest `value` first, ties in the spec's order.
fn by_value(values: &[Vec<f64>]) -> Vec<Vec<u8>> {
    values
        .iter()
        .map(|v| {
            let mut order: Vec<u8> = (0..v.len() as u8).collect();
            order.sort_by(|a, b| {
                v[*b as usize]
                    .partial_cmp(&v[*a as usize])
                    .unwrap_or(Ordering::Equal)
                    .then(a.cmp(b))
            });
            order
        })
        .collect()
}

fn compile(spec: &Spec, choices: &Choices) -> Clause {
    choices
        .0
        .iter()
        .filter_map(|(issue, option)| {
            let (i, issue) = spec.issue(issue)?;
            let j = issue.options.iter().position(|o| o == option)?;
            Some((i, j as u8))
        })
        .collect()
}

/// Clauses listed under the last issue each names in the search's order (`at[issue]` is
/// its place): checked once that issue is chosen.
fn by_last_issue(spec: &Spec, at: &[usize], clauses: &[Choices]) -> Vec<Vec<Clause>> {
    let mut listed = vec![Vec::new(); spec.issues.len()];
    for c in clauses {
        let clause = compile(spec, c);
        if let Some(last) = clause.iter().map(|(i, _)| at[*i]).max() {
            listed[last].push(clause);
        }
    }
    listed
}

fn matches(clause: &Clause, pick: &Pick) -> bool {
    clause.iter().all(|&(i, j)| pick[i] == j)
}

/// Lexicographic, larger is better. No value is NaN (inputs are finite and bounded).
pub(super) fn compare(a: &[f64], b: &[f64]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match x.partial_cmp(y).unwrap_or(Ordering::Equal) {
            Ordering::Equal => continue,
            other => return other,
        }
    }
    a.len().cmp(&b.len())
}

/// The search's working memory, reused from node to node.
struct Search {
    /// The outcome being built: the issues not chosen yet are at option 0, so it is also
    /// the first outcome of the subtree in the spec's order.
    pick: Pick,
    /// `sums[d][q]`: party q's utility from the first d issues chosen (in the search's
    /// order: to order options, never for an exact cut).
    sums: Vec<Vec<f64>>,
    /// Each party's utility bound in the subtree, exact: see [`Model::bound`].
    bounds: Vec<f64>,
    rank: Vec<f64>,
    scratch: Vec<f64>,
    /// `order[d]`: the order the options of issue d are tried in, and their scores.
    order: Vec<Vec<(f64, u8)>>,
    best: Option<(Vec<f64>, Pick)>,
}

impl<'a> Model<'a> {
    pub(super) fn new(spec: &'a Spec, positions: &'a BTreeMap<String, Position>) -> Self {
        let mut parties: Vec<&Party> = spec.parties.iter().collect();
        parties.sort_by(|a, b| a.name.cmp(&b.name));
        let mut bidders = parties
            .into_iter()
            .map(|party| {
                let position = positions
                    .get(party.name.as_str())
                    .expect("the engine runs once every party has a position");
                let gain: Vec<Vec<f64>> = spec
                    .issues
                    .iter()
                    .map(|issue| {
                        issue
                            .options
                            .iter()
                            .map(|o| position.gain(&issue.name, o))
                            .collect()
                    })
                    .collect();
                let top: Vec<f64> = gain
                    .iter()
                    .map(|g| g.iter().copied().fold(0.0, f64::max))
                    .collect();
                let mut best = 0.0;
                for t in &top {
                    best += t;
                }
                Bidder {
                    name: party.name.as_str(),
                    position,
                    gain,
                    top,
                    rest: Vec::new(),
                    floor: position.floor,
                    per_unit: if best > position.floor {
                        1.0 / (best - position.floor)
                    } else {
                        1.0
                    },
                    vetoes_at: Vec::new(),
                }
            })
            .collect::<Vec<Bidder>>();
        let k = spec.issues.len();
        let spread = |i: usize| -> f64 {
            bidders
                .iter()
                .map(|b| {
                    let low = b.gain[i].iter().copied().fold(f64::INFINITY, f64::min);
                    (b.top[i] - low) * b.per_unit
                })
                .sum()
        };
        let spreads: Vec<f64> = (0..k).map(spread).collect();
        let mut seq: Vec<usize> = (0..k).collect();
        seq.sort_by(|a, b| {
            spreads[*b]
                .partial_cmp(&spreads[*a])
                .unwrap_or(Ordering::Equal)
                .then(a.cmp(b))
        });
        let mut at = vec![0; k];
        for (place, &issue) in seq.iter().enumerate() {
            at[issue] = place;
        }
        for b in &mut bidders {
            b.rest = vec![0.0; k + 1];
            for d in (0..k).rev() {
                b.rest[d] = b.rest[d + 1] + b.top[seq[d]];
            }
            b.vetoes_at = by_last_issue(spec, &at, &b.position.veto);
        }
        // What each option adds to the sum of every party's share.
        let pooled: Vec<Vec<f64>> = spec
            .issues
            .iter()
            .enumerate()
            .map(|(i, issue)| {
                (0..issue.options.len())
                    .map(|j| bidders.iter().map(|b| b.gain[i][j] * b.per_unit).sum())
                    .collect()
            })
            .collect();
        let mut pooled_rest = vec![0.0; k + 1];
        for d in (0..k).rev() {
            let top = pooled[seq[d]].iter().copied().fold(0.0, f64::max);
            pooled_rest[d] = pooled_rest[d + 1] + top;
        }
        Model {
            spec,
            sizes: spec.issues.iter().map(|i| i.options.len()).collect(),
            constraints_at: by_last_issue(spec, &at, &spec.constraints),
            seq,
            at,
            offer_order: bidders.iter().map(|b| by_value(&b.gain)).collect(),
            pooled_rest,
            bidders,
        }
    }

    /// A bound on the smallest share in a subtree at `depth` (`depth` issues chosen, the
    /// parties' sums so far in `sums`): the smallest share is at most the
    /// average share, and the average of the rest is largest when each remaining issue
    /// takes its best pooled option. Much tighter than each party's own best when the
    /// parties pull apart. Its rounding differs from a leaf's, so it comes with a margin
    /// far above any rounding error, and cuts only below the best found minus it.
    fn average_share_bound(&self, depth: usize, sums: &[f64]) -> (f64, f64) {
        let mut total = self.pooled_rest[depth];
        let mut magnitude = self.pooled_rest[depth];
        for (b, sum) in self.bidders.iter().zip(sums) {
            total += (sum - b.floor) * b.per_unit;
            magnitude += (sum.abs() + b.floor.abs()) * b.per_unit;
        }
        let n = self.bidders.len() as f64;
        (total / n, 1e-9 * (1.0 + magnitude / n))
    }

    fn issues(&self) -> usize {
        self.sizes.len()
    }

    pub(super) fn choices(&self, pick: &Pick) -> Choices {
        Choices(
            self.spec
                .issues
                .iter()
                .enumerate()
                .map(|(i, issue)| (issue.name.clone(), issue.options[pick[i] as usize].clone()))
                .collect(),
        )
    }

    /// The rank of an outcome whose utilities are `u` (or of a subtree whose bounds are
    /// `u`), larger is better: for an offer, the proposer's utility first; then every
    /// party's share, smallest first (leximin: fairness to the worst-off); then the raw
    /// utilities, smallest first. Each part grows with every party's utility, so a bound on
    /// each utility bounds the rank, and an outcome that is better for one party and worse
    /// for none always ranks higher (efficiency).
    pub(super) fn rank(
        &self,
        goal: Goal<'_>,
        u: &[f64],
        out: &mut Vec<f64>,
        scratch: &mut Vec<f64>,
    ) {
        out.clear();
        if let Goal::Offer { proposer, .. } = goal {
            out.push(u[proposer]);
        }
        scratch.clear();
        scratch.extend(self.bidders.iter().zip(u).map(|(b, u)| b.share(*u)));
        scratch.sort_by(|a, b| a.partial_cmp(b).unwrap_or(Ordering::Equal));
        out.extend_from_slice(scratch);
        scratch.clear();
        scratch.extend_from_slice(u);
        scratch.sort_by(|a, b| a.partial_cmp(b).unwrap_or(Ordering::Equal));
        out.extend_from_slice(scratch);
    }

    /// The best outcome for `goal`, ties going to the first in the spec's order.
    ///
    /// Depth-first branch and bound, choosing the issues in `seq`'s order and each issue's
    /// options most promising first. A party's utility in a subtree is at most
    /// [`Model::bound`], exactly. A subtree is cut when it breaks a constraint or a veto
    /// that counts, cannot reach a floor that counts, cannot outrank the best outcome found
    /// (or only tie it with outcomes later in the spec's order), or — for the mediator —
    /// its average share is below the best smallest share found.
    pub(super) fn search(&self, goal: Goal<'_>) -> Option<Pick> {
        let n = self.bidders.len();
        let mut s = Search {
            pick: [0; MAX_ISSUES],
            sums: vec![vec![0.0; n]; self.issues() + 1],
            bounds: vec![0.0; n],
            rank: Vec::with_capacity(2 * n + 1),
            scratch: Vec::with_capacity(n),
            order: vec![Vec::with_capacity(MAX_OPTIONS); self.issues()],
            best: None,
        };
        self.descend(0, goal, &mut s);
        s.best.map(|(_, pick)| pick)
    }

    fn descend(&self, depth: usize, goal: Goal<'_>, s: &mut Search) {
        if depth == self.issues() {
            self.leaf(goal, s);
            return;
        }
        // The order to try this issue's options in: it changes how soon a good outcome
        // is found (and so how much is cut), never which one wins.
        let mut order = std::mem::take(&mut s.order[depth]);
        order.clear();
        let issue = self.seq[depth];
        let m = self.sizes[issue];
        match goal {
            Goal::Offer { proposer, .. } => {
                order.extend(self.offer_order[proposer][issue].iter().map(|&o| (0.0, o)));
            }
            // The last issue's options are all leaves: ordering them buys nothing.
            Goal::Mediate if depth + 1 == self.issues() => {
                order.extend((0..m as u8).map(|o| (0.0, o)));
            }
            Goal::Mediate => {
                // The child whose worst-off party could still gain most goes first.
                for j in 0..m {
                    let worst = self
                        .bidders
                        .iter()
                        .enumerate()
                        .map(|(q, b)| {
                            b.share(s.sums[depth][q] + b.gain[issue][j] + b.rest[depth + 1])
                        })
                        .fold(f64::INFINITY, f64::min);
                    order.push((worst, j as u8));
                }
                order.sort_by(|a, b| {
                    b.0.partial_cmp(&a.0)
                        .unwrap_or(Ordering::Equal)
                        .then(a.1.cmp(&b.1))
                });
            }
        }
        for &(_, option) in &order {
            s.pick[issue] = option;
            if self.admits(depth, goal, s) {
                self.descend(depth + 1, goal, s);
            }
        }
        s.pick[issue] = 0;
        s.order[depth] = order;
    }

    /// A party's utility bound in a subtree where the issues chosen `depth`th or earlier
    /// are set in `pick`: each issue's gain, or its largest for an issue not chosen yet,
    /// added in the spec's order as a whole outcome's utility is. Rounding is monotone, so
    /// no outcome of the subtree has a larger utility, to the last bit; with every issue
    /// chosen it is the outcome's utility.
    fn bound(&self, b: &Bidder, depth: usize, pick: &Pick) -> f64 {
        let mut total = 0.0;
        for (i, gain) in b.gain.iter().enumerate() {
            total += if self.at[i] <= depth {
                gain[pick[i] as usize]
            } else {
                b.top[i]
            };
        }
        total
    }

    /// Whether the subtree under the option just picked at `depth` may hold a better
    /// outcome; sets the sums and bounds it is judged by.
    fn admits(&self, depth: usize, goal: Goal<'_>, s: &mut Search) -> bool {
        let issue = self.seq[depth];
        let j = s.pick[issue] as usize;
        if self.constraints_at[depth]
            .iter()
            .any(|c| matches(c, &s.pick))
        {
            return false;
        }
        let vetoed = match goal {
            Goal::Offer { proposer, .. } => self.bidders[proposer].vetoes_at[depth]
                .iter()
                .any(|v| matches(v, &s.pick)),
            Goal::Mediate => self
                .bidders
                .iter()
                .any(|b| b.vetoes_at[depth].iter().any(|v| matches(v, &s.pick))),
        };
        if vetoed {
            return false;
        }
        for (q, b) in self.bidders.iter().enumerate() {
            s.sums[depth + 1][q] = s.sums[depth][q] + b.gain[issue][j];
            s.bounds[q] = self.bound(b, depth, &s.pick);
        }
        if let Goal::Mediate = goal {
            if self
                .bidders
                .iter()
                .zip(&s.bounds)
                .any(|(b, bound)| *bound < b.floor)
            {
                return false;
            }
            if let Some((best, _)) = &s.best {
                // The rank's first part is the smallest share: most cuts are made by it
                // alone, before the whole rank is built.
                let smallest = self
                    .bidders
                    .iter()
                    .zip(&s.bounds)
                    .map(|(b, bound)| b.share(*bound))
                    .fold(f64::INFINITY, f64::min);
                if smallest < best[0] {
                    return false;
                }
                let (average, margin) = self.average_share_bound(depth + 1, &s.sums[depth + 1]);
                if average + margin < best[0] {
                    return false;
                }
            }
        }
        // A leaf's rank is its bound's: the leaf itself compares it.
        let Some((best, best_pick)) = s.best.as_ref().filter(|_| depth + 1 < self.issues()) else {
            return true;
        };
        let mut rank = std::mem::take(&mut s.rank);
        let mut scratch = std::mem::take(&mut s.scratch);
        self.rank(goal, &s.bounds, &mut rank, &mut scratch);
        let promising = match compare(&rank, best) {
            Ordering::Less => false,
            // A tie can only win by coming first: the subtree's first outcome is `pick`.
            Ordering::Equal => s.pick <= *best_pick,
            Ordering::Greater => true,
        };
        s.rank = rank;
        s.scratch = scratch;
        promising
    }

    fn leaf(&self, goal: Goal<'_>, s: &mut Search) {
        if let Goal::Offer { offered, .. } = goal
            && offered.contains(&s.pick)
        {
            return;
        }
        let mut rank = std::mem::take(&mut s.rank);
        let mut scratch = std::mem::take(&mut s.scratch);
        // With every issue chosen, the bounds are the utilities.
        self.rank(goal, &s.bounds, &mut rank, &mut scratch);
        let better = match &s.best {
            None => true,
            Some((best, pick)) => match compare(&rank, best) {
                Ordering::Greater => true,
                Ordering::Equal => s.pick < *pick,
                Ordering::Less => false,
            },
        };
        if better {
            s.best = Some((rank.clone(), s.pick));
        }
        s.rank = rank;
        s.scratch = scratch;
    }

    fn offer(&self, round: usize, proposer: &str, pick: &Pick) -> Offer {
        let outcome = self.choices(pick);
        let answers = self
            .bidders
            .iter()
            .map(|b| (b.name.to_owned(), b.position.answer(self.spec, &outcome)))
            .collect();
        Offer {
            round: round as u32,
            proposer: proposer.to_owned(),
            outcome,
            answers,
        }
    }

    /// The issues the offers did not all agree on (every issue when they never differed:
    /// then nothing at all could be agreed), and the vetoes used, first use first.
    fn walk_away(&self, ended: Ended, trail: &[Offer]) -> Resolution {
        let mut unsettled: Vec<String> = self
            .spec
            .issues
            .iter()
            .filter(|issue| {
                let mut seen = trail.iter().filter_map(|o| o.outcome.option(&issue.name));
                let first = seen.next();
                seen.any(|o| Some(o) != first)
            })
            .map(|issue| issue.name.clone())
            .collect();
        if unsettled.is_empty() {
            unsettled = self.spec.issues.iter().map(|i| i.name.clone()).collect();
        }
        let mut vetoes: Vec<Veto> = Vec::new();
        for offer in trail {
            for b in &self.bidders {
                if offer.answers.get(b.name) != Some(&Answer::Veto) {
                    continue;
                }
                if let Some(clause) = b.position.vetoed(&offer.outcome) {
                    let veto = Veto {
                        party: b.name.to_owned(),
                        vetoed: clause.clone(),
                    };
                    if !vetoes.contains(&veto) {
                        vetoes.push(veto);
                    }
                }
            }
        }
        Resolution::WalkAway {
            ended,
            unsettled,
            vetoes,
        }
    }
}

/// Settles a negotiation whose every party has a position (party → position).
///
/// Each party in passname order offers its best feasible outcome that it does not veto
/// and that nobody offered yet (a party with none left passes); every party answers; if
/// all accept, that is the agreement. Then the mediator proposes the outcome every party
/// accepts that ranks highest (see `Model::rank`); if there is none, they walk away. The
/// trail holds at most `spec.rounds` offers: reaching it first is a walk-away too.
pub fn settle(spec: &Spec, positions: &BTreeMap<String, Position>) -> Settlement {
    let model = Model::new(spec, positions);
    let limit = spec.rounds as usize;
    let mut trail: Vec<Offer> = Vec::new();
    let mut offered: Vec<Pick> = Vec::new();
    for (p, bidder) in model.bidders.iter().enumerate() {
        if trail.len() >= limit {
            break;
        }
        let goal = Goal::Offer {
            proposer: p,
            offered: &offered,
        };
        let Some(pick) = model.search(goal) else {
            continue;
        };
        let offer = model.offer(trail.len() + 1, bidder.name, &pick);
        let agreed = offer.answers.values().all(|a| *a == Answer::Accept);
        let outcome = offer.outcome.clone();
        trail.push(offer);
        offered.push(pick);
        if agreed {
            return Settlement {
                trail,
                resolution: Resolution::Agreement { outcome },
            };
        }
    }
    let resolution = match model.search(Goal::Mediate) {
        Some(pick) if trail.len() < limit => {
            let offer = model.offer(trail.len() + 1, MEDIATOR, &pick);
            let outcome = offer.outcome.clone();
            trail.push(offer);
            Resolution::Agreement { outcome }
        }
        Some(_) => model.walk_away(Ended::RoundLimit, &trail),
        None => model.walk_away(Ended::NoZone, &trail),
    };
    Settlement { trail, resolution }
}
