"""Interleaved sweeps: points measured sample by sample in turn, stored, paired in compare."""

import pytest

from infermeter import RunConfig, Store
from infermeter.analysis.compare import compare_runs
from infermeter.errors import GenerationFailed, UserError
from infermeter.knobs.moe_topk import experts_per_token, routers
from infermeter.run.interleave import Arm, profile_interleaved
from infermeter.run.sweep import SweepSpec, run_sweep

BASE = RunConfig(
    model="tiny-qwen3-moe", new_tokens=3, samples=4, warmup=1, energy="off", mode="standard"
)


def _spec(**kw):
    return SweepSpec(BASE, {"top_k": ["1", "4"]}, name="ab", interleave=True, **kw)


def test_interleaved_sweep_alternates_the_points_and_pairs_them_in_compare(tiny_moe, tmp_path):
    store = Store(tmp_path / "s.db")
    before = [r.top_k for r in routers(tiny_moe.model)]
    result = run_sweep(_spec(), store, loaded=tiny_moe)
    a, b = result.runs
    assert [r.top_k for r in routers(tiny_moe.model)] == before  # every knob undone
    assert (a.knobs["top_k"], b.knobs["top_k"]) == (1, 4)
    assert a.status == b.status == "finished"
    ga, gb = a.config["interleaved"], b.config["interleaved"]
    assert ga == gb and ga["arms"] == 2
    # one warm-up + 4 measured per arm; round r runs A then B when r is even, B then A when odd
    assert len(a.samples) == len(b.samples) == 5
    for r in range(5):
        a_first = a.samples[r].start_ms < b.samples[r].start_ms
        assert a_first == (r % 2 == 0), r
        if r:  # each round starts after the previous one ended
            prev_end = max(
                a.samples[r - 1].start_ms + a.samples[r - 1].total_ms,
                b.samples[r - 1].start_ms + b.samples[r - 1].total_ms,
            )
            assert min(a.samples[r].start_ms, b.samples[r].start_ms) >= prev_end - 1.0
    # each arm's knob was verified by measurement, and applied only to its own samples
    assert a.checks["top_k"] == {"experts_per_token": 1}
    assert b.checks["top_k"] == {"experts_per_token": 4}
    assert any("interleaved with 1 other configuration" in n for n in a.notes)
    # standard mode: each arm's hooks saw only its own measured generations (4 prefills)
    for run in (a, b):
        blocks = [r for r in run.layers["layers"] if r["kind"] == "block"]
        assert {r["calls"] for r in blocks if r["phase"] == "prefill"} == {4}
        assert {len(r["sample_ms"]) for r in blocks} == {4}
    stored_a, stored_b = store.get(a.run_id), store.get(b.run_id)
    assert stored_a.config["interleaved"]["group"] == ga["group"]
    doc = compare_runs(stored_a, stored_b)
    assert doc["paired"] and not doc["drift_caveat"]
    assert doc["interleaved_group"] == ga["group"]
    assert doc["total"]["statistic"] == "median of per-round ratios (paired)"
    assert doc["total"]["samples"] == [4, 4]
    again = run_sweep(_spec(), store, loaded=tiny_moe)  # resumes: all done, nothing runs
    assert again.skipped == 2 and [r.run_id for r in again.runs] == [a.run_id, b.run_id]


def test_an_interleaved_sweep_is_another_sweep_and_refuses_what_needs_another_model(
    tiny_moe, tmp_path
):
    assert _spec().sweep_id != SweepSpec(BASE, {"top_k": ["1", "4"]}, name="ab").sweep_id
    store = Store(tmp_path / "s.db")
    for knobs, words in (
        ({"dtype": ["float32", "bfloat16"]}, "share one loaded model"),
        ({"compile": ["off", "on"]}, "torch.compile cannot interleave"),
        ({"top_k": ["2"]}, "at least two configurations"),
    ):
        spec = SweepSpec(BASE, knobs, interleave=True)
        with pytest.raises(UserError, match=words):
            run_sweep(spec, store, loaded=tiny_moe)
    assert store.list_sweeps() == []  # refused before anything was stored


def test_a_failing_arm_stops_every_arm_and_all_are_stored(tiny_llama, tmp_path):
    store = Store(tmp_path / "s.db")
    config = RunConfig(model="tiny-llama", new_tokens=3, samples=3, warmup=0, energy="off")
    calls = {"b": 0}

    class Boom:
        def __enter__(self):
            calls["b"] += 1
            if calls["b"] == 3:  # set-up, sample 0, then sample 1 fails
                raise RuntimeError("injected fault")

        def __exit__(self, *exc):
            return False

    arms = [Arm(config, {"arm": "a"}, label="arm a"), Arm(config, {"arm": "b"}, Boom, None, "b")]
    with pytest.raises(GenerationFailed):
        profile_interleaved(arms, tiny_llama, sink=store)
    rows = {r["id"]: r for r in store.list_runs()}
    assert len(rows) == 2
    runs = [store.get(i) for i in rows]
    by_arm = {r.knobs["arm"]: r for r in runs}
    assert by_arm["b"].status == "failed" and "injected fault" in by_arm["b"].error
    assert by_arm["a"].status == "failed"
    assert by_arm["a"].error == "stopped: the interleaved b failed (injected fault)"
    # round 0 ran A then B; round 1 ran B (failed) first: A kept its sample of round 0
    assert len(by_arm["a"].samples) == 1 and len(by_arm["b"].samples) == 1


def test_each_arm_gets_its_own_knob_during_its_own_samples(tiny_moe):
    """The experts each token uses, measured inside each arm's samples, are that arm's."""
    from infermeter.knobs import get_knob

    knob = get_knob("top_k")
    seen: dict[int, set[int]] = {1: set(), 2: set()}
    config = RunConfig(model="tiny-qwen3-moe", new_tokens=2, samples=2, warmup=0, energy="off")

    def arm(k):
        def apply():
            return _recording(knob.apply(tiny_moe, k), k)

        return Arm(config, {"top_k": k}, apply)

    class _recording:
        def __init__(self, inner, k):
            self.inner, self.k = inner, k

        def __enter__(self):
            self.inner.__enter__()
            seen[self.k].update(experts_per_token(tiny_moe))

        def __exit__(self, *exc):
            return self.inner.__exit__(*exc)

    runs = profile_interleaved([arm(1), arm(2)], tiny_moe)
    assert seen == {1: {1}, 2: {2}}
    assert [r.status for r in runs] == ["finished", "finished"]
