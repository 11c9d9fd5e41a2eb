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
use crate::cli::{Cli, GlobalArgs};
use crate::error::{CommandError, CommandResult};
use crate::output::Output;
use crate::project::Project;
use crate::remote::Remote;

/// The subcommands, each named once: its name, its variant of [`Command`] and the type of
/// its arguments (`args`, or a `group` of subcommands), and what runs it. The enum, the
/// table [`SUBCOMMANDS`] the lazy parse builds from, and [`Command::run`] are made from
/// this one list; `unlisted` ones are left out of the table (the hidden demo cast).
macro_rules! commands {
    (
        listed {
            $(
                $(#[$attr:meta])*
                $name:literal $variant:ident($ty:ty) as $kind:ident
                    => |$g:ident, $arg:ident| $run:expr;
            )*
        }
        unlisted {
            $(
                $(#[$u_attr:meta])*
                $u_variant:ident($u_ty:ty) => |$u_g:ident, $u_arg:ident| $u_run:expr;
            )*
        }
    ) => {
        #[derive(clap::Subcommand, Debug)]
        pub enum Command {
            $($(#[$attr])* $variant($ty),)*
            $($(#[$u_attr])* $u_variant($u_ty),)*
        }

        /// How each listed subcommand is built, by name: what the derive of [`Command`]
        /// does for that one variant. `Cli::parse_lazily` builds only the one a command
        /// line names.
        pub const SUBCOMMANDS: &[(&str, Build)] = &[$(($name, built!($kind $ty)),)*];

        impl Command {
            /// Runs the subcommand with the global options `global`.
            async fn run(self, global: &GlobalArgs) -> CommandResult<Output> {
                match self {
                    $(Command::$variant($arg) => {
                        let $g = global;
                        $run
                    })*
                    $(Command::$u_variant($u_arg) => {
                        let $u_g = global;
                        $u_run
                    })*
                }
            }
        }
    };
}

/// How a subcommand of `kind` (`args` or `group`) is built.
macro_rules! built {
    (args $ty:ty) => {
        <$ty as clap::Args>::augment_args
    };
    (group $ty:ty) => {
        group::<$ty>
    };
}

/// Builds a subcommand that is a group of subcommands.
pub type Build = fn(clap::Command) -> clap::Command;

fn group<T: clap::Subcommand>(cmd: clap::Command) -> clap::Command {
    T::augment_subcommands(cmd.subcommand_required(true).arg_required_else_help(true))
}

commands! {
    listed {
        "init" Init(init::InitArgs) as args => |g, args| init::run(g, args).await;
        #[command(subcommand)]
        "agent" Agent(agent::AgentCommand) as group => |g, cmd| {
            agent::run(&Context::open(g).await?, cmd).await
        };
        #[command(subcommand)]
        "key" Key(key::KeyCommand) as group => |g, cmd| {
            key::run(&Context::open(g).await?, cmd).await
        };
        "security-events" SecurityEvents(agent::SecurityEventsArgs) as args => |g, args| {
            agent::security_events(&Context::open(g).await?, args).await
        };
        #[command(subcommand)]
        "project" Project(project_cmd::ProjectCommand) as group => |g, cmd| {
            project_cmd::run(g, cmd).await
        };
        "send" Send(send::SendArgs) as args => |g, args| {
            send::run(&Context::open(g).await?, args).await
        };
        "inbox" Inbox(messages::InboxArgs) as args => |g, args| {
            messages::inbox(&Context::open(g).await?, args).await
        };
        "outbox" Outbox(messages::OutboxArgs) as args => |g, args| {
            messages::outbox(&Context::open(g).await?, args).await
        };
        "show" Show(messages::ShowArgs) as args => |g, args| {
            messages::show(&Context::open(g).await?, args).await
        };
        "thread" Thread(messages::ThreadArgs) as args => |g, args| {
            messages::thread(&Context::open(g).await?, args).await
        };
        "ack" Ack(step::AckArgs) as args => |g, args| {
            step::ack(&Context::open(g).await?, args).await
        };
        "complete" Complete(step::CompleteArgs) as args => |g, args| {
            step::complete(&Context::open(g).await?, args).await
        };
        "hand-back" HandBack(step::HandBackArgs) as args => |g, args| {
            step::hand_back(&Context::open(g).await?, args).await
        };
        "refuse" Refuse(step::RefuseArgs) as args => |g, args| {
            step::refuse(&Context::open(g).await?, args).await
        };
        "archive" Archive(step::ArchiveArgs) as args => |g, args| {
            step::archive(&Context::open(g).await?, args).await
        };
        "search" Search(search::SearchArgs) as args => |g, args| {
            search::run(&Context::open(g).await?, args).await
        };
        "wait" Wait(wait::WaitArgs) as args => |g, args| {
            wait::run(&Context::open(g).await?, args).await
        };
        #[command(subcommand)]
        "focus" Focus(state::FocusCommand) as group => |g, cmd| {
            state::focus(&Context::open(g).await?, cmd).await
        };
        #[command(subcommand)]
        "stream" Stream(state::StreamCommand) as group => |g, cmd| {
            state::stream(&Context::open(g).await?, cmd).await
        };
        "decide" Decide(state::DecideArgs) as args => |g, args| {
            state::decide(&Context::open(g).await?, args).await
        };
        "constrain" Constrain(state::ConstrainArgs) as args => |g, args| {
            state::constrain(&Context::open(g).await?, args).await
        };
        "note" Note(state::NoteArgs) as args => |g, args| {
            state::note(&Context::open(g).await?, args).await
        };
        #[command(subcommand)]
        "session" Session(state::SessionCommand) as group => |g, cmd| {
            state::session(&Context::open(g).await?, cmd).await
        };
        #[command(subcommand)]
        "state" State(state::StateCommand) as group => |g, cmd| {
            state::state(&Context::open(g).await?, cmd).await
        };
        "check" Check(state::CheckArgs) as args => |g, args| {
            state::check(&Context::open(g).await?, args).await
        };
        "resume" Resume(resume::ResumeArgs) as args => |g, args| {
            resume::run(&Context::open(g).await?, args).await
        };
        #[command(subcommand)]
        "receipt" Receipt(receipt::ReceiptCommand) as group => |g, cmd| {
            receipt::receipt(&Context::open(g).await?, cmd).await
        };
        "alerts" Alerts(receipt::AlertsArgs) as args => |g, args| {
            receipt::alerts(&Context::open(g).await?, args).await
        };
        "mcp" Mcp(mcp::McpArgs) as args => |g, args| mcp::run(g, args).await;
        "gateway" Gateway(gateway::GatewayArgs) as args => |g, args| gateway::run(g, args).await;
        "serve" Serve(serve::ServeArgs) as args => |g, args| serve::run(g, args).await;
        "export" Export(portable::ExportArgs) as args => |g, args| {
            portable::export(&Context::open(g).await?, args).await
        };
        "import" Import(portable::ImportArgs) as args => |g, args| {
            portable::import(&Context::open(g).await?, args).await
        };
        "run" Run(run::RunArgs) as args => |g, args| run::run(&Context::open(g).await?, args).await;
        "runs" Runs(runs::RunsArgs) as args => |g, args| {
            runs::run(&Context::open(g).await?, args).await
        };
        "hook" Hook(hook::HookArgs) as args => |g, args| hook::run(g, args).await;
        "reap" Reap(reap::ReapArgs) as args => |g, args| {
            reap::run(&Context::open(g).await?, args, g.json).await
        };
        #[command(subcommand)]
        "handoff" Handoff(handoff::HandoffCommand) as group => |g, cmd| {
            handoff::handoff(g, cmd).await
        };
        #[command(subcommand)]
        "evidence" Evidence(handoff::EvidenceCommand) as group => |g, cmd| {
            handoff::evidence(&Context::open(g).await?, cmd, g.json).await
        };
        #[command(subcommand)]
        "order" Order(order::OrderCommand) as group => |g, cmd| {
            order::run(&Context::open(g).await?, cmd).await
        };
        "negotiate" Negotiate(negotiate::NegotiateArgs) as args => |g, args| {
            negotiate::run(&Context::open(g).await?, args).await
        };
        "review" Review(review::ReviewArgs) as args => |g, args| {
            review::run(&Context::open(g).await?, args).await
        };
        "queue" Queue(queue::QueueArgs) as args => |g, args| {
            queue::queue(&Context::open(g).await?, args).await
        };
        "need" Need(queue::NeedArgs) as args => |g, args| {
            queue::need(&Context::open(g).await?, args).await
        };
        "record" Record(queue::RecordArgs) as args => |g, args| {
            queue::record(&Context::open(g).await?, args).await
        };
        "demo" Demo(demo::DemoArgs) as args => |g, args| demo::run(g, args).await;
        "status" Status(status::StatusArgs) as args => |g, args| {
            status::run(&Context::open(g).await?, args, g.json).await
        };
        "board" Board(board::BoardArgs) as args => |g, args| board::run(g, args).await;
        "reserve" Reserve(reserve::ReserveArgs) as args => |g, args| {
            reserve::reserve(&Context::open(g).await?, args).await
        };
        "release" Release(reserve::ReleaseArgs) as args => |g, args| {
            reserve::release(&Context::open(g).await?, args).await
        };
        "reservations" Reservations(reserve::ReservationsArgs) as args => |g, args| {
            reserve::list(&Context::open(g).await?, args).await
        };
        #[command(hide = true)]
        "guard" Guard(guard::GuardArgs) as args => |g, args| guard::run(g, args).await;
    }
    unlisted {
        /// The demo's cast (executor, reviewer, upstream MCP server), run by `baton demo`.
        #[command(subcommand, hide = true)]
        DemoPart(demo::DemoPart) => |g, part| demo::part(g, part).await;
    }
}

pub async fn run(cli: Cli) -> CommandResult<Output> {
    let g = &cli.global;
    if g.remote.is_some() && local_only(&cli.name) {
        return Err(CommandError::usage(format!(
            "`baton {}` works where the project is, not over a server: unset BATON_URL \
             to run it there (see `baton --help`)",
            cli.name
        )));
    }
    cli.command.run(g).await
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
