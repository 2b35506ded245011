"""`infermeter systems-analysis`: baseline vs variant, scaling, roofline, findings."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from infermeter.cli.guard import guard
from infermeter.cli.output import writable_dir


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
    from infermeter.store import Store

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
