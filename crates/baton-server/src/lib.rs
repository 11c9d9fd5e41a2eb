//! Baton over HTTP (shared mode): one server, many projects, every use case of
//! [`baton_app::App`] under `/v1/projects/{project}/…`, authenticated by keys.
//!
//! This crate is an edge: handlers parse a request, call one use case as the participant
//! the key names, and return a typed document from `baton_app::doc` (or an error whose
//! status follows from the refusal's kind). `/v1/openapi.json` is generated from the same
//! types the handlers return. It reads no configuration: the caller opens the database
//! and passes the settings.

mod a2a;
mod api;
mod auth;
mod board;
mod connections;
mod error;
mod host;
mod metrics;
mod routes;
mod webhooks;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;

use baton_app::{App, Settings};
use baton_core::ProjectName;
use baton_store::Database;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tower::ServiceExt;

pub use connections::default_max_connections;
pub use error::{ApiError, ErrorBody};
pub use host::server as host;
pub use webhooks::{HttpPoster, POST_TIMEOUT};

/// How long a client may take to send its request headers before it is cut off.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutdown waits for requests in flight (each is bounded in time anyway).
pub const DRAIN: Duration = Duration::from_secs(30);
/// Failed authentications one source — an address, or a key named by the tokens it is
/// tried with — may make in [`FAILURE_WINDOW`] before its failures are answered 429 rather
/// than 401 until the window ends (the default of [`Options::failure_limit`]). A valid key
/// is never refused for failures, its own address's included.
pub const FAILURE_LIMIT: u32 = 20;

/// How a server behaves beyond its projects' settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Failed authentications per source and minute before its failures are answered 429.
    pub failure_limit: u32,
    /// How often webhook delivery looks for due webhooks.
    pub webhook_tick: Duration,
    /// The token `/metrics` takes as `Authorization: Bearer TOKEN` from beyond this
    /// machine; without one, `/metrics` answers loopback only.
    pub metrics_token: Option<&'static str>,
    /// How many projects are kept open at once (each open SQLite project holds a few
    /// descriptors and a thread).
    pub open_projects: usize,
    /// How many connections are held at once; past it the oldest connection that has not
    /// shown a valid key is closed, else the oldest idle one of the key holding the most
    /// ([`default_max_connections`] by default).
    pub max_connections: usize,
    /// The URL clients reach this server by (`http://` or `https://`, a proxy's say): its
    /// host is one the MCP endpoint and the board answer to, beside the names of the
    /// address a request came in on. Checked by [`Options::check`].
    pub public_url: Option<String>,
    /// More hosts the MCP endpoint and the board answer to, `HOST` (any port) or
    /// `HOST:PORT`.
    pub allow_hosts: Vec<String>,
}

impl Options {
    /// Whether the public URL and the allowed hosts can be read; says which cannot.
    pub fn check(&self) -> Result<(), String> {
        routes::Hosts::new(self).map(drop)
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            failure_limit: FAILURE_LIMIT,
            webhook_tick: Duration::from_millis(500),
            metrics_token: None,
            open_projects: OPEN_PROJECTS,
            max_connections: default_max_connections(),
            public_url: None,
            allow_hosts: Vec::new(),
        }
    }
}
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// How many projects a server keeps open at once by default
/// ([`Options::open_projects`]).
pub const OPEN_PROJECTS: usize = 64;
/// How long a project stays open without a request.
pub const IDLE_PROJECT: Duration = Duration::from_secs(300);

/// Where failed authentications are counted: the address they came from, and the key id
/// the token named (so a key guessed at from many addresses is throttled too).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Source {
    Address(IpAddr),
    Key(String),
}

/// The server's state: the database of projects, their settings, and each project's use
/// cases once opened.
pub struct Server {
    database: Arc<dyn Database>,
    settings: Settings,
    /// The projects open now, each with when it was last used: at most
    /// [`Options::open_projects`], and none idle longer than [`IDLE_PROJECT`].
    apps: tokio::sync::Mutex<HashMap<ProjectName, (App, Instant)>>,
    failed_authentications: AtomicU64,
    /// Per source (an address, or the key a token names): when its current window began,
    /// and its failures in it.
    failures: std::sync::Mutex<HashMap<Source, (Instant, u32)>>,
    traffic: std::sync::Mutex<metrics::Traffic>,
    options: Options,
    /// The one project whose project-wide views are served without a key (`baton
    /// board`, on loopback); `None` on `baton serve`.
    keyless: Option<ProjectName>,
    /// Where the next webhook round starts among the projects (rounds take turns).
    webhook_turn: std::sync::atomic::AtomicUsize,
    /// Set once [`serve`] stops accepting: long polls answer at once instead of holding
    /// the shutdown until their timeouts.
    stopping: tokio::sync::watch::Sender<bool>,
    /// The connections held, at most [`Options::max_connections`].
    connections: Arc<connections::Connections>,
    /// The hosts the MCP endpoint and the board answer to beyond the address's own names.
    hosts: routes::Hosts,
}

