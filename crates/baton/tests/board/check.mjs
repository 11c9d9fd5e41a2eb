// Checks the board in a real browser (Debian's chromium driven by playwright-core) as a
// person would, against `baton status --json` at the same generation. Run by
// crates/baton/tests/cli/board.rs, which starts the boards and passes, in the environment:
//   BATON           the baton binary
//   PROJECT         the fixture project's directory
//   BOARD_URL       its board (`baton board`), whose process is BOARD_PID
//   EMPTY_URL       the board of an empty project
//   SERVE_URL       a `baton serve`, with project SERVE_PROJECT and read key SERVE_KEY
//   CHROMIUM        the browser to drive
//   SCREENSHOTS     where to save a screenshot of each state
// Prints one JSON line: what was checked. Exits non-zero, saying why, on the first mismatch.

import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const BATON = env("BATON");
const PROJECT = env("PROJECT");
const BOARD_URL = env("BOARD_URL");
const BOARD_PID = Number(env("BOARD_PID"));
const EMPTY_URL = env("EMPTY_URL");
const SHOTS = env("SCREENSHOTS");
/** How long any one expectation may take to come true, in milliseconds. */
const PATIENCE = 15000;

mkdirSync(SHOTS, { recursive: true });
const checked = [];

function fail(message) {
  throw new Error(message);
}

function same(what, shown, expected) {
  if (String(shown) !== String(expected)) fail(`${what}: the page shows ${JSON.stringify(shown)}, baton status --json says ${JSON.stringify(expected)}`);
}

const batonEnv = { ...process.env };
delete batonEnv.BATON_AS;
delete batonEnv.BATON_PROJECT;

function baton(...args) {
  return execFileSync(BATON, args, { cwd: PROJECT, encoding: "utf8", env: batonEnv });
}

function status() {
  return JSON.parse(baton("--json", "status"));
}

async function text(page, selector) {
  const node = await page.$(selector);
  if (!node) fail(`nothing on the page matches ${selector}`);
  return (await node.textContent()).trim();
}

/** Waits until `selector`'s text is `expected`. */
async function page_shows(page, selector, expected) {
  try {
    await page.waitForFunction(
      ([selector, expected]) => document.querySelector(selector)?.textContent.trim() === expected,
      [selector, expected],
      { timeout: PATIENCE },
    );
  } catch {
    fail(`${selector} never showed ${expected} (it shows ${JSON.stringify(await page.textContent(selector))})`);
  }
}

/** Waits until the page has rendered generation `generation` (or later, with `later`). */
async function atGeneration(page, generation, later = false) {
  await page.waitForFunction(
    ([g, later]) => {
      const shown = Number(document.body.dataset.generation);
      return later ? shown > g : shown === g;
    },
    [generation, later],
    { timeout: PATIENCE },
  );
  return Number(await page.evaluate(() => document.body.dataset.generation));
}

