import time

import pytest

from infermeter.measure import clock as clock_mod
from infermeter.measure.clock import CudaEventClock, MockClock, PerfCounterClock, clock_for
from infermeter.measure.timer import SectionRowDoc, SectionSummaryDoc, Timer, measure_repeated
from tests.helpers import assert_rows_are, doc_keys


def test_perf_counter_clock_measures_a_sleep():
    """The clock's interval is the sleep and the host clock's own reading around it (no bound
    on how long a busy machine takes to wake the sleeper: the two clocks are compared)."""
    c = PerfCounterClock()
    before = time.perf_counter()
    a = c.mark()
    time.sleep(0.02)
    b = c.mark()
    outside_ms = (time.perf_counter() - before) * 1e3
    assert 19.0 <= c.elapsed_ms(a, b) <= outside_ms


def test_perf_counter_clock_syncs_before_every_mark():
    calls = []
    c = PerfCounterClock(sync=lambda: calls.append(1))
    c.mark()
    c.mark()
    assert len(calls) == 2 and c.name == "perf_counter+sync"


def test_clock_for_cpu_is_unsynced_perf_counter():
    c = clock_for("cpu")
    assert isinstance(c, PerfCounterClock) and c.name == "perf_counter"


def test_mock_clock_auto_advance():
    c = MockClock(start_ms=10.0, auto_advance_ms=2.5)
    a, b = c.mark(), c.mark()
    assert (a, b) == (10.0, 12.5)
    c.advance(100)
    assert c.elapsed_ms(a, c.mark()) == pytest.approx(105.0)


class _FakeEvent:
    synced = 0

    def __init__(self, enable_timing=False):
        assert enable_timing
        self.t = None

    def record(self):
        self.t = _FakeEvent.now

    def elapsed_time(self, end):
        return end.t - self.t


def test_cuda_event_clock_records_without_sync_and_syncs_once(monkeypatch):
    import torch

    syncs = []
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: syncs.append(device))
    c = CudaEventClock("cuda:0", pool=2)
    marks = []
    for t in (0.0, 1.5, 4.0, 10.0):  # more marks than the pool: it must grow
        _FakeEvent.now = t
        marks.append(c.mark())
    assert syncs == []  # hot path never synchronises
    assert c.elapsed_ms(marks[0], marks[1]) == 1.5
    assert c.elapsed_ms(marks[1], marks[3]) == 8.5
    assert len(syncs) == 1  # one sync for any number of resolutions
    c.recycle()
    _FakeEvent.now = 20.0
    assert c.mark() is marks[0]  # pooled events are reused


def test_timer_nested_sections_on_mock_clock():
    c = MockClock(auto_advance_ms=1.0)
    t = Timer(c)  # origin mark reads 0; every mark then advances the clock by 1
    with t.section("outer"):  # start mark reads 1
        c.advance(10)
        with t.section("inner"):  # start mark reads 12
            c.advance(5)
        # inner end mark reads 18
    # outer end mark reads 19
    line = {s["name"]: s for s in t.timeline()}
    assert line["outer"]["start_ms"] == 1.0 and line["outer"]["duration_ms"] == 18.0
    assert line["inner"]["start_ms"] == 12.0
    assert line["inner"]["depth"] == 1 and line["inner"]["duration_ms"] == 6.0
    assert t.duration_ms("inner") == 6.0


def test_measure_repeated_runs_warmup_untimed():
    c = MockClock()
    calls = []

    def work():
        calls.append(1)
        c.advance(3.0)

    summary, raw = measure_repeated(work, c, warmup=2, repeats=4)
    assert len(calls) == 6 and raw == [3.0] * 4 and summary.mean == 3.0
    with pytest.raises(ValueError):
        measure_repeated(work, c, repeats=0)


def test_measure_layer_imports_no_transformers():
    import ast
    import pathlib

    root = pathlib.Path(clock_mod.__file__).parent
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n.split(".")[0] == "transformers" for n in names), path


def test_nested_sections_of_one_name_count_their_window_once():
    c = MockClock()
    t = Timer(c)
    with t.section("forward"):  # 0 .. 10
        c.advance(2)
        with t.section("forward"):  # a recursive call: 2 .. 5, inside the outer window
            c.advance(3)
        c.advance(5)
    c.advance(10)
    with t.section("forward"):  # 20 .. 24
        c.advance(4)
    assert t.duration_ms("forward") == 14.0
    assert [s.depth for s in t.sections] == [0, 1, 0]


def test_timers_used_from_two_threads_keep_each_threads_nesting():
    import threading

    t = Timer(PerfCounterClock())
    barrier = threading.Barrier(2)

    def work(tag):
        with t.section(f"outer-{tag}"):
            barrier.wait()  # both outer sections are open at once
            with t.section(f"inner-{tag}"):
                barrier.wait()

    threads = [threading.Thread(target=work, args=(k,), name=f"w{k}") for k in (0, 1)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=10)
    depth = {s.name: (s.depth, s.thread) for s in t.sections}
    assert depth == {
        "outer-0": (0, "w0"),
        "outer-1": (0, "w1"),
        "inner-0": (1, "w0"),
        "inner-1": (1, "w1"),
    }
    assert all(s.end is not None for s in t.sections)
    assert t.duration_ms("outer-0") >= t.duration_ms("inner-0") > 0


def test_timer_rows_land_on_a_given_timeline_and_summarise_per_name():
    from infermeter.measure.timer import section_summary

    c = MockClock()
    origin = c.mark()  # a run's origin, before the timer exists
    c.advance(100)
    t = Timer(c)
    for ms in (2.0, 3.0, 2.0, 40.0):  # the last call stalls: an outlier of its name
        with t.section("step"):
            c.advance(ms)
    rows = t.rows(origin, offset_ms=1000.0)
    assert_rows_are(rows, SectionRowDoc)
    assert [r["ms"] for r in rows] == [2.0, 3.0, 2.0, 40.0]
    assert rows[0]["start_ms"] == 1100.0 and rows[1]["start_ms"] == 1102.0
    assert t.rows()[0]["start_ms"] == 0.0  # the timer's own origin by default
    (summary,) = section_summary(rows)
    assert set(summary) == doc_keys(SectionSummaryDoc)
    assert summary["name"] == "step" and summary["calls"] == 4 and summary["total_ms"] == 47.0
    assert summary["median_ms"] == 2.5 and summary["max_ms"] == 40.0 and summary["outliers"] == 1
