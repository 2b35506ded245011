import numpy as np

from infermeter.measure.memory import MemoryTracker, available_memory_mb


def test_rss_peak_sees_a_temporary_allocation_and_resets():
    mem = MemoryTracker("cpu")
    mem.reset()
    base = mem.read().rss_peak_mb
    block = np.ones(200 * 2**20 // 8)  # 200 MiB, touched
    del block
    peak = mem.read()
    assert peak.rss_peak_mb - base > 150
    assert peak.peak_allocated_mb is None  # no accelerator counter on CPU: None, not 0
    if mem.rss_peak_method == "per_sample_vmhwm":
        mem.reset()
        assert mem.read().rss_peak_mb < peak.rss_peak_mb - 150


def test_available_memory_is_positive():
    assert available_memory_mb("cpu") > 100
