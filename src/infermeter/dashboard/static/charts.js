// infermeter dashboard charts: plotly.js (the plotly package's own bundle, served by this server
// like every other file here; never a CDN), in one look: the palette the report's matplotlib
// figures use (/static/palette.js, from infermeter/util/palette.py), legends above the plot
// (never over the data), hover with exact values, zoom, and a log-scale switch where values
// span decades. Every chart offers the rows it was drawn from as a CSV.
"use strict";

const PAL = window.PALETTE;
const FONT = "system-ui, -apple-system, 'Segoe UI', sans-serif";
const BASE_LAYOUT = {
  font: { family: FONT, size: 12, color: "#1d1f24" },
  paper_bgcolor: "#fff",
  plot_bgcolor: "#fff",
  colorway: PAL.series,
  margin: { l: 56, r: 16, t: 8, b: 44, autoexpand: true },
  xaxis: { gridcolor: "#eceef2", linecolor: "#c9ccd3", zeroline: false, automargin: true },
  yaxis: { gridcolor: "#eceef2", linecolor: "#c9ccd3", zeroline: false, automargin: true, rangemode: "tozero" },
  legend: { orientation: "h", x: 0, xanchor: "left", y: 1.02, yanchor: "bottom" },
  hovermode: "closest",
  hoverlabel: { font: { family: FONT } },
};
const PLOT_CONFIG = {
  responsive: true,
  displaylogo: false,
  modeBarButtonsToRemove: ["lasso2d", "select2d"],
  toImageButtonOptions: { format: "png", scale: 2 },
};

let chartSeq = 0;
let pending = [];
const drawn = new Map();

function esc(v) {
  return String(v).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

function merge(a, b) {
  const out = { ...a };
  for (const [k, v] of Object.entries(b || {})) {
    const nested = v && typeof v === "object" && !Array.isArray(v) && a[k] && typeof a[k] === "object";
    out[k] = nested ? merge(a[k], v) : v;
  }
  return out;
}

// A chart's place in the page now; it is drawn by draw() once the page's HTML is in place.
// `rows`: what it is drawn from, offered as `csv`.csv (the report's CSV of the same figure has
// that name). `logToggle`: a switch between a linear and a log y axis.
function chart(testid, traces, layout, { rows = null, csv = testid, height = 280, note = "", logToggle = false, attrs = "" } = {}) {
  const id = "chart-" + ++chartSeq;
  pending.push({ id, traces, layout: merge(BASE_LAYOUT, { height, ...layout }), rows, csv });
  const tools = [];
  if (rows && rows.length) tools.push(`<a href="#" class="csv" data-chart="${id}" data-testid="csv-${esc(testid)}">CSV of this chart</a>`);
  if (logToggle) tools.push(`<label><input type="checkbox" class="logy" data-chart="${id}" data-testid="log-${esc(testid)}"> log scale</label>`);
  const foot = note || tools.length ? `<div class="muted chart-foot">${note}${tools.length ? `<span class="tools">${tools.join(" · ")}</span>` : ""}</div>` : "";
  return `<div class="chart"><div id="${id}" class="plot" data-testid="${esc(testid)}" ${attrs}></div>${foot}</div>`;
}

// Draws every chart placed since the last call whose element is now in the page.
function draw() {
  const todo = pending;
  pending = [];
  for (const c of todo) {
    const el = document.getElementById(c.id);
    if (!el) continue;
    Plotly.newPlot(el, c.traces, c.layout, PLOT_CONFIG);
    drawn.set(c.id, c);
  }
}

// Puts `html` in `el` and draws its charts; the charts it replaces are released first (plotly
// keeps a resize listener per chart until it is purged).
function show(el, html) {
  for (const id of [...drawn.keys()]) {
    const old = document.getElementById(id);
    if (!old || el.contains(old)) {
      if (old) Plotly.purge(old);
      drawn.delete(id);
    }
  }
  el.innerHTML = html;
  draw();
}

function toCsv(rows) {
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cell = (v) => {
    if (v === null || v === undefined) return "";
    const s = typeof v === "object" ? JSON.stringify(v) : String(v);
    return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return [cols.join(","), ...rows.map((r) => cols.map((c) => cell(r[c])).join(","))].join("\n") + "\n";
}

document.addEventListener("click", (e) => {
  const a = e.target.closest && e.target.closest("a.csv");
  if (!a) return;
  e.preventDefault();
  const c = drawn.get(a.dataset.chart);
  if (!c) return;
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([toCsv(c.rows)], { type: "text/csv" }));
  link.download = c.csv + ".csv";
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 2000);
});

