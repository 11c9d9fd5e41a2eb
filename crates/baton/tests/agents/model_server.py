"""A model stand-in on loopback for the real Claude Code and Codex binaries: the tests'
only stand-in (the agents and Baton are real). Python's standard library only.

It speaks each agent's streaming API:
- Claude Code: the Anthropic Messages API (`POST /v1/messages`, SSE when `stream` is
  true; `POST /v1/messages/count_tokens`), reached through ANTHROPIC_BASE_URL.
- Codex: the OpenAI Responses API (`POST /v1/responses`, SSE), reached through a model
  provider whose `base_url` is this server's `/v1`.

Every conversation follows one script, decided from what the request holds (so retries
and parallel requests answer alike):
1. A helper's conversation (its user text holds HELPER_MARK) ends with text.
2. A compaction (Codex's "CONTEXT CHECKPOINT COMPACTION" ask) gets a summary holding
   SUMMARY_MARK; a conversation such a summary stands for ends with text.
3. A conversation offered the Baton tool named by $MODEL_TOOL (the agent's name for it,
   exact or namespaced, e.g. `mcp__baton__inbox`) that has not called it yet: call it.
   Where the agent defers it (Claude Code's tool search lists it by name only), first
   load it with `ToolSearch`, as a model does.
4. Once the tool's result came back, when $MODEL_HELPER names the agent's helper tool
   (Claude Code's `Agent`, Codex's `spawn_agent`) and it is offered: call it once, with
   a prompt holding HELPER_MARK; for Codex, then `wait_agent` for the helper it spawned.
5. Otherwise: finish with FINAL_TEXT.

A request for another host, sent here as to a proxy (the tests make this server the
agents' HTTP(S)_PROXY), is refused and recorded as `outside`.

Each request is recorded as one JSON line in $MODEL_RECORD: the API, the tools offered,
what the server answered, and the tool results the agent sent back (by call id).

Usage: MODEL_RECORD=FILE MODEL_TOOL=inbox [MODEL_HELPER=Agent] [MODEL_DUMP=1] python3 model_server.py
(MODEL_DUMP=1 records each request's whole body too, to see what a new agent version sends.)
Prints the port it listens on (127.0.0.1), then serves until stdin closes.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RECORD = os.environ["MODEL_RECORD"]
TOOL = os.environ["MODEL_TOOL"]
HELPER = os.environ.get("MODEL_HELPER", "")
HELPER_MARK = "HELPER-TASK-7f3a"
# The call ids the script uses: the step is read back from the results that carry them.
BATON_CALL = "call_baton_1"
HELPER_CALL = "call_helper_1"
SEARCH_CALL = "call_search_1"
WAIT_CALL = "call_wait_1"
FINAL_TEXT = "BATON-ROUND-DONE"
COMPACT_ASK = "CONTEXT CHECKPOINT COMPACTION"
SUMMARY_MARK = "SUMMARY-OF-THE-ROUND"

lock = threading.Lock()


def record(entry: dict, body: dict | None = None) -> None:
    if body is not None and os.environ.get("MODEL_DUMP"):
        entry = dict(entry, body=body)
    with lock, open(RECORD, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
        f.flush()
        os.fsync(f.fileno())


def text_of(content) -> str:
    """The text of a content value (a string, or a list of blocks), flattened."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(c) for c in content)
    if isinstance(content, dict):
        for key in ("text", "content", "output"):
            if key in content:
                return text_of(content[key])
    return ""


def offered(names: list[str], tool: str) -> str | None:
    """The agent's name for `tool`: exact, or namespaced (`…__TOOL`)."""
    for name in names:
        if name == tool or name.endswith("__" + tool):
            return name
    return None


