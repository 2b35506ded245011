"""`infermeter energy probe`: the energy sources this machine has, and why others are missing."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from infermeter.cli.guard import guard
from infermeter.cli.options import JSON_OUT
from infermeter.util.jsonio import print_json

energy_app = typer.Typer(help="Energy and power sources.", no_args_is_help=True)


@energy_app.command("probe")
@guard
def probe_command(
    json_out: bool = JSON_OUT,
) -> None:
    """Which energy sources this machine has (RAPL, NVML, powermetrics) and why not."""
    from infermeter.measure.energy.probe import probe_all

    results = probe_all()
    if json_out:
        print_json({"sources": [r.__dict__ for r in results]})
        return
    table = Table(title="energy sources on this machine", title_justify="left")
    for col in ("source", "available", "detail", "fix"):
        table.add_column(col)
    for r in results:
        table.add_row(r.source, "yes" if r.available else "no", r.detail, r.fix or "-")
    Console(soft_wrap=True).print(table)
    if not any(r.available for r in results):
        Console(stderr=True).print(
            "no energy source here: energy will be reported as unavailable, never as 0 J",
            markup=False,
        )
