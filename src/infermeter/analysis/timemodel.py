"""Time of one forward, from its GEMMs, attention, element-wise work and framework overhead.

Why not FLOPs / peak: real kernels reach a share of peak that depends on the shape (a 32-row
GEMM on this project's CPU runs 4x slower per FLOP than a 4096-row one; a decode-step GEMM is
bandwidth-bound), and a small model's step is mostly framework overhead. So a forward is
costed part by part:

- every linear layer is a GEMM of (batch x tokens) rows by its [in, out] (the census' shapes),
  each routed expert a GEMM of the rows it receives (tokens x top-k spread over the experts
  hit), the LM head one of the rows whose logits are computed;
- attention (one SDPA call per block) at its queries and keys;
- element-wise work (norms, activations, rotary, residual adds) as bytes moved, and the
  dynamic KV cache's re-copy each step (from memory, plus the page faults of a cache mapped
  afresh, on a CPU);
- every other framework operation (views, casts, the Python around them) at a measured cost
  each, and what `generate` adds before the first token and per step;
- with tensor parallelism, every block's two all-reduces over the interconnect.

On a device with measured curves (`infermeter calibrate`, measure/curves.py) every part is read
from them. On a spec-table device the GEMM is max(FLOPs / (peak x compute efficiency), bytes /
(bandwidth x bandwidth efficiency)), attention likewise, with the default efficiencies below,
and a GPU's host-side overhead overlaps its device work. Each result says which it used.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypedDict, cast

from infermeter.analysis.costs import Cost, _vision, forward_costs, total
from infermeter.measure.ceilings import (
    HOST_CLASS_KEY,
    SUSTAINED_KEY,
    SUSTAINED_SOURCE_KEY,
    Ceilings,
)
from infermeter.measure.curves import Curves, curves_of
from infermeter.measure.faults import PAGE_BYTES, mmap_threshold_bytes
from infermeter.models.shape import Shape

if TYPE_CHECKING:
    from infermeter.analysis.stacks import Stack

#: Defaults for a device nobody measured, from published measurements of eager PyTorch:
#: cuBLAS GEMMs at large shapes reach 60-75% of dense tensor peak on A100/H100; streaming
#: kernels 80-90% of HBM bandwidth; FlashAttention-2 35-50% of peak in the forward pass
#: (Dao 2023); a kernel launch through PyTorch's dispatcher costs 4-10 us of host time.
DEFAULT_COMPUTE_EFFICIENCY = 0.65
DEFAULT_BANDWIDTH_EFFICIENCY = 0.8
DEFAULT_ATTENTION_EFFICIENCY = 0.4
DEFAULT_OP_SECONDS = 6e-6
#: generate's own work before the first token and per step (logits processing, stopping
#: criteria, cache bookkeeping) on a server CPU: measured 0.9 ms and 0.3 ms on this project's
#: 2-core VM (bench/curves.py); a faster host is assumed to take about half
DEFAULT_GENERATE_FIRST_S = 0.5e-3
DEFAULT_GENERATE_STEP_S = 0.15e-3
#: eager attention (a matmul, then scale, mask and softmax as separate operations, then a
#: matmul) writes and reads its scores several times: Llama's writes them in float16 (2
#: bytes), scales them (4), adds the mask (4), softmaxes in float32 (6), casts back (6) and
#: reads them into the second matmul (2), 24 bytes per score (transformers' eager_attention)
EAGER_SCORE_BYTES = 24
#: one all-reduce's fixed latency (NCCL ring over NVLink, small messages)
ALLREDUCE_LATENCY_S = 10e-6
#: share of its datasheet bandwidth the memory of the GPUs the stacks' efficiencies were fitted
#: on sustains in a copy microbenchmark (A100 40GB 90.5%, H800 with an A100 80GB's HBM2e
#: 91.3%: Luo et al. 2024, Table V; this project's H100 SXM calibrated 90%, docs/gpu.md). A
#: device measured to sustain less (a 70 W T4: 68.8%) reads its weights at that much less of
#: the fitted efficiency
FIT_SUSTAINED_FRACTION = 0.91
#: a desktop CPU dispatches eager PyTorch operations faster than the servers the eager stacks'
#: host times were fitted on: TinyChat's 4-bit decode step took 7.46-8.52 ms on an RTX 4090
#: under an Intel i9-13900K and 17.71-18.6 ms on an RTX 4090 under an AMD EPYC (a user's
#: comment on mit-han-lab/llm-awq PR #55 and issue #61, 2023-08): the ranges' midpoints
DESKTOP_HOST_FACTOR = 7.99 / 18.16
DESKTOP_HOST_SOURCE = (
    "TinyChat's decode step took 7.46-8.52 ms on an RTX 4090 with an Intel i9-13900K and "
    "17.71-18.6 ms on one with an AMD EPYC (a user's report, mit-han-lab/llm-awq PR #55 and "
    "issue #61, 2023-08)"
)
#: the sources' keys for an assumed desktop host, a host time the user gave and a card's
#: sustained bandwidth
DESKTOP_SOURCE_KEY = "desktop host"
GIVEN_HOST_SOURCE_KEY = "host per operation"
SUSTAINED_SOURCE_NAME = "sustained bandwidth"
#: framework operations per decoder block when a model's count is unknown (a Llama block in
#: transformers 5 with SDPA dispatches about 70 besides its GEMMs and attention)
DEFAULT_OPS_PER_BLOCK = 70


class DeviceStepDoc(TypedDict):
    """A device model's step as a prediction lists it: what it set, and on what authority."""

    name: str
    sets: dict[str, float | int | str | None]
    notes: dict[str, str]


