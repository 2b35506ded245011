"""A load run kept in the store from its first finished request on, as a profile keeps samples.

Why: a load run reached the store only at its end, so a `kill -9` (or an out-of-memory kill)
lost every request it had served, in-process and at an endpoint alike, while a profile killed
the same way kept its samples. Now the first finished request registers the run (status
`running`, this host and process, so the next command that opens the store marks it `crashed`
once the process is gone) and each finished request is added as a sample as it finishes. The
run's final document replaces those samples when the run ends (`store_load`): they are kept for
a crash only, their times counted from the first arrival seen.

The writes run on their own thread: the requests' clocks (the endpoint client's event loop,
the in-process scheduler) only put a request on a queue, never wait for the database. That
thread still takes the interpreter's lock while it builds a row, and writing as each request
finished put that work exactly where a closed loop sends its next request: against
`transformers serve` on 2 busy cores, the client's header-to-body gap went from 0.39 ms (p50)
without the keeper to 1.82 ms with it. So it gathers what finishes for half a second and writes
it then, in one transaction, at a moment no request chose; a kill loses at most that half
second.
"""

from __future__ import annotations

import math
import queue
import threading
from typing import TYPE_CHECKING, Any

from infermeter.errors import UserError
from infermeter.run.results import RunResult, SampleResult

#: seconds the writer gathers finished requests before writing them (at most what a kill loses)
GATHER_S = 0.5

if TYPE_CHECKING:
    from infermeter.serving.rows import RequestRowDoc


def sample_of(row: RequestRowDoc, warmup: bool = False) -> SampleResult:
    """A request's row (`Request.row`) as a stored sample: arrival, TTFT, its token gaps."""
    return SampleResult(
        index=row["sample_id"],
        warmup=warmup,
        batch_size=1,
        prompt_tokens=row["prompt_tokens"],
        new_tokens=row["output_tokens"],
        vision_tokens=0,
        start_ms=row["arrival_ms"],
        ttft_ms=row["ttft_ms"],
        step_ms=tuple(row["itl_ms"]),
        memory={},
    )


class Keeper:
    """Registers the run at its first finished request and adds each as it finishes.

    Args:
        sink: a `LiveSink` (`begin_run`, `add_samples`): the store.
        skeleton: the run as registered: config, knobs, model and device, no sample yet.
        reqs: every request of the run (their arrivals give the times' origin).
        gather_s: how long the writer gathers finished requests before writing them.
    """

    def __init__(
        self, sink: Any, skeleton: RunResult, reqs: list[Any], gather_s: float = GATHER_S
    ) -> None:
        self.sink, self.skeleton, self.reqs = sink, skeleton, reqs
        self.gather_s = gather_s
        self._closing = threading.Event()
        self.run_id: str | None = None
        #: why the store could not keep the run as it went (None: it could)
        self.error: str | None = None
        self.kept = 0
        self._origin: float | None = None
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._write, daemon=True, name="infermeter-keep")
        self._thread.start()

    def finished(self, request: Any) -> None:
        """`request` ended: queue its sample (a failed request has none to keep)."""
        if request.error is not None or not request.token_s:
            return
        if self._origin is None:
            arrived = [r.arrival_s for r in self.reqs if math.isfinite(r.arrival_s)]
            self._origin = min(arrived) if arrived else request.arrival_s
        self._queue.put((request, self._origin))  # its row is built on the writer's thread

    def close(self) -> str | None:
        """Every queued sample written; the run's id (None when nothing finished)."""
        self._queue.put(None)
        self._closing.set()  # what is gathered is written now, not half a second later
        self._thread.join()
        return self.run_id

    def _write(self) -> None:
        """Gather for `gather_s` from the first finished request, write the lot, repeat."""
        done = False
        while not done:
            batch = [self._queue.get()]
            if batch[0] is not None:
                self._closing.wait(self.gather_s)
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            done = None in batch
            if self.error is None:
                self._keep([item for item in batch if item is not None])

    def _keep(self, items: list[tuple[Any, float]]) -> None:
        """Write what was gathered in one transaction: one commit, not one a request."""
        if not items:
            return
        try:
            if self.run_id is None:
                self.run_id = self.sink.begin_run(self.skeleton)
            samples = [sample_of(request.row(origin)) for request, origin in items]
            self.sink.add_samples(self.run_id, samples)
            self.kept += len(samples)
        except (UserError, OSError) as exc:  # the final store says it again, or stores
            self.error = str(exc)
