"""`infermeter load --find-max-rate`: run the capacity search, store its runs, print its steps.

The search itself is `serving/capacity.py`; this only wires it to `load`'s runs, the store, the
files and the console.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from infermeter.util import fmt


def run_capacity(
    spec: Any,
    cap: Any,
    store: Any,
    target: Any,
    folder: Path | None,
    json_out: bool,
    store_run: Any,
) -> dict[str, Any]:
    """The search with `load` runs as its steps, each stored as it ends; the result."""
    from infermeter.models.loader import load_model
    from infermeter.serving.capacity import answer_line, find_capacity, server_line
    from infermeter.serving.load import run_load
    from infermeter.util.jsonio import print_json, write_json

    lm = None
    if target is None:
        lm = load_model(spec.model, dtype=spec.dtype, device=spec.device, seed=spec.seed)
    console = Console(soft_wrap=True, stderr=json_out)
    tries = 0

    def measure(rate: float, n: int) -> dict[str, Any]:
        nonlocal tries
        tries += 1  # a step run again takes fresh requests (another seed)
        doc = run_load(
            replace(spec, rate=rate, requests=n, seed=spec.seed + tries),
            loaded=lm,
            sink=store,
            endpoint=target,
            keep=True,
        )
        interrupted = doc["meta"].pop("interrupted", None)
        store_run(doc, interrupted)
        if interrupted is not None:
            raise interrupted
        return doc

    def said(step: Any) -> None:
        sat = ", queue growing at its end" if step.saturated else ""
        console.print(
            f"  {step.rate:.3g} req/s: {step.met}/{step.requests} met every SLO "
            f"({step.low:.1%}-{step.high:.1%}) -> {step.verdict}"
            f"{'' if step.decided else ' (undecided)'}{sat}",
            markup=False,
        )

    result = find_capacity(cap, measure, said)
    model = result["runs"][0]["meta"]["model"]
    result["meta"] = {
        "model": model,
        "spec": result["runs"][0]["meta"]["spec"],
        "slos": dict(spec.slos),
    }
    result["run_ids"] = [d["meta"].get("run_id") for d in result.pop("runs")]
    result["server_line"] = server_line(result)
    if folder is not None:
        from infermeter.report.load_figures import capacity_figure

        write_json(folder / "capacity.json", result)
        capacity_figure(result, folder, f"{model}: capacity under {_slos(spec.slos)}")
    if json_out:
        print_json(result)
        return result
    console.print(_steps_table(result, f"capacity search: {model}, {_slos(spec.slos)}"))
    console.print(answer_line(result), markup=False)
    if result["server_line"]:
        console.print(result["server_line"], markup=False)
    return result


def _steps_table(result: dict[str, Any], title: str) -> Table:
    """Each step: rate, requests, attainment with its interval, verdict, server ms/token."""
    t = Table(title=title, title_justify="left")
    own = [r["server_decode_ms_p50"] for r in result["steps"]]
    timed = [x for x in own if math.isfinite(x)]
    columns = ["rate/s", "requests", "met", "interval", "goodput/s", "verdict"]
    if timed:
        columns.append("server ms/tok")
    for c in columns:
        t.add_column(c, justify="right")
    for r in sorted(result["steps"], key=lambda r: r["rate"]):
        own_ms = r["server_decode_ms_p50"]
        extra = (
            [f"{own_ms:.3g} (x{own_ms / min(timed):.2f})" if math.isfinite(own_ms) else "-"]
            if timed
            else []
        )
        t.add_row(
            f"{r['rate']:.3g}",
            str(r["requests"]),
            f"{r['attainment']:.1%}",
            f"{r['ci_low']:.1%}-{r['ci_high']:.1%}",
            fmt.fixed(r["goodput_rps"]),
            r["verdict"] + ("" if r["decided"] else "?") + (" sat" if r["saturated"] else ""),
            *extra,
        )
    return t


def _slos(slos: Any) -> str:
    return ", ".join(f"{m} <= {b:g}" for m, b in slos)
