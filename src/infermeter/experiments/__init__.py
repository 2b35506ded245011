"""Named experiments (`infermeter experiment NAME`): sweep recipes with their figures."""

from infermeter.experiments.recipes import EXPERIMENTS, Experiment
from infermeter.experiments.runner import get_experiment, run_experiment

__all__ = ["EXPERIMENTS", "Experiment", "get_experiment", "run_experiment"]
