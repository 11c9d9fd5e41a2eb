//! Reading a spec or a position from untrusted JSON: each check refuses at the JSON path
//! of the first problem, and no refusal ever quotes a value from a position.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{
    Choices, Issue, MAX_ISSUES, MAX_NAME, MAX_OPTIONS, MAX_OUTCOMES, MAX_PARTIES, MAX_ROUNDS,
    MAX_WEIGHT, MIN_PARTIES, Party, Position, Spec,
};
use crate::names::{NameError, Passname, check_slug};
use crate::refusal::Refusal;

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
pub(super) struct JsonPath(String);

impl JsonPath {
    pub(super) fn root() -> Self {
        Self("$".to_owned())
    }

    pub(super) fn key(&self, key: &str) -> Self {
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

    pub(super) fn index(&self, i: usize) -> Self {
        Self(format!("{}[{i}]", self.0))
    }
}

pub(super) fn problem(input: &Input, path: &JsonPath, problem: Problem) -> Refusal {
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

impl Spec {
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
