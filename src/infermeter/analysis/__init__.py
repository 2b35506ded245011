"""Analysis of stored runs, pure (data in, results out): costs, roofline, findings, fits.

Modules: `costs` (FLOPs and bytes per layer and phase), `roofline` (against ceilings),
`bottlenecks` (rules with severity and advice), `compare` (two runs), `scaling` (length fits),
`perfmodel` (cost-table and fitted latency models), `analyze` (all of it for one run).
"""

from infermeter.analysis.scaling import ScalingFit, fit_scaling

__all__ = ["ScalingFit", "fit_scaling"]