/** Everything the page shows against the status document `s`. */
async function compare(page, s) {
  same("generation", await text(page, "#generation"), s.generation);
  for (const [name, n] of Object.entries(s.run_counts)) {
    if (typeof n === "number") {
      same(`runs ${name}`, await text(page, `[data-count="${name}"] b`), n);
    }
  }
  for (const [name, n] of Object.entries(s.run_counts.helpers)) {
    same(`helpers ${name}`, await text(page, `[data-helpers="${name}"] b`), n);
  }
  same("rows in the runs table", (await page.$$("tr[data-run-id]")).length, s.runs.length);
  for (const r of s.runs) {
    const row = `tr[data-run-id="${r.id}"]`;
    same(`run ${r.id} status`, await text(page, `${row} [data-field="status"]`), r.status);
    same(`run ${r.id} health`, await text(page, `${row} [data-field="health"]`), r.health ?? "-");
    const progress = r.progress ? `${r.progress.done}/${r.progress.total}` : "-";
    same(`run ${r.id} progress`, await text(page, `${row} [data-field="progress"]`), progress);
    const tokens = r.tokens && r.tokens.total !== null ? r.tokens.total : "unknown";
    same(`run ${r.id} tokens`, await text(page, `${row} [data-field="tokens"]`), tokens);
  }
  for (const p of s.participants) {
    const row = `tr[data-participant="${p.name}"]`;
    same(`${p.name} owes`, await text(page, `${row} [data-field="owed"]`), p.owed);
    same(`${p.name} waits on`, await text(page, `${row} [data-field="waiting"]`), p.waiting);
  }
  for (const lane of s.queue) {
    const shown = await page.$$eval(`[data-lane="${lane.lane}"] [data-queue-item]`, (items) => items.map((i) => i.dataset.queueItem));
    same(`queue lane ${lane.lane}`, shown.join(" "), lane.items.map((i) => i.id).join(" "));
    for (const i of lane.items) {
      same(`queue item ${i.id}`, await text(page, `[data-queue-item="${i.id}"] .text`), i.text);
    }
    const more = lane.held_back > 0 ? `+${lane.held_back} held back` : "";
    const moreShown = (await page.$(`[data-lane="${lane.lane}"] .more`)) ? await text(page, `[data-lane="${lane.lane}"] .more`) : "";
    same(`queue lane ${lane.lane} held back`, moreShown, more);
  }
  for (const g of s.orders) {
    const shown = await page.$$eval(`[data-order-status="${g.status}"] [data-order-id]`, (items) => items.map((i) => i.dataset.orderId));
    same(`orders ${g.status}`, shown.join(" "), g.items.map((o) => o.order.id).join(" "));
    for (const { order, effects } of g.items) {
      const shownEffects = await page.$$eval(`[data-order-id="${order.id}"] [data-effect]`, (items) => items.map((i) => i.textContent.trim()));
      same(`effects of ${order.id}`, shownEffects.join(", "), effects.map((e) => `${e.ref} ${e.status}`).join(", "));
    }
  }
  const alerts = await page.$$eval("[data-alert]", (items) => items.map((i) => i.dataset.alert));
  same("open alerts", alerts.join(" "), s.alerts.map((a) => a.id).join(" "));
  const reviews = await page.$$eval("[data-review]", (items) => items.map((i) => i.dataset.review));
  same("reviews not concluded", reviews.join(" "), (s.reviews || []).map((r) => r.order).join(" "));
  const waiting = (s.pools || { items: [] }).items;
  const pooled = await page.$$eval("[data-pool-item]", (items) => items.map((i) => i.dataset.poolItem));
  same("items waiting in pools", pooled.join(" "), waiting.map((p) => p.message).join(" "));
  for (const p of waiting) {
    same(`pool item ${p.message}`, await text(page, `[data-pool-item="${p.message}"] [data-field="excerpt"]`), p.excerpt);
  }
  const m = s.metrics;
  for (const name of ["open_requests", "pending_deliveries", "orders_awaiting_approval", "requests", "max_thread_depth", "security_refusals"]) {
    same(`metric ${name}`, await text(page, `[data-metric="${name}"] b`), m[name]);
  }
  const oldest = m.oldest_open_request;
  same("oldest open request", await text(page, `[data-metric="oldest_open_request"] small`), oldest ? oldest.id : "none open");
  for (const [topic, n] of Object.entries(m.completed_by_topic)) {
    same(`completed on ${topic}`, await text(page, `[data-chart="completed_by_topic"] [data-bar="${topic}"] b`), n);
  }
}

async function shownGeneration(page) {
  return Number(await page.evaluate(() => document.body.dataset.generation));
}

/** Waits until the page shows `baton status --json` and compares them; the document. A
 *  running run's heartbeat may move the log meanwhile: then both are read again. */
async function matches(page) {
  for (let attempt = 1; ; attempt++) {
    const s = status();
    await atGeneration(page, s.generation - 1, true);
    if ((await shownGeneration(page)) === s.generation) {
      try {
        await compare(page, s);
        if ((await shownGeneration(page)) === s.generation) return s;
      } catch (error) {
        if ((await shownGeneration(page)) === s.generation || attempt === 5) throw error;
      }
    }
    if (attempt === 5) fail("the page never settled on the generation baton status --json reported");
  }
}

/** The page is no wider than its viewport. */
async function fits(page, what) {
  const [scroll, inner] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  if (scroll > inner) fail(`${what}: the page is ${scroll}px wide in a ${inner}px window`);
  checked.push(`${what}: ${scroll}px within ${inner}px`);
}