/// The address of this server a connection came in on (its local end): the names it
/// answers to follow from it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Local(pub SocketAddr);

impl Server {
    pub fn new(database: Arc<dyn Database>, settings: Settings) -> Arc<Self> {
        Self::with_options(database, settings, Options::default())
    }

    pub fn with_options(
        database: Arc<dyn Database>,
        settings: Settings,
        options: Options,
    ) -> Arc<Self> {
        Arc::new(Self::build(database, settings, options, None))
    }

    /// A server of one project's store (the embedded `.baton/` of `baton board`) whose
    /// status and board are served without a key. Everything else still needs one. The
    /// caller binds it to loopback only: whoever reaches it reads the project's status.
    pub fn keyless(store: baton_store::Store, name: ProjectName, settings: Settings) -> Arc<Self> {
        let database = Arc::new(board::OneProject {
            name: name.clone(),
            store,
        });
        Arc::new(Self::build(
            database,
            settings,
            Options::default(),
            Some(name),
        ))
    }

    fn build(
        database: Arc<dyn Database>,
        settings: Settings,
        options: Options,
        keyless: Option<ProjectName>,
    ) -> Self {
        // A host that cannot be read answers to nothing; `baton serve` checks them first.
        let hosts = routes::Hosts::new(&options).unwrap_or_default();
        let connections = connections::Connections::new(options.max_connections);
        Self {
            database,
            settings,
            apps: tokio::sync::Mutex::new(HashMap::new()),
            failed_authentications: AtomicU64::new(0),
            failures: std::sync::Mutex::new(HashMap::new()),
            traffic: std::sync::Mutex::new(metrics::Traffic::default()),
            options,
            keyless,
            webhook_turn: std::sync::atomic::AtomicUsize::new(0),
            stopping: tokio::sync::watch::Sender::new(false),
            connections,
            hosts,
        }
    }

    /// Resolves once this server has begun to stop (at once if it already has).
    pub(crate) async fn stopped(&self) {
        let mut stopping = self.stopping.subscribe();
        // The sender lives as long as `self`, so this only ends when it is set.
        let _ = stopping.wait_for(|stopping| *stopping).await;
    }

    /// Project `name`'s use cases; not found when there is no such project. A project is
    /// opened on first use and closed when it has been idle [`IDLE_PROJECT`] or when
    /// [`Options::open_projects`] others were used since (the least recently used goes
    /// first); a request still holding it keeps it open until it ends.
    async fn app(&self, name: &ProjectName) -> baton_store::Result<App> {
        let now = Instant::now();
        let mut apps = self.apps.lock().await;
        apps.retain(|_, (_, used)| now.duration_since(*used) < IDLE_PROJECT);
        if let Some((app, used)) = apps.get_mut(name) {
            *used = now;
            return Ok(app.clone());
        }
        let store = self.database.project(name).await?;
        let app = App::new(store, self.settings.clone(), host::server());
        while apps.len() >= self.options.open_projects.max(1) {
            let oldest = apps
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(n, _)| n.clone());
            match oldest {
                Some(oldest) => apps.remove(&oldest),
                None => break,
            };
        }
        apps.insert(name.clone(), (app.clone(), now));
        Ok(app)
    }

    /// Counts a failed authentication from `address` with `token` (when one was sent), and
    /// answers it: 401, or 429 once the address or the key the token names has failed
    /// [`Options::failure_limit`] times in the window. Only failures are ever throttled.
    pub(crate) fn failed_authentication(
        &self,
        address: Option<IpAddr>,
        token: Option<&str>,
    ) -> error::ApiError {
        self.failed_authentications.fetch_add(1, Ordering::Relaxed);
        let sources: Vec<Source> = address
            .map(Source::Address)
            .into_iter()
            .chain(
                token
                    .and_then(baton_core::key::token_key_id)
                    .map(|id| Source::Key(id.chars().take(64).collect())),
            )
            .collect();
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let mut over = false;
        for source in sources {
            let entry = failures.entry(source).or_insert((now, 0));
            if now.duration_since(entry.0) >= FAILURE_WINDOW {
                *entry = (now, 0);
            }
            entry.1 = entry.1.saturating_add(1);
            over |= entry.1 > self.options.failure_limit;
        }
        // Forget sources whose window ended, so the table stays small.
        if failures.len() > 10_000 {
            failures.retain(|_, (began, _)| now.duration_since(*began) < FAILURE_WINDOW);
        }
        if over {
            error::ApiError::new(
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                "too_many_failures",
                "too many failed authentications from this address or for this key; wait a minute",
            )
        } else {
            baton_core::Refusal::Unauthenticated.into()
        }
    }

    /// Counts a send answered with an earlier message's id.
    fn duplicate(&self, project: &ProjectName) {
        let mut traffic = self.traffic.lock().unwrap_or_else(|e| e.into_inner());
        *traffic.duplicates.entry(project.to_string()).or_default() += 1;
    }

    /// Delivers webhooks for every project until dropped (abort it at shutdown), with
    /// `poster` as the HTTP client.
    pub async fn deliver_webhooks(self: Arc<Self>, poster: Arc<dyn baton_app::Poster>) {
        let tick = self.options.webhook_tick;
        webhooks::deliver(self, poster, tick).await;
    }

    /// Hands the requests sent to outside A2A agents' participants to their agents and
    /// brings their tasks back, until dropped (abort it at shutdown). `key` reads the
    /// environment variable an agent's key is in.
    pub async fn hand_to_outside_agents(
        self: Arc<Self>,
        poster: Arc<HttpPoster>,
        key: a2a::outbound::KeyOf,
    ) {
        let tick = self.options.webhook_tick;
        a2a::outbound::run(self, a2a::outbound::Outside { poster, key }, tick).await;
    }

    /// How many requests failed to authenticate since the server started.
    pub fn failed_authentications(&self) -> u64 {
        self.failed_authentications.load(Ordering::Relaxed)
    }
}

