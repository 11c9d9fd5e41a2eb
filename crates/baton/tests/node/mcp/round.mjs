// The official MCP TypeScript SDK (@modelcontextprotocol/sdk, pinned in ../package.json)
// through a round with Baton, as each role's agent would run it: one client per
// participant, each on the profile its role gets (executor, planner, reviewer, owner, and
// every tool for a role without a profile), over stdio (`baton mcp`) or Streamable HTTP
// (`baton serve`, each client with its participant's key).
//
// The SDK checks what Baton publishes: `listTools` parses every tool with the protocol's
// schema (a boolean where a property's schema must be an object fails the whole list), and
// `callTool` validates each structured result against the tool's output schema.
//
// Usage: node mcp/round.mjs CONFIG_JSON, where CONFIG_JSON is
//   {"transport": "stdio", "baton": EXE, "project": DIR, "participants": PARTICIPANTS}
//   {"transport": "http", "url": MCP_URL, "participants": PARTICIPANTS}
// and PARTICIPANTS maps each name to {"profile": NAME, "tools": [...], "token": KEY (http)}.
// Prints one line per check passed; any failure throws (exit 1) naming the check.

import { readFileSync } from "node:fs";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";

const config = JSON.parse(process.argv[2]);
const transport = config.transport;

function check(condition, message) {
  if (!condition) {
    throw new Error(`check failed: ${typeof message === "string" ? message : JSON.stringify(message)}`);
  }
}

