//! The command line: global options, and parsing a line against the subcommands (listed,
//! with what runs each, in `commands/mod.rs`; each one's arguments beside its code).

use std::path::PathBuf;

use clap::{Args, Parser};

pub use crate::commands::Command;
use crate::commands::SUBCOMMANDS;

/// Baton: the handoff layer for AI agents. Durable inboxes, typed handoffs and an
/// append-only log, in `.baton/` beside your repository.
#[derive(Parser, Debug)]
#[command(
    name = "baton",
    version,
    after_help = format!("Examples:\n  baton init\n  baton agent add planner --role planner\n  \
                  baton --as planner send --to executor --type request --topic csv-export --body 'Keep filters in CSV export'\n  \
                  baton --as executor inbox\n\nExit codes: 0 ok, 1 error, 2 usage or no project, 3 refused, \
                  4 not found, 5 forbidden, 6 conflict or busy (retryable), 75 no run slot; `baton run` \
                  also exits with its command's code, 125 over budget, 127 spawn failure, 128+N signal\n\n\
                  Over a server: BATON_URL=http://HOST:PORT/v1/projects/NAME BATON_KEY=TOKEN baton inbox\n\
                  The key says who acts (--as is refused). {}",
        reach()
    )
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
    /// The subcommand's name as given (`order`, `review`): what the operations'
    /// declarations are looked up by.
    #[arg(skip)]
    pub name: String,
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

/// Where the commands run, from the operations' declarations: "Works there: …" (over a
/// server) and "Needs the project here: …". A command whose operations all run alike is
/// named alone; one whose operations differ names each (`receipt write|show`).
fn reach() -> String {
    use baton_app::ops::{OPERATIONS, Reach};
    let mut anywhere: Vec<String> = Vec::new();
    let mut here: Vec<String> = Vec::new();
    let mut tops: Vec<&str> = Vec::new();
    for op in OPERATIONS {
        let top = op.name.split(' ').next().unwrap_or(op.name);
        if !tops.contains(&top) && SUBCOMMANDS.iter().any(|(name, _)| *name == top) {
            tops.push(top);
        }
    }
    for top in tops {
        let ops: Vec<_> = OPERATIONS
            .iter()
            .filter(|o| o.name.split(' ').next() == Some(top))
            .collect();
        for (reach, list) in [(Reach::Anywhere, &mut anywhere), (Reach::Local, &mut here)] {
            let these: Vec<&str> = ops
                .iter()
                .filter(|o| o.reach == reach)
                .map(|o| o.name.strip_prefix(top).unwrap_or("").trim_start())
                .collect();
            if these.is_empty() {
                continue;
            }
            let mut named = if these.len() == ops.len() {
                top.to_owned()
            } else {
                format!("{top} {}", these.join("|"))
            };
            if let Some(note) = reach_note(top, reach) {
                named = format!("{named} ({note})");
            }
            list.push(named);
        }
    }
    format!(
        "Works there: {}. Needs the project here: {}",
        anywhere.join(", "),
        here.join(", ")
    )
}

/// What the declarations do not say of where a command runs.
fn reach_note(top: &str, reach: baton_app::ops::Reach) -> Option<&'static str> {
    (top == "order" && reach == baton_app::ops::Reach::Anywhere)
        .then_some("approve only an order holding no staged effects")
}

/// Whether `words` (`order show`) name a command of this binary: what a hint may tell a
/// person to run. Builds only the command the first word names.
pub fn has_command(words: &[&str]) -> bool {
    let Some((top, rest)) = words.split_first() else {
        return false;
    };
    let Some((name, build)) = SUBCOMMANDS.iter().find(|(name, _)| name == top) else {
        return false;
    };
    let mut command = build(clap::Command::new(*name));
    for word in rest {
        match command.find_subcommand(word) {
            Some(sub) => command = sub.clone(),
            None => return false,
        }
    }
    true
}

impl Cli {
    /// Parses the command line. Building every subcommand's arguments (and copying the
    /// global options into each) is most of what parsing costs, and a command runs for a
    /// few milliseconds: so the line is first parsed against the one subcommand it names.
    /// Anything that does not parse that way — help, a usage error, a name that is an
    /// option's value — is parsed again against the whole command line, so what clap
    /// prints is what it always printed.
    pub fn parse_lazily() -> Result<Cli, clap::Error> {
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        Self::lazily(&args).unwrap_or_else(|| Self::whole(&args))
    }

