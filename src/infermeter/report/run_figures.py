"""Figures of one run: timeline, per-layer times, deep mode's statistics, steps, memory, power.

Deep mode's statistics are its per-block tables (attention, MLP kill, MoE load) and the MoE
blocks' tokens per expert.

Rendering only: every number comes from the stored run (and its analysis, drawn elsewhere).
Each function writes a PNG (300 DPI) and the CSV it was drawn from, and returns their paths, or
[] when the run has nothing to draw (a minimal-mode run has no per-layer times).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import matplotlib
import numpy as np

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from infermeter.measure.energy.attribution import power_spans
from infermeter.report.figures import save_figure
from infermeter.util.palette import BLUE, GREEN, GREY, ORANGE, PHASES, VERMILLION

if TYPE_CHECKING:  # annotations only: the run's module imports numpy
    from infermeter.run.results import RunResult

#: a per-layer table's row: every row document has a phase and a layer
_Row = TypeVar("_Row", bound="Mapping[str, Any]")

#: a run's phases in the colours the dashboard draws them in
PHASE_COLORS = dict(PHASES)


def timeline_figure(run: RunResult, out: Path) -> list[Path]:
    """Load, move to device, then every sample's prefill and decode on one time axis."""
    rows = run.timeline()
    if not rows:
        return []
    fig, ax = plt.subplots(figsize=(8, 2.6))
    labels = []
    for r in rows:
        name = r["name"]
        lane = (
            "setup"
            if "sample" not in r
            else f"sample {r['sample']}" + (" (warm-up)" if r.get("warmup") else "")
        )
        if lane not in labels:
            labels.append(lane)
        ax.barh(
            labels.index(lane),
            r["duration_ms"] / 1e3,
            left=r["start_ms"] / 1e3,
            color=PHASE_COLORS.get(name, GREY),
            edgecolor="white",
            linewidth=0.5,
        )
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time since the run started (s)")
    handles = [Rectangle((0, 0), 1, 1, color=c) for c in PHASE_COLORS.values()]
    ax.legend(
        handles,
        list(PHASE_COLORS),
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        frameon=False,
    )
    ax.set_title(f"{run.model_info.get('spec')}: phases of run {run.run_id}", fontsize=9)
    fig.set_figheight(max(2.0, 0.3 * len(labels) + 1))
    return save_figure(fig, out, "timeline", rows)


def layer_figure(run: RunResult, out: Path) -> list[Path]:
    """Mean ms per call of each decoder block, prefill and decode side by side."""
    rows = [r for r in run.layers.get("layers", []) if r["kind"] == "block"]
    if not rows:
        return []
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=False)
    for ax, phase, color in zip(
        axes, ("prefill", "decode"), (PHASE_COLORS["prefill"], PHASE_COLORS["decode"]), strict=True
    ):
        sub = sorted((r for r in rows if r["phase"] == phase), key=lambda r: r["layer"] or 0)
        ax.bar([r["layer"] or 0 for r in sub], [r["mean_ms"] for r in sub], color=color)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(f"{phase}: ms per call per block", fontsize=9)
        ax.set_xlabel("decoder block")
        ax.set_ylabel("ms per call")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(f"{run.model_info.get('spec')}: per-layer time", fontsize=10)
    fig.tight_layout()
    table = [
        {k: r[k] for k in ("name", "layer", "phase", "calls", "total_ms", "mean_ms")} for r in rows
    ]
    return save_figure(fig, out, "layers", table)


