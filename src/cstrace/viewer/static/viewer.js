// cstrace view: the page. It asks the local server (/api/...) for windows of rows and
// for the panes of the selected row; it never holds the whole trace.
"use strict";

const RH = 20;                 // row height in pixels (viewer.css .row)
const BLOCK = 256;             // rows fetched per request
const MAX_SPACER = 8000000;    // browsers cap element heights: scroll positions are scaled

const state = {
  total: 0,
  first: 0,               // first row shown
  selected: null,         // selected row number
  selectedRec: null,      // its record
  blocks: new Map(),      // block index -> rows (or "pending")
  func: null,             // start address of the function in the disassembly pane
  sourceKey: null,
  tl: { lo: null, hi: null, extent: [0, 1], cursor: null, data: null, pending: 0 },
  overview: null,
  inflight: 0,
};

const $ = (id) => document.getElementById(id);

// Every query to the server; state.inflight counts those not answered yet.
async function api(name, params) {
  const q = new URLSearchParams(params || {}).toString();
  state.inflight++;
  try {
    const res = await fetch(`/api/${name}${q ? "?" + q : ""}`);
    const body = await res.json();
    if (!res.ok) throw new Error(body.error || res.statusText);
    return body;
  } finally {
    state.inflight--;
  }
}

function status(text) { $("status").textContent = text || ""; }

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

// Scroll a pane (not the page) so that one of its children shows.
function scrollWithin(pane, child, center) {
  const top = child.getBoundingClientRect().top - pane.getBoundingClientRect().top + pane.scrollTop;
  if (center) { pane.scrollTop = top - pane.clientHeight / 2 + child.offsetHeight / 2; return; }
  if (top < pane.scrollTop) pane.scrollTop = top;
  else if (top + child.offsetHeight > pane.scrollTop + pane.clientHeight) pane.scrollTop = top + child.offsetHeight - pane.clientHeight;
}

function basename(path) { return path ? path.split(/[\\/]/).pop() : ""; }

// ---- the instruction list ---------------------------------------------------------

function visibleCount() { return Math.max(1, Math.ceil($("list-scroll").clientHeight / RH)); }

function maxFirst() { return Math.max(0, state.total - visibleCount() + 1); }

function spacerHeight() { return Math.min(state.total * RH, MAX_SPACER); }

function layoutList() {
  // The body stays in view (sticky); the spacer after it makes the scroll range.
  const sc = $("list-scroll");
  $("list-body").style.height = sc.clientHeight + "px";
  $("list-spacer").style.height = Math.max(0, spacerHeight() - sc.clientHeight) + "px";
}

function syncScrollbar() {
  const sc = $("list-scroll");
  const range = spacerHeight() - sc.clientHeight;
  const mf = maxFirst();
  const top = mf > 0 && range > 0 ? (state.first / mf) * range : 0;
  state.ignoreScroll = true;
  sc.scrollTop = top;
}

function onScroll() {
  if (state.ignoreScroll) { state.ignoreScroll = false; return; }
  const sc = $("list-scroll");
  const range = spacerHeight() - sc.clientHeight;
  const mf = maxFirst();
  state.first = range > 0 ? Math.round((sc.scrollTop / range) * mf) : 0;
  renderList();
}

function onWheel(ev) {
  ev.preventDefault();
  const lines = ev.deltaMode === 1 ? ev.deltaY : ev.deltaY / RH;
  scrollToRow(state.first + Math.round(lines), false);
}

function scrollToRow(row, center) {
  let first = center ? row - Math.floor(visibleCount() / 2) : row;
  state.first = Math.max(0, Math.min(first, maxFirst()));
  syncScrollbar();
  renderList();
}

function ensureBlock(b) {
  if (state.blocks.has(b)) return;
  state.blocks.set(b, "pending");
  api("rows", { start: b * BLOCK, count: BLOCK }).then((got) => {
    state.blocks.set(b, got.rows);
    if (state.blocks.size > 400) {
      for (const k of state.blocks.keys()) {
        if (Math.abs(k - b) > 20) state.blocks.delete(k);
        if (state.blocks.size < 200) break;
      }
    }
    renderList();
  }).catch((err) => { state.blocks.delete(b); status("rows: " + err.message); });
}

function rowRecord(row) {
  const blk = state.blocks.get(Math.floor(row / BLOCK));
  if (!blk || blk === "pending") return null;
  return blk[row % BLOCK] || null;
}

