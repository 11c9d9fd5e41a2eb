//! Every operation a user or agent can do, declared once: its name, what it takes of the
//! caller's authority, whether it needs this machine, whether repeating it changes
//! nothing more, and the roles whose MCP profile holds it. The edges read their shape from
//! here — which MCP tools a role is offered, which tools change nothing (what a read key
//! may call) and are idempotent — instead of keeping lists of their own.
//!
//! A *typed* operation ([`Typed`]) declares more: its input type (serde and JSON Schema),
//! its output document, its HTTP route and its summary. The edges are generic over these:
//! the HTTP routes and their OpenAPI entries, the MCP tools and the command line's remote
//! client are made from the declaration, and every edge runs it through one dispatcher
//! ([`App::dispatch`]): the caller's key scope, the input fitted to its type, the use case
//! (whose write path asks the core's authority rules and records a refusal once).
//!
//! The power an operation takes is enforced once, in the store's write path, by the
//! core's rules (`baton_core::authority`); a declaration names that power so the edges
//! and the tests can be held to it (every write takes one, memory writes included).

mod admin;
pub mod hints;
mod memory;
mod messages;
mod orders;
mod reads;
mod reservations;
mod steps;
mod watch;

use std::future::Future;

use baton_core::Refusal;
use baton_core::key::Scope;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::doc::Doc;
use crate::{App, Result};

// Each group's public declarations (an operation's unit struct and its input type) are
// the module's: a new operation is written in its group's file alone. A name this file
// imports would hide a group's declaration of that name, so it imports few (`std::pin::Pin`
// is named by its path, so an operation may be called `Pin`).
pub use admin::*;
pub use memory::*;
pub use messages::*;
pub use orders::*;
pub use reads::*;
pub use reservations::*;
pub use steps::*;
pub use watch::*;

use baton_core::authority::Power;

/// What an operation takes of the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// It changes nothing: any participant may, with any key.
    Read,
    /// A step on what was sent to oneself (acknowledge, hand back, refuse, archive) or on
    /// one's own request: no power, only being its party. Whatever a participant was sent
    /// it can always close.
    Own,
    /// This power (on the operation's topic, where it has one).
    Power(Power),
    /// One of these, as the input decides: a request takes `request` and a message
    /// `send`; a recipient's completion `accept`; an order's worker steps `accept` and
    /// its sender `approve`.
    OneOf(&'static [Power]),
    /// Administration: the machine holding the store, or an admin key.
    Admin,
}

impl Needs {
    /// Whether the operation writes.
    pub fn writes(self) -> bool {
        self != Self::Read
    }
}

/// Where an operation can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Wherever the store is reached: locally, or over a server.
    Anywhere,
    /// Only where the project's checkout and processes are: it runs a process, reads the
    /// checkout or opens the store's files.
    Local,
}

/// A participant role with an MCP profile of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Executor,
    Planner,
    Reviewer,
    Owner,
}

impl Role {
    pub const ALL: [Role; 4] = [Self::Executor, Self::Planner, Self::Reviewer, Self::Owner];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Executor => "executor",
            Self::Planner => "planner",
            Self::Reviewer => "reviewer",
            Self::Owner => "owner",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// One operation.
#[derive(Debug, Clone, Copy)]
pub struct Operation {
    /// Its name: the command's words (`order approve`).
    pub name: &'static str,
    /// Its MCP tool, when agents reach it over MCP.
    pub tool: Option<&'static str>,
    pub needs: Needs,
    pub reach: Reach,
    /// Repeating it with the same input changes nothing more.
    pub idempotent: bool,
    /// Reading it marks what was pending for its reader delivered, when the reader's key
    /// may write: a change of one's own, never refused (a read key reads without it).
    pub delivers: bool,
    /// The roles whose MCP profile holds its tool.
    pub roles: &'static [Role],
    /// It may wait (up to [`MAX_WAIT`]): a server gives it that long and a little more.
    pub waits: bool,
    /// `baton board` serves it without a key (a project-wide read, on loopback only).
    pub on_board: bool,
    /// Its input, output and route, when the edges are made from the declaration.
    pub typed: Option<Declared>,
}

impl Operation {
    /// The key scope it takes on a server: a read's, an administrator's, or a writer's.
    pub fn scope(&self) -> Scope {
        match self.needs {
            Read => Scope::Read,
            Admin => Scope::Admin,
            Own | Power(_) | OneOf(_) => Scope::Write,
        }
    }
}

/// An HTTP method a route answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
}

