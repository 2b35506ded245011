"""`infermeter calibrate`: measure what this device attains, as `Ceilings`.

Best-of-N square matmuls per dtype for FLOP/s and a large tensor copy for bandwidth; the device
is synchronised around every timed region, so the clock sees finished work.
"""

from __future__ import annotations

import time
from typing import Any

from infermeter.measure.ceilings import Ceilings
from infermeter.measure.device import describe_device


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def measure_matmul(device: Any, dtype: Any, n: int, repeats: int = 5) -> float:
    """Best FLOP/s of an n x n x n matmul on `device` (2 n^3 FLOPs per call)."""
    import torch

    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    torch.matmul(a, b)  # warm-up: kernels chosen, caches filled
    _sync(device)
    best = float("inf")
    inner = 3
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            torch.matmul(a, b)
        _sync(device)
        best = min(best, (time.perf_counter() - t0) / inner)
    return 2 * n**3 / best


def measure_bandwidth(device: Any, megabytes: int, repeats: int = 5) -> float:
    """Best bytes/s of a large tensor copy (read + write counted)."""
    import torch

    n = megabytes * 2**20 // 4
    src = torch.empty(n, device=device, dtype=torch.float32).uniform_()
    dst = torch.empty_like(src)
    dst.copy_(src)
    _sync(device)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        dst.copy_(src)
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n * 4 / best


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
    flop_per_s = {}
    for name, dt in dtypes.items():
        try:
            flop_per_s[name] = measure_matmul(device, dt, n)
        except RuntimeError:  # a dtype the device cannot multiply
            continue
    bw = measure_bandwidth(device, mb)
    return Ceilings(
        device=str(desc.get("name")),
        flop_per_s=flop_per_s,
        bandwidth_bytes_per_s=bw,
        source=f"measured by infermeter calibrate ({n}^3 matmuls, {mb} MiB copies)",
        measured=True,
        details={"matmul_n": n, "copy_mb": mb, "torch": torch.__version__, "device": desc},
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
