"""Analysis of measured runs: scaling fits (more in later issues: costs, roofline, findings)."""

from infermeter.analysis.scaling import ScalingFit, fit_scaling

__all__ = ["ScalingFit", "fit_scaling"]
