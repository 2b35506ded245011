"""`infermeter load --predict`: a load's latency percentiles, goodput and capacity, simulated.

Resolves what a load run would need (the model's config without weights, the device model,
the requests `load` would send with the same seed, the scheduler's limits), learns the step
cost's factors from the steps of stored `load` runs on the same device, simulates the server at
each rate (analysis/loadsim.py) and summarises each simulated run with the code that
summarises a measured one. The document's points have the shape of `load --rate A,B`'s, so
the same figures draw them.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypedDict, cast

from infermeter.analysis.loadsim import SchedulerLimits, SimResult, simulate
from infermeter.analysis.predict import stream_notes
from infermeter.analysis.stepcost import StepCost, StepFactors, StepFactorsDoc, learn_step_factors
from infermeter.experiments.whatif import (
    LEARN_LIMIT,
    check_rate,
    check_release,
    check_stack,
    pick_dtype,
    resolve_hardware,
    same_device,
)
from infermeter.measure.ceilings import LOCAL_HARDWARE
from infermeter.run.document import LoadPrediction
from infermeter.run.slo import slo_report
from infermeter.serving.load import (
    LoadSpec,
    knee,
    plan_requests,
    spec_document,
    summarize_load,
    sweep_point,
)
from infermeter.serving.plan import LoadPlan
from infermeter.serving.rows import SweepPointDoc

if TYPE_CHECKING:
    from infermeter.analysis.intervals import BandDoc
    from infermeter.run.load_docs import LoadSpecDoc, StepCacheDoc, StepRowDoc
    from infermeter.serving.capacity import CapacityDoc, CapacitySpec
    from infermeter.store import Store


class LoadHardwareDoc(TypedDict):
    """The device a load was simulated on: its name, whether measured, its figures' sources."""

    key: str
    name: str
    kind: str
    measured: bool
    sources: dict[str, str]


class SchedulerDoc(TypedDict):
    """The scheduler simulated (`SchedulerLimits`' fields) and which it is."""

    max_batch_tokens: int
    max_requests_per_step: int
    #: KV-cache blocks; None: a cache that never fills
    blocks: int | None
    page_tokens: int
    safety_margin: float
    kind: str


class LoadPredictionDoc(TypedDict):
    """`load predict`'s document (`predict_load`): a simulated point per offered rate.

    Its points have a measured sweep's figures (`load run --rate A,B`), so the two compare
    row by row. The workload, the scheduler's limits and the learnt step model are the load
    spec's, `SchedulerLimits`' and `StepFactors`' own fields. `LoadPrediction`
    (run/document.py) is this document with a table and a notebook view.
    """

    kind: str
    model: str
    hardware: LoadHardwareDoc
    stack: str
    dtype: str
    workload: LoadSpecDoc
    scheduler: SchedulerDoc
    step_model: StepFactorsDoc
    points: list[PredictedPointDoc]
    knee_rate: float | None
    #: the capacity search over the simulation (with SLOs and --capacity), else None
    capacity: CapacityDoc | None
    notes: list[str]
    approximate: list[str]
    out_of_scope: list[str]


class PredictedPointDoc(SweepPointDoc, total=False):
    """A simulated rate of `load predict`: a measured point's figures, its steps, its interval.

    `*_interval` (each of INTERVAL_KEYS): the figure's 90% interval (low, high), None where
    the figure is.
    """

    steps: int
    batch_requests_mean: float | None
    interval: BandDoc
    ttft_ms_p50_interval: tuple[float, float] | None
    ttft_ms_p99_interval: tuple[float, float] | None
    tpot_ms_p50_interval: tuple[float, float] | None
    tpot_ms_p99_interval: tuple[float, float] | None
    e2e_ms_p50_interval: tuple[float, float] | None
    e2e_ms_p99_interval: tuple[float, float] | None


#: share of the memory left after weights and runtime that a GPU's paged cache takes
#: (transformers' `max_memory_percent` default is 0.8 of free memory; 0.9 for engines)
GPU_CACHE_SHARE = 0.9


