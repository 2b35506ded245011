"""`infermeter load --predict`: the load simulated, not run; its table, lines and files.

The simulation, and storing it, are experiments/load_whatif.py (its options were checked by
`serving/plan.plan_load`); this writes its files and prints it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from infermeter.util import fmt

if TYPE_CHECKING:
    from infermeter.serving.plan import LoadPlan
    from infermeter.store import Store


def run_prediction(plan: LoadPlan, store: Store, folder: Path | None, json_out: bool) -> None:
    """Simulated and stored below (`experiments/load_whatif.py`); written and shown here."""
    from infermeter.experiments.load_whatif import predict_and_store
    from infermeter.util.jsonio import print_json, write_json

    doc = predict_and_store(plan, store)
    files: list[Path] = []
    if folder is not None:
        from infermeter.report.load_figures import sweep_figures

        files.append(write_json(folder / "load_prediction.json", doc))
        if len(doc["points"]) > 1:
            model = f"{doc['model']} (predicted)"
            files += sweep_figures(doc["points"], doc["knee_rate"], model, "continuous", folder)
    if json_out:
        print_json(doc)
    else:
        _print(doc, files, store.where)


def _ms(v: float | None) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}"


def _with(point: dict[str, Any], key: str) -> str:
    """A predicted latency and its 90% interval, `12.3 (10.1-14.9)` (the header says 90%)."""
    from infermeter.analysis.intervals import interval_text

    value = point.get(key)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return interval_text(value, point.get(f"{key}_interval"), level=False)


def _print(doc: dict[str, Any], files: list[Path], where: str) -> None:
    console = Console(soft_wrap=True, width=max(Console().width, 150))
    w = doc["workload"]
    t = Table(
        title=f"predicted load: {doc['model']} on {doc['hardware']['name']}, "
        f"{doc['dtype']}, served by {doc['stack']}, {w['requests']} requests, transformers' "
        "continuous batching",
        title_justify="left",
    )
    cols = (
        "rate/s",
        "throughput/s",
        "TTFT p50 (90%)",
        "TTFT p99",
        "TPOT p50 (90%)",
        "TPOT p99",
        "e2e p50 (90%)",
        "e2e p99",
        "goodput/s",
        "batch",
    )
    for c in cols:
        t.add_column(c, justify="right")
    for p in doc["points"]:
        t.add_row(
            p["offered"] if math.isfinite(p["rate"]) else "closed loop",
            fmt.fixed(p["throughput_rps"]),
            _with(p, "ttft_ms_p50"),
            _ms(p["ttft_ms_p99"]),
            _with(p, "tpot_ms_p50"),
            _ms(p["tpot_ms_p99"]),
            _with(p, "e2e_ms_p50"),
            _ms(p["e2e_ms_p99"]),
            fmt.fixed(p["goodput_rps"]),
            fmt.fixed(p["batch_requests_mean"]),
        )
    console.print(t)
    sm, sch = doc["step_model"], doc["scheduler"]
    fit = (
        (
            f"; fit error p50 {sm['fit_error_pct_p50']:.1f}%, p90 {sm['fit_error_pct_p90']:.1f}% "
            f"on {sm['steps']} steps"
        )
        if sm.get("fit_error_pct_p50") is not None
        else ""
    )
    blocks = "every request at once" if sch["blocks"] is None else f"{sch['blocks']} blocks"
    say = [
        "latencies in ms, percentiles over the simulated requests",
        f"step costs: time model parts x factors learnt from {sm['learnt_from']}{fit}",
        f"scheduler: {sch['kind']}, at most {sch['max_batch_tokens']} tokens and "
        f"{sch['max_requests_per_step']} requests per step, KV cache {blocks} x "
        f"{sch['page_tokens']} tokens",
    ]
    release = doc["hardware"]["sources"].get("release")
    if release:  # an engine's release before its CUDA graphs (`--stack vllm@0.2.4`)
        say.append(f"release: {release}")
    if doc.get("knee_rate") is not None:
        say.append(
            f"knee: {doc['knee_rate']:g} req/s (p99 end-to-end within 2x of the lowest rate's)"
        )
    if doc.get("capacity"):
        say.append("predicted " + doc["capacity"]["answer"])
    band = (doc["points"][0].get("interval") if doc["points"] else None) or {}
    if band:
        say.append(
            f"intervals (90%): from {band['rows']} held-out errors of {band['sources']} "
            f"published sources ({band['group']}), split conformal"
        )
    if doc.get("out_of_scope"):
        say.append("each interval is widened (x1.5 a reason): " + "; ".join(doc["out_of_scope"]))
    say += doc["notes"]
    say += [f"approximate: {a}" for a in doc["approximate"]]
    say.append(f"stored as prediction {doc['id']} in {where}")
    say += [f"wrote {f}" for f in files]
    for line in say:
        console.print(line, style="dim", markup=False)
