"""What-if: memory fit, roofline bounds and predicted TTFT, TPOT and throughput, with no run.

`predict` takes a model's shape (any preset, folder or config: costed from the meta device),
a device model (analysis/timemodel.py: measured curves, or a spec row with default
efficiencies) and a workload, and answers per batch size: does it fit (weights, KV cache at the
final length, activations, runtime, free), how long the prefill and a decode step take and
which bound they are near, and the throughput. Stored runs on the same device refine it
(`learn_from_runs`): per phase, the measured medians against the prediction give a factor for
the device's work and one for its host overhead, and the prediction says how many runs it
learnt from.

Memory (per GPU with tensor parallelism `tp`):
- weights: parameters x bytes per weight / tp (exact for the count given; weight-only and W8A8
  schemes count every weight at 8 bits, though the output head often stays 16-bit);
- KV cache: 2 (keys and values) x kv heads x head dim x dtype bytes per token per attention
  block, at the final length (prompt + new tokens), capped at a sliding window; heads split
  over tp GPUs (a KV head is never split: at least one per GPU);
- activations of the prefill (approximate): the hidden state and its residual copies, one
  block's MLP intermediates, its query/key/value projections, and the float32 logits of the
  last position (every prompt position's under transformers before 4.45, or for a model whose
  forward takes no `logits_to_keep`: `logits_bytes`);
- runtime: the framework's own memory (measured for this machine by `calibrate`, assumed
  0.6 GB for a CUDA context and cuBLAS workspace on a spec GPU).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from infermeter.analysis.intervals import BandDoc
from infermeter.analysis.kvcache import decode_context, decode_kv_bytes_each, kv_memory
from infermeter.analysis.perfmodel import ModelCheck
from infermeter.analysis.precision import PRECISIONS, Precision, precision_of
from infermeter.analysis.timemodel import (
    DESKTOP_SOURCE_KEY,
    GIVEN_HOST_SOURCE_KEY,
    DeviceModel,
    ForwardTime,
    ForwardTimeDoc,
    Work,
    attention_path,
    eager_attention,
    forward_time,
    has_attention,
)
from infermeter.measure.faults import ALLOCATOR_FIX, mmap_threshold_bytes
from infermeter.models.shape import Shape

if TYPE_CHECKING:  # annotations only: the run's module imports numpy
    from infermeter.run.results import RunResult

#: the dtypes predict knows (analysis/precision.py says what each stores and computes in)
DTYPE_BYTES = {k: p.weight_bytes for k, p in PRECISIONS.items()}
#: a CUDA context, cuBLAS workspace and the allocator's slack: assumed, not measured
GPU_RUNTIME_BYTES = 0.6e9


@dataclass(frozen=True)
class Workload:
    """What is predicted: batches (per replica), prompt and new tokens, dtype, parallelism."""

    batches: tuple[int, ...]
    prompt_tokens: int
    new_tokens: int
    dtype: str = "bfloat16"
    gpus: int = 1
    tp: int = 1
    top_k: int | None = None
    #: the KV cache's form (analysis/kvcache.py): dynamic, static, quantized, offloaded, ...
    cache: str = "dynamic"
    #: the transformers release of an HF stack (`hf@4.38`); None: the installed one. Before
    #: 4.45 a prefill computes every prompt position's logits (`logits_bytes`).
    transformers_release: str | None = None

    @property
    def replicas(self) -> int:
        """Data-parallel copies of the model: GPUs / tensor-parallel degree."""
        return max(self.gpus // self.tp, 1)


def sequence_kv_bytes(shape: Shape, dtype_bytes: int, tp: int = 1, length: int = 1) -> float:
    """KV-cache bytes of one sequence of `length` tokens, per GPU (windows respected).

    Named `kv_bytes_per_token` before: it returns the whole sequence's bytes (issue 36).
    """
    kv_heads = math.ceil(max(shape.kv_heads, 1) / tp)
    per_layer_token = 2 * kv_heads * shape.head_dim * dtype_bytes
    layers = shape.census.layers if shape.census else []
    if not layers:
        return shape.layers * per_layer_token * min(length, shape.sliding_window or length)
    out = 0.0
    for lay in layers:
        if lay.score_dims:
            out += per_layer_token * min(length, lay.window or length)
    return out


#: the first transformers release whose generate computes only the last prompt position's
#: logits: 4.45.0 added `num_logits_to_keep` to Llama, Mistral, Qwen2 and their kin, and
#: generate asks for one position; before it their forward computed every position's logits
#: and upcast them all to float32 (`logits = logits.float()`, transformers issue #30860, PR
#: #31292). Read in the 4.43.4, 4.44.2 and 4.45.0 wheels.
LAST_LOGITS_RELEASE = (4, 45)


def _release(version: str) -> tuple[int, int] | None:
    """(major, minor) of a release name such as "4.38.2" or "v4.38"; None if unreadable."""
    parts = version.strip().lstrip("v").split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None


def logits_bytes(
    shape: Shape, dtype_bytes: int, prompt: int, tp: int = 1, release: str | None = None
) -> float:
    """The prefill's logits of one sequence, in bytes.

    Generate keeps the last position's, in float32. A model whose forward cannot be asked for
    the last position only (`Shape.last_logits_only`), or any under a transformers release
    before 4.45, computes every prompt position's in the activations' dtype; those releases
    also copied them all to float32.
    """
    if not every_prompt_logit(shape, release):
        return 4 * shape.vocab / tp
    old = _before_last_logits(release)
    return prompt * shape.vocab * (dtype_bytes + (4 if old else 0)) / tp


def _before_last_logits(release: str | None) -> bool:
    """Whether `release` (None: the installed one) is a transformers before 4.45."""
    if release is None:
        return False
    return (_release(release) or LAST_LOGITS_RELEASE) < LAST_LOGITS_RELEASE


def every_prompt_logit(shape: Shape, release: str | None = None) -> bool:
    """Whether a prefill computes the logits of every prompt position, not the last only."""
    return _before_last_logits(release) or not shape.last_logits_only


def activation_bytes(
    shape: Shape,
    dtype_bytes: int,
    prompt: int,
    tp: int = 1,
    eager: bool = False,
    release: str | None = None,
) -> float:
    """Peak transient memory of one sequence's prefill (approximate; see module docstring).

    Eager attention (no attention kernel) holds a block's whole score matrix, in the
    activations' dtype and again softmaxed in float32: heads x prompt^2 x (bytes + 4). The
    logits are `logits_bytes`'s (`release`: the transformers release, None the installed one).
    """
    d = shape.hidden
    f = shape.moe_intermediate * max(shape.top_k, 1) if shape.experts else shape.intermediate
    qkv = (shape.heads + 2 * shape.kv_heads) * shape.head_dim
    per_token = 4 * d + (3 * f + qkv) / tp
    attends = eager and has_attention(shape)
    scores = max(shape.heads // tp, 1) * prompt * prompt * (dtype_bytes + 4) if attends else 0
    logits = logits_bytes(shape, dtype_bytes, prompt, tp, release)
    return dtype_bytes * prompt * per_token + logits + scores


class _MemoryFitParts(TypedDict):
    weights_bytes: float
    kv_cache_bytes: float
    kv_host_bytes: float
    activations_bytes: float
    runtime_bytes: float
    total_bytes: float
    capacity_bytes: float | None
    free_bytes: float | None
    fits: bool | None


class MemoryFitDoc(_MemoryFitParts, total=False):
    """`MemoryFit.to_dict`: bytes per GPU by part, the total, and whether it fits."""

    #: the total's 90% interval (experiments/whatif.py adds it from the held-out errors)
    total_bytes_interval: tuple[float, float] | None


class MemoryAtContextDoc(MemoryFitDoc):
    """One point of `memory_by_context`: the memory of a batch at a context length."""

    context_tokens: int


class LearnedDoc(TypedDict):
    """What a prediction learnt from stored runs: how many, and the factors per phase."""

    runs: int
    factors: dict[str, dict[str, float]]


class _PredictRowFigures(TypedDict):
    batch: int
    memory: MemoryFitDoc
    prefill: ForwardTimeDoc
    decode: ForwardTimeDoc
    ttft_ms: float
    tpot_ms: float
    throughput_tok_s: float | None
    decode_tok_s: float | None
    notes: list[str]


class PredictRowDoc(_PredictRowFigures, total=False):
    """One batch size of a prediction: memory, both phases, TTFT, TPOT, rates and notes.

    The intervals are added by experiments/whatif.py (`with_intervals`): a bare `predict`
    call from analysis has none.
    """

    interval: BandDoc
    ttft_ms_interval: tuple[float, float] | None
    tpot_ms_interval: tuple[float, float] | None
    throughput_tok_s_interval: tuple[float, float] | None
    decode_tok_s_interval: tuple[float, float] | None
    memory_interval: BandDoc


class BatchPredictionDoc(TypedDict):
    """`predict`'s answer: a row per batch, the largest batch that fits, what it learnt."""

    rows: list[PredictRowDoc]
    largest_batch: int | None
    runtime_bytes: float
    learned: LearnedDoc


