"""The power sampler thread and window attribution: real threads, fake sources."""

import threading
import time

import numpy as np
import pytest

from infermeter.errors import UserError
from infermeter.measure.energy.attribution import PowerTrace
from infermeter.measure.energy.sampler import PowerSampler


class RampSource:
    """Power rises linearly with real time: P(t) = 10 + 40 t W; energy is its exact integral."""

    name, method = "fake", "counter"

    def __init__(self, update_period_s: float = 0.001):
        self.update_period_s = update_period_s
        self.t0 = time.perf_counter()
        self.reads = 0

    def true_j(self, t: float) -> float:
        return 10 * t + 20 * t * t

    def domains(self):
        return ["pkg"]

    def read_j(self):
        self.reads += 1
        return {"pkg": self.true_j(time.perf_counter() - self.t0)}


def test_sampler_reads_on_schedule_and_trace_matches_truth():
    src = RampSource()
    sampler = PowerSampler(src, interval_ms=10, capacity=4)  # forces the buffer to grow
    sampler.start()
    time.sleep(0.5)
    trace = sampler.stop()
    assert np.all(np.diff(trace.t_ms) > 0)
    assert np.all(np.diff(trace.total_j) >= 0)
    span_s = (trace.t_ms[-1] - trace.t_ms[0]) / 1e3
    # one reading per 10 ms of the span it covered (start and stop add one each), counted
    # against the trace's own span, not the sleep: a busy machine wakes threads late
    assert 0.6 * span_s / 0.010 <= len(trace) <= span_s / 0.010 + 3
    w = trace.window(trace.t_ms[0], trace.t_ms[-1])
    assert w.quality == "measured"
    assert w.energy_j == pytest.approx(trace.total_j[-1] - trace.total_j[0])
    assert w.mean_power_w == pytest.approx(w.energy_j / span_s)
    assert trace.gaps() == []


def test_interval_below_minimum_is_refused():
    with pytest.raises(UserError, match="below the minimum of 10 ms"):
        PowerSampler(RampSource(), interval_ms=5)


def test_a_failing_sensor_does_not_kill_the_run():
    class Flaky(RampSource):
        def read_j(self):
            if threading.current_thread() is not threading.main_thread():
                raise OSError("sensor went away")
            return super().read_j()

    sampler = PowerSampler(Flaky(), interval_ms=10).start()
    time.sleep(0.1)
    trace = sampler.stop()
    assert trace.errors and "sensor went away" in trace.errors[0]
    assert len(trace) == 2  # the start and stop readings from the calling thread


def _trace(t_ms, joules, interval=100.0, update=100.0):
    return PowerTrace(
        "fake",
        "counter",
        ["a", "b"],
        np.asarray(t_ms, float),
        np.asarray(joules, float),
        interval,
        update,
    )


def test_gap_longer_than_three_intervals_is_flagged():
    tr = _trace([0, 100, 200, 650, 750], [[0, 0]] * 5)
    assert tr.gaps() == [{"start_ms": 200.0, "duration_ms": 450.0}]
    assert tr.window(300, 500).in_gap
    assert not tr.window(0, 200).in_gap


def test_window_interpolates_counter_and_keeps_domains():
    # 10 W on domain a, 2 W on b, readings every 100 ms
    t = np.arange(0, 1001, 100.0)
    tr = _trace(t, np.c_[t / 1e3 * 10, t / 1e3 * 2])
    w = tr.window(150, 650)
    assert w.quality == "measured"
    assert w.energy_j == pytest.approx(6.0)
    assert w.domains == pytest.approx({"a": 5.0, "b": 1.0})
    assert w.mean_power_w == pytest.approx(12.0)


def test_short_window_on_a_coarse_counter_is_estimated_never_zero():
    # a counter that updates every 100 ms in steps, read every 10 ms: flat between updates
    t = np.arange(0, 1001, 10.0)
    stepped = np.floor(t / 100) * 100 / 1e3 * 10  # 10 W, visible only at updates
    tr = _trace(t, np.c_[stepped, np.zeros_like(t)], interval=10.0, update=100.0)
    w = tr.window(415, 420)  # 5 ms: the counter does not move inside it
    assert w.quality == "estimated"
    assert w.energy_j == pytest.approx(0.05, rel=0.25)  # 10 W x 5 ms
    assert w.mean_power_w == pytest.approx(10.0, rel=0.25)
    w_end = tr.window(997, 1000)  # near the end: the span shifts inside the trace
    assert w_end.quality == "estimated" and w_end.energy_j > 0


def test_window_outside_the_trace_is_none():
    tr = _trace([0, 100, 200], [[0, 0], [1, 0], [2, 0]])
    assert tr.window(-10, 50) is None
    assert tr.window(150, 250) is None
    assert tr.window(50, 40) is None
