//! Reservations: paths of the checkout a participant holds, exclusively or shared, for a
//! while — so parallel agents on one repository learn of a collision when they claim a
//! path, not when their commits meet.
//!
//! A reservation is one gitignore-style glob relative to the checkout ([`PathGlob`]), a
//! mode, a reason and a time to live. It is recorded as `reservation.changed` events;
//! whether it is live is derived when read ([`Reservation::live_at`]): a reservation made
//! or renewed at `t` with a TTL of `d` is live for every `now < t + d` and for no `now`
//! after, whatever ran or did not run meanwhile. An order's worker holds its scope's
//! allowed paths from its acceptance until the order ends ([`plan_for_order`]).
//!
//! Two reservations conflict when they have different holders, at least one is exclusive,
//! and their globs [overlap](PathGlob::overlaps): some path could be covered by both. The
//! overlap test errs toward a conflict, never away from one (see `docs/DECISIONS.md`).
//! The planners here say what to append or why not; they read no clock and store nothing.

use std::fmt;

use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};

use crate::names::Passname;
use crate::participant::Participant;
use crate::refusal::{Field, Refusal};
use crate::time::{Millis, rfc3339};

/// The kind of the events this module plans.
pub const KIND: &str = "reservation.changed";
/// Longest glob accepted, in bytes.
pub const MAX_GLOB_BYTES: usize = 512;
/// Most globs one reservation request names.
pub const MAX_GLOBS: usize = 64;
/// Longest reason accepted, in characters.
pub const MAX_REASON_CHARS: usize = 500;
/// The prefix of every reservation id.
pub const ID_PREFIX: &str = "rsv-";

/// Why a glob or a TTL was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Problem {
    Empty,
    /// It begins at `/`: a glob is relative to the checkout.
    Absolute,
    /// A `..` component: it would leave the checkout.
    Parent,
    /// A `!`: a reservation names what it covers, never an exception.
    Negation,
    /// A `\`: components are separated by `/`, and nothing is escaped.
    Backslash,
    Control,
    TooLong {
        max: usize,
    },
    /// More globs than one request may name.
    TooMany {
        max: usize,
    },
    /// Not a glob: what the glob parser says.
    Syntax(String),
    /// Its fixed part goes through a symbolic link that leaves the checkout.
    Symlink,
    /// A TTL of zero or less.
    NotPositive,
    /// A TTL beyond the project's maximum.
    Beyond {
        max_seconds: i64,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("it is empty"),
            Self::Absolute => f.write_str("it is absolute: give a path relative to the checkout"),
            Self::Parent => f.write_str("a `..` component leaves the checkout"),
            Self::Negation => f.write_str("a reservation names what it covers: `!` is refused"),
            Self::Backslash => f.write_str("use `/` between components; `\\` is refused"),
            Self::Control => f.write_str("it holds a control character"),
            Self::TooLong { max } => write!(f, "it is longer than {max} bytes"),
            Self::TooMany { max } => write!(f, "one reservation names at most {max} globs"),
            Self::Syntax(why) => write!(f, "it is not a glob ({why})"),
            Self::Symlink => f.write_str("it goes through a symbolic link out of the checkout"),
            Self::NotPositive => f.write_str("a time to live must be longer than 0s"),
            Self::Beyond { max_seconds } => write!(
                f,
                "it is longer than the project's maximum of {} (reservations.max_ttl)",
                seconds_text(*max_seconds)
            ),
        }
    }
}