@dataclass(frozen=True)
class Step:
    """One adjustment of a device model: the figures it sets and on what authority.

    Why records: the device model was a chain of modifiers (sustained bandwidth, desktop host,
    stack) applied in an implicit order, and a public one silently undid two others while
    their source notes stayed (issue 55). A model is now its steps, applied by `apply` in the
    pipeline's one order (`STEP_ORDER`); its `sources` are the steps' notes, so a note cannot
    outlive its step, and a prediction lists the steps it applied.
    """

    #: one of STEP_ORDER
    name: str
    #: field of DeviceModel -> the value this step sets
    sets: tuple[tuple[str, Any], ...]
    #: source key -> the words saying where the figures come from (into `sources`)
    notes: tuple[tuple[str, str], ...]

    def to_dict(self) -> DeviceStepDoc:
        """The step as a prediction document lists it."""
        return {
            "name": self.name,
            "sets": {k: v for k, v in self.sets if isinstance(v, (int, float, str)) or v is None},
            "notes": dict(self.notes),
        }


#: the pipeline's one order: the device's own figures, then how a stack runs on it, then what
#: its memory sustains, then the host that drives it (a host the user gave replaces the class)
STEP_ORDER = (
    "datasheet",
    "curves",
    "stack",
    "release",
    "sustained bandwidth",
    "host class",
    "given host",
)


@dataclass(frozen=True)
class DeviceModel:
    """What the time model needs of a device, and where each figure comes from."""

    name: str
    kind: str
    peak_flop_per_s: float | None
    bandwidth_bytes_per_s: float | None
    curves: Curves | None = None
    compute_efficiency: float = DEFAULT_COMPUTE_EFFICIENCY
    bandwidth_efficiency: float = DEFAULT_BANDWIDTH_EFFICIENCY
    attention_efficiency: float = DEFAULT_ATTENTION_EFFICIENCY
    op_seconds: float = DEFAULT_OP_SECONDS
    generate_first_seconds: float = DEFAULT_GENERATE_FIRST_S
    generate_step_seconds: float = DEFAULT_GENERATE_STEP_S
    memory_bytes: float | None = None
    interconnect_bytes_per_s: float | None = None
    sources: dict[str, str] = field(default_factory=dict)
    #: the serving stack predicted for (analysis/stacks.py); None: as `profile` runs the model
    stack: str | None = None
    #: share of the host's launch time hidden under device work (1: the slower of the two)
    overlap: float | None = None
    #: kernels per block where the stack fuses them (None: the model's own count)
    ops_per_block: int | None = None
    #: passes over the whole KV cache per step beyond attention's read (transformers' dynamic
    #: cache: 2, torch.cat reading it and writing it again; 0 where it is written in place)
    cache_passes: float = 2.0
    #: share of eager element-wise bytes left after the stack's fusion
    elementwise_factor: float = 1.0
    #: share of bandwidth eager attention's two batched matmuls reach reading the KV cache at
    #: decode (one query row per head, not a fused attention kernel; fitted, not measured)
    eager_attention_efficiency: float = DEFAULT_BANDWIDTH_EFFICIENCY
    #: GPU time each framework operation other than a GEMM or attention takes beyond its bytes
    #: (a small kernel's launch latency and ramp on the device; 0: not charged)
    device_op_seconds: float = 0.0
    #: the adjustments that made this model, in the order applied (`apply`); `sources` is
    #: their notes and nothing else
    steps: tuple[Step, ...] = ()

    @classmethod
    def from_curves(
        cls, ceilings: Ceilings, curves: Curves, sources: dict[str, str]
    ) -> DeviceModel:
        """A device whose every time comes from measured curves (`calibrate`): two steps."""
        note = sources.get("curves", curves.source)
        return apply(
            apply(cls("", "", None, None), _datasheet(ceilings, curves.dtype, None)),
            Step(
                "curves",
                (
                    ("curves", curves),
                    ("op_seconds", curves.op_seconds),
                    ("generate_first_seconds", curves.generate_first_seconds),
                    ("generate_step_seconds", curves.generate_step_seconds),
                ),
                (("curves", note),),
            ),
        )

    @property
    def measured(self) -> bool:
        """True when times come from curves measured on the device."""
        return self.curves is not None


def apply(dev: DeviceModel, step: Step) -> DeviceModel:
    """`dev` with `step` applied: its figures set, its notes added, it recorded last.

    Steps go in STEP_ORDER; one out of order, or applied twice, is a bug here, not a user's.
    """
    done = [STEP_ORDER.index(x.name) for x in dev.steps]
    if done and STEP_ORDER.index(step.name) <= max(done):
        raise ValueError(f"step {step.name!r} after {dev.steps[-1].name!r}: out of order")
    return replace(
        dev,
        **dict(step.sets),
        sources={**dev.sources, **dict(step.notes)},
        steps=(*dev.steps, step),
    )


def replay(steps: tuple[Step, ...] | list[Step]) -> DeviceModel:
    """A device model made again from its steps (what `with_host` does without one of them)."""
    dev = DeviceModel("", "", None, None)
    for step in steps:
        dev = apply(dev, step)
    return dev


def device_model(
    ceilings: Ceilings, dtype: str, stack: Stack | str | None = None, release: str | None = None
) -> DeviceModel:
    """The device model of a spec row or of measured ceilings (with curves when calibrated).

    Curves of another dtype are used when this one was not measured, scaled by the two dtypes'
    measured peaks, and the notes say so. `dtype` is the GEMMs' rate (a precision's
    `compute`). `stack` (analysis/stacks.py; default `hf`) sets the efficiencies and host
    costs of a device without curves; measured curves are what `profile` runs, so they are
    used as they are. `release` is the stack's release where one was named: one from before
    the engine's CUDA graphs launches its kernels eagerly. Each adjustment is a `Step`,
    applied in STEP_ORDER.
    """
    dev = apply(DeviceModel("", "", None, None), _datasheet(ceilings, dtype, stack))
    curves = _curves_step(ceilings, dtype)
    if curves is not None:
        return apply(dev, curves)
    # nobody measured it: the stack's published-fit constants, transformers' eager generate
    # (what `profile` runs) unless another stack is named
    s = _stack(stack or "hf")
    by_memory = _memory_efficiency(s, ceilings)
    dev = apply(dev, _stack_step(s, by_memory))
    eager = _release_step(s, release)
    if eager is not None:
        dev = apply(dev, eager)
        s = replace(s, graphs=False)  # launched from Python: a host class applies
    sustained = _sustained_step(dev, ceilings) if by_memory is None else None
    for step in (sustained, _host_class_step(dev, ceilings, s)):
        if step is not None:
            dev = apply(dev, step)
    return dev


