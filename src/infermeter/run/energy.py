"""Energy of a run, its samples, their phases and its layers, from a power trace.

Definitions (all per measured sample, then summarised like every other metric):
- `energy_j`: from the generate call to the last token; `mean_power_w` over the same window.
- `prefill_j`, `decode_j`: the TTFT window and first-to-last-token window.
- `j_per_token`: energy_j / generated tokens (all rows of the batch), ML.ENERGY's definition.
- `j_per_prompt_token`: prefill_j / prompt tokens (all rows).
- `j_per_decode_token`: decode_j / tokens generated after the first.
- `co2_g`: energy_j in kWh x the grid intensity the user gave (g/kWh), only when given.
Per layer the energy of each phase is *apportioned* by the module's share of forward time in
that phase (standard/deep modes): a model, not a measurement, and labelled so.
No source, or a window the trace does not cover: the fields are None with a reason, never 0.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Literal

from infermeter.measure.energy.attribution import (
    EnergyDoc,
    PowerTrace,
    SampleEnergyDoc,
    WindowEnergy,
)
from infermeter.measure.energy.base import Unavailable
from infermeter.run.results import LayerEnergyRowDoc, RunResult, SampleResult

if TYPE_CHECKING:
    from infermeter.instrument.tables import LayerRowDoc

J_PER_KWH = 3.6e6


def _div(a: float | None, b: float) -> float | None:
    return a / b if a is not None and b > 0 else None


def sample_energy(
    s: SampleResult, trace: PowerTrace, grid_g_per_kwh: float | None = None
) -> SampleEnergyDoc | None:
    """The energy fields of one sample, or None when the trace does not cover it."""
    whole = trace.window(s.start_ms, s.start_ms + s.total_ms)
    if whole is None:
        return None
    prefill = trace.window(s.start_ms, s.start_ms + s.ttft_ms)
    decode = trace.window(s.start_ms + s.ttft_ms, s.start_ms + s.total_ms)
    windows: list[WindowEnergy] = [w for w in (whole, prefill, decode) if w is not None]
    rows = s.batch_size
    out: SampleEnergyDoc = {
        "energy_j": whole.energy_j,
        "mean_power_w": whole.mean_power_w,
        "prefill_j": prefill.energy_j if prefill else None,
        "decode_j": decode.energy_j if decode and s.step_ms else None,
        "j_per_token": _div(whole.energy_j, rows * s.new_tokens),
        "j_per_prompt_token": _div(prefill.energy_j if prefill else None, rows * s.prompt_tokens),
        "j_per_decode_token": _div(decode.energy_j if decode else None, rows * len(s.step_ms)),
        "quality": {
            "energy_j": whole.quality,
            "prefill_j": prefill.quality if prefill else None,
            "decode_j": decode.quality if decode else None,
        },
        "domains_j": whole.domains,
        "in_gap": any(w.in_gap for w in windows),
    }
    if grid_g_per_kwh is not None:
        out["co2_g"] = whole.energy_j / J_PER_KWH * grid_g_per_kwh
    return out


def unavailable_energy(missing: list[Unavailable]) -> EnergyDoc:
    """The run's energy block when no source measured it."""
    return {
        "available": False,
        "reason": "; ".join(f"{u.name}: {u.reason}" for u in missing) or "no energy source",
        "fix": "; ".join(u.fix for u in missing if u.fix),
    }


def attribute(
    result: RunResult,
    trace: PowerTrace,
    *,
    methods: dict[str, str] | None = None,
    missing: list[Unavailable] | None = None,
    grid_g_per_kwh: float | None = None,
) -> None:
    """Fill `result.energy`, each sample's energy and the apportioned per-layer energy.

    `trace` times must already be on the run's timeline (ms, same origin as `start_ms`).
    """
    result.samples = [
        replace(s, energy=sample_energy(s, trace, grid_g_per_kwh)) for s in result.samples
    ]
    uncovered = [s.index for s in result.samples if s.energy is None]
    total = trace.window(float(trace.t_ms[0]), float(trace.t_ms[-1])) if len(trace) > 1 else None
    measured = [s.energy for s in result.measured if s.energy]
    block: EnergyDoc = {
        "available": True,
        "source": trace.source,
        "method": trace.method,
        "methods": methods or {},
        "domains": trace.domains,
        "interval_ms": trace.interval_ms,
        "update_period_ms": trace.update_period_ms,
        "readings": len(trace),
        "gaps": trace.gaps(),
        "errors": trace.errors,
        "unavailable": [u.__dict__ for u in (missing or [])],
        "sampled_j": total.energy_j if total else None,
        "sampled_s": float(trace.t_ms[-1] - trace.t_ms[0]) / 1e3 if len(trace) > 1 else 0.0,
        "sampled_mean_power_w": total.mean_power_w if total else None,
        "measured_samples_j": sum(e["energy_j"] for e in measured) if measured else None,
        "grid_g_per_kwh": grid_g_per_kwh,
    }
    if grid_g_per_kwh is not None and total is not None:
        block["co2_g"] = total.energy_j / J_PER_KWH * grid_g_per_kwh
    if uncovered:
        result.notes.append(f"energy: samples {uncovered} fall outside the power trace")
    if block["gaps"]:
        result.notes.append(
            f"energy: {len(block['gaps'])} gap(s) longer than 3 reading intervals in the trace"
        )
    if any(e["quality"]["decode_j"] == "estimated" for e in measured):
        result.notes.append(
            "energy: some windows are shorter than the sensor's update period "
            f"({trace.update_period_ms:g} ms); their energy is estimated from mean power"
        )
    result.energy = block
    layer_rows = result.layers.get("layers")
    if layer_rows:
        result.layers["layer_energy"] = apportion_layers(layer_rows, result.measured)


def apportion_layers(
    layer_rows: list[LayerRowDoc], samples: list[SampleResult]
) -> list[LayerEnergyRowDoc]:
    """Per module and phase: phase energy x the module's share of forward time (apportioned)."""
    phase_j: dict[str, float] = {}
    phases: tuple[tuple[Literal["prefill_j", "decode_j"], str], ...] = (
        ("prefill_j", "prefill"),
        ("decode_j", "decode"),
    )
    for key, phase in phases:
        values = [v for s in samples if s.energy and (v := s.energy.get(key)) is not None]
        if values:
            phase_j[phase] = float(sum(values))
    out: list[LayerEnergyRowDoc] = []
    for r in layer_rows:
        pct = r.get("pct_forward")
        if r.get("phase") not in phase_j or pct is None or pct != pct:
            continue
        out.append(
            {
                "name": r["name"],
                "kind": r["kind"],
                "layer": r.get("layer"),
                "phase": r["phase"],
                "pct_forward": pct,
                "energy_j": phase_j[r["phase"]] * pct / 100.0,
                "basis": "apportioned",
            }
        )
    return out