fn seconds_text(seconds: i64) -> String {
    match seconds {
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

fn refuse(field: Field, value: &str, problem: Problem) -> Refusal {
    Refusal::ReservationInput {
        field,
        value: value.chars().take(200).collect(),
        problem,
    }
}

// ---- globs --------------------------------------------------------------------------------

/// A gitignore-style glob relative to the checkout, normalized: components separated by
/// one `/`, no `.` component, no trailing `/` (`dir/` is kept as `dir/**`). `*`, `?` and
/// `[…]` match within one component, `**` any number of components. A glob is anchored at
/// the checkout's root (`**/name` matches at any depth). A glob whose last component is
/// fixed names a file or a directory, and covers what is under it too.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct PathGlob(String);

/// One component of a glob.
#[derive(Debug, Clone)]
enum Part {
    /// `**`: any number of components, none included.
    Any,
    Fixed(String),
    Glob {
        matcher: GlobMatcher,
        /// What every name it matches begins with, and ends with.
        head: String,
        tail: String,
    },
}

const META: [char; 5] = ['*', '?', '[', ']', '{'];

fn is_fixed(component: &str) -> bool {
    !component.contains(META) && !component.contains('}')
}

fn segment(component: &str) -> Part {
    if component == "**" {
        return Part::Any;
    }
    if is_fixed(component) {
        return Part::Fixed(component.to_owned());
    }
    let is_meta = |c: char| META.contains(&c) || c == '}';
    let head: String = component.chars().take_while(|c| !is_meta(*c)).collect();
    let tail_rev: String = component
        .chars()
        .rev()
        .take_while(|c| !is_meta(*c))
        .collect();
    let matcher = build(component)
        .map(|g| g.compile_matcher())
        // A component that does not compile alone matches anything: the overlap test errs
        // toward a conflict (a whole glob that does not compile is refused at its making).
        .unwrap_or_else(|_| build("*").expect("`*` is a glob").compile_matcher());
    Part::Glob {
        matcher,
        head,
        tail: tail_rev.chars().rev().collect(),
    }
}

fn build(glob: &str) -> Result<globset::Glob, globset::Error> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .backslash_escape(false)
        .build()
}

impl PathGlob {
    /// `raw` as a glob, or why not (the field is named `paths`).
    pub fn new(raw: &str) -> Result<Self, Refusal> {
        let no = |problem| refuse(Field::Paths, raw, problem);
        let text = raw.trim();
        if text.is_empty() {
            return Err(no(Problem::Empty));
        }
        if text.len() > MAX_GLOB_BYTES {
            return Err(no(Problem::TooLong {
                max: MAX_GLOB_BYTES,
            }));
        }
        if text.chars().any(char::is_control) {
            return Err(no(Problem::Control));
        }
        if text.contains('\\') {
            return Err(no(Problem::Backslash));
        }
        if text.starts_with('/') || text.starts_with('~') || drive_letter(text) {
            return Err(no(Problem::Absolute));
        }
        if text.starts_with('!') {
            return Err(no(Problem::Negation));
        }
        let directory = text.ends_with('/');
        let mut parts: Vec<&str> = Vec::new();
        for component in text.split('/') {
            match component {
                "" | "." => {}
                ".." => return Err(no(Problem::Parent)),
                other => parts.push(other),
            }
        }
        if parts.is_empty() {
            // `./` or `/` alone: the whole checkout.
            parts.push("**");
        } else if directory && !is_fixed(parts[parts.len() - 1]) {
            // `src/*/`: the directories it names, and what is under them.
            parts.push("**");
        }
        if parts.iter().any(|p| p.contains("**") && *p != "**") {
            return Err(no(Problem::Syntax(
                "`**` stands alone between slashes".to_owned(),
            )));
        }
        let glob = parts.join("/");
        build(&glob).map_err(|e| no(Problem::Syntax(e.kind().to_string())))?;
        Ok(Self(glob))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its leading fixed components, joined by `/` (empty when the first is a glob):
    /// every path it covers begins with them. What a store looks reservations up by.
    pub fn prefix(&self) -> String {
        self.0
            .split('/')
            .take_while(|c| is_fixed(c) && *c != "**")
            .collect::<Vec<_>>()
            .join("/")
    }

    fn parts(&self) -> Vec<Part> {
        self.0.split('/').map(segment).collect()
    }

    /// Whether it covers what is under what it matches: its last component is fixed (a
    /// file or a directory by name) or `**`.
    fn open(&self) -> bool {
        self.0.rsplit('/').next().is_some_and(is_fixed)
    }

    /// A matcher for [`PathGlob::covers`], built once for many paths.
    pub fn matcher(&self) -> Matcher {
        Matcher {
            glob: build(&self.0)
                .map(|g| g.compile_matcher())
                .unwrap_or_else(|_| build("**").expect("`**` is a glob").compile_matcher()),
            open: self.open(),
        }
    }

    /// Whether `path` (relative to the checkout, `/` between components) is covered: the
    /// glob matches it or, when the glob names a directory by its last component, one of
    /// the directories above it.
    pub fn covers(&self, path: &str) -> bool {
        self.matcher().covers(path)
    }

    /// Whether some path could be covered by both globs. Sound: when this says no, no path
    /// is covered by both. It may say yes where none is (two globs in one component, such
    /// as `*.rs` and `*.md`, are taken to overlap unless their fixed beginnings or endings
    /// differ).
    pub fn overlaps(&self, other: &PathGlob) -> bool {
        let (a, b) = (self.parts(), other.parts());
        let mut memo = vec![vec![None; b.len() + 1]; a.len() + 1];
        meet_from(&a, &b, self.open(), other.open(), 0, 0, &mut memo)
    }
}

fn drive_letter(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':'
}

impl fmt::Display for PathGlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A compiled glob: what the git guard checks each staged path with.
#[derive(Debug, Clone)]
pub struct Matcher {
    glob: GlobMatcher,
    open: bool,
}

impl Matcher {
    pub fn covers(&self, path: &str) -> bool {
        let path = path.trim_matches('/');
        if self.glob.is_match(path) {
            return true;
        }
        self.open
            && path
                .char_indices()
                .filter(|(_, c)| *c == '/')
                .any(|(i, _)| self.glob.is_match(&path[..i]))
    }
}

/// Whether two components could name the same thing.
fn meet(a: &Part, b: &Part) -> bool {
    match (a, b) {
        (Part::Fixed(x), Part::Fixed(y)) => x == y,
        (Part::Fixed(x), Part::Glob { matcher, .. })
        | (Part::Glob { matcher, .. }, Part::Fixed(x)) => matcher.is_match(x),
        (
            Part::Glob {
                head: h1, tail: t1, ..
            },
            Part::Glob {
                head: h2, tail: t2, ..
            },
        ) => {
            (h1.starts_with(h2.as_str()) || h2.starts_with(h1.as_str()))
                && (t1.ends_with(t2.as_str()) || t2.ends_with(t1.as_str()))
        }
        // `**` is handled by the walk.
        _ => true,
    }
}

/// Whether `a[i..]` and `b[j..]` can cover one path, given that `a[..i]` and `b[..j]`
/// matched the same components. A glob that has run out covers the rest when it is open
/// (a name covers what is under it); otherwise the other must run out too (`**` matches
/// no component).
fn meet_from(
    a: &[Part],
    b: &[Part],
    a_open: bool,
    b_open: bool,
    i: usize,
    j: usize,
    memo: &mut Vec<Vec<Option<bool>>>,
) -> bool {
    if let Some(known) = memo[i][j] {
        return known;
    }
    let rest_empty = |parts: &[Part]| parts.iter().all(|p| matches!(p, Part::Any));
    let answer = match (i == a.len(), j == b.len()) {
        (true, true) => true,
        (true, false) => a_open || rest_empty(&b[j..]),
        (false, true) => b_open || rest_empty(&a[i..]),
        (false, false) => match (&a[i], &b[j]) {
            (Part::Any, _) => {
                meet_from(a, b, a_open, b_open, i + 1, j, memo)
                    || meet_from(a, b, a_open, b_open, i, j + 1, memo)
            }
            (_, Part::Any) => {
                meet_from(a, b, a_open, b_open, i, j + 1, memo)
                    || meet_from(a, b, a_open, b_open, i + 1, j, memo)
            }
            (x, y) => meet(x, y) && meet_from(a, b, a_open, b_open, i + 1, j + 1, memo),
        },
    };
    memo[i][j] = Some(answer);
    answer
}

/// The paths of a request, each a glob, in order and without repeats.
pub fn globs(raw: &[String]) -> Result<Vec<PathGlob>, Refusal> {
    if raw.is_empty() {
        return Err(Refusal::Missing(Field::Paths));
    }
    if raw.len() > MAX_GLOBS {
        return Err(refuse(
            Field::Paths,
            &raw[MAX_GLOBS],
            Problem::TooMany { max: MAX_GLOBS },
        ));
    }
    let mut out: Vec<PathGlob> = Vec::with_capacity(raw.len());
    for text in raw {
        let glob = PathGlob::new(text)?;
        if !out.contains(&glob) {
            out.push(glob);
        }
    }
    Ok(out)
}

/// A time to live in milliseconds: `seconds` (the project's default when absent), longer
/// than zero and at most `max_seconds`.
pub fn ttl(
    seconds: Option<i64>,
    default_seconds: i64,
    max_seconds: i64,
) -> Result<Millis, Refusal> {
    let s = seconds.unwrap_or(default_seconds);
    let no = |problem| refuse(Field::Ttl, &format!("{s}s"), problem);
    if s <= 0 {
        return Err(no(Problem::NotPositive));
    }
    if s > max_seconds {
        return Err(no(Problem::Beyond { max_seconds }));
    }
    Ok(s.saturating_mul(1000))
}

// ---- events and the fold ------------------------------------------------------------------

/// A change to a reservation, as recorded (`reservation.changed`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum ReservationChange {
    Reserved {
        id: String,
        holder: Passname,
        path: PathGlob,
        exclusive: bool,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reason: String,
        /// Its time to live from the event's time; absent for an order's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl_ms: Option<Millis>,
        /// The order it is held for, until the order ends.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        order: Option<String>,
        /// For an order's: the last instant the order is open (its deadline), if it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until: Option<Millis>,
    },
    /// Its holder reserved the same glob again: a new TTL from now, the mode and reason
    /// given this time.
    Renewed {
        id: String,
        ttl_ms: Millis,
        exclusive: bool,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reason: String,
    },
    Released {
        id: String,
        /// Released by someone other than its holder: why.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        forced: Option<String>,
    },
    /// A commit touched paths others held exclusively, past the git guard (`--no-verify`
    /// or a race), as seen after it was made.
    Bypassed {
        commit: String,
        paths: Vec<String>,
        reservations: Vec<String>,
    },
}

impl ReservationChange {
    /// The reservation it is about (a bypass: the commit).
    pub fn subject(&self) -> &str {
        match self {
            Self::Reserved { id, .. } | Self::Renewed { id, .. } | Self::Released { id, .. } => id,
            Self::Bypassed { commit, .. } => commit,
        }
    }

    /// When the reservation it makes or renews stops being live, for an event at `at`:
    /// `None` for one that lasts until something ends it.
    pub fn expires_at(&self, at: Millis) -> Option<Millis> {
        match self {
            Self::Reserved { ttl_ms, until, .. } => match (ttl_ms, until) {
                (Some(ttl), _) => Some(at.saturating_add(*ttl)),
                // An order is open at its deadline and expired after it.
                (None, Some(until)) => Some(until.saturating_add(1)),
                (None, None) => None,
            },
            Self::Renewed { ttl_ms, .. } => Some(at.saturating_add(*ttl_ms)),
            Self::Released { .. } | Self::Bypassed { .. } => None,
        }
    }
}

/// Where a reservation stands at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Live,
    Expired,
    Released,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Expired => "expired",
            Self::Released => "released",
        }
    }
}

