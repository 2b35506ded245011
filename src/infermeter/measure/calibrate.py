"""`infermeter calibrate`: measure what this device attains, as `Ceilings`.

Square matmuls per dtype for FLOP/s and a large tensor copy for bandwidth, each in ROUNDS timed
rounds; the device is synchronised around every timed region, so the clock sees finished work.
The ceiling is the best round (what the device attains; noise only slows a round), and every
round is kept with the median's interval (`details["rounds"]`), so a calibration made while the
machine was busy shows as a wide spread and `measure/stability.py` can say so.
"""

from __future__ import annotations

import time
from typing import Any

from infermeter.measure.ceilings import Ceilings
from infermeter.measure.device import describe_device
from infermeter.measure.stability import figure_of


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


#: timed rounds per ceiling: enough for the median's interval and a spread that means something
ROUNDS = 7
#: work before the first timed round: clocks ramp up and pages are touched (measured here:
#: without it, 7 rounds of 2-4 ms rose steadily from 266 to 420 GFLOP/s and 23 to 39 GB/s)
WARMUP_S = 0.25
#: the shortest timed round: long enough for the clock and a frequency change to average out
ROUND_S = 0.025


def _rounds(call: Any, device: Any, work: float, rounds: int) -> list[float]:
    """`work` units per call, per second, in each of `rounds` rounds sized to ROUND_S or more."""
    t0 = time.perf_counter()
    calls = 0
    while time.perf_counter() - t0 < WARMUP_S or calls < 2:
        call()
        _sync(device)
        calls += 1
    per_call = (time.perf_counter() - t0) / calls
    inner = max(1, int(ROUND_S / per_call) + 1)
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(inner):
            call()
        _sync(device)
        out.append(work * inner / (time.perf_counter() - t0))
    return out


def matmul_rounds(device: Any, dtype: Any, n: int, rounds: int = ROUNDS) -> list[float]:
    """FLOP/s of each round of n x n x n matmuls on `device` (2 n^3 FLOPs per call)."""
    import torch

    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    return _rounds(lambda: torch.matmul(a, b), device, 2.0 * n**3, rounds)


def bandwidth_rounds(device: Any, megabytes: int, rounds: int = ROUNDS) -> list[float]:
    """Bytes/s of each round's large tensor copies (read + write counted)."""
    import torch

    n = megabytes * 2**20 // 4
    src = torch.empty(n, device=device, dtype=torch.float32).uniform_()
    dst = torch.empty_like(src)
    return _rounds(lambda: dst.copy_(src), device, 2.0 * n * 4, rounds)


def calibrate(device: Any, quick: bool = False) -> Ceilings:
    """Measure this device's attainable matmul FLOP/s per dtype and copy bandwidth."""
    import torch

    desc = describe_device(device)
    gpu = device.type in ("cuda", "mps")
    n = (2048 if quick else 4096) if gpu else (512 if quick else 1024)
    mb = (256 if quick else 1024) if gpu else (64 if quick else 256)
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16}
    if gpu:
        dtypes["float16"] = torch.float16
    rounds: dict[str, list[float]] = {}
    for name, dt in dtypes.items():
        try:
            rounds[f"matmul {name}"] = matmul_rounds(device, dt, n)
        except RuntimeError:  # a dtype the device cannot multiply
            continue
    rounds["copy bandwidth"] = bandwidth_rounds(device, mb)
    figures = {name: figure_of(r) for name, r in rounds.items()}
    return Ceilings(
        device=str(desc.get("name")),
        flop_per_s={
            k.removeprefix("matmul "): f["best"]
            for k, f in figures.items()
            if k.startswith("matmul ")
        },
        bandwidth_bytes_per_s=figures["copy bandwidth"]["best"],
        source=f"measured by infermeter calibrate ({n}^3 matmuls, {mb} MiB copies, best of "
        f"{ROUNDS} rounds)",
        measured=True,
        details={
            "matmul_n": n,
            "copy_mib": mb,
            "torch": torch.__version__,
            "device": desc,
            "rounds": figures,
        },
        memory_bytes=_memory_bytes(device),
        kind="cpu" if device.type == "cpu" else "gpu",
    )


def _memory_bytes(device: Any) -> float:
    """What the device holds: a CUDA device's total memory, else the system's RAM."""
    import psutil
    import torch

    if device.type == "cuda":
        return float(torch.cuda.get_device_properties(device).total_memory)
    return float(psutil.virtual_memory().total)
