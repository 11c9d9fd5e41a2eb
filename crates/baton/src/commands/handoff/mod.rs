//! Work Order and Work Report documents at the command line: `baton handoff
//! new|check|render` and `baton evidence run`. The rules live in `baton_core::awl`; these
//! files read files, ask git and PATH what the rules need to know, and print:
//! `template.rs` writes templates and filled documents, `check.rs` checks one,
//! `markdown.rs` renders one for a person, `evidence.rs` runs a command and keeps its record.

use std::path::{Path, PathBuf};

use baton_core::awl::{self, Finding};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::Value;

use crate::cli::GlobalArgs;
use crate::error::{CommandError, CommandResult, ErrorKind};
use crate::output::Output;

mod check;
mod evidence;
mod markdown;
mod template;

pub use evidence::evidence;

/// Write, check and render Work Orders and Work Reports (the handoff contract).
#[derive(Subcommand, Debug)]
pub enum HandoffCommand {
    /// Print a Work Order (or `--report`: a Work Report) template, every field explained.
    #[command(
        after_help = "Examples:\n  baton handoff new > order.json\n  baton handoff new --report > report.json"
    )]
    New(NewArgs),
    /// Check an order, a report against its order, or a sub-order against its parent.
    ///
    /// Prints the findings (rule, kind, path, message); exits 3 when any is `invalid`.
    #[command(after_help = "Examples:\n  baton handoff check order.json\n  \
                            baton handoff check report.json --order order.json\n  \
                            baton handoff check sub.json --parent order.json --sibling other-sub.json\n  \
                            baton --json handoff check order.json")]
    Check(CheckArgs),
    /// Render a document as Markdown for a person to review (goal, acceptance and stop
    /// conditions first, constraints recapped last, the JSON embedded).
    #[command(after_help = "Example:\n  baton handoff render order.json > HANDOFF.md")]
    Render(RenderArgs),
}

#[derive(Args, Debug)]
pub struct NewArgs {
    /// A Work Report template instead of a Work Order; with an ORDER id, a report on that
    /// order filled from what Baton knows (you, the time, its criteria and acceptance
    /// owner, HEAD, and the order's `baton evidence run --order ORDER` records as the
    /// before and after evidence).
    #[arg(long, value_name = "ORDER", num_args = 0..=1, conflicts_with_all = ["to", "goal"])]
    pub report: Option<Option<String>>,
    /// Write an order to NAME, filled from what Baton knows: `from` is you (--as), the id,
    /// the time, the repository, its HEAD and its test command. Needs --goal.
    #[arg(long, value_name = "NAME", requires = "goal")]
    pub to: Option<String>,
    /// The order's goal: one sentence of what is true when the work is done.
    #[arg(long, value_name = "TEXT", requires = "to")]
    pub goal: Option<String>,
    /// An acceptance criterion (repeatable; c1, c2, … in order).
    #[arg(long, value_name = "TEXT")]
    pub criterion: Vec<String>,
    /// How long the worker has, from now (e.g. 2d, 6h).
    #[arg(long, value_name = "AGE", default_value = "2d")]
    pub deadline: String,
    /// A tool pattern the worker may use (repeatable): SERVER/TOOL, SERVER/* or *.
    #[arg(long, value_name = "PATTERN")]
    pub tool: Vec<String>,
    /// A budget limit (repeatable): usd=5, tokens=200000, tool_calls=50, seconds=3600.
    #[arg(long, value_name = "UNIT=N")]
    pub budget: Vec<String>,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The order or report to check.
    pub file: PathBuf,
    /// The order a report answers (required for a report).
    #[arg(long, value_name = "ORDER_FILE")]
    pub order: Option<PathBuf>,
    /// The parent of a sub-order: checks C1–C5.
    #[arg(long, value_name = "PARENT_FILE")]
    pub parent: Option<PathBuf>,
    /// The parent's other sub-orders (for C4): an order, or {"order": …, "state": …}.
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub sibling: Vec<PathBuf>,
    /// The order's own sub-orders, for a report (rule R13), in the same form.
    #[arg(long = "sub-order", value_name = "FILE", num_args = 1..)]
    pub sub_order: Vec<PathBuf>,
    /// What the file is; default: from its `spec` (a report's prefix, else an order).
    #[arg(long, value_enum)]
    pub kind: Option<KindArg>,
    /// Whether the `x-baton` contract is required; default: the project's
    /// `orders.contract`, or optional outside a project.
    #[arg(long, value_enum)]
    pub contract: Option<ContractArg>,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum KindArg {
    Order,
    Report,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum ContractArg {
    Required,
    Optional,
}

#[derive(Args, Debug)]
pub struct RenderArgs {
    /// The order or report to render.
    pub file: PathBuf,
}

/// Run a command and record what ran as evidence a report can cite.
#[derive(Subcommand, Debug)]
pub enum EvidenceCommand {
    /// Run CMD, pass its output through, and record the command line, exit code, last 200
    /// lines of output, repository revision and times as a receipt. Exits with CMD's code.
    #[command(after_help = "Example:\n  baton evidence run --order wo_42 -- cargo test -p export")]
    Run(EvidenceRunArgs),
}

#[derive(Args, Debug)]
pub struct EvidenceRunArgs {
    /// The order this evidence is for.
    #[arg(long, value_name = "ID")]
    pub order: Option<String>,
    /// The command and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<String>,
}

pub async fn handoff(g: &GlobalArgs, cmd: HandoffCommand) -> CommandResult<Output> {
    match cmd {
        HandoffCommand::New(args) if args.to.is_some() => template::filled(g, args),
        HandoffCommand::New(NewArgs {
            report: Some(Some(order)),
            ..
        }) => template::filled_report(g, &order).await,
        HandoffCommand::New(args) => Ok(template::new(args)),
        HandoffCommand::Check(args) => check::check(g, args),
        HandoffCommand::Render(args) => markdown::render(args),
    }
}

// ---- reading ------------------------------------------------------------------------------

/// A document from a file, or the one B0 finding that says why it cannot be read.
pub(crate) fn read_document(path: &Path) -> CommandResult<Result<Value, Finding>> {
    // Over the cap, the head (one byte past it) is what the B0 finding is made from.
    let read = crate::files::read_bounded(path, awl::MAX_DOCUMENT_BYTES)
        .map_err(|e| read_error(path, e))?;
    Ok(awl::parse_document(&read.bytes))
}

fn read_error(path: &Path, e: std::io::Error) -> CommandError {
    let kind = if e.kind() == std::io::ErrorKind::NotFound {
        ErrorKind::NotFound
    } else {
        ErrorKind::Failed
    };
    CommandError::new(kind, format!("{}: {e}", path.display()))
}
