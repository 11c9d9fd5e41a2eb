//! One module per subcommand. Each exposes its `…Args` (whose doc comment is the help) and
//! a `run` function returning an [`Output`].

pub mod admission;
pub mod agent;
pub mod board;
pub mod demo;
pub mod gateway;
pub mod guard;
pub mod handoff;
pub mod hook;
pub mod init;
pub mod key;
pub mod mcp;
pub mod messages;
pub mod negotiate;
pub mod order;
pub mod pool;
pub mod portable;
pub mod project_cmd;
pub mod queue;
pub mod reap;
pub mod receipt;
pub mod reserve;
pub mod resume;
pub mod review;
pub mod run;
pub mod runs;
pub mod search;
pub mod send;
pub mod serve;
pub mod state;
pub mod status;
pub mod step;
pub mod wait;

use baton_app::App;
use baton_core::event::LOCAL_OPERATOR;
use baton_core::{Passname, ProjectName, Refusal};

use crate::cases::{Cases, Local};
use crate::cli::{Cli, Command, GlobalArgs};
use crate::error::{CommandError, CommandResult};
use crate::output::Output;
use crate::project::Project;
use crate::remote::Remote;

pub async fn run(cli: Cli) -> CommandResult<Output> {
    let g = &cli.global;
    if g.remote.is_some() && local_only(&cli.name) {
        return Err(CommandError::usage(format!(
            "`baton {}` works where the project is, not over a server: unset BATON_URL \
             to run it there (see `baton --help`)",
            cli.name
        )));
    }
    match cli.command {
        Command::Init(args) => init::run(g, args).await,
        Command::Agent(cmd) => agent::run(&Context::open(g).await?, cmd).await,
        Command::Key(cmd) => key::run(&Context::open(g).await?, cmd).await,
        Command::SecurityEvents(args) => {
            agent::security_events(&Context::open(g).await?, args).await
        }
        Command::Project(cmd) => project_cmd::run(g, cmd).await,
        Command::Send(args) => send::run(&Context::open(g).await?, args).await,
        Command::Inbox(args) => messages::inbox(&Context::open(g).await?, args).await,
        Command::Outbox(args) => messages::outbox(&Context::open(g).await?, args).await,
        Command::Show(args) => messages::show(&Context::open(g).await?, args).await,
        Command::Thread(args) => messages::thread(&Context::open(g).await?, args).await,
        Command::Ack(args) => step::ack(&Context::open(g).await?, args).await,
        Command::Complete(args) => step::complete(&Context::open(g).await?, args).await,
        Command::HandBack(args) => step::hand_back(&Context::open(g).await?, args).await,
        Command::Refuse(args) => step::refuse(&Context::open(g).await?, args).await,
        Command::Archive(args) => step::archive(&Context::open(g).await?, args).await,
        Command::Search(args) => search::run(&Context::open(g).await?, args).await,
        Command::Wait(args) => wait::run(&Context::open(g).await?, args).await,
        Command::Focus(cmd) => state::focus(&Context::open(g).await?, cmd).await,
        Command::Stream(cmd) => state::stream(&Context::open(g).await?, cmd).await,
        Command::Decide(args) => state::decide(&Context::open(g).await?, args).await,
        Command::Constrain(args) => state::constrain(&Context::open(g).await?, args).await,
        Command::Note(args) => state::note(&Context::open(g).await?, args).await,
        Command::Session(cmd) => state::session(&Context::open(g).await?, cmd).await,
        Command::State(cmd) => state::state(&Context::open(g).await?, cmd).await,
        Command::Check(args) => state::check(&Context::open(g).await?, args).await,
        Command::Resume(args) => resume::run(&Context::open(g).await?, args).await,
        Command::Receipt(cmd) => receipt::receipt(&Context::open(g).await?, cmd).await,
        Command::Alerts(args) => receipt::alerts(&Context::open(g).await?, args).await,
        Command::Mcp(args) => mcp::run(g, args).await,
        Command::Gateway(args) => gateway::run(g, args).await,
        Command::Serve(args) => serve::run(g, args).await,
        Command::Export(args) => portable::export(&Context::open(g).await?, args).await,
        Command::Import(args) => portable::import(&Context::open(g).await?, args).await,
        Command::Run(args) => run::run(&Context::open(g).await?, args).await,
        Command::Runs(args) => runs::run(&Context::open(g).await?, args).await,
        Command::Hook(args) => hook::run(g, args).await,
        Command::Reap(args) => reap::run(&Context::open(g).await?, args, g.json).await,
        Command::Handoff(cmd) => handoff::handoff(g, cmd).await,
        Command::Evidence(cmd) => handoff::evidence(&Context::open(g).await?, cmd, g.json).await,
        Command::Order(cmd) => order::run(&Context::open(g).await?, cmd).await,
        Command::Negotiate(args) => negotiate::run(&Context::open(g).await?, args).await,
        Command::Review(args) => review::run(&Context::open(g).await?, args).await,
        Command::Queue(args) => queue::queue(&Context::open(g).await?, args).await,
        Command::Need(args) => queue::need(&Context::open(g).await?, args).await,
        Command::Record(args) => queue::record(&Context::open(g).await?, args).await,
        Command::Demo(args) => demo::run(g, args).await,
        Command::Status(args) => status::run(&Context::open(g).await?, args, g.json).await,
        Command::Board(args) => board::run(g, args).await,
        Command::Reserve(args) => reserve::reserve(&Context::open(g).await?, args).await,
        Command::Release(args) => reserve::release(&Context::open(g).await?, args).await,
        Command::Reservations(args) => reserve::list(&Context::open(g).await?, args).await,
        Command::Next(args) => pool::next(&Context::open(g).await?, args).await,
        Command::Claim(args) => pool::claim(&Context::open(g).await?, args).await,
        Command::Pool(args) => pool::list(&Context::open(g).await?, args).await,
        Command::Guard(args) => guard::run(g, args).await,
        Command::DemoPart(part) => demo::part(g, part).await,
    }
}

