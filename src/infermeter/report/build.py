"""`infermeter report`: a run or a sweep as Markdown, one self-contained HTML file, CSV and PNG.

Rendering only: numbers come from the stored run's summary and tables, the analysis
(`analysis/analyze.py`) and the sweep document; nothing is computed here. The HTML embeds its
figures as base64 PNG and has no external reference at all, so it opens offline and can be
mailed as one file.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infermeter.analysis.roofline import COLUMNS, all_rows
from infermeter.measure.gpu_identity import identity_label
from infermeter.report.figures import breakdown_figure, varied_knobs, write_csv
from infermeter.report.roofline_figure import roofline_figure
from infermeter.report.run_figures import RUN_FIGURES, flat_memory
from infermeter.run.components import part_tree, with_generate_calls
from infermeter.util import fmt
from infermeter.util.atomic import write_text_atomic
from infermeter.util.jsonio import write_json

if TYPE_CHECKING:  # annotations only: the run's module imports numpy
    from infermeter.run.results import RunResult

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f4f4f4}
td:first-child,th:first-child{text-align:left}img{max-width:100%;margin:.5em 0}
.high{color:#b00}.medium{color:#a60}.low{color:#555}.meta{color:#555}
.scroll{overflow-x:auto;max-width:100%}
.headline{font-size:1.1em;font-weight:600;margin:.8em 0}
"""


