"""The upstream MCP server the harness's approvals run effects through, on Python's
standard library alone: one tool, `append(line)`, which appends the line to the file
named by $UPSTREAM_FILE and syncs it, so the harness counts what ran by counting lines,
never by Baton's word. Speaks MCP over stdio, one JSON-RPC message a line.
"""

import json
import os
import sys

FILE = os.environ["UPSTREAM_FILE"]
TOOLS = [{
    "name": "append",
    "description": "Appends one line to the file.",
    "inputSchema": {"type": "object", "properties": {"line": {"type": "string"}},
                    "required": ["line"]},
}]


def append(line):
    with open(FILE, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())
    with open(FILE, encoding="utf-8") as f:
        return len(f.read().splitlines())


def answer(request):
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "crash-upstream", "version": "1"}}
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call" and params.get("name") == "append":
        n = append(str((params.get("arguments") or {}).get("line", "")))
        return {"content": [{"type": "text", "text": json.dumps({"n": n})}],
                "structuredContent": {"n": n}, "isError": False}
    return None


for text in sys.stdin:
    try:
        request = json.loads(text)
    except ValueError:
        continue
    if "id" not in request:
        continue
    result = answer(request)
    if result is None:
        reply = {"jsonrpc": "2.0", "id": request["id"],
                 "error": {"code": -32601, "message": "no such method or tool"}}
    else:
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": result}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