class StoredStepsDoc(TypedDict):
    """Step rows of stored loads, what the step model learns from (`stored_load_steps`)."""

    #: each run's step rows
    steps: list[list[StepRowDoc]]
    #: each run's request arrivals, on its steps' clock
    arrivals_ms: list[list[float]]
    #: where they came from
    source: str
    #: the newest run's scheduler limits
    cache: StepCacheDoc


def stored_load_steps(store: Store, ceilings: Any, local: bool, model: str) -> StoredStepsDoc:
    """Step rows of stored in-process loads on this device: of `model` when it has any, else all."""
    rows = [
        r
        for r in store.list_runs(status="finished", limit=LEARN_LIMIT)
        if r["mode"] == "load" and same_device(r["device"], ceilings, local)
    ]
    runs: list[tuple[str, list[StepRowDoc], list[float], StepCacheDoc]] = []
    for r in rows:
        run = store.get(r["id"])
        load = run.checks.get("load") if run.checks else None
        if load is None:
            continue
        steps = [s for s in load.get("steps") or [] if "context_tokens" in s]
        state = load.get("step_state")
        if steps:
            arrivals = sorted(x.start_ms for x in run.samples if not x.warmup)
            runs.append((str(r["model"]), steps, arrivals, state["cache"] if state else {}))
    mine = [x for x in runs if x[0] == model]
    chosen = mine or runs
    if not chosen:
        return {
            "steps": [],
            "arrivals_ms": [],
            "cache": {},
            "source": "no stored load run with step records on this device",
        }
    whose = "this model's" if mine else "other models'"
    return {
        "steps": [x[1] for x in chosen],
        "arrivals_ms": [x[2] for x in chosen],
        "source": f"{len(chosen)} stored load runs ({whose}) on this device",
        "cache": chosen[0][3],
    }


def _limits(spec: LoadSpec, cache: StepCacheDoc, gpu_blocks: int | None) -> SchedulerLimits:
    base = SchedulerLimits()
    page = spec.kv_page_tokens or cache.get("page_tokens") or base.page_tokens
    return SchedulerLimits(
        max_batch_tokens=int(cache.get("max_batch_tokens") or base.max_batch_tokens),
        max_requests_per_step=int(cache.get("max_requests_per_step") or base.max_requests_per_step),
        blocks=spec.kv_blocks or gpu_blocks,
        page_tokens=int(page),
        safety_margin=float(
            margin if (margin := cache.get("safety_margin")) is not None else base.safety_margin
        ),
    )


