"""Run a named experiment: its sweep, then its JSON, figure, CSV and scaling fit in one folder.

Layout: OUT/NAME/sweep.json (docs/design.md, "Files it writes", plus `scaling` when fitted),
OUT/NAME/NAME.png and NAME.csv (the figure and its table), one pair per group of other knobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from infermeter.analysis.scaling import fit_scaling
from infermeter.errors import UserError
from infermeter.experiments.recipes import EXPERIMENTS, Experiment
from infermeter.models.loader import LoadedModel
from infermeter.report.figures import breakdown_figure, write_csv
from infermeter.run.config import RunConfig
from infermeter.run.sink import SweepStore
from infermeter.run.sweep import SweepProgress, SweepSpec, run_sweep
from infermeter.util.jsonio import write_json


@dataclass
class ExperimentOutput:
    """What an experiment wrote and found."""

    name: str
    sweep_id: str
    files: list[Path]
    scaling: dict[str, Any] | None
    skipped_points: int
    #: what the experiment found, a row per point it judged (the recipe's `verdict`)
    verdict: list[dict[str, Any]] = field(default_factory=list)


def get_experiment(name: str) -> Experiment:
    """The experiment called `name`, or a UserError listing them."""
    if name not in EXPERIMENTS:
        raise UserError(
            f"unknown experiment {name!r}", f"use one of {', '.join(EXPERIMENTS)} or all"
        )
    return EXPERIMENTS[name]


def experiment_spec(
    exp: Experiment,
    base: RunConfig,
    loaded: LoadedModel,
    quick: bool,
    samples: int | None = None,
) -> SweepSpec:
    """The sweep an experiment runs on this model (UserError when it does not apply)."""
    why = exp.applies(loaded.info)
    if why:
        raise UserError(
            f"experiment {exp.name} does not apply to {loaded.info.spec}: {why}",
            "pick another experiment or model (`infermeter experiment all` skips these)",
        )
    cuda = next(loaded.model.parameters()).device.type == "cuda"
    overrides = {**exp.base, **(exp.quick_base if quick else {})}
    if samples is not None:
        overrides["samples"] = samples
    config = replace(base, **overrides)
    return SweepSpec(config, exp.grid(loaded.info, quick, cuda), name=exp.name)


def scaling_of(exp: Experiment, doc: dict[str, Any]) -> dict[str, Any] | None:
    """The experiment's scaling fit on the sweep's means, or None."""
    if exp.scaling is None:
        return None
    metric, per_x = exp.scaling
    x_knob = x_of(doc)
    xs, ys = [], []
    for row in doc["summary"]:
        x = row["config"].get(x_knob)
        y = (row.get(metric) or {}).get("p50")  # medians: one slow sample cannot move them
        if x is None or y is None:
            continue
        xs.append(float(x))
        ys.append(y / float(x) if per_x else y)
    label = x_knob.replace("_", " ")
    name = f"{metric} per {label.removesuffix('s')}" if per_x else metric
    fit = fit_scaling(xs, ys, metric=name, length=label)
    return fit.to_dict() if fit else None


def run_experiment(
    name: str,
    base: RunConfig,
    store: SweepStore,
    out: Path,
    *,
    quick: bool = False,
    samples: int | None = None,
    loaded: LoadedModel,
    on_progress: SweepProgress | None = None,
) -> ExperimentOutput:
    """Run (or resume) one experiment and write its files under out/NAME."""
    exp = get_experiment(name)
    if exp.serving:
        return _run_serving(exp, store, out, quick, samples, loaded)
    spec = experiment_spec(exp, base, loaded, quick, samples)
    result = run_sweep(spec, store, loaded=loaded, on_progress=on_progress)
    doc = result.to_json()
    scaling = scaling_of(exp, doc)
    if scaling is not None:
        doc["scaling"] = scaling
    if exp.verdict is not None:
        doc["verdict"] = exp.verdict(doc)
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    path = write_json(folder / "sweep.json", doc)
    files = [path, *draw(exp, doc, folder)]
    if doc.get("verdict"):
        files.append(write_csv(folder / "verdict.csv", doc["verdict"]))
    return ExperimentOutput(
        name, result.sweep_id, files, scaling, result.skipped, doc.get("verdict") or []
    )


def x_of(doc: dict[str, Any]) -> str:
    """The knob on the x axis: the sweep's first knob."""
    return str(next(iter(doc["meta"]["knobs"])))


def draw(exp: Experiment, doc: dict[str, Any], folder: Path) -> list[Path]:
    """The experiment's figure(s) and CSV(s) from a sweep document."""
    return breakdown_figure(
        doc,
        x_of(doc),
        folder,
        exp.name,
        title=f"{doc['meta'].get('model')}: {exp.help}",
        **exp.figure,
    )


def _run_serving(
    exp: Experiment,
    store: Any,
    out: Path,
    quick: bool,
    samples: int | None,
    loaded: LoadedModel,
) -> ExperimentOutput:
    """A rate sweep of `infermeter load`: each rate a stored run, the sweep's JSON, figures.

    Static batches, which start at once on any device (continuous batching's manager takes
    seconds to start per run on CPU); `samples` is the number of requests per rate.
    """
    from infermeter.report.load_figures import load_sweep_figures
    from infermeter.serving.load import Lengths, LoadSpec, as_run, run_rate_sweep
    from infermeter.serving.rows import as_load_doc

    settings = {**exp.base, **(exp.quick_base if quick else {})}
    spec = LoadSpec(
        model=loaded.info.spec,
        requests=samples or settings["samples"],
        prompt_tokens=Lengths("fixed", settings["prompt_tokens"]),
        new_tokens=Lengths("fixed", settings["new_tokens"]),
        server="static",
    )
    rates = [float(r) for r in exp.grid(loaded.info, quick, False)["rate"]]
    doc = run_rate_sweep(spec, rates, loaded=loaded)
    for run in doc["runs"]:
        run["meta"]["run_id"] = store.save(as_run(as_load_doc(run)))
    folder = out / exp.name
    folder.mkdir(parents=True, exist_ok=True)
    files = [write_json(folder / "load_sweep.json", doc), *load_sweep_figures(doc, folder)]
    return ExperimentOutput(exp.name, f"rates {','.join(f'{r:g}' for r in rates)}", files, None, 0)
