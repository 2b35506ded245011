"""The live feed: one poller over the store, fanned out to every connected page.

It runs only while at least one page listens, starts after what was already stored (pages load
that through the API; a page that arrives while runs are running is sent their samples so far),
and pushes four kinds of events: `sample` (a sample just stored, with
its decode steps), `run` (a run's status changed: running, finished, failed, crashed),
`layers` (a running run's per-layer table so far, or a finished run's final one) and
`progress` (every profile in progress: loading, warm-up, sample i of n, tokens so far; sent
whenever any of them moves).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, Protocol

from infermeter.dashboard.cursor import IdCursor

if TYPE_CHECKING:
    from infermeter.store.live import LiveLayersDoc, LiveSampleDoc, ProgressRowDoc
    from infermeter.store.queries import RunStatusDoc


class LiveSource(Protocol):
    """The store's live feed (`store/live.py`): rows stored after a cursor, and run rows."""

    def run_statuses(self, limit: int = 50) -> list[RunStatusDoc]:
        """Newest runs' ids, models and statuses."""
        ...

    def cursors(self) -> tuple[int, int]:
        """Where a live view starts."""
        ...

    def samples_after(self, last_id: int, limit: int = 500) -> list[LiveSampleDoc]:
        """Samples stored after a cursor."""
        ...

    def running_samples(self, limit: int = 200) -> list[LiveSampleDoc]:
        """The latest samples of the runs still running (a page opened mid-run)."""
        ...

    def live_layers_after(self, last_id: int) -> list[LiveLayersDoc]:
        """Per-layer tables (in progress or final) stored after a cursor."""
        ...

    def progress_rows(self) -> list[ProgressRowDoc]:
        """Every profile in progress and where it is."""
        ...


class LiveFeed:
    """Polls `store` every `poll_s` seconds while someone listens."""

    def __init__(self, store: LiveSource, poll_s: float = 0.25) -> None:
        self.store = store
        self.poll_s = poll_s
        self._queues: set[asyncio.Queue[Any]] = set()
        self._task: asyncio.Task[None] | None = None
        self._statuses: dict[str, str] = {}
        self._progress: list[ProgressRowDoc] | None = None
        self._starting = asyncio.Lock()

    async def subscribe(self) -> asyncio.Queue[Any]:
        """A queue of events for one page; starts the poller if it is the first.

        The poller's cursors are read before this returns, so anything stored after a page has
        subscribed reaches it (reading them inside the task raced with a fast writer).
        """
        q: asyncio.Queue[Any] = asyncio.Queue(maxsize=1000)
        self._queues.add(q)
        async with self._starting:  # two pages arriving together start one poller
            if self._task is None or self._task.done():
                cursors = await asyncio.to_thread(self.store.cursors)
                runs = await asyncio.to_thread(self.store.run_statuses, 50)
                self._statuses = {r["id"]: r["status"] for r in runs}
                self._task = asyncio.get_running_loop().create_task(self._run(*cursors))
        if self._progress is not None:  # a page arriving mid-run sees where things are now
            q.put_nowait({"type": "progress", "rows": self._progress})
        # and the samples its runs measured before it came (a page drops any it gets twice:
        # one stored between the poller's last read and this one comes both ways)
        for sample in await asyncio.to_thread(self.store.running_samples):
            q.put_nowait({"type": "sample", "sample": sample})
        return q

    def unsubscribe(self, q: asyncio.Queue[Any]) -> None:
        """Forget a page's queue."""
        self._queues.discard(q)

    async def stop(self) -> None:
        """Stop the poller (at shutdown)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def _publish(self, event: dict[str, Any]) -> None:
        for q in list(self._queues):
            if q.full():  # a page that stopped reading must not hold the others back
                with contextlib.suppress(asyncio.QueueEmpty):
                    q.get_nowait()
            q.put_nowait(event)

    async def _run(self, last_sample: int, last_layers: int) -> None:
        sample_ids, layer_ids = IdCursor(last_sample), IdCursor(last_layers)
        while self._queues:
            try:
                samples = await asyncio.to_thread(self.store.samples_after, sample_ids.floor)
                layers = await asyncio.to_thread(self.store.live_layers_after, layer_ids.floor)
                runs = await asyncio.to_thread(self.store.run_statuses, 50)
                progress = await asyncio.to_thread(self.store.progress_rows)
            except Exception as exc:  # a locked or vanished database: say so, keep trying
                self._publish({"type": "error", "detail": str(exc)[:200]})
                await asyncio.sleep(max(self.poll_s, 1.0))
                continue
            for r in runs:
                if self._statuses.get(r["id"]) != r["status"]:
                    self._statuses[r["id"]] = r["status"]
                    self._publish({"type": "run", "run": r})
            for smp in sample_ids.fresh(samples):
                self._publish({"type": "sample", "sample": smp})
            for lay in layer_ids.fresh(layers):
                self._publish({"type": "layers", "run_id": lay["run_id"], "rows": lay["rows"]})
            if progress != self._progress:
                self._progress = progress
                self._publish({"type": "progress", "rows": progress})
            await asyncio.sleep(self.poll_s)
