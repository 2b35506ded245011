"""Decode steps streamed to the live page from a watcher thread while a sample generates."""

import sys

from infermeter import RunConfig, Store, profile
from infermeter.run import live_steps
from infermeter.run.generation import StepRecorder
from infermeter.run.progress import LiveProgress


class _Clock:
    def __init__(self, name):
        self.name = name

    def mark(self):
        return 0

    def elapsed_ms(self, a, b):
        return float(b - a)


def _recorder(clock, marks, capacity=8):
    r = StepRecorder.__new__(StepRecorder)
    r.clock, r.start, r.marks, r.count = clock, 100, [None] * capacity, 0
    for m in marks:
        r.marks[r.count] = m
        r.count += 1
    return r


def test_snapshot_of_host_marks_and_of_cuda_events():
    host = _Clock("perf_counter")
    snap = live_steps.snapshot(_recorder(host, [110, 113, 117]), host)
    assert snap == {"tokens": 3, "of": 8, "ttft_ms": 10.0, "step_ms": [3.0, 4.0], "first_step": 0}
    cuda = _Clock("cuda_event")  # reading an event would synchronise the device: count only
    snap = live_steps.snapshot(_recorder(cuda, [110, 113]), cuda)
    assert snap == {"tokens": 2, "of": 8, "ttft_ms": None, "step_ms": []}
    many = live_steps.snapshot(_recorder(host, list(range(100, 400)), 300), host)
    assert len(many["step_ms"]) == live_steps.MAX_STEPS
    assert many["first_step"] == 300 - live_steps.MAX_STEPS - 1


class _Recording(Store):
    """A real store that also remembers every progress state written."""

    def __init__(self, path):
        super().__init__(path)
        self.states = []

    def progress(self, key, state):
        self.states.append(None if state is None else dict(state))
        super().progress(key, state)


def test_a_profile_streams_its_steps_while_generating(tiny_llama, tmp_path, monkeypatch):
    monkeypatch.setattr(live_steps, "INTERVAL_S", 0.01)
    monkeypatch.setattr(LiveProgress, "MIN_INTERVAL_S", 0.0)
    store = _Recording(tmp_path / "r.db")
    config = RunConfig(
        model="tiny-llama", prompt_tokens=16, new_tokens=64, samples=2, warmup=0, energy="off"
    )
    run = profile(config, loaded=tiny_llama, sink=store)
    mid = [s["steps"] for s in store.states if s and s.get("steps")]
    assert mid, "no step was streamed during a generation"
    partial = [m for m in mid if m["tokens"] < 64]
    assert partial, "every streamed state came after the sample ended"
    for m in mid:
        assert m["of"] == 64 and len(m["step_ms"]) == m["tokens"] - 1
        assert m["ttft_ms"] > 0 and all(x > 0 for x in m["step_ms"])
    # what was streamed is what the sample then reported (the same marks)
    first = run.samples[0]
    m = next(m for m in mid if m["ttft_ms"] == first.ttft_ms)
    assert m["step_ms"] == list(first.step_ms[: len(m["step_ms"])])
    # between samples and at the end the running sample's steps are cleared
    assert store.states[-1] is None and store.progress_rows() == []
    done_states = [s for s in store.states if s and s["stage"] == "sample" and s["done"] == 2]
    assert done_states[-1]["steps"] is None


def test_no_store_no_thread(tiny_llama, tmp_path, monkeypatch):
    import contextlib

    started = []

    def fake(*args):
        started.append(args)
        return contextlib.nullcontext()

    monkeypatch.setattr(sys.modules["infermeter.run.profiling"], "watching", fake)
    config = RunConfig(model="tiny-llama", prompt_tokens=16, new_tokens=4, samples=1, energy="off")
    profile(config, loaded=tiny_llama)  # the Python API without a store: nobody is watching
    assert started == []
    profile(config, loaded=tiny_llama, sink=Store(tmp_path / "r.db"))
    assert len(started) == 2  # a store keeps progress: one watcher per sample (warm-up too)
