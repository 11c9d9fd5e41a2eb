//! Baton's contract extension `x-baton` and its rules, in the AWL finding
//! shape:
//!
//! | rule | what it refuses |
//! |---|---|
//! | B0 | a document that cannot be read at all (not UTF-8, not JSON, too large or deep, not an object) |
//! | B1 | the acceptance owner (or a reviewer) is the implementer |
//! | B2 | a `base_revision` that does not resolve in the repository |
//! | B3 | a `setup_command`/`test_command` whose program is neither a file in the repository nor on PATH |
//! | B4 | an empty `stop_when` (or an empty condition in it) |
//! | B5 | a `decision.resume_at` that is no concrete action ("continue", "keep going", …) |
//! | B6 | anything that looks like a secret, anywhere in the document |
//! | B7 | a report's evidence that breaks the five-part protocol (an empty `uncertainty` above all) |
//! | B8 | an `x-baton` block of the wrong shape (unknown fields, wrong types) |
//! | B9 | a contract field the project requires (`contract = "required"`) is missing |
//! | B10 | a placeholder left from `baton handoff new` (a string starting `<fill in:`) |
//! | B11 | an `after` past its bound, with an empty entry, a repeat, or the order itself |
//!
//! Checks that need the world (B2, B3) ask an [`Environment`]; one that cannot tell
//! ([`NoEnvironment`]) leaves them unchecked rather than guessing.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::schema::{Seg, pointer};
use super::{DocumentKind, Finding, secrets};

/// What B2 and B3 need to know about the repository and the machine. The binary answers
/// with git and the file system; `None` means "cannot tell", and the rule is skipped.
pub trait Environment {
    /// Whether `revision` names a commit of the repository (`git rev-parse --verify`).
    fn revision_exists(&self, revision: &str) -> Option<bool>;
    /// Whether `program` is a file in the repository (when it has a `/`) or a program on
    /// PATH.
    fn program_exists(&self, program: &str) -> Option<bool>;
}

/// An environment that can tell nothing: B2 and B3 are not checked.
pub struct NoEnvironment;

impl Environment for NoEnvironment {
    fn revision_exists(&self, _: &str) -> Option<bool> {
        None
    }
    fn program_exists(&self, _: &str) -> Option<bool> {
        None
    }
}

/// Whether a project requires the contract on every order (the default) or accepts plain
/// AWL documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContractMode {
    #[default]
    Required,
    Optional,
}

impl ContractMode {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "required" => Some(Self::Required),
            "optional" => Some(Self::Optional),
            _ => None,
        }
    }
}

/// The five parts of the evidence protocol, in order.
pub const EVIDENCE_PARTS: [&str; 5] = ["before", "change", "after", "uncertainty", "review"];

