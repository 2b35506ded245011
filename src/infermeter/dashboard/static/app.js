// infermeter dashboard pages: no framework, no CDN; charts come from charts.js (plotly.js).
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

function num(v, d = 2) {
  if (v === null || v === undefined || Number.isNaN(v)) return "-";
  return Number(v).toLocaleString(undefined, { maximumFractionDigits: d, minimumFractionDigits: d });
}

function table(cols, rows, attrs = "") {
  // c.l: left-aligned text; c.w: text that may wrap (long knob lists), so the table fits 1280 px
  const cls = (c) => [c.l ? "l" : "", c.w ? "w" : ""].join(" ").trim();
  const head = cols.map((c) => `<th class="${cls(c)}">${esc(c.t)}</th>`).join("");
  const body = rows.map((r) => "<tr" + (r._cls ? ` class="${r._cls}"` : "") + (r._id ? ` data-testid="${r._id}"` : "") + ">" +
    cols.map((c) => `<td class="${cls(c)}">${c.f(r)}</td>`).join("") + "</tr>").join("");
  return `<table ${attrs}><tr>${head}</tr>${body}</table>`;
}

function layerChart(rows, testid = "layers") {
  const blocks = rows.filter((r) => r.kind === "block");
  const layers = [...new Set(blocks.map((r) => r.layer))].sort((a, b) => a - b);
  const pick = (phase) => layers.map((l) => (blocks.find((r) => r.layer === l && r.phase === phase) || {}).mean_ms || 0);
  const table = blocks.map((r) => ({ name: r.name, layer: r.layer, phase: r.phase, calls: r.calls, total_ms: r.total_ms, mean_ms: r.mean_ms }));
  return bars(testid, layers.map(String), [
    { name: "prefill", color: PAL.phases.prefill, values: pick("prefill") },
    { name: "decode", color: PAL.phases.decode, values: pick("decode") },
  ], { unit: "ms per call", xtitle: "decoder block", rows: table, csv: "layers" });
}

// Per block, its parts stacked (mean ms per call of the block), the block's untimed rest on top.
function partsChart(rows, phase) {
  const mine = rows.filter((r) => r.phase === phase && r.layer !== null && r.layer !== undefined);
  const layers = [...new Set(mine.filter((r) => r.kind === "block").map((r) => r.layer))].sort((a, b) => a - b);
  if (!layers.length) return "";
  const kinds = Object.keys(PAL.parts).filter((k) => k !== "rest" && mine.some((r) => r.kind === k));
  if (!kinds.length) return "";
  const per = (l, k) => {
    const block = mine.find((r) => r.layer === l && r.kind === "block");
    const calls = block ? block.calls : 1;
    return mine.filter((r) => r.layer === l && r.kind === k).reduce((s, r) => s + r.total_ms, 0) / Math.max(1, calls);
  };
  const series = kinds.map((k) => ({ name: k, color: PAL.parts[k], values: layers.map((l) => per(l, k)) }));
  const rest = layers.map((l, i) => Math.max(0, per(l, "block") - series.reduce((s, x) => s + x.values[i], 0)));
  series.push({ name: "rest of the block", color: PAL.parts.rest, values: rest });
  const table = layers.flatMap((l, i) => series.map((s) => ({ phase, layer: l, part: s.name, ms_per_call: s.values[i] })));
  return bars(`parts-${phase}`, layers.map(String), series, { stacked: true, unit: "ms per call", xtitle: "decoder block", rows: table, csv: `parts_${phase}` });
}

// Load, move to the device, then every sample's prefill and decode on one time axis.
function timelineChart(rows) {
  if (!rows || !rows.length) return "";
  const lane = (r) => (r.sample === undefined ? "setup" : `sample ${r.sample}` + (r.warmup ? " (warm-up)" : ""));
  const lanes = [...new Set(rows.map(lane))];
  const names = [...new Set(rows.map((r) => r.name))];
  const traces = names.map((n) => {
    const mine = rows.filter((r) => r.name === n);
    return {
      type: "bar", orientation: "h", name: n, y: mine.map(lane), x: mine.map((r) => r.duration_ms / 1e3),
      base: mine.map((r) => r.start_ms / 1e3), marker: { color: PAL.phases[n] || PAL.grey },
      customdata: mine.map((r) => r.duration_ms), hovertemplate: `%{y}: ${esc(n)} %{customdata:.4~g} ms<extra></extra>`,
    };
  });
  return chart("timeline", traces, {
    barmode: "overlay", xaxis: { title: { text: "time since the run started (s)" } },
    yaxis: { type: "category", categoryorder: "array", categoryarray: lanes, autorange: "reversed", rangemode: "normal" },
  }, { height: Math.max(180, 90 + 24 * lanes.length), rows, csv: "timeline" });
}

//: deep mode's per-block statistics: [table, column, title, unit]
const BLOCK_STATS = [
  ["attention", "entropy", "Attention entropy", "nats"],
  ["attention", "sparsity", "Attention sparsity", "share of weights ~0"],
  ["mlp_kill", "kill_ratio", "MLP kill ratio", "share of activations ~0"],
  ["moe_load", "imbalance", "MoE imbalance", "busiest expert / mean"],
];

// Deep mode's statistics per decoder block: prefill and decode as two lines, a chart each.
function blockStatCharts(tables) {
  return BLOCK_STATS.filter(([t, col]) => (tables[t] || []).some((r) => r[col] != null)).map(([t, col, title, unit]) => {
    const series = ["prefill", "decode"].map((phase) => {
      const sub = tables[t].filter((r) => r.phase === phase && r[col] != null).sort((a, b) => a.layer - b.layer);
      return { name: phase, color: PAL.phases[phase], x: sub.map((r) => r.layer), y: sub.map((r) => r[col]), rows: sub };
    }).filter((s) => s.x.length);
    const rows = series.flatMap((s) => s.rows.map((r) => ({ statistic: col, phase: s.name, layer: r.layer, [col]: r[col] })));
    return `<h3>${esc(title)} (${esc(unit)})</h3>` + lines(`stat-${col}`, series, { unit, xtitle: "decoder block", integerX: true, rows, csv: `block_${col}`, height: 230 });
  }).join("");
}

