"""Page faults: how often the process touched memory it had not used before, and what one costs.

Why: on a CPU, transformers' dynamic KV cache is a new, larger tensor every decode step (it
concatenates). glibc's malloc serves a block above its mmap threshold with fresh pages from
the kernel and gives them back when freed; the threshold rises to the largest block freed, up
to 32 MiB, so a cache tensor that keeps growing past it is mapped anew, and every page of it
faults, at every step. On this project's CPU a 48 MiB-per-layer cache spent 63% of its decode
step in those faults (benchmarks/page_faults.py). The count is cheap to read
(`getrusage`), so every sample records it, and `infermeter calibrate` measures what one fault
costs so that the advice and the time model can put it in milliseconds.
"""

from __future__ import annotations

import functools
import mmap
import os
import time
from typing import Any

try:
    import resource
except ImportError:  # Windows: no fault counter
    resource = None  # type: ignore[assignment]

PAGE_BYTES = mmap.PAGESIZE
#: glibc's largest dynamic mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX, malloc.c):
#: a block above it is always mapped fresh, however many were freed before
GLIBC_MMAP_THRESHOLD_MAX_BYTES = 4 * 1024 * 1024 * 8
#: the allocator settings that keep freed blocks for reuse instead (glibc's environment
#: tunables, read at process start)
ALLOCATOR_FIX = (
    "MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 in the environment "
    "(glibc), or LD_PRELOAD jemalloc / tcmalloc, or, for decode, a static KV cache "
    "(`--cache static`; generate(cache_implementation='static'))"
)


def minor_faults() -> int | None:
    """Minor page faults of this process so far; None where the OS has no such counter."""
    if resource is None:
        return None
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)


@functools.lru_cache(maxsize=1)
def _libc() -> str:
    import platform

    return platform.libc_ver()[0]


def mmap_threshold_bytes() -> int | None:
    """Above how many bytes a freed-and-reallocated block gets fresh pages, or None if unknown.

    glibc: the threshold set in the environment (`MALLOC_MMAP_THRESHOLD_`, fixed from then on),
    else the largest it adapts to (32 MiB). Other C libraries (macOS, musl) are not modelled.
    """
    if _libc() != "glibc":
        return None
    fixed = os.environ.get("MALLOC_MMAP_THRESHOLD_")
    if fixed and fixed.isdigit():
        return int(fixed)
    return GLIBC_MMAP_THRESHOLD_MAX_BYTES


@functools.lru_cache(maxsize=1)
def fault_seconds_here() -> float | None:
    """`measure_fault_seconds` once per process (about 40 ms): every CPU run records it."""
    return measure_fault_seconds()


def measure_fault_seconds(nbytes: int = 16 * 2**20) -> float | None:
    """Seconds one minor page fault costs: a first write to fresh pages less a second one.

    The memory comes straight from the kernel (an anonymous map), so its first touch faults
    whatever the allocator's history; the second write of the same bytes does not. The median
    of three such maps. None where the fault counter is missing or the touches did not fault.
    """
    import statistics

    import torch

    pages = nbytes // PAGE_BYTES
    costs = []
    for _ in range(3):
        with mmap.mmap(-1, nbytes) as mm:
            view: Any = torch.frombuffer(mm, dtype=torch.uint8)
            f0, t0 = minor_faults(), time.perf_counter()
            view.fill_(1)
            t1 = time.perf_counter()
            f1 = minor_faults()
            view.fill_(2)
            t2 = time.perf_counter()
            del view
        if f0 is None or f1 is None or f1 - f0 < pages // 2:
            return None
        costs.append(max((t1 - t0) - (t2 - t1), 0.0) / (f1 - f0))
    return statistics.median(costs)
