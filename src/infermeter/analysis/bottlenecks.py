"""Bottleneck rules: each finding has an id, a severity, the numbers that fired it, and advice.

Rules read an `Evidence` (what a run and its analysis measured) and fire or stay silent; each
has thresholds in one place below, and tests that construct inputs on both sides of them.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from infermeter.measure.faults import ALLOCATOR_FIX

if TYPE_CHECKING:  # annotations only: the run's module imports numpy
    from infermeter.run.results import ChecksDoc, RunResult

Severity = Literal["high", "medium", "low"]


@dataclass(frozen=True)
class Finding:
    """One rule that fired."""

    id: str
    severity: Severity
    title: str
    evidence: dict[str, Any]
    advice: str

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)


@dataclass
class Evidence:
    """What the rules look at; fields a run does not have stay None."""

    batch: int = 1
    decode_bound: str | None = None
    decode_intensity: float | None = None
    ridge: float | None = None
    decode_measured_ms: float | None = None
    decode_min_ms: float | None = None
    prefill_parts_ms: dict[str, float] | None = None
    ttft_ms: float | None = None
    prompt_tokens: int | None = None
    moe_imbalance: float | None = None
    moe_layer: int | None = None
    #: token assignments behind the busiest layer's imbalance, and the experts they spread over
    moe_assignments: int | None = None
    moe_experts: int | None = None
    #: a preset's random weights: routing and attention patterns reflect initialisation
    random_weights: bool = False
    #: the attention kernel the model ran (None: not recorded, runs stored before it was)
    attn_used: str | None = None
    scaling: dict[str, Any] | None = None
    compile_ms: float | None = None
    measured_total_ms: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    variant_slowdown: float | None = None
    knob_checks: ChecksDoc = field(default_factory=lambda: cast("ChecksDoc", {}))
    prefill_pct_attainable: float | None = None
    routing_learned_pct: float | None = None
    cache_utilization: float | None = None
    tpot_ms: float | None = None
    page_faults_per_step: float | None = None
    prefill_page_faults: float | None = None
    page_fault_us: float | None = None


def _sev(value: float, medium: float, high: float) -> Severity:
    return "high" if value >= high else "medium" if value >= medium else "low"


def memory_bound_decode(e: Evidence) -> Finding | None:
    """Decode at small batch reads every weight per token: bandwidth, not compute, limits it."""
    if e.decode_bound != "memory" or e.batch > 4:
        return None
    return Finding(
        "memory-bound-decode",
        "high" if e.batch == 1 else "medium",
        f"decode is memory-bound at batch {e.batch}",
        {
            "batch": e.batch,
            "intensity_flop_per_byte": e.decode_intensity,
            "ridge": e.ridge,
            "tpot_ms": e.decode_measured_ms,
            "bandwidth_bound_ms": e.decode_min_ms,
        },
        "batch more requests per step, quantize weights (fewer bytes per token), or use "
        "speculative decoding",
    )


def framework_overhead(e: Evidence) -> Finding | None:
    """Time outside the model's layers, or far above the bandwidth bound, is framework cost."""
    share = None
    if e.prefill_parts_ms:
        total = sum(e.prefill_parts_ms.values())
        outside = e.prefill_parts_ms.get("outside forward", 0) + e.prefill_parts_ms.get(
            "forward rest", 0
        )
        share = outside / total if total else None
    ratio = (
        e.decode_measured_ms / e.decode_min_ms if e.decode_measured_ms and e.decode_min_ms else None
    )
    fired_share = share is not None and share >= 0.2
    fired_ratio = ratio is not None and ratio >= 5
    if not (fired_share or fired_ratio):
        return None
    sev = max(
        _sev(share or 0, 0.2, 0.4), _sev(ratio or 0, 5, 20), key=["low", "medium", "high"].index
    )
    said = []  # the title names only what fired (a 2.4% share had read "much of the time")
    if fired_share:
        said.append(f"{share:.0%} of prefill is spent outside the model's layers")
    if fired_ratio:
        said.append(f"decode takes {ratio:.0f}x its memory-bandwidth bound")
    return Finding(
        "framework-overhead",
        sev,
        "; ".join(said),
        {"prefill_outside_share": share, "decode_over_bandwidth_bound": ratio},
        "torch.compile (or CUDA graphs on GPU) removes per-op launch and Python cost; larger "
        "batches amortise it",
    )


