"""Compare two runs: speedup per phase and per layer, where it comes from, predicted vs actual.

Speedup = baseline time / variant time (above 1: the variant is faster), as the ratio of the
two runs' medians over their measured samples, with a 95% bootstrap interval and a verdict
(measure/stats.py `compare_samples`): a phase is called faster or slower only when the data
support it; else "no detectable difference" when the interval rules out more than 5% either
way, and "too few samples to tell; about N per side would" when it does not. Layers
are judged the same way on their per-sample totals (each generate call's time in the module);
runs stored before those existed fall back to the ratio of mean call times, with no interval,
and say so. The prediction comes
from the time model at each run's shapes when the device was calibrated with curves (GEMM,
copy and attention times measured at the model's widths, framework overhead per operation:
analysis/timemodel.py); otherwise from the cost model: per phase, the roofline time
max(FLOPs / peak, bytes / bandwidth) with the device's ceilings (measured, else spec); without
ceilings, FLOPs for prefill and bytes for decode (the first-order costs). The prediction error is
(predicted - actual) / actual speedup.

Two runs of one interleaved sitting (run/interleave.py: the same `interleaved.group`) are
compared *paired*: sample i of each ran in the same round, so the speedup is the median of the
per-round ratios and a drift of the machine between rounds cancels. Runs measured one after
the other cannot be paired; their intervals cover the noise within each run, not a drift
between the two, and the document says so (`drift_caveat`).

Two load runs against a server that reports its own time per request (llama.cpp's `timings`,
stored per request) are also compared *server-normalised*: each request's TPOT over the
server's own decode time per token, and the server's own decode time itself (`server`). Why:
one llama.cpp server read 28 and 52 ms a token in two runs minutes apart; the raw TPOT ratio of
such runs is the server's move, not the knob's, and only the normalised one held (issue 54).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from infermeter.analysis.costs import total
from infermeter.analysis.predict import predict_run
from infermeter.analysis.roofline import phase_costs, run_shapes
from infermeter.analysis.timemodel import device_model
from infermeter.errors import UserError
from infermeter.measure.ceilings import Ceilings
from infermeter.measure.curves import curves_of
from infermeter.measure.stats import compare_paired_samples, compare_samples
from infermeter.run.document import Comparison

if TYPE_CHECKING:  # annotations only: the run's module imports numpy
    from infermeter.run.results import RunResult, ServerTimingDoc

PHASES = (("prefill", "ttft_ms"), ("decode", "tpot_ms"))


def interleaved_group(base: RunResult, variant: RunResult) -> str | None:
    """The interleaving group both runs were measured in, or None (not paired)."""
    ib, iv = base.config.get("interleaved"), variant.config.get("interleaved")
    gb, gv = (ib["group"] if ib else None), (iv["group"] if iv else None)
    return gb if gb is not None and gb == gv and base.run_id != variant.run_id else None


def _samples(run: RunResult, metric: str) -> dict[int, float | None]:
    return {s.index: getattr(s, metric) for s in run.measured}


def _judge(b: dict[int, Any], v: dict[int, Any], paired: bool) -> dict[str, Any]:
    """Per-sample values (by sample index) of both runs judged, paired by index or not."""
    if paired:
        common = sorted(b.keys() & v.keys())
        return compare_paired_samples([b[i] for i in common], [v[i] for i in common])
    return compare_samples(list(b.values()), list(v.values()))


def _judged(
    base: RunResult, variant: RunResult, metric: str, paired: bool = False
) -> dict[str, Any]:
    """Medians of both runs, the speedup with its interval, and the verdict."""
    c = _judge(_samples(base, metric), _samples(variant, metric), paired)
    sb, sv = base.summary()[metric], variant.summary()[metric]
    return {"metric": metric, "baseline_ms": sb.median, "variant_ms": sv.median, **c}


def _curve_ms(run: RunResult, ceilings: Ceilings) -> dict[str, float]:
    """Per phase, the curve time model's seconds (measured GEMM, copy and attention curves)."""
    dev = device_model(ceilings, str(run.model_info.get("dtype", "float32")))
    return {phase: t.total_s for phase, t in predict_run(run, dev).items()}


def _model_ms(run: RunResult, ceilings: Ceilings | None) -> dict[str, float]:
    """What the speedup prediction divides: curve times when calibrated, else roofline."""
    if ceilings is not None and curves_of(ceilings.details):
        return _curve_ms(run, ceilings)
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


def _host(run: RunResult) -> dict[str, str]:
    """`busy_host`: the sentence of a run measured while others held its cores (else nothing)."""
    from infermeter.measure.host import HostLoad

    doc = run.device.get("host")
    verdict = HostLoad.from_dict(doc).verdict() if isinstance(doc, dict) else None
    return {"busy_host": verdict} if verdict else {}


