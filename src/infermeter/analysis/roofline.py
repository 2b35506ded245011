"""Roofline position of a run's layers and phases against the device's ceilings.

For every module kind (attention, MLP or MoE, LM head) and phase, the cost model gives FLOPs
and bytes of one call at the run's shapes (prefill: the prompt; decode: the step at the mean
context), and the run's per-layer timing (standard/deep modes) gives the measured time of one
call. From them: operational intensity (FLOP/byte), achieved FLOP/s and bytes/s, the attainable
rate min(peak, intensity x bandwidth), the share of it achieved, and memory- or compute-bound
(intensity below or above the ridge point). Run-wide: the fastest a decode step could be if it
only had to read its weights and KV cache at full bandwidth, beside the measured TPOT, and the
fastest a prefill could be at peak FLOP/s, beside the measured TTFT.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from infermeter.analysis.costs import Cost, approximate, forward_costs, total
from infermeter.measure.ceilings import Ceilings
from infermeter.models.shape import Shape

if TYPE_CHECKING:  # annotations only: the run's module imports numpy
    from infermeter.run.results import RunResult

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
#: layer-table kinds that have a cost of their own
KINDS = ("attention", "mlp", "moe", "lm_head")
#: the columns of a roofline table, in display order (reports and figures' CSV)
COLUMNS = (
    "phase",
    "kind",
    "flop_count",
    "bytes",
    "intensity",
    "measured_ms",
    "achieved_flop_per_s",
    "attainable_flop_per_s",
    "pct_attainable",
    "bound",
)


def all_rows(roof: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-kind rows, then the whole prefill and decode forwards."""
    return [*roof["rows"], roof["prefill"], roof["decode"]]


def unplaceable(run: RunResult) -> str | None:
    """Why no forward of `run` can be placed on the roofline, in one line; None when one can.

    A load run's samples are requests whose TTFT includes queueing and batching with other
    requests; a run with no samples measured nothing; a run without a recorded shape (an old
    one) has no FLOPs or bytes to divide by.
    """
    if (run.config or {}).get("mode") == "load":
        return (
            "a load run: each sample is one request, its TTFT includes queueing and batching "
            "with other requests, so no forward can be placed on the roofline; `infermeter "
            "profile` the same model for isolated forwards"
        )
    if not (run.measured or run.samples):
        return f"run {run.run_id} has no samples ({run.status}): nothing was measured to place"
    if not run.model_info.get("shape"):
        return (
            f"run {run.run_id} has no model shape recorded (made by an older infermeter): "
            "profile it again to place it"
        )
    return None


def run_shapes(run: RunResult) -> tuple[Shape, dict[str, Any]]:
    """The run's model shape and workload (prompt, new tokens, batch, dtype, top-k)."""
    from infermeter.errors import UserError

    shape = run.model_info.get("shape")
    if not shape:
        raise UserError(
            f"run {run.run_id} has no model shape recorded (made by an older infermeter)",
            "profile it again to analyse it",
        )
    m = run.measured or run.samples
    if not m:
        raise UserError(f"run {run.run_id} has no samples", "analyse a finished run")
    s0 = m[0]
    knobs = run.knobs or {}
    work = {
        "prompt": s0.prompt_tokens + s0.vision_tokens,
        "new": s0.new_tokens,
        "batch": s0.batch_size,
        "images": s0.batch_size if s0.vision_tokens else 0,
        "dtype": run.model_info.get("dtype", "float32"),
        "top_k": knobs.get("top_k") if isinstance(knobs.get("top_k"), int) else None,
        "active_layers": knobs.get("active_layers")
        if isinstance(knobs.get("active_layers"), int)
        else None,
        "cache": str((run.config or {}).get("cache") or "dynamic"),
    }
    return Shape.from_dict(shape), work


def phase_costs(shape: Shape, work: dict[str, Any]) -> dict[str, list[Cost]]:
    """Costs of one prefill call and of the decode step at the mean context."""
    e = DTYPE_BYTES.get(work["dtype"], 4)
    kw = dict(
        batch=work["batch"], dtype_bytes=e, top_k=work["top_k"], active_layers=work["active_layers"]
    )
    prefill = forward_costs(
        shape, tokens=work["prompt"], logits_tokens=1, images=work["images"], **kw
    )
    mid = work["prompt"] + max(0, work["new"] - 1) // 2
    decode = forward_costs(shape, tokens=1, context=mid, logits_tokens=1, **kw)
    return {"prefill": prefill, "decode": decode}


