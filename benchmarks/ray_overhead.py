"""A 16-point sweep on tiny-llama: local Ray with 2 workers against the in-process sweep.

Both run the same grid (4 prompt lengths x 4 new-token counts, fresh SQLite store each) in one
sitting, Ray second. Printed per way: total wall time (Ray's includes starting the instance,
the check task and each worker's model load), time in generate calls (summed over workers), and
the time outside model calls as wall - generate / workers for Ray (the critical path, assuming
the two workers overlap fully) and wall - generate in-process; then ratios Ray / in-process,
and a JSON line. On 2 cores two workers share the cores the in-process sweep has alone, so
this measures what Ray costs, not a speedup: across machines each point gets its own.

    python benchmarks/ray_overhead.py [--samples 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infermeter import RunConfig, Store
from infermeter.experiments.ray_sweep import RayPlacement, run_sweep_on_ray
from infermeter.run.sweep import SweepSpec, run_sweep

GRID = {"prompt_tokens": ["16", "32", "64", "128"], "new_tokens": ["8", "12", "16", "24"]}
WORKERS = 2


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=3)
    args = ap.parse_args(argv)
    base = RunConfig(model="tiny-llama", samples=args.samples, warmup=1, energy="off")
    spec = SweepSpec(base, GRID)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        local = run_sweep(spec, Store(Path(tmp) / "in.db"))
        wall = time.perf_counter() - t0  # includes the model load, as Ray's does
        out["in_process"] = {
            "wall_s": wall,
            "generate_s": local.generate_s,
            "outside_s": wall - local.generate_s,
        }
        t0 = time.perf_counter()
        remote = run_sweep_on_ray(
            spec, Store(Path(tmp) / "ray.db"), RayPlacement(local_cpus=WORKERS)
        )
        wall = time.perf_counter() - t0
        out["ray"] = {
            "wall_s": wall,
            "generate_s": remote.generate_s,
            "outside_s": wall - remote.generate_s / WORKERS,
        }
        assert len(remote.runs) == len(local.runs) == 16
    for way, v in out.items():
        print(
            f"{way:10s} wall {v['wall_s']:6.1f} s  generate {v['generate_s']:6.1f} s  "
            f"outside model calls {v['outside_s']:6.1f} s"
        )
    ratios = {
        "wall_ray_over_in_process": out["ray"]["wall_s"] / out["in_process"]["wall_s"],
        "outside_ray_over_in_process": out["ray"]["outside_s"] / out["in_process"]["outside_s"],
        "generate_ray_over_in_process": out["ray"]["generate_s"] / out["in_process"]["generate_s"],
    }
    for k, v in ratios.items():
        print(f"{k:32s} {v:.2f}x")
    print(json.dumps({**out, **ratios}))


if __name__ == "__main__":
    main()