// ---- typed contract -----------------------------------------------------------------------

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContractContext {
    pub repository: Option<String>,
    pub base_revision: Option<String>,
    pub reproduction: Option<String>,
    pub expected: Option<String>,
    pub fixtures: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Scope {
    pub allowed: Option<Vec<String>>,
    pub excluded: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Execution {
    pub operator: Option<String>,
    pub setup_command: Option<String>,
    pub test_command: Option<String>,
    pub permissions: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// Evidence parts the report must carry whatever its status.
    pub required: Option<Vec<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Acceptance {
    pub owner: Option<String>,
    pub reviewers: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rejected {
    pub option: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContractDecision {
    pub decision: Option<String>,
    pub evidence: Option<Vec<String>>,
    pub rejected: Option<Vec<Rejected>>,
    pub invariants: Option<Vec<String>>,
    pub resume_at: Option<String>,
    pub rollback: Option<String>,
}

/// An order's `x-baton` block: the handoff contract.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Contract {
    pub context: Option<ContractContext>,
    pub scope: Option<Scope>,
    pub execution: Option<Execution>,
    pub delivery: Option<Delivery>,
    pub acceptance: Option<Acceptance>,
    pub stop_when: Option<Vec<String>>,
    pub decision: Option<ContractDecision>,
    /// The orders this one waits on (`crate::after`).
    pub after: Option<Vec<String>>,
}

impl Contract {
    /// The contract of an order, when it has a well-formed one (B8 clean).
    pub fn of(order: &Value) -> Option<Self> {
        let block = order.get("x-baton")?;
        if !shape(block, &ORDER_SHAPE, "/x-baton").is_empty() {
            return None;
        }
        serde_json::from_value(block.clone()).ok()
    }
}

// ---- shape (B8) ---------------------------------------------------------------------------

enum Shape {
    Text,
    Texts,
    /// An integer, or `null` for "unknown".
    ExitCode,
    Object(&'static [(&'static str, Shape)], &'static [&'static str]),
    List(&'static Shape),
    Part,
    Uncertainty,
}

const RUN: Shape = Shape::Object(
    &[
        ("command", Shape::Text),
        ("exit_code", Shape::ExitCode),
        ("output", Shape::Text),
        ("base_revision", Shape::Text),
        ("receipt", Shape::Text),
    ],
    &["command"],
);

const CHANGE_ITEM: Shape = Shape::Object(
    &[("file", Shape::Text), ("reason", Shape::Text)],
    &["file", "reason"],
);
const REJECTED_ITEM: Shape = Shape::Object(
    &[("option", Shape::Text), ("reason", Shape::Text)],
    &["option", "reason"],
);

const ORDER_SHAPE: Shape = Shape::Object(
    &[
        (
            "context",
            Shape::Object(
                &[
                    ("repository", Shape::Text),
                    ("base_revision", Shape::Text),
                    ("reproduction", Shape::Text),
                    ("expected", Shape::Text),
                    ("fixtures", Shape::Texts),
                ],
                &[],
            ),
        ),
        (
            "scope",
            Shape::Object(
                &[("allowed", Shape::Texts), ("excluded", Shape::Texts)],
                &[],
            ),
        ),
        (
            "execution",
            Shape::Object(
                &[
                    ("operator", Shape::Text),
                    ("setup_command", Shape::Text),
                    ("test_command", Shape::Text),
                    ("permissions", Shape::Text),
                ],
                &[],
            ),
        ),
        (
            "delivery",
            Shape::Object(&[("required", Shape::List(&Shape::Part))], &[]),
        ),
        (
            "acceptance",
            Shape::Object(&[("owner", Shape::Text), ("reviewers", Shape::Texts)], &[]),
        ),
        ("stop_when", Shape::Texts),
        ("after", Shape::Texts),
        (
            "decision",
            Shape::Object(
                &[
                    ("decision", Shape::Text),
                    ("evidence", Shape::Texts),
                    ("rejected", Shape::List(&REJECTED_ITEM)),
                    ("invariants", Shape::Texts),
                    ("resume_at", Shape::Text),
                    ("rollback", Shape::Text),
                ],
                &[],
            ),
        ),
    ],
    &[],
);

const REPORT_SHAPE: Shape = Shape::Object(
    &[(
        "evidence",
        Shape::Object(
            &[
                ("before", RUN),
                ("change", Shape::List(&CHANGE_ITEM)),
                ("after", RUN),
                ("uncertainty", Shape::Uncertainty),
                (
                    "review",
                    Shape::Object(
                        &[("commit", Shape::Text), ("acceptance_owner", Shape::Text)],
                        &[],
                    ),
                ),
            ],
            &[],
        ),
    )],
    &[],
);

fn shape(v: &Value, s: &Shape, path: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    check_shape(v, s, path, &mut out);
    out
}

fn check_shape(v: &Value, s: &Shape, path: &str, out: &mut Vec<Finding>) {
    let bad = |what: &str| Finding::invalid("B8", path, format!("must be {what}"));
    match s {
        Shape::Text => {
            if !v.is_string() {
                out.push(bad("a string"));
            }
        }
        Shape::Texts => check_shape(v, &Shape::List(&Shape::Text), path, out),
        Shape::ExitCode => {
            if !(v.is_null() || v.is_i64() || v.is_u64()) {
                out.push(bad("an integer exit code, or null when unknown"));
            }
        }
        Shape::Part => {
            if !v.as_str().is_some_and(|p| EVIDENCE_PARTS.contains(&p)) {
                out.push(bad("one of before, change, after, uncertainty, review"));
            }
        }
        Shape::Uncertainty => match v {
            Value::Array(_) => check_shape(v, &Shape::Texts, path, out),
            Value::Object(o) if o.len() == 1 && o.get("none") == Some(&Value::Bool(true)) => {}
            _ => out.push(bad(
                "a list of the checks not run (each with why), or {\"none\": true}",
            )),
        },
        Shape::List(item) => match v {
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    check_shape(x, item, &format!("{path}/{i}"), out);
                }
            }
            _ => out.push(bad("a list")),
        },
        Shape::Object(fields, required) => {
            let Value::Object(o) = v else {
                out.push(bad("an object"));
                return;
            };
            for key in o.keys() {
                if !fields.iter().any(|(k, _)| k == key) {
                    out.push(Finding::invalid(
                        "B8",
                        path,
                        format!("unknown field {key:?}"),
                    ));
                }
            }
            for r in *required {
                if !o.contains_key(*r) {
                    out.push(Finding::invalid("B8", path, format!("{r:?} is required")));
                }
            }
            for (k, sub) in *fields {
                if let Some(x) = o.get(*k) {
                    let p = format!("{path}{}", pointer(&[Seg::Key((*k).to_owned())]));
                    check_shape(x, sub, &p, out);
                }
            }
        }
    }
}

