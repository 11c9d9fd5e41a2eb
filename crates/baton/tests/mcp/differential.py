"""One scripted sequence of operations through each of Baton's five ways in — the command
line, the command line over a server (BATON_URL), REST, MCP over stdio and MCP over HTTP
(both through the official Python SDK) — each on a store of its own set up alike. Every
step must be taken or refused alike on every edge, and the stores must end alike: the same
documents (state, inboxes, outboxes, the order, the security events) and the same exported
log, ids, times and key hashes aside.

Usage: python differential.py CONFIG_JSON
CONFIG_JSON: {"baton": EXE, "edges": [{"edge": NAME, "db": URL, "base": URL|null,
              "tokens": {PARTICIPANT: TOKEN}}]}
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from contextlib import AsyncExitStack

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError

from round import check, order_doc, report_doc

PROJECT = "shop"
ORDER = "wo_diff_1"
# An order that waits on ORDER (`x-baton.after`): offered once ORDER is approved.
AFTER = "wo_diff_2"
# Past a double's exact integers, within 64 bits: kept exactly. Past 64 bits: refused.
BIG = 9007199254740993
HUGE = 123456789012345678901234567890


def waiting_doc(id: str, after: str) -> dict:
    """A Work Order like ORDER's that waits on `after`."""
    order = order_doc(id)
    order["x-baton"]["after"] = [after]
    return order


# (who, operation, arguments, taken?) — `$name` in an argument is an earlier step's id.
SCRIPT: list[tuple[str, str, dict, bool]] = [
    ("planner", "decide", {"text": "Keep filters in the query", "why": "one code path"}, True),
    ("planner", "decide", {"text": "Filters live in a view", "why": "the report reuses them",
                           "supersedes": "D-1"}, True),
    ("impl-1", "constrain", {"text": "No network in CI", "tried": "downloading fixtures",
                             "result": "connection refused"}, True),
    ("obs", "focus", {"text": "Ship the export"}, False),
    ("obs", "decide", {"text": "x", "why": "y"}, False),
    ("planner", "send", {"to": ["impl-1"], "type": "request", "topic": "csv-export",
                         "body": "Export with filters", "as": "m1"}, True),
    ("impl-1", "inbox", {}, True),
    ("impl-1", "show", {"id": "$m1"}, True),
    ("impl-1", "note", {"text": "Parser assumes UTF-8", "subject": "$m1"}, True),
    ("impl-1", "reply", {"id": "$m1", "body": "On it", "as": "m2"}, True),
    ("planner", "show", {"id": "$m2"}, True),
    ("planner", "send", {"to": ["impl-1"], "type": "info", "topic": "csv-export",
                         "body": "Fixtures land Monday", "as": "m3"}, True),
    ("impl-1", "show", {"id": "$m3"}, True),
    ("impl-1", "ack", {"id": "$m3"}, True),
    ("impl-1", "complete", {"id": "$m1", "note": "Fixed in abc123"}, True),
    ("planner", "outbox", {}, True),
    ("planner", "complete", {"id": "$m1"}, True),
    ("planner", "archive", {"id": "$m3"}, False),
    ("planner", "send", {"to": ["impl-1"], "type": "request", "topic": "csv-export",
                         "body": "Also the dates", "as": "m4"}, True),
    ("impl-1", "hand_back", {"id": "$m4", "reason": "No fixture for the dates"}, False),
    ("impl-1", "show", {"id": "$m4"}, True),
    ("impl-1", "hand_back", {"id": "$m4", "reason": "No fixture for the dates"}, True),
    ("impl-1", "complete", {"id": "nosuchmessage"}, False),
    ("obs", "send", {"to": ["impl-1"], "type": "message", "topic": "csv-export",
                     "body": "hello"}, False),
    ("impl-1", "receipt_write", {"step": "export", "artifact": "https://ci.example.org/b/1"}, True),
    ("planner", "order_create", {"document": order_doc(ORDER)}, True),
    ("impl-1", "order", {"action": "accept", "id": ORDER}, True),
    ("impl-1", "order", {"action": "start", "id": ORDER}, True),
    ("impl-1", "order", {"action": "approve", "id": ORDER}, False),
    ("impl-1", "order", {"action": "report", "id": ORDER, "document": report_doc(ORDER)}, True),
    ("planner", "order_show", {"id": ORDER}, True),
    ("planner", "order_create", {"document": waiting_doc(AFTER, ORDER)}, True),
    ("impl-1", "order", {"action": "accept", "id": AFTER}, False),
    ("planner", "order", {"action": "approve", "id": ORDER}, True),
    ("impl-1", "order", {"action": "accept", "id": AFTER}, True),
    ("planner", "decide", {"text": " ", "why": "w"}, False),
    ("obs", "inbox", {}, True),
    ("planner", "send", {"to": ["impl-1"], "type": "message", "topic": "csv-export",
                         "payload": {"n": HUGE}}, False),
    ("planner", "send", {"to": ["impl-1"], "type": "message", "topic": "csv-export",
                         "payload": {"n": BIG, "note": "kept exactly"}, "as": "m5"}, True),
    ("impl-1", "show", {"id": "$m5"}, True),
    ("obs", "constrain", {"text": "x", "tried": "y", "result": "z"}, False),
    ("impl-1", "need", {"text": "Which fixture is canonical?", "order": ORDER}, True),
    ("impl-1", "need", {"text": " "}, False),
    ("planner", "send", {"to": ["role:executor"], "type": "request", "topic": "csv-export",
                         "body": "Whoever is free: the dates", "as": "m6"}, True),
    ("planner", "send", {"to": ["role:nobody"], "type": "request", "topic": "csv-export",
                         "body": "x"}, False),
    ("obs", "next", {}, False),
    ("impl-1", "next", {}, True),
    ("impl-1", "next", {}, False),
]


