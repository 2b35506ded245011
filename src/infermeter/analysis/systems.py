"""Systems analysis (the reference documents' phase 5): baseline vs variant in one document.

Runs the baseline and the variant (each a set of knob values on the same model, standard mode),
a scaling sweep of the variant over 64/128/256/512 prompt tokens, then the roofline, the
bottleneck rules (with the variant's slowdown when there is one) and the comparison with its
predicted speedup. Writes `systems_analysis.json` in the reference's shape (baseline, variant,
scaling, roofline, bottlenecks, comparison) and `profile_report.json` with every run's JSON.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from infermeter.analysis.analyze import analyze_run
from infermeter.analysis.bottlenecks import evidence_of, find_bottlenecks
from infermeter.analysis.compare import compare_runs
from infermeter.analysis.hardware import spec_ceilings
from infermeter.analysis.scaling import fit_scaling
from infermeter.knobs import get_knob
from infermeter.models.loader import LoadedModel
from infermeter.report.jsonio import dump_json
from infermeter.run.config import RunConfig
from infermeter.run.profile import profile
from infermeter.run.results import RunResult
from infermeter.run.sweep import show

LENGTHS = (64, 128, 256, 512)


def _run_with(base: RunConfig, knobs: dict[str, str], loaded: LoadedModel, store: Any) -> RunResult:
    """One run with `knobs` applied (config knobs into the config, model knobs around it)."""
    config_fields, model_knobs, shown = {}, {}, {}
    for name, text in knobs.items():
        knob = get_knob(name)
        value = knob.parse(text)
        if knob.check is not None:
            knob.check(value, loaded)
        shown[name] = show(knob, value)
        if knob.scope == "config":
            config_fields[knob.field] = value
        elif knob.scope == "model":
            model_knobs[name] = (knob, value)
        else:
            from infermeter.errors import UserError

            raise UserError(
                f"systems-analysis cannot reload for {name}",
                f"compare two `infermeter profile --{name.replace('_', '-')}` runs instead",
            )
    config = replace(base, **config_fields).validate()
    with contextlib.ExitStack() as stack:
        for knob, value in model_knobs.values():
            stack.enter_context(knob.apply(loaded, value))
        return profile(config, loaded=loaded, sink=store, knobs=shown)


def _brief(run: RunResult) -> dict[str, Any]:
    s = run.summary()
    return {
        "run_id": run.run_id,
        "knobs": run.knobs,
        "avg_time_ms": s["total_ms"].mean,
        "ttft_ms": s["ttft_ms"].mean,
        "tpot_ms": s["tpot_ms"].mean,
        "throughput_tps": s["tokens_per_s"].mean,
        "memory": {
            "rss_peak_mb": s["rss_peak_mb"].mean,
            "peak_allocated_mb": s["peak_allocated_mb"].mean,
        },
    }


def systems_analysis(
    base: RunConfig,
    baseline: dict[str, str],
    variant: dict[str, str],
    loaded: LoadedModel,
    store: Any,
    out: Path,
    lengths: tuple[int, ...] = LENGTHS,
) -> dict[str, Any]:
    """Run everything and write the two JSON files; return systems_analysis.json's content."""
    b = _run_with(base, baseline, loaded, store)
    v = _run_with(base, variant, loaded, store)
    scaling_runs = []
    for n in lengths:
        cfg = replace(base, prompt_tokens=n, mode="minimal")
        scaling_runs.append(_run_with(cfg, variant, loaded, store))
    scaling = {}
    for n, r in zip(lengths, scaling_runs, strict=True):
        ttft = r.summary()["ttft_ms"].mean
        scaling[str(n)] = {"avg_time_ms": ttft, "time_per_token_ms": ttft / n, "run_id": r.run_id}
    fit = fit_scaling(
        list(lengths),
        [scaling[str(n)]["time_per_token_ms"] for n in lengths],
        metric="prefill ms per prompt token",
        length="prompt tokens",
    )
    device = str((v.device or {}).get("name"))
    ceilings = store.measured_ceilings(device) or spec_ceilings(device)
    analysis = analyze_run(v, ceilings)
    comparison = compare_runs(b, v, ceilings)
    evidence = evidence_of(v, analysis["roofline"])
    evidence.scaling = fit.to_dict() if fit else None
    total_speedup = comparison["total_speedup"]
    evidence.variant_slowdown = 1 / total_speedup if total_speedup else None
    doc = {
        "model": v.model_info.get("spec"),
        "device": device,
        "baseline": _brief(b),
        "variant": _brief(v),
        "scaling": scaling,
        "scaling_fit": fit.to_dict() if fit else None,
        "roofline": {
            "total_params_billions": v.model_info.get("params", 0) / 1e9,
            "peak_memory_gb": max((s.rss_peak_mb or 0) for s in v.measured) / 1024,
            "estimated_tflops": (analysis["roofline"]["prefill"]["achieved_flops"] or 0) / 1e12,
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
    out.mkdir(parents=True, exist_ok=True)
    dump_json(out / "systems_analysis.json", doc)
    dump_json(
        out / "profile_report.json",
        {
            "baseline": b.to_json(),
            "variant": v.to_json(),
            "scaling": [r.to_json() for r in scaling_runs],
        },
    )
    return doc
