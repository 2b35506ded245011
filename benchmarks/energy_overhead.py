"""What does the power sampler cost? TPOT with the sampler running vs without, on smollm2-135m.

Variants run interleaved in a rotating order each round (batch 1, 128 prompt tokens, 64 new
tokens, greedy), each after `gc.collect()` as `infermeter profile` does:
  off        no sampler
  off-again  no sampler again: the A/A ratio is this machine's noise floor
  100ms      the sampler thread reading a RAPL source every 100 ms (the default)
  10ms       the same at the 10 ms minimum (the worst case)
This machine has no RAPL, so the source reads a fake powercap tree in a temp folder: the same
code path and file reads as /sys/class/powercap (sysfs reads cost about the same). Printed: the
median per-round TPOT and TTFT ratio to `off` with a bootstrap 95% interval, the cost of one
read, and a JSON line. Goal: TPOT ratio at 100 ms <= 1.005.

    python benchmarks/energy_overhead.py --rounds 20
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infermeter.measure.clock import clock_for
from infermeter.measure.energy.rapl import RaplSource
from infermeter.measure.energy.sampler import PowerSampler
from infermeter.measure.stats import bootstrap_median_ci
from infermeter.models import load_model
from infermeter.run.generation import generation_config, timed_generate
from infermeter.workloads import WorkloadSpec, build_batches

VARIANTS = ("off", "off-again", "100ms", "10ms")


def fake_powercap(root: Path) -> Path:
    """Two packages with DRAM, like a dual-socket server: four counters per read."""
    for pkg in (0, 1):
        for path, name in (
            (root / f"intel-rapl:{pkg}", f"package-{pkg}"),
            (root / f"intel-rapl:{pkg}" / f"intel-rapl:{pkg}:0", "dram"),
        ):
            path.mkdir(parents=True)
            (path / "name").write_text(name + "\n")
            (path / "max_energy_range_uj").write_text("262143328850\n")
            (path / "energy_uj").write_text("123456789\n")
    return root


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args(argv)

    lm = load_model(args.model, device="cpu")
    (batch,) = build_batches(lm.tokenizer, WorkloadSpec(prompt_tokens=args.prompt_tokens), 1)
    kw = batch.generate_kwargs("cpu", next(lm.model.parameters()).dtype)
    gen_cfg = generation_config(lm.tokenizer, args.new_tokens)
    clock = clock_for("cpu")
    tmp = tempfile.TemporaryDirectory()
    root = fake_powercap(Path(tmp.name) / "powercap")
    data: dict[str, dict[str, list[float]]] = {v: {"ttft": [], "tpot": []} for v in VARIANTS}
    readings: dict[str, list[int]] = {v: [] for v in VARIANTS}

    def one(variant: str, record: bool) -> None:
        sampler = None
        if variant.endswith("ms"):
            sampler = PowerSampler(RaplSource(root), interval_ms=float(variant[:-2]))
        gc.collect()
        with sampler if sampler is not None else contextlib.nullcontext():
            timed = timed_generate(lm.model, kw, gen_cfg, clock, args.new_tokens)
        if not record:
            return
        ttft, steps = timed.durations(clock)
        data[variant]["ttft"].append(ttft)
        data[variant]["tpot"].append(sum(steps) / len(steps))
        if sampler is not None:
            readings[variant].append(len(sampler.trace()))

    for v in VARIANTS:
        one(v, record=False)
    for r in range(args.rounds):
        order = VARIANTS[r % len(VARIANTS) :] + VARIANTS[: r % len(VARIANTS)]
        for v in order:
            one(v, record=True)

    src = RaplSource(root)
    t0 = time.perf_counter()
    for _ in range(2000):
        src.read_j()
    read_us = (time.perf_counter() - t0) / 2000 * 1e6

    base = data["off"]
    print(
        f"{args.model}: batch 1, {args.prompt_tokens} prompt + {args.new_tokens} new tokens, "
        f"{args.rounds} interleaved rounds; baseline TTFT {statistics.median(base['ttft']):.1f} "
        f"ms, TPOT {statistics.median(base['tpot']):.2f} ms"
    )
    print(f"{'variant':10} {'TPOT ratio (95% CI)':>26} {'TTFT ratio (95% CI)':>26} {'reads':>6}")
    result: dict[str, Any] = {"model": args.model, "rounds": args.rounds, "read_us": read_us}
    for v in VARIANTS:
        row = {}
        for metric in ("tpot", "ttft"):
            rs = [a / b for a, b in zip(data[v][metric], base[metric], strict=True)]
            row[metric] = (statistics.median(rs), *bootstrap_median_ci(rs))
        n = statistics.median(readings[v]) if readings[v] else 0
        a, b = row["tpot"], row["ttft"]
        print(
            f"{v:10} {a[0]:8.4f} ({a[1]:.4f}-{a[2]:.4f})   {b[0]:8.4f} ({b[1]:.4f}-{b[2]:.4f})"
            f" {n:6.0f}"
        )
        result[v] = {"tpot": a[0], "tpot_ci": a[1:], "ttft": b[0]}
    print(f"one read of 4 RAPL counters: {read_us:.1f} us")
    goal = result["100ms"]["tpot"] <= 1.005
    print(f"goal TPOT ratio at 100 ms <= 1.005: {'met' if goal else 'NOT met'}")
    print(json.dumps(result))
    tmp.cleanup()


if __name__ == "__main__":
    main()
