"""How much of a CPU decode step is page faults, and what the allocator fix saves.

transformers' dynamic KV cache grows by `torch.cat` each step; glibc's malloc maps a block above
its mmap threshold (adaptive, at most 32 MiB) afresh from the kernel, so a growing per-layer
cache faults in every page of itself every step (src/infermeter/measure/faults.py). This runs
decode steps of tiny-llama over a cache pre-filled to each size per layer (K and V each, 4
layers), each size in a fresh process, once with glibc's defaults and once with the fix
`infermeter` advises (MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_), and prints per size: ms
a step and faults a step on the process's first request and on a warm one, the warm faults'
milliseconds (at the fault cost measured here) against what `predict` charges for them, and
the speed-up of the fix, all measured in this one run.

    python benchmarks/page_faults.py [--steps 8] [--sizes 8,24,48]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

FIX = {"MALLOC_MMAP_THRESHOLD_": "4294967296", "MALLOC_TRIM_THRESHOLD_": "68719476736"}
BATCH = 16


def child(mib: int, steps: int) -> dict[str, dict[str, float]]:
    """Decode steps over a cache of `mib` MiB per layer tensor, in this (fresh) process.

    Twice: the process's first such request, then a second one after the first's cache was
    freed (what `profile` measures after its warm-up, and a server after its first request):
    glibc raises its mmap threshold to the largest mapped block freed, up to 32 MiB.
    """
    import torch
    from transformers import DynamicCache

    from infermeter import load_model
    from infermeter.measure.faults import measure_fault_seconds, minor_faults
    from infermeter.models.forward_args import with_cache

    model = load_model("tiny-llama", device="cpu").model
    cfg = model.config
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    positions = mib * 2**20 // (BATCH * cfg.num_key_value_heads * head_dim * 4)
    ids = torch.randint(5, 200, (BATCH, 1))
    out: dict[str, dict[str, float]] = {}
    for request in ("first", "warm"):
        cache = DynamicCache(config=cfg)
        for layer in range(cfg.num_hidden_layers):
            k = torch.randn(BATCH, cfg.num_key_value_heads, positions, head_dim)
            cache.update(k, torch.randn_like(k), layer)
        times, counts = [], []
        with torch.inference_mode():
            for _ in range(steps + 1):
                f0, t0 = minor_faults() or 0, time.perf_counter()
                model(input_ids=ids, **with_cache(model, cache, use_cache=True))
                times.append(time.perf_counter() - t0)
                counts.append((minor_faults() or 0) - f0)
        del cache
        out[request] = {
            "step_ms": statistics.median(times[1:]) * 1e3,
            "faults": statistics.median(counts[1:]),
        }
    out["fault"] = {"us": (measure_fault_seconds() or 0.0) * 1e6}
    return out


def run_child(mib: int, steps: int, fixed: bool) -> dict[str, dict[str, float]]:
    """`child` in a fresh interpreter (the allocator's state and settings are per process)."""
    env = {k: v for k, v in os.environ.items() if k not in FIX}
    if fixed:
        env.update(FIX)
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(mib), "--steps", str(steps)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def predicted_fault_ms(mib: int, fault_us: float) -> float:
    """What the time model charges a default-malloc step for faults at this size.

    timemodel.fault_pages_per_step over 4 layers' keys and values grown one position past
    `mib`, at glibc's default ceiling (this script's runs without the fix).
    """
    from infermeter.analysis.timemodel import fault_pages_per_step
    from infermeter.measure.faults import GLIBC_MMAP_THRESHOLD_MAX_BYTES, mmap_threshold_bytes

    threshold = GLIBC_MMAP_THRESHOLD_MAX_BYTES if mmap_threshold_bytes() else None
    pages = fault_pages_per_step(mib * 2**20 * (1 + 1e-4), 8, threshold)
    return pages * fault_us / 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--sizes", default="8,24,48", help="MiB per layer's K (and V) tensor")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.steps)))
        return 0
    print(
        f"{'MiB/layer':>9} | {'first request: ms':>17} {'faults':>7} | {'warm: ms':>8} "
        f"{'faults':>7} {'in faults':>9} {'predicted':>9} | {'fixed: ms':>9} {'faults':>6} "
        f"{'speed-up':>8}"
    )
    for mib in (int(x) for x in args.sizes.split(",")):
        d = run_child(mib, args.steps, fixed=False)
        f = run_child(mib, args.steps, fixed=True)
        first, warm, fix, us = d["first"], d["warm"], f["warm"], d["fault"]["us"]
        print(
            f"{mib:>9} | {first['step_ms']:>17.1f} {first['faults']:>7.0f} | "
            f"{warm['step_ms']:>8.1f} {warm['faults']:>7.0f} "
            f"{warm['faults'] * us / 1e3:>7.1f}ms {predicted_fault_ms(mib, us):>7.1f}ms | "
            f"{fix['step_ms']:>9.1f} {fix['faults']:>6.0f} "
            f"{warm['step_ms'] / fix['step_ms']:>7.2f}x",
            flush=True,
        )
    print(
        f"batch {BATCH}, tiny-llama: 4 layers x keys and values; one fault {us:.2f} us; "
        "'warm': after a first request's cache was freed; 'fixed': with "
        + " ".join(f"{k}={v}" for k, v in FIX.items())
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
