//! Webhooks: a participant's URL told of what concerns it — event metadata
//! only, never a payload — at least once, signed, retried with backoff.
//!
//! The log is the outbox: a webhook keeps a cursor into it, and what concerns its
//! participant after the cursor is pending. Configuring one is an event
//! (`webhook.changed`); delivering is the server's bookkeeping beside the log. This
//! module holds the rules: which URLs are accepted, how a body is signed, how long to
//! wait after a failure, and what a notification may carry.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use crate::names::Passname;
use crate::refusal::Refusal;
use crate::time::Millis;

/// Longest URL accepted, in bytes.
pub const MAX_URL_BYTES: usize = 2048;
/// Longest wait between attempts after repeated failures.
pub const MAX_BACKOFF_MS: Millis = 10 * 60 * 1000;
/// Header carrying `sha256=HEX`, the HMAC-SHA256 of `TIMESTAMP.BODY` under the secret.
pub const SIGNATURE_HEADER: &str = "x-baton-signature";
/// Header carrying the signing time (Unix seconds), part of what is signed.
pub const TIMESTAMP_HEADER: &str = "x-baton-timestamp";

/// A change to a participant's webhook, as recorded in the log (`webhook.changed`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum WebhookChange {
    Set {
        participant: Passname,
        url: String,
        /// The signing secret (hex). The log holds the payloads too: the secret is no
        /// more exposed than what it protects.
        secret: String,
    },
    Removed {
        participant: Passname,
    },
}

impl WebhookChange {
    pub fn participant(&self) -> &Passname {
        match self {
            Self::Set { participant, .. } | Self::Removed { participant } => participant,
        }
    }
}

/// A participant's webhook: its configuration (from the log) and where its delivery
/// stands (the server's bookkeeping).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    pub participant: Passname,
    pub url: String,
    pub secret: String,
    /// The event that set it.
    pub set_seq: i64,
    /// Everything up to this seq was told (or did not concern it).
    pub cursor: i64,
    /// Failed attempts in a row.
    pub failures: u32,
    /// Not before this time is it tried again.
    pub next_at: Millis,
    pub last_error: Option<String>,
    pub delivered_at: Option<Millis>,
}

/// A webhook URL: `http` or `https` with a host, no credentials, at most
/// [`MAX_URL_BYTES`].
pub fn check_url(url: &str) -> Result<String, Refusal> {
    let url = url.trim();
    let refuse = |why: &str| Refusal::WebhookUrl {
        url: url.chars().take(200).collect(),
        why: why.to_owned(),
    };
    if url.len() > MAX_URL_BYTES {
        return Err(refuse("it is longer than 2048 bytes"));
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(refuse("it has no scheme: use http:// or https://"));
    };
    if !matches!(scheme, "http" | "https") {
        return Err(refuse("use http:// or https://"));
    }
    let authority = authority(rest);
    if authority.contains('@') {
        return Err(refuse("credentials in the URL would be stored and shown"));
    }
    let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
    if host.is_empty() || url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(refuse(
            "it has no host, or holds spaces or control characters",
        ));
    }
    Ok(url.to_owned())
}

/// The authority of what follows a URL's `scheme://`: up to its path, query or fragment.
fn authority(rest: &str) -> &str {
    rest.split(['/', '?', '#']).next().unwrap_or("")
}

/// The endpoint a webhook URL reaches: its scheme and authority, lowercased
/// (`https://h:8443`). Webhooks sharing one are told one after the other.
pub fn endpoint(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    format!("{scheme}://{}", authority(rest).to_ascii_lowercase())
}

/// The host a webhook URL names (as written: `[v6]` keeps its brackets), lowercased.
fn host_of(url: &str) -> String {
    let authority = authority(url.split_once("://").map_or(url, |(_, rest)| rest));
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6
            .split(']')
            .next()
            .map(|h| format!("[{h}]"))
            .unwrap_or_default(),
        None => authority.split(':').next().unwrap_or("").to_owned(),
    };
    host.to_ascii_lowercase()
}

