"""Analysis of stored runs, pure (data in, results out): costs, roofline, findings, fits.

Modules: `costs` (FLOPs and bytes per layer and phase), `roofline` (against ceilings),
`bottlenecks` (rules with severity and advice), `compare` (two runs), `scaling` (length fits),
`perfmodel` (cost-table and fitted latency models), `analyze` (all of it for one run).
"""

from typing import TYPE_CHECKING

from infermeter.util.lazy import lazy_exports

if TYPE_CHECKING:  # what the names are, for type checkers; at run time each loads on first use
    from infermeter.analysis.scaling import ScalingFit, fit_scaling

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "ScalingFit": "infermeter.analysis.scaling",
        "fit_scaling": "infermeter.analysis.scaling",
    },
)

__all__ = ["ScalingFit", "fit_scaling"]
