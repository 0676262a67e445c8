// sessionmem inspector: the sessions of an agent, one session's context chart with its flush and
// compaction markers, its transcript, and the agent's memory (search with scores, files).
// Reads the management API (/api/...) of the same server; everything is drawn with DOM calls and
// textContent (no HTML from data), so nothing a transcript holds can run here.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const state = { agent: null, agents: [] };

function $(id) { return document.getElementById(id); }

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  return node;
}

async function api(path, options) {
  const response = await fetch(path, {
    ...(options || {}),
    credentials: "same-origin",
    headers: { "X-Sessionmem-Request": "1", Accept: "application/json" },
  });
  let body = null;
  try { body = await response.json(); } catch (e) { body = null; }
  if (!response.ok) {
    const message = body && body.error ? body.error.message : `HTTP ${response.status}`;
    throw new Error(message);
  }
  return body;
}

function showError(error) {
  const box = $("error");
  box.textContent = error ? String(error.message || error) : "";
  box.hidden = !error;
}

function fmt(n) { return typeof n === "number" ? n.toLocaleString("en-US") : "–"; }
function when(ms) {
  if (typeof ms !== "number") return "–";
  return new Date(ms).toISOString().replace("T", " ").slice(0, 19);
}
function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, v);
  return q.toString();
}

// ---------------------------------------------------------------- routing

