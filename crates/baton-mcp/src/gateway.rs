//! The staged-effects gateway: an MCP server a worker's agent connects to in
//! place of an upstream MCP server, which it starts as a child and talks to as a client.
//! It lists the upstream's tools the order allows; each call is put to the use case
//! (`App::gateway_call`), which records it and says what to do — forward it (a read,
//! recorded as evidence), hold it (a staged write, answered with `pending:SERVER/TOOL#N`)
//! or refuse it (outside `tools`, or past the budget). [`Upstream`] is how approval later
//! runs the held calls through the same command.

use std::collections::HashMap;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use async_trait::async_trait;
use baton_app::{App, ToolRunner};
use baton_core::Passname;
use baton_core::effect::{Call, Decision, Gate};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::Mutex;

use crate::ServeError;
use crate::explain::explain;

type Client = RunningService<RoleClient, ()>;

/// The longest line an upstream may answer with: twice an agent's longest frame, since a
/// tool's answer carries its result both as text and as structured content. A longer line
/// ends the session at once (the call fails, saying so) rather than be read into memory.
fn max_upstream_line(payload_cap: usize) -> usize {
    crate::frame::max_frame(payload_cap).saturating_mul(2)
}

/// Levels a JSON-RPC answer puts around a tool's result (the frame, then `result`): an
/// upstream's line may nest that much deeper than a payload.
const FRAME_LEVELS: usize = 2;

/// A running upstream: the MCP session, the process (killed when this is dropped) and
/// what was wrong with the line that ended it, if one did.
pub(crate) struct Session {
    pub(crate) client: Client,
    refused: Arc<std::sync::Mutex<Option<Unread>>>,
    process: tokio::process::Child,
}

/// Why a line of the upstream's was not read.
#[derive(Debug, Clone)]
enum Unread {
    /// Longer than the limit, in bytes.
    Overlong(usize),
    /// It breaks the boundary every participant's input is held to.
    Refused(baton_core::json::JsonProblem),
}

/// How long a closed session's server has to exit before it is killed.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

impl Session {
    /// Ends the session: its input closes, and its server gets [`EXIT_GRACE`] to exit
    /// before it is killed.
    pub(crate) async fn close(mut self) -> Result<(), String> {
        self.client
            .cancel()
            .await
            .map_err(|e| format!("the session did not close: {e}"))?;
        let _ = tokio::time::timeout(EXIT_GRACE, self.process.wait()).await;
        Ok(())
    }

    /// Why a call to `tool` failed, from the transport's error.
    fn failure(&self, tool: &str, e: impl std::fmt::Display) -> String {
        let unread = self
            .refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        match unread {
            Some(Unread::Overlong(limit)) => format!(
                "the upstream server answered `{tool}` with a line over {limit} bytes, more \
                 than the payload cap lets through; it was not read"
            ),
            Some(Unread::Refused(problem)) => format!(
                "the upstream's answer is refused, as a participant's would be: {problem}; \
                 the session with it was closed"
            ),
            None => format!("the upstream server did not answer `{tool}`: {e}"),
        }
    }
}

/// Starts `command` (a command line) as an MCP server and completes the handshake; its
/// answers are read a line at a time, none longer than `payload_cap` allows.
pub(crate) async fn connect(command: &[String], payload_cap: usize) -> Result<Session, String> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| "no upstream command was given".to_owned())?;
    let mut process = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        // An upstream given up on (past its time) or left behind is not left running.
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start the upstream server `{program}`: {e}"))?;
    let (Some(stdin), Some(stdout)) = (process.stdin.take(), process.stdout.take()) else {
        return Err(format!("the upstream server `{program}` has no pipes"));
    };
    let refused = Arc::new(std::sync::Mutex::new(None));
    let read = BoundedLines::new(stdout, max_upstream_line(payload_cap), Arc::clone(&refused));
    let client = ()
        .serve((read, stdin))
        .await
        .map_err(|e| format!("the upstream server `{program}` did not start MCP: {e}"))?;
    Ok(Session {
        client,
        refused,
        process,
    })
}

/// A reader that holds each line of an upstream to the boundary a participant's input
/// passes (depth, exact numbers, no repeated key, no U+0000), and fails at the first
/// line that breaks it, or that runs past `limit` bytes (never held in memory whole when
/// it is too long to be taken anyway). What an upstream answers can then be stored, and
/// exported, like anything a participant sent.
struct BoundedLines<R> {
    inner: R,
    /// The current line so far.
    line: Vec<u8>,
    limit: usize,
    refused: Arc<std::sync::Mutex<Option<Unread>>>,
}

impl<R> BoundedLines<R> {
    fn new(inner: R, limit: usize, refused: Arc<std::sync::Mutex<Option<Unread>>>) -> Self {
        Self {
            inner,
            line: Vec::new(),
            limit,
            refused,
        }
    }

