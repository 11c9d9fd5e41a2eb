"""The full round through the official MCP Python SDK (protocol 2025-11-25, the newest
with an `initialize` handshake): two `baton mcp` servers, planner and impl-1.

Usage: python sdk_client.py BATON_EXE PROJECT_DIR
"""

from __future__ import annotations

import asyncio
import sys
from contextlib import AsyncExitStack

from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client

import round as checks

PROTOCOL = "2025-11-25"


class SdkConn:
    def __init__(self, session: ClientSession):
        self.session = session

    async def list_tools(self) -> list[dict]:
        listed = await self.session.list_tools()
        return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools]

    async def call(self, name: str, arguments: dict) -> checks.Result:
        r = await self.session.call_tool(name, arguments)
        text = "".join(getattr(block, "text", "") for block in r.content)
        return checks.Result(r.structured_content, text, r.is_error)


async def connect(stack: AsyncExitStack, baton: str, project: str, who: str) -> SdkConn:
    params = StdioServerParameters(command=baton, args=["--project", project, "--as", who, "mcp"])
    read, write = await stack.enter_async_context(stdio_client(params))
    session = await stack.enter_async_context(ClientSession(read, write))
    init = await session.initialize()
    assert init.protocol_version == PROTOCOL, f"negotiated {init.protocol_version}"
    assert init.server_info.name == "baton", init.server_info
    assert who in (init.instructions or ""), "the instructions name who is acting"
    return SdkConn(session)


async def main(baton: str, project: str) -> None:
    async with AsyncExitStack() as stack:
        planner = await connect(stack, baton, project, "planner")
        executor = await connect(stack, baton, project, "impl-1")
        tools = checks.check_tools(await planner.list_tools())
        print(f"sdk: {len(tools)} tools listed on {PROTOCOL}")
        await checks.full_round(
            checks.Checked(planner, tools, "planner"),
            checks.Checked(executor, tools, "impl-1"),
        )
        print("sdk: full round ok; every tool's output matched its outputSchema")
        try:
            await planner.session.call_tool("no_such_tool", {})
        except MCPError as e:
            assert e.code == -32602, f"unknown tool: code {e.code} {e.message}"
        else:
            raise AssertionError("an unknown tool must be a protocol error, not a result")
        print("sdk: unknown tool is a protocol error")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
