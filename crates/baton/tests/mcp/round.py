"""The checks both MCP clients run against `baton mcp`, whatever carries the JSON-RPC.

A connection offers `list_tools()` (tools as wire dicts, camelCase), `call(name,
arguments)` returning a `Result`, and the resume packet's other two doors:
`list_prompts()`, `get_prompt(name, arguments)`, `list_resources()` and
`read_resource(uri)`. `sdk_client.py` drives the official Python SDK on protocol
2025-11-25, `raw_client.py` writes raw JSON-RPC lines on 2025-06-18. The project's state is
checked through the CLI (`Cli`), as a person would. Everything here is plain assertions: a
failure raises with a message naming the check.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from jsonschema import Draft202012Validator


def check(condition: object, message: object = "check failed") -> None:
    """An assertion that `python -O` and PYTHONOPTIMIZE cannot remove (a bare `assert`
    vanishes under them, and the test would pass having checked nothing)."""
    if not condition:
        raise AssertionError(message)

# What the operations declare of the tools (`baton_app::ops`), passed by the Rust test
# that runs these scripts: every tool, the role profiles a write key gets over HTTP (as
# `baton mcp` gives them on stdio), the tools that change nothing, and the idempotent ones
# of those that change something.
DECLARED = json.loads(os.environ["BATON_DECLARED"])
TOOLS = set(DECLARED["tools"])
PROFILES = {role: set(tools) for role, tools in DECLARED["profiles"].items()}
READ_ONLY = set(DECLARED["read_only"])
IDEMPOTENT = set(DECLARED["idempotent"])
# `baton resume`'s default cap, and what every resume packet starts its first section with.
RESUME_BYTES = 6000
OWED = "## What I owe"
RESUME_URI = "baton://resume"


@dataclass
class Result:
    structured: Any
    text: str
    is_error: bool


class Conn(Protocol):
    async def list_tools(self) -> list[dict]: ...
    async def call(self, name: str, arguments: dict) -> Result: ...
    async def list_prompts(self) -> list[dict]: ...
    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> list[str]: ...
    async def list_resources(self) -> list[dict]: ...
    async def read_resource(self, uri: str) -> list[dict]: ...


class Cli:
    """`baton --json` in the project, as one participant or none."""

    def __init__(self, baton: str, project: str):
        self.baton = baton
        self.project = project

    def json(self, who: str | None, *args: str) -> Any:
        command = [self.baton, "--project", self.project, "--json"]
        if who:
            command += ["--as", who]
        out = subprocess.run(command + list(args), capture_output=True, text=True, timeout=60)
        check(out.returncode == 0, f"baton {' '.join(args)}: exit {out.returncode}: {out.stderr}")
        return json.loads(out.stdout)

    async def json_async(self, who: str | None, *args: str) -> Any:
        return await asyncio.to_thread(self.json, who, *args)


def check_tools(tools: list[dict], expected: set[str] = TOOLS) -> dict[str, dict]:
    """Every tool: the expected set (every tool unless told), a short description, typed
    input and output schemas, honest annotations. Returns the tools by name."""
    by_name = {t["name"]: t for t in tools}
    check(set(by_name) == expected, f"tools differ: {sorted(by_name)}")
    for name, tool in by_name.items():
        description = tool.get("description") or ""
        check(0 < len(description) <= 120, f"{name}: description of {len(description)} chars")
        for key in ("inputSchema", "outputSchema"):
            schema = tool.get(key)
            check(isinstance(schema, dict) and schema.get("type") == "object", f"{name}: {key} is not an object schema: {schema!r}")
            Draft202012Validator.check_schema(schema)
        check(tool["inputSchema"].get("additionalProperties") is False, f"{name}: unknown arguments must be refused")
        hints = tool.get("annotations") or {}
        check(hints.get("openWorldHint") is False, f"{name}: {hints}")
        if name in READ_ONLY:
            check(hints.get("readOnlyHint") is True, f"{name} reads only: {hints}")
        else:
            check(not hints.get("readOnlyHint"), f"{name} writes: {hints}")
            check(hints.get("destructiveHint") is False, f"{name} only adds: {hints}")
            check(bool(hints.get("idempotentHint")) == (name in IDEMPOTENT), f"{name}: idempotentHint {hints}")
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
        check(not r.is_error, f"{self.who} {name} {arguments} failed: {r.text}")
        errors = sorted(self.validators[name].iter_errors(r.structured), key=str)
        check(not errors, f"{self.who} {name}: output does not match its outputSchema: "
            f"{[e.message for e in errors]} in {r.structured!r}")
        check(json.loads(r.text) == r.structured, f"{name}: text copy differs")
        self.validated.add(name)
        return r.structured

    async def refused(self, name: str, **arguments: Any) -> str:
        r = await self.conn.call(name, arguments)
        check(r.is_error, f"{self.who} {name} {arguments} should be an isError result: {r}")
        check(r.text, f"{name}: an isError result must say why")
        return r.text


def ids(listing: dict) -> list[str]:
    return [row["id"] for row in listing["items"]]


def row(listing: dict, id: str) -> dict:
    found = [r for r in listing["items"] if r["id"] == id]
    check(found, f"{id} not in {ids(listing)}")
    return found[0]


async def full_round(planner: Checked, executor: Checked) -> None:
    """Planner → executor and back, through every tool, then the refusals."""
    sent = await planner.ok(
        "send", to=["impl-1"], type="request", topic="csv-export",
        body="CSV export drops the active filters",
    )
    req = sent["id"]
    check(sent["duplicate"] is False, 'sent["duplicate"] is False')
    again = await planner.ok(
        "send", to=["impl-1"], type="request", topic="csv-export",
        body="CSV export drops the active filters",
    )
    check(again == {"id": req, "duplicate": True}, again)

    inbox = await executor.ok("inbox")
    r = row(inbox, req)
    check((r["status"], r["from"], r["type"]) == ("pending", "planner", "request"), r)
    check(r["to"] == ["impl-1"] and r["request_status"] == "open", r)

    cut = await executor.ok("show", id=req, max_bytes=5)
    check("payload" not in cut and cut["truncated"]["shown_bytes"] <= 5, cut)
    check(len(cut["payload_text"].encode()) == cut["truncated"]["shown_bytes"], cut)
    full_text = json.dumps({"body": "CSV export drops the active filters"}, separators=(",", ":"))
    check(cut["truncated"]["total_bytes"] == len(full_text), cut)
    check(full_text.startswith(cut["payload_text"]), cut)
    shown = await executor.ok("show", id=req)
    check(shown["payload"] == {"body": "CSV export drops the active filters"}, shown)
    check("truncated" not in shown and shown["status"] == "delivered", shown)

    question = await executor.ok("reply", id=req, body="Which filters: date or status?")
    check(question["duplicate"] is False, 'question["duplicate"] is False')
    thread = await planner.ok("thread", id=req)
    check(ids(thread) == [req, question["id"]], thread)
    q = thread["items"][1]
    check((q["reply_to"], q["to"], q["topic"], q["type"], q["depth"]) == (
        req, ["planner"], "csv-export", "message", 1), q)
    # A status never moved since the send was set at the send's time.
    check(q["recipients"] == [{"name": "planner", "status": "pending",
                               "changed_at": q["created_at"]}], q)

    done = await executor.ok("complete", id=req, note="Fixed in 4f2a91c; regression test added")
    check((done["end"], done["from"], done["status"]) == ("recipient", "delivered", "completed"), done)
    check(done["reply"], done)

    outbox = await planner.ok("outbox")
    r = row(outbox, req)
    check((r["status"], r["request_status"], r["replies"]) == ({"impl-1": "completed"}, "open", 2), r)
    mine = await planner.ok("complete", id=req)
    check((mine["end"], mine["status"]) == ("sender", "completed"), mine)
    r = row(await planner.ok("outbox"), req)
    check((r["status"], r["request_status"]) == ({"impl-1": "completed"}, "completed"), r)
    await planner.ok("archive", id=req)
    check(req not in ids(await planner.ok("outbox")), 'req not in ids(await planner.ok("outbox"))')
    check(row(await planner.ok("outbox", all=True), req)["request_status"] == "archived", 'row(await planner.ok("outbox", all=True), req)["request_status"] == "archived"')

    owed = await planner.ok("inbox")
    check(set(ids(owed)) == {question["id"], done["reply"]}, owed)
    await planner.ok("show", id=question["id"])
    acked = await planner.ok("ack", id=question["id"])
    check(acked["status"] == "acknowledged", acked)
    await planner.ok("archive", id=question["id"])

    first = await planner.ok("search", topic="csv-export", limit=2)
    check(len(first["items"]) == 2 and first["next"], first)
    rest = await planner.ok("search", topic="csv-export", limit=2, cursor=first["next"])
    check(rest.get("next") is None and len(rest["items"]) == 1, rest)
    pending = await planner.ok("search", status="pending", since="1h")
    check(ids(pending) == [done["reply"]], pending)

    blocked = (await planner.ok(
        "send", to=["impl-1"], type="request", topic="csv-export", body="Also add XLSX",
    ))["id"]
    await executor.ok("show", id=blocked)
    back = await executor.ok("hand_back", id=blocked, reason="No XLSX library is allowed")
    check(back["status"] == "handed_back" and back["reply"], back)

    # Refusals come back as isError results that say what to do next.
    text = await executor.refused("complete", id=req)
    check("completed" in text and "allowed next: `archive`" in text, text)
    unseen = (await planner.ok(
        "send", to=["impl-1"], type="request", topic="csv-export", body="Unseen",
    ))["id"]
    text = await executor.refused("complete", id=unseen)
    check("pending" in text and "`show`" in text, text)
    text = await executor.refused("show", id="01NOSUCHMESSAGE")
    check("no message 01NOSUCHMESSAGE" in text and "check `id`" in text, text)
    text = await planner.refused("send", to=["ghost"], topic="csv-export", body="hi")
    check("ghost" in text and "registered: impl-1, planner" in text, text)
    text = await planner.refused("send", to=["impl-1"], topic="x", body="a", payload={"b": 1})
    check("`body` or `payload`" in text, text)
    text = await planner.refused("send", to=["impl-1"], body="no topic")
    check("topic" in text, text)
    text = await planner.refused("search", limit=0)
    check("`limit`" in text, text)
    text = await planner.refused("hand_back", id=unseen, reason="not mine")
    check("as its sender you complete or archive" in text, text)

    # Reservations: held before editing, refused in another's way, released.
    held = await executor.ok("reserve", paths=["src/mcp/**"], reason="the export")
    rid = held["items"][0]["id"]
    check((held["items"][0]["holder"], held["items"][0]["status"]) == ("impl-1", "live"), held)
    text = await planner.refused("reserve", paths=["src/mcp/x.rs"])
    check("impl-1" in text and rid in text and "nothing was reserved" in text, text)
    listed = await planner.ok("reservations")
    check([r["id"] for r in listed["items"]] == [rid], listed)
    released = await executor.ok("release", names=[rid])
    check(released["items"][0]["status"] == "released", released)
    text = await executor.refused("release")
    check("holds no live reservation" in text, text)

    # A pool: a request to the executors' role, claimed by `next`; then nothing is ready.
    pooled = (await planner.ok(
        "send", to=["role:executor"], type="request", topic="pool", body="take me"
    ))["id"]
    taken = await executor.ok("next")
    check((taken["item"]["message"], taken["item"]["claimed_by"]) == (pooled, "impl-1"), taken)
    text = await executor.refused("next")
    check("nothing is ready for impl-1 in pool role:executor" in text, text)


# The shared Work Order and Work Report every test reads (`baton-core/tests/fixtures`).
FIXTURES = Path(__file__).resolve().parents[3] / "baton-core" / "tests" / "fixtures"


def order_doc(id: str) -> dict:
    """A Work Order from the planner to impl-1 that passes every rule, the `x-baton`
    contract included (the project requires it by default)."""
    order = json.loads((FIXTURES / "work-order.json").read_text())
    order["id"] = id
    order["escalate_to"] = "planner"
    return order


def report_doc(order_id: str) -> dict:
    """A `done` report by impl-1 on `order_id`, with its evidence."""
    report = json.loads((FIXTURES / "work-report.json").read_text())
    report["order_id"] = order_id
    return report


async def order_round(planner: Checked, executor: Checked, cli: Cli) -> None:
    """A Work Order through `order` and `order_show`: the planner offers, the executor
    accepts, starts and reports while the planner waits, the planner approves; each
    refusal says what to do next, and the CLI sees what the tools did."""
    wo = "wo_mcp_1"
    made = (await planner.ok("order", action="create", document=order_doc(wo)))["order"]
    check((made["id"], made["status"], made["seq"]) == (wo, "offered", 1), made)
    check(made["allowed"] == ["accept", "decline", "cancel"], made)

    text = await executor.refused("order", action="approve", id=wo)
    check("impl-1 may not approve" in text and "only its sender (planner) may" in text, text)
    text = await executor.refused("order", action="accept", id=wo, text="yes")
    check("`text` is not for action `accept`" in text, text)
    text = await executor.refused("order", action="start", id=wo)
    check("it is offered (accept it first)" in text and "accept, decline, cancel" in text, text)
    bad = order_doc("wo_mcp_bad")
    bad["criteria"] = []
    del bad["x-baton"]["execution"]
    text = await planner.refused("order", action="create", document=bad)
    check("nothing was stored" in text and "at `document/criteria`" in text, text)
    check("B9 at `document/x-baton/execution`" in text, text)
    text = await executor.refused("order", action="create", document=order_doc("wo_mcp_2"))
    check("must be the acting identity (impl-1)" in text, text)

    shown = await executor.ok("order_show", id=wo)
    check(shown["document"]["goal"] == "Keep the filters in the CSV export", shown)
    check(steps(shown) == [(1, "create", "offered", "planner")], shown)
    check("report" not in shown, shown)

    accepted = (await executor.ok("order", action="accept", id=wo))["order"]
    check((accepted["status"], accepted["seq"]) == ("accepted", 2), accepted)
    started = (await executor.ok("order", action="start", id=wo, expect_seq=2))["order"]
    check((started["status"], started["seq"]) == ("working", 3), started)
    text = await executor.refused("order", action="report", id=wo, document={"status": "done"})
    check("is refused as a Work Report" in text and "`document" in text, text)

    # The planner waits for the report while the executor (another process) writes it.
    waited, reported = await asyncio.gather(
        planner.ok("order_show", id=wo, since=3, timeout_seconds=60),
        executor.ok("order", action="report", id=wo, document=report_doc(wo)),
    )
    reported = reported["order"]
    check((reported["status"], reported["seq"]) == ("submitted", 4), reported)
    check(reported["allowed"] == ["approve", "rework", "cancel"], reported)
    check([s[1] for s in steps(waited)] == ["report_done"], waited)
    check(waited["report"]["result"] == {"summary": "Filters kept"}, waited)

    text = await executor.refused("order", action="approve", id=wo)
    check("only its sender (planner) may" in text, text)
    # The executor raises a need on the order; the planner's queue shows it (the newest
    # signal about the order).
    need = await executor.ok("need", text="which fixture is canonical?", order=wo)
    check(need["item"].startswith("need:"), need)
    queue = await planner.ok("queue")
    lanes = {lane["lane"]: lane for lane in queue["lanes"]}
    check([i["id"] for i in lanes["needs"]["items"]] == [need["item"]], queue)
    check(lanes["needs"]["items"][0]["source"] == "need_by_hand", queue)
    text = await planner.refused("queue", lane="everything")
    check("`lane`" in text, text)
    text = await planner.refused("order", action="approve", id=wo, expect_seq=3)
    check("moved on" in text and "`order_show`" in text and "`expect_seq`" in text, text)
    approved = (await planner.ok("order", action="approve", id=wo, expect_seq=4))["order"]
    check((approved["status"], approved["seq"], approved["allowed"]) == ("approved", 5, []), approved)

    final = await planner.ok("order_show", id=wo)
    check(final["order"]["status"] == "approved" and final["order"]["seq"] == 5, final)
    seqs = [s[0] for s in steps(final)]
    check(seqs == sorted(seqs) == [1, 2, 3, 4, 5], final)
    check([s[1:] for s in steps(final)] == [
        ("create", "offered", "planner"), ("accept", "accepted", "impl-1"),
        ("start", "working", "impl-1"), ("report_done", "submitted", "impl-1"),
        ("approve", "approved", "planner")], final)
    check(final["report"]["status"] == "done", final)
    text = await planner.refused("order_show", id=wo, since=5, timeout_seconds=1)
    check("no step after seq 5" in text and "`order_show`" in text, text)
    text = await planner.refused("order", action="cancel", id=wo)
    check("it is approved" in text and "nothing (it is closed)" in text, text)

    cli_view = await cli.json_async(None, "order", "show", wo)
    check((cli_view["order"]["status"], cli_view["order"]["seq"]) == ("approved", 5), cli_view)


def steps(shown: dict) -> list[tuple]:
    """An order's steps among the events a view lists: (seq, action, status, by)."""
    return [(e["seq"], e.get("action", "create"), e.get("status", "offered"), e["actor"])
            for e in shown["events"] if e["kind"].startswith("order.")]


