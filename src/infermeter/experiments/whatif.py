"""`infermeter predict`: a model's memory fit and latency on a device, before running it.

Resolves the three inputs (the model's config without weights, the device model, the stored
runs to learn from), calls analysis/predict.py, and returns one JSON-ready document; the CLI
prints it and report/predict_figures.py draws it.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TypedDict

from infermeter.analysis.costs import approximate
from infermeter.analysis.intervals import stack_group
from infermeter.analysis.precision import PRECISIONS, dtype_name, precision_of
from infermeter.analysis.predict import (
    Learned,
    LearnedDoc,
    MemoryAtContextDoc,
    PredictRowDoc,
    Workload,
    every_prompt_logit,
    learn_from_stored,
    memory_by_context,
)
from infermeter.analysis.predict import predict as predict_batches
from infermeter.analysis.stacks import (
    DEFAULT_STACK,
    STACK_RELEASES,
    STACKS,
    eager_release,
    release_numbers,
    release_reason,
)
from infermeter.analysis.timemodel import (
    DESKTOP_SOURCE_KEY,
    SUSTAINED_SOURCE_NAME,
    DeviceModel,
    DeviceStepDoc,
    device_model,
    eager_attention,
    with_host,
)
from infermeter.errors import UserError
from infermeter.measure.ceilings import (
    LOCAL_HARDWARE,
    Ceilings,
    hardware_keys,
    spec_by_key,
    spec_ceilings,
)
from infermeter.run.document import Prediction

if TYPE_CHECKING:
    from infermeter.store import Store


class HardwareDoc(TypedDict):
    """The device predicted for: its figures, whether measured, the steps that made them."""

    key: str
    name: str
    kind: str
    peak_flop_per_s: float | None
    bandwidth_bytes_per_s: float | None
    memory_bytes: float | None
    interconnect_bytes_per_s: float | None
    measured: bool
    sources: dict[str, str]
    steps: list[DeviceStepDoc]
    efficiency: str
    #: host time per launched operation (us)
    op_us: float


class StackDoc(TypedDict):
    """The serving stack predicted for: what it does, its constants, the release assumed."""

    key: str
    title: str
    what: str
    summary: str
    sources: dict[str, str]
    release_assumed: str
    #: the release the user named (`--stack NAME@VERSION`); None: the assumed one
    release_asked: str | None


class WorkloadDoc(TypedDict):
    """The workload predicted (analysis/predict.py: `Workload`), with its replicas."""

    batches: list[int]
    prompt_tokens: int
    new_tokens: int
    dtype: str
    gpus: int
    tp: int
    top_k: int | None
    cache: str
    transformers_release: str | None
    replicas: int


# `from` is a Python keyword: the learnt factors' origin is declared by name
PredictionLearnedDoc = TypedDict(
    "PredictionLearnedDoc",
    {"runs": int, "factors": dict[str, dict[str, float]], "from": str},
)


class PredictionDoc(TypedDict):
    """`predict`'s document (`what_if`): the inputs as understood, a row per batch, and scope.

    `Prediction` (run/document.py) is this document with a table and a notebook view.
    """

    kind: str
    model: str
    params: int
    hardware: HardwareDoc
    workload: WorkloadDoc
    dtype: str
    precision: str
    stack: StackDoc
    rows: list[PredictRowDoc]
    largest_batch: int | None
    runtime_bytes: float
    memory_by_context: list[MemoryAtContextDoc]
    #: what is approximate in the answer, a line each
    approximate: list[str]
    #: why the prediction lies outside the data its constants were fitted on, a line each
    out_of_scope: list[str]
    learned: PredictionLearnedDoc


#: stored runs read to learn from, newest first
LEARN_LIMIT = 100


def local_device_name() -> str:
    """This machine's CPU as `describe_device` names it (what its runs record)."""
    import torch

    from infermeter.measure.device import describe_device

    return str(describe_device(torch.device("cpu")).get("name"))


