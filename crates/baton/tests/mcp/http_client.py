"""MCP over Streamable HTTP (`baton serve`, `/v1/projects/NAME/mcp`) through the official
Python SDK: the same tools and the same full round as over stdio, each side proved by its
own key; a read key is offered the read-only tools alone; a request without a valid key is
refused before MCP sees it.

Usage: python http_client.py MCP_URL PLANNER_TOKEN EXECUTOR_TOKEN READER_TOKEN
"""

from __future__ import annotations

import asyncio
import json
import sys
from contextlib import AsyncExitStack

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

import round as checks
from round import check
from sdk_client import SdkConn


async def connect(stack: AsyncExitStack, url: str, token: str, who: str) -> SdkConn:
    http = await stack.enter_async_context(
        create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    )
    streams = await stack.enter_async_context(streamable_http_client(url, http_client=http))
    read, write = streams[0], streams[1]
    session = await stack.enter_async_context(ClientSession(read, write))
    init = await session.initialize()
    check(init.server_info.name == "baton", init.server_info)
    check(who in (init.instructions or ""), "the instructions name the key's participant")
    return SdkConn(session)


async def main(url: str, planner_token: str, executor_token: str, reader_token: str) -> None:
    async with AsyncExitStack() as stack:
        planner = await connect(stack, url, planner_token, "planner")
        executor = await connect(stack, url, executor_token, "impl-1")
        # A write key is offered its participant's role profile: the executor's, within
        # its budget; the planner here has a role without one, so it gets every tool.
        listed = {"planner": checks.check_tools(await planner.list_tools())}
        tools = await executor.list_tools()
        size = len(json.dumps({"tools": tools}, separators=(",", ":")))
        # The role budget: 7.5 KB, within the promised 8 KB with room (baton_mcp::PROFILE_BUDGET).
        check(size < 7680, f"executor profile: {size} bytes")
        listed["impl-1"] = checks.check_tools(tools, checks.PROFILES["executor"])
        print(f"http: each write key lists its role's profile ({len(listed['planner'])} and {len(listed['impl-1'])} tools)")
        checked = (
            checks.Checked(planner, listed["planner"], "planner"),
            checks.Checked(executor, listed["impl-1"], "impl-1"),
        )
        await checks.full_round(*checked)
        print("http: full round ok")

        reader = await connect(stack, url, reader_token, "impl-1")
        offered = {t["name"] for t in await reader.list_tools()}
        check(offered == checks.READ_ONLY, f"a read key is offered {sorted(offered)}")
        inbox = await reader.call("inbox", {})
        check(not inbox.is_error, inbox.text)
        print(f"http: a read key is offered {len(offered)} read-only tools")

    async with httpx2.AsyncClient() as http:
        answer = await http.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": "Bearer baton_nope_nope", "Accept": "application/json, text/event-stream"},
        )
        check(answer.status_code == 401, answer.status_code)
    print("http: a bad key is refused with 401")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
