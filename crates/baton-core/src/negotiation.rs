//! Negotiation: settling a disagreement between agents with arithmetic instead
//! of a consensus loop or a person. It owns the formats (a spec: issues and their options,
//! hard constraints, a round limit, the parties; a position per party: weights, utilities,
//! a floor, vetoes), their validation (each refusal names the JSON path of the first
//! problem), utility and acceptance, the engine that settles a negotiation, the events that
//! record one and the fold of those events.
//!
//! The engine is alternating offers with a mediator. Each party in turn (in passname order)
//! offers its best feasible outcome that nobody has offered yet; when every party accepts
//! an offer, that is the agreement. After every party has offered, the mediator proposes
//! the outcome every party accepts that is fairest to the worst-off party (leximin over each
//! party's share of what it could gain above its floor). Nothing depends on the order in
//! which positions were submitted or listed, nor on hash-map iteration: every tie is broken
//! by a fixed order, ending in the spec's own order of issues and options.
//!
//! This module does no I/O, reads no clock and draws no random number. Nothing it returns
//! for display holds a weight, a utility or a floor: those live only in the positions,
//! which only the engine reads ([`Negotiation`] keeps them private).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::event::{Change, Event};
use crate::names::{NameError, Passname, check_slug};
use crate::refusal::{Record, Refusal};
use crate::time::Millis;

/// At most this many issues.
pub const MAX_ISSUES: usize = 8;
/// At most this many options per issue.
pub const MAX_OPTIONS: usize = 64;
/// At most this many outcomes in all (eight issues of eight options): the engine's search
/// is bounded by it whatever the positions.
pub const MAX_OUTCOMES: u64 = 1 << 24;
pub const MIN_PARTIES: usize = 2;
pub const MAX_PARTIES: usize = 16;
pub const MAX_ROUNDS: u64 = 1000;
/// Weights above this could overflow a utility; nobody needs them.
pub const MAX_WEIGHT: f64 = 1e6;
/// Longest issue or option name, in characters.
pub const MAX_NAME: usize = 64;
/// Who the trail names as the proposer of the mediator's offer (`@` is never in a
/// passname, so no party can be confused with it).
pub const MEDIATOR: &str = "@mediator";

// ---- formats ------------------------------------------------------------------------------

/// Some issues, each with one option, in the spec's order of issues: a hard constraint, a
/// veto or (naming every issue) an outcome. Serialized as a JSON object `{issue: option}`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Choices(pub Vec<(String, String)>);

impl Choices {
    /// Whether `outcome` (a whole outcome) makes every one of these choices.
    pub fn matched_by(&self, outcome: &Choices) -> bool {
        self.0
            .iter()
            .all(|(issue, option)| outcome.option(issue) == Some(option.as_str()))
    }

    pub fn option(&self, issue: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(i, _)| i == issue)
            .map(|(_, o)| o.as_str())
    }

    /// `db=postgres deploy=single`.
    pub fn text(&self) -> String {
        self.0
            .iter()
            .map(|(i, o)| format!("{i}={o}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Serialize for Choices {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (issue, option) in &self.0 {
            map.serialize_entry(issue, option)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Choices {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Pairs;
        impl<'de> Visitor<'de> for Pairs {
            type Value = Choices;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of issue to option")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Choices, A::Error> {
                let mut pairs = Vec::new();
                while let Some(pair) = map.next_entry::<String, String>()? {
                    pairs.push(pair);
                }
                Ok(Choices(pairs))
            }
        }
        deserializer.deserialize_map(Pairs)
    }
}

/// What is being negotiated, by whom, within how many offers. Public to every party.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    pub id: String,
    /// The most offers the trail may hold.
    pub rounds: u32,
    pub issues: Vec<Issue>,
    /// Partial outcomes that are never acceptable: no offer ever makes one.
    #[serde(default)]
    pub constraints: Vec<Choices>,
    pub parties: Vec<Party>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Issue {
    pub name: String,
    pub options: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Party {
    pub name: Passname,
    /// Where its position is, for `baton negotiate SPEC.json` (relative to the spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<String>,
    /// Not a participant of the project (a vendor, another team): declared so, its
    /// position is submitted for it by a participant. Every other party is a participant.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub external: bool,
}

impl Spec {
    pub fn party(&self, name: &str) -> Option<&Party> {
        self.parties.iter().find(|p| p.name.as_str() == name)
    }

    fn issue(&self, name: &str) -> Option<(usize, &Issue)> {
        self.issues.iter().enumerate().find(|(_, i)| i.name == name)
    }

    /// Each party with the file its position is in: refused at the first party without
    /// one (a spec run in one go must name them all).
    pub fn position_files(&self) -> Result<Vec<(Passname, String)>, Refusal> {
        self.parties
            .iter()
            .enumerate()
            .map(|(i, p)| match &p.position {
                Some(file) => Ok((p.name.clone(), file.clone())),
                None => Err(problem(
                    &Input::Spec,
                    &JsonPath::root().key("parties").index(i).key("position"),
                    Problem::NoPosition,
                )),
            })
            .collect()
    }
}

/// One party's private preferences. Stored only in its `submitted` event; never shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Position {
    /// Issue → weight (≥ 0); an issue left out weighs 0.
    pub weights: BTreeMap<String, f64>,
    /// Issue → option → utility in [0, 1]; an option left out is worth 0.
    pub utilities: BTreeMap<String, BTreeMap<String, f64>>,
    /// The least utility this party accepts.
    pub floor: f64,
    /// Partial outcomes this party rejects outright.
    #[serde(default)]
    pub veto: Vec<Choices>,
}

impl Position {
    /// What `option` of `issue` adds to this party's utility: `w · u`.
    fn gain(&self, issue: &str, option: &str) -> f64 {
        let weight = self.weights.get(issue).copied().unwrap_or(0.0);
        let utility = self
            .utilities
            .get(issue)
            .and_then(|u| u.get(option))
            .copied()
            .unwrap_or(0.0);
        weight * utility
    }

    /// `U(o) = Σ wᵢ·uᵢ(oᵢ)`, summed in the spec's order of issues (the engine sums in the
    /// same order, so the same outcome always has the same utility to the last bit).
    pub fn utility(&self, spec: &Spec, outcome: &Choices) -> f64 {
        let mut total = 0.0;
        for issue in &spec.issues {
            if let Some(option) = outcome.option(&issue.name) {
                total += self.gain(&issue.name, option);
            }
        }
        total
    }

    /// The first of this party's vetoes `outcome` matches.
    pub fn vetoed(&self, outcome: &Choices) -> Option<&Choices> {
        self.veto.iter().find(|v| v.matched_by(outcome))
    }

    /// Accept when `U(o) ≥ floor` and no veto matches; a veto outranks a reject.
    pub fn answer(&self, spec: &Spec, outcome: &Choices) -> Answer {
        if self.vetoed(outcome).is_some() {
            Answer::Veto
        } else if self.utility(spec, outcome) >= self.floor {
            Answer::Accept
        } else {
            Answer::Reject
        }
    }
}

// ---- validation ---------------------------------------------------------------------------

/// Which document a problem is in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Input {
    Spec,
    Position { party: String },
}

impl fmt::Display for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Spec => f.write_str("the negotiation spec"),
            Self::Position { party } => write!(f, "{party}'s position"),
        }
    }
}

/// The JSON type a value should have had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Expected {
    Object,
    Array,
    String,
    Number,
    WholeNumber,
    Boolean,
}

impl Expected {
    pub fn noun(self) -> &'static str {
        match self {
            Self::Object => "an object",
            Self::Array => "an array",
            Self::String => "a string",
            Self::Number => "a number",
            Self::WholeNumber => "a whole number",
            Self::Boolean => "true or false",
        }
    }
}

/// A number's allowed range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Range {
    Rounds,
    Weight,
    Utility,
    Floor,
}

impl Range {
    pub fn text(self) -> String {
        match self {
            Self::Rounds => format!("a whole number from 1 to {MAX_ROUNDS}"),
            Self::Weight => format!("a number from 0 to {MAX_WEIGHT}"),
            Self::Utility => "a number from 0 to 1".to_owned(),
            Self::Floor => "a number of at least 0".to_owned(),
        }
    }
}