def resolve_hardware(key: str, store: Store) -> Ceilings:
    """The ceilings --hardware names: a spec row, or this machine as `calibrate` measured it."""
    k = key.strip().lower()
    if k == LOCAL_HARDWARE:
        name = local_device_name()
        measured: Ceilings | None = store.measured_ceilings(name)
        if measured is None:
            raise UserError(
                f"{LOCAL_HARDWARE} is this machine as `infermeter calibrate` measures it, and "
                f"{store.where} has no calibration of {name}",
                "run `infermeter calibrate` first (a minute or two), with the same --db",
            )
        return measured
    spec = spec_by_key(k)
    if spec is None:
        raise UserError(
            f"unknown hardware {key!r}",
            f"use one of: {', '.join(hardware_keys())}",
        )
    return spec


def pick_dtype(dtype: str, ceilings: Ceilings) -> str:
    """--dtype, or for "auto" the fastest the device has a peak for (float32 on a CPU)."""
    dtype = dtype_name(dtype)
    if dtype != "auto":
        if dtype not in PRECISIONS:
            raise UserError(
                f"--dtype {dtype!r} is not one predict knows",
                f"use auto or one of: {', '.join(PRECISIONS)}",
            )
        return dtype
    if ceilings.kind == "cpu":
        return "float32"
    for dt in ("bfloat16", "float16", "float32"):
        if ceilings.peak(dt):
            return dt
    return "float32"


def same_device(run_device: str | None, ceilings: Ceilings, local: bool) -> bool:
    """True when a stored run's device is the one predicted for (its spec row, or this CPU)."""
    if not run_device:
        return False
    if local:
        return run_device == ceilings.device
    row = spec_ceilings(run_device)
    return row is not None and row.device == ceilings.device


def stored_runs(store: Any, ceilings: Ceilings, local: bool, model: str) -> list[Any]:
    """Finished minimal-mode runs on this device: of `model` when there are 2, else all."""
    rows = [
        r
        for r in store.list_runs(status="finished", limit=LEARN_LIMIT)
        if r["mode"] == "minimal" and same_device(r["device"], ceilings, local)
    ]
    mine = [r for r in rows if r["model"] == model]
    chosen = mine if len(mine) >= 2 else rows
    return [store.get(r["id"]) for r in chosen]


def check_stack(stack: str, ceilings: Ceilings, local: bool) -> None:
    """Refuse a stack predict has no profile of, or one on a device it does not describe."""
    if stack not in STACKS:
        raise UserError(f"unknown stack {stack!r}", f"use one of: {', '.join(STACKS)}")
    if (local or ceilings.kind != "gpu") and stack != DEFAULT_STACK:
        raise UserError(
            f"--stack {stack} is profiled on GPUs only; {ceilings.device} is predicted as "
            "infermeter runs it (transformers' eager generate)",
            f"drop --stack, or pick a GPU (--hardware h100-sxm --stack {stack})",
        )


def check_release(stack: str, version: str | None) -> None:
    """Refuse `NAME@VERSION` whose VERSION is no release number (`vllm@latest`).

    A release outside the fitted ones is predicted and said; a word cannot be placed among them.
    """
    if version is not None and not release_numbers(version):
        raise UserError(
            f"--stack {stack}@{version}: {version!r} is not a release number",
            f"give one as --stack {stack}@0.2.4, or drop @{version} for the release the "
            "constants describe",
        )


def check_rate(hardware: str, ceilings: Ceilings, dtype: str) -> str:
    """The dtype whose peak the GEMMs run at; a W8A8 dtype the device has no rate for refused."""
    cpu = ceilings.kind == "cpu"
    p = precision_of(dtype, cpu)
    if cpu and not p.needs_8bit_rate:  # a CPU's curves time every float dtype it runs
        return p.compute
    if not ceilings.peak(p.compute):
        have = [d for d in PRECISIONS if ceilings.peak(precision_of(d, cpu).compute)]
        raise UserError(
            f"{hardware} has no {p.compute} peak in its datasheet ({ceilings.source}), "
            f"so --dtype {dtype} cannot run there",
            f"use --dtype {' or '.join(have) or next(iter(ceilings.flop_per_s))}",
        )
    return p.compute


