//! `baton agent add|list|policy` and `baton security-events`: the project's participants,
//! their authority, and what was refused as beyond it.

use baton_app::doc::PolicyView;
use baton_app::ops;
use clap::{Args, Subcommand};

use crate::commands::Context;
use crate::error::CommandResult;
use crate::output::{Output, table};

/// Register and list participants, and set what each may do.
#[derive(Subcommand, Debug)]
pub enum AgentCommand {
    Add(AddArgs),
    List(ListArgs),
    Policy(PolicyArgs),
    Webhook(WebhookArgs),
    Webhooks(WebhooksArgs),
}

/// What a participant may do, by name (comma-separated or repeated).
#[derive(Args, Debug, Default)]
pub struct PolicyFlags {
    /// Its powers: request, send, accept, approve, effects (`none` for none).
    #[arg(long, value_delimiter = ',', value_name = "POWERS")]
    pub may: Option<Vec<String>>,
    /// The topics they reach: a topic, a prefix such as `billing-*`, or `*` for every topic.
    #[arg(long, value_delimiter = ',', value_name = "TOPICS")]
    pub topics: Option<Vec<String>>,
}

/// Register a participant under a passname.
///
/// A passname is a lowercase slug ([a-z0-9][a-z0-9-]{0,63}). Roles: planner, executor,
/// reviewer, owner, observer, or another word. Each role holds the least it needs unless
/// --may or --topics say otherwise: an owner everything; a planner request, send, accept,
/// approve; a reviewer send, accept, approve; an executor (and any other role) send,
/// accept; an observer nothing. Adding the same name and role again is harmless; the same
/// name with another role is refused (exit 6).
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  baton agent add impl-1 --role executor\n  \
                  baton agent add billing-bot --role executor --may send,accept,request --topics 'billing-*'\n  \
                  baton agent add researcher --role executor --a2a https://agents.example.org/research --key-env RESEARCH_KEY")]
pub struct AddArgs {
    pub name: String,
    #[arg(long)]
    pub role: String,
    #[command(flatten)]
    pub policy: PolicyFlags,
    /// An outside A2A agent's URL: the participant stands for it, and `baton serve` hands
    /// the requests sent to it to that agent and brings its tasks' states back. Over a
    /// server it must be a public address unless the server allows private agents
    /// (`baton serve --allow-private-agents`).
    #[arg(long, value_name = "URL", requires = "key_env")]
    pub a2a: Option<String>,
    /// The environment variable of `baton serve` holding the outside agent's key (the key
    /// itself is never stored). The server reads only the variables its operator lists
    /// (`baton serve --agent-key-env VAR`); over a server, naming another is refused.
    #[arg(long, value_name = "VAR", requires = "a2a")]
    pub key_env: Option<String>,
}

/// List the registered participants and what each may do.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  baton agent list --json")]
pub struct ListArgs {}

/// Change what a participant may do: --may and --topics replace its powers or topics;
/// --default starts from its role's default instead (alone, it returns to the default).
///
/// An action beyond a participant's policy is refused (exit 5), changes nothing, and is
/// recorded as a security event (`baton security-events`).
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton agent policy impl-1 --may send,accept,request --topics 'billing-*'\n  \
                  baton agent policy impl-1 --default"
)]
pub struct PolicyArgs {
    pub name: String,
    #[command(flatten)]
    pub policy: PolicyFlags,
    /// Start from the role's default policy.
    #[arg(long)]
    pub default: bool,
}

/// Tell a participant's URL of what concerns it: `baton serve` POSTs event metadata
/// (kind, id, topic, from, to, time — never a payload) as `baton/webhook@1`, at least
/// once, retried with backoff (1 s doubling to 10 min), signed with HMAC-SHA256 in
/// `x-baton-signature: sha256=HEX` over `TIMESTAMP.BODY` (`x-baton-timestamp`). The
/// secret is printed once. Setting a URL again issues a new secret.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton agent webhook impl-1 --url https://hooks.example.com/baton\n  \
                  baton agent webhook impl-1 --off"
)]
pub struct WebhookArgs {
    pub name: String,
    /// The endpoint (http:// or https://).
    #[arg(long, required_unless_present = "off", conflicts_with = "off")]
    pub url: Option<String>,
    /// Remove the webhook.
    #[arg(long)]
    pub off: bool,
}

/// List the webhooks and where each one's delivery stands (never their secrets).
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  baton agent webhooks --json")]
pub struct WebhooksArgs {}

/// List actions refused as beyond authority (a policy, a key's scope), newest first.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  baton security-events\n  baton security-events --before 812 --json"
)]
pub struct SecurityEventsArgs {
    /// At most this many (1 to 500).
    #[arg(long, default_value_t = 50)]
    pub limit: u32,
    /// Only events before this seq (the last seq of the previous page).
    #[arg(long, value_name = "SEQ")]
    pub before: Option<i64>,
}

/// `send, accept on billing-*`, for a table cell.
fn described(p: &PolicyView) -> String {
    let may: Vec<String> = p.may.iter().map(|p| p.to_string()).collect();
    let may = if may.is_empty() {
        "nothing".to_owned()
    } else {
        may.join(",")
    };
    match &p.topics {
        Some(t) => format!("{may} on {}", t.join(",")),
        None => may,
    }
}

