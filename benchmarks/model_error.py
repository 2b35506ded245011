"""How well does the fitted latency model predict configurations it was not fitted on?

For each model a sweep runs (tiny-qwen3-moe: prompt tokens x MoE top-k; smollm2-135m, dense:
prompt tokens), the latency model (analysis/perfmodel.py: a x FLOPs + b x bytes + c per phase)
is fitted on every other configuration, and predicts the rest. Printed per model and phase: the
fitted coefficients, each held-out point's predicted and measured time with its error, and the
median and max absolute error. Goal: median <= 5% on held-out points.

    python benchmarks/model_error.py [--samples 3]
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
from infermeter.analysis.perfmodel import alternate, check_on_sweep
from infermeter.run.sweep import SweepSpec, run_sweep

SWEEPS = {
    "tiny-qwen3-moe": {"top_k": ["1", "2", "4", "8"], "prompt_tokens": ["32", "96", "192", "384"]},
    "smollm2-135m": {"prompt_tokens": ["32", "64", "128", "256", "384", "512"]},
}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=16)
    args = ap.parse_args(argv)
    out = {}
    for model, grid in SWEEPS.items():
        lm = load_model(model, device="cpu")
        with tempfile.TemporaryDirectory() as tmp:
            base = RunConfig(
                model=model,
                samples=args.samples,
                warmup=1,
                energy="off",
                new_tokens=args.new_tokens,
            )
            result = run_sweep(SweepSpec(base, grid), Store(Path(tmp) / "s.db"), loaded=lm)
        runs = result.runs
        checks = check_on_sweep(runs, alternate(len(runs)))
        out[model] = {}
        for phase, chk in checks.items():
            s = chk.error_summary()
            coef = ", ".join(f"{k}={v:.3g}" for k, v in chk.model.coef.items())
            print(
                f"\n{model} {phase}: fitted on {len(runs) - s['held_out']} of {len(runs)} "
                f"configurations ({coef})"
            )
            for p in chk.held_out:
                knobs = {k: p["config"][k] for k in grid}
                print(
                    f"  {json.dumps(knobs):45} predicted {p['predicted_ms']:9.2f} ms  "
                    f"measured {p['measured_ms']:9.2f} ms  error {p['error_pct']:+6.1f}%"
                )
            print(
                f"  held-out median |error| {s['median_abs_error_pct']:.1f}%, "
                f"max {s['max_abs_error_pct']:.1f}%"
            )
            out[model][phase] = s
    worst = max(v["median_abs_error_pct"] for m in out.values() for v in m.values())
    print(
        f"\ngoal median held-out error <= 5%: {'met' if worst <= 5 else 'NOT met'} "
        f"(worst median {worst:.1f}%)"
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
