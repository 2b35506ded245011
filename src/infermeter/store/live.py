"""The live feed: what was stored after a cursor (autoincrement ids), for the dashboard.

A live view asks for rows after a cursor. Ids only grow, but on PostgreSQL they can commit out
of order (two writers), so the dashboard's cursor (`dashboard/cursor.py`) stays below ids it has
not seen yet and drops rows it already sent.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any, TypedDict

from sqlalchemy import func, select

from infermeter.run.progress import ProgressDoc
from infermeter.store.engine import StoreCore
from infermeter.store.rows import unpack
from infermeter.store.schema import LayerStatsRow, ProgressRow, RunRow, SampleRow, StepsRow
from infermeter.store.writes import LIVE_LAYERS, _alive
from infermeter.util.timestamps import age_seconds

if TYPE_CHECKING:
    from infermeter.instrument.tables import LayerRowDoc

#: a progress line from another host (whose process cannot be checked) not updated for this
#: long is taken as gone; a profile writes at least at each sample and its model's load
STALE_OTHER_HOST_S = 3600.0


def _stale(row: ProgressRow, status: str | None) -> bool:
    """Whether a progress line belongs to no profile in progress.

    Its run ended (finished, failed, crashed); or its process, on this host, is gone; or,
    from another host or an older infermeter (no process recorded), it has not been updated
    for `STALE_OTHER_HOST_S`.
    """
    if status is not None and status != "running":
        return True
    if row.host == socket.gethostname() and row.pid is not None:
        return not _alive(row.pid, row.pid_started or 0)
    try:
        return age_seconds(row.updated) > STALE_OTHER_HOST_S
    except ValueError:
        return True


#: The per-layer table a finished run keeps (instrument/tables.py names it so).
FINAL_LAYERS = "layers"


class LiveLayersDoc(TypedDict):
    """A run's per-layer table as the live page draws it: in progress (blocks) or final."""

    #: the table's row id: the live feed's cursor
    id: int
    run_id: str
    rows: list[LayerRowDoc]


class LiveSampleDoc(TypedDict):
    """A stored sample as the live page draws it: its run, its times and its steps."""

    #: the sample's row id: the live feed's cursor
    id: int
    run_id: str
    model: str | None
    run_status: str
    index: int
    warmup: bool
    ttft_ms: float
    decode_ms: float
    total_ms: float
    tpot_ms: float | None
    tokens_per_s: float | None
    new_tokens: int
    rss_peak_mib: float | None
    step_ms: list[float]


class ProgressRowDoc(ProgressDoc):
    """A profile in progress as the live page reads it: its row's key and last update too."""

    key: str
    updated: str


class StoreLiveFeed(StoreCore):
    """Rows stored after a cursor: samples and per-layer tables."""

    def cursors(self) -> tuple[int, int]:
        """(highest sample id, highest layer-table id) now: a live view starts after them."""
        with self.session("read") as s:
            a = s.scalar(select(func.max(SampleRow.id))) or 0
            b = s.scalar(select(func.max(LayerStatsRow.id))) or 0
            return int(a), int(b)

    def samples_after(self, last_id: int, limit: int = 500) -> list[LiveSampleDoc]:
        """Samples stored after `last_id`, oldest first, with their run's model and status."""
        return self._live_samples(SampleRow.id > last_id, limit, newest=False)

    def running_samples(self, limit: int = 200) -> list[LiveSampleDoc]:
        """The latest `limit` samples of the runs still running, oldest first.

        A page opened mid-run said "waiting for samples..." at sample 6 of 12: the feed starts
        after what was stored, so the samples before it were never sent (issue 59).
        """
        return self._live_samples(RunRow.status == "running", limit, newest=True)

    def _live_samples(self, where: Any, limit: int, newest: bool) -> list[LiveSampleDoc]:
        order = SampleRow.id.desc() if newest else SampleRow.id
        with self.session("read") as s:
            rows = s.execute(
                select(SampleRow, RunRow.model_spec, RunRow.status, StepsRow)
                .join(RunRow, RunRow.id == SampleRow.run_id)
                .outerjoin(StepsRow, StepsRow.sample_id == SampleRow.id)
                .where(where)
                .order_by(order)
                .limit(limit)
            ).all()
            if newest:
                rows = list(reversed(rows))
            return [
                {
                    "id": r.id,
                    "run_id": r.run_id,
                    "model": model,
                    "run_status": status,
                    "index": r.index,
                    "warmup": r.warmup,
                    "ttft_ms": r.ttft_ms,
                    "decode_ms": r.decode_ms,
                    "total_ms": r.total_ms,
                    "tpot_ms": r.decode_ms / (r.new_tokens - 1) if r.new_tokens > 1 else None,
                    "tokens_per_s": r.batch_size * r.new_tokens / (r.total_ms / 1e3)
                    if r.total_ms
                    else None,
                    "new_tokens": r.new_tokens,
                    "rss_peak_mib": r.rss_peak_mib,
                    "step_ms": list(unpack(steps.step_ms, steps.count)) if steps else [],
                }
                for r, model, status, steps in rows
            ]

    def progress_rows(self) -> list[ProgressRowDoc]:
        """Every profile in progress, where it is (stage, done of total, tokens so far).

        Lines whose profile cannot be in progress are left out (`_stale`): a reader does not
        delete them (it may have no right to write); the next open on their host does.
        """
        with self.session("read") as s:
            found = s.execute(
                select(ProgressRow, RunRow.status)
                .outerjoin(RunRow, RunRow.id == ProgressRow.run_id)
                .order_by(ProgressRow.updated)
            ).all()
            rows = [r for r, status in found if not _stale(r, status)]
            return [
                {
                    "key": r.key,
                    "run_id": r.run_id,
                    "model": r.model,
                    "stage": r.stage,
                    "done": r.done,
                    "total": r.total,
                    "tokens": r.tokens,
                    "steps": r.steps,
                    "updated": r.updated,
                }
                for r in rows
            ]

    def live_layers_after(self, last_id: int) -> list[LiveLayersDoc]:
        """Per-layer tables stored after `last_id`, oldest first: in progress, and final ones.

        The in-progress table is dropped when its run finishes, so a run shorter than one poll
        would otherwise never show its layers live; its final table arrives instead.
        """
        with self.session("read") as s:
            rows = s.scalars(
                select(LayerStatsRow)
                .where(
                    LayerStatsRow.id > last_id,
                    LayerStatsRow.table.in_([LIVE_LAYERS, FINAL_LAYERS]),
                )
                .order_by(LayerStatsRow.id)
            ).all()
            return [{"id": r.id, "run_id": r.run_id, "rows": r.rows} for r in rows]
