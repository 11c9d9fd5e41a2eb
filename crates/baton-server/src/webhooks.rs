//! Webhook delivery: a loop beside the HTTP listener that runs delivery rounds
//! ([`baton_app::App::deliver_webhooks`]) over every project, and the HTTP client that
//! POSTs (ureq, on a blocking thread, bounded in time). Servers sharing a database share
//! the work through the store's claims.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use baton_app::Poster;

use crate::Server;

/// How long one POST may take, connection to last byte.
pub const POST_TIMEOUT: Duration = Duration::from_secs(10);
/// How many webhooks one round serves per project before the next project's turn.
const PER_ROUND: usize = 16;

/// POSTs with ureq: plain HTTP and HTTPS (rustls, Mozilla's roots built in), no redirects
/// followed, at most [`POST_TIMEOUT`].
pub struct HttpPoster {
    agent: ureq::Agent,
    /// Whether a webhook may reach an address that is not public.
    private: bool,
}

impl Default for HttpPoster {
    /// A poster to public addresses only.
    fn default() -> Self {
        Self::new(false)
    }
}

impl HttpPoster {
    /// A poster; with `private`, to any address (a server for local testing).
    pub fn new(private: bool) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(POST_TIMEOUT))
            .http_status_as_error(false)
            .max_redirects(0)
            .user_agent(concat!("baton/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Self { agent, private }
    }
}

/// Refuses to tell `url` when its host resolves to an address that is not public: checked
/// when it is told, so a name that once pointed outside cannot be turned inward later.
fn public_only(url: &str) -> Result<(), String> {
    let uri: axum::http::Uri = url.parse().map_err(|e| format!("not a URL: {e}"))?;
    let host = uri.host().ok_or("no host")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    let addresses = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .map_err(|e| format!("{host} does not resolve: {e}"))?;
    for address in addresses {
        if let Some(kind) = baton_core::webhook::private_address(address.ip()) {
            return Err(format!(
                "refused: {host} resolves to {}, a {kind} address (webhooks go to public \
                 addresses; `baton serve --allow-private-webhooks` allows others)",
                address.ip()
            ));
        }
    }
    Ok(())
}

#[async_trait]
impl Poster for HttpPoster {
    async fn post(
        &self,
        url: &str,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
    ) -> Result<u16, String> {
        let agent = self.agent.clone();
        let url = url.to_owned();
        let private = self.private;
        let posted = tokio::task::spawn_blocking(move || {
            if !private {
                public_only(&url)?;
            }
            let mut request = agent.post(&url);
            for (name, value) in headers {
                request = request.header(name, value);
            }
            request
                .send(&body[..])
                .map(|response| response.status().as_u16())
                .map_err(|e| e.to_string())
        })
        .await;
        posted.unwrap_or_else(|e| Err(format!("the delivery thread failed: {e}")))
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

async fn round(server: &Server, poster: &dyn Poster) -> baton_store::Result<()> {
    for project in server.database.projects().await? {
        let app = server.app(&project).await?;
        app.deliver_webhooks(&project, poster, PER_ROUND).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::public_only;

    #[test]
    fn a_webhook_is_told_only_at_a_public_address_unless_allowed() {
        // `localhost` resolves to loopback from /etc/hosts on any machine.
        let refused = public_only("http://localhost:9/hook").unwrap_err();
        assert!(refused.contains("loopback"), "{refused}");
        let refused = public_only("http://[::1]:9/hook").unwrap_err();
        assert!(refused.contains("loopback"), "{refused}");
        assert_eq!(public_only("http://93.184.216.34/hook"), Ok(()));
    }
}