def _release_step(s: Stack, release: str | None) -> Step | None:
    """A release of `s` from before its CUDA graphs: every kernel launched from Python."""
    from infermeter.analysis.stacks import eager_release

    record = eager_release(s.key, release)
    if record is None:
        return None
    note = (
        f"{s.key} {release} predates its CUDA graphs ({record.graphs_source}): its "
        f"{s.ops_per_block or 'own'} kernels per block are launched from Python at "
        f"{record.op_seconds * 1e6:.3g} us each, {record.source}"
    )
    return Step("release", (("op_seconds", record.op_seconds),), (("release", note),))


def _datasheet(ceilings: Ceilings, dtype: str, stack: Stack | str | None) -> Step:
    """The device's own figures: peaks, bandwidth, memory, interconnect, with their source."""
    peak = ceilings.peak(dtype)
    note = ceilings.source
    acc16 = ceilings.details.get("float16_fp16_accumulate_flop_per_s")
    if acc16 and dtype == "float16" and stack and _stack(stack).fp16_accumulate:
        peak = acc16
        note += f"; float16 with float16 accumulation ({_stack(stack).key}): {acc16 / 1e12:.4g} T"
    return Step(
        "datasheet",
        (
            ("name", ceilings.device),
            ("kind", ceilings.kind),
            ("peak_flop_per_s", peak),
            ("bandwidth_bytes_per_s", ceilings.bandwidth_bytes_per_s),
            ("memory_bytes", ceilings.memory_bytes),
            ("interconnect_bytes_per_s", ceilings.interconnect_bytes_per_s),
        ),
        (("peaks", note),),
    )


def _curves_step(ceilings: Ceilings, dtype: str) -> Step | None:
    """Measured curves (`calibrate`): every time from them, no stack's constants."""
    curves_by_dtype = curves_of(ceilings.details)
    curves = curves_by_dtype.get(dtype)
    if curves is None and curves_by_dtype:
        other = next(iter(curves_by_dtype))
        curves = curves_by_dtype[other]
        note = f"{other} curves (no {dtype} curves measured): times approximate"
    elif curves is None:
        return None
    else:
        note = curves.source
    if ceilings.details.get("curves_from"):
        note += f" (from the calibration of {ceilings.details['curves_from'][:16]})"
    return DeviceModel.from_curves(ceilings, curves, {"curves": note}).steps[-1]


def _memory_efficiency(s: Stack, ceilings: Ceilings) -> tuple[str, float] | None:
    """(memory class, efficiency) where `s` was fitted per class and the device's is known."""
    from infermeter.measure.ceilings import MEMORY_TYPE_KEY, memory_class

    cls = memory_class(ceilings.details.get(MEMORY_TYPE_KEY))
    fitted = dict(s.bandwidth_by_memory)
    return (cls, fitted[cls]) if cls in fitted else None


def _stack_step(s: Stack, by_memory: tuple[str, float] | None = None) -> Step:
    """How a serving stack runs on the device: efficiencies, host costs, fusion, cache.

    `by_memory`: the stack's bandwidth efficiency fitted for this device's memory class.
    """
    memory_note: tuple[tuple[str, str], ...] = ()
    if by_memory is not None:
        memory_note = (
            (
                f"{s.key} bandwidth on {by_memory[0].upper()}",
                f"{by_memory[1]:.3g} of the datasheet bandwidth, fitted per memory class "
                "(it replaces the stack's one share and the sustained-bandwidth scaling)",
            ),
        )
    return Step(
        "stack",
        (
            ("stack", s.key),
            ("compute_efficiency", s.compute_efficiency),
            (
                "bandwidth_efficiency",
                s.bandwidth_efficiency if by_memory is None else by_memory[1],
            ),
            ("attention_efficiency", s.attention_efficiency),
            ("op_seconds", s.op_seconds),
            ("generate_first_seconds", s.first_seconds),
            ("generate_step_seconds", s.step_seconds),
            ("overlap", s.overlap),
            ("ops_per_block", s.ops_per_block),
            ("cache_passes", s.cache_passes),
            ("elementwise_factor", s.elementwise_factor),
            ("eager_attention_efficiency", s.eager_attention_efficiency),
            ("device_op_seconds", s.device_op_seconds),
        ),
        (
            ("stack", s.summary()),
            *((f"{s.key} {k}", v) for k, v in s.sources.items()),
            *memory_note,
        ),
    )


def _host_class_step(dev: DeviceModel, ceilings: Ceilings, s: Stack) -> Step | None:
    """`dev`'s host times on a desktop's CPU, where the card sits in one (a GeForce card).

    Only an eager stack's (`hf`, `hf-fa2`): its every operation is dispatched from Python on
    one core, so the host's single-thread speed sets a launch-bound step. A graph-replaying
    engine's per-step scheduler is Python too, but no engine was measured on a desktop, so
    its fitted step time stands.
    """
    if ceilings.details.get(HOST_CLASS_KEY) != "desktop" or s.graphs:
        return None
    note = (
        f"host times x {DESKTOP_HOST_FACTOR:.2f} ({dev.op_seconds * DESKTOP_HOST_FACTOR * 1e6:.2g}"
        f" us per operation, the stack's {dev.op_seconds * 1e6:.3g} on a server), as a "
        f"{ceilings.device} is assumed to sit in a desktop: {DESKTOP_HOST_SOURCE}; "
        "--host-us-per-op gives yours"
    )
    return Step(
        "host class",
        (
            ("op_seconds", dev.op_seconds * DESKTOP_HOST_FACTOR),
            ("generate_first_seconds", dev.generate_first_seconds * DESKTOP_HOST_FACTOR),
            ("generate_step_seconds", dev.generate_step_seconds * DESKTOP_HOST_FACTOR),
        ),
        ((DESKTOP_SOURCE_KEY, note),),
    )


