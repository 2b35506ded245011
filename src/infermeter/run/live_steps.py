"""Decode steps streamed to the live page while a sample is being generated.

A write to the database inside a timed generation would perturb the very steps it reports, so
the generating thread never writes: it only takes its clock mark per token (run/generation.py).
A watcher thread wakes every `INTERVAL_S`, reads how many marks there are, turns host-clock
marks into the steps so far and hands them to the progress line, whose writes are throttled.
CUDA-event marks cannot be read without synchronising the device, so on a GPU the watcher
streams the token count only; the step times follow when the sample ends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from infermeter.measure.clock import Clock
from infermeter.run.progress import LiveProgress, StepsDoc

#: seconds between two looks at the marks
INTERVAL_S = 0.5
#: the latest steps sent (a long generation's whole list would make every write larger)
MAX_STEPS = 256


def _host_clock(clock: Clock) -> bool:
    return str(getattr(clock, "name", "")).startswith("perf_counter")


def snapshot(recorder: Any, clock: Clock) -> StepsDoc:
    """The sample so far: tokens, TTFT and the latest steps (ms; host clocks only)."""
    start, of = recorder.start, len(recorder.marks)
    count = min(recorder.count, len(recorder.marks))  # marks[:count] are all written
    marks = recorder.marks[:count]
    out: StepsDoc = {"tokens": count, "of": of, "ttft_ms": None, "step_ms": []}
    if marks and start is not None and _host_clock(clock):
        out["ttft_ms"] = clock.elapsed_ms(start, marks[0])
        tail = marks[-(MAX_STEPS + 1) :]
        out["step_ms"] = [clock.elapsed_ms(a, b) for a, b in zip(tail, tail[1:], strict=False)]
        out["first_step"] = count - len(tail)  # index of the first step listed
    return out


@contextmanager
def watching(progress: LiveProgress, clock: Clock, recorder: Any) -> Iterator[None]:
    """Within the block (one generate call), stream its steps to `progress` from a thread."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(INTERVAL_S):
            if recorder.count:
                progress.decoding(snapshot(recorder, clock))

    thread = threading.Thread(target=loop, name="infermeter-live-steps", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


__all__ = ["INTERVAL_S", "snapshot", "watching"]
