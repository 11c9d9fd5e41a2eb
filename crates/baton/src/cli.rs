//! The command line: global options and the list of subcommands. Each subcommand's
//! arguments live beside its code in `commands/`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::commands::{
    agent, board, demo, gateway, handoff, hook, init, key, mcp, messages, negotiate, order,
    portable, project_cmd, queue, reap, receipt, resume, review, run, runs, search, send, serve,
    state, status, step, wait,
};

/// Baton: the handoff layer for AI agents. Durable inboxes, typed handoffs and an
/// append-only log, in `.baton/` beside your repository.
#[derive(Parser, Debug)]
#[command(
    name = "baton",
    version,
    after_help = "Examples:\n  baton init\n  baton agent add planner --role planner\n  \
                  baton --as planner send --to executor --type request --topic csv-export --body 'Keep filters in CSV export'\n  \
                  baton --as executor inbox\n\nExit codes: 0 ok, 1 error, 2 usage or no project, 3 refused, \
                  4 not found, 5 forbidden, 6 conflict or busy (retryable), 75 no run slot; `baton run` \
                  also exits with its command's code, 125 over budget, 127 spawn failure, 128+N signal\n\n\
                  Over a server: BATON_URL=http://HOST:PORT/v1/projects/NAME BATON_KEY=TOKEN baton inbox\n\
                  The key says who acts (--as is refused). Works there: inbox, outbox, send, show, thread, ack, \
                  complete, hand-back, refuse, archive, search, wait, focus, stream, decide, constrain, note, \
                  session end, state show, resume, alerts, receipt write|show|wait, order (all but approve), \
                  queue, need, runs, agent, key, security-events. Needs the project here: \
                  init, project, mcp, gateway, serve, export, import, run, hook, reap, handoff, evidence, review, \
                  negotiate, record, check, demo, state render|import, receipt verify, order approve"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug, Clone)]
pub struct GlobalArgs {
    /// Print a versioned JSON document instead of text (errors go to stderr as JSON).
    #[arg(long, global = true)]
    pub json: bool,
    /// The project directory (holding `.baton/`); default: the nearest one upward.
    #[arg(long, global = true, env = "BATON_PROJECT", value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// The participant acting: a registered passname.
    #[arg(long = "as", global = true, env = "BATON_AS", value_name = "NAME")]
    pub as_name: Option<String>,
    /// A shared store to administer directly (`sqlite:DIR` or `postgres://…`); --project
    /// then names the project in it.
    #[arg(long, global = true, env = "BATON_DB", value_name = "URL")]
    pub db: Option<String>,
    /// A project on a `baton serve` (http://HOST:PORT/v1/projects/NAME), acting as the key
    /// in BATON_KEY: the same commands, answered by the server.
    #[arg(long = "remote", global = true, env = "BATON_URL", value_name = "URL")]
    pub remote: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    Init(init::InitArgs),
    #[command(subcommand)]
    Agent(agent::AgentCommand),
    #[command(subcommand)]
    Key(key::KeyCommand),
    SecurityEvents(agent::SecurityEventsArgs),
    #[command(subcommand)]
    Project(project_cmd::ProjectCommand),
    Send(send::SendArgs),
    Inbox(messages::InboxArgs),
    Outbox(messages::OutboxArgs),
    Show(messages::ShowArgs),
    Thread(messages::ThreadArgs),
    Ack(step::AckArgs),
    Complete(step::CompleteArgs),
    HandBack(step::HandBackArgs),
    Refuse(step::RefuseArgs),
    Archive(step::ArchiveArgs),
    Search(search::SearchArgs),
    Wait(wait::WaitArgs),
    #[command(subcommand)]
    Focus(state::FocusCommand),
    #[command(subcommand)]
    Stream(state::StreamCommand),
    Decide(state::DecideArgs),
    Constrain(state::ConstrainArgs),
    Note(state::NoteArgs),
    #[command(subcommand)]
    Session(state::SessionCommand),
    #[command(subcommand)]
    State(state::StateCommand),
    Check(state::CheckArgs),
    Resume(resume::ResumeArgs),
    #[command(subcommand)]
    Receipt(receipt::ReceiptCommand),
    Alerts(receipt::AlertsArgs),
    Mcp(mcp::McpArgs),
    Gateway(gateway::GatewayArgs),
    Serve(serve::ServeArgs),
    Export(portable::ExportArgs),
    Import(portable::ImportArgs),
    Run(run::RunArgs),
    Runs(runs::RunsArgs),
    Hook(hook::HookArgs),
    Reap(reap::ReapArgs),
    #[command(subcommand)]
    Handoff(handoff::HandoffCommand),
    #[command(subcommand)]
    Evidence(handoff::EvidenceCommand),
    #[command(subcommand)]
    Order(order::OrderCommand),
    Negotiate(negotiate::NegotiateArgs),
    Review(review::ReviewArgs),
    Queue(queue::QueueArgs),
    Need(queue::NeedArgs),
    Record(queue::RecordArgs),
    Demo(demo::DemoArgs),
    Status(status::StatusArgs),
    Board(board::BoardArgs),
    /// The demo's cast (executor, reviewer, upstream MCP server), run by `baton demo`.
    #[command(subcommand, hide = true)]
    DemoPart(demo::DemoPart),
}
