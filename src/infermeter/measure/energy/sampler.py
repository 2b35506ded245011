"""One background thread reading an energy source at a fixed interval.

Why a thread: counters must be read often enough to see every wrap (RAPL) and to integrate power
(NVML without a counter, powermetrics); the measured code must not do it. The thread sleeps on
absolute deadlines (no drift), takes `perf_counter_ns` timestamps (the same time base as the
host clock of the sections, so windows line up), and writes into a preallocated numpy buffer:
no allocation per reading, the buffer doubles only when a run outlives it (4,096 readings =
6.8 minutes at 100 ms). A reading that comes more than 3 intervals after the previous one (the
GIL held by a long C call, a suspended process) is recorded as a gap, so the report can say so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from infermeter.errors import UserError
from infermeter.measure.energy.attribution import PowerTrace
from infermeter.measure.energy.base import EnergySource

MIN_INTERVAL_MS = 10.0
DEFAULT_INTERVAL_MS = 100.0


def check_interval(interval_ms: float) -> float:
    """The interval, or a UserError when it is below the 10 ms minimum or not a number."""
    if not interval_ms >= MIN_INTERVAL_MS:  # also refuses nan
        raise UserError(
            f"--power-interval-ms {interval_ms} is below the minimum of {MIN_INTERVAL_MS:g} ms",
            "use 10 ms or more (100 ms is the default; sensors rarely update faster)",
        )
    return float(interval_ms)


class PowerSampler:
    """Reads `source` every `interval_ms` on a daemon thread between `start()` and `stop()`.

    Args:
        source: an EnergySource (cumulative joules per domain).
        interval_ms: reading interval; 10 ms minimum.
        capacity: readings preallocated.
        now_ns: timestamp function (tests inject a fake).
    """

    def __init__(
        self,
        source: EnergySource,
        interval_ms: float = DEFAULT_INTERVAL_MS,
        capacity: int = 4096,
        now_ns: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self.source = source
        self.interval_ms = check_interval(interval_ms)
        self.domains = list(source.domains())
        self._now_ns = now_ns
        self._t = np.empty(capacity, dtype=np.int64)
        self._j = np.empty((capacity, len(self.domains)), dtype=np.float64)
        self._n = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[str] = []

    def _record(self) -> None:
        # One reader at a time: sources keep state between reads (RAPL compares each value with
        # the last to spot wraps), and read_now() runs on the caller's thread.
        with self._lock:
            joules = self.source.read_j()
            t = self._now_ns()
            if self._n == len(self._t):
                self._t = np.resize(self._t, 2 * len(self._t))
                self._j = np.resize(self._j, (2 * len(self._j), len(self.domains)))
            self._t[self._n] = t
            self._j[self._n] = [joules[d] for d in self.domains]
            self._n += 1

    def _loop(self) -> None:
        period = self.interval_ms / 1e3
        deadline = time.perf_counter() + period
        while not self._stop.wait(max(0.0, deadline - time.perf_counter())):
            try:
                self._record()
            except Exception as exc:  # a failing sensor must not kill the run
                self.errors.append(f"{type(exc).__name__}: {exc}")
                if len(self.errors) > 3:
                    return
            deadline += period
            now = time.perf_counter()
            if deadline < now:  # fell behind (gap): resume the grid from now
                deadline = now + period

    def start(self) -> PowerSampler:
        """Take a first reading now and start the thread."""
        self._record()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="infermeter-power")
        self._thread.start()
        return self

    def read_now(self) -> None:
        """Take one reading from the calling thread (at a window boundary)."""
        self._record()

    def stop(self) -> PowerTrace:
        """Stop the thread, take a last reading, and return everything read."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._record()
        return self.trace()

    def __enter__(self) -> PowerSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def trace(self, origin_ns: int | None = None) -> PowerTrace:
        """Readings so far; times in ms from `origin_ns` (the first reading when None)."""
        with self._lock:
            n = self._n
            t = self._t[:n].copy()
            j = self._j[:n].copy()
        if n and origin_ns is None:
            origin_ns = int(t[0])
        t_ms = (t - (origin_ns or 0)) / 1e6
        return PowerTrace(
            source=self.source.name,
            method=self.source.method,
            domains=list(self.domains),
            t_ms=t_ms,
            joules=j,
            interval_ms=self.interval_ms,
            update_period_ms=self.source.update_period_s * 1e3,
            errors=list(self.errors),
        )