/// A reservation: the fold of its events, as a store's projection holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    pub id: String,
    /// The event that made it.
    pub seq: i64,
    pub holder: Passname,
    pub path: PathGlob,
    pub exclusive: bool,
    pub reason: String,
    pub order: Option<String>,
    pub reserved_at: Millis,
    /// When it was made or last renewed.
    pub renewed_at: Millis,
    /// `None`: until its order ends.
    pub expires_at: Option<Millis>,
    pub released_at: Option<Millis>,
    pub released_by: Option<String>,
    /// Why it was force-released.
    pub forced: Option<String>,
}

impl Reservation {
    /// Live until released, and only before it expires: at `expires_at` it is over.
    pub fn status_at(&self, now: Millis) -> Status {
        if self.released_at.is_some() {
            Status::Released
        } else if self.expires_at.is_some_and(|e| now >= e) {
            Status::Expired
        } else {
            Status::Live
        }
    }

    pub fn live_at(&self, now: Millis) -> bool {
        self.status_at(now) == Status::Live
    }

    /// Whether it stands in the way of `holder` taking `path` (exclusively or not).
    pub fn blocks(&self, holder: &Passname, path: &PathGlob, exclusive: bool, now: Millis) -> bool {
        self.holder != *holder
            && (exclusive || self.exclusive)
            && self.live_at(now)
            && self.path.overlaps(path)
    }
}