def resolve(args: dict, ids: dict) -> dict:
    out = {}
    for k, v in args.items():
        if k == "as":
            continue
        out[k] = ids[v[1:]] if isinstance(v, str) and v.startswith("$") else v
    return out


def cli_args(op: str, a: dict) -> tuple[list[str], str | None]:
    """The command line of `op`, and what goes on its stdin."""
    if op == "decide":
        return ["decide", a["text"], "--why", a["why"]] + (
            ["--supersedes", a["supersedes"]] if "supersedes" in a else []), None
    if op == "constrain":
        return ["constrain", a["text"], "--tried", a["tried"], "--result", a["result"]], None
    if op == "focus":
        return ["focus", "set", a["text"]], None
    if op == "note":
        return ["note", a["text"], "--subject", a["subject"]], None
    if op == "send":
        line = ["send", "--to", ",".join(a["to"]), "--type", a["type"], "--topic", a["topic"]]
        if "payload" in a:
            return line + ["--payload", "-"], json.dumps(a["payload"])
        return line + ["--body", a["body"]], None
    if op == "reply":
        return ["send", "--reply-to", a["id"], "--body", a["body"]], None
    if op in ("inbox", "outbox"):
        return [op], None
    if op in ("show", "ack", "archive"):
        return [op, a["id"]], None
    if op == "complete":
        return ["complete", a["id"]] + (["--note", a["note"]] if "note" in a else []), None
    if op == "hand_back":
        return ["hand-back", a["id"], "--reason", a["reason"]], None
    if op == "receipt_write":
        return ["receipt", "write", "--step", a["step"], "--artifact", a["artifact"]], None
    if op == "order_create":
        return ["order", "create", "-"], json.dumps(a["document"])
    if op == "order":
        if "document" in a:
            return ["order", a["action"], a["id"], "-"], json.dumps(a["document"])
        return ["order", a["action"], a["id"]], None
    if op == "order_show":
        return ["order", "show", a["id"]], None
    if op == "need":
        return ["need", a["text"]] + (["--order", a["order"]] if "order" in a else []), None
    if op == "next":
        return ["next"] + (["--topic", a["topic"]] if "topic" in a else []), None
    raise AssertionError(op)


def rest_request(op: str, a: dict) -> tuple[str, str, dict | None]:
    """The method, the path under the project and the body of `op`."""
    body = {k: v for k, v in a.items()}
    simple = {"decide": "/decisions", "constrain": "/constraints", "focus": "/focus",
              "note": "/notes", "send": "/messages", "receipt_write": "/receipts",
              "need": "/needs"}
    if op in simple:
        return "POST", simple[op], body
    if op == "reply":
        return "POST", "/messages", {"reply_to": a["id"], "body": a["body"]}
    if op in ("inbox", "outbox"):
        return "GET", f"/{op}", None
    if op == "show":
        return "GET", f"/messages/{a['id']}", None
    if op in ("ack", "complete", "hand_back", "archive"):
        return "POST", f"/messages/{a['id']}/{op}", {k: v for k, v in a.items() if k != "id"}
    if op == "order_create":
        return "POST", "/orders", {"action": "create", "document": a["document"]}
    if op == "order":
        return "POST", "/orders", body
    if op == "order_show":
        return "GET", f"/orders/{a['id']}", None
    if op == "next":
        return "POST", "/pool/next", body
    raise AssertionError(op)


