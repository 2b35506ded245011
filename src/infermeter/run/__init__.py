"""Run models: one profiled configuration (`profile`), and sweeps of them (`run.sweep`)."""

from typing import TYPE_CHECKING

from infermeter.util.lazy import lazy_exports

if TYPE_CHECKING:  # what the names are, for type checkers; at run time each loads on first use
    from infermeter.run.config import RunConfig
    from infermeter.run.profiling import profile
    from infermeter.run.results import METRICS, RunResult, SampleResult
    from infermeter.run.session import UserSession, session
    from infermeter.run.sink import LiveSink, RunSink, SweepStore

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "RunConfig": "infermeter.run.config",
        "profile": "infermeter.run.profiling",
        "METRICS": "infermeter.run.results",
        "RunResult": "infermeter.run.results",
        "SampleResult": "infermeter.run.results",
        "UserSession": "infermeter.run.session",
        "session": "infermeter.run.session",
        "LiveSink": "infermeter.run.sink",
        "RunSink": "infermeter.run.sink",
        "SweepStore": "infermeter.run.sink",
    },
)

__all__ = [
    "METRICS",
    "LiveSink",
    "RunConfig",
    "RunResult",
    "RunSink",
    "SampleResult",
    "SweepStore",
    "UserSession",
    "profile",
    "session",
]
