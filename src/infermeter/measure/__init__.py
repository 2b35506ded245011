"""Clocks, timers, statistics and memory: hardware facts with no knowledge of transformers."""

from typing import TYPE_CHECKING

from infermeter.util.lazy import lazy_exports

if TYPE_CHECKING:  # what the names are, for type checkers; at run time each loads on first use
    from infermeter.measure.clock import (
        Clock,
        CudaEventClock,
        MockClock,
        PerfCounterClock,
        clock_for,
    )
    from infermeter.measure.memory import MemoryReading, MemoryTracker
    from infermeter.measure.stats import Summary, summarize
    from infermeter.measure.timer import Section, Timer

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "Clock": "infermeter.measure.clock",
        "CudaEventClock": "infermeter.measure.clock",
        "MockClock": "infermeter.measure.clock",
        "PerfCounterClock": "infermeter.measure.clock",
        "clock_for": "infermeter.measure.clock",
        "MemoryReading": "infermeter.measure.memory",
        "MemoryTracker": "infermeter.measure.memory",
        "Summary": "infermeter.measure.stats",
        "summarize": "infermeter.measure.stats",
        "Section": "infermeter.measure.timer",
        "Timer": "infermeter.measure.timer",
    },
)

__all__ = [
    "Clock",
    "CudaEventClock",
    "MemoryReading",
    "MemoryTracker",
    "MockClock",
    "PerfCounterClock",
    "Section",
    "Summary",
    "Timer",
    "clock_for",
    "summarize",
]
