//! Webhook delivery: a loop beside the HTTP listener that runs delivery rounds
//! ([`baton_app::App::deliver_webhooks`]) over every project, and the HTTP client that
//! POSTs (ureq, on a blocking thread, bounded in time). Servers sharing a database share
//! the work through the store's claims.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use baton_app::Poster;
use baton_core::ProjectName;

use crate::Server;

/// How long one POST may take, connection to last byte.
pub const POST_TIMEOUT: Duration = Duration::from_secs(10);
/// How many webhooks one round serves per project before the next project's turn.
const PER_ROUND: usize = 16;

/// POSTs with ureq: plain HTTP and HTTPS (rustls, Mozilla's roots built in), no redirects
/// followed, at most [`POST_TIMEOUT`].
pub struct HttpPoster {
    agent: ureq::Agent,
}

impl Default for HttpPoster {
    /// A poster to public addresses only.
    fn default() -> Self {
        Self::new(false)
    }
}

impl HttpPoster {
    /// A poster; with `private`, to any address (a server for local testing). Without it,
    /// the addresses a URL's host resolves to are checked by the resolver the connection
    /// itself uses, so a name cannot resolve outward for a check and inward for the post.
    pub fn new(private: bool) -> Self {
        Self::reaching(private, "--allow-private-webhooks")
    }

    /// The poster outside A2A agents are called with: [`HttpPoster::new`], whose refusals
    /// name the agents' own switch.
    pub fn for_agents(private: bool) -> Self {
        Self::reaching(private, "--allow-private-agents")
    }

    fn reaching(private: bool, switch: &'static str) -> Self {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(POST_TIMEOUT))
            .http_status_as_error(false)
            .max_redirects(0)
            .user_agent(concat!("baton/", env!("CARGO_PKG_VERSION")))
            .build();
        let connector = ureq::unversioned::transport::DefaultConnector::new();
        let agent = if private {
            ureq::Agent::with_parts(
                config,
                connector,
                ureq::unversioned::resolver::DefaultResolver::default(),
            )
        } else {
            ureq::Agent::with_parts(
                config,
                connector,
                PublicOnly {
                    inner: Default::default(),
                    switch,
                },
            )
        };
        Self { agent }
    }
}

/// Why an exchange brought no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unanswered {
    /// Nothing reached the other end: its name did not resolve, its address was refused
    /// by policy, or no connection was made.
    Unsent(String),
    /// The request may have reached it (a timeout, a connection cut while waiting).
    Lost(String),
}

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unsent(why) | Self::Lost(why) => f.write_str(why),
        }
    }
}

impl HttpPoster {
    /// POSTs `body` with `headers` to `url`, waiting at most `timeout` for the whole
    /// exchange: the answer's status and body (at most `max` bytes), or why none came. An
    /// outside A2A agent is called through this.
    pub async fn exchange(
        &self,
        url: &str,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
        max: u64,
        timeout: Duration,
    ) -> Result<(u16, Vec<u8>), Unanswered> {
        self.posting(url, headers, body, timeout, move |mut response| {
            let status = response.status().as_u16();
            let bytes = response
                .body_mut()
                .with_config()
                .limit(max)
                .read_to_vec()
                .map_err(|e| Unanswered::Lost(e.to_string()))?;
            Ok((status, bytes))
        })
        .await
    }

    /// POSTs on a blocking thread, bounded by `timeout`; `read` takes what is wanted of
    /// the answer there. A send that failed says whether it could have reached the other
    /// end.
    async fn posting<T: Send + 'static>(
        &self,
        url: &str,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
        timeout: Duration,
        read: impl FnOnce(ureq::http::Response<ureq::Body>) -> Result<T, Unanswered> + Send + 'static,
    ) -> Result<T, Unanswered> {
        let agent = self.agent.clone();
        let url = url.to_owned();
        let posted = tokio::task::spawn_blocking(move || {
            let mut request = agent
                .post(&url)
                .config()
                .timeout_global(Some(timeout))
                .build();
            for (name, value) in headers {
                request = request.header(name, value);
            }
            read(request.send(&body[..]).map_err(|e| {
                let unsent = matches!(
                    e,
                    ureq::Error::HostNotFound
                        | ureq::Error::ConnectionFailed
                        | ureq::Error::BadUri(_)
                ) || matches!(&e, ureq::Error::Io(io) if matches!(
                    io.kind(),
                    std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::PermissionDenied
                ));
                if unsent {
                    Unanswered::Unsent(e.to_string())
                } else {
                    Unanswered::Lost(e.to_string())
                }
            })?)
        })
        .await;
        posted.unwrap_or_else(|e| Err(Unanswered::Lost(format!("the posting thread failed: {e}"))))
    }
}

/// A resolver that refuses a host any of whose addresses is not public
/// (`webhook::private_address`): the refusal says "refused by policy" and the address,
/// never what the target would have answered, and names the switch that allows it.
#[derive(Debug)]
struct PublicOnly {
    inner: ureq::unversioned::resolver::DefaultResolver,
    switch: &'static str,
}