// ---- helpers ------------------------------------------------------------------------------

fn at<'v>(v: &'v Value, keys: &[&str]) -> Option<&'v Value> {
    let mut node = v;
    for k in keys {
        node = node.as_object()?.get(*k)?;
    }
    Some(node)
}

fn text_at<'v>(v: &'v Value, keys: &[&str]) -> Option<&'v str> {
    at(v, keys)?.as_str()
}

fn blank(s: &str) -> bool {
    s.trim().is_empty()
}

/// Words that say "go on" without saying what to do.
const VAGUE: &[&str] = &[
    "continue",
    "keep going",
    "go on",
    "carry on",
    "proceed",
    "resume",
    "next",
    "next step",
    "keep working",
    "finish",
    "finish it",
    "finish up",
    "do it",
    "do the rest",
    "tbd",
    "todo",
    "to do",
    "n/a",
    "na",
    "none",
    "same as before",
    "as before",
    "as planned",
    "see above",
    "whatever",
    "etc",
    "pick up where i left off",
    "pick up where you left off",
    "pick up where we left off",
];
const FILLER: &[&str] = &[
    "with",
    "the",
    "work",
    "task",
    "tasks",
    "working",
    "where",
    "left",
    "off",
    "from",
    "there",
    "it",
    "on",
    "as",
    "before",
    "planned",
    "i",
    "we",
    "you",
    "to",
    "and",
    "then",
    "this",
    "that",
    "job",
    "implementation",
    "please",
    "just",
    "again",
    "same",
    "thing",
    "things",
    "rest",
    "of",
    "remaining",
    "stuff",
    "etc",
];
const OPENERS: &[&str] = &[
    "continue",
    "keep going",
    "go on",
    "carry on",
    "proceed",
    "resume",
];

/// Whether a `resume_at` names no concrete action.
pub fn is_vague_action(text: &str) -> bool {
    let norm: String = text
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '/' {
                c
            } else {
                ' '
            }
        })
        .collect();
    let norm = norm.split_whitespace().collect::<Vec<_>>().join(" ");
    if norm.is_empty() || VAGUE.contains(&norm.as_str()) {
        return true;
    }
    OPENERS.iter().any(|o| {
        norm.strip_prefix(o).is_some_and(|rest| {
            (rest.is_empty() || rest.starts_with(' '))
                && rest.split_whitespace().all(|w| FILLER.contains(&w))
        })
    })
}

