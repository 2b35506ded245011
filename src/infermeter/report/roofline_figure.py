"""The roofline figure: attainable FLOP/s against intensity, with the run's layers on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from infermeter.analysis.roofline import COLUMNS, all_rows
from infermeter.report.figures import DPI, write_csv
from infermeter.util.atomic import atomic_path
from infermeter.util.palette import BLUE, ORANGE

MARKERS = {"attention": "o", "mlp": "s", "moe": "D", "lm_head": "^", "forward": "*"}
COLORS = {"prefill": BLUE, "decode": ORANGE}


def roofline_figure(analysis: dict[str, Any], out: Path, stem: str = "roofline") -> list[Path]:
    """PNG of the roofline with one point per (phase, kind), and its CSV; [] without ceilings."""
    roof = analysis["roofline"]
    if roof.get("unavailable"):
        return []
    ceil = roof.get("ceilings")
    dtype = roof["workload"]["dtype"]
    rows = [r for r in all_rows(roof) if r["achieved_flop_per_s"]]
    if not ceil or not rows:
        return []
    peak = ceil["flop_per_s"].get(dtype) or max(ceil["flop_per_s"].values())
    bw = ceil["bandwidth_bytes_per_s"]
    lo = min(r["intensity"] for r in rows) / 4
    hi = max(max(r["intensity"] for r in rows) * 4, 4 * peak / bw)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [lo, peak / bw, hi]
    ax.plot(
        xs,
        [min(peak, x * bw) for x in xs],
        color="black",
        lw=1.5,
        label=f"ceiling: {peak / 1e9:,.0f} GFLOP/s, {bw / 1e9:,.0f} GB/s",
    )
    ax.axvline(peak / bw, color="grey", ls=":", lw=1)
    for r in rows:
        ax.scatter(
            r["intensity"],
            r["achieved_flop_per_s"],
            marker=MARKERS.get(r["kind"], "o"),
            color=COLORS.get(r["phase"], "black"),
            s=80 if r["kind"] == "forward" else 40,
            label=f"{r['phase']} {r['kind']}",
            zorder=3,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("operational intensity (FLOP/byte)")
    ax.set_ylabel(f"achieved FLOP/s ({dtype})")
    ax.set_title(
        f"{analysis['model']} on {analysis['device']}\nceilings: {analysis['ceilings_source']}",
        fontsize=9,
    )
    ax.grid(which="both", alpha=0.2)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    out.mkdir(parents=True, exist_ok=True)
    png = out / f"{stem}.png"
    try:
        with atomic_path(png) as tmp:
            fig.savefig(tmp, dpi=DPI, bbox_inches="tight")
    finally:
        plt.close(fig)
    table = [{k: r[k] for k in COLUMNS} for r in rows]
    return [png, write_csv(out / f"{stem}.csv", table)]