def md_table(rows: list[dict[str, Any]], cols: list[str] | None = None) -> str:
    """A Markdown table."""
    if not rows:
        return "_(empty)_\n"
    cols = cols or list(rows[0])
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(fmt.significant(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(out) + "\n"


def html_table(rows: list[dict[str, Any]], cols: list[str] | None = None) -> str:
    """An HTML table, every cell escaped."""
    if not rows:
        return "<p><em>(empty)</em></p>"
    cols = cols or list(rows[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape(fmt.significant(r.get(c)))}</td>" for c in cols)
        + "</tr>"
        for r in rows
    )
    # a wide table (the samples: 20 columns) scrolls inside its box instead of off the page
    return f"<div class='scroll'><table><tr>{head}</tr>{body}</table></div>"


class _Doc:
    """Sections written to Markdown and HTML together."""

    def __init__(self, title: str, out: Path) -> None:
        self.out = out
        self.md = [f"# {title}\n"]
        self.html = [f"<h1>{html.escape(title)}</h1>"]
        self.title = title

    def text(self, s: str) -> None:
        self.md.append(s + "\n")
        self.html.append(f"<p class='meta'>{html.escape(s)}</p>")

    def headline(self, s: str) -> None:
        self.md.append(f"**{s}**\n")
        self.html.append(f"<p class='headline'>{html.escape(s)}</p>")

    def heading(self, s: str) -> None:
        self.md.append(f"\n## {s}\n")
        self.html.append(f"<h2>{html.escape(s)}</h2>")

    def table(self, rows: list[dict[str, Any]], cols: list[str] | None = None) -> None:
        self.md.append(md_table(rows, cols))
        self.html.append(html_table(rows, cols))

    def figure(self, png: Path, caption: str) -> None:
        self.md.append(f"![{caption}]({png.name})\n")
        data = base64.b64encode(png.read_bytes()).decode()
        self.html.append(
            f"<figure><img alt='{html.escape(caption)}' src='data:image/png;base64,{data}'>"
            f"<figcaption class='meta'>{html.escape(caption)} (data: {html.escape(png.stem)}.csv)"
            "</figcaption></figure>"
        )

    def finding(self, f: dict[str, Any]) -> None:
        line = f"[{f['severity']}] {f['id']}: {f['title']} -> {f['advice']}"
        self.md.append(f"- **{f['severity']}** `{f['id']}`: {f['title']}. {f['advice']}\n")
        self.html.append(f"<p class='{f['severity']}'>{html.escape(line)}</p>")

    def write(self) -> list[Path]:
        md = self.out / "report.md"
        write_text_atomic(md, "\n".join(self.md))
        page = (
            "<!doctype html><html><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{html.escape(self.title)}</title><style>{CSS}</style></head><body>"
            + "\n".join(self.html)
            + "</body></html>"
        )
        path = self.out / "report.html"
        write_text_atomic(path, page)
        return [md, path]


#: the columns of a report's summary table: the median (headline) with its interval first
SUMMARY_COLUMNS = ("n", "p50", "median_ci95_low", "median_ci95_high", "p90", "mean", "std")


def _part_rows(run: RunResult) -> list[dict[str, Any]]:
    """The part table as a tree, from the generate call down.

    Names are indented by depth ("· " per level); shares of the parent add to 100% at each level.
    """
    return [
        {
            "phase": r["phase"],
            "part": "· " * depth + str(r["part"]).replace("_", " "),
            "calls": r.get("calls"),
            "total_ms": r["total_ms"],
            "ms_per_call": r.get("mean_ms"),
            "pct_of_parent": r.get("pct_parent") if r.get("parent") else None,
            "pct_of_forward": r.get("pct_forward"),
        }
        for depth, r in part_tree(with_generate_calls(run, run.layers["parts"]))
    ]


#: the summary table's column headings for people (the CSV keeps the keys)
SUMMARY_HEADINGS = {
    "metric": "metric",
    "n": "samples",
    "p50": "median",
    "median_ci95_low": "95% CI low",
    "median_ci95_high": "95% CI high",
    "p90": "p90",
    "mean": "mean",
    "std": "std",
    "outliers": "outliers",
}


def _readable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The summary rows as a report shows them: "prefill (TTFT), ms", not `ttft_ms`."""
    from infermeter.run.results import METRIC_LABELS

    out = []
    for r in rows:
        label, unit = METRIC_LABELS.get(str(r["metric"]), (str(r["metric"]), ""))
        shown = {**r, "metric": f"{label} ({unit})" if unit else label}
        out.append({SUMMARY_HEADINGS.get(k, k): v for k, v in shown.items()})
    return out


def _summary_rows(run: RunResult) -> list[dict[str, Any]]:
    """One row per metric: the median with its interval, then spread, and outlier count."""
    rows = []
    for k, v in run.summary().items():
        if v.n:
            figures: dict[str, object] = dict(v.to_dict())
            shown = {c: figures[c] for c in SUMMARY_COLUMNS}
            rows.append({"metric": k, **shown, "outliers": len(v.outliers)})
    return rows


def _slo_section(doc: Any, run: RunResult, out: Path) -> list[Path]:
    """SLO attainment and goodput, when the run has SLOs; the CSV written."""
    slo = run.slo_report()
    if not slo:
        return []
    doc.heading("Service-level objectives")
    rows = [
        {"slo": f"{m} <= {b:g}", "attainment_pct": slo["attainment_pct"][m]}
        for m, b in slo["slos"].items()
    ]
    doc.table(rows)
    doc.text(
        f"all met: {slo['all_met_pct']:.1f}% of requests; goodput "
        f"{slo['goodput_rps']:.2f} requests/s"
    )
    return [write_csv(out / "slo.csv", rows)]


def _load_client_section(doc: Any, run: RunResult) -> None:
    """An endpoint load's own error: the client's cost, its self-check, the server's drift."""
    s = run.load_summary()
    if s is None:
        return
    client, drift = s.get("client"), s.get("drift")
    lines = [
        client.get("line") if client else None,
        client.get("selfcheck_line") if client else None,
        drift["line"] if drift else None,
    ]
    if any(lines):
        doc.heading("The load client and the server")
        for line in lines:
            if line:
                doc.text(line)


def _time_tables(doc: Any, run: RunResult) -> None:
    """A session's user regions (the median of each name's calls), then the nested parts."""
    from infermeter.measure.timer import section_summary

    if run.layers.get("sections"):
        doc.heading("User sections (ms; one row per name, median of its calls)")
        doc.table(section_summary(run.layers["sections"]))
    if "parts" in run.layers:
        doc.heading("Where the time goes (each part under what it runs inside)")
        doc.table(_part_rows(run))


#: the headline's metrics: (summary key, name, unit, digits)
HEADLINE = (
    ("ttft_ms", "TTFT", "ms", 4),
    ("tpot_ms", "TPOT", "ms", 4),
    ("tokens_per_s", "throughput", "tokens/s", 4),
    ("j_per_token", "energy", "J/token", 3),
)


def headline(run: RunResult) -> str:
    """The run in one line: each headline metric's median with its 95% interval."""
    parts = []
    for key, name, unit, digits in HEADLINE:
        st = run.summary().get(key)
        if st is None or not st.n:
            continue
        ci = (
            f" (95% CI {st.median_ci95_low:,.{digits}g} to {st.median_ci95_high:,.{digits}g})"
            if st.n > 1 and st.median_ci95_low == st.median_ci95_low  # not NaN
            else ""
        )
        parts.append(f"{name} {st.p50:,.{digits}g} {unit}{ci}")
    n = len(run.measured)
    return f"medians of {n} measured sample{'s' * (n != 1)}: " + " · ".join(parts)


def _findings(doc: Any, analysis: dict[str, Any]) -> None:
    doc.heading("Findings")
    for f in analysis["findings"]:
        doc.finding(f)
    if not analysis["findings"]:
        doc.text("no bottleneck rule fired")


def run_report(run: RunResult, out: Path, analysis: dict[str, Any] | None = None) -> list[Path]:
    """Every file of a run's report; returns their paths.

    Laid out as a person reads: what was run, the headline medians, the findings, then the
    figures, and the long tables (samples, parts) last.
    """
    out.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    doc = _Doc(f"infermeter run {run.run_id}: {run.model_info.get('spec')}", out)
    cfg = run.config
    where = f" [{identity_label(run.device)}]" if identity_label(run.device) else ""
    doc.text(
        f"{run.device.get('name')}{where} · {run.model_info.get('dtype')} · prompt tokens "
        f"{cfg.get('prompt_tokens') or 'natural'} · new tokens {cfg.get('new_tokens')} · batch "
        f"{cfg.get('batch_size')} · mode {cfg.get('mode')} · {len(run.measured)} samples · "
        f"created {run.created} · status {run.status}"
    )
    if run.measured:
        doc.headline(headline(run))
    if analysis is not None:
        _findings(doc, analysis)
    summary = _summary_rows(run)
    phases = [{"phase": k, "ms": v} for k, v in run.phases.items()]
    samples = [
        {
            k: v
            for k, v in run.sample_row(s).items()
            if k not in ("step_ms", "memory", "config", "output_text", "energy")
        }
        for s in run.samples
    ]
    doc.heading("Summary")
    doc.table(_readable(summary))  # the CSV keeps the keys a program reads
    files.append(write_csv(out / "summary.csv", summary))
    if phases:
        doc.table(phases)
        files.append(write_csv(out / "phases.csv", phases))
    files += _slo_section(doc, run, out)
    _load_client_section(doc, run)
    if run.energy:
        doc.heading("Energy")
        e = run.energy
        doc.text(
            f"source {e.get('source')} ({e.get('method')}), {e.get('readings')} readings"
            if e.get("available")
            else f"unavailable: {e.get('reason')}"
        )
    flat = flat_memory(run)
    if flat:
        doc.heading("Memory")
        doc.text(f"{flat}: no figure for a flat line (per sample: samples.csv)")
    for fig in RUN_FIGURES:
        written = fig(run, out)
        if written:
            files += written
            doc.heading(written[0].stem.replace("_", " ").capitalize())
            doc.figure(written[0], written[0].stem)
    if analysis is not None:
        files += _roofline_section(doc, analysis, out)
    _time_tables(doc, run)
    doc.heading("Samples")
    doc.table(samples)
    files.append(write_csv(out / "samples.csv", samples))
    from infermeter.run.results import layer_table

    for name in run.layers:
        rows = layer_table(run.layers, name)
        if rows:
            files.append(write_csv(out / f"layers_{name}.csv", rows))
    files.append(write_json(out / "run.json", run.to_json()))
    return files + doc.write()


def _roofline_section(doc: Any, analysis: dict[str, Any], out: Path) -> list[Path]:
    """The roofline's table and figure; the analysis written beside them."""
    doc.heading("Roofline")
    doc.text(f"ceilings: {analysis['ceilings_source']}")
    roof = analysis["roofline"]
    for why in roof.get("approximate") or []:
        doc.text(f"approximate FLOPs and bytes: {why}")
    doc.table(all_rows(roof), list(COLUMNS))
    written = roofline_figure(analysis, out)
    if written:
        doc.figure(written[0], "roofline")
    return [*written, write_json(out / "analysis.json", analysis)]


def sweep_report(sweep: dict[str, Any], out: Path) -> list[Path]:
    """Every file of a sweep's report."""
    out.mkdir(parents=True, exist_ok=True)
    meta = sweep["meta"]
    doc = _Doc(f"infermeter sweep {meta['sweep_id']}: {meta.get('model')}", out)
    doc.text(f"knobs: {meta.get('knobs')} · {len(sweep['summary'])} configurations")
    knobs = list(meta.get("knobs") or {})
    rows = [
        {
            **{k: r["config"].get(k) for k in knobs},
            **{
                m: (r.get(m) or {}).get("p50")  # medians
                for m in ("ttft_ms", "tpot_ms", "total_ms", "tokens_per_s", "j_per_token")
            },
            "samples": r.get("samples"),
            "run_id": r.get("run_id"),
        }
        for r in sweep["summary"]
    ]
    doc.heading("Configurations (medians over each point's measured samples)")
    doc.table(rows)
    files = [write_csv(out / "summary.csv", rows)]
    if sweep["summary"]:
        x = varied_knobs(sweep)[0]
        written = breakdown_figure(
            sweep,
            x,
            out,
            f"sweep-{x}",
            components=bool(sweep["summary"][0].get("prefill_components_ms")),
        )
        files += written
        doc.heading(f"Latency by {x}")
        for png in [p for p in written if p.suffix == ".png"]:
            doc.figure(png, png.stem)
    if sweep.get("scaling"):
        doc.heading("Scaling")
        doc.text(f"{sweep['scaling']['verdict']}: {sweep['scaling']['evidence']}")
    files.append(
        write_csv(
            out / "samples.csv",
            [
                {
                    k: v
                    for k, v in s.items()
                    if k not in ("step_ms", "memory", "output_text", "energy", "config")
                }
                | {f"knob_{k}": s["config"].get(k) for k in knobs}
                for s in sweep["all_samples"]
            ],
        )
    )
    files.append(write_json(out / "sweep.json", sweep))
    return files + doc.write()