document.addEventListener("change", (e) => {
  const box = e.target.closest && e.target.closest("input.logy");
  if (box) Plotly.relayout(box.dataset.chart, box.checked ? { "yaxis.type": "log", "yaxis.dtick": "D2", "yaxis.autorange": true } : { "yaxis.type": "linear", "yaxis.dtick": null, "yaxis.autorange": true });
});

const hover = (what, unit) => `${what}: %{y:.4~g} ${esc(unit)}<extra></extra>`;

// Bars per label, one series beside the other or stacked (never on a log axis: stacking on one
// distorts the shares). `intervals`: per label {mid, low, high} of the bar's whole, as whiskers.
function bars(testid, labels, series, { unit = "ms", stacked = false, intervals = null, xtitle = "", extra = [], ...opts } = {}) {
  const traces = series.map((s) => ({
    type: "bar", name: s.name, x: labels, y: s.values, marker: { color: s.color },
    hovertemplate: `%{x}<br>${hover(esc(s.name), unit)}`,
  }));
  if (intervals) {
    traces.push({
      type: "scatter", mode: "markers", name: "median total, 95% interval", x: labels,
      y: intervals.map((v) => v.mid), marker: { color: "#000", size: 5 },
      error_y: {
        type: "data", symmetric: false, color: "#000", thickness: 1.2, width: 5,
        array: intervals.map((v) => (v.high == null || v.mid == null ? 0 : v.high - v.mid)),
        arrayminus: intervals.map((v) => (v.low == null || v.mid == null ? 0 : v.mid - v.low)),
      },
      customdata: intervals.map((v) => [v.low, v.high]),
      hovertemplate: `%{x}<br>total %{y:.4~g} ${esc(unit)} (95% interval %{customdata[0]:.4~g} to %{customdata[1]:.4~g})<extra></extra>`,
    });
  }
  traces.push(...extra);
  const layout = { barmode: stacked ? "stack" : "group", bargap: 0.25, xaxis: { type: "category", title: { text: xtitle } }, yaxis: { title: { text: unit } } };
  return chart(testid, traces, layout, opts);
}

// Lines over a numeric x; `log_x` when x spans a decade or more.
function lines(testid, series, { unit = "ms", xtitle = "", logX = false, integerX = false, ...opts } = {}) {
  const traces = series.map((s) => ({
    type: "scatter", mode: s.x.length > 60 ? "lines" : "lines+markers", name: s.name, x: s.x, y: s.y,
    line: { color: s.color, width: 1.6, shape: s.shape || "linear" }, marker: { color: s.color, size: 6 },
    ...(s.intervals ? {
      error_y: {
        type: "data", symmetric: false, color: s.color, thickness: 1.2, width: 4,
        array: s.intervals.map((v, i) => (v.high == null ? 0 : v.high - s.y[i])),
        arrayminus: s.intervals.map((v, i) => (v.low == null ? 0 : s.y[i] - v.low)),
      },
    } : {}),
    hovertemplate: `${esc(xtitle)} %{x}<br>${hover(esc(s.name), unit)}`,
  }));
  const xaxis = { type: logX ? "log" : "linear", title: { text: xtitle } };
  if (logX) xaxis.dtick = "D2";  // 1, 2, 5, 10, 20, 50: never 2, 3, 4 ... 9 crowding a decade
  if (integerX) xaxis.tickformat = "d";  // blocks and tokens are whole: never a tick at 2.5
  if (integerX && Math.max(...series.map((s) => s.x.length)) <= 12) xaxis.dtick = 1;
  return chart(testid, traces, { xaxis, yaxis: { title: { text: unit } } }, { logToggle: true, ...opts });
}