def decide(
    names: list[str], first_user: str, results: dict[str, str], said: str = "", last_user: str = ""
) -> tuple:
    """The script: ("text", words) or ("call", call id, tool name, arguments). `said` is
    the conversation's text, where an agent lists the tools it defers (Claude Code's tool
    search: their schemas are loaded by calling `ToolSearch` first, as a model does)."""
    if HELPER_MARK in first_user:
        return ("text", "helper finished")
    # A compaction (Codex asks for "a handoff summary" in a last user message): summarize,
    # and once a summary stands for the history, the round is done.
    if COMPACT_ASK in last_user:
        return ("text", f"{SUMMARY_MARK}: the Baton tool answered; nothing is left to do.")
    if SUMMARY_MARK in said:
        return ("text", FINAL_TEXT)
    tool = offered(names, TOOL)
    if tool is not None and BATON_CALL not in results:
        return ("call", BATON_CALL, tool, {})
    deferred = re.search(r"\b(mcp__[A-Za-z0-9_-]+__" + re.escape(TOOL) + r")\b", said)
    if tool is None and deferred and "ToolSearch" in names and SEARCH_CALL not in results:
        return ("call", SEARCH_CALL, "ToolSearch", {"query": "select:" + deferred.group(1)})
    helper = offered(names, HELPER) if HELPER else None
    if BATON_CALL in results and helper and HELPER_CALL not in results:
        return ("call", HELPER_CALL, helper, helper_arguments(HELPER))
    # Codex's spawn_agent answers at once with the helper's id: wait for it to finish.
    waiter = offered(names, "wait_agent") if HELPER == "spawn_agent" else None
    if waiter and HELPER_CALL in results and WAIT_CALL not in results:
        spawned = re.search(r'"agent_id"\s*:\s*"([^"]+)"', results[HELPER_CALL])
        if spawned:
            return ("call", WAIT_CALL, waiter, {"targets": [spawned.group(1)], "timeout_ms": 60000})
    return ("text", FINAL_TEXT)


def helper_arguments(tool: str) -> dict:
    prompt = f"{HELPER_MARK}: answer with one word."
    if tool == "spawn_agent":
        return {"message": prompt}
    # Claude Code's Agent (formerly Task) tool.
    return {"description": "A short helper", "prompt": prompt, "subagent_type": "general-purpose",
            "run_in_background": False}


# ---- Anthropic Messages -------------------------------------------------------------------


def anthropic_conversation(body: dict) -> tuple[list[str], str, dict[str, str], str]:
    names = [t.get("name", "") for t in body.get("tools") or []]
    said = []
    first_user = ""
    results: dict[str, str] = {}
    said = [text_of(body.get("system"))]
    for message in body.get("messages") or []:
        content = message.get("content")
        said.append(text_of(content))
        if message.get("role") != "user":
            continue
        if not first_user:
            first_user = text_of(content)
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    results[block.get("tool_use_id", "")] = text_of(block.get("content"))
    return names, first_user, results, "\n".join(said)


def anthropic_events(body: dict, answer: tuple) -> list[tuple[str, dict]]:
    usage_in = 100 + len(json.dumps(body)) // 40
    message = {
        "id": f"msg_{os.urandom(6).hex()}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "stand-in"),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": usage_in, "output_tokens": 1},
    }
    events = [("message_start", {"type": "message_start", "message": message})]
    if answer[0] == "text":
        events += [
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": answer[1]}}),
        ]
        stop = "end_turn"
    else:
        _, call, name, arguments = answer
        events += [
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "tool_use", "id": call,
                                                       "name": name, "input": {}}}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "input_json_delta",
                                               "partial_json": json.dumps(arguments)}}),
        ]
        stop = "tool_use"
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": 7}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


def anthropic_whole(events: list[tuple[str, dict]]) -> dict:
    """The same answer as one JSON message, for a request without `stream`."""
    message = events[0][1]["message"]
    block = events[1][1]["content_block"]
    delta = events[2][1]["delta"]
    if block["type"] == "text":
        block = {"type": "text", "text": delta["text"]}
    else:
        block = dict(block, input=json.loads(delta["partial_json"]))
    message["content"] = [block]
    message["stop_reason"] = events[4][1]["delta"]["stop_reason"]
    message["usage"]["output_tokens"] = 7
    return message


# ---- OpenAI Responses ---------------------------------------------------------------------


def openai_conversation(body: dict) -> tuple[list[str], str, dict[str, str], str]:
    """Tools are named as the model calls them: a namespace's tools (Codex puts MCP
    servers' tools and its sub-agent tools in namespaces) as `NAMESPACE__TOOL`."""
    names: list[str] = []
    for tool in body.get("tools") or []:
        if tool.get("type") == "namespace":
            for inner in tool.get("tools") or []:
                names.append(f"{tool.get('name', '')}__{inner.get('name', '')}")
        elif "name" in tool:
            names.append(tool["name"])
    users: list[str] = []
    results: dict[str, str] = {}
    for item in body.get("input") or []:
        kind = item.get("type")
        if kind in ("function_call_output", "custom_tool_call_output"):
            results[item.get("call_id", "")] = text_of(item.get("output"))
        elif item.get("role") == "user":
            users.append(text_of(item.get("content")))
    return names, "\n".join(users), results, (users or [""])[-1]


