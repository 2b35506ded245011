"""Named, nestable timed sections on any `Clock`, plus repeat-with-warm-up measurement.

Sections keep their raw marks; durations are resolved only when asked, so on CUDA a whole
generation is timed with a single synchronisation at the end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from infermeter.measure.clock import Clock
from infermeter.measure.stats import Summary, summarize


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
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.sections: list[Section] = []
        self._local = threading.local()
        self._lock = threading.Lock()
        self._origin = clock.mark()

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
