"""Reading the store: runs by id or prefix, listings with per-run means, sweeps, ceilings."""

from __future__ import annotations

import socket
import statistics
from typing import TYPE_CHECKING, Any, TypedDict, cast

from sqlalchemy import func, select

from infermeter.errors import UserError
from infermeter.measure.ceilings import Ceilings
from infermeter.run.config import run_label
from infermeter.store.engine import StoreCore
from infermeter.store.rows import run_from_row
from infermeter.store.schema import CeilingsRow, PredictionRow, RunRow, SampleRow, SweepRow


class RunRowDoc(TypedDict):
    """One `list_runs` row: the run, what tells it apart, and its measured samples' medians."""

    id: str
    created: str
    status: str
    model: str | None
    mode: str | None
    #: knobs that are not settings of the run's config (a model knob such as top_k)
    knobs: dict[str, Any]
    #: swept knobs, model knobs and each setting off its default (run/config.py `run_label`)
    label: dict[str, Any]
    device: str | None
    samples: int
    #: the statistic of the figures below ("median")
    statistic: str
    ttft_ms: float | None
    tpot_ms: float | None
    #: a load run's: what the server delivered over the run, not one request's rate
    tokens_per_s: float | None
    error: str | None


class SweepRowDoc(TypedDict):
    """One `list_sweeps` row: the sweep and how many of its runs finished."""

    id: str
    name: str
    knobs: dict[str, Any]
    created: str
    runs: int


class PredictionRowDoc(TypedDict):
    """One `list_predictions` row: which prediction, of what, on what, when."""

    id: str
    model: str | None
    hardware: str | None
    #: "forward" (`predict`) or "load" (`load predict`)
    kind: str
    stack: str | None
    dtype: str | None
    created: str


class RunStatusDoc(TypedDict):
    """One `run_statuses` row, what the live feed polls."""

    id: str
    model: str | None
    status: str
    created: str


if TYPE_CHECKING:  # annotations only: run.results and analysis import numpy, slow for `runs list`
    from infermeter.analysis.history import HistoryRowDoc
    from infermeter.run.document import LoadPrediction, Prediction
    from infermeter.run.results import RunResult
    from infermeter.run.sink import SweepDoc
    from infermeter.run.sweep_spec import SweepSpecDoc


#: the `kind` of a stored `load predict` document (the rest are `predict`'s)
_LOAD_KIND = "infermeter-predict-load"


