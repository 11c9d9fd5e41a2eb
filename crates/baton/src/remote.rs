//! The use cases over a `baton serve`: each operation of [`Cases`] is the server's request
//! for it, and its answer is the same `baton/*@1` document the local store gives. The
//! project is `BATON_URL` (`http://HOST:PORT/v1/projects/NAME`) and the key `BATON_KEY`:
//! the key says who acts, so no actor is ever sent.
//!
//! The token goes in the `Authorization` header and nowhere else: never in a URL, an
//! error, a document or a `Debug` rendering.

use std::sync::OnceLock;
use std::time::Duration;

use async_trait::async_trait;
use baton_app::Settings;
use baton_app::doc::Approved;
use baton_core::{Passname, Refusal, RefusalKind};
use baton_store::StoreError;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use url::Url;

use crate::cases::{Answer, Cases};
use crate::error::{CommandError, CommandResult, ErrorKind};
use baton_app::ops::{Me, Method, Nothing, Operation};

/// A key's token: shown to no one.
struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(…)")
    }
}

/// A project on a server, and the key that acts in it.
#[derive(Debug)]
pub struct Remote {
    project: Url,
    token: Token,
    agent: ureq::Agent,
    me: OnceLock<Passname>,
}

impl Remote {
    /// The project at `url` with the key `token`; a URL that is not a project's is a usage
    /// error (nothing is asked of the server yet).
    pub fn new(url: &str, token: Option<String>) -> CommandResult<Self> {
        let form = "use http://HOST:PORT/v1/projects/NAME (the project's URL on a `baton serve`)";
        let bad = |why: &str| CommandError::usage(format!("BATON_URL {url:?} {why}: {form}"));
        let mut project = Url::parse(url).map_err(|e| bad(&format!("is not a URL ({e})")))?;
        if !matches!(project.scheme(), "http" | "https") || project.host().is_none() {
            return Err(bad("is not an http(s) URL with a host"));
        }
        if !project.username().is_empty() || project.password().is_some() {
            return Err(bad("carries credentials; the key goes in BATON_KEY"));
        }
        if project.query().is_some() || project.fragment().is_some() {
            return Err(bad("has a query or a fragment"));
        }
        let segments: Vec<String> = project
            .path_segments()
            .map(|s| s.filter(|p| !p.is_empty()).map(str::to_owned).collect())
            .unwrap_or_default();
        if segments.len() != 3 || segments[0] != "v1" || segments[1] != "projects" {
            return Err(bad("does not name a project"));
        }
        project.set_path(&format!("/v1/projects/{}", segments[2]));
        let token = match token.map(|t| t.trim().to_owned()) {
            Some(t) if !t.is_empty() => t,
            _ => {
                return Err(CommandError::usage(
                    "BATON_URL is set but BATON_KEY is not: set BATON_KEY to a key's token \
                     (`baton key issue NAME --scope write` where the database is), or unset \
                     BATON_URL to use the project in this directory",
                ));
            }
        };
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(10)))
            .build()
            .into();
        Ok(Self {
            project,
            token: Token(token),
            agent,
            me: OnceLock::new(),
        })
    }

    /// The URL of `segments` under the project, each segment encoded.
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.project.clone();
        url.path_segments_mut()
            .expect("an http URL has a path")
            .extend(segments);
        url
    }

    fn get<T: DeserializeOwned>(&self, segments: &[&str], query: &[(&str, String)]) -> Answer<T> {
        let url = self.address(segments, query);
        self.answer(
            self.agent
                .get(url.as_str())
                .header("Authorization", &self.bearer())
                .call(),
        )
    }

    fn post<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        query: &[(&str, String)],
        body: Value,
    ) -> Answer<T> {
        let url = self.address(segments, query);
        let request = self
            .agent
            .post(url.as_str())
            .header("Authorization", &self.bearer());
        self.answer(request.send_json(body))
    }

    /// The operation's URL with its query.
    fn address(&self, segments: &[&str], query: &[(&str, String)]) -> Url {
        let mut url = self.url(segments);
        if !query.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        url
    }

    fn bearer(&self) -> String {
        format!("Bearer {}", self.token.0)
    }

    /// The document of a 2xx answer, or the server's error in the command line's kinds.
    fn answer<T: DeserializeOwned>(
        &self,
        response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Answer<T> {
        let mut response = response.map_err(|e| {
            CommandError::failed(format!(
                "cannot reach the server at {}: {e} (is `baton serve` running there? BATON_URL)",
                self.project
            ))
        })?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().map_err(|e| {
            CommandError::failed(format!("the server's answer could not be read: {e}"))
        })?;
        if (200..300).contains(&status) {
            return serde_json::from_str(&text).map_err(|e| {
                CommandError::failed(format!(
                    "the server answered a document this baton cannot read ({e}); is it the same \
                     version?"
                ))
                .into()
            });
        }
        Err(server_error(status, &text).into())
    }

    /// The participant the key acts as, asked once.
    async fn caller(&self) -> Answer<Passname> {
        if let Some(me) = self.me.get() {
            return Ok(me.clone());
        }
        let caller = crate::cases::call::<Me>(self, Nothing {}).await?;
        Ok(self.me.get_or_init(|| caller.participant).clone())
    }
}