/// What is wrong at a path. Never holds a value from a position: a refusal is printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Problem {
    NotJson {
        line: usize,
        column: usize,
    },
    /// A required field is absent.
    Missing,
    Expected(Expected),
    Empty,
    /// A name that appeared before in the same list.
    Duplicate,
    TooLong {
        max: usize,
    },
    TooFew {
        min: usize,
    },
    TooMany {
        max: usize,
    },
    TooManyOutcomes {
        max: u64,
    },
    /// The document is over the size cap, in bytes.
    TooLarge {
        max: usize,
    },
    UnknownIssue,
    UnknownOption {
        issue: String,
    },
    OutOfRange(Range),
    Name(NameError),
    /// A party without a position file, in a spec run in one go.
    NoPosition,
    /// A party that is neither a participant of the project nor declared external.
    Unregistered,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotJson { line, column } => {
                write!(f, "not valid JSON (line {line}, column {column})")
            }
            Self::Missing => f.write_str("missing"),
            Self::Expected(e) => write!(f, "must be {}", e.noun()),
            Self::Empty => f.write_str("must not be empty"),
            Self::Duplicate => f.write_str("repeats an earlier name"),
            Self::TooLong { max } => write!(f, "must be at most {max} characters"),
            Self::TooFew { min } => write!(f, "must hold at least {min}"),
            Self::TooMany { max } => write!(f, "must hold at most {max}"),
            Self::TooManyOutcomes { max } => write!(
                f,
                "the options multiply to more than {max} outcomes: drop options or issues"
            ),
            Self::TooLarge { max } => write!(f, "is over {max} bytes"),
            Self::UnknownIssue => f.write_str("is not an issue of the spec"),
            Self::UnknownOption { issue } => write!(f, "is not an option of issue {issue:?}"),
            Self::OutOfRange(range) => write!(f, "must be {}", range.text()),
            Self::Name(e) => e.fmt(f),
            Self::NoPosition => f.write_str("missing: every party needs its position file"),
            Self::Unregistered => f.write_str(
                "is not a participant of this project: register it, or declare the party \
                 external (`\"external\": true`)",
            ),
        }
    }
}

/// A JSON path such as `$.parties[1].position`.
#[derive(Debug, Clone)]
struct JsonPath(String);

impl JsonPath {
    fn root() -> Self {
        Self("$".to_owned())
    }

    fn key(&self, key: &str) -> Self {
        let plain = !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if plain {
            Self(format!("{}.{key}", self.0))
        } else {
            let quoted = serde_json::to_string(key).expect("a string serializes");
            Self(format!("{}[{quoted}]", self.0))
        }
    }

    fn index(&self, i: usize) -> Self {
        Self(format!("{}[{i}]", self.0))
    }
}

fn problem(input: &Input, path: &JsonPath, problem: Problem) -> Refusal {
    Refusal::NegotiationInput {
        input: input.clone(),
        path: path.0.clone(),
        problem,
    }
}

/// Parses a document's text; its syntax errors name the line and column.
pub fn parse_json(text: &str, input: Input) -> Result<Value, Refusal> {
    serde_json::from_str(text).map_err(|e| {
        problem(
            &input,
            &JsonPath::root(),
            Problem::NotJson {
                line: e.line(),
                column: e.column(),
            },
        )
    })
}

/// Refuses `text` over `max` bytes, before it is parsed.
pub fn check_size(text: &str, max: usize, input: Input) -> Result<(), Refusal> {
    if text.len() > max {
        return Err(problem(
            &input,
            &JsonPath::root(),
            Problem::TooLarge { max },
        ));
    }
    Ok(())
}

/// Reads one document, each check naming where it failed.
struct Reader {
    input: Input,
}

type Fields = Map<String, Value>;

impl Reader {
    fn fail<T>(&self, path: &JsonPath, p: Problem) -> Result<T, Refusal> {
        Err(problem(&self.input, path, p))
    }

    fn object<'v>(&self, v: &'v Value, path: &JsonPath) -> Result<&'v Fields, Refusal> {
        v.as_object()
            .map_or_else(|| self.fail(path, Problem::Expected(Expected::Object)), Ok)
    }

    fn required<'v>(
        &self,
        fields: &'v Fields,
        path: &JsonPath,
        key: &str,
    ) -> Result<(&'v Value, JsonPath), Refusal> {
        let at = path.key(key);
        match fields.get(key) {
            Some(v) => Ok((v, at)),
            None => self.fail(&at, Problem::Missing),
        }
    }

    fn array<'v>(&self, v: &'v Value, path: &JsonPath) -> Result<&'v Vec<Value>, Refusal> {
        v.as_array()
            .map_or_else(|| self.fail(path, Problem::Expected(Expected::Array)), Ok)
    }

    fn number(&self, v: &Value, path: &JsonPath) -> Result<f64, Refusal> {
        match v.as_f64() {
            Some(n) if n.is_finite() => Ok(n),
            _ => self.fail(path, Problem::Expected(Expected::Number)),
        }
    }

    fn ranged(&self, v: &Value, path: &JsonPath, range: Range) -> Result<f64, Refusal> {
        let n = self.number(v, path)?;
        let within = match range {
            Range::Weight => (0.0..=MAX_WEIGHT).contains(&n),
            Range::Utility => (0.0..=1.0).contains(&n),
            Range::Floor => n >= 0.0,
            Range::Rounds => unreachable!("rounds are whole numbers"),
        };
        if within {
            Ok(n)
        } else {
            self.fail(path, Problem::OutOfRange(range))
        }
    }

    /// A non-empty name of at most [`MAX_NAME`] characters.
    fn name<'v>(&self, v: &'v Value, path: &JsonPath) -> Result<&'v str, Refusal> {
        let Some(s) = v.as_str() else {
            return self.fail(path, Problem::Expected(Expected::String));
        };
        if s.trim().is_empty() {
            return self.fail(path, Problem::Empty);
        }
        if s.chars().count() > MAX_NAME {
            return self.fail(path, Problem::TooLong { max: MAX_NAME });
        }
        Ok(s)
    }

    /// A list of partial outcomes over `spec`'s issues (constraints, vetoes).
    fn clauses(&self, v: &Value, path: &JsonPath, spec: &Spec) -> Result<Vec<Choices>, Refusal> {
        let mut out = Vec::new();
        for (i, item) in self.array(v, path)?.iter().enumerate() {
            let at = path.index(i);
            let fields = self.object(item, &at)?;
            if fields.is_empty() {
                return self.fail(&at, Problem::Empty);
            }
            let mut picked: Vec<(usize, String, String)> = Vec::new();
            for (issue_name, option) in fields {
                let at = at.key(issue_name);
                let Some((index, issue)) = spec.issue(issue_name) else {
                    return self.fail(&at, Problem::UnknownIssue);
                };
                let Some(option) = option.as_str() else {
                    return self.fail(&at, Problem::Expected(Expected::String));
                };
                if !issue.options.iter().any(|o| o == option) {
                    return self.fail(
                        &at,
                        Problem::UnknownOption {
                            issue: issue.name.clone(),
                        },
                    );
                }
                picked.push((index, issue.name.clone(), option.to_owned()));
            }
            picked.sort_by_key(|(index, ..)| *index);
            out.push(Choices(
                picked.into_iter().map(|(_, i, o)| (i, o)).collect(),
            ));
        }
        Ok(out)
    }
}

