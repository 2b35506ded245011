"""One clock abstraction for every device, so timing code never branches on CUDA.

A clock hands out *marks*: cheap opaque points in time taken in the hot path. Durations are
resolved afterwards with `elapsed_ms`, so a CUDA clock records events asynchronously and pays one
synchronisation per resolution instead of one per mark (the instrument must not change what it
measures). On CPU a mark is `perf_counter_ns` read after the device is synchronised (a no-op on
CPU, `torch.mps.synchronize` on Apple GPUs), so a mark never lands before queued work finishes.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol, Union, runtime_checkable

if TYPE_CHECKING:
    import torch

#: A clock's mark: `perf_counter_ns` (int), a host clock's seconds (float) or a CUDA event.
Mark = Union[int, float, "torch.cuda.Event"]


@runtime_checkable
class Clock(Protocol):
    """Takes marks in the hot path and turns pairs of marks into milliseconds later."""

    name: str

    def mark(self) -> Any:
        """Return an opaque point in time; must be cheap and must not block on the device."""
        ...

    def elapsed_ms(self, start: Any, end: Any) -> float:
        """Milliseconds from `start` to `end` (may synchronise the device once)."""
        ...

    def now_ms(self) -> float:
        """Host wall time in milliseconds on this clock's time base, for timelines."""
        ...


class PerfCounterClock:
    """Host clock on `time.perf_counter_ns`, synchronising the device before each mark.

    Args:
        sync: called before reading the counter, e.g. `torch.mps.synchronize`; None on CPU,
            where kernels run synchronously on the calling thread.
    """

    name = "perf_counter"

    def __init__(self, sync: Any = None) -> None:
        self._sync = sync
        if sync is not None:
            self.name = "perf_counter+sync"

    def mark(self) -> int:
        """Nanoseconds since an arbitrary origin, after the device's queued work is done."""
        if self._sync is not None:
            self._sync()
        return time.perf_counter_ns()

    def elapsed_ms(self, start: int, end: int) -> float:
        """Milliseconds between two marks."""
        return (end - start) / 1e6

    def now_ms(self) -> float:
        """Host time in milliseconds (same origin as the marks)."""
        return time.perf_counter_ns() / 1e6


class CudaEventClock:
    """CUDA-event clock: marks are events recorded on the current stream, resolved later.

    Events come from a pool that grows in chunks and is reused across resolutions, so a mark in
    the hot path is one `record()` call: no allocation in steady state and no host sync. The
    first `elapsed_ms` after new marks synchronises the device once.

    Args:
        device: the CUDA device whose stream is timed.
        pool: number of events to create up front.
    """

    name = "cuda_event"

    def __init__(self, device: Any = None, pool: int = 1024) -> None:
        import torch

        self._torch = torch
        self._device = device
        self._pool: list[Any] = []
        self._next = 0
        self._grow(pool)
        self._synced = True

    def _grow(self, n: int) -> None:
        make: Any = self._torch.cuda.Event  # torch's stubs leave Event's constructor untyped
        self._pool.extend(make(enable_timing=True) for _ in range(n))

    def mark(self) -> Any:
        """Record the next pooled event on the current stream and return it."""
        if self._next >= len(self._pool):
            self._grow(max(64, len(self._pool)))
        event = self._pool[self._next]
        self._next += 1
        event.record()
        self._synced = False
        return event

    def elapsed_ms(self, start: Any, end: Any) -> float:
        """Milliseconds between two recorded events (device time, not host time)."""
        if not self._synced:
            self._torch.cuda.synchronize(self._device)
            self._synced = True
        return float(start.elapsed_time(end))

    def recycle(self) -> None:
        """Allow pooled events to be reused; call only after all their durations are read."""
        self._next = 0

    def now_ms(self) -> float:
        """Host time in milliseconds, for coarse timelines (load, compile)."""
        return time.perf_counter_ns() / 1e6


class MockClock:
    """A clock the test moves by hand, so timing logic can be checked against exact numbers.

    Args:
        start_ms: initial time.
        auto_advance_ms: added after every mark, to model work between marks.
    """

    name = "mock"

    def __init__(self, start_ms: float = 0.0, auto_advance_ms: float = 0.0) -> None:
        self.t_ms = start_ms
        self.auto_advance_ms = auto_advance_ms

    def advance(self, ms: float) -> None:
        """Move time forward."""
        self.t_ms += ms

    def mark(self) -> float:
        """Current mock time; then advance by `auto_advance_ms`."""
        t = self.t_ms
        self.t_ms += self.auto_advance_ms
        return t

    def elapsed_ms(self, start: float, end: float) -> float:
        """Difference of two mock times."""
        return end - start

    def now_ms(self) -> float:
        """Current mock time."""
        return self.t_ms


def clock_for(device: Any) -> Clock:
    """The right clock for a torch device: CUDA events on CUDA, synced perf counter elsewhere."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        return CudaEventClock(dev)
    if dev.type == "mps":
        return PerfCounterClock(sync=torch.mps.synchronize)
    return PerfCounterClock()