/// What every command inside a project has: the project, its use cases, and who is asking.
/// Over a server (`BATON_URL`) the use cases are the server's and there is no local store.
pub struct Context {
    pub project: Project,
    /// The use cases every command that can run over a server calls.
    pub cases: Box<dyn Cases>,
    /// The local store's use cases, for the commands that need this machine.
    app: Option<App>,
}

impl Context {
    pub async fn open(g: &GlobalArgs) -> CommandResult<Self> {
        if let Some(url) = &g.remote {
            return Self::remote(g, url);
        }
        if let Some(url) = &g.db {
            return Self::shared(g, url).await;
        }
        let project = Project::locate(g.project.as_deref())?;
        let app = project.open_app().await?;
        Ok(Self::with_app(project, app, g))
    }

    fn with_app(project: Project, app: App, g: &GlobalArgs) -> Self {
        Self {
            project,
            cases: Box::new(Local {
                app: app.clone(),
                as_name: g.as_name.clone(),
            }),
            app: Some(app),
        }
    }

    /// A project on a server: the key (`BATON_KEY`) says who acts, so `--as` is refused
    /// rather than silently ignored.
    fn remote(g: &GlobalArgs, url: &str) -> CommandResult<Self> {
        if g.as_name.is_some() {
            return Err(CommandError::usage(
                "with BATON_URL the key says who acts: drop --as (and unset BATON_AS)",
            ));
        }
        if g.db.is_some() {
            return Err(CommandError::usage(
                "BATON_URL and --db (BATON_DB) both name a store: use one of them",
            ));
        }
        let remote = Remote::new(url, std::env::var(KEY_VAR).ok())?;
        Ok(Self {
            project: Project {
                root: std::env::current_dir()?,
                config: baton_app::Settings::default(),
            },
            cases: Box::new(remote),
            app: None,
        })
    }

    /// A project of a shared store, administered where the database is: `--project` names
    /// it. Paths are taken from the working directory.
    async fn shared(g: &GlobalArgs, url: &str) -> CommandResult<Self> {
        let name = g
            .project
            .as_deref()
            .and_then(|p| p.to_str())
            .ok_or_else(|| {
                CommandError::usage("--db needs --project NAME: the project in that store")
            })?;
        let name = ProjectName::new(name).map_err(|error| Refusal::Name {
            field: baton_core::Field::Name,
            error,
        })?;
        let db = baton_store::database(url, baton_store::DEFAULT_BUSY_TIMEOUT).await?;
        let store = db.project(&name).await?;
        let project = Project {
            root: std::env::current_dir()?,
            config: baton_app::Settings::default(),
        };
        let app = App::new(store, project.config.clone(), crate::host::of(&project))
            .on_wait(crate::project::say_waiting);
        Ok(Self::with_app(project, app, g))
    }