/// Shell words of one simple command (quotes and backslashes honoured, enough to find the
/// program).
fn words(segment: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut has = false;
    let mut chars = segment.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                has = true;
            }
            (None, '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                    has = true;
                }
            }
            (None, c) if c.is_whitespace() => {
                if has || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            (None, c) => cur.push(c),
        }
    }
    if has || !cur.is_empty() {
        out.push(cur);
    }
    out
}

const BUILTINS: &[&str] = &[
    "cd", ".", "source", "export", "set", "unset", "true", "false", ":", "test", "[", "[[",
    "alias", "umask", "ulimit", "wait", "shift", "read", "trap", "eval", "pushd", "popd",
];
/// Words after which the next word is the program.
const PREFIXES: &[&str] = &["exec", "command", "builtin", "time", "nice", "nohup", "env"];

/// The programs a command line runs: the first word of each simple command (after
/// `NAME=value` assignments and prefixes like `exec`), shell builtins left out.
pub fn programs(command: &str) -> Vec<String> {
    let mut segments = vec![String::new()];
    let mut quote: Option<char> = None;
    let chars: Vec<char> = command.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == ';' || c == '|' || c == '&' || c == '\n' || c == '(' || c == ')' => {
                segments.push(String::new());
                i += 1;
                continue;
            }
            None => {}
        }
        if let Some(last) = segments.last_mut() {
            last.push(c);
        }
        i += 1;
    }
    let mut out = Vec::new();
    for seg in segments {
        let ws = words(&seg);
        let mut it = ws.into_iter().peekable();
        while let Some(w) = it.peek() {
            let is_assign = w.split_once('=').is_some_and(|(k, _)| {
                !k.is_empty() && k.chars().all(|c| c.is_alphanumeric() || c == '_')
            });
            if is_assign || PREFIXES.contains(&w.as_str()) {
                it.next();
            } else {
                break;
            }
        }
        if let Some(p) = it.next()
            && !BUILTINS.contains(&p.as_str())
            && !p.starts_with('-')
        {
            out.push(p);
        }
    }
    out
}

// ---- order rules --------------------------------------------------------------------------

/// B1–B8 on an order (with B6 over the whole document). A plain AWL order with no
/// secrets checks clean.
pub fn check_order_contract(order: &Value, env: &dyn Environment) -> Vec<Finding> {
    let mut out = secrets::scan(order);
    out.extend(placeholders(order));
    let Some(block) = order.get("x-baton") else {
        return out;
    };
    out.extend(shape(block, &ORDER_SHAPE, "/x-baton"));
    out.extend(crate::after::findings(order));
    let implementer = order.get("to").and_then(Value::as_str);
    if let (Some(owner), Some(to)) = (text_at(block, &["acceptance", "owner"]), implementer)
        && owner.trim() == to.trim()
    {
        out.push(Finding::invalid(
            "B1",
            "/x-baton/acceptance/owner",
            format!(
                "{owner:?} is the implementer (the order's \"to\"); acceptance needs someone else"
            ),
        ));
    }
    if let (Some(Value::Array(reviewers)), Some(to)) =
        (at(block, &["acceptance", "reviewers"]), implementer)
    {
        for (i, r) in reviewers.iter().enumerate() {
            if r.as_str().is_some_and(|r| r.trim() == to.trim()) {
                out.push(Finding::invalid(
                    "B1",
                    format!("/x-baton/acceptance/reviewers/{i}"),
                    "the implementer cannot review its own work",
                ));
            }
        }
    }
    if let Some(rev) = text_at(block, &["context", "base_revision"]) {
        check_revision(rev, "/x-baton/context/base_revision", env, &mut out);
    }
    for key in ["setup_command", "test_command"] {
        if let Some(cmd) = text_at(block, &["execution", key]) {
            check_command(cmd, &format!("/x-baton/execution/{key}"), env, &mut out);
        }
    }
    if let Some(Value::Array(conds)) = block.get("stop_when") {
        if conds.is_empty() {
            out.push(Finding::invalid(
                "B4",
                "/x-baton/stop_when",
                "stop_when is empty: name at least one condition under which the executor stops and reports",
            ));
        }
        for (i, c) in conds.iter().enumerate() {
            if c.as_str().is_some_and(blank) {
                out.push(Finding::invalid(
                    "B4",
                    format!("/x-baton/stop_when/{i}"),
                    "an empty stop condition",
                ));
            }
        }
    }
    if let Some(resume) = text_at(block, &["decision", "resume_at"])
        && is_vague_action(resume)
    {
        out.push(Finding::invalid(
                "B5",
                "/x-baton/decision/resume_at",
                "resume_at must be a concrete first action (a command to run, a file to open), not \"continue\"",
            ));
    }
    out
}

