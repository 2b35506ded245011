import mmap

import numpy as np

from infermeter.measure.memory import MemoryTracker, available_memory_mb


def test_rss_peak_sees_a_temporary_allocation_and_resets():
    mem = MemoryTracker("cpu")
    mem.reset()
    base = mem.read().rss_peak_mb
    # fresh pages from the kernel (an anonymous map), touched: malloc could hand back memory a
    # big test process already has resident, which no RSS peak would (or should) see
    with mmap.mmap(-1, 200 * 2**20) as block:
        np.frombuffer(block, dtype=np.uint8)[:] = 1
    peak = mem.read()
    assert peak.rss_peak_mb - base > 150
    assert peak.peak_allocated_mb is None  # no accelerator counter on CPU: None, not 0
    if mem.rss_peak_method == "per_sample_vmhwm":
        mem.reset()
        assert mem.read().rss_peak_mb < peak.rss_peak_mb - 150


def test_available_memory_is_positive():
    assert available_memory_mb("cpu") > 100
