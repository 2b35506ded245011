"""Sweeps: a grid over knob values, every point a stored run, resumable, interruptible.

A sweep's id is a hash of what defines it (model, base configuration, knob grid), so running the
same sweep again finds it in the store and skips every point that already has a finished run:
that is how an interrupted sweep resumes. Ctrl-C during a point stores that run as failed
(its samples kept) and stops; the finished points stay. Points are ordered so that a model is
loaded once per load-time value (dtype), and all values are parsed and checked against the model
before the first point runs. Each point's knobs are verified by measurement (knobs/base.py) and
the evidence is stored with its run. An interleaved sweep (`interleave=True`) measures its
unfinished points together, one sample each per round (run/interleave.py), so that a drift of
the machine falls on every point alike.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, cast

from infermeter.knobs import Knob, KnobNotApplied
from infermeter.knobs.evidence import KnobCheckDoc
from infermeter.models.loader import LoadedModel, load_model
from infermeter.run.components import phase_components
from infermeter.run.config import RunConfig
from infermeter.run.interleave import Arm, check_interleavable, profile_interleaved
from infermeter.run.profiling import profile
from infermeter.run.refusals import refuse_from_config
from infermeter.run.results import METRICS, ChecksDoc, RunResult, SampleRowDoc
from infermeter.run.sink import RunSink, StoredSweeps, SweepStore
from infermeter.run.sweep_spec import SweepSpec, SweepSpecDoc

#: on_progress(done, total, label, skipped): after each point.
SweepProgress = Callable[[int, int, str, bool], None]


def show(knob: Knob, value: Any) -> Any:
    """A knob value as a JSON scalar (active_layers: N, or "N:importance")."""
    if knob.name == "active_layers":
        n, order = value
        return n if order == "first" else f"{n}:{order}"
    return value


@dataclass
class SweepResult:
    """The sweep's runs (finished points), in point order, and what was skipped or failed."""

    sweep_id: str
    spec: SweepSpec
    runs: list[RunResult] = field(default_factory=list)
    skipped: int = 0
    interrupted: bool = False
    wall_s: float = 0.0
    generate_s: float = 0.0
    #: time in knob application and verification forwards (model calls that are not samples)
    verify_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The sweep's JSON document: meta, summary (per configuration) and all_samples."""
        return sweep_document(self.sweep_id, self.spec.to_dict(), self.runs)


def _point_key(point: dict[str, Any], grid: dict[str, Knob]) -> str:
    return json.dumps({k: show(grid[k], v) for k, v in point.items()}, sort_keys=True)


def _run_key(run: RunResult, names: list[str]) -> str:
    return json.dumps({k: run.knobs.get(k) for k in names}, sort_keys=True)


def run_sweep(
    spec: SweepSpec,
    store: SweepStore,
    *,
    on_progress: SweepProgress | None = None,
    loaded: LoadedModel | None = None,
) -> SweepResult:
    """Run every point of `spec` not already finished in `store`; return all finished points.

    Raises:
        UserError: a knob, value or base setting the model cannot take (nothing run).
        KeyboardInterrupt: after storing what was done (the caller says how to resume).
        KnobNotApplied: a knob's verification failed (a bug, never silently ignored).
    """
    spec.base.validate()
    grid_list = spec.parsed()
    grid = {k.name: k for k, _ in grid_list}
    points = spec.points()
    base = spec.base
    models: dict[str, LoadedModel] = {}

    def model_for(dtype: str) -> LoadedModel:
        if dtype not in models:
            if loaded is not None and dtype == base.dtype:
                models[dtype] = loaded
            else:
                models.clear()  # one model in memory at a time
                models[dtype] = load_model(
                    base.model,
                    dtype=dtype,
                    device=base.device,
                    attn_implementation=base.attn_implementation,
                    seed=base.seed,
                )
        return models[dtype]

    if loaded is None:  # what the config and the store can refuse, before the weights load
        refuse_from_config(base, {k.name: list(values) for k, values in grid_list})
    store.probe_write()
    first = model_for(base.dtype)
    for knob, values in grid_list:  # every value checked before anything runs
        for v in values:
            if knob.check is not None:
                knob.check(v, first)
    if spec.interleave:  # before anything is stored
        check_interleavable([_point_config(base, grid, p) for p in points])
    sid = spec.sweep_id
    store.begin_sweep(sid, spec.name, spec.knobs, spec.to_dict())
    names = list(grid)
    done = {_run_key(r, names): r for r in (store.get(i) for i in store.sweep_run_ids(sid))}
    dtype_knob = "dtype" in grid
    points.sort(key=lambda p: str(p.get("dtype", base.dtype)) if dtype_knob else "")
    result = SweepResult(sid, spec)
    progress = on_progress or (lambda *a: None)
    t0 = time.perf_counter()
    try:
        if spec.interleave:
            _sweep_interleaved(
                spec, grid, points, done, model_for(base.dtype), store, result, progress
            )
        else:
            _sweep_sequential(base, grid, points, done, model_for, store, result, progress)
    except KeyboardInterrupt:
        result.interrupted = True
        raise
    finally:
        result.wall_s = time.perf_counter() - t0
    return result