// ---- conflicts and refusals ---------------------------------------------------------------

/// A live reservation that stands in the way of a request: what a refusal names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conflict {
    /// The glob asked for.
    pub path: String,
    pub reservation: String,
    pub holder: String,
    /// Its glob.
    pub held: String,
    pub exclusive: bool,
    /// When it lapses unless renewed; `None` for an order's without a deadline.
    pub expires_at: Option<Millis>,
    pub order: Option<String>,
}

impl Conflict {
    fn of(path: &PathGlob, r: &Reservation) -> Self {
        Self {
            path: path.to_string(),
            reservation: r.id.clone(),
            holder: r.holder.to_string(),
            held: r.path.to_string(),
            exclusive: r.exclusive,
            expires_at: r.expires_at,
            order: r.order.clone(),
        }
    }
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} overlaps {} held {} by {} (reservation {}, ",
            self.path,
            self.held,
            if self.exclusive {
                "exclusively"
            } else {
                "shared"
            },
            self.holder,
            self.reservation
        )?;
        match (&self.order, self.expires_at) {
            // An order's ends with it, its deadline at the latest.
            (Some(order), _) => write!(f, "until order {order} ends)"),
            (None, Some(e)) => write!(f, "until {})", rfc3339(e)),
            (None, None) => f.write_str("with no end)"),
        }
    }
}