@dataclass
class MemoryFit:
    """Memory of one batch (per GPU), in bytes."""

    weights_bytes: float
    kv_cache_bytes: float
    activations_bytes: float
    runtime_bytes: float
    capacity_bytes: float | None
    #: an offloaded cache's bytes in host memory (not counted against the device)
    kv_host_bytes: float = 0.0

    @property
    def total_bytes(self) -> float:
        """Everything needed."""
        return (
            self.weights_bytes + self.kv_cache_bytes + self.activations_bytes + self.runtime_bytes
        )

    @property
    def free_bytes(self) -> float | None:
        """Capacity left (negative: short by that much)."""
        return None if self.capacity_bytes is None else self.capacity_bytes - self.total_bytes

    def to_dict(self) -> MemoryFitDoc:
        """Plain dict for JSON."""
        return {
            "weights_bytes": self.weights_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            "kv_host_bytes": self.kv_host_bytes,
            "activations_bytes": self.activations_bytes,
            "runtime_bytes": self.runtime_bytes,
            "total_bytes": self.total_bytes,
            "capacity_bytes": self.capacity_bytes,
            "free_bytes": self.free_bytes,
            "fits": None if self.free_bytes is None else self.free_bytes >= 0,
        }


def memory_fit(
    shape: Shape,
    params: int,
    dtype: str,
    batch: int,
    prompt: int,
    new: int,
    tp: int,
    capacity: float | None,
    runtime: float,
    cpu: bool = False,
    cache: str = "dynamic",
    eager: bool = False,
    release: str | None = None,
) -> MemoryFit:
    """Weights, KV cache at the final length, prefill activations and runtime, per GPU.

    A quantized cache's one-layer full-precision copy counts with the activations, and eager
    attention's score matrix (`eager`: no attention kernel) too; `release` is the transformers
    release an HF stack runs (None: the installed one), which decides the prefill's logits.
    """
    p = _precision(dtype, cpu)
    e = p.act_bytes
    kv = kv_memory(shape, p.kv_bytes_each, tp, prompt, new, cache)
    return MemoryFit(
        weights_bytes=params * p.weight_bytes / tp,
        kv_cache_bytes=batch * kv.device_bytes,
        activations_bytes=batch
        * (activation_bytes(shape, e, prompt, tp, eager, release) + kv.transient_bytes),
        runtime_bytes=runtime,
        capacity_bytes=capacity,
        kv_host_bytes=batch * kv.host_bytes,
    )