def attention_dominates(e: Evidence) -> Finding | None:
    """At long context the quadratic attention term overtakes the linear layers."""
    if not e.prefill_parts_ms:
        return None
    total = sum(e.prefill_parts_ms.values())
    share = e.prefill_parts_ms.get("attention", 0) / total if total else 0
    if share < 0.4:
        return None
    fused = e.attn_used not in (None, "eager")
    advice = (  # never the kernel it already ran (an sdpa run was told to use sdpa)
        f"it already runs a fused kernel ({e.attn_used}): a sliding window or shorter prompts "
        "(prefix caching) cut the quadratic term"
        + ("; on a GPU, flash_attention_2" if e.attn_used == "sdpa" else "")
        if fused
        else "use a fused attention kernel (sdpa, flash_attention_2), a sliding window, or "
        "shorter prompts (prefix caching)"
        + ("" if e.attn_used else " (the run did not record which kernel it used)")
    )
    return Finding(
        "attention-dominates",
        _sev(share, 0.4, 0.6),
        f"attention is {share:.0%} of prefill",
        {"attention_share": share, "prompt_tokens": e.prompt_tokens, "attention": e.attn_used},
        advice,
    )


def chance_imbalance(assignments: int, experts: int) -> float:
    """The imbalance even routing reaches by chance: 3 standard deviations above 1.

    With `assignments` tokens spread evenly at random over `experts`, one expert's share
    times the experts has standard deviation sqrt((experts - 1) / assignments); 16 decode
    tokens at top-2 over 16 experts reach 3.1x without any router preference.
    """
    return 1.0 + 3.0 * float(((experts - 1) / max(assignments, 1)) ** 0.5)


def moe_imbalance(e: Evidence) -> Finding | None:
    """A busy expert sets the pace of a MoE layer; even loads use all experts' hardware."""
    if e.moe_imbalance is None or e.moe_imbalance < 2.0 or e.random_weights:
        return None  # random weights: the router's preferences are its initialisation's
    chance = (
        chance_imbalance(e.moe_assignments, e.moe_experts)
        if e.moe_assignments and e.moe_experts
        else None
    )
    if chance is not None and e.moe_imbalance < chance:
        return None  # within what even routing shows over this few tokens
    return Finding(
        "moe-imbalance",
        _sev(e.moe_imbalance, 2.0, 4.0),
        f"the busiest expert gets {e.moe_imbalance:.1f}x its fair share",
        {
            "imbalance": e.moe_imbalance,
            "layer": e.moe_layer,
            "assignments": e.moe_assignments,
            "chance_imbalance": chance,
        },
        "check the router (load-balancing loss, capacity factor); at serving time, place hot "
        "experts on more devices",
    )


def poor_scaling(e: Evidence) -> Finding | None:
    """Per-token time that grows with length means a superlinear total cost."""
    s = e.scaling
    if not s or s.get("verdict") != "poor":
        return None
    return Finding(
        "poor-scaling",
        "high" if s.get("loglog_slope", 0) > 0.8 else "medium",
        f"{s.get('metric')} grows with {s.get('length')}",
        {"loglog_slope": s.get("loglog_slope"), "evidence": s.get("evidence")},
        "attention over a growing context: use a fused kernel, cache prefixes, or cap the "
        "context with a sliding window",
    )


def compile_dominates(e: Evidence) -> Finding | None:
    """A cold compile that costs more than the runs it speeds up does not pay off."""
    if not e.compile_ms or not e.measured_total_ms or e.compile_ms < 0.5 * e.measured_total_ms:
        return None
    ratio = e.compile_ms / e.measured_total_ms
    return Finding(
        "compile-dominates",
        _sev(ratio, 0.5, 2.0),
        "compilation costs more than the measured work",
        {"compile_ms": e.compile_ms, "measured_total_ms": e.measured_total_ms},
        "compile only long-running servers, reuse the compile cache, or use "
        "mode='reduce-overhead' with fixed shapes",
    )


