"""The checks both MCP clients run against `baton mcp`, whatever carries the JSON-RPC.

A connection offers `list_tools()` (tools as wire dicts, camelCase) and
`call(name, arguments)` returning a `Result`; `sdk_client.py` drives the official Python
SDK on protocol 2025-11-25, `raw_client.py` writes raw JSON-RPC lines on 2025-06-18.
Everything here is plain assertions: a failure raises with a message naming the check.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from jsonschema import Draft202012Validator

TOOLS = {
    "inbox", "outbox", "show", "send", "reply", "ack", "complete", "hand_back",
    "archive", "search", "thread",
}
READ_ONLY = {"inbox", "outbox", "search", "thread"}
IDEMPOTENT = {"show", "ack", "complete", "hand_back", "archive"}
# The whole tools/list result is an agent's context cost (SPEC §8).
TOOLS_LIST_BUDGET = 12 * 1024


@dataclass
class Result:
    structured: Any
    text: str
    is_error: bool


class Conn(Protocol):
    async def list_tools(self) -> list[dict]: ...
    async def call(self, name: str, arguments: dict) -> Result: ...


def check_tools(tools: list[dict]) -> dict[str, dict]:
    """Every tool: the expected set, a short description, typed input and output schemas,
    honest annotations. Returns the tools by name."""
    by_name = {t["name"]: t for t in tools}
    assert set(by_name) == TOOLS, f"tools differ: {sorted(by_name)}"
    for name, tool in by_name.items():
        description = tool.get("description") or ""
        assert 0 < len(description) <= 120, f"{name}: description of {len(description)} chars"
        for key in ("inputSchema", "outputSchema"):
            schema = tool.get(key)
            assert isinstance(schema, dict) and schema.get("type") == "object", (
                f"{name}: {key} is not an object schema: {schema!r}"
            )
            Draft202012Validator.check_schema(schema)
        assert tool["inputSchema"].get("additionalProperties") is False, (
            f"{name}: unknown arguments must be refused"
        )
        hints = tool.get("annotations") or {}
        assert hints.get("openWorldHint") is False, f"{name}: {hints}"
        if name in READ_ONLY:
            assert hints.get("readOnlyHint") is True, f"{name} reads only: {hints}"
        else:
            assert not hints.get("readOnlyHint"), f"{name} writes: {hints}"
            assert hints.get("destructiveHint") is False, f"{name} only adds: {hints}"
            assert bool(hints.get("idempotentHint")) == (name in IDEMPOTENT), (
                f"{name}: idempotentHint {hints}"
            )
    return by_name


class Checked:
    """A connection whose every successful tool result is checked: structured content
    valid against the tool's declared output schema, and a text copy equal to it."""

    def __init__(self, conn: Conn, tools: dict[str, dict], who: str):
        self.conn = conn
        self.who = who
        self.validators = {
            name: Draft202012Validator(tool["outputSchema"]) for name, tool in tools.items()
        }
        self.validated: set[str] = set()

    async def ok(self, name: str, **arguments: Any) -> Any:
        r = await self.conn.call(name, arguments)
        assert not r.is_error, f"{self.who} {name} {arguments} failed: {r.text}"
        errors = sorted(self.validators[name].iter_errors(r.structured), key=str)
        assert not errors, (
            f"{self.who} {name}: output does not match its outputSchema: "
            f"{[e.message for e in errors]} in {r.structured!r}"
        )
        assert json.loads(r.text) == r.structured, f"{name}: text copy differs"
        self.validated.add(name)
        return r.structured

    async def refused(self, name: str, **arguments: Any) -> str:
        r = await self.conn.call(name, arguments)
        assert r.is_error, f"{self.who} {name} {arguments} should be an isError result: {r}"
        assert r.text, f"{name}: an isError result must say why"
        return r.text


def ids(listing: dict) -> list[str]:
    return [row["id"] for row in listing["items"]]


def row(listing: dict, id: str) -> dict:
    found = [r for r in listing["items"] if r["id"] == id]
    assert found, f"{id} not in {ids(listing)}"
    return found[0]