function renderList() {
  const body = $("list-body");
  const n = visibleCount();
  const first = state.first;
  const frag = document.createDocumentFragment();
  for (let r = first; r < Math.min(first + n, state.total); r++) {
    ensureBlock(Math.floor(r / BLOCK));
    const rec = rowRecord(r);
    frag.appendChild(rowElement(r, rec));
  }
  // Prefetch the next block so that scrolling down does not wait.
  if (first + n + BLOCK / 2 < state.total) ensureBlock(Math.floor((first + n + BLOCK / 2) / BLOCK));
  body.replaceChildren(frag);
}

function rowElement(r, rec) {
  const div = el("div", "row");
  div.dataset.row = r;
  div.appendChild(el("span", "c-row", r));
  if (!rec) {
    div.classList.add("loading");
    div.appendChild(el("span", "c-text", "…"));
    return div;
  }
  div.classList.add("k-" + rec.kind);
  if (r === state.selected) div.classList.add("selected");
  if (rec.kind === "instr") {
    div.appendChild(el("span", "c-addr", rec.addr || "?"));
    const fn = rec.func ? rec.func + (rec.off ? "+0x" + rec.off.toString(16) : "") : "";
    div.appendChild(el("span", "c-func", fn));
    div.appendChild(el("span", "c-text", rec.text));
    div.appendChild(el("span", "c-src", rec.file ? basename(rec.file) + ":" + rec.line : ""));
  } else {
    div.appendChild(el("span", "c-addr", rec.type));
    const t = el("span", "c-text", rec.text);
    t.style.flex = "1 1 auto";
    div.appendChild(t);
  }
  const time = rec.cc !== undefined && rec.cc !== null ? rec.cc + " cyc"
    : (rec.ts !== null && rec.ts !== undefined ? "0x" + rec.ts.toString(16) : "");
  div.appendChild(el("span", "c-time", time));
  const run = state.overview ? state.overview.runs[rec.run] : null;
  const who = (run ? run.source : rec.id) + (rec.el >= 0 ? " · EL" + rec.el : "");
  div.appendChild(el("span", "c-who", who));
  return div;
}

async function select(row, scroll) {
  if (row === null || row === undefined || state.total === 0) return;
  row = Math.max(0, Math.min(row, state.total - 1));
  state.selected = row;
  if (scroll !== false) {
    const n = visibleCount();
    if (row < state.first || row >= state.first + n - 1) scrollToRow(row, true);
  }
  renderList();
  let rec = rowRecord(row);
  if (!rec) {
    const got = await api("rows", { start: row, count: 1 });
    rec = got.rows[0] || null;
  }
  if (state.selected !== row) return;
  state.selectedRec = rec;
  status(rec && rec.addr ? `row ${row} · ${rec.addr}` : `row ${row}`);
  updatePanes(row, rec);
  moveCursor(row);
}

function updatePanes(row, rec) {
  loadData(row);
  if (rec && rec.kind === "instr" && rec.addr) {
    loadSource(rec.addr, rec.ctx);
    loadFunction(rec.addr, rec.run, rec.ctx);
  }
}

// ---- panes ------------------------------------------------------------------------

function ctxParam(ctx) { return ctx === null || ctx === undefined ? -1 : ctx; }

async function loadSource(addr, ctx) {
  const body = $("source-body");
  const got = await api("source", { addr, ctx: ctxParam(ctx) });
  if (!got.file) {
    $("source-title").textContent = "";
    body.replaceChildren(el("div", "msg", got.message));
    return;
  }
  $("source-title").textContent = `${got.file}:${got.line}`;
  const frag = document.createDocumentFragment();
  if (got.message) frag.appendChild(el("div", "msg warn", got.message));
  let current = null;
  for (const ln of got.lines) {
    const d = el("div", "src-line");
    if (ln.count !== null && ln.count !== undefined) d.classList.add(ln.count > 0 ? "hit" : "miss");
    if (ln.n === got.line) { d.classList.add("current"); current = d; }
    d.dataset.line = ln.n;
    d.appendChild(el("span", "n", ln.n));
    d.appendChild(el("span", "cnt", ln.count === null || ln.count === undefined ? "" : ln.count + "×"));
    d.appendChild(el("span", "t", ln.text === null ? "" : ln.text));
    frag.appendChild(d);
  }
  body.replaceChildren(frag);
  if (current) scrollWithin(body, current, true);
}

