"""Hooks on a model: layer timing, activation statistics, attention and MoE probes."""

from typing import TYPE_CHECKING

from infermeter.util.lazy import lazy_exports

if TYPE_CHECKING:  # what the names are, for type checkers; at run time each loads on first use
    from infermeter.instrument.config import MODES, ProfilingConfig
    from infermeter.instrument.profiler import Profiler
    from infermeter.instrument.tables import LayerProfile

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "MODES": "infermeter.instrument.config",
        "ProfilingConfig": "infermeter.instrument.config",
        "Profiler": "infermeter.instrument.profiler",
        "LayerProfile": "infermeter.instrument.tables",
    },
)

__all__ = ["MODES", "LayerProfile", "Profiler", "ProfilingConfig"]
