"""Orchestration above run/: named experiments, systems analysis, architecture coverage.

`recipes`/`runner`: `infermeter experiment NAME` (sweep recipes with their figures);
`systems`: `infermeter systems-analysis`; `coverage`: every transformers architecture, tiny.
"""

from typing import TYPE_CHECKING

from infermeter.util.lazy import lazy_exports

if TYPE_CHECKING:  # what the names are, for type checkers; at run time each loads on first use
    from infermeter.experiments.recipes import EXPERIMENTS, Experiment
    from infermeter.experiments.runner import get_experiment, run_experiment

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "EXPERIMENTS": "infermeter.experiments.recipes",
        "Experiment": "infermeter.experiments.recipes",
        "get_experiment": "infermeter.experiments.runner",
        "run_experiment": "infermeter.experiments.runner",
    },
)

__all__ = ["EXPERIMENTS", "Experiment", "get_experiment", "run_experiment"]
