"""`infermeter knobs`: every knob a sweep can turn."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from infermeter.cli.guard import guard


@guard
def knobs_command() -> None:
    """Every knob a sweep can turn."""
    from infermeter.knobs import KNOBS

    table = Table(title="knobs", title_justify="left")
    for col in ("name", "applied", "values"):
        table.add_column(col)
    for k in KNOBS.values():
        table.add_row(k.name, k.scope, k.help)
    Console(soft_wrap=True).print(table)