// A block x something table as a grid: {phase, rows, layers, xs, grid(col, fill)}, decode's
// rows where the run has them (what a long generation is made of), else prefill's.
function blockGrid(all, x) {
  const phase = all.some((r) => r.phase === "decode") ? "decode" : "prefill";
  const rows = all.filter((r) => r.phase === phase);
  const layers = [...new Set(rows.map((r) => r.layer))].sort((a, b) => a - b);
  const xs = [...new Set(rows.map((r) => r[x]))].sort((a, b) => a - b);
  const at = new Map(rows.map((r) => [r.layer + ":" + r[x], r]));
  const grid = (col, fill) => layers.map((l) => xs.map((v) => { const r = at.get(l + ":" + v); return r && r[col] != null ? r[col] : fill; }));
  return { phase, rows, layers, xs, grid };
}

// Attention entropy and sparsity of each head of each block (decode where measured): heads of
// one block differ, and a block's mean hides a head that attends to one token.
function headCharts(tables) {
  const { phase, rows, layers, xs: heads, grid } = blockGrid(tables.attention_heads || [], "head");
  if (!rows.length) return "";
  const table = rows.map((r) => ({ phase: r.phase, layer: r.layer, head: r.head, entropy: r.entropy, sparsity: r.sparsity }));
  return `<h3>Attention per head (${esc(phase)})</h3>` +
    heatmap("head-entropy", grid("entropy", null), heads.map(String), layers.map(String), { xtitle: "head", ytitle: "block", what: "entropy (nats)", rows: table, csv: "attention_heads" }) +
    heatmap("head-sparsity", grid("sparsity", null), heads.map(String), layers.map(String), { xtitle: "head", ytitle: "block", what: "sparsity", zrange: [0, 1],
      note: rows.every((r) => !r.sparsity) ? "sparsity 0 in every head: no attention weight near 0" : "" });
}

// Share of each MoE block's token assignments per expert (decode where measured), with the
// block's imbalance in its label.
function expertsChart(tables) {
  const { phase, rows, layers, xs: experts, grid } = blockGrid(tables.moe_routing || [], "expert");
  if (!rows.length) return "";
  const load = Object.fromEntries((tables.moe_load || []).filter((r) => r.phase === phase).map((r) => [r.layer, r]));
  const label = (l) => `block ${l}` + (load[l] ? ` (imbalance ${num(load[l].imbalance, 2)})` : "");
  const z = grid("share", 0);
  const table = rows.map((r) => ({ phase: r.phase, layer: r.layer, expert: r.expert, tokens: r.tokens, share: r.share }));
  return `<h3>Tokens per expert (${esc(phase)})</h3>` + heatmap("experts", z, experts.map(String), layers.map(label),
    { xtitle: "expert", ytitle: "MoE block", what: "share", rows: table, csv: "experts",
      note: "share of each block's token assignments; imbalance = busiest expert's share / the mean share (1.0 is even)" });
}

// SLO attainment per objective, against the 100% a run would have with every request in time.
function sloChart(slo) {
  if (!slo || !slo.slos) return "";
  const names = Object.entries(slo.slos).map(([m, b]) => `${m} ≤ ${b}`);
  const vals = Object.keys(slo.slos).map((m) => slo.attainment_pct[m]);
  const rows = Object.entries(slo.slos).map(([m, b]) => ({ slo: `${m} <= ${b}`, attainment_pct: slo.attainment_pct[m] }));
  return bars("slo-chart", [...names, "all met"], [{ name: "requests within the objective", color: PAL.series[2], values: [...vals, slo.all_met_pct] }],
    { unit: "% of requests", rows, csv: "slo", height: 230 });
}

// A continuous-batching load run's batch over time: running and waiting requests, KV use.
function batchChart(checks) {
  const st = ((checks || {}).load || {}).steps || [];
  if (!st.length) return "";
  const t = st.map((s) => s.t_ms / 1e3);
  const xtitle = "time since the first arrival (s)";
  const of = (keys) => keys.filter(([k]) => st.some((s) => k in s)).map(([k, name, color]) => ({ name, color, x: t, y: st.map((s) => s[k] || 0), shape: "hv" }));
  const reqs = of([["running", "running", PAL.series[0]], ["waiting", "waiting", PAL.alert]]);
  const kv = of([["kv_used_pct", "KV cache used", PAL.series[2]]]);
  return `<h2>The batch over the run</h2>` + (reqs.length ? lines("batch-requests", reqs, { unit: "requests", xtitle, rows: st, csv: "batch_state", height: 230 }) : "") +
    (kv.length ? lines("batch-kv", kv, { unit: "% of the KV cache", xtitle, height: 200 }) : "");
}

