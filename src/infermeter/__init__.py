"""infermeter: where the time, memory and energy of transformer inference go.

The public API, re-exported names only; docs/design.md describes the layout.
"""

from infermeter.errors import GenerationFailed, UserError
from infermeter.instrument import Profiler, ProfilingConfig
from infermeter.models import PRESETS, LoadedModel, ModelInfo, load_model
from infermeter.run import RunConfig, RunResult, SampleResult, profile
from infermeter.store import Store

__version__ = "0.1.0"

__all__ = [
    "PRESETS",
    "GenerationFailed",
    "Profiler",
    "ProfilingConfig",
    "LoadedModel",
    "ModelInfo",
    "RunConfig",
    "RunResult",
    "SampleResult",
    "Store",
    "UserError",
    "__version__",
    "load_model",
    "profile",
]