    fn fail(&self, unread: Unread) -> Poll<std::io::Result<()>> {
        let said = match &unread {
            Unread::Overlong(limit) => format!("a line over {limit} bytes"),
            Unread::Refused(problem) => problem.to_string(),
        };
        *self
            .refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(unread);
        Poll::Ready(Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            said,
        )))
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedLines<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        let mut unread = None;
        for &byte in &buf.filled()[before..] {
            if byte != b'\n' {
                this.line.push(byte);
                if this.line.len() > this.limit {
                    unread = Some(Unread::Overlong(this.limit));
                    break;
                }
                continue;
            }
            // Text that is not JSON passes: the client's parser says what is wrong.
            let checked = std::str::from_utf8(&this.line).map_or(Ok(()), |text| {
                baton_core::json::check_text(text, baton_core::json::MAX_DEPTH + FRAME_LEVELS)
            });
            this.line.clear();
            if let Err(problem) = checked {
                unread = Some(Unread::Refused(problem));
                break;
            }
        }
        match unread {
            // Nothing of this read is passed on: the line it ends was not read.
            Some(unread) => {
                buf.set_filled(before);
                this.fail(unread)
            }
            None => Poll::Ready(Ok(())),
        }
    }
}

/// Runs held effects through upstream servers, one session per command line for as long
/// as it lives.
pub struct Upstream {
    sessions: Mutex<HashMap<Vec<String>, Arc<Session>>>,
    /// How long one effect may take, its upstream's start included.
    timeout: std::time::Duration,
    payload_cap: usize,
}

impl Upstream {
    /// Upstreams that get `timeout` to start and answer each call, and whose lines are
    /// bounded by what `payload_cap` lets through.
    pub fn new(timeout: std::time::Duration, payload_cap: usize) -> Self {
        Self {
            sessions: Mutex::default(),
            timeout,
            payload_cap,
        }
    }
}

