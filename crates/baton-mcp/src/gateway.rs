//! The staged-effects gateway (SPEC §7): an MCP server a worker's agent connects to in
//! place of an upstream MCP server, which it starts as a child and talks to as a client.
//! It lists the upstream's tools the order allows; each call is put to the use case
//! (`App::gateway_call`), which records it and says what to do — forward it (a read,
//! recorded as evidence), hold it (a staged write, answered with `pending:SERVER/TOOL#N`)
//! or refuse it (outside `tools`, or past the budget). [`Upstream`] is how approval later
//! runs the held calls through the same command.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;

use async_trait::async_trait;
use baton_app::{App, ToolRunner};
use baton_core::Passname;
use baton_core::effect::{Call, Decision, Gate};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};
use tokio::sync::Mutex;

use crate::ServeError;
use crate::explain::explain;

type Client = RunningService<RoleClient, ()>;

/// Starts `command` (a command line) as an MCP server and completes the handshake.
pub(crate) async fn connect(command: &[String]) -> Result<Client, String> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| "no upstream command was given".to_owned())?;
    let mut cmd = tokio::process::Command::new(program);
    // An upstream given up on (past its time) or left behind is not left running.
    cmd.args(args).kill_on_drop(true);
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start the upstream server `{program}`: {e}"))?;
    ().serve(transport)
        .await
        .map_err(|e| format!("the upstream server `{program}` did not start MCP: {e}"))
}

/// Runs held effects through upstream servers, one session per command line for as long
/// as it lives.
pub struct Upstream {
    sessions: Mutex<HashMap<Vec<String>, Arc<Client>>>,
    /// How long one effect may take, its upstream's start included.
    timeout: std::time::Duration,
}

impl Upstream {
    /// Upstreams that get `timeout` to start and answer each call.
    pub fn new(timeout: std::time::Duration) -> Self {
        Self {
            sessions: Mutex::default(),
            timeout,
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
            let client = {
                let mut sessions = self.sessions.lock().await;
                match sessions.get(upstream) {
                    Some(client) => client.clone(),
                    None => {
                        let client = Arc::new(connect(upstream).await?);
                        sessions.insert(upstream.to_vec(), client.clone());
                        client
                    }
                }
            };
            let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
            let result = client
                .call_tool(params)
                .await
                .map_err(|e| format!("the upstream server did not answer `{tool}`: {e}"))?;
            serde_json::to_value(result).map_err(|e| e.to_string())
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
    client: Client,
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
            Err(e) => text_result(explain(&self.order, e), true),
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
                let mut result = self.client.call_tool(request).await.map_err(|e| {
                    ErrorData::internal_error(format!("the upstream server failed: {e}"), None)
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
        .map_err(|e| ServeError::Refused(explain(&order, e)))?;
    let client = connect(&upstream).await.map_err(ServeError::Start)?;
    let tools = client
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
        client,
        tools,
    };
    crate::serve_gated(gateway, cap).await
}
