"""Writing runs, sweeps and ceilings; deleting runs; marking crashed runs.

A run is registered as `running` with its host, pid and the pid's start time; whenever a store
is opened, runs of this host whose process is gone (or whose pid now belongs to another
process) are marked `crashed`. Samples may be kept one by one as they are measured (live views,
crash safety); `finish_run` then writes the rest in one transaction.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

import psutil
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from infermeter.errors import UserError
from infermeter.measure.ceilings import Ceilings
from infermeter.store.engine import DiskFull, StoreCore, sqlite_path
from infermeter.store.rows import power_rows, sample_row, trace_row
from infermeter.store.schema import (
    CeilingsRow,
    LayerStatsRow,
    PredictionRow,
    ProgressRow,
    RunRow,
    SampleRow,
    SweepRow,
)
from infermeter.util.timestamps import now_iso

if TYPE_CHECKING:  # annotations only: run.results imports numpy, slow for `runs list`
    from infermeter.instrument.tables import LayerRowDoc
    from infermeter.run.document import LoadPrediction, Prediction
    from infermeter.run.progress import ProgressDoc
    from infermeter.run.results import RunResult, SampleResult
    from infermeter.run.sweep_spec import SweepSpecDoc

#: The in-progress per-layer table of a running run (for live views), replaced by the final ones.
LIVE_LAYERS = "live_layers"
#: Why a write was refused for lack of space, kept on the run once there is room again.
CUT_BY_FULL_DISK = "its store write failed: the disk holding the database was full"
#: Runs of this process whose write was refused for lack of space: (database, run id). This
#: process is alive, so the "process is gone" check never marks them; the next open of the
#: database in this process (with room again) marks them failed.
_CUT_SHORT: set[tuple[str, str]] = set()


def _alive(pid: int, started: float) -> bool:
    """The process `pid` still runs and is the one that started at `started` (not a reuse)."""
    try:
        proc = psutil.Process(pid)
        return bool(abs(proc.create_time() - started) < 1.0)
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


def _drop_live_layers(row: RunRow) -> None:
    for live in [ls for ls in row.layer_stats if ls.table == LIVE_LAYERS]:
        row.layer_stats.remove(live)


class StoreWrites(StoreCore):
    """Every write the store makes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._written: dict[str, set[int]] = {}  # samples kept as they came, per run

    def probe_write(self) -> None:
        """Take the database's write lock and let it go at once; UserError if it cannot.

        A locked database was refused after the model had loaded (66 s in, issue 59): the
        probe waits the same busy timeout a write would, before anything loads. PostgreSQL
        locks rows, not the database: nothing to probe there.
        """
        if sqlite_path(self.url) is None:
            return
        with self._guard("write to"), self.engine.connect() as conn:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            conn.exec_driver_sql("ROLLBACK")

    def begin_run(self, result: RunResult) -> str:
        """Register `result` as a running run; return its new id."""
        run_id = uuid.uuid4().hex[:12]
        me = psutil.Process()
        with self.session("write to") as s:
            s.add(
                RunRow(
                    id=run_id,
                    status="running",
                    model_spec=str(result.model_info.get("spec") or result.config.get("model")),
                    model_info=result.model_info,
                    config=result.config,
                    knobs=result.knobs,
                    mode=str(result.config.get("mode", "minimal")),
                    device=result.device,
                    versions=result.versions,
                    phases=result.phases,
                    notes=result.notes,
                    created=result.created,
                    sweep_id=result.sweep_id,
                    host=socket.gethostname(),
                    pid=me.pid,
                    pid_started=me.create_time(),
                )
            )
        return run_id

    @contextmanager
    def _writing(self, run_id: str) -> Iterator[Session]:
        """A write to one run; a refusal for lack of space is remembered to mark the run."""
        try:
            with self.session("write to") as s:
                yield s
        except DiskFull:
            _CUT_SHORT.add((self.url, run_id))
            raise

    def add_sample(self, run_id: str, smp: SampleResult) -> None:
        """Keep one sample as soon as it is measured (live views read it; a crash keeps it)."""
        self.add_samples(run_id, [smp])

    def add_samples(self, run_id: str, samples: list[SampleResult]) -> None:
        """Keep several samples in one transaction (a load's keeper writes what it gathered)."""
        with self._writing(run_id) as s:
            for smp in samples:
                sample = sample_row(smp)
                sample.run_id = run_id
                s.add(sample)
        self._written.setdefault(run_id, set()).update(smp.index for smp in samples)

    def live_layers(self, run_id: str, rows: list[LayerRowDoc]) -> None:
        """Replace the run's in-progress per-layer table (dropped when the run finishes)."""
        with self._writing(run_id) as s:
            row = s.get(RunRow, run_id)
            if row is None:
                raise UserError(f"run {run_id} vanished from the database", "run it again")
            _drop_live_layers(row)
            row.layer_stats.append(LayerStatsRow(table=LIVE_LAYERS, rows=rows))

    def progress(self, key: str, state: ProgressDoc | None) -> None:
        """Replace profile `key`'s progress row with `state`, or delete it (None: it ended).

        `state` holds run_id, model, stage, done, total, tokens and steps (the sample being
        generated, or None).
        """
        with self.session("write to") as s:
            row = s.get(ProgressRow, key)
            if state is None:
                if row is not None:
                    s.delete(row)
                return
            if row is None:
                me = psutil.Process()
                row = ProgressRow(
                    key=key, host=socket.gethostname(), pid=me.pid, pid_started=me.create_time()
                )
                s.add(row)
            for name in ("run_id", "model", "stage", "done", "total", "tokens", "steps"):
                setattr(row, name, state.get(name))
            row.updated = now_iso()

    @staticmethod
    def _update_sample_energy(s: Session, run_id: str, smp: SampleResult) -> None:
        """Energy is attributed after the last sample: add it to samples stored earlier."""
        if smp.energy is None:
            return
        r = s.scalars(
            select(SampleRow).where(SampleRow.run_id == run_id, SampleRow.index == smp.index)
        ).first()
        if r is not None:
            r.energy = cast("dict[str, Any]", smp.energy)  # a JSON column

    def finish_run(self, result: RunResult, replace: bool = False) -> None:
        """Write final status, phases and every sample not yet kept, in one transaction.

        With `replace`, the result is the run's whole final record: its model, device and
        config are written again and its samples replace those kept as it ran (a load run's
        requests are kept as they finish for a crash, and its document is the final word).
        """
        with self._writing(str(result.run_id)) as s:
            row = s.get(RunRow, result.run_id)
            if row is None:
                raise UserError(f"run {result.run_id} vanished from the database", "run it again")
            if replace:
                row.model_spec = str(result.model_info.get("spec") or result.config.get("model"))
                row.model_info = dict(result.model_info)
                row.config = dict(result.config)
                row.mode = str(result.config.get("mode", "minimal"))
                row.device = dict(result.device)
                row.versions = dict(result.versions)
                row.samples.clear()  # delete-orphan: the kept rows go
                s.flush()
                self._written.pop(str(result.run_id), None)
            row.status = result.status
            row.error = result.error
            row.device = dict(result.device)  # what the host did while it measured is known now
            row.phases = dict(result.phases)
            row.notes = list(result.notes)
            row.finished = now_iso()
            written = self._written.pop(str(result.run_id), set())
            for smp in result.samples:
                if smp.index in written:
                    self._update_sample_energy(s, row.id, smp)
                    continue
                row.samples.append(sample_row(smp))
            _drop_live_layers(row)
            row.energy = cast("dict[str, Any] | None", result.energy)  # a JSON column
            row.checks = cast("dict[str, Any] | None", result.checks or None)  # a JSON column
            cost = result.instrument_cost
            row.instrument_cost = cost.to_dict() if cost is not None else None
            row.knobs = result.knobs
            if result.power is not None:
                row.power.extend(power_rows(result.power))
            for table, rows in result.layers.items():
                row.layer_stats.append(LayerStatsRow(table=table, rows=rows))
            if result.trace is not None:
                row.trace = trace_row(result.trace)

    def save(self, result: RunResult) -> str:
        """Store a finished result made without a store (Python API); return its id."""
        run_id = self.begin_run(result)
        result.run_id = run_id
        self.finish_run(result)
        return run_id

    def begin_sweep(
        self, sweep_id: str, name: str, knobs: dict[str, list[str]], spec: SweepSpecDoc
    ) -> bool:
        """Register a sweep; False when it already exists (a rerun that resumes it)."""
        with self.session("write to") as s:
            if s.get(SweepRow, sweep_id) is not None:
                return False
            s.add(SweepRow(id=sweep_id, name=name, knobs=knobs, created=now_iso(), spec=spec))
            return True

    def save_ceilings(self, ceilings: Ceilings) -> None:
        """Keep measured ceilings for this host."""
        with self.session("write to") as s:
            s.add(
                CeilingsRow(
                    device=ceilings.device,
                    host=socket.gethostname(),
                    flop_per_s=ceilings.flop_per_s,
                    bandwidth_bytes_per_s=ceilings.bandwidth_bytes_per_s,
                    source=ceilings.source,
                    details={
                        **ceilings.details,
                        "kind": ceilings.kind,
                        "memory_bytes": ceilings.memory_bytes,
                    },
                    created=now_iso(),
                )
            )

    def save_prediction(self, doc: Prediction | LoadPrediction) -> str:
        """Keep a prediction document (`predict`'s or `load predict`'s); returns its id."""
        pid = uuid.uuid4().hex[:12]
        with self.session("write to") as s:
            s.add(
                PredictionRow(
                    id=pid,
                    model_spec=str(doc.get("model")),
                    hardware=str((doc.get("hardware") or {}).get("key")),
                    doc=doc,
                    created=now_iso(),
                )
            )
        return pid

    def delete_many(self, run_ids: list[str], force: bool = False) -> int:
        """Delete these runs (with samples, steps, tables, traces, power) in one transaction.

        A run still running belongs to a live process (the store marks the runs of dead ones
        crashed when it opens): deleting it lost every sample the profile then wrote, so it is
        refused, before anything is deleted, unless `force`.

        Raises:
            UserError: a run among `run_ids` is running and `force` is False.
        """
        with self.session("write to") as s:
            rows = [row for rid in run_ids if (row := s.get(RunRow, rid)) is not None]
            running = [r for r in rows if r.status == "running"]
            if running and not force:
                r = running[0]
                more = f" (and {len(running) - 1} more)" if len(running) > 1 else ""
                raise UserError(
                    f"run {r.id} is still running (pid {r.pid} on {r.host}){more}",
                    "wait for it to finish or stop it; --force deletes it anyway",
                )
            for row in rows:
                s.delete(row)
        return len(rows)

    def free_share(self) -> float:
        """The share of a SQLite file's pages that are free (0 for other databases)."""
        from sqlalchemy import text

        if sqlite_path(self.url) is None:
            return 0.0
        with self._guard("read"), self.engine.connect() as conn:
            free = int(conn.execute(text("PRAGMA freelist_count")).scalar() or 0)
            pages = int(conn.execute(text("PRAGMA page_count")).scalar() or 0)
        return free / pages if pages else 0.0

    def disk_parts(self) -> tuple[int, int] | None:
        """A SQLite database's bytes on disk as (the file, its write-ahead log); None otherwise.

        What a delete gives back is this before the delete less this after the vacuum: the
        delete itself grows the WAL, which the vacuum's checkpoint then truncates, so bytes
        counted from after the delete claimed 129.2 MiB back from a 67.6 MB file (issue 35).
        Apart, because the log is not the data: `runs delete` said "3.3 MiB given back" of a
        0.9 MiB database when most of it was the log's truncation (issue 59).
        """
        from pathlib import Path

        path = sqlite_path(self.url)
        if path is None:
            return None
        main, wal = Path(path), Path(str(path) + "-wal")
        return (
            main.stat().st_size if main.exists() else 0,
            wal.stat().st_size if wal.exists() else 0,
        )

    def checkpoint(self) -> None:
        """Move a SQLite write-ahead log's pages into the file and truncate it (no-op else).

        Done before a delete is measured, so the file holds every row the delete can free.
        """
        from sqlalchemy import text

        if sqlite_path(self.url) is None:
            return
        with self._guard("vacuum"), self.engine.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))

    def reclaim(self) -> int:
        """After a delete: give freed pages back to the file system; return the bytes freed.

        A SQLite file made with incremental auto-vacuum (every new database) frees its free
        pages in place, without rewriting the file; an older file is VACUUMed (once, which
        also switches it to incremental) when over a quarter of it is free. PostgreSQL's own
        autovacuum reuses the space: nothing to do here (`db vacuum` runs VACUUM FULL).
        """
        from sqlalchemy import text

        path = sqlite_path(self.url)
        if path is None:
            return 0
        with self._guard("vacuum"), self.engine.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            if int(conn.execute(text("PRAGMA auto_vacuum")).scalar() or 0) == 2:
                before = _file_bytes(path)
                # as a script on the driver's connection: each step of the statement frees one
                # page, and a plain execute (SQLAlchemy's or sqlite3's) steps it only once
                raw = conn.connection.driver_connection
                assert raw is not None
                raw.executescript("PRAGMA incremental_vacuum;")
                conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
                return max(0, before - _file_bytes(path))
        return self.vacuum() if self.free_share() > 0.25 else 0

    def vacuum(self) -> int:
        """Give the space of deleted rows back to the file system; return the bytes freed.

        SQLite: VACUUM rewrites the file (the WAL is checkpointed first, so its size counts
        too). PostgreSQL: VACUUM FULL, measured with pg_database_size. Both run outside a
        transaction, as they must.
        """
        from sqlalchemy import text

        path = sqlite_path(self.url)
        with self._guard("vacuum"), self.engine.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            if path is not None:
                before = _file_bytes(path)
                conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
                # an older file without auto-vacuum switches to it here (only VACUUM can)
                conn.execute(text("PRAGMA auto_vacuum=INCREMENTAL"))
                conn.execute(text("VACUUM"))
                conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
                return max(0, before - _file_bytes(path))
            size = text("SELECT pg_database_size(current_database())")
            before = int(conn.execute(size).scalar() or 0)
            conn.execute(text("VACUUM FULL"))
            return max(0, before - int(conn.execute(size).scalar() or 0))

    def recover_crashed(self) -> int:
        """Mark `crashed` the runs of this host left `running` by a process that is gone.

        The progress rows of this host's gone processes are deleted too (the live page's
        "in progress" lines). Runs of this process cut short by a full disk are marked
        `failed` with that reason. Returns the runs marked.
        """
        host = socket.gethostname()
        changed = self._mark_cut_short()
        with self.session("read") as s:  # most opens find none: write only when there are some
            running = s.scalars(
                select(RunRow.id).where(RunRow.status == "running", RunRow.host == host)
            ).all()
            lines = s.execute(
                select(ProgressRow.key, ProgressRow.pid, ProgressRow.pid_started).where(
                    ProgressRow.host == host
                )
            ).all()
        stale = [k for k, pid, started in lines if pid is None or not _alive(pid, started or 0)]
        if stale:
            with self.session("write to") as s:
                s.execute(delete(ProgressRow).where(ProgressRow.key.in_(stale)))
        if not running:
            return changed
        with self.session("write to") as s:
            rows = s.scalars(
                select(RunRow).where(RunRow.status == "running", RunRow.host == host)
            ).all()
            for row in rows:
                if not _alive(row.pid, row.pid_started):
                    row.status = "crashed"
                    row.error = row.error or "the profiling process ended without finishing"
                    row.finished = now_iso()
                    changed += 1
        return changed

    def _mark_cut_short(self) -> int:
        """Mark `failed` this process's runs of this database whose write found the disk full.

        Such a run's process lives on (a notebook, the dashboard, a sweep going on to its next
        point), so it would stay `running` for as long as that process does. With no room yet
        the marks wait for the next open.
        """
        mine = [run_id for url, run_id in _CUT_SHORT if url == self.url]
        if not mine:
            return 0
        changed = 0
        with self.session("write to") as s:
            for run_id in mine:
                row = s.get(RunRow, run_id)
                if row is not None and row.status == "running":
                    row.status = "failed"
                    row.error = row.error or CUT_BY_FULL_DISK
                    row.finished = now_iso()
                    changed += 1
        _CUT_SHORT.difference_update((self.url, run_id) for run_id in mine)
        return changed


def _file_bytes(path: Any) -> int:
    """A SQLite database's size on disk: the file and its WAL."""
    from pathlib import Path

    total = 0
    for p in (Path(path), Path(str(path) + "-wal")):
        if p.exists():
            total += p.stat().st_size
    return total
