"""`infermeter experiment NAME|all`: sweep recipes with their JSON, figure and CSV."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from infermeter.cli.guard import fail, guard
from infermeter.cli.options import DB, config_option
from infermeter.cli.output import writable_dir
from infermeter.cli.progress import SweepProgressView
from infermeter.cli.prompt_source import (
    DATASET,
    DATASET_FIELD,
    DATASET_SPLIT,
    WORKLOAD,
    prompt_fields,
)
from infermeter.models.presets import DEFAULT_PRESET


@guard
def experiment_command(
    name: str = typer.Argument(
        ...,
        help="context-scaling, moe-topk, layers, output-tokens, batch, precision, speculation, "
        "compile, or all.",
    ),
    model: str = typer.Option(DEFAULT_PRESET, "--model", "-m", help="Model to run it on."),
    quick: bool = typer.Option(False, "--quick", help="Fewer points and samples (same code)."),
    samples: int = typer.Option(None, help="Override the recipe's measured repeats."),
    device: str = config_option("device"),
    energy: str = config_option("energy"),
    db: str = DB,
    out: Path = typer.Option(Path("experiments"), help="Folder for JSON, CSV and PNG files."),
    workload: str = WORKLOAD,
    dataset: str = DATASET,
    dataset_split: str = DATASET_SPLIT,
    dataset_field: str = DATASET_FIELD,
) -> None:
    """Run a named experiment (a sweep recipe) and write its JSON, figure and CSV."""
    from infermeter.experiments import EXPERIMENTS, get_experiment, run_experiment
    from infermeter.models.loader import load_model
    from infermeter.run.config import RunConfig
    from infermeter.store import Store

    names = list(EXPERIMENTS) if name == "all" else [get_experiment(name).name]
    out_dir = writable_dir(out)
    prompts = prompt_fields(None, workload, dataset, dataset_split, dataset_field)
    base = RunConfig(model=model, device=device, energy=energy, **prompts).validate()
    if samples is not None:  # refused now, not after the model has loaded
        dataclasses.replace(base, samples=samples).validate()
    store = Store(db)
    loaded = load_model(model, device=device, seed=base.seed)
    console = Console(soft_wrap=True)
    for exp_name in names:
        why = EXPERIMENTS[exp_name].applies(loaded.info)
        if why and name == "all":
            console.print(f"{exp_name}: skipped ({why})", style="dim", markup=False)
            continue
        view = SweepProgressView(exp_name)
        t0 = time.perf_counter()
        try:
            with view.progress:
                result = run_experiment(
                    exp_name,
                    base,
                    store,
                    out_dir,
                    quick=quick,
                    samples=samples,
                    loaded=loaded,
                    on_progress=view,
                )
        except KeyboardInterrupt:
            raise fail(
                f"interrupted during {exp_name}: finished points are stored; run the same "
                "command again to resume",
                130,
            ) from None
        line = f"{exp_name}: sweep {result.sweep_id}, {time.perf_counter() - t0:.1f} s"
        if result.skipped_points:
            line += f" ({result.skipped_points} points already done)"
        console.print(line, markup=False)
        if result.scaling:
            s = result.scaling
            console.print(f"  scaling: {s['verdict']}: {s['evidence']}", markup=False)
        for v in result.verdict:
            console.print("  " + verdict_line(v), markup=False)
        for f in result.files:
            console.print(f"  wrote {f}", markup=False, style="dim")


def verdict_line(row: dict[str, Any]) -> str:
    """One judged point of an experiment, as a sentence."""
    if "decoding" in row:
        rate = row.get("acceptance_rate")
        accepted = f"{rate:.0%} accepted" if rate is not None else "nothing proposed"
        speed = f"{row['speedup']:.2f}x" if row.get("speedup") else "-"
        return (
            f"{row['prompt_kind']} prompts, {row['decoding']}: {row['verdict']} (decode "
            f"{speed} as fast as greedy, {accepted}, "
            f"{row.get('tokens_per_target_forward') or 0:.2f} tokens per target forward)"
        )
    return ", ".join(f"{k} {v}" for k, v in row.items())
