"""Energy sources behind one small protocol: NVML, RAPL, powermetrics, and the power sampler.

Each source reads cumulative joules per domain; a source that is not there is an `Unavailable`
carrying the reason, never a source that reports 0 J.
"""

from infermeter.measure.energy.base import EnergySource, Unavailable
from infermeter.measure.energy.nvml import NvmlSource, visible_physical_indices
from infermeter.measure.energy.rapl import RaplSource, probe_rapl

__all__ = [
    "EnergySource",
    "NvmlSource",
    "RaplSource",
    "Unavailable",
    "probe_rapl",
    "visible_physical_indices",
]
