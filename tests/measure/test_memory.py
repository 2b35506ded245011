import mmap

import numpy as np

from infermeter.measure.memory import MemoryTracker, available_memory_mib


def test_rss_peak_sees_a_temporary_allocation_and_resets():
    mem = MemoryTracker("cpu")
    mem.reset()
    base = mem.read().rss_peak_mib
    # fresh pages from the kernel (an anonymous map), touched: malloc could hand back memory a
    # big test process already has resident, which no RSS peak would (or should) see
    with mmap.mmap(-1, 200 * 2**20) as block:
        np.frombuffer(block, dtype=np.uint8)[:] = 1
    peak = mem.read()
    assert peak.rss_peak_mib - base > 150
    assert peak.peak_allocated_mib is None  # no accelerator counter on CPU: None, not 0
    assert peak.device_peak_method is None and "device_peak_method" in peak.to_dict()
    if mem.rss_peak_method == "per_sample_vmhwm":
        mem.reset()
        assert mem.read().rss_peak_mib < peak.rss_peak_mib - 150


def test_available_memory_is_positive():
    assert available_memory_mib("cpu") > 100


def test_an_mps_peak_says_it_is_the_allocation_at_the_samples_end():
    """MPS keeps no peak counter: the reading names what its "peak" is instead of posing."""
    from types import SimpleNamespace

    from infermeter.measure.memory import MPS_PEAK_METHOD

    mem = MemoryTracker("cpu")
    mem.device = SimpleNamespace(type="mps")
    mem._torch = SimpleNamespace(
        mps=SimpleNamespace(
            current_allocated_memory=lambda: 3 * 2**20, driver_allocated_memory=lambda: 5 * 2**20
        )
    )
    reading = mem.read()
    assert reading.peak_allocated_mib == 3.0 and reading.peak_reserved_mib == 5.0
    assert reading.device_peak_method == MPS_PEAK_METHOD and "lower bound" in MPS_PEAK_METHOD