async function loadFunction(addr, run, ctx) {
  const body = $("disasm-body");
  const got = await api("function", { addr, run: run || 0, ctx: ctxParam(ctx) });
  if (!got.name) {
    state.func = null;
    $("disasm-title").textContent = "";
    body.replaceChildren(el("div", "msg", got.message));
    return;
  }
  if (state.func !== got.start) {
    state.func = got.start;
    $("disasm-title").textContent = `${got.name} (${got.start}–${got.end}, ${basename(got.image)})`;
    const frag = document.createDocumentFragment();
    if (got.message) frag.appendChild(el("div", "msg warn", got.message));
    for (const ins of got.instrs) {
      if (ins.line !== undefined) {
        const src = ins.src === null || ins.src === undefined ? "" : ins.src.trim();
        frag.appendChild(el("div", "dis-src", `${basename(ins.file)}:${ins.line}  ${src}`));
      }
      const d = el("div", "dis-line" + (ins.count ? "" : " never"));
      d.dataset.addr = ins.addr;
      d.appendChild(el("span", "a", ins.addr));
      d.appendChild(el("span", "cnt", ins.count + "×"));
      d.appendChild(el("span", "t", ins.text));
      d.addEventListener("click", () => findExecution(ins.addr, true, true));
      frag.appendChild(d);
    }
    body.replaceChildren(frag);
  }
  let cur = null;
  for (const d of body.querySelectorAll(".dis-line")) {
    const on = d.dataset.addr === addr;
    d.classList.toggle("current", on);
    if (on) cur = d;
  }
  if (cur) scrollWithin(body, cur, false);
}

async function loadData(row) {
  const body = $("data-body");
  const got = await api("data", { row });
  if (state.selected !== row) return;
  if (got.total === 0) {
    $("data-title").textContent = "";
    body.replaceChildren(el("div", "msg", "this trace carries no data transfers or software messages"));
    return;
  }
  $("data-title").textContent = `${got.total} data element(s)`;
  const frag = document.createDocumentFragment();
  frag.appendChild(el("div", "msg", "near the selected row"));
  const t1 = el("table", "data-table near");
  t1.appendChild(header(["row", "kind", "address / channel", "value", "element"]));
  for (const d of got.near) {
    const tr = el("tr", d.past ? "" : "future");
    if (d.row === row) tr.classList.add("at");
    for (const v of [d.row, d.kind, d.key, d.value === null ? "-" : d.value, d.text]) tr.appendChild(el("td", "mono", v));
    tr.addEventListener("click", () => select(d.row));
    t1.appendChild(tr);
  }
  frag.appendChild(t1);
  frag.appendChild(el("div", "msg", got.last.length ? "last value written to each address up to the selected row"
    : "no write up to the selected row"));
  if (got.last.length) {
    const t2 = el("table", "data-table");
    t2.appendChild(header(["address / channel", "last value", "at row", "writes"]));
    for (const d of got.last) {
      const tr = el("tr");
      for (const v of [d.key, d.value === null ? "-" : d.value, d.row, d.writes]) tr.appendChild(el("td", "mono", v));
      tr.addEventListener("click", () => select(d.row));
      t2.appendChild(tr);
    }
    frag.appendChild(t2);
  }
  body.replaceChildren(frag);
  // Show the selected element's transfer, or the first one after it.
  const here = body.querySelector("tr.at") || body.querySelector("tr.future");
  if (here) scrollWithin(body, here, true);
}

function header(names) {
  const tr = el("tr");
  for (const n of names) tr.appendChild(el("th", "", n));
  return tr;
}

// ---- search -----------------------------------------------------------------------

async function search(forward) {
  const q = $("search").value.trim();
  if (!q) return;
  const from = state.selected === null ? (forward ? -1 : state.total) : state.selected;
  status("searching…");
  const t0 = performance.now();
  let got = await api("search", { q, from, dir: forward ? 1 : -1 });
  let wrapped = "";
  if (got.row === null && state.selected !== null) {
    // Nothing further: go round from the other end.
    got = await api("search", { q, from: forward ? -1 : state.total, dir: forward ? 1 : -1 });
    wrapped = " (wrapped)";
  }
  const ms = Math.round(performance.now() - t0);
  if (got.row === null) { status(`${got.message} (${ms} ms)`); return; }
  await select(got.row);
  status(`${got.message}: row ${got.row}${wrapped} (${ms} ms)`);
}

