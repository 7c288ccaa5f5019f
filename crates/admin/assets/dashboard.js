// The Axle dashboard. Once a second it reads this admin endpoint's /stats, /plugins and
// /events (the same JSON `axle stats --json` prints) and redraws. No framework, no build:
// the kernel serves this file as it is.
"use strict";

const POLL_MS = 1000;
const HISTORY_S = 300; // the share chart's span
const COLORS = ["#0969da", "#cf222e", "#1a7f37", "#9a6700", "#8250df", "#bf3989",
  "#1b7c83", "#953800"];

// Per client/service: the last calls count of each endpoint, and the share samples.
const last = new Map(); // "client/service" -> Map(address -> calls)
const history = new Map(); // "client/service" -> [{t, shares: Map(address -> 0..1)}]
let nextEvent = 0;

// el("td", {class: "x"}, "text", child): an element; text is always text, never HTML.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c instanceof Node ? c : String(c));
  return e;
}

function ms(ns) { return ns > 0 ? (ns / 1e6).toFixed(ns < 1e6 ? 3 : 1) + " ms" : "—"; }
function pct(x) { return (100 * x).toFixed(1) + " %"; }
function clock(t) { return new Date(t).toLocaleTimeString(); }

async function json(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) throw new Error(path + ": HTTP " + r.status);
  return r.json();
}

// The share of calls each endpoint took since the last read (null before there is one).
function shares(key, endpoints) {
  const before = last.get(key);
  const now = new Map(endpoints.map((e) => [e.address, e.calls]));
  last.set(key, now);
  if (!before) return null;
  const delta = new Map();
  let total = 0;
  for (const [addr, calls] of now) {
    const d = Math.max(0, calls - (before.get(addr) ?? calls));
    delta.set(addr, d);
    total += d;
  }
  for (const [addr, d] of delta) delta.set(addr, total > 0 ? d / total : 0);
  return delta;
}

function remember(key, share, t) {
  const h = history.get(key) || [];
  h.push({ t, shares: share });
  while (h.length && h[0].t < t - HISTORY_S * 1000) h.shift();
  history.set(key, h);
}

function serviceTable(client, svc, share, colorOf) {
  const head = el("tr", {}, ...["endpoint", "state", "in rotation", "calls", "share",
    "p50", "p99", "faults", "error rate", "in flight"].map((h) => el("th", {}, h)));
  const rows = svc.endpoints.map((e) => el("tr", {
    class: "endpoint" + (e.in_rotation ? "" : " out"),
    "data-client": client, "data-service": svc.service, "data-endpoint": e.address,
    "data-state": e.state, "data-calls": e.calls,
  },
  el("td", {}, el("i", { style: "color:" + colorOf(e.address) }, "■ "), e.address),
  el("td", { class: "state-" + e.state }, e.state),
  el("td", {}, e.in_rotation ? "yes" : "no"),
  el("td", {}, e.calls.toLocaleString()),
  el("td", {}, share ? pct(share.get(e.address) ?? 0) : "—"),
  el("td", {}, ms(e.p50_ns)), el("td", {}, ms(e.p99_ns)),
  el("td", {}, e.faults.toLocaleString()), el("td", {}, pct(e.error_rate)),
  el("td", {}, e.in_flight)));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows));
}

// Each endpoint's share over the last minutes, one line per endpoint.
function chart(samples, addresses, colorOf, now) {
  const W = 900, H = 150, L = 40, B = 16;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("class", "chart");
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
  };
  const x = (t) => L + (W - L - 4) * (1 - (now - t) / (HISTORY_S * 1000));
  const y = (s) => 12 + (H - B - 18) * (1 - s);
  for (const s of [0, 0.5, 1]) {
    add("line", { x1: L, x2: W, y1: y(s), y2: y(s), stroke: "#eee" });
    add("text", { x: 2, y: y(s) + 3 }, pct(s).replace(".0 ", " "));
  }
  add("text", { x: L, y: H - 3 }, `−${HISTORY_S / 60} min`);
  add("text", { x: W - 24, y: H - 3 }, "now");
  for (const addr of addresses) {
    const pts = samples.filter((p) => p.shares.has(addr))
      .map((p) => `${x(p.t).toFixed(1)},${y(p.shares.get(addr)).toFixed(1)}`);
    if (pts.length > 1) {
      add("polyline", { points: pts.join(" "), fill: "none", stroke: colorOf(addr),
        "stroke-width": 1.5 });
    }
  }
  return svg;
}

function renderStats(stats, now) {
  const out = [];
  for (const c of stats.clients) {
    for (const svc of c.services) {
      const key = c.name + "/" + svc.service;
      const share = shares(key, svc.endpoints);
      if (share) remember(key, share, now);
      const addresses = svc.endpoints.map((e) => e.address);
      const colorOf = (a) => COLORS[Math.max(0, addresses.indexOf(a)) % COLORS.length];
      const breakers = svc.policies.filter((p) => p.breaker !== "closed")
        .map((p) => `${p.method}: breaker ${p.breaker}`).join(", ");
      out.push(el("h3", {}, `${svc.service} `, el("span", { class: "muted" },
        `(client ${c.name}${breakers ? "; " + breakers : ""})`)));
      out.push(serviceTable(c.name, svc, share, colorOf));
      out.push(chart(history.get(key) || [], addresses, colorOf, now));
    }
  }
  if (out.length === 0) {
    out.push(el("p", { class: "muted" }, "This kernel has no client: nothing is called from here."));
  }
  document.getElementById("services").replaceChildren(...out);
}