/// Where a typed operation is reached over HTTP, under `/v1/projects/{project}`. A
/// `{name}` segment of the path is the input's field `name`; the rest of the input is the
/// query (`GET`) or the JSON body (`POST`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub method: Method,
    pub path: &'static str,
}

impl Route {
    /// The input fields the path names, in order.
    pub fn params(&self) -> impl Iterator<Item = &'static str> {
        self.path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
    }

    /// The path's segments with `input`'s fields in place of their names, those fields
    /// taken out of `input` (what is left is the query or the body); `None` when a field
    /// the path names is missing or is not a string.
    pub fn fill(&self, input: &mut serde_json::Map<String, Value>) -> Option<Vec<String>> {
        self.path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(
                |segment| match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                    Some(field) => match input.remove(field) {
                        Some(Value::String(value)) => Some(value),
                        _ => None,
                    },
                    None => Some(segment.to_owned()),
                },
            )
            .collect()
    }
}

/// The route `method path`.
pub(crate) const fn route(method: Method, path: &'static str) -> Route {
    Route { method, path }
}

pub(crate) const GET: Method = Method::Get;
pub(crate) const POST: Method = Method::Post;

/// What a typed operation declares beyond the table's row.
#[derive(Clone, Copy)]
pub struct Declared {
    /// What it does, in a sentence: the MCP tool's description and the route's summary.
    pub summary: &'static str,
    pub route: Route,
    /// The `schema` of the document it answers when the document's type has none of its
    /// own ([`crate::doc::Recorded`]: the operation's, as `baton/decide@1`).
    pub schema: Option<&'static str>,
    pub call: &'static dyn Call,
}

impl std::fmt::Debug for Declared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Declared")
            .field("summary", &self.summary)
            .field("route", &self.route)
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

/// An operation with a typed input and output: one declaration (its table row, [`Typed::OP`])
/// and one use case ([`Typed::run`]), which every edge reaches through [`App::dispatch`].
pub trait Typed: Send + Sync + 'static {
    /// What it takes: the MCP tool's arguments, the HTTP request's path, query and body,
    /// what the command line builds from its arguments.
    type Input: DeserializeOwned + Serialize + JsonSchema + Send;
    /// The document it answers, alike on every edge.
    type Output: Doc + DeserializeOwned + JsonSchema + Send;
    /// Its row of [`OPERATIONS`].
    const OP: Operation;
    /// Runs it as `who` (a participant, or the machine's own `@local`, with what its key
    /// allows).
    fn run(
        app: &App,
        who: Who<'_>,
        input: Self::Input,
    ) -> impl Future<Output = Result<Self::Output>> + Send;
}

/// A future the dispatcher returns.
pub type Running<'a> = std::pin::Pin<Box<dyn Future<Output = Result<Value>> + Send + 'a>>;

/// A typed operation seen without its types: what an edge generic over the declarations
/// holds.
pub trait Call: Sync {
    /// Its input's JSON Schema, from `generator`.
    fn input(&self, generator: &mut SchemaGenerator) -> Schema;
    /// Its output's JSON Schema, from `generator`.
    fn output(&self, generator: &mut SchemaGenerator) -> Schema;
    /// Runs it on a JSON input (fitted to its type here) as `who`.
    fn run<'a>(&'a self, app: &'a App, who: Who<'a>, input: Value) -> Running<'a>;
    /// Its input from a query string and the path's fields (a `GET` route's), as JSON.
    fn query(&self, query: &str, path: Vec<(String, String)>) -> Result<Value>;
}

/// The one instance of a typed operation: what [`Typed::OP`]'s `call` points at.
pub struct The<T>(std::marker::PhantomData<fn() -> T>);

impl<T> The<T> {
    pub const ONE: Self = Self(std::marker::PhantomData);
}

impl<T: Typed> Call for The<T> {
    fn input(&self, generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<T::Input>()
    }

    fn output(&self, generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<T::Output>()
    }