/// Why `ip` is not a public destination, when it is not: loopback, private, link-local
/// (the cloud metadata address among them), unspecified, shared, reserved, broadcast or
/// multicast; and, for IPv6, every form that carries or reaches an IPv4 address or stays
/// on a local network — IPv4-compatible (`::a.b.c.d`) and IPv4-mapped, NAT64
/// (`64:ff9b::/96`, `64:ff9b:1::/48`), 6to4 (`2002::/16`), Teredo (`2001::/32`), unique
/// local (`fc00::/7`), link-local (`fe80::/10`), site-local (`fec0::/10`), discard-only
/// (`100::/64`) and documentation (`2001:db8::/32`) — whatever IPv4 address it embeds, since
/// a gateway on the way may take it to any.
pub fn private_address(ip: IpAddr) -> Option<&'static str> {
    let v4 = |v4: Ipv4Addr| {
        let [a, b, c, _] = v4.octets();
        if v4.is_loopback() {
            Some("loopback")
        } else if v4.is_private() {
            Some("private")
        } else if v4.is_link_local() {
            Some("link-local")
        } else if a == 0 {
            Some("unspecified")
        } else if a == 100 && (64..128).contains(&b) {
            Some("shared (carrier-grade NAT)")
        } else if v4.is_broadcast() {
            Some("broadcast")
        } else if v4.is_multicast() {
            Some("multicast")
        } else if a >= 240 || (a == 192 && b == 0 && c == 0) || (a == 198 && (18..20).contains(&b))
        {
            Some("reserved")
        } else {
            None
        }
    };
    match ip {
        IpAddr::V4(a) => v4(a),
        IpAddr::V6(a) => {
            let s = a.segments();
            if a.is_loopback() {
                Some("loopback")
            } else if a.is_unspecified() {
                Some("unspecified")
            } else if a.to_ipv4_mapped().is_some() {
                Some("IPv4-mapped")
            } else if s[..6] == [0; 6] {
                Some("IPv4-compatible")
            } else if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] || s[..3] == [0x64, 0xff9b, 1] {
                Some("NAT64")
            } else if s[0] == 0x2002 {
                Some("6to4")
            } else if s[..2] == [0x2001, 0] {
                Some("Teredo")
            } else if s[..2] == [0x2001, 0xdb8] {
                Some("documentation")
            } else if s[..4] == [0x100, 0, 0, 0] {
                Some("discard-only")
            } else if s[0] & 0xfe00 == 0xfc00 {
                Some("private (unique local)")
            } else if s[0] & 0xffc0 == 0xfe80 {
                Some("link-local")
            } else if s[0] & 0xffc0 == 0xfec0 {
                Some("site-local")
            } else if a.is_multicast() {
                Some("multicast")
            } else {
                None
            }
        }
    }
}

/// What a URL checked by [`check_destination`] is for: the words of its refusal, and the
/// operator's switch that lets a server for local testing reach other addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    Webhook,
    OutsideAgent,
}

/// Refuses a webhook URL (already well formed, [`check_url`]) whose host is an address
/// that is not public, a loopback name, or a numeric address written other than as a
/// dotted quad (`2130706433`, `0x7f.1`, `127.1`: each may name any address) — unless
/// `private` allows every destination (a server run for local testing). A DNS name is
/// taken here and its addresses are checked when it is told.
pub fn check_destination(url: &str, private: bool) -> Result<(), Refusal> {
    check_destination_for(Destination::Webhook, url, private)
}

