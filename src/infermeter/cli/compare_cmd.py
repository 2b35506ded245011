"""`infermeter compare BASE VARIANT`: speedup per phase and layer, predicted vs actual."""

from __future__ import annotations

import typer
from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from infermeter.cli.guard import guard
from infermeter.store import Store
from infermeter.util.jsonio import clean_json, print_json


@guard
def compare_command(
    baseline: str = typer.Argument(..., help="Baseline run id (or prefix)."),
    variant: str = typer.Argument(..., help="Variant run id (or prefix)."),
    db: str = typer.Option(None, help="Database URL or SQLite file."),
    fail_if_slower: bool = typer.Option(
        False, "--fail-if-slower", help="Exit 1 when the variant is slower (for CI)."
    ),
    tolerance: float = typer.Option(0.05, help="Slowdown tolerated by --fail-if-slower."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
) -> None:
    """Speedup of VARIANT over BASELINE per phase and layer, predicted vs actual."""
    from infermeter.analysis.compare import compare_runs
    from infermeter.cli.guard import fail

    store = Store(db)
    base, var = store.get(baseline), store.get(variant)
    measured = store.measured_ceilings(str((base.device or {}).get("name")))
    from infermeter.measure.ceilings import spec_ceilings

    ceil = measured or spec_ceilings(str((base.device or {}).get("name")))
    doc = clean_json(compare_runs(base, var, ceil))
    if json_out:
        print_json(doc)
    else:
        Console(soft_wrap=True).print(compare_card(doc))
    speed = doc["total_speedup"]
    if fail_if_slower and speed is not None and speed < 1 / (1 + tolerance):
        raise fail(f"variant is slower: total speedup {speed:.3f}x (tolerance {tolerance:.0%})", 1)


def compare_card(doc: dict) -> Group:
    """The comparison for people."""
    parts: list = [
        Text(
            f"baseline {doc['baseline']['run_id']} vs variant {doc['variant']['run_id']}",
            style="bold",
        )
    ]
    if doc["changed"]:
        parts.append(
            Text("changed: " + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in doc["changed"].items()))
        )
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("phase", "baseline ms", "variant ms", "speedup", "predicted", "error"):
        t.add_column(col, justify="left" if col == "phase" else "right")
    for p in doc["phases"]:
        t.add_row(
            p["phase"],
            f"{p['baseline_ms']:.2f}",
            f"{p['variant_ms']:.2f}",
            f"{p['speedup']:.3f}x" if p["speedup"] else "-",
            f"{p['predicted_speedup']:.3f}x" if p["predicted_speedup"] else "-",
            f"{p['prediction_error_pct']:+.1f}%" if p["prediction_error_pct"] is not None else "-",
        )
    parts.append(t)
    if doc["total_speedup"]:
        parts.append(Text(f"total: {doc['total_speedup']:.3f}x · prediction: {doc['prediction']}"))
    if doc["where"]:
        parts.append(
            Text(
                "where the difference comes from (ms per sample, variant - baseline):", style="bold"
            )
        )
        for r in doc["where"]:
            parts.append(Text(f"  {r['phase']:8} {r['name']:40} {r['delta_ms']:+.2f} ms"))
    return Group(*parts)