def _gpu_blocks(shape: Any, params: int, dev: Any, dtype_bytes: float, page: int) -> int | None:
    """A GPU's paged cache in blocks: the memory left after weights and runtime."""
    from infermeter.analysis.predict import GPU_RUNTIME_BYTES, sequence_kv_bytes

    if dev.kind != "gpu" or not dev.memory_bytes:
        return None
    free = dev.memory_bytes - params * dtype_bytes - GPU_RUNTIME_BYTES
    per_token = sequence_kv_bytes(shape, int(dtype_bytes))
    if free <= 0 or per_token <= 0:
        return 1
    return max(1, int(GPU_CACHE_SHARE * free // (per_token * page)))


def simulate_rate(
    spec: LoadSpec, rate: float, tokenizer: Any, limit: int, cost: StepCost, limits: SchedulerLimits
) -> tuple[dict[str, Any], SimResult]:
    """One simulated load run at `rate`: a document shaped as `run_load`'s, and the simulation."""
    plan = plan_requests(replace(spec, rate=rate), tokenizer, limit)
    offsets = [0.0 if math.isnan(o) else o for o in plan.offsets_s]
    sim = simulate(
        plan.requests, offsets, cost.seconds, limits, spec.concurrency, cost.factors.admission_s
    )
    served = [r for r in plan.requests if math.isfinite(r.end_s)]
    rows = [r.row(0.0) for r in served]
    wall_s = max((r.end_s for r in served), default=0.0) - min(
        (r.arrival_s for r in served), default=0.0
    )
    summary = summarize_load(rows, wall_s)
    summary["slo"] = slo_report(rows, spec.slos, wall_s)
    summary["not_simulated"] = len(plan.requests) - len(served)
    return {
        "all_samples": rows,
        "summary": summary,
        "steps": sim.steps,
        "meta": {"notes": sim.notes},
    }, sim


def predict_load(
    model: str,
    hardware: str,
    spec: LoadSpec,
    rates: list[float],
    store: Store,
    stack: str = "hf",
    capacity: CapacitySpec | None = None,
) -> LoadPrediction:
    """The whole predicted-load document: per rate the percentiles, goodput; the knee; capacity.

    Long because: it gathers every input in order and states where each came from.
    """
    from infermeter.analysis.precision import precision_of
    from infermeter.analysis.stacks import release_reason
    from infermeter.analysis.timemodel import device_model
    from infermeter.models.config_only import config_of
    from infermeter.models.info import config_value
    from infermeter.models.loader import estimate_params
    from infermeter.models.opcount import count_ops_of_config
    from infermeter.models.shape import shape_of

    stack, _, version = stack.partition("@")  # NAME@VERSION, as `predict` takes it
    release = version.strip() or None
    ceilings = resolve_hardware(hardware, store)
    local = hardware.strip().lower() == LOCAL_HARDWARE
    dtype = pick_dtype(spec.dtype, ceilings)
    compute = check_rate(hardware, ceilings, dtype)
    check_stack(stack, ceilings, local)
    check_release(stack, release)
    config, shown = config_of(model)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    limit = int(config_value(text, "max_position_embeddings", "n_positions", default=0) or 10**9)
    tokenizer = None
    if spec.workload is not None:
        from infermeter.models.tokenizer import tokenizer_of

        tokenizer = tokenizer_of(model)
    shape = shape_of(config)
    precision = precision_of(dtype, ceilings.kind == "cpu")
    op_counts = count_ops_of_config(config, "float32" if precision.act_bytes == 4 else "bfloat16")
    dev = device_model(ceilings, compute, None if local else stack, None if local else release)
    cost = StepCost(
        shape,
        dev,
        precision.act_bytes,
        op_counts,
        top_k=None,
        weight_bytes=precision.weight_bytes if precision.quantized else None,
        weight_stream_share=precision.stream_share,
    )
    stored = stored_load_steps(store, ceilings, local, shown)
    cost.factors = (
        learn_step_factors(cost, stored["steps"], stored["source"], stored["arrivals_ms"])
        if stored["steps"]
        else StepFactors(learnt_from=f"{stored['source']}: the time model as is (approximate)")
    )
    cache = stored["cache"]
    gpu_blocks = _gpu_blocks(
        shape,
        estimate_params(config),
        dev,
        precision.weight_bytes,
        spec.kv_page_tokens or SchedulerLimits().page_tokens,
    )
    limits = _limits(spec, cache, gpu_blocks)
    points: list[PredictedPointDoc] = []
    notes: list[str] = []
    for rate in rates:
        simulated, sim = simulate_rate(spec, rate, tokenizer, limit, cost, limits)
        point = cast("PredictedPointDoc", sweep_point(rate, simulated["summary"]))
        point["steps"] = len(sim.steps)
        point["batch_requests_mean"] = (
            (sum(s["batch_requests"] for s in sim.steps) / len(sim.steps)) if sim.steps else None
        )
        points.append(point)
        notes += [f"{rate:g} req/s: {n}" for n in sim.notes]
    said = release_reason(stack, release)
    scope = _load_intervals(
        points,
        stack,
        hardware,
        dtype,
        getattr(text, "model_type", None),
        spec,
        [said] if said else [],
    )
    found = None
    if capacity is not None and spec.slos:
        found = _capacity(spec, capacity, tokenizer, limit, cost, limits)
    approximate = (
        []
        if cost.factors.steps
        else [
            "step costs from the time model alone: no stored `load` run on this device to learn "
            "the server's own costs from (run `infermeter load` once, then predict again)"
        ]
    )
    if stack != "hf":
        approximate.append(
            f"the scheduler simulated is transformers' FIFO continuous batching; "
            f"{stack}'s own (its token budget, preemption, prefix caching) "
            "differs"
        )
    if not dev.measured:
        approximate.append(
            "the device is a spec row, not measured: its step costs are the "
            f"{stack} stack's published-fit constants"
        )
    approximate += stream_notes(dtype, dev)
    doc: LoadPredictionDoc = {
        "kind": "infermeter-predict-load",
        "model": shown,
        "hardware": {
            "key": hardware.strip().lower(),
            "name": ceilings.device,
            "kind": ceilings.kind,
            "measured": dev.measured,
            "sources": dev.sources,
        },
        "stack": f"{stack}@{release}" if release else stack,
        "dtype": dtype,
        "workload": spec_document(spec),
        "scheduler": {
            "max_batch_tokens": limits.max_batch_tokens,
            "max_requests_per_step": limits.max_requests_per_step,
            "blocks": limits.blocks,
            "page_tokens": limits.page_tokens,
            "safety_margin": limits.safety_margin,
            "kind": "transformers' FIFO continuous batching",
        },
        "step_model": cost.factors.to_dict(),
        "points": points,
        "knee_rate": knee(points),
        "capacity": found,
        "notes": notes,
        "approximate": approximate,
        "out_of_scope": scope,
    }
    return LoadPrediction(doc)


#: a point's figures that get an interval (latencies: a time's multipliers)
INTERVAL_KEYS = (
    "ttft_ms_p50",
    "ttft_ms_p99",
    "tpot_ms_p50",
    "tpot_ms_p99",
    "e2e_ms_p50",
    "e2e_ms_p99",
)
QUEUEING_REASON = (
    "requests share steps or wait: the published rows are one batch each, not a simulated queue"
)


def _load_intervals(
    points: list[PredictedPointDoc],
    stack: str,
    hardware: str,
    dtype: str,
    model_type: str | None,
    spec: LoadSpec,
    also: list[str],
) -> list[str]:
    """Each point's latencies with their 90% interval, as `predict` gives its own; the reasons.

    The band is the stack group's held-out errors (analysis/intervals.py), widened for each
    way the point lies outside the published rows (and for each reason in `also`), and once
    more where requests shared steps or queued (the rows are single batches): `load predict`
    printed bare numbers (issue 55).
    """
    from infermeter.analysis.intervals import band_for, out_of_scope, stack_group

    said: list[str] = []
    for p in points:
        batch = max(1, math.ceil(p.get("batch_requests_mean") or 1))
        reasons = out_of_scope(
            stack,
            hardware.strip().lower(),
            dtype,
            model_type,
            batch,
            spec.prompt_tokens.upper,
            spec.new_tokens.upper,
        )
        reasons += also  # a release its constants were not fitted on
        if batch > 1 or (p.get("queue_ms_p50") or 0) > 0.5:
            reasons.append(QUEUEING_REASON)
        band = band_for(stack_group(stack), reasons)
        p["interval"] = band.to_dict()
        row = cast("dict[str, Any]", p)  # each key and its interval named in PredictedPointDoc
        for key in INTERVAL_KEYS:
            row[f"{key}_interval"] = band.of(row[key])
        said += [r for r in band.widened if r not in said]
    return said


def _capacity(
    spec: LoadSpec,
    cap: CapacitySpec,
    tokenizer: Any,
    limit: int,
    cost: StepCost,
    limits: SchedulerLimits,
) -> CapacityDoc:
    """`load --find-max-rate`'s search, each step a simulated run (a fresh seed per try)."""
    from infermeter.serving.capacity import answer_line, find_capacity

    tries = 0

    def measure(rate: float, n: int) -> dict[str, Any]:
        nonlocal tries
        tries += 1
        s = replace(spec, requests=n, seed=spec.seed + tries)
        return simulate_rate(s, rate, tokenizer, limit, cost, limits)[0]

    result = find_capacity(cap, measure)
    result.pop("runs", None)
    result["answer"] = answer_line(result)
    return result


def predict_and_store(plan: LoadPlan, store: Store) -> LoadPrediction:
    """`load predict`: the plan's load simulated, its document stored with its id."""
    from infermeter.util.jsonio import clean_json

    spec, rates = plan.spec, plan.rates
    if spec.concurrency is not None:
        rates = [math.inf]  # a closed loop: one run, arrivals set by completions
    doc = LoadPrediction(  # clean_json gives plain dicts: the document's class is put back
        clean_json(
            predict_load(
                spec.model,
                plan.hardware,
                spec,
                rates,
                store,
                stack=plan.stack.strip().lower(),
                capacity=plan.capacity,
            )
        )
    )
    doc["id"] = store.save_prediction(doc)
    return doc
