"""`ProfilingConfig`: what the profiler instruments, in three modes plus custom.

- minimal: no hooks at all. Phases and every decode step are timed by the run itself (one clock
  mark per token), so the instrument costs nothing measurable.
- standard: plus forward hooks timing each decoder block and its parts (attention, MLP or MoE,
  norms), split by phase, and activation statistics of each block's output.
- deep: plus attention computed by an eager path with QK^T, softmax, attention x V and output
  projection timed apart, attention entropy and sparsity, MLP kill ratios and MoE tokens per
  expert. Deep switches attention to that eager path for its duration and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import TypedDict, cast

from infermeter.errors import UserError

MODES = ("minimal", "standard", "deep")
#: What each mode costs, as measured by benchmarks/overhead.py (smollm2-135m, CPU, batch 1,
#: interleaved rounds; docs/overhead.md): shown in `profile --help` and each run's header.
MODE_COST = {
    "minimal": "no hooks: within noise",
    "standard": "TPOT +3%, TTFT +2-5%",
    "deep": "TPOT +6-7%, TTFT +30-32%",
}


class ProfilingConfigDoc(TypedDict):
    """`ProfilingConfig.to_dict`: its fields, `layers` as a list."""

    mode: str
    layer_timing: bool
    part_timing: bool
    capture_activations: bool
    deep_ops: bool
    sample_every: int
    preallocate: int
    layers: list[int] | None
    activation_eps: float
    attention_threshold: float
    kill_eps: float
    stage_batch: int
    probe_every: int


@dataclass(frozen=True)
class ProfilingConfig:
    """What to instrument.

    Attributes:
        mode: "minimal", "standard", "deep" or "custom".
        layer_timing: time each decoder block (and embeddings, final norm, LM head).
        part_timing: also time each block's attention, MLP/MoE and norms.
        capture_activations: mean |x|, std, max |x| and sparsity of each block's output.
        deep_ops: eager attention with its operations timed, entropy, sparsity, kill ratios,
            MoE routing counts.
        sample_every: instrument one decode step in N (prefill always); the result says which.
        preallocate: timing records reserved up front (grows, and says so, when exceeded).
        layers: block indices to instrument; None for all.
        activation_eps: |x| at or below this counts as zero for activation sparsity; 0 (the
            default) counts exact zeros with one kernel, a positive eps costs two more.
        attention_threshold: attention weights below this count as "sparse".
        kill_eps: post-activation |y| at or below this counts as killed.
        probe_every: block output statistics, attention entropy/sparsity and MLP kill ratios on
            one decode step in N (prefill always; timings and MoE routing counts on every
            instrumented step). Standard and deep modes use 4: deep's probes cost ~6% of a
            smollm2 decode step when run every step, standard's statistics 1-2%.
        stage_batch: decode steps of up to this many rows stage block outputs and reduce them
            once per step (cheaper than per-call reductions); larger outputs reduce per call.
    """

    mode: str = "minimal"
    layer_timing: bool = False
    part_timing: bool = False
    capture_activations: bool = False
    deep_ops: bool = False
    sample_every: int = 1
    preallocate: int = 65536
    layers: tuple[int, ...] | None = None
    activation_eps: float = 0.0
    attention_threshold: float = 1e-3
    kill_eps: float = 1e-3
    stage_batch: int = 64
    probe_every: int = 1

    @classmethod
    def minimal(cls) -> ProfilingConfig:
        """Phase and step timing only (no hooks)."""
        return cls(mode="minimal")

    @classmethod
    def standard(cls) -> ProfilingConfig:
        """Block and part timing plus activation statistics."""
        return cls(
            mode="standard",
            layer_timing=True,
            part_timing=True,
            capture_activations=True,
            probe_every=4,  # block output statistics on 1 decode step in 4 (and every prefill)
        )

    @classmethod
    def deep(cls) -> ProfilingConfig:
        """Everything: standard plus attention operations, entropy, kill ratios, MoE routing."""
        return replace(cls.standard(), mode="deep", deep_ops=True)

    @classmethod
    def custom(
        cls,
        *,
        layer_timing: bool = True,
        part_timing: bool = True,
        capture_activations: bool = False,
        deep_ops: bool = False,
        sample_every: int = 1,
        preallocate: int = 65536,
        layers: Sequence[int] | None = None,
        probe_every: int = 1,
    ) -> ProfilingConfig:
        """Choose each feature; validated."""
        return cls(
            mode="custom",
            layer_timing=layer_timing or part_timing or capture_activations or deep_ops,
            part_timing=part_timing,
            capture_activations=capture_activations,
            deep_ops=deep_ops,
            sample_every=sample_every,
            preallocate=preallocate,
            layers=tuple(layers) if layers is not None else None,
            probe_every=probe_every,
        ).validate()

    @classmethod
    def for_mode(cls, mode: str) -> ProfilingConfig:
        """The preset config of a mode name."""
        if mode not in MODES:
            raise UserError(f"unknown mode {mode!r}", f"use one of {', '.join(MODES)}")
        preset: ProfilingConfig = getattr(cls, mode)()
        return preset

    @property
    def hooks_needed(self) -> bool:
        """False in minimal mode: nothing is attached to the model."""
        return self.layer_timing or self.capture_activations or self.deep_ops

    def validate(self) -> ProfilingConfig:
        """Raise UserError for values that cannot work; return self."""
        if self.sample_every < 1:
            raise UserError(f"sample_every {self.sample_every} is below 1", "use 1 or more")
        if self.probe_every < 1:
            raise UserError(f"probe_every {self.probe_every} is below 1", "use 1 or more")
        if self.preallocate < 1:
            raise UserError(f"preallocate {self.preallocate} is below 1", "use 1 or more")
        if self.layers is not None and any(i < 0 for i in self.layers):
            raise UserError(f"layers {list(self.layers)} has a negative index", "use 0..N-1")
        return self

    def to_dict(self) -> ProfilingConfigDoc:
        """Plain dict for JSON and the store."""
        d = asdict(self)
        d["layers"] = list(self.layers) if self.layers is not None else None
        return cast(ProfilingConfigDoc, d)
