"""Share of a sweep's wall time spent outside model calls (goal <= 2%).

A sweep on a tiny preset (loaded once, before timing starts) runs a grid of points; each point
is a stored run with warm-up and measured generate calls, knob verification, and the writes of
its samples to a real SQLite file. "Model calls" are the generate calls (warm-up included: they
are work the user asked for); everything else (building prompts, knob application and their
verification forwards, the store, progress) is overhead. Printed per grid: wall time, time in
generate calls, and the share outside them; then a JSON line.

    python benchmarks/sweep_overhead.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infermeter import RunConfig, Store, load_model
from infermeter.run.sweep import SweepSpec, run_sweep

GRIDS = {
    "tiny-llama": {"prompt_tokens": ["32", "64", "128"], "new_tokens": ["16", "32"]},
    "tiny-qwen3-moe": {"top_k": ["1", "2", "4"], "prompt_tokens": ["32", "128"]},
}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=5)
    args = ap.parse_args(argv)
    out = {}
    for model, grid in GRIDS.items():
        lm = load_model(model, device="cpu")
        with tempfile.TemporaryDirectory() as tmp:
            store = Store(Path(tmp) / "sweep.db")
            base = RunConfig(
                model=model, samples=args.samples, warmup=1, energy="off", new_tokens=16
            )
            result = run_sweep(SweepSpec(base, grid), store, loaded=lm)
        model_s = result.generate_s + result.verify_s
        share = 1 - model_s / result.wall_s
        points = len(result.runs)
        print(
            f"{model}: {points} points x {args.samples + 1} generate calls; wall "
            f"{result.wall_s:.2f} s, generate calls {result.generate_s:.2f} s, knob "
            f"verification forwards {result.verify_s:.3f} s; outside model calls {share:.1%} "
            f"({(result.wall_s - model_s) / points * 1e3:.0f} ms/point)"
        )
        out[model] = {
            "wall_s": result.wall_s,
            "generate_s": result.generate_s,
            "verify_s": result.verify_s,
            "outside_share": share,
            "points": points,
        }
    worst = max(v["outside_share"] for v in out.values())
    print(f"goal outside share <= 2%: {'met' if worst <= 0.02 else 'NOT met'} (worst {worst:.1%})")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
