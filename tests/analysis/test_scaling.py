"""Scaling fits on constructed data: each verdict fires where it must and only there."""

import pytest

from infermeter.analysis.scaling import fit_scaling

L = [64, 128, 256, 512, 1024]


def test_constant_per_token_time():
    fit = fit_scaling(L, [2.0, 2.02, 1.99, 2.01, 2.03])
    assert fit.verdict == "constant" and abs(fit.loglog_slope) < 0.02


def test_linear_growth_is_poor_with_evidence():
    fit = fit_scaling(L, [0.01 * x for x in L], metric="ms per token", length="tokens")
    assert fit.verdict == "poor"
    assert fit.loglog_slope == pytest.approx(1.0, abs=1e-6)
    assert "ms per token goes from 0.64 at 64 tokens to 10.2 at 1024" in fit.evidence


def test_quadratic_fit_recovers_coefficients():
    ys = [1.0 + 0.002 * x + 1e-6 * x * x for x in L]
    fit = fit_scaling(L, ys)
    assert fit.linear == pytest.approx(0.002, rel=1e-3)
    assert fit.quadratic == pytest.approx(1e-6, rel=1e-3)
    assert fit.poly_r2 == pytest.approx(1.0)
    assert fit.verdict == "growing"


def test_falling_when_fixed_costs_amortise():
    assert fit_scaling(L, [10 / x + 0.01 for x in L]).verdict == "falling"


def test_too_few_points_gives_no_fit():
    assert fit_scaling([64, 128], [1.0, 1.1]) is None
    assert fit_scaling([64, 64, 64], [1.0, 1.1, 1.2]) is None
