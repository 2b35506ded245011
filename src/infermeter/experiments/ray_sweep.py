"""Sweeps on a Ray cluster: each point a Ray task that profiles it and stores its run itself.

Ray schedules (resource requests, accelerator types, node labels, retries, cancellation); this
module only says what a point is. The driver parses the grid, has one task check every value
against the model where the points will run (the in-process sweep's guarantee: a bad value fails
before anything runs), registers the sweep, and submits every point not yet finished in the
store. A worker loads the model once per process (Ray reuses workers), runs the point exactly as
the in-process sweep does (`run_point`: knobs applied and verified by measurement), and writes
the run to the shared store from where it runs: the store must be one every node reaches
(PostgreSQL), unless Ray runs on this machine only.

Failures: a point whose worker process dies is retried once by Ray (`max_retries=1`); if it dies
again, the driver stores a failed run for the point with Ray's reason. The dead worker's own run,
begun in the store, is marked crashed by the next store opened on its host. An error inside a
point (not a death) is not retried: the run is already stored failed with its reason. Ctrl-C
cancels every outstanding task and leaves the sweep resumable (its id is its definition's hash).

Network: a local instance (`--ray local`) is started without Ray's dashboard, but Ray 2.60's
own servers (GCS, raylet, workers) still listen on every interface, and Ray offers no way to
bind them to 127.0.0.1: `ray.init(_node_ip_address="127.0.0.1")` is turned back into the
machine's address by Ray itself (`services.resolve_ip_for_localhost`). What guards them is Ray's
token authentication, on by default: a process without the token (`~/.ray/auth_token`) is
refused ("Authentication token is missing or incorrect"). Keep it on (do not set
`RAY_AUTH_MODE=disabled`) on a machine others can reach.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import Any

from infermeter.errors import UserError
from infermeter.experiments.placement import RayPlacement
from infermeter.models.loader import LoadedModel, load_model
from infermeter.run.results import RunResult
from infermeter.run.sweep import (
    SweepProgress,
    SweepResult,
    SweepSpec,
    _point_config,
    _point_key,
    _run_key,
    run_point,
    show,
)
from infermeter.util.timestamps import now_iso

#: environment variables a worker needs as the driver has them (offline hub, data folder)
PASSED_ENV = (
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "TOKENIZERS_PARALLELISM",
    "INFERMETER_HOME",
    "INFERMETER_DB_TIMEOUT_S",
    "HF_HOME",
)


def import_ray() -> Any:
    """The ray module, or a one-line error saying how to install it."""
    from infermeter.extras import require

    require("ray", "--ray")
    import ray

    return ray


_MODELS: dict[tuple[Any, ...], LoadedModel] = {}


def _model_in_worker(spec: SweepSpec, dtype: str) -> LoadedModel:
    """The point's model, loaded once per worker process and dtype (one in memory at a time)."""
    b = spec.base
    key = (b.model, dtype, b.device, b.attn_implementation, b.seed)
    if key not in _MODELS:
        _MODELS.clear()
        _MODELS[key] = load_model(
            b.model,
            dtype=dtype,
            device=b.device,
            attn_implementation=b.attn_implementation,
            seed=b.seed,
        )
    return _MODELS[key]


def check_points(spec: SweepSpec) -> list[str] | None:
    """In a worker: every value checked against the model; None, or [problem, fix]."""
    try:
        loaded = _model_in_worker(spec, spec.base.dtype)
        for knob, values in spec.parsed():
            for v in values:
                if knob.check is not None:
                    knob.check(v, loaded)
    except UserError as exc:
        return [exc.problem, exc.fix]
    return None


def profile_point(spec: SweepSpec, index: int, url: str) -> dict[str, Any]:
    """In a worker: run point `index` of the sweep and store it in `url`; what happened."""
    from infermeter.store import Store

    point = spec.points()[index]
    grid = {k.name: k for k, _ in spec.parsed()}
    t0 = time.perf_counter()
    where = {"host": socket.gethostname(), "pid": os.getpid()}
    try:
        loaded = _model_in_worker(spec, str(point.get("dtype", spec.base.dtype)))
        run, _ = run_point(spec.base, grid, point, loaded, Store(url), sweep_id=spec.sweep_id)
    except UserError as exc:
        return {"status": "failed", "error": f"{exc.problem} ({exc.fix})", **where}
    return {
        "run_id": run.run_id,
        "status": run.status,
        "error": run.error,
        "wall_s": time.perf_counter() - t0,
        "generate_s": sum(s.total_ms for s in run.samples) / 1e3,
        **where,
    }


def failed_point(spec: SweepSpec, point: dict[str, Any], reason: str) -> RunResult:
    """The stored record of a point that never finished anywhere (its worker died twice)."""
    grid = {k.name: k for k, _ in spec.parsed()}
    config = _point_config(spec.base, grid, point)
    return RunResult(
        run_id=None,
        config=config.to_dict(),
        knobs={k: show(grid[k], v) for k, v in point.items()},
        model_info={"spec": spec.base.model},
        device={},
        versions={},
        created=now_iso(),
        status="failed",
        error=reason,
        sweep_id=spec.sweep_id,
    )