def mcp_call(op: str, a: dict) -> tuple[str, dict]:
    if op == "order_create":
        return "order", {"action": "create", "document": a["document"]}
    return op, a


class Cli:
    """`baton` on this machine's store (`--db`), or over a server (BATON_URL)."""

    def __init__(self, baton: str, edge: dict, remote: bool):
        self.baton, self.edge, self.remote = baton, edge, remote

    async def run(self, who: str, op: str, a: dict) -> tuple[bool, dict]:
        line, stdin = cli_args(op, a)
        env = {k: v for k, v in os.environ.items()
               if k not in ("BATON_PROJECT", "BATON_AS", "BATON_URL", "BATON_KEY", "BATON_DB")}
        if self.remote:
            env["BATON_URL"] = f"{self.edge['base']}/v1/projects/{PROJECT}"
            env["BATON_KEY"] = self.edge["tokens"][who]
            cmd = [self.baton, "--json", *line]
        else:
            cmd = [self.baton, "--json", "--db", self.edge["db"], "--project", PROJECT,
                   "--as", who, *line]
        out = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env,
                             cwd=tempfile.gettempdir(), timeout=60)
        if out.returncode != 0:
            return False, {"exit": out.returncode, "stderr": out.stderr}
        return True, json.loads(out.stdout)


class Rest:
    def __init__(self, edge: dict):
        self.edge = edge

    async def run(self, who: str, op: str, a: dict) -> tuple[bool, dict]:
        method, path, body = rest_request(op, a)
        url = f"{self.edge['base']}/v1/projects/{PROJECT}{path}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method, headers={
            "Authorization": f"Bearer {self.edge['tokens'][who]}",
            "Content-Type": "application/json",
        })
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return True, json.loads(answer.read())
        except urllib.error.HTTPError as e:
            return False, {"status": e.code, "body": e.read().decode()}


class Mcp:
    """One MCP session per participant, over stdio (`baton mcp`) or HTTP (`/mcp`)."""

    def __init__(self, baton: str, edge: dict, stack: AsyncExitStack, http: bool):
        self.baton, self.edge, self.stack, self.http = baton, edge, stack, http
        self.sessions: dict[str, ClientSession] = {}

    async def session(self, who: str) -> ClientSession:
        if who in self.sessions:
            return self.sessions[who]
        if self.http:
            client = await self.stack.enter_async_context(create_mcp_http_client(
                headers={"Authorization": f"Bearer {self.edge['tokens'][who]}"}))
            streams = await self.stack.enter_async_context(streamable_http_client(
                f"{self.edge['base']}/v1/projects/{PROJECT}/mcp", http_client=client))
        else:
            params = StdioServerParameters(
                command=self.baton,
                args=["--db", self.edge["db"], "--project", PROJECT, "--as", who, "mcp"],
                cwd=tempfile.gettempdir(),
            )
            streams = await self.stack.enter_async_context(stdio_client(params))
        session = await self.stack.enter_async_context(ClientSession(streams[0], streams[1]))
        await session.initialize()
        self.sessions[who] = session
        return session

    async def run(self, who: str, op: str, a: dict) -> tuple[bool, dict]:
        tool, arguments = mcp_call(op, a)
        session = await self.session(who)
        try:
            result = await session.call_tool(tool, arguments)
        except MCPError as e:
            # Refused at the boundary, before any tool: a protocol error.
            return False, {"error": str(e)}
        if result.is_error:
            return False, {"text": " ".join(getattr(c, "text", "") for c in result.content)}
        return True, result.structured_content or {}