def all_validated(*conns: Checked) -> None:
    """Every tool's output was checked against its schema at least once."""
    validated = set().union(*(c.validated for c in conns))
    unchecked = TOOLS - validated
    check(not unchecked, f"no output of {sorted(unchecked)} was checked against its schema")


def without_clock(packet: str) -> str:
    """The packet less its second line (`generation N · TIME`), which names the moment it
    was read: two reads of one state differ there only."""
    lines = packet.splitlines()
    return "\n".join(lines[:1] + [line.split(" · ")[0] for line in lines[1:2]] + lines[2:])


async def memory_round(planner: Checked, executor: Checked, cli: Cli) -> None:
    """The resume packet, the project's state and receipts through the tools, checked
    through the CLI: what a tool records is what `baton state show` and `baton alerts`
    report."""
    project = Path(cli.project)
    packet = await executor.ok("resume")
    check(OWED in packet["text"], packet["text"])
    check(packet["bytes"] == len(packet["text"].encode()) <= RESUME_BYTES, packet["bytes"])
    cli_packet = await cli.json_async("impl-1", "resume")
    check(without_clock(packet["text"]) == without_clock(cli_packet["text"]), f"the tool and `baton resume` differ:\n{packet['text']}\n---\n{cli_packet['text']}")
    small = await executor.ok("resume", max_bytes=300)
    check(small["bytes"] <= 300 and len(small["text"].encode()) == small["bytes"], small)

    focus = await planner.ok("focus", text="Ship the CSV export fix")
    check(focus["recorded"] == ["focus"], focus)
    first = await planner.ok("decide", text="Keep filters in the query", why="one code path")
    second = await planner.ok(
        "decide", text="Filters live in a view", why="the report reuses them",
        supersedes=first["recorded"][0],
    )
    check(second["generation"] > first["generation"], (first, second))
    constraint = await planner.ok(
        "constrain", text="No network in CI", tried="downloading fixtures",
        result="connection refused",
    )
    (project / "src").mkdir(exist_ok=True)
    (project / "src" / "export.rs").write_text("fn export() {}\n")
    on_path = await planner.ok("note", text="Parser assumes UTF-8", subject="src/export.rs")
    message = (await planner.ok(
        "send", to=["impl-1"], type="info", topic="fixtures", body="Fixtures land Monday",
    ))["id"]
    on_message = await planner.ok("note", text="Waiting on the fixtures", subject=message)

    state = await cli.json_async("planner", "state", "show")
    check(state["focus"] == "Ship the CSV export fix", state)
    decisions = {d["id"]: d for d in state["decisions"]}
    check(decisions[first["recorded"][0]]["superseded_by"] == second["recorded"][0], decisions)
    check(decisions[second["recorded"][0]]["text"] == "Filters live in a view", decisions)
    check(decisions[second["recorded"][0]]["written"]["actor"] == "planner", decisions)
    constraints = {c["id"]: c for c in state["constraints"]}
    check(constraints[constraint["recorded"][0]]["tried"] == "downloading fixtures", constraints)
    notes = {n["id"]: n for n in state["notes"]}
    check(notes[on_path["recorded"][0]]["subject"] == {"kind": "path", "id": "src/export.rs"}, notes)
    check(notes[on_message["recorded"][0]]["subject"] == {"kind": "record", "id": message}, notes)

    text = await planner.refused("decide", text="x", why="y", supersedes="D-99")
    check("no decision D-99" in text and "`resume`" in text, text)
    text = await planner.refused("decide", text="x", why=" ")
    check("`why` must not be empty" in text, text)
    text = await planner.refused("note", text="x", subject="src/missing.rs")
    check("`subject`" in text and "neither a message or order id" in text, text)
    text = await planner.refused("note", text="x", subject="..")
    check("`subject`" in text and "outside the project" in text, text)

    resumed = (await planner.ok("resume"))["text"]
    for shown in ("Ship the CSV export fix", "Filters live in a view", "No network in CI"):
        check(shown in resumed, f"{shown!r} missing from the packet:\n{resumed}")

    (project / "out").mkdir(exist_ok=True)
    (project / "out" / "report.csv").write_text("a,b\n1,2\n")
    written = await executor.ok(
        "receipt_write", step="export", artifact="out/report.csv", run="run-1",
    )
    shown = (await cli.json_async(None, "receipt", "show", "export"))["receipt"]
    written = written["receipt"]
    check((written["artifact"], written["hash"], written["size"], written["run"]) == (
        "out/report.csv", shown["hash"], 8, "run-1"), (written, shown))
    check(shown["written"]["actor"] == "impl-1", shown)
    waited = (await planner.ok("receipt_wait", step="export", timeout_seconds=1))["receipt"]
    check(waited == {**written, "written": waited["written"]}, (waited, written))
    check(waited["written"]["actor"] == "impl-1", waited)
    uri = await executor.ok("receipt_write", step="upload", artifact="s3://bucket/report.csv")
    uri = uri["receipt"]
    check("hash" not in uri and "size" not in uri and uri["artifact"] == "s3://bucket/report.csv", '"hash" not in uri and "size" not in uri and uri["artifact"] == "s3://bucket/report.csv"')

    # A receipt that lands while the tool waits is returned; its writer is another process.
    late, _ = await asyncio.gather(
        planner.ok("receipt_wait", step="render", timeout_seconds=60),
        cli.json_async("impl-1", "receipt", "write", "--step", "render", "--artifact", "s3://b/page"),
    )
    late = late["receipt"]
    check((late["step"], late["artifact"], late["written"]["actor"]) == ("render", "s3://b/page", "impl-1"), late)

    # A wait that runs out is an isError result, and raises one alert however often it misses.
    for _ in range(2):
        text = await planner.refused("receipt_wait", step="deploy", timeout_seconds=1)
        check('no receipt for step "deploy"' in text and "`receipt_write`" in text, text)
    alerts = (await cli.json_async(None, "alerts"))["items"]
    raised = [a for a in alerts if a["key"] == "receipt-missing:deploy"]
    check(len(raised) == 1, alerts)
    check(raised[0]["raised"]["actor"] == "planner", raised)
    check(raised[0]["message"] in (await planner.ok("resume"))["text"], 'raised[0]["message"] in (await planner.ok("resume"))["text"]')

    text = await planner.refused("receipt_wait", step="deploy", timeout_seconds=301)
    check("`timeout_seconds`" in text and "to 300" in text, text)
    text = await executor.refused("receipt_write", step="x", artifact="out/missing.bin")
    check("`artifact`" in text and "out/missing.bin" in text, text)


