"""Run models: one profiled configuration (`profile`), and sweeps of them (`run.sweep`)."""

from infermeter.run.config import RunConfig
from infermeter.run.profile import profile
from infermeter.run.results import METRICS, RunResult, SampleResult
from infermeter.run.sink import LiveSink, RunSink, SweepStore

__all__ = [
    "METRICS",
    "LiveSink",
    "RunConfig",
    "RunResult",
    "RunSink",
    "SampleResult",
    "SweepStore",
    "profile",
]