async function findExecution(addr, forward, fromStart) {
  if (!addr) return;
  const from = fromStart ? -1 : (state.selected === null ? -1 : state.selected);
  const got = await api("next", { addr: addr.replace(/^0x/, ""), from, dir: forward ? 1 : -1 });
  if (got.row === null) { status(got.message); return; }
  await select(got.row);
}

// ---- timeline ---------------------------------------------------------------------

const palette = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#e15759", "#8cd17d", "#499894", "#d4a6c8"];

function colorOf(id, name) {
  if (name && name.startsWith("EL")) return ["#c6dbef", "#6baed6", "#fd8d3c", "#e6550d"][parseInt(name.slice(2), 10)] || "#bbb";
  if (name === "(no symbol)") return "#a0a4a8";
  return palette[id % palette.length];
}

let tlTimer = null;
function loadTimeline() {
  if (tlTimer !== null) { clearTimeout(tlTimer); state.inflight--; }
  state.inflight++;
  tlTimer = setTimeout(async () => {
    tlTimer = null;
    state.inflight--;
    const cv = $("timeline");
    const ticket = ++state.tl.pending;
    const params = { width: cv.clientWidth || 1000 };
    if (state.tl.lo !== null) { params.lo = state.tl.lo; params.hi = state.tl.hi; }
    const got = await api("timeline", params);
    if (ticket !== state.tl.pending) return;
    state.tl.data = got;
    state.tl.extent = got.extent;
    if (state.tl.lo === null) { state.tl.lo = got.lo; state.tl.hi = got.hi; }
    drawTimeline();
  }, 60);
}

async function moveCursor(row) {
  const got = await api("position", { row });
  if (state.selected !== row) return;
  state.tl.cursor = got.x;
  drawTimeline();
}

const LANE_H = 26, TOP = 4;

function laneLayout() {
  const d = state.tl.data;
  return d ? d.lanes.map((lane, i) => ({ lane, y: TOP + i * (LANE_H + 16) + 14 })) : [];
}

function axisText(v) {
  const d = state.tl.data;
  return d && d.axis === "time" ? "0x" + Math.round(v).toString(16) : String(Math.round(v));
}

function drawTimeline() {
  const cv = $("timeline");
  // As tall as its lanes (the pane scrolls when there are many sources).
  const lanes = state.tl.data ? state.tl.data.lanes.length : 0;
  const want = Math.max($("timeline-wrap").clientHeight, TOP + lanes * (LANE_H + 16) + 8);
  if (cv.clientHeight !== want) cv.style.height = want + "px";
  const w = cv.clientWidth, h = cv.clientHeight;
  if (cv.width !== w * devicePixelRatio || cv.height !== h * devicePixelRatio) {
    cv.width = w * devicePixelRatio; cv.height = h * devicePixelRatio;
  }
  const ctx = cv.getContext("2d");
  ctx.setTransform(devicePixelRatio, 0, 0, devicePixelRatio, 0, 0);
  ctx.clearRect(0, 0, w, h);
  const d = state.tl.data;
  if (!d || state.tl.lo === null) return;
  const { lo, hi } = state.tl;
  const what = d.axis === "time" ? "trace time (timestamps)" : "rows";
  $("tl-range").textContent = `${what} ${axisText(lo)}–${axisText(hi)}`;
  const x = (v) => ((v - lo) / (hi - lo)) * w;
  ctx.font = "11px system-ui, sans-serif";
  for (const { lane, y } of laneLayout()) {
    ctx.fillStyle = "#555";
    ctx.fillText(lane.name, 4, y - 3);
    ctx.fillStyle = "#eceef0";
    ctx.fillRect(0, y, w, LANE_H);
    ctx.fillStyle = "#b8bcc2";
    for (const b of lane.busy) ctx.fillRect(x(b), y + 4, 1, LANE_H - 8);
    for (const [s, e, id] of lane.slices) {
      const name = d.names[id];
      const x0 = Math.max(x(s), 0), x1 = Math.min(x(e), w);
      ctx.fillStyle = colorOf(id, name);
      ctx.fillRect(x0, y, Math.max(1, x1 - x0), LANE_H);
      if (x1 - x0 > 30) {
        ctx.save();
        ctx.beginPath(); ctx.rect(x0, y, x1 - x0, LANE_H); ctx.clip();
        ctx.fillStyle = "#fff";
        ctx.fillText(name, x0 + 3, y + 17);
        ctx.restore();
      }
    }
    ctx.fillStyle = "#2e8b57";
    for (const [m] of lane.msgs) ctx.fillRect(x(m) - 1, y + 3, 3, LANE_H - 6);
    ctx.fillStyle = "#c0392b";
    for (const [m] of lane.marks) ctx.fillRect(x(m), y - 2, 2, LANE_H + 4);
  }
  const c = state.tl.cursor;
  if (c !== null && c !== undefined && c >= lo && c <= hi) {
    ctx.fillStyle = "#111";
    ctx.fillRect(x(c), 0, 1, h);
  }
}