// The roofline on log axes: the ceilings (when measured or known) and the run's forwards and
// parts of them, placed by their intensity and the FLOP/s they reached.
function rooflineChart(a) {
  const roof = a.roofline;
  const rows = [...(roof.rows || []), roof.prefill, roof.decode].filter((r) => r && r.achieved_flop_per_s);
  if (!rows.length) return "";
  const traces = [];
  const ints = rows.map((r) => r.intensity);
  let lo = Math.min(...ints) / 4, hi = Math.max(...ints) * 4;
  const ceil = roof.ceilings;
  if (ceil && ceil.flop_per_s && ceil.bandwidth_bytes_per_s) {
    const dtype = (roof.workload || {}).dtype;
    const peak = ceil.flop_per_s[dtype] || Math.max(...Object.values(ceil.flop_per_s));
    const bw = ceil.bandwidth_bytes_per_s, ridge = peak / bw;
    hi = Math.max(hi, ridge * 4);
    const xs = [lo, ridge, hi];
    traces.push({ type: "scatter", mode: "lines", name: `ceiling: ${num(peak / 1e9, 0)} GFLOP/s, ${num(bw / 1e9, 0)} GB/s`, x: xs, y: xs.map((x) => Math.min(peak, x * bw)), line: { color: "#000", width: 1.6 }, hoverinfo: "skip" });
  }
  const SYMBOLS = { attention: "circle", mlp: "square", moe: "diamond", lm_head: "triangle-up", forward: "star" };
  for (const phase of ["prefill", "decode"]) {
    const mine = rows.filter((r) => r.phase === phase);
    if (!mine.length) continue;
    traces.push({
      type: "scatter", mode: "markers", name: phase, x: mine.map((r) => r.intensity), y: mine.map((r) => r.achieved_flop_per_s),
      text: mine.map((r) => r.kind), customdata: mine.map((r) => [r.measured_ms, r.pct_attainable]),
      marker: { color: PAL.phases[phase], size: mine.map((r) => (r.kind === "forward" ? 14 : 10)), symbol: mine.map((r) => SYMBOLS[r.kind] || "circle") },
      hovertemplate: `${phase} %{text}<br>%{x:.3~g} FLOP/byte, %{y:.3~s}FLOP/s<br>%{customdata[0]:.4~g} ms · %{customdata[1]:.3~g}% of attainable<extra></extra>`,
    });
  }
  const table = rows.map((r) => ({ phase: r.phase, kind: r.kind, flop_count: r.flop_count, bytes: r.bytes, intensity: r.intensity, measured_ms: r.measured_ms, achieved_flop_per_s: r.achieved_flop_per_s, pct_attainable: r.pct_attainable, bound: r.bound }));
  // whole decades, a tick at each: a log axis spanning less than one shows 2, 3, ... 9 only
  const decades = (vals) => [Math.floor(Math.log10(Math.min(...vals))), Math.ceil(Math.log10(Math.max(...vals)))];
  const ys = [...rows.map((r) => r.achieved_flop_per_s), ...traces.filter((t) => t.mode === "lines").flatMap((t) => t.y)];
  return chart("roofline-chart", traces, {
    xaxis: { type: "log", title: { text: "operational intensity (FLOP/byte)" }, range: decades([lo, hi]), dtick: 1 },
    yaxis: { type: "log", title: { text: "achieved FLOP/s" }, rangemode: "normal", range: decades([Math.min(...ys) / 2, Math.max(...ys) * 2]), dtick: 1, exponentformat: "SI" },
  }, { rows: table, csv: "roofline", height: 340, note: ceil ? "star: a whole forward; circle attention, square MLP, diamond MoE, triangle LM head" : "no ceilings for this device: <code>infermeter calibrate</code> measures them; star: a whole forward" });
}

// The time model's parts of each phase, stacked, beside the measured median.
function timeModelChart(tm) {
  const rows = (tm && tm.rows) || [];
  if (!rows.length) return `<p class="muted" data-testid="time-model-note">time model: ${esc((tm && tm.note) || "none")}</p>`;
  const labels = rows.map((r) => `${r.phase} (${r.metric})`);
  const parts = [...new Set(rows.flatMap((r) => Object.keys(r.parts_ms || {})))];
  const series = parts.map((k, i) => ({ name: k.replace(/_/g, " "), color: PAL.series[i % (PAL.series.length - 1)], values: rows.map((r) => (r.parts_ms || {})[k] || 0) }));
  const table = rows.flatMap((r) => parts.map((k) => ({ phase: r.phase, metric: r.metric, part: k, predicted_ms: (r.parts_ms || {})[k], measured_ms: r.measured_ms })));
  const measured = { type: "scatter", mode: "markers", name: "measured median", x: labels, y: rows.map((r) => r.measured_ms),
    marker: { color: "#000", size: 10, symbol: "diamond" }, hovertemplate: `%{x}: measured %{y:.4~g} ms<extra></extra>` };
  return bars("time-model", labels, series, { stacked: true, unit: "ms", rows: table, csv: "time_model", extra: [measured],
    note: "bars: the model's parts of each phase; diamond: the measured median (" + rows.map((r) => `${esc(r.phase)} error ${num(r.error_pct, 1)}%`).join(", ") + ")" });
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
  { t: "knobs", l: 1, w: 1, f: (r) => esc(Object.entries(r.label || r.knobs || {}).map(([k, v]) => k + "=" + v).join(" ")) },
  { t: "samples", f: (r) => esc(r.samples) },
  { t: "TTFT ms (median)", w: 1, f: (r) => num(r.ttft_ms) },
  { t: "TPOT ms (median)", w: 1, f: (r) => num(r.tpot_ms) },
  { t: "tok/s (median)", w: 1, f: (r) => num(r.tokens_per_s, 1) },
];

async function home() {
  const [runs, sweeps] = await Promise.all([api("/api/runs"), api("/api/sweeps")]);
  show(view, `<h1>Runs</h1>` + (runs.runs.length ? scroll(table(runCols, runs.runs.map((r) => ({ ...r, _id: "run-row" })), 'data-testid="runs"')) : `<p class="muted">no runs yet: <code>infermeter profile</code></p>`) +
    `<h2>Sweeps</h2>` + (sweeps.sweeps.length ? scroll(table([
      { t: "id", l: 1, f: (s) => `<a href="#/sweep/${esc(s.id)}">${esc(s.id)}</a>` },
      { t: "name", l: 1, f: (s) => esc(s.name) },
      { t: "created", l: 1, f: (s) => esc(String(s.created).slice(0, 16)) },
      { t: "points", f: (s) => esc(s.runs) },
      { t: "knobs", l: 1, f: (s) => esc(Object.entries(s.knobs || {}).map(([k, v]) => k + "=" + v.join(",")).join("; ")) },
    ], sweeps.sweeps)) : `<p class="muted">no sweeps yet</p>`));
}

