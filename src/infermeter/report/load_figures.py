"""Figures of a rate sweep (`infermeter load --rate 0.5,1,2,4`), each PNG with its CSV.

Latency against throughput (p50 and p99 of TTFT and end-to-end, one point per offered rate,
the knee marked), and goodput and throughput against the offered rate. Rendering only: the
numbers come from the sweep's document (`run/load.run_rate_sweep`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from infermeter.report.figures import save_figure  # noqa: E402


def load_sweep_figures(doc: dict[str, Any], out: Path) -> list[Path]:
    """The throughput-latency curve with its knee, and goodput vs offered rate."""
    points = [p for p in doc["summary"] if not math.isinf(p["rate"])] or doc["summary"]
    knee_rate = doc.get("knee_rate")
    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs = [p["throughput_rps"] for p in points]
    for key, label, style in (("ttft_ms_p99", "TTFT p99", "o-"), ("ttft_ms_p50", "TTFT p50",
                              "o--"), ("e2e_ms_p99", "end-to-end p99", "s-"),
                              ("e2e_ms_p50", "end-to-end p50", "s--")):  # fmt: skip
        ax.plot(xs, [p[key] for p in points], style, label=label)
    for p in points:
        ax.annotate(f"{p['rate']:g}/s", (p["throughput_rps"], p["e2e_ms_p99"]), fontsize=7,
                    textcoords="offset points", xytext=(4, 4))  # fmt: skip
    k = next((p for p in points if p["rate"] == knee_rate), None)
    if k is not None:
        ax.axvline(k["throughput_rps"], color="#C44E52", linestyle=":",
                   label=f"knee: {knee_rate:g} req/s offered")  # fmt: skip
    ax.set_yscale("log")
    ax.set_xlabel("throughput (requests/s)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"{doc['meta']['model']}: latency vs throughput "
                 f"({doc['meta']['spec']['server']} batching)", fontsize=10)  # fmt: skip
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    files = save_figure(fig, out, "latency_vs_throughput", points)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    rates = [p["rate"] for p in points]
    ax.plot(rates, rates, ":", color="#8C8C8C", label="offered")
    ax.plot(rates, xs, "o-", label="throughput")
    if any(p["goodput_rps"] is not None for p in points):
        ax.plot(rates, [p["goodput_rps"] for p in points], "s-", label="goodput (every SLO met)")
    ax.set_xlabel("offered rate (requests/s)")
    ax.set_ylabel("requests/s")
    ax.set_title("throughput and goodput vs offered rate", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return files + save_figure(fig, out, "goodput_vs_rate", points)
