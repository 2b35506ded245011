"""Orchestration above run/: named experiments, systems analysis, architecture coverage.

`recipes`/`runner`: `infermeter experiment NAME` (sweep recipes with their figures);
`systems`: `infermeter systems-analysis`; `coverage`: every transformers architecture, tiny.
"""

from infermeter.experiments.recipes import EXPERIMENTS, Experiment
from infermeter.experiments.runner import get_experiment, run_experiment

__all__ = ["EXPERIMENTS", "Experiment", "get_experiment", "run_experiment"]
