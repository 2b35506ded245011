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
    assert summarize([1, 100]).noisy  # two samples far apart are flagged too (issue 59)


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


def test_the_headline_is_the_median_with_its_interval_and_names_itself():
    s = summarize([10.0, 11.0, 10.5, 12.0, 11.5, 10.8, 11.2])
    assert s.median == s.p50 == 11.0
    assert s.median_ci95_low <= 11.0 <= s.median_ci95_high
    d = s.to_dict()
    assert d["statistic"] == "median" and d["median_ci95_low"] == s.median_ci95_low
    assert d["outliers"] == [] and d["noisy"] is False


def test_one_slow_sample_is_marked_kept_and_named():
    from infermeter.measure.stats import outlier_notes

    ttft = [21.0, 22.0, 23.0, 22.5, 312.0, 21.5]
    s = summarize(ttft)
    assert s.outliers == (4,) and s.n == 6 and s.max == 312.0  # kept in the data
    assert s.noisy
    # the median barely moves where the mean is dragged 2.5x
    assert s.median == pytest.approx(22.25) and s.mean > 2.5 * s.median
    assert outlier_notes(ttft, "ttft_ms") == ["sample 4: ttft_ms 14.0x the median (312 vs 22.25)"]
    # None (a sample without the metric) keeps the numbering of the run's samples
    assert outlier_notes([None, *ttft], "ttft_ms")[0].startswith("sample 5:")


def test_a_tight_run_has_no_outliers_even_past_the_z_score():
    """1% wobble is not an outlier, however small the spread of the rest."""
    assert summarize([100.0, 100.0, 100.0, 100.0, 101.0]).outliers == ()
    assert summarize([100.0, 100.1, 99.9, 100.0, 150.0]).outliers == (4,)


def test_the_median_interval_of_many_samples_uses_order_statistics():
    from infermeter.measure.stats import median_ci

    values = list(range(1001))
    lo, hi = median_ci(values)
    assert lo < 500 < hi and (hi - lo) == pytest.approx(2 * 1.96 * math.sqrt(1001) / 2, abs=3)


def test_a_run_compared_with_itself_shows_no_difference():
    from infermeter.measure.stats import compare_samples

    same = [20.1, 22.0, 19.5, 21.3, 80.0]
    c = compare_samples(same, same)
    assert c["speedup"] == 1.0 and c["verdict"] == "no detectable difference"
    assert c["ci95_low"] <= 1.0 <= c["ci95_high"] and c["p_value"] == 1.0
    assert compare_samples([1.0], [2.0])["verdict"] == "too few samples to tell"


def test_a_10pct_effect_in_3pct_noise_is_found_at_20_samples_and_no_effect_is_not_claimed():
    """Seeded trials: power for a real difference, and the false-claim rate for none."""
    import numpy as np

    from infermeter.measure.stats import compare_samples

    rng = np.random.default_rng(7)
    found = claimed = 0
    trials = 200
    for _ in range(trials):
        base = 100 * (1 + 0.03 * rng.standard_normal(20))
        slower = 110 * (1 + 0.03 * rng.standard_normal(20))
        same = 100 * (1 + 0.03 * rng.standard_normal(20))
        found += compare_samples(base, slower)["verdict"] == "slower"
        claimed += compare_samples(base, same)["verdict"] in ("faster", "slower")
    assert found == trials
    assert claimed <= 0.05 * trials


def test_an_unresolved_difference_says_how_many_samples_would_resolve_it():
    from infermeter.measure.stats import compare_samples

    base = [100.0, 104.0, 97.0, 101.0]
    variant = [103.0, 99.0, 106.0, 102.0]
    c = compare_samples(base, variant)
    assert c["samples_to_resolve"] > 4
    # the interval reaches past 5% either way: undecided, not "the same"
    assert c["ci95_low"] < 1 / 1.05 or c["ci95_high"] > 1.05
    assert (
        c["verdict"] == f"too few samples to tell; about {c['samples_to_resolve']} per side would"
    )