/// Why a release was refused, beyond there being nothing to release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hold {
    /// Another participant holds it: only its holder releases it.
    Others,
    /// It is held for an order: it ends with the order.
    Order(String),
    /// Its holder was active at this instant, within the quiet time a force needs.
    Active { at: Millis, quiet_ms: Millis },
}

impl fmt::Display for Hold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Others => f.write_str("only its holder releases it; an owner may force-release a holder that has gone quiet"),
            Self::Order(order) => write!(f, "it is held for order {order} and ends with it"),
            Self::Active { at, quiet_ms } => write!(
                f,
                "its holder was active at {} (a force-release needs {} of quiet from its runs and sessions)",
                rfc3339(*at),
                seconds_text(quiet_ms / 1000)
            ),
        }
    }
}

// ---- planners -----------------------------------------------------------------------------

/// A request to reserve.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    pub paths: Vec<PathGlob>,
    pub exclusive: bool,
    pub reason: String,
    pub ttl_ms: Millis,
}

/// The reason of a request, trimmed and bounded.
pub fn reason(text: Option<&str>) -> Result<String, Refusal> {
    let text = text.unwrap_or("").trim();
    let len = text.chars().count();
    if len > MAX_REASON_CHARS {
        return Err(Refusal::TooLong {
            field: Field::Reason,
            max: MAX_REASON_CHARS,
            len,
        });
    }
    Ok(text.to_owned())
}