def openai_events(body: dict, answer: tuple) -> list[tuple[str, dict]]:
    rid = f"resp_{os.urandom(6).hex()}"
    if answer[0] == "text":
        item = {"type": "message", "role": "assistant", "id": f"msg_{os.urandom(6).hex()}",
                "status": "completed",
                "content": [{"type": "output_text", "text": answer[1], "annotations": []}]}
    else:
        _, call, name, arguments = answer
        item = {"type": "function_call", "id": f"fc_{os.urandom(6).hex()}", "status": "completed",
                "call_id": call, "name": name, "arguments": json.dumps(arguments)}
        namespaces = [t.get("name", "") for t in body.get("tools") or [] if t.get("type") == "namespace"]
        for namespace in namespaces:
            if name.startswith(namespace + "__"):
                # Offered inside a namespace: the call names the namespace and the tool.
                item["namespace"] = namespace
                item["name"] = name[len(namespace) + 2:]
    usage_in = 100 + len(json.dumps(body)) // 40
    usage = {"input_tokens": usage_in, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": usage_in + 7}
    response = {"id": rid, "object": "response", "status": "in_progress", "model": body.get("model")}
    return [
        ("response.created", {"type": "response.created", "response": response}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                        "item": item}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                       "item": item}),
        ("response.completed", {"type": "response.completed",
                                "response": dict(response, status="completed", output=[item],
                                                 usage=usage)}),
    ]


# ---- the server ---------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet: the record says what happened
        pass

    def body(self) -> dict:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.headers.get("content-encoding") == "zstd":
            return {"undecoded": True}
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {}

    def send_json(self, status: int, value: dict) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_sse(self, events: list[tuple[str, dict]]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        for name, data in events:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()
        self.close_connection = True

    def outside(self) -> bool:
        """A request for another host, sent here as to a proxy (the tests point the
        agents' HTTP(S)_PROXY here): recorded as `outside`, refused."""
        if self.command != "CONNECT" and not self.path.startswith(("http://", "https://")):
            return False
        record({"outside": self.path, "method": self.command})
        self.send_json(403, {"error": {"type": "offline", "message": "no network in tests"}})
        self.close_connection = True
        return True

    def do_CONNECT(self) -> None:
        self.outside()

    def do_GET(self) -> None:
        if self.outside():
            return
        record({"method": "GET", "path": self.path})
        if self.path.rstrip("/").endswith("/models"):
            self.send_json(200, {"object": "list", "data": [], "models": []})
        else:
            self.send_json(404, {"error": {"type": "not_found", "message": self.path}})

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        if self.outside():
            return
        path = self.path.split("?")[0]
        body = self.body()
        if path.endswith("/messages/count_tokens"):
            record({"method": "POST", "path": path})
            self.send_json(200, {"input_tokens": 100})
        elif path.endswith("/messages"):
            names, first_user, results, said = anthropic_conversation(body)
            answer = decide(names, first_user, results, said)
            record({"api": "anthropic", "path": path, "model": body.get("model"),
                    "tools": names, "results": results, "answer": list(answer[:3]),
                    "helper": HELPER_MARK in first_user}, body)
            events = anthropic_events(body, answer)
            if body.get("stream"):
                self.send_sse(events)
            else:
                self.send_json(200, anthropic_whole(events))
        elif path.endswith("/responses"):
            names, users, results, last_user = openai_conversation(body)
            answer = decide(names, users, results, users, last_user)
            record({"api": "openai", "path": path, "model": body.get("model"),
                    "tools": names, "results": results, "answer": list(answer[:3]),
                    "helper": HELPER_MARK in users}, body)
            self.send_sse(openai_events(body, answer))
        else:
            record({"method": "POST", "path": path})
            self.send_json(404, {"error": {"type": "not_found", "message": path}})


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # Serve until the test closes stdin (or goes away).
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