def steps_figure(run: RunResult, out: Path) -> list[Path]:
    """Every inter-token latency of every measured sample, in order."""
    samples = [s for s in run.measured if s.step_ms]
    if not samples:
        return []
    fig, ax = plt.subplots(figsize=(8, 3.2))
    rows = []
    for s in samples:
        ax.plot(range(2, len(s.step_ms) + 2), s.step_ms, lw=1, alpha=0.8, label=f"sample {s.index}")
        rows += [{"sample": s.index, "token": i + 2, "step_ms": v} for i, v in enumerate(s.step_ms)]
    ax.set_xlabel("generated token")
    ax.set_ylabel("inter-token latency (ms)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if len(samples) <= 8:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(f"{run.model_info.get('spec')}: decode steps", fontsize=9)
    return save_figure(fig, out, "decode_steps", rows)


#: peak memory that stays within this share of its highest value in every sample is flat
FLAT_MEMORY_SHARE = 0.01


def flat_memory(run: RunResult) -> str | None:
    """One line for a report when peak memory was the same in every sample; None otherwise.

    A full-width figure of a flat line says less than this sentence does.
    """
    parts = []
    for key, name in (
        ("rss_peak_mib", "process RSS peak"),
        ("peak_allocated_mib", "device allocator peak"),
    ):
        values = [float(v) for s in run.samples if (v := getattr(s, key))]
        if not values:
            continue
        low, high = min(values), max(values)
        if high - low > FLAT_MEMORY_SHARE * high:
            return None
        parts.append(
            f"{name} {high:,.0f} MiB in every sample (within {high - low:,.1f} MiB of each other)"
        )
    return "; ".join(parts) or None


def memory_figure(run: RunResult, out: Path) -> list[Path]:
    """Peak resident and device memory per sample; none when it is flat (`flat_memory`)."""
    if flat_memory(run):
        return []
    rows = [
        {
            "sample": s.index,
            "warmup": s.warmup,
            "rss_peak_mib": s.rss_peak_mib,
            "peak_allocated_mib": s.peak_allocated_mib,
        }
        for s in run.samples
    ]
    if not any(r["rss_peak_mib"] or r["peak_allocated_mib"] for r in rows):
        return []
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    x = [str(r["sample"]) for r in rows]
    if any(r["rss_peak_mib"] for r in rows):
        ax.plot(x, [r["rss_peak_mib"] or 0 for r in rows], marker="o", label="process RSS peak")
    if any(r["peak_allocated_mib"] for r in rows):
        ax.plot(
            x,
            [r["peak_allocated_mib"] or 0 for r in rows],
            marker="s",
            label="device allocator peak",
        )
    ax.set_xlabel("sample")
    ax.set_ylabel("memory (MiB)")
    top = max(max(r["rss_peak_mib"] or 0, r["peak_allocated_mib"] or 0) for r in rows)
    ax.set_ylim(0, top * 1.12)  # room for the top marker (autoscale had cut it at the edge)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(f"{run.model_info.get('spec')}: peak memory per sample", fontsize=9)
    return save_figure(fig, out, "memory", rows)


def power_figure(run: RunResult, out: Path) -> list[Path]:
    """Mean power over the run's timeline, in spans the counter resolves, when measured."""
    p = run.power
    if not p or len(p["t_ms"]) < 2:
        return []
    period = (run.energy or {}).get("update_period_ms") or 0.0
    mids, watts = power_spans(p["t_ms"], [sum(r) for r in p["joules"]], period)
    rows = [{"t_ms": float(t), "power_w": float(w)} for t, w in zip(mids, watts, strict=True)]
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.plot([r["t_ms"] / 1e3 for r in rows], [r["power_w"] for r in rows], lw=1, color=VERMILLION)
    for s in run.samples:
        ax.axvspan(s.start_ms / 1e3, (s.start_ms + s.total_ms) / 1e3, color=BLUE, alpha=0.08)
    ax.set_xlabel("time since the run started (s); shaded: generate calls")
    ax.set_ylabel("power (W)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.set_title(f"{run.model_info.get('spec')}: power ({p['source']})", fontsize=9)
    return save_figure(fig, out, "power", rows)


def batch_state_figure(run: RunResult, out: Path) -> list[Path]:
    """A continuous-batching load run's batch over time.

    Requests running and waiting, the tokens each step carried (prefill, decode), and the KV
    cache's use.
    """
    steps = ((run.checks or {}).get("load") or {}).get("steps") or []
    if not steps:
        return []
    t = [s["t_ms"] / 1e3 for s in steps]
    fig, axes = plt.subplots(3, 1, figsize=(8, 6), sharex=True)
    for key, label, color in (("running", "running", BLUE), ("waiting", "waiting", VERMILLION)):
        if any(key in s for s in steps):
            axes[0].step(t, [s.get(key, 0) for s in steps], where="post", label=label, color=color)
    axes[0].set_ylabel("requests")
    for key, label, color in (
        ("prefill_tokens", "prefill", BLUE),
        ("decode_tokens", "decode", ORANGE),
    ):
        if any(key in s for s in steps):
            axes[1].plot(t, [s.get(key, 0) for s in steps], ".", ms=3, label=label, color=color)
    axes[1].set_ylabel("tokens per step")
    if any("kv_used_pct" in s for s in steps):
        axes[2].step(
            t,
            [s.get("kv_used_pct", 0) for s in steps],
            where="post",
            color=GREEN,
            label="KV cache used",
        )
        axes[2].axhline(95, color=GREY, linestyle=":", label="full (95%)")
    axes[2].set_ylabel("KV cache used (%)")
    axes[2].set_ylim(0, 105)
    axes[2].set_xlabel("time since the first arrival (s)")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    axes[0].set_title(
        f"{run.model_info.get('spec')}: the continuous batch over the run {run.run_id}", fontsize=9
    )
    return save_figure(fig, out, "batch_state", steps)


#: deep mode's per-block statistics: (table, column, panel title), drawn where the run has them
_BLOCK_STATS = (
    ("attention", "entropy", "attention entropy (nats)"),
    ("attention", "sparsity", "attention sparsity (share of weights ~0)"),
    ("mlp_kill", "kill_ratio", "MLP kill ratio (share of activations ~0)"),
    ("moe_load", "imbalance", "MoE imbalance (busiest expert / mean)"),
)


def block_stats_figure(run: RunResult, out: Path) -> list[Path]:
    """Deep mode's statistics per decoder block, prefill and decode as two lines a panel."""
    from infermeter.run.results import layer_table

    panels = [
        (table, col, title)
        for table, col, title in _BLOCK_STATS
        if any(r.get(col) is not None for r in layer_table(run.layers, table))
    ]
    if not panels:
        return []
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.2 * len(panels)), squeeze=False)
    rows = []
    for ax, (table, col, title) in zip(axes[:, 0], panels, strict=True):
        for phase in ("prefill", "decode"):
            sub = sorted(
                (
                    r
                    for r in layer_table(run.layers, table)
                    if r["phase"] == phase and r.get(col) is not None
                ),
                key=lambda r: r["layer"],
            )
            if sub:
                ax.plot(
                    [int(r["layer"]) for r in sub],
                    [r[col] for r in sub],
                    "o-",
                    ms=3,
                    color=PHASE_COLORS[phase],
                    label=phase,
                )
                rows += [
                    {"statistic": col, "phase": phase, "layer": r["layer"], col: r[col]}
                    for r in sub
                ]
        ax.set_title(title, fontsize=9, loc="left")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    axes[-1, 0].set_xlabel("decoder block")
    fig.suptitle(f"{run.model_info.get('spec')}: per-block statistics (deep mode)", fontsize=10)
    fig.tight_layout()
    return save_figure(fig, out, "block_statistics", rows)