function timelineAt(px) {
  const { lo, hi } = state.tl;
  return lo + (px / $("timeline").clientWidth) * (hi - lo);
}

function setupTimeline() {
  const cv = $("timeline");
  let drag = null;
  cv.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    if (state.tl.lo === null) return;
    const [emin, emax] = state.tl.extent;
    const at = timelineAt(ev.offsetX);
    const f = ev.deltaY < 0 ? 0.8 : 1.25;
    let lo = at - (at - state.tl.lo) * f, hi = at + (state.tl.hi - at) * f;
    const least = Math.max((emax - emin) * 1e-7, state.tl.data.axis === "rows" ? 20 : 1);
    if (hi - lo < least) { const m = (lo + hi) / 2; lo = m - least / 2; hi = m + least / 2; }
    state.tl.lo = Math.max(emin, lo); state.tl.hi = Math.min(emax, hi);
    drawTimeline(); loadTimeline();
  }, { passive: false });
  cv.addEventListener("mousedown", (ev) => { drag = { x: ev.offsetX, lo: state.tl.lo, hi: state.tl.hi, moved: false }; });
  cv.addEventListener("mousemove", (ev) => {
    if (!drag || state.tl.lo === null) return;
    const dx = ev.offsetX - drag.x;
    if (Math.abs(dx) > 3) drag.moved = true;
    if (!drag.moved) return;
    const [emin, emax] = state.tl.extent;
    const span = drag.hi - drag.lo;
    let lo = drag.lo - (dx / cv.clientWidth) * span;
    lo = Math.max(emin, Math.min(lo, emax - span));
    state.tl.lo = lo; state.tl.hi = lo + span;
    drawTimeline();
  });
  window.addEventListener("mouseup", (ev) => {
    if (!drag) return;
    const moved = drag.moved;
    drag = null;
    if (moved) { loadTimeline(); return; }
    if (ev.target === cv) timelineClick(ev.offsetX, ev.offsetY);
  });
  $("tl-reset").addEventListener("click", () => { state.tl.lo = null; state.tl.hi = null; loadTimeline(); });
}

// A click on a slice selects its first instruction; on a mark, its element.
function timelineClick(px, py) {
  if (state.tl.lo === null) return;
  const at = timelineAt(px);
  const tol = ((state.tl.hi - state.tl.lo) / $("timeline").clientWidth) * 3;
  for (const { lane, y } of laneLayout()) {
    if (py < y - 14 || py > y + LANE_H) continue;
    for (const [x, row] of [...lane.marks, ...lane.msgs]) {
      if (Math.abs(x - at) <= tol) { select(row); return; }
    }
    for (const [s, e, , first] of lane.slices) {
      if (at >= s - tol && at < e + tol) { select(first); return; }
    }
  }
  if (state.tl.data && state.tl.data.axis === "rows") select(Math.floor(at));
}

// ---- overview ---------------------------------------------------------------------

