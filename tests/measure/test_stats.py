import math

import pytest

from infermeter.measure.stats import summarize, t95


def test_summary_of_one_to_ten_matches_hand_computation():
    s = summarize(range(1, 11))
    assert s.n == 10
    assert s.mean == pytest.approx(5.5)
    assert s.std == pytest.approx(3.0276503540974917)  # sample std, ddof=1
    assert (s.min, s.max) == (1.0, 10.0)
    assert s.p50 == pytest.approx(5.5)
    assert s.p90 == pytest.approx(9.1)
    assert s.p99 == pytest.approx(9.91)
    half = 2.262 * 3.0276503540974917 / math.sqrt(10)
    assert s.ci95_low == pytest.approx(5.5 - half)
    assert s.ci95_high == pytest.approx(5.5 + half)


def test_noise_flag_follows_coefficient_of_variation():
    assert not summarize([100, 101, 99, 100]).noisy
    assert summarize([100, 150, 60, 100]).noisy
    assert not summarize([1, 100]).noisy  # two samples: too few to call it noise


def test_empty_and_nan_inputs():
    assert summarize([]).n == 0
    assert math.isnan(summarize([]).mean)
    s = summarize([1.0, float("nan"), 3.0])
    assert s.n == 2 and s.mean == 2.0
    assert summarize([]).to_dict()["mean"] is None


def test_single_value_has_no_interval():
    s = summarize([4.0])
    assert s.std == 0.0 and math.isnan(s.ci95_low)


def test_t_table_values_and_limits():
    assert t95(1) == 12.706
    assert t95(30) == 2.042
    assert t95(45) > 1.96 and t95(45) < 2.042
    assert t95(1000) == 1.96
    assert math.isnan(t95(0))


def test_bootstrap_median_interval_brackets_the_median_and_is_seeded():
    from infermeter.measure.stats import bootstrap_median_ci

    values = [0.98, 1.0, 1.01, 1.02, 0.99, 1.03, 1.0, 1.05]
    lo, hi = bootstrap_median_ci(values)
    assert lo <= 1.005 <= hi and hi - lo < 0.05
    assert bootstrap_median_ci(values) == (lo, hi)
    assert bootstrap_median_ci([2.0] * 5) == (2.0, 2.0)