def cli_json(baton: str, db: str, *line: str, who: str | None = None) -> str:
    cmd = [baton, "--json", "--db", db, "--project", PROJECT]
    if who:
        cmd += ["--as", who]
    out = subprocess.run(cmd + list(line), capture_output=True, text=True, timeout=60,
                         cwd=tempfile.gettempdir())
    check(out.returncode == 0, f"{line}: {out.stderr}")
    return out.stdout


ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}\b")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
HEX = re.compile(r"\b[0-9a-f]{64}\b")
CLOCK_KEYS = ("at", "ts", "deadline", "age_ms")


def clock(key: str) -> bool:
    return key in CLOCK_KEYS or key.endswith("_at")


def normalize(text: str) -> object:
    """The text with ids, times and hashes replaced by their order of appearance."""
    seen: dict[str, str] = {}

    def name(kind: str):
        def sub(m: re.Match) -> str:
            return seen.setdefault(m.group(0), f"<{kind}{len(seen)}>")
        return sub

    text = ULID.sub(name("id"), text)
    text = TIME.sub("<time>", text)
    text = HEX.sub(name("hash"), text)
    text = re.sub(r"baton_[A-Za-z0-9_]+", "<token>", text)

    def strip(v: object) -> object:
        if isinstance(v, dict):
            return {k: ("<clock>" if clock(k) and isinstance(v[k], (int, float)) else strip(x))
                    for k, x in v.items()}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    lines = [strip(json.loads(line)) for line in text.splitlines() if line.strip()]
    return lines


def documents(baton: str, db: str) -> dict[str, object]:
    """What each store ends with, read alike through this machine's command line."""
    return {
        "state": normalize(cli_json(baton, db, "state", "show")),
        "impl-1 inbox": normalize(cli_json(baton, db, "inbox", "--all", who="impl-1")),
        "planner inbox": normalize(cli_json(baton, db, "inbox", "--all", who="planner")),
        "planner outbox": normalize(cli_json(baton, db, "outbox", "--all", who="planner")),
        "order": normalize(cli_json(baton, db, "order", "show", ORDER)),
        "queue": normalize(cli_json(baton, db, "queue")),
        "security events": normalize(cli_json(baton, db, "security-events")),
        "log": normalize(cli_json(baton, db, "export")),
    }


def first_difference(a: object, b: object, at: str = "") -> str:
    if type(a) is not type(b):
        return f"{at}: {a!r} != {b!r}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{at}/{k}: only in {'the first' if k in a else 'the second'}"
            d = first_difference(a[k], b[k], f"{at}/{k}")
            if d:
                return d
        return ""
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{at}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{at}/{i}")
            if d:
                return d
        return ""
    return "" if a == b else f"{at}: {a!r} != {b!r}"


async def through(edge: dict, runner) -> None:
    ids: dict[str, str] = {}
    for n, (who, op, args, taken) in enumerate(SCRIPT, start=1):
        ok, answer = await runner.run(who, op, resolve(args, ids))
        check(ok == taken, f"{edge['edge']}: step {n} ({who} {op}) was "
                           f"{'taken' if ok else 'refused'}: {answer}")
        if ok and "as" in args:
            ids[args["as"]] = answer["id"]
        if ok and op == "show" and args["id"] == "$m5":
            check(answer["payload"]["n"] == BIG, f"{edge['edge']}: {answer}")


async def main(config: dict) -> None:
    baton = config["baton"]
    for edge in config["edges"]:
        async with AsyncExitStack() as stack:
            runner = {
                "cli": lambda: Cli(baton, edge, remote=False),
                "cli-over-server": lambda: Cli(baton, edge, remote=True),
                "rest": lambda: Rest(edge),
                "mcp-stdio": lambda: Mcp(baton, edge, stack, http=False),
                "mcp-http": lambda: Mcp(baton, edge, stack, http=True),
            }[edge["edge"]]()
            await through(edge, runner)
        print(f"differential: {edge['edge']}: {len(SCRIPT)} operations taken or refused as scripted")
    first, *rest = config["edges"]
    expected = documents(baton, first["db"])
    for edge in rest:
        got = documents(baton, edge["db"])
        for name in expected:
            difference = first_difference(expected[name], got[name])
            check(not difference, f"{edge['edge']} ends unlike {first['edge']} in {name}: {difference}")
    refused = sum(1 for s in SCRIPT if not s[3])
    events = len(expected["log"])
    print(f"differential: {len(SCRIPT)} operations ({refused} refused) through "
          f"{len(config['edges'])} edges end with the same documents and the same "
          f"{events}-event log")


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
