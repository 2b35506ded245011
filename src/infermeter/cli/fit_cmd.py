"""`infermeter fit SWEEP`: the latency model fitted on half a sweep, held-out errors."""

from __future__ import annotations

from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from infermeter.cli.guard import guard
from infermeter.cli.options import DB, JSON_OUT
from infermeter.util.jsonio import clean_json, print_json


@guard
def fit_command(
    sweep_id: str = typer.Argument(..., help="A stored sweep id (or prefix)."),
    db: str = DB,
    json_out: bool = JSON_OUT,
) -> None:
    """Fit the latency model on every other point of a sweep and show its held-out errors."""
    from infermeter.analysis.perfmodel import alternate, check_on_sweep
    from infermeter.errors import UserError
    from infermeter.store import Store

    store = Store(db, create=False)
    row = store.sweep(sweep_id)
    runs = [store.get(i) for i in store.sweep_run_ids(row["id"])]
    if len(runs) < 4:
        raise UserError(
            f"sweep {row['id']} has {len(runs)} finished points; fitting needs 4 or more",
            "sweep more values (3 coefficients are fitted, the rest are held out)",
        )
    checks = check_on_sweep(runs, alternate(len(runs)))
    curves, why = _curve_checks(store, runs)
    doc = clean_json(
        {
            "sweep_id": row["id"],
            **{p: c.to_dict() for p, c in checks.items()},
            "curves": {p: c.to_dict() for p, c in curves.items()} if curves else None,
            "curves_note": why,
        }
    )
    if json_out:
        print_json(doc)
        return
    console = Console(soft_wrap=True)
    for chk in [*checks.values(), *curves.values()]:
        _print_check(console, chk, list(row["knobs"]))
    if why:
        console.print(why, style="dim", markup=False)


def _curve_checks(store: Any, runs: list[Any]) -> tuple[dict[str, Any], str | None]:
    """The curve time model checked like the linear one, when the device has curves."""
    from infermeter.analysis.perfmodel import alternate
    from infermeter.analysis.predict import curve_check_on_sweep
    from infermeter.analysis.timemodel import device_model
    from infermeter.measure.curves import curves_of

    device = str((runs[0].device or {}).get("name"))
    measured = store.measured_ceilings(device)
    if measured is None or not curves_of(measured.details):
        return {}, (
            f"no measured curves for {device}: run `infermeter calibrate` on it to also check "
            "the curve time model (the one `predict` uses)"
        )
    dev = device_model(measured, str(runs[0].model_info.get("dtype", "float32")))
    return curve_check_on_sweep(runs, alternate(len(runs)), dev), None


def _print_check(console: Console, chk: Any, knobs: list[str]) -> None:
    s = chk.error_summary()
    t = Table(title=chk.model.title(), title_justify="left", box=box.SIMPLE_HEAD)
    for col in (*knobs, "fitted", "median ms", "predicted ms", "error"):
        t.add_column(col, justify="right")
    for p in chk.points:
        t.add_row(
            *(str(p["config"].get(k)) for k in knobs),
            "yes" if p["fitted"] else "",
            f"{p['measured_ms']:.2f}",
            f"{p['predicted_ms']:.2f}",
            f"{p['error_pct']:+.1f}%",
        )
    console.print(t)
    console.print(
        f"held-out median |error| {s['median_abs_error_pct']:.1f}%, max "
        f"{s['max_abs_error_pct']:.1f}% ({s['held_out']} points)",
        markup=False,
    )
    misfit = chk.misfit_line()
    if misfit:
        console.print(f"⚠ {misfit}", style="yellow", markup=False)
