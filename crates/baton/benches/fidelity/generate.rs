//! The history generator: a seeded, deterministic project played through Baton's own use
//! cases (`baton_app::App` over the project's SQLite store) and, for what needs the
//! machine, the `baton` binary (`init`, `agent add`, the agents' hooks), in a real git
//! checkout whose files it changes so notes about them go stale.
//!
//! It keeps its own [`Record`] of what it did — every request and its two ends, every
//! order and where its lifecycle left it, decisions and what superseded them, constraints
//! and what they are about, notes and the file changes after them, runs, sessions, needs,
//! alerts, each session's hand-over — and the HANDOFF.md each session appends to. The
//! oracle reads that record alone. Ids are Baton's (a ULID, `D-7`, an order's own id) and
//! are recorded as the use cases return them, as a user would copy them; what an id's item
//! is and where it stands is the generator's own bookkeeping, never read back from Baton's
//! projections.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_app::{
    App, Body, Clock, Files, Hashed, Host, Layout, OrderStep, Outgoing, PathClock, PathProblem,
    Processes, Reviewed, Settings, ToolRunner,
};
use baton_core::awl::NoEnvironment;
use baton_core::effect::{Call, Decision};
use baton_core::gate::{NeedSource, Verdict};
use baton_core::run::{HookCall, ProcessRef, Registration, RunChange, RunStatus};
use baton_core::state::StateOp;
use baton_core::{MessageType, Millis, Passname, Verb};
use baton_store::{SqliteStore, Store};
use serde_json::{Map, Value, json};

/// The participant that resumes.
pub const ME: &str = "lead";

/// Who takes part, and their roles: an owner and two planners hand out work (the lead
/// among them, owing and waiting alike), three executors do it, a reviewer reads.
pub const PARTICIPANTS: [(&str, &str); 7] = [
    ("owner", "owner"),
    (ME, "planner"),
    ("architect", "planner"),
    ("impl-1", "executor"),
    ("impl-2", "executor"),
    ("impl-3", "executor"),
    ("reviewer", "reviewer"),
];
const EXECUTORS: [&str; 3] = ["impl-1", "impl-2", "impl-3"];

/// The lanes of work; each has four files in the checkout.
pub const TOPICS: [&str; 12] = [
    "csv-export",
    "auth-tokens",
    "billing-retries",
    "search-index",
    "audit-log",
    "rate-limits",
    "webhooks",
    "migrations",
    "onboarding",
    "pdf-reports",
    "cache-layer",
    "mobile-sync",
];
const FILES: [&str; 4] = ["mod", "api", "store", "tests"];

/// The file `n` of `topic`'s four.
pub fn path_of(topic: &str, n: usize) -> String {
    format!(
        "src/{}/{}.rs",
        topic.replace('-', "_"),
        FILES[n % FILES.len()]
    )
}

// ---- the record ----------------------------------------------------------------------------

/// A recipient's end of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inbound {
    Pending,
    Read,
    Completed,
    Refused,
    HandedBack,
}

impl Inbound {
    pub fn open(self) -> bool {
        matches!(self, Self::Pending | Self::Read)
    }
}

/// A sender's own end of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outbound {
    Open,
    Completed,
    Archived,
}

#[derive(Debug, Clone)]
pub struct RequestRec {
    pub id: String,
    pub from: String,
    pub to: String,
    pub topic: String,
    pub text: String,
    /// When it was sent: the generator's step.
    pub step: u64,
    pub inbound: Inbound,
    pub outbound: Outbound,
    /// The step of the newest change of the recipient's end to `Read` (what a lost run's
    /// reaper looks at).
    pub read_at: Option<Millis>,
}

#[derive(Debug, Clone)]
pub struct InfoRec {
    pub id: String,
    pub to: String,
    pub text: String,
    pub acked: bool,
}

/// Where an order's lifecycle stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderState {
    Offered,
    Accepted,
    Working,
    Blocked,
    Submitted,
    Approved,
    Declined,
    Expired,
    Cancelled,
}

impl OrderState {
    pub fn open(self) -> bool {
        matches!(
            self,
            Self::Offered | Self::Accepted | Self::Working | Self::Blocked | Self::Submitted
        )
    }
}

#[derive(Debug, Clone)]
pub struct OrderRec {
    pub id: String,
    pub from: String,
    pub to: String,
    pub topic: String,
    pub goal: String,
    pub deadline: Millis,
    pub step: u64,
    pub state: OrderState,
    /// Effects the gateway held and no approval ran yet.
    pub held: usize,
}

#[derive(Debug, Clone)]
pub struct DecisionRec {
    pub id: String,
    pub text: String,
    pub step: u64,
    pub superseded: bool,
}

#[derive(Debug, Clone)]
pub struct ConstraintRec {
    pub id: String,
    pub text: String,
    /// The topic or the path it is about.
    pub on: String,
    pub step: u64,
}

#[derive(Debug, Clone)]
pub struct NoteRec {
    pub id: String,
    pub by: String,
    pub path: String,
    pub text: String,
    pub step: u64,
    /// The generator changed the file after the note.
    pub stale: bool,
}

#[derive(Debug, Clone)]
pub struct RunRec {
    pub id: String,
    pub who: String,
    pub ended: bool,
    pub lost: bool,
    /// The requests it held when it was lost (they went back to pending).
    pub held: Vec<String>,
    /// The alerts its loss raised.
    pub alerts: Vec<String>,
    pub alerts_acked: bool,
    pub step: u64,
    /// Its monitor's process id, and when it was registered (wall time).
    pid: u32,
    registered_at: Millis,
}

#[derive(Debug, Clone)]
pub struct SessionRec {
    /// The ledger row its hooks are recorded on.
    pub id: String,
    pub who: String,
    pub ended: bool,
}

#[derive(Debug, Clone)]
pub struct NeedRec {
    pub id: String,
    pub order: String,
    pub by: String,
    pub text: String,
    pub step: u64,
    pub acked: bool,
}

/// Everything the generator did, as it did it.
#[derive(Debug, Default)]
pub struct Record {
    pub requests: Vec<RequestRec>,
    pub infos: Vec<InfoRec>,
    pub orders: Vec<OrderRec>,
    pub decisions: Vec<DecisionRec>,
    pub constraints: Vec<ConstraintRec>,
    pub notes: Vec<NoteRec>,
    pub runs: Vec<RunRec>,
    pub sessions: Vec<SessionRec>,
    pub needs: Vec<NeedRec>,
    /// Each participant's hand-overs' first actions, oldest first.
    pub resume_at: Vec<(String, String)>,
    /// HANDOFF.md as the sessions appended to it.
    pub handoff: String,
    /// Receipts written, file changes committed, hook calls made.
    pub receipts: usize,
    pub commits: usize,
    pub hooks: usize,
}