def what_if(
    model: str,
    hardware: str,
    workload: Workload,
    store: Any,
    learn: bool = True,
    stack: str = "hf",
    host_op_seconds: float | None = None,
) -> Prediction:
    """The whole prediction document (see analysis/predict.py for what each figure means).

    `stack` may name a release, `NAME@VERSION` (`tgi@1.0`): predicted with the stack's
    constants all the same, with a line (and a wider interval) where the release is not one
    they were fitted on.

    `host_op_seconds` replaces the stack's host time per launched kernel: the user's host.

    Long because: it gathers every input in order and states where each came from.
    """
    from infermeter.models.config_only import config_of
    from infermeter.models.loader import estimate_params
    from infermeter.models.opcount import count_ops_of_config
    from infermeter.models.quantize import quiet_torchao
    from infermeter.models.shape import shape_of

    quiet_torchao()
    stack, _, version = stack.partition("@")
    local = hardware.strip().lower() == LOCAL_HARDWARE
    _check_cache(workload.cache, stack, local)
    ceilings = resolve_hardware(hardware, store)
    dtype = pick_dtype(workload.dtype, ceilings)
    compute = check_rate(hardware, ceilings, dtype)
    check_stack(stack, ceilings, local)
    check_release(stack, version.strip() or None)
    if local and workload.gpus > 1:
        raise UserError(
            f"{LOCAL_HARDWARE} is one machine; --gpus {workload.gpus} needs a GPU from the table",
            "drop --gpus and --tp, or pick --hardware h100-sxm (see `infermeter predict --help`)",
        )
    # an HF stack's release decides the prefill's logits (analysis/predict.py `logits_bytes`)
    hf_release = (version.strip() or None) if stack_group(stack) == "hf" else None
    w = Workload(**{**asdict(workload), "dtype": dtype, "transformers_release": hf_release})
    config, shown = config_of(model)
    shape = shape_of(config)
    _check_top_k(shape, w.top_k)
    _check_cache_layers(w.cache, shape)
    params = estimate_params(config)
    precision = precision_of(dtype, ceilings.kind == "cpu")
    op_counts = count_ops_of_config(config, "float32" if precision.act_bytes == 4 else "bfloat16")
    op_counts, release_said = _asked_release(op_counts, config, shape, hf_release)
    dev = device_model(
        ceilings, compute, None if local else stack, None if local else version.strip() or None
    )
    if host_op_seconds:
        dev = with_host(dev, host_op_seconds)
    # stored runs are transformers' eager generate: they teach the hf stack only
    runs = stored_runs(store, ceilings, local, shown) if learn and stack == "hf" else []
    learned = learn_from_stored(runs, dev) if runs else Learned()
    runtime = (ceilings.details or {}).get("runtime_bytes") if local else None
    pred = predict_batches(shape, params, dev, w, op_counts, learned, runtime)
    # reasons beyond the published scope: an unstable calibration, a release not fitted
    also = calibration_said(ceilings) if local else []
    release = release_reason(stack, version.strip() or None)
    # an HF release whose operations ship was counted as that release: in scope
    also += [release] if release and not (op_counts or {}).get("release_moved_from") else []
    model_type = getattr(config, "model_type", None)
    scope = with_intervals(pred["rows"], stack, hardware, w, model_type, also, ceilings.kind)
    doc: PredictionDoc = {
        "kind": "infermeter-predict",
        "model": shown,
        "params": params,
        "hardware": _hardware_doc(hardware, ceilings, dev),
        "workload": _workload_doc(w),
        "dtype": dtype,
        "precision": precision.what,
        "stack": _stack_doc(stack, version.strip() or None),
        "rows": pred["rows"],
        "largest_batch": pred["largest_batch"],
        "runtime_bytes": pred["runtime_bytes"],
        "memory_by_context": memory_by_context(
            shape,
            params,
            w,
            w.batches[0],
            dev.memory_bytes,
            pred["runtime_bytes"],
            ceilings.kind == "cpu",
            eager_attention(op_counts, "prefill"),
        ),
        "approximate": _approximate(shape, op_counts, dev, w) + release_said,
        "out_of_scope": scope,
        "learned": _learned_doc(pred["learned"], _learnt_from(runs, shown)),
    }
    return Prediction(doc)


