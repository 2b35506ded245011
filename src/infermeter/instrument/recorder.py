"""Timing records of instrumented modules: preallocated, appended in the hot path, resolved once.

A record is (module id, step id, start mark, end mark). Marks come from the run's clock, so on
CUDA they are events resolved with one synchronisation at the end; on CPU they are integers.
Slots are reserved up front (`preallocate`); past that the lists grow and `overflowed` counts
how often, so a report can say the reservation was too small.
"""

from __future__ import annotations

from typing import Any

from infermeter.measure.clock import Clock


class TimingRecorder:
    """Fixed-capacity parallel lists of timing records."""

    def __init__(self, clock: Clock, capacity: int) -> None:
        self.clock = clock
        self.capacity = capacity
        self.mids: list[int] = [0] * capacity
        self.steps: list[int] = [0] * capacity
        self.starts: list[Any] = [None] * capacity
        self.ends: list[Any] = [None] * capacity
        self.count = 0
        self.overflowed = 0

    def add(self, mid: int, step: int, start: Any, end: Any) -> None:
        """Append one record (hot path: four list stores and an increment)."""
        n = self.count
        if n < self.capacity:
            self.mids[n] = mid
            self.steps[n] = step
            self.starts[n] = start
            self.ends[n] = end
        else:
            self.mids.append(mid)
            self.steps.append(step)
            self.starts.append(start)
            self.ends.append(end)
            self.capacity += 1
            self.overflowed += 1
        self.count = n + 1

    def resolve(self, origin: Any) -> tuple[list[int], list[int], list[float], list[float]]:
        """(module ids, step ids, start ms from `origin`, duration ms) of every record."""
        n, el = self.count, self.clock.elapsed_ms
        starts = [el(origin, s) for s in self.starts[:n]]
        durs = [el(s, e) for s, e in zip(self.starts[:n], self.ends[:n], strict=True)]
        return self.mids[:n], self.steps[:n], starts, durs
