"""infermeter: where the time, memory and energy of transformer inference go.

The public API, re-exported names only; docs/design.md describes the layout.
"""

from typing import TYPE_CHECKING

from infermeter.util.lazy import lazy_exports

if TYPE_CHECKING:  # what the names are, for type checkers; at run time each loads on first use
    from infermeter.errors import GenerationFailed, UserError
    from infermeter.instrument import Profiler, ProfilingConfig
    from infermeter.models import PRESETS, LoadedModel, ModelInfo, load_model
    from infermeter.run import RunConfig, RunResult, SampleResult, profile
    from infermeter.store import Store

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "GenerationFailed": "infermeter.errors",
        "UserError": "infermeter.errors",
        "Profiler": "infermeter.instrument",
        "ProfilingConfig": "infermeter.instrument",
        "PRESETS": "infermeter.models",
        "LoadedModel": "infermeter.models",
        "ModelInfo": "infermeter.models",
        "load_model": "infermeter.models",
        "RunConfig": "infermeter.run",
        "RunResult": "infermeter.run",
        "SampleResult": "infermeter.run",
        "profile": "infermeter.run",
        "Store": "infermeter.store",
    },
)

from infermeter._version import __version__  # noqa: E402

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