    fn query(&self, query: &str, path: Vec<(String, String)>) -> Result<Value> {
        let misfit = |e: &dyn std::fmt::Display| refused(T::OP.name, e.to_string());
        let mut pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(query).map_err(|e| misfit(&e))?;
        for (name, value) in path {
            if pairs.iter().any(|(n, _)| *n == name) {
                return Err(refused(
                    T::OP.name,
                    format!("`{name}` is named by the path"),
                ));
            }
            pairs.push((name, value));
        }
        let text = serde_urlencoded::to_string(&pairs).map_err(|e| misfit(&e))?;
        let input: T::Input = serde_urlencoded::from_str(&text).map_err(|e| misfit(&e))?;
        Ok(serde_json::to_value(input).expect("an input serializes"))
    }

    fn run<'a>(&'a self, app: &'a App, who: Who<'a>, input: Value) -> Running<'a> {
        Box::pin(async move {
            let input = fit::<T::Input>(T::OP.name, input)?;
            let output = T::run(app, who, input).await?;
            Ok(serde_json::to_value(output).expect("a document serializes"))
        })
    }
}

/// The refusal of an input of `operation` that does not fit, saying what is wrong.
pub(crate) fn refused(
    operation: &'static str,
    problem: impl Into<String>,
) -> baton_store::StoreError {
    Refusal::Input {
        operation,
        problem: problem.into(),
    }
    .into()
}

/// `input` as the operation `name`'s input type, or the refusal naming what does not fit.
/// The problem names the field (`` `lane`: unknown variant … ``).
fn fit<I: DeserializeOwned>(name: &'static str, input: Value) -> Result<I> {
    serde_path_to_error::deserialize(input).map_err(|e| {
        let problem = match e.path().to_string().as_str() {
            "." => e.inner().to_string(),
            path => format!("`{path}`: {}", e.inner()),
        };
        // The parser's words quote the value (and a path the keys) it refused, however
        // long: a short prefix of them names the field and what was wrong, on every edge
        // alike.
        refused(name, baton_core::packet::clip(&problem, INPUT_WORDS))
    })
}

/// The most of the parser's words an input refusal quotes, in bytes.
const INPUT_WORDS: usize = 240;

/// The declaration of a typed operation, as its row of the table: not offered over MCP
/// and not idempotent until said ([`Operation::offered`], [`Operation::idempotent`]).
pub const fn typed(
    name: &'static str,
    needs: Needs,
    route: Route,
    summary: &'static str,
    call: &'static dyn Call,
) -> Operation {
    let mut row = op(name, needs);
    row.typed = Some(Declared {
        summary,
        route,
        schema: None,
        call,
    });
    row
}

impl Operation {
    /// Offered over MCP as `tool`, in the profiles of `roles`.
    pub const fn offered(mut self, tool: &'static str, roles: &'static [Role]) -> Self {
        self.tool = Some(tool);
        self.roles = roles;
        self
    }

    /// Its answer's `schema` is `schema` (for a document whose type has none of its own).
    pub const fn naming(mut self, schema: &'static str) -> Self {
        if let Some(declared) = &mut self.typed {
            declared.schema = Some(schema);
        }
        self
    }

    /// Repeating it with the same input changes nothing more.
    pub const fn idempotent(mut self) -> Self {
        self.idempotent = true;
        self
    }

    /// It may wait ([`Operation::waits`]).
    pub const fn waits(mut self) -> Self {
        self.waits = true;
        self
    }

    /// Served without a key by `baton board` ([`Operation::on_board`]).
    pub const fn on_board(mut self) -> Self {
        self.on_board = true;
        self
    }

    /// Reading it marks what was pending for its reader delivered ([`Operation::delivers`]).
    pub const fn delivers(mut self) -> Self {
        self.delivers = true;
        self
    }

    /// Whether it may change anything: a write, or a read that delivers.
    pub fn changes(&self) -> bool {
        self.needs.writes() || self.delivers
    }
}

/// Who runs an operation: the acting name (a participant, or the machine's own `@local`)
/// and what its key allows (everything, on the machine holding the store).
#[derive(Debug, Clone, Copy)]
pub struct Who<'a> {
    pub actor: &'a str,
    pub scope: Scope,
}

impl<'a> Who<'a> {
    /// On the machine holding the store: its operator may do anything its policy allows.
    pub fn here(actor: &'a str) -> Self {
        Self {
            actor,
            scope: Scope::Admin,
        }
    }
}