/// What reserving `ask` for `holder` at `now` appends, given `held`: the live reservations
/// that could overlap it (the holder's own among them). A glob the holder already holds
/// by hand is renewed; any other is a new reservation. Refused, naming every conflict, when
/// another's reservation stands in the way of any glob: then nothing is reserved.
pub fn plan_reserve(
    holder: &Passname,
    ask: &Ask,
    held: &[Reservation],
    now: Millis,
    mut new_id: impl FnMut() -> String,
) -> Result<Vec<ReservationChange>, Refusal> {
    let mut conflicts = Vec::new();
    for path in &ask.paths {
        conflicts.extend(
            held.iter()
                .filter(|r| r.blocks(holder, path, ask.exclusive, now))
                .map(|r| Conflict::of(path, r)),
        );
    }
    if !conflicts.is_empty() {
        return Err(Refusal::Reserved { conflicts });
    }
    Ok(ask
        .paths
        .iter()
        .map(|path| {
            let mine = held.iter().find(|r| {
                r.holder == *holder && r.path == *path && r.order.is_none() && r.live_at(now)
            });
            match mine {
                Some(r) => ReservationChange::Renewed {
                    id: r.id.clone(),
                    ttl_ms: ask.ttl_ms,
                    exclusive: ask.exclusive,
                    reason: ask.reason.clone(),
                },
                None => ReservationChange::Reserved {
                    id: new_id(),
                    holder: holder.clone(),
                    path: path.clone(),
                    exclusive: ask.exclusive,
                    reason: ask.reason.clone(),
                    ttl_ms: Some(ask.ttl_ms),
                    order: None,
                    until: None,
                },
            }
        })
        .collect())
}

/// The globs an order's scope allows (`x-baton.scope.allowed`), as reservations take them;
/// refused, naming the first that is not one, so an order is never offered with a scope
/// its worker could not hold.
pub fn scope_globs(document: &serde_json::Value) -> Result<Vec<PathGlob>, Refusal> {
    let allowed = document
        .pointer("/x-baton/scope/allowed")
        .and_then(serde_json::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let mut out: Vec<PathGlob> = Vec::new();
    for text in &allowed {
        let glob = PathGlob::new(text).map_err(|r| match r {
            Refusal::ReservationInput { value, problem, .. } => Refusal::ReservationInput {
                field: Field::Document,
                value,
                problem,
            },
            other => other,
        })?;
        if !out.contains(&glob) {
            out.push(glob);
        }
    }
    Ok(out)
}

/// What an order's worker holds from its acceptance: its scope's allowed globs,
/// exclusively, until the order ends (`until`, its deadline, at the latest). Refused like
/// [`plan_reserve`] when another's reservation stands in the way.
pub fn plan_for_order(
    worker: &Passname,
    order: &str,
    globs: &[PathGlob],
    until: Option<Millis>,
    held: &[Reservation],
    now: Millis,
    mut new_id: impl FnMut() -> String,
) -> Result<Vec<ReservationChange>, Refusal> {
    let mut conflicts = Vec::new();
    for path in globs {
        conflicts.extend(
            held.iter()
                .filter(|r| r.blocks(worker, path, true, now))
                .map(|r| Conflict::of(path, r)),
        );
    }
    if !conflicts.is_empty() {
        return Err(Refusal::Reserved { conflicts });
    }
    Ok(globs
        .iter()
        .map(|path| ReservationChange::Reserved {
            id: new_id(),
            holder: worker.clone(),
            path: path.clone(),
            exclusive: true,
            reason: format!("order {order}"),
            ttl_ms: None,
            order: Some(order.to_owned()),
            until,
        })
        .collect())
}

/// What ending order `order` releases: its live reservations.
pub fn plan_order_end(order: &str, held: &[Reservation], now: Millis) -> Vec<ReservationChange> {
    held.iter()
        .filter(|r| r.order.as_deref() == Some(order) && r.live_at(now))
        .map(|r| ReservationChange::Released {
            id: r.id.clone(),
            forced: None,
        })
        .collect()
}

/// What a holder's release asks for: reservations by id and by glob; neither, every one
/// it holds by hand.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Release {
    pub ids: Vec<String>,
    pub globs: Vec<PathGlob>,
}