    /// The line parsed against the whole command line, its subcommand's name kept.
    fn whole(args: &[std::ffi::OsString]) -> Result<Cli, clap::Error> {
        use clap::{CommandFactory, FromArgMatches};
        let mut root = Cli::command();
        let matches = root.try_get_matches_from_mut(args)?;
        let mut cli = Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut root))?;
        cli.name = matches.subcommand_name().unwrap_or_default().to_owned();
        Ok(cli)
    }

    fn lazily(args: &[std::ffi::OsString]) -> Option<Result<Cli, clap::Error>> {
        use clap::FromArgMatches;
        let (name, build) = args.iter().skip(1).find_map(|arg| {
            let arg = arg.to_str()?;
            SUBCOMMANDS.iter().find(|(name, _)| *name == arg)
        })?;
        let root = GlobalArgs::augment_args(
            clap::Command::new("baton")
                .subcommand_required(true)
                .arg_required_else_help(true),
        );
        let mut root = root.subcommand(build(clap::Command::new(*name)));
        let matches = root.try_get_matches_from_mut(args).ok()?;
        let mut cli = Cli::from_arg_matches(&matches).ok()?;
        cli.name = (*name).to_owned();
        // Nothing is kept from the tree once the line is parsed; freeing it costs time.
        std::mem::forget(root);
        Some(Ok(cli))
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Every subcommand is an operation the declarations know, so where it may run is
    /// theirs to say (`baton_app::ops::command_reach`).
    #[test]
    fn every_subcommand_is_declared() {
        let mut full = Cli::command();
        full.build();
        for sub in full.get_subcommands().map(|c| c.get_name()) {
            if sub == "help" {
                continue;
            }
            assert!(
                baton_app::ops::command_reach(sub).is_some(),
                "`baton {sub}` is not declared in baton_app::ops"
            );
        }
    }

    /// The help says where each command runs, from the declarations: every command is
    /// named, on one side or (part by part) on both.
    #[test]
    fn the_help_says_where_every_command_runs() {
        let reach = reach();
        let (there, here) = reach.split_once(". Needs the project here: ").unwrap();
        let named = |list: &str| -> Vec<String> {
            list.trim_start_matches("Works there: ")
                .split(", ")
                .map(|n| n.split([' ', '(']).next().unwrap().to_owned())
                .collect()
        };
        let (there, here) = (named(there), named(here));
        for (name, _) in SUBCOMMANDS {
            assert!(
                there.iter().chain(&here).any(|n| n == name),
                "`baton {name}` is missing from: {reach}"
            );
        }
        assert!(there.contains(&"inbox".to_owned()) && here.contains(&"review".to_owned()));
        assert!(reach.contains("state show") && reach.contains("state render|import"));
    }

    /// Each entry builds its subcommand as the derive does (the same help, every option),
    /// and the list names every subcommand of [`Command`] but the hidden demo cast.
    #[test]
    fn every_subcommand_builds_lazily_as_the_derive_builds_it() {
        let mut full = Cli::command();
        full.build();
        let names: Vec<&str> = full
            .get_subcommands()
            .map(|c| c.get_name())
            .filter(|n| !["help", "demo-part"].contains(n))
            .collect();
        let listed: Vec<&str> = SUBCOMMANDS.iter().map(|(n, _)| *n).collect();
        assert_eq!(listed, names, "SUBCOMMANDS must follow the enum");
        for (name, build) in SUBCOMMANDS {
            let mut lazy = GlobalArgs::augment_args(clap::Command::new("baton"))
                .subcommand(build(clap::Command::new(*name)));
            lazy.build();
            let lazy = lazy.find_subcommand_mut(name).unwrap().render_long_help();
            let derived = full.find_subcommand_mut(name).unwrap().render_long_help();
            assert_eq!(lazy.to_string(), derived.to_string(), "{name}");
        }
    }

    /// A line parsed against its one subcommand gives what the whole parser gives; a line
    /// it cannot parse that way is left to the whole parser.
    #[test]
    fn a_lazy_parse_equals_the_whole_parse() {
        let line = |s: &str| -> Vec<std::ffi::OsString> {
            s.split(' ').map(std::ffi::OsString::from).collect()
        };
        for ok in [
            "baton --as planner send --to executor --type request --topic t --body hi",
            "baton send --json --to a,b --body x --as planner",
            "baton --project /tmp/p inbox --all",
            "baton agent add impl-1 --role executor",
            "baton order decline 01ABC --expect-seq 2 --reason no",
            "baton runs --all --limit 5",
        ] {
            let whole = Cli::whole(&line(ok)).map(|c| format!("{c:?}"));
            let lazy = Cli::lazily(&line(ok)).map(|r| r.map(|c| format!("{c:?}")));
            match whole {
                Ok(whole) => assert_eq!(lazy.unwrap().unwrap(), whole, "{ok}"),
                Err(_) => assert!(lazy.is_none(), "{ok}: parsed lazily, not whole"),
            }
        }
        for left in [
            "baton --as send inbox",
            "baton send --help",
            "baton inbox --no-such-flag",
            "baton",
        ] {
            assert!(Cli::lazily(&line(left)).is_none(), "{left}");
        }
    }
}