def _asked_release(
    op_counts: dict[str, Any] | None, config: Any, shape: Any, release: str | None
) -> tuple[dict[str, Any] | None, list[str]]:
    """The counts of the transformers release `--stack hf@VERSION` asked, where they ship.

    The installed release's counts stay (with the line saying so) where the data lack the
    release or the model's family; `release_reason` then calls the prediction out of scope.
    """
    from importlib.metadata import version as installed_version

    from infermeter.analysis.releases import ops_under_release

    installed = installed_version("transformers")
    if release is None or op_counts is None or release == installed:
        return op_counts, []
    if installed.startswith(release + "."):
        return op_counts, []
    layers = int(shape.layers or 0)
    moved, line = ops_under_release(
        op_counts, getattr(config, "model_type", None), layers, release, installed
    )
    return (moved, [line]) if moved is not None else (op_counts, [line])


def _workload_doc(w: Workload) -> WorkloadDoc:
    return {
        "batches": list(w.batches),
        "prompt_tokens": w.prompt_tokens,
        "new_tokens": w.new_tokens,
        "dtype": w.dtype,
        "gpus": w.gpus,
        "tp": w.tp,
        "top_k": w.top_k,
        "cache": w.cache,
        "transformers_release": w.transformers_release,
        "replicas": w.replicas,
    }


def _learned_doc(learned: LearnedDoc, origin: str) -> PredictionLearnedDoc:
    return {"runs": learned["runs"], "factors": learned["factors"], "from": origin}


def calibration_said(ceilings: Ceilings) -> list[str]:
    """A line when this machine's calibration was judged unstable (never used silently).

    The store passes an unstable calibration over while a stable one exists; with none, the
    newest is used, and the prediction says so with its reasons (a busy host's calibration put
    TPOT 80x away from its own bound, issue 55).
    """
    stability = (ceilings.details or {}).get("stability") or {}
    if stability.get("stable", True):
        return []
    when = (ceilings.details or {}).get("calibrated_at", "?")
    why = "; ".join(stability.get("reasons") or ["no reason recorded"])
    return [
        f"the calibration of {when} was judged unstable ({why}) and no stable one exists: "
        "the prediction uses it; run `infermeter calibrate` on a quieter machine"
    ]


def with_intervals(
    rows: list[PredictRowDoc],
    stack: str,
    hardware: str,
    w: Workload,
    model_type: str | None,
    also: list[str] | None = None,
    device_kind: str = "gpu",
) -> list[str]:
    """Give each row's TTFT, TPOT, rates and memory their 90% intervals; the out-of-scope reasons.

    The time intervals come from the held-out errors of the stack's group, the memory's from
    the held-out peak-memory errors (analysis/intervals.py); each reason the prediction lies
    outside the published rows (and each of `also`: an unstable calibration) widens them, and
    is returned so the answer says it in one line; the memory's own reasons are in its band's
    `widened`.
    """
    from infermeter.analysis.intervals import (
        band_for,
        memory_band,
        memory_out_of_scope,
        out_of_scope,
    )

    said: list[str] = list(also or [])
    for r in rows:
        memory_reasons = memory_out_of_scope(
            stack, device_kind, w.dtype, model_type, int(r["batch"]), w.prompt_tokens, w.new_tokens
        )
        mband = memory_band(memory_reasons)
        r["memory_interval"] = mband.to_dict()
        r["memory"]["total_bytes_interval"] = mband.of(r["memory"]["total_bytes"])
        reasons = list(also or []) + out_of_scope(
            stack,
            hardware.strip().lower(),
            w.dtype,
            model_type,
            int(r["batch"]),
            w.prompt_tokens,
            w.new_tokens,
        )
        band = band_for(stack_group(stack), reasons)
        r["interval"] = band.to_dict()
        r["ttft_ms_interval"] = band.of(r["ttft_ms"])
        r["tpot_ms_interval"] = band.of(r["tpot_ms"])
        r["throughput_tok_s_interval"] = band.of_rate(r["throughput_tok_s"])
        r["decode_tok_s_interval"] = band.of_rate(r["decode_tok_s"])
        said += [x for x in reasons if x not in said]
    return said