function route() {
  const hash = location.hash.replace(/^#/, "") || "/sessions";
  const [path, search] = hash.split("?");
  const params = new URLSearchParams(search || "");
  if (params.get("agent")) state.agent = params.get("agent");
  for (const id of ["view-sessions", "view-session", "view-memory"]) $(id).hidden = true;
  showError(null);
  if (path.startsWith("/session/")) {
    showSession(decodeURIComponent(path.slice("/session/".length)), params.get("page")).catch(showError);
  } else if (path === "/memory") {
    showMemory(params.get("q") || "").catch(showError);
  } else {
    showSessions(params.get("q") || "", Number(params.get("page") || 1)).catch(showError);
  }
}

function go(path, params) {
  const q = query({ agent: state.agent, ...(params || {}) });
  location.hash = `${path}${q ? "?" + q : ""}`;
}

async function loadAgents() {
  const got = await api("/api/agents");
  state.agents = got.agents;
  if (!state.agent || !state.agents.includes(state.agent)) state.agent = state.agents[0];
  const select = $("agent");
  select.replaceChildren(...state.agents.map((a) => el("option", { value: a, text: a })));
  select.value = state.agent;
  select.addEventListener("change", () => { state.agent = select.value; go("/sessions"); });
}

// ---------------------------------------------------------------- sessions list

let filterTimer = null;

async function showSessions(q, page) {
  $("view-sessions").hidden = false;
  const filter = $("filter");
  if (document.activeElement !== filter) filter.value = q;
  const got = await api(`/api/sessions?${query({ agent: state.agent, q, page, limit: 50 })}`);
  const rows = got.sessions.map((s) => {
    const link = el("a", { href: `#/session/${encodeURIComponent(s.sessionKey)}?${query({ agent: state.agent })}`, text: s.sessionKey });
    return el("tr", { class: "session-row" },
      el("td", {}, link),
      el("td", { text: when(s.updatedAt) }),
      el("td", { text: `${fmt(s.totalTokens)} / ${fmt(s.contextTokens)}` }),
      el("td", { text: fmt(s.compactionCount) }),
      el("td", { class: s.flushedThisCycle ? "ok" : "muted", text: s.flushedThisCycle ? "flushed" : "not yet" }));
  });
  $("sessions").tBodies[0].replaceChildren(...rows);
  $("sessions-count").textContent = `${got.total} session${got.total === 1 ? "" : "s"}`;
  pager($("sessions-pager"), got.page, got.pages, (p) => go("/sessions", { q, page: p }));
}

function pager(box, page, pages, onPage) {
  box.replaceChildren();
  if (pages <= 1) return;
  box.append(
    el("button", { type: "button", onclick: () => onPage(page - 1), ...(page <= 1 ? { disabled: "" } : {}), text: "‹ Older" }),
    el("span", { class: "muted", text: ` page ${page} of ${pages} ` }),
    el("button", { type: "button", onclick: () => onPage(page + 1), ...(page >= pages ? { disabled: "" } : {}), text: "Newer ›" }));
}

// ---------------------------------------------------------------- one session

async function showSession(key, page) {
  $("view-session").hidden = false;
  $("marker-detail").hidden = true;
  const got = await api(`/api/sessions/${encodeURIComponent(key)}?${query({ agent: state.agent, page, limit: 50 })}`);
  const entry = got.entry, limits = got.thresholds;
  $("session-key").textContent = entry.sessionKey;
  const figures = [
    ["Session id", entry.sessionId],
    ["Updated", when(entry.updatedAt)],
    ["Model", entry.model || "–"],
    ["Context now", `${fmt(entry.totalTokens)} of ${fmt(limits.contextWindow)}`],
    ["Flush at", fmt(limits.flushThreshold)],
    ["Compaction at", fmt(limits.compactionThreshold)],
    ["compactionCount", fmt(entry.compactionCount)],
    ["memoryFlushCompactionCount", entry.memoryFlushCompactionCount ?? "none"],
    ["Flushed this cycle", got.flushedThisCycle ? "yes" : "no"],
    ["Turns", fmt(got.timeline.turns)],
  ];
  $("session-figures").replaceChildren(...figures.map(([k, v]) => el("div", { class: "figure" }, el("dt", { text: k }), el("dd", { text: String(v) }))));
  drawChart(got.timeline, limits);
  drawTranscript(got.transcript);
  pager($("transcript-pager"), got.transcript.page, got.transcript.pages,
    (p) => go(`/session/${encodeURIComponent(key)}`, { page: p }));
  $("delete-session").onclick = () => deleteSession(entry.sessionKey);
}

async function deleteSession(key) {
  if (!confirm(`Forget ${key}? Its transcripts, store entry, its chat's notes and index rows are removed.`)) return;
  try {
    await api(`/api/sessions/${encodeURIComponent(key)}?${query({ agent: state.agent })}`, { method: "DELETE" });
    go("/sessions");
  } catch (error) { showError(error); }
}

function drawChart(timeline, limits) {
  const W = 960, H = 320, left = 64, right = 16, top = 28, bottom = 36;
  const points = timeline.points, markers = timeline.markers;
  const n = Math.max(points.length, 1);
  const highest = Math.max(limits.compactionThreshold, ...points.map((p) => p.tokens || 0),
    ...markers.map((m) => m.tokensBefore || m.tokens || 0));
  const yMax = Math.max(1, highest * 1.08);
  const x = (turn) => left + ((turn - 0.5) / n) * (W - left - right);
  const y = (tokens) => top + (1 - tokens / yMax) * (H - top - bottom);
  const chart = svg("svg", { id: "chart", viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": `Context size over ${points.length} turns` });
  chart.append(svg("rect", { x: left, y: top, width: W - left - right, height: H - top - bottom, class: "plot" }));
  for (let i = 0; i <= 4; i++) {
    const v = (yMax * i) / 4;
    chart.append(svg("line", { x1: left, x2: W - right, y1: y(v), y2: y(v), class: "grid" }));
    const label = svg("text", { x: left - 6, y: y(v) + 4, class: "axis", "text-anchor": "end" });
    label.textContent = Math.round(v).toLocaleString("en-US");
    chart.append(label);
  }
  const step = Math.max(1, Math.ceil(points.length / 12));
  for (const p of points) {
    if ((p.turn - 1) % step !== 0) continue;
    const label = svg("text", { x: x(p.turn), y: H - bottom + 16, class: "axis", "text-anchor": "middle" });
    label.textContent = String(p.turn);
    chart.append(label);
  }
  const xLabel = svg("text", { x: (left + W - right) / 2, y: H - 4, class: "axis", "text-anchor": "middle" });
  xLabel.textContent = "turn";
  chart.append(xLabel);
  for (const [value, cls, name] of [[limits.flushThreshold, "flush-line", "flush"], [limits.compactionThreshold, "compaction-line", "compaction"]]) {
    if (!value) continue;
    chart.append(svg("line", { x1: left, x2: W - right, y1: y(value), y2: y(value), class: `threshold ${cls}` }));
    const label = svg("text", { x: W - right - 4, y: y(value) - 4, class: `axis ${cls}-label`, "text-anchor": "end" });
    label.textContent = `${name} ${value.toLocaleString("en-US")}`;
    chart.append(label);
  }
  // Markers after the same turn (a flush and the compaction that followed it, after one reply) stand side
  // by side, each with its own place to click.
  const atTurn = new Map();
  const slot = markers.map((m) => {
    const k = atTurn.get(m.afterTurn) || 0;
    atTurn.set(m.afterTurn, k + 1);
    return k;
  });
  markers.forEach((m, index) => {
    const mx = x(m.afterTurn + 0.5) + (slot[index] - (atTurn.get(m.afterTurn) - 1) / 2) * 14;
    const g = svg("g", { class: `marker marker-${m.kind}`, "data-index": index, tabindex: 0 });
    g.append(svg("rect", { x: mx - 6, y: top - 18, width: 12, height: H - bottom - top + 18, class: "marker-hit" }));
    g.append(svg("line", { x1: mx, x2: mx, y1: top, y2: H - bottom, class: "marker-line" }));
    g.append(svg("circle", { cx: mx, cy: top - 10, r: 7, class: "marker-dot" }));
    const title = svg("title", {});
    title.textContent = `${m.kind} after turn ${m.afterTurn}`;
    g.append(title);
    g.addEventListener("click", () => showMarker(m));
    g.addEventListener("keydown", (e) => { if (e.key === "Enter") showMarker(m); });
    chart.append(g);
  });
  let run = [];
  const flushRun = () => {
    if (run.length > 1) chart.append(svg("polyline", { points: run.join(" "), class: "tokens-line" }));
    run = [];
  };
  for (const p of points) {
    if (p.tokens === null) { flushRun(); continue; }
    run.push(`${x(p.turn)},${y(p.tokens)}`);
  }
  flushRun();
  for (const p of points) {
    const c = svg("circle", { cx: x(p.turn), cy: y(p.tokens || 0), r: 3.5,
      class: p.tokens === null ? "point unknown" : "point", "data-turn": p.turn });
    const title = svg("title", {});
    title.textContent = `turn ${p.turn}: ${p.tokens === null ? "no usage reported" : fmt(p.tokens) + " tokens"}`;
    c.append(title);
    chart.append(c);
  }
  $("chart-box").replaceChildren(chart);
}

function showMarker(m) {
  const box = $("marker-detail");
  const head = el("h4", { text: `${m.kind} after turn ${m.afterTurn}` + (m.at ? ` · ${m.at}` : "") });
  const body = [];
  if (m.kind === "flush") {
    body.push(el("p", { text: `Cycle ${m.cycle ?? "?"} · context ${fmt(m.tokens)} tokens · ${m.ended ? "ended (counted)" : "cut short (runs again)"}${m.writeFailed ? " · a write failed" : ""}` }));
    if (!m.writes.length) body.push(el("p", { class: "muted", text: "The flush wrote nothing (NO_REPLY)." }));
    for (const w of m.writes) {
      body.push(el("div", { class: "write" },
        el("p", { class: "write-head", text: `${w.tool}${w.path ? " → " + w.path : ""} ${w.ok === false ? "(failed)" : w.ok ? "(saved)" : ""}` }),
        el("pre", { text: w.text + (w.truncated ? "\n…" : "") })));
    }
  } else if (m.kind === "new") {
    body.push(el("p", { text: `The conversation was archived (/new, /reset or a daily/idle reset); session ${m.sessionId || "?"} began.` }));
  } else {
    body.push(el("p", { text: `${m.kind === "overflow" ? "The provider said the context was over its window; " : ""}compacted ${fmt(m.tokensBefore)} → ${fmt(m.tokensAfter)} tokens${m.reason ? " (" + m.reason + ")" : ""}. The summary kept:` }));
    body.push(el("pre", { class: "summary", text: m.summary + (m.summaryTruncated ? "\n…" : "") }));
    if (m.firstKeptEntryId) body.push(el("p", { class: "muted", text: `Kept verbatim from entry ${m.firstKeptEntryId} on.` }));
  }
  box.replaceChildren(head, ...body);
  box.hidden = false;
}

function drawTranscript(page) {
  const items = page.items.map((item) => {
    const cls = `entry entry-${item.kind}${item.role ? " role-" + item.role : ""}`;
    const head = el("div", { class: "entry-head" },
      el("span", { class: "n", text: `#${item.n}` }),
      el("span", { class: "tag", text: item.kind === "message" ? item.role : item.kind === "flush" ? `flush · ${item.role}` : item.kind }),
      el("span", { class: "muted", text: item.at }),
      item.usage ? el("span", { class: "muted", text: `${fmt(item.usage.promptTokens)} prompt tokens` }) : null);
    const parts = [head];
    if (item.kind === "compaction") {
      parts.push(el("p", { class: "muted", text: `Compaction${item.reason ? " (" + item.reason + ")" : ""}: ${fmt(item.tokensBefore)} → ${fmt(item.tokensAfter)} tokens. Summary:` }));
      parts.push(el("pre", { text: item.summary }));
    } else if (item.text) {
      parts.push(el("pre", { text: item.text + (item.truncated ? "\n…" : "") }));
    }
    for (const call of item.toolCalls || []) {
      parts.push(el("pre", { class: "call", text: `→ ${call.name}(${JSON.stringify(call.arguments)})` }));
    }
    return el("li", { class: cls }, ...parts);
  });
  $("transcript").replaceChildren(...items);
}

// ---------------------------------------------------------------- memory

async function showMemory(q) {
  $("view-memory").hidden = false;
  const got = await api(`/api/memory/files?${query({ agent: state.agent })}`);
  $("files").replaceChildren(...got.files.map((f) =>
    el("li", {}, el("a", { href: "#", class: "file-link", text: f.path, onclick: (e) => { e.preventDefault(); openFile(f.path).catch(showError); } }),
      el("span", { class: "muted", text: ` ${fmt(f.size)} bytes` }))));
  if (q) { $("search-q").value = q; await search(q); }
}

async function openFile(path) {
  const got = await api(`/api/memory/files/${path.split("/").map(encodeURIComponent).join("/")}?${query({ agent: state.agent })}`);
  $("file-name").textContent = got.path;
  $("file-text").textContent = got.text + (got.truncated ? `\n… ${got.note}` : "");
}

async function search(q) {
  const got = await api(`/api/memory/search?${query({ agent: state.agent, q, limit: 10 })}`);
  const note = [`${got.results.length} result${got.results.length === 1 ? "" : "s"} · ${got.mode}`];
  if (got.heldBack) note.push(`${got.heldBack.count} held back under minScore ${got.heldBack.minScore} (best ${got.heldBack.bestScore.toFixed(3)})`);
  if (got.queryCut) note.push(got.queryCut.note);
  $("search-note").textContent = note.join(" · ");
  $("search-results").replaceChildren(...got.results.map((r) => {
    const e = r.explain || {};
    const figures = [["score", r.score], ["text", e.text], ["bm25", e.bm25], ["vector", e.vector], ["cosine", e.cosine],
      ["merged", e.merged], ["decay", e.decay], ["final", e.final], ["mmr", e.mmrRank]];
    const scores = el("table", { class: "scores" },
      el("tr", {}, ...figures.map(([k]) => el("th", { text: k }))),
      el("tr", {}, ...figures.map(([, v]) => el("td", { text: typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toFixed(3)) : "–" }))));
    return el("li", { class: "hit" },
      el("div", { class: "hit-head" },
        el("a", { href: "#", text: `${r.path}#L${r.startLine}-L${r.endLine}`, onclick: (ev) => { ev.preventDefault(); if (r.source === "memory") openFile(r.path).catch(showError); } }),
        el("span", { class: "muted", text: ` ${r.source}${r.date ? " · " + r.date : ""}` })),
      scores,
      el("pre", { text: r.snippet }));
  }));
}

// ---------------------------------------------------------------- start

function start() {
  $("filter").addEventListener("input", () => {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(() => go("/sessions", { q: $("filter").value }), 250);
  });
  $("search-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const q = $("search-q").value.trim();
    if (q) go("/memory", { q });
  });
  window.addEventListener("hashchange", route);
  loadAgents().then(route).catch(showError);
}

document.addEventListener("DOMContentLoaded", start);
