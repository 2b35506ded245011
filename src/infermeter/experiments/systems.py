"""Systems analysis (`infermeter systems-analysis`): baseline vs variant in one document.

Runs the baseline and the variant (each a set of knob values on the same model, standard mode)
through the sweep's point runner, so every knob is verified by measurement exactly as in a
sweep; then a scaling sweep of the variant over 64/128/256/512 prompt tokens, the roofline, the
bottleneck rules (with the variant's slowdown when there is one) and the comparison with its
predicted speedup. Writes `systems_analysis.json` (baseline, variant, scaling, roofline,
bottlenecks, comparison: the shape earlier MoE systems-analysis tools wrote) and
`profile_report.json` with every run's JSON. Orchestration lives here, above `run/`; the
analysis it calls is pure.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from infermeter.analysis.analyze import analyze_run
from infermeter.analysis.bottlenecks import evidence_of, find_bottlenecks
from infermeter.analysis.compare import compare_runs
from infermeter.analysis.scaling import fit_scaling
from infermeter.errors import UserError
from infermeter.knobs import Knob, get_knob
from infermeter.measure.ceilings import Ceilings, spec_ceilings
from infermeter.models.loader import LoadedModel
from infermeter.run.config import RunConfig
from infermeter.run.results import RunResult
from infermeter.run.sink import SweepStore
from infermeter.run.sweep import run_point
from infermeter.util.jsonio import write_json


class AnalysisStore(SweepStore, Protocol):
    """A sweep store that also keeps measured hardware ceilings (`infermeter calibrate`)."""

    def measured_ceilings(self, device: str) -> Ceilings | None:
        """The newest ceilings measured on this host for `device`, or None."""
        ...


LENGTHS = (64, 128, 256, 512)


def parse_point(
    knobs: dict[str, str], loaded: LoadedModel
) -> tuple[dict[str, Knob], dict[str, Any]]:
    """Knobs and parsed values of one side, checked against the loaded model.

    Raises:
        UserError: an unknown knob, a bad value, or a load-time knob (dtype): both sides share
            one loaded model, so those are compared as two `infermeter profile` runs instead.
    """
    grid: dict[str, Knob] = {}
    point: dict[str, Any] = {}
    for name, text in knobs.items():
        knob = get_knob(name)
        if knob.scope == "load":
            raise UserError(
                f"systems-analysis cannot reload for {name}",
                f"compare two `infermeter profile --{name.replace('_', '-')}` runs instead",
            )
        value = knob.parse(text)
        if knob.check is not None:
            knob.check(value, loaded)
        grid[knob.name], point[knob.name] = knob, value
    return grid, point


def _run_with(
    base: RunConfig, knobs: dict[str, str], loaded: LoadedModel, store: SweepStore
) -> RunResult:
    """One run with `knobs` applied and verified (the sweep's point runner)."""
    grid, point = parse_point(knobs, loaded)
    run, _verify_s = run_point(base, grid, point, loaded, store)
    return run


def _brief(run: RunResult) -> dict[str, Any]:
    s = run.summary()
    return {
        "run_id": run.run_id,
        "knobs": run.knobs,
        "total_ms": s["total_ms"].median,
        "ttft_ms": s["ttft_ms"].median,
        "tpot_ms": s["tpot_ms"].median,
        "throughput_tps": s["tokens_per_s"].median,
        "memory": {
            "rss_peak_mib": s["rss_peak_mib"].median,
            "peak_allocated_mib": s["peak_allocated_mib"].median,
        },
    }


def _scaling(
    base: RunConfig,
    variant: dict[str, str],
    loaded: LoadedModel,
    store: SweepStore,
    lengths: tuple[int, ...],
) -> tuple[list[RunResult], dict[str, Any], Any]:
    """The variant over prompt lengths (minimal mode): runs, TTFT per length, the fit."""
    runs = [
        _run_with(replace(base, prompt_tokens=n, mode="minimal"), variant, loaded, store)
        for n in lengths
    ]
    ttft_ms = [r.summary()["ttft_ms"].median for r in runs]
    scaling = {  # avg_time_ms and time_per_token_ms: the reference's names for the same
        str(n): {
            "ttft_ms": t,
            "ttft_per_token_ms": t / n,
            "avg_time_ms": t,
            "time_per_token_ms": t / n,
            "run_id": r.run_id,
        }
        for n, r, t in zip(lengths, runs, ttft_ms, strict=True)
    }
    fit = fit_scaling(
        list(lengths),
        [t / n for t, n in zip(ttft_ms, lengths, strict=True)],
        metric="prefill ms per prompt token",
        length="prompt tokens",
    )
    return runs, scaling, fit


def systems_analysis(
    base: RunConfig,
    baseline: dict[str, str],
    variant: dict[str, str],
    loaded: LoadedModel,
    store: AnalysisStore,
    out: Path,
    lengths: tuple[int, ...] = LENGTHS,
    routing: str | None = None,
    target_speedup: float = 1.2,
) -> dict[str, Any]:
    """Run everything and write the two JSON files; return systems_analysis.json's content.

    With `routing` (a routing knob value), the baseline routes every token through the
    learned router and the variant takes the shortcuts; the document then also has the
    routing analysis (`routing_analysis`) in the reference's fields.
    """
    if routing is not None:
        baseline = {"routing": "learned", **baseline}
        variant = {**variant, "routing": routing}
    b = _run_with(base, baseline, loaded, store)
    v = _run_with(base, variant, loaded, store)
    scaling_runs, scaling, fit = _scaling(base, variant, loaded, store, lengths)
    device = str((v.device or {}).get("name"))
    ceilings = store.measured_ceilings(device) or spec_ceilings(device)
    analysis = analyze_run(v, ceilings)
    comparison = compare_runs(b, v, ceilings)
    evidence = evidence_of(v, analysis["roofline"])
    evidence.scaling = fit.to_dict() if fit else None
    total_speedup = comparison["total_speedup"]
    evidence.variant_slowdown = 1 / total_speedup if total_speedup else None
    prefill = analysis["roofline"]["prefill"]
    doc = {
        "model": v.model_info.get("spec"),
        "device": device,
        "baseline": _brief(b),
        "variant": _brief(v),
        "scaling": scaling,
        "scaling_fit": fit.to_dict() if fit else None,
        "roofline": {
            "total_params_billions": v.model_info.get("params", 0) / 1e9,
            "peak_memory_gb": max((s.rss_peak_mib or 0) for s in v.measured) / 1024,
            "estimated_tflop_per_s": (prefill["achieved_flop_per_s"] or 0) / 1e12,
            "estimated_tflops": (prefill["achieved_flop_per_s"] or 0) / 1e12,  # reference name
            "ceilings_source": analysis["ceilings_source"],
            "layers": analysis["roofline"]["rows"],
            "decode_min_ms": analysis["roofline"].get("decode_min_ms"),
        },
        "bottlenecks": [f.to_dict() for f in find_bottlenecks(evidence)],
        "comparison": {
            "actual_speedup": total_speedup,
            "predicted_speedup": comparison["predicted_total_speedup"],
            "prediction_error_pct": comparison["total_prediction_error_pct"],
            "phases": comparison["phases"],
            "where": comparison["where"],
        },
    }
    if routing is not None:
        _add_routing(doc, b, v, loaded, routing, target_speedup, evidence)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "systems_analysis.json", doc)
    write_json(
        out / "profile_report.json",
        {
            "baseline": b.to_json(),
            "variant": v.to_json(),
            "scaling": [r.to_json() for r in scaling_runs],
        },
    )
    return doc