    /// The local store's use cases; over a server, a usage error: the command needs this
    /// machine.
    pub fn app(&self) -> CommandResult<&App> {
        self.app.as_ref().ok_or_else(|| {
            CommandError::usage(
                "this command needs the project's store on this machine, not a server: unset \
                 BATON_URL and run it where the project is (see `baton --help`)",
            )
        })
    }

    /// The local store's use cases, for a command that [`local_only`] refuses over a server
    /// before it starts (so it always has them).
    pub fn local(&self) -> &App {
        self.app
            .as_ref()
            .expect("a command that needs this machine is refused over a server before it runs")
    }

    /// What a run's or an evidence record's `--order` records: the id of the order `text`
    /// names (its id, or a unique prefix in either case: `App::resolve`), or `text` as
    /// given when it names no order here — a run may be tied to an order not offered yet.
    pub async fn order_named(&self, text: &str) -> CommandResult<String> {
        match self.app()?.resolve(baton_core::Record::Order, text).await {
            Ok(id) => Ok(id),
            Err(baton_store::StoreError::Refused(baton_core::Refusal::NotFound { .. })) => {
                Ok(text.to_owned())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The acting identity, checked against the registered participants before anything
    /// is written.
    pub async fn me(&self) -> CommandResult<Passname> {
        match self.maybe_me().await? {
            Some(me) => Ok(me),
            None => Err(CommandError::usage(
                "who is acting? pass --as NAME or set BATON_AS (see `baton agent list`)",
            )),
        }
    }

    /// The acting identity when one was given (over a server, the key's participant); an
    /// unknown name is still an error.
    pub async fn maybe_me(&self) -> CommandResult<Option<Passname>> {
        Ok(self.cases.me().await?)
    }

    /// Runs the typed operation `T` on `input`, here or on the server, as the acting
    /// identity: its document.
    pub async fn call<T: baton_app::ops::Typed>(
        &self,
        input: T::Input,
    ) -> CommandResult<T::Output> {
        Ok(crate::cases::call::<T>(self.cases.as_ref(), input).await?)
    }

    /// `subject` as the project's operations take it: a path from the working directory
    /// that names a file or directory under the project's root becomes a path from the
    /// root; anything else (an id, a path on the server's side) is left as it is.
    pub fn rooted(&self, subject: &str) -> CommandResult<String> {
        let cwd = std::env::current_dir()?;
        let root = &self.project.root;
        let here = cwd.join(subject);
        if cwd == *root || subject.is_empty() || !here.exists() {
            return Ok(subject.to_owned());
        }
        match (here.canonicalize(), root.canonicalize()) {
            (Ok(here), Ok(root)) => Ok(here
                .strip_prefix(&root)
                .map_or_else(|_| subject.to_owned(), |p| p.to_string_lossy().into_owned())),
            _ => Ok(subject.to_owned()),
        }
    }

    /// Who a change is recorded as: the acting identity, or the local operator.
    pub async fn actor(&self) -> CommandResult<String> {
        Ok(self
            .maybe_me()
            .await?
            .map_or_else(|| LOCAL_OPERATOR.to_owned(), |m| m.to_string()))
    }
}

/// The environment variable holding a key's token for BATON_URL. Read here only: it is in
/// no argument structure, so nothing can print it.
pub const KEY_VAR: &str = "BATON_KEY";

/// Whether the command `name` needs this machine (its checkout, processes, files or the
/// store itself), as the operations' declarations say (`baton_app::ops`): such a command
/// is refused over a server by name, before it starts.
fn local_only(name: &str) -> bool {
    baton_app::ops::command_reach(name) == Some(baton_app::ops::Reach::Local)
}

/// A wait's `--timeout` as the seconds the operation takes, within what a wait may last
/// (`baton_app::ops::MAX_WAIT`, on every edge alike).
pub fn wait_seconds(text: &str) -> CommandResult<f64> {
    let wait = crate::project::parse_duration("--timeout", text).map_err(CommandError::usage)?;
    let most = baton_app::ops::MAX_WAIT;
    if wait > most {
        return Err(CommandError::usage(format!(
            "--timeout {text}: a wait lasts at most {}s; wait again to wait longer",
            most.as_secs()
        )));
    }
    Ok(wait.as_secs_f64())
}
