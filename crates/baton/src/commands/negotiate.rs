//! `baton negotiate`: settle a disagreement between agents with the deterministic
//! bargaining engine. This edge reads the spec and position files (each bounded
//! by the payload cap while it is read), calls the use cases, and renders the trail and the
//! result; a walk-away prints the short list a person reads and exits 2. It never prints a
//! weight, a utility or a floor, and never decides anything itself.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use baton_app::doc::NegotiationShown;
use baton_core::negotiation::{Ended, Input, Negotiation, Status};
use baton_core::{Passname, Refusal};
use baton_store::StoreError;
use clap::{Args, Subcommand};
use serde_json::{Map, Value};

use crate::commands::Context;
use crate::error::{CommandError, CommandResult, ErrorKind};
use crate::output::{Output, table};

/// Settle a disagreement: agents state preferences, arithmetic closes the deal, and only
/// what cannot be settled reaches a person.
///
/// A spec (JSON) names up to eight issues with their options, hard constraints (partial
/// outcomes never acceptable), a round limit and the parties. Each party's position (JSON:
/// weights ≥ 0, utilities from 0 to 1, a floor, vetoes) is its own: a party accepts an
/// outcome when Σ weight·utility reaches its floor and it matches none of its vetoes.
/// Parties offer in turn (in passname order), then a mediator proposes the fairest outcome
/// every party accepts; the same spec and positions always give the same trail.
///
/// With SPEC.json alone, its parties name their position files (relative to the spec): it
/// opens, submits every position and settles in one go. Or `open` it and let each party
/// `submit` its own; it settles when the last one is in. Each party is a registered
/// participant, or declared `"external": true` in the spec (someone outside the project),
/// whose position a participant submits with `--for`. An agreement exits 0; a walk-away
/// prints the issues left unsettled and who vetoed what, and exits 2 (a person decides).
/// A settled negotiation can be opened again under its id: a new sitting, the earlier ones
/// kept. Weights, utilities and floors are never printed.
#[derive(Args, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Examples:\n  baton negotiate db-choice.json\n  \
                  baton --json negotiate db-choice.json\n  \
                  baton negotiate open db-choice.json\n  \
                  baton negotiate submit db-choice --position ops.json --as ops\n  \
                  baton negotiate show db-choice\n\n\
                  A spec:\n  \
                  {\"id\": \"db-choice\", \"rounds\": 50,\n   \
                  \"issues\": [{\"name\": \"db\", \"options\": [\"sqlite\", \"postgres\"]},\n              \
                  {\"name\": \"deploy\", \"options\": [\"single\", \"multi-region\"]}],\n   \
                  \"constraints\": [{\"db\": \"sqlite\", \"deploy\": \"multi-region\"}],\n   \
                  \"parties\": [{\"name\": \"planner\", \"position\": \"planner.json\"},\n               \
                  {\"name\": \"ops\", \"position\": \"ops.json\"}]}\n\
                  A position:\n  \
                  {\"weights\": {\"db\": 0.7, \"deploy\": 0.3},\n   \
                  \"utilities\": {\"db\": {\"sqlite\": 1, \"postgres\": 0.2},\n                 \
                  \"deploy\": {\"single\": 1, \"multi-region\": 0}},\n   \
                  \"floor\": 0.5, \"veto\": [{\"deploy\": \"multi-region\"}]}\n\n\
                  Exit codes: 0 agreement (or recorded), 2 walk-away (a person decides), \
                  3 refused (the message names the JSON path; or still open, or submitted \
                  already), 4 no such negotiation, 5 not a party or not yours to submit"
)]
pub struct NegotiateArgs {
    /// A spec whose parties name their position files: open, submit all and settle.
    #[arg(value_name = "SPEC.json")]
    pub spec: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Option<NegotiateCommand>,
}

#[derive(Subcommand, Debug)]
pub enum NegotiateCommand {
    /// Open a negotiation; each party then submits its own position.
    #[command(after_help = "Example:\n  baton negotiate open db-choice.json")]
    Open(OpenArgs),
    /// Submit your position as a party of the negotiation (--as NAME); the last party's
    /// submission settles it. A position counts once.
    #[command(
        after_help = "Example:\n  baton negotiate submit db-choice --position ops.json --as ops"
    )]
    Submit(SubmitArgs),
    /// Show a negotiation: who has submitted, the trail and the result (never a position).
    #[command(after_help = "Example:\n  baton negotiate show db-choice")]
    Show(ShowArgs),
}

