// infermeter dashboard: no framework, no CDN; charts are drawn as inline SVG.
"use strict";

const view = document.getElementById("view");
const conn = document.getElementById("conn");
const params = new URLSearchParams(location.search);
const token = params.get("token");
let socket = null;
let live = { samples: [], layers: {}, runs: {}, progress: [] };
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

// An SVG that scales down to its container (phones) and never beyond its natural width.
function svgOpen(w, h, extra = "") {
  return `<svg viewBox="0 0 ${w} ${h}" width="${w}" style="max-width:100%;height:auto" role="img" ${extra}>`;
}

// Bar chart: series = [{name, color, values}], labels on x; stacked when asked. `errors`:
// per label [low, high] of the bar's whole (a 95% interval), drawn as whiskers at its top.
function bars(labels, series, { unit = "ms", height = 220, stacked = false, errors = null, testid = "" } = {}) {
  const longest = Math.max(1, ...labels.map((l) => String(l).length));
  const slot = Math.max(26, Math.min(46, 7 * longest));
  const rotate = 6.2 * longest > slot;  // labels that would overprint are turned
  // a turned label reaches left of its bar by about cos(40°) x its length
  const left = rotate ? Math.max(52, Math.round(4.6 * longest - slot / 2 + 8)) : 52;
  const w = Math.max(360, slot * labels.length + left + 18);
  const bottom = rotate ? Math.min(110, 12 + 5.2 * longest) : 28, top = 22;
  const h = height + (rotate ? bottom - 28 : 0);
  const totals = labels.map((_, i) => stacked ? series.reduce((s, x) => s + (x.values[i] || 0), 0)
    : Math.max(...series.map((x) => x.values[i] || 0)));
  const highs = errors ? errors.map((e, i) => (e && e[1] != null ? e[1] : totals[i])) : totals;
  const max = Math.max(1e-9, ...totals, ...highs) * 1.1;
  const y = (v) => top + (h - top - bottom) * (1 - v / max);
  const bw = (w - left - 10) / labels.length;
  let svg = svgOpen(w, h, testid ? `data-testid="${testid}"` : "");
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
    const e = errors && errors[i];
    if (e && e[0] != null && e[1] != null) {
      const xc = left + i * bw + bw / 2;
      svg += `<g class="whisker"><line x1="${xc}" x2="${xc}" y1="${y(e[0])}" y2="${y(e[1])}" stroke="#222"/>` +
        `<line x1="${xc - 4}" x2="${xc + 4}" y1="${y(e[0])}" y2="${y(e[0])}" stroke="#222"/>` +
        `<line x1="${xc - 4}" x2="${xc + 4}" y1="${y(e[1])}" y2="${y(e[1])}" stroke="#222"/>` +
        `<title>95% interval of the median: ${num(e[0])}-${num(e[1])} ${unit}</title></g>`;
    }
    const xl = left + i * bw + bw / 2, yl = h - bottom + 14;
    svg += rotate
      ? `<text x="${xl}" y="${yl}" text-anchor="end" transform="rotate(-40 ${xl} ${yl})">${esc(lab)}</text>`
      : `<text x="${xl}" y="${h - 10}" text-anchor="middle">${esc(lab)}</text>`;
  });
  svg += `<text x="6" y="12">${esc(unit)}</text></svg>`;
  const legend = series.map((s) => `<span style="color:${s.color}">■</span> ${esc(s.name)}`).join(" &nbsp; ") +
    (errors ? " &nbsp; ⟂ 95% interval of the median" : "");
  return `<div class="chart">${svg}<div class="muted">${legend}</div></div>`;
}

