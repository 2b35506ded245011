"""`infermeter calibrate`: this device's measured ceilings beside its spec sheet."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from infermeter.cli.guard import guard
from infermeter.util import fmt
from infermeter.util.jsonio import clean_json, print_json


@guard
def calibrate_command(
    device: str = typer.Option("auto", help="auto, cpu, cuda, cuda:N or mps."),
    quick: bool = typer.Option(False, "--quick", help="Smaller matrices and copies."),
    db: str = typer.Option(None, help="Database URL or SQLite file."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
) -> None:
    """Measure this device's matmul FLOP/s per dtype and copy bandwidth; analysis uses them."""
    from infermeter.measure.calibrate import calibrate
    from infermeter.measure.ceilings import spec_ceilings
    from infermeter.measure.device import resolve_device
    from infermeter.store import Store

    dev = resolve_device(device)
    measured = calibrate(dev, quick=quick)
    store = Store(db)
    store.save_ceilings(measured)
    spec = spec_ceilings(measured.device)
    if json_out:
        print_json(
            clean_json({"measured": measured.to_dict(), "spec": spec.to_dict() if spec else None})
        )
        return
    table = Table(title=f"ceilings of {measured.device}", title_justify="left")
    for col in ("", "measured", "spec sheet"):
        table.add_column(col, justify="right" if col else "left")
    for dt, v in measured.flop_per_s.items():
        table.add_row(
            f"matmul {dt}",
            fmt.si(v, "FLOP/s"),
            fmt.si(spec.peak(dt), "FLOP/s") if spec else "unknown",
        )
    table.add_row(
        "copy bandwidth",
        fmt.si(measured.bandwidth_bytes_per_s, "B/s"),
        fmt.si(spec.bandwidth_bytes_per_s, "B/s") if spec else "unknown",
    )
    Console(soft_wrap=True).print(table)
    Console(soft_wrap=True).print(
        f"stored in {store.where}; `infermeter analyze` uses them", style="dim", markup=False
    )
