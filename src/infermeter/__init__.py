"""infermeter: where the time, memory and energy of transformer inference go.

The public API, re-exported names only; docs/design.md describes the layout.
"""

import sys

try:
    from infermeter.util.lazy import lazy_exports
except KeyboardInterrupt:
    # `python -m infermeter` imports this package before its __main__ can guard Ctrl-C
    # (sys.argv[0] is "-m" while runpy finds the module): one line and 130, as everywhere in
    # the CLI; a traceback through importlib was seen in a fresh clone's test. An importing
    # program gets its KeyboardInterrupt unchanged.
    if sys.argv[:1] != ["-m"]:
        raise
    sys.stderr.write("interrupted\n")
    raise SystemExit(130) from None

# typing's import costs 16 ms (it loads re): run before the CLI's Ctrl-C guard (cli/entry.py),
# a Ctrl-C then printed a traceback; type checkers read this name as True
TYPE_CHECKING = False

if TYPE_CHECKING:  # what the names are, for type checkers; at run time each loads on first use
    from infermeter.analysis.analyze import analyze_run
    from infermeter.analysis.compare import compare_runs
    from infermeter.analysis.perfmodel import PerformanceModel
    from infermeter.errors import GenerationFailed, UserError
    from infermeter.experiments.load_whatif import predict_load
    from infermeter.experiments.whatif import predict
    from infermeter.instrument import Profiler, ProfilingConfig
    from infermeter.models import PRESETS, LoadedModel, ModelInfo, load_model
    from infermeter.run import RunConfig, RunResult, SampleResult, profile
    from infermeter.run.session import UserSession, session
    from infermeter.serving.load import Lengths, LoadSpec, run_load
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
        "analyze_run": "infermeter.analysis.analyze",
        "compare_runs": "infermeter.analysis.compare",
        "PerformanceModel": "infermeter.analysis.perfmodel",
        "Lengths": "infermeter.serving.load",
        "LoadSpec": "infermeter.serving.load",
        "run_load": "infermeter.serving.load",
        "UserSession": "infermeter.run.session",
        "session": "infermeter.run.session",
        "predict_load": "infermeter.experiments.load_whatif",
        "predict": "infermeter.experiments.whatif",
    },
)

from infermeter._version import __version__  # noqa: E402

__all__ = [
    "PRESETS",
    "GenerationFailed",
    "Lengths",
    "LoadSpec",
    "PerformanceModel",
    "Profiler",
    "ProfilingConfig",
    "LoadedModel",
    "ModelInfo",
    "RunConfig",
    "RunResult",
    "SampleResult",
    "Store",
    "UserError",
    "UserSession",
    "__version__",
    "analyze_run",
    "compare_runs",
    "load_model",
    "predict",
    "predict_load",
    "profile",
    "run_load",
    "session",
]
