"""Compare two runs: speedup per phase and per layer, where it comes from, predicted vs actual.

Speedup = baseline time / variant time (above 1: the variant is faster). The prediction comes
from the cost model at each run's shapes: per phase, the roofline time max(FLOPs / peak,
bytes / bandwidth) with the device's ceilings (measured, else spec); without ceilings, FLOPs
for prefill and bytes for decode (the first-order costs). The prediction error is
(predicted - actual) / actual speedup.
"""

from __future__ import annotations

from typing import Any

from infermeter.analysis.costs import total
from infermeter.analysis.roofline import phase_costs, run_shapes
from infermeter.measure.ceilings import Ceilings

PHASES = (("prefill", "ttft_ms"), ("decode", "tpot_ms"))


def _model_ms(run: Any, ceilings: Ceilings | None) -> dict[str, float]:
    shape, work = run_shapes(run)
    costs = phase_costs(shape, work)
    out = {}
    for phase, _ in PHASES:
        t = total(costs[phase])
        peak = ceilings.peak(work["dtype"]) if ceilings is not None else None
        bandwidth = ceilings.bandwidth_bytes_per_s if ceilings is not None else None
        if peak and bandwidth:
            out[phase] = max(t.flop_count / peak, t.bytes / bandwidth)
        else:
            out[phase] = t.flop_count if phase == "prefill" else t.bytes
    return out


def compare_runs(base: Any, variant: Any, ceilings: Ceilings | None = None) -> dict[str, Any]:
    """The comparison document of two runs."""
    sb, sv = base.summary(), variant.summary()
    pb, pv = _model_ms(base, ceilings), _model_ms(variant, ceilings)
    phases = []
    for phase, metric in PHASES:
        actual = sb[metric].mean / sv[metric].mean if sv[metric].mean else None
        predicted = pb[phase] / pv[phase] if pv[phase] else None
        phases.append(
            {
                "phase": phase,
                "metric": metric,
                "baseline_ms": sb[metric].mean,
                "variant_ms": sv[metric].mean,
                "speedup": actual,
                "predicted_speedup": predicted,
                "prediction_error_pct": 100 * (predicted - actual) / actual
                if actual and predicted
                else None,
            }
        )
    total_speedup = sb["total_ms"].mean / sv["total_ms"].mean if sv["total_ms"].mean else None
    # the baseline's measured phase times, each scaled by its predicted phase speedup
    pred_ttft = sb["ttft_ms"].mean / (phases[0]["predicted_speedup"] or 1)
    pred_decode = sb["decode_ms"].mean / (phases[1]["predicted_speedup"] or 1)
    predicted_total = (
        sb["total_ms"].mean / (pred_ttft + pred_decode) if sb["total_ms"].mean else None
    )
    layers = _layers(base, variant)
    return {
        "baseline": {"run_id": base.run_id, "knobs": base.knobs},
        "variant": {"run_id": variant.run_id, "knobs": variant.knobs},
        "changed": {
            k: (base.knobs.get(k), variant.knobs.get(k))
            for k in sorted(set(base.knobs) | set(variant.knobs))
            if base.knobs.get(k) != variant.knobs.get(k)
        },
        "phases": phases,
        "total_speedup": total_speedup,
        "predicted_total_speedup": predicted_total,
        "total_prediction_error_pct": 100 * (predicted_total - total_speedup) / total_speedup
        if predicted_total and total_speedup
        else None,
        "throughput_ratio": sv["tokens_per_s"].mean / sb["tokens_per_s"].mean
        if sb["tokens_per_s"].mean
        else None,
        "layers": layers,
        "where": sorted(layers, key=lambda r: -abs(r["delta_ms"]))[:5],
        "prediction": "roofline with ceilings" if ceilings else "first-order cost ratio",
    }


def _layers(base: Any, variant: Any) -> list[dict[str, Any]]:
    """Per module and phase present in both runs: mean ms per call, speedup, total delta."""

    def index(run: Any) -> dict[tuple[str, str], dict[str, Any]]:
        n = max(1, len(run.measured))
        return {
            (r["name"], r["phase"]): {**r, "per_sample_ms": r["total_ms"] / n}
            for r in run.layers.get("layers", [])
        }

    ib, iv = index(base), index(variant)
    out = []
    for key in ib.keys() & iv.keys():
        b, v = ib[key], iv[key]
        out.append(
            {
                "name": key[0],
                "phase": key[1],
                "kind": b["kind"],
                "baseline_mean_ms": b["mean_ms"],
                "variant_mean_ms": v["mean_ms"],
                "speedup": b["mean_ms"] / v["mean_ms"] if v["mean_ms"] else None,
                "delta_ms": v["per_sample_ms"] - b["per_sample_ms"],
            }
        )
    return sorted(out, key=lambda r: (r["phase"], r["name"]))
