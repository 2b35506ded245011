"""The live feed: what was stored after a cursor (autoincrement ids), for the dashboard.

A live view asks for rows after a cursor. Ids only grow, but on PostgreSQL they can commit out
of order (two writers), so the dashboard's cursor (`dashboard/cursor.py`) stays below ids it has
not seen yet and drops rows it already sent.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from infermeter.store.engine import StoreCore
from infermeter.store.rows import unpack
from infermeter.store.schema import LayerStatsRow, ProgressRow, RunRow, SampleRow, StepsRow
from infermeter.store.writes import LIVE_LAYERS

#: The per-layer table a finished run keeps (instrument/tables.py names it so).
FINAL_LAYERS = "layers"


class StoreLiveFeed(StoreCore):
    """Rows stored after a cursor: samples and per-layer tables."""

    def cursors(self) -> tuple[int, int]:
        """(highest sample id, highest layer-table id) now: a live view starts after them."""
        with self.session("read") as s:
            a = s.scalar(select(func.max(SampleRow.id))) or 0
            b = s.scalar(select(func.max(LayerStatsRow.id))) or 0
            return int(a), int(b)

    def samples_after(self, last_id: int, limit: int = 500) -> list[dict[str, Any]]:
        """Samples stored after `last_id`, oldest first, with their run's model and status."""
        with self.session("read") as s:
            rows = s.execute(
                select(SampleRow, RunRow.model_spec, RunRow.status, StepsRow)
                .join(RunRow, RunRow.id == SampleRow.run_id)
                .outerjoin(StepsRow, StepsRow.sample_id == SampleRow.id)
                .where(SampleRow.id > last_id)
                .order_by(SampleRow.id)
                .limit(limit)
            ).all()
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
                    "rss_peak_mb": r.rss_peak_mb,
                    "step_ms": list(unpack(steps.step_ms, steps.count)) if steps else [],
                }
                for r, model, status, steps in rows
            ]

    def progress_rows(self) -> list[dict[str, Any]]:
        """Every profile in progress, where it is (stage, done of total, tokens so far)."""
        with self.session("read") as s:
            rows = s.scalars(select(ProgressRow).order_by(ProgressRow.updated)).all()
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

    def live_layers_after(self, last_id: int) -> list[dict[str, Any]]:
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
