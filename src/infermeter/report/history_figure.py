"""`infermeter history --out DIR`: a metric over time per configuration, PNG with its CSV.

One panel per configuration (most runs first, at most `MAX_PANELS`): each run's median with its
95% interval as an error bar, against the run's position in time (evenly spaced: runs come in
bursts, and a time axis would pile them up), the change points the analysis confirmed as
dashed lines with their change. Rendering only: the numbers come from `analysis/history.py`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from infermeter.report.figures import save_figure

MAX_PANELS = 4


def _err(p: dict[str, Any]) -> tuple[float, float]:
    lo, hi = p["ci95_low"], p["ci95_high"]
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return 0.0, 0.0
    return max(p["median"] - lo, 0.0), max(hi - p["median"], 0.0)


def history_figure(doc: dict[str, Any], out: Path) -> list[Path]:
    """history.png (and history.csv: every run of every configuration)."""
    groups = doc["configurations"][:MAX_PANELS]
    if not groups:
        return []
    fig, axes = plt.subplots(len(groups), 1, figsize=(8, 2.6 * len(groups)), squeeze=False)
    rows = []
    for ax, g in zip(axes[:, 0], groups, strict=True):
        pts = g["points"]
        xs = list(range(len(pts)))
        errs = [_err(p) for p in pts]
        ax.errorbar(
            xs,
            [p["median"] for p in pts],
            yerr=[[e[0] for e in errs], [e[1] for e in errs]],
            fmt="o-",
            ms=3,
            lw=1,
            capsize=2,
        )
        for c in g["change_points"]:
            ax.axvline(c["index"] - 0.5, ls="--", color="tab:red", lw=1)
            ax.annotate(
                f"{c['change_pct']:+.1f}%",
                (c["index"] - 0.5, 1.0),
                xycoords=("data", "axes fraction"),
                ha="left",
                va="top",
                fontsize=8,
                color="tab:red",
            )
        ax.set_title(g["label"], fontsize=9, loc="left")
        ax.set_ylabel(doc["metric"])
        ticks = xs if len(xs) <= 12 else xs[:: math.ceil(len(xs) / 12)]
        ax.set_xticks(ticks)
        ax.set_xticklabels([pts[i]["created"][5:16].replace("T", "\n") for i in ticks], fontsize=7)
        rows += [
            {"configuration": g["label"], **{k: p[k] for k in p if k != "versions"}} for p in pts
        ]
    axes[-1, 0].set_xlabel("run, oldest first (created month-day and UTC time)")
    fig.tight_layout()
    return save_figure(fig, out, "history", rows)
