"""An upstream MCP server for the gateway tests, on the official Python SDK: one read tool
and two write tools, each write appending one line to the file named by $UPSTREAM_FILE
(so a test counts what ran by counting lines).

- `read()`: the file's lines.
- `append(line, hold_seconds=0)`: appends `line`, then waits `hold_seconds` before it
  answers (a test kills its caller inside that window); answers {"n": lines now}.
- `stamp(text)`: appends `stamp: TEXT`; answers {"n": lines now}.
- `swell(text, times)`: appends `swell`; answers {"text": TEXT repeated TIMES times}, an
  answer as large as a test needs.
- `hostile(kind)`: appends `hostile: KIND`; answers {"value": …} with what no participant
  may send (`nul`: U+0000 in a string) or may (`control`: ESC and a right-to-left
  override).

Usage: python upstream.py   (stdio)
"""

from __future__ import annotations

import os
import time
from typing import TypedDict

from mcp.server.mcpserver import MCPServer

FILE = os.environ["UPSTREAM_FILE"]
server = MCPServer("upstream")


class Lines(TypedDict):
    lines: list[str]


class Count(TypedDict):
    n: int


def lines() -> list[str]:
    try:
        with open(FILE, encoding="utf-8") as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def write(line: str) -> int:
    with open(FILE, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())
    return len(lines())


@server.tool()
def read() -> Lines:
    """The file's lines."""
    return {"lines": lines()}


@server.tool()
def append(line: str, hold_seconds: float = 0) -> Count:
    """Appends one line."""
    n = write(line)
    time.sleep(hold_seconds)
    return {"n": n}


@server.tool()
def stamp(text: str | int) -> Count:
    """Appends `stamp: TEXT`."""
    return {"n": write(f"stamp: {text}")}


class Swollen(TypedDict):
    text: str


@server.tool()
def swell(text: str, times: int) -> Swollen:
    """Appends `swell`; answers the text repeated."""
    write("swell")
    return {"text": text * times}


class Hostile(TypedDict):
    value: str


@server.tool()
def hostile(kind: str) -> Hostile:
    """Appends `hostile: KIND`; answers text a participant could or could not send."""
    write(f"hostile: {kind}")
    return {"value": {"nul": "a\u0000b", "control": "\u001b[31mred\u202etxt"}[kind]}


if __name__ == "__main__":
    server.run("stdio")
