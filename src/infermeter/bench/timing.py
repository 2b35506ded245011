"""Timing and peak memory of one callable, shared by the microbenchmarks (`bench/`).

Latency uses the device's clock (`measure.clock.clock_for`: CUDA events on GPU, a synchronised
perf counter elsewhere); peak memory is measured on a separate call, never on a timed one,
because the CPU method (torch.profiler's memory timeline) slows the call it watches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from infermeter.util.native import native_stderr_silenced


def peak_memory_mib(call: Callable[[], Any], device: Any) -> tuple[float | None, str]:
    """Peak memory of live tensors during one call, inputs included, and how it was measured.

    CUDA: the allocator's peak after a reset. CPU: torch.profiler's memory timeline (every
    allocation and free of the call, summed in order); this uses a private torch API, so where
    it is missing the figure is None with the reason, never a guess.
    """
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        call()
        torch.cuda.synchronize(dev)
        return torch.cuda.max_memory_allocated(dev) / 2**20, "cuda allocator peak"
    try:
        from torch.profiler import ProfilerActivity, profile
        from torch.profiler._memory_profiler import MemoryProfileTimeline

        with (
            native_stderr_silenced(),
            profile(
                activities=[ProfilerActivity.CPU],
                profile_memory=True,
                record_shapes=True,
                with_stack=True,
            ) as prof,
        ):
            call()
        _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline(dev.type)
        peak = max((sum(s) for s in sizes), default=0)
        return peak / 2**20, "torch.profiler memory timeline (CPU allocations)"
    except Exception as exc:  # a private API: any failure means "not measured"
        return None, f"unavailable: {type(exc).__name__}: {exc}"[:160]


def time_calls(call: Callable[[], Any], warmup: int, samples: int, device: Any) -> list[float]:
    """`warmup` untimed calls, then `samples` timed ones (the device's clock, synchronised).

    The cyclic garbage collector is paused during each timed call, as in a profile's samples
    (run/profiling.py): a pass inside a timed call costs tens of milliseconds on a large heap.
    What is alive before the calls is frozen out of the passes that run between them. (A
    gc.collect() before the timed calls did the job at 0.4 s each with torch and
    transformers loaded: 16 of systems-analysis --quick's 34 s, for microsecond calls.)
    """
    import gc

    from infermeter.measure.clock import clock_for

    clock = clock_for(device)
    for _ in range(warmup):
        call()
    enabled = gc.isenabled()
    gc.freeze()
    out = []
    try:
        for _ in range(samples):
            gc.disable()
            try:
                start = clock.mark()
                call()
                end = clock.mark()
            finally:
                if enabled:
                    gc.enable()
            out.append(clock.elapsed_ms(start, end))
    finally:
        gc.unfreeze()
    return out