#[async_trait]
impl ToolRunner for Upstream {
    async fn call(
        &self,
        upstream: &[String],
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<Value, String> {
        let called = async {
            let session = {
                let mut sessions = self.sessions.lock().await;
                match sessions.get(upstream) {
                    Some(session) => session.clone(),
                    None => {
                        let session = Arc::new(connect(upstream, self.payload_cap).await?);
                        sessions.insert(upstream.to_vec(), session.clone());
                        session
                    }
                }
            };
            let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
            match session.client.call_tool(params).await {
                Ok(result) => serde_json::to_value(result).map_err(|e| e.to_string()),
                Err(e) => {
                    // A session whose transport failed is not reused.
                    self.sessions.lock().await.remove(upstream);
                    Err(session.failure(tool, e))
                }
            }
        };
        match tokio::time::timeout(self.timeout, called).await {
            Ok(answered) => answered,
            Err(_) => {
                // A session that did not answer is not reused.
                self.sessions.lock().await.remove(upstream);
                Err(format!(
                    "the upstream server did not answer `{tool}` within {} s \
                     (orders.effect_timeout in .baton/config.toml)",
                    self.timeout.as_secs()
                ))
            }
        }
    }
}

/// The gateway's MCP server for one order.
struct Gateway {
    app: App,
    me: Passname,
    order: String,
    server: String,
    upstream: Vec<String>,
    gate: Gate,
    session: Session,
    tools: Vec<Tool>,
}

fn text_result(text: String, error: bool) -> CallToolResult {
    let content = vec![ContentBlock::text(text)];
    if error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "baton-gateway",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(format!(
                "Baton's gateway for order {} in front of `{}`: writes the order stages are \
                 held until its report is approved (list each `pending:` reference under \
                 `effects` in your report); reads pass through.",
                self.order, self.server
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tool = format!("{}/{}", self.server, request.name);
        let arguments = request.arguments.clone().unwrap_or_default();
        let call = Call {
            tool,
            arguments,
            upstream: self.upstream.clone(),
        };
        let decision = self
            .app
            .gateway_call(&self.me, &self.order, &self.gate, call)
            .await;
        let result = match decision {
            // The gateway offers the upstream's tools, none of Baton's.
            Err(e) => text_result(explain(&self.order, e, &|_| false), true),
            Ok(Decision::Refuse(why)) => {
                text_result(format!("refused by Baton's gateway: {why}"), true)
            }
            Ok(Decision::Hold { reference }) => {
                let pending = format!("pending:{reference}");
                let mut result = text_result(
                    format!(
                        "{pending}: held, not run. It runs when the order's report is \
                         approved; list it under `effects` in your report as \
                         {{\"ref\": \"{reference}\", \"tool\": \"{}/{}\", \"arguments\": …}}.",
                        self.server, request.name
                    ),
                    false,
                );
                result.structured_content = Some(json!({
                    "pending": pending,
                    "ref": reference,
                    "runs": "on approval",
                }));
                result
            }
            Ok(Decision::Forward { reference }) => {
                let name = request.name.clone();
                let mut result =
                    self.session.client.call_tool(request).await.map_err(|e| {
                        ErrorData::internal_error(self.session.failure(&name, e), None)
                    })?;
                // Unchanged for the agent; the evidence reference rides in `_meta`.
                let mut meta = result.meta.take().unwrap_or_default();
                meta.0
                    .insert("baton/evidence".into(), Value::from(reference));
                result.meta = Some(meta);
                result
            }
        };
        Ok(CallToolResponse::Complete(result))
    }
}

/// Serves the gateway for `order` on stdin/stdout as `me`, in front of the MCP server
/// `upstream` starts, named `server` in tool patterns (`SERVER/TOOL`). Refuses to start,
/// before starting anything, unless `me` is the order's worker and the order is accepted
/// or working.
pub async fn serve_gateway(
    app: App,
    me: Passname,
    order: String,
    server: String,
    upstream: Vec<String>,
) -> Result<(), ServeError> {
    let gate = app
        .gateway_gate(&me, &order)
        .await
        .map_err(|e| ServeError::Refused(explain(&order, e, &|_| false)))?;
    let session = connect(&upstream, app.settings().payload_cap)
        .await
        .map_err(ServeError::Start)?;
    let tools = session
        .client
        .list_all_tools()
        .await
        .map_err(|e| ServeError::Start(format!("the upstream server listed no tools: {e}")))?
        .into_iter()
        .filter(|t| gate.lists(&format!("{server}/{}", t.name)))
        .map(|mut t| {
            // A held call answers with a placeholder, not the upstream's output: its
            // output schema would not hold, so a staged tool lists none, and says why.
            if gate.stages(&format!("{server}/{}", t.name)) {
                t.output_schema = None;
                let said = t.description.as_deref().unwrap_or("").to_owned();
                t.description = Some(
                    format!(
                        "{said} (Staged by the order: a call is held, not run, and answers \
                         `pending:{server}/{}#N`; it runs when the report is approved.)",
                        t.name
                    )
                    .trim_start()
                    .to_owned()
                    .into(),
                );
            }
            t
        })
        .collect();
    // The agent's lines are gated as `baton mcp`'s are: a call's arguments are stored.
    let cap = crate::frame::max_frame(app.settings().payload_cap);
    let gateway = Gateway {
        app,
        me,
        order,
        server,
        upstream,
        gate,
        session,
        tools,
    };
    crate::serve_gated(gateway, cap).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// What reading `text` through the bounded reader gives: all of it, or why not.
    async fn read(text: &str, limit: usize) -> Result<String, String> {
        let refused = Arc::new(std::sync::Mutex::new(None));
        let mut reader = BoundedLines::new(text.as_bytes(), limit, Arc::clone(&refused));
        let mut out = String::new();
        match reader.read_to_string(&mut out).await {
            Ok(_) => Ok(out),
            Err(e) => {
                assert!(refused.lock().unwrap().is_some(), "the reason is kept");
                Err(e.to_string())
            }
        }
    }

    fn answer(structured: &str) -> String {
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{{\"content\":[],\"structuredContent\":{structured}}}}}\n"
        )
    }

    #[tokio::test]
    async fn an_upstream_line_is_held_to_the_participants_boundary() {
        let fine = answer("{\"text\":\"\\u001b[31mred\\u202e\",\"n\":12345678901234567}");
        assert_eq!(
            read(&fine, 1 << 20).await.unwrap(),
            fine,
            "ESC and RTL pass"
        );
        let deep = format!("{}1{}", "[".repeat(70), "]".repeat(70));
        for (structured, why) in [
            ("{\"text\":\"a\\u0000b\"}", "U+0000"),
            (
                "{\"n\":123456789012345678901234567890}",
                "cannot be kept exactly",
            ),
            ("{\"n\":1e400}", "cannot be kept exactly"),
            ("{\"a\":1,\"a\":2}", "duplicate key"),
            (deep.as_str(), "nested too deeply"),
        ] {
            let refused = read(&answer(structured), 1 << 20).await.unwrap_err();
            assert!(refused.contains(why), "{structured}: {refused}");
        }
        // A payload's own depth, inside the frame, is taken.
        let deepest = format!("{}1{}", "[".repeat(63), "]".repeat(63));
        assert!(
            read(&answer(&format!("{{\"d\":{deepest}}}")), 1 << 20)
                .await
                .is_ok()
        );
        // A line split across reads is judged whole; a line over the limit is not read.
        let refused = read(&answer(&format!("{{\"t\":\"{}\"}}", "x".repeat(200))), 100)
            .await
            .unwrap_err();
        assert!(refused.contains("a line over 100 bytes"), "{refused}");
    }
}