const FAULTS = ["timeouts", "memory", "blocked", "busy", "traps", "invalid", "unavailable",
  "replacing"];

function renderPlugins(plugins) {
  const rows = [];
  for (const side of ["clients", "servers"]) {
    for (const [owner, list] of Object.entries(plugins[side] || {})) {
      for (const p of list) {
        const faults = FAULTS.reduce((n, k) => n + (p[k] || 0), 0);
        const state = p.quarantined ? "quarantined" : "in service";
        rows.push(el("tr", { class: "plugin", "data-plugin": p.name, "data-state": state },
          el("td", {}, owner), el("td", {}, p.name), el("td", {}, p.calls.toLocaleString()),
          el("td", { title: FAULTS.map((k) => `${k} ${p[k] || 0}`).join(", ") }, faults),
          el("td", {}, p.skipped), el("td", {}, p.trips),
          el("td", { class: "state-" + state.replace(" ", "-") }, state)));
      }
    }
  }
  document.querySelector("#plugins tbody").replaceChildren(...rows);
}

// One divergence in words, with the facts of both endpoints when a selector diverged.
function divergence(d) {
  const facts = (f) => f ? ` (in flight ${f.in_flight}, weight ${f.effective_weight}, ewma ` +
    `${ms(f.ewma_latency_ns)}, window ${f.window_failures}/${f.window_total} failed)` : "";
  return `${clock(d.at_unix_ms)}: live ${d.live}${facts(d.live_facts)} · candidate ` +
    `${d.candidate}${facts(d.candidate_facts)}`;
}

function renderShadows(stats) {
  const rows = [];
  const add = (owner, v) => {
    const latest = v.recent.length ? v.recent[v.recent.length - 1] : null;
    const rate = v.sampled > 0 ? ` (${pct(v.diverged / v.sampled)})` : "";
    rows.push(el("tr", { class: "shadow", "data-plugin": v.candidate },
      el("td", {}, owner), el("td", {}, v.service || "—"), el("td", {}, v.kind),
      el("td", {}, v.live || "—"), el("td", {}, v.candidate), el("td", {}, pct(v.sample)),
      el("td", {}, v.sampled.toLocaleString()),
      el("td", { title: v.recent.map(divergence).join("\n") }, v.diverged.toLocaleString() + rate),
      el("td", {}, v.faults.toLocaleString()),
      el("td", {}, latest ? divergence(latest) : "—")));
  };
  for (const c of stats.clients) {
    for (const svc of c.services) for (const v of svc.shadows || []) add("client " + c.name, v);
  }
  for (const s of stats.servers) for (const v of s.shadows || []) add("server " + s.name, v);
  if (rows.length === 0) return;
  document.querySelector("#shadows tbody").replaceChildren(...rows);
}

function renderEvents(page) {
  const list = document.getElementById("events");
  const items = page.events.map((e) => el("li", { class: "event", "data-kind": e.kind },
    el("time", {}, clock(e.at_ms)), `${e.kind} · ${e.owner} · ${e.subject}: `,
    el("b", { class: "state-" + e.change.replace(" ", "-") }, e.change)));
  if (page.missed > 0) items.unshift(el("li", { class: "muted" }, `${page.missed} older events dropped`));
  if (items.length > 0) list.querySelector(".none")?.remove();
  list.prepend(...items.reverse());
  while (list.children.length > 200) list.lastChild.remove();
  nextEvent = page.next;
}

async function tick() {
  const status = document.getElementById("status");
  try {
    const now = Date.now();
    const [stats, plugins, events] = await Promise.all([
      json("stats"), json("plugins"), json("events?since=" + nextEvent)]);
    renderStats(stats, now);
    renderPlugins(plugins);
    renderShadows(stats);
    renderEvents(events);
    status.textContent = "live · updated " + clock(now);
    status.className = "muted";
  } catch (e) {
    status.textContent = "cannot read the admin endpoint: " + e.message;
    status.className = "state-dead";
  }
}

function swapControl() {
  if (document.body.dataset.swap !== "on") return;
  document.getElementById("swap").hidden = false;
  const form = document.getElementById("swap-form");
  const result = document.getElementById("swap-result");
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    result.textContent = "swapping…";
    try {
      const r = await fetch("swap", {
        method: "POST",
        headers: { "Authorization": "Bearer " + f.get("token"),
          "Content-Type": "application/json" },
        body: JSON.stringify({ slot: f.get("slot"), plugin: f.get("plugin") }),
      });
      const body = await r.json();
      result.textContent = (r.ok ? "" : `HTTP ${r.status}: `) + JSON.stringify(body, null, 2);
    } catch (e) {
      result.textContent = "the swap did not reach the kernel: " + e.message;
    }
  });
}

// One read at a time: the next starts a second after the last one ended.
async function loop() {
  await tick();
  setTimeout(loop, POLL_MS);
}

swapControl();
loop();