// Every sample as a dot, one row per group (a run), the median as a bar; outliers in red.
function strip(groups, { unit = "ms", testid = "" } = {}) {
  const all = groups.flatMap((g) => g.values.filter((v) => v != null));
  if (!all.length) return "";
  const w = 640, rowH = 26, left = 130, top = 8, h = top + rowH * groups.length + 26;
  const lo = Math.min(...all), hi = Math.max(...all), span = hi - lo || Math.abs(hi) || 1;
  const x = (v) => left + (w - left - 16) * ((v - lo) / span) * 0.96 + 6;
  let svg = svgOpen(w, h, testid ? `data-testid="${testid}"` : "");
  groups.forEach((g, r) => {
    const yc = top + rowH * r + rowH / 2, out = new Set(g.outliers || []);
    svg += `<text x="${left - 8}" y="${yc + 4}" text-anchor="end">${esc(g.name)}</text>`;
    g.values.forEach((v, i) => {
      if (v == null) return;
      const bad = out.has(i);
      svg += `<circle class="${bad ? "dot outlier" : "dot"}" cx="${x(v)}" cy="${yc}" r="4" fill="${bad ? "#b00020" : g.color}" fill-opacity="0.7"><title>sample ${esc(g.ids ? g.ids[i] : i)}: ${num(v)} ${unit}${bad ? " (outlier)" : ""}</title></circle>`;
    });
    if (g.median != null) svg += `<line x1="${x(g.median)}" x2="${x(g.median)}" y1="${yc - 10}" y2="${yc + 10}" stroke="#222" stroke-width="2"><title>median ${num(g.median)} ${unit}</title></line>`;
  });
  const digits = span < 0.1 ? 3 : span < 1 ? 2 : 1;  // ticks that differ from each other
  for (let k = 0; k <= 4; k++) {
    const v = lo + (span * k) / 4;
    svg += `<text x="${x(v)}" y="${h - 6}" text-anchor="middle">${num(v, digits)}</text>`;
  }
  svg += `<text x="6" y="${h - 6}">${esc(unit)}</text></svg>`;
  return `<div class="chart">${svg}<div class="muted">● a sample &nbsp; | median &nbsp; <span style="color:#b00020">●</span> outlier (kept)</div></div>`;
}

