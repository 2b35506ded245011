"""Cost of streaming decode steps to the live page (run/live_steps.py) on TPOT and slow steps.

Profiles of one configuration alternate, in rounds, between the step watcher on (a real
SQLite store keeps progress, so every sample's steps are written from a thread every 0.5 s) and
off (the watcher replaced by nothing; the same store otherwise). Printed: the paired ratio of
median TPOT (on / off) with its 95% interval and verdict, the p99 inter-token latency of each
way, and the number of progress writes; then a JSON line.

    python benchmarks/live_steps.py --rounds 8
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

import numpy as np

from infermeter import RunConfig, Store, load_model, profile
from infermeter.measure.stats import compare_paired_samples

PROFILE = sys.modules["infermeter.run.profiling"]


class CountingStore(Store):
    """A real store that counts progress writes made while a sample generates."""

    writes = 0

    def progress(self, key: str, state: dict | None) -> None:  # type: ignore[override]
        """Count, then write as the store does."""
        if state and state.get("steps"):
            CountingStore.writes += 1
        super().progress(key, state)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=200)
    args = ap.parse_args(argv)
    lm = load_model(args.model, device="cpu")
    config = RunConfig(
        model=args.model, prompt_tokens=64, new_tokens=args.new_tokens, samples=3, energy="off"
    )
    real_watch = PROFILE._step_watch
    tpot: dict[str, list[float]] = {"on": [], "off": []}
    steps: dict[str, list[float]] = {"on": [], "off": []}
    with tempfile.TemporaryDirectory() as tmp:
        store = CountingStore(Path(tmp) / "live.db")
        profile(config, loaded=lm, sink=store)  # warm everything up once
        CountingStore.writes = 0
        for r in range(args.rounds):
            order = ("on", "off") if r % 2 == 0 else ("off", "on")
            for way in order:
                PROFILE._step_watch = real_watch if way == "on" else (lambda s: None)
                try:
                    run = profile(config, loaded=lm, sink=store)
                finally:
                    PROFILE._step_watch = real_watch
                tpot[way].append(run.summary()["tpot_ms"].median)
                steps[way].extend(x for s in run.measured for x in s.step_ms)
            print(f"round {r + 1}: TPOT on {tpot['on'][-1]:.3f} off {tpot['off'][-1]:.3f} ms")
    c = compare_paired_samples(tpot["off"], tpot["on"])  # above 1: "on" is faster
    cost = 1 / c["speedup"] if c["speedup"] else None
    lo, hi = (1 / c["ci95_high"], 1 / c["ci95_low"]) if c["ci95_low"] else (None, None)
    p99 = {w: float(np.percentile(v, 99)) for w, v in steps.items()}
    print(
        f"TPOT with streaming / without: {cost:.4f}x [{lo:.4f}-{hi:.4f}] ({c['verdict']}); "
        f"p99 step on {p99['on']:.2f} ms, off {p99['off']:.2f} ms; "
        f"{CountingStore.writes} step writes"
    )
    print(
        json.dumps(
            {
                "tpot_ratio_on_off": cost,
                "ci95": [lo, hi],
                "verdict": c["verdict"],
                "p99_step_ms": p99,
                "step_writes": CountingStore.writes,
                "rounds": args.rounds,
            }
        )
    )


if __name__ == "__main__":
    main()
