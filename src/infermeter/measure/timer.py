"""Named, nestable timed sections on any `Clock`, plus repeat-with-warm-up measurement.

Sections keep their raw marks; durations are resolved only when asked, so on CUDA a whole
generation is timed with a single synchronisation at the end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypedDict

from infermeter.measure.clock import Clock
from infermeter.measure.stats import Summary, summarize


class SectionRowDoc(TypedDict):
    """A user region's call (`Profiler.section`) as a run keeps it: ms on the run's timeline."""

    name: str
    depth: int
    #: the thread's name
    thread: str
    start_ms: float
    ms: float


@dataclass
class Section:
    """One timed region: its name, nesting depth, and the clock marks at its ends."""

    name: str
    depth: int
    start: Any
    end: Any = None
    host_start_ms: float = 0.0
    #: the thread that timed it: depth counts only that thread's open sections
    thread: str = ""


class Timer:
    """Records nested sections against one clock and resolves them into a timeline.

    Safe to use from several threads: each thread has its own nesting depth (a section opened
    in one thread is not the parent of one opened in another), and sections are appended under
    a lock.

    Args:
        clock: the clock to mark with.
        origin: a mark of that clock to count start times from (a run's origin); a new mark
            by default.
    """

    def __init__(self, clock: Clock, origin: Any = None) -> None:
        self.clock = clock
        self.sections: list[Section] = []
        self._local = threading.local()
        self._lock = threading.Lock()
        self._origin = clock.mark() if origin is None else origin

    @contextmanager
    def section(self, name: str) -> Iterator[Section]:
        """Time the body as section `name`; nested sections record their depth."""
        depth = getattr(self._local, "depth", 0)
        sec = Section(
            name,
            depth,
            self.clock.mark(),
            host_start_ms=self.clock.now_ms(),
            thread=threading.current_thread().name,
        )
        with self._lock:
            self.sections.append(sec)
        self._local.depth = depth + 1
        try:
            yield sec
        finally:
            self._local.depth = depth
            sec.end = self.clock.mark()

    def duration_ms(self, name: str) -> float:
        """Time covered by the finished sections called `name`: the union of their windows.

        A section nested in one of the same name (a recursive call) or overlapping one from
        another thread is not counted twice.
        """
        spans = sorted(
            (
                self.clock.elapsed_ms(self._origin, s.start),
                self.clock.elapsed_ms(self._origin, s.end),
            )
            for s in self.sections
            if s.name == name and s.end is not None
        )
        total, reach = 0.0, float("-inf")
        for a, b in spans:
            if b > reach:
                total += b - max(a, reach)
                reach = b
        return total

    def timeline(self) -> list[dict[str, Any]]:
        """Sections as dicts with start (relative to the timer's creation) and duration, in ms."""
        return [
            {
                "name": s.name,
                "depth": s.depth,
                "start_ms": self.clock.elapsed_ms(self._origin, s.start),
                "duration_ms": self.clock.elapsed_ms(s.start, s.end),
            }
            for s in self.sections
            if s.end is not None
        ]

    def rows(self, origin: Any = None, offset_ms: float = 0.0) -> list[SectionRowDoc]:
        """Finished sections as stored rows: name, depth, thread, start_ms, ms.

        Args:
            origin: the mark start times count from (the timer's creation by default), so a
                run's sections land on the run's timeline beside its layers and samples.
            offset_ms: added to every start (the run's load time before its clock started).
        """
        base = self._origin if origin is None else origin
        return [
            {
                "name": s.name,
                "depth": s.depth,
                "thread": s.thread,
                "start_ms": self.clock.elapsed_ms(base, s.start) + offset_ms,
                "ms": self.clock.elapsed_ms(s.start, s.end),
            }
            for s in self.sections
            if s.end is not None
        ]


class SectionSummaryDoc(TypedDict):
    """A user region's calls summarised: total, median with its 95% interval, spread."""

    name: str
    calls: int
    total_ms: float
    median_ms: float
    median_ci95_low_ms: float
    median_ci95_high_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    #: calls marked out of line with the rest (a shared machine's stalls)
    outliers: int


def section_summary(rows: list[SectionRowDoc]) -> list[SectionSummaryDoc]:
    """Per section name, in first-seen order: calls, total and the distribution of one call.

    The median (with its 95% interval) is the headline; `outliers` counts calls marked as
    out of line with the rest (a shared machine's stalls), which the mean and max include.
    """
    by_name: dict[str, list[float]] = {}
    for r in rows:
        by_name.setdefault(r["name"], []).append(float(r["ms"]))
    out: list[SectionSummaryDoc] = []
    for name, ms in by_name.items():
        s = summarize(ms)
        out.append(
            {
                "name": name,
                "calls": s.n,
                "total_ms": sum(ms),
                "median_ms": s.median,
                "median_ci95_low_ms": s.median_ci95_low,
                "median_ci95_high_ms": s.median_ci95_high,
                "mean_ms": s.mean,
                "std_ms": s.std,
                "min_ms": s.min,
                "max_ms": s.max,
                "outliers": len(s.outliers),
            }
        )
    return out


def measure_repeated(
    fn: Callable[[], Any], clock: Clock, *, warmup: int = 1, repeats: int = 5
) -> tuple[Summary, list[float]]:
    """Call `fn` `warmup` times untimed, then `repeats` times timed; return summary and raw ms."""
    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")
    for _ in range(warmup):
        fn()
    marks = []
    for _ in range(repeats):
        start = clock.mark()
        fn()
        marks.append((start, clock.mark()))
    raw = [clock.elapsed_ms(a, b) for a, b in marks]
    return summarize(raw), raw