def test_paired_rounds_cancel_a_drift_that_fools_the_unpaired_test():
    """A machine that drifts by up to 30% between rounds: measured one run after the other,
    the drift reads as a difference; interleaved and paired by round, it cancels, and a real
    10% effect is still found."""
    import numpy as np

    from infermeter.measure.stats import compare_paired_samples, compare_samples

    rng = np.random.default_rng(11)
    trials, n = 200, 20
    fooled = claimed = found = 0
    for _ in range(trials):
        drift = np.exp(np.cumsum(0.05 * rng.standard_normal(2 * n)))  # a random walk
        noise = lambda: 1 + 0.03 * rng.standard_normal(n)  # noqa: E731
        # sequential: A in the first n rounds, B (the same configuration) in the next n
        a_seq, b_seq = 100 * drift[:n] * noise(), 100 * drift[n:] * noise()
        fooled += compare_samples(a_seq, b_seq)["verdict"] in ("faster", "slower")
        # interleaved: both arms in every round
        d = drift[::2]
        same = compare_paired_samples(100 * d * noise(), 100 * d * noise())
        claimed += same["verdict"] in ("faster", "slower")
        slower = compare_paired_samples(100 * d * noise(), 110 * d * noise())
        found += slower["verdict"] == "slower"
    assert fooled > trials / 2  # why sequential runs carry a caveat
    assert claimed <= 0.05 * trials
    assert found == trials


def test_paired_comparison_fields_and_too_few_rounds():
    from infermeter.measure.stats import compare_paired_samples

    c = compare_paired_samples([10.0, 20.0, 30.0, None, 40.0], [5.0, 10.0, 15.0, 7.0, 20.0])
    assert c["paired"] and c["samples"] == [4, 4]  # the pair with a missing value dropped
    assert c["speedup"] == pytest.approx(2.0) and c["ci95_low"] == pytest.approx(2.0)
    same = compare_paired_samples([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0])
    assert same["verdict"] == "no detectable difference" and same["p_value"] == 1.0
    assert compare_paired_samples([1.0, 2.0], [1.0, 2.0])["verdict"] == "too few samples to tell"


def test_too_few_rounds_never_promise_less_than_the_test_needs():
    """4 rounds where one disagrees: Wilcoxon cannot reach p < 0.05 below 6 pairs and the
    rounds do not all agree, so the verdict waits, and the samples it asks for are at least 6
    (3 vs 3 unpaired whose samples overlap: at least 4)."""
    from infermeter.measure.stats import compare_paired_samples, compare_samples

    c = compare_paired_samples([200.0, 210.0, 190.0, 95.0], [100.0, 101.0, 99.0, 102.0])
    assert c["verdict"].startswith("too few samples to tell") and c["samples_to_resolve"] >= 6
    u = compare_samples([200.0, 210.0, 100.5], [100.0, 101.0, 99.0])
    assert u["verdict"].startswith("too few samples to tell") and u["samples_to_resolve"] >= 4


def test_a_clear_difference_of_few_samples_is_called_whatever_the_rank_test_says():
    """Issue 59: a 3.8x decode slowdown, 3 samples a side, interval 0.23-0.30, was called "no
    detectable difference" (Mann-Whitney's p cannot go below 0.1 at 3 vs 3), and
    `--fail-if-slower` exited 0: a gate that failed open. Samples apart and the whole interval
    beyond 1 by more than 5% is a difference; 2 a side, or samples that overlap, are not."""
    from infermeter.measure.stats import compare_paired_samples, compare_samples

    slow = compare_samples([10.0, 10.4, 9.8], [38.0, 39.5, 37.2])
    assert slow["p_value"] >= 0.1 and slow["ci95_high"] < 0.3
    assert slow["verdict"] == "slower"
    fast = compare_paired_samples([200.0, 210.0, 190.0, 205.0], [100.0, 101.0, 99.0, 102.0])
    assert fast["verdict"] == "faster"
    # apart, but within 5% of 1: noise of this size is not claimed on 3 samples
    near = compare_samples([100.0, 100.5, 101.0], [102.0, 102.5, 103.0])
    assert near["verdict"] == "no detectable difference"
    # two a side: one sample's noise; a 3.8x difference is not ruled out, so not "the same"
    two = compare_samples([10.0, 10.2], [38.0, 39.0])
    assert (
        two["verdict"]
        == f"too few samples to tell; about {two['samples_to_resolve']} per side would"
    )


def test_two_far_apart_times_are_noisy_and_their_interval_stays_at_or_above_zero():
    """Issue 59: TTFTs of 483 and 3,170 ms gave no noisy flag (it needed 3 samples) and a
    mean's 95% interval from -1,981 ms."""
    from infermeter.measure.stats import summarize

    s = summarize([483.0, 3170.0])
    assert s.noisy
    assert s.ci95_low == 0.0 and s.ci95_high > 3170
    signed = summarize([-5.0, 5.0])  # a quantity that can be negative keeps its interval
    assert signed.ci95_low < -5
    assert not summarize([100.0, 101.0]).noisy
