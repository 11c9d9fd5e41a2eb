//! The MCP pieces of `baton demo`, shipped in the binary so the demo needs nothing else: a
//! tiny upstream MCP server (one read tool, one write tool that appends a line to a file,
//! so "the effect ran once" is a line count anyone can check), and the client side of an
//! agent's session through `baton gateway`. Nothing outside the demo uses them.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};

use crate::ServeError;
use crate::gateway::connect;

/// The upstream server: `read` lists the file's lines; `publish` appends one line.
struct DemoUpstream {
    file: PathBuf,
}

fn schema(value: Value) -> Arc<JsonObject> {
    Arc::new(match value {
        Value::Object(map) => map,
        _ => Map::new(),
    })
}

impl DemoUpstream {
    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.file)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Appends `line` durably; the number of lines after it.
    fn publish(&self, line: &str) -> std::io::Result<usize> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.file)?;
        writeln!(f, "{line}")?;
        f.sync_all()?;
        Ok(self.lines().len())
    }
}

impl ServerHandler for DemoUpstream {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new("baton-demo-upstream", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new(
                "read",
                "The published lines.",
                schema(json!({"type": "object", "properties": {}})),
            ),
            Tool::new(
                "publish",
                "Publishes one line (appends it to the file).",
                schema(json!({
                    "type": "object",
                    "properties": {"line": {"type": "string"}},
                    "required": ["line"]
                })),
            ),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let result = match request.name.as_ref() {
            "read" => CallToolResult::structured(json!({"lines": self.lines()})),
            "publish" => {
                let line = request
                    .arguments
                    .as_ref()
                    .and_then(|a| a.get("line"))
                    .and_then(Value::as_str);
                match line {
                    None => CallToolResult::error(vec![ContentBlock::text(
                        "`line`: a string is required",
                    )]),
                    Some(line) => match self.publish(line) {
                        Ok(n) => CallToolResult::structured(json!({"n": n})),
                        Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                            "cannot write {}: {e}",
                            self.file.display()
                        ))]),
                    },
                }
            }
            other => CallToolResult::error(vec![ContentBlock::text(format!(
                "no tool `{other}`: use read or publish"
            ))]),
        };
        Ok(CallToolResponse::Complete(result))
    }
}

/// Serves the demo's upstream MCP server on stdin/stdout; `publish` appends to `file`.
pub async fn serve_demo_upstream(file: PathBuf) -> Result<(), ServeError> {
    let cap = crate::frame::max_frame(baton_core::message::DEFAULT_PAYLOAD_CAP);
    crate::serve_gated(DemoUpstream { file }, cap).await
}

/// One session as an agent: starts `command` (an MCP server on stdio, such as `baton
/// gateway …`), lists its tools and makes `calls` in order. Returns the tools' names and
/// each call's result as JSON (an `isError` result is a result, not a failure).
pub async fn agent_session(
    command: &[String],
    calls: &[(String, Map<String, Value>)],
) -> Result<(Vec<String>, Vec<Value>), String> {
    let session = connect(command, baton_core::message::DEFAULT_PAYLOAD_CAP).await?;
    let tools = session
        .client
        .list_all_tools()
        .await
        .map_err(|e| format!("the server listed no tools: {e}"))?
        .into_iter()
        .map(|t| t.name.into_owned())
        .collect();
    let mut results = Vec::new();
    for (tool, arguments) in calls {
        let params = CallToolRequestParams::new(tool.clone()).with_arguments(arguments.clone());
        let result = session
            .client
            .call_tool(params)
            .await
            .map_err(|e| format!("the server did not answer `{tool}`: {e}"))?;
        results.push(serde_json::to_value(result).map_err(|e| e.to_string())?);
    }
    session.close().await?;
    Ok((tools, results))
}