function card(s, label, key, unit, d = 2) {
  const st = s[key] || {};
  const mark = st.noisy ? ` <span class="warn" title="spread over 10% or an outlier">⚠ noisy</span>` : "";
  return `<div class="card" data-testid="card-${key}"><b>${num(st.p50, d)}</b><span>${label} (${unit}), median${mark}</span><small>${ci(st, d)}</small></div>`;
}

// A load run's samples are requests: the card shows what the server delivered over the run (as
// `runs list` and `runs show` do), not the median request's own rate (it read 101.5 tok/s
// for a run that delivered far fewer: issue 59)
function throughputCard(s, checks) {
  const delivered = (((checks || {}).load || {}).summary || {}).output_tokens_per_s;
  if (delivered == null) return card(s, "throughput", "tokens_per_s", "tok/s", 1);
  const one = (s.tokens_per_s || {}).p50;
  return `<div class="card" data-testid="card-tokens_per_s"><b>${num(delivered, 1)}</b><span>delivered (tok/s), all requests</span><small>one request's own: median ${num(one, 1)}</small></div>`;
}

function sloLine(slo) {
  if (!slo || !slo.slos) return "";
  const parts = Object.entries(slo.slos).map(([m, b]) => `${esc(m)} &le; ${esc(b)}: ${num(slo.attainment_pct[m], 1)}%`).join(", ");
  return `<p data-testid="run-slo">SLO attainment ${parts} · all met ${num(slo.all_met_pct, 1)}% · goodput ${num(slo.goodput_rps, 2)} req/s</p>`;
}

// An endpoint load's own error: what its client cost and whether the server drifted (issue 54)
function clientLines(checks) {
  const s = ((checks || {}).load || {}).summary || {};
  const c = s.client || {}, d = s.drift;
  const lines = [];
  if (c.line) lines.push([c.line, c.verdict && c.verdict.flagged && c.verdict.flagged.length]);
  if (c.selfcheck_line) lines.push([c.selfcheck_line, false]);
  if (d && d.line) lines.push([d.line, d.moved]);
  if (!lines.length) return "";
  return `<div data-testid="load-client">` + lines.map(([t, w]) => `<p class="${w ? "warn" : "muted"}">${esc(t)}</p>`).join("") + `</div>`;
}

async function runPage(id) {
  const doc = await api("/api/runs/" + encodeURIComponent(id));
  const m = doc.meta, s = doc.summary[0];
  const samples = doc.all_samples.filter((x) => !x.warmup);
  const tables = doc.layers || {};
  const layers = tables.layers || tables.live_layers || [];
  const out = (key) => (s[key] && s[key].outliers) || [];
  const bad = new Set([...out("ttft_ms"), ...out("tpot_ms"), ...out("total_ms")]);
  const group = (key, name, color) => ({ name, color, values: samples.map((x) => x[key]), ids: samples.map((x) => x.sample_id), outliers: out(key), median: s[key] && s[key].p50 });
  const knobs = Object.entries(doc.summary[0].config || {}).filter(([k]) => !(k in (m.config || {})));
  const deep = blockStatCharts(tables) + headCharts(tables) + expertsChart(tables);
  show(view, `<h1 data-testid="run-title">run ${esc(m.run_id)} · ${esc(m.model)}</h1>
    <p class="muted">${esc(m.device && m.device.name)} · mode ${esc(m.config && m.config.mode)}${knobs.length ? " · knobs " + esc(knobs.map(([k, v]) => k + "=" + v).join(", ")) : ""} · status <span class="status-${esc(m.status)}" data-testid="run-status">${esc(m.status)}</span> · ${esc(m.created)}
    · <a href="/api/runs/${esc(m.run_id)}/trace" download data-testid="trace-link">download the Perfetto trace</a>
    · <a href="#/history/${encodeURIComponent(m.model)}" data-testid="history-link">this model over time</a></p>
    <div class="cards">${card(s, "TTFT", "ttft_ms", "ms")}${card(s, "TPOT", "tpot_ms", "ms")}${throughputCard(s, m.checks)}${s.rss_peak_mib && s.rss_peak_mib.n ? card(s, "peak RSS", "rss_peak_mib", "MiB", 0) : ""}${s.j_per_token && s.j_per_token.n ? card(s, "energy", "j_per_token", "J/tok", 3) : ""}</div>
    ${sloLine(s.slo)}
    ${clientLines(m.checks)}
    <h2>Findings</h2><div id="findings-box"><p class="muted">analysing…</p></div>
    <form id="cmp" class="inline">compare with run <input id="cmp-id" size="14" placeholder="run id" data-testid="compare-input"> <button>compare</button></form>` +
    (doc.timeline && doc.timeline.length ? `<h2>Timeline</h2>` + timelineChart(doc.timeline) : "") +
    `<h2>Distribution across samples</h2>` +
    strip("dist-ttft", [group("ttft_ms", "TTFT", PAL.phases.prefill)], { csv: "samples_ttft" }) +
    strip("dist-tpot", [group("tpot_ms", "TPOT", PAL.phases.decode)], { csv: "samples_tpot" }) +
    (layers.length ? `<h2>Per-layer time (mean ms per call)</h2>` + layerChart(layers) +
      `<h2>Parts of each block: prefill</h2>` + partsChart(layers, "prefill") +
      `<h2>Parts of each block: decode</h2>` + partsChart(layers, "decode")
      : `<p class="muted">per-layer times need <code>--mode standard</code></p>`) +
    (deep ? `<h2>Inside the blocks (deep mode)</h2>` + deep : "") +
    (samples.length ? `<h2>Decode steps of sample <select id="step-pick" data-testid="step-pick">${samples.map((x) => `<option value="${esc(x.sample_id)}">${esc(x.sample_id)}</option>`).join("")}</select></h2><div id="steps"></div>` : "") +
    (s.slo && s.slo.slos ? `<h2>Service-level objectives</h2>` + sloChart(s.slo) : "") + batchChart(m.checks) +
    `<h2>Roofline and the time model</h2><div id="analysis" data-testid="analysis"><p class="muted">analysing…</p></div>` +
    `<h2>Samples</h2>` + scroll(table([
      { t: "sample", f: (x) => esc(x.sample_id) + (bad.has(samples.indexOf(x)) ? ' <span class="warn">outlier</span>' : "") }, { t: "TTFT ms", f: (x) => num(x.ttft_ms) },
      { t: "TPOT ms", f: (x) => num(x.tpot_ms) }, { t: "total ms", f: (x) => num(x.total_ms) },
      { t: "tok/s", f: (x) => num(x.tokens_per_s, 1) }, { t: "new tokens", f: (x) => esc(x.new_tokens) },
    ], samples.map((x, i) => ({ ...x, _cls: bad.has(i) ? "outlier" : "" })), 'data-testid="samples"')));
  const pick = document.getElementById("step-pick");
  const drawSteps = () => {
    const x = samples.find((y) => String(y.sample_id) === pick.value);
    show(document.getElementById("steps"), x ? steps("decode-steps", x.step_ms, { csv: `decode_steps_sample_${x.sample_id}` }) : "");
  };
  if (pick) { pick.value = String(samples[samples.length - 1].sample_id); pick.onchange = drawSteps; drawSteps(); }
  document.getElementById("cmp").onsubmit = (e) => {
    e.preventDefault();
    const other = document.getElementById("cmp-id").value.trim();
    if (other) location.hash = `#/compare/${m.run_id},${other}`;
  };
  api(`/api/runs/${encodeURIComponent(id)}/analysis`).then((a) => {
    const f = document.getElementById("findings-box"), el = document.getElementById("analysis");
    if (f) show(f, findingsHtml(a));
    if (el) show(el, analysisHtml(a));
  }).catch((err) => {
    const el = document.getElementById("findings-box");
    if (el) el.innerHTML = `<p class="status-failed">analysis failed: ${esc(err.message)}</p>`;
  });
}

