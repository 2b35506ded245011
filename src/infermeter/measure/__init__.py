"""Clocks, timers, statistics and memory: hardware facts with no knowledge of transformers."""

from infermeter.measure.clock import Clock, CudaEventClock, MockClock, PerfCounterClock, clock_for
from infermeter.measure.memory import MemoryReading, MemoryTracker
from infermeter.measure.stats import Summary, summarize
from infermeter.measure.timer import Section, Timer

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
