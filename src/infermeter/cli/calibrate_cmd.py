"""`infermeter calibrate`: this device's measured ceilings beside its spec sheet."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from infermeter.cli.guard import guard
from infermeter.measure.curves import curves_of
from infermeter.util import fmt
from infermeter.util.jsonio import clean_json, print_json


def with_curves(measured: Any, dev: Any, model: str | None, quick: bool) -> Any:
    """The ceilings with efficiency curves of the device's default dtype in their details.

    At the widths of `model` when given (its weights' size as the rotation pool, as it reads
    them), else at generic widths; the process's resident memory is kept as the framework's
    runtime memory that `predict` adds to a model's.
    """
    from dataclasses import replace

    import psutil

    from infermeter.bench.curves import measure_curves, model_widths

    dtype = "float32" if dev.type == "cpu" else "bfloat16"
    widths: list[tuple[int, ...]] | None = None
    if model:
        from infermeter.models.loader import load_model

        lm = load_model(model, device=str(dev), dtype=dtype)
        pool = sum(p.numel() * p.element_size() for p in lm.model.parameters())
        widths = [(k, n, pool) for k, n in model_widths(lm.model)]
        del lm
    runtime = psutil.Process().memory_info().rss
    console = Console(stderr=True)
    c = measure_curves(
        dev, dtype, widths=widths, quick=quick, progress=lambda m: console.print(m, style="dim")
    )
    details = {
        **measured.details,
        "curves": {dtype: c.to_dict()},
        "runtime_bytes": runtime,
        "curves_model": model,
    }
    return replace(measured, details=details)


def _print_curves(c: Any) -> None:
    s = c.summary()
    rates = ", ".join(
        f"{rows} rows {fmt.si(v, 'FLOP/s')}" for rows, v in s.get("gemm_flop_per_s", {}).items()
    )
    Console(soft_wrap=True).print(
        f"{s['dtype']} GEMM {s.get('gemm_width')}: {rates}; one framework operation "
        f"{s['op_us']:.1f} us; generate adds {c.generate_first_seconds * 1e3:.2f} ms before "
        f"the first token and {c.generate_step_seconds * 1e3:.2f} ms per step",
        markup=False,
    )


@guard
def calibrate_command(
    device: str = typer.Option("auto", help="auto, cpu, cuda, cuda:N or mps."),
    quick: bool = typer.Option(False, "--quick", help="Smaller matrices and copies."),
    model: str = typer.Option(
        None, "--model", "-m", help="Also time GEMMs at this model's widths (predict uses them)."
    ),
    curves: bool = typer.Option(
        True, help="Measure efficiency curves (GEMM by shape, copies, attention, overhead)."
    ),
    db: str = typer.Option(None, help="Database URL or SQLite file."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
) -> None:
    """Measure this device's matmul FLOP/s per dtype and copy bandwidth; analysis uses them."""
    from infermeter.measure.calibrate import calibrate
    from infermeter.measure.ceilings import spec_ceilings
    from infermeter.measure.device import resolve_device
    from infermeter.store import Store

    dev = resolve_device(device)
    store = Store(db)
    measured = calibrate(dev, quick=quick)
    if curves:
        measured = with_curves(measured, dev, model, quick)
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
    for c in curves_of(measured.details).values():
        _print_curves(c)
    Console(soft_wrap=True).print(
        f"stored in {store.where}; `infermeter analyze` uses them", style="dim", markup=False
    )