function renderOverview(o) {
  const root = $("overview-body");
  const frag = document.createDocumentFragment();
  frag.appendChild(el("h3", "", "Input"));
  frag.appendChild(el("div", "mono", o.input));
  frag.appendChild(el("div", "", `${o.elements} elements, ${o.rows} rows (instructions and other elements); decoded in ${o.decode_seconds} s`));
  if (o.symbols) frag.appendChild(el("div", "msg warn", o.symbols));
  frag.appendChild(el("h3", "", "Buffers"));
  frag.appendChild(table(["name", "format", "files"], o.buffers.map((b) => [b.name, b.format, b.files.map(basename).join(", ")])));
  frag.appendChild(el("h3", "", "Sources and configuration"));
  frag.appendChild(table(["name", "protocol", "type", "core", "registers"], o.sources.map((s) => [s.name, s.protocol, s.type, s.core,
    Object.entries(s.registers).map(([k, v]) => `${k}=${v}`).join(" ")])));
  for (const inf of o.inferred) frag.appendChild(el("div", "mono", "inferred: " + inf));
  frag.appendChild(el("h3", "", "Decoded runs"));
  frag.appendChild(table(["#", "buffer", "source", "protocol", "trace ID", "core", "elements"], o.runs.map((r) => [r.index, r.buffer, r.source, r.protocol, r.trace_id, r.core, r.elements])));
  frag.appendChild(el("h3", "", "What the trace lost"));
  frag.appendChild(el("pre", "", o.loss_text.join("\n") || "nothing"));
  if (o.issues.length) {
    frag.appendChild(el("h3", "", "Problems met"));
    for (const i of o.issues) frag.appendChild(el("div", "msg warn", i));
  }
  frag.appendChild(el("h3", "", "Top functions"));
  if (o.top.length) {
    const t = table(["function", "instructions", "share", "start"], o.top.map((f) => [f.name, f.instructions, (f.share * 100).toFixed(1) + " %", f.start]));
    t.querySelectorAll("tr").forEach((tr, i) => {
      if (i === 0) return;
      tr.style.cursor = "pointer";
      tr.addEventListener("click", () => { showTab("trace"); $("search").value = o.top[i - 1].name; search(true); });
    });
    frag.appendChild(t);
  } else {
    frag.appendChild(el("div", "msg", "no function symbols"));
  }
  root.replaceChildren(frag);
}

function table(heads, rows) {
  const t = el("table");
  t.appendChild(header(heads));
  for (const r of rows) {
    const tr = el("tr");
    for (const v of r) tr.appendChild(el("td", "", v));
    t.appendChild(tr);
  }
  return t;
}

function showTab(name) {
  for (const b of document.querySelectorAll("button.tab")) b.classList.toggle("active", b.dataset.tab === name);
  $("view-trace").hidden = name !== "trace";
  $("view-overview").hidden = name !== "overview";
  if (name === "trace") { renderList(); drawTimeline(); }
}

// ---- start ------------------------------------------------------------------------

async function start() {
  const o = await api("overview");
  state.overview = o;
  state.total = o.rows;
  // The input's last path part; the whole path on hover.
  $("input-name").textContent = o.input.replace(/[\\/]+$/, "").split(/[\\/]/).pop() || o.input;
  $("input-name").title = o.input;
  // Columns with nothing to show in this trace are left out.
  const cols = o.columns || {};
  for (const name of ["func", "src", "time"]) $("view-trace").classList.toggle("no-" + name, cols[name] === false);
  layoutList();
  renderOverview(o);
  // A trace with data or messages gets a larger data pane.
  if (o.data > 0) $("side").style.gridTemplateRows = "minmax(0, 1.5fr) minmax(0, 1.5fr) minmax(0, 2fr)";
  $("list-scroll").addEventListener("scroll", onScroll);
  $("list-scroll").addEventListener("wheel", onWheel, { passive: false });
  $("list-body").addEventListener("click", (ev) => {
    const rowDiv = ev.target.closest(".row");
    if (rowDiv) select(parseInt(rowDiv.dataset.row, 10), false);
  });
  $("search-form").addEventListener("submit", (ev) => { ev.preventDefault(); search(true); });
  $("search-prev").addEventListener("click", () => search(false));
  $("exec-next").addEventListener("click", () => state.selectedRec && findExecution(state.selectedRec.addr, true));
  $("exec-prev").addEventListener("click", () => state.selectedRec && findExecution(state.selectedRec.addr, false));
  for (const b of document.querySelectorAll("button.tab")) b.addEventListener("click", () => showTab(b.dataset.tab));
  document.addEventListener("keydown", (ev) => {
    if (ev.target.tagName === "INPUT" || state.selected === null) return;
    if (ev.key === "ArrowDown") { ev.preventDefault(); select(state.selected + 1); }
    if (ev.key === "ArrowUp") { ev.preventDefault(); select(state.selected - 1); }
  });
  window.addEventListener("resize", () => { layoutList(); renderList(); drawTimeline(); loadTimeline(); });
  setupTimeline();
  renderList();
  loadTimeline();
  const problems = o.issues.length ? ` · ${o.issues.length} problem(s) met: see Overview` : "";
  status(`${o.rows} rows${problems}${o.symbols ? " · " + o.symbols : ""}`);
  document.body.dataset.ready = "1";
}

window.addEventListener("unhandledrejection", (ev) => { status("error: " + (ev.reason && ev.reason.message)); });
start().catch((err) => { status("cannot load the trace: " + err.message); });
