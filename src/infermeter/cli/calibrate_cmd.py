"""`infermeter calibrate`: this device's measured ceilings beside its spec sheet."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from infermeter.cli.guard import guard
from infermeter.cli.options import DB, JSON_OUT, config_option
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
    if c.page_fault_seconds:
        from infermeter.measure.faults import PAGE_BYTES, mmap_threshold_bytes

        limit = mmap_threshold_bytes()
        where = (
            f"a KV-cache tensor above {limit / 2**20:.0f} MiB is mapped afresh each decode "
            f"step and faults all its pages: {c.page_fault_seconds / PAGE_BYTES * 2**20 * 1e3:.2f}"
            " ms per MiB"
            if limit
            else "this C library's reuse of freed memory is not modelled"
        )
        Console(soft_wrap=True).print(
            f"one page fault {c.page_fault_seconds * 1e6:.2f} us ({where})", markup=False
        )


@guard
def calibrate_command(
    device: str = config_option("device"),
    quick: bool = typer.Option(False, "--quick", help="Smaller matrices and copies."),
    model: str = typer.Option(
        None, "--model", "-m", help="Also time GEMMs at this model's widths (predict uses them)."
    ),
    curves: bool = typer.Option(
        True, help="Measure efficiency curves (GEMM by shape, copies, attention, overhead)."
    ),
    db: str = DB,
    json_out: bool = JSON_OUT,
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
    measured = with_stability(
        measured,
        store.measured_ceilings(measured.device),
        store.measured_ceilings(measured.device, stable_only=False),
    )
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
    verdict = measured.details["stability"]
    for note in verdict["notes"]:
        Console(soft_wrap=True).print(note, style="dim", markup=False)
    if verdict["stable"]:
        Console(soft_wrap=True).print(
            f"stable: {verdict['checked']}; stored in {store.where}; `infermeter analyze` and "
            "`predict` use it",
            style="dim",
            markup=False,
        )
        return
    console = Console(soft_wrap=True, stderr=True)
    console.print("UNSTABLE calibration:", style="bold yellow", markup=False)
    for reason in verdict["reasons"]:
        console.print(f"  {reason}", style="yellow", markup=False)
    console.print(
        f"stored in {store.where}, but `analyze` and `predict` keep using the last stable "
        "calibration while there is one; run `infermeter calibrate` again when the machine is "
        "quiet",
        markup=False,
    )


def with_stability(measured: Any, previous: Any, latest: Any = None) -> Any:
    """The ceilings with `details["stability"]`, the verdict of measure/stability.py.

    Judged on their rounds, the last stable calibration of the device (`previous`, or None),
    the newest one (`latest`, which can confirm a fall) and the curve fits clamped to zero.
    """
    from dataclasses import replace

    from infermeter.measure.stability import SPREAD_LIMIT, figures_of, judge

    before = None
    if previous is not None and (previous.details.get("stability") or {}).get("stable", True):
        before = figures_of(previous.details, previous.flop_per_s, previous.bandwidth_bytes_per_s)
    clamped = [
        n
        for c in (measured.details.get("curves") or {}).values()
        for n in (c.get("reference") or {}).get("clamped", [])
    ]
    when = previous.details.get("calibrated_at") if previous is not None else None
    newest = None
    if (
        latest is not None
        and previous is not None
        and latest.details.get("calibrated_at") != previous.details.get("calibrated_at")
    ):
        newest = figures_of(latest.details, latest.flop_per_s, latest.bandwidth_bytes_per_s)
    verdict = judge(measured.details.get("rounds") or {}, before, when, clamped, newest)
    verdict["checked"] = f"every figure's rounds within {SPREAD_LIMIT:.0%} of their median" + (
        f", and none fell beyond its interval from the calibration of {when[:16].replace('T', ' ')}"
        if before and when
        else ", no earlier stable calibration to compare with"
    )
    return replace(measured, details={**measured.details, "stability": verdict})