def near_memory_limit(e: Evidence) -> Finding | None:
    """Close to the device's memory, the next longer prompt or bigger batch fails."""
    if not e.memory_used_mib or not e.memory_total_mib:
        return None
    share = e.memory_used_mib / e.memory_total_mib
    if share < 0.9:
        return None
    return Finding(
        "near-memory-limit",
        "high" if share >= 0.97 else "medium",
        f"peak memory is {share:.0%} of the device",
        {"peak_mib": e.memory_used_mib, "total_mib": e.memory_total_mib},
        "lower the batch or context, use bf16/fp16 or quantized weights, or offload the KV cache",
    )


def variant_slower(e: Evidence) -> Finding | None:
    """A variant slower than its baseline (compare, systems-analysis)."""
    if e.variant_slowdown is None or e.variant_slowdown < 1.05:
        return None
    return Finding(
        "variant-slower",
        _sev(e.variant_slowdown, 1.05, 1.25),
        f"the variant is {e.variant_slowdown:.2f}x slower than the baseline",
        {"slowdown": e.variant_slowdown},
        "look at the per-phase and per-layer comparison for where the time went",
    )


def knob_path_unused(e: Evidence) -> Finding | None:
    """A knob whose intended path did not run, or a compute-bound phase far below its ceiling."""
    failed = {k: v for k, v in e.knob_checks.items() if isinstance(v, dict) and v.get("error")}
    low = e.prefill_pct_attainable is not None and e.prefill_pct_attainable < 10
    if not failed and not low:
        return None
    return Finding(
        "low-utilisation",
        "high" if failed else "medium",
        "a knob's intended path did not run" if failed else "prefill is far below its ceiling",
        {"failed_checks": failed, "prefill_pct_attainable": e.prefill_pct_attainable},
        "check that the kernel or knob is supported on this device and dtype; a compute-bound "
        "phase far below peak usually runs an unfused or fallback kernel",
    )


#: the routing shortcuts' thresholds (the systems-analysis reference's)
LEARNED_ROUTING_MAX_PCT = 20.0
CACHE_UTILIZATION_MIN = 0.30


def high_learned_routing(e: Evidence) -> Finding | None:
    """Too many tokens still take the learned router for shortcuts to pay."""
    if e.routing_learned_pct is None or e.routing_learned_pct <= LEARNED_ROUTING_MAX_PCT:
        return None
    return Finding(
        "high_learned_routing",
        "high",
        f"learned routing at {e.routing_learned_pct:.1f}% of tokens "
        f"(above {LEARNED_ROUTING_MAX_PCT:.0f}%)",
        {"learned_pct": e.routing_learned_pct},
        "lower frequency_threshold or raise entropy_threshold so more tokens enter the fast "
        "path, or calibrate on text closer to the workload",
    )


def low_cache_utilization(e: Evidence) -> Finding | None:
    """The routing cache is mostly empty: too small a TTL, or keys that never repeat."""
    if e.cache_utilization is None or e.cache_utilization >= CACHE_UTILIZATION_MIN:
        return None
    return Finding(
        "low_cache_utilization",
        "medium",
        f"routing cache utilisation at {100 * e.cache_utilization:.1f}% "
        f"(below {100 * CACHE_UTILIZATION_MIN:.0f}%)",
        {"cache_utilization": e.cache_utilization},
        "increase cache_ttl (entries expire before reuse), or decrease cache_size to what is used",
    )


#: share of a decode step spent in page faults from which the rule fires (medium, high)
PAGE_FAULT_SHARE = (0.1, 0.3)