impl ureq::unversioned::resolver::Resolver for PublicOnly {
    fn resolve(
        &self,
        uri: &axum::http::Uri,
        config: &ureq::config::Config,
        timeout: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        let resolved = self.inner.resolve(uri, config, timeout)?;
        if let Some((address, kind)) = resolved
            .iter()
            .find_map(|a| baton_core::webhook::private_address(a.ip()).map(|k| (a.ip(), k)))
        {
            return Err(ureq::Error::Io(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "refused by policy: {} resolves to {address}, a {kind} address (only \
                     public addresses are reached; `baton serve {}` allows others)",
                    uri.host().unwrap_or("the host"),
                    self.switch
                ),
            )));
        }
        Ok(resolved)
    }
}

#[async_trait]
impl Poster for HttpPoster {
    async fn post(
        &self,
        url: &str,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
    ) -> Result<u16, String> {
        self.posting(url, headers, body, POST_TIMEOUT, |response| {
            Ok(response.status().as_u16())
        })
        .await
        .map_err(|e| e.to_string())
    }
}

/// Runs delivery rounds over every project every `tick` until dropped (the caller aborts
/// it at shutdown; a delivery cut short is retried when its lease ends).
pub async fn deliver(server: Arc<Server>, poster: Arc<dyn Poster>, tick: Duration) {
    // A round that keeps failing the same way is reported once a minute, with how many
    // rounds failed since the last report.
    let mut reported: Option<(String, std::time::Instant, u64)> = None;
    loop {
        match round(&server, poster.as_ref()).await {
            Ok(()) => reported = None,
            Err(e) => {
                let said = e.to_string();
                match &mut reported {
                    Some((last, at, since))
                        if *last == said && at.elapsed() < Duration::from_secs(60) =>
                    {
                        *since += 1;
                    }
                    _ => {
                        let since = reported.as_ref().map_or(0, |r| r.2);
                        let more = if since > 0 {
                            format!(" (and {since} failed rounds since the last report)")
                        } else {
                            String::new()
                        };
                        eprintln!("baton serve: webhook delivery: {said}{more}");
                        reported = Some((said, std::time::Instant::now(), 0));
                    }
                }
            }
        }
        tokio::time::sleep(tick).await;
    }
}

async fn round(server: &Server, poster: &dyn Poster) -> Result<(), String> {
    let all = server
        .database
        .projects()
        .await
        .map_err(|e| e.to_string())?;
    // A round takes the next projects in turn, no more than half of those a server keeps
    // open, so rounds over many projects do not keep reopening them all.
    let turn = (server.options.open_projects / 2).max(1);
    let projects: Vec<ProjectName> = if all.len() <= turn {
        all
    } else {
        let start = server
            .webhook_turn
            .fetch_add(turn, std::sync::atomic::Ordering::Relaxed)
            % all.len();
        all.iter().cycle().skip(start).take(turn).cloned().collect()
    };
    // Those projects at once: one that cannot be opened (a damaged or foreign file in the
    // store's directory) or whose endpoints are slow holds up no other.
    let rounds = projects.iter().map(|project| async move {
        let app = server.app(project).await?;
        app.deliver_webhooks(project, poster, PER_ROUND).await
    });
    let failed: Vec<String> = futures::future::join_all(rounds)
        .await
        .into_iter()
        .zip(&projects)
        .filter_map(|(done, project)| done.err().map(|e| format!("project {project}: {e}")))
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("skipped {}", failed.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::HttpPoster;
    use baton_app::Poster;

    #[tokio::test]
    async fn a_webhook_is_told_only_at_a_public_address_unless_allowed() {
        // `localhost` resolves to loopback from /etc/hosts on any machine; nothing listens
        // on port 9, so an allowed post fails to connect rather than being refused.
        let public = HttpPoster::default();
        for url in [
            "http://localhost:9/hook",
            "http://[::1]:9/hook",
            "http://127.0.0.1:9/",
            // The special-purpose IPv6 forms are refused when connecting too.
            "http://[::127.0.0.1]:9/",
            "http://[64:ff9b::7f00:1]:9/",
            "http://[2002:7f00:1::]:9/",
            "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]:9/",
            "http://[fd00::1]:9/",
        ] {
            let refused = public.post(url, vec![], vec![]).await.unwrap_err();
            assert!(refused.contains("refused by policy"), "{url}: {refused}");
        }
        let any = HttpPoster::new(true);
        let failed = any
            .post("http://127.0.0.1:9/hook", vec![], vec![])
            .await
            .unwrap_err();
        assert!(!failed.contains("refused by policy"), "{failed}");
        let agents = HttpPoster::for_agents(false);
        let refused = agents
            .exchange(
                "http://[64:ff9b::7f00:1]:9/",
                vec![],
                vec![],
                16,
                std::time::Duration::from_secs(5),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, super::Unanswered::Unsent(why)
                if why.contains("refused by policy") && why.contains("--allow-private-agents")),
            "{refused:?}"
        );
    }
}
