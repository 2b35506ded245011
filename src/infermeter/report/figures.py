"""Sweep figures: a stacked latency-breakdown bar per knob value, with the CSV it was drawn from.

Rendering only: every number comes from the sweep document (run/sweep.py) or the analysis.
Matplotlib with the Agg backend (no display needed), PNG at 300 DPI, axes labelled with units.
"""

from __future__ import annotations

import csv
import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.rcsetup import cycler

from infermeter.report.figure_check import run_hooks
from infermeter.run.components import COMPONENTS
from infermeter.util.atomic import atomic_path
from infermeter.util.palette import PHASES, SERIES

DPI = 300
# every figure's lines and bars take the dashboard's colour-blind-safe colours, in its order
matplotlib.rcParams["axes.prop_cycle"] = cycler(color=list(SERIES))
PHASE_COLORS = {"prefill (TTFT)": PHASES["prefill"], "decode": PHASES["decode"]}
COMPONENT_COLORS = dict(
    zip(
        COMPONENTS,
        (
            "#8172B3",
            "#937860",
            "#8C8C8C",
            "#2F4B7C",
            "#4C72B0",
            "#DD8452",
            "#55A868",
            "#C44E52",
            "#64B5CD",
            "#DA8BC3",
            "#CCB974",
            "#B0B0B0",
        ),
        strict=True,
    )
)


def _median(row: dict[str, Any], metric: str) -> float:
    v = row.get(metric)
    v = v.get("p50") if isinstance(v, dict) else v  # the median
    return float(v) if v is not None and not (isinstance(v, float) and math.isnan(v)) else 0.0


def _label(v: Any) -> str:
    return "on" if v is True else "off" if v is False else str(v)


def varied_knobs(doc: dict[str, Any]) -> list[str]:
    """Knobs whose value differs between the sweep's configurations, in the sweep's order."""
    names = list((doc["meta"].get("knobs") or {}).keys())
    configs = [r["config"] for r in doc["summary"]]
    return [k for k in names if len({_label(c.get(k)) for c in configs}) > 1] or names[:1]


def _groups(doc: dict[str, Any], x: str) -> dict[str, list[dict[str, Any]]]:
    """Summary rows grouped by the values of the other knobs (one figure per group)."""
    others = [k for k in (doc["meta"].get("knobs") or {}) if k != x]
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in doc["summary"]:
        key = ", ".join(f"{k}={_label(row['config'].get(k))}" for k in others)
        groups.setdefault(key, []).append(row)
    for rows in groups.values():
        rows.sort(key=lambda r: _sort_key(r["config"].get(x)))
    return groups


def _sort_key(v: Any) -> tuple[Any, ...]:
    if isinstance(v, bool):
        return (0, int(v), "")
    if isinstance(v, int | float):
        return (0, float(v), "")
    head = str(v).split(":")[0]
    return (0, float(head), str(v)) if head.isdigit() else (1, 0.0, str(v))


def save_figure(fig: Any, out: Path, stem: str, rows: Sequence[Mapping[str, object]]) -> list[Path]:
    """OUT/STEM.png at 300 DPI and OUT/STEM.csv (the numbers it was drawn from); closes it."""
    out.mkdir(parents=True, exist_ok=True)
    png = out / f"{stem}.png"
    try:
        run_hooks(fig, stem)
        with atomic_path(png) as tmp:
            fig.savefig(tmp, dpi=DPI, bbox_inches="tight")
    finally:
        plt.close(fig)
    return [png, write_csv(out / f"{stem}.csv", rows)]


def plain_log_ticks(ax: Any, which: str) -> None:
    """Tick labels of a log axis (`which`: "x" or "y") as plain numbers: "1", "2", "500".

    Over less than a decade a log axis has one major tick or none and matplotlib writes the
    minor ones as "2x10^0" (capacity.png read "1" and "2x10^0"); over more, the minor labels
    crowd the majors ("4x10^2" beside "10^3"). So the majors are plain; the minors are
    labelled, plainly, when the axis spans less than a decade, and only at 2 and 5 times a
    power of ten up to two decades (a 25-700 ms axis had "100" as its only label). Call it
    after plotting: the span is the axis's limits.
    """
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis = ax.xaxis if which == "x" else ax.yaxis
    lo, hi = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    axis.set_major_formatter(plain)
    if lo > 0 and hi / lo < 10:
        axis.set_minor_formatter(plain)
    elif lo > 0 and hi / lo < 100:
        axis.set_minor_formatter(
            FuncFormatter(lambda v, _: f"{v:g}" if _mantissa(v) in (2, 5) else "")
        )
    else:
        axis.set_minor_formatter(NullFormatter())


