"""Figures of a prediction (`infermeter predict --out DIR`), each PNG with its CSV.

TPOT and throughput against batch size (bars hatched where the batch does not fit), and memory
against context length (weights, KV cache, activations and runtime stacked, the device's
capacity as a line). Rendering only: the numbers are `experiments/whatif.what_if`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from infermeter.report.figures import save_figure
from infermeter.util.palette import BLUE, GREEN, ORANGE, PURPLE, VERMILLION

GB = 1e9


def _title(doc: dict[str, Any]) -> str:
    w = doc["workload"]
    tp = f", TP {w['tp']}" if w["tp"] > 1 else ""
    stack_doc = doc.get("stack") or {}  # predictions stored before stacks have none
    stack, release = stack_doc.get("key"), stack_doc.get("release_asked")
    served = f", {stack}{'@' + release if release else ''}" if stack else ""
    return (
        f"{doc['model']} on {doc['hardware']['name']} ({doc['dtype']}{tp}{served}),\n"
        f"prompt {w['prompt_tokens']}, {w['new_tokens']} new tokens"
    )  # two lines: on one it ran past the axes, over the right axis' tick labels


def latency_figure(doc: dict[str, Any], out: Path) -> list[Path]:
    """Predicted TPOT (left axis) and generation throughput (right) against batch size."""
    rows = doc["rows"]
    xs = [str(r["batch"]) for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    fits = [r["memory"]["fits"] is not False for r in rows]
    tpot = [r["tpot_ms"] for r in rows]
    # the 90% intervals as error bars (analysis/intervals.py); a row without one has none
    spans = [r.get("tpot_ms_interval") or (t, t) for r, t in zip(rows, tpot, strict=True)]
    below = [t - lo for t, (lo, _) in zip(tpot, spans, strict=True)]
    above = [hi - t for t, (_, hi) in zip(tpot, spans, strict=True)]
    bars = ax.bar(
        xs,
        tpot,
        color=BLUE,
        label="TPOT (ms), 90% interval",
        yerr=[below, above],
        capsize=4,
        error_kw={"elinewidth": 1},
    )
    for bar, ok in zip(bars, fits, strict=True):
        if not ok:
            bar.set_hatch("//")
            bar.set_alpha(0.4)
    ax.set_xlabel("batch (sequences per replica; hatched: does not fit)")
    ax.set_ylabel("predicted TPOT (ms)")
    ax2 = ax.twinx()
    rate = [r["throughput_tok_s"] or 0.0 for r in rows]
    rate_spans = [
        r.get("throughput_tok_s_interval") or (v, v) for r, v in zip(rows, rate, strict=True)
    ]
    ax2.errorbar(
        xs,
        rate,
        yerr=[
            [v - lo for v, (lo, _) in zip(rate, rate_spans, strict=True)],
            [hi - v for v, (_, hi) in zip(rate, rate_spans, strict=True)],
        ],
        fmt="o-",
        color=ORANGE,
        capsize=4,
        label="throughput (tokens/s), 90% interval",
    )
    ax2.set_ylabel("predicted generation throughput (tokens/s)")
    ax.set_title(_title(doc), fontsize=9)
    # below the axes: inside, it covered the first batches' bars and points
    fig.legend(loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, fontsize=8, frameon=False)
    csv = [
        {
            "batch": r["batch"],
            "fits": r["memory"]["fits"],
            "ttft_ms": r["ttft_ms"],
            "tpot_ms": r["tpot_ms"],
            "tpot_ms_low": (r.get("tpot_ms_interval") or [None, None])[0],
            "tpot_ms_high": (r.get("tpot_ms_interval") or [None, None])[1],
            "throughput_tok_s": r["throughput_tok_s"],
            "throughput_tok_s_low": (r.get("throughput_tok_s_interval") or [None, None])[0],
            "throughput_tok_s_high": (r.get("throughput_tok_s_interval") or [None, None])[1],
            "memory_total_bytes": r["memory"]["total_bytes"],
            "memory_total_bytes_low": (r["memory"].get("total_bytes_interval") or [None, None])[0],
            "memory_total_bytes_high": (r["memory"].get("total_bytes_interval") or [None, None])[1],
            "prefill_bound": r["prefill"]["bound"],
            "decode_bound": r["decode"]["bound"],
        }
        for r in rows
    ]
    return save_figure(fig, out, "predict_latency", csv)


def memory_figure(doc: dict[str, Any], out: Path) -> list[Path]:
    """Memory per GPU against context length, stacked by part, with the device's capacity."""
    pts = doc["memory_by_context"]
    xs = [p["context_tokens"] for p in pts]
    parts = (
        ("weights_bytes", "weights", BLUE),
        ("kv_cache_bytes", "KV cache", ORANGE),
        ("activations_bytes", "activations (approx.)", GREEN),
        ("runtime_bytes", "runtime", PURPLE),
    )
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.stackplot(
        xs,
        *[[p[k] / GB for p in pts] for k, _, _ in parts],
        labels=[label for _, label, _ in parts],
        colors=[c for _, _, c in parts],
    )
    band = doc["rows"][0].get("memory_interval")
    csv = [dict(p) for p in pts]
    if band:  # the held-out memory errors' multipliers hold at every length
        for p in csv:
            p["total_gb_low"] = p["total_bytes"] / GB * band["low_factor"]
            p["total_gb_high"] = p["total_bytes"] / GB * band["high_factor"]
        lows, highs = [p["total_gb_low"] for p in csv], [p["total_gb_high"] for p in csv]
        ax.fill_between(xs, lows, highs, color="0.5", alpha=0.18, label="total, 90% interval")
    cap = doc["hardware"].get("memory_bytes")
    tallest = max((p.get("total_gb_high", p["total_bytes"] / GB) for p in csv), default=0.0)
    if cap and cap / GB <= 4 * tallest:
        ax.axhline(cap / GB, color=VERMILLION, linestyle="--", label=f"capacity {cap / GB:.0f} GB")
    elif cap:  # a line far above flattened the stack it is compared with (a small model)
        ax.plot([], [], " ", label=f"capacity {cap / GB:.0f} GB (off the scale)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("memory per GPU (GB)")
    batch = doc["rows"][0]["batch"]
    ax.set_title(f"{_title(doc)}, batch {batch}", fontsize=9)
    # right of the axes: inside, it covered the stack where short contexts sit
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    return save_figure(fig, out, "predict_memory", csv)


def predict_figures(doc: dict[str, Any], out: Path) -> list[Path]:
    """Both figures and their CSVs."""
    return [*latency_figure(doc, out), *memory_figure(doc, out)]
