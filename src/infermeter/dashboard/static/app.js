// infermeter dashboard: no framework, no CDN; charts are drawn as inline SVG.
"use strict";

const view = document.getElementById("view");
const conn = document.getElementById("conn");
const params = new URLSearchParams(location.search);
const token = params.get("token");
let socket = null;
let live = { samples: [], layers: {}, runs: {} };
const listeners = new Set();

function api(path) {
  const headers = token ? { Authorization: "Bearer " + token } : {};
  return fetch(path, { headers }).then((r) => {
    if (!r.ok) throw new Error(r.status + " " + r.statusText);
    return r.json();
  });
}

function esc(v) {
  return String(v).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

function num(v, d = 2) {
  if (v === null || v === undefined || Number.isNaN(v)) return "-";
  return Number(v).toLocaleString(undefined, { maximumFractionDigits: d, minimumFractionDigits: d });
}

function table(cols, rows, attrs = "") {
  const head = cols.map((c) => `<th class="${c.l ? "l" : ""}">${esc(c.t)}</th>`).join("");
  const body = rows.map((r) => "<tr" + (r._cls ? ` class="${r._cls}"` : "") + (r._id ? ` data-testid="${r._id}"` : "") + ">" +
    cols.map((c) => `<td class="${c.l ? "l" : ""}">${c.f(r)}</td>`).join("") + "</tr>").join("");
  return `<table ${attrs}><tr>${head}</tr>${body}</table>`;
}

// Bar chart: series = [{name, color, values}], labels on x; stacked when asked.
function bars(labels, series, { unit = "ms", height = 220, stacked = false } = {}) {
  const w = Math.max(360, 46 * labels.length + 70), h = height, left = 52, bottom = 28, top = 22;
  const totals = labels.map((_, i) => stacked ? series.reduce((s, x) => s + (x.values[i] || 0), 0)
    : Math.max(...series.map((x) => x.values[i] || 0)));
  const max = Math.max(1e-9, ...totals) * 1.1;
  const y = (v) => top + (h - top - bottom) * (1 - v / max);
  const bw = (w - left - 10) / labels.length;
  let svg = `<svg width="${w}" height="${h}" role="img">`;
  for (let k = 0; k <= 4; k++) {
    const v = (max * k) / 4, yy = y(v);
    svg += `<line x1="${left}" x2="${w - 6}" y1="${yy}" y2="${yy}" stroke="#eee"/>` +
      `<text x="${left - 6}" y="${yy + 4}" text-anchor="end">${num(v, v < 10 ? 1 : 0)}</text>`;
  }
  labels.forEach((lab, i) => {
    let base = 0;
    series.forEach((s, j) => {
      const v = s.values[i] || 0;
      const x0 = left + i * bw + (stacked ? bw * 0.15 : bw * 0.15 + (j * bw * 0.7) / series.length);
      const wid = stacked ? bw * 0.7 : (bw * 0.7) / series.length;
      const y0 = y(base + v), y1 = y(base);
      svg += `<rect x="${x0}" y="${y0}" width="${wid}" height="${Math.max(0, y1 - y0)}" fill="${s.color}"><title>${esc(s.name)} ${esc(lab)}: ${num(v)} ${unit}</title></rect>`;
      if (stacked) base += v;
    });
    svg += `<text x="${left + i * bw + bw / 2}" y="${h - 10}" text-anchor="middle">${esc(lab)}</text>`;
  });
  svg += `<text x="6" y="12">${esc(unit)}</text></svg>`;
  const legend = series.map((s) => `<span style="color:${s.color}">■</span> ${esc(s.name)}`).join(" &nbsp; ");
  return `<div class="chart">${svg}<div class="muted">${legend}</div></div>`;
}

function line(values, { unit = "ms", height = 180, color = "#DD8452" } = {}) {
  if (!values.length) return "";
  const w = 640, h = height, left = 52, bottom = 24, top = 22;
  const max = Math.max(...values) * 1.1 || 1;
  const x = (i) => left + ((w - left - 10) * i) / Math.max(1, values.length - 1);
  const y = (v) => top + (h - top - bottom) * (1 - v / max);
  const pts = values.map((v, i) => `${x(i)},${y(v)}`).join(" ");
  let svg = `<svg width="${w}" height="${h}">`;
  for (let k = 0; k <= 4; k++) {
    const v = (max * k) / 4;
    svg += `<line x1="${left}" x2="${w - 6}" y1="${y(v)}" y2="${y(v)}" stroke="#eee"/><text x="${left - 6}" y="${y(v) + 4}" text-anchor="end">${num(v, 1)}</text>`;
  }
  svg += `<polyline points="${pts}" fill="none" stroke="${color}" stroke-width="1.5"/>` +
    `<text x="${w / 2}" y="${h - 4}" text-anchor="middle">generated token</text><text x="6" y="12">${esc(unit)}</text></svg>`;
  return `<div class="chart">${svg}</div>`;
}

function layerChart(rows) {
  const blocks = rows.filter((r) => r.kind === "block");
  const layers = [...new Set(blocks.map((r) => r.layer))].sort((a, b) => a - b);
  const pick = (phase) => layers.map((l) => (blocks.find((r) => r.layer === l && r.phase === phase) || {}).mean_ms || 0);
  return bars(layers.map(String), [
    { name: "prefill ms/call", color: "#4C72B0", values: pick("prefill") },
    { name: "decode ms/call", color: "#DD8452", values: pick("decode") },
  ]);
}

const runCols = [
  { t: "id", l: 1, f: (r) => `<a href="#/run/${esc(r.id)}">${esc(r.id)}</a>` },
  { t: "created", l: 1, f: (r) => esc(String(r.created).slice(0, 16).replace("T", " ")) },
  { t: "status", l: 1, f: (r) => `<span class="status-${esc(r.status)}">${esc(r.status)}</span>` },
  { t: "model", l: 1, f: (r) => esc(r.model) },
  { t: "samples", f: (r) => esc(r.samples) },
  { t: "TTFT ms", f: (r) => num(r.ttft_ms) },
  { t: "TPOT ms", f: (r) => num(r.tpot_ms) },
  { t: "tok/s", f: (r) => num(r.tokens_per_s, 1) },
];

async function home() {
  const [runs, sweeps] = await Promise.all([api("/api/runs"), api("/api/sweeps")]);
  view.innerHTML = `<h1>Runs</h1>` + (runs.runs.length ? table(runCols, runs.runs.map((r) => ({ ...r, _id: "run-row" })), 'data-testid="runs"') : `<p class="muted">no runs yet: <code>infermeter profile</code></p>`) +
    `<h2>Sweeps</h2>` + (sweeps.sweeps.length ? table([
      { t: "id", l: 1, f: (s) => `<a href="#/sweep/${esc(s.id)}">${esc(s.id)}</a>` },
      { t: "name", l: 1, f: (s) => esc(s.name) },
      { t: "created", l: 1, f: (s) => esc(String(s.created).slice(0, 16)) },
      { t: "points", f: (s) => esc(s.runs) },
      { t: "knobs", l: 1, f: (s) => esc(Object.entries(s.knobs || {}).map(([k, v]) => k + "=" + v.join(",")).join("; ")) },
    ], sweeps.sweeps) : `<p class="muted">no sweeps yet</p>`);
}

async function runPage(id) {
  const doc = await api("/api/runs/" + encodeURIComponent(id));
  const m = doc.meta, s = doc.summary[0];
  const card = (label, key, unit, d = 2) => `<div class="card"><b>${num(s[key] && s[key].mean, d)}</b><span>${label} (${unit})</span></div>`;
  const samples = doc.all_samples.filter((x) => !x.warmup);
  const last = samples[samples.length - 1];
  const layers = (doc.layers && (doc.layers.layers || doc.layers.live_layers)) || [];
  view.innerHTML = `<h1 data-testid="run-title">run ${esc(m.run_id)} · ${esc(m.model)}</h1>
    <p class="muted">${esc(m.device && m.device.name)} · status <span class="status-${esc(m.status)}" data-testid="run-status">${esc(m.status)}</span> · ${esc(m.created)}</p>
    <div class="cards">${card("TTFT", "ttft_ms", "ms")}${card("TPOT", "tpot_ms", "ms")}${card("throughput", "tokens_per_s", "tok/s", 1)}${card("peak RSS", "rss_peak_mb", "MiB", 0)}${s.j_per_token && s.j_per_token.n ? card("energy", "j_per_token", "J/tok", 3) : ""}</div>
    <h2>Samples</h2>` + table([
      { t: "sample", f: (x) => esc(x.sample_id) }, { t: "TTFT ms", f: (x) => num(x.ttft_ms) },
      { t: "TPOT ms", f: (x) => num(x.tpot_ms) }, { t: "total ms", f: (x) => num(x.total_ms) },
      { t: "tok/s", f: (x) => num(x.tokens_per_s, 1) }, { t: "new tokens", f: (x) => esc(x.new_tokens) },
    ], samples, 'data-testid="samples"') +
    (layers.length ? `<h2>Per-layer time (mean ms per call)</h2>` + layerChart(layers) : `<p class="muted">per-layer times need <code>--mode standard</code></p>`) +
    (last ? `<h2>Decode steps of sample ${esc(last.sample_id)}</h2>` + line(last.step_ms) : "");
}

async function sweepPage(id) {
  const doc = await api("/api/sweeps/" + encodeURIComponent(id));
  const knobs = Object.keys(doc.meta.knobs || {});
  const labels = doc.summary.map((r) => knobs.map((k) => k + "=" + r.config[k]).join(" "));
  view.innerHTML = `<h1>sweep ${esc(doc.meta.sweep_id)} · ${esc(doc.meta.model)}</h1>` +
    bars(labels, [
      { name: "prefill (TTFT)", color: "#4C72B0", values: doc.summary.map((r) => r.ttft_ms.mean) },
      { name: "decode", color: "#DD8452", values: doc.summary.map((r) => r.decode_ms.mean) },
    ], { stacked: true }) +
    table([
      ...knobs.map((k) => ({ t: k, l: 1, f: (r) => esc(r.config[k]) })),
      { t: "TTFT ms", f: (r) => num(r.ttft_ms.mean) }, { t: "TPOT ms", f: (r) => num(r.tpot_ms.mean) },
      { t: "tok/s", f: (r) => num(r.tokens_per_s.mean, 1) },
      { t: "run", l: 1, f: (r) => `<a href="#/run/${esc(r.run_id)}">${esc(r.run_id)}</a>` },
    ], doc.summary);
}

function livePage() {
  const render = () => {
    const rows = live.samples.slice(-50).reverse();
    const runIds = Object.keys(live.layers);
    const latest = runIds.length ? live.layers[runIds[runIds.length - 1]] : null;
    view.innerHTML = `<h1>Live</h1><p class="muted">samples appear here as any <code>infermeter profile</code> or <code>sweep</code> on this database measures them.</p>` +
      (rows.length ? table([
        { t: "run", l: 1, f: (x) => `<a href="#/run/${esc(x.run_id)}">${esc(x.run_id)}</a>` },
        { t: "model", l: 1, f: (x) => esc(x.model) },
        { t: "sample", f: (x) => esc(x.index) + (x.warmup ? " (warm-up)" : "") },
        { t: "TTFT ms", f: (x) => num(x.ttft_ms) }, { t: "TPOT ms", f: (x) => num(x.tpot_ms) },
        { t: "tok/s", f: (x) => num(x.tokens_per_s, 1) },
      ], rows.map((x, i) => ({ ...x, _id: "live-sample", _cls: i === 0 ? "new" : "" })), 'data-testid="live-samples"')
        : `<p class="muted" data-testid="live-waiting">waiting for samples…</p>`) +
      (latest ? `<h2>Per-layer time so far: run ${esc(runIds[runIds.length - 1])}</h2><div data-testid="live-layers">` + layerChart(latest) + "</div>" : "");
  };
  render();
  return render;
}

function connect() {
  const proto = location.protocol === "https:" ? "wss" : "ws";
  socket = new WebSocket(`${proto}://${location.host}/ws/live` + (token ? "?token=" + encodeURIComponent(token) : ""));
  socket.onopen = () => { conn.textContent = "live"; conn.classList.add("on"); };
  socket.onclose = () => { conn.textContent = "offline (retrying)"; conn.classList.remove("on"); setTimeout(connect, 2000); };
  socket.onmessage = (msg) => {
    const ev = JSON.parse(msg.data);
    if (ev.type === "sample") live.samples.push(ev.sample);
    else if (ev.type === "layers") live.layers[ev.run_id] = ev.rows;
    else if (ev.type === "run") live.runs[ev.run.id] = ev.run;
    listeners.forEach((f) => f(ev));
  };
}

async function route() {
  listeners.clear();
  const hash = location.hash || "#/";
  try {
    let m;
    if ((m = hash.match(/^#\/run\/([0-9a-f]{1,32})$/))) {
      await runPage(m[1]);
      listeners.add((ev) => { if ((ev.type === "sample" && ev.sample.run_id === m[1]) || (ev.type === "run" && ev.run.id === m[1])) runPage(m[1]); });
    } else if ((m = hash.match(/^#\/sweep\/([0-9a-f]{1,32})$/))) {
      await sweepPage(m[1]);
    } else if (hash === "#/live") {
      const render = livePage();
      listeners.add(render);
    } else {
      await home();
      listeners.add((ev) => { if (ev.type === "run") home(); });
    }
  } catch (err) {
    view.innerHTML = `<p class="status-failed">could not load: ${esc(err.message)}</p>`;
  }
}

window.addEventListener("hashchange", route);
connect();
route();