def _one_phase(rows: list[_Row]) -> tuple[str, list[_Row]]:
    """Decode's rows where the run has them (what a long generation is made of), else prefill's."""
    phase = "decode" if any(r["phase"] == "decode" for r in rows) else "prefill"
    return phase, [r for r in rows if r["phase"] == phase]


def _grid(
    rows: Sequence[Mapping[str, Any]], x: str, value: str, fill: float
) -> tuple[list[int], list[int], list[list[float]]]:
    """(blocks, x values, blocks x values grid) of `value`; `fill` where a cell has none."""
    layers = sorted({int(r["layer"]) for r in rows})
    xs = sorted({int(r[x]) for r in rows})
    grid = [[fill] * len(xs) for _ in layers]
    for r in rows:
        if r.get(value) is not None:
            grid[layers.index(int(r["layer"]))][xs.index(int(r[x]))] = float(r[value])
    return layers, xs, grid


def _heatmap(
    ax: Any, grid: list[list[float]], layers: list[int], xlabel: str, ylabel: str, **scale: Any
) -> Any:
    """A blocks x something heatmap on `ax` with whole-number ticks; returns its image."""
    im = ax.imshow(grid, aspect="auto", cmap="viridis", interpolation="nearest", **scale)
    ax.set_yticks(range(len(layers)), [str(v) for v in layers], fontsize=7)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=12, integer=True))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return im


