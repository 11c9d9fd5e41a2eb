//! `baton gateway`: an MCP server in front of a worker's MCP server that holds the order's
//! staged calls until its report is approved.

use clap::Args;

use crate::cli::GlobalArgs;
use crate::commands::Context;
use crate::error::{CommandError, CommandResult};
use crate::output::Output;

/// Stand between a worker's agent and an MCP server, for one Work Order.
///
/// Point the agent at this command instead of the upstream server: the gateway starts the
/// upstream (the command after `--`) and lists its tools that the order's `tools` allow,
/// naming them `SERVER/TOOL` in patterns. Each call is checked at call time: a tool outside
/// `tools`, or past the order's `tool_calls` or `seconds` budget, is refused and recorded; a
/// call matching `staged` is held — recorded with its arguments, not sent — and answered
/// with `pending:SERVER/TOOL#N`, which the worker lists under `effects` in its report;
/// any other call is forwarded and recorded as evidence (`SERVER/TOOL@N`, in the result's
/// `_meta`). `baton order approve` runs the held calls, once, in order. The acting identity
/// must be the order's worker and the order accepted or working. Stdout carries MCP only.
#[derive(Args, Debug)]
#[command(after_help = "Example (the worker's MCP server entry):\n  \
                        {\"command\": \"baton\", \"args\": [\"--as\", \"impl-1\", \"gateway\", \
                        \"--order\", \"wo_42\", \"--name\", \"github\", \"--\", \
                        \"github-mcp-server\", \"stdio\"]}")]
pub struct GatewayArgs {
    /// The Work Order the calls are made for.
    #[arg(long, value_name = "ID")]
    pub order: String,
    /// The upstream server's name in the order's tool patterns (`NAME/TOOL`).
    #[arg(long, value_name = "SERVER")]
    pub name: String,
    /// The upstream MCP server's command line (stdio).
    #[arg(last = true, required = true, value_name = "UPSTREAM_CMD")]
    pub upstream: Vec<String>,
}

pub async fn run(g: &GlobalArgs, args: GatewayArgs) -> CommandResult<Output> {
    if g.json {
        return Err(CommandError::usage(
            "--json does not apply to `baton gateway`: its stdout carries the MCP protocol only",
        ));
    }
    if args.name.is_empty() || args.name.contains('/') || args.name == "*" {
        return Err(CommandError::usage(
            "--name is the server's name in tool patterns (SERVER/TOOL): non-empty, without `/`",
        ));
    }
    let ctx = Context::open(g).await?;
    let me = ctx.me().await?;
    // Refused here, before the upstream starts, in the command line's words.
    let order = ctx.app()?.load_order(&args.order).await?.id;
    ctx.app()?.gateway_gate(&me, &order).await?;
    eprintln!(
        "baton gateway: order {order} as {me}, in front of `{}` ({})",
        args.upstream.join(" "),
        args.name
    );
    baton_mcp::serve_gateway(ctx.app()?.clone(), me, order, args.name, args.upstream)
        .await
        .map_err(|e| CommandError::failed(e.to_string()))?;
    Ok(Output::nothing())
}
