"""The continuous batch over time: every scheduler step's state, read from transformers' manager.

Why: a latency percentile says that a server is slow, not why. Inside `load --server
continuous` the batch is transformers' own `ContinuousBatchingManager`, in this process; its
scheduler and paged KV cache hold the answer: how many requests ran and waited, how many
prefill and decode tokens each step carried, how full the cache was, and whether requests were
offloaded (preempted) for room. This records them per step without editing transformers: the
manager's `_create_batch_processor` (called once in its background thread) is wrapped so that
the processor it returns has its scheduler's `schedule_batch`, its `_generation_step` and its
offloading manager's `offload_requests` observed.

A figure the installed transformers does not expose (a renamed attribute, another scheduler)
is named in `missing` and left out of the rows; nothing is guessed. Rows: `t_ms` (the step's
start from the run's origin), `step_ms` (the forward), `running` and `waiting` requests when the
step was scheduled, `batch_requests`, `prefill_tokens`, `decode_tokens`, `context_tokens` (keys
the step's attention reads: each request's cached tokens plus its new ones), `kv_used_pct` (the
share of the cache's bytes in use), `offloads` (so far). `cache` holds the limits the scheduler
worked within (blocks, tokens per block, tokens and requests per step, its safety margin), which
`load --predict` simulates.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from infermeter.run.load_docs import BatchDoc, StepCacheDoc, StepRowDoc

#: most step rows kept: beyond it every other row is dropped (and the run says so)
MAX_STEPS = 20_000


class StepRecorder:
    """Install with `StepRecorder(manager)` before `manager.start()`; read `rows(origin)`."""

    def __init__(self, manager: Any, live: Any = None) -> None:
        self.steps: list[dict[str, Any]] = []
        self.missing: set[str] = set()
        self.offloads = 0
        self.thinned = 1
        self.live = live
        self._pending: dict[str, Any] = {}
        self.cache: StepCacheDoc = {}
        create = getattr(manager, "_create_batch_processor", None)
        if create is None:
            self.missing.add("every step figure (no _create_batch_processor in this transformers)")
            return

        def instrumented() -> Any:
            processor = create()
            try:
                self._instrument(processor)
            except Exception as exc:  # observing must never stop the server
                self.missing.add(f"step state ({type(exc).__name__}: {exc})")
            return processor

        manager._create_batch_processor = instrumented

    def _instrument(self, processor: Any) -> None:
        scheduler = getattr(processor, "scheduler", None)
        if scheduler is None or not hasattr(scheduler, "schedule_batch"):
            self.missing.add("batch composition (no scheduler.schedule_batch)")
        else:
            schedule = scheduler.schedule_batch

            def observed_schedule(*args: Any, **kwargs: Any) -> Any:
                out = schedule(*args, **kwargs)
                self._pending = self._composition(scheduler, processor, out)
                return out

            scheduler.schedule_batch = observed_schedule
        cache = getattr(processor, "cache", None)
        cb_config = getattr(processor, "cb_config", None)
        scheduler_type = getattr(cb_config, "scheduler_type", None)
        # what the scheduler worked within: `load --predict` simulates the same limits
        self.cache.update(  # beside what the caller set (who sized it)
            {
                "blocks": getattr(cache, "num_blocks", None),
                "page_tokens": getattr(cb_config, "page_size", None),
                "max_batch_tokens": getattr(processor, "max_batch_tokens", None),
                "max_requests_per_step": getattr(scheduler, "max_requests_per_batch", None),
                "safety_margin": getattr(scheduler, "safety_margin", None),
                "scheduler": scheduler_type,
            }
        )
        step = processor._generation_step

        def observed_step(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return step(*args, **kwargs)
            finally:
                self._record(t0, time.perf_counter())

        processor._generation_step = observed_step
        offloading = getattr(processor, "offloading_manager", None)
        if offloading is None or not hasattr(offloading, "offload_requests"):
            self.missing.add("offloads (no offloading_manager.offload_requests)")
        else:
            offload = offloading.offload_requests

            def observed_offload(*args: Any, **kwargs: Any) -> Any:
                done = offload(*args, **kwargs)
                self.offloads += bool(done)
                return done

            offloading.offload_requests = observed_offload

    def _composition(self, scheduler: Any, processor: Any, out: Any) -> dict[str, Any]:
        """The batch just scheduled and the queue around it."""
        row: dict[str, Any] = {}
        try:
            row["running"] = len(scheduler.active_requests)
            row["waiting"] = len(scheduler.waiting_requests)
        except AttributeError:
            self.missing.add("running and waiting requests")
        batch = out[0] if isinstance(out, tuple) and out else None
        if batch:
            try:
                # a request with no token generated yet is (part of) its prefill this step
                decode = [f for f in batch if f.state.generated_len() > 0]
                row["batch_requests"] = len(batch)
                row["decode_tokens"] = sum(f.query_length for f in decode)
                row["prefill_tokens"] = sum(f.query_length for f in batch) - row["decode_tokens"]
                # keys the step's attention reads: each request's cache before it plus its queries
                row["context_tokens"] = sum(
                    int(f.state.position_offset) + int(f.query_length) for f in batch
                )
                # who was in the step, for energy shares (serving/energy.py); not stored
                row["_members"] = [
                    (str(f.state.request_id), int(f.query_length), f.state.generated_len() == 0)
                    for f in batch
                ]
            except AttributeError:
                self.missing.add("prefill and decode tokens per step")
        cache: Any = getattr(processor, "cache", None)
        try:
            row["kv_used_pct"] = 100.0 * (1.0 - float(cache.compute_free_capacity(relative=True)))
        except (AttributeError, TypeError):
            self.missing.add("KV-cache use (no cache.compute_free_capacity)")
        return row

    def _record(self, t0: float, t1: float) -> None:
        row = {"t_s": t0, "step_ms": (t1 - t0) * 1e3, **self._pending, "offloads": self.offloads}
        self._pending = {}
        self.steps.append(row)
        if len(self.steps) >= MAX_STEPS:  # keep the whole run's span at half the resolution
            self.steps = self.steps[::2]
            self.thinned *= 2
        if self.live is not None:  # the live page's line: the batch as it is now
            now: dict[str, Any] = {
                k: row[k] for k in ("running", "waiting", "kv_used_pct") if k in row
            }
            self.live.state["steps"] = one_instant({**(self.live.state.get("steps") or {}), **now})

    def rows(self, origin_s: float) -> list[StepRowDoc]:
        """The steps with `t_ms` from the run's origin (the first arrival).

        A row still holds `_members` (who was in the step) for the caller to pop: energy
        shares need them, the stored row does not.
        """
        out = []
        for r in self.steps:
            row = {k: v for k, v in r.items() if k != "t_s"}
            out.append(cast("StepRowDoc", {"t_ms": (r["t_s"] - origin_s) * 1e3, **row}))
        return out


def summarize_steps(steps: Sequence[StepRowDoc], wall_ms: float) -> BatchDoc:
    """What the batch did over the run: steps, batch sizes, queue, cache fullness, offloads.

    Time shares weight each step by the time until the next one (the state held that long).
    """
    import numpy as np

    if not steps:
        return {"steps": 0}
    t = [s["t_ms"] for s in steps] + [max(wall_ms, steps[-1]["t_ms"] + steps[-1]["step_ms"])]
    held = np.diff(t).clip(min=0)
    span = float(held.sum()) or 1.0

    def share(pred: Callable[[StepRowDoc], bool | None]) -> float | None:
        known = [(h, s) for h, s in zip(held, steps, strict=True) if pred(s) is not None]
        if not known:
            return None
        return float(100.0 * sum(h for h, s in known if pred(s)) / span)

    kv = [s["kv_used_pct"] for s in steps if "kv_used_pct" in s]
    batch = [s["batch_requests"] for s in steps if "batch_requests" in s]
    return {
        "steps": len(steps),
        "step_ms_p50": float(np.median([s["step_ms"] for s in steps])),
        "batch_requests_mean": float(np.mean(batch)) if batch else None,
        "batch_requests_max": int(max(batch)) if batch else None,
        "kv_used_pct_max": float(max(kv)) if kv else None,
        "kv_used_pct_p50": float(np.median(kv)) if kv else None,
        "kv_full_time_pct": share(
            lambda s: s["kv_used_pct"] >= 95.0 if "kv_used_pct" in s else None
        ),
        "waiting_time_pct": share(lambda s: s["waiting"] > 0 if "waiting" in s else None),
        "prefill_tokens": sum(s.get("prefill_tokens", 0) for s in steps),
        "decode_tokens": sum(s.get("decode_tokens", 0) for s in steps),
        "offloads": int(steps[-1].get("offloads", 0)),
    }


def one_instant(steps: dict[str, Any]) -> dict[str, Any]:
    """The live line's counts made to agree: the batch holds only requests in flight.

    The client's in-flight count changes when a request ends; the scheduler's running and
    waiting counts when a step ends. Shown together they read "0 in flight · batch: 1 running"
    after the last request (issue 59). Whichever changed last, running + waiting never exceed
    the requests in flight: the older figure is cut to the newer.
    """
    flying = steps.get("in_flight")
    if flying is None:
        return steps
    out = dict(steps)
    if out.get("running") is not None:
        out["running"] = min(out["running"], flying)
    if out.get("waiting") is not None:
        out["waiting"] = min(out["waiting"], flying - out.get("running", 0))
    return out
