"""Energy sources behind one small protocol: NVML, RAPL, powermetrics, and the power sampler.

Each source reads cumulative joules per domain; a source that is not there is an `Unavailable`
carrying the reason, never a source that reports 0 J.
"""

from typing import TYPE_CHECKING

from infermeter.util.lazy import lazy_exports

if TYPE_CHECKING:  # what the names are, for type checkers; at run time each loads on first use
    from infermeter.measure.energy.base import EnergySource, Unavailable
    from infermeter.measure.energy.nvml import NvmlSource, visible_physical_indices
    from infermeter.measure.energy.rapl import RaplSource, probe_rapl

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "EnergySource": "infermeter.measure.energy.base",
        "Unavailable": "infermeter.measure.energy.base",
        "NvmlSource": "infermeter.measure.energy.nvml",
        "visible_physical_indices": "infermeter.measure.energy.nvml",
        "RaplSource": "infermeter.measure.energy.rapl",
        "probe_rapl": "infermeter.measure.energy.rapl",
    },
)

__all__ = [
    "EnergySource",
    "NvmlSource",
    "RaplSource",
    "Unavailable",
    "probe_rapl",
    "visible_physical_indices",
]