class StoreQueries(StoreCore):
    """Every read the store answers, except the live feed."""

    def sweep(self, sweep_id: str) -> SweepDoc:
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
                "spec": cast("SweepSpecDoc", r.spec or {}),
            }

    def sweep_run_ids(self, sweep_id: str, status: str | None = "finished") -> list[str]:
        """Ids of a sweep's runs (finished ones by default), oldest first."""
        with self.session("read") as s:
            q = select(RunRow.id).where(RunRow.sweep_id == sweep_id).order_by(RunRow.created)
            if status is not None:
                q = q.where(RunRow.status == status)
            return list(s.scalars(q).all())

    def list_sweeps(self) -> list[SweepRowDoc]:
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

    def get(self, run_id: str) -> RunResult:
        """The run with this id (or unique prefix), samples included."""
        rid = self.resolve(run_id)
        with self.session("read") as s:
            row = s.get(RunRow, rid)
            if row is None:
                raise UserError(
                    f"run {run_id!r} vanished from {self.where}", "see `infermeter runs list`"
                )
            return run_from_row(row)

    def list_runs(
        self,
        *,
        model: str | None = None,
        status: str | None = None,
        since: str | None = None,
        limit: int = 50,
    ) -> list[RunRowDoc]:
        """Newest runs first, with per-run medians of the main metrics over measured samples.

        Medians, like every headline figure (measure/stats.py): computed here from the
        samples of the listed runs, since SQL has no portable median.
        """
        q = select(RunRow)
        if model:
            q = q.where(RunRow.model_spec == model)
        if status:
            q = q.where(RunRow.status == status)
        if since:
            q = q.where(RunRow.created >= since)
        q = q.order_by(RunRow.created.desc(), RunRow.id).limit(limit)
        with self.session("read") as s:
            runs = list(s.scalars(q).all())
            by_run = _measured_samples(s, [r.id for r in runs])
            sweep_ids = {r.sweep_id for r in runs if r.sweep_id}
            grids: dict[str, dict[str, Any]] = {
                sid: knobs
                for sid, knobs in s.execute(
                    select(SweepRow.id, SweepRow.knobs).where(SweepRow.id.in_(sweep_ids))
                ).all()
            }
            return [
                _listed(run, by_run.get(run.id, []), list(grids.get(run.sweep_id or "") or {}))
                for run in runs
            ]

    def history(
        self, model: str, since: str | None = None, limit: int = 500
    ) -> list[HistoryRowDoc]:
        """Finished runs of `model`, oldest first, with their measured samples' metrics.

        One row per run: id, created, mode, device, the configuration `key` that groups runs
        which measured the same thing (the device's name, mode, knob values and every setting
        but sample counts, energy and SLOs), its label, the versions it
        ran with (git commit included), and per metric the values of its measured samples.
        Load runs (one sample per request) are left out: their figures are another kind.
        """
        q = select(RunRow).where(
            RunRow.model_spec == model, RunRow.status == "finished", RunRow.mode != "load"
        )
        if since:
            q = q.where(RunRow.created >= since)
        q = q.order_by(RunRow.created.desc(), RunRow.id).limit(limit)
        with self.session("read") as s:
            runs = list(reversed(s.scalars(q).all()))
            by_run = _measured_samples(s, [r.id for r in runs])
        return [_history_row(run, by_run.get(run.id, [])) for run in runs]

    def run_statuses(self, limit: int = 50) -> list[RunStatusDoc]:
        """Newest runs' ids, models and statuses: what the live feed polls (cheap: no samples)."""
        q = select(RunRow.id, RunRow.model_spec, RunRow.status, RunRow.created)
        q = q.order_by(RunRow.created.desc(), RunRow.id).limit(limit)
        with self.session("read") as s:
            return [
                {"id": rid, "model": model, "status": status, "created": created}
                for rid, model, status, created in s.execute(q).all()
            ]

    def older_than(self, cutoff: str, running: bool = False) -> list[str]:
        """Ids of runs created before `cutoff` (ISO timestamp), oldest first.

        Running runs (a live process is writing them) only when `running`.
        """
        with self.session("read") as s:
            q = select(RunRow.id).where(RunRow.created < cutoff).order_by(RunRow.created)
            if not running:
                q = q.where(RunRow.status != "running")
            return list(s.scalars(q).all())

    def list_predictions(self, limit: int = 100) -> list[PredictionRowDoc]:
        """The newest stored predictions: id, model, hardware, kind, stack, created."""
        with self.session("read") as s:
            rows = s.scalars(
                select(PredictionRow).order_by(PredictionRow.created.desc()).limit(limit)
            ).all()
            return [
                {
                    "id": r.id,
                    "model": r.model_spec,
                    "hardware": r.hardware,
                    "kind": "load"
                    if (r.doc or {}).get("kind") == "infermeter-predict-load"
                    else "forward",
                    "stack": _stack_key((r.doc or {}).get("stack")),
                    "dtype": (r.doc or {}).get("dtype"),
                    "created": r.created,
                }
                for r in rows
            ]

    def prediction(self, prediction_id: str) -> Prediction | LoadPrediction:
        """A stored prediction document by id: `predict`'s or `load predict`'s, by its kind."""
        from infermeter.run.document import LoadPrediction, Prediction

        with self.session("read") as s:
            row = s.get(PredictionRow, prediction_id)
            if row is None:
                raise UserError(
                    f"no prediction {prediction_id!r} in {self.where}",
                    "`infermeter predict` prints the id of each one it stores",
                )
            doc = dict(row.doc)
            return LoadPrediction(doc) if doc.get("kind") == _LOAD_KIND else Prediction(doc)

    def measured_ceilings(self, device: str, stable_only: bool = True) -> Ceilings | None:
        """The newest stable ceilings measured on this host for `device`, or None.

        A calibration judged unstable (measure/stability.py) is passed over while a stable one
        exists; with none (or `stable_only` False), the newest is returned, its
        `details["stability"]` saying why it is not to be trusted. `details["calibrated_at"]` is
        when it was measured. A calibration made with `--no-curves` takes the efficiency curves
        of the newest stable one that has them (`details["curves_from"]` says which), so a quick
        recalibration of the ceilings does not take the time model away.
        """
        with self.session("read") as s:
            rows = list(
                s.scalars(
                    select(CeilingsRow)
                    .where(CeilingsRow.device == device, CeilingsRow.host == socket.gethostname())
                    .order_by(CeilingsRow.id.desc())
                    .limit(50)
                ).all()
            )
            stable = [
                r for r in rows if ((r.details or {}).get("stability") or {}).get("stable", True)
            ]
            row = stable[0] if stable and stable_only else (rows[0] if rows else None)
            if row is None:
                return None
            details = {**dict(row.details), "calibrated_at": row.created}
            donor = next((r for r in stable if (r.details or {}).get("curves")), None)
            if not details.get("curves") and donor is not None:
                for key in ("curves", "runtime_bytes", "curves_model"):
                    details[key] = donor.details.get(key)
                details["curves_from"] = donor.created
            return Ceilings(
                row.device,
                dict(row.flop_per_s),
                row.bandwidth_bytes_per_s,
                row.source,
                True,
                details,
                memory_bytes=details.get("memory_bytes"),
                kind=str(details.get("kind", "gpu")),
            )


