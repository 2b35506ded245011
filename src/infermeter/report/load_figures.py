"""Figures of a rate sweep (`infermeter load --rate 0.5,1,2,4`), each PNG with its CSV.

Latency against throughput (p50 and p99 of TTFT and end-to-end, one point per offered rate,
the knee marked), and goodput and throughput against the offered rate. Rendering only: the
numbers come from the sweep's document (`run/load.run_rate_sweep`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from infermeter.report.figures import label_points, plain_log_ticks, save_figure
from infermeter.util.fmt import or_nan
from infermeter.util.palette import BLUE, GREEN, GREY, ORANGE, PURPLE, VERMILLION

if TYPE_CHECKING:
    from collections.abc import Sequence

    from infermeter.serving.capacity import CapacityDoc, CapacityStepDoc
    from infermeter.serving.rows import RateSweepDoc, SweepPointDoc


_LatencyKey = Literal["ttft_ms_p99", "ttft_ms_p50", "e2e_ms_p99", "e2e_ms_p50"]


def _legend_outside(ax: Any) -> None:
    """The legend right of the axes: inside, it covered the highest rate's points."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def load_sweep_figures(doc: RateSweepDoc, out: Path) -> list[Path]:
    """A measured rate sweep's figures (`sweep_figures`)."""
    meta = doc["meta"]
    return sweep_figures(
        doc["summary"], doc["knee_rate"], meta["model"], meta["spec"]["server"], out
    )


def sweep_figures(
    all_points: Sequence[SweepPointDoc],
    knee_rate: float | None,
    model: str,
    server: str,
    out: Path,
) -> list[Path]:
    """The throughput-latency curve with its knee, and goodput vs offered rate.

    Measured (`load --rate A,B`) or predicted (`load predict`) points alike.
    """
    points = [p for p in all_points if not math.isinf(p["rate"])] or list(all_points)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs = [p["throughput_rps"] for p in points]
    curves: tuple[tuple[_LatencyKey, str, str], ...] = (
        ("ttft_ms_p99", "TTFT p99", "o-"),
        ("ttft_ms_p50", "TTFT p50", "o--"),
        ("e2e_ms_p99", "end-to-end p99", "s-"),
        ("e2e_ms_p50", "end-to-end p50", "s--"),
    )
    for key, label, style in curves:
        ax.plot(xs, [or_nan(p[key]) for p in points], style, label=label)
    k = next((p for p in points if p["rate"] == knee_rate), None)
    if k is not None:
        ax.axvline(
            k["throughput_rps"],
            color=VERMILLION,
            linestyle=":",
            label=f"knee: {knee_rate:g} req/s offered",
        )
    ax.set_yscale("log")
    plain_log_ticks(ax, "y")
    ax.set_xlabel("throughput (requests/s)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"{model}: latency vs throughput ({server} batching)", fontsize=10)
    ax.grid(True, alpha=0.3)
    _legend_outside(ax)
    label_points(ax, [(p["throughput_rps"], p["e2e_ms_p99"], f"{p['rate']:g}/s") for p in points])
    files = save_figure(fig, out, "latency_vs_throughput", points)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    rates = [p["rate"] for p in points]
    ax.plot(rates, rates, ":", color=GREY, label="offered")
    ax.plot(rates, xs, "o-", label="throughput")
    if any(p["goodput_rps"] is not None for p in points):
        ax.plot(
            rates, [or_nan(p["goodput_rps"]) for p in points], "s-", label="goodput (every SLO met)"
        )
    ax.set_xlabel("offered rate (requests/s)")
    ax.set_ylabel("requests/s")
    ax.set_title("throughput and goodput vs offered rate", fontsize=10)
    ax.grid(True, alpha=0.3)
    _legend_outside(ax)
    files += save_figure(fig, out, "goodput_vs_rate", points)
    return files + energy_latency_figure(points, out)


def energy_latency_figure(points: Sequence[SweepPointDoc], out: Path) -> list[Path]:
    """Joules per request against p99 end-to-end latency, one point per offered rate.

    The trade a rate makes: more requests per step share each step's energy (fewer J each),
    at the price of waiting. Drawn only when the sweep measured energy.
    """
    pts = [p for p in points if p["j_per_request_p50"] is not None]
    if not pts:
        return []
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(
        [or_nan(p["e2e_ms_p99"]) for p in pts],
        [or_nan(p["j_per_request_p50"]) for p in pts],
        "o-",
        color=GREEN,
        label="J per request (median)",
    )
    ax.set_xlabel("end-to-end latency p99 (ms)")
    ax.set_ylabel("energy per request (J)")
    ax.set_title("energy vs latency across offered rates", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    label_points(ax, [(p["e2e_ms_p99"], p["j_per_request_p50"], f"{p['rate']:g}/s") for p in pts])
    return save_figure(fig, out, "energy_vs_latency", pts)


def capacity_figure(result: CapacityDoc, out: Path, title: str) -> list[Path]:
    """SLO attainment (with its interval) and goodput against the offered rate.

    The answer marked: the target as a line, each step's verdict as its marker.
    """
    rows = sorted(result["steps"], key=lambda r: r["rate"])
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(7, 5.6), sharex=True)
    rates = [r["rate"] for r in rows]
    att = [100 * r["attainment"] for r in rows]
    err = [
        [100 * (r["attainment"] - r["ci_low"]) for r in rows],
        [100 * (r["ci_high"] - r["attainment"]) for r in rows],
    ]
    ax.errorbar(
        rates,
        att,
        yerr=err,
        fmt="-",
        color=BLUE,
        capsize=3,
        zorder=1,
        label=f"attainment ({result['confidence']:.0%} interval)",
    )
    kinds: tuple[tuple[str, str, str, Callable[[CapacityStepDoc], bool]], ...] = (
        ("pass", "o", GREEN, lambda r: r["verdict"] == "pass"),
        ("fail", "X", VERMILLION, lambda r: r["verdict"] == "fail" and not r["saturated"]),
        ("fail: queue growing", "P", ORANGE, lambda r: r["saturated"]),
    )
    for label, marker, color, which in kinds:
        pts = [(r["rate"], 100 * r["attainment"]) for r in rows if which(r)]
        if pts:
            ax.scatter(*zip(*pts, strict=True), marker=marker, color=color, zorder=2, label=label)
    ax.axhline(
        100 * result["target"],
        color=GREY,
        linestyle=":",
        label=f"target {100 * result['target']:.3g}%",
    )
    ax.set_ylabel("requests meeting every SLO (%)")
    ax2.plot(rates, [r["goodput_rps"] for r in rows], "s-", color=PURPLE, label="goodput")
    ax2.plot(rates, rates, ":", color=GREY, label="offered")
    ax2.set_ylabel("requests/s")
    ax2.set_xlabel("offered rate (requests/s, log)")
    for a in (ax, ax2):
        a.set_xscale("log")
        plain_log_ticks(a, "x")
        a.grid(True, alpha=0.3)
        if result["max_rate"] is not None:
            a.axvline(result["max_rate"], color=GREEN, linestyle="--", linewidth=1)
    if result["max_rate"] is not None:
        ax2.annotate(
            f"capacity {result['max_rate']:.3g} req/s",
            (result["max_rate"], 1),
            xycoords=("data", "axes fraction"),
            xytext=(4, -12),
            textcoords="offset points",
            fontsize=8,
            color=GREEN,
        )
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax2.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title(title, fontsize=10)
    return save_figure(fig, out, "capacity", rows)