def with_host(dev: DeviceModel, op_seconds: float) -> DeviceModel:
    """`dev` driven by a host the user measured: its time per operation, and no assumed class.

    The model is made again from its steps without the assumed host class (so the stack's
    generate times come back, and the class's note goes with it), then the given host is its
    last step.
    """
    assumed = next((x for x in dev.steps if x.name == "host class"), None)
    before = f"the stack's {dev.op_seconds * 1e6:.3g}"
    if assumed is not None:
        base = replay([x for x in dev.steps if x.name != "host class"])
        before = (
            f"the assumed desktop's {dev.op_seconds * 1e6:.2g}; "
            f"the stack's {base.op_seconds * 1e6:.3g}"
        )
        dev = base
    note = f"{op_seconds * 1e6:.3g} us, given (replaces {before})"
    return apply(
        dev, Step("given host", (("op_seconds", op_seconds),), ((GIVEN_HOST_SOURCE_KEY, note),))
    )


def _sustained_step(dev: DeviceModel, ceilings: Ceilings) -> Step | None:
    """`dev`'s bandwidth efficiencies scaled by what its memory was measured to sustain.

    The stacks' efficiencies are shares of the datasheet bandwidth of A100/H100-class HBM,
    which sustains `FIT_SUSTAINED_FRACTION` of it; a T4's GDDR6 on a 70 W board sustains 68.8%,
    so a kernel there reads at 0.688 / 0.91 of the fitted share (a published microbenchmark of
    the device, cited in the notes, not a fit to its inference times).
    """
    fraction = ceilings.details.get(SUSTAINED_KEY)
    if not fraction:
        return None
    scale = float(fraction) / FIT_SUSTAINED_FRACTION
    note = (
        f"{float(fraction):.1%} of the datasheet ({ceilings.details.get(SUSTAINED_SOURCE_KEY)})"
        f" against {FIT_SUSTAINED_FRACTION:.0%} where the efficiencies were fitted: "
        f"bandwidth efficiencies x {scale:.3g}"
    )
    return Step(
        "sustained bandwidth",
        (
            ("bandwidth_efficiency", dev.bandwidth_efficiency * scale),
            ("eager_attention_efficiency", dev.eager_attention_efficiency * scale),
        ),
        ((SUSTAINED_SOURCE_NAME, note),),
    )


def _stack(stack: Stack | str) -> Stack:
    from infermeter.analysis.stacks import STACKS

    return STACKS[stack] if isinstance(stack, str) else stack


class ForwardTimeDoc(TypedDict):
    """`ForwardTime.to_dict`: seconds by part, work, bounds, overlap, notes and the bound."""

    gemm_s: float
    attention_s: float
    elementwise_s: float
    page_fault_s: float
    op_floor_s: float
    overhead_s: float
    generate_s: float
    comm_s: float
    total_s: float
    flop_count: float
    bytes: float
    comm_bytes: float
    compute_bound_s: float | None
    memory_bound_s: float | None
    comm_bound_s: float | None
    overlap: float
    notes: list[str]
    bound: str | None


@dataclass
class ForwardTime:
    """Predicted seconds of one forward by part, its work, and its bounds."""

    gemm_s: float = 0.0
    attention_s: float = 0.0
    elementwise_s: float = 0.0
    #: of `elementwise_s`: page faults of a KV cache mapped afresh each step (a CPU's)
    page_fault_s: float = 0.0
    #: of `elementwise_s`: the GPU's time per small operation beyond its bytes
    op_floor_s: float = 0.0
    overhead_s: float = 0.0
    generate_s: float = 0.0
    comm_s: float = 0.0
    total_s: float = 0.0
    flop_count: float = 0.0
    bytes: float = 0.0
    comm_bytes: float = 0.0
    #: the roofline bounds: FLOPs at peak, bytes at full bandwidth, all-reduces at link speed
    compute_bound_s: float | None = None
    memory_bound_s: float | None = None
    comm_bound_s: float | None = None
    #: share of host time hidden under device work (0 on a CPU: one processor does both)
    overlap: float = 0.0
    notes: list[str] = field(default_factory=list)

    def combine(self, work_s: float, host_s: float, generate_s: float) -> float:
        """Seconds of a forward from its device work, its host launches and generate's share.

        Host and device run at once only in part: with `overlap` 1 the slower of the two sets
        the time (a GPU whose queue never empties), with 0 they add (a CPU). Between the two, a
        launch-bound step still grows with its device work, as published decode times do
        with context (issue 32).
        """
        return work_s + host_s - self.overlap * min(work_s, host_s) + generate_s

    @property
    def bound(self) -> str | None:
        """Which roofline bound is the largest: compute, memory or communication."""
        bounds = {
            "compute": self.compute_bound_s,
            "memory": self.memory_bound_s,
            "communication": self.comm_bound_s,
        }
        known = {k: v for k, v in bounds.items() if v}
        return max(known, key=lambda k: known[k]) if known else None

    def to_dict(self) -> ForwardTimeDoc:
        """The forward as a prediction document keeps it: every field and the bound."""
        d = asdict(self)
        d["bound"] = self.bound
        return cast(ForwardTimeDoc, d)