def _sweep_sequential(
    base: RunConfig,
    grid: dict[str, Knob],
    points: list[dict[str, Any]],
    done: dict[str, RunResult],
    model_for: Callable[[str], LoadedModel],
    store: SweepStore,
    result: SweepResult,
    progress: SweepProgress,
) -> None:
    """The points one after the other, skipping those already finished."""
    for i, point in enumerate(points):
        key = _point_key(point, grid)
        label = ", ".join(f"{k}={show(grid[k], v)}" for k, v in point.items())
        if key in done:
            result.runs.append(done[key])
            result.skipped += 1
            progress(i + 1, len(points), label, True)
            continue
        dtype = point.get("dtype", base.dtype)
        run, verify_s = run_point(
            base, grid, point, model_for(dtype), store, sweep_id=result.sweep_id
        )
        result.verify_s += verify_s
        result.runs.append(run)
        result.generate_s += sum(s.total_ms for s in run.samples) / 1e3
        progress(i + 1, len(points), label, False)


def _point_config(base: RunConfig, grid: dict[str, Knob], point: dict[str, Any]) -> RunConfig:
    """The point's configuration: config knobs set in it, dtype as the point says."""
    config_fields = {str(grid[k].field): v for k, v in point.items() if grid[k].scope == "config"}
    dtype = point.get("dtype", base.dtype)
    return replace(base, dtype=dtype, **config_fields).validate()


def _verify_after(
    grid: dict[str, Knob],
    point: dict[str, Any],
    loaded: LoadedModel,
    checks: dict[str, KnobCheckDoc],
    failures: list[KnobNotApplied],
    applied: dict[str, Any] | None = None,
) -> Callable[[RunResult], None]:
    """The hook that verifies a finished run's config knobs and files every knob's evidence.

    Model knobs were verified before the run; those that observe the run (`Knob.observed`)
    add what they saw during it, from what their `apply` yielded.
    """

    def verify_after(run: RunResult) -> None:
        for name, value in point.items():
            knob = grid[name]
            if knob.observed is not None and applied and name in applied:
                checks.setdefault(name, {})["during_run"] = knob.observed(applied[name])
            if knob.scope == "model" or knob.verify is None:
                continue
            try:
                checks[name] = knob.verify(loaded, value, run, None)
            except KnobNotApplied as exc:
                checks[name] = {"error": str(exc)}
                run.status, run.error = "failed", f"knob not applied: {exc}"
                failures.append(exc)
        # beside what the run recorded itself (a speculative run's `speculation`); each key is
        # a knob's name, which ChecksDoc names (tests/run/test_documents.py holds the two)
        run.checks.update(cast("ChecksDoc", checks))

    return verify_after


def run_point(
    base: RunConfig,
    grid: dict[str, Knob],
    point: dict[str, Any],
    loaded: LoadedModel,
    store: RunSink | None,
    *,
    sweep_id: str | None = None,
) -> tuple[RunResult, float]:
    """Run one point: its knobs applied, the run profiled, every knob verified by measurement.

    Config knobs go into the run's configuration, model knobs are applied around the run and
    undone after it, and `loaded` must already be the model for the point's load-time knobs
    (dtype). The evidence of every knob is stored as the run's `checks`, in the run's own
    transaction. Used by sweeps, experiments and systems analysis alike.

    Returns:
        The run and the seconds spent applying and verifying model knobs (model calls that
        are not samples).

    Raises:
        KnobNotApplied: a knob's verification failed; the run is stored as failed first.
    """
    config = _point_config(base, grid, point)
    model_knobs = {k: v for k, v in point.items() if grid[k].scope == "model"}
    shown = {k: show(grid[k], v) for k, v in point.items()}
    checks: dict[str, KnobCheckDoc] = {}
    failures: list[KnobNotApplied] = []
    applied: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        t0 = time.perf_counter()
        for name, value in model_knobs.items():
            knob = grid[name]
            assert knob.apply is not None and knob.verify is not None  # every model knob has both
            applied[name] = stack.enter_context(knob.apply(loaded, value))
            checks[name] = knob.verify(loaded, value, None, applied[name])
        verify_s = time.perf_counter() - t0
        run = profile(
            config,
            sink=store,
            loaded=loaded,
            sweep_id=sweep_id,
            knobs=shown,
            before_finish=_verify_after(grid, point, loaded, checks, failures, applied),
        )
    if failures:
        raise failures[0]
    return run, verify_s


