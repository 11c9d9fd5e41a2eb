// The MCP conformance suite speaks Streamable HTTP only and sends no key; this bridge of
// the tests' own stands between it and Baton, adding nothing Baton decides.
//
//   node conformance/bridge.mjs http URL TOKEN
//     Forwards every request on /mcp to Baton's MCP endpoint URL (`baton serve`) with
//     `Authorization: Bearer TOKEN`. A `Host` or `Origin` naming this bridge is renamed to
//     Baton's address under the same name (127.0.0.1 or localhost); any other is passed as
//     it came, so Baton's own Host and Origin check answers it.
//   node conformance/bridge.mjs stdio BATON_EXE PROJECT_DIR NAME
//     Serves /mcp as Streamable HTTP in front of `baton mcp` processes: each `initialize`
//     starts one (`baton --project PROJECT_DIR --as NAME mcp`) for a new session
//     (`Mcp-Session-Id`), each message of the session is one line on its stdin, and each
//     answer is the line its stdout writes with the request's id.
//
// It prints `bridge: http://127.0.0.1:PORT/mcp` once listening, and runs until killed.

import http from "node:http";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import readline from "node:readline";

const [mode, ...args] = process.argv.slice(2);

const server = http.createServer((req, res) => {
  if (new URL(req.url, "http://bridge").pathname !== "/mcp") {
    res.writeHead(404).end();
    return;
  }
  if (mode === "http") {
    forward(req, res);
  } else {
    bridged(req, res);
  }
});

// ---- http: forward to `baton serve` with the key ----------------------------------------

function forward(req, res) {
  const [url, token] = args;
  const target = new URL(url);
  const own = server.address().port;
  // This bridge's own authority, under either loopback name, becomes Baton's under the same.
  const rename = (authority) => {
    for (const name of ["127.0.0.1", "localhost"]) {
      if (authority === `${name}:${own}`) {
        return `${name}:${target.port}`;
      }
    }
    return authority;
  };
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  headers.host = rename(req.headers.host ?? "");
  if (req.headers.origin) {
    const at = req.headers.origin.indexOf("://");
    headers.origin =
      at < 0 ? req.headers.origin : req.headers.origin.slice(0, at + 3) + rename(req.headers.origin.slice(at + 3));
  }
  const upstream = http.request(
    { host: target.hostname, port: target.port, path: target.pathname, method: req.method, headers },
    (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on("error", (e) => {
    res.writeHead(502, { "content-type": "text/plain" }).end(`bridge: ${e.message}`);
  });
  req.pipe(upstream);
}

// ---- stdio: Streamable HTTP in front of `baton mcp` --------------------------------------

/** Sessions by id: the `baton mcp` child and the requests waiting for its answers. */
const sessions = new Map();

function start() {
  const [baton, project, name] = args;
  const child = spawn(baton, ["--project", project, "--as", name, "mcp"], { stdio: ["pipe", "pipe", "ignore"] });
  const session = { child, waiting: new Map() };
  readline.createInterface({ input: child.stdout }).on("line", (line) => {
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      console.error(`bridge: baton mcp wrote a line that is not JSON: ${line.slice(0, 200)}`);
      return;
    }
    const key = JSON.stringify(message.id ?? null);
    const waiter = session.waiting.get(key);
    if (waiter && !("method" in message)) {
      session.waiting.delete(key);
      waiter(message);
    }
  });
  child.on("exit", () => {
    for (const waiter of session.waiting.values()) {
      waiter(null);
    }
    session.waiting.clear();
  });
  return session;
}

function json(res, status, body, headers = {}) {
  res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body));
}

function bridged(req, res) {
  const id = req.headers["mcp-session-id"];
  if (req.method === "DELETE") {
    sessions.get(id)?.child.stdin.end();
    sessions.delete(id);
    res.writeHead(200).end();
    return;
  }
  if (req.method !== "POST") {
    // No stream of the server's own to offer: `baton mcp` answers requests only.
    res.writeHead(405, { allow: "POST, DELETE" }).end();
    return;
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const text = Buffer.concat(chunks).toString("utf8");
    let message = null;
    try {
      message = JSON.parse(text);
    } catch {
      // Not JSON: Baton's own boundary answers it, on a session of its own.
    }
    let sessionId = id;
    let session = sessions.get(id);
    if (message?.method === "initialize" || (!session && !id)) {
      sessionId = randomUUID();
      session = start();
      sessions.set(sessionId, session);
    }
    if (!session) {
      json(res, 404, { jsonrpc: "2.0", id: null, error: { code: -32001, message: "bridge: no such session" } });
      return;
    }
    const readable = message && typeof message === "object" && !Array.isArray(message);
    const answered = readable ? "id" in message && "method" in message : true;
    // The request's id as the answer will carry it; a line Baton's gate refuses before
    // reading an id is answered with id null.
    const key = JSON.stringify(readable ? message.id ?? null : null);
    if (answered) {
      session.waiting.set(key, (answer) => {
        if (answer === null) {
          json(res, 502, { jsonrpc: "2.0", id: null, error: { code: -32603, message: "bridge: baton mcp ended" } });
        } else {
          json(res, 200, answer, { "mcp-session-id": sessionId });
        }
      });
    }
    session.child.stdin.write(text.replace(/\n/g, " ") + "\n");
    if (!answered) {
      res.writeHead(202, { "mcp-session-id": sessionId }).end();
    }
  });
}

server.listen(0, "127.0.0.1", () => {
  console.log(`bridge: http://127.0.0.1:${server.address().port}/mcp`);
});
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    for (const { child } of sessions.values()) {
      child.kill();
    }
    process.exit(0);
  });
}