impl App {
    /// Runs the typed operation `op` for every edge alike: the caller's key scope first (a
    /// key that does not allow it is refused, one security event, nothing else changed),
    /// then the input fitted to the operation's type, then its use case, whose write path
    /// checks the caller's authority and applies its plan in one transaction.
    ///
    /// The input has passed the edge's boundary (`baton_core::json::boundary`) when it came
    /// as text; an edge that builds it from its own arguments builds it whole.
    pub async fn dispatch<'a>(
        &'a self,
        who: Who<'a>,
        op: &'static Operation,
        input: Value,
    ) -> Result<Value> {
        let declared = op
            .typed
            .unwrap_or_else(|| panic!("operation {:?} has no typed declaration", op.name));
        let needed = op.scope();
        if !who.scope.allows(needed) {
            let refusal = Refusal::Scope {
                scope: who.scope,
                action: op.name,
            };
            if let Ok(name) = baton_core::Passname::new(who.actor) {
                self.record_refusal(&name, &refusal).await?;
            }
            return Err(refusal.into());
        }
        declared.call.run(self, who, input).await
    }

    /// [`App::dispatch`] of the typed operation `T`, its document read back as its type:
    /// for an edge inside the server that acts through the operations (A2A).
    pub async fn call<T: Typed>(&self, who: Who<'_>, input: Value) -> Result<T::Output> {
        let answer = self.dispatch(who, &T::OP, input).await?;
        Ok(serde_json::from_value(answer).expect("a document reads back as its type"))
    }
}

/// `actor` as the participant an operation is taken by, for an operation that is always
/// a participant's (a send, a step on a message): the machine's own actors are refused.
fn participant(actor: &str) -> Result<baton_core::Passname> {
    baton_core::Passname::new(actor).map_err(|_| {
        Refusal::UnknownParticipant {
            name: actor.to_owned(),
        }
        .into()
    })
}

/// Every typed operation.
pub fn every_typed() -> impl Iterator<Item = &'static Operation> {
    OPERATIONS.iter().filter(|o| o.typed.is_some())
}

use Needs::*;
use Reach::*;

const fn op(name: &'static str, needs: Needs) -> Operation {
    Operation {
        name,
        tool: None,
        needs,
        reach: Anywhere,
        idempotent: false,
        delivers: false,
        roles: &[],
        waits: false,
        on_board: false,
        typed: None,
    }
}

const fn local(name: &'static str, needs: Needs) -> Operation {
    Operation {
        name,
        tool: None,
        needs,
        reach: Local,
        idempotent: false,
        delivers: false,
        roles: &[],
        waits: false,
        on_board: false,
        typed: None,
    }
}

/// Every operation: each group's list (in its file, beside its declarations), the groups
/// in the order the edges list them.
pub const OPERATIONS: &[Operation] = &ALL;

const GROUPS: [&[Operation]; 8] = [
    reads::OPERATIONS,
    messages::OPERATIONS,
    steps::OPERATIONS,
    memory::OPERATIONS,
    orders::OPERATIONS,
    watch::OPERATIONS,
    reservations::OPERATIONS,
    admin::OPERATIONS,
];

const ALL: [Operation; count(&GROUPS)] = concat(&GROUPS);

/// How many operations `groups` hold.
const fn count(groups: &[&[Operation]]) -> usize {
    let (mut n, mut g) = (0, 0);
    while g < groups.len() {
        n += groups[g].len();
        g += 1;
    }
    n
}

/// The operations of `groups`, one group after another.
const fn concat<const N: usize>(groups: &[&[Operation]]) -> [Operation; N] {
    let mut all = [op("", Read); N];
    let (mut n, mut g) = (0, 0);
    while g < groups.len() {
        let mut i = 0;
        while i < groups[g].len() {
            all[n] = groups[g][i];
            n += 1;
            i += 1;
        }
        g += 1;
    }
    all
}

/// The operation reached as MCP tool `tool`.
pub fn by_tool(tool: &str) -> Option<&'static Operation> {
    OPERATIONS.iter().find(|o| o.tool == Some(tool))
}

/// Where the command `top` (a command line's first word: `order`, `review`) runs: only
/// here when every operation it names needs this machine, anywhere otherwise (a command
/// with one local operation, such as `receipt verify`, refuses that one when it runs);
/// `None` for a command nothing declares.
pub fn command_reach(top: &str) -> Option<Reach> {
    let mut ops = OPERATIONS
        .iter()
        .filter(|o| o.name == top || o.name.strip_prefix(top).is_some_and(|r| r.starts_with(' ')))
        .peekable();
    ops.peek()?;
    Some(if ops.all(|o| o.reach == Local) {
        Local
    } else {
        Anywhere
    })
}