fn check_revision(rev: &str, path: &str, env: &dyn Environment, out: &mut Vec<Finding>) {
    if blank(rev) {
        out.push(Finding::invalid(
            "B2",
            path,
            "an empty revision; record the verified base commit",
        ));
        return;
    }
    if env.revision_exists(rev.trim()) == Some(false) {
        out.push(Finding::invalid(
            "B2",
            path,
            format!(
                "{rev:?} does not resolve to a commit in this repository (git rev-parse --verify)"
            ),
        ));
    }
}

fn check_command(cmd: &str, path: &str, env: &dyn Environment, out: &mut Vec<Finding>) {
    if blank(cmd) {
        out.push(Finding::invalid(
            "B3",
            path,
            "an empty command; name a verified command from this repository",
        ));
        return;
    }
    for program in programs(cmd) {
        if env.program_exists(&program) == Some(false) {
            out.push(Finding::invalid(
                "B3",
                path,
                format!("{program:?} is neither a file in the repository nor a program on PATH; do not invent commands"),
            ));
        }
    }
}

// ---- report rules -------------------------------------------------------------------------

/// B1, B2, B6, B7 and B8 on a report; `order` (when known) supplies the acceptance owner
/// and the evidence parts it requires.
pub fn check_report_contract(
    report: &Value,
    order: Option<&Value>,
    env: &dyn Environment,
) -> Vec<Finding> {
    let mut out = secrets::scan(report);
    out.extend(placeholders(report));
    let required: Vec<&str> = order
        .and_then(|o| at(o, &["x-baton", "delivery", "required"]))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(block) = report.get("x-baton") else {
        if !required.is_empty() {
            out.push(Finding::invalid(
                "B7",
                "/",
                format!(
                    "the order requires evidence ({}) under \"x-baton\"",
                    required.join(", ")
                ),
            ));
        }
        return out;
    };
    out.extend(shape(block, &REPORT_SHAPE, "/x-baton"));
    let done = report.get("status").and_then(Value::as_str) == Some("done");
    let Some(evidence) = block.get("evidence").and_then(Value::as_object) else {
        if done || !required.is_empty() {
            out.push(Finding::invalid(
                "B7",
                "/x-baton",
                "\"evidence\" is missing: before, change, after, uncertainty and review",
            ));
        }
        return out;
    };
    for part in EVIDENCE_PARTS {
        if !evidence.contains_key(part) && (done || required.contains(&part)) {
            out.push(Finding::invalid(
                "B7",
                "/x-baton/evidence",
                format!("the {part:?} part is missing"),
            ));
        }
    }
    check_uncertainty(evidence, &mut out);
    let from = report.get("from").and_then(Value::as_str);
    if let Some(owner) = evidence
        .get("review")
        .and_then(|r| r.get("acceptance_owner"))
        .and_then(Value::as_str)
    {
        let path = "/x-baton/evidence/review/acceptance_owner";
        if from.is_some_and(|f| f.trim() == owner.trim()) {
            out.push(Finding::invalid(
                "B1",
                path,
                "the implementer cannot be the acceptance owner",
            ));
        } else if let Some(named) =
            order.and_then(|o| text_at(o, &["x-baton", "acceptance", "owner"]))
            && named.trim() != owner.trim()
        {
            out.push(Finding::invalid(
                "B1",
                path,
                format!("the order names {named:?} as the acceptance owner"),
            ));
        }
    }
    if let Some(rev) = evidence
        .get("before")
        .and_then(|b| b.get("base_revision"))
        .and_then(Value::as_str)
    {
        check_revision(rev, "/x-baton/evidence/before/base_revision", env, &mut out);
    }
    out
}