/// A server's error answer in the command line's terms: `{"error": {code, message, hint}}`,
/// whose `code` alone decides the kind (and so the exit code), as a refusal's kind does
/// locally.
pub fn server_error(status: u16, text: &str) -> CommandError {
    let body: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let error = &body["error"];
    let code = error["code"].as_str().unwrap_or_default();
    // A refusal the server sent as data is worded as this command line words it, with
    // its flags and commands; its kind decides the exit code, as locally.
    if code != "unauthenticated"
        && let Ok(refusal) = Refusal::deserialize(&error["refusal"])
    {
        return StoreError::Refused(refusal).into();
    }
    let mut message = error["message"]
        .as_str()
        .map_or_else(|| format!("the server answered {status}"), str::to_owned);
    if let Some(hint) = error["hint"].as_str() {
        message.push_str(&format!(" ({hint})"));
    }
    let refusal = |kind: RefusalKind| ErrorKind::from(kind);
    // As locally: a refusal that running again may change (an order moved first) is
    // contention, whatever its kind.
    let moved = error["retryable"].as_bool().unwrap_or(false);
    let (kind, retryable) = match code {
        "conflict" if moved => (ErrorKind::Contention, true),
        "refused" | "bad_request" | "too_large" => (refusal(RefusalKind::Invalid), false),
        "not_found" => (refusal(RefusalKind::NotFound), false),
        "forbidden" => (refusal(RefusalKind::Forbidden), false),
        "conflict" => (refusal(RefusalKind::Conflict), false),
        "unauthenticated" => (refusal(RefusalKind::Unauthenticated), false),
        "busy" | "reconnecting" | "stopping" | "timeout" | "too_many_failures" => {
            (ErrorKind::Contention, true)
        }
        _ => (ErrorKind::Failed, false),
    };
    if code == "unauthenticated" {
        message = "the server does not accept BATON_KEY for this project (a key unknown, \
                   revoked or expired, or of another project; or no such project)"
            .to_owned();
    }
    CommandError {
        retryable,
        ..CommandError::new(kind, message)
    }
}

#[async_trait]
impl Cases for Remote {
    async fn me(&self) -> Answer<Option<Passname>> {
        self.caller().await.map(Some)
    }

    fn payload_cap(&self) -> usize {
        // The server holds the cap it enforces; this one only bounds what is read here.
        Settings::default().payload_cap
    }

    async fn dispatch(&self, op: &'static Operation, input: Value) -> Answer<Value> {
        let route = op
            .typed
            .unwrap_or_else(|| panic!("operation {:?} has no route", op.name))
            .route;
        let Value::Object(mut body) = input else {
            panic!("{}: an input is a JSON object", op.name);
        };
        // The path's fields are its segments; the rest is the body (or the query).
        let segments = route
            .fill(&mut body)
            .unwrap_or_else(|| panic!("{}: a path field is missing from the input", op.name));
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        match route.method {
            Method::Post => self.post(&segments, &[], Value::Object(body)),
            Method::Get => {
                // A query's input is flat: each field a string, a number or a flag.
                let query: Vec<(&str, String)> = body
                    .iter()
                    .filter_map(|(name, value)| match value {
                        Value::Null => None,
                        Value::String(s) => Some((name.as_str(), s.clone())),
                        other => Some((name.as_str(), other.to_string())),
                    })
                    .collect();
                self.get(&segments, &query)
            }
        }
    }

    async fn approve(
        &self,
        me: &Passname,
        id: &str,
        expect_seq: Option<i64>,
        chosen: Option<&[String]>,
    ) -> Answer<Approved> {
        if chosen.is_some() {
            return Err(CommandError::usage(
                "--effects runs held effects, which only happens where the upstream server can \
                 be started: unset BATON_URL and approve where the project is",
            )
            .into());
        }
        // The server starts no upstream: it refuses an order holding effects, so what it
        // approved ran none.
        let _ = me;
        let mut input = baton_app::ops::OrderInput::new(
            baton_app::ops::OrderVerb::Approve,
            Some(id.to_owned()),
        );
        input.expect_seq = expect_seq;
        let stepped = crate::cases::call::<baton_app::ops::OrderTake>(self, input).await?;
        Ok(Approved {
            order: stepped.order,
            events: stepped.events,
            effects: Vec::new(),
            stopped_at: None,
        })
    }
}