/// What `holder` releasing `what` appends, given `held`: its live reservations and any
/// other named by id. Each id and glob named must release something, or nothing is
/// released and the refusal says what the holder does hold; so is an id another holds,
/// or one held for an order.
pub fn plan_release(
    holder: &Passname,
    what: &Release,
    held: &[Reservation],
    now: Millis,
) -> Result<Vec<ReservationChange>, Refusal> {
    let mine: Vec<&Reservation> = held
        .iter()
        .filter(|r| r.holder == *holder && r.live_at(now))
        .collect();
    for id in &what.ids {
        if let Some(r) = held.iter().find(|r| r.id == *id && r.live_at(now)) {
            let hold = match &r.order {
                _ if r.holder != *holder => Hold::Others,
                Some(order) => Hold::Order(order.clone()),
                None => continue,
            };
            return Err(Refusal::Unreleased {
                id: r.id.clone(),
                holder: r.holder.to_string(),
                hold,
            });
        }
    }
    let every = what.ids.is_empty() && what.globs.is_empty();
    let picked: Vec<&Reservation> = mine
        .iter()
        .copied()
        .filter(|r| {
            what.ids.contains(&r.id) || r.order.is_none() && (every || what.globs.contains(&r.path))
        })
        .collect();
    // Every id and glob asked for must release something: all of it, or nothing.
    let unmatched: Vec<String> = what
        .ids
        .iter()
        .filter(|id| !picked.iter().any(|r| r.id == **id))
        .cloned()
        .chain(
            what.globs
                .iter()
                .filter(|g| !picked.iter().any(|r| r.path == **g))
                .map(ToString::to_string),
        )
        .collect();
    if !unmatched.is_empty() || picked.is_empty() {
        return Err(Refusal::NotReleased {
            holder: holder.to_string(),
            asked: unmatched,
            held: mine
                .iter()
                .map(|r| format!("{} {}", r.id, r.path))
                .collect(),
        });
    }
    Ok(picked
        .into_iter()
        .map(|r| ReservationChange::Released {
            id: r.id.clone(),
            forced: None,
        })
        .collect())
}

/// What `actor` force-releasing `target` appends: allowed to an owner once the holder has
/// been quiet — no run or session of its active — for `quiet_ms`; `active_at` is the
/// holder's newest activity. A reason is required: it is told to the holder, from the
/// owner. (An administrator acts as a participant — on a server, the one its key names —
/// so the admin force-releases as an owner.)
pub fn plan_force(
    actor: &Participant,
    target: &Reservation,
    active_at: Option<Millis>,
    quiet_ms: Millis,
    reason: &str,
    now: Millis,
) -> Result<ReservationChange, Refusal> {
    if actor.role != "owner" {
        return Err(Refusal::ForceRelease {
            actor: actor.name.clone(),
            role: actor.role.clone(),
            id: target.id.clone(),
        });
    }
    if reason.trim().is_empty() {
        return Err(Refusal::Missing(Field::Reason));
    }
    if !target.live_at(now) {
        return Err(Refusal::NotReleased {
            holder: target.holder.to_string(),
            asked: vec![target.id.clone()],
            held: Vec::new(),
        });
    }
    if let Some(at) = active_at.filter(|at| now - at < quiet_ms) {
        return Err(Refusal::Unreleased {
            id: target.id.clone(),
            holder: target.holder.to_string(),
            hold: Hold::Active { at, quiet_ms },
        });
    }
    Ok(ReservationChange::Released {
        id: target.id.clone(),
        forced: Some(reason.trim().to_owned()),
    })
}

/// The message that tells a holder its reservation was force-released.
pub fn forced_notice(target: &Reservation, actor: &str, reason: &str) -> String {
    format!(
        "{actor} force-released your reservation {} of {}: {reason}. Reserve it again \
         when you resume work there.",
        target.id, target.path
    )
}

#[cfg(test)]
mod tests;