/// The routes, for a server or a test.
pub fn router(server: Arc<Server>) -> axum::Router {
    routes::router(server)
}

/// How often a failing accept is reported on stderr.
const ACCEPT_REPORT: Duration = Duration::from_secs(5);
/// The longest pause between accepts that keep failing.
const ACCEPT_PAUSE_MAX: Duration = Duration::from_secs(1);

/// Accepts that fail in a row (the process out of descriptors, say): the pause before the
/// next, doubling from 10 ms to [`ACCEPT_PAUSE_MAX`], and the reports made of them.
#[derive(Default)]
struct AcceptFailures {
    pause: Duration,
    reported: Option<Instant>,
    unreported: u64,
}

impl AcceptFailures {
    /// Counts a failure; reports it when the last report is older than [`ACCEPT_REPORT`];
    /// returns how long to wait before accepting again.
    fn failed(&mut self, e: &std::io::Error) -> Duration {
        self.pause = (self.pause * 2).clamp(Duration::from_millis(10), ACCEPT_PAUSE_MAX);
        self.unreported += 1;
        if self.reported.is_none_or(|at| at.elapsed() >= ACCEPT_REPORT) {
            eprintln!(
                "baton serve: accept failed {} time(s) since the last report: {e}; retrying \
                 every {} ms",
                self.unreported,
                self.pause.as_millis()
            );
            self.reported = Some(Instant::now());
            self.unreported = 0;
        }
        self.pause
    }

    /// An accept succeeded: the next failure starts from the shortest pause.
    fn recovered(&mut self) {
        self.pause = Duration::ZERO;
    }
}

/// Serves `server` on `listener` until `shutdown` resolves, then stops accepting and lets
/// the requests in flight finish (at most [`DRAIN`]): a write that began is committed and
/// answered, and a long poll answers at once that the server is stopping (503, retryable)
/// rather than hold the stop until its timeout. A client that does not send its headers
/// within [`HEADER_TIMEOUT`] is cut off.
pub async fn serve(
    listener: TcpListener,
    server: Arc<Server>,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let router = router(Arc::clone(&server));
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    tokio::pin!(shutdown);
    let mut failing = AcceptFailures::default();
    loop {
        let (stream, peer): (_, SocketAddr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => {
                    failing.recovered();
                    pair
                }
                // A failed accept (out of descriptors, a reset) is not the server's end:
                // it waits a little longer each time, so a lack of descriptors does not
                // spin, and says so once per interval.
                Err(e) => {
                    let pause = failing.failed(&e);
                    tokio::select! {
                        () = tokio::time::sleep(pause) => continue,
                        () = &mut shutdown => break,
                    }
                }
            },
            () = &mut shutdown => break,
        };
        let local = stream.local_addr().ok().map(Local);
        // Past the cap, another connection is closed (`connections.rs`).
        let admitted = server.connections.admit();
        let service = hyper::service::service_fn({
            let router = router.clone();
            let keyed = admitted.keyed.clone();
            let busy = admitted.busy.clone();
            move |request: hyper::Request<hyper::body::Incoming>| {
                let in_flight = busy.start();
                let mut request = request.map(axum::body::Body::new);
                request.extensions_mut().insert(ConnectInfo(peer));
                request.extensions_mut().insert(keyed.clone());
                if let Some(local) = local {
                    request.extensions_mut().insert(local);
                }
                let answered = router.clone().oneshot(request);
                async move {
                    let response = answered.await?;
                    Ok::<_, std::convert::Infallible>(response.map(|body| {
                        axum::body::Body::new(connections::Counted {
                            body,
                            _in_flight: in_flight,
                        })
                    }))
                }
            }
        });
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let connections::Admitted { shed, place, .. } = admitted;
            tokio::select! {
                _ = connection => {}
                // Dropping the connection closes it.
                _ = shed => {}
            }
            drop(place);
        });
    }
    drop(listener);
    server.stopping.send_replace(true);
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        eprintln!(
            "baton serve: requests still in flight after {}s; stopping anyway",
            DRAIN.as_secs()
        );
    }
    Ok(())
}
