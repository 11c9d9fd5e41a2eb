//! A refusal's words, once, for every edge: what was refused (its sentence) and what to do
//! next (its hint), written as [`Words`] that name fields and declared operations — never
//! an edge's syntax. Each edge spells them with its [`Spell`]: the command line names
//! flags and `baton WORDS …`, MCP tools and `` `arguments` ``, HTTP routes and JSON fields.
//!
//! [`explain`] is the one exhaustive `match` over [`Refusal`]: a new refusal does not
//! compile until it is worded here, and [`every_refusal`] (what the edges' tests render)
//! until it has a sample. An edge matches no variant; it may add a note of its own where
//! only it has something to say (`cli_note`, `http_note`).

use std::cell::RefCell;

use baton_core::awl::Finding;
use baton_core::refusal::{Action, Blocker, Document, blocker_text};
use baton_core::{DeliveryAction, Field, InvalidTransition, Record, Refusal, RequestAction};

use super::{
    AgentAdd, AgentPolicySet, AlertList, Archive, ClaimItem, Complete, HandBack, InboxList,
    KeyIssue, KeyList, NextItem, OPERATIONS, Operation, OrderList, OrderShow, OrderTake,
    OutboxList, ReceiptWait, ReceiptWrite, Refuse, Release, ReleaseForce, Reply, ReservationList,
    ResumePacket, RunList, SearchMessages, SecurityEventsList, SendMessage, ShowMessage, StateShow,
    ThreadOf, Typed,
};

/// A refusal in words: the sentence, and what to do next when there is something to say.
#[derive(Debug, Clone)]
pub struct Explained {
    pub sentence: Words,
    pub hint: Option<(Joint, Words)>,
}

/// How a hint follows its sentence in one line of text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joint {
    /// `sentence: hint`
    Colon,
    /// `sentence; hint`
    Semicolon,
    /// `sentence. Hint`
    Stop,
}

impl Joint {
    fn as_str(self) -> &'static str {
        match self {
            Self::Colon => ": ",
            Self::Semicolon => "; ",
            Self::Stop => ". ",
        }
    }
}

/// Text with the places an edge spells its own way.
#[derive(Debug, Clone, Default)]
pub struct Words(Vec<Part>);