def compare_runs(
    base: RunResult, variant: RunResult, ceilings: Ceilings | None = None
) -> Comparison:
    """The comparison document of two runs (medians; speedups with intervals and verdicts)."""
    # a load run's latencies hold queueing and batching with other requests, and an
    # endpoint's or imported run has no model shape: no forward to predict (roofline.py)
    load = any((r.config or {}).get("mode") == "load" for r in (base, variant))
    pb, pv = ({}, {}) if load else (_model_ms(base, ceilings), _model_ms(variant, ceilings))
    group = interleaved_group(base, variant)
    paired = group is not None
    phases = []
    for phase, metric in PHASES:
        row = {"phase": phase, **_judged(base, variant, metric, paired)}
        actual = row["speedup"]
        predicted = pb[phase] / pv[phase] if pv.get(phase) else None
        row["predicted_speedup"] = predicted
        row["prediction_error_pct"] = (
            100 * (predicted - actual) / actual if actual and predicted else None
        )
        phases.append(row)
    whole = _judged(base, variant, "total_ms", paired)
    sb = base.summary()
    # the baseline's measured phase times, each scaled by its predicted phase speedup
    pred_ttft = sb["ttft_ms"].median / (phases[0]["predicted_speedup"] or 1)
    pred_decode = sb["decode_ms"].median / (phases[1]["predicted_speedup"] or 1)
    total_speedup = whole["speedup"]
    predicted_total = (
        sb["total_ms"].median / (pred_ttft + pred_decode)
        if sb["total_ms"].median and not load
        else None
    )
    tps_b, tps_v = sb["tokens_per_s"].median, variant.summary()["tokens_per_s"].median
    layers = _layers(base, variant, paired)
    return Comparison(
        {
            "baseline": {"run_id": base.run_id, "knobs": base.knobs, **_host(base)},
            "variant": {"run_id": variant.run_id, "knobs": variant.knobs, **_host(variant)},
            "changed": {
                k: (base.knobs.get(k), variant.knobs.get(k))
                for k in sorted(set(base.knobs) | set(variant.knobs))
                if base.knobs.get(k) != variant.knobs.get(k)
            },
            "statistic": "median of per-round ratios of interleaved samples, 95% bootstrap interval"
            if paired
            else "ratio of medians over measured samples, 95% bootstrap interval",
            "paired": paired,
            "interleaved_group": group,
            "drift_caveat": not paired,
            "phases": phases,
            "total": whole,
            "total_speedup": total_speedup,
            "total_verdict": whole["verdict"],
            "predicted_total_speedup": predicted_total,
            "total_prediction_error_pct": 100 * (predicted_total - total_speedup) / total_speedup
            if predicted_total and total_speedup
            else None,
            "throughput_ratio": tps_v / tps_b if tps_b else None,
            "layers_statistic": (
                "median of per-round ratios of per-sample totals"
                if paired
                else "ratio of medians of per-sample totals"
            )
            + ", 95% bootstrap interval",
            "layers": layers,
            "where": _where(layers),
            "server": server_normalised(base, variant),
            "prediction": "none: load runs (queueing and batching, no isolated forward)"
            if load
            else "time model with measured curves"
            if ceilings is not None and curves_of(ceilings.details)
            else "roofline with ceilings"
            if ceilings
            else "first-order cost ratio",
        }
    )


def _layers(base: RunResult, variant: RunResult, paired: bool = False) -> list[dict[str, Any]]:
    """Per module and phase present in both runs: per-sample totals compared, with a verdict.

    Each generate call's total time in the module (`sample_ms`, recorded since per-sample
    tables exist) is one sample; runs stored before that have only the mean per call, and
    their rows say "no interval".
    """

    def index(run: RunResult) -> dict[tuple[str, str], dict[str, Any]]:
        n = max(1, len(run.measured))
        return {
            (r["name"], r["phase"]): {**r, "per_sample_ms": r["total_ms"] / n}
            for r in run.layers.get("layers", [])
        }

    ib, iv = index(base), index(variant)
    out = []
    for key in ib.keys() & iv.keys():
        b, v = ib[key], iv[key]
        row = {
            "name": key[0],
            "phase": key[1],
            "kind": b["kind"],
            "baseline_mean_ms": b["mean_ms"],
            "variant_mean_ms": v["mean_ms"],
            "delta_ms": v["per_sample_ms"] - b["per_sample_ms"],
        }
        if b.get("sample_ms") and v.get("sample_ms"):
            c = _judge(dict(enumerate(b["sample_ms"])), dict(enumerate(v["sample_ms"])), paired)
            row.update(speedup=c["speedup"], ci95_low=c["ci95_low"], ci95_high=c["ci95_high"])
            row.update(verdict=c["verdict"], statistic=c["statistic"] + " of per-sample totals")
        else:
            speedup = b["mean_ms"] / v["mean_ms"] if v["mean_ms"] else None
            row.update(speedup=speedup, ci95_low=None, ci95_high=None)
            row.update(verdict="no interval", statistic="ratio of mean call times")
        out.append(row)
    return sorted(out, key=lambda r: (r["phase"], r["name"]))