function findingsHtml(a) {
  return a.findings.length ? `<ul data-testid="findings">${a.findings.map((f) => `<li><b class="sev-${esc(f.severity)}">${esc(f.severity)}</b> ${esc(f.title)}<br><span class="muted">${esc(f.advice)}</span></li>`).join("")}</ul>`
    : `<p class="muted" data-testid="findings">no bottleneck rule fired</p>`;
}

function analysisHtml(a) {
  if (a.roofline.unavailable) return `<p class="muted" data-testid="roofline-unavailable">roofline: ${esc(a.roofline.unavailable)}</p>`;
  const rows = ["prefill", "decode"].map((p) => a.roofline[p]).filter(Boolean);
  const sci = (v) => (v == null ? "-" : Number(v).toExponential(2));
  const approx = (a.roofline.approximate || []).length ? `<p class="warn">approximate: ${esc(a.roofline.approximate.join("; "))}</p>` : "";
  return `<p class="muted">ceilings: ${esc(a.ceilings_source)}; times are medians</p>` + approx + rooflineChart(a) + scroll(table([
    { t: "phase", l: 1, f: (r) => esc(r.phase) }, { t: "FLOPs", f: (r) => sci(r.flop_count) },
    { t: "bytes", f: (r) => sci(r.bytes) }, { t: "FLOP/byte", f: (r) => num(r.intensity, 1) },
    { t: "measured ms", f: (r) => num(r.measured_ms) }, { t: "achieved FLOP/s", f: (r) => sci(r.achieved_flop_per_s) },
    { t: "% attainable", f: (r) => num(r.pct_attainable, 1) }, { t: "bound", l: 1, f: (r) => esc(r.bound || "-") },
  ], rows, 'data-testid="roofline"')) + `<h3>Time model</h3>` + timeModelChart(a.time_model);
}


