// The board: renders the baton/status@1 document (GET /v1/projects/P/status, the one
// `baton status --json` prints) and follows the log by long-polling …/status/wait. It
// only reads. Text another agent wrote reaches the page through text nodes and attribute
// values only, never as markup.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";
  /** How long one long poll may last, in seconds (the server allows up to 300). */
  const POLL_SECONDS = 20;
  /** How long to wait before trying again after a failed fetch, in milliseconds. */
  const RETRY_MS = 1000;
  const STORAGE = "baton.board";

  let project = null;
  let key = null;
  let current = null;

  // ---- building blocks -------------------------------------------------------------------

  /** An element with attributes and children; strings become text nodes. */
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined) continue;
      if (name === "class") e.className = value;
      else e.setAttribute(name, String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      e.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return e;
  }

  function svg(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attrs || {})) e.setAttribute(name, String(value));
    return e;
  }

  /** Milliseconds as `812ms`, `42s`, `5m`, `3h`, `2d` (as `baton status` prints them). */
  function duration(ms) {
    if (ms === null || ms === undefined) return "-";
    if (ms < 1000) return `${ms}ms`;
    const s = Math.floor(ms / 1000);
    if (s < 60) return `${s}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m`;
    if (s < 86400) return `${Math.floor(s / 3600)}h`;
    return `${Math.floor(s / 86400)}d`;
  }

  function table(headers, rows) {
    const head = el("tr", null, ...headers.map(([label, cls]) => el("th", { class: cls }, label)));
    return el("table", null, el("thead", null, head), el("tbody", null, ...rows));
  }

  function cell(field, value, cls) {
    return el("td", { "data-field": field, class: cls }, value === null || value === undefined ? "-" : value);
  }

  function nothing(text) {
    return el("p", { class: "none" }, text);
  }

  function replace(id, ...children) {
    $(id).replaceChildren(...children);
  }

  // ---- the sections ----------------------------------------------------------------------

  const RUN_STATUSES = ["running", "registered", "done", "failed", "stopped", "lost", "untracked", "ended", "stalled"];

  // Helpers (subagents seen through hooks) are counted, never listed.
  const HELPERS = ["active", "idle", "ended"];

  function summary(s) {
    const helpers = s.run_counts.helpers || {};
    replace(
      "summary",
      ...RUN_STATUSES.map((name) =>
        el(
          "div",
          { class: `tile st-${name}`, "data-count": name },
          el("b", null, s.run_counts[name]),
          el("span", null, name === "stalled" ? "stalled (live)" : name),
        ),
      ),
      ...HELPERS.map((name) =>
        el(
          "div",
          { class: "tile helpers", "data-helpers": name },
          el("b", null, helpers[name] ?? 0),
          el("span", null, `helpers ${name}`),
        ),
      ),
    );
  }

  function runs(s) {
    if (s.runs.length === 0) {
      replace("runs", nothing("No live run, and none ended in the last hour."));
      return;
    }
    // Live runs first, then the newest: what a person looks for (the document keeps the
    // ledger's order, oldest first).
    const live = (r) => (r.ended_at === null ? 0 : 1);
    const ordered = [...s.runs].sort((a, b) => live(a) - live(b) || b.registered_at.localeCompare(a.registered_at));
    const rows = ordered.map((r) => {
      const p = r.progress;
      const progress = p
        ? el("span", { class: "progress" }, el("meter", { min: 0, max: p.total, value: p.done }), ` ${p.done}/${p.total}`)
        : null;
      const tokens = r.tokens && r.tokens.total !== null ? r.tokens.total : "unknown";
      return el(
        "tr",
        { "data-run-id": r.id },
        cell("id", r.id, "id"),
        cell("status", r.status, `st-${r.status}`),
        cell("health", r.health, r.health ? `st-${r.health}` : null),
        cell("participant", r.participant),
        cell("order", r.order, "wide"),
        cell("idle", r.idle_ms === null ? null : duration(r.idle_ms)),
        cell("progress", progress),
        cell("tokens", tokens, tokens === "unknown" ? "unknown wide" : "wide"),
        cell("command", r.what, "wide command"),
      );
    });
    replace(
      "runs",
      table(
        [["id"], ["status"], ["health"], ["who"], ["order", "wide"], ["idle"], ["progress"], ["tokens", "wide"], ["command", "wide"]],
        rows,
      ),
    );
  }

  function queue(s) {
    const lanes = s.queue.map((lane) => {
      const items = lane.items.map((i) =>
        el(
          "li",
          { "data-queue-item": i.id },
          el("span", { class: "text" }, i.text),
          i.label ? el("span", { class: "label" }, i.label) : null,
          el("small", null, ` ${i.id} · ${i.at}`),
        ),
      );
      return el(
        "div",
        { class: "lane", "data-lane": lane.lane },
        el("h3", null, `${lane.lane} `, el("span", { class: "n" }, lane.items.length)),
        items.length ? el("ul", null, ...items) : nothing("nothing"),
        lane.held_back > 0 ? el("p", { class: "more" }, `+${lane.held_back} held back`) : null,
      );
    });
    replace("queue", ...lanes);
  }

  function participants(s) {
    if (s.participants.length === 0) {
      replace("participants", nothing("No participant registered."));
      return;
    }
    const rows = s.participants.map((p) =>
      el("tr", { "data-participant": p.name }, cell("name", p.name, "id"), cell("role", p.role), cell("owed", p.owed, "num"), cell("waiting", p.waiting, "num")),
    );
    replace("participants", table([["name"], ["role"], ["owes", "num"], ["waits on", "num"]], rows));
  }

  function orders(s) {
    if (s.orders.length === 0) {
      replace("orders", nothing("No open order, and none closed in the last hour."));
      return;
    }
    const groups = s.orders.map((g) =>
      el(
        "div",
        { class: "group", "data-order-status": g.status },
        el("h3", { class: `st-${g.status}` }, `${g.status} `, el("span", { class: "n" }, g.items.length)),
        ...g.items.map(({ order, effects }) =>
          el(
            "article",
            { class: "order", "data-order-id": order.id },
            el("h4", null, order.id),
            el("p", { class: "who" }, `${order.from} → ${order.to}`),
            el("p", { class: "goal" }, order.goal),
            effects.length
              ? el(
                  "ul",
                  { class: "effects" },
                  ...effects.map((e) =>
                    el("li", { "data-effect": e.ref, class: `st-${e.status}` }, el("code", null, e.ref), ` ${e.status}`),
                  ),
                )
              : null,
          ),
        ),
      ),
    );
    replace("orders", ...groups);
  }

  function alerts(s) {
    if (s.alerts.length === 0) {
      replace("alerts", nothing("No open alert."));
      return;
    }
    replace(
      "alerts",
      el("ul", null, ...s.alerts.map((a) => el("li", { "data-alert": a.id }, el("code", null, a.id), " ", a.message))),
    );
  }

  // A review started and not concluded (its process was killed): shown only while there is one.
  function reviews(s) {
    const list = s.reviews || [];
    $("reviews-section").hidden = list.length === 0;
    replace(
      "reviews",
      el(
        "ul",
        null,
        ...list.map((r) =>
          el("li", { "data-review": r.order }, el("code", null, r.order), ` round ${r.round} since ${r.started_at}: ${r.reviewers.join(" | ")}`),
        ),
      ),
    );
  }

  // Paths held now (`baton reserve`, and accepted orders' scopes): shown only while there are some.
  function reservations(s) {
    const held = s.reservations || { items: [], more: false };
    $("reservations-section").hidden = held.items.length === 0;
    const rows = held.items.map((r) =>
      el(
        "tr",
        { "data-reservation": r.id },
        cell("path", r.path, "id"),
        cell("holder", r.holder),
        cell("mode", r.mode),
        cell("until", r.order ? `order ${r.order} ends` : r.expires_at),
        cell("reason", r.reason || (r.order ? `order ${r.order}` : null)),
      ),
    );
    replace(
      "reservations",
      table([["glob"], ["holder"], ["mode"], ["until"], ["reason"]], rows),
      held.more ? nothing("More are held: baton reservations") : null,
    );
  }

  // Work sent to a role's pool and not yet claimed (`baton next`): shown only while there is some.
  function pools(s) {
    const waiting = s.pools || { items: [], more: false };
    $("pools-section").hidden = waiting.items.length === 0;
    const rows = waiting.items.map((p) =>
      el(
        "tr",
        { "data-pool-item": p.message },
        cell("pool", p.pool),
        cell("id", p.order || p.message, "id"),
        cell("topic", p.topic),
        cell("from", p.from),
        cell("deadline", p.deadline),
        cell("excerpt", p.excerpt),
      ),
    );
    replace(
      "pools",
      table([["pool"], ["id"], ["topic"], ["from"], ["deadline"], ["excerpt"]], rows),
      waiting.more ? nothing("More wait: baton pool --role ROLE") : null,
    );
  }

  function metric(name, label, value, note) {
    return el("div", { class: "metric", "data-metric": name }, el("b", null, value), el("span", null, label), note ? el("small", null, note) : null);
  }

  function latency(l) {
    return l.mean_ms === null ? "-" : duration(l.mean_ms);
  }

  function metrics(s) {
    const m = s.metrics;
    const oldest = m.oldest_open_request;
    replace(
      "metrics",
      metric("oldest_open_request", "oldest open request", oldest ? duration(oldest.age_ms) : "-", oldest ? oldest.id : "none open"),
      metric("open_requests", "open requests", m.open_requests),
      metric("pending_deliveries", "pending deliveries", m.pending_deliveries),
      metric("created_to_delivered", "created → delivered (mean)", latency(m.created_to_delivered), `n=${m.created_to_delivered.count}`),
      metric("delivered_to_completed", "delivered → completed (mean)", latency(m.delivered_to_completed), `n=${m.delivered_to_completed.count}`),
      metric("approval_wait", "approval wait (mean)", latency(m.approval_wait), `n=${m.approval_wait.count}`),
      metric("orders_awaiting_approval", "orders awaiting approval", m.orders_awaiting_approval),
      metric("requests", "requests", m.requests),
      metric("clarification_rate", "clarifications per request", m.clarification_rate === null ? "-" : m.clarification_rate.toFixed(2)),
      metric("max_thread_depth", "deepest thread", m.max_thread_depth),
      metric("security_refusals", "refused beyond authority", m.security_refusals),
    );
  }

  /** A small line chart of latencies over time. */
  function lineChart(name, title, points) {
    const figure = el("figure", { class: "chart", "data-chart": name }, el("figcaption", null, title));
    if (points.length < 2) {
      figure.append(nothing(points.length ? `one observation: ${duration(points[0].ms)}` : "nothing observed yet"));
      return figure;
    }
    const W = 300;
    const H = 80;
    const times = points.map((p) => Date.parse(p.at));
    const t0 = Math.min(...times);
    const span = Math.max(1, Math.max(...times) - t0);
    const top = Math.max(1, ...points.map((p) => p.ms));
    const xy = points.map((p, i) => [((times[i] - t0) / span) * (W - 8) + 4, H - 4 - (p.ms / top) * (H - 8)]);
    const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title });
    chart.append(svg("polyline", { points: xy.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" "), class: "line" }));
    for (const [x, y] of xy) chart.append(svg("circle", { cx: x.toFixed(1), cy: y.toFixed(1), r: 2 }));
    figure.append(chart, el("small", null, `${points.length} latest · max ${duration(top)}`));
    return figure;
  }

  /** Horizontal bars: one row a label (wrapped when long) and its count. */
  function barChart(name, title, entries) {
    const figure = el("figure", { class: "chart bars", "data-chart": name }, el("figcaption", null, title));
    if (entries.length === 0) {
      figure.append(nothing("nothing yet"));
      return figure;
    }
    const top = Math.max(1, ...entries.map(([, n]) => n));
    for (const [label, n] of entries) {
      const bar = svg("svg", { viewBox: "0 0 100 6", preserveAspectRatio: "none", "aria-hidden": "true" });
      bar.append(svg("rect", { x: 0, y: 0, height: 6, width: Math.max(1, (n / top) * 100).toFixed(1), class: `bar b-${label}` }));
      figure.append(el("div", { class: "bar-row", "data-bar": label }, el("span", { class: "label" }, label), bar, el("b", null, n)));
    }
    return figure;
  }

  function charts(s) {
    const v = s.trends.verdicts;
    replace(
      "charts",
      lineChart("created_to_delivered", "created → delivered, latest", s.trends.created_to_delivered),
      lineChart("delivered_to_completed", "delivered → completed, latest", s.trends.delivered_to_completed),
      barChart("completed_by_topic", "completed requests per topic", Object.entries(s.metrics.completed_by_topic)),
      barChart("verdicts", "review verdicts", [["APPROVE", v.approve], ["FIX", v.fix], ["INVALID", v.invalid], ["STOPPED", v.stopped]].filter(([, n]) => n > 0)),
    );
  }

  function render(s) {
    current = s;
    $("project").textContent = project;
    replace("as-of", "generation ", el("span", { id: "generation" }, s.generation), ` · as of ${s.at}`);
    const empty = s.runs.length === 0 && s.participants.length === 0 && s.orders.length === 0 && s.metrics.requests === 0;
    $("empty").hidden = !empty;
    summary(s);
    runs(s);
    queue(s);
    participants(s);
    orders(s);
    alerts(s);
    reviews(s);
    reservations(s);
    pools(s);
    metrics(s);
    charts(s);
    $("board").hidden = false;
    document.body.dataset.generation = String(s.generation);
  }

  // ---- following the log -----------------------------------------------------------------

  function stale(why) {
    const banner = $("stale");
    const held = current ? ` — showing generation ${current.generation} as of ${current.at}` : "";
    banner.textContent = `stale: server unreachable (${why})${held}; retrying`;
    banner.hidden = false;
    document.body.classList.add("is-stale");
  }

  function fresh() {
    $("stale").hidden = true;
    document.body.classList.remove("is-stale");
  }

  const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

  async function get(path) {
    const headers = key ? { Authorization: `Bearer ${key}` } : {};
    const answer = await fetch(path, { headers, cache: "no-store" });
    if (!answer.ok) {
      const error = new Error(`HTTP ${answer.status}`);
      error.status = answer.status;
      throw error;
    }
    return answer.json();
  }

  async function follow(keyed) {
    const base = `/v1/projects/${encodeURIComponent(project)}/status`;
    // After a failure, ask for the status now rather than wait for the next change.
    let caughtUp = false;
    for (;;) {
      try {
        const s = caughtUp && current
          ? await get(`${base}/wait?after=${current.generation}&timeout_seconds=${POLL_SECONDS}`)
          : await get(base);
        fresh();
        render(s);
        caughtUp = true;
      } catch (error) {
        caughtUp = false;
        if (keyed && (error.status === 401 || error.status === 403)) {
          localStorage.removeItem(STORAGE);
          login("the server refused that project or key");
          return;
        }
        stale(error.status ? `HTTP ${error.status}` : "no answer");
        await sleep(RETRY_MS);
      }
    }
  }

  function login(why) {
    const form = $("login");
    form.hidden = false;
    $("as-of").textContent = why;
    form.onsubmit = (event) => {
      event.preventDefault();
      project = $("login-project").value.trim();
      key = $("login-key").value.trim();
      localStorage.setItem(STORAGE, JSON.stringify({ project, key }));
      form.hidden = true;
      follow(true);
    };
  }

  async function start() {
    let config;
    for (;;) {
      try {
        config = await get("/v1/board");
        fresh();
        break;
      } catch (error) {
        stale(error.status ? `HTTP ${error.status}` : "no answer");
        await sleep(RETRY_MS);
      }
    }
    if (config.project !== null) {
      project = config.project;
      follow(false);
      return;
    }
    const saved = JSON.parse(localStorage.getItem(STORAGE) || "null");
    if (saved && saved.project && saved.key) {
      ({ project, key } = saved);
      follow(true);
    } else {
      login("sign in with a read key");
    }
  }

  start();
})();