def page_faults(e: Evidence) -> Finding | None:
    """Decode steps or prefills that fault in fresh pages: memory mapped anew for every tensor.

    transformers' dynamic cache grows by concatenation; above glibc's mmap threshold each new
    tensor is fresh memory from the kernel (measure/faults.py), and every page of it faults,
    every decode step; a prefill's activations past the threshold do the same.
    """
    if not e.page_fault_us:
        return None
    shares = {}
    for phase, count, ms in (
        ("decode step", e.page_faults_per_step, e.tpot_ms),
        ("prefill", e.prefill_page_faults, e.ttft_ms),
    ):
        if count and ms:
            shares[phase] = (count, count * e.page_fault_us / 1e3 / ms)
    if not shares or max(share for _, share in shares.values()) < PAGE_FAULT_SHARE[0]:
        return None
    worst = max(share for _, share in shares.values())
    said = " and ".join(
        f"{100 * min(share, 1.0):.0f}% of each {phase} ({count:,.0f} faults)"
        for phase, (count, share) in shares.items()
        if share >= PAGE_FAULT_SHARE[0]
    )
    return Finding(
        "page-faults",
        _sev(worst, *PAGE_FAULT_SHARE),
        f"page faults take {said}, at {e.page_fault_us:.2g} us each",
        {
            "page_fault_us": e.page_fault_us,
            "page_faults_per_step": e.page_faults_per_step,
            "fault_ms_per_step": (e.page_faults_per_step or 0) * e.page_fault_us / 1e3,
            "tpot_ms": e.tpot_ms,
            "prefill_page_faults": e.prefill_page_faults,
            "ttft_ms": e.ttft_ms,
            "share_of_step": shares.get("decode step", (0, None))[1],
            "share_of_prefill": shares.get("prefill", (0, None))[1],
        },
        "tensors above malloc's mmap threshold (the growing KV cache, a long prefill's "
        f"activations) get fresh memory every time: keep it instead with {ALLOCATOR_FIX}",
    )


RULES: list[Callable[[Evidence], Finding | None]] = [
    memory_bound_decode,
    framework_overhead,
    attention_dominates,
    moe_imbalance,
    poor_scaling,
    compile_dominates,
    near_memory_limit,
    variant_slower,
    knob_path_unused,
    high_learned_routing,
    low_cache_utilization,
    page_faults,
]


def find_bottlenecks(e: Evidence) -> list[Finding]:
    """Every rule that fires, high severity first."""
    order = {"high": 0, "medium": 1, "low": 2}
    found = [f for rule in RULES if (f := rule(e)) is not None]
    return sorted(found, key=lambda f: order[f.severity])


def evidence_of(run: RunResult, roof: dict[str, Any] | None) -> Evidence:
    """Evidence from a stored run and its roofline."""
    from infermeter.run.components import phase_components

    m = run.measured or run.samples
    e = Evidence(batch=m[0].batch_size if m else 1)
    s = run.summary()
    e.ttft_ms = s["ttft_ms"].median
    e.prompt_tokens = m[0].prompt_tokens if m else None
    if roof:
        e.decode_bound = roof["decode"].get("bound")
        e.decode_intensity = roof["decode"].get("intensity")
        e.ridge = roof.get("ridge_flop_per_byte")
        e.decode_measured_ms = roof.get("decode_measured_ms")
        e.decode_min_ms = roof.get("decode_min_ms")
        e.prefill_pct_attainable = roof["prefill"].get("pct_attainable")
    e.prefill_parts_ms = phase_components(run, "prefill")
    loads = run.layers.get("moe_load") or []
    if loads:
        worst = max(loads, key=lambda r: r["imbalance"])
        e.moe_imbalance, e.moe_layer = worst["imbalance"], worst["layer"]
        e.moe_assignments = worst.get("assignments")
        e.moe_experts = run.model_info.get("experts")
    e.random_weights = run.model_info.get("source") == "preset"
    e.attn_used = run.model_info.get("attn_implementation")
    e.compile_ms = run.phases.get("compile_ms")
    e.measured_total_ms = sum(x.total_ms for x in run.measured) or None
    peak = max((x.peak_allocated_mib or 0 for x in m), default=0)
    total_mib = (run.device or {}).get("total_memory_mib")
    if not peak:  # CPU: the process's resident peak against the memory of the host that ran it
        peak = max((x.rss_peak_mib or 0 for x in m), default=0)
        total_mib = (run.device or {}).get("host_memory_mib")  # absent in runs stored before it
    if peak and total_mib:
        e.memory_used_mib, e.memory_total_mib = peak, total_mib
    e.knob_checks = run.checks
    e.tpot_ms = s["tpot_ms"].median if s["tpot_ms"].n else None
    if s["page_faults_per_step"].n:
        e.page_faults_per_step = s["page_faults_per_step"].median
    prefill = [x.memory["page_faults_prefill"] for x in m if "page_faults_prefill" in x.memory]
    e.prefill_page_faults = statistics.median(prefill) if prefill else None
    e.page_fault_us = (run.device or {}).get("page_fault_us")
    return e
