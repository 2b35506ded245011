"""`infermeter history MODEL`: a metric over time per configuration, with its change points."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from infermeter.cli.guard import guard
from infermeter.cli.options import DB, JSON_OUT
from infermeter.errors import UserError
from infermeter.util import fmt


@guard
def history_command(
    model: str = typer.Argument(..., help="The model spec its runs were made with."),
    metric: str = typer.Option(
        "tpot_ms", help="ttft_ms, tpot_ms, tokens_per_s or total_ms (per run: the median)."
    ),
    since: str = typer.Option(None, help="Only runs created since: 30d, 12h or a date."),
    limit: int = typer.Option(500, help="At most this many newest runs."),
    db: str = DB,
    out: Path = typer.Option(None, help="Also write history.png, history.csv and history.json."),
    json_out: bool = JSON_OUT,
) -> None:
    """Each configuration's runs over time: medians with intervals, and confirmed changes."""
    from infermeter.analysis.history import METRICS, history
    from infermeter.cli.output import writable_dir
    from infermeter.cli.runs_cmd import parse_since
    from infermeter.store import Store
    from infermeter.util.jsonio import print_json, write_json

    if metric not in METRICS:
        raise UserError(f"unknown metric {metric!r}", f"use one of {', '.join(METRICS)}")
    if limit < 1:
        raise UserError(f"--limit {limit} is below 1", "use 1 or more")
    folder = writable_dir(out) if out is not None else None
    rows = Store(db, create=False).history(model, parse_since(since), limit)
    if not rows:
        raise UserError(f"no finished runs of {model!r}", "see `infermeter runs list`")
    doc = {"model": model, **history(rows, metric)}
    if folder is not None:
        from infermeter.report.history_figure import history_figure

        write_json(folder / "history.json", doc)
        history_figure(doc, folder)
    if json_out:
        print_json(doc)
        return
    console = Console(soft_wrap=True)
    for g in doc["configurations"]:
        console.print(_table(g, metric))
        for c in g["change_points"]:
            console.print(_change_line(c, metric), markup=False)
    console.print(f"{metric}: {doc['statistic']}", style="dim", markup=False)


def _table(group: dict[str, Any], metric: str) -> Table:
    """One configuration's runs, oldest first; `*` marks a dirty work tree (fits 80 columns)."""
    t = Table(
        title=group["label"],
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    for col in ("created", "run", "commit", metric, "95% CI", "n", ""):
        left = col in ("created", "run", "commit", "")
        t.add_column(col, justify="left" if left else "right", no_wrap=True)
    changes = {c["index"] for c in group["change_points"]}
    for i, p in enumerate(group["points"]):
        commit = (p["commit"] or "-")[:8] + ("*" if p["dirty"] else "")
        ci = (
            f"{fmt.compact(p['ci95_low'])}-{fmt.compact(p['ci95_high'])}"
            if not fmt.is_missing(p["ci95_low"])
            else fmt.MISSING
        )
        t.add_row(
            p["created"][5:16].replace("T", " "),
            p["run_id"],
            commit,
            fmt.compact(p["median"]),
            ci,
            str(p["samples"]),
            "<- change" if i in changes else "",
        )
    return t


def _change_line(c: dict[str, Any], metric: str) -> str:
    at = c["commit"][:8] if c.get("commit") else c["run_id"]
    return (
        f"change at {c['created'][:16].replace('T', ' ')} ({at}): {metric} "
        f"{fmt.compact(c['before_median'])} -> {fmt.compact(c['after_median'])} "
        f"({c['change_pct']:+.1f}%, rank test p = {c['p_value']:.2g}; "
        f"{c['runs_before']} runs before, {c['runs_after']} after)"
    )
