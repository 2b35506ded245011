"""Figures of the microbenchmarks (`bench attention`, `bench model`), each PNG with its CSV.

One line per kind or model over sequence length, medians with their 95% intervals as error bars.

Rendering only: every number comes from the benchmark's JSON document (`bench/`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from infermeter.report.figures import plain_log_ticks, save_figure

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _value(row: dict[str, Any], metric: str) -> tuple[float, float, float] | None:
    """(median, low, high) of a summary field, or (v, v, v) for a plain number; None if absent."""
    v = row.get(metric)
    if isinstance(v, dict):
        mid, lo, hi = v.get("p50"), v.get("median_ci95_low"), v.get("median_ci95_high")
        if mid is None or (isinstance(mid, float) and math.isnan(mid)):
            return None
        lo = mid if lo is None or math.isnan(lo) else lo
        hi = mid if hi is None or math.isnan(hi) else hi
        return float(mid), float(lo), float(hi)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return float(v), float(v), float(v)


def lines_figure(
    rows: list[dict[str, Any]],
    group: str,
    metrics: list[tuple[str, str]],
    ylabel: str,
    title: str,
    out: Path,
    stem: str,
) -> list[Path]:
    """One line per (`group` value, metric) over `seq_len` on log-log axes; PNG and CSV.

    `metrics` is a list of (field, label suffix); lines with no data are left out, and an empty
    figure is not written at all.
    """
    fig, ax = plt.subplots(figsize=(7, 4.2))
    table = []
    for gi, name in enumerate(dict.fromkeys(r[group] for r in rows)):
        mine = sorted((r for r in rows if r[group] == name), key=lambda r: r["seq_len"])
        for mi, (metric, suffix) in enumerate(metrics):
            raw = [(r["seq_len"], _value(r, metric)) for r in mine]
            pts = [(x, v) for x, v in raw if v is not None and v[0] > 0]
            if not pts:
                continue
            xs = [x for x, _ in pts]
            mids = [v[0] for _, v in pts]
            err = [[v[0] - v[1] for _, v in pts], [v[2] - v[0] for _, v in pts]]
            label = f"{name}{suffix}"
            # one colour per kind or model, one line style per metric; distinct markers keep
            # lines that coincide (equal memory) visible as a pair
            ax.errorbar(
                xs,
                mids,
                yerr=err,
                marker=MARKERS[gi % len(MARKERS)],
                capsize=3,
                label=label,
                alpha=0.9,
                color=f"C{gi % 10}",
                linestyle=("-", "--", ":")[mi % 3],
            )
            table += [
                {
                    group: name,
                    "metric": metric,
                    "seq_len": x,
                    "median": v[0],
                    "low": v[1],
                    "high": v[2],
                }
                for x, v in pts
            ]
    if not table:
        plt.close(fig)
        return []
    ax.set_xscale("log", base=2)
    lengths = sorted({r["seq_len"] for r in table})
    ax.set_xticks(lengths, [str(n) for n in lengths])  # 512, not 2^9
    ax.minorticks_off()
    ax.set_yscale("log")
    plain_log_ticks(ax, "y")
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, out, stem, table)


def attention_figures(doc: dict[str, Any], out: Path) -> list[Path]:
    """Latency, peak memory and achieved FLOP/s vs length, one line per attention kind."""
    spec = doc["meta"]["spec"]
    shape = (
        f"batch {spec['batch']}, {spec['heads']} heads ({spec['kv_heads']} kv), head dim "
        f"{spec['head_dim']}, {spec['dtype']}"
    )
    rows = doc["summary"]
    return [
        *lines_figure(
            rows,
            "kind",
            [("latency_ms", "")],
            "latency (ms, median, 95% CI)",
            f"Attention latency vs length · {shape}",
            out,
            "attention_latency",
        ),
        *lines_figure(
            rows,
            "kind",
            [("peak_memory_mib", "")],
            "peak memory (MiB)",
            f"Attention peak memory vs length · {shape}",
            out,
            "attention_memory",
        ),
        *lines_figure(
            rows,
            "kind",
            [("useful_flop_per_s", "")],
            "useful FLOP/s (masked-in entries / median time)",
            f"Attention efficiency · {shape}",
            out,
            "attention_efficiency",
        ),
    ]


def model_figures(doc: dict[str, Any], out: Path) -> list[Path]:
    """Forward and training-step latency and peak memory vs length, one line per model."""
    batch = doc["meta"]["spec"]["batch"]
    rows = doc["summary"]
    both = [("forward_ms", " forward"), ("train_ms", " forward+backward")]
    peaks = [("forward_peak_mib", " forward"), ("train_peak_mib", " forward+backward")]
    return [
        *lines_figure(
            rows,
            "model",
            both,
            "latency (ms, median, 95% CI)",
            f"Model latency vs length · batch {batch}",
            out,
            "model_latency",
        ),
        *lines_figure(
            rows,
            "model",
            peaks,
            "peak memory (MiB)",
            f"Model peak memory vs length · batch {batch}",
            out,
            "model_memory",
        ),
    ]