def _by_kind(costs: list[Cost]) -> dict[str, Cost]:
    out: dict[str, list[Cost]] = {}
    for c in costs:
        if c.kind in KINDS:
            out.setdefault(c.kind, []).append(c)
    return {k: total(v) for k, v in out.items()}


def _quantized_note(model_info: Mapping[str, Any]) -> list[str]:
    """Quantized weights are stored in fewer bytes than the cost model counts them in."""
    q = model_info.get("quantization")
    if not q:
        return []
    return [
        f"weights of {q['converted_linear']} linear layers are stored as {q['scheme']} "
        f"({q['method']}); bytes are counted at the compute dtype, so weight bytes are "
        "overstated and the intensity understated"
    ]


def roofline(run: RunResult, ceilings: Ceilings | None) -> dict[str, Any]:
    """Per kind and phase: intensity, achieved rates, % of attainable, bound; and the minima."""
    shape, work = run_shapes(run)
    costs = phase_costs(shape, work)
    dtype = work["dtype"]
    rows: list[dict[str, Any]] = []
    layer_rows = run.layers.get("layers", [])
    for phase, phase_list in costs.items():
        for kind, cost in _by_kind(phase_list).items():
            timed = [r for r in layer_rows if r["phase"] == phase and r["kind"] == kind]
            calls = sum(r["calls"] for r in timed) if timed else 0
            n_modules = len({r["name"] for r in timed}) or 1
            # time of one forward's worth of this kind: all its modules, one call each
            ms = sum(r["total_ms"] for r in timed) / (calls / n_modules) if calls else None
            rows.append(_row(phase, kind, cost, ms, ceilings, dtype))
    out: dict[str, Any] = {
        "rows": rows,
        "shape": shape.to_dict(),
        "workload": work,
        # why every FLOP and byte figure here is approximate (empty: exact)
        "approximate": approximate(shape) + _quantized_note(run.model_info),
    }
    pre, dec = total(costs["prefill"]), total(costs["decode"])
    summary = run.summary()
    out["prefill"] = _row("prefill", "forward", pre, summary["ttft_ms"].median, ceilings, dtype)
    out["decode"] = _row("decode", "forward", dec, summary["tpot_ms"].median, ceilings, dtype)
    if ceilings is not None:
        out["ceilings"] = ceilings.to_dict()
        out["ridge_flop_per_byte"] = ceilings.ridge(dtype)
        if ceilings.bandwidth_bytes_per_s:
            out["decode_min_ms"] = dec.bytes / ceilings.bandwidth_bytes_per_s * 1e3
            out["decode_measured_ms"] = summary["tpot_ms"].median
        peak = ceilings.peak(dtype)
        if peak:
            out["prefill_min_ms"] = pre.flop_count / peak * 1e3
            out["prefill_measured_ms"] = summary["ttft_ms"].median
    return out


def _row(
    phase: str, kind: str, cost: Cost, ms: float | None, ceilings: Ceilings | None, dtype: str
) -> dict[str, Any]:
    intensity = cost.intensity
    row: dict[str, Any] = {
        "phase": phase,
        "kind": kind,
        "flop_count": cost.flop_count,
        "bytes": cost.bytes,
        "intensity": intensity,
        "measured_ms": ms,
        "achieved_flop_per_s": None,
        "achieved_bytes_s": None,
        "attainable_flop_per_s": None,
        "pct_attainable": None,
        "bound": None,
    }
    if ms and ms > 0 and not math.isnan(ms):
        row["achieved_flop_per_s"] = cost.flop_count / (ms / 1e3)
        row["achieved_bytes_s"] = cost.bytes / (ms / 1e3)
    if ceilings is not None:
        ridge = ceilings.ridge(dtype)
        att = ceilings.attainable(dtype, intensity)
        row["attainable_flop_per_s"] = att
        if ridge:
            row["bound"] = "memory" if intensity < ridge else "compute"
        if att and row["achieved_flop_per_s"]:
            row["pct_attainable"] = 100.0 * row["achieved_flop_per_s"] / att
    return row
