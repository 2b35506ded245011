"""Energy under load: each continuous-batching step's energy shared among its requests.

Why: J per token of one isolated `generate` says little about a server, where every step
carries many requests, some prefilling and some decoding. With a power source (`--energy`),
the power trace of a `load --server continuous` run is cut at every scheduler step
(serving/batch_state.py): a step's energy is the trace's over its forward, and each request in the
step gets the share of it its tokens had in the step (a prefill chunk of 100 tokens beside 3
decoding requests: 100/103 of it). Those shares add up, per request, to its joules, its
prefill and decode joules; the run adds J per output token, J per request that met every SLO
and the mean power.

What is not in a step (the scheduler and streaming between forwards, idle time between
arrivals) is not any request's: it is reported beside as `between_steps_j`, and the run's
total (`total_j`, the trace over the run) is the two together, so nothing is hidden in a
share. No power source, or a trace that does not cover a step: None with the reason, never 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from infermeter.run.load_docs import LoadEnergyDoc, StepRowDoc
    from infermeter.serving.rows import RequestRowDoc


class RequestJoulesDoc(TypedDict):
    """One request's shares of the steps it was in."""

    energy_j: float
    prefill_j: float
    decode_j: float


class EnergyTotalsDoc(TypedDict):
    """The run's trace over its wall time and over its steps (`attribute`)."""

    source: str
    method: str
    total_j: float | None
    in_steps_j: float
    between_steps_j: float | None
    mean_power_w: float | None
    steps_uncovered: int
    readings: int


def attribute(
    steps: Sequence[StepRowDoc],
    members: Sequence[Sequence[tuple[str, int, bool]]],
    trace: Any,
    wall_ms: float,
) -> tuple[dict[str, RequestJoulesDoc], EnergyTotalsDoc]:
    """Per request id {energy_j, prefill_j, decode_j}, and the run's totals.

    `steps` have `t_ms` and `step_ms` on the trace's time base; `members[i]` is step i's
    (request id, tokens in the step, whether those are prefill tokens).
    """
    per: dict[str, RequestJoulesDoc] = {}
    in_steps = 0.0
    uncovered = 0
    for step, who in zip(steps, members, strict=True):
        window = trace.window(step["t_ms"], step["t_ms"] + step["step_ms"])
        if window is None:
            uncovered += 1
            continue
        step["energy_j"] = window.energy_j
        in_steps += window.energy_j
        tokens = sum(n for _, n, _ in who)
        for rid, n, prefill in who:
            if tokens <= 0:
                continue
            share = window.energy_j * n / tokens
            got = per.setdefault(rid, {"energy_j": 0.0, "prefill_j": 0.0, "decode_j": 0.0})
            got["energy_j"] += share
            got["prefill_j" if prefill else "decode_j"] += share
    whole = trace.window(0.0, wall_ms) if wall_ms > 0 else None
    totals: EnergyTotalsDoc = {
        "source": trace.source,
        "method": trace.method,
        "total_j": whole.energy_j if whole is not None else None,
        "in_steps_j": in_steps,
        "between_steps_j": (whole.energy_j - in_steps) if whole is not None else None,
        "mean_power_w": whole.mean_power_w if whole is not None else None,
        "steps_uncovered": uncovered,
        "readings": len(trace),
    }
    return per, totals


def energy_summary(rows: Sequence[RequestRowDoc], totals: EnergyTotalsDoc) -> LoadEnergyDoc:
    """The run's energy figures from the requests' shares (rows carry `energy_j` etc.)."""
    import numpy as np

    # (request, its joules, prefill's, decode's) for each request with a share
    served = [
        (r, e, r.get("prefill_j") or 0.0, r.get("decode_j") or 0.0)
        for r in rows
        if (e := r.get("energy_j")) is not None
    ]
    out_tokens = sum(r["output_tokens"] for r, *_ in served)
    met = [r for r in rows if r.get("slo_pass") and all(r["slo_pass"].values())]
    shares = [e for _, e, _, _ in served]
    total = totals["total_j"]
    return {
        "available": True,
        "source": totals["source"],
        "method": totals["method"],
        "total_j": total,
        "in_steps_j": totals["in_steps_j"],
        "between_steps_j": totals["between_steps_j"],
        "mean_power_w": totals["mean_power_w"],
        "steps_uncovered": totals["steps_uncovered"],
        "readings": totals["readings"],
        "prefill_j": sum(p for *_, p, _ in served) if served else None,
        "decode_j": sum(d for *_, d in served) if served else None,
        "j_per_request_p50": float(np.median(shares)) if shares else None,
        "j_per_output_token": totals["in_steps_j"] / out_tokens if out_tokens else None,
        "j_per_output_token_all": total / out_tokens if out_tokens and total is not None else None,
        "j_per_goodput_request": total / len(met) if met and total is not None else None,
    }


def no_energy(reason: str) -> LoadEnergyDoc:
    """The energy block of a run measured without a power source."""
    return {"available": False, "reason": reason}