impl Spec {
    /// Reads and checks a spec. Fields it does not know are ignored.
    pub fn from_value(v: &Value) -> Result<Self, Refusal> {
        let r = Reader { input: Input::Spec };
        let root = JsonPath::root();
        let fields = r.object(v, &root)?;

        let (id, at) = r.required(fields, &root, "id")?;
        let Some(id) = id.as_str() else {
            return r.fail(&at, Problem::Expected(Expected::String));
        };
        check_slug("negotiation id", id).map_err(|e| problem(&r.input, &at, Problem::Name(e)))?;

        let (rounds, at) = r.required(fields, &root, "rounds")?;
        let Some(rounds) = rounds.as_u64().or_else(|| {
            // 50.0 is a whole number too; -1 and 2.5 are not.
            rounds
                .as_f64()
                .filter(|n| n.fract() == 0.0 && *n >= 0.0)
                .map(|n| n as u64)
        }) else {
            let p = if rounds.is_number() {
                Problem::OutOfRange(Range::Rounds)
            } else {
                Problem::Expected(Expected::WholeNumber)
            };
            return r.fail(&at, p);
        };
        if !(1..=MAX_ROUNDS).contains(&rounds) {
            return r.fail(&at, Problem::OutOfRange(Range::Rounds));
        }

        let (issues_value, issues_at) = r.required(fields, &root, "issues")?;
        let list = r.array(issues_value, &issues_at)?;
        if list.is_empty() {
            return r.fail(&issues_at, Problem::Empty);
        }
        if list.len() > MAX_ISSUES {
            return r.fail(&issues_at, Problem::TooMany { max: MAX_ISSUES });
        }
        let mut issues: Vec<Issue> = Vec::new();
        let mut outcomes: u64 = 1;
        for (i, item) in list.iter().enumerate() {
            let at = issues_at.index(i);
            let issue = r.object(item, &at)?;
            let (name, name_at) = r.required(issue, &at, "name")?;
            let name = r.name(name, &name_at)?;
            if issues.iter().any(|x| x.name == name) {
                return r.fail(&name_at, Problem::Duplicate);
            }
            let (options, options_at) = r.required(issue, &at, "options")?;
            let options = r.array(options, &options_at)?;
            if options.is_empty() {
                return r.fail(&options_at, Problem::Empty);
            }
            if options.len() > MAX_OPTIONS {
                return r.fail(&options_at, Problem::TooMany { max: MAX_OPTIONS });
            }
            let mut names: Vec<String> = Vec::new();
            for (j, option) in options.iter().enumerate() {
                let at = options_at.index(j);
                let option = r.name(option, &at)?;
                if names.iter().any(|o| o == option) {
                    return r.fail(&at, Problem::Duplicate);
                }
                names.push(option.to_owned());
            }
            outcomes = outcomes.saturating_mul(names.len() as u64);
            if outcomes > MAX_OUTCOMES {
                return r.fail(&issues_at, Problem::TooManyOutcomes { max: MAX_OUTCOMES });
            }
            issues.push(Issue {
                name: name.to_owned(),
                options: names,
            });
        }
        let mut spec = Spec {
            id: id.to_owned(),
            rounds: rounds as u32,
            issues,
            constraints: Vec::new(),
            parties: Vec::new(),
        };

        if let Some(constraints) = fields.get("constraints") {
            spec.constraints = r.clauses(constraints, &root.key("constraints"), &spec)?;
        }

        let (parties_value, parties_at) = r.required(fields, &root, "parties")?;
        let list = r.array(parties_value, &parties_at)?;
        if list.len() < MIN_PARTIES {
            return r.fail(&parties_at, Problem::TooFew { min: MIN_PARTIES });
        }
        if list.len() > MAX_PARTIES {
            return r.fail(&parties_at, Problem::TooMany { max: MAX_PARTIES });
        }
        for (i, item) in list.iter().enumerate() {
            let at = parties_at.index(i);
            let party = r.object(item, &at)?;
            let (name, name_at) = r.required(party, &at, "name")?;
            let Some(name) = name.as_str() else {
                return r.fail(&name_at, Problem::Expected(Expected::String));
            };
            let name =
                Passname::new(name).map_err(|e| problem(&r.input, &name_at, Problem::Name(e)))?;
            if spec.party(name.as_str()).is_some() {
                return r.fail(&name_at, Problem::Duplicate);
            }
            let position = match party.get("position") {
                None => None,
                Some(file) => {
                    let at = at.key("position");
                    match file.as_str() {
                        Some(f) if !f.trim().is_empty() => Some(f.to_owned()),
                        Some(_) => return r.fail(&at, Problem::Empty),
                        None => return r.fail(&at, Problem::Expected(Expected::String)),
                    }
                }
            };
            let external = match party.get("external") {
                None => false,
                Some(flag) => match flag.as_bool() {
                    Some(flag) => flag,
                    None => {
                        return r.fail(&at.key("external"), Problem::Expected(Expected::Boolean));
                    }
                },
            };
            spec.parties.push(Party {
                name,
                position,
                external,
            });
        }
        Ok(spec)
    }
}

impl Position {
    /// Reads and checks `party`'s position against `spec`. Fields it does not know are
    /// ignored.
    pub fn from_value(v: &Value, spec: &Spec, party: &str) -> Result<Self, Refusal> {
        let r = Reader {
            input: Input::Position {
                party: party.to_owned(),
            },
        };
        let root = JsonPath::root();
        let fields = r.object(v, &root)?;

        let (weights_value, weights_at) = r.required(fields, &root, "weights")?;
        let mut weights = BTreeMap::new();
        for (issue, weight) in r.object(weights_value, &weights_at)? {
            let at = weights_at.key(issue);
            if spec.issue(issue).is_none() {
                return r.fail(&at, Problem::UnknownIssue);
            }
            weights.insert(issue.clone(), r.ranged(weight, &at, Range::Weight)?);
        }

        let (utilities_value, utilities_at) = r.required(fields, &root, "utilities")?;
        let mut utilities = BTreeMap::new();
        for (issue_name, per_option) in r.object(utilities_value, &utilities_at)? {
            let at = utilities_at.key(issue_name);
            let Some((_, issue)) = spec.issue(issue_name) else {
                return r.fail(&at, Problem::UnknownIssue);
            };
            let mut values = BTreeMap::new();
            for (option, utility) in r.object(per_option, &at)? {
                let at = at.key(option);
                if !issue.options.iter().any(|o| o == option) {
                    return r.fail(
                        &at,
                        Problem::UnknownOption {
                            issue: issue.name.clone(),
                        },
                    );
                }
                values.insert(option.clone(), r.ranged(utility, &at, Range::Utility)?);
            }
            utilities.insert(issue_name.clone(), values);
        }
        // An issue that weighs something needs its utilities: without them the weight
        // would silently count for nothing.
        for issue in &spec.issues {
            let weighs = weights.get(&issue.name).is_some_and(|w| *w > 0.0);
            if weighs && !utilities.contains_key(&issue.name) {
                return r.fail(&utilities_at.key(&issue.name), Problem::Missing);
            }
        }

        let (floor, floor_at) = r.required(fields, &root, "floor")?;
        let floor = r.ranged(floor, &floor_at, Range::Floor)?;

        let veto = match fields.get("veto") {
            Some(v) => r.clauses(v, &root.key("veto"), spec)?,
            None => Vec::new(),
        };
        Ok(Position {
            weights,
            utilities,
            floor,
            veto,
        })
    }
}

// ---- the engine ---------------------------------------------------------------------------

/// A party's answer to an offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Accept,
    Reject,
    Veto,
}

impl Answer {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accept => "accept",
            Self::Reject => "reject",
            Self::Veto => "veto",
        }
    }
}

/// One offer of the trail and every party's answer to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offer {
    /// 1, 2, …: one offer a round.
    pub round: u32,
    /// A party's passname, or [`MEDIATOR`].
    pub proposer: String,
    pub outcome: Choices,
    /// Party → answer, in passname order.
    pub answers: BTreeMap<String, Answer>,
}

/// Why a negotiation ended without an agreement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// No feasible outcome meets every floor and no veto: nothing could be agreed.
    NoZone,
    /// An agreement existed, but the round limit came first.
    RoundLimit,
}

/// A veto a party used in the trail: who, and the partial outcome it vetoed (never why).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Veto {
    pub party: String,
    pub vetoed: Choices,
}

/// How a negotiation ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Resolution {
    Agreement {
        outcome: Choices,
    },
    /// What a person reads: the issues the offers could not agree on and the vetoes used.
    WalkAway {
        ended: Ended,
        unsettled: Vec<String>,
        vetoes: Vec<Veto>,
    },
}

/// The engine's result: the trail of offers and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settlement {
    pub trail: Vec<Offer>,
    pub resolution: Resolution,
}