async function comparePage(ids) {
  const doc = await api("/api/compare?runs=" + ids.map(encodeURIComponent).join(","));
  const runs = doc.runs;
  const changedKeys = [...new Set(doc.comparisons.flatMap((c) => Object.keys(c.changed)))];
  const label = (r) => [r.run_id.slice(0, 12), ...changedKeys.map((k) => k + "=" + (r.knobs || {})[k])].join(" ");
  const overlay = (key) => strip("overlay-" + key, runs.map((r, i) => {
    const vals = r.samples.map((x) => x[key]);
    const sorted = vals.filter((v) => v != null).sort((a, b) => a - b);
    const n = sorted.length, mid = n ? (n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2) : null;
    return { name: label(r), color: PAL.series[i % (PAL.series.length - 1)], values: vals, ids: r.samples.map((x) => x.sample_id), median: mid };
  }), { csv: `compare_${key}` });
  const verdictRows = (c) => [...c.phases, { phase: "total", ...c.total }];
  show(view, `<h1 data-testid="compare-title">compare ${runs.length} runs</h1>
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
    `<h2>Total of every sample</h2>` + overlay("total_ms"));
}

async function sweepPage(id) {
  const doc = await api("/api/sweeps/" + encodeURIComponent(id));
  const knobs = Object.keys(doc.meta.knobs || {});
  const labels = doc.summary.map((r) => knobs.map((k) => k + "=" + r.config[k]).join(" "));
  const med = (r, k) => (r[k] || {}).p50;
  const mark = (r, k) => ((r.noisy || []).includes(k) ? ' <span class="warn" title="spread over 10% or an outlier">⚠</span>' : "");
  show(view, `<h1>sweep ${esc(doc.meta.sweep_id)} · ${esc(doc.meta.model)}</h1>` + sweepChart(doc, knobs, labels) +
    scroll(table([
      ...knobs.map((k) => ({ t: k, l: 1, f: (r) => esc(r.config[k]) })),
      { t: "TTFT ms (median)", f: (r) => num(med(r, "ttft_ms")) + mark(r, "ttft_ms") }, { t: "TPOT ms (median)", f: (r) => num(med(r, "tpot_ms")) + mark(r, "tpot_ms") },
      { t: "tok/s (median)", f: (r) => num(med(r, "tokens_per_s"), 1) + mark(r, "tokens_per_s") },
      { t: "run", l: 1, f: (r) => `<a href="#/run/${esc(r.run_id)}">${esc(r.run_id)}</a>` },
    ], doc.summary)) +
    (doc.summary.length > 1 ? `<p><a data-testid="sweep-compare" href="#/compare/${doc.summary.slice(0, 8).map((r) => esc(r.run_id)).join(",")}">compare ${doc.summary.length > 8 ? "the first 8 points" : "every point"} with the first</a> (verdicts and every sample)</p>` : ""));
}

// One numeric knob spanning a decade or more: medians as lines over the knob's value on a log
// axis, each with its interval. Otherwise (several knobs, names, narrow ranges) prefill and
// decode stacked per configuration on a linear axis, the median total's interval as whiskers.
function sweepChart(doc, knobs, labels) {
  const med = (r, k) => (r[k] || {}).p50;
  const iv = (r, k) => ({ mid: med(r, k), low: (r[k] || {}).median_ci95_low, high: (r[k] || {}).median_ci95_high });
  const varied = knobs.filter((k) => new Set(doc.summary.map((r) => String(r.config[k]))).size > 1);
  const xs = varied.length === 1 ? doc.summary.map((r) => Number(r.config[varied[0]])) : [];
  const rows = doc.summary.map((r) => ({ ...Object.fromEntries(knobs.map((k) => [k, r.config[k]])), ttft_ms: med(r, "ttft_ms"), decode_ms: med(r, "decode_ms"), total_ms: med(r, "total_ms"), total_ci95_low: (r.total_ms || {}).median_ci95_low, total_ci95_high: (r.total_ms || {}).median_ci95_high, run_id: r.run_id }));
  if (xs.length > 2 && xs.every((x) => Number.isFinite(x) && x > 0) && Math.max(...xs) / Math.min(...xs) >= 10) {
    const order = xs.map((x, i) => [x, i]).sort((a, b) => a[0] - b[0]).map(([, i]) => i);
    const pick = (f) => order.map((i) => f(doc.summary[i]));
    const x = order.map((i) => xs[i]);
    return `<p class="muted">medians over each point's measured samples with their 95% intervals; ${esc(varied[0])} on a log axis (it spans ${num(Math.max(...xs) / Math.min(...xs), 0)}x)</p>` +
      lines("sweep-chart", [
        { name: "total", color: "#000", x, y: pick((r) => med(r, "total_ms")), intervals: pick((r) => iv(r, "total_ms")) },
        { name: "prefill (TTFT)", color: PAL.phases.prefill, x, y: pick((r) => med(r, "ttft_ms")), intervals: pick((r) => iv(r, "ttft_ms")) },
        { name: "decode", color: PAL.phases.decode, x, y: pick((r) => med(r, "decode_ms")) },
      ], { xtitle: varied[0], logX: true, rows, csv: "sweep", height: 320 });
  }
  return `<p class="muted">bars: medians over each point's measured samples; whiskers: the 95% interval of the median total</p>` +
    bars("sweep-chart", labels, [
      { name: "prefill (TTFT)", color: PAL.phases.prefill, values: doc.summary.map((r) => med(r, "ttft_ms")) },
      { name: "decode", color: PAL.phases.decode, values: doc.summary.map((r) => med(r, "decode_ms")) },
    ], { stacked: true, intervals: doc.summary.map((r) => iv(r, "total_ms")), rows, csv: "sweep", height: 320 });
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
    ? `<div class="muted">decode steps of this sample as they happen${st.first_step ? ` (from step ${esc(st.first_step + 1)})` : ""}</div>` + steps("live-running-steps", st.step_ms, { height: 160, first: (st.first_step || 0) + 2 }) : "";
  return `<div class="progress" data-testid="live-progress"><b>${esc(p.model)}</b>${run} · ${esc(what)}${inSample} · ${esc(p.tokens)} tokens in finished samples` +
    `<div class="bar"><span style="width:${Math.max(2, Math.min(100, pct))}%"></span></div>${stepChart}</div>`;
}