def predict(
    model: str,
    hardware: str = LOCAL_HARDWARE,
    *,
    batches: tuple[int, ...] = (1,),
    prompt_tokens: int = 2048,
    new_tokens: int = 256,
    dtype: str = "auto",
    gpus: int = 1,
    tp: int = 1,
    top_k: int | None = None,
    stack: str = "hf",
    cache: str = "dynamic",
    store: Store | None = None,
    learn: bool = True,
    host_us_per_op: float | None = None,
) -> Prediction:
    """What `model` would do on `hardware` under `stack`, without its weights (Python API).

    The document `infermeter predict` prints: per batch the memory fit, TTFT, TPOT and
    throughput with their bounds (`.to_frame()`), what is approximate and why. `store` (a
    `Store`; the default database when None) holds calibrations and the runs it learns from.
    `host_us_per_op` is the host's time per framework operation dispatched (default: the
    stack's).
    """
    from infermeter.store import Store

    workload = Workload(
        tuple(batches), prompt_tokens, new_tokens, dtype, gpus, tp, top_k, cache.strip().lower()
    )
    return what_if(
        model,
        hardware,
        workload,
        store or Store(),
        learn=learn,
        stack=stack,
        host_op_seconds=host_us_per_op * 1e-6 if host_us_per_op else None,
    )


def _check_cache(form: str, stack: str, local: bool) -> None:
    """Refuse a cache form the predicted stack or this CPU cannot have, in one line."""
    from infermeter.analysis.kvcache import FORMS

    if form not in FORMS:
        raise UserError(f"unknown cache form {form!r}", f"use one of: {', '.join(FORMS)}")
    if form != "dynamic" and not stack.startswith("hf"):
        raise UserError(
            f"--cache {form} is a form of transformers' cache; --stack {stack} keeps its own "
            "(paged KV)",
            "use --stack hf (or hf-fa2, hf-compile) with --cache, or drop --cache",
        )
    if form == "offloaded" and local:
        raise UserError(
            "--cache offloaded moves the KV cache from GPU to host memory: a CPU has nothing "
            "to offload",
            "pick a GPU with --hardware, or another --cache",
        )


def _check_cache_layers(form: str, shape: Any) -> None:
    """Refuse a quantized cache for a model with sliding-window layers (transformers does)."""
    windows = [lay.window for lay in (shape.census.layers if shape.census else []) if lay.window]
    if form == "quantized" and (windows or shape.sliding_window):
        raise UserError(
            "--cache quantized: transformers' quantized cache holds full-attention layers only, "
            "and this model has sliding-window layers",
            "use --cache dynamic or sliding_window with this model",
        )


