"""The full round over raw JSON-RPC lines on protocol 2025-06-18 (no SDK), the project's
memory through the tools, the resume packet as a prompt and a resource, then the protocol
errors, hostile arguments, and a check that stdout carried nothing but JSON-RPC.

Usage: python raw_client.py BATON_EXE PROJECT_DIR
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import round as checks
from round import check

PROTOCOL = "2025-06-18"
# A generous bound on one answer, so a server that never replies fails the test instead
# of hanging it.
TIMEOUT = 30


class RawConn:
    def __init__(self, proc: asyncio.subprocess.Process, who: str):
        self.proc = proc
        self.who = who
        self.next_id = 0
        self.lines = 0

    @classmethod
    async def start(cls, baton: str, project: str, who: str) -> RawConn:
        proc = await asyncio.create_subprocess_exec(
            baton, "--project", project, "--as", who, "mcp", "--profile", "all",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            limit=1 << 24,
        )
        return cls(proc, who)

    async def write(self, line: str) -> None:
        check(self.proc.stdin is not None, 'self.proc.stdin is not None')
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()

    async def send(self, message: dict) -> None:
        await self.write(json.dumps(message))

    async def receive(self) -> dict:
        """The next stdout line, which must be one JSON-RPC 2.0 message."""
        check(self.proc.stdout is not None, 'self.proc.stdout is not None')
        line = await asyncio.wait_for(self.proc.stdout.readline(), TIMEOUT)
        check(line, f"{self.who}: the server closed stdout (exit {self.proc.returncode})")
        self.lines += 1
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            raise AssertionError(f"{self.who}: stdout carried a non-JSON line: {line[:200]!r}")
        check(isinstance(message, dict) and message.get("jsonrpc") == "2.0", f"{self.who}: not a JSON-RPC 2.0 message: {line[:200]!r}")
        return message

    async def request(self, method: str, params: Any = None) -> dict:
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return await self.answer(self.next_id)

    async def answer(self, id: int) -> dict:
        while True:
            message = await self.receive()
            if message.get("id") == id and ("result" in message or "error" in message):
                return message

    async def initialize(self) -> dict:
        r = await self.request("initialize", {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "baton-raw-test", "version": "0"},
        })
        check("result" in r, r)
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r["result"]

    async def list_tools(self) -> list[dict]:
        r = await self.request("tools/list")
        check("result" in r, r)
        return r["result"]["tools"]

    async def call(self, name: str, arguments: Any) -> checks.Result:
        r = await self.request("tools/call", {"name": name, "arguments": arguments})
        check("result" in r, f"{self.who} {name}: a protocol error where a result was due: {r}")
        result = r["result"]
        text = "".join(block.get("text", "") for block in result.get("content", []))
        return checks.Result(result.get("structuredContent"), text, result.get("isError", False))

    async def result(self, method: str, params: Any) -> dict:
        r = await self.request(method, params)
        check("result" in r, f"{self.who} {method}: {r}")
        return r["result"]

    async def list_prompts(self) -> list[dict]:
        return (await self.result("prompts/list", {}))["prompts"]

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> list[str]:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        messages = (await self.result("prompts/get", params))["messages"]
        return [m["content"]["text"] for m in messages]

    async def list_resources(self) -> list[dict]:
        return (await self.result("resources/list", {}))["resources"]

    async def read_resource(self, uri: str) -> list[dict]:
        return (await self.result("resources/read", {"uri": uri}))["contents"]

    async def close(self) -> int:
        """Closes stdin; the server must exit 0 and leave only JSON-RPC on stdout."""
        check(self.proc.stdin is not None and self.proc.stdout is not None, 'self.proc.stdin is not None and self.proc.stdout is not None')
        self.proc.stdin.close()
        rest = await asyncio.wait_for(self.proc.stdout.read(), TIMEOUT)
        for line in rest.splitlines():
            message = json.loads(line)
            check(message.get("jsonrpc") == "2.0", line)
            self.lines += 1
        return await asyncio.wait_for(self.proc.wait(), TIMEOUT)


async def garbage_answer(conn: RawConn, id: Any) -> dict:
    """The next response, which must be an error carrying `id`; notifications the server
    sends meanwhile are passed over."""
    while True:
        message = await conn.receive()
        if "method" in message:
            continue
        check("error" in message and message.get("id") == id,
              f"a garbage line got no JSON-RPC error with id {id!r}; the next answer was {message}")
        return message


async def protocol_errors(conn: RawConn) -> None:
    """Unknown tools and malformed requests are JSON-RPC errors, not tool results."""
    r = await conn.request("tools/call", {"name": "no_such_tool", "arguments": {}})
    check(r.get("error", {}).get("code") == -32602, f"unknown tool: {r}")
    r = await conn.request("tools/call", {"arguments": {}})
    check("error" in r, f"tools/call without a name: {r}")
    r = await conn.request("tools/call", {"name": "inbox", "arguments": [1, 2]})
    check("error" in r, f"arguments that are not an object: {r}")
    r = await conn.request("baton/no-such-method")
    check(r.get("error", {}).get("code") == -32601, f"unknown method: {r}")
    r = await conn.request("prompts/get", {"name": "no_such_prompt"})
    check("error" in r, f"unknown prompt: {r}")
    r = await conn.request("prompts/get", {"name": "resume", "arguments": {"max_bytes": "lots"}})
    check("error" in r and "max_bytes" in r["error"]["message"], f"bad prompt argument: {r}")
    r = await conn.request("resources/read", {"uri": "baton://no-such-resource"})
    check("error" in r, f"unknown resource: {r}")
    # Each line that is not JSON-RPC is answered with a JSON-RPC error, and the server goes
    # on serving. The id is null when none can be found (JSON-RPC 2.0 §5); a request cut
    # short still gets its answer under the id it began with, so its client never hangs.
    for line, code, id in [
        ("this is not json", -32700, None),
        ('{"jsonrpc": "2.0", "id": "x", "method": ', -32700, "x"),
        ("[" * 10_000 + "]" * 10_000, -32600, None),
        ("[1]", -32600, None),
    ]:
        await conn.write(line)
        r = await garbage_answer(conn, id)
        check(r["error"].get("code") == code, f"{line[:40]!r}: expected {code}, got {r}")
    r = await conn.request("ping")
    check(r.get("result") == {}, f"the server stopped answering after garbage: {r}")


# Arguments a careless or hostile client might send (as impl-1); each must come back as an
# isError result (never a crash, never a hang).
HOSTILE: list[tuple[str, Any]] = [
    ("show", {"id": 5}),
    ("show", {"id": None}),
    ("show", {"id": {"nested": [1, 2]}}),
    ("show", {"id": "x", "max_bytes": -1}),
    ("show", {"id": "x", "max_bytes": 1e30}),
    ("show", {"id": "x", "max_bytes": 1.5}),
    ("show", {"id": "é" * 5000}),
    ("show", {"id": "\u0007"}),
    ("show", {}),
    ("thread", {"id": "' OR 1=1 --"}),
    ("ack", {"id": ""}),
    ("archive", {"id": "x" * 100_000}),
    ("complete", {"id": "x", "note": 7}),
    ("hand_back", {"id": "x"}),
    ("inbox", {"all": "yes"}),
    ("inbox", {"everything": True}),
    ("send", {"to": "impl-1", "topic": "t", "body": "x"}),
    ("send", {"to": [], "topic": "t", "body": "x"}),
    ("send", {"to": [""], "topic": "t", "body": "x"}),
    ("send", {"to": ["impl-1"], "topic": "t", "body": "to myself"}),
    ("send", {"to": ["ghost"], "topic": "t", "body": "x"}),
    ("send", {"to": ["impl-1"], "topic": "Not A Slug", "body": "x"}),
    ("send", {"to": ["impl-1"], "topic": "t", "type": "order", "body": "x"}),
    ("send", {"to": ["impl-1"], "topic": "t", "payload": [1, 2]}),
    ("send", {"to": ["impl-1"], "topic": "t", "payload": "text"}),
    ("send", {"to": ["impl-1"], "topic": "t"}),
    ("send", {"to": ["impl-1"], "topic": "t", "body": "x" * (300 * 1024)}),
    ("reply", {"id": "01NOSUCHPARENT", "body": "x"}),
    ("search", {"limit": 0}),
    ("search", {"limit": 4294967296}),
    ("search", {"limit": 101}),
    ("search", {"status": "lost"}),
    ("search", {"since": "yesterday-ish"}),
    ("search", {"until": "-3h"}),
    ("search", {"since": "99999999999999999999h"}),
    ("search", {"cursor": "cffffffffffffffffffffffff"}),
    ("search", {"cursor": "zzz"}),
    ("resume", {"max_bytes": -1}),
    ("resume", {"max_bytes": "6000"}),
    ("focus", {"text": ""}),
    ("focus", {"text": "x" * 3000}),
    ("focus", {}),
    ("decide", {"text": "x"}),
    ("decide", {"text": "x", "why": "y", "supersedes": "D-404"}),
    ("constrain", {"text": "x", "tried": "y", "result": " "}),
    ("note", {"text": "x", "subject": ""}),
    ("note", {"text": "x", "subject": "/etc/passwd"}),
    ("note", {"text": "x", "subject": "../../.."}),
    ("note", {"text": "x", "subject": "\u0007"}),
    ("receipt_write", {"step": "s", "artifact": ""}),
    ("receipt_write", {"step": "s", "artifact": ".baton"}),
    ("receipt_write", {"step": "s", "artifact": "no/such/file"}),
    ("receipt_write", {"step": "", "artifact": "s3://b/k"}),
    ("receipt_write", {"step": "s", "artifact": "s3://b/k", "run": 7}),
    ("receipt_wait", {"step": " "}),
    ("receipt_wait", {"step": "s", "timeout_seconds": 0}),
    ("receipt_wait", {"step": "s", "timeout_seconds": 301}),
    ("receipt_wait", {"step": "s", "timeout_seconds": 1.5}),
    ("order", {}),
    ("order", {"action": "fly"}),
    ("order", {"action": "accept"}),
    ("order", {"action": "accept", "id": "wo_none"}),
    ("order", {"action": "accept", "id": "wo_none", "expect_seq": "1"}),
    ("order", {"action": "create"}),
    ("order", {"action": "create", "document": "x"}),
    ("order", {"action": "create", "id": "wo_1", "document": {}}),
    ("order", {"action": "answer", "id": "wo_none"}),
    ("order", {"action": "rework", "id": "wo_none", "text": "x"}),
    ("order", {"action": "approve", "id": "wo_none", "actor": "planner"}),
    ("order_show", {"id": "wo_none"}),
    ("order_show", {"id": "wo_none", "timeout_seconds": 5}),
    ("order_show", {"id": "x", "since": 0, "timeout_seconds": 0}),
]


async def hostile_arguments(conn: RawConn) -> None:
    for name, arguments in HOSTILE:
        r = await conn.call(name, arguments)
        check(r.is_error and r.text, f"{name} {str(arguments)[:80]}: expected isError, got {r}")
        # Short, beyond quoting the bad value back.
        bound = 500 + 2 * len(json.dumps(arguments, ensure_ascii=False))
        check(len(r.text) < bound, f"{name}: {len(r.text)} bytes of error: {r.text[:200]}")
    r = await conn.request("ping")
    check(r.get("result") == {}, r)


async def main(baton: str, project: str) -> None:
    planner = await RawConn.start(baton, project, "planner")
    executor = await RawConn.start(baton, project, "impl-1")
    for conn in (planner, executor):
        init = await conn.initialize()
        check(init["protocolVersion"] == PROTOCOL, f"negotiated {init['protocolVersion']}")
        for capability in ("tools", "prompts", "resources"):
            check(capability in init["capabilities"], init)
    r = await planner.request("tools/list")
    size = len(json.dumps(r["result"], separators=(",", ":"), ensure_ascii=False).encode())
    # Every tool (profile all); each role's profile is held under 8 KiB (tests/cli/mcp.rs).
    print(f"raw: tools/list result is {size} bytes (profile all)")
    tools = checks.check_tools(r["result"]["tools"])

    checked = (
        checks.Checked(planner, tools, "planner"),
        checks.Checked(executor, tools, "impl-1"),
    )
    await checks.full_round(*checked)
    print(f"raw: full round ok on {PROTOCOL}")
    await checks.order_round(*checked, checks.Cli(baton, project))
    print(f"raw: order round ok on {PROTOCOL}")
    await checks.memory_round(*checked, checks.Cli(baton, project))
    print("raw: resume, focus, decide, constrain, note and receipts ok; state and alerts match")
    await checks.packet_doors(executor, checked[1])
    print("raw: the resume prompt and baton://resume return the packet")
    checks.all_validated(*checked)
    print(f"raw: every tool's output ({len(tools)} tools) matched its outputSchema")
    await protocol_errors(planner)
    print("raw: unknown tool, prompt, resource, malformed requests and garbage lines are protocol errors")
    await hostile_arguments(executor)
    print(f"raw: {len(HOSTILE)} hostile argument sets came back as isError results")

    for conn in (planner, executor):
        code = await conn.close()
        check(code == 0, f"{conn.who}: exit {code} after stdin closed")
    print(f"raw: stdout carried only JSON-RPC ({planner.lines + executor.lines} lines); both exited 0")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
