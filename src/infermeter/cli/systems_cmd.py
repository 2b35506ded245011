"""`infermeter systems-analysis`: baseline vs variant, scaling, roofline, findings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from infermeter.cli.guard import guard
from infermeter.cli.options import DB, config_option
from infermeter.cli.output import writable_dir
from infermeter.cli.prompt_source import (
    DATASET,
    DATASET_FIELD,
    DATASET_SPLIT,
    WORKLOAD,
    prompt_fields,
)


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
    device: str = config_option("device"),
    db: str = DB,
    out: Path = typer.Option(Path("systems-analysis"), help="Folder for the two JSON files."),
    routing: str = typer.Option(
        None,
        help="Routing shortcuts to analyse against learned routing: shortcuts, "
        "shortcuts:key=v,... or a JSON config (the reference's VAR config).",
    ),
    target_speedup: float = typer.Option(1.2, help="Speedup the break-even distribution aims at."),
    workload: str = WORKLOAD,
    dataset: str = DATASET,
    dataset_split: str = DATASET_SPLIT,
    dataset_field: str = DATASET_FIELD,
) -> None:
    """Baseline vs variant: runs, scaling over 64-512 tokens, roofline, bottlenecks, comparison."""
    from infermeter.errors import UserError
    from infermeter.experiments.systems import systems_analysis
    from infermeter.models.loader import load_model
    from infermeter.run.config import RunConfig
    from infermeter.store import Store

    b, v = _knob_pairs(baseline), _knob_pairs(variant)
    if not v and routing is None:
        raise UserError(
            "--variant or --routing is required", "e.g. --variant top_k=2, or --routing shortcuts"
        )
    if not 1.0 < target_speedup <= 100.0:
        raise UserError(f"--target-speedup {target_speedup} is outside (1, 100]", "e.g. 1.2")
    if routing is not None:
        from infermeter.knobs.routing import parse as parse_routing

        parse_routing(routing)  # a bad config is refused before the model loads
    folder = writable_dir(out)
    base = RunConfig(
        model=model,
        device=device,
        prompt_tokens=128,
        new_tokens=8 if quick else 32,
        samples=2 if quick else 5,
        mode="standard",
        energy="off" if quick else "auto",
        **prompt_fields(None, workload, dataset, dataset_split, dataset_field),
    ).validate()
    loaded = load_model(model, device=device)
    doc = systems_analysis(
        base, b, v, loaded, Store(db), folder, routing=routing, target_speedup=target_speedup
    )
    _print_systems(doc, folder)


def _print_systems(doc: dict[str, Any], folder: Path) -> None:
    """The analysis in a few lines: speedups, routing costs, scaling, findings, the files."""
    c = doc["comparison"]
    console = Console(soft_wrap=True)
    console.print(
        f"baseline {doc['baseline']['total_ms']:.1f} ms ({doc['baseline']['throughput_tps']:.1f}"
        f" tok/s) vs variant {doc['variant']['total_ms']:.1f} ms "
        f"({doc['variant']['throughput_tps']:.1f} tok/s): speedup {c['actual_speedup']:.3f}x, "
        f"predicted {c['predicted_speedup']:.3f}x ({c['prediction_error_pct']:+.1f}%)",
        markup=False,
    )
    if "routing" in doc:
        r = doc["routing"]
        dist = ", ".join(f"{k} {v:.1f}%" for k, v in r["routing_distribution"].items())
        console.print(
            f"routing: {dist}; cache utilisation {100 * (r['cache_utilization'] or 0):.1f}%",
            markup=False,
        )
        for phase, p in r["phases"].items():
            costs = ", ".join(f"{k} {v:.2f}" for k, v in p["costs_us_per_token"].items())
            console.print(
                f"{phase} us/token: {costs}; breakeven for "
                f"{r['target_speedup']}x: {p['breakeven'] or 'unreachable'}",
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
