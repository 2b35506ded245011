"""`bench/eta.py`: the time a benchmark has left, from its finished points' times."""

from __future__ import annotations

import pytest

from infermeter.bench.eta import Eta, duration_text


def _cost(group: str, n: int) -> float:
    """A quadratic law, and a second group at three times the scale."""
    return (3.0 if group == "b" else 1.0) * (n / 512) ** 2


def test_the_estimate_follows_a_cost_that_grows_with_the_length():
    lengths = [512, 1024, 2048, 4096]
    planned = [(g, n) for g in ("a", "b") for n in lengths]
    eta = Eta(planned)
    truth = [_cost(g, n) for g, n in planned]
    said = [eta.observe(g, n, t) for (g, n), t in zip(planned, truth, strict=True)]
    assert said[0].left_s is not None and said[0].done == 1 and said[0].total == 8
    # from the second length on, "a"'s own points are priced from its law
    # "b" not started: priced at "a"'s scale (its own is unknown until its first point)
    assert said[1].left_s == pytest.approx(16 + 64 + (1 + 4 + 16 + 64), rel=0.01)
    for i in range(4, 7):  # "b" started: its scale measured, the law shared
        left = sum(truth[i + 1 :])
        assert said[i].left_s == pytest.approx(left, rel=0.05), (i, said[i].left_s, left)
    assert said[-1].left_s == 0.0
    assert eta.exponent() == pytest.approx(2.0, abs=1e-9)  # the quadratic law, found exactly


def test_counting_points_would_have_been_far_off():
    """The reason for the fit: after the first of four lengths, a point count says 3 more of
    the same; the quadratic law leaves 84 times the first point's time."""
    eta = Eta([("a", n) for n in (512, 1024, 2048, 4096)])
    eta.observe("a", 512, 1.0)
    eta.observe("a", 1024, 4.0)
    assert eta.remaining_s() == pytest.approx(16.0 + 64.0, rel=0.01)


def test_nothing_is_estimated_before_a_point_ends_and_the_text_is_rounded():
    assert Eta([("a", 8)]).remaining_s() is None
    assert duration_text(0.2) == "about 1 s"
    assert duration_text(150) == "about 2 min"
    assert duration_text(4800) == "about 1 h 20 min"
    assert duration_text(7200) == "about 2 h"