function livePage() {
  const render = () => {
    const rows = live.samples.slice(-50).reverse();
    const runIds = Object.keys(live.layers);
    const latest = runIds.length ? live.layers[runIds[runIds.length - 1]] : null;
    const last = live.samples.length ? live.samples[live.samples.length - 1] : null;
    show(view, `<h1>Live</h1><p class="muted">profiles appear here from the moment they start, and their samples as they are measured, from any <code>infermeter profile</code> or <code>sweep</code> on this database.</p>` +
      (live.progress.length ? live.progress.map(progressLine).join("") : `<p class="muted" data-testid="live-idle">no profile running</p>`) +
      (rows.length ? scroll(table([
        { t: "run", l: 1, f: (x) => `<a href="#/run/${esc(x.run_id)}">${esc(x.run_id)}</a>` },
        { t: "model", l: 1, f: (x) => esc(x.model) },
        { t: "sample", f: (x) => esc(x.index) + (x.warmup ? " (warm-up)" : "") },
        { t: "TTFT ms", f: (x) => num(x.ttft_ms) }, { t: "TPOT ms", f: (x) => num(x.tpot_ms) },
        { t: "tok/s", f: (x) => num(x.tokens_per_s, 1) },
      ], rows.map((x, i) => ({ ...x, _id: "live-sample", _cls: i === 0 ? "new" : "" })), 'data-testid="live-samples"'))
        : `<p class="muted" data-testid="live-waiting">waiting for samples…</p>`) +
      (last && last.step_ms && last.step_ms.length ? `<h2>Decode steps of the latest sample (run ${esc(last.run_id)}, sample ${esc(last.index)})</h2>` + steps("live-steps", last.step_ms) : "") +
      (latest ? `<h2>Per-layer time so far: run ${esc(runIds[runIds.length - 1])}</h2>` + layerChart(latest, "live-layers") : ""));
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
    // a sample sent before the page came may also come from the poller: keep it once
    if (ev.type === "sample" && !live.samples.some((x) => x.id === ev.sample.id)) live.samples.push(ev.sample);
    else if (ev.type === "layers") live.layers[ev.run_id] = ev.rows;
    else if (ev.type === "run") live.runs[ev.run.id] = ev.run;
    else if (ev.type === "progress") live.progress = ev.rows;
    listeners.forEach((f) => f(ev));
  };
}

// A metric over time: each run's median with its interval on a time axis, the line joining
// them, and each change a rank test confirms as a dashed line with its size.
function historyChart(g, unit) {
  const pts = g.points;
  const when = (p) => String(p.created).slice(0, 19).replace("T", " ");
  const t = pts.map((p) => Date.parse(String(p.created)));
  const traces = [{
    type: "scatter", mode: "lines+markers", name: "median of a run, 95% interval", x: pts.map(when), y: pts.map((p) => p.median),
    line: { color: PAL.series[0], width: 1.4 }, marker: { color: PAL.series[0], size: 7 },
    error_y: {
      type: "data", symmetric: false, color: PAL.series[0], thickness: 1.2, width: 3,
      array: pts.map((p) => (p.ci95_high == null ? 0 : p.ci95_high - p.median)),
      arrayminus: pts.map((p) => (p.ci95_low == null ? 0 : p.median - p.ci95_low)),
    },
    customdata: pts.map((p) => [p.run_id, (p.commit || "-").slice(0, 8) + (p.dirty ? " (dirty)" : ""), p.ci95_low, p.ci95_high]),
    hovertemplate: `run %{customdata[0]} · commit %{customdata[1]}<br>%{x}<br>%{y:.4~g} ${esc(unit)} (95% interval %{customdata[2]:.4~g} to %{customdata[3]:.4~g})<extra></extra>`,
  }];
  const mid = (c) => new Date((t[c.index - 1] + t[c.index]) / 2).toISOString().slice(0, 19).replace("T", " ");
  const shapes = g.change_points.map((c) => ({ type: "line", x0: mid(c), x1: mid(c), yref: "paper", y0: 0, y1: 1, line: { color: PAL.alert, dash: "dash", width: 1.5 } }));
  const annotations = g.change_points.map((c) => ({ x: mid(c), yref: "paper", y: 1, yanchor: "bottom", showarrow: false, font: { color: PAL.alert },
    text: `${c.change_pct > 0 ? "+" : ""}${num(c.change_pct, 1)}%`, hovertext: `${num(c.before_median)} → ${num(c.after_median)} ${unit} (rank test p = ${Number(c.p_value).toExponential(1)})` }));
  const rows = pts.map((p) => ({ run_id: p.run_id, created: p.created, commit: p.commit, dirty: p.dirty, median: p.median, ci95_low: p.ci95_low, ci95_high: p.ci95_high }));
  return chart("history-chart", traces, {
    shapes, annotations, showlegend: false, margin: { t: 24 },
    xaxis: { type: "date", title: { text: "when the run was made" }, nticks: window.innerWidth < 600 ? 4 : 10, ...(pts.length === 1 ? { range: [t[0] - 432e5, t[0] + 432e5].map((v) => new Date(v).toISOString().slice(0, 19).replace("T", " ")) } : {}) }, yaxis: { title: { text: unit }, rangemode: "normal" },
  }, { rows, csv: `history_${unit}`, height: 280, attrs: `data-metric="${esc(unit)}"`, logToggle: true });
}

async function historyPage(model, metric) {
  const doc = await api(`/api/history?model=${encodeURIComponent(model)}&metric=${encodeURIComponent(metric)}`);
  const metrics = ["ttft_ms", "tpot_ms", "tokens_per_s", "total_ms"];
  show(view, `<h1 data-testid="history-title">history · ${esc(model)}</h1>
    <p>metric <select id="hist-metric" data-testid="history-metric">${metrics.map((k) => `<option${k === metric ? " selected" : ""}>${k}</option>`).join("")}</select>
    <span class="muted">${esc(doc.statistic)}; dashed: a change a rank test confirms</span></p>` +
    (doc.configurations.length ? doc.configurations.map((g) => `<h2>${esc(g.label)}</h2>` + historyChart(g, metric) +
      (g.change_points.length ? `<ul>${g.change_points.map((c) => `<li data-testid="history-change">${esc(c.created.slice(0, 16))} (${esc(c.commit ? c.commit.slice(0, 8) : c.run_id)}): ${num(c.before_median)} → ${num(c.after_median)} (${c.change_pct > 0 ? "+" : ""}${num(c.change_pct, 1)}%)</li>`).join("")}</ul>` : `<p class="muted">no change the data support</p>`)).join("")
      : `<p class="muted">no finished runs of this model</p>`));
  document.getElementById("hist-metric").onchange = (e) => { location.hash = `#/history/${encodeURIComponent(model)}/${e.target.value}`; };
}