def _stack_doc(key: str, release_asked: str | None) -> StackDoc:
    """The stack predicted for: its name, what it does, its constants and their sources."""
    s = STACKS[key]
    eager = eager_release(key, release_asked)
    return {
        "key": key,
        # the profile's title names its graph era; a release before it says so
        "title": s.title
        if eager is None
        else (
            f"{key} {release_asked}, before its CUDA graphs ({eager.graphs_since}): every "
            f"kernel launched from Python; otherwise as {s.title}"
        ),
        "what": s.what,
        "summary": s.summary(),
        "sources": dict(s.sources),
        "release_assumed": _release_assumed(key, release_asked),
        "release_asked": release_asked,
    }


def _release_assumed(key: str, asked: str | None) -> str:
    """The release the stack's constants describe: the eager era's where one was asked."""
    eager = eager_release(key, asked)
    if eager is None:
        return STACK_RELEASES[key][0]
    return (
        f"{eager.fitted[0]}.x, before CUDA graphs ({eager.graphs_since}): kernels launched "
        f"from Python at {eager.op_seconds * 1e6:.3g} us each, the rest as the profile"
    )


def _learnt_from(runs: list[Any], model: str) -> str:
    if not runs:
        return "no stored runs"
    if all(r.model_info.get("spec") == model for r in runs):
        return "runs of this model"
    return "runs of several models on this device"


def _check_top_k(shape: Any, top_k: int | None) -> None:
    if top_k is None:
        return
    if not shape.experts:
        raise UserError(
            f"--top-k {top_k} applies to mixture-of-experts models; this one is dense",
            "drop --top-k",
        )
    if top_k > shape.experts:
        raise UserError(
            f"--top-k {top_k} is above the model's {shape.experts} experts",
            f"use 1..{shape.experts}",
        )


def _hardware_doc(key: str, ceilings: Ceilings, dev: DeviceModel) -> HardwareDoc:
    return {
        "key": key.strip().lower(),
        "name": ceilings.device,
        "kind": ceilings.kind,
        "peak_flop_per_s": dev.peak_flop_per_s,
        "bandwidth_bytes_per_s": dev.bandwidth_bytes_per_s,
        "memory_bytes": dev.memory_bytes,
        "interconnect_bytes_per_s": dev.interconnect_bytes_per_s,
        "measured": dev.measured,
        "sources": dev.sources,
        "steps": [step.to_dict() for step in dev.steps],
        "efficiency": "measured curves"
        if dev.measured
        else f"datasheet peak x the {dev.stack or 'default'} stack's efficiencies",
        "op_us": dev.op_seconds * 1e6,
    }


def _approximate(
    shape: Any, op_counts: dict[str, Any] | None, dev: DeviceModel, w: Workload
) -> list[str]:
    notes = list(approximate(shape))
    notes = [n for n in notes if "torch's count" not in n]  # no forward was counted here
    if op_counts is None:
        notes.append("framework operations estimated per block (the model could not be run)")
    elif op_counts.get("extrapolated"):
        notes.append("framework operations counted on 1 and 2 blocks and extrapolated")
    every = every_prompt_logit(shape, w.transformers_release)
    notes.append(
        "activation memory approximate (one block's transients and "
        + (
            "every prompt position's logits: transformers before 4.45, or a model whose "
            "forward takes no logits_to_keep)"
            if every
            else "the last position's logits)"
        )
    )
    if not dev.measured:
        notes.append(
            f"efficiencies and host costs are the {dev.stack or 'default'} stack's, fitted to "
            "published measurements, not measured on this device"
        )
    if DESKTOP_SOURCE_KEY in dev.sources:
        notes.append(
            f"host time {dev.op_seconds * 1e6:.2g} us an operation: a desktop CPU's, assumed "
            f"because this card sits in desktops (a server's: "
            f"{STACKS[dev.stack or DEFAULT_STACK].op_seconds * 1e6:.3g}); --host-us-per-op "
            "gives yours"
        )
    if SUSTAINED_SOURCE_NAME in dev.sources:
        notes.append(
            f"bandwidth efficiency {dev.bandwidth_efficiency:.0%} of the datasheet: scaled to "
            "what this card's memory sustained in a published microbenchmark"
        )
    return notes