@dataclass(frozen=True)
class Work:
    """One forward: `tokens` new tokens per row after `context` cached, `batch` rows."""

    batch: int
    tokens: int
    context: int = 0
    logits_tokens: int = 1
    dtype_bytes: int = 4
    top_k: int | None = None
    active_layers: int | None = None
    images: int = 0
    tp: int = 1
    #: bytes per weight when weights are stored smaller than activations (None: dtype_bytes)
    weight_bytes: float | None = None
    #: bytes per KV-cache element when the cache is stored smaller (None: dtype_bytes)
    kv_bytes: float | None = None
    #: the share of the 16-bit streaming rate stored weights reach (analysis/precision.py)
    weight_stream_share: float = 1.0

    @property
    def weight_bytes_each(self) -> float:
        """Bytes per stored weight."""
        return self.dtype_bytes if self.weight_bytes is None else self.weight_bytes

    @property
    def kv_bytes_each(self) -> float:
        """Bytes per KV-cache element."""
        return self.dtype_bytes if self.kv_bytes is None else self.kv_bytes


def _gemm(
    dev: DeviceModel,
    rows: float,
    k: int,
    n: int,
    e: int,
    we: float | None = None,
    share: float = 1.0,
) -> float:
    """One GEMM's seconds; weights of `we` bytes each stream at `share` of the 16-bit rate."""
    if dev.curves is not None:
        t = dev.curves.gemm_seconds(rows, k, n)
        if we is not None and we < e:  # weight-only, approximate: by the bytes the GEMM moves
            t *= (we / share * k * n + e * rows * (k + n)) / (e * (k * n + rows * (k + n)))
        return t
    return _gemm_bound(dev, rows, k, n, e, e if we is None else we, share)


def _gemm_bound(
    dev: DeviceModel, rows: float, k: int, n: int, e: int, we: float, share: float = 1.0
) -> float:
    """A GEMM at the device's efficiencies: the slower of its FLOPs and its bytes.

    A weight-only GEMM's weights count as `we / share` bytes: they stream at `share` of the
    16-bit rate while dequantised (analysis/precision.py).
    """
    flops = 2 * rows * k * n
    nbytes = (we / share if we < e else we) * k * n + e * rows * (k + n)
    t = 0.0
    if dev.peak_flop_per_s:
        t = flops / (dev.peak_flop_per_s * dev.compute_efficiency)
    if dev.bandwidth_bytes_per_s:
        t = max(t, nbytes / (dev.bandwidth_bytes_per_s * dev.bandwidth_efficiency))
    return t


