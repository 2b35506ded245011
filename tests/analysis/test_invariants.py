"""Invariants that every figure must keep, driven over many generated workloads (hypothesis).

- no prediction below its own roofline bounds (a batch-32 TTFT of 2,881 ms was printed under
  its compute bound of 4,430 ms once factors learnt on small runs shrank the device work);
- a breakdown's parts add up to its total, or the remainder is a named row (analyze listed
  parts adding up to ten times its own prediction).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infermeter.analysis.predict import Learned, Workload, at_least_bounds, predict
from infermeter.analysis.timemodel import DeviceModel, ForwardTime
from infermeter.models.presets import PRESETS, build_config
from infermeter.models.shape import shape_of
from infermeter.models.tokenizer import builtin_tokenizer

SHAPES = {
    name: shape_of(build_config(PRESETS[name], builtin_tokenizer()))
    for name in ("tiny-llama", "tiny-qwen3-moe", "llama-3.2-1b")
}
factor = st.floats(0.02, 20.0)


@st.composite
def cases(draw):
    gpu = draw(st.booleans())
    dev = DeviceModel(
        "generated",
        "gpu" if gpu else "cpu",
        draw(st.floats(1e10, 1e15)),
        draw(st.floats(1e9, 5e12)),
        op_seconds=draw(st.floats(0, 5e-5)),
        generate_first_seconds=draw(st.floats(0, 1e-2)),
        generate_step_seconds=draw(st.floats(0, 1e-3)),
    )
    learned = Learned(
        runs=3,
        factors={
            p: {"work": draw(factor), "host": draw(factor)}
            for p in draw(st.sets(st.sampled_from(["prefill", "decode"])))
        },
    )
    w = Workload(
        batches=sorted(draw(st.sets(st.integers(1, 256), min_size=1, max_size=4))),
        prompt_tokens=draw(st.integers(1, 8192)),
        new_tokens=draw(st.integers(1, 512)),
        dtype=draw(st.sampled_from(["float32", "bfloat16"])),
        gpus=1,
        tp=1,
        top_k=None,
    )
    return draw(st.sampled_from(sorted(SHAPES))), dev, learned, w


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_no_prediction_is_below_its_own_bounds_and_parts_add_up(case):
    name, dev, learned, w = case
    shape = SHAPES[name]
    doc = predict(shape, 10**6, dev, w, None, learned)
    for row in doc["rows"]:
        for phase, metric in (("prefill", "ttft_ms"), ("decode", "tpot_ms")):
            t = row[phase]
            floor = max(
                v or 0.0 for v in (t["compute_bound_s"], t["memory_bound_s"], t["comm_bound_s"])
            )
            assert row[metric] >= floor * 1e3 * (1 - 1e-9), (phase, row[metric], floor)
        for note in row["notes"]:  # raised to a bound: the note names the metric
            assert note.startswith(("TTFT:", "TPOT:")) and "the bound is the prediction" in note
    for phase in ("prefill", "decode"):
        t = ForwardTime(**{k: v for k, v in doc["rows"][0][phase].items() if k != "bound"})
        total, _ = learned.predicted(phase, t)
        # `parts` leaves out a remainder under 1 ps + 1e-9 of the total (hypothesis found a
        # 0.06 ps one on a 62 us step): the parts add up within exactly that
        assert sum(learned.parts(phase, t).values()) == pytest.approx(total, rel=1e-9, abs=1e-12)


def test_a_time_under_its_bound_is_raised_to_it_and_says_so():
    t = ForwardTime(total_s=2.881, compute_bound_s=4.430, memory_bound_s=0.5)
    assert at_least_bounds(2.881, t) == (
        4.430,
        "the time model gave 2881 ms, below its compute bound of 4430 ms: the bound is the "
        "prediction",
    )
    assert at_least_bounds(5.0, t) == (5.0, None)
    learned = Learned(runs=2, factors={"prefill": {"work": 0.5, "host": 1.0}})
    t = ForwardTime(gemm_s=6.0, overhead_s=0.1, total_s=6.1, compute_bound_s=4.43)
    total, note = learned.predicted("prefill", t)
    assert total == 4.43 and note
    parts = learned.parts("prefill", t)
    assert parts["gemm"] == 3.0 and parts["up to the roofline bound"] == pytest.approx(4.43 - 3.1)


def test_compare_predicts_every_pair_of_a_sweep_from_one_model(tiny_moe):
    """Predicted speedups compose (a->b x b->c = a->c) and point the way the work moves.

    Before: 1.000x for prefill when top_k went 1 -> 8, but 0.262x for 2 -> 4 (predictions made
    under different models). With the calibrated curves of tests/analysis/test_predict.py's
    synthetic device, and without any ceilings (first-order cost ratios).
    """
    from itertools import permutations

    from infermeter import RunConfig, profile
    from infermeter.analysis.compare import compare_runs
    from infermeter.knobs import KNOBS
    from infermeter.measure.ceilings import Ceilings
    from tests.analysis.test_predict import _synthetic_curves

    cfg = RunConfig(model="tiny-qwen3-moe", prompt_tokens=32, new_tokens=3, samples=1, energy="off")
    runs = {}
    for k in (1, 2, 4, 8):
        with KNOBS["top_k"].apply(tiny_moe, k):
            runs[k] = profile(cfg, loaded=tiny_moe, knobs={"top_k": k})
    shape = shape_of(tiny_moe.model.config)
    curves = _synthetic_curves(shape).to_dict()
    calibrated = Ceilings(
        "synthetic",
        {"float32": 1e12},
        1e10,
        "test",
        True,
        {"curves": {"float32": curves}, "kind": "cpu"},
    )
    for ceilings in (calibrated, None):
        pred = {}
        for a, b in permutations(runs, 2):
            doc = compare_runs(runs[a], runs[b], ceilings)
            pred[a, b] = {p["phase"]: p["predicted_speedup"] for p in doc["phases"]}
        for a, b, c in ((1, 2, 4), (1, 4, 8), (2, 4, 8), (8, 2, 1)):
            for phase in ("prefill", "decode"):
                assert pred[a, b][phase] * pred[b, c][phase] == pytest.approx(
                    pred[a, c][phase], rel=1e-9
                )
        for a, b in ((1, 2), (2, 4), (4, 8), (1, 8)):  # more experts per token: more work
            assert pred[a, b]["prefill"] < 1 and pred[b, a]["prefill"] > 1


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(SHAPES)),
    st.booleans(),
    st.floats(1e10, 1e15),
    st.floats(1e9, 5e12),
    st.floats(0.02, 20.0),
    st.floats(0.02, 20.0),
    st.integers(1, 2048),
    st.integers(1, 64),
    st.integers(0, 8192),
)
def test_no_load_step_is_below_its_roofline_floor(
    name, gpu, peak, bandwidth, linear, attention, tokens, requests, keys
):
    """Issue 55, item 8: `load predict`'s steps, like `predict`'s forwards, never fall below
    their own roofline floor, whatever factors were learnt from stored loads."""
    from infermeter.analysis.stepcost import StepCost, StepFactors, StepLoad

    dev = DeviceModel("generated", "gpu" if gpu else "cpu", peak, bandwidth)
    factors = StepFactors(linear=linear, attention=attention, kv_copy=linear, host=attention)
    cost = StepCost(SHAPES[name], dev, 2, factors=factors)
    requests = min(requests, tokens)
    load = StepLoad(tokens, tokens + keys, requests, tokens - requests)
    assert cost.seconds(load) >= cost.bound(load) > 0
