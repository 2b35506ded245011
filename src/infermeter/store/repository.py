"""`Store`: runs and their samples in SQLite (default) or any SQLAlchemy URL (PostgreSQL).

SQLite is opened in WAL mode with a busy timeout, so a reader (the dashboard, `runs list`) never
blocks a writer and two writers wait for each other instead of failing at once. A run is
registered as `running` with its host, pid and the pid's start time; whenever a store is opened,
runs of this host whose process is gone (or whose pid now belongs to another process) are
marked `crashed`.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import struct
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
from sqlalchemy import create_engine, event, func, inspect, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DatabaseError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from infermeter.errors import UserError
from infermeter.paths import data_dir
from infermeter.run.results import RunResult, SampleResult
from infermeter.store.schema import (
    ADDED_COLUMNS,
    POWER_CHUNK,
    SCHEMA_VERSION,
    Base,
    CeilingsRow,
    LayerStatsRow,
    Meta,
    PowerSamplesRow,
    RunRow,
    SampleRow,
    StepsRow,
    SweepRow,
    TraceRow,
)

DB_ENV = "INFERMETER_DB"
#: The in-progress per-layer table of a running run (for live views), replaced by the final ones.
LIVE_LAYERS = "live_layers"
TIMEOUT_ENV = "INFERMETER_DB_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 10.0


def default_url() -> str:
    """`INFERMETER_DB` if set, else a SQLite file in the user data folder."""
    return os.environ.get(DB_ENV) or f"sqlite:///{data_dir() / 'infermeter.db'}"


def _normalise(url: str | os.PathLike[str]) -> str:
    """Accept a plain file path (str or Path) as well as a URL."""
    url = os.fspath(url)
    return url if "://" in url else f"sqlite:///{Path(url).expanduser().resolve()}"


def _sqlite_path(url: str) -> Path | None:
    if not url.startswith("sqlite:///") or url == "sqlite:///:memory:":
        return None
    return Path(url.removeprefix("sqlite:///"))


def _pack(values: tuple[float, ...] | list[float]) -> bytes:
    return struct.pack(f"<{len(values)}d", *values)


def _unpack(blob: bytes, count: int) -> tuple[float, ...]:
    return struct.unpack(f"<{count}d", blob) if count else ()


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class Store:
    """The database of runs.

    Args:
        url: SQLAlchemy URL or SQLite file path; None uses `default_url()`.
        timeout_s: how long a write waits for a lock before giving up (SQLite).
    """

    def __init__(
        self, url: str | os.PathLike[str] | None = None, *, timeout_s: float | None = None
    ) -> None:
        self.url = _normalise(url or default_url())
        if timeout_s is None:
            timeout_s = float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S))
        self.timeout_s = timeout_s
        path = _sqlite_path(self.url)
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UserError(
                    f"cannot create the database folder {str(path.parent)!r} ({exc.strerror})",
                    "pass a writable --db path or set INFERMETER_DB",
                ) from None
        self.engine = self._engine()
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._written: dict[str, set[int]] = {}  # samples kept as they came, per run
        with self._guard("open"):
            Base.metadata.create_all(self.engine)
            self._check_version()
        self.recover_crashed()

    def _engine(self) -> Engine:
        kwargs: dict[str, Any] = {}
        if self.url.startswith("sqlite"):
            kwargs["connect_args"] = {"timeout": self.timeout_s}
        engine = create_engine(self.url, **kwargs)
        if self.url.startswith("sqlite"):
            timeout_ms = int(self.timeout_s * 1000)

            @event.listens_for(engine, "connect")
            def _pragmas(dbapi_conn: Any, _record: Any) -> None:
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                # WAL + NORMAL: commits skip the fsync (the WAL is synced at checkpoints); a
                # power cut can lose the last commits, never corrupt the file. A sweep commits
                # per point, and the fsync was most of its time outside model calls.
                cur.execute("PRAGMA synchronous=NORMAL")
                cur.execute(f"PRAGMA busy_timeout={timeout_ms}")
                cur.execute("PRAGMA foreign_keys=ON")
                cur.close()

        return engine

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Turn database failures into one-line user errors."""
        where = str(_sqlite_path(self.url) or self.url)
        try:
            yield
        except OperationalError as exc:
            text = str(exc.orig) if exc.orig else str(exc)
            if "locked" in text or "busy" in text:
                raise UserError(
                    f"database {where!r} is locked by another process ({action})",
                    "wait for it to finish, or use another --db",
                ) from None
            raise UserError(
                f"cannot {action} database {where!r}: {text}",
                "check the path and permissions, or use another --db",
            ) from None
        except DatabaseError as exc:
            text = str(exc.orig) if exc.orig else str(exc)
            raise UserError(
                f"database {where!r} is unreadable: {text}",
                "move the file aside (it is not an infermeter database) or use another --db",
            ) from None

    @contextmanager
    def session(self, action: str = "write") -> Iterator[Session]:
        """A session that commits on success and rolls back on error."""
        with self._guard(action), self._sessions() as s, s.begin():
            yield s

    def _check_version(self) -> None:
        with self._sessions() as s, s.begin():
            row = s.get(Meta, "schema_version")
            if row is None:
                s.add(Meta(key="schema_version", value=str(SCHEMA_VERSION)))
            elif int(row.value) > SCHEMA_VERSION:
                raise UserError(
                    f"database schema version {row.value} is newer than this infermeter "
                    f"({SCHEMA_VERSION})",
                    "upgrade infermeter or use another --db",
                )
            else:  # older, or a development copy of this version: add what is missing
                self._upgrade(s, 1)
                row.value = str(SCHEMA_VERSION)

    def _upgrade(self, s: Session, version: int) -> None:
        """Add the columns newer versions introduced (new tables come from create_all)."""
        have = {
            t: {c["name"] for c in inspect(s.connection()).get_columns(t)}
            for t in ("runs", "samples", "sweeps")
        }
        for v in range(version + 1, SCHEMA_VERSION + 1):
            for table, column, kind in ADDED_COLUMNS.get(v, []):
                if column not in have[table]:
                    s.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {kind}"))

    # -- writing -----------------------------------------------------------------------------

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

    def add_sample(self, run_id: str, smp: SampleResult) -> None:
        """Keep one sample as soon as it is measured (live views read it; a crash keeps it)."""
        with self.session("write to") as s:
            sample = _sample_row(smp)
            sample.run_id = run_id
            s.add(sample)
        self._written.setdefault(run_id, set()).add(smp.index)

    def live_layers(self, run_id: str, rows: list[dict[str, Any]]) -> None:
        """Replace the run's in-progress per-layer table (dropped when the run finishes)."""
        with self.session("write to") as s:
            row = s.get(RunRow, run_id)
            for live in [ls for ls in row.layer_stats if ls.table == LIVE_LAYERS]:
                row.layer_stats.remove(live)
            row.layer_stats.append(LayerStatsRow(table=LIVE_LAYERS, rows=rows))

    @staticmethod
    def _update_sample_energy(s: Session, run_id: str, smp: SampleResult) -> None:
        """Energy is attributed after the last sample: add it to samples stored earlier."""
        if smp.energy is None:
            return
        r = s.scalars(
            select(SampleRow).where(SampleRow.run_id == run_id, SampleRow.index == smp.index)
        ).first()
        if r is not None:
            r.energy = smp.energy

    def finish_run(self, result: RunResult) -> None:
        """Write final status, phases and every sample not yet kept, in one transaction."""
        with self.session("write to") as s:
            row = s.get(RunRow, result.run_id)
            if row is None:
                raise UserError(f"run {result.run_id} vanished from the database", "run it again")
            row.status = result.status
            row.error = result.error
            row.phases = dict(result.phases)
            row.notes = list(result.notes)
            row.finished = _now()
            written = self._written.pop(result.run_id, set())
            for smp in result.samples:
                if smp.index in written:
                    self._update_sample_energy(s, result.run_id, smp)
                    continue
                row.samples.append(_sample_row(smp))
            for live in [ls for ls in row.layer_stats if ls.table == LIVE_LAYERS]:
                row.layer_stats.remove(live)
            row.energy = result.energy
            row.checks = result.checks or None
            row.knobs = result.knobs
            if result.power is not None:
                row.power.extend(_power_rows(result.power))
            for table, rows in result.layers.items():
                row.layer_stats.append(LayerStatsRow(table=table, rows=rows))
            if result.trace is not None:
                t = result.trace
                row.trace = TraceRow(
                    dtype=t["dtype"],
                    count=t["count"],
                    offset_ms=t["offset_ms"],
                    modules=t["modules"],
                    records=t["records"],
                )

    def save(self, result: RunResult) -> str:
        """Store a finished result made without a store (Python API); return its id."""
        result.run_id = self.begin_run(result)
        self.finish_run(result)
        return result.run_id

    def begin_sweep(self, sweep_id: str, name: str, knobs: dict[str, Any], spec: dict) -> bool:
        """Register a sweep; False when it already exists (a rerun that resumes it)."""
        with self.session("write to") as s:
            if s.get(SweepRow, sweep_id) is not None:
                return False
            s.add(SweepRow(id=sweep_id, name=name, knobs=knobs, created=_now(), spec=spec))
            return True

    def save_ceilings(self, ceilings: Any) -> None:
        """Keep measured ceilings (an `analysis.hardware.Ceilings`) for this host."""
        with self.session("write to") as s:
            s.add(
                CeilingsRow(
                    device=ceilings.device,
                    host=socket.gethostname(),
                    flops=ceilings.flops,
                    bandwidth=ceilings.bandwidth,
                    source=ceilings.source,
                    details=ceilings.details,
                    created=_now(),
                )
            )

    def measured_ceilings(self, device: str) -> Any:
        """The newest ceilings measured on this host for `device`, or None."""
        from infermeter.analysis.hardware import Ceilings

        with self.session("read") as s:
            row = s.scalars(
                select(CeilingsRow)
                .where(CeilingsRow.device == device, CeilingsRow.host == socket.gethostname())
                .order_by(CeilingsRow.id.desc())
                .limit(1)
            ).first()
            if row is None:
                return None
            return Ceilings(
                row.device, dict(row.flops), row.bandwidth, row.source, True, dict(row.details)
            )

    # -- reading -----------------------------------------------------------------------------

    def sweep(self, sweep_id: str) -> dict[str, Any]:
        """A sweep's row (id, name, knobs, created, spec), by id or unique prefix."""
        sid = sweep_id.strip().lower()
        with self.session("read") as s:
            rows = s.scalars(select(SweepRow).where(SweepRow.id.startswith(sid)).limit(3)).all()
            if len(rows) != 1 or not sid:
                raise UserError(
                    f"no sweep {sweep_id!r} in {self.where}"
                    if not rows
                    else f"sweep id {sweep_id!r} is ambiguous",
                    "see `infermeter sweeps list`" if not rows else "type more of it",
                )
            r = rows[0]
            return {
                "id": r.id,
                "name": r.name,
                "knobs": r.knobs,
                "created": r.created,
                "spec": r.spec or {},
            }

    def sweep_run_ids(self, sweep_id: str, status: str | None = "finished") -> list[str]:
        """Ids of a sweep's runs (finished ones by default), oldest first."""
        with self.session("read") as s:
            q = select(RunRow.id).where(RunRow.sweep_id == sweep_id).order_by(RunRow.created)
            if status is not None:
                q = q.where(RunRow.status == status)
            return list(s.scalars(q).all())

    def list_sweeps(self) -> list[dict[str, Any]]:
        """Every sweep, newest first, with its count of finished runs."""
        with self.session("read") as s:
            rows = s.execute(
                select(SweepRow, func.count(RunRow.id))
                .outerjoin(RunRow, (RunRow.sweep_id == SweepRow.id) & (RunRow.status == "finished"))
                .group_by(SweepRow.id)
                .order_by(SweepRow.created.desc())
            ).all()
            return [
                {"id": r.id, "name": r.name, "knobs": r.knobs, "created": r.created, "runs": n}
                for r, n in rows
            ]

    def resolve(self, run_id: str) -> str:
        """Full id of a run from its id or a unique prefix of it."""
        rid = run_id.strip().lower()
        if not rid or not all(c in "0123456789abcdef" for c in rid):
            raise UserError(
                f"{run_id!r} is not a run id", "run ids are hex, see `infermeter runs list`"
            )
        with self.session("read") as s:
            ids = s.scalars(select(RunRow.id).where(RunRow.id.startswith(rid)).limit(3)).all()
        if not ids:
            raise UserError(f"no run {run_id!r} in {self.where}", "see `infermeter runs list`")
        if len(ids) > 1:
            raise UserError(f"run id {run_id!r} is ambiguous", "type more of it")
        return ids[0]

    @property
    def where(self) -> str:
        """The database file or URL, for messages."""
        return str(_sqlite_path(self.url) or self.url)

    def get(self, run_id: str) -> RunResult:
        """The run with this id (or unique prefix), samples included."""
        rid = self.resolve(run_id)
        with self.session("read") as s:
            row = s.get(RunRow, rid)
            samples = [_sample(r) for r in row.samples]
            return RunResult(
                run_id=row.id,
                config=row.config,
                knobs=row.knobs,
                model_info=row.model_info,
                device=row.device,
                versions=row.versions,
                created=row.created,
                phases=row.phases or {},
                samples=samples,
                status=row.status,
                error=row.error,
                notes=row.notes or [],
                layers={ls.table: ls.rows for ls in row.layer_stats},
                trace=_trace(row.trace),
                energy=row.energy,
                power=_power(row.power),
                sweep_id=row.sweep_id,
                checks=row.checks or {},
            )

    def list_runs(
        self,
        *,
        model: str | None = None,
        status: str | None = None,
        since: str | None = None,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        """Newest runs first, with per-run means of the main metrics over measured samples."""
        measured = ~SampleRow.warmup
        stats = (
            select(
                SampleRow.run_id.label("rid"),
                func.count(SampleRow.id).label("n"),
                func.avg(SampleRow.ttft_ms).label("ttft"),
                func.avg(SampleRow.decode_ms / func.nullif(SampleRow.new_tokens - 1, 0)).label(
                    "tpot"
                ),
                func.avg(
                    SampleRow.batch_size * SampleRow.new_tokens * 1000.0 / SampleRow.total_ms
                ).label("tps"),
            )
            .where(measured)
            .group_by(SampleRow.run_id)
            .subquery()
        )
        q = select(RunRow, stats).outerjoin(stats, stats.c.rid == RunRow.id)
        if model:
            q = q.where(RunRow.model_spec == model)
        if status:
            q = q.where(RunRow.status == status)
        if since:
            q = q.where(RunRow.created >= since)
        q = q.order_by(RunRow.created.desc(), RunRow.id).limit(limit)
        with self.session("read") as s:
            return [
                {
                    "id": run.id,
                    "created": run.created,
                    "status": run.status,
                    "model": run.model_spec,
                    "mode": run.mode,
                    "device": (run.device or {}).get("name"),
                    "samples": n or 0,
                    "ttft_ms": ttft,
                    "tpot_ms": tpot,
                    "tokens_per_s": tps,
                    "error": run.error,
                }
                for run, _rid, n, ttft, tpot, tps in s.execute(q).all()
            ]

    def runs_frame(self, **filters: Any) -> Any:
        """`list_runs` as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.list_runs(**filters))

    def delete(self, run_id: str) -> str:
        """Delete a run and its samples; return the full id deleted."""
        rid = self.resolve(run_id)
        with self.session("write to") as s:
            s.delete(s.get(RunRow, rid))
        return rid

    # -- live views: what changed since a cursor (autoincrement ids) -------------------------

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
                select(SampleRow, RunRow.model_spec, RunRow.status)
                .join(RunRow, RunRow.id == SampleRow.run_id)
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
                }
                for r, model, status in rows
            ]

    def live_layers_after(self, last_id: int) -> list[dict[str, Any]]:
        """In-progress per-layer tables stored after `last_id` (newest per run)."""
        with self.session("read") as s:
            rows = s.scalars(
                select(LayerStatsRow)
                .where(LayerStatsRow.id > last_id, LayerStatsRow.table == LIVE_LAYERS)
                .order_by(LayerStatsRow.id)
            ).all()
            return [{"id": r.id, "run_id": r.run_id, "rows": r.rows} for r in rows]

    def older_than(self, cutoff: str) -> list[str]:
        """Ids of runs created before `cutoff` (ISO timestamp), oldest first."""
        with self.session("read") as s:
            q = select(RunRow.id).where(RunRow.created < cutoff).order_by(RunRow.created)
            return list(s.scalars(q).all())

    def delete_many(self, run_ids: list[str]) -> int:
        """Delete these runs (with samples, steps, tables, traces, power) in one transaction."""
        with self.session("write to") as s:
            for rid in run_ids:
                row = s.get(RunRow, rid)
                if row is not None:
                    s.delete(row)
        return len(run_ids)

    def recover_crashed(self) -> int:
        """Mark `crashed` the runs of this host left `running` by a process that is gone."""
        host = socket.gethostname()
        changed = 0
        with self.session("write to") as s:
            rows = s.scalars(
                select(RunRow).where(RunRow.status == "running", RunRow.host == host)
            ).all()
            for row in rows:
                if not _alive(row.pid, row.pid_started):
                    row.status = "crashed"
                    row.error = row.error or "the profiling process ended without finishing"
                    row.finished = _now()
                    changed += 1
        return changed


def _trace(t: TraceRow | None) -> dict[str, Any] | None:
    if t is None:
        return None
    return {
        "dtype": t.dtype,
        "count": t.count,
        "offset_ms": t.offset_ms,
        "modules": t.modules,
        "records": t.records,
    }


def _alive(pid: int, started: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return abs(proc.create_time() - started) < 1.0
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


def _sample(r: SampleRow) -> SampleResult:
    steps = _unpack(r.steps.step_ms, r.steps.count) if r.steps else ()
    return SampleResult(
        index=r.index,
        warmup=r.warmup,
        batch_size=r.batch_size,
        prompt_tokens=r.prompt_tokens,
        new_tokens=r.new_tokens,
        vision_tokens=r.vision_tokens,
        start_ms=r.start_ms,
        ttft_ms=r.ttft_ms,
        step_ms=tuple(steps),
        memory=r.memory or {},
        output_text=tuple(r.output_text or ()),
        prompt_text=tuple(r.prompt_text or ()),
        energy=r.energy,
    )


def _sample_row(smp: SampleResult) -> SampleRow:
    sample = SampleRow(
        index=smp.index,
        warmup=smp.warmup,
        batch_size=smp.batch_size,
        prompt_tokens=smp.prompt_tokens,
        new_tokens=smp.new_tokens,
        vision_tokens=smp.vision_tokens,
        start_ms=smp.start_ms,
        ttft_ms=smp.ttft_ms,
        decode_ms=smp.decode_ms,
        total_ms=smp.total_ms,
        rss_peak_mb=smp.rss_peak_mb,
        peak_allocated_mb=smp.peak_allocated_mb,
        memory=smp.memory,
        output_text=list(smp.output_text),
        prompt_text=list(smp.prompt_text),
        energy=smp.energy,
    )
    sample.steps = StepsRow(count=len(smp.step_ms), step_ms=_pack(smp.step_ms))
    return sample


def _power_rows(power: dict[str, Any]) -> list[PowerSamplesRow]:
    """The sampler's readings in batches of POWER_CHUNK rows, packed as float64."""
    t, joules = power["t_ms"], power["joules"]
    rows = []
    for chunk, start in enumerate(range(0, len(t), POWER_CHUNK)):
        part_t = t[start : start + POWER_CHUNK]
        part_j = [x for reading in joules[start : start + POWER_CHUNK] for x in reading]
        rows.append(
            PowerSamplesRow(
                chunk=chunk,
                count=len(part_t),
                source=power["source"],
                domains=list(power["domains"]),
                t_ms=_pack(part_t),
                joules=_pack(part_j),
            )
        )
    return rows


def _power(rows: list[PowerSamplesRow]) -> dict[str, Any] | None:
    """Readings back from their chunks (None for runs without energy)."""
    if not rows:
        return None
    n_dom = len(rows[0].domains)
    t: list[float] = []
    joules: list[list[float]] = []
    for r in rows:
        t.extend(_unpack(r.t_ms, r.count))
        flat = _unpack(r.joules, r.count * n_dom)
        joules.extend(list(flat[i : i + n_dom]) for i in range(0, len(flat), n_dom))
    return {"source": rows[0].source, "domains": list(rows[0].domains), "t_ms": t, "joules": joules}