/// One piece of [`Words`].
#[derive(Debug, Clone)]
pub enum Part {
    Text(String),
    /// An input the user gives, by what it is.
    Field(Field),
    /// An input by its name in the operations' inputs (`expect_seq`), where no [`Field`]
    /// names it.
    Input(&'static str),
    /// The id the caller gave.
    Id,
    /// A place inside a field (a document's JSON pointer).
    At(Field, String),
    /// An operation to run: the first of these the edge offers; where it offers none, the
    /// last on the command line.
    Run(Vec<Next>),
    /// A lifecycle step, by its name.
    Step(Next),
    /// The steps that may come next (not empty).
    Choices(Vec<Next>),
    /// The operation just refused, taken again.
    Again(Next),
}

/// A declared operation to take next, with what to give it.
#[derive(Debug, Clone)]
pub struct Next {
    pub op: &'static Operation,
    /// Words after the operation's name where one declaration covers several commands
    /// (`negotiate` → `show`), or where its command has a word of its own (`focus set`).
    pub then: &'static str,
    /// What it acts on: its command's positional argument, a field of its input.
    pub on: Option<(&'static str, Arg)>,
    /// Its other inputs, by their names in the operation's input.
    pub with: Vec<(&'static str, Arg)>,
}

/// The value of an input in a [`Next`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    Is(String),
    /// A flag that is set.
    Yes,
    /// A list holding this value and others.
    Plus(String),
    /// A value the caller fills in, by its placeholder (`ROLE`).
    Fill(&'static str),
}

/// How an edge spells [`Words`]. A field is named as the operations' inputs name it
/// (`` `reason` ``: a tool's argument, a JSON field) unless the edge says otherwise.
pub trait Spell {
    fn field(&self, field: Field) -> String {
        format!("`{}`", field.name())
    }
    /// An input by its name.
    fn input(&self, name: &'static str) -> String {
        format!("`{name}`")
    }
    /// The id the caller gave.
    fn id(&self) -> String {
        "`id`".to_owned()
    }
    /// A place in a field: a JSON pointer into it.
    fn at(&self, field: Field, path: &str) -> String {
        match path {
            "/" | "" => format!("`{}`", field.name()),
            path => format!("`{}{path}`", field.name()),
        }
    }
    /// How to run `next` here; `None` when this edge does not offer it.
    fn run(&self, next: &Next) -> Option<String>;
    /// A step's name in a sentence or a list.
    fn step(&self, next: &Next) -> String;
    /// The steps that may come next, after "allowed next".
    fn choices(&self, steps: &[Next]) -> String {
        let names: Vec<String> = steps.iter().map(|s| self.step(s)).collect();
        format!(": {}", names.join(", "))
    }
    /// Taking `next`, just refused, again.
    fn again(&self, next: &Next) -> String;
    /// `next` where this edge does not offer it: on the command line.
    fn elsewhere(&self, next: &Next) -> String {
        format!("`{}` (CLI)", next.command_line())
    }
}

impl Words {
    fn text(mut self, text: impl Into<String>) -> Self {
        self.0.push(Part::Text(text.into()));
        self
    }

    fn field(mut self, field: Field) -> Self {
        self.0.push(Part::Field(field));
        self
    }

    fn input(mut self, name: &'static str) -> Self {
        self.0.push(Part::Input(name));
        self
    }

    fn id(mut self) -> Self {
        self.0.push(Part::Id);
        self
    }

    fn at(mut self, field: Field, path: &str) -> Self {
        self.0.push(Part::At(field, path.to_owned()));
        self
    }

    fn run(self, next: Next) -> Self {
        self.first(vec![next])
    }

    fn chain(mut self, more: Words) -> Self {
        self.0.extend(more.0);
        self
    }

    fn first(mut self, alternatives: Vec<Next>) -> Self {
        self.0.push(Part::Run(alternatives));
        self
    }

    fn step(mut self, next: Next) -> Self {
        self.0.push(Part::Step(next));
        self
    }

    fn again(mut self, next: Next) -> Self {
        self.0.push(Part::Again(next));
        self
    }

    /// "allowed next: …", or what it means that nothing may follow.
    fn allowed(mut self, steps: Vec<Next>, none: &str) -> Self {
        if steps.is_empty() {
            self.text(format!("allowed next: nothing ({none})"))
        } else {
            self.0.push(Part::Text("allowed next".into()));
            self.0.push(Part::Choices(steps));
            self
        }
    }

    pub fn parts(&self) -> &[Part] {
        &self.0
    }

    pub fn render(&self, spell: &dyn Spell) -> String {
        let mut out = String::new();
        for part in &self.0 {
            match part {
                Part::Text(text) => out.push_str(text),
                Part::Field(field) => out.push_str(&spell.field(*field)),
                Part::Input(name) => out.push_str(&spell.input(name)),
                Part::Id => out.push_str(&spell.id()),
                Part::At(field, path) => out.push_str(&spell.at(*field, path)),
                Part::Run(alternatives) => {
                    let here = alternatives.iter().find_map(|n| spell.run(n));
                    out.push_str(&here.unwrap_or_else(|| {
                        spell.elsewhere(alternatives.last().expect("an alternative"))
                    }));
                }
                Part::Step(next) => out.push_str(&spell.step(next)),
                Part::Choices(steps) => out.push_str(&spell.choices(steps)),
                Part::Again(next) => out.push_str(&spell.again(next)),
            }
        }
        out
    }
}

fn say(text: impl Into<String>) -> Words {
    Words::default().text(text)
}

impl Explained {
    fn said(sentence: Words) -> Self {
        Self {
            sentence,
            hint: None,
        }
    }

    fn plain(r: &Refusal) -> Self {
        Self::said(say(r.to_string()))
    }

    fn hinted(mut self, joint: Joint, hint: Words) -> Self {
        self.hint = Some((joint, hint));
        self
    }

    /// The whole text: the sentence and its hint, in one line (a list may follow).
    pub fn text(&self, spell: &dyn Spell) -> String {
        let mut text = self.sentence.render(spell);
        if let Some((joint, hint)) = &self.hint {
            text.push_str(joint.as_str());
            text.push_str(&hint.render(spell));
        }
        text
    }

    /// The hint alone.
    pub fn hint(&self, spell: &dyn Spell) -> Option<String> {
        self.hint.as_ref().map(|(_, hint)| hint.render(spell))
    }

    /// Every part, the sentence's then the hint's.
    pub fn parts(&self) -> impl Iterator<Item = &Part> {
        let hint = self.hint.iter().flat_map(|(_, h)| h.parts());
        self.sentence.parts().iter().chain(hint)
    }
}

impl Next {
    /// `op`, with nothing given.
    pub fn of(op: &'static Operation) -> Self {
        Self {
            op,
            then: "",
            on: None,
            with: Vec::new(),
        }
    }

    /// The operation declared as `name` (one with no typed declaration).
    fn named(name: &str) -> Self {
        let op = OPERATIONS
            .iter()
            .find(|o| o.name == name)
            .unwrap_or_else(|| panic!("no operation {name:?} is declared"));
        Self::of(op)
    }

    fn then(mut self, words: &'static str) -> Self {
        self.then = words;
        self
    }

    fn on(mut self, field: &'static str, arg: Arg) -> Self {
        self.on = Some((field, arg));
        self
    }

    fn with(mut self, field: &'static str, arg: Arg) -> Self {
        self.with.push((field, arg));
        self
    }

    /// Its inputs: what it acts on, then the rest.
    pub fn args(&self) -> impl Iterator<Item = &(&'static str, Arg)> {
        self.on.iter().chain(&self.with)
    }

    /// The step an `action` input chooses (an order's `accept`).
    pub fn action(&self) -> Option<&str> {
        self.with.iter().find_map(|(name, arg)| match (name, arg) {
            (&ACTION, Arg::Is(action)) => Some(action.as_str()),
            _ => None,
        })
    }

    /// Its command's words: the operation's name, words of its own, the chosen step.
    pub fn words(&self) -> Vec<&str> {
        let mut words: Vec<&str> = self.op.name.split(' ').collect();
        words.extend(self.then.split(' ').filter(|w| !w.is_empty()));
        words.extend(self.action());
        words
    }

    /// Its command line's arguments after `baton`: options every command takes, the
    /// command's words, what it acts on, then each input as `--name VALUE`.
    pub fn argv(&self) -> Vec<String> {
        let flag = |name: &str| format!("--{}", name.replace('_', "-"));
        let value = |arg: &Arg| match arg {
            Arg::Is(v) => v.clone(),
            Arg::Plus(v) => format!("{v},…"),
            Arg::Fill(p) => (*p).to_owned(),
            Arg::Yes => String::new(),
        };
        let mut argv = Vec::new();
        let (global, own): (Vec<_>, Vec<_>) =
            self.with.iter().partition(|(n, _)| GLOBAL.contains(n));
        for (name, arg) in global {
            argv.extend([flag(name), value(arg)]);
        }
        argv.extend(self.words().into_iter().map(str::to_owned));
        if let Some((_, arg)) = &self.on {
            argv.push(value(arg));
        }
        for (name, arg) in own.into_iter().filter(|(n, _)| *n != ACTION) {
            argv.push(flag(name));
            if *arg != Arg::Yes {
                argv.push(value(arg));
            }
        }
        argv
    }

    /// Its command line, as a person types it.
    pub fn command_line(&self) -> String {
        let mut line = String::from("baton");
        for arg in self.argv() {
            line.push(' ');
            line.push_str(&quoted(&arg));
        }
        line
    }
}

/// The input that chooses a step, on an operation that takes several.
const ACTION: &str = "action";
/// Inputs every command takes, before its words.
const GLOBAL: [&str; 2] = ["as", "db"];

/// `arg` as a shell reads it back: quoted when it holds more than plain characters.
fn quoted(arg: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_.,:/@=+%…".contains(c);
    if !arg.is_empty() && arg.chars().all(plain) {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// What an edge names while it spells [`Words`]: for the edges' tests, which check that
/// each named operation exists there.
pub struct Noting<'a> {
    pub spell: &'a dyn Spell,
    pub named: RefCell<Vec<Named>>,
}

/// One operation an edge named, and how.
#[derive(Debug, Clone)]
pub enum Named {
    /// Run the way this edge runs it.
    Run(Next),
    /// On the command line: this edge does not offer it.
    Elsewhere(Next),
    Step(Next),
    Again(Next),
}

impl<'a> Noting<'a> {
    pub fn new(spell: &'a dyn Spell) -> Self {
        Self {
            spell,
            named: RefCell::new(Vec::new()),
        }
    }
}

impl Spell for Noting<'_> {
    fn field(&self, field: Field) -> String {
        self.spell.field(field)
    }

    fn input(&self, name: &'static str) -> String {
        self.spell.input(name)
    }

    fn id(&self) -> String {
        self.spell.id()
    }

    fn at(&self, field: Field, path: &str) -> String {
        self.spell.at(field, path)
    }

    fn run(&self, next: &Next) -> Option<String> {
        let run = self.spell.run(next)?;
        self.named.borrow_mut().push(Named::Run(next.clone()));
        Some(run)
    }

    fn step(&self, next: &Next) -> String {
        self.named.borrow_mut().push(Named::Step(next.clone()));
        self.spell.step(next)
    }

    fn choices(&self, steps: &[Next]) -> String {
        // The edge's list, with each step noted as it would be named alone.
        for step in steps {
            self.step(step);
        }
        self.spell.choices(steps)
    }

    fn again(&self, next: &Next) -> String {
        self.named.borrow_mut().push(Named::Again(next.clone()));
        self.spell.again(next)
    }

    fn elsewhere(&self, next: &Next) -> String {
        self.named.borrow_mut().push(Named::Elsewhere(next.clone()));
        self.spell.elsewhere(next)
    }
}

// ---- the words ------------------------------------------------------------------------------

fn id_or(about: Option<&str>, placeholder: &'static str) -> Arg {
    about.map_or(Arg::Fill(placeholder), |id| Arg::Is(id.to_owned()))
}

fn of<T: Typed>() -> Next {
    Next::of(&T::OP)
}

/// The step `action` as a declared operation, on `id`.
fn step(action: Action, id: Arg) -> Next {
    let (op, order): (&'static Operation, bool) = match action {
        Action::Delivery(DeliveryAction::Fetch) => (&ShowMessage::OP, false),
        Action::Delivery(DeliveryAction::Refuse) => (&Refuse::OP, false),
        Action::Delivery(DeliveryAction::Acknowledge) => (&super::Ack::OP, false),
        Action::Delivery(DeliveryAction::Complete) | Action::Request(RequestAction::Complete) => {
            (&Complete::OP, false)
        }
        Action::Delivery(DeliveryAction::HandBack) => (&HandBack::OP, false),
        Action::Delivery(DeliveryAction::Archive) | Action::Request(RequestAction::Archive) => {
            (&Archive::OP, false)
        }
        Action::Order(_) => (&OrderTake::OP, true),
    };
    let next = Next::of(op).on("id", id);
    if order {
        next.with(ACTION, Arg::Is(action.name().to_owned()))
    } else {
        next
    }
}

/// Where the message ids are listed.
fn listed_ids() -> Words {
    Words::default()
        .text("check ")
        .id()
        .text(" (")
        .run(of::<InboxList>())
        .text(", ")
        .run(of::<OutboxList>())
        .text(", ")
        .run(of::<SearchMessages>())
        .text(" and ")
        .run(of::<ThreadOf>().on("id", Arg::Fill("ID")))
        .text(" list ids)")
}

/// Where the project's memory is read whole: its state, or the resume packet.
fn memory() -> Vec<Next> {
    vec![of::<StateShow>(), of::<ResumePacket>()]
}

/// A reply to `id`: its own operation, or a send that names what it replies to.
fn replying(id: Arg) -> Vec<Next> {
    let body = || Arg::Fill("TEXT");
    vec![
        of::<Reply>().on("id", id.clone()).with("body", body()),
        of::<SendMessage>()
            .with("reply_to", id)
            .with("body", body()),
    ]
}

fn register(name: &str) -> Next {
    of::<AgentAdd>()
        .on("name", Arg::Is(name.to_owned()))
        .with("role", Arg::Fill("ROLE"))
}

fn order_show(order: &str) -> Next {
    of::<OrderShow>().on("id", Arg::Is(order.to_owned()))
}

fn negotiation_show(id: &str) -> Next {
    Next::named("negotiate")
        .then("show")
        .on("id", Arg::Is(id.to_owned()))
}

/// "(`baton security-events`)": where a refused attempt is recorded.
fn recorded() -> Words {
    Words::default()
        .text("the attempt is recorded (")
        .run(of::<SecurityEventsList>())
        .text(")")
}

fn not_found(record: Record, id: &str, r: &Refusal) -> Explained {
    use Joint::Colon;
    let plain = || say(r.to_string());
    match record {
        Record::Message => Explained::said(plain()).hinted(Colon, listed_ids()),
        Record::Parent => {
            Explained::said(say(format!("no message {id} to reply to in this project")))
                .hinted(Colon, listed_ids())
        }
        Record::Order => Explained::said(plain()).hinted(
            Colon,
            Words::default()
                .text("check ")
                .id()
                .text(" or see ")
                .run(of::<OrderList>().with("all", Arg::Yes)),
        ),
        Record::Run => Explained::said(plain()).hinted(
            Colon,
            say("see ").run(of::<RunList>().with("all", Arg::Yes)),
        ),
        Record::Decision => Explained::said(say(format!("no decision {id}"))).hinted(
            Colon,
            Words::default()
                .first(memory())
                .text(" lists the current ones"),
        ),
        Record::Stream => Explained::said(say(format!("no active stream {id:?}"))).hinted(
            Colon,
            Words::default()
                .first(memory())
                .text(" lists the active ones"),
        ),
        Record::Alert => Explained::said(say(format!("no open alert {id}")))
            .hinted(Colon, say("see ").run(of::<AlertList>())),
        Record::Receipt => Explained::said(say(format!("no receipt for step {id:?}"))),
        Record::Key => Explained::said(plain()).hinted(Colon, say("see ").run(of::<KeyList>())),
        Record::Project => Explained::said(say(format!("no project {id:?} in this store"))).hinted(
            Colon,
            say("an administrator adds it with ").run(
                Next::named("project")
                    .then("add")
                    .on("name", Arg::Is(id.to_owned()))
                    .with("db", Arg::Fill("URL")),
            ),
        ),
        Record::Negotiation => Explained::said(plain()).hinted(
            Colon,
            say("open it with ").run(
                Next::named("negotiate")
                    .then("open")
                    .on("spec", Arg::Fill("SPEC.json")),
            ),
        ),
        Record::Reservation => Explained::said(plain()).hinted(
            Colon,
            say("see ").run(of::<ReservationList>().with("all", Arg::Yes)),
        ),
    }
}

/// Where the reservations are listed, in parentheses.
fn reservations_listed() -> Words {
    say(" (").run(of::<ReservationList>()).text(")")
}

fn transition(t: &InvalidTransition, about: Option<&str>) -> Explained {
    let id = || id_or(about, "ID");
    let mut sentence = say("cannot ")
        .step(step(t.action, id()))
        .text(match (about, t.action) {
            (None, _) => format!(" {}: its status is {}", t.subject(), t.status),
            (Some(id), Action::Order(_)) => format!(" order {id}: it is {}", t.status),
            (Some(id), Action::Request(_)) => {
                format!(" {id}: your own end of this request is {}", t.status)
            }
            (Some(id), Action::Delivery(_)) => format!(" {id}: your delivery is {}", t.status),
        });
    sentence = match t.blocker {
        None => sentence,
        Some(Blocker::FetchFirst) => sentence
            .text(" (fetch it first with ")
            .run(of::<ShowMessage>().on("id", id()))
            .text(")"),
        Some(Blocker::RequestsAreDischarged) => sentence
            .text(" (a request is discharged with ")
            .step(step(Action::Delivery(DeliveryAction::Complete), id()))
            .text(" or ")
            .step(step(Action::Delivery(DeliveryAction::HandBack), id()))
            .text(", not acknowledged)"),
        Some(b) => sentence.text(format!(" ({})", blocker_text(b))),
    };
    let final_word = match t.action {
        Action::Order(_) => "it is closed",
        _ => "it is final",
    };
    let allowed = t.allowed.iter().map(|a| step(*a, id())).collect();
    Explained::said(sentence).hinted(
        Joint::Semicolon,
        Words::default().allowed(allowed, final_word),
    )
}

fn findings(document: Document, found: &[Finding]) -> Explained {
    let what = match document {
        Document::WorkOrder => "a Work Order",
        Document::WorkReport => "a Work Report on this order",
    };
    let mut hint = say("Fix these and ")
        .again(of::<OrderTake>())
        .text(" (")
        .run(
            Next::named("handoff")
                .then("check")
                .on("file", Arg::Fill("FILE")),
        )
        .text(" shows every finding):");
    for f in baton_core::refusal::invalid(found) {
        hint = hint
            .text(format!("\n- {} at ", f.rule))
            .at(Field::Document, &f.path)
            .text(format!(": {}", f.message));
    }
    Explained::said(
        Words::default()
            .field(Field::Document)
            .text(format!(" is refused as {what}; nothing was stored")),
    )
    .hinted(Joint::Stop, hint)
}

fn other_document(d: Document) -> Document {
    match d {
        Document::WorkOrder => Document::WorkReport,
        Document::WorkReport => Document::WorkOrder,
    }
}

/// A refusal in words. `about` is the id the caller's input named (a message or an
/// order), when the edge knows it: the sentence then names it.
pub fn explain(r: &Refusal, about: Option<&str>) -> Explained {
    use Joint::{Colon, Semicolon, Stop};
    match r {
        Refusal::NotFound { record, id } => not_found(*record, id, r),
        Refusal::UnknownParticipant { name } => {
            Explained::said(say(format!("unknown participant {name:?}")))
                .hinted(Colon, say("register it with ").run(register(name)))
        }
        Refusal::NoRecipient { name, registered } => Explained::said(
            Words::default()
                .field(Field::To)
                .text(format!(": no participant {name:?} in this project")),
        )
        .hinted(
            Semicolon,
            say(format!(
                "registered: {}; add unknown participant {name:?} with ",
                if registered.is_empty() {
                    "none".to_owned()
                } else {
                    registered.join(", ")
                }
            ))
            .run(register(name)),
        ),
        Refusal::NoArtifact { artifact, reason } => Explained::said(
            Words::default()
                .field(Field::Artifact)
                .text(format!(": {artifact}: {reason}")),
        )
        .hinted(
            Semicolon,
            say("write the receipt after the output exists (a path from the project root), or give a URI"),
        ),
        Refusal::NoSubject { .. } | Refusal::Outside { .. } => Explained::said(
            Words::default()
                .field(Field::Subject)
                .text(format!(": {r}")),
        )
        .hinted(
            Semicolon,
            say("give a message or order id, or a path from the project root"),
        ),
        Refusal::ArtifactOutside { .. } => Explained::said(
            Words::default()
                .field(Field::Artifact)
                .text(format!(": {r}")),
        ),
        Refusal::NoReceipt { step, alert } => Explained::said(say(alert)).hinted(
            Semicolon,
            say(format!(
                "alert `receipt-missing:{step}` is open (raised once, however often a wait \
                 misses): check that the step ran and called "
            ))
            .run(
                of::<ReceiptWrite>()
                    .with("step", Arg::Is(step.clone()))
                    .with("artifact", Arg::Fill("PATH")),
            )
            .text(", then ")
            .again(of::<ReceiptWait>()),
        ),
        Refusal::NoStep { order, .. } => Explained::plain(r).hinted(
            Semicolon,
            say("wait again or see ").run(order_show(order)),
        ),
        Refusal::Missing(field) => Explained::said(match field {
            Field::To => say("a message needs at least one recipient (")
                .field(Field::To)
                .text(")"),
            Field::Topic => Words::default()
                .field(Field::Topic)
                .text(" is required (unless it is a reply: ")
                .first(replying(Arg::Fill("ID")))
                .text(")"),
            Field::Reason => say("a reason is required (")
                .field(Field::Reason)
                .text("): it is posted to the sender"),
            Field::Answer => Words::default()
                .field(Field::Answer)
                .text(" (the answer) cannot be empty"),
            Field::ReworkReason => Words::default()
                .field(Field::ReworkReason)
                .text(" (what the worker should change) cannot be empty"),
            other => Words::default().field(*other).text(" must not be empty"),
        }),
        Refusal::TooLong { field, max, len } => Explained::said(
            Words::default()
                .field(*field)
                .text(format!(" must be at most {max} characters (got {len})")),
        ),
        Refusal::Name { field, error } => Explained::said(match field {
            // The error names the passname itself.
            Field::Name => say(error.to_string()),
            Field::OrderTo => say(format!(
                "the order's \"to\" must be a participant of this project: {error}"
            )),
            other => Words::default().field(*other).text(format!(": {error}")),
        }),
        Refusal::Payload { field, error } => {
            let sentence = Words::default().field(*field).text(format!(": {error}"));
            match error {
                baton_core::PayloadError::TooLarge { .. } => Explained::said(
                    sentence.text(" (messages.payload_cap in .baton/config.toml)"),
                ),
                _ => Explained::said(sentence),
            }
        }
        Refusal::SelfSend { name } => Explained::said(say(format!("{name} cannot send to itself")))
            .hinted(Colon, say("name another participant in ").field(Field::To)),
        Refusal::Ambiguous {
            record,
            prefix,
            candidates,
            more,
        } => Explained::said(say(format!(
            "{prefix} begins more than one {}",
            record.noun()
        )))
        .hinted(
            Semicolon,
            say(format!(
                "give more of the id:\n  {}{}",
                candidates.join("\n  "),
                if *more { "\n  …" } else { "" }
            )),
        ),
        Refusal::Cursor { .. } => Explained::plain(r).hinted(
            Colon,
            say("pass the `next` of the previous page as ").field(Field::Cursor),
        ),
        Refusal::StatusNeedsIdentity => Explained::said(say("a status filter is your own status"))
            .hinted(Colon, say("say who is asking with ").field(Field::Actor)),
        Refusal::Input { operation, problem } => {
            let what = match OPERATIONS.iter().find(|o| o.name == *operation) {
                Some(op) => Words::default().step(Next::of(op)),
                // Another version's operation, named by its server.
                None => say(*operation),
            };
            Explained::said(
                say("the input of ")
                    .chain(what)
                    .text(format!(" does not fit: {problem}")),
            )
        }
        Refusal::Transition(t) => transition(t, about),
        Refusal::SenderNote => Explained::said(
            Words::default()
                .input("note")
                .text(" is for a recipient's completion"),
        )
        .hinted(
            Semicolon,
            say("to tell the recipients something, call ").first(replying(id_or(about, "ID"))),
        ),
        Refusal::DocumentField { .. } => Explained::plain(r).hinted(
            Colon,
            say("check it with ").run(
                Next::named("handoff")
                    .then("check")
                    .on("file", Arg::Fill("FILE")),
            ),
        ),
        Refusal::Findings {
            document,
            findings: found,
        } => findings(*document, found),
        Refusal::WrongDocument { expected } => {
            let (takes, other) = match expected {
                Document::WorkOrder => ("create", "report"),
                Document::WorkReport => ("report", "create"),
            };
            let action = |a: &str| of::<OrderTake>().with(ACTION, Arg::Is(a.to_owned()));
            let (expected, given) = (expected.noun(), other_document(*expected).noun());
            Explained::said(
                Words::default()
                    .field(Field::Document)
                    .text(format!(" is {given}, not {expected}")),
            )
            .hinted(
                Colon,
                Words::default()
                    .step(action(takes))
                    .text(format!(" takes {expected}; {given} goes with "))
                    .step(action(other)),
            )
        }
        Refusal::KeyReused { .. } => Explained::plain(r).hinted(
            Semicolon,
            say("use a new ")
                .input("idempotency_key")
                .text(" for a new message"),
        ),
        Refusal::After {
            index,
            order,
            problem,
        } => Explained::said(
            Words::default()
                .at(Field::Document, &format!("/x-baton/after/{index}"))
                .text(format!(
                    " names order {order:?}, which {problem}; nothing was stored"
                )),
        )
        .hinted(
            Semicolon,
            say("name orders of this project that may still be approved (")
                .run(of::<OrderList>().with("all", Arg::Yes))
                .text(" lists them), then ")
                .again(of::<OrderTake>()),
        ),
        Refusal::Waits { order, held, .. } => Explained::plain(r).hinted(
            Semicolon,
            if *held {
                say("its sender decides: go on without what ended with ")
                    .run(step(
                        Action::Order(baton_core::order::OrderAction::Proceed),
                        Arg::Is(order.clone()),
                    ))
                    .text(", or ")
                    .run(step(
                        Action::Order(baton_core::order::OrderAction::Cancel),
                        Arg::Is(order.clone()),
                    ))
            } else {
                say("it is offered once each is approved; see what waits on what with ")
                    .run(
                        of::<OrderList>()
                            .with("ready", Arg::Yes)
                            .with("explain", Arg::Yes),
                    )
            },
        ),
        Refusal::Moved { order, .. } => Explained::plain(r).hinted(
            Semicolon,
            say("read it again with ")
                .run(order_show(order))
                .text(" and decide anew, then ")
                .again(of::<OrderTake>())
                .text(" with ")
                .input("expect_seq")
                .text(" set to its seq"),
        ),
        Refusal::Beyond { actor, power, .. } => Explained::plain(r).hinted(
            Stop,
            say("Nothing changed; ")
                .chain(recorded())
                .text(". An owner can widen it: ")
                .run(
                    of::<AgentPolicySet>()
                        .on("name", Arg::Is(actor.to_string()))
                        .with("may", Arg::Plus(power.to_string())),
                ),
        ),
        Refusal::Unwilling {
            recipient, topic, ..
        } => Explained::plain(r).hinted(
            Stop,
            say("Nothing was sent; ")
                .chain(recorded())
                .text(format!(". Send it on a topic {recipient} takes ("))
                .field(Field::Topic)
                .text("), or an owner widens its topics: ")
                .run(
                    of::<AgentPolicySet>()
                        .on("name", Arg::Is(recipient.to_string()))
                        .with("topics", Arg::Plus(topic.to_string())),
                ),
        ),
        Refusal::OwnWork { order, .. } => Explained::plain(r).hinted(
            Colon,
            say("nothing ran and ")
                .chain(recorded())
                .text("; the order's sender reviews it (")
                .run(
                    Next::named("review")
                        .on("order", Arg::Is(order.clone()))
                        .with("as", Arg::Fill("SENDER")),
                )
                .text(")"),
        ),
        Refusal::SameReviewer { .. } => Explained::plain(r).hinted(
            Colon,
            say("give two different ").input("reviewer").text(" commands"),
        ),
        Refusal::EffectsNeedRunner { order, .. } => Explained::plain(r).hinted(
            Colon,
            say("approve it where its upstream server can be started — in the project, without BATON_URL: ")
                .run(Next::named("order approve").on("id", Arg::Is(order.clone()))),
        ),
        Refusal::NegotiationInput { .. } => Explained::plain(r)
            .hinted(Semicolon, say("nothing was stored: fix it and run again")),
        Refusal::NotANegotiator { id, party, parties } => Explained::said(
            Words::default()
                .field(Field::Actor)
                .text(format!(" {party} is not a party to negotiation {id}")),
        )
        .hinted(Colon, say(format!("its parties are {}", parties.join(", ")))),
        Refusal::PositionSubmitted { id, .. } => Explained::plain(r).hinted(
            Semicolon,
            say("a position counts once (see ")
                .run(negotiation_show(id))
                .text(")"),
        ),
        Refusal::NegotiationSettled { id } => {
            Explained::plain(r).hinted(Colon, say("see ").run(negotiation_show(id)))
        }
        Refusal::NegotiationExists { id } => {
            Explained::plain(r).hinted(Semicolon, say("see ").run(negotiation_show(id)))
        }
        Refusal::OwnPosition { .. } => Explained::plain(r).hinted(
            Semicolon,
            Words::default()
                .input("for")
                .text(" is for a party the spec declares external"),
        ),
        Refusal::EffectsDiffer { order, .. } => Explained::plain(r).hinted(
            Stop,
            say("The worker's report must list exactly what its gateway held (see ")
                .run(order_show(order))
                .text("): rework the order so it reports again"),
        ),
        Refusal::NoEffect { order, .. } => Explained::plain(r).hinted(
            Colon,
            Words::default()
                .run(order_show(order))
                .text(" lists its effects"),
        ),
        Refusal::ForeignLog => Explained::plain(r).hinted(
            Stop,
            say("To add its work to this project, run ")
                .run(
                    Next::named("import")
                        .on("file", Arg::Fill("FILE"))
                        .with("merge", Arg::Yes),
                )
                .text(
                    ": its keys are never imported, and this project's participants keep \
                     their roles, policies, outside agents and webhooks",
                ),
        ),
        Refusal::Scope { action, .. } => {
            let wider = OPERATIONS
                .iter()
                .find(|o| o.name == *action)
                .map_or("admin", |o| o.scope().as_str());
            Explained::plain(r).hinted(
                Colon,
                say("an administrator can issue a key of a wider scope: ").run(
                    of::<KeyIssue>()
                        .on("participant", Arg::Fill("NAME"))
                        .with("scope", Arg::Is(wider.to_owned())),
                ),
            )
        }
        Refusal::ActorInRequest => Explained::plain(r).hinted(
            Colon,
            say("leave ")
                .field(Field::Actor)
                .text(" out: the key says who is acting"),
        ),
        Refusal::Reserved { .. } => Explained::plain(r).hinted(
            Stop,
            say(
                "Run it again once that lapses or is released, reserve other paths, or ask \
                 its holder",
            )
            .chain(reservations_listed()),
        ),
        Refusal::ReservationInput {
            field: Field::Document,
            ..
        } => Explained::said(say(format!("the order's x-baton.scope.allowed: {r}"))),
        Refusal::ReservationInput {
            field: field @ Field::Ttl,
            value,
            problem,
        } => Explained::said(
            Words::default()
                .field(*field)
                .text(format!(" {value} is refused: {problem}")),
        ),
        Refusal::ReservationInput {
            field,
            value,
            problem,
        } => Explained::said(
            Words::default()
                .field(*field)
                .text(format!(" {value:?} is refused: {problem}")),
        ),
        Refusal::NotReleased { .. } => Explained::plain(r).hinted(
            Semicolon,
            say("see what is held").chain(reservations_listed()),
        ),
        Refusal::Unreleased {
            id,
            hold: baton_core::reservation::Hold::Others,
            ..
        } => Explained::plain(r).hinted(
            Colon,
            Words::default().first(vec![
                of::<ReleaseForce>()
                    .on("id", Arg::Is(id.clone()))
                    .with("as", Arg::Fill("OWNER"))
                    .with("reason", Arg::Fill("TEXT")),
                of::<Release>()
                    .with("as", Arg::Fill("OWNER"))
                    .with("force", Arg::Is(id.clone()))
                    .with("reason", Arg::Fill("TEXT")),
            ]),
        ),
        Refusal::PoolAddress {
            field,
            value,
            problem,
        } => Explained::said(
            Words::default()
                .field(*field)
                .text(format!(" {value:?} is refused: {problem}")),
        ),
        Refusal::Claim {
            problem: baton_core::pool::ClaimProblem::Taken { .. },
            ..
        } => Explained::plain(r).hinted(
            Colon,
            say("take the most urgent item still ready: ").run(of::<NextItem>()),
        ),
        Refusal::Unclaimed { order, .. } => Explained::plain(r).hinted(
            Colon,
            say("claim it first: ").run(of::<ClaimItem>().on("id", Arg::Is(order.clone()))),
        ),
        Refusal::NothingReady { .. } => Explained::plain(r).hinted(
            Semicolon,
            say("run it again once work is sent to the pool"),
        ),
        Refusal::Claim { .. }
        | Refusal::Role { .. }
        | Refusal::ShortPrefix { .. }
        | Refusal::TopicPattern { .. }
        | Refusal::PowerName { .. }
        | Refusal::WebhookUrl { .. }
        | Refusal::AgentUrl { .. }
        | Refusal::KeyEnvNotListed { .. }
        | Refusal::KeyEnv { .. }
        | Refusal::NotARequest { .. }
        | Refusal::Superseded { .. }
        | Refusal::TooManyChanges { .. }
        | Refusal::StateEdits { .. }
        | Refusal::ReportStatus { .. }
        | Refusal::NotAnExit(..)
        | Refusal::LogLine { .. }
        | Refusal::NotAParty { .. }
        | Refusal::SenderSteps { .. }
        | Refusal::OrderRole { .. }
        | Refusal::OfferFrom { .. }
        | Refusal::ReportFrom { .. }
        | Refusal::Unauthenticated
        | Refusal::NotTheWorker { .. }
        | Refusal::GatewayClosed { .. }
        | Refusal::RoleTaken { .. }
        | Refusal::OrderExists { .. }
        | Refusal::RunExists { .. }
        | Refusal::EffectNotHeld { .. }
        | Refusal::RunStatus { .. }
        | Refusal::Unreleased { .. }
        | Refusal::ForceRelease { .. } => Explained::plain(r),
    }
}

// ---- one of each --------------------------------------------------------------------------

/// One refusal of every variant, for the edges' tests that render each on every edge.
/// Each is made by the arm of the one before it in [`after`], whose `match` is exhaustive:
/// a new variant does not compile until it has an arm, and its sample is one link of the
/// chain (`every_refusal_is_sampled_once` checks the chain reaches each variant once).
pub fn every_refusal() -> Vec<Refusal> {
    let mut all = vec![Refusal::not_found(
        Record::Message,
        "01JD0000000000000000000000",
    )];
    while let Some(next) = after(all.last().expect("a first sample")) {
        all.push(next);
    }
    all
}

/// The records a lookup may miss, after `record`: each is sampled.
fn record_after(record: Record) -> Option<Record> {
    Some(match record {
        Record::Message => Record::Parent,
        Record::Parent => Record::Order,
        Record::Order => Record::Run,
        Record::Run => Record::Decision,
        Record::Decision => Record::Stream,
        Record::Stream => Record::Alert,
        Record::Alert => Record::Receipt,
        Record::Receipt => Record::Key,
        Record::Key => Record::Project,
        Record::Project => Record::Negotiation,
        Record::Negotiation => Record::Reservation,
        Record::Reservation => return None,
    })
}

/// The sample that follows `r` (`None` after the last).
fn after(r: &Refusal) -> Option<Refusal> {
    use baton_core::authority::{Policy, Power};
    use baton_core::order::{OrderAction, OrderStatus};
    use baton_core::refusal::MayAct;
    use baton_core::{MessageType, Passname, PayloadError, Topic};
    let name = |n: &str| Passname::new(n).expect("a passname");
    let s = |text: &str| text.to_owned();
    Some(match r {
        Refusal::NotFound { record, id } => match record_after(*record) {
            Some(record) => Refusal::NotFound {
                record,
                id: id.clone(),
            },
            None => Refusal::UnknownParticipant { name: s("ghost") },
        },
        Refusal::UnknownParticipant { .. } => Refusal::NoRecipient {
            name: s("ghost"),
            registered: vec![s("impl-1"), s("planner")],
        },
        Refusal::NoRecipient { .. } => Refusal::NoArtifact {
            artifact: s("out/missing.bin"),
            reason: s("No such file or directory"),
        },
        Refusal::NoArtifact { .. } => Refusal::NoSubject {
            subject: s("nowhere"),
        },
        Refusal::NoSubject { .. } => Refusal::NoReceipt {
            step: s("deploy"),
            alert: s("no receipt for step \"deploy\" within 30s"),
        },
        Refusal::NoReceipt { .. } => Refusal::NoStep {
            order: s("wo_1"),
            since: 5,
            seq: 5,
            seconds: 1.0,
        },
        Refusal::NoStep { .. } => Refusal::Ambiguous {
            record: Record::Message,
            prefix: s("01J"),
            candidates: vec![s("01JA"), s("01JB")],
            more: true,
        },
        Refusal::Ambiguous { .. } => Refusal::ShortPrefix {
            record: Record::Order,
            prefix: s("w"),
            min: 4,
        },
        Refusal::ShortPrefix { .. } => Refusal::Missing(Field::To),
        Refusal::Missing(field) => match field {
            Field::To => Refusal::Missing(Field::Topic),
            Field::Topic => Refusal::Missing(Field::Reason),
            Field::Reason => Refusal::Missing(Field::Answer),
            Field::Answer => Refusal::Missing(Field::ReworkReason),
            Field::ReworkReason => Refusal::Missing(Field::Why),
            _ => Refusal::TooLong {
                field: Field::Body,
                max: 10,
                len: 11,
            },
        },
        Refusal::TooLong { .. } => Refusal::Name {
            field: Field::Topic,
            error: Topic::new("Bad Topic").expect_err("not a topic"),
        },
        Refusal::Name { field, error } => match field {
            Field::Topic => Refusal::Name {
                field: Field::Name,
                error: error.clone(),
            },
            Field::Name => Refusal::Name {
                field: Field::OrderTo,
                error: error.clone(),
            },
            _ => Refusal::Payload {
                field: Field::Payload,
                error: PayloadError::TooLarge { size: 11, cap: 10 },
            },
        },
        Refusal::Payload { error, .. } => match error {
            PayloadError::TooLarge { .. } => Refusal::Payload {
                field: Field::Arguments,
                error: PayloadError::NotAnObject("an array"),
            },
            _ => Refusal::Role { role: s("Boss!") },
        },
        Refusal::Role { .. } => Refusal::SelfSend {
            name: name("planner"),
        },
        Refusal::SelfSend { .. } => Refusal::ArtifactOutside {
            artifact: s("/etc/passwd"),
            root: s("/work/shop"),
        },
        Refusal::ArtifactOutside { .. } => Refusal::Outside {
            subject: s("/etc"),
            root: s("/work/shop"),
        },
        Refusal::Outside { .. } => Refusal::TopicPattern { pattern: s("Bad*") },
        Refusal::TopicPattern { .. } => Refusal::PowerName { name: s("fly") },
        Refusal::PowerName { .. } => Refusal::WebhookUrl {
            url: s("http://10.0.0.1/hook"),
            why: s("it is a private address"),
        },
        Refusal::WebhookUrl { .. } => Refusal::AgentUrl {
            url: s("http://10.0.0.1/a2a"),
            why: s("it is a private address"),
        },
        Refusal::AgentUrl { .. } => Refusal::KeyEnvNotListed {
            name: s("HOME"),
            listed: s("PARTNER_KEY"),
        },
        Refusal::KeyEnvNotListed { .. } => Refusal::KeyEnv { name: s("a b") },
        Refusal::KeyEnv { .. } => Refusal::Cursor { cursor: s("nope") },
        Refusal::Cursor { .. } => Refusal::StatusNeedsIdentity,
        Refusal::StatusNeedsIdentity => Refusal::Input {
            operation: "decide",
            problem: s("missing field `why`"),
        },
        Refusal::Input { operation, .. } => match *operation {
            "decide" => Refusal::Input {
                operation: "no such operation",
                problem: s("a newer server's"),
            },
            _ => transition_sample(Action::Delivery(DeliveryAction::Acknowledge)),
        },
        Refusal::Transition(t) => match t.action {
            Action::Delivery(DeliveryAction::Acknowledge) => {
                transition_sample(Action::Request(RequestAction::Complete))
            }
            Action::Request(_) => transition_sample(Action::Order(OrderAction::Start)),
            _ => Refusal::NotARequest {
                id: s("01JD0000000000000000000000"),
                kind: MessageType::Info,
            },
        },
        Refusal::NotARequest { .. } => Refusal::SenderNote,
        Refusal::SenderNote => Refusal::Superseded {
            decision: s("D-1"),
            by: s("D-2"),
        },
        Refusal::Superseded { .. } => Refusal::TooManyChanges { max: 64, got: 65 },
        Refusal::TooManyChanges { .. } => Refusal::StateEdits {
            refused: vec![s("a decision's text was changed")],
        },
        Refusal::StateEdits { .. } => Refusal::DocumentField { field: "goal" },
        Refusal::DocumentField { .. } => Refusal::ReportStatus {
            status: Some(s("maybe")),
        },
        Refusal::ReportStatus { .. } => Refusal::Findings {
            document: Document::WorkOrder,
            findings: vec![Finding::invalid("B9", "/criteria", "must not be empty")],
        },
        Refusal::Findings { document, .. } => match document {
            Document::WorkOrder => Refusal::Findings {
                document: Document::WorkReport,
                findings: vec![Finding::invalid("R1", "/status", "is required")],
            },
            Document::WorkReport => Refusal::WrongDocument {
                expected: Document::WorkOrder,
            },
        },
        Refusal::WrongDocument { .. } => Refusal::NotAnExit(baton_core::run::RunStatus::Running),
        Refusal::NotAnExit(..) => Refusal::LogLine {
            line: 3,
            problem: s("not an event"),
        },
        Refusal::LogLine { .. } => Refusal::ForeignLog,
        Refusal::ForeignLog => Refusal::NegotiationInput {
            input: baton_core::negotiation::Input::Spec,
            path: s("/issues"),
            problem: baton_core::negotiation::Problem::Missing,
        },
        Refusal::NegotiationInput { .. } => Refusal::NegotiationSettled { id: s("n1") },
        Refusal::NegotiationSettled { .. } => Refusal::Beyond {
            actor: name("impl-1"),
            role: s("executor"),
            power: Power::Request,
            topic: Topic::new("billing").ok(),
            policy: Box::new(Policy::for_role("executor")),
        },
        Refusal::Beyond { .. } => Refusal::Unwilling {
            recipient: name("impl-1"),
            role: s("executor"),
            topic: Topic::new("billing").expect("a topic"),
            policy: Box::new(Policy::for_role("executor")),
        },
        Refusal::Unwilling { .. } => Refusal::OwnWork {
            actor: s("impl-1"),
            order: s("wo_1"),
        },
        Refusal::OwnWork { .. } => Refusal::SameReviewer {
            command: s("claude -p"),
        },
        Refusal::SameReviewer { .. } => Refusal::NotAParty {
            who: name("watch"),
            id: s("01JD0000000000000000000000"),
        },
        Refusal::NotAParty { .. } => Refusal::SenderSteps {
            id: s("01JD0000000000000000000000"),
        },
        Refusal::SenderSteps { .. } => Refusal::OrderRole {
            actor: s("impl-1"),
            action: OrderAction::Approve,
            order: s("wo_1"),
            may: MayAct::Sender(s("planner")),
        },
        Refusal::OrderRole { .. } => Refusal::OfferFrom {
            actor: s("impl-1"),
            from: s("planner"),
        },
        Refusal::OfferFrom { .. } => Refusal::ReportFrom {
            actor: s("impl-1"),
            from: s("impl-2"),
        },
        Refusal::ReportFrom { .. } => Refusal::Unauthenticated,
        Refusal::Unauthenticated => Refusal::Scope {
            scope: baton_core::key::Scope::Read,
            action: "send",
        },
        Refusal::Scope { .. } => Refusal::NotANegotiator {
            id: s("n1"),
            party: s("impl-1"),
            parties: vec![s("planner"), s("vendor")],
        },
        Refusal::NotANegotiator { .. } => Refusal::OwnPosition {
            id: s("n1"),
            actor: s("planner"),
            party: s("impl-1"),
        },
        Refusal::OwnPosition { .. } => Refusal::ActorInRequest,
        Refusal::ActorInRequest => Refusal::NotTheWorker {
            order: s("wo_1"),
            actor: s("planner"),
            worker: s("impl-1"),
        },
        Refusal::NotTheWorker { .. } => Refusal::GatewayClosed {
            order: s("wo_1"),
            status: OrderStatus::Offered,
        },
        Refusal::GatewayClosed { .. } => Refusal::EffectsDiffer {
            order: s("wo_1"),
            mismatches: vec![baton_core::effect::Mismatch {
                index: 0,
                reported: None,
                held: Some(s("1 files/append")),
                what: s("missing"),
            }],
        },
        Refusal::EffectsDiffer { .. } => Refusal::NoEffect {
            order: s("wo_1"),
            reference: s("files/append#2"),
        },
        Refusal::NoEffect { .. } => Refusal::EffectsNeedRunner {
            order: s("wo_1"),
            count: 1,
        },
        Refusal::EffectsNeedRunner { .. } => Refusal::RoleTaken {
            name: name("impl-1"),
            role: s("executor"),
        },
        Refusal::RoleTaken { .. } => Refusal::KeyReused {
            key: s("k1"),
            id: s("01JD0000000000000000000000"),
        },
        Refusal::KeyReused { .. } => Refusal::OrderExists { id: s("wo_1") },
        Refusal::OrderExists { .. } => Refusal::Moved {
            order: s("wo_1"),
            expected: 3,
            seq: 4,
        },
        Refusal::Moved { .. } => Refusal::RunExists { id: s("run-1") },
        Refusal::RunExists { .. } => Refusal::NegotiationExists { id: s("n1") },
        Refusal::NegotiationExists { .. } => Refusal::PositionSubmitted {
            id: s("n1"),
            party: s("impl-1"),
        },
        Refusal::PositionSubmitted { .. } => Refusal::EffectNotHeld {
            order: s("wo_1"),
            reference: s("files/append#1"),
            status: Some(baton_core::effect::EffectStatus::Ran),
        },
        Refusal::EffectNotHeld { .. } => Refusal::RunStatus {
            run: s("run-1"),
            status: baton_core::run::RunStatus::Done,
            what: "a heartbeat",
        },
        Refusal::RunStatus { .. } => Refusal::Reserved {
            conflicts: vec![baton_core::reservation::Conflict {
                path: s("src/billing/invoice.rs"),
                reservation: s("rsv-01jd0000000000000000000000"),
                holder: s("impl-1"),
                held: s("src/billing/**"),
                exclusive: true,
                expires_at: Some(1_900_000_000_000),
                order: None,
            }],
        },
        Refusal::Reserved { .. } => Refusal::ReservationInput {
            field: Field::Paths,
            value: s("../other/**"),
            problem: baton_core::reservation::Problem::Parent,
        },
        Refusal::ReservationInput { field, .. } => match field {
            Field::Paths => Refusal::ReservationInput {
                field: Field::Ttl,
                value: s("0s"),
                problem: baton_core::reservation::Problem::NotPositive,
            },
            Field::Ttl => Refusal::ReservationInput {
                field: Field::Document,
                value: s("/etc/**"),
                problem: baton_core::reservation::Problem::Absolute,
            },
            _ => Refusal::NotReleased {
                holder: s("impl-1"),
                asked: vec![s("tests/**")],
                held: vec![s("rsv-01jd0000000000000000000000 src/billing/**")],
            },
        },
        Refusal::NotReleased { .. } => Refusal::Unreleased {
            id: s("rsv-01jd0000000000000000000000"),
            holder: s("impl-1"),
            hold: baton_core::reservation::Hold::Others,
        },
        Refusal::Unreleased { hold, .. } => match hold {
            baton_core::reservation::Hold::Others => Refusal::Unreleased {
                id: s("rsv-01jd0000000000000000000001"),
                holder: s("impl-1"),
                hold: baton_core::reservation::Hold::Order(s("wo_1")),
            },
            _ => Refusal::ForceRelease {
                actor: name("impl-2"),
                role: s("executor"),
                id: s("rsv-01jd0000000000000000000000"),
            },
        },
        Refusal::ForceRelease { .. } => Refusal::PoolAddress {
            field: Field::To,
            value: s("role:nobody"),
            problem: baton_core::pool::AddressProblem::UnknownRole {
                role: s("nobody"),
                known: vec![s("executor"), s("planner")],
            },
        },
        Refusal::PoolAddress { .. } => Refusal::Claim {
            item: s("01JD0000000000000000000000"),
            problem: baton_core::pool::ClaimProblem::Taken { by: name("impl-2") },
        },
        Refusal::Claim { problem, .. } => match problem {
            baton_core::pool::ClaimProblem::Taken { .. } => Refusal::Claim {
                item: s("wo_1"),
                problem: baton_core::pool::ClaimProblem::NotInPool {
                    actor: name("rev"),
                    role: s("reviewer"),
                    pool: baton_core::pool::Pool::of_role("executor"),
                },
            },
            _ => Refusal::Unclaimed {
                order: s("wo_1"),
                pool: s("role:executor"),
            },
        },
        Refusal::Unclaimed { .. } => Refusal::NothingReady {
            actor: name("impl-1"),
            pool: baton_core::pool::Pool::of_role("executor"),
            topic: None,
        },
        Refusal::NothingReady { .. } => Refusal::After {
            index: 1,
            order: s("wo_9"),
            problem: baton_core::after::Problem::Unknown,
        },
        Refusal::After { .. } => Refusal::Waits {
            order: s("wo_2"),
            held: false,
            on: vec![baton_core::after::Wait {
                order: s("wo_1"),
                status: OrderStatus::Submitted,
            }],
        },
        Refusal::Waits { held: false, .. } => Refusal::Waits {
            order: s("wo_2"),
            held: true,
            on: vec![baton_core::after::Wait {
                order: s("wo_1"),
                status: OrderStatus::Cancelled,
            }],
        },
        Refusal::Waits { .. } => return None,
    })
}

fn transition_sample(action: Action) -> Refusal {
    use baton_core::order::OrderAction;
    Refusal::Transition(match action {
        Action::Order(_) => InvalidTransition {
            action,
            status: "offered",
            blocker: Some(Blocker::AcceptFirst),
            allowed: vec![
                Action::Order(OrderAction::Accept),
                Action::Order(OrderAction::Decline),
                Action::Order(OrderAction::Cancel),
            ],
        },
        Action::Request(_) => InvalidTransition {
            action,
            status: "completed",
            blocker: None,
            allowed: vec![Action::Request(RequestAction::Archive)],
        },
        Action::Delivery(_) => InvalidTransition {
            action,
            status: "pending",
            blocker: Some(Blocker::FetchFirst),
            allowed: vec![
                Action::Delivery(DeliveryAction::Fetch),
                Action::Delivery(DeliveryAction::Refuse),
            ],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chain of samples reaches every variant it names, each once, and ends.
    #[test]
    fn every_refusal_is_sampled_once() {
        let all = every_refusal();
        let mut seen = std::collections::HashSet::new();
        for r in &all {
            let text = serde_json::to_string(r).expect("a refusal serializes");
            assert!(seen.insert(text), "sampled twice: {r}");
        }
        let variants: std::collections::HashSet<_> =
            all.iter().map(std::mem::discriminant).collect();
        // As many as `Refusal` has. A new variant does not compile until `after` has an
        // arm for it; counting it here fails until the chain reaches its sample.
        assert_eq!(variants.len(), 80, "variants sampled");
    }

    /// The neutral spelling: fields and inputs by name, operations by their words.
    struct Plain;

    impl Spell for Plain {
        fn run(&self, next: &Next) -> Option<String> {
            Some(format!("`{}`", next.words().join(" ")))
        }
        fn step(&self, next: &Next) -> String {
            next.words().join(" ")
        }
        fn again(&self, next: &Next) -> String {
            format!("{} again", next.words().join(" "))
        }
    }

    #[test]
    fn a_hint_names_an_operation_by_its_declaration() {
        let no_order = explain(&Refusal::not_found(Record::Order, "wo_9"), None);
        assert_eq!(
            no_order.text(&Plain),
            "no order wo_9 in this project: check `id` or see `order list`"
        );
        let beyond = every_refusal()
            .into_iter()
            .find(|r| matches!(r, Refusal::Beyond { .. }))
            .unwrap();
        let hint = explain(&beyond, None).hint(&Plain).unwrap();
        assert!(hint.contains("`agent policy`"), "{hint}");
    }

    #[test]
    fn the_command_line_of_an_operation_puts_options_first_and_quotes_what_a_shell_would_split() {
        let next = Next::named("review")
            .on("order", Arg::Is("wo_1".into()))
            .with("as", Arg::Fill("SENDER"));
        assert_eq!(next.command_line(), "baton --as SENDER review wo_1");
        let policy = of::<AgentPolicySet>()
            .on("name", Arg::Is("impl-1".into()))
            .with("topics", Arg::Plus("csv-*".into()));
        assert_eq!(
            policy.command_line(),
            "baton agent policy impl-1 --topics 'csv-*,…'"
        );
        let step = step(
            Action::Order(baton_core::order::OrderAction::Accept),
            Arg::Fill("ID"),
        );
        assert_eq!(step.command_line(), "baton order accept ID");
    }
}