def _mantissa(v: float) -> int:
    """The leading digit of a positive tick value (2 for 200, 5 for 0.05)."""
    if v <= 0:
        return 0
    return int(round(v / 10 ** math.floor(math.log10(v) + 1e-9)))


def label_points(ax: Any, labels: list[tuple[float | None, float | None, str]]) -> None:
    """Each (x, y, text) written beside its point, where it fits.

    Tried above right, above left, below right and below left of the point; a label that
    would leave the axes or overprint one already placed is left out (the figure's CSV has
    every value). Without this, neighbouring rates' labels overprinted ("1/s" on "2/s") and
    the last one ran under the legend.
    """
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = ax.get_window_extent(renderer)
    placed: list[Any] = []
    spots = (((4, 4), "left", "bottom"), ((-4, 4), "right", "bottom"),
             ((4, -4), "left", "top"), ((-4, -4), "right", "top"))  # fmt: skip
    for x, y, text in labels:
        if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)):
            continue  # no point drawn there (a rate none of whose requests finished)
        for offset, ha, va in spots:
            a = ax.annotate(
                text, (x, y), fontsize=7, textcoords="offset points", xytext=offset, ha=ha, va=va
            )
            t = a.get_window_extent(renderer)
            inside = box.x0 <= t.x0 and t.x1 <= box.x1 and box.y0 <= t.y0 and t.y1 <= box.y1
            if inside and not any(t.overlaps(p) for p in placed):
                placed.append(t)
                break
            a.remove()