function line(values, { unit = "ms", height = 180, color = "#DD8452" } = {}) {
  if (!values.length) return "";
  const w = 640, h = height, left = 52, bottom = 24, top = 22;
  const max = Math.max(...values) * 1.1 || 1;
  const x = (i) => left + ((w - left - 10) * i) / Math.max(1, values.length - 1);
  const y = (v) => top + (h - top - bottom) * (1 - v / max);
  const pts = values.map((v, i) => `${x(i)},${y(v)}`).join(" ");
  let svg = svgOpen(w, h, 'data-testid="decode-steps"');
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

const PART_COLORS = { attention: "#4C72B0", mlp: "#DD8452", moe: "#C44E52", mixer: "#8172B3", norm: "#937860", rest: "#BBBBBB" };

// Per block, its parts stacked (mean ms per call of the block), the block's untimed rest on top.
function partsChart(rows, phase) {
  const mine = rows.filter((r) => r.phase === phase && r.layer !== null && r.layer !== undefined);
  const layers = [...new Set(mine.filter((r) => r.kind === "block").map((r) => r.layer))].sort((a, b) => a - b);
  if (!layers.length) return "";
  const kinds = Object.keys(PART_COLORS).filter((k) => k !== "rest" && mine.some((r) => r.kind === k));
  if (!kinds.length) return "";
  const per = (l, k) => {
    const block = mine.find((r) => r.layer === l && r.kind === "block");
    const calls = block ? block.calls : 1;
    return mine.filter((r) => r.layer === l && r.kind === k).reduce((s, r) => s + r.total_ms, 0) / Math.max(1, calls);
  };
  const series = kinds.map((k) => ({ name: k, color: PART_COLORS[k], values: layers.map((l) => per(l, k)) }));
  const rest = layers.map((l, i) => Math.max(0, per(l, "block") - series.reduce((s, x) => s + x.values[i], 0)));
  series.push({ name: "rest of the block", color: PART_COLORS.rest, values: rest });
  return bars(layers.map(String), series, { stacked: true, unit: "ms per call", testid: `parts-${phase}` });
}

function scroll(html) { return `<div class="scroll">${html}</div>`; }

function ci(st, d = 2) {
  return st && st.median_ci95_low != null ? `95% CI ${num(st.median_ci95_low, d)}-${num(st.median_ci95_high, d)}` : "";
}

const runCols = [
  { t: "id", l: 1, f: (r) => `<a href="#/run/${esc(r.id)}">${esc(r.id)}</a>` },
  { t: "created", l: 1, f: (r) => esc(String(r.created).slice(0, 16).replace("T", " ")) },
  { t: "status", l: 1, f: (r) => `<span class="status-${esc(r.status)}">${esc(r.status)}</span>` },
  { t: "model", l: 1, f: (r) => esc(r.model) },
  { t: "mode", l: 1, f: (r) => esc(r.mode || "") },
  { t: "knobs", l: 1, f: (r) => esc(Object.entries(r.label || r.knobs || {}).map(([k, v]) => k + "=" + v).join(" ")) },
  { t: "samples", f: (r) => esc(r.samples) },
  { t: "TTFT ms (median)", f: (r) => num(r.ttft_ms) },
  { t: "TPOT ms (median)", f: (r) => num(r.tpot_ms) },
  { t: "tok/s (median)", f: (r) => num(r.tokens_per_s, 1) },
];

async function home() {
  const [runs, sweeps] = await Promise.all([api("/api/runs"), api("/api/sweeps")]);
  view.innerHTML = `<h1>Runs</h1>` + (runs.runs.length ? scroll(table(runCols, runs.runs.map((r) => ({ ...r, _id: "run-row" })), 'data-testid="runs"')) : `<p class="muted">no runs yet: <code>infermeter profile</code></p>`) +
    `<h2>Sweeps</h2>` + (sweeps.sweeps.length ? scroll(table([
      { t: "id", l: 1, f: (s) => `<a href="#/sweep/${esc(s.id)}">${esc(s.id)}</a>` },
      { t: "name", l: 1, f: (s) => esc(s.name) },
      { t: "created", l: 1, f: (s) => esc(String(s.created).slice(0, 16)) },
      { t: "points", f: (s) => esc(s.runs) },
      { t: "knobs", l: 1, f: (s) => esc(Object.entries(s.knobs || {}).map(([k, v]) => k + "=" + v.join(",")).join("; ")) },
    ], sweeps.sweeps)) : `<p class="muted">no sweeps yet</p>`);
}

function card(s, label, key, unit, d = 2) {
  const st = s[key] || {};
  const mark = st.noisy ? ` <span class="warn" title="spread over 10% or an outlier">⚠ noisy</span>` : "";
  return `<div class="card" data-testid="card-${key}"><b>${num(st.p50, d)}</b><span>${label} (${unit}), median${mark}</span><small>${ci(st, d)}</small></div>`;
}

function sloLine(slo) {
  if (!slo || !slo.slos) return "";
  const parts = Object.entries(slo.slos).map(([m, b]) => `${esc(m)} &le; ${esc(b)}: ${num(slo.attainment_pct[m], 1)}%`).join(", ");
  return `<p data-testid="run-slo">SLO attainment ${parts} · all met ${num(slo.all_met_pct, 1)}% · goodput ${num(slo.goodput_rps, 2)} req/s</p>`;
}

async function runPage(id) {
  const doc = await api("/api/runs/" + encodeURIComponent(id));
  const m = doc.meta, s = doc.summary[0];
  const samples = doc.all_samples.filter((x) => !x.warmup);
  const layers = (doc.layers && (doc.layers.layers || doc.layers.live_layers)) || [];
  const out = (key) => (s[key] && s[key].outliers) || [];
  const bad = new Set([...out("ttft_ms"), ...out("tpot_ms"), ...out("total_ms")]);
  const group = (key, name, color) => ({ name, color, values: samples.map((x) => x[key]), ids: samples.map((x) => x.sample_id), outliers: out(key), median: s[key] && s[key].p50 });
  const knobs = Object.entries(doc.summary[0].config || {}).filter(([k]) => !(k in (m.config || {})));
  view.innerHTML = `<h1 data-testid="run-title">run ${esc(m.run_id)} · ${esc(m.model)}</h1>
    <p class="muted">${esc(m.device && m.device.name)} · mode ${esc(m.config && m.config.mode)}${knobs.length ? " · knobs " + esc(knobs.map(([k, v]) => k + "=" + v).join(", ")) : ""} · status <span class="status-${esc(m.status)}" data-testid="run-status">${esc(m.status)}</span> · ${esc(m.created)}
    · <a href="/api/runs/${esc(m.run_id)}/trace" download data-testid="trace-link">download the Perfetto trace</a>
    · <a href="#/history/${encodeURIComponent(m.model)}" data-testid="history-link">this model over time</a></p>
    <div class="cards">${card(s, "TTFT", "ttft_ms", "ms")}${card(s, "TPOT", "tpot_ms", "ms")}${card(s, "throughput", "tokens_per_s", "tok/s", 1)}${card(s, "peak RSS", "rss_peak_mib", "MiB", 0)}${s.j_per_token && s.j_per_token.n ? card(s, "energy", "j_per_token", "J/tok", 3) : ""}</div>
    ${sloLine(s.slo)}
    <form id="cmp" class="inline">compare with run <input id="cmp-id" size="14" placeholder="run id" data-testid="compare-input"> <button>compare</button></form>
    <h2>Distribution across samples</h2>` +
    strip([group("ttft_ms", "TTFT", "#4C72B0")], { testid: "dist-ttft" }) +
    strip([group("tpot_ms", "TPOT", "#DD8452")], { testid: "dist-tpot" }) +
    `<h2>Samples</h2>` + scroll(table([
      { t: "sample", f: (x) => esc(x.sample_id) + (bad.has(samples.indexOf(x)) ? ' <span class="warn">outlier</span>' : "") }, { t: "TTFT ms", f: (x) => num(x.ttft_ms) },
      { t: "TPOT ms", f: (x) => num(x.tpot_ms) }, { t: "total ms", f: (x) => num(x.total_ms) },
      { t: "tok/s", f: (x) => num(x.tokens_per_s, 1) }, { t: "new tokens", f: (x) => esc(x.new_tokens) },
    ], samples.map((x, i) => ({ ...x, _cls: bad.has(i) ? "outlier" : "" })), 'data-testid="samples"')) +
    (layers.length ? `<h2>Per-layer time (mean ms per call)</h2>` + layerChart(layers) +
      `<h2>Parts of each block: prefill</h2>` + partsChart(layers, "prefill") +
      `<h2>Parts of each block: decode</h2>` + partsChart(layers, "decode")
      : `<p class="muted">per-layer times need <code>--mode standard</code></p>`) +
    (samples.length ? `<h2>Decode steps of sample <select id="step-pick" data-testid="step-pick">${samples.map((x) => `<option value="${esc(x.sample_id)}">${esc(x.sample_id)}</option>`).join("")}</select></h2><div id="steps"></div>` : "") +
    `<h2>Roofline and findings</h2><div id="analysis" data-testid="analysis"><p class="muted">analysing…</p></div>`;
  const pick = document.getElementById("step-pick");
  const drawSteps = () => {
    const x = samples.find((y) => String(y.sample_id) === pick.value);
    document.getElementById("steps").innerHTML = x ? line(x.step_ms) : "";
  };
  if (pick) { pick.value = String(samples[samples.length - 1].sample_id); pick.onchange = drawSteps; drawSteps(); }
  document.getElementById("cmp").onsubmit = (e) => {
    e.preventDefault();
    const other = document.getElementById("cmp-id").value.trim();
    if (other) location.hash = `#/compare/${m.run_id},${other}`;
  };
  api(`/api/runs/${encodeURIComponent(id)}/analysis`).then(analysisHtml).catch((err) => `<p class="status-failed">analysis failed: ${esc(err.message)}</p>`)
    .then((html) => { const el = document.getElementById("analysis"); if (el) el.innerHTML = html; });
}

function analysisHtml(a) {
  const findings = (a.findings.length ? `<ul data-testid="findings">${a.findings.map((f) => `<li><b class="sev-${esc(f.severity)}">${esc(f.severity)}</b> ${esc(f.title)}<br><span class="muted">${esc(f.advice)}</span></li>`).join("")}</ul>` : `<p class="muted" data-testid="findings">no findings</p>`);
  if (a.roofline.unavailable) return `<p class="muted" data-testid="roofline-unavailable">roofline: ${esc(a.roofline.unavailable)}</p>` + findings;
  const rows = ["prefill", "decode"].map((p) => a.roofline[p]).filter(Boolean);
  const sci = (v) => (v == null ? "-" : Number(v).toExponential(2));
  const approx = (a.roofline.approximate || []).length ? `<p class="warn">approximate: ${esc(a.roofline.approximate.join("; "))}</p>` : "";
  return `<p class="muted">ceilings: ${esc(a.ceilings_source)}; times are medians</p>` + approx + scroll(table([
    { t: "phase", l: 1, f: (r) => esc(r.phase) }, { t: "FLOPs", f: (r) => sci(r.flop_count) },
    { t: "bytes", f: (r) => sci(r.bytes) }, { t: "FLOP/byte", f: (r) => num(r.intensity, 1) },
    { t: "measured ms", f: (r) => num(r.measured_ms) }, { t: "achieved FLOP/s", f: (r) => sci(r.achieved_flop_per_s) },
    { t: "% attainable", f: (r) => num(r.pct_attainable, 1) }, { t: "bound", l: 1, f: (r) => esc(r.bound || "-") },
  ], rows, 'data-testid="roofline"')) + findings;
}

const COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"];

async function comparePage(ids) {
  const doc = await api("/api/compare?runs=" + ids.map(encodeURIComponent).join(","));
  const runs = doc.runs;
  const changedKeys = [...new Set(doc.comparisons.flatMap((c) => Object.keys(c.changed)))];
  const label = (r) => [r.run_id.slice(0, 12), ...changedKeys.map((k) => k + "=" + (r.knobs || {})[k])].join(" ");
  const overlay = (key) => strip(runs.map((r, i) => {
    const vals = r.samples.map((x) => x[key]);
    const sorted = vals.filter((v) => v != null).sort((a, b) => a - b);
    const n = sorted.length, mid = n ? (n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2) : null;
    return { name: label(r).slice(0, 20), color: COLORS[i % COLORS.length], values: vals, ids: r.samples.map((x) => x.sample_id), median: mid };
  }), { testid: "overlay-" + key });
  const verdictRows = (c) => [...c.phases, { phase: "total", ...c.total }];
  view.innerHTML = `<h1 data-testid="compare-title">compare ${runs.length} runs</h1>
    <p class="muted">baseline ${esc(label(runs[0]))}; speedup = baseline median / variant median (above 1: the variant is faster), with its 95% bootstrap interval; a verdict only where the interval and a rank test agree.</p>` +
    doc.comparisons.map((c, i) => `<h2>${esc(label(runs[i + 1]))} vs baseline</h2>` +
      (Object.keys(c.changed).length ? `<p class="muted">changed: ${esc(Object.entries(c.changed).map(([k, [a, b]]) => `${k} ${a} → ${b}`).join(", "))}</p>` : "") +
      (c.paired ? `<p class="muted" data-testid="paired">samples interleaved (group ${esc(c.interleaved_group)}): each round's pair is compared, so a drift of the machine between rounds cancels</p>`
        : verdictRows(c).some((r) => r.verdict === "faster" || r.verdict === "slower") ? `<p class="warn" data-testid="drift-caveat">measured one after the other: the intervals cover the noise within each run, not a drift of the machine between them; rerun as a sweep with --interleave before acting on it</p>` : "") +
      scroll(table([
        { t: "phase", l: 1, f: (r) => esc(r.phase) }, { t: "baseline ms", f: (r) => num(r.baseline_ms) },
        { t: "variant ms", f: (r) => num(r.variant_ms) }, { t: "speedup", f: (r) => r.speedup == null ? "-" : num(r.speedup, 3) + "x" },
        { t: "95% CI", f: (r) => r.ci95_low == null ? "-" : num(r.ci95_low, 3) + "-" + num(r.ci95_high, 3) },
        { t: "verdict", l: 1, f: (r) => `<span class="verdict-${esc(String(r.verdict).split(" ")[0])}">${esc(r.verdict)}</span>` + (r.samples_to_resolve ? ` <span class="muted">(~${esc(r.samples_to_resolve)} samples would resolve it)</span>` : "") },
      ], verdictRows(c), 'data-testid="verdicts"'))).join("") +
    `<h2>TTFT of every sample</h2>` + overlay("ttft_ms") + `<h2>TPOT of every sample</h2>` + overlay("tpot_ms") +
    `<h2>Total of every sample</h2>` + overlay("total_ms");
}

async function sweepPage(id) {
  const doc = await api("/api/sweeps/" + encodeURIComponent(id));
  const knobs = Object.keys(doc.meta.knobs || {});
  const labels = doc.summary.map((r) => knobs.map((k) => k + "=" + r.config[k]).join(" "));
  const med = (r, k) => (r[k] || {}).p50;
  const mark = (r, k) => ((r.noisy || []).includes(k) ? ' <span class="warn" title="spread over 10% or an outlier">⚠</span>' : "");
  view.innerHTML = `<h1>sweep ${esc(doc.meta.sweep_id)} · ${esc(doc.meta.model)}</h1>
    <p class="muted">bars: medians over each point's measured samples; whiskers: the 95% interval of the median total</p>` +
    bars(labels, [
      { name: "prefill (TTFT)", color: "#4C72B0", values: doc.summary.map((r) => med(r, "ttft_ms")) },
      { name: "decode", color: "#DD8452", values: doc.summary.map((r) => med(r, "decode_ms")) },
    ], { stacked: true, testid: "sweep-chart", errors: doc.summary.map((r) => [(r.total_ms || {}).median_ci95_low, (r.total_ms || {}).median_ci95_high]) }) +
    scroll(table([
      ...knobs.map((k) => ({ t: k, l: 1, f: (r) => esc(r.config[k]) })),
      { t: "TTFT ms (median)", f: (r) => num(med(r, "ttft_ms")) + mark(r, "ttft_ms") }, { t: "TPOT ms (median)", f: (r) => num(med(r, "tpot_ms")) + mark(r, "tpot_ms") },
      { t: "tok/s (median)", f: (r) => num(med(r, "tokens_per_s"), 1) + mark(r, "tokens_per_s") },
      { t: "run", l: 1, f: (r) => `<a href="#/run/${esc(r.run_id)}">${esc(r.run_id)}</a>` },
    ], doc.summary)) +
    (doc.summary.length > 1 ? `<p><a data-testid="sweep-compare" href="#/compare/${doc.summary.slice(0, 8).map((r) => esc(r.run_id)).join(",")}">compare ${doc.summary.length > 8 ? "the first 8 points" : "every point"} with the first</a> (verdicts and every sample)</p>` : "");
}

const STAGES = { load: "loading the model", compile: "compiling", warmup: "warm-up", sample: "sample", requests: "requests served" };

function progressLine(p) {
  const what = p.stage === "load" ? STAGES.load + (p.done ? " (done)" : "…")
    : `${STAGES[p.stage] || p.stage} ${p.done} of ${p.total}`;
  const run = p.run_id ? ` · run <a href="#/run/${esc(p.run_id)}">${esc(p.run_id)}</a>` : "";
  const pct = p.total ? Math.round((100 * (p.stage === "load" ? p.done : p.done - 1)) / p.total) : 0;
  const st = p.steps;
  const inSample = (st && st.tokens != null ? ` · token ${esc(st.tokens)} of ${esc(st.of)}` + (st.ttft_ms != null ? ` · TTFT ${num(st.ttft_ms)} ms` : "") : "") +
    (st && st.in_flight != null ? ` · <span data-testid="live-in-flight">${esc(st.in_flight)} in flight</span>` : "") +
    (st && st.running != null ? ` · <span data-testid="live-batch">batch: ${esc(st.running)} running, ${esc(st.waiting == null ? "?" : st.waiting)} waiting` +
      (st.kv_used_pct != null ? `, KV cache ${esc(Math.round(st.kv_used_pct))}% used` : "") + "</span>" : "");
  const stepChart = st && st.step_ms && st.step_ms.length
    ? `<div class="muted">decode steps of this sample as they happen (ms${st.first_step ? `, from step ${esc(st.first_step + 1)}` : ""})</div><div data-testid="live-running-steps">` + line(st.step_ms, { height: 120 }) + "</div>" : "";
  return `<div class="progress" data-testid="live-progress"><b>${esc(p.model)}</b>${run} · ${esc(what)}${inSample} · ${esc(p.tokens)} tokens in finished samples` +
    `<div class="bar"><span style="width:${Math.max(2, Math.min(100, pct))}%"></span></div>${stepChart}</div>`;
}

function livePage() {
  const render = () => {
    const rows = live.samples.slice(-50).reverse();
    const runIds = Object.keys(live.layers);
    const latest = runIds.length ? live.layers[runIds[runIds.length - 1]] : null;
    const last = live.samples.length ? live.samples[live.samples.length - 1] : null;
    view.innerHTML = `<h1>Live</h1><p class="muted">profiles appear here from the moment they start, and their samples as they are measured, from any <code>infermeter profile</code> or <code>sweep</code> on this database.</p>` +
      (live.progress.length ? live.progress.map(progressLine).join("") : `<p class="muted" data-testid="live-idle">no profile running</p>`) +
      (rows.length ? scroll(table([
        { t: "run", l: 1, f: (x) => `<a href="#/run/${esc(x.run_id)}">${esc(x.run_id)}</a>` },
        { t: "model", l: 1, f: (x) => esc(x.model) },
        { t: "sample", f: (x) => esc(x.index) + (x.warmup ? " (warm-up)" : "") },
        { t: "TTFT ms", f: (x) => num(x.ttft_ms) }, { t: "TPOT ms", f: (x) => num(x.tpot_ms) },
        { t: "tok/s", f: (x) => num(x.tokens_per_s, 1) },
      ], rows.map((x, i) => ({ ...x, _id: "live-sample", _cls: i === 0 ? "new" : "" })), 'data-testid="live-samples"'))
        : `<p class="muted" data-testid="live-waiting">waiting for samples…</p>`) +
      (last && last.step_ms && last.step_ms.length ? `<h2>Decode steps of the latest sample (run ${esc(last.run_id)}, sample ${esc(last.index)})</h2><div data-testid="live-steps">` + line(last.step_ms) + "</div>" : "") +
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
    else if (ev.type === "progress") live.progress = ev.rows;
    listeners.forEach((f) => f(ev));
  };
}

// A metric over time: each run's median with its interval, confirmed changes as dashed lines.
function historyChart(g, unit) {
  const pts = g.points, w = 720, h = 236, left = 56, right = 12, top = 28, bottom = 40;
  const lows = pts.map((p) => (p.ci95_low == null ? p.median : p.ci95_low));
  const highs = pts.map((p) => (p.ci95_high == null ? p.median : p.ci95_high));
  let lo = Math.min(...lows), hi = Math.max(...highs);
  const pad = (hi - lo) * 0.1 || Math.abs(hi) * 0.05 || 1;
  lo -= pad; hi += pad;
  const x = (i) => left + ((w - left - right) * (i + 0.5)) / pts.length;
  const y = (v) => top + (h - top - bottom) * (1 - (v - lo) / (hi - lo));
  let svg = svgOpen(w, h, `data-testid="history-chart" data-metric="${esc(unit)}"`);
  for (let k = 0; k <= 4; k++) {
    const v = lo + ((hi - lo) * k) / 4;
    svg += `<line x1="${left}" x2="${w - right}" y1="${y(v)}" y2="${y(v)}" stroke="#eee"/><text x="${left - 6}" y="${y(v) + 4}" text-anchor="end">${num(v, hi - lo < 1 ? 3 : 1)}</text>`;
  }
  g.change_points.forEach((c) => {
    const xc = (x(c.index - 1) + x(c.index)) / 2;
    svg += `<g class="change" data-testid="history-change"><line x1="${xc}" x2="${xc}" y1="${top}" y2="${h - bottom}" stroke="#b00020" stroke-dasharray="4 3"/>` +
      `<text x="${xc + 4}" y="${top + 10}" fill="#b00020">${c.change_pct > 0 ? "+" : ""}${num(c.change_pct, 1)}%</text>` +
      `<title>change at ${esc(c.created)}: ${num(c.before_median)} → ${num(c.after_median)} ${esc(unit)} (rank test p = ${Number(c.p_value).toExponential(1)})</title></g>`;
  });
  svg += `<polyline points="${pts.map((p, i) => `${x(i)},${y(p.median)}`).join(" ")}" fill="none" stroke="#4C72B0" stroke-width="1.2"/>`;
  pts.forEach((p, i) => {
    svg += `<line x1="${x(i)}" x2="${x(i)}" y1="${y(lows[i])}" y2="${y(highs[i])}" stroke="#4C72B0"/>` +
      `<circle cx="${x(i)}" cy="${y(p.median)}" r="3.5" fill="#4C72B0"><title>run ${esc(p.run_id)} · ${esc(p.created)} · ${esc((p.commit || "-").slice(0, 8))}${p.dirty ? " (dirty)" : ""}: ${num(p.median)} ${esc(unit)} [${num(p.ci95_low)}, ${num(p.ci95_high)}]</title></circle>`;
  });
  const every = Math.max(1, Math.ceil(pts.length / 8));
  pts.forEach((p, i) => { if (i % every === 0) svg += `<text x="${x(i)}" y="${h - bottom + 16}" text-anchor="middle">${esc(p.created.slice(5, 10))}</text>`; });
  svg += `<text x="6" y="12">${esc(unit)}</text><text x="${w / 2}" y="${h - 4}" text-anchor="middle">runs, oldest first (created month-day)</text></svg>`;
  return `<div class="chart">${svg}</div>`;
}

async function historyPage(model, metric) {
  const doc = await api(`/api/history?model=${encodeURIComponent(model)}&metric=${encodeURIComponent(metric)}`);
  const metrics = ["ttft_ms", "tpot_ms", "tokens_per_s", "total_ms"];
  view.innerHTML = `<h1 data-testid="history-title">history · ${esc(model)}</h1>
    <p>metric <select id="hist-metric" data-testid="history-metric">${metrics.map((k) => `<option${k === metric ? " selected" : ""}>${k}</option>`).join("")}</select>
    <span class="muted">${esc(doc.statistic)}; dashed: a change a rank test confirms</span></p>` +
    (doc.configurations.length ? doc.configurations.map((g) => `<h2>${esc(g.label)}</h2>` + historyChart(g, metric) +
      (g.change_points.length ? `<ul>${g.change_points.map((c) => `<li>${esc(c.created.slice(0, 16))} (${esc(c.commit ? c.commit.slice(0, 8) : c.run_id)}): ${num(c.before_median)} → ${num(c.after_median)} (${c.change_pct > 0 ? "+" : ""}${num(c.change_pct, 1)}%)</li>`).join("")}</ul>` : `<p class="muted">no change the data support</p>`)).join("")
      : `<p class="muted">no finished runs of this model</p>`);
  document.getElementById("hist-metric").onchange = (e) => { location.hash = `#/history/${encodeURIComponent(model)}/${e.target.value}`; };
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
    } else if ((m = hash.match(/^#\/compare\/([0-9a-f,]{3,300})$/))) {
      await comparePage(m[1].split(",").filter(Boolean).slice(0, 8));
    } else if ((m = hash.match(/^#\/history\/([^/]{1,500})(?:\/([a-z_]+))?$/))) {
      await historyPage(decodeURIComponent(m[1]), m[2] || "tpot_ms");
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
