"""The drift verdict on known rows (issue 54): a server that changes speed halfway through a
run is called moved, however the halves sit around the whole run's median; a steady, noisy one
is not. A capacity search names a failing step that ran a slower server."""

from __future__ import annotations

import math

import numpy as np

from infermeter.serving.drift import drift_verdict


def _rows(decode_ms: list[float]) -> list[dict]:
    return [
        {"arrival_ms": 10.0 * i, "error": None, "server_decode_ms_per_token": v, "tpot_ms": v}
        for i, v in enumerate(decode_ms)
    ]


def test_a_step_halfway_is_drift_even_though_the_run_median_interval_spans_both_speeds():
    rng = np.random.default_rng(1)
    first = list(6.0 + rng.normal(0, 0.3, 12))
    second = list(15.0 + rng.normal(0, 0.3, 12))
    d = drift_verdict(_rows(first + second))
    assert d is not None and d.source == "server" and d.moved
    assert 2.2 < d.ratio < 2.8
    assert d.first_ci_ms[1] < d.last_ci_ms[0]
    assert "changed speed" in d.line()


def test_steady_noise_is_not_drift_and_a_small_step_is_not_either():
    rng = np.random.default_rng(2)
    steady = list(20.0 + rng.normal(0, 2.0, 24))
    d = drift_verdict(_rows(steady))
    assert d is not None and not d.moved and "steady" in d.line()
    # 5% apart, perfectly separated: real, but under the 10% a busy host moves any server
    small = [20.0 + 0.01 * i for i in range(12)] + [21.0 + 0.01 * i for i in range(12)]
    d = drift_verdict(_rows(small))
    assert d is not None and not d.moved and d.p_value < 0.05


def test_too_few_requests_give_no_verdict_and_the_client_tpot_stands_in_for_server_timings():
    assert drift_verdict(_rows([5.0] * 15)) is None
    rows = [{**r, "server_decode_ms_per_token": None} for r in _rows([5.0] * 8 + [9.0] * 8)]
    d = drift_verdict(rows)
    assert d is not None and d.source == "client" and d.moved


def _search(own: dict[float, float], worst: float | None) -> dict:
    steps = [{"rate": r, "server_decode_ms_p50": v} for r, v in own.items()]
    return {"steps": steps, "first_failing_rate": worst}


def test_capacity_steps_say_when_the_failing_step_ran_a_slower_server():
    from infermeter.serving.capacity import server_line

    assert server_line(_search({1.0: 10.0, 2.0: 10.5, 4.0: 10.2}, 4.0)).endswith("(steady)")
    slow = server_line(_search({1.0: 10.0, 2.0: 10.5, 4.0: 16.0}, 4.0))
    assert slow is not None and "x1.60" in slow and "run that step again" in slow
    # the slow step is not a boundary: said, but the bound stands
    aside = server_line(_search({1.0: 16.0, 2.0: 10.0, 4.0: 10.4}, 4.0))
    assert aside is not None and "boundary steps are within 10%" in aside
    assert server_line(_search({1.0: math.nan, 2.0: 10.0}, 2.0)) is None