function same(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** A connected client acting as `name`, with its listed tools by name. */
async function connect(name) {
  const who = config.participants[name];
  const client = new Client({ name: `baton-test-${name}`, version: "1.0.0" });
  const carrier =
    transport === "stdio"
      ? new StdioClientTransport({
          command: config.baton,
          args: ["--project", config.project, "--as", name, "mcp"],
          stderr: "inherit",
        })
      : new StreamableHTTPClientTransport(new URL(config.url), {
          requestInit: { headers: { Authorization: `Bearer ${who.token}` } },
        });
  await client.connect(carrier);
  check(client.getServerVersion()?.name === "baton", client.getServerVersion());
  check((client.getInstructions() ?? "").includes(`\`${name}\``), `${name}: the instructions name who acts`);
  // The SDK parses every tool here: a schema the protocol refuses fails the whole list.
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check(same(names, [...who.tools].sort()), `${name} (${who.profile}): listed ${names}, declared ${who.tools}`);
  for (const tool of tools) {
    check(tool.inputSchema.type === "object" && tool.outputSchema?.type === "object", `${tool.name}: object schemas`);
  }
  const bytes = JSON.stringify({ tools }).length;
  console.log(`${transport}: ${name} lists the ${who.profile} profile (${tools.length} tools, ${bytes} bytes)`);
  return { name, client, tools: new Set(names), called: new Set() };
}

/** Calls `tool` as `who`; it must succeed, with structured content (which the SDK has
 * validated against the tool's output schema) and a text copy equal to it. */
async function ok(who, tool, args = {}) {
  check(who.tools.has(tool), `${who.name} has no ${tool}`);
  const r = await who.client.callTool({ name: tool, arguments: args });
  const text = (r.content ?? []).map((c) => c.text ?? "").join("");
  check(!r.isError, `${who.name} ${tool} ${JSON.stringify(args)} failed: ${text}`);
  check(r.structuredContent && typeof r.structuredContent === "object", `${tool}: structured content`);
  check(same(JSON.parse(text), r.structuredContent), `${tool}: the text copy differs`);
  who.called.add(tool);
  return r.structuredContent;
}

/** Calls `tool` as `who`; it must be an isError result saying why. */
async function refused(who, tool, args = {}) {
  const r = await who.client.callTool({ name: tool, arguments: args });
  const text = (r.content ?? []).map((c) => c.text ?? "").join("");
  check(r.isError === true, `${who.name} ${tool} should be refused: ${JSON.stringify(r)}`);
  check(text.length > 0, `${tool}: a refusal says why`);
  return text;
}

const ids = (listing) => listing.items.map((row) => row.id);
const row = (listing, id) => {
  const found = listing.items.find((r) => r.id === id);
  check(found, `${id} not in ${ids(listing)}`);
  return found;
};

// The shared Work Order and Work Report every test reads (`baton-core/tests/fixtures`).
const fixture = (name) =>
  JSON.parse(readFileSync(new URL(`../../../../baton-core/tests/fixtures/${name}`, import.meta.url), "utf8"));

function orderDoc(id) {
  return { ...fixture("work-order.json"), id, escalate_to: "planner" };
}

function reportDoc(orderId) {
  return { ...fixture("work-report.json"), order_id: orderId };
}

const planner = await connect("planner");
const executor = await connect("impl-1");
const reviewer = await connect("rev");
const owner = await connect("owner");
const observer = await connect("bot");
const everyone = [planner, executor, reviewer, owner, observer];
for (const who of everyone) {
  const packet = await ok(who, "resume");
  check(packet.text.includes("## What I owe") && packet.participant === who.name, packet);
}

// A request, planner → executor, and back.
const sent = await ok(planner, "send", {
  to: ["impl-1"], type: "request", topic: "csv-export", body: "CSV export drops the active filters",
});
const req = sent.id;
const owed = row(await ok(executor, "inbox"), req);
check(owed.status === "pending" && owed.from === "planner" && owed.type === "request", owed);
const shown = await ok(executor, "show", { id: req });
check(same(shown.payload, { body: "CSV export drops the active filters" }) && shown.status === "delivered", shown);
const question = await ok(executor, "reply", { id: req, body: "Which filters: date or status?" });
const done = await ok(executor, "complete", { id: req, note: "Fixed in 4f2a91c; regression test added" });
check(done.end === "recipient" && done.status === "completed" && done.reply, done);
const waiting = row(await ok(planner, "outbox"), req);
check(same(waiting.status, { "impl-1": "completed" }) && waiting.request_status === "open", waiting);
await ok(planner, "show", { id: question.id });
check((await ok(planner, "ack", { id: question.id })).status === "acknowledged", "planner acks the question");
const mine = await ok(planner, "complete", { id: req });
check(mine.end === "sender" && mine.status === "completed", mine);
await ok(planner, "archive", { id: req });
check(!ids(await ok(planner, "outbox")).includes(req), "an archived request leaves the outbox");
const blocked = (await ok(planner, "send", {
  to: ["impl-1"], type: "request", topic: "csv-export", body: "Also add XLSX",
})).id;
await ok(executor, "show", { id: blocked });
const back = await ok(executor, "hand_back", { id: blocked, reason: "No XLSX library is allowed" });
check(back.status === "handed_back" && back.reply, back);
console.log(`${transport}: message round ok (send, inbox, show, reply, complete, outbox, ack, archive, hand_back)`);

// The reviewer reads what it is told and finds the thread.
const told = (await ok(planner, "send", { to: ["rev"], type: "info", topic: "csv-export", body: "Review after merge" })).id;
check(ids(await ok(reviewer, "inbox")).includes(told), "the reviewer owes the info");
await ok(reviewer, "show", { id: told });
check((await ok(reviewer, "ack", { id: told })).status === "acknowledged", "the reviewer acks");
const thread = await ok(reviewer, "thread", { id: told });
check(same(ids(thread), [told]), thread);
const found = await ok(reviewer, "search", { topic: "csv-export" });
check(ids(found).includes(told), found);
await ok(reviewer, "note", { text: "the export test covers the filters", subject: told });
console.log(`${transport}: reviewer round ok (inbox, show, ack, thread, search, note)`);

// A Work Order: offered, accepted, started, reported, a need raised, approved.
const wo = `wo_js_${transport}`;
const made = (await ok(planner, "order", { action: "create", document: orderDoc(wo) })).order;
check(made.id === wo && made.status === "offered" && same(made.allowed, ["accept", "decline", "cancel"]), made);
const refusal = await refused(executor, "order", { action: "approve", id: wo });
check(refusal.includes("only its sender (planner) may"), refusal);
check((await ok(executor, "order", { action: "accept", id: wo })).order.status === "accepted", "accepted");
check((await ok(executor, "order", { action: "start", id: wo, expect_seq: 2 })).order.status === "working", "working");
const [waited, reported] = await Promise.all([
  ok(planner, "order_show", { id: wo, since: 3, timeout_seconds: 60 }),
  ok(executor, "order", { action: "report", id: wo, document: reportDoc(wo) }),
]);
check(reported.order.status === "submitted" && same(reported.order.allowed, ["approve", "rework", "cancel"]), reported);
check(same(waited.report.result, { summary: "Filters kept" }), waited);
const need = await ok(executor, "need", { text: "which fixture is canonical?", order: wo });
const lanes = Object.fromEntries((await ok(owner, "queue")).lanes.map((l) => [l.lane, l]));
check(lanes.needs.items.some((i) => i.id === need.item), lanes);
await ok(executor, "constrain", { text: "keep the CSV header", tried: "dropping it", result: "clients broke" });
await ok(executor, "receipt_write", { step: "export", artifact: "https://ci.example.org/run/7" });
const approved = (await ok(planner, "order", { action: "approve", id: wo, expect_seq: 4 })).order;
check(approved.status === "approved" && approved.seq === 5 && same(approved.allowed, []), approved);
const final = await ok(owner, "order_show", { id: wo });
check(final.order.status === "approved" && final.report.status === "done", final);
await ok(owner, "decide", { text: "CSV exports keep the active filters", why: "users filter before they export" });
await ok(owner, "outbox");
await ok(owner, "inbox");
console.log(`${transport}: order round ok (create, accept, start, report, need, queue, approve, order_show, decide)`);

// A role without a profile lists every tool; an observer reads and writes nothing.
const everything = await ok(observer, "search", { topic: "csv-export" });
check(ids(everything).length === 0 || everything.items.every((r) => r.topic === "csv-export"), everything);
await ok(observer, "order_show", { id: wo });
const denied = await refused(observer, "focus", { text: "Observe" });
check(denied.includes("bot"), denied);
console.log(`${transport}: observer round ok (search, order_show; a write refused as an isError result)`);

// The SDK's own protocol errors: an unknown tool is refused, not answered as a result.
let unknown = null;
try {
  await planner.client.callTool({ name: "no_such_tool", arguments: {} });
} catch (e) {
  unknown = e;
}
check(unknown && unknown.code === -32602, `an unknown tool is a protocol error: ${unknown}`);

const called = new Set(everyone.flatMap((w) => [...w.called]));
console.log(`${transport}: ${called.size} tools called, each result valid against its output schema (protocol ${LATEST_PROTOCOL_VERSION})`);
for (const who of everyone) {
  await who.client.close();
}