#[derive(Args, Debug)]
pub struct OpenArgs {
    /// The spec (JSON); its parties' position files, if named, are not read.
    #[arg(value_name = "SPEC.json")]
    pub spec: PathBuf,
}

#[derive(Args, Debug)]
pub struct SubmitArgs {
    /// The negotiation's id.
    pub id: String,
    /// Your position (JSON).
    #[arg(long, value_name = "FILE")]
    pub position: PathBuf,
    /// Submit an external party's position, for it (a participant submits its own).
    #[arg(long = "for", value_name = "PARTY")]
    pub party: Option<String>,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The negotiation's id.
    pub id: String,
}

pub async fn run(ctx: &Context, args: NegotiateArgs) -> CommandResult<Output> {
    match (args.command, args.spec) {
        (Some(NegotiateCommand::Open(a)), _) => open(ctx, &a.spec).await,
        (Some(NegotiateCommand::Submit(a)), _) => submit(ctx, a).await,
        (Some(NegotiateCommand::Show(a)), _) => show(ctx, &a.id).await,
        (None, Some(spec)) => negotiate(ctx, &spec).await,
        (None, None) => Err(CommandError::usage(
            "name a spec (`baton negotiate SPEC.json`), or use `baton negotiate open|submit|show` \
             (see `baton negotiate --help`)",
        )),
    }
}

/// Where each document came from, so a refusal can name the file as well as the path.
#[derive(Default)]
struct Files {
    spec: Option<PathBuf>,
    positions: HashMap<String, PathBuf>,
}

impl Files {
    /// A store error in the command line's words, naming the file when it is one of ours.
    fn explain(&self, e: StoreError) -> CommandError {
        if let StoreError::Refused(
            r @ Refusal::NegotiationInput {
                input,
                path,
                problem,
            },
        ) = &e
        {
            let file = match input {
                Input::Spec => self.spec.as_ref(),
                Input::Position { party } => self.positions.get(party),
            };
            if let Some(file) = file {
                return CommandError::from_refusal(
                    r,
                    format!(
                        "{} ({input}): {path}: {problem}; nothing was stored: fix it and run again",
                        file.display()
                    ),
                );
            }
        }
        e.into()
    }
}

/// Reads at most `cap + 1` bytes, so an oversized file is refused without holding all of
/// it.
fn read_capped(path: &Path, cap: usize, what: &str) -> CommandResult<String> {
    let read = crate::files::read_bounded(path, cap)
        .map_err(|e| CommandError::refused(format!("{what} {}: {e}", path.display())))?;
    let bytes = read.bytes;
    if read.over {
        return Err(CommandError::refused(format!(
            "{what} {} is over the cap of {cap} bytes (messages.payload_cap in .baton/config.toml); \
             nothing was stored",
            path.display()
        )));
    }
    String::from_utf8(bytes).map_err(|_| {
        CommandError::refused(format!(
            "{what} {} is not UTF-8 text; nothing was stored",
            path.display()
        ))
    })
}

async fn negotiate(ctx: &Context, spec_path: &Path) -> CommandResult<Output> {
    let cap = ctx.app()?.settings().payload_cap;
    let mut files = Files {
        spec: Some(spec_path.to_owned()),
        ..Files::default()
    };
    let spec = read_capped(spec_path, cap, "spec")?;
    let named = ctx
        .app()?
        .position_files(&spec)
        .map_err(|e| files.explain(e))?;
    let base = spec_path.parent().unwrap_or(Path::new(""));
    let mut positions: Vec<(Passname, String)> = Vec::with_capacity(named.len());
    for (party, file) in named {
        let path = base.join(&file);
        let text = read_capped(&path, cap, &format!("{party}'s position"))?;
        files.positions.insert(party.to_string(), path);
        positions.push((party, text));
    }
    let actor = ctx.actor().await?;
    let settled = ctx
        .app()?
        .negotiate(&actor, &spec, &positions)
        .await
        .map_err(|e| files.explain(e))?;
    Ok(rendered(&settled))
}

async fn open(ctx: &Context, spec_path: &Path) -> CommandResult<Output> {
    let files = Files {
        spec: Some(spec_path.to_owned()),
        ..Files::default()
    };
    let spec = read_capped(spec_path, ctx.app()?.settings().payload_cap, "spec")?;
    let actor = ctx.actor().await?;
    let opened = ctx
        .app()?
        .open_negotiation(&actor, &spec)
        .await
        .map_err(|e| files.explain(e))?;
    Ok(rendered(&opened))
}