/// [`check_destination`] for what `url` is for: a webhook's refusal is
/// [`Refusal::WebhookUrl`], an outside agent's [`Refusal::AgentUrl`], each naming its
/// switch.
pub fn check_destination_for(
    destination: Destination,
    url: &str,
    private: bool,
) -> Result<(), Refusal> {
    if private {
        return Ok(());
    }
    let host = host_of(url.trim());
    let url_said: String = url.trim().chars().take(200).collect();
    let refuse = |why: String| match destination {
        Destination::Webhook => Refusal::WebhookUrl {
            url: url_said.clone(),
            why,
        },
        Destination::OutsideAgent => Refusal::AgentUrl {
            url: url_said.clone(),
            why,
        },
    };
    let public = match destination {
        Destination::Webhook => {
            " (webhooks go to public addresses; `baton serve --allow-private-webhooks` \
             lets a server for local testing reach others)"
        }
        Destination::OutsideAgent => {
            " (outside agents are reached at public addresses; `baton serve \
             --allow-private-agents` lets a server for local testing reach others)"
        }
    };
    if host == "localhost" || host.ends_with(".localhost") {
        return Err(refuse(format!("{host} is a loopback name{public}")));
    }
    let literal = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .and_then(|h| h.parse::<Ipv6Addr>().ok().map(IpAddr::V6))
        .or_else(|| host.parse::<Ipv4Addr>().ok().map(IpAddr::V4));
    if let Some(ip) = literal {
        return match private_address(ip) {
            Some(kind) => Err(refuse(format!("{ip} is a {kind} address{public}"))),
            None => Ok(()),
        };
    }
    let numeric = host.starts_with(|c: char| c.is_ascii_digit())
        && host
            .chars()
            .all(|c| c.is_ascii_hexdigit() || c == '.' || c == 'x');
    if numeric || host.starts_with('[') {
        return Err(refuse(format!(
            "{host} is a numeric address not written as a dotted quad or an IPv6 address, \
             which may name any address{public}"
        )));
    }
    Ok(())
}

/// Setting `url` (with a new `secret`) or removing (`None`) `participant`'s webhook, given
/// its current URL: the change to append, or `None` when there is nothing to change.
pub fn plan(
    current: Option<&str>,
    participant: &Passname,
    url: Option<&str>,
    secret: impl FnOnce() -> String,
) -> Result<Option<WebhookChange>, Refusal> {
    match url {
        Some(url) => Ok(Some(WebhookChange::Set {
            participant: participant.clone(),
            url: check_url(url)?,
            secret: secret(),
        })),
        None if current.is_some() => Ok(Some(WebhookChange::Removed {
            participant: participant.clone(),
        })),
        None => Ok(None),
    }
}

/// How long to wait before attempt `failures + 1`: one second doubled per failure, at most
/// [`MAX_BACKOFF_MS`].
pub fn backoff(failures: u32) -> Millis {
    let doubled = 1000i64.saturating_mul(1i64 << failures.min(20));
    doubled.min(MAX_BACKOFF_MS)
}

