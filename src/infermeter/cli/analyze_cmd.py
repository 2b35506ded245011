"""`infermeter calibrate` and `infermeter analyze RUN`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from infermeter.analysis.roofline import all_rows
from infermeter.cli.guard import guard
from infermeter.cli.output import writable_dir
from infermeter.store import Store
from infermeter.util import fmt
from infermeter.util.jsonio import clean_json, print_json, write_json


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


@guard
def analyze_command(
    run_id: str = typer.Argument(..., help="Run id or unique prefix."),
    db: str = typer.Option(None, help="Database URL or SQLite file."),
    out: Path = typer.Option(None, help="Also write analysis.json and the roofline PNG/CSV."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
) -> None:
    """Roofline, bandwidth and compute bounds, and bottleneck findings of a stored run."""
    from infermeter.analysis.analyze import analyze_run
    from infermeter.report.roofline_figure import roofline_figure

    store = Store(db)
    run = store.get(run_id)
    measured = store.measured_ceilings(str((run.device or {}).get("name")))
    doc = clean_json(analyze_run(run, measured))
    files = []
    if out is not None:
        folder = writable_dir(out)
        files = [
            write_json(folder / f"analysis-{run.run_id}.json", doc),
            *roofline_figure(doc, folder, f"roofline-{run.run_id}"),
        ]
    if json_out:
        print_json(doc)
        return
    Console(soft_wrap=True).print(analysis_card(doc))
    for f in files:
        Console(soft_wrap=True).print(f"wrote {f}", style="dim", markup=False)


def analysis_card(doc: dict) -> Group:
    """The roofline table, the bounds and the findings, for people."""
    roof = doc["roofline"]
    parts: list = [
        Text(
            f"run {doc['run_id']} · {doc['model']} · {doc['device']} · ceilings: "
            f"{doc['ceilings_source']}",
            style="bold",
        )
    ]
    t = Table(
        title="roofline: one forward",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    for col in ("phase", "kind", "GFLOP", "MB", "FLOP/B", "ms", "GFLOP/s", "% attain", "bound"):
        t.add_column(
            col, justify="left" if col in ("phase", "kind", "bound") else "right", no_wrap=True
        )

    for r in all_rows(roof):
        t.add_row(
            r["phase"],
            r["kind"],
            fmt.scaled(r["flop_count"], 1e9),
            fmt.scaled(r["bytes"], 1e6),
            f"{r['intensity']:.2f}",
            fmt.scaled(r["measured_ms"], 1),
            fmt.scaled(r["achieved_flop_per_s"], 1e9),
            "-" if r["pct_attainable"] is None else f"{r['pct_attainable']:.0f}%",
            r["bound"] or "-",
        )
    parts.append(t)
    if roof.get("decode_min_ms") is not None:
        parts.append(
            Text(
                f"decode step: {roof['decode_measured_ms']:.2f} ms measured vs "
                f"{roof['decode_min_ms']:.2f} ms to read weights + KV cache at full bandwidth "
                f"({roof['decode_measured_ms'] / roof['decode_min_ms']:.1f}x)"
            )
        )
    if roof.get("prefill_min_ms") is not None:
        parts.append(
            Text(
                f"prefill: {roof['prefill_measured_ms']:.2f} ms measured vs "
                f"{roof['prefill_min_ms']:.2f} ms at peak FLOP/s"
            )
        )
    if roof.get("ridge_flop_per_byte"):
        parts.append(Text(f"ridge point: {roof['ridge_flop_per_byte']:.1f} FLOP/byte", style="dim"))
    if doc["findings"]:
        parts.append(Text("findings", style="bold"))
        for f in doc["findings"]:
            color = {"high": "red", "medium": "yellow"}.get(f["severity"], "white")
            parts.append(Text(f"[{f['severity']}] {f['id']}: {f['title']}", style=color))
            parts.append(Text(f"    -> {f['advice']}", style="dim"))
    else:
        parts.append(Text("no bottleneck rule fired", style="dim"))
    return Group(*parts)


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


def _knob_pairs(items: list[str] | None) -> dict[str, str]:
    from infermeter.errors import UserError

    out = {}
    for text in items or []:
        name, sep, value = text.partition("=")
        if not sep or not name.strip() or not value.strip() or "," in value:
            raise UserError(f"{text!r} is not NAME=VALUE", "e.g. --variant top_k=2")
        out[name.strip()] = value.strip()
    return out


@guard
def systems_analysis_command(
    model: str = typer.Option("tiny-qwen3-moe", "--model", "-m", help="Model to analyse."),
    baseline: list[str] = typer.Option(None, help="Baseline knob NAME=VALUE (repeatable)."),
    variant: list[str] = typer.Option(None, help="Variant knob NAME=VALUE (repeatable)."),
    quick: bool = typer.Option(False, "--quick", help="Fewer samples and new tokens."),
    device: str = typer.Option("auto", help="auto, cpu, cuda, cuda:N or mps."),
    db: str = typer.Option(None, help="Database URL or SQLite file."),
    out: Path = typer.Option(Path("systems-analysis"), help="Folder for the two JSON files."),
) -> None:
    """Baseline vs variant: runs, scaling over 64-512 tokens, roofline, bottlenecks, comparison."""
    from infermeter.errors import UserError
    from infermeter.experiments.systems import systems_analysis
    from infermeter.models.loader import load_model
    from infermeter.run.config import RunConfig

    b, v = _knob_pairs(baseline), _knob_pairs(variant)
    if not v:
        raise UserError("--variant is required", "e.g. --variant top_k=2 (baseline: the model)")
    folder = writable_dir(out)
    base = RunConfig(
        model=model,
        device=device,
        prompt_tokens=128,
        new_tokens=8 if quick else 32,
        samples=2 if quick else 5,
        mode="standard",
        energy="off" if quick else "auto",
    ).validate()
    loaded = load_model(model, device=device)
    doc = systems_analysis(base, b, v, loaded, Store(db), folder)
    c = doc["comparison"]
    console = Console(soft_wrap=True)
    console.print(
        f"baseline {doc['baseline']['total_ms']:.1f} ms ({doc['baseline']['throughput_tps']:.1f}"
        f" tok/s) vs variant {doc['variant']['total_ms']:.1f} ms "
        f"({doc['variant']['throughput_tps']:.1f} tok/s): speedup {c['actual_speedup']:.3f}x, "
        f"predicted {c['predicted_speedup']:.3f}x ({c['prediction_error_pct']:+.1f}%)",
        markup=False,
    )
    if doc["scaling_fit"]:
        console.print(
            f"scaling: {doc['scaling_fit']['verdict']}: {doc['scaling_fit']['evidence']}",
            markup=False,
        )
    for f in doc["bottlenecks"]:
        console.print(f"[{f['severity']}] {f['id']}: {f['title']}", markup=False)
    console.print(
        f"wrote {folder / 'systems_analysis.json'} and {folder / 'profile_report.json'}",
        style="dim",
        markup=False,
    )


@guard
def fit_command(
    sweep_id: str = typer.Argument(..., help="A stored sweep id (or prefix)."),
    db: str = typer.Option(None, help="Database URL or SQLite file."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document on stdout."),
) -> None:
    """Fit the latency model on every other point of a sweep and show its held-out errors."""
    from infermeter.analysis.perfmodel import alternate, check_on_sweep
    from infermeter.errors import UserError

    store = Store(db)
    row = store.sweep(sweep_id)
    runs = [store.get(i) for i in store.sweep_run_ids(row["id"])]
    if len(runs) < 4:
        raise UserError(
            f"sweep {row['id']} has {len(runs)} finished points; fitting needs 4 or more",
            "sweep more values (3 coefficients are fitted, the rest are held out)",
        )
    checks = check_on_sweep(runs, alternate(len(runs)))
    doc = clean_json({"sweep_id": row["id"], **{p: c.to_dict() for p, c in checks.items()}})
    if json_out:
        print_json(doc)
        return
    console = Console(soft_wrap=True)
    knobs = list(row["knobs"])
    for phase, chk in checks.items():
        s = chk.error_summary()
        t = Table(
            title=f"{phase}: ms = "
            + " + ".join(f"{v:.3g} x {k}" for k, v in chk.model.coef.items()),
            title_justify="left",
            box=box.SIMPLE_HEAD,
        )
        for col in (*knobs, "fitted", "measured ms", "predicted ms", "error"):
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