pub async fn run(ctx: &Context, cmd: AgentCommand) -> CommandResult<Output> {
    match cmd {
        AgentCommand::Add(args) => {
            let input = ops::AgentInput {
                name: args.name,
                role: args.role,
                may: args.policy.may,
                topics: args.policy.topics,
                a2a: args.a2a,
                key_env: args.key_env,
            };
            let doc = ctx.call::<ops::AgentAdd>(input).await?;
            let may = described(&doc.policy);
            let human = match (doc.created, doc.policy_set) {
                (true, _) => format!("Added {} ({}): may {may}", doc.name, doc.role),
                (false, true) => format!(
                    "{} is already registered ({}); its policy is now: {may}",
                    doc.name, doc.role
                ),
                (false, false) => format!(
                    "{} is already registered ({}); nothing changed",
                    doc.name, doc.role
                ),
            };
            Ok(Output::of(&doc, human))
        }
        AgentCommand::List(_) => {
            let doc = ctx.call::<ops::AgentList>(ops::Nothing {}).await?;
            // A column for the outside agents only where a participant stands for one.
            let outside = doc.items.iter().any(|row| row.a2a.is_some());
            let rows: Vec<Vec<String>> = doc
                .items
                .iter()
                .map(|row| {
                    let mut may = described(&row.policy);
                    if !row.policy.default {
                        may.push_str(" (set)");
                    }
                    let mut row_text = vec![
                        row.name.to_string(),
                        row.role.clone(),
                        may,
                        row.added_at.clone(),
                    ];
                    if outside {
                        row_text.push(row.a2a.as_ref().map_or_else(String::new, |a| {
                            format!("{} (key in ${})", a.url, a.key_env)
                        }));
                    }
                    row_text
                })
                .collect();
            let human = if doc.items.is_empty() {
                "No participants yet: baton agent add NAME --role ROLE".to_owned()
            } else if outside {
                table(&["NAME", "ROLE", "MAY", "ADDED", "A2A AGENT"], &rows)
            } else {
                table(&["NAME", "ROLE", "MAY", "ADDED"], &rows)
            };
            Ok(Output::of(&doc, human))
        }
        AgentCommand::Policy(args) => {
            let input = ops::PolicyInput {
                name: args.name,
                may: args.policy.may,
                topics: args.policy.topics,
                default: args.default,
            };
            let doc = ctx.call::<ops::AgentPolicySet>(input).await?;
            let human = format!(
                "{} ({}) may {}{}",
                doc.name,
                doc.role,
                described(&doc.policy),
                if doc.policy.default {
                    " (its role's default)"
                } else {
                    ""
                }
            );
            Ok(Output::of(&doc, human))
        }
        AgentCommand::Webhook(args) => {
            let input = ops::WebhookInput {
                name: args.name,
                url: if args.off { None } else { args.url },
            };
            let doc = ctx.call::<ops::AgentWebhook>(input).await?;
            let human = match (&doc.url, &doc.secret) {
                (Some(url), Some(secret)) => format!(
                    "{} is told at {url}.\nSigning secret (shown once): {secret}",
                    doc.participant
                ),
                _ => format!("{} has no webhook", doc.participant),
            };
            Ok(Output::of(&doc, human))
        }
        AgentCommand::Webhooks(_) => {
            let doc = ctx.call::<ops::AgentWebhooks>(ops::Nothing {}).await?;
            let rows: Vec<Vec<String>> = doc
                .items
                .iter()
                .map(|w| {
                    vec![
                        w.participant.to_string(),
                        w.url.clone(),
                        w.cursor.to_string(),
                        match (&w.last_error, &w.next_attempt_at) {
                            (Some(e), Some(at)) => {
                                format!("{} failed ({e}); next {at}", w.failures)
                            }
                            _ => w
                                .delivered_at
                                .as_ref()
                                .map_or_else(|| "-".to_owned(), |at| format!("told {at}")),
                        },
                    ]
                })
                .collect();
            let human = if rows.is_empty() {
                "No webhooks: baton agent webhook NAME --url URL".to_owned()
            } else {
                table(&["NAME", "URL", "CURSOR", "LAST"], &rows)
            };
            Ok(Output::of(&doc, human))
        }
    }
}

pub async fn security_events(ctx: &Context, args: SecurityEventsArgs) -> CommandResult<Output> {
    let input = ops::SecurityInput {
        before: args.before,
        limit: Some(args.limit),
    };
    let doc = ctx.call::<ops::SecurityEventsList>(input).await?;
    let rows: Vec<Vec<String>> = doc
        .items
        .iter()
        .map(|e| {
            vec![
                e.seq.to_string(),
                e.at.clone(),
                e.participant.to_string(),
                e.action.clone(),
                e.topic.clone().unwrap_or_else(|| "-".into()),
                e.count.to_string(),
                e.reason.clone(),
            ]
        })
        .collect();
    let human = if rows.is_empty() {
        "No security events: nothing was refused as beyond authority".to_owned()
    } else {
        table(
            &["SEQ", "AT", "WHO", "TRIED", "TOPIC", "TIMES", "WHY"],
            &rows,
        )
    };
    Ok(Output::of(&doc, human))
}