/// The signature header's value for `body` sent at `timestamp` (Unix seconds).
pub fn signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    use hmac::{KeyInit, Mac};
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// One event as a webhook tells it: what happened and between whom, never the content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Notice {
    pub seq: i64,
    pub id: String,
    pub kind: String,
    /// The message, order or other record the event is about.
    pub subject: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub to: Vec<String>,
    pub at: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_hmac_sha256_of_the_timestamp_dot_body() {
        // As Python's `hmac.new(b"key", b'1700000000.{"a":1}', hashlib.sha256)` computes it.
        assert_eq!(
            signature("key", 1_700_000_000, br#"{"a":1}"#),
            "sha256=a438e398bfafc57e4396bb7fc2304422f0f768e965d073ca313cb52e22e6ad03"
        );
        assert_ne!(
            signature("key", 1_700_000_001, br#"{"a":1}"#),
            signature("key", 1_700_000_000, br#"{"a":1}"#),
            "the time is signed"
        );
    }

    #[test]
    fn backoff_doubles_from_a_second_to_ten_minutes() {
        let waits: Vec<Millis> = [0, 1, 2, 9, 10, 40].into_iter().map(backoff).collect();
        assert_eq!(waits, [1000, 2000, 4000, 512_000, 600_000, 600_000]);
    }

    #[test]
    fn a_webhook_goes_to_a_public_address_unless_private_ones_are_allowed() {
        for bad in [
            "http://127.0.0.1:5432/",
            "http://169.254.169.254/latest/meta-data",
            "http://10.0.0.1/",
            "http://192.168.1.2/",
            "http://172.16.0.1/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
            "http://0.0.0.0/",
            "http://100.64.0.1/",
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0x7f.1/",
            "http://127.1/",
            "http://017700000001/",
            "http://localhost:9000/",
            "http://api.localhost/",
            "https://LOCALHOST/",
            // Every special-purpose IPv6 form, whatever IPv4 address it carries.
            "http://[::127.0.0.1]/",
            "http://[::8.8.8.8]/",
            "http://[::ffff:8.8.8.8]/",
            "http://[64:ff9b::7f00:1]/",
            "http://[64:ff9b::808:808]/",
            "http://[64:ff9b:1::1]/",
            "http://[2002:7f00:1::]/",
            "http://[2002:808:808::1]/",
            "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
            "http://[fc00::1]/",
            "http://[fe80::1%25eth0]/",
            "http://[fec0::1]/",
            "http://[2001:db8::1]/",
            "http://[100::1]/",
            "http://240.0.0.1/",
            "http://198.18.0.1/",
        ] {
            let refused = check_destination(bad, false);
            assert!(
                matches!(refused, Err(Refusal::WebhookUrl { .. })),
                "{bad}: {refused:?}"
            );
            assert_eq!(check_destination(bad, true), Ok(()), "{bad}");
        }
        for good in [
            "https://hooks.example.com/x",
            "http://93.184.216.34/hook",
            "https://[2606:2800:220:1::248]/h",
            "https://1password.com/",
            "https://123.example.com:8443/a",
        ] {
            assert_eq!(check_destination(good, false), Ok(()), "{good}");
        }
        assert_eq!(
            private_address("169.254.169.254".parse().unwrap()),
            Some("link-local")
        );
    }

    #[test]
    fn an_outside_agent_is_refused_at_the_addresses_a_webhook_is() {
        for bad in [
            "http://127.0.0.1:9/",
            "http://169.254.169.254/",
            "http://[64:ff9b::a9fe:a9fe]/",
            "http://[::ffff:10.0.0.1]/",
        ] {
            let refused = check_destination_for(Destination::OutsideAgent, bad, false);
            assert!(
                matches!(&refused, Err(Refusal::AgentUrl { why, .. }) if why.contains("--allow-private-agents")),
                "{bad}: {refused:?}"
            );
            assert_eq!(
                check_destination_for(Destination::OutsideAgent, bad, true),
                Ok(())
            );
        }
        assert_eq!(
            check_destination_for(
                Destination::OutsideAgent,
                "https://agent.example.com/a2a",
                false
            ),
            Ok(())
        );
    }

    #[test]
    fn only_plain_http_urls_with_a_host_are_accepted() {
        for ok in [
            "http://127.0.0.1:9000/hook",
            "https://hooks.example.com/x?y=1",
        ] {
            assert_eq!(check_url(ok).as_deref(), Ok(ok));
        }
        let long = format!("https://e.com/{}", "a".repeat(MAX_URL_BYTES));
        for bad in [
            "ftp://e.com/",
            "e.com/hook",
            "https://user:pw@e.com/",
            "https:///nohost",
            "https://e.com/a b",
            "https://e.com/\u{7}",
            long.as_str(),
        ] {
            assert!(
                matches!(check_url(bad), Err(Refusal::WebhookUrl { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn removing_a_webhook_that_is_not_there_changes_nothing() {
        let who = Passname::new("impl-1").unwrap();
        assert_eq!(plan(None, &who, None, String::new), Ok(None));
        assert!(matches!(
            plan(Some("http://h/"), &who, None, String::new),
            Ok(Some(WebhookChange::Removed { .. }))
        ));
        assert!(matches!(
            plan(None, &who, Some("http://h/"), || "s".into()),
            Ok(Some(WebhookChange::Set { secret, .. })) if secret == "s"
        ));
    }
}
