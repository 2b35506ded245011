"""Copy a database's runs into another (`infermeter db migrate`): SQLite into PostgreSQL.

Row by row through SQLAlchemy Core on the shared schema, so any two databases the store opens
work. Each run is copied with everything that hangs off it (samples and their steps, layer
tables, trace, power readings) in one transaction on the destination: an interrupted migration
leaves whole runs only, and running it again copies what is still missing (runs, sweeps and
predictions already there are skipped by id, calibrations by device, host and time).
Auto-increment ids (samples, layer tables, power chunks, calibrations) are given anew by the
destination; the steps of a sample follow its new id. Runs still in progress are left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Connection, Table, select

from infermeter.store.schema import (
    Base,
    CeilingsRow,
    LayerStatsRow,
    PowerSamplesRow,
    PredictionRow,
    RunRow,
    SampleRow,
    StepsRow,
    SweepRow,
    TraceRow,
)


@dataclass
class MigrateReport:
    """What a migration copied and what it left."""

    runs: int = 0
    samples: int = 0
    sweeps: int = 0
    ceilings: int = 0
    predictions: int = 0
    already_there: int = 0
    still_running: int = 0

    def to_dict(self) -> dict[str, int]:
        """Plain dict for JSON."""
        return asdict(self)


def _table(row_class: type[Base]) -> Table:
    table = row_class.__table__
    assert isinstance(table, Table)
    return table


def _row(table: Table, row: Any, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    return {c.name: row._mapping[c.name] for c in table.columns if c.name not in drop}


def _ids(conn: Connection, table: Table) -> set[str]:
    return {r[0] for r in conn.execute(select(table.c.id))}


def _copy_run(src: Connection, dst: Connection, run: Any) -> int:
    """One run and its children; the number of samples copied."""
    runs, samples, steps = _table(RunRow), _table(SampleRow), _table(StepsRow)
    dst.execute(runs.insert(), _row(runs, run))
    rid = run._mapping["id"]
    count = 0
    for smp in src.execute(select(samples).where(samples.c.run_id == rid)):
        new_id = dst.execute(
            samples.insert().returning(samples.c.id), _row(samples, smp, ("id",))
        ).scalar_one()
        count += 1
        for st in src.execute(select(steps).where(steps.c.sample_id == smp._mapping["id"])):
            dst.execute(steps.insert(), {**_row(steps, st), "sample_id": new_id})
    for child in (LayerStatsRow, PowerSamplesRow, TraceRow):
        t = _table(child)
        drop = ("id",) if "id" in t.c and child is not TraceRow else ()
        rows = [_row(t, r, drop) for r in src.execute(select(t).where(t.c.run_id == rid))]
        if rows:
            dst.execute(t.insert(), rows)
    return count


def migrate(
    source: Any, dest: Any, on_run: Callable[[int, int, str], None] | None = None
) -> MigrateReport:
    """Copy every finished, failed or crashed run of `source` into `dest` (two `Store`s).

    Sweeps and predictions come along by id, calibrations when the destination lacks one of the
    same device, host and time. `on_run(done, total, run_id)` after each run.
    """
    report = MigrateReport()
    runs_t, sweeps_t, preds_t, ceil_t = (
        _table(RunRow),
        _table(SweepRow),
        _table(PredictionRow),
        _table(CeilingsRow),
    )
    with source.engine.connect() as src:
        with dest.engine.begin() as dst:
            have = _ids(dst, sweeps_t)
            new = [_row(sweeps_t, r) for r in src.execute(select(sweeps_t)) if r.id not in have]
            if new:
                dst.execute(sweeps_t.insert(), new)
            report.sweeps = len(new)
            have = _ids(dst, preds_t)
            new = [_row(preds_t, r) for r in src.execute(select(preds_t)) if r.id not in have]
            if new:
                dst.execute(preds_t.insert(), new)
            report.predictions = len(new)
            seen = {(r.device, r.host, r.created) for r in dst.execute(select(ceil_t))}
            new = [
                _row(ceil_t, r, ("id",))
                for r in src.execute(select(ceil_t))
                if (r.device, r.host, r.created) not in seen
            ]
            if new:
                dst.execute(ceil_t.insert(), new)
            report.ceilings = len(new)
        with dest.engine.connect() as dst:
            have = _ids(dst, runs_t)
        rows = list(src.execute(select(runs_t).order_by(runs_t.c.created)))
        for i, run in enumerate(rows):
            if run.status == "running":
                report.still_running += 1
            elif run.id in have:
                report.already_there += 1
            else:
                with dest.engine.begin() as dst:  # one transaction per run
                    report.samples += _copy_run(src, dst, run)
                report.runs += 1
            if on_run is not None:
                on_run(i + 1, len(rows), run.id)
    return report
