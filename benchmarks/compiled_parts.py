"""Where a torch.compile'd forward spends its time, against the eager profile of the same model.

Issue 57, item 3: under `--compile` the standard mode times blocks and parts from the compiled
program's own kernels (instrument/compiled.py) instead of hooks, which would break the graph.
This runs one model three ways, each `profile()` as `infermeter profile` does:
  eager     standard mode, hooks on every block and part
  compiled  standard mode under torch.compile: the kernels charged to the modules they came from
  bare      minimal mode under torch.compile: no instrument, for the recording's cost
and prints, per phase, each part's share of the forward eager and compiled and their difference
in points (fusion makes some differ: a norm fused into its neighbours' kernels costs less), the
share of the compiled forward its kernels account for, and TPOT of each run (compiled / bare is
what the kernel recording cost, beside the run's own estimate; then `--rounds` interleaved
pairs of the two compiled runs for that ratio with its interval). The first compile of each
variant is cold (minutes for smollm2-135m on 2 cores); later runs hit inductor's cache.
The last line is one JSON object.

    python benchmarks/compiled_parts.py
    python benchmarks/compiled_parts.py --model tiny-llama --new-tokens 16
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from dataclasses import replace
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from infermeter.measure.stats import bootstrap_median_ci
from infermeter.models import load_model
from infermeter.run import RunConfig, profile

PARTS = ("embeddings", "rotary", "attention", "mlp", "moe", "norm", "rest of the block")
PARTS_AFTER = ("final_norm", "lm_head", "other")


def shares(run: Any, phase: str) -> dict[str, float]:
    """Each part's % of the phase's forward time, from the run's part table."""
    return {
        r["part"]: float(r["pct_forward"])
        for r in run.layers.get("parts", [])
        if r["phase"] == phase and r["pct_forward"] is not None
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=6, help="interleaved cost rounds (0: none)")
    args = ap.parse_args()
    loaded = load_model(args.model, device="cpu")
    base = RunConfig(
        model=args.model,
        prompt_tokens=args.prompt_tokens,
        new_tokens=args.new_tokens,
        samples=args.samples,
        warmup=1,
    )
    runs = {
        "eager": profile(replace(base, mode="standard"), loaded=loaded),
        "compiled": profile(replace(base, mode="standard", compile=True), loaded=loaded),
        "bare": profile(replace(base, mode="minimal", compile=True), loaded=loaded),
    }
    out: dict[str, Any] = {"model": args.model, "phases": {}}
    for phase in ("prefill", "decode"):
        eager, comp = shares(runs["eager"], phase), shares(runs["compiled"], phase)
        print(f"\n{phase}: % of the forward      eager  compiled  difference (points)")
        rows = {}
        for part in (*PARTS, "block", *PARTS_AFTER):
            if part not in eager and part not in comp:
                continue
            e, c = eager.get(part, 0.0), comp.get(part, 0.0)
            rows[part] = {"eager": e, "compiled": c, "points": c - e}
            print(f"  {part:<22} {e:>10.1f} {c:>9.1f} {c - e:>+11.1f}")
        out["phases"][phase] = rows
    notes = [n for n in runs["compiled"].notes if n.startswith("under torch.compile,")]
    for n in notes:
        print(n)
    tpot = {k: r.summary()["tpot_ms"].p50 for k, r in runs.items()}
    cost = runs["compiled"].instrument_cost
    print(
        f"\nTPOT ms, one run each: eager standard {tpot['eager']:.2f}, compiled standard "
        f"{tpot['compiled']:.2f}, compiled bare {tpot['bare']:.2f}"
    )
    print(f"the compiled run's own estimate: {cost.line() if cost else 'none'}")
    # the recording's cost: compiled standard against compiled bare, interleaved rounds
    ratios = []
    for _ in range(args.rounds):
        pair = {
            mode: profile(replace(base, mode=mode, compile=True), loaded=loaded)
            for mode in ("standard", "minimal")
        }
        med = {m: r.summary()["tpot_ms"].p50 for m, r in pair.items()}
        ratios.append(med["standard"] / med["minimal"])
    if ratios:
        lo, hi = bootstrap_median_ci(ratios)
        print(
            f"TPOT compiled standard / bare over {len(ratios)} interleaved rounds: median "
            f"{statistics.median(ratios):.3f} (95% CI {lo:.3f}-{hi:.3f}); each round "
            + " ".join(f"{r:.3f}" for r in ratios)
        )
        out["tpot_ratio_rounds"] = ratios
    out["tpot_ms"] = tpot
    out["attribution_notes"] = notes
    print(json.dumps(out))


if __name__ == "__main__":
    main()