/// Every MCP tool.
pub fn tools() -> impl Iterator<Item = &'static str> {
    OPERATIONS.iter().filter_map(|o| o.tool)
}

/// The MCP tools `role`'s profile holds.
pub fn profile(role: Role) -> impl Iterator<Item = &'static str> {
    OPERATIONS
        .iter()
        .filter(move |o| o.roles.contains(&role))
        .filter_map(|o| o.tool)
}

#[cfg(test)]
mod tests {
    use super::Role::*;
    use super::*;

    #[test]
    fn each_operation_and_each_tool_is_declared_once() {
        let mut names: Vec<&str> = OPERATIONS.iter().map(|o| o.name).collect();
        names.sort();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count, "an operation is declared twice");
        let mut tools: Vec<&str> = tools().collect();
        tools.sort();
        let count = tools.len();
        tools.dedup();
        assert_eq!(tools.len(), count, "a tool is declared twice");
    }

    #[test]
    fn a_tool_in_a_profile_is_reachable_anywhere_and_only_admin_needs_no_participant() {
        for o in OPERATIONS {
            if o.tool.is_some() {
                assert_eq!(o.reach, Anywhere, "{}", o.name);
                assert_ne!(o.needs, Admin, "{}: MCP acts as a participant", o.name);
            }
        }
    }

    #[test]
    fn an_operation_declared_to_wait_is_one_that_takes_a_timeout_and_only_those() {
        // A server bounds a request by its declaration: one that waits gets MAX_WAIT and
        // a little more, any other 30 s, which would cut a wait short.
        let mut generator = SchemaGenerator::default();
        for o in every_typed() {
            let input = o.typed.unwrap().call.input(&mut generator);
            let input = generator
                .definitions()
                .get(
                    input
                        .get("$ref")
                        .and_then(|r| r.as_str())
                        .map_or("", |r| r.rsplit('/').next().unwrap_or("")),
                )
                .cloned()
                .unwrap_or_else(|| input.to_value());
            let takes_timeout = input["properties"].get("timeout_seconds").is_some();
            assert_eq!(
                o.waits, takes_timeout,
                "{}: declared to wait {} but takes a timeout {}",
                o.name, o.waits, takes_timeout
            );
        }
        assert!(every_typed().filter(|o| o.waits).count() >= 4);
        const { assert!(StatusShow::OP.on_board && StatusWait::OP.on_board) };
        assert!(
            every_typed()
                .filter(|o| o.on_board)
                .all(|o| o.needs == Read)
        );
    }

    #[test]
    fn a_command_runs_only_here_when_all_it_does_needs_this_machine() {
        assert_eq!(command_reach("review"), Some(Local));
        assert_eq!(command_reach("evidence"), Some(Local));
        assert_eq!(command_reach("receipt"), Some(Anywhere));
        assert_eq!(command_reach("order"), Some(Anywhere));
        assert_eq!(command_reach("orders"), None);
    }

    #[test]
    fn each_role_can_close_what_its_part_of_the_round_leaves_open() {
        // A planner sends requests and closes its own end of them; an executor takes
        // work on and closes or hands back what it was sent; a reviewer reads, answers
        // and closes; an owner decides and closes.
        let holds = |role: Role, tools: &[&str]| {
            let profile: Vec<&str> = profile(role).collect();
            for t in tools {
                assert!(profile.contains(t), "{} lacks {t}", role.as_str());
            }
        };
        holds(
            Planner,
            &["send", "show", "complete", "archive", "outbox", "order"],
        );
        holds(
            Executor,
            &["inbox", "show", "ack", "complete", "hand_back", "order"],
        );
        holds(Reviewer, &["inbox", "show", "ack", "complete", "hand_back"]);
        holds(
            Owner,
            &["inbox", "show", "ack", "complete", "archive", "order"],
        );
    }

    #[test]
    fn a_misfit_input_is_refused_naming_its_field() {
        let refused =
            super::fit::<super::QueueInput>("queue", serde_json::json!({"lane": "everything"}))
                .unwrap_err();
        assert!(
            refused.to_string().contains("`lane`: unknown variant"),
            "{refused}"
        );
    }
}