#: findings renamed to the ids of the systems-analysis reference in routing mode
REFERENCE_IDS = {"variant-slower": "slowdown", "poor-scaling": "poor_scaling"}


def _phase_tokens(run: RunResult) -> dict[str, int]:
    """Tokens each phase of one sample pushes through the routers.

    Prefill: prompt x batch; decode: one per row per decode step.
    """
    s = run.measured[0]
    return {
        "prefill": (s.prompt_tokens + s.vision_tokens) * s.batch_size,
        "decode": max(s.new_tokens - 1, 0) * s.batch_size,
    }


def routing_analysis(
    b: RunResult, v: RunResult, loaded: LoadedModel, config_text: str, target_speedup: float
) -> dict[str, Any]:
    """Shortcut routing against learned, predicted and measured.

    The distribution over paths seen during the variant's run, each path's measured cost per
    token (per phase: a prefill's call carries the prompt, a decode step's one token per row),
    the performance model's predicted speedup beside the measured one, and the break-even
    distribution for `target_speedup`.
    """
    from infermeter.analysis.perfmodel import PerformanceModel
    from infermeter.experiments.routing_costs import measure_path_costs
    from infermeter.knobs.routing import shortcut_config

    cfg = shortcut_config(config_text)
    if cfg is None:
        raise UserError("--routing learned is the baseline itself", "give shortcuts or a file")
    seen = v.checks.get("routing", {}).get("during_run")
    observed = seen if seen is not None and "percent" in seen else None  # learned: no split
    dist = observed["percent"] if observed else {"fast": 0.0, "cached": 0.0, "learned": 100.0}
    tokens = _phase_tokens(b)
    base_ms = {"prefill": b.summary()["ttft_ms"].median, "decode": b.summary()["decode_ms"].median}
    phases: dict[str, Any] = {}
    predicted_ms = 0.0
    for phase, n in tokens.items():
        if n == 0:
            continue
        per_call = n if phase == "prefill" else b.measured[0].batch_size
        costs = measure_path_costs(loaded, cfg, per_call)
        rest = max(
            base_ms[phase] * 1e3 / n - costs["learned_routing"] - costs["expert_compute"], 0.0
        )
        table = {
            "fast_path_lookup": costs["fast_path_lookup"],
            "cache_lookup": costs["cache_lookup"],
            "expert_compute": costs["expert_compute"],
            "rest_of_model": rest,
        }
        # learned tokens of the variant pass the shortcut dispatch; the baseline's do not
        model = PerformanceModel(
            {**table, "learned_routing": costs["learned_via_shortcuts"]},
            reference_cost_us=costs["learned_routing"],
        )
        var_us = model.predict_latency(dist)["per_token_us"]
        predicted_ms += n * var_us / 1e3
        phases[phase] = {
            "tokens": n,
            "costs_us_per_token": {**costs, "rest_of_model": rest},
            "baseline_ms": base_ms[phase],
            "predicted_ms": n * var_us / 1e3,
            "predicted_speedup": model.predict_speedup(dist),
            "breakeven": model.find_breakeven_distribution(target_speedup, max_learned_pct=100.0),
            "bottleneck": model.analyze_bottleneck(dist),
        }
    actual = b.summary()["total_ms"].median / v.summary()["total_ms"].median
    predicted = sum(base_ms[p] for p in phases) / predicted_ms if predicted_ms else None
    return {
        "config": cfg.to_dict(),
        "routing_distribution": dist,
        "cache_utilization": observed["cache_utilization"] if observed else None,
        "var_stats": observed or {},
        "phases": phases,
        "target_speedup": target_speedup,
        "actual_speedup": actual,
        "predicted_speedup": predicted,
        "prediction_error_pct": 100 * (predicted - actual) / actual if predicted else None,
    }


def _add_routing(
    doc: dict[str, Any],
    b: RunResult,
    v: RunResult,
    loaded: LoadedModel,
    routing: str,
    target_speedup: float,
    evidence: Any,
) -> None:
    """The routing analysis into the document, in the reference's field names."""
    r = routing_analysis(b, v, loaded, routing, target_speedup)
    evidence.routing_learned_pct = r["routing_distribution"].get("learned")
    evidence.cache_utilization = r["cache_utilization"]
    doc["routing"] = r
    doc["baseline"]["avg_time_ms"] = doc["baseline"]["total_ms"]
    doc["var"] = {
        **doc["variant"],
        "avg_time_ms": doc["variant"]["total_ms"],
        "var_stats": r["var_stats"],
    }
    doc["comparison"] = {
        **doc["comparison"],
        "roofline_predicted_speedup": doc["comparison"]["predicted_speedup"],
        "actual_speedup": r["actual_speedup"],
        "predicted_speedup": r["predicted_speedup"],
        "prediction_error_pct": r["prediction_error_pct"],
    }
    doc["bottlenecks"] = [
        {**f.to_dict(), "reference_id": REFERENCE_IDS.get(f.id, f.id)}
        for f in find_bottlenecks(evidence)
    ]