async def full_round(planner: Checked, executor: Checked) -> None:
    """Planner → executor and back, through every tool, then the refusals."""
    sent = await planner.ok(
        "send", to=["impl-1"], type="request", topic="csv-export",
        body="CSV export drops the active filters",
    )
    req = sent["id"]
    assert sent["duplicate"] is False
    again = await planner.ok(
        "send", to=["impl-1"], type="request", topic="csv-export",
        body="CSV export drops the active filters",
    )
    assert again == {"id": req, "duplicate": True}, again

    inbox = await executor.ok("inbox")
    r = row(inbox, req)
    assert (r["status"], r["from"], r["type"]) == ("pending", "planner", "request"), r
    assert r["to"] == {"impl-1": "pending"} and r["request_status"] == "open", r

    cut = await executor.ok("show", id=req, max_bytes=5)
    assert cut["payload"] is None and cut["truncated"]["shown_bytes"] <= 5, cut
    full_text = json.dumps({"body": "CSV export drops the active filters"}, separators=(",", ":"))
    assert cut["truncated"]["total_bytes"] == len(full_text), cut
    assert full_text.startswith(cut["truncated"]["text"]), cut
    shown = await executor.ok("show", id=req)
    assert shown["payload"] == {"body": "CSV export drops the active filters"}, shown
    assert shown["truncated"] is None and shown["status"] == "delivered", shown

    question = await executor.ok("reply", id=req, body="Which filters: date or status?")
    assert question["duplicate"] is False
    thread = await planner.ok("thread", id=req)
    assert ids(thread) == [req, question["id"]], thread
    q = thread["items"][1]
    assert (q["reply_to"], q["to"], q["topic"], q["type"], q["depth"]) == (
        req, {"planner": "pending"}, "csv-export", "message", 1), q

    done = await executor.ok("complete", id=req, note="Fixed in 4f2a91c; regression test added")
    assert (done["end"], done["from"], done["status"]) == ("recipient", "delivered", "completed"), done
    assert done["reply"], done

    outbox = await planner.ok("outbox")
    r = row(outbox, req)
    assert (r["to"], r["request_status"], r["replies"]) == ({"impl-1": "completed"}, "open", 2), r
    mine = await planner.ok("complete", id=req)
    assert (mine["end"], mine["status"]) == ("sender", "completed"), mine
    r = row(await planner.ok("outbox"), req)
    assert (r["to"], r["request_status"]) == ({"impl-1": "completed"}, "completed"), r
    await planner.ok("archive", id=req)
    assert req not in ids(await planner.ok("outbox"))
    assert row(await planner.ok("outbox", all=True), req)["request_status"] == "archived"

    owed = await planner.ok("inbox")
    assert set(ids(owed)) == {question["id"], done["reply"]}, owed
    await planner.ok("show", id=question["id"])
    acked = await planner.ok("ack", id=question["id"])
    assert acked["status"] == "acknowledged", acked
    await planner.ok("archive", id=question["id"])

    first = await planner.ok("search", topic="csv-export", limit=2)
    assert len(first["items"]) == 2 and first["next"], first
    rest = await planner.ok("search", topic="csv-export", limit=2, cursor=first["next"])
    assert rest["next"] == "" and len(rest["items"]) == 1, rest
    pending = await planner.ok("search", status="pending", since="1h")
    assert ids(pending) == [done["reply"]], pending

    blocked = (await planner.ok(
        "send", to=["impl-1"], type="request", topic="csv-export", body="Also add XLSX",
    ))["id"]
    await executor.ok("show", id=blocked)
    back = await executor.ok("hand_back", id=blocked, reason="No XLSX library is allowed")
    assert back["status"] == "handed_back" and back["reply"], back

    # Refusals come back as isError results that say what to do next.
    text = await executor.refused("complete", id=req)
    assert "completed" in text and "allowed next: `archive`" in text, text
    unseen = (await planner.ok(
        "send", to=["impl-1"], type="request", topic="csv-export", body="Unseen",
    ))["id"]
    text = await executor.refused("complete", id=unseen)
    assert "pending" in text and "`show`" in text, text
    text = await executor.refused("show", id="01NOSUCHMESSAGE")
    assert "no message 01NOSUCHMESSAGE" in text and "check `id`" in text, text
    text = await planner.refused("send", to=["ghost"], topic="csv-export", body="hi")
    assert "ghost" in text and "registered: impl-1, planner" in text, text
    text = await planner.refused("send", to=["impl-1"], topic="x", body="a", payload={"b": 1})
    assert "`body` or `payload`" in text, text
    text = await planner.refused("send", to=["impl-1"], body="no topic")
    assert "topic" in text, text
    text = await planner.refused("search", limit=0)
    assert "`limit`" in text, text
    text = await planner.refused("hand_back", id=unseen, reason="not mine")
    assert "as its sender you complete or archive" in text, text

    unchecked = TOOLS - planner.validated - executor.validated
    assert not unchecked, f"no output of {sorted(unchecked)} was checked against its schema"
