"""Hooks on a model: layer timing, activation statistics, attention and MoE probes."""

from infermeter.instrument.config import MODES, ProfilingConfig
from infermeter.instrument.profiler import Profiler
from infermeter.instrument.tables import LayerProfile

__all__ = ["MODES", "LayerProfile", "Profiler", "ProfilingConfig"]
