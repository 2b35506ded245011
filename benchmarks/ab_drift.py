"""A/A test: how often compare claims a difference between two runs of ONE configuration.

Each trial measures the same configuration twice, two ways, on one loaded model:
- sequential: `profile` run A, then run B, compared unpaired (ratio of medians, Mann-Whitney);
- interleaved: `profile_interleaved` with A and B as arms (one sample each per round, order
  reversed every round), compared paired (median of per-round ratios, Wilcoxon).
Any verdict other than "no detectable difference" on the total is a false claim. With
`--neighbour` a CPU-bound process starts halfway through each way's measurement (a neighbour
arriving on a shared machine): the sequential B runs beside it, A does not; in the interleaved
way both arms meet it alike. Prints the false claims of each way and the total speedups seen,
then a JSON line.

    python benchmarks/ab_drift.py --trials 6 --neighbour
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infermeter import RunConfig, load_model, profile
from infermeter.analysis.compare import compare_runs
from infermeter.run.interleave import Arm, profile_interleaved

BURN = "import time\nt = time.time()\nwhile time.time() - t < {s}: pass\n"


class Neighbour:
    """A CPU-bound process started after `delay_s`, for `length_s`."""

    def __init__(self, delay_s: float, length_s: float) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        code = BURN.format(s=length_s)
        self.timer = threading.Timer(
            delay_s, lambda: setattr(self, "proc", subprocess.Popen([sys.executable, "-c", code]))
        )

    def __enter__(self) -> Neighbour:
        self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.timer.cancel()
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def _one_run_s(config: RunConfig, lm: object) -> float:
    run = profile(config, loaded=lm)
    return sum(s.total_ms for s in run.samples) / 1e3


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--samples", type=int, default=12)
    ap.add_argument("--trials", type=int, default=6)
    ap.add_argument("--neighbour", action="store_true", help="a CPU hog arrives halfway")
    args = ap.parse_args(argv)
    lm = load_model(args.model, device="cpu")
    config = RunConfig(
        model=args.model, prompt_tokens=64, new_tokens=16, samples=args.samples, energy="off"
    )
    one_run_s = _one_run_s(config, lm)  # also warms the model up
    ways: dict[str, list[dict[str, object]]] = {"sequential": [], "interleaved": []}
    for trial in range(args.trials):
        for way in ways:
            # halfway through the two runs' measurement; the neighbour stays to the end
            hog = Neighbour(one_run_s, 3 * one_run_s) if args.neighbour else None
            with hog or contextlib.nullcontext():
                if way == "sequential":
                    a, b = profile(config, loaded=lm), profile(config, loaded=lm)
                else:
                    arms = [Arm(config, {"arm": "A"}), Arm(config, {"arm": "B"})]
                    a, b = profile_interleaved(arms, lm)
            doc = compare_runs(a, b)
            whole = doc["total"]
            ways[way].append(
                {
                    "speedup": round(doc["total_speedup"], 3),
                    "ci95": [round(whole["ci95_low"], 3), round(whole["ci95_high"], 3)],
                    "verdict": doc["total_verdict"],
                }
            )
            print(f"trial {trial + 1} {way:11} {ways[way][-1]}", flush=True)
    out = {"model": args.model, "samples": args.samples, "neighbour": args.neighbour}
    for way, rows in ways.items():
        claims = sum(r["verdict"] != "no detectable difference" for r in rows)
        print(f"{way:11}: false claims {claims} of {len(rows)}")
        out[way] = {"false_claims": claims, "trials": len(rows), "rows": rows}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