def _arm(
    base: RunConfig,
    grid: dict[str, Knob],
    point: dict[str, Any],
    loaded: LoadedModel,
    failures: list[KnobNotApplied],
) -> Arm:
    """A point as an arm of an interleaved sweep.

    Its model knobs are applied around each of its samples (verified by measurement the first
    time), its config knobs verified after its run.
    """
    model_knobs = {k: v for k, v in point.items() if grid[k].scope == "model"}
    checks: dict[str, KnobCheckDoc] = {}

    @contextlib.contextmanager
    def apply() -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for name, value in model_knobs.items():
                knob = grid[name]
                assert knob.apply is not None and knob.verify is not None
                applied = stack.enter_context(knob.apply(loaded, value))
                if name not in checks:
                    checks[name] = knob.verify(loaded, value, None, applied)
            yield

    return Arm(
        config=_point_config(base, grid, point),
        knobs={k: show(grid[k], v) for k, v in point.items()},
        apply=apply,
        before_finish=_verify_after(grid, point, loaded, checks, failures),
        label=", ".join(f"{k}={show(grid[k], v)}" for k, v in point.items()),
    )


def _sweep_interleaved(
    spec: SweepSpec,
    grid: dict[str, Knob],
    points: list[dict[str, Any]],
    done: dict[str, RunResult],
    loaded: LoadedModel,
    store: SweepStore,
    result: SweepResult,
    progress: SweepProgress,
) -> None:
    """The points not yet finished, measured together in rounds (run/interleave.py).

    A resumed interleaved sweep measures its unfinished points together again, from their
    first sample: samples of different sittings would not share rounds. A single point left
    runs alone (its run carries no interleaving group, so compare treats it as sequential).
    """
    pending = [p for p in points if _point_key(p, grid) not in done]
    failures: list[KnobNotApplied] = []
    arms = [_arm(spec.base, grid, p, loaded, failures) for p in pending]
    n = len(points)
    if len(pending) == 1:  # one left to resume: nothing to interleave with, run it as it is
        run, verify_s = run_point(
            spec.base, grid, pending[0], loaded, store, sweep_id=result.sweep_id
        )
        runs = [run]
        result.verify_s += verify_s
    elif pending:
        runs = profile_interleaved(
            arms,
            loaded,
            sink=store,
            sweep_id=result.sweep_id,
            on_round=lambda r, total: progress(
                r, total, f"round {r} of {total}, {len(arms)} points interleaved", False
            ),
        )
    else:
        runs = []
    if failures:
        raise failures[0]
    fresh = dict(zip((_point_key(p, grid) for p in pending), runs, strict=True))
    for point in points:
        key = _point_key(point, grid)
        if key in done:
            result.runs.append(done[key])
            result.skipped += 1
        else:
            result.runs.append(fresh[key])
            result.generate_s += sum(s.total_ms for s in fresh[key].samples) / 1e3
    if not pending:
        progress(n, n, "all points already done", True)


def sweep_document(sweep_id: str, spec: SweepSpecDoc, runs: list[RunResult]) -> dict[str, Any]:
    """One JSON for a sweep: meta, a summary row per configuration, every sample."""
    first = runs[0] if runs else None
    summary: list[dict[str, Any]] = []
    samples: list[SampleRowDoc] = []
    for run in runs:
        stats = run.summary()
        summary.append(
            {
                "config": run.knobs,
                "run_id": run.run_id,
                "samples": len(run.measured),
                "noisy": run.noisy_metrics(),
                "checks": run.checks,
                **{k: v.to_dict() for k, v in stats.items()},
                "phases": run.phases,
                "slo": run.slo_report(),
            }
        )
        parts = phase_components(run, "prefill")
        if parts is not None:
            summary[-1]["prefill_components_ms"] = parts
        samples.extend(run.sample_row(s) for s in run.measured)
    return {
        "meta": {
            "sweep_id": sweep_id,
            "name": spec.get("name"),
            "model": first.model_info.get("spec") if first else spec["base"]["model"],
            "model_info": first.model_info if first else None,
            "device": first.device if first else None,
            "versions": first.versions if first else None,
            "created": first.created if first else None,
            "knobs": spec.get("knobs"),
            "base": spec.get("base"),
            "interleave": bool(spec.get("interleave")),
            "metrics": list(METRICS),
        },
        "summary": summary,
        "all_samples": samples,
    }


def stored_sweep(store: StoredSweeps, sweep_id: str) -> dict[str, Any]:
    """The JSON document of a stored sweep, rebuilt from its finished runs (no rerun)."""
    row = store.sweep(sweep_id)
    runs = [store.get(i) for i in store.sweep_run_ids(row["id"])]
    return sweep_document(row["id"], row["spec"], runs)


def per_config(doc: dict[str, Any], metric: str) -> list[tuple[dict[str, Any], float]]:
    """(config, median of `metric`) per summary row, for figures and fits."""
    return [(r["config"], r.get(metric, {}).get("p50")) for r in doc["summary"]]


__all__ = [
    "SweepResult",
    "SweepSpec",
    "per_config",
    "run_point",
    "run_sweep",
    "show",
    "stored_sweep",
    "sweep_document",
]