async def packet_doors(conn: Conn, tool: Checked) -> None:
    """The resume packet as the `resume` prompt and the baton://resume resource: the same
    packet the tool returns, within its cap."""
    prompts = {p["name"]: p for p in await conn.list_prompts()}
    check(set(prompts) == {"resume"}, prompts)
    check([a["name"] for a in prompts["resume"].get("arguments", [])] == ["max_bytes"], prompts)
    resources = {r["uri"]: r for r in await conn.list_resources()}
    check(set(resources) == {RESUME_URI}, resources)
    check(resources[RESUME_URI].get("mimeType") == "text/markdown", resources)

    packet = (await tool.ok("resume"))["text"]
    messages = await conn.get_prompt("resume", None)
    check(len(messages) == 1, messages)
    check(OWED in messages[0] and len(messages[0].encode()) <= RESUME_BYTES, messages[0])
    check(without_clock(messages[0]) == without_clock(packet), (messages[0], packet))
    small = await conn.get_prompt("resume", {"max_bytes": "200"})
    check(len(small[0].encode()) <= 200, small)
    contents = await conn.read_resource(RESUME_URI)
    check(len(contents) == 1 and contents[0]["uri"] == RESUME_URI, contents)
    check(contents[0].get("mimeType") == "text/markdown", contents)
    text = contents[0]["text"]
    check(OWED in text and len(text.encode()) <= RESUME_BYTES, text)
    check(without_clock(text) == without_clock(packet), (text, packet))