// Every sample as a dot, one row per group (a run), the median as a tick; outliers (kept) as
// crosses in the alert colour. Dots are spread a little up and down so equal values stay apart.
function strip(testid, groups, { unit = "ms", ...opts } = {}) {
  const jitter = (i) => (((i * 0.6180339887) % 1) - 0.5) * 0.36;
  const outliers = [], rows = [], traces = [];
  const pts = (list, name, marker, legend) => ({
    type: "scatter", mode: "markers", name, showlegend: legend, x: list.map((p) => p.x), y: list.map((p) => p.y),
    customdata: list.map((p) => [p.id, p.g]), marker,
    hovertemplate: `%{customdata[1]} sample %{customdata[0]}: %{x:.4~g} ${esc(unit)}<extra>${esc(name)}</extra>`,
  });
  groups.forEach((g, r) => {
    const out = new Set(g.outliers || []), normal = [];
    g.values.forEach((v, i) => {
      if (v == null) return;
      const id = g.ids ? g.ids[i] : i;
      (out.has(i) ? outliers : normal).push({ x: v, y: r + jitter(i), id, g: g.name });
      rows.push({ group: g.name, sample: id, [unit.replace(/\W+/g, "_")]: v, outlier: out.has(i) });
    });
    // a trace per group, named by its row's label (the legend would only repeat the axis)
    traces.push(pts(normal, g.name, { color: g.color, size: 8, opacity: 0.75 }, false));
  });
  if (!rows.length) return "";
  if (outliers.length) traces.push(pts(outliers, "outlier (kept)", { color: PAL.alert, size: 10, symbol: "x" }, true));
  const med = groups.map((g, r) => [g.median, r]).filter(([m]) => m != null);
  traces.push({
    type: "scatter", mode: "markers", name: "median", x: med.map(([m]) => m), y: med.map(([, r]) => r),
    marker: { symbol: "line-ns-open", size: 26, color: "#000", line: { width: 2.5, color: "#000" } },
    hovertemplate: `median %{x:.4~g} ${esc(unit)}<extra></extra>`,
  });
  const layout = {
    showlegend: true,
    xaxis: { title: { text: unit }, rangemode: "normal" },
    yaxis: { tickvals: groups.map((_, r) => r), ticktext: groups.map((g) => esc(g.name)), range: [-0.6, groups.length - 0.4], rangemode: "normal", gridcolor: "#fff" },
  };
  return chart(testid, traces, layout, { rows, height: 110 + 34 * groups.length, ...opts });
}

// One value per generated token: the inter-token latency of a sample, in order.
function steps(testid, values, { unit = "ms", first = 2, height = 220, ...opts } = {}) {
  if (!values || !values.length) return "";
  const x = values.map((_, i) => first + i);
  return lines(testid, [{ name: "inter-token latency", x, y: values, color: PAL.phases.decode }],
    { unit, xtitle: "generated token", integerX: true, height, rows: x.map((t, i) => ({ token: t, step_ms: values[i] })), ...opts });
}

// A grid of values (rows x columns), colour-blind-safe scale.
function heatmap(testid, z, xs, ys, { xtitle = "", ytitle = "", what = "value", zrange = null, ...opts } = {}) {
  const traces = [{
    type: "heatmap", z, x: xs, y: ys, colorscale: "Viridis", ...(zrange ? { zmin: zrange[0], zmax: zrange[1] } : {}), colorbar: { title: { text: what, side: "right" }, thickness: 12 },
    hovertemplate: `${esc(ytitle)} %{y}, ${esc(xtitle)} %{x}: %{z:.3~g}<extra></extra>`,
  }];
  // margin.t: room above the cells for plotly's toolbar (at 8 px it covered the top row on hover)
  const layout = { margin: { t: 34 }, xaxis: { title: { text: xtitle }, type: "category" }, yaxis: { title: { text: ytitle }, type: "category", autorange: "reversed" } };
  return chart(testid, traces, layout, { height: Math.max(220, 90 + 22 * ys.length), ...opts });
}