def _layer_gemms(shape: Shape, index: int) -> tuple[list[list[int]], list[list[int]], int]:
    """(dense [in, out], one expert's [in, out], experts) of block `index`."""
    c = shape.census
    d = max(shape.hidden, 1)
    if c is None or index >= len(c.layers):  # a run stored before the census: the family's
        dense = [[d, shape.heads * shape.head_dim * 2 + 2 * shape.kv_heads * shape.head_dim]]
        if shape.experts:
            return dense, [[d, 3 * shape.moe_intermediate]], shape.experts
        return [*dense, [d, (3 if shape.gated_mlp else 2) * shape.intermediate]], [], 0
    lay = c.layers[index]
    if lay.linear_shapes:
        return lay.linear_shapes, lay.expert_shapes, lay.experts
    # stored before the census kept shapes: each kind as one GEMM of its multiply-adds
    dense = [[d, m // d] for m in (lay.attention_macs, lay.mlp_macs, lay.other_macs) if m]
    experts = [[d, lay.expert_macs // d]] if lay.expert_macs else []
    return dense, experts, lay.experts


def _gemm_seconds(shape: Shape, dev: DeviceModel, w: Work, layers: int, k_top: int) -> float:
    rows = w.batch * w.tokens
    e, tp, we, sh = w.dtype_bytes, w.tp, w.weight_bytes, w.weight_stream_share
    t = 0.0
    for i in range(layers):
        dense, expert, n_experts = _layer_gemms(shape, i)
        t += sum(_gemm(dev, rows, k, max(n // tp, 1), e, we, sh) for k, n in dense)
        if expert and n_experts:
            hit = min(n_experts, rows * k_top)
            per = rows * k_top / hit
            t += hit * sum(_gemm(dev, per, k, max(n // tp, 1), e, we, sh) for k, n in expert)
    head = shape.census.lm_head_macs if shape.census and shape.census.lm_head_macs else 0
    head = head or shape.hidden * shape.vocab
    if head and shape.hidden:
        t += _gemm(dev, w.batch * w.logits_tokens, shape.hidden, head // shape.hidden // tp, e)
    return t


def _vision_seconds(shape: Shape, dev: DeviceModel, w: Work) -> float:
    """A vision tower and projector: their FLOPs at the rate of a GEMM of the patches' rows."""
    if not (w.images and shape.vision is not None):
        return 0.0
    v = shape.vision
    rows = w.images * (v.patches + 1)
    rate_s_per_flop = _gemm(dev, rows, v.hidden, v.hidden, w.dtype_bytes) / (
        2 * rows * v.hidden * v.hidden
    )
    flops = sum(c.flop_count for c in _vision(v, w.images, w.dtype_bytes))
    return flops * rate_s_per_flop / w.tp


def eager_attention(op_counts: dict[str, Any] | None, phase: str) -> bool:
    """True when the counted forward ran attention as matmuls (no attention kernel).

    Detected from what the model dispatched, not from its name: a release or an architecture
    without SDPA (transformers before 4.36, BLOOM, a model whose code has only the eager path)
    dispatches no attention kernel, its scores coming from two batched matmuls.
    """
    counted = (op_counts or {}).get(phase) or {}
    return not counted.get("attention") and bool(counted.get("gemm"))


#: the transformers release from which models run SDPA by default (4.36). Eager attention of
#: the releases before it reads the KV cache at the stack's `eager_attention_efficiency`
#: (fitted to optimum's 2023 A100 sweep: transformers 4.32, PyTorch 2.0.1); measured on an
#: H100 under 4.46.3 and 5.17 (PyTorch 2.11) its device time equals SDPA's within 2%
#: (Llama-2-13B shapes, batch 16, 512-576 keys: tests/bench/data/h100/generate_steps)
SDPA_DEFAULT_RELEASE = (4, 36)


def _release(op_counts: dict[str, Any] | None) -> tuple[int, ...] | None:
    """The transformers release that ran the counted forward, as a tuple; None if unrecorded."""
    from packaging.version import InvalidVersion, Version

    raw = (op_counts or {}).get("transformers")
    try:
        return Version(str(raw)).release if raw else None
    except InvalidVersion:
        return None


@dataclass(frozen=True)
class AttentionPath:
    """How the counted forward ran attention, read from what it dispatched (`attention_path`)."""

    #: scores from two batched matmuls: no attention kernel was dispatched
    eager: bool = False
    #: eager attention of a release before SDPA was the default (read at the eager efficiency)
    eager_slow: bool = False
    #: keys and values copied out to every query head before attention (`repeat_kv`)
    keys_copied: bool = False


def attention_path(
    op_counts: dict[str, Any] | None, phase: str, stack: str | None = None
) -> AttentionPath:
    """The attention path of the counted forward of `phase` as `stack` runs it.

    Keys are copied out to every query head where attention is eager (`repeat_kv` in every
    release) or where the attention kernel was handed as many key heads as query heads (the
    counter records both: transformers 4.38.2-4.51.3 copy them before SDPA, as counted, and
    5.x hands SDPA the grouped cache); the time model charges the copy only to a grouped-query
    model. Under `hf-fa2` flash-attn reads grouped keys itself: its counts ran SDPA in its
    place, so what SDPA was handed does not apply. A serving engine (a stack not named
    `hf...`) runs its own attention kernel whatever transformers dispatched.
    """
    if stack is not None and not stack.startswith("hf"):
        return AttentionPath()
    eager = eager_attention(op_counts, phase)
    release = _release(op_counts)
    heads = (op_counts or {}).get("attention_heads") or {}
    handed_all = bool(heads and heads.get("query") == heads.get("key")) and stack != "hf-fa2"
    copied = eager or handed_all
    slow = eager and release is not None and release[:2] < SDPA_DEFAULT_RELEASE
    return AttentionPath(eager=eager, eager_slow=slow, keys_copied=copied)


def has_attention(shape: Shape) -> bool:
    """False for a model none of whose blocks attends (a state-space model)."""
    layers = shape.census.layers if shape.census else []
    return not layers or any(lay.score_dims for lay in layers)


def _attention_part(
    shape: Shape, dev: DeviceModel, w: Work, heads: int, keys: int, path: AttentionPath
) -> float:
    """One block's attention at the device's efficiencies (no measured curve).

    An attention kernel (SDPA) reads the keys and values once; eager attention reads them
    through two batched matmuls and moves its scores `EAGER_SCORE_BYTES` each. Either reads
    them once per query head, after a copy out to every head, where `path.keys_copied` says
    `repeat_kv` ran (a grouped-query model); a release before SDPA became the default reads
    them at `eager_attention_efficiency` of bandwidth in eager attention.
    """
    flops = 4 * w.batch * heads * w.tokens * keys * shape.head_dim
    kv_heads = max(shape.kv_heads // w.tp, 1)
    per_head = 2 * w.batch * keys * shape.head_dim * w.kv_bytes_each
    bw = dev.bandwidth_bytes_per_s
    copied = path.keys_copied and heads > kv_heads
    read_heads = heads if copied else kv_heads
    copy_bytes = per_head * (kv_heads + heads) if copied else 0.0
    if not path.eager:
        part = (
            flops / (dev.peak_flop_per_s * dev.attention_efficiency) if dev.peak_flop_per_s else 0.0
        )
        if bw:
            part = max(part, (per_head * read_heads + copy_bytes) / (bw * dev.bandwidth_efficiency))
        return part
    part = flops / (dev.peak_flop_per_s * dev.compute_efficiency) if dev.peak_flop_per_s else 0.0
    if bw:
        eff = dev.eager_attention_efficiency if path.eager_slow else dev.bandwidth_efficiency
        read = per_head * read_heads / (bw * eff)
        scores = w.batch * heads * w.tokens * keys * EAGER_SCORE_BYTES
        part = max(part, read + (copy_bytes + scores) / (bw * dev.bandwidth_efficiency))
    return part


def _attention_seconds(
    shape: Shape, dev: DeviceModel, w: Work, layers: int, path: AttentionPath | None = None
) -> float:
    keys_all = w.context + w.tokens
    heads = max(shape.heads // w.tp, 1)
    t = 0.0
    census_layers = shape.census.layers if shape.census else []
    for i in range(layers):
        lay = census_layers[i] if i < len(census_layers) else None
        if lay is not None and not lay.score_dims:
            continue
        window = lay.window if lay is not None else shape.sliding_window
        keys = min(keys_all, window) if (window and w.tokens == 1) else keys_all
        measured = (
            dev.curves.attention_seconds(w.batch, heads, shape.head_dim, w.tokens, keys)
            if dev.curves is not None
            else None
        )
        t += (
            measured
            if measured is not None
            else _attention_part(shape, dev, w, heads, keys, path or AttentionPath())
        )
    return t


def elementwise_bytes(shape: Shape, w: Work, layers: int, cache_passes: float = 2.0) -> float:
    """Bytes the element-wise operations of a forward move (approximate, per GPU).

    Per block, counted as passes that read and write a tensor: two RMS norms of about six
    passes each (cast, square, mean, rsqrt, two multiplies) and two residual adds over the
    hidden state (30 d), the gated activation over the MLP width (5 f; 3 f ungated), and
    rotary over queries and keys (four passes: 8 per head dim); a MoE
    block also gathers each routed token's hidden state and scatters its output back (4 d per
    routed token) and weighs the expert outputs.
    """
    n = w.batch * w.tokens
    k_top = w.top_k or shape.top_k or 1
    if shape.experts:
        mlp = k_top * (5 * shape.moe_intermediate + 4 * shape.hidden)
    else:
        mlp = (5 if shape.gated_mlp else 3) * shape.intermediate
    rotary = 8 * (shape.heads + shape.kv_heads) * shape.head_dim
    per_block = w.dtype_bytes * n * layers * (30 * shape.hidden + (mlp + rotary) / w.tp)
    cache = cache_append_bytes(shape, w, layers, cache_passes)
    return per_block + cache + logits_bytes(shape, w)


def cache_append_bytes(shape: Shape, w: Work, layers: int, passes: float = 2.0) -> float:
    """Bytes transformers' dynamic KV cache moves to append a forward's keys and values.

    `DynamicLayer.update` is `torch.cat([cache, new])` for keys and for values: every step reads
    the whole cache and writes it again, one position longer (2 x cached + 2 x new positions per
    tensor). At batch 16 and a few hundred positions this is larger than the step's weights on
    a small model, and it is why a decode step grows with batch x context faster than its
    attention does. Sliding-window layers keep at most their window.

    `passes` counts the whole cache's reads and writes per step (2 for torch.cat; a stack that
    also copies it elsewhere, as flash-attn's unpadding gather does, more; 0: written in place,
    where only the new positions are written).
    """
    if passes <= 0:
        return 0.0
    kv = _kv_bytes_per_position(shape, w)
    return sum(2 * kv * (passes * cached + 2 * w.tokens) for cached in _cached(shape, w, layers))


def _kv_bytes_per_position(shape: Shape, w: Work) -> float:
    """Bytes of one cached position's keys (or values) in one layer, per GPU."""
    return w.batch * max(shape.kv_heads // w.tp, 1) * shape.head_dim * w.kv_bytes_each


def _cached(shape: Shape, w: Work, layers: int) -> list[int]:
    """Positions each attention layer's cache holds before the forward (its window at most).

    Layers without softmax attention keep no cache and are left out.
    """
    census_layers = shape.census.layers if shape.census else []
    out = []
    for i in range(layers):
        lay = census_layers[i] if i < len(census_layers) else None
        if lay is not None and not lay.score_dims:
            continue
        window = lay.window if lay is not None else shape.sliding_window
        out.append(min(w.context, window) if window else w.context)
    return out


def cache_seconds(shape: Shape, dev: DeviceModel, w: Work, layers: int) -> tuple[float, float]:
    """(seconds of the dynamic cache's concatenations, cache passes left to cost as bytes).

    Where the device's curves are measured (a CPU, `calibrate`), the cache's passes move at
    the bandwidth of the largest copy measured, not at that of a copy of their size: the cache
    was last touched a whole step ago, with every weight streamed since, so it is read from
    memory, not from a cache a benchmark warmed (a grown 4 MiB tensor in rotation took 0.83
    ms here against 0.21 ms for a warm copy). The page faults of a cache mapped afresh each
    step come on top (`cache_fault_seconds`). Without curves: (0, the stack's passes), costed
    with the other element-wise bytes at the device's bandwidth.
    """
    curves = dev.curves
    if curves is None or not curves.copy or dev.cache_passes <= 0:
        return 0.0, dev.cache_passes
    moved = cache_append_bytes(shape, w, layers, dev.cache_passes)
    cold = curves.bandwidth(curves.copy["bytes"][-1])
    return moved / cold + cache_fault_seconds(shape, dev, w, layers), 0.0


def fault_pages_per_step(tensor_bytes: float, tensors: int, threshold: int | None) -> float:
    """Pages faulted per step by `tensors` cache tensors grown to `tensor_bytes` each.

    glibc maps a block above its mmap threshold afresh from the kernel and unmaps it when
    freed, so a tensor grown past it faults every page each step; below it the block comes
    from the heap, new or reused by the allocator's history, which is not predicted (0 here:
    measured runs count them, `page_faults_per_step`). No threshold known (not glibc): 0.
    """
    if threshold is None or tensor_bytes <= threshold:
        return 0.0
    return tensors * math.ceil(tensor_bytes / PAGE_BYTES)


def cache_fault_seconds(shape: Shape, dev: DeviceModel, w: Work, layers: int) -> float:
    """Seconds a decode step spends faulting in its dynamic cache's fresh pages (measured CPU).

    Each attention layer's keys and values are two tensors grown by one `torch.cat` each
    step; the cost of one fault is the calibration's (`Curves.page_fault_seconds`), the
    threshold this process's C library's (measure/faults.py). A 48 MiB-per-layer cache spent
    63% of its step here (benchmarks/page_faults.py). A prefill from nothing, or a
    cache written in place, grows nothing.
    """
    curves = dev.curves
    if curves is None or not curves.page_fault_seconds or w.context <= 0:
        return 0.0
    if dev.kind != "cpu" or dev.cache_passes < 2:  # device memory, or written in place
        return 0.0
    kv = _kv_bytes_per_position(shape, w)
    threshold = mmap_threshold_bytes()
    sizes = [kv * (c + w.tokens) for c in _cached(shape, w, layers)]
    pages = sum(fault_pages_per_step(size, 2, threshold) for size in sizes)
    return pages * curves.page_fault_seconds


def logits_bytes(shape: Shape, w: Work) -> float:
    """Bytes generate moves over the logits it picks the next token from.

    It copies the last position's logits to float32 (read and write) and takes their argmax
    (one read): three passes over batch x vocab float32 values, whatever the model's dtype.
    """
    return 3.0 * 4 * w.batch * w.logits_tokens * shape.vocab


def _elementwise_seconds(dev: DeviceModel, nbytes: float, ops: float) -> float:
    if nbytes <= 0:
        return 0.0
    if dev.curves is not None and dev.curves.copy:
        # at the bandwidth a copy of one operation's size attains (small ones stay in cache);
        # below the smallest size measured, at its bandwidth: a call's fixed cost is in
        # `op_seconds` already
        per_op = max(nbytes / max(ops, 1.0), dev.curves.copy["bytes"][0])
        return nbytes / dev.curves.bandwidth(per_op)
    if dev.bandwidth_bytes_per_s:
        return nbytes / (dev.bandwidth_bytes_per_s * dev.bandwidth_efficiency)
    return 0.0


def other_ops(
    shape: Shape,
    phase: str,
    layers: int,
    op_counts: dict[str, Any] | None,
    launches: bool,
    per_block: int | None = None,
) -> tuple[float, str | None]:
    """Framework operations a forward pays overhead on, and a note when the count is guessed.

    On a CPU the GEMM and attention curves include their own calls' fixed cost, so only the
    other operations count; on a GPU every operation is a kernel the host launches
    (`launches`). A stack that fuses its kernels (`per_block`) runs that many per block, and
    the embedding, final norm, head and sampling besides (4).
    """
    if per_block:
        return float(per_block * layers + 4), None
    counted = (op_counts or {}).get(phase)
    total_layers = shape.layers or layers
    if counted:
        n = counted["other"] + (counted["gemm"] + counted["attention"] if launches else 0)
        return float(n) * layers / max(total_layers, 1), None
    return (
        float(DEFAULT_OPS_PER_BLOCK * layers),
        f"framework operations estimated ({DEFAULT_OPS_PER_BLOCK} per block, a Llama block's "
        "count): the model could not be run to count them",
    )


def comm_seconds(shape: Shape, dev: DeviceModel, w: Work, layers: int) -> tuple[float, float]:
    """(seconds, bytes per GPU) of tensor parallelism's all-reduces: two per block.

    A ring all-reduce of S bytes over n GPUs sends and receives 2 (n - 1) / n x S per GPU.
    """
    if w.tp <= 1:
        return 0.0, 0.0
    size = w.batch * w.tokens * shape.hidden * w.dtype_bytes
    per_gpu = 2 * (w.tp - 1) / w.tp * size * 2 * layers
    link = dev.interconnect_bytes_per_s
    if not link:
        return math.inf, per_gpu
    return per_gpu / link + 2 * layers * ALLREDUCE_LATENCY_S, per_gpu


def forward_time(
    shape: Shape,
    dev: DeviceModel,
    w: Work,
    phase: str,
    op_counts: dict[str, Any] | None = None,
) -> ForwardTime:
    """Predicted time of one forward (`phase`: "prefill" or "decode", for op counts and generate).

    Long because: it is the one place that adds the parts up and states the bounds; each part
    is its own function above.
    """
    layers = w.active_layers or shape.layers or (len(shape.census.layers) if shape.census else 0)
    k_top = w.top_k or (shape.census.top_k if shape.census else 0) or shape.top_k or 1
    out = ForwardTime()
    out.gemm_s = _gemm_seconds(shape, dev, w, layers, k_top) + _vision_seconds(shape, dev, w)
    out.attention_s = _attention_seconds(
        shape, dev, w, layers, attention_path(op_counts, phase, dev.stack)
    )
    ops, note = other_ops(
        shape, phase, layers, op_counts, launches=dev.kind == "gpu", per_block=dev.ops_per_block
    )
    if note:
        out.notes.append(note)
    moved = elementwise_bytes(shape, w, layers, 0.0) * dev.elementwise_factor
    cache_s, passes_left = cache_seconds(shape, dev, w, layers)
    moved += cache_append_bytes(shape, w, layers, passes_left)
    if dev.kind == "gpu" and dev.device_op_seconds:
        non_gemm, _ = other_ops(shape, phase, layers, op_counts, launches=False)
        out.op_floor_s = non_gemm * dev.device_op_seconds
    out.elementwise_s = _elementwise_seconds(dev, moved, ops) + cache_s + out.op_floor_s
    out.page_fault_s = cache_fault_seconds(shape, dev, w, layers) if cache_s else 0.0
    out.overhead_s = ops * dev.op_seconds
    out.generate_s = dev.generate_first_seconds if phase == "prefill" else dev.generate_step_seconds
    out.comm_s, out.comm_bytes = comm_seconds(shape, dev, w, layers)
    costs: list[Cost] = forward_costs(
        shape,
        tokens=w.tokens,
        context=w.context,
        batch=w.batch,
        dtype_bytes=w.dtype_bytes,
        logits_tokens=w.logits_tokens,
        top_k=w.top_k,
        images=w.images,
        active_layers=w.active_layers,
    )
    t = total(costs)
    out.flop_count = t.flop_count / w.tp
    # weights or the KV cache stored smaller than activations: their bytes shrink by that ratio
    shrink = t.weight_bytes * (1 - w.weight_bytes_each / w.dtype_bytes) + (
        t.kv_read_bytes + t.kv_write_bytes
    ) * (1 - w.kv_bytes_each / w.dtype_bytes)
    out.bytes = (t.bytes - shrink) / w.tp
    if dev.peak_flop_per_s:
        out.compute_bound_s = out.flop_count / dev.peak_flop_per_s
    if dev.bandwidth_bytes_per_s:
        out.memory_bound_s = out.bytes / dev.bandwidth_bytes_per_s
    if w.tp > 1 and dev.interconnect_bytes_per_s:
        out.comm_bound_s = out.comm_bytes / dev.interconnect_bytes_per_s
    work = out.gemm_s + out.attention_s + out.elementwise_s + out.comm_s
    # on a GPU the host enqueues kernels while the device runs earlier ones
    out.overlap = (1.0 if dev.overlap is None else dev.overlap) if dev.kind == "gpu" else 0.0
    out.total_s = out.combine(work, out.overhead_s, out.generate_s)
    return out
