//! `baton serve`: the projects of a shared store over HTTP.

use std::net::SocketAddr;

use baton_app::Settings;
use clap::Args;
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::GlobalArgs;
use crate::error::{CommandError, CommandResult};
use crate::output::Output;

/// Serve a shared store's projects over HTTP, each at /v1/projects/NAME.
///
/// Every request carries `Authorization: Bearer TOKEN` (`baton key issue`); the key names
/// the participant. The API is described at /v1/openapi.json. Binds loopback unless told
/// otherwise. On SIGINT or SIGTERM it stops accepting and lets requests in flight finish.
/// It also delivers the projects' webhooks (`baton agent webhook`).
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  baton --db sqlite:/srv/baton serve\n  \
                  baton --db postgres://baton@db.internal/baton serve --bind 0.0.0.0:7878 \
                  --public-url https://baton.example.com")]
pub struct ServeArgs {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:7878", value_name = "HOST:PORT")]
    pub bind: SocketAddr,
    /// Failed authentications one address (or one key) may make in a minute before its
    /// failures are answered 429 for the rest of that minute; a valid key is always heard.
    #[arg(long, default_value_t = baton_server::FAILURE_LIMIT, value_name = "N")]
    pub max_auth_failures: u32,
    /// Let webhooks reach loopback, private and link-local addresses (a server for local
    /// testing); without it they go to public addresses only.
    #[arg(long)]
    pub allow_private_webhooks: bool,
    /// An environment variable outside A2A agents' keys may be read from (`NAME`, or
    /// `PREFIX*` for every variable starting so); repeat it for several. Only these: a
    /// participant added over this server naming another is refused, and the requests of
    /// one added where the database is that names another wait. Without it, no key is read.
    #[arg(long = "agent-key-env", value_name = "NAME|PREFIX*")]
    pub agent_key_envs: Vec<String>,
    /// Let outside A2A agents be at loopback, private and link-local addresses (a server
    /// for local testing); without it they are reached at public addresses only.
    #[arg(long)]
    pub allow_private_agents: bool,
    /// The environment variable holding the token `/metrics` then requires from every
    /// caller, this machine's too (`Authorization: Bearer TOKEN`); without it, `/metrics`
    /// answers loopback only, since it names every project.
    #[arg(long, value_name = "VAR")]
    pub metrics_token_env: Option<String>,
    /// How many projects are kept open at once; the least recently used closes first, and
    /// a project idle for 5 minutes closes anyway (each open project holds a few
    /// descriptors and a thread on SQLite).
    #[arg(long, default_value_t = baton_server::OPEN_PROJECTS, value_name = "N")]
    pub open_projects: usize,
    /// How many connections are held at once; past it the oldest connection that has not
    /// yet shown a valid key is closed, else the oldest idle one of the key holding the
    /// most (a newcomer is always heard). Defaults to three quarters of the process's
    /// descriptor limit (`ulimit -n`), at most 16,384.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// The URL clients reach this server by (behind a proxy, say): the MCP endpoint and
    /// the board answer requests naming its host, besides the address it listens on
    /// (and, on loopback, `localhost` and `[::1]` at that port). Any other `Host` or
    /// `Origin` is refused there (DNS rebinding).
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// Another host the MCP endpoint and the board answer to, HOST (any port) or
    /// HOST:PORT; repeatable.
    #[arg(long = "allow-host", value_name = "HOST[:PORT]")]
    pub allow_hosts: Vec<String>,
}

pub async fn run(g: &GlobalArgs, args: ServeArgs) -> CommandResult<Output> {
    let Some(url) = &g.db else {
        return Err(CommandError::usage(
            "`baton serve` serves a shared store: pass --db URL (sqlite:DIR or postgres://…), or set BATON_DB",
        ));
    };
    let admission =
        baton_core::participant::Admission::new(&args.agent_key_envs, args.allow_private_agents)
            .map_err(|e| CommandError::usage(format!("--agent-key-env: {e}")))?;
    let settings = Settings {
        private_webhooks: args.allow_private_webhooks,
        outside_agents: Some(admission),
        ..Settings::default()
    };
    let database = baton_store::database(url, settings.busy_timeout).await?;
    let metrics_token = match &args.metrics_token_env {
        Some(var) => match std::env::var(var) {
            Ok(token) if !token.trim().is_empty() => {
                // Kept for the server's life.
                Some(&*Box::leak(token.trim().to_owned().into_boxed_str()))
            }
            _ => {
                return Err(CommandError::usage(format!(
                    "--metrics-token-env {var}: the variable is not set, or empty"
                )));
            }
        },
        None => None,
    };
    let options = baton_server::Options {
        failure_limit: args.max_auth_failures,
        metrics_token,
        open_projects: args.open_projects.max(1),
        max_connections: args
            .max_connections
            .unwrap_or_else(baton_server::default_max_connections)
            .max(1),
        public_url: args.public_url,
        allow_hosts: args.allow_hosts,
        ..baton_server::Options::default()
    };
    options
        .check()
        .map_err(|e| CommandError::usage(format!("--public-url or --allow-host: {e}")))?;
    let (listener, bound, shutdown) = listen(args.bind).await?;
    let server = baton_server::Server::with_options(database, settings, options);
    let poster = std::sync::Arc::new(baton_server::HttpPoster::new(args.allow_private_webhooks));
    let webhooks = tokio::spawn(
        std::sync::Arc::clone(&server).deliver_webhooks(std::sync::Arc::clone(&poster) as _),
    );
    // Outside A2A agents' keys are read from this process's environment, by name (only
    // the names the operator listed: the loop asks for no other).
    let agents = std::sync::Arc::new(baton_server::HttpPoster::for_agents(
        args.allow_private_agents,
    ));
    let outside = tokio::spawn(std::sync::Arc::clone(&server).hand_to_outside_agents(
        agents,
        std::sync::Arc::new(|var: &str| std::env::var(var).ok()),
    ));
    // The address goes to stderr: stdout stays empty until the server has stopped.
    eprintln!("baton serve: listening on http://{bound}/v1 (API: http://{bound}/v1/openapi.json)");
    let served = baton_server::serve(listener, server, shutdown).await;
    // A delivery cut short here is retried (by this or another server) when its lease ends.
    webhooks.abort();
    outside.abort();
    served?;
    eprintln!("baton serve: stopped");
    Ok(Output::nothing())
}

/// A listener on `bind`, the address it took, and the future that ends at SIGINT or
/// SIGTERM (a server's graceful stop).
pub async fn listen(
    bind: SocketAddr,
) -> CommandResult<(
    tokio::net::TcpListener,
    SocketAddr,
    impl std::future::Future<Output = ()>,
)> {
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|e| CommandError::failed(format!("cannot listen on {bind}: {e}")))?;
    let bound = listener.local_addr()?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let shutdown = async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    };
    Ok((listener, bound, shutdown))
}
