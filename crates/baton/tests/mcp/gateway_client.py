"""Drives `baton gateway` with the official MCP Python SDK: lists its tools, makes the
calls given as JSON on stdin ([{"tool": NAME, "arguments": {...}}, ...]) in order, and
prints one JSON document: {"tools": [names], "results": [{"error", "text",
"structured", "meta"}]}. A protocol error on a call is a failure of this script.

Usage: python gateway_client.py BATON_EXE PROJECT_DIR ARG... < calls.json
(ARG... are `baton`'s arguments, e.g. --as impl-1 gateway --order wo_1 --name files -- CMD)
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client


async def main() -> None:
    baton, project, *args = sys.argv[1:]
    calls = json.load(sys.stdin)
    params = StdioServerParameters(command=baton, args=args, cwd=project, env=dict(os.environ))
    out: dict = {"tools": [], "results": []}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            out["tools"] = sorted(t.name for t in listed.tools)
            for call in calls:
                r = await session.call_tool(call["tool"], call.get("arguments", {}))
                out["results"].append({
                    "error": bool(r.is_error),
                    "text": "".join(getattr(b, "text", "") for b in r.content),
                    "structured": r.structured_content,
                    "meta": r.meta,
                })
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