// ---- the machine the use cases run on ------------------------------------------------------

/// A deterministic generator (SplitMix64).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    pub fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[self.below(from.len())]
    }
}

struct WallClock;

impl Clock for WallClock {
    fn now(&self) -> Millis {
        now()
    }
}

fn now() -> Millis {
    jiff::Timestamp::now().as_millisecond()
}

/// The generator never asks a path's history: the packet is read through the binary,
/// whose clock is git's.
struct NoHistory;

impl PathClock for NoHistory {
    fn changed_at(&self, _: &str) -> Option<Millis> {
        None
    }
}

/// The checkout's files, hashed with blake3 as the binary hashes them.
struct Checkout {
    root: PathBuf,
}

impl Files for Checkout {
    fn resolve(&self, base: &Path, path: &str) -> Result<String, PathProblem> {
        let absolute = base
            .join(path)
            .canonicalize()
            .map_err(|_| PathProblem::Missing)?;
        let root = self.root.canonicalize().map_err(|_| PathProblem::Missing)?;
        absolute
            .strip_prefix(&root)
            .map(|p| p.display().to_string())
            .map_err(|_| PathProblem::Outside)
    }

    fn hash(&self, base: &Path, path: &str) -> std::io::Result<Hashed> {
        let bytes = std::fs::read(base.join(path))?;
        Ok(Hashed {
            path: path.to_owned(),
            hash: blake3::hash(&bytes).to_hex().to_string(),
            size: bytes.len() as u64,
        })
    }
}

/// The process table the reaper reads: the generator says which runs' monitors died.
#[derive(Default)]
struct Table {
    dead: Mutex<HashSet<u32>>,
}

const HOST: &str = "fidelity-bench";

impl Processes for Table {
    fn host(&self) -> Option<String> {
        Some(HOST.into())
    }
    fn alive(&self, process: &ProcessRef) -> Option<bool> {
        Some(!self.dead.lock().unwrap().contains(&process.pid))
    }
    fn me(&self) -> u32 {
        1
    }
    fn untracked_agents(&self, _: &HashSet<u32>) -> Vec<Registration> {
        Vec::new()
    }
}

/// The upstream tool server an approval runs held calls through: it answers every call.
struct Upstream;

#[async_trait::async_trait]
impl ToolRunner for Upstream {
    async fn call(&self, _: &[String], tool: &str, _: Map<String, Value>) -> Result<Value, String> {
        Ok(json!({"content": [{"type": "text", "text": format!("{tool} ran")}]}))
    }
}

// ---- words -----------------------------------------------------------------------------------

/// Words no status is told by: a text never reads as ended, stale or superseded.
const VERBS: [&str; 12] = [
    "Keep", "Move", "Split", "Trim", "Cache", "Index", "Batch", "Guard", "Log", "Page", "Sort",
    "Bound",
];
const OBJECTS: [&str; 10] = [
    "rows", "handler", "query", "schema", "retries", "headers", "timeouts", "fixtures", "metrics",
    "limits",
];
const DETAILS: [&str; 10] = [
    "behind the flag",
    "for large tenants",
    "before the release",
    "per tenant",
    "in one pass",
    "under the new quota",
    "for the mobile client",
    "with the old format kept",
    "across both regions",
    "for the nightly job",
];
const APPROACHES: [(&str, &str); 8] = [
    (
        "streaming through a temp file",
        "the disk fills on large tenants",
    ),
    ("a second connection pool", "the writer starves under load"),
    (
        "retrying inside the transaction",
        "it holds the lock for seconds",
    ),
    ("caching by user id", "entries leak across tenants"),
    ("a regex over the payload", "it misses nested fields"),
    ("parallel workers per tenant", "the ordering breaks"),
    ("an index on the JSON column", "the planner ignores it"),
    ("batching by hour", "late rows miss their batch"),
];

fn tag(kind: char, n: usize) -> String {
    format!("[{kind}{n:05}]")
}

// ---- the generator -------------------------------------------------------------------------

/// Something the history will do later.
#[derive(Debug, Clone, Copy)]
enum Task {
    /// The recipient reads request `i`.
    Read(usize),
    /// The recipient ends request `i` its fated way.
    Finish(usize),
    /// The sender closes its own end of request `i`.
    Close(usize),
    /// The recipient reads and acknowledges info `i`.
    Ack(usize),
    /// Order `i`'s next step.
    Order(usize),
    /// Need `i` is acknowledged.
    Resolve(usize),
    /// The alerts run `i`'s loss raised are acknowledged.
    AckAlerts(usize),
}

/// How a request's recipient will end it, and whether its sender closes its end after.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fate {
    Complete,
    Refuse,
    HandBack,
    /// Read, and left open.
    LeaveRead,
    /// Never read.
    LeavePending,
}

/// How an order's life will go.
#[derive(Debug, Clone, Copy, Default)]
struct Plan {
    decline: bool,
    cancel_at: Option<u8>,
    /// Stops (left open) after this many steps.
    stop_at: Option<u8>,
    blocked: bool,
    effects: bool,
    review_fix: Option<bool>,
    over_budget: bool,
    report_failed: bool,
    /// Its sender cancels it once it is reported.
    end_declined: bool,
    steps: u8,
    archive: bool,
}

/// A participant's session now.
#[derive(Debug, Clone)]
struct Live {
    session: String,
    record: usize,
    run: Option<usize>,
    helpers: Vec<String>,
    helpers_started: usize,
}

pub struct Generator {
    app: App,
    exe: PathBuf,
    root: PathBuf,
    rng: Rng,
    table: Table,
    pub record: Record,
    step: u64,
    tasks: Vec<Task>,
    fates: HashMap<usize, (Fate, u8)>,
    plans: HashMap<usize, Plan>,
    /// Each participant's session now: its hook session id, its record, its run, and its
    /// helpers not stopped.
    sessions: BTreeMap<String, Live>,
    /// What each participant did in its session now, for its hand-over.
    did: BTreeMap<String, Vec<String>>,
    pids: u32,
    files: Vec<String>,
    /// The newest note's wall time on each path: a change comes after it.
    noted: HashMap<String, Millis>,
    /// Each order's request message, and when its worker's end was last read (none while
    /// pending): what a lost run of its worker holds.
    order_requests: Vec<(String, Option<Millis>)>,
}