def workload_memory(
    shape: Shape,
    params: int,
    w: Workload,
    batch: int,
    prompt: int,
    new: int,
    capacity: float | None,
    runtime: float,
    cpu: bool = False,
    eager: bool = False,
) -> MemoryFit:
    """`memory_fit` with the workload's dtype, parallelism, cache form and release."""
    return memory_fit(
        shape,
        params,
        w.dtype,
        batch,
        prompt,
        new,
        w.tp,
        capacity,
        runtime,
        cpu,
        w.cache,
        eager,
        w.transformers_release,
    )


def _precision(dtype: str, cpu: bool) -> Precision:
    """The precision of a dtype name; an unknown one (an old run's) as float32."""
    return precision_of(dtype if dtype in PRECISIONS else "float32", cpu)


def largest_batch(
    shape: Shape,
    params: int,
    w: Workload,
    capacity: float | None,
    runtime: float,
    cpu: bool = False,
    eager: bool = False,
) -> int | None:
    """The most sequences per replica that fit (0 when not even the weights do)."""
    if capacity is None:
        return None
    one = workload_memory(
        shape, params, w, 1, w.prompt_tokens, w.new_tokens, capacity, runtime, cpu, eager
    )
    per_seq = one.kv_cache_bytes + one.activations_bytes
    room = capacity - one.weights_bytes - runtime
    return max(0, int(room // per_seq)) if per_seq > 0 else None


@dataclass
class Learned:
    """Per-phase factors learnt from stored runs: device work x `work`, host overhead x `host`."""

    runs: int = 0
    factors: dict[str, dict[str, float]] = field(default_factory=dict)

    def scaled(self, phase: str, t: ForwardTime) -> dict[str, float]:
        """Seconds by part with the phase's factors: device work x `work`, host x `host`."""
        f = self.factors.get(phase) or {"work": 1.0, "host": 1.0}
        return {
            "gemm": f["work"] * t.gemm_s,
            "attention": f["work"] * t.attention_s,
            "elementwise": f["work"] * t.elementwise_s,
            "communication": f["work"] * t.comm_s,
            "framework": f["host"] * t.overhead_s,
            "generate": f["host"] * t.generate_s,
        }

    def apply(self, phase: str, t: ForwardTime) -> float:
        """The phase's total with the learnt factors (the prediction as is without any)."""
        if not self.factors.get(phase):
            return t.total_s
        p = self.scaled(phase, t)
        work = p["gemm"] + p["attention"] + p["elementwise"] + p["communication"]
        return t.combine(work, p["framework"], p["generate"])

    def predicted(self, phase: str, t: ForwardTime) -> tuple[float, str | None]:
        """`apply`, never below the forward's own roofline bounds, and the note when it would be.

        Factors learnt on small runs can shrink device work below what its FLOPs at peak or its
        bytes at full bandwidth allow (a batch-32 TTFT of 2,881 ms under its compute bound of
        4,430 ms): then the bound is the prediction, and the note says so.
        """
        return at_least_bounds(self.apply(phase, t), t)

    def parts(self, phase: str, t: ForwardTime) -> dict[str, float]:
        """Seconds by part after the learnt factors, adding up to `predicted`'s seconds.

        The remainder is a named row: on a GPU, the time host launches and device work overlap
        (negative), or what the roofline bound adds where the factors went under it.
        """
        out = self.scaled(phase, t)
        total, note = self.predicted(phase, t)
        rest = total - sum(out.values())
        if abs(rest) > 1e-12 + 1e-9 * total:
            name = "up to the roofline bound" if note else "overlapped (host and device at once)"
            out[name] = rest
        return out


def at_least_bounds(seconds: float, t: ForwardTime) -> tuple[float, str | None]:
    """`seconds`, or the largest of `t`'s roofline bounds when it is below it (with why)."""
    bounds = {
        "compute": t.compute_bound_s,
        "memory": t.memory_bound_s,
        "communication": t.comm_bound_s,
    }
    name, floor = max(
        ((k, v) for k, v in bounds.items() if v), key=lambda kv: kv[1], default=(None, 0.0)
    )
    if seconds >= floor:
        return seconds, None
    return floor, (
        f"the time model gave {seconds * 1e3:.4g} ms, below its {name} bound of "
        f"{floor * 1e3:.4g} ms: the bound is the prediction"
    )


def _fit_two(points: list[tuple[float, float, float]]) -> dict[str, float]:
    """Non-negative (work, host) factors minimising relative error.

    One shared scale instead with fewer than 4 points, or when the two parts cannot be told
    apart (a negative factor).
    """
    import numpy as np

    if len(points) >= 4:
        a = np.array([[w / m, h / m] for w, h, m in points])
        sol, *_ = np.linalg.lstsq(a, np.ones(len(points)), rcond=None)
        if (sol > 0).all():
            return {"work": float(sol[0]), "host": float(sol[1])}
    ratio = statistics.median(m / (w + h) for w, h, m in points)
    return {"work": ratio, "host": ratio}


def learn_from_runs(points: dict[str, list[tuple[ForwardTime, float]]], runs: int) -> Learned:
    """Factors per phase from (predicted parts, measured seconds) of stored runs.

    The factors are fitted through the forward's own combination of its parts
    (`ForwardTime.combine`), the one `Learned.apply` predicts with. On a CPU the parts add, so
    the fit is linear; on a GPU host launches hide under device work (the slower of the two
    with overlap 1), and a fit of the parts' sum would learn from a total the prediction never
    makes: on an H100, qwen3-4b's TTFT measured 1.25x the prediction, and the sum-fit learnt a
    factor of 1.00 (tests/bench/data/h100).
    """
    out = Learned(runs=runs)
    for phase, pts in points.items():
        kept = [(t, m) for t, m in pts if m and m > 0]
        if not kept:
            continue
        if all(t.overlap == 0 for t, _ in kept):
            rows = [(_work_s(t), t.overhead_s + t.generate_s, m) for t, m in kept]
            out.factors[phase] = _fit_two(rows)
        else:
            out.factors[phase] = _fit_combined(kept)
    return out


def _work_s(t: ForwardTime) -> float:
    """The device's part of a forward: GEMMs, attention, element-wise work and collectives."""
    return t.gemm_s + t.attention_s + t.elementwise_s + t.comm_s


def _fit_combined(points: list[tuple[ForwardTime, float]]) -> dict[str, float]:
    """(work, host) factors minimising relative error through each forward's `combine`.

    `combine` scales with its parts, so one shared factor is the median ratio of measured to
    predicted; with 4 or more points scipy's bounded least squares refines the two apart
    (where one part hides under the other, its factor stays at the shared one: the data say
    nothing of it).
    """

    def total(t: ForwardTime, work: float, host: float) -> float:
        return t.combine(work * _work_s(t), host * t.overhead_s, host * t.generate_s)

    ratio = statistics.median(m / total(t, 1.0, 1.0) for t, m in points)
    if len(points) < 4:
        return {"work": ratio, "host": ratio}
    from scipy.optimize import least_squares

    def residuals(x: Any) -> list[float]:
        return [total(t, x[0], x[1]) / m - 1.0 for t, m in points]

    fit = least_squares(residuals, [ratio, ratio], bounds=([1e-3, 1e-3], [1e3, 1e3]))
    return {"work": float(fit.x[0]), "host": float(fit.x[1])}


def phase_times(
    shape: Shape,
    dev: DeviceModel,
    batch: int,
    prompt: int,
    new: int,
    dtype: str,
    tp: int = 1,
    top_k: int | None = None,
    op_counts: dict[str, Any] | None = None,
    images: int = 0,
    active_layers: int | None = None,
    cache: str = "dynamic",
) -> dict[str, ForwardTime]:
    """Predicted prefill (the whole prompt) and mean decode step (at the mid context).

    The cache's form moves the decode step (analysis/kvcache.py): a static cache attends over
    its whole allocation; a quantized one moves more bytes per cached element.
    """
    p = _precision(dtype, dev.kind == "cpu")
    e, we, kv = p.act_bytes, (p.weight_bytes if p.quantized else None), p.kv_bytes
    share = p.stream_share
    pre = Work(batch, prompt, 0, 1, e, top_k, active_layers, images, tp, we, kv, share)
    mid = decode_context(cache, prompt, new)
    kv_step = decode_kv_bytes_each(cache, p.kv_bytes_each) or kv
    dec = Work(batch, 1, mid, 1, e, top_k, active_layers, 0, tp, we, kv_step, share)
    prefill = forward_time(shape, dev, pre, "prefill", op_counts)
    decode = forward_time(shape, dev, dec, "decode", op_counts)
    return {"prefill": prefill, "decode": decode}


def _fault_notes(decode: ForwardTime, tpot_s: float) -> list[str]:
    """What a decode step's page faults cost and how to be rid of them (none: no note)."""
    if not decode.page_fault_s or not tpot_s:
        return []
    limit = mmap_threshold_bytes() or 0
    share = decode.page_fault_s / tpot_s
    return [
        f"TPOT: {decode.page_fault_s * 1e3:.3g} ms of each step ({share:.0%}) is page faults: "
        f"each layer's KV cache, past malloc's {limit / 2**20:.0f} MiB mmap threshold, is "
        f"mapped afresh every step; {ALLOCATOR_FIX} removes them"
    ]


def _eager_notes(
    shape: Shape, dev: DeviceModel, decode: ForwardTime, op_counts: dict[str, Any] | None
) -> list[str]:
    """How the model's attention reads the KV cache each decode step, where it is not plainly.

    Eager attention (no attention kernel dispatched) of a release before SDPA became the
    default reads it slowly; keys copied out to every query head (`repeat_kv`) are read once
    per query head, after the copy.
    """
    path = attention_path(op_counts, "decode", dev.stack)
    if dev.measured or not decode.attention_s:
        return []
    release = (op_counts or {}).get("transformers") or "this release"
    ms = f"{decode.attention_s * 1e3:.3g} ms of each step"
    if path.eager_slow:
        return [
            f"TPOT: attention runs as matmuls (the model dispatched no attention kernel: eager, "
            f"transformers {release}), reading the KV cache at "
            f"{dev.eager_attention_efficiency:.0%} of bandwidth: {ms}; an attention kernel "
            f"(attn_implementation='sdpa') reads it at {dev.bandwidth_efficiency:.0%}"
        ]
    notes = []
    if path.eager:
        notes.append(
            f"TPOT: attention runs as matmuls (the model dispatched no attention kernel: eager): "
            f"{ms}, at SDPA's rate (an H100 measured eager and SDPA decode steps within 2% "
            "under transformers 4.46.3 and 5.17)"
        )
    if path.keys_copied and shape.heads > shape.kv_heads:
        notes.append(
            f"TPOT: keys and values are copied out to all {shape.heads} query heads from "
            f"{shape.kv_heads} before attention each step (repeat_kv, transformers {release}) "
            f"and read once per query head: {ms}; transformers 5 hands SDPA the grouped cache"
        )
    return notes


def stream_notes(dtype: str, dev: DeviceModel) -> list[str]:
    """Where weight-only weights stream slower than 16-bit ones: by how much, and whose table.

    `predict` prints it under each batch and `load predict` among its approximations.
    """
    p = _precision(dtype, dev.kind == "cpu")
    if p.stream_share >= 1.0:
        return []
    return [
        f"{dtype} weights stream at {p.stream_share:.0%} of the 16-bit rate while "
        "dequantised (torchao's A100 table of weight-only decoding; approximate on other "
        "kernels and GPUs)"
    ]


#: host time per framework operation of the servers measured running eager generate:
#: bitsandbytes' published H100 rows imply 9.5-10 us (launch-bound at batch 1); this project's
#: H100 VM took 13.0-13.8 (make gpu-check, docs/analysis.md); the fit says 11 (A100 servers).
#: A desktop's CPU is faster (timemodel.DESKTOP_HOST_FACTOR). About 60% of the operations
#: launch a kernel: an H100 ran 1,545 kernels a Llama-3.1-8B decode step under transformers
#: 4.46.3, which dispatched 2,560 operations (tests/bench/data/h100)
SERVER_HOST_US = (9.5, 13.8)


def _launch_notes(dev: DeviceModel, decode: ForwardTime) -> list[str]:
    """Where a GPU's eager decode step is launch-bound: the host CPU, not the GPU, sets it."""
    work = decode.gemm_s + decode.attention_s + decode.elementwise_s + decode.comm_s
    if dev.kind != "gpu" or dev.stack not in ("hf", "hf-fa2") or decode.overhead_s <= work:
        return []
    ops = decode.overhead_s / dev.op_seconds if dev.op_seconds else 0
    low, high = SERVER_HOST_US
    given = GIVEN_HOST_SOURCE_KEY in dev.sources
    desktop = DESKTOP_SOURCE_KEY in dev.sources
    return [
        f"TPOT: launch-bound: {ops:,.0f} operations x {dev.op_seconds * 1e6:.3g} us of host "
        + ("time, given" if given else "time, a desktop's (assumed)" if desktop else "time")
        + f" ({decode.overhead_s * 1e3:.3g} ms) against {work * 1e3:.3g} ms of GPU work, so "
        "the host CPU sets this step"
        + (
            ""
            if given
            else f" (servers measured or implied: {low} to {high} us an operation); "
            "--host-us-per-op gives yours"
        )
    ]


def predict(
    shape: Shape,
    params: int,
    dev: DeviceModel,
    w: Workload,
    op_counts: dict[str, Any] | None = None,
    learned: Learned | None = None,
    runtime_bytes: float | None = None,
) -> BatchPredictionDoc:
    """Per batch: memory fit, per-phase parts and bounds, TTFT, TPOT, throughput."""
    learned = learned or Learned()
    runtime = (
        runtime_bytes
        if runtime_bytes is not None
        else (GPU_RUNTIME_BYTES if dev.kind == "gpu" else 0.0)
    )
    eager = eager_attention(op_counts, "prefill")
    rows: list[PredictRowDoc] = []
    for b in w.batches:
        mem = workload_memory(
            shape,
            params,
            w,
            b,
            w.prompt_tokens,
            w.new_tokens,
            dev.memory_bytes,
            runtime,
            dev.kind == "cpu",
            eager,
        )
        times = phase_times(
            shape,
            dev,
            b,
            w.prompt_tokens,
            w.new_tokens,
            w.dtype,
            w.tp,
            w.top_k,
            op_counts,
            cache=w.cache,
        )
        ttft, ttft_note = learned.predicted("prefill", times["prefill"])
        tpot, tpot_note = learned.predicted("decode", times["decode"])
        total_s = ttft + max(w.new_tokens - 1, 0) * tpot
        rows.append(
            {
                "batch": b,
                "memory": mem.to_dict(),
                "prefill": times["prefill"].to_dict(),
                "decode": times["decode"].to_dict(),
                "ttft_ms": ttft * 1e3,
                "tpot_ms": tpot * 1e3,
                "throughput_tok_s": w.replicas * b * w.new_tokens / total_s if total_s else None,
                "decode_tok_s": w.replicas * b / tpot if tpot else None,
                "notes": [f"{k}: {n}" for k, n in (("TTFT", ttft_note), ("TPOT", tpot_note)) if n]
                + _fault_notes(times["decode"], tpot)
                + _eager_notes(shape, dev, times["decode"], op_counts)
                + _launch_notes(dev, times["decode"])
                + [f"TPOT: {n}" for n in stream_notes(w.dtype, dev)],
            }
        )
    return {
        "rows": rows,
        "largest_batch": largest_batch(
            shape, params, w, dev.memory_bytes, runtime, dev.kind == "cpu", eager
        ),
        "runtime_bytes": runtime,
        "learned": {"runs": learned.runs, "factors": learned.factors},
    }


def memory_by_context(
    shape: Shape,
    params: int,
    w: Workload,
    batch: int,
    capacity: float | None,
    runtime: float,
    cpu: bool = False,
    eager: bool = False,
) -> list[MemoryAtContextDoc]:
    """Memory of `batch` sequences at context lengths up to 4x the workload's (the figure)."""
    end = max(4 * (w.prompt_tokens + w.new_tokens), 1024)
    lengths = sorted({int(end * f) for f in (1 / 64, 1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1)})
    out = []
    for n in lengths:
        m = workload_memory(shape, params, w, batch, n, 0, capacity, runtime, cpu, eager)
        out.append(MemoryAtContextDoc(context_tokens=n, **m.to_dict()))
    return out


def predict_run(run: RunResult, dev: DeviceModel) -> dict[str, ForwardTime]:
    """The time model's prefill and mean decode step for a stored run's workload."""
    from infermeter.analysis.roofline import run_shapes

    shape, work = run_shapes(run)
    return phase_times(
        shape,
        dev,
        work["batch"],
        work["prompt"],
        work["new"],
        work["dtype"],
        top_k=work["top_k"],
        op_counts=(shape.flop_check or {}).get("op_counts"),
        images=work["images"],
        active_layers=work["active_layers"],
        cache=work.get("cache", "dynamic"),
    )


def measured_seconds(run: RunResult) -> dict[str, float]:
    """A run's median TTFT and TPOT in seconds, by phase."""
    s = run.summary()
    return {"prefill": s["ttft_ms"].median / 1e3, "decode": s["tpot_ms"].median / 1e3}


def learn_from_stored(runs: list[RunResult], dev: DeviceModel) -> Learned:
    """`learn_from_runs` over stored runs (those that cannot be costed are skipped)."""
    points: dict[str, list[tuple[ForwardTime, float]]] = {"prefill": [], "decode": []}
    used = 0
    for run in runs:
        try:
            pred = predict_run(run, dev)
            meas = measured_seconds(run)
        except Exception:  # an old or odd run teaches nothing; skip it
            continue
        if not all(v and v == v for v in meas.values()):
            continue
        used += 1
        for phase in points:
            points[phase].append((pred[phase], meas[phase]))
    return learn_from_runs(points, used) if used else Learned()


def time_model_of_run(
    run: RunResult, dev: DeviceModel, learned: Learned | None = None
) -> dict[str, Any]:
    """The time model's TTFT and TPOT for a stored run beside what was measured.

    `analyze` shows it so a user sees, per phase, how much of the measured time the curves
    explain (calibration only) or, with `learned` factors from other stored runs, how far this
    run lies from the device's usual behaviour.
    """
    learned = learned or Learned()
    pred = predict_run(run, dev)
    meas = measured_seconds(run)
    rows = []
    for phase, metric in (("prefill", "ttft_ms"), ("decode", "tpot_ms")):
        t = pred[phase]
        p, note = learned.predicted(phase, t)
        m = meas[phase]
        rows.append(
            {
                "phase": phase,
                "metric": metric,
                "predicted_ms": p * 1e3,
                "measured_ms": m * 1e3,
                "error_pct": 100 * (p - m) / m if m else None,
                "bound": t.bound,
                # after the learnt factors: the parts add up to predicted_ms (the remainder,
                # if any, is a named row)
                "parts_ms": {k: v * 1e3 for k, v in learned.parts(phase, t).items()},
                "note": note,
            }
        )
    return {
        "rows": rows,
        "sources": dev.sources,
        "learned": {"runs": learned.runs, "factors": learned.factors},
    }


@dataclass
class CurveModel:
    """The curve time model of one phase with factors learnt from a sweep's fitted points."""

    phase: str
    coef: dict[str, float]
    fitted_on: list[dict[str, Any]] = field(default_factory=list)

    def title(self) -> str:
        """How the model predicts, for a table title."""
        c = self.coef
        return (
            f"{self.phase}: curves, ms = {c.get('work', 1):.3g} x device work + "
            f"{c.get('host', 1):.3g} x host overhead"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return {"kind": "curves", **asdict(self)}


def curve_check_on_sweep(
    runs: list[RunResult], train: list[bool], dev: DeviceModel
) -> dict[str, ModelCheck]:
    """`check_on_sweep` for the curve time model: learn factors on the fitted runs, predict all.

    Returns ModelCheck objects per phase (the same shape `fit` prints for the linear model).
    """
    preds = [predict_run(r, dev) for r in runs]
    meas = [measured_seconds(r) for r in runs]
    fitted = [r for r, t in zip(runs, train, strict=True) if t]
    points = {
        phase: [(p[phase], m[phase]) for p, m, t in zip(preds, meas, train, strict=True) if t]
        for phase in ("prefill", "decode")
    }
    learned = learn_from_runs(points, len(fitted))
    out = {}
    for phase in ("prefill", "decode"):
        rows = []
        for run, p, m, t in zip(runs, preds, meas, train, strict=True):
            value = learned.predicted(phase, p[phase])[0] * 1e3
            ms = m[phase] * 1e3
            rows.append(
                {
                    "config": run.knobs,
                    "run_id": run.run_id,
                    "fitted": t,
                    "measured_ms": ms,
                    "predicted_ms": value,
                    "error_pct": 100 * (value - ms) / ms,
                }
            )
        model = CurveModel(phase, dict(learned.factors.get(phase, {})))
        out[phase] = ModelCheck(phase, model, rows)
    return out