def _median(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def _measured_samples(s: Any, run_ids: list[str]) -> dict[str, list[Any]]:
    """Per run, in sample order: (run_id, ttft_ms, decode_ms, new_tokens, batch, total_ms)."""
    rows = s.execute(
        select(
            SampleRow.run_id,
            SampleRow.ttft_ms,
            SampleRow.decode_ms,
            SampleRow.new_tokens,
            SampleRow.batch_size,
            SampleRow.total_ms,
        )
        .where(~SampleRow.warmup, SampleRow.run_id.in_(run_ids))
        .order_by(SampleRow.index)
    ).all()
    by_run: dict[str, list[Any]] = {}
    for row in rows:
        by_run.setdefault(row[0], []).append(row)
    return by_run


#: run settings that do not change what a sample measures (how many, energy, SLOs, naming)
_NOT_MEASURED = frozenset(
    {"samples", "warmup", "energy", "power_interval_ms", "grid_g_per_kwh", "slos", "device"}
)


def _history_row(run: RunRow, samples: list[Any]) -> HistoryRowDoc:
    """One `history` row: what the run measured, under which configuration and versions."""
    import json

    device = (run.device or {}).get("name")
    knobs = dict(sorted((run.knobs or {}).items()))
    # what was measured: every setting but how often and what else was recorded
    settings = {k: v for k, v in sorted((run.config or {}).items()) if k not in _NOT_MEASURED}
    key = {"device": device, "mode": run.mode, "knobs": knobs, "settings": settings}
    return {
        "id": run.id,
        "created": run.created,
        "mode": run.mode,
        "device": device,
        "key": json.dumps(key, default=str),
        "label": " · ".join(
            [
                ", ".join(
                    f"{k}={v}" for k, v in run_label(run.config or {}, run.knobs or {}).items()
                )
                or "defaults",
                run.mode,
                str(device),
            ]
        ),
        "versions": run.versions or {},
        "values": {
            "ttft_ms": [r[1] for r in samples if r[1] is not None],
            "tpot_ms": [d / (n - 1) for _, _, d, n, _, _ in samples if d is not None and n > 1],
            "tokens_per_s": [b * n * 1000.0 / t for _, _, _, n, b, t in samples if t],
            "total_ms": [r[5] for r in samples if r[5] is not None],
        },
    }


def _listed(run: RunRow, samples: list[Any], swept: list[str]) -> RunRowDoc:
    """One `runs list` row: the run, its knobs and the medians of its measured samples."""
    tpot = [d / (n - 1) if d is not None and n and n > 1 else None for _, _, d, n, _, _ in samples]
    tps = [b * n * 1000.0 / t if t else None for _, _, _, n, b, t in samples]
    throughput = _median(tps)
    load = ((run.checks or {}).get("load") or {}).get("summary") or {}
    if run.mode == "load" and load.get("output_tokens_per_s") is not None:
        # a load run's samples are requests: what the server delivered, not one request's rate
        throughput = float(load["output_tokens_per_s"])
    return {
        "id": run.id,
        "created": run.created,
        "status": run.status,
        "model": run.model_spec,
        "mode": run.mode,
        "knobs": {k: v for k, v in (run.knobs or {}).items() if k not in (run.config or {})},
        # swept knobs, model knobs and each setting off its default: runs apart in a list
        "label": run_label(run.config or {}, run.knobs or {}, swept),
        "device": (run.device or {}).get("name"),
        "samples": len(samples),
        "statistic": "median",
        "ttft_ms": _median([r[1] for r in samples]),
        "tpot_ms": _median(tpot),
        "tokens_per_s": throughput,
        "error": run.error,
    }


def _stack_key(stack: Any) -> str | None:
    """A prediction's stack name (`predict` stores the profile, `load predict` the name)."""
    if isinstance(stack, dict):
        return str(stack.get("key")) if stack.get("key") else None
    return str(stack) if stack else None