fn check_uncertainty(evidence: &Map<String, Value>, out: &mut Vec<Finding>) {
    match evidence.get("uncertainty") {
        Some(Value::Array(items)) if items.is_empty() => out.push(Finding::invalid(
            "B7",
            "/x-baton/evidence/uncertainty",
            "an empty uncertainty is missing information: list the checks not run and why, or claim {\"none\": true}",
        )),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                if item.as_str().is_some_and(blank) {
                    out.push(Finding::invalid(
                        "B7",
                        format!("/x-baton/evidence/uncertainty/{i}"),
                        "an empty entry: say which check was not run and why",
                    ));
                }
            }
        }
        _ => {}
    }
}

// ---- placeholders (B10) ------------------------------------------------------------------

/// What `baton handoff new` writes where a person must decide.
pub const PLACEHOLDER: &str = "<fill in:";

/// One B10 finding per string still holding a placeholder, at its path.
pub fn placeholders(doc: &Value) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut stack: Vec<(String, &Value)> = vec![(String::new(), doc)];
    while let Some((path, v)) = stack.pop() {
        match v {
            Value::String(s) if s.trim_start().starts_with(PLACEHOLDER) => {
                out.push(Finding::invalid(
                    "B10",
                    if path.is_empty() {
                        "/".to_owned()
                    } else {
                        path
                    },
                    "a placeholder is left: decide it and write the value",
                ))
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate().rev() {
                    stack.push((format!("{path}/{i}"), x));
                }
            }
            Value::Object(o) => {
                for (k, x) in o.iter().rev() {
                    stack.push((format!("{path}{}", pointer(&[Seg::Key(k.clone())])), x));
                }
            }
            _ => {}
        }
    }
    out
}

// ---- required by configuration (B9) -------------------------------------------------------

/// Fields an order must carry under `contract = "required"`.
pub const REQUIRED_ORDER_FIELDS: &[&[&str]] = &[
    &["context", "repository"],
    &["context", "base_revision"],
    &["context", "reproduction"],
    &["context", "expected"],
    &["scope", "allowed"],
    &["scope", "excluded"],
    &["execution", "test_command"],
    &["acceptance", "owner"],
    &["stop_when"],
    &["decision", "resume_at"],
];

/// The `x-baton` fields missing from a document under `contract = "required"`, as JSON
/// Pointers (`/x-baton/acceptance/owner`, …). An order needs [`REQUIRED_ORDER_FIELDS`]; a
/// `done` report needs the five evidence parts. Empty: nothing missing.
pub fn missing_contract_fields(doc: &Value) -> Vec<String> {
    let block = doc.get("x-baton");
    let mut out = Vec::new();
    match DocumentKind::of(doc) {
        DocumentKind::Order => {
            for keys in REQUIRED_ORDER_FIELDS {
                if block.and_then(|b| at(b, keys)).is_none_or(Value::is_null) {
                    out.push(format!("/x-baton/{}", keys.join("/")));
                }
            }
        }
        DocumentKind::Report => {
            if doc.get("status").and_then(Value::as_str) == Some("done") {
                for part in EVIDENCE_PARTS {
                    if block
                        .and_then(|b| at(b, &["evidence", part]))
                        .is_none_or(Value::is_null)
                    {
                        out.push(format!("/x-baton/evidence/{part}"));
                    }
                }
            }
        }
    }
    out
}

/// B9 findings for [`missing_contract_fields`], each at the missing field's parent (the
/// AWL convention for missing fields).
pub fn contract_required_findings(doc: &Value) -> Vec<Finding> {
    missing_contract_fields(doc)
        .into_iter()
        .map(|p| {
            let (parent, field) = p.rsplit_once('/').unwrap_or(("", p.as_str()));
            Finding::invalid(
                "B9",
                if parent.is_empty() { "/" } else { parent },
                format!("{field:?} is required by this project's contract (contract = \"required\"); missing: {p}"),
            )
        })
        .collect()
}
