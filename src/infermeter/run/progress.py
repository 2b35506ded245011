"""Where a profile is, for progress bars and for the live page, from its very start.

The live page must show a profile from the moment it starts: while the model loads (before the
run is registered: user errors are ruled out first, so nothing bogus is stored), during warm-up,
sample by sample with the tokens generated so far, and inside a sample its decode steps as they
happen. Each change is written to a sink that keeps progress (`ProgressSink`, the store's
`progress` table). Writes between samples come from the profiling thread; inside a timed
generation only `run/live_steps.py`'s watcher thread writes, at most once per
`MIN_INTERVAL_S`, so the generating thread never waits on the database (the cost of that thread
is measured by benchmarks/live_steps.py).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol, TypedDict, runtime_checkable

#: on_progress(stage, done, total): stage is "load", "compile", "warmup" or "sample".
ProgressFn = Callable[[str, int, int], None]


class _StepsDoc(TypedDict):
    tokens: int
    of: int
    ttft_ms: float | None
    step_ms: list[float]


class StepsDoc(_StepsDoc, total=False):
    """The sample in progress so far (run/live_steps.py).

    Its tokens of how many, its TTFT and latest steps (ms; host clocks only), and the index of
    the first step listed.
    """

    first_step: int


class ProgressDoc(TypedDict):
    """Where a profile is, as its progress row keeps it for the live page."""

    run_id: str | None
    model: str
    #: "load", "compile", "warmup" or "sample"
    stage: str
    done: int
    total: int
    #: tokens generated so far, every row of every finished sample
    tokens: int
    #: the sample being generated (None between samples); a load run's batch now, its
    #: requests in flight (serving/batch_state.py)
    steps: StepsDoc | dict[str, Any] | None


@runtime_checkable
class ProgressSink(Protocol):
    """A sink that keeps one progress row per profile (implemented by `infermeter.Store`)."""

    def progress(self, key: str, state: ProgressDoc | None) -> None:
        """Replace profile `key`'s row with `state`, or delete it (None)."""
        ...


class LiveProgress:
    """A ProgressFn that also writes where the profile is to a `ProgressSink`.

    Writing is best effort: a progress line that cannot be written (a locked database) is
    skipped, never a reason to lose the run itself, whose writes report their own errors.
    Writes are at most one per `MIN_INTERVAL_S` (each is a commit: 12 a point cost a sweep
    about 50 ms a point), except the first, the run's registration and the end.
    """

    #: seconds between two progress writes (the live page polls every 0.25 s)
    MIN_INTERVAL_S = 0.5

    def __init__(self, sink: Any, model: str, on_progress: ProgressFn | None = None) -> None:
        self.key = uuid.uuid4().hex
        self.sink = sink if isinstance(sink, ProgressSink) else None
        self.on_progress = on_progress
        self._last_write = float("-inf")
        self.state: ProgressDoc = {
            "run_id": None,
            "model": model,
            "stage": "load",
            "done": 0,
            "total": 1,
            "tokens": 0,
            "steps": None,
        }

    def __call__(self, stage: str, done: int, total: int) -> None:
        """A stage advanced: tell the caller's progress bar and the live page."""
        if self.on_progress is not None:
            self.on_progress(stage, done, total)
        self.state["stage"], self.state["done"], self.state["total"] = stage, done, total
        self._write()

    def registered(self, run_id: str | None) -> None:
        """The run now has an id (the live page links to it)."""
        self.state["run_id"] = run_id
        self._write(force=True)

    def generated(self, tokens: int) -> None:
        """A sample finished with `tokens` new tokens (all rows of its batch)."""
        self.state["tokens"] += tokens
        self.state["steps"] = None
        self._write()

    @property
    def streaming(self) -> bool:
        """Whether anyone can see decode steps as they happen (a sink that keeps progress)."""
        return self.sink is not None

    def decoding(self, steps: StepsDoc) -> None:
        """The sample in progress so far: {"tokens", "of", "ttft_ms", "step_ms"} (throttled)."""
        self.state["steps"] = steps
        self._write()

    def end(self) -> None:
        """The profile ended (finished, failed or interrupted): its line goes away."""
        self._write(None, force=True)

    def _write(self, state: str | None = "current", force: bool = False) -> None:
        if self.sink is None:
            return
        now = time.monotonic()
        if not force and now - self._last_write < self.MIN_INTERVAL_S:
            return
        self._last_write = now
        with contextlib.suppress(Exception):  # best effort: see the class docstring
            self.sink.progress(self.key, self.state.copy() if state == "current" else None)