def write_csv(path: Path, rows: Sequence[Mapping[str, object]]) -> Path:
    """Rows as CSV with a header from the union of their keys (in first-seen order)."""
    cols: list[str] = []
    for r in rows:
        cols.extend(k for k in r if k not in cols)
    with atomic_path(path) as tmp, tmp.open("x", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    return path


def breakdown_figure(
    doc: dict[str, Any],
    x: str,
    out: Path,
    stem: str,
    *,
    title: str | None = None,
    log_y: bool = False,
    components: bool = False,
    overlay: tuple[str, str] | None = None,
    columns: tuple[str, ...] = (),
) -> list[Path]:
    """Stacked bars per value of knob `x`: prefill and decode, or the prefill's components.

    Args:
        doc: a sweep document (run/sweep.py).
        x: the knob on the x axis.
        out: folder for the files.
        stem: their name without extension.
        title: figure title (default: model and knob).
        log_y: logarithmic latency axis (output-token sweeps span decades).
        components: stack the prefill's components (standard/deep runs) instead of phases.
        overlay: (metric, axis label) drawn as a line on a second axis (e.g. throughput).
        columns: more figures for the CSV only, from each point's summary or knob checks
            (e.g. the precision experiment's weight_mib and kl_nats).

    Returns:
        The PNG and CSV paths written (one pair per group of the other knobs).
    """
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    groups = _groups(doc, x)
    head = title or f"{doc['meta'].get('model')}: {x.replace('_', ' ')}"
    for gi, (group, rows) in enumerate(groups.items()):
        suffix = _group_suffix(group, gi) if len(groups) > 1 else ""
        labels = [_label(r["config"].get(x)) for r in rows]
        series, colors, ylabel = _stacks(rows, components)
        table = _figure_table(rows, x, labels, series, overlay)
        for rec, r in zip(table, rows, strict=True):
            rec.update({c: _overlay_value(r, c) for c in columns})
        fig, ax = plt.subplots(figsize=(max(6.5, 0.6 * len(rows) + 3.5), 4.2))
        _draw_stacks(ax, labels, series, colors, log_y)
        _draw_intervals(
            ax, rows, series, "ttft_ms" if _is_components(rows, components) else "total_ms"
        )
        ax.set_xlabel(x.replace("_", " "))
        ax.set_ylabel(ylabel)
        _legend(ax, labels, table, overlay)
        _fit_labels(ax, labels, fig)
        title = textwrap.fill(head, 70) + (f"\n{group}" if group else "")
        ax.set_title(title, fontsize=10)  # wrapped: a long one ran over the right axis
        png = out / f"{stem}{suffix}.png"
        try:
            run_hooks(fig, f"{stem}{suffix}")
            with atomic_path(png) as tmp:
                fig.savefig(tmp, dpi=DPI, bbox_inches="tight")  # keeps the outside legend
        finally:
            plt.close(fig)
        written += [png, write_csv(out / f"{stem}{suffix}.csv", table)]
    return written


#: longest group suffix a file name takes (the knob values of a figure, as in its title)
MAX_SUFFIX_CHARS = 80


def _group_suffix(group: str, index: int) -> str:
    """A figure's file-name suffix from the other knobs' values: "-top_k=2-batch_size=4".

    `plot` named them by panel index ("-1", "-2"), which says nothing of what each holds
    (issue 59). Characters a file system may refuse become "_"; a suffix longer than
    MAX_SUFFIX_CHARS keeps its start and the panel index, so names stay unique and short.
    """
    import re

    slug = re.sub(r"[^A-Za-z0-9._=+-]+", "_", group.replace(", ", "-")).strip("_-")
    if not slug:
        return f"-{index + 1}"
    if len(slug) > MAX_SUFFIX_CHARS:
        slug = f"{slug[:MAX_SUFFIX_CHARS]}-{index + 1}"
    return f"-{slug}"


def _fit_labels(ax: Any, labels: list[str], fig: Any) -> None:
    """Turn the x labels upright when they would overprint side by side (long knob values)."""
    slot_px = fig.get_figwidth() * fig.dpi * 0.7 / max(len(labels), 1)
    longest_px = 6.5 * max((len(lbl) for lbl in labels), default=0)  # 10 pt characters
    if longest_px > slot_px:
        ax.tick_params(axis="x", labelrotation=90)


def _is_components(rows: list[dict[str, Any]], components: bool) -> bool:
    return components and all(r.get("prefill_components_ms") for r in rows)


def _interval(row: dict[str, Any], metric: str) -> tuple[float, float, float] | None:
    """(median, low, high) of a metric's 95% interval of the median, or None."""
    v = row.get(metric)
    if not isinstance(v, dict):
        return None
    med, lo, hi = v.get("p50"), v.get("median_ci95_low"), v.get("median_ci95_high")
    if med is None or lo is None or hi is None:
        return None
    return float(med), float(lo), float(hi)


def _draw_intervals(
    ax: Any, rows: list[dict[str, Any]], series: dict[str, list[float]], metric: str
) -> list[int]:
    """Whiskers at each bar's top, and "≈" between neighbours that cannot be told apart.

    The whiskers are the 95% interval of the median of `metric` (the stack's whole); two
    neighbours whose intervals overlap are marked as not distinguishable. Returns the bars
    marked as indistinguishable from the bar before them.
    """
    tops = [sum(v[i] for v in series.values()) for i in range(len(rows))]
    spans = [_interval(r, metric) for r in rows]
    xs = [i for i, sp in enumerate(spans) if sp is not None]
    if not xs:
        return []
    lows, highs = [], []
    for i in xs:
        med, lo, hi = spans[i]  # type: ignore[misc]
        lows.append(max(0.0, med - lo))
        highs.append(max(0.0, hi - med))
    ax.errorbar(
        xs,
        [tops[i] for i in xs],
        yerr=[lows, highs],
        fmt="none",
        ecolor="black",
        elinewidth=0.9,
        capsize=3,
        label="95% CI of the median",
    )
    alike = []
    for i in range(1, len(rows)):
        a, b = spans[i - 1], spans[i]
        if a is not None and b is not None and a[1] <= b[2] and b[1] <= a[2]:
            y = max(tops[i - 1] + a[2] - a[0], tops[i] + b[2] - b[0])
            ax.annotate("≈", (i - 0.5, y), ha="center", va="bottom", fontsize=11)
            alike.append(i)
    if alike:  # a legend entry that says what the mark means
        ax.plot(
            [],
            [],
            ls="none",
            marker="$≈$",
            ms=9,
            color="black",
            label="within noise of its left neighbour",
        )
    return alike


def _stacks(
    rows: list[dict[str, Any]], components: bool
) -> tuple[dict[str, list[float]], list[str], str]:
    """(series to stack, their colours, y label): prefill's components, or the two phases."""
    if _is_components(rows, components):
        names = [c for c in COMPONENTS if any(c in r["prefill_components_ms"] for r in rows)]
        series = {c: [r["prefill_components_ms"].get(c, 0.0) for r in rows] for c in names}
        return series, [COMPONENT_COLORS[c] for c in names], "prefill time per sample (ms)"
    series = {
        PHASE_SERIES[0]: [_median(r, "ttft_ms") for r in rows],
        PHASE_SERIES[1]: [_median(r, "decode_ms") for r in rows],
    }
    return series, list(PHASE_COLORS.values()), "latency per generate call (ms)"


#: the two phases stacked when a figure has no prefill components: their CSV columns are the
#: medians' own (`ttft_ms`, `decode_ms`), not a second copy under the legend's names
PHASE_SERIES = ("prefill (TTFT)", "decode")


def _figure_table(
    rows: list[dict[str, Any]],
    x: str,
    labels: list[str],
    series: dict[str, list[float]],
    overlay: tuple[str, str] | None,
) -> list[dict[str, Any]]:
    """The numbers a figure is drawn from, one record per bar (its CSV)."""
    table = []
    for i, r in enumerate(rows):
        rec: dict[str, Any] = {x: labels[i], "run_id": r.get("run_id")}
        rec.update(  # components' columns (the phases' are the medians, below)
            {f"{k}_ms": round(v[i], 4) for k, v in series.items() if k not in PHASE_SERIES}
        )
        rec.update(
            {
                "ttft_ms": _median(r, "ttft_ms"),
                "tpot_ms": _median(r, "tpot_ms"),
                "decode_ms": _median(r, "decode_ms"),
                "total_ms": _median(r, "total_ms"),
                "total_ms_ci95_low": (_interval(r, "total_ms") or (None, None, None))[1],
                "total_ms_ci95_high": (_interval(r, "total_ms") or (None, None, None))[2],
                "tokens_per_s": _median(r, "tokens_per_s"),
                "samples": r.get("samples"),
            }
        )
        if overlay:
            rec[overlay[0]] = _overlay_value(r, overlay[0])
        table.append(rec)
    return table


def _draw_stacks(
    ax: Any, labels: list[str], series: dict[str, list[float]], colors: list[str], log_y: bool
) -> None:
    """Stacked bars; on a log axis lines instead, with the whole as a line of its own.

    Stacked on a log scale, a segment's height says nothing about its share (the upper one
    always looks thin), so a log axis draws each part and the total as lines.
    """
    if log_y:
        for (name, values), color in zip(series.items(), colors, strict=True):
            ax.plot(labels, values, "o-", label=name, color=color, lw=1.5, ms=4)
        totals = [sum(v[i] for v in series.values()) for i in range(len(labels))]
        ax.plot(labels, totals, "s-", label="total", color="#333333", lw=1.2, ms=4)
        ax.set_yscale("log")
        lowest = min((v for vs in series.values() for v in vs if v > 0), default=1.0)
        ax.set_ylim(bottom=lowest / 2)
        plain_log_ticks(ax, "y")
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.set_axisbelow(True)
        return
    bottom = [0.0] * len(labels)
    for (name, values), color in zip(series.items(), colors, strict=True):
        ax.bar(labels, values, bottom=bottom, label=name, color=color, width=0.7)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def _legend(
    ax: Any, labels: list[str], table: list[dict[str, Any]], overlay: tuple[str, str] | None
) -> None:
    """The overlay line on a second axis, and one legend outside the axes, on the right."""
    handles, names = ax.get_legend_handles_labels()
    if overlay:
        ax2 = ax.twinx()
        values = [rec[overlay[0]] for rec in table]
        (line,) = ax2.plot(labels, values, color="black", marker="o", label=overlay[1])
        ax2.set_ylabel(overlay[1])
        finite = [v for v in values if v is not None and math.isfinite(v)]
        ax2.set_ylim(0, max(finite, default=1.0) * 1.1)  # room for a marker at the top
        handles.append(line)
        names.append(overlay[1])
    # outside the axes: a legend must never hide a bar
    ax.legend(
        handles[::-1],
        names[::-1],
        fontsize=8,
        loc="upper left",
        bbox_to_anchor=(1.16 if overlay else 1.02, 1.0),
        borderaxespad=0.0,
        frameon=False,
    )


def _overlay_value(row: dict[str, Any], metric: str) -> float | None:
    if metric in row:
        return _median(row, metric)
    if metric in (row.get("phases") or {}):
        return float(row["phases"][metric])
    for check in (row.get("checks") or {}).values():  # e.g. the quality proxy of active_layers
        if isinstance(check, dict) and metric in check:
            return float(check[metric])
    return None