async fn submit(ctx: &Context, args: SubmitArgs) -> CommandResult<Output> {
    let me = ctx.me().await?;
    let party = match &args.party {
        Some(name) => {
            Passname::new(name).map_err(|e| CommandError::usage(format!("--for {name}: {e}")))?
        }
        None => me.clone(),
    };
    let mut files = Files::default();
    files
        .positions
        .insert(party.to_string(), args.position.clone());
    let text = read_capped(
        &args.position,
        ctx.app()?.settings().payload_cap,
        "position",
    )?;
    let after = ctx
        .app()?
        .submit_position(&me, &party, &args.id, &text)
        .await
        .map_err(|e| files.explain(e))?;
    Ok(rendered(&after))
}

async fn show(ctx: &Context, id: &str) -> CommandResult<Output> {
    let n = ctx.app()?.negotiation(id).await?;
    let doc = NegotiationShown::new(&n);
    let human = human(&doc);
    // Reading a walk-away is not a failure: only the commands that ended it exit 2.
    Ok(Output::of(&doc, human))
}

/// The negotiation after a write: a walk-away still prints, then exits 2.
fn rendered(n: &Negotiation) -> Output {
    let doc = NegotiationShown::new(n);
    let out = Output::of(&doc, human(&doc));
    if n.status() == Status::WalkAway {
        out.with_exit(ErrorKind::Usage)
    } else {
        out
    }
}

fn choices(map: &Map<String, Value>) -> String {
    map.iter()
        .map(|(issue, option)| format!("{issue}={}", option.as_str().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a person reads: the result first, then the trail.
fn human(doc: &NegotiationShown) -> String {
    let id = &doc.id;
    let mut out = String::new();
    match doc.result {
        Status::Open => {
            let (done, waiting): (Vec<_>, Vec<_>) = doc.parties.iter().partition(|p| p.submitted);
            let names = |ps: &[&baton_app::doc::NegotiationParty]| {
                ps.iter()
                    .map(|p| p.name.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            out.push_str(&format!(
                "negotiation {id}: open, waiting for {}\n",
                names(&waiting)
            ));
            if !done.is_empty() {
                out.push_str(&format!("submitted: {}\n", names(&done)));
            }
            out.push_str(&format!(
                "each party submits its own: baton --as NAME negotiate submit {id} --position FILE\n"
            ));
            return out;
        }
        Status::Agreement => {
            let round = doc.trail.last().map_or(0, |o| o.round);
            out.push_str(&format!("negotiation {id}: agreement in round {round}\n"));
            let rows: Vec<Vec<String>> = doc
                .outcome
                .iter()
                .flatten()
                .map(|(issue, option)| {
                    vec![
                        issue.clone(),
                        option.as_str().unwrap_or_default().to_owned(),
                    ]
                })
                .collect();
            out.push_str(&table(&["ISSUE", "OPTION"], &rows));
        }
        Status::WalkAway => {
            let why = match doc.ended {
                Some(Ended::RoundLimit) => {
                    format!("the round limit ({}) came first", doc.rounds)
                }
                _ => "no feasible outcome meets every party's floor and vetoes".to_owned(),
            };
            out.push_str(&format!(
                "negotiation {id}: walk away ({why}); a person decides\n"
            ));
            out.push_str(&format!("unsettled: {}\n", doc.unsettled.join(", ")));
            if doc.vetoes.is_empty() {
                out.push_str("vetoed: nothing\n");
            } else {
                for v in &doc.vetoes {
                    out.push_str(&format!(
                        "vetoed: {} vetoed {}\n",
                        v.party,
                        choices(&v.vetoed)
                    ));
                }
            }
        }
    }
    out.push('\n');
    let mut headers = vec![
        "ROUND".to_owned(),
        "PROPOSER".to_owned(),
        "OFFER".to_owned(),
    ];
    let parties: Vec<String> = doc
        .trail
        .first()
        .map(|o| o.answers.keys().cloned().collect())
        .unwrap_or_default();
    headers.extend(parties.iter().map(|p| p.to_uppercase()));
    let rows: Vec<Vec<String>> = doc
        .trail
        .iter()
        .map(|o| {
            let mut row = vec![o.round.to_string(), o.proposer.clone(), choices(&o.outcome)];
            row.extend(parties.iter().map(|p| {
                o.answers
                    .get(p)
                    .and_then(Value::as_str)
                    .unwrap_or("-")
                    .to_owned()
            }));
            row
        })
        .collect();
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    out.push_str(&table(&headers, &rows));
    out
}
