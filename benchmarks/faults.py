"""Long fault trials on real processes: SIGKILL at random moments, and concurrent writers.

- 20 trials: a real `infermeter profile` killed with SIGKILL at a random moment, then
  `PRAGMA integrity_check`, the run found `crashed`, every sample committed before the kill
  still there and whole;
- 4 writer processes running profiles for 60 s while the dashboard is read over HTTP: no
  writer fails, no request fails, every sample stored.
Prints each report and a JSON line. (`make test` runs short variants: tests/store/test_faults.py.)

    python benchmarks/faults.py --trials 20 --seconds 60
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.faults_kit import kill_trials, writers_and_reader  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--writers", type=int, default=4)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        kills = kill_trials(  # from start-up to deep into the samples
            Path(tmp), args.trials, seed=7, min_delay_s=0.3, max_delay_s=14.0, samples=40
        )
        print(
            f"SIGKILL: {kills.trials} trials, {kills.killed} killed mid-run, "
            f"{kills.samples_committed} samples committed before a kill, "
            f"{kills.samples_lost} lost; problems: {kills.problems or 'none'}",
            flush=True,
        )
        load = writers_and_reader(Path(tmp), args.writers, args.seconds, samples=3)
        print(
            f"writers: {load.writers} for {args.seconds:g} s, {load.runs} runs, "
            f"{load.samples_stored} of {load.samples_expected} samples stored; dashboard "
            f"{load.requests} requests, {load.failed_requests} failed; "
            f"problems: {load.problems or 'none'}"
        )
    print(json.dumps({"kill": asdict(kills), "writers": asdict(load)}))


if __name__ == "__main__":
    main()