// Stored predictions (`infermeter predict`, `load predict`): each figure with its 90% interval,
// as the CLI prints it, and a chart with the intervals as error bars (issue 55: the dashboard
// had no page for predictions).
const span = (iv) => (iv ? { low: iv[0], high: iv[1] } : { low: null, high: null });
const withBand = (v, iv) => num(v) + (iv ? ` <span class="muted">(${num(iv[0])}-${num(iv[1])})</span>` : "");

async function predictionsPage() {
  const { predictions } = await api("/api/predictions");
  show(view, `<h1>Predictions</h1>` + (predictions.length ? scroll(table([
    { t: "id", l: 1, f: (r) => `<a href="#/prediction/${esc(r.id)}">${esc(r.id)}</a>` },
    { t: "created", l: 1, f: (r) => esc(String(r.created).slice(0, 16).replace("T", " ")) },
    { t: "model", l: 1, w: 1, f: (r) => esc(r.model) },
    { t: "hardware", l: 1, f: (r) => esc(r.hardware) },
    { t: "stack", l: 1, f: (r) => esc(r.stack || "") },
    { t: "dtype", l: 1, f: (r) => esc(r.dtype || "") },
    { t: "what", l: 1, f: (r) => (r.kind === "load" ? "a load (rates)" : "one forward (batches)") },
  ], predictions.map((r) => ({ ...r, _id: "prediction-row" })), 'data-testid="predictions"')) : `<p class="muted">no predictions yet: <code>infermeter predict</code></p>`));
}

async function predictionPage(id) {
  const doc = await api(`/api/predictions/${id}`);
  const load = doc.kind === "infermeter-predict-load";
  const rows = load ? doc.points : doc.rows;
  const x = rows.map((r) => (load ? r.rate : r.batch));
  const xtitle = load ? "offered rate (requests/s)" : "batch";
  const pick = load
    ? { ttft: "ttft_ms_p50", tpot: "tpot_ms_p50", ttftIv: "ttft_ms_p50_interval", tpotIv: "tpot_ms_p50_interval" }
    : { ttft: "ttft_ms", tpot: "tpot_ms", ttftIv: "ttft_ms_interval", tpotIv: "tpot_ms_interval" };
  const band = (load ? (rows[0] || {}).interval : (rows[0] || {}).interval) || {};
  const why = (doc.out_of_scope || doc.scope || []).concat(band.widened || []);
  const hw = doc.hardware || {};
  const series = [
    { name: "TTFT" + (load ? " p50" : ""), color: PAL.phases.prefill, x, y: rows.map((r) => r[pick.ttft]), intervals: rows.map((r) => span(r[pick.ttftIv])) },
    { name: "TPOT" + (load ? " p50" : ""), color: PAL.phases.decode, x, y: rows.map((r) => r[pick.tpot]), intervals: rows.map((r) => span(r[pick.tpotIv])) },
  ];
  const csvRows = rows.map((r, i) => ({ [load ? "rate" : "batch"]: x[i], ttft_ms: r[pick.ttft], ttft_low: span(r[pick.ttftIv]).low, ttft_high: span(r[pick.ttftIv]).high, tpot_ms: r[pick.tpot], tpot_low: span(r[pick.tpotIv]).low, tpot_high: span(r[pick.tpotIv]).high }));
  show(view, `<h1 data-testid="prediction-title">prediction ${esc(id)} · ${esc(doc.model)} on ${esc(hw.name || hw.key)}</h1>
    <p class="muted">${esc((doc.stack && doc.stack.key) || doc.stack || "hf")} · ${esc(doc.dtype)} · ${load ? "a simulated load (transformers' continuous batching)" : "one forward per step"}</p>
    <p data-testid="prediction-band">90% intervals from ${esc(band.rows)} held-out errors of ${esc(band.sources)} published sources (${esc(band.group)})${why.length ? "; widened: " + esc([...new Set(why)].join("; ")) : ""}</p>` +
    lines("prediction-chart", series, { xtitle, logX: load && x.every((v) => v > 0 && Number.isFinite(v)), rows: csvRows, csv: "prediction", note: "error bars: the 90% interval" }) +
    scroll(table([
      { t: load ? "rate/s" : "batch", f: (r, i) => esc(load ? r.offered : r.batch) },
      { t: "TTFT ms (90%)", f: (r) => withBand(r[pick.ttft], r[pick.ttftIv]) },
      { t: "TPOT ms (90%)", f: (r) => withBand(r[pick.tpot], r[pick.tpotIv]) },
      ...(load ? [] : [{ t: "memory GB (90%)", f: (r) => withBand(r.memory.total_bytes / 1e9, r.memory.total_bytes_interval ? r.memory.total_bytes_interval.map((v) => v / 1e9) : null) }]),
    ], rows, 'data-testid="prediction-rows"')) +
    (!load && rows[0] && rows[0].memory_interval ? `<p class="muted" data-testid="prediction-memory-band">memory intervals from ${esc(rows[0].memory_interval.rows)} held-out errors of ${esc(rows[0].memory_interval.sources)} published peak-memory sources</p>` : ""));
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
    } else if (hash === "#/predictions") {
      await predictionsPage();
    } else if ((m = hash.match(/^#\/prediction\/([0-9a-f]{1,32})$/))) {
      await predictionPage(m[1]);
    } else if (hash === "#/live") {
      const render = livePage();
      listeners.add(render);
    } else {
      await home();
      listeners.add((ev) => { if (ev.type === "run") home(); });
    }
  } catch (err) {
    show(view, `<p class="status-failed">could not load: ${esc(err.message)}</p>`);
  }
}

window.addEventListener("hashchange", route);
connect();
route();