def heads_figure(run: RunResult, out: Path) -> list[Path]:
    """Attention entropy and sparsity of every head of every block (decode where measured).

    Heads of one block differ; the block's mean (`block_stats_figure`) hides a head that
    attends to one token.
    """
    phase, rows = _one_phase(run.layers.get("attention_heads", []))
    if not rows:
        return []
    n_layers = len({r["layer"] for r in rows})
    n_heads = len({r["head"] for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(max(7.0, 0.5 * n_heads + 5), 0.28 * n_layers + 2.2))
    for ax, col, label in zip(
        axes, ("entropy", "sparsity"), ("entropy (nats)", "sparsity (share ~0)"), strict=True
    ):
        layers, _, grid = _grid(rows, "head", col, math.nan)
        # a share spans 0 to 1: a uniform 0 reads as 0, not as the middle of a made-up scale
        scale = {"vmin": 0.0, "vmax": 1.0} if col == "sparsity" else {}
        note = _flat_note(grid, col)
        if note and col == "entropy":  # colours stretched over 0.004 nats made noise look real
            scale = {"vmin": 0.0, "vmax": float(np.nanmax(grid))}
        im = _heatmap(ax, grid, layers, "head", "decoder block", **scale)
        ax.set_title(f"attention {label}" + (f"\n{note}" if note else ""), fontsize=9)
        fig.colorbar(im, ax=ax)
    fig.suptitle(f"{run.model_info.get('spec')}: attention per head ({phase})", fontsize=10)
    fig.tight_layout()
    table = [{k: r[k] for k in ("phase", "layer", "head", "entropy", "sparsity")} for r in rows]
    return save_figure(fig, out, "attention_heads", table)


def _flat_note(grid: Any, col: str) -> str | None:
    """A panel that holds next to nothing says so, in its title (issue 59).

    A sparsity grid of zeros is "no weight near 0 in any head", not an empty panel; entropies
    within 1% of each other (random weights, or near-uniform attention) are drawn from 0, with
    their range in words, so a 4.255-4.259 spread does not fill the colour scale.
    """
    values = np.asarray(grid, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None
    lo, hi = float(values.min()), float(values.max())
    if col == "sparsity" and hi == 0:
        return "0 in every head: no weight near 0"
    if col == "entropy" and hi > 0 and (hi - lo) < 0.01 * hi:
        return f"every head {lo:.4g}-{hi:.4g} nats (within 1%): drawn from 0"
    return None


def experts_figure(run: RunResult, out: Path) -> list[Path]:
    """Tokens per expert in each MoE block (share of the block's assignments), decode phase."""
    phase, rows = _one_phase(run.layers.get("moe_routing", []))
    if not rows:
        return []
    layers, experts, grid = _grid(rows, "expert", "share", 0.0)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.28 * len(experts) + 2.5), 0.3 * len(layers) + 1.8))
    im = _heatmap(ax, grid, layers, "expert", "MoE block")
    ax.set_title(f"{run.model_info.get('spec')}: share of tokens per expert ({phase})", fontsize=9)
    fig.colorbar(im, ax=ax, label="share of the block's assignments")
    fig.tight_layout()
    table = [{k: r[k] for k in ("phase", "layer", "expert", "tokens", "share")} for r in rows]
    return save_figure(fig, out, "experts", table)


RUN_FIGURES = (
    timeline_figure,
    layer_figure,
    block_stats_figure,
    heads_figure,
    experts_figure,
    steps_figure,
    memory_figure,
    power_figure,
    batch_state_figure,
)
