"""Profile one generation configuration (phases load, compile, prefill, decode)."""

from infermeter.run.config import RunConfig
from infermeter.run.profile import RunSink, profile
from infermeter.run.results import METRICS, RunResult, SampleResult

__all__ = ["METRICS", "RunConfig", "RunResult", "RunSink", "SampleResult", "profile"]
