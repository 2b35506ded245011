"""Wall time of the commands people wait on: `--help`, `runs list`, `knobs`, `models`.

Each command runs as a real process (`python -m infermeter ...`) `--repeats` times, the
commands interleaved round by round, against a store holding `--runs` finished runs. Printed
per command: the median wall time with its 95% interval, against the goal of 0.3 s; then, for
scale, a bare `python -c pass`, `import typer`, and the floor under `runs list` (SQLAlchemy's
ORM, typer and rich imported, nothing run: on this machine 0.29-0.31 s, so `runs list` through
the ORM cannot reach the goal); then a JSON line.

    python benchmarks/cli_latency.py --repeats 10
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infermeter.measure.stats import summarize

GOAL_S = 0.3


def _store_with_runs(path: Path, n: int) -> None:
    from infermeter import RunConfig, Store, load_model, profile

    lm = load_model("tiny-llama", device="cpu")
    store = Store(path)
    config = RunConfig(model="tiny-llama", prompt_tokens=16, new_tokens=4, samples=3, energy="off")
    for _ in range(n):
        profile(config, loaded=lm, sink=store)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--runs", type=int, default=20, help="finished runs in the listed store")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "runs.db"
        _store_with_runs(db, args.runs)
        env = {**os.environ, "INFERMETER_HOME": tmp}
        py = [sys.executable]
        commands = {
            "--help": [*py, "-m", "infermeter", "--help"],
            "runs list": [*py, "-m", "infermeter", "runs", "list", "--db", str(db)],
            "knobs": [*py, "-m", "infermeter", "knobs"],
            "models": [*py, "-m", "infermeter", "models"],
            "(python -c pass)": [*py, "-c", "pass"],
            "(import typer)": [*py, "-c", "import typer"],
            # the floor under `runs list`: the store's ORM, the CLI and the table, imported
            "(import sqlalchemy.orm, typer, rich)": [
                *py,
                "-c",
                "import sqlalchemy.orm, typer, rich.console, rich.table",
            ],
        }
        times: dict[str, list[float]] = {k: [] for k in commands}
        for _ in range(args.repeats):
            for name, cmd in commands.items():
                t0 = time.perf_counter()
                r = subprocess.run(cmd, env=env, capture_output=True, text=True)
                times[name].append(time.perf_counter() - t0)
                if r.returncode != 0:
                    raise SystemExit(f"{name} failed: {r.stderr[-500:]}")
    out = {}
    for name, values in times.items():
        s = summarize(values)
        goal = "" if name.startswith("(") else ("  ok" if s.median <= GOAL_S else "  MISSED")
        print(
            f"{name:18} median {s.median:.3f} s "
            f"[{s.median_ci95_low:.3f}-{s.median_ci95_high:.3f}]{goal}"
        )
        out[name] = {"median_s": s.median, "ci95": [s.median_ci95_low, s.median_ci95_high]}
    print(json.dumps({"goal_s": GOAL_S, "repeats": args.repeats, "commands": out}))


if __name__ == "__main__":
    main()