/// Runs `git ARGS` in `root`.
fn git(root: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.org",
        ])
        .args(args)
        .current_dir(root)
        .stdin(Stdio::null())
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `baton ARGS` in `root` as `who`, insisting on success.
pub fn baton(exe: &Path, root: &Path, who: Option<&str>, args: &[&str]) -> Vec<u8> {
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .current_dir(root)
        .env_remove("BATON_PROJECT")
        .env_remove("BATON_URL")
        .env_remove("BATON_AS");
    if let Some(who) = who {
        cmd.env("BATON_AS", who);
    }
    let out = cmd.output().expect("run baton");
    assert!(
        out.status.success(),
        "baton {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

impl Generator {
    /// A project at `root`: a git checkout of the topics' files, `baton init`, the
    /// participants, and the use cases over its store.
    pub async fn new(exe: &Path, root: &Path, seed: u64) -> Self {
        git(root, &["init", "-q"]);
        let mut files = Vec::new();
        for topic in TOPICS {
            for n in 0..FILES.len() {
                let path = path_of(topic, n);
                let file = root.join(&path);
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(&file, format!("// {path}\n")).unwrap();
                files.push(path);
            }
        }
        git(root, &["add", "."]);
        git(root, &["commit", "-qm", "the checkout"]);
        baton(exe, root, None, &["init"]);
        for (name, role) in PARTICIPANTS {
            let mut args = vec!["agent", "add", name, "--role", role];
            if name == ME {
                // A lead: it ships what it approves.
                args.extend(["--may", "request,send,accept,approve,effects"]);
            }
            baton(exe, root, None, &args);
        }
        let store = SqliteStore::open(&root.join(".baton/baton.db"), Duration::from_secs(30))
            .await
            .expect("open the store");
        let host = Host {
            root: root.to_owned(),
            environment: Arc::new(NoEnvironment),
            paths: Arc::new(NoHistory),
            files: Arc::new(Checkout {
                root: root.to_owned(),
            }),
            clock: Arc::new(WallClock),
        };
        let app = App::new(Store::new(store), Settings::default(), host);
        Self {
            app,
            exe: exe.to_owned(),
            root: root.to_owned(),
            rng: Rng::new(seed),
            table: Table::default(),
            record: Record::default(),
            step: 0,
            tasks: Vec::new(),
            fates: HashMap::new(),
            plans: HashMap::new(),
            sessions: BTreeMap::new(),
            did: BTreeMap::new(),
            pids: 10_000,
            files,
            noted: HashMap::new(),
            order_requests: Vec::new(),
        }
    }

    pub async fn generation(&self) -> i64 {
        self.app.generation().await.expect("the generation")
    }

    /// Plays the history until the log holds `events` events, then ends with the lead's
    /// session handing over (the session that resumes is the next one).
    pub async fn run(&mut self, events: i64) {
        for (name, _) in PARTICIPANTS {
            self.start_session(name).await;
        }
        while self.generation().await < events {
            self.tick().await;
        }
        self.end_session(ME).await;
    }

    fn me(name: &str) -> Passname {
        Passname::new(name).expect("a passname")
    }

    async fn tick(&mut self) {
        self.step += 1;
        let roll = self.rng.below(1000);
        match roll {
            0..=89 => self.send_request().await,
            90..=159 => self.send_info().await,
            160..=189 => self.offer_order().await,
            190..=209 => self.decide().await,
            210..=219 => self.constrain().await,
            220..=244 => self.note().await,
            245..=259 => self.change_file().await,
            260..=267 => self.receipt().await,
            268..=275 => self.raise_need().await,
            276..=283 => self.rotate_session().await,
            284..=329 => self.hook_call().await,
            _ => self.do_task().await,
        }
    }

    // ---- messages ----

    fn text(&mut self, topic: &str, kind: char, n: usize) -> String {
        let verb = *self.rng.pick(&VERBS);
        let object = *self.rng.pick(&OBJECTS);
        let detail = *self.rng.pick(&DETAILS);
        format!("{verb} the {topic} {object} {detail} {}", tag(kind, n))
    }

    async fn send_request(&mut self) {
        let others = ["owner", "architect"];
        let (from, to) = match self.rng.below(10) {
            0..=2 => (*self.rng.pick(&others), ME),
            3..=5 => (ME, *self.rng.pick(&EXECUTORS)),
            _ => (*self.rng.pick(&others), *self.rng.pick(&EXECUTORS)),
        };
        let topic = *self.rng.pick(&TOPICS);
        let n = self.record.requests.len();
        let text = self.text(topic, 'r', n);
        let sent = self
            .app
            .send(
                &Self::me(from),
                Outgoing {
                    to: vec![to.to_owned()],
                    kind: MessageType::Request,
                    topic: Some(topic.to_owned()),
                    reply_to: None,
                    body: Body::Text(text.clone()),
                    idempotency_key: None,
                },
            )
            .await
            .expect("send a request");
        // The lead leaves a few of what it is asked open; the executors fewer.
        let fate = match (to == ME, self.rng.below(100)) {
            (true, 0..=3) => Fate::LeavePending,
            (true, 4..=6) => Fate::LeaveRead,
            (false, 0..=1) => Fate::LeavePending,
            (false, 2..=4) => Fate::LeaveRead,
            (_, 5..=11) => Fate::Refuse,
            (_, 12..=18) => Fate::HandBack,
            _ => Fate::Complete,
        };
        // How the sender closes its end once the recipient's ends: 0 leaves it open, 1
        // completes it, 2 completes and archives it.
        let close = match self.rng.below(10) {
            0 => 0,
            1 => 1,
            _ => 2,
        };
        self.fates.insert(n, (fate, close));
        self.record.requests.push(RequestRec {
            id: sent.id,
            from: from.into(),
            to: to.into(),
            topic: topic.into(),
            text,
            step: self.step,
            inbound: Inbound::Pending,
            outbound: Outbound::Open,
            read_at: None,
        });
        if fate != Fate::LeavePending {
            self.tasks.push(Task::Read(n));
        }
    }

    async fn read_request(&mut self, i: usize) {
        let r = &self.record.requests[i];
        let reader = Self::me(&r.to);
        self.app
            .show(Some(&reader), &r.id, None, Layout::Compact)
            .await
            .expect("read a request");
        let r = &mut self.record.requests[i];
        if r.inbound == Inbound::Pending {
            r.inbound = Inbound::Read;
            r.read_at = Some(now());
        }
    }

    async fn finish_request(&mut self, i: usize) {
        if self.record.requests[i].inbound == Inbound::Pending {
            // Back to pending after a lost run: read again first.
            self.read_request(i).await;
        }
        let (fate, _) = self.fates[&i];
        let (verb, note, end) = match fate {
            Fate::Complete => (Verb::Complete, None, Inbound::Completed),
            Fate::Refuse => (
                Verb::Refuse,
                Some("not mine to take: the topic is another team's"),
                Inbound::Refused,
            ),
            Fate::HandBack => (
                Verb::HandBack,
                Some("blocked: the fixture this needs is missing"),
                Inbound::HandedBack,
            ),
            Fate::LeaveRead | Fate::LeavePending => return,
        };
        let r = &self.record.requests[i];
        self.app
            .step(&Self::me(&r.to), &r.id, verb, note)
            .await
            .expect("end a request");
        let r = &mut self.record.requests[i];
        r.inbound = end;
        let (to, id, text) = (r.to.clone(), r.id.clone(), r.text.clone());
        self.did_say(&to, format!("ended {id} ({text}) as {end:?}"));
        self.tasks.push(Task::Close(i));
    }

    async fn close_request(&mut self, i: usize) {
        let (_, close) = self.fates[&i];
        let r = &self.record.requests[i];
        let sender = Self::me(&r.from);
        let id = r.id.clone();
        if close >= 1 {
            self.app
                .step(&sender, &id, Verb::Complete, None)
                .await
                .expect("close my end");
            self.record.requests[i].outbound = Outbound::Completed;
        }
        if close == 2 {
            self.app
                .step(&sender, &id, Verb::Archive, None)
                .await
                .expect("archive my end");
            self.record.requests[i].outbound = Outbound::Archived;
        }
    }

    async fn send_info(&mut self) {
        let from = self.rng.pick(&PARTICIPANTS).0;
        let mut to = self.rng.pick(&PARTICIPANTS).0;
        if to == from {
            to = if from == ME { "impl-1" } else { ME };
        }
        let topic = *self.rng.pick(&TOPICS);
        let n = self.record.infos.len();
        let text = self.text(topic, 'i', n);
        let kind = if self.rng.chance(50) {
            MessageType::Info
        } else {
            MessageType::Message
        };
        let sent = self
            .app
            .send(
                &Self::me(from),
                Outgoing {
                    to: vec![to.to_owned()],
                    kind,
                    topic: Some(topic.to_owned()),
                    reply_to: None,
                    body: Body::Text(text.clone()),
                    idempotency_key: None,
                },
            )
            .await
            .expect("send an info");
        self.record.infos.push(InfoRec {
            id: sent.id,
            to: to.into(),
            text,
            acked: false,
        });
        if self.rng.chance(93) {
            self.tasks.push(Task::Ack(n));
        }
    }

    async fn ack_info(&mut self, i: usize) {
        let info = &self.record.infos[i];
        let me = Self::me(&info.to);
        let id = info.id.clone();
        self.app
            .show(Some(&me), &id, None, Layout::Compact)
            .await
            .expect("read an info");
        self.app
            .step(&me, &id, Verb::Ack, None)
            .await
            .expect("acknowledge an info");
        self.record.infos[i].acked = true;
    }

    // ---- orders ----

    fn order_doc(&mut self, o: &OrderRec) -> Value {
        let deadline = jiff::Timestamp::from_millisecond(o.deadline).unwrap();
        let path = path_of(&o.topic, self.rng.below(FILES.len()));
        json!({
            "spec": "awl/work-order@0.4", "id": o.id,
            "created_at": jiff::Timestamp::from_millisecond(now()).unwrap().to_string(),
            "from": o.from, "to": o.to, "goal": o.goal,
            "criteria": [{"id": "c1", "text": format!("the {} tests pass", o.topic)}],
            "budget": {"usd": 5, "tool_calls": 20},
            "deadline": deadline.to_string(),
            "tools": ["repo/*", "deploy/*"],
            "staged": ["deploy/*"],
            "x-baton": {
                "context": {"repository": "git@example.org:acme/shop.git",
                            "base_revision": "abc123",
                            "reproduction": format!("run the {} tests", o.topic),
                            "expected": "they pass"},
                // A directory of its own: an accepted order reserves its scope
                // exclusively, and two live orders may not hold one path.
                "scope": {"allowed": [format!("{path}.d/{}/", o.id)], "excluded": ["migrations/"]},
                "execution": {"test_command": "sh -c true"},
                "acceptance": {"owner": o.from},
                "stop_when": [format!("the {} fixture is missing {}", o.topic, tag('w', 0))],
                "decision": {"resume_at": format!("run the {} tests against {path}", o.topic)}
            }
        })
    }

    async fn offer_order(&mut self) {
        let (from, to) = match self.rng.below(10) {
            0..=2 => ("owner", ME),
            3..=7 => (ME, *self.rng.pick(&EXECUTORS)),
            _ => ("architect", *self.rng.pick(&EXECUTORS)),
        };
        let topic = *self.rng.pick(&TOPICS);
        let n = self.record.orders.len();
        let verb = *self.rng.pick(&VERBS);
        let object = *self.rng.pick(&OBJECTS);
        let goal = format!("{verb} the {topic} {object} {}", tag('o', n));
        // Deadlines in the coming years, a few of them sooner than the others.
        let days = 400 + self.rng.below(3000) as i64;
        let o = OrderRec {
            id: format!("wo-{n:05}"),
            from: from.into(),
            to: to.into(),
            topic: topic.into(),
            goal,
            deadline: now() + days * 86_400_000,
            step: self.step,
            state: OrderState::Offered,
            held: 0,
        };
        let doc = self.order_doc(&o);
        let offered = self
            .app
            .offer(&Self::me(from), doc, Some(topic))
            .await
            .expect("offer an order");
        self.order_requests.push((offered.order.message, None));
        let roll = self.rng.below(100);
        let plan = Plan {
            decline: roll < 6,
            cancel_at: (6..10).contains(&roll).then(|| 1 + self.rng.below(3) as u8),
            stop_at: (10..22).contains(&roll).then(|| self.rng.below(5) as u8),
            blocked: self.rng.chance(15),
            // Only those who may run effects have them staged for approval.
            effects: from != "architect" && self.rng.chance(25),
            review_fix: self.rng.chance(30).then(|| self.rng.chance(40)),
            over_budget: self.rng.chance(3),
            report_failed: self.rng.chance(8),
            end_declined: self.rng.chance(8),
            steps: 0,
            archive: self.rng.chance(80),
        };
        self.plans.insert(n, plan);
        self.record.orders.push(o);
        self.tasks.push(Task::Order(n));
    }

    fn report_doc(&self, o: &OrderRec, status: &str, usd: u32, effects: Value) -> Value {
        let path = path_of(&o.topic, 0);
        let mut report = json!({
            "spec": "awl/work-report@0.3", "order_id": o.id, "from": o.to, "status": status,
            "result": {"summary": format!("{} in {path}", o.goal)},
            "evidence": [{"criterion": "c1", "type": "note", "note": format!("ran the {} tests", o.topic)}],
            "cost": {"usd": usd, "tool_calls": 3},
            "finished_at": jiff::Timestamp::from_millisecond(now()).unwrap().to_string(),
            "tools_used": ["repo/read"],
            "effects": effects,
            "x-baton": {"evidence": {
                "before": {"command": "sh -c true", "exit_code": 1, "output": "1 test broken", "base_revision": "abc123"},
                "change": [{"file": path, "reason": "the goal"}],
                "after": {"command": "sh -c true", "exit_code": 0, "output": "all pass"},
                "uncertainty": {"none": true},
                "review": {"commit": "def456", "acceptance_owner": o.from}
            }}
        });
        match status {
            "blocked" => {
                report["questions"] = json!([format!("which {} limit applies here?", o.topic)]);
            }
            "failed" => report["error"] = json!(format!("the {} tests still break", o.topic)),
            _ => {}
        }
        report
    }

    /// Takes order `i`'s next step, as its plan says; ends its tasks when it ends or stops.
    async fn order_step(&mut self, i: usize) {
        let mut plan = self.plans[&i];
        let o = self.record.orders[i].clone();
        if plan.stop_at == Some(plan.steps) || !o.state.open() {
            return;
        }
        plan.steps += 1;
        let (worker, manager) = (Self::me(&o.to), Self::me(&o.from));
        if plan.cancel_at == Some(plan.steps) {
            self.take(
                i,
                &manager,
                OrderStep::Cancel {
                    reason: Some("the plan changed".into()),
                },
            )
            .await;
            self.end_order(i, OrderState::Cancelled, plan).await;
            return;
        }
        let next = match o.state {
            OrderState::Offered if plan.decline => {
                self.take(
                    i,
                    &worker,
                    OrderStep::Decline {
                        reason: Some("no time this week".into()),
                    },
                )
                .await;
                self.end_order(i, OrderState::Declined, plan).await;
                return;
            }
            OrderState::Offered => {
                self.take(i, &worker, OrderStep::Accept).await;
                OrderState::Accepted
            }
            OrderState::Accepted => {
                self.take(i, &worker, OrderStep::Start).await;
                OrderState::Working
            }
            OrderState::Working if plan.blocked => {
                plan.blocked = false;
                let doc = self.report_doc(&o, "blocked", 1, json!([]));
                self.take(i, &worker, OrderStep::Report { document: doc })
                    .await;
                OrderState::Blocked
            }
            OrderState::Blocked => {
                self.take(
                    i,
                    &manager,
                    OrderStep::Answer {
                        text: "the tenant limit; see the decision log".into(),
                    },
                )
                .await;
                OrderState::Working
            }
            OrderState::Working => {
                let mut effects = Vec::new();
                if plan.effects && o.held == 0 {
                    let gate = self
                        .app
                        .gateway_gate(&worker, &o.id)
                        .await
                        .expect("the order's gate");
                    let arguments: Map<String, Value> =
                        json!({"target": o.topic}).as_object().unwrap().clone();
                    let decision = self
                        .app
                        .gateway_call(
                            &worker,
                            &o.id,
                            &gate,
                            Call {
                                tool: "deploy/publish".into(),
                                arguments: arguments.clone(),
                                upstream: vec!["deploy-server".into()],
                            },
                        )
                        .await
                        .expect("a gateway call");
                    let Decision::Hold { reference } = decision else {
                        panic!("deploy/publish is staged: {decision:?}");
                    };
                    effects.push(
                        json!({"ref": reference, "tool": "deploy/publish", "arguments": arguments}),
                    );
                    self.record.orders[i].held = 1;
                }
                let usd = if plan.over_budget { 50 } else { 2 };
                let status = if plan.report_failed { "failed" } else { "done" };
                let doc = self.report_doc(&o, status, usd, json!(effects));
                self.take(i, &worker, OrderStep::Report { document: doc })
                    .await;
                if plan.over_budget {
                    self.record.orders[i].held = 0;
                    self.end_order(i, OrderState::Expired, plan).await;
                    return;
                }
                OrderState::Submitted
            }
            OrderState::Submitted => {
                if let Some(fix) = plan.review_fix.take() {
                    let start = self
                        .app
                        .review_start(Some(&manager), &o.id, &["review-bot".to_owned()])
                        .await
                        .expect("start a review");
                    let verdict = if fix {
                        Verdict::Fix {
                            fixes: vec![format!("cover the {} edge case", o.topic)],
                        }
                    } else {
                        Verdict::Approve
                    };
                    self.app
                        .conclude_review(
                            &manager,
                            &start,
                            vec![Reviewed {
                                reviewer: "review-bot".into(),
                                run: None,
                                verdict,
                            }],
                        )
                        .await
                        .expect("conclude a review");
                    self.order_requests[i].1.get_or_insert_with(now);
                    if fix {
                        // A fix sends it back to its worker: its held effects drop.
                        self.record.orders[i].held = 0;
                        self.set_order(i, OrderState::Working, plan);
                        return;
                    }
                    self.set_order(i, OrderState::Submitted, plan);
                    return;
                }
                if plan.end_declined {
                    self.take(
                        i,
                        &manager,
                        OrderStep::Cancel {
                            reason: Some("not what we need".into()),
                        },
                    )
                    .await;
                    self.record.orders[i].held = 0;
                    self.end_order(i, OrderState::Cancelled, plan).await;
                    return;
                }
                if o.held > 0 {
                    self.app
                        .approve(&manager, &o.id, None, None, Some(&Upstream))
                        .await
                        .expect("approve with effects");
                    self.order_requests[i].1.get_or_insert_with(now);
                } else {
                    self.take(i, &manager, OrderStep::Approve).await;
                }
                self.record.orders[i].held = 0;
                self.end_order(i, OrderState::Approved, plan).await;
                return;
            }
            _ => return,
        };
        self.set_order(i, next, plan);
    }

    /// Takes `step` on order `i` as `who`. Any step after the offer reads the order's
    /// request for its worker when it is pending.
    async fn take(&mut self, i: usize, who: &Passname, step: OrderStep) {
        let id = self.record.orders[i].id.clone();
        let written = self
            .app
            .take_step(who, &id, None, step)
            .await
            .unwrap_or_else(|e| panic!("order {id}: {e}"));
        let read = &mut self.order_requests[i].1;
        if written.order.status != baton_core::order::OrderStatus::Offered && read.is_none() {
            *read = Some(now());
        }
    }

    fn set_order(&mut self, i: usize, state: OrderState, plan: Plan) {
        self.record.orders[i].state = state;
        self.plans.insert(i, plan);
        self.tasks.push(Task::Order(i));
    }

    /// Ends order `i`; its sender archives its end of the order's request, most times.
    async fn end_order(&mut self, i: usize, state: OrderState, plan: Plan) {
        self.record.orders[i].state = state;
        self.plans.insert(i, plan);
        let o = self.record.orders[i].clone();
        self.did_say(
            &o.from,
            format!("order {} ended {state:?}: {}", o.id, o.goal),
        );
        if plan.archive {
            let message = self.order_requests[i].0.clone();
            self.app
                .step(&Self::me(&o.from), &message, Verb::Archive, None)
                .await
                .expect("archive an ended order's request");
        }
    }

    // ---- state ----

    async fn decide(&mut self) {
        let by = *self.rng.pick(&["owner", ME, "architect"]);
        let topic = *self.rng.pick(&TOPICS);
        let n = self.record.decisions.len();
        let in_force: Vec<usize> = (0..n)
            .filter(|&d| !self.record.decisions[d].superseded)
            .collect();
        let supersedes =
            (!in_force.is_empty() && self.rng.chance(30)).then(|| *self.rng.pick(&in_force));
        let object = *self.rng.pick(&OBJECTS);
        let detail = *self.rng.pick(&DETAILS);
        let text = format!("Use one {topic} {object} path {detail} {}", tag('d', n));
        let recorded = self
            .app
            .record(
                by,
                &[StateOp::Decide {
                    text: text.clone(),
                    why: format!("fewer {object} to keep in step"),
                    supersedes: supersedes.map(|d| self.record.decisions[d].id.clone()),
                }],
            )
            .await
            .expect("decide");
        if let Some(d) = supersedes {
            self.record.decisions[d].superseded = true;
        }
        let id = recorded.ids().remove(0);
        self.did_say(by, format!("decided {id}: {text}"));
        self.record.decisions.push(DecisionRec {
            id,
            text,
            step: self.step,
            superseded: false,
        });
    }

    async fn constrain(&mut self) {
        let by = self.rng.pick(&PARTICIPANTS).0;
        let topic = *self.rng.pick(&TOPICS);
        let on = if self.rng.chance(60) {
            topic.to_owned()
        } else {
            path_of(topic, self.rng.below(FILES.len()))
        };
        let (tried, result) = *self.rng.pick(&APPROACHES);
        let n = self.record.constraints.len();
        let text = format!("on {on}: {tried} does not hold {}", tag('c', n));
        let recorded = self
            .app
            .record(
                by,
                &[StateOp::Constrain {
                    text: text.clone(),
                    tried: tried.into(),
                    result: result.into(),
                }],
            )
            .await
            .expect("constrain");
        let id = recorded.ids().remove(0);
        self.did_say(by, format!("tried and failed {id}: {text}"));
        self.record.constraints.push(ConstraintRec {
            id,
            text,
            on,
            step: self.step,
        });
    }

    async fn note(&mut self) {
        // The lead notes files of its own lanes most; everyone notes some.
        let by = if self.rng.chance(30) {
            ME
        } else {
            self.rng.pick(&PARTICIPANTS).0
        };
        let path = self.rng.pick(&self.files).clone();
        let n = self.record.notes.len();
        let text = format!(
            "{path} keeps the {} {} {}",
            self.rng.pick(&OBJECTS),
            self.rng.pick(&DETAILS),
            tag('n', n)
        );
        let recorded = self
            .app
            .note(by, text.clone(), &path, &self.root)
            .await
            .expect("note");
        self.noted.insert(path.clone(), now());
        let id = recorded.ids().remove(0);
        self.did_say(by, format!("noted {id} on {path}: {text}"));
        self.record.notes.push(NoteRec {
            id,
            by: by.into(),
            path,
            text,
            step: self.step,
            stale: false,
        });
    }

    /// Changes a file and commits it: every note on it before now is stale.
    async fn change_file(&mut self) {
        let path = self.rng.pick(&self.files).clone();
        let file = self.root.join(&path);
        let mut body = std::fs::read_to_string(&file).unwrap();
        body.push_str(&format!("// change {}\n", self.record.commits));
        // The change comes after the newest note on it as the file system tells time: its
        // modification time is read from a coarse clock, a tick behind the wall clock.
        let after = self.noted.get(&path).copied().unwrap_or(0);
        loop {
            std::fs::write(&file, &body).unwrap();
            let modified = std::fs::metadata(&file)
                .and_then(|m| m.modified())
                .unwrap()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as Millis;
            if modified > after {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        git(&self.root, &["commit", "-qam", &format!("change {path}")]);
        self.record.commits += 1;
        for note in self.record.notes.iter_mut().filter(|n| n.path == path) {
            note.stale = true;
        }
    }

    async fn receipt(&mut self) {
        let by = self.rng.pick(&PARTICIPANTS).0;
        let path = self.rng.pick(&self.files).clone();
        let step = format!("build-{}", self.rng.pick(&TOPICS));
        self.app
            .write_receipt(by, &self.root, step, path, None)
            .await
            .expect("write a receipt");
        self.record.receipts += 1;
    }

    async fn raise_need(&mut self) {
        let open: Vec<usize> = (0..self.record.orders.len())
            .filter(|&o| {
                matches!(
                    self.record.orders[o].state,
                    OrderState::Working | OrderState::Accepted | OrderState::Blocked
                )
            })
            .collect();
        if open.is_empty() {
            return;
        }
        let o = self.record.orders[*self.rng.pick(&open)].clone();
        let n = self.record.needs.len();
        let text = format!("Need a call on the {} {}", o.topic, tag('k', n));
        let id = self
            .app
            .raise_need(&o.to, &text, Some(&o.id), NeedSource::Hand, None)
            .await
            .expect("raise a need");
        self.record.needs.push(NeedRec {
            id,
            order: o.id,
            by: o.to,
            text,
            step: self.step,
            acked: false,
        });
        if self.rng.chance(75) {
            self.tasks.push(Task::Resolve(n));
        }
    }

    async fn resolve_need(&mut self, i: usize) {
        let need = &self.record.needs[i];
        let order = self
            .record
            .orders
            .iter()
            .find(|o| o.id == need.order)
            .expect("the need's order");
        self.app
            .ack_item(&order.from, &need.id)
            .await
            .expect("acknowledge a need");
        self.record.needs[i].acked = true;
    }

    // ---- sessions, hooks and runs ----

    fn did_say(&mut self, who: &str, what: String) {
        self.did.entry(who.to_owned()).or_default().push(what);
    }

    /// Runs `baton hook claude EVENT` as `who` in session `session`, as the agent would.
    fn hook(&mut self, who: &str, event: &str, session: &str, extra: Value) {
        let mut payload = json!({
            "session_id": session, "transcript_path": "/tmp/t.jsonl",
            "cwd": self.root, "hook_event_name": event,
        });
        if let (Value::Object(p), Value::Object(e)) = (&mut payload, extra) {
            p.extend(e);
        }
        let mut child = Command::new(&self.exe)
            .args(["hook", "claude", event])
            .current_dir(&self.root)
            .env_remove("BATON_PROJECT")
            .env_remove("BATON_URL")
            .env("BATON_AS", who)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run a hook");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(payload.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().expect("a hook");
        assert!(out.status.success());
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.trim().is_empty(), "the hook complained: {said}");
        self.record.hooks += 1;
    }

    async fn start_session(&mut self, who: &str) {
        let n = self.record.sessions.len();
        let session = format!("s-{who}-{n:04}");
        self.hook(who, "SessionStart", &session, json!({"source": "startup"}));
        let row = HookCall::row_of(None, "claude", Some(&session), None).expect("a row");
        self.record.sessions.push(SessionRec {
            id: row,
            who: who.into(),
            ended: false,
        });
        // Most sessions run work through `baton run`.
        let run = if self.rng.chance(70) {
            self.pids += 1;
            let id = format!("run-{who}-{n:04}");
            // Apart from what was read before and after it, by the millisecond: what a lost
            // run held is what was read since it was registered.
            tokio::time::sleep(Duration::from_millis(2)).await;
            self.app
                .record_run(
                    who,
                    &[
                        RunChange::Registered(Box::new(Registration {
                            run: id.clone(),
                            participant: Some(who.into()),
                            agent: Some("claude".into()),
                            command: vec!["claude".into(), "-p".into()],
                            host: Some(HOST.into()),
                            monitor: Some(ProcessRef {
                                pid: self.pids,
                                start: Some(1),
                            }),
                            ..Registration::default()
                        })),
                        RunChange::Started {
                            run: id.clone(),
                            process: ProcessRef {
                                pid: self.pids + 50_000,
                                start: Some(1),
                            },
                            pgid: self.pids + 50_000,
                        },
                    ],
                )
                .await
                .expect("register a run");
            let registered_at = now();
            tokio::time::sleep(Duration::from_millis(2)).await;
            self.record.runs.push(RunRec {
                id,
                who: who.into(),
                ended: false,
                lost: false,
                held: Vec::new(),
                alerts: Vec::new(),
                alerts_acked: false,
                step: self.step,
                pid: self.pids,
                registered_at,
            });
            Some(self.record.runs.len() - 1)
        } else {
            None
        };
        self.sessions.insert(
            who.to_owned(),
            Live {
                session,
                record: self.record.sessions.len() - 1,
                run,
                helpers: Vec::new(),
                helpers_started: 0,
            },
        );
    }

    /// Ends `who`'s session: its helpers stop, the session ends, its run ends (or is lost),
    /// it hands over its first action for next time, and HANDOFF.md gets its entry.
    async fn end_session(&mut self, who: &str) {
        let Some(live) = self.sessions.remove(who) else {
            return;
        };
        for helper in &live.helpers {
            self.hook(
                who,
                "SubagentStop",
                &live.session,
                json!({"agent_id": helper, "agent_type": "Explore"}),
            );
        }
        self.hook(who, "SessionEnd", &live.session, json!({"reason": "exit"}));
        self.record.sessions[live.record].ended = true;
        if let Some(r) = live.run {
            self.end_run(r).await;
        }
        let topic = *self.rng.pick(&TOPICS);
        let n = self.record.resume_at.len();
        let resume_at = format!(
            "run cargo test -p {} {}_limits, then read {} {}",
            topic.replace('-', "_"),
            self.rng.pick(&OBJECTS),
            path_of(topic, self.rng.below(FILES.len())),
            tag('s', n)
        );
        self.app
            .call::<baton_app::ops::SessionEnd>(
                baton_app::ops::Who::here(who),
                json!({"resume_at": resume_at}),
            )
            .await
            .expect("session end");
        self.record
            .resume_at
            .push((who.to_owned(), resume_at.clone()));
        self.append_handoff(who, &resume_at);
    }

    async fn end_run(&mut self, r: usize) {
        let run = self.record.runs[r].clone();
        let lose = self.rng.chance(12);
        if !lose {
            let status = if self.rng.chance(85) {
                RunStatus::Done
            } else {
                RunStatus::Failed
            };
            self.app
                .record_run(
                    &run.who,
                    &[RunChange::Exited {
                        run: run.id.clone(),
                        status,
                        exit_code: Some(i32::from(status != RunStatus::Done)),
                        signal: None,
                        reason: None,
                    }],
                )
                .await
                .expect("a run exits");
            self.record.runs[r].ended = true;
            return;
        }
        // Its monitor died: the reaper finds it lost, and what its participant read
        // during it and has not ended goes back to pending.
        self.table.dead.lock().unwrap().insert(run.pid);
        let since = run.registered_at;
        let held: Vec<usize> = (0..self.record.requests.len())
            .filter(|&i| {
                let q = &self.record.requests[i];
                q.to == run.who
                    && q.inbound == Inbound::Read
                    && q.read_at.is_some_and(|t| t > since)
            })
            .collect();
        let held_orders: Vec<usize> = (0..self.record.orders.len())
            .filter(|&o| {
                let order = &self.record.orders[o];
                order.to == run.who
                    && order.state.open()
                    && self.order_requests[o].1.is_some_and(|t| t > since)
            })
            .collect();
        let pass = self.app.reap(&self.table).await.expect("a reaper pass");
        let reaped = pass
            .lost
            .into_iter()
            .find(|l| l.run == run.id)
            .expect("the run is lost");
        let mut expected: Vec<&String> = held
            .iter()
            .map(|&i| &self.record.requests[i].id)
            .chain(held_orders.iter().map(|&o| &self.order_requests[o].0))
            .collect();
        let mut resurfaced: Vec<&String> = reaped.resurfaced.iter().collect();
        expected.sort();
        resurfaced.sort();
        assert_eq!(
            resurfaced, expected,
            "what the reaper resurfaced for {}'s lost run {}",
            run.who, run.id
        );
        let ids: Vec<String> = reaped.resurfaced.clone();
        for &i in &held {
            self.record.requests[i].inbound = Inbound::Pending;
            self.record.requests[i].read_at = None;
        }
        for &o in &held_orders {
            self.order_requests[o].1 = None;
        }
        let rec = &mut self.record.runs[r];
        rec.ended = true;
        rec.lost = true;
        rec.held = ids;
        rec.alerts = reaped.alerts;
        if self.rng.chance(70) {
            self.tasks.push(Task::AckAlerts(r));
        }
    }

    async fn ack_alerts(&mut self, r: usize) {
        let run = self.record.runs[r].clone();
        let acks: Vec<StateOp> = run
            .alerts
            .iter()
            .map(|id| StateOp::AlertAck { id: id.clone() })
            .collect();
        self.app
            .record(&run.who, &acks)
            .await
            .expect("acknowledge a lost run's alerts");
        self.record.runs[r].alerts_acked = true;
    }

    async fn rotate_session(&mut self) {
        let who = self.rng.pick(&PARTICIPANTS).0;
        self.end_session(who).await;
        self.start_session(who).await;
    }

    /// A tool call or a helper in a live session, seen through its hooks.
    async fn hook_call(&mut self) {
        let who = self.rng.pick(&PARTICIPANTS).0;
        let Some(mut live) = self.sessions.get(who).cloned() else {
            return;
        };
        let roll = self.rng.below(10);
        let (event, extra) = if roll == 0 && live.helpers.len() < 3 {
            live.helpers_started += 1;
            let helper = format!("helper-{}", live.helpers_started);
            live.helpers.push(helper.clone());
            (
                "SubagentStart",
                json!({"agent_id": helper, "agent_type": "Explore"}),
            )
        } else if roll == 1 && !live.helpers.is_empty() {
            let helper = live.helpers.remove(0);
            (
                "SubagentStop",
                json!({"agent_id": helper, "agent_type": "Explore"}),
            )
        } else {
            (
                "PostToolUse",
                json!({"tool_name": self.rng.pick(&["Bash", "Edit", "Read", "Grep"])}),
            )
        };
        self.hook(who, event, &live.session, extra);
        self.sessions.insert(who.to_owned(), live);
    }

    /// HANDOFF.md's entry for `who`'s session: what it did, what it owes and waits for as
    /// it sees them now, and its first action next time — appended, as each session does.
    fn append_handoff(&mut self, who: &str, resume_at: &str) {
        let did = self.did.remove(who).unwrap_or_default();
        let owed: Vec<&RequestRec> = self
            .record
            .requests
            .iter()
            .filter(|r| r.to == who && r.inbound.open())
            .collect();
        let waiting: Vec<&RequestRec> = self
            .record
            .requests
            .iter()
            .filter(|r| r.from == who && r.outbound == Outbound::Open)
            .collect();
        let orders: Vec<&OrderRec> = self
            .record
            .orders
            .iter()
            .filter(|o| o.to == who && o.state.open())
            .collect();
        let mut entry = format!(
            "\n## {} · {who}'s session\n",
            jiff::Timestamp::from_millisecond(now()).unwrap()
        );
        for line in did.iter().rev().take(6) {
            entry.push_str(&format!("- {line}\n"));
        }
        let list = |items: Vec<String>| items.into_iter().take(3).collect::<Vec<_>>().join("; ");
        entry.push_str(&format!(
            "- Owe: {} open requests to me: {}\n",
            owed.len(),
            list(
                owed.iter()
                    .map(|r| format!("{} ({})", r.id, r.text))
                    .collect()
            )
        ));
        entry.push_str(&format!(
            "- Orders: {} orders to work on: {}\n",
            orders.len(),
            list(
                orders
                    .iter()
                    .map(|o| format!("{} ({})", o.id, o.goal))
                    .collect()
            )
        ));
        entry.push_str(&format!(
            "- Waiting for: {} open requests from me: {}\n",
            waiting.len(),
            list(
                waiting
                    .iter()
                    .map(|r| format!("{} ({})", r.id, r.text))
                    .collect()
            )
        ));
        entry.push_str(&format!("- Next: {resume_at}\n"));
        self.record.handoff.push_str(&entry);
    }

    /// Does one thing the history has pending, picked at random.
    async fn do_task(&mut self) {
        if self.tasks.is_empty() {
            return self.send_request().await;
        }
        let at = self.rng.below(self.tasks.len());
        let task = self.tasks.swap_remove(at);
        match task {
            Task::Read(i) => {
                self.read_request(i).await;
                if self.fates[&i].0 != Fate::LeaveRead {
                    self.tasks.push(Task::Finish(i));
                }
            }
            Task::Finish(i) => self.finish_request(i).await,
            Task::Close(i) => self.close_request(i).await,
            Task::Ack(i) => self.ack_info(i).await,
            Task::Order(i) => self.order_step(i).await,
            Task::Resolve(i) => self.resolve_need(i).await,
            Task::AckAlerts(r) => self.ack_alerts(r).await,
        }
    }
}