def check_feasible(nodes: list[dict[str, Any]], placement: RayPlacement) -> None:
    """Refuse a point no live node can run: Ray would queue its task forever, in silence.

    `sweep --ray --cpus-per-point 1000` hung with no word (issue 35). Checked per node, since a
    task runs on one: the largest node's CPUs and GPUs, and whether any node has the
    accelerator type asked for.
    """
    alive = [n.get("Resources", {}) for n in nodes if n.get("Alive", True)]
    asks = (
        ("CPU", placement.cpus_per_point, "--cpus-per-point"),
        ("GPU", placement.gpus_per_point, "--gpus-per-point"),
    )
    for key, wanted, option in asks:
        most = max((float(r.get(key, 0)) for r in alive), default=0.0)
        if wanted and wanted > most:
            raise UserError(
                f"{option} {wanted:g}: no node of the Ray cluster has that many {key}s "
                f"(the largest has {most:g})",
                f"use {option} {most:g} or less, or add a node that large"
                if most
                else f"drop {option} (no node has a {key}), or add a node with one",
            )
    if placement.accelerator_type:
        key = f"accelerator_type:{placement.accelerator_type}"
        if not any(key in r for r in alive):
            raise UserError(
                f"--accelerator-type {placement.accelerator_type}: no node of the Ray cluster "
                "has it",
                "drop --accelerator-type, or name one its nodes have (`ray status`)",
            )


def _start(ray: Any, placement: RayPlacement, url: str) -> bool:
    """Connect to (or start) Ray; True when this call started it (and must shut it down)."""
    from infermeter.store.engine import sqlite_path

    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    kwargs: dict[str, Any] = {
        "runtime_env": {"env_vars": env},
        "include_dashboard": False,
        "log_to_driver": False,
        "configure_logging": False,
    }
    if placement.address is None:
        ray.init(num_cpus=placement.local_cpus, **kwargs)
        try:
            check_feasible(ray.nodes(), placement)
        except UserError:
            ray.shutdown()
            raise
        return True
    ray.init(address=placement.address, **kwargs)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    try:
        check_feasible(nodes, placement)
    except UserError:
        ray.shutdown()
        raise
    if sqlite_path(url) is not None and len({n.get("NodeManagerAddress") for n in nodes}) > 1:
        ray.shutdown()
        raise UserError(
            f"the Ray cluster has {len(nodes)} nodes and the store is the SQLite file {url!r}, "
            "which workers on other machines cannot write",
            "use a shared PostgreSQL store: --db postgresql+psycopg://user@host/db",
        )
    return False


def run_sweep_on_ray(
    spec: SweepSpec,
    store: Any,
    placement: RayPlacement,
    on_progress: SweepProgress | None = None,
    on_point: Callable[[dict[str, Any]], None] | None = None,
) -> SweepResult:
    """Run every unfinished point of `spec` as a Ray task; all finished points, in order.

    Long because: the driver's whole life is here in order: checks, submission, the wait loop
    with its failure handling, cancellation on Ctrl-C, and the result read back from the store.
    """
    ray = import_ray()
    spec.base.validate()
    grid = {k.name: k for k, _ in spec.parsed()}
    points = spec.points()
    if spec.interleave:
        raise UserError(
            "--interleave measures the points together in one process; Ray spreads them out",
            "drop --ray or --interleave",
        )
    progress = on_progress or (lambda *a: None)
    result = SweepResult(spec.sweep_id, spec)
    # points a previous run of this sweep finished are read before Ray starts: a sweep with
    # nothing left to do answers at once instead of starting (and stopping) an instance
    done = {_run_key(store.get(i), list(grid)) for i in store.sweep_run_ids(spec.sweep_id)}
    todo = [i for i, p in enumerate(points) if _point_key(p, grid) not in done]
    result.skipped = len(points) - len(todo)
    if result.skipped:
        progress(result.skipped, len(points), f"{result.skipped} points already done", True)
    started = _start(ray, placement, store.url) if todo else False
    t0 = time.perf_counter()
    refs: dict[Any, int] = {}
    try:
        opts = placement.task_options()
        if todo:
            problem = ray.get(ray.remote(check_points).options(**opts).remote(spec))
            if problem:
                raise UserError(*problem)
        store.begin_sweep(spec.sweep_id, spec.name, spec.knobs, spec.to_dict())
        task = ray.remote(profile_point).options(**opts, max_retries=1, retry_exceptions=False)
        for i in todo:
            refs[task.remote(spec, i, store.url)] = i
        finished = result.skipped
        while refs:
            (ref,), _ = ray.wait(list(refs), num_returns=1)
            i = refs.pop(ref)
            label = ", ".join(f"{k}={show(grid[k], v)}" for k, v in points[i].items())
            try:
                out = ray.get(ref)
            except ray.exceptions.RayError as exc:  # the worker died twice, or Ray failed
                reason = f"worker lost twice ({type(exc).__name__}): {str(exc).splitlines()[0]}"
                run_id = store.save(failed_point(spec, points[i], reason))
                out = {"status": "failed", "error": reason, "run_id": run_id}
            result.generate_s += out.get("generate_s", 0.0)
            finished += 1
            if on_point is not None:
                on_point({"label": label, **out})
            progress(finished, len(points), label, False)
    except KeyboardInterrupt:
        for ref in refs:
            ray.cancel(ref, force=True)
        result.interrupted = True
        raise
    finally:
        result.wall_s = time.perf_counter() - t0
        if started:
            ray.shutdown()
    stored = map(store.get, store.sweep_run_ids(spec.sweep_id))
    by_key = {_run_key(r, list(grid)): r for r in stored}
    result.runs = [by_key[k] for k in (_point_key(p, grid) for p in points) if k in by_key]
    return result
