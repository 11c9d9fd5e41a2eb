"""The full round through the official MCP Python SDK (protocol 2025-11-25, the newest
with an `initialize` handshake): two `baton mcp` servers, planner and impl-1; then the
project's memory through the tools, and the resume packet as a prompt and a resource.

Usage: python sdk_client.py BATON_EXE PROJECT_DIR
"""

from __future__ import annotations

import asyncio
import sys
from contextlib import AsyncExitStack

from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client

import round as checks
from round import check

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

    async def list_prompts(self) -> list[dict]:
        listed = await self.session.list_prompts()
        return [dump(p) for p in listed.prompts]

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> list[str]:
        r = await self.session.get_prompt(name, arguments)
        return [m.content.text for m in r.messages]

    async def list_resources(self) -> list[dict]:
        listed = await self.session.list_resources()
        return [dump(r) for r in listed.resources]

    async def read_resource(self, uri: str) -> list[dict]:
        r = await self.session.read_resource(uri)
        return [dump(c) for c in r.contents]


def dump(model) -> dict:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


async def connect(stack: AsyncExitStack, baton: str, project: str, who: str) -> SdkConn:
    params = StdioServerParameters(command=baton, args=["--project", project, "--as", who, "mcp", "--profile", "all"])
    read, write = await stack.enter_async_context(stdio_client(params))
    session = await stack.enter_async_context(ClientSession(read, write))
    init = await session.initialize()
    check(init.protocol_version == PROTOCOL, f"negotiated {init.protocol_version}")
    check(init.server_info.name == "baton", init.server_info)
    check(who in (init.instructions or ""), "the instructions name who is acting")
    caps = init.capabilities
    check(caps.tools and caps.prompts is not None and caps.resources is not None, caps)
    return SdkConn(session)


async def main(baton: str, project: str) -> None:
    async with AsyncExitStack() as stack:
        planner = await connect(stack, baton, project, "planner")
        executor = await connect(stack, baton, project, "impl-1")
        tools = checks.check_tools(await planner.list_tools())
        print(f"sdk: {len(tools)} tools listed on {PROTOCOL}")
        checked = (
            checks.Checked(planner, tools, "planner"),
            checks.Checked(executor, tools, "impl-1"),
        )
        await checks.full_round(*checked)
        print("sdk: full round ok")
        await checks.order_round(*checked, checks.Cli(baton, project))
        print("sdk: order round ok")
        await checks.memory_round(*checked, checks.Cli(baton, project))
        print("sdk: resume, focus, decide, constrain, note and receipts ok; state and alerts match")
        await checks.packet_doors(executor, checked[1])
        print("sdk: the resume prompt and baton://resume return the packet")
        checks.all_validated(*checked)
        print(f"sdk: every tool's output ({len(tools)} tools) matched its outputSchema")
        try:
            await planner.session.call_tool("no_such_tool", {})
        except MCPError as e:
            check(e.code == -32602, f"unknown tool: code {e.code} {e.message}")
        else:
            raise AssertionError("an unknown tool must be a protocol error, not a result")
        for door in (
            planner.session.get_prompt("no_such_prompt"),
            planner.session.read_resource("baton://no-such-resource"),
        ):
            try:
                await door
            except MCPError:
                pass
            else:
                raise AssertionError("an unknown prompt or resource must be a protocol error")
        print("sdk: unknown tool, prompt and resource are protocol errors")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
