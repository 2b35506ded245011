"""`infermeter load --find-max-rate`: run the capacity search, store its runs, print its steps.

The search and its runs are `serving/plan.search_capacity`; this says each step as it ends,
writes the files and prints the table.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from infermeter.util import fmt

if TYPE_CHECKING:
    from infermeter.serving.capacity import CapacityDoc, Step
    from infermeter.serving.plan import LoadPlan
    from infermeter.store import Store


def run_capacity(plan: LoadPlan, store: Store, folder: Path | None, json_out: bool) -> None:
    """The search (below, each step's run stored as it ends), its files and its table."""
    from infermeter.serving.capacity import answer_line
    from infermeter.serving.plan import search_capacity
    from infermeter.util.jsonio import print_json, write_json

    spec = plan.spec
    console = Console(soft_wrap=True, stderr=json_out)

    def said(step: Step) -> None:
        sat = ", queue growing at its end" if step.saturated else ""
        console.print(
            f"  {step.rate:.3g} req/s: {step.met}/{step.requests} met every SLO "
            f"({step.low:.1%}-{step.high:.1%}) -> {step.verdict}"
            f"{'' if step.decided else ' (undecided)'}{sat}",
            markup=False,
        )

    result = search_capacity(plan, store, said).doc
    model = result["meta"]["model"]
    if folder is not None:
        from infermeter.report.load_figures import capacity_figure

        write_json(folder / "capacity.json", result)
        capacity_figure(result, folder, f"{model}: capacity under {_slos(spec.slos)}")
    if json_out:
        print_json(result)
        return
    console.print(_steps_table(result, f"capacity search: {model}, {_slos(spec.slos)}"))
    console.print(answer_line(result), markup=False)
    if result["server_line"]:
        console.print(result["server_line"], markup=False)


def _steps_table(result: CapacityDoc, title: str) -> Table:
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
