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
    stack = (doc.get("stack") or {}).get("key")  # predictions stored before stacks have none
    served = f", {stack}" if stack else ""
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
    bars = ax.bar(xs, [r["tpot_ms"] for r in rows], color=BLUE, label="TPOT (ms)")
    for bar, ok in zip(bars, fits, strict=True):
        if not ok:
            bar.set_hatch("//")
            bar.set_alpha(0.4)
    ax.set_xlabel("batch (sequences per replica; hatched: does not fit)")
    ax.set_ylabel("predicted TPOT (ms)")
    ax2 = ax.twinx()
    ax2.plot(
        xs,
        [r["throughput_tok_s"] for r in rows],
        "o-",
        color=ORANGE,
        label="throughput (tokens/s)",
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
            "throughput_tok_s": r["throughput_tok_s"],
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
    cap = doc["hardware"].get("memory_bytes")
    if cap:
        ax.axhline(cap / GB, color=VERMILLION, linestyle="--", label=f"capacity {cap / GB:.0f} GB")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("memory per GPU (GB)")
    batch = doc["rows"][0]["batch"]
    ax.set_title(f"{_title(doc)}, batch {batch}", fontsize=9)
    # right of the axes: inside, it covered the stack where short contexts sit
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    return save_figure(fig, out, "predict_memory", pts)


def predict_figures(doc: dict[str, Any], out: Path) -> list[Path]:
    """Both figures and their CSVs."""
    return [*latency_figure(doc, out), *memory_figure(doc, out)]