def _where(layers: list[dict[str, Any]], top: int = 5) -> list[dict[str, Any]]:
    """The `top` modules whose time changed most, as a tree with each row's `depth`.

    Each module is followed by the listed modules inside it (by name: model.layers.3 holds
    model.layers.3.self_attn), so a block and its attention read as parent and child, not as
    two separate causes. A picked module also brings the part inside it that changed most,
    when that part carries at least half its change: five blocks alone would say where, not
    what (with near-equal deltas, blocks could fill the list and hide the MoE that changed).
    """

    def inside(child: dict[str, Any], parent: dict[str, Any]) -> bool:
        return (
            child is not parent
            and child["phase"] == parent["phase"]
            and str(child["name"]).startswith(str(parent["name"]) + ".")
        )

    picked = sorted(layers, key=lambda r: -abs(r["delta_ms"]))[:top]
    for row in list(picked):
        parts = [r for r in layers if inside(r, row)]
        best = max(parts, key=lambda r: abs(r["delta_ms"]), default=None)
        if (
            best is not None
            and best not in picked
            and abs(best["delta_ms"]) >= abs(row["delta_ms"]) / 2
        ):
            picked.append(best)

    out: list[dict[str, Any]] = []

    def add(row: dict[str, Any], depth: int) -> None:
        out.append({**row, "depth": depth})
        for child in picked:
            direct = inside(child, row) and not any(
                inside(child, mid) and inside(mid, row) for mid in picked
            )
            if direct:
                add(child, depth + 1)

    for row in picked:
        if not any(inside(row, other) for other in picked):
            add(row, 0)
    return out


#: what `compare --fail-if-slower` judges, by the names its table shows
GATE_PHASES = ("prefill", "decode", "total")


def parse_gate_phases(text: str) -> tuple[str, ...]:
    """`--phases`: "all" (each phase and the total) or a comma list of GATE_PHASES.

    Raises:
        UserError: an empty list or a name that is not a phase.
    """
    names = [p.strip().lower() for p in text.split(",") if p.strip()]
    if names == ["all"]:
        return GATE_PHASES
    unknown = [p for p in names if p not in GATE_PHASES]
    if unknown or not names:
        raise UserError(
            f"--phases {text!r} names no phase" if not names else f"unknown phase {unknown[0]!r}",
            f"use all, or a comma list of {', '.join(GATE_PHASES)}",
        )
    return tuple(dict.fromkeys(names))


def slower_rows(
    doc: dict[str, Any], tolerance: float, phases: tuple[str, ...] = GATE_PHASES
) -> list[dict[str, Any]]:
    """The judged rows of a comparison (`compare_runs`) where the variant is slower.

    A row fails when its verdict is "slower" (the interval excludes 1 and the test is
    significant) and its speedup is below 1 / (1 + tolerance). Each phase is judged on its own:
    a significant prefill slowdown fails the gate even when the total is within its noise.
    """
    rows = [*doc["phases"], {"phase": "total", **doc["total"]}]
    return [
        r
        for r in rows
        if r["phase"] in phases
        and r.get("verdict") == "slower"
        and r.get("speedup")
        and r["speedup"] < 1 / (1 + tolerance)
    ]


def _server_rows(run: RunResult) -> dict[int, ServerTimingDoc]:
    rows = run.checks.get("load", {}).get("server_timing") or []
    return {int(r["sample_id"]): r for r in rows if r.get("decode_ms_per_token")}


def server_normalised(base: RunResult, variant: RunResult) -> dict[str, Any] | None:
    """Load runs with the server's own timings: TPOT over the server's time, and the server's.

    None unless both runs stored the server's own decode time per token for some requests.
    `tpot_over_server` is judged like a phase (ratio of medians, interval, verdict; above 1:
    the variant's client-seen TPOT is closer to the server's own); `server_decode` is the
    server's own decode time per token (above 1: the server itself ran faster in the variant).
    """
    sb, sv = _server_rows(base), _server_rows(variant)
    if not sb or not sv:
        return None

    def own(run: RunResult, rows: dict[int, ServerTimingDoc]) -> tuple[list[float], list[float]]:
        ratio, server = [], []
        for s in run.measured:
            r = rows.get(s.index)
            per_token = r["decode_ms_per_token"] if r is not None else None
            if per_token is None or len(s.step_ms) < 1:
                continue
            server.append(float(per_token))
            ratio.append(s.tpot_ms / float(per_token))
        return ratio, server

    (rb, db), (rv, dv) = own(base, sb), own(variant, sv)
    normalised = compare_samples(rb, rv)
    server = compare_samples(db, dv)
    raw = _judged(base, variant, "tpot_ms")
    moved = server["verdict"] in ("faster", "slower")
    line = (
        f"server-normalised TPOT (over the server's own decode time per token): "
        f"x{normalised['speedup']:.3f} ({normalised['verdict']}); the server's own time "
        f"x{server['speedup']:.3f} ({server['verdict']})"
        if normalised["speedup"] and server["speedup"]
        else "server-normalised TPOT: too few requests with the server's own timings"
    )
    if moved and raw["speedup"] and server["speedup"]:
        went = "sped up" if server["verdict"] == "faster" else "slowed"
        line += (
            f": the server itself {went} between the runs, so the raw TPOT ratio "
            f"(x{raw['speedup']:.3f}) carries the server's move; judge by the normalised one"
        )
    return {"tpot_over_server": normalised, "server_decode": server, "line": line}
