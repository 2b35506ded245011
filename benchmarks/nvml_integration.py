"""NVML's energy counter against integrated power draw, on the same windows (issue 21).

Volta and newer GPUs count energy in hardware (`nvmlDeviceGetTotalEnergyConsumption`); older
ones, and some drivers, only report power, which infermeter then integrates (trapezoid rule
over the sampler's readings). This checks the second against the first on one GPU: for each
window (one greedy generate call of a model on cuda:0), the counter's joules and the joules of
power integrated at the sampler's interval, read at the same edges. Printed: per-window
difference, its median and largest, J per generated token, and a JSON line. Goal: median
|difference| within 3%.

    python benchmarks/nvml_integration.py --model llama-3.2-1b --windows 10 --interval-ms 20

Without CUDA or NVML it prints one line saying why and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infermeter.measure.energy.sampler import PowerSampler

GOAL_PCT = 3.0


def compare_windows(
    counter: Any,
    integrated: Any,
    work: Callable[[], int],
    windows: int,
    interval_ms: float,
) -> list[dict[str, float]]:
    """Run `work` (returns tokens generated) `windows` times; each window's joules both ways.

    `counter` and `integrated` are NVML sources over the same GPUs, one reading the energy
    counter, one integrating power; the sampler polls the integrating one while `work` runs,
    and both are read at the window's edges.
    """
    rows = []
    for w in range(windows):
        c0, i0 = sum(counter.read_j().values()), sum(integrated.read_j().values())
        with PowerSampler(integrated, interval_ms):
            tokens = work()
        c1, i1 = sum(counter.read_j().values()), sum(integrated.read_j().values())
        c_j, i_j = c1 - c0, i1 - i0
        rows.append(
            {
                "window": w,
                "counter_j": c_j,
                "integrated_j": i_j,
                "tokens": tokens,
                "diff_pct": 100 * (i_j - c_j) / c_j if c_j > 0 else float("nan"),
            }
        )
    return rows


def summarise(rows: list[dict[str, float]]) -> dict[str, Any]:
    """Median and largest |difference|, J per token by the counter, and the verdict."""
    diffs = [abs(r["diff_pct"]) for r in rows if r["diff_pct"] == r["diff_pct"]]
    tokens = sum(r["tokens"] for r in rows)
    median = statistics.median(diffs) if diffs else None
    signed = statistics.median([r["diff_pct"] for r in rows]) if rows else None
    return {
        "windows": len(rows),
        "median_abs_diff_pct": median,
        "max_abs_diff_pct": max(diffs) if diffs else None,
        "signed_median_diff_pct": signed,
        "j_per_token": sum(r["counter_j"] for r in rows) / tokens if tokens else None,
        "goal_pct": GOAL_PCT,
        "ok": median is not None and median <= GOAL_PCT,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3.2-1b")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--windows", type=int, default=10)
    ap.add_argument("--interval-ms", type=float, default=20.0)
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print(f"nvml_integration: nothing ran: torch {torch.__version__} sees no CUDA device")
        return 0
    from infermeter.measure.energy.nvml import NvmlSource

    try:
        counter, integrated = NvmlSource(visible="0"), NvmlSource(visible="0", integrate=True)
    except Exception as exc:  # no NVML: say so and stop
        print(f"nvml_integration: nothing ran: NVML unavailable ({exc})")
        return 0
    if counter.method != "counter":
        print("nvml_integration: nothing ran: this GPU has no energy counter to check against")
        return 0
    from infermeter.models import load_model
    from infermeter.run.generation import generation_config
    from infermeter.workloads import WorkloadSpec, build_batches

    lm = load_model(args.model, device="cuda", dtype="bfloat16")
    spec = WorkloadSpec(batch_size=args.batch_size, prompt_tokens=args.prompt_tokens, chat=False)
    (batch,) = build_batches(lm.tokenizer, spec, 1)
    kw = batch.generate_kwargs("cuda", next(lm.model.parameters()).dtype)
    gen = generation_config(lm.tokenizer, args.new_tokens)

    def work() -> int:
        with torch.inference_mode():
            out = lm.model.generate(**kw, generation_config=gen)
        torch.cuda.synchronize()
        return int((out.shape[1] - kw["input_ids"].shape[1]) * out.shape[0])

    work()  # warm-up
    rows = compare_windows(counter, integrated, work, args.windows, args.interval_ms)
    result = summarise(rows) | {
        "model": args.model,
        "interval_ms": args.interval_ms,
        "gpu": torch.cuda.get_device_name(0),
    }
    for r in rows:
        print(
            f"window {r['window']}: counter {r['counter_j']:.2f} J, integrated "
            f"{r['integrated_j']:.2f} J ({r['diff_pct']:+.2f}%)"
        )
    verdict = "met" if result["ok"] else "NOT met"
    print(
        f"median |difference| {result['median_abs_diff_pct']:.2f}% (largest "
        f"{result['max_abs_diff_pct']:.2f}%), goal within {GOAL_PCT}%: {verdict}; "
        f"{result['j_per_token']:.3f} J/token"
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