/// An outcome as option indexes, one per issue in the spec's order (the rest 0), so that
/// comparing two is the lexicographic order of outcomes.
type Pick = [u8; MAX_ISSUES];

/// A partial outcome as `(issue, option)` indexes, by issue.
type Clause = Vec<(usize, u8)>;

/// One party, compiled: what each option adds to its utility.
struct Bidder<'a> {
    name: &'a str,
    position: &'a Position,
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
enum Goal<'g> {
    /// A party's offer: its best feasible outcome it does not veto and nobody offered.
    Offer {
        proposer: usize,
        offered: &'g [Pick],
    },
    /// The mediator's: the fairest outcome every party accepts.
    Mediate,
}

/// The spec and positions compiled to indexes for the search.
struct Model<'a> {
    spec: &'a Spec,
    sizes: Vec<usize>,
    /// The order the search chooses the issues in: the ones whose options matter most
    /// (pooled over the parties) first, so the deep levels, where most nodes are, decide
    /// little. Ties in the spec's order.
    seq: Vec<usize>,
    /// `at[issue]`: its place in `seq`.
    at: Vec<usize>,
    constraints_at: Vec<Vec<Clause>>,
    /// In passname order: the order of turns and of answers.
    bidders: Vec<Bidder<'a>>,
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
fn compare(a: &[f64], b: &[f64]) -> Ordering {
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
    fn new(spec: &'a Spec, positions: &'a BTreeMap<String, Position>) -> Self {
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

    fn choices(&self, pick: &Pick) -> Choices {
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
    fn rank(&self, goal: Goal<'_>, u: &[f64], out: &mut Vec<f64>, scratch: &mut Vec<f64>) {
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
    fn search(&self, goal: Goal<'_>) -> Option<Pick> {
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

// ---- events and the fold ------------------------------------------------------------------

/// A negotiation's events, all with the negotiation's id as their subject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum NegotiationChange {
    Opened {
        spec: Spec,
    },
    /// A party's position: the one place weights, utilities and floors are stored.
    Submitted {
        negotiation: String,
        party: Passname,
        position: Position,
    },
    /// The engine ran: the trail and how it ended.
    Settled {
        negotiation: String,
        settlement: Settlement,
    },
}

impl NegotiationChange {
    pub fn negotiation(&self) -> &str {
        match self {
            Self::Opened { spec } => &spec.id,
            Self::Submitted { negotiation, .. } | Self::Settled { negotiation, .. } => negotiation,
        }
    }
}

/// Where a negotiation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Waiting for positions.
    Open,
    Agreement,
    WalkAway,
}

/// A negotiation: the fold of its events. A settled negotiation opened again under its
/// id starts a new sitting; the sittings before are kept, settled, in `earlier`.
#[derive(Debug, Clone, PartialEq)]
pub struct Negotiation {
    pub spec: Spec,
    /// The log position of its newest `opened` event.
    pub log_seq: i64,
    pub opened_at: Millis,
    pub opened_by: String,
    /// Private: only the engine reads positions, so nothing shown can hold one.
    positions: BTreeMap<String, Position>,
    pub settlement: Option<Settlement>,
    pub settled_at: Option<Millis>,
    /// The sittings settled before this one, oldest first.
    pub earlier: Vec<Sitting>,
}

/// A settled sitting of a negotiation that was opened again after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sitting {
    pub spec: Spec,
    pub opened_at: Millis,
    pub settlement: Settlement,
    pub settled_at: Millis,
}

impl Negotiation {
    /// Applies one event to the negotiation so far (`None` before its `opened`). Lenient,
    /// as replay must not fail: [`plan_submit`] validates at write time.
    pub fn fold(current: Option<Self>, event: &Event) -> Option<Self> {
        let Change::Negotiation(change) = &event.change else {
            return current;
        };
        match change {
            NegotiationChange::Opened { spec } => {
                let mut earlier = Vec::new();
                if let Some(before) = current {
                    earlier = before.earlier;
                    if let (Some(settlement), Some(settled_at)) =
                        (before.settlement, before.settled_at)
                    {
                        earlier.push(Sitting {
                            spec: before.spec,
                            opened_at: before.opened_at,
                            settlement,
                            settled_at,
                        });
                    }
                }
                Some(Self {
                    spec: spec.clone(),
                    log_seq: event.seq,
                    opened_at: event.at,
                    opened_by: event.actor.clone(),
                    positions: BTreeMap::new(),
                    settlement: None,
                    settled_at: None,
                    earlier,
                })
            }
            NegotiationChange::Submitted {
                party, position, ..
            } => {
                let mut n = current?;
                n.positions.insert(party.to_string(), position.clone());
                Some(n)
            }
            NegotiationChange::Settled { settlement, .. } => {
                let mut n = current?;
                n.settlement = Some(settlement.clone());
                n.settled_at = Some(event.at);
                Some(n)
            }
        }
    }

    /// Folds one negotiation's events, in log order.
    pub fn replay<'a>(events: impl IntoIterator<Item = &'a Event>) -> Option<Self> {
        events.into_iter().fold(None, Self::fold)
    }

    pub fn id(&self) -> &str {
        &self.spec.id
    }

    pub fn status(&self) -> Status {
        self.settlement
            .as_ref()
            .map_or(Status::Open, Settlement::status)
    }

    /// Whether `party` submitted its position (never what it holds).
    pub fn has_submitted(&self, party: &str) -> bool {
        self.positions.contains_key(party)
    }

    /// The parties yet to submit, in the spec's order.
    pub fn waiting_for(&self) -> Vec<&Passname> {
        self.spec
            .parties
            .iter()
            .map(|p| &p.name)
            .filter(|name| !self.has_submitted(name.as_str()))
            .collect()
    }
}

impl Settlement {
    /// How it ended: an agreement or a walk-away.
    pub fn status(&self) -> Status {
        match self.resolution {
            Resolution::Agreement { .. } => Status::Agreement,
            Resolution::WalkAway { .. } => Status::WalkAway,
        }
    }
}

/// Opens a negotiation, or a new sitting of a settled one under the same id: refused
/// while one under its id waits for positions, and at the first party that is neither
/// among `registered` (the spec's parties that are participants) nor declared external.
pub fn plan_open(
    existing: Option<&Negotiation>,
    spec: Spec,
    registered: &[Passname],
) -> Result<Change, Refusal> {
    if existing.is_some_and(|n| n.settlement.is_none()) {
        return Err(Refusal::NegotiationExists { id: spec.id });
    }
    if let Some(i) = spec
        .parties
        .iter()
        .position(|p| !p.external && !registered.contains(&p.name))
    {
        return Err(problem(
            &Input::Spec,
            &JsonPath::root().key("parties").index(i).key("name"),
            Problem::Unregistered,
        ));
    }
    Ok(Change::Negotiation(NegotiationChange::Opened { spec }))
}

/// `party`'s `position` (JSON, checked here against the spec) submitted to negotiation
/// `id` by `submitter`: the party itself, or a participant for an external party (`None`
/// when a spec is run in one go, every position handed over by whoever runs it). Refused
/// when there is no such negotiation, `party` is not one of its parties, the submitter is
/// another participant's stand-in, it is settled, or `party` submitted already. The last
/// position also settles it: the changes are the submission and, then, the settlement.
pub fn plan_submit(
    current: Option<&Negotiation>,
    id: &str,
    submitter: Option<&str>,
    party: &Passname,
    position: &Value,
) -> Result<Vec<Change>, Refusal> {
    let Some(negotiation) = current else {
        return Err(Refusal::not_found(Record::Negotiation, id));
    };
    let Some(named) = negotiation.spec.party(party.as_str()) else {
        return Err(Refusal::NotANegotiator {
            id: id.to_owned(),
            party: party.to_string(),
            parties: negotiation
                .spec
                .parties
                .iter()
                .map(|p| p.name.to_string())
                .collect(),
        });
    };
    if let Some(actor) = submitter.filter(|a| *a != party.as_str() && !named.external) {
        return Err(Refusal::OwnPosition {
            id: id.to_owned(),
            actor: actor.to_owned(),
            party: party.to_string(),
        });
    }
    if negotiation.settlement.is_some() {
        return Err(Refusal::NegotiationSettled { id: id.to_owned() });
    }
    if negotiation.has_submitted(party.as_str()) {
        return Err(Refusal::PositionSubmitted {
            id: id.to_owned(),
            party: party.to_string(),
        });
    }
    let position = Position::from_value(position, &negotiation.spec, party.as_str())?;
    let mut changes = vec![Change::Negotiation(NegotiationChange::Submitted {
        negotiation: id.to_owned(),
        party: party.clone(),
        position: position.clone(),
    })];
    let mut positions = negotiation.positions.clone();
    positions.insert(party.to_string(), position);
    if positions.len() == negotiation.spec.parties.len() {
        changes.push(Change::Negotiation(NegotiationChange::Settled {
            negotiation: id.to_owned(),
            settlement: settle(&negotiation.spec, &positions),
        }));
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn base_spec() -> Value {
        json!({
            "id": "db-choice", "rounds": 50,
            "issues": [{"name": "db", "options": ["sqlite", "postgres"]},
                       {"name": "deploy", "options": ["single", "multi-region"]}],
            "constraints": [{"db": "sqlite", "deploy": "multi-region"}],
            "parties": [{"name": "planner", "position": "planner.json"},
                        {"name": "ops", "position": "ops.json"}],
            "note": "extra fields are allowed"
        })
    }

    fn planner() -> Value {
        json!({"weights": {"db": 0.7, "deploy": 0.3},
               "utilities": {"db": {"sqlite": 1, "postgres": 0.2},
                             "deploy": {"single": 1, "multi-region": 0}},
               "floor": 0.5, "comment": "ignored"})
    }

    fn ops() -> Value {
        json!({"weights": {"db": 0.5, "deploy": 0.5},
               "utilities": {"db": {"sqlite": 0.6, "postgres": 1},
                             "deploy": {"single": 1, "multi-region": 0.8}},
               "floor": 0.7, "veto": [{"deploy": "multi-region"}]})
    }

    fn set(mut v: Value, pointer: &str, to: Value) -> Value {
        *v.pointer_mut(pointer)
            .unwrap_or_else(|| panic!("{pointer}")) = to;
        v
    }

    fn without(mut v: Value, pointer: &str) -> Value {
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        v.pointer_mut(parent)
            .and_then(Value::as_object_mut)
            .unwrap()
            .remove(key);
        v
    }

    fn spec(v: &Value) -> Spec {
        Spec::from_value(v).unwrap()
    }

    fn refused_at(r: Refusal) -> (String, Problem) {
        match r {
            Refusal::NegotiationInput { path, problem, .. } => (path, problem),
            other => panic!("expected an input refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_malformed_spec_is_refused_at_the_path_of_its_first_problem() {
        let nine: Vec<Value> = (0..9)
            .map(|i| json!({"name": format!("i{i}"), "options": ["a"]}))
            .collect();
        let wide: Vec<Value> = (0..8)
            .map(|i| json!({"name": format!("i{i}"), "options": ["a","b","c","d","e","f","g","h","i"]}))
            .collect();
        let cases: Vec<(Value, &str, Problem)> = vec![
            (json!([]), "$", Problem::Expected(Expected::Object)),
            (
                without(base_spec(), "/rounds"),
                "$.rounds",
                Problem::Missing,
            ),
            (
                set(base_spec(), "/rounds", json!("50")),
                "$.rounds",
                Problem::Expected(Expected::WholeNumber),
            ),
            (
                set(base_spec(), "/rounds", json!(0)),
                "$.rounds",
                Problem::OutOfRange(Range::Rounds),
            ),
            (
                set(base_spec(), "/rounds", json!(2.5)),
                "$.rounds",
                Problem::OutOfRange(Range::Rounds),
            ),
            (
                set(base_spec(), "/issues", json!([])),
                "$.issues",
                Problem::Empty,
            ),
            (
                set(base_spec(), "/issues", json!(nine)),
                "$.issues",
                Problem::TooMany { max: MAX_ISSUES },
            ),
            (
                set(base_spec(), "/issues", json!(wide)),
                "$.issues",
                Problem::TooManyOutcomes { max: MAX_OUTCOMES },
            ),
            (
                set(base_spec(), "/issues/0/name", json!(3)),
                "$.issues[0].name",
                Problem::Expected(Expected::String),
            ),
            (
                set(base_spec(), "/issues/1/options/1", json!("single")),
                "$.issues[1].options[1]",
                Problem::Duplicate,
            ),
            (
                set(base_spec(), "/constraints/0", json!({"dbx": "sqlite"})),
                "$.constraints[0].dbx",
                Problem::UnknownIssue,
            ),
            (
                set(base_spec(), "/constraints/0", json!({"db": "mysql"})),
                "$.constraints[0].db",
                Problem::UnknownOption { issue: "db".into() },
            ),
            (
                set(base_spec(), "/parties", json!([{"name": "ops"}])),
                "$.parties",
                Problem::TooFew { min: MIN_PARTIES },
            ),
            (
                set(base_spec(), "/parties/1/name", json!("planner")),
                "$.parties[1].name",
                Problem::Duplicate,
            ),
            (
                set(base_spec(), "/parties/1/position", json!(7)),
                "$.parties[1].position",
                Problem::Expected(Expected::String),
            ),
        ];
        for (doc, path, want) in cases {
            let (got_path, got) = refused_at(Spec::from_value(&doc).unwrap_err());
            assert_eq!((got_path.as_str(), &got), (path, &want), "{doc}");
        }
        let bad_id = set(base_spec(), "/id", json!("DB choice"));
        let (path, problem) = refused_at(Spec::from_value(&bad_id).unwrap_err());
        assert_eq!(path, "$.id");
        assert!(matches!(problem, Problem::Name(_)), "{problem:?}");
        let bad_party = set(base_spec(), "/parties/0/name", json!("Planner"));
        let (path, _) = refused_at(Spec::from_value(&bad_party).unwrap_err());
        assert_eq!(path, "$.parties[0].name");
    }

    #[test]
    fn a_spec_run_in_one_go_needs_every_partys_position_file() {
        let files = spec(&base_spec()).position_files().unwrap();
        assert_eq!(files[1].1, "ops.json");
        let missing = spec(&without(base_spec(), "/parties/1/position"));
        let (path, problem) = refused_at(missing.position_files().unwrap_err());
        assert_eq!(
            (path.as_str(), problem),
            ("$.parties[1].position", Problem::NoPosition)
        );
    }

    #[test]
    fn a_malformed_position_is_refused_at_its_path_without_its_values() {
        let s = spec(&base_spec());
        let cases: Vec<(Value, &str, Problem)> = vec![
            (json!("weights"), "$", Problem::Expected(Expected::Object)),
            (
                without(planner(), "/weights"),
                "$.weights",
                Problem::Missing,
            ),
            (
                set(planner(), "/weights/db", json!("heavy")),
                "$.weights.db",
                Problem::Expected(Expected::Number),
            ),
            (
                set(planner(), "/weights/db", json!(-0.25)),
                "$.weights.db",
                Problem::OutOfRange(Range::Weight),
            ),
            (
                set(planner(), "/weights", json!({"my issue": 1})),
                "$.weights[\"my issue\"]",
                Problem::UnknownIssue,
            ),
            (
                set(planner(), "/utilities/db/sqlite", json!(1.5)),
                "$.utilities.db.sqlite",
                Problem::OutOfRange(Range::Utility),
            ),
            (
                set(planner(), "/utilities/db", json!({"mysql": 1})),
                "$.utilities.db.mysql",
                Problem::UnknownOption { issue: "db".into() },
            ),
            (
                without(planner(), "/utilities/deploy"),
                "$.utilities.deploy",
                Problem::Missing,
            ),
            (without(planner(), "/floor"), "$.floor", Problem::Missing),
            (
                set(planner(), "/floor", json!(-1)),
                "$.floor",
                Problem::OutOfRange(Range::Floor),
            ),
            (
                set(ops(), "/veto/0/deploy", json!("mars")),
                "$.veto[0].deploy",
                Problem::UnknownOption {
                    issue: "deploy".into(),
                },
            ),
            (
                set(ops(), "/veto/0", json!({})),
                "$.veto[0]",
                Problem::Empty,
            ),
        ];
        for (doc, path, want) in cases {
            let r = Position::from_value(&doc, &s, "planner").unwrap_err();
            let text = r.to_string();
            assert!(text.starts_with("planner's position: "), "{text}");
            for value in ["1.5", "-0.25", "heavy"] {
                assert!(!text.contains(value), "{text} echoes a value");
            }
            assert_eq!(refused_at(r), (path.to_owned(), want), "{doc}");
        }
        // An issue that weighs nothing needs no utilities; an option left out is worth 0.
        let lean = json!({"weights": {"db": 1}, "utilities": {"db": {"sqlite": 1}}, "floor": 0});
        let p = Position::from_value(&lean, &s, "planner").unwrap();
        let outcome = Choices(vec![
            ("db".into(), "postgres".into()),
            ("deploy".into(), "single".into()),
        ]);
        assert_eq!(p.utility(&s, &outcome), 0.0);
    }

    #[test]
    fn text_that_is_not_json_names_where_it_broke() {
        let r = parse_json(
            "{\n  \"weights\": ,",
            Input::Position {
                party: "ops".into(),
            },
        );
        let (path, problem) = refused_at(r.unwrap_err());
        assert_eq!(path, "$");
        assert!(
            matches!(problem, Problem::NotJson { line: 2, .. }),
            "{problem:?}"
        );
        let r = check_size("{}", 1, Input::Spec).unwrap_err();
        assert_eq!(refused_at(r).1, Problem::TooLarge { max: 1 });
    }

    fn positions(list: &[(&str, Value)], s: &Spec) -> BTreeMap<String, Position> {
        list.iter()
            .map(|(name, v)| {
                (
                    (*name).to_owned(),
                    Position::from_value(v, s, name).unwrap(),
                )
            })
            .collect()
    }

    fn one_issue(rounds: u32) -> Spec {
        spec(&json!({
            "id": "pick", "rounds": rounds,
            "issues": [{"name": "x", "options": ["a", "b", "c"]}],
            "parties": [{"name": "p1"}, {"name": "p2"}]
        }))
    }

    fn on_x(a: f64, b: f64, c: f64, veto: Value) -> Value {
        json!({"weights": {"x": 1}, "utilities": {"x": {"a": a, "b": b, "c": c}},
               "floor": 0.5, "veto": veto})
    }

    fn offers(s: &Settlement) -> Vec<(u32, &str, String, Vec<Answer>)> {
        s.trail
            .iter()
            .map(|o| {
                (
                    o.round,
                    o.proposer.as_str(),
                    o.outcome.text(),
                    o.answers.values().copied().collect(),
                )
            })
            .collect()
    }

    use Answer::{Accept, Reject, Veto as Vetoed};

    #[test]
    fn the_engine_settles_each_kind_of_negotiation_as_the_table_says() {
        // A party's opening offer that every party accepts is the agreement (parties offer
        // in passname order: ops before planner).
        let s = spec(&base_spec());
        let settled = settle(
            &s,
            &positions(&[("planner", planner()), ("ops", ops())], &s),
        );
        assert_eq!(
            offers(&settled),
            [
                (
                    1,
                    "ops",
                    "db=postgres deploy=single".into(),
                    vec![Accept, Reject]
                ),
                (
                    2,
                    "planner",
                    "db=sqlite deploy=single".into(),
                    vec![Accept, Accept]
                ),
            ]
        );
        assert_eq!(
            settled.resolution,
            Resolution::Agreement {
                outcome: settled.trail[1].outcome.clone()
            }
        );

        // Openings rejected, a zone between them: the mediator proposes it.
        let s = one_issue(50);
        let mediated = settle(
            &s,
            &positions(
                &[
                    ("p1", on_x(1.0, 0.6, 0.0, json!([]))),
                    ("p2", on_x(0.0, 0.6, 1.0, json!([]))),
                ],
                &s,
            ),
        );
        assert_eq!(
            offers(&mediated),
            [
                (1, "p1", "x=a".into(), vec![Accept, Reject]),
                (2, "p2", "x=c".into(), vec![Reject, Accept]),
                (3, MEDIATOR, "x=b".into(), vec![Accept, Accept]),
            ]
        );

        // The same with a round limit of two: the limit ends it first.
        let s = one_issue(2);
        let limited = settle(
            &s,
            &positions(
                &[
                    ("p1", on_x(1.0, 0.6, 0.0, json!([]))),
                    ("p2", on_x(0.0, 0.6, 1.0, json!([]))),
                ],
                &s,
            ),
        );
        assert_eq!(limited.trail.len(), 2);
        assert!(matches!(
            limited.resolution,
            Resolution::WalkAway {
                ended: Ended::RoundLimit,
                ..
            }
        ));

        // A veto closes the only zone: walk away, naming the issue and who vetoed what.
        let s = one_issue(50);
        let vetoed = settle(
            &s,
            &positions(
                &[
                    ("p1", on_x(0.6, 1.0, 0.0, json!([]))),
                    ("p2", on_x(0.0, 0.9, 1.0, json!([{"x": "b"}]))),
                ],
                &s,
            ),
        );
        assert_eq!(
            offers(&vetoed),
            [
                (1, "p1", "x=b".into(), vec![Accept, Vetoed]),
                (2, "p2", "x=c".into(), vec![Reject, Accept]),
            ]
        );
        assert_eq!(
            vetoed.resolution,
            Resolution::WalkAway {
                ended: Ended::NoZone,
                unsettled: vec!["x".into()],
                vetoes: vec![Veto {
                    party: "p2".into(),
                    vetoed: Choices(vec![("x".into(), "b".into())]),
                }],
            }
        );
    }

    #[test]
    fn what_is_stored_of_a_settlement_holds_no_weight_utility_or_floor() {
        let s = spec(&base_spec());
        let settled = settle(
            &s,
            &positions(&[("planner", planner()), ("ops", ops())], &s),
        );
        let change = Change::Negotiation(NegotiationChange::Settled {
            negotiation: "db-choice".into(),
            settlement: settled,
        });
        let text = change.data().to_string();
        for word in [
            "weight", "utilit", "floor", "0.7", "0.3", "0.5", "0.2", "0.8",
        ] {
            assert!(!text.contains(word), "{word} in {text}");
        }
        assert_eq!(
            Change::from_parts(change.kind(), change.data()).unwrap(),
            change
        );
        assert_eq!(change.subject(), "db-choice");
    }

    fn event(seq: i64, change: Change) -> Event {
        Event {
            seq,
            id: format!("e{seq}"),
            at: seq,
            actor: "@local".into(),
            change,
        }
    }

    fn name(s: &str) -> Passname {
        Passname::new(s).unwrap()
    }

    /// Every party of `spec`, as the participants it names.
    fn everyone(spec: &Spec) -> Vec<Passname> {
        spec.parties.iter().map(|p| p.name.clone()).collect()
    }

    /// Opens `spec` (every party registered) after `before`, and submits `positions` in
    /// the given order, each party its own, through the planners.
    fn sitting(
        before: Option<Negotiation>,
        spec_value: &Value,
        submissions: &[(String, Value)],
    ) -> Negotiation {
        let spec = Spec::from_value(spec_value).unwrap();
        let registered = everyone(&spec);
        let opened = plan_open(before.as_ref(), spec, &registered).unwrap();
        let seq = before.as_ref().map_or(1, |b| b.log_seq + 10);
        let mut n = Negotiation::fold(before, &event(seq, opened));
        let id = n.as_ref().unwrap().id().to_owned();
        for (party, position) in submissions {
            for change in plan_submit(n.as_ref(), &id, Some(party), &name(party), position).unwrap()
            {
                let seq = n.as_ref().unwrap().log_seq + 1;
                n = Negotiation::fold(n, &event(seq, change));
            }
        }
        n.unwrap()
    }

    /// Opens `spec` and submits `positions` in the given order, through the planners.
    fn through_planners(spec_value: &Value, submissions: &[(String, Value)]) -> Negotiation {
        sitting(None, spec_value, submissions)
    }

    #[test]
    fn submissions_are_refused_when_they_cannot_count() {
        let open = through_planners(&base_spec(), &[("ops".into(), ops())]);
        assert_eq!(open.status(), Status::Open);
        assert_eq!(open.waiting_for(), [&name("planner")]);
        let cases: Vec<(Option<&Negotiation>, &str, Value, RefusalKindOf)> = vec![
            (None, "planner", planner(), RefusalKindOf::NotFound),
            (Some(&open), "owner", planner(), RefusalKindOf::NotAParty),
            (Some(&open), "ops", ops(), RefusalKindOf::Twice),
            (
                Some(&open),
                "planner",
                json!({"weights": 1}),
                RefusalKindOf::Input,
            ),
        ];
        for (current, party, position, want) in cases {
            let r = plan_submit(current, "db-choice", Some(party), &name(party), &position)
                .unwrap_err();
            assert_eq!(RefusalKindOf::of(&r), want, "{r}");
        }
        let r = plan_submit(
            Some(&open),
            "db-choice",
            Some("ops"),
            &name("planner"),
            &planner(),
        )
        .unwrap_err();
        assert_eq!(RefusalKindOf::of(&r), RefusalKindOf::ForAnother);
        let settled = through_planners(
            &base_spec(),
            &[("ops".into(), ops()), ("planner".into(), planner())],
        );
        assert_eq!(settled.status(), Status::Agreement);
        let r = plan_submit(
            Some(&settled),
            "db-choice",
            Some("ops"),
            &name("ops"),
            &ops(),
        )
        .unwrap_err();
        assert_eq!(RefusalKindOf::of(&r), RefusalKindOf::Settled);
        let r = plan_open(
            Some(&open),
            spec(&base_spec()),
            &everyone(&spec(&base_spec())),
        )
        .unwrap_err();
        assert_eq!(
            r,
            Refusal::NegotiationExists {
                id: "db-choice".into()
            }
        );
    }

    /// [`base_spec`] with ops declared external.
    fn external_ops() -> Value {
        let mut v = base_spec();
        v["parties"][1]["external"] = json!(true);
        v
    }

    #[test]
    fn a_party_is_a_participant_unless_declared_external() {
        let s = spec(&base_spec());
        let r = plan_open(None, s.clone(), &[name("planner")]).unwrap_err();
        assert_eq!(
            refused_at(r),
            ("$.parties[1].name".to_owned(), Problem::Unregistered)
        );
        let external = external_ops();
        assert!(plan_open(None, spec(&external), &[name("planner")]).is_ok());
        let r = Spec::from_value(&{
            let mut v = base_spec();
            v["parties"][1]["external"] = json!("yes");
            v
        });
        assert_eq!(
            refused_at(r.unwrap_err()),
            (
                "$.parties[1].external".to_owned(),
                Problem::Expected(Expected::Boolean)
            )
        );
    }

    #[test]
    fn a_participant_submits_an_external_partys_position_for_it() {
        let external = external_ops();
        let opened = plan_open(None, spec(&external), &[name("planner")]).unwrap();
        let n = Negotiation::fold(None, &event(1, opened));
        let changes = plan_submit(
            n.as_ref(),
            "db-choice",
            Some("planner"),
            &name("ops"),
            &ops(),
        );
        assert!(changes.is_ok(), "{changes:?}");
    }

    #[test]
    fn a_settled_negotiation_opens_again_under_its_id_keeping_what_came_before() {
        let both = [("ops".into(), ops()), ("planner".into(), planner())];
        let first = through_planners(&base_spec(), &both);
        assert_eq!(first.status(), Status::Agreement);
        let again = sitting(Some(first.clone()), &base_spec(), &[]);
        assert_eq!(again.status(), Status::Open);
        assert_eq!(again.waiting_for().len(), 2, "positions start afresh");
        assert_eq!(again.earlier.len(), 1);
        assert_eq!(
            Some(&again.earlier[0].settlement),
            first.settlement.as_ref()
        );
        let settled = sitting(Some(first), &base_spec(), &both);
        assert_eq!(settled.status(), Status::Agreement);
        assert_eq!(settled.earlier.len(), 1);
    }

    #[derive(Debug, PartialEq)]
    enum RefusalKindOf {
        NotFound,
        NotAParty,
        Twice,
        Settled,
        Input,
        ForAnother,
    }

    impl RefusalKindOf {
        fn of(r: &Refusal) -> Self {
            match r {
                Refusal::NotFound {
                    record: Record::Negotiation,
                    ..
                } => Self::NotFound,
                Refusal::NotANegotiator { .. } => Self::NotAParty,
                Refusal::PositionSubmitted { .. } => Self::Twice,
                Refusal::NegotiationSettled { .. } => Self::Settled,
                Refusal::NegotiationInput { .. } => Self::Input,
                Refusal::OwnPosition { .. } => Self::ForAnother,
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    // ---- properties over random small instances ---------------------------------------------

    const NAMES: [&str; 4] = ["ann", "bob", "cy", "dee"];

    /// A small random negotiation as JSON: the spec and each party's position.
    #[derive(Debug, Clone)]
    struct Instance {
        spec: Value,
        positions: Vec<(String, Value)>,
    }

    fn weight() -> impl Strategy<Value = f64> {
        prop_oneof![Just(0.0), Just(0.5), Just(1.0), Just(2.0), 0.0..2.0f64]
    }

    fn utility() -> impl Strategy<Value = f64> {
        prop_oneof![Just(0.0), Just(0.25), Just(0.5), Just(1.0), 0.0..=1.0f64]
    }

    fn floor() -> impl Strategy<Value = f64> {
        prop_oneof![Just(0.0), Just(0.5), Just(1.0), Just(1.5), 0.0..3.0f64]
    }

    /// A partial outcome: each issue named with probability one half (maybe none).
    fn partial(sizes: &[usize]) -> Vec<BoxedStrategy<Option<usize>>> {
        sizes
            .iter()
            .map(|&m| prop::option::weighted(0.4, 0..m).boxed())
            .collect()
    }

    fn clause_json(picks: &[Option<usize>]) -> Option<Value> {
        let map: Map<String, Value> = picks
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.map(|j| (format!("i{i}"), json!(format!("o{j}")))))
            .collect();
        (!map.is_empty()).then_some(Value::Object(map))
    }

    fn instance() -> impl Strategy<Value = Instance> {
        (
            prop::collection::vec(1usize..=4, 1..=4),
            2usize..=4,
            1u32..=6,
        )
            .prop_flat_map(|(sizes, n, rounds)| {
                let position = (
                    prop::collection::vec(weight(), sizes.len()),
                    sizes
                        .iter()
                        .map(|&m| prop::collection::vec(utility(), m))
                        .collect::<Vec<_>>(),
                    floor(),
                    prop::collection::vec(partial(&sizes), 0..=2),
                );
                (
                    Just(sizes.clone()),
                    Just(rounds),
                    prop::collection::vec(partial(&sizes), 0..=2),
                    prop::collection::vec(position, n),
                )
            })
            .prop_map(|(sizes, rounds, constraints, positions)| {
                let issues: Vec<Value> = sizes
                    .iter()
                    .enumerate()
                    .map(|(i, &m)| {
                        json!({"name": format!("i{i}"),
                               "options": (0..m).map(|j| format!("o{j}")).collect::<Vec<_>>()})
                    })
                    .collect();
                let constraints: Vec<Value> =
                    constraints.iter().filter_map(|c| clause_json(c)).collect();
                let parties: Vec<Value> = (0..positions.len())
                    .map(|p| json!({"name": NAMES[p]}))
                    .collect();
                let spec = json!({"id": "prop", "rounds": rounds, "issues": issues,
                                  "constraints": constraints, "parties": parties});
                let positions = positions
                    .into_iter()
                    .enumerate()
                    .map(|(p, (weights, utilities, floor, vetoes))| {
                        let weights: Map<String, Value> = weights
                            .iter()
                            .enumerate()
                            .map(|(i, w)| (format!("i{i}"), json!(w)))
                            .collect();
                        let utilities: Map<String, Value> = utilities
                            .iter()
                            .enumerate()
                            .map(|(i, us)| {
                                let per: Map<String, Value> = us
                                    .iter()
                                    .enumerate()
                                    .map(|(j, u)| (format!("o{j}"), json!(u)))
                                    .collect();
                                (format!("i{i}"), Value::Object(per))
                            })
                            .collect();
                        let veto: Vec<Value> =
                            vetoes.iter().filter_map(|v| clause_json(v)).collect();
                        (
                            NAMES[p].to_owned(),
                            json!({"weights": weights, "utilities": utilities,
                                   "floor": floor, "veto": veto}),
                        )
                    })
                    .collect();
                Instance { spec, positions }
            })
    }

    impl Instance {
        fn parsed(&self) -> (Spec, BTreeMap<String, Position>) {
            let spec = Spec::from_value(&self.spec).expect("a generated spec is valid");
            let positions = self
                .positions
                .iter()
                .map(|(name, v)| {
                    let p = Position::from_value(v, &spec, name).expect("a valid position");
                    (name.clone(), p)
                })
                .collect();
            (spec, positions)
        }
    }

    /// Every outcome of `spec`, by brute force.
    fn outcomes(spec: &Spec) -> Vec<Choices> {
        let mut all = vec![Choices::default()];
        for issue in &spec.issues {
            all = all
                .into_iter()
                .flat_map(|c| {
                    issue.options.iter().map(move |o| {
                        let mut next = c.clone();
                        next.0.push((issue.name.clone(), o.clone()));
                        next
                    })
                })
                .collect();
        }
        all
    }

    fn feasible(spec: &Spec, o: &Choices) -> bool {
        !spec.constraints.iter().any(|c| c.matched_by(o))
    }

    /// The zone of agreement: feasible outcomes every party accepts.
    fn zone(spec: &Spec, positions: &BTreeMap<String, Position>) -> Vec<Choices> {
        outcomes(spec)
            .into_iter()
            .filter(|o| feasible(spec, o))
            .filter(|o| {
                positions
                    .values()
                    .all(|p| p.answer(spec, o) == Answer::Accept)
            })
            .collect()
    }

    /// Every outcome as the search's picks, in the spec's order.
    fn picks(model: &Model) -> Vec<Pick> {
        let mut all = vec![[0u8; MAX_ISSUES]];
        for (i, &m) in model.sizes.iter().enumerate() {
            all = all
                .into_iter()
                .flat_map(|p| {
                    (0..m as u8).map(move |j| {
                        let mut next = p;
                        next[i] = j;
                        next
                    })
                })
                .collect();
        }
        all
    }

    /// The best outcome for `goal` by brute force: the highest rank, ties to the first.
    fn brute_force(model: &Model, goal: Goal<'_>) -> Option<Pick> {
        let mut best: Option<(Vec<f64>, Pick)> = None;
        for pick in picks(model) {
            let outcome = model.choices(&pick);
            if !feasible(model.spec, &outcome) {
                continue;
            }
            let admitted = match goal {
                Goal::Offer { proposer, offered } => {
                    !offered.contains(&pick)
                        && model.bidders[proposer].position.vetoed(&outcome).is_none()
                }
                Goal::Mediate => model
                    .bidders
                    .iter()
                    .all(|b| b.position.answer(model.spec, &outcome) == Answer::Accept),
            };
            if !admitted {
                continue;
            }
            let u: Vec<f64> = model
                .bidders
                .iter()
                .map(|b| b.position.utility(model.spec, &outcome))
                .collect();
            let (mut rank, mut scratch) = (Vec::new(), Vec::new());
            model.rank(goal, &u, &mut rank, &mut scratch);
            if best
                .as_ref()
                .is_none_or(|(b, _)| compare(&rank, b) == Ordering::Greater)
            {
                best = Some((rank, pick));
            }
        }
        best.map(|(_, pick)| pick)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn the_search_finds_what_brute_force_ranks_first(inst in instance()) {
            let (spec, positions) = inst.parsed();
            let model = Model::new(&spec, &positions);
            prop_assert_eq!(model.search(Goal::Mediate), brute_force(&model, Goal::Mediate));
            let first = picks(&model)[0];
            for proposer in 0..model.bidders.len() {
                for offered in [&[][..], &[first][..]] {
                    let goal = Goal::Offer { proposer, offered };
                    prop_assert_eq!(model.search(goal), brute_force(&model, goal));
                }
            }
        }

        #[test]
        fn the_same_spec_and_positions_settle_the_same_whatever_the_order(
            inst in instance(),
            rotate in 0usize..4,
            reverse in any::<bool>(),
        ) {
            let mut submissions = inst.positions.clone();
            let forward = through_planners(&inst.spec, &submissions).settlement.unwrap();
            let len = submissions.len();
            submissions.rotate_left(rotate % len);
            if reverse {
                submissions.reverse();
            }
            let mut shuffled_spec = inst.spec.clone();
            let parties = shuffled_spec["parties"].as_array_mut().unwrap();
            let len = parties.len();
            parties.rotate_left(rotate % len);
            if !reverse {
                parties.reverse();
            }
            let again = through_planners(&shuffled_spec, &submissions).settlement.unwrap();
            prop_assert_eq!(forward, again);
        }

        #[test]
        fn every_settlement_is_safe_rational_efficient_and_walks_away_only_when_it_must(
            inst in instance(),
        ) {
            let (spec, positions) = inst.parsed();
            let settled = settle(&spec, &positions);
            let zone = zone(&spec, &positions);

            // The trail: numbered rounds within the limit, every party answers every offer
            // as its position says, and no offer breaches a hard constraint (safety).
            prop_assert!(settled.trail.len() <= spec.rounds as usize);
            for (i, offer) in settled.trail.iter().enumerate() {
                prop_assert_eq!(offer.round as usize, i + 1);
                prop_assert!(feasible(&spec, &offer.outcome), "offer {} breaches a constraint", offer.round);
                prop_assert_eq!(offer.answers.len(), positions.len());
                for (party, p) in &positions {
                    prop_assert_eq!(offer.answers[party], p.answer(&spec, &offer.outcome));
                }
            }

            match &settled.resolution {
                Resolution::Agreement { outcome } => {
                    // Individual rationality: every floor met, no veto matched.
                    for p in positions.values() {
                        prop_assert_eq!(p.answer(&spec, outcome), Answer::Accept);
                    }
                    prop_assert_eq!(&settled.trail.last().unwrap().outcome, outcome);
                    // Efficiency: no feasible outcome nobody vetoes is at least as good for
                    // every party and better for one.
                    let u: Vec<f64> = positions.values().map(|p| p.utility(&spec, outcome)).collect();
                    for other in outcomes(&spec) {
                        if !feasible(&spec, &other) || positions.values().any(|p| p.vetoed(&other).is_some()) {
                            continue;
                        }
                        let v: Vec<f64> = positions.values().map(|p| p.utility(&spec, &other)).collect();
                        let dominates = v.iter().zip(&u).all(|(a, b)| a >= b)
                            && v.iter().zip(&u).any(|(a, b)| a > b);
                        prop_assert!(!dominates, "{} dominates {}", other.text(), outcome.text());
                    }
                }
                Resolution::WalkAway { ended, unsettled, .. } => {
                    prop_assert!(!unsettled.is_empty());
                    match ended {
                        Ended::NoZone => prop_assert!(zone.is_empty(), "a zone existed"),
                        Ended::RoundLimit => {
                            prop_assert!(!zone.is_empty());
                            prop_assert_eq!(settled.trail.len(), spec.rounds as usize);
                        }
                    }
                }
            }
            // Walk away exactly when there is no zone, or the limit ends it first: with
            // room for every party's offer and the mediator's, a zone means agreement.
            if zone.is_empty() {
                let no_zone = matches!(settled.resolution, Resolution::WalkAway { ended: Ended::NoZone, .. });
                prop_assert!(no_zone);
            } else if spec.rounds as usize > positions.len() {
                let agreed = matches!(settled.resolution, Resolution::Agreement { .. });
                prop_assert!(agreed);
            }
        }
    }
}