const browser = await chromium.launch({
  executablePath: env("CHROMIUM"),
  args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
});
let result;
try {
  const laptop = await browser.newPage({ viewport: { width: 1366, height: 900 } });
  const problems = [];
  laptop.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  laptop.on("console", (m) => m.type() === "error" && problems.push(`console: ${m.text()}`));

  // 1. The fixture project: the page equals `baton status --json` at its generation.
  await laptop.goto(BOARD_URL);
  const before = await matches(laptop);
  checked.push(`laptop: ${before.runs.length} runs, ${before.participants.length} participants, ${before.orders.length} order groups, ${before.queue.reduce((n, l) => n + l.items.length, 0)} queue items equal baton status --json at generation ${before.generation}`);
  // Agent text is text: a <script> in a need is shown, never run.
  const hostile = await laptop.$$eval("[data-queue-item] .text", (items) => items.map((i) => i.textContent).filter((t) => t.includes("<script>")));
  if (hostile.length === 0) fail("no queue item shows the <script> text the fixture raised");
  if (await laptop.evaluate(() => window.__baton_pwned !== undefined)) fail("an agent's script ran");
  if ((await laptop.$$("main script, main img")).length) fail("agent text became elements");
  checked.push(`agent text shown as text: ${JSON.stringify(hostile[0])}`);
  await fits(laptop, "laptop 1366px");
  await laptop.screenshot({ path: join(SHOTS, "fixture-laptop.png"), fullPage: true });

  const phone = await browser.newPage({ viewport: { width: 390, height: 844 }, isMobile: true });
  await phone.goto(BOARD_URL);
  await matches(phone);
  await fits(phone, "phone 390px");
  await phone.screenshot({ path: join(SHOTS, "fixture-phone.png"), fullPage: true });
  await phone.close();

  // 2. A new event appears without a reload.
  await laptop.evaluate(() => {
    window.__same_page = true;
  });
  const owedBefore = status().participants.find((p) => p.name === "impl-1").owed;
  const sent = JSON.parse(baton("--json", "--as", "planner", "send", "--to", "impl-1", "--type", "request", "--topic", "live", "--body", "a new event"));
  const sentAt = Date.now();
  await page_shows(laptop, `tr[data-participant="impl-1"] [data-field="owed"]`, String(owedBefore + 1));
  const liveMs = Date.now() - sentAt;
  if (!(await laptop.evaluate(() => window.__same_page === true))) fail("the page reloaded");
  const after = await matches(laptop);
  checked.push(`live: message ${sent.id} shown (impl-1 owes ${owedBefore} → ${owedBefore + 1}) ${liveMs} ms after the send returned, without a reload; generation ${after.generation}`);
  await laptop.screenshot({ path: join(SHOTS, "live-update.png"), fullPage: true });

  // 3. An empty project says how to start.
  const empty = await browser.newPage({ viewport: { width: 1366, height: 900 } });
  await empty.goto(EMPTY_URL);
  await empty.waitForSelector("#empty", { state: "visible", timeout: PATIENCE });
  const hint = await text(empty, "#empty");
  if (!hint.includes("baton agent add") || !hint.includes("baton demo")) fail(`the empty project's hint says: ${hint}`);
  checked.push("empty project: shows how to start");
  await fits(empty, "empty project");
  await empty.screenshot({ path: join(SHOTS, "empty-project.png"), fullPage: true });
  await empty.close();

  if (problems.length) fail(problems.join("; "));

  // 4. The server goes away: the page says its data is stale.
  // Its long poll in flight answers at once (503 `stopping`), so the stop does not wait it out.
  process.kill(BOARD_PID, "SIGTERM");
  const killedAt = Date.now();
  await laptop.waitForSelector("#stale", { state: "visible", timeout: PATIENCE }).catch(() => fail("no stale banner after the server stopped"));
  const staleMs = Date.now() - killedAt;
  const banner = await text(laptop, "#stale");
  if (!banner.startsWith("stale: server unreachable")) fail(`the stale banner says: ${banner}`);
  checked.push(`stale: ${banner}, ${staleMs} ms after SIGTERM`);
  await laptop.screenshot({ path: join(SHOTS, "stale.png"), fullPage: true });

  // 5. On `baton serve` the page asks for a project and a read key, then shows it.
  const served = await browser.newPage({ viewport: { width: 1366, height: 900 } });
  await served.goto(env("SERVE_URL"));
  await served.waitForSelector("#login", { state: "visible", timeout: PATIENCE });
  await served.fill("#login-project", env("SERVE_PROJECT"));
  await served.fill("#login-key", env("SERVE_KEY"));
  await served.click("#login button");
  await page_shows(served, `tr[data-participant="viewer"] [data-field="owed"]`, "0");
  checked.push("serve: the page asked for a project and a read key, then showed the project");
  await served.screenshot({ path: join(SHOTS, "serve-with-key.png"), fullPage: true });

  result = { ok: true, live_ms: liveMs, checked };
} finally {
  await browser.close();
}
console.log(JSON.stringify(result));
