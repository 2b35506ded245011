"""The statistics policy: what every figure of a metric over samples is, and how sure it is.

On a shared machine one sample can be 10x the others, so the *headline* of a metric is its
median, with a 95% interval of the median (bootstrap: 2000 seeded resamples; beyond 200
samples the distribution-free order-statistic interval, which the bootstrap converges to).
Outlier samples are found by the median absolute deviation (modified z-score above 3.5,
Iglewicz and Hoaglin, and at least 25% from the median so that a tight run does not flag
its wobbles); they stay in the data and are named ("sample 1: 14.0x the median"). The mean,
its Student-t interval, the standard deviation and the percentiles are kept beside it.

Results keep the raw samples; a `Summary` is always recomputed from them, never stored alone.
Percentiles use linear interpolation (numpy's default), the standard deviation is the sample
standard deviation (ddof=1).

A difference between two sets of samples is claimed only when the data support it:
`compare_samples` gives the ratio of medians with a bootstrap interval, and calls it faster
or slower when that interval excludes 1 *and* a Mann-Whitney U test rejects "same
distribution" at 5% (two tests, so noise alone claims a difference in fewer than 5% of
comparisons), or, from 3 samples a side, when the whole interval lies beyond 1 by more than
`CLEAR_MARGIN` (5%) and no sample of one run reaches the other's: three samples a side cannot
give the rank test a p below 0.1, and a 3.8x slowdown was called "no detectable difference"
while its interval read 0.23-0.30 (a CI gate that failed open). Otherwise "no detectable
difference", with the samples a run would need to resolve a difference of the size seen.

When the two sets were measured in the same rounds (an interleaved sweep: sample i of each
ran back to back), `compare_paired_samples` judges the per-round ratios instead: their
median with a bootstrap interval over rounds, and Wilcoxon's signed-rank test on their
logarithms. A drift of the machine moves both samples of a round alike and cancels in their
ratio, which two independent sets cannot offer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, TypedDict, cast

import numpy as np

# Two-sided 95% critical values of Student's t for 1..30 degrees of freedom (standard tables).
_T95 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)

#: Coefficient of variation above which a summary is flagged as noisy.
NOISY_CV = 0.10
#: Modified z-score above which a sample is an outlier (Iglewicz and Hoaglin).
OUTLIER_Z = 3.5
#: ... and it must also be this far from the median, as a share of the median.
OUTLIER_MIN_SHARE = 0.25
#: The statistic every headline figure shows.
HEADLINE = "median"
#: Bootstrap resamples, and the sample count above which the order-statistic interval is used.
RESAMPLES = 2000
BOOTSTRAP_MAX_N = 200


def t95(dof: int) -> float:
    """Two-sided 95% Student-t critical value; beyond 30 dof, interpolated towards 1.960."""
    if dof < 1:
        return math.nan
    if dof <= 30:
        return _T95[dof - 1]
    if dof <= 60:
        return 2.042 + (2.000 - 2.042) * (dof - 30) / 30
    if dof <= 120:
        return 2.000 + (1.980 - 2.000) * (dof - 60) / 60
    return 1.960


class SummaryDoc(TypedDict):
    """`Summary.to_dict`: its fields, NaN as None, the headline's name and the noise flag."""

    n: int
    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    ci95_low: float | None
    ci95_high: float | None
    median_ci95_low: float | None
    median_ci95_high: float | None
    outliers: list[int]
    #: which field is the headline figure ("median")
    statistic: str
    noisy: bool


@dataclass(frozen=True)
class Summary:
    """Statistics of one metric over samples. Units are those of the samples."""

    n: int
    mean: float
    std: float
    min: float
    max: float
    p50: float
    p90: float
    p99: float
    ci95_low: float
    ci95_high: float
    #: 95% interval of the median (the headline figure)
    median_ci95_low: float = math.nan
    median_ci95_high: float = math.nan
    #: positions (in the order given) of outlier samples
    outliers: tuple[int, ...] = ()

    @property
    def median(self) -> float:
        """The headline figure."""
        return self.p50

    @property
    def cv(self) -> float:
        """Coefficient of variation (std / mean); nan when undefined."""
        if self.n < 2 or not self.mean:
            return math.nan
        return self.std / abs(self.mean)

    @property
    def noisy(self) -> bool:
        """True when the samples spread too much (or hold an outlier) to trust one figure.

        From 2 samples on: a TTFT of 483 and 3,170 ms went unflagged when it took 3.
        """
        return self.n >= 2 and (self.cv > NOISY_CV or bool(self.outliers))

    def to_dict(self) -> SummaryDoc:
        """Plain dict of the summary fields (mean, std, p50, p90, p99, ...); NaN as None.

        `statistic` names the headline (the median) and `noisy` travels with the figures.
        """
        out: dict[str, Any] = asdict(self)
        out = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}
        out["outliers"] = list(self.outliers)
        return cast(SummaryDoc, {**out, "statistic": HEADLINE, "noisy": self.noisy})


def summarize(values: Iterable[float | None]) -> Summary:
    """Summarise raw samples; NaNs are dropped, an empty input gives an all-NaN summary.

    Outlier positions count the samples that remain after NaNs are dropped.
    """
    arr = np.asarray([v for v in values if v is not None], dtype=float)
    arr = arr[~np.isnan(arr)]
    n = int(arr.size)
    if n == 0:
        nan = math.nan
        return Summary(0, nan, nan, nan, nan, nan, nan, nan, nan, nan)
    mean = float(arr.mean())
    std = float(arr.std(ddof=1)) if n > 1 else 0.0
    p50, p90, p99 = (float(x) for x in np.percentile(arr, [50, 90, 99]))
    half = t95(n - 1) * std / math.sqrt(n) if n > 1 else math.nan
    # a quantity that cannot be negative (every time, count, rate) keeps its interval at 0 or
    # above: two TTFTs of 483 and 3,170 ms gave a mean's interval from -1,981 ms
    floor = 0.0 if arr.min() >= 0 else -math.inf
    med_lo, med_hi = median_ci(arr) if n > 1 else (math.nan, math.nan)
    return Summary(
        n=n,
        mean=mean,
        std=std,
        min=float(arr.min()),
        max=float(arr.max()),
        p50=p50,
        p90=p90,
        p99=p99,
        ci95_low=max(mean - half, floor),
        ci95_high=mean + half,
        median_ci95_low=med_lo,
        median_ci95_high=med_hi,
        outliers=tuple(outlier_indices(arr)),
    )


def median_ci(values: Iterable[float], seed: int = 0) -> tuple[float, float]:
    """95% interval of the median: seeded bootstrap, or order statistics beyond 200 samples."""
    arr = np.sort(np.asarray(list(values), dtype=float))
    n = arr.size
    if n > BOOTSTRAP_MAX_N:
        half = 1.96 * math.sqrt(n) / 2
        lo, hi = max(0, math.floor(n / 2 - half)), min(n - 1, math.ceil(n / 2 + half))
        return float(arr[lo]), float(arr[hi])
    return bootstrap_median_ci(arr, n=RESAMPLES, seed=seed)


def bootstrap_median_ci(
    values: Iterable[float], n: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the median, seeded (so a report is reproducible)."""
    rng = np.random.default_rng(seed)
    arr = np.asarray(list(values), dtype=float)
    meds = np.median(rng.choice(arr, size=(n, arr.size), replace=True), axis=1)
    lo, hi = np.percentile(meds, [2.5, 97.5])
    return float(lo), float(hi)


def outlier_indices(values: Iterable[float]) -> list[int]:
    """Positions of outlier samples: modified z-score above 3.5 and 25% or more off the median.

    The scale is the median absolute deviation (x 1.4826, normal-consistent); when more than
    half the samples are equal it is 0, and the mean absolute deviation (x 1.2533) stands in.
    Fewer than 3 samples have no outliers: there is no majority to be out of line with.
    """
    arr = np.asarray(list(values), dtype=float)
    if arr.size < 3:
        return []
    med = float(np.median(arr))
    dev = np.abs(arr - med)
    scale = 1.4826 * float(np.median(dev)) or 1.2533 * float(dev.mean())
    if not scale:
        return []
    far = (dev / scale > OUTLIER_Z) & (dev > OUTLIER_MIN_SHARE * abs(med))
    return [int(i) for i in np.flatnonzero(far)]


def outlier_notes(
    values: Iterable[float | None], metric: str, ids: list[int] | None = None
) -> list[str]:
    """One line per outlier sample: "sample 1: ttft_ms 14.0x the median (312 vs 22.3)".

    Sample numbers are `ids` (the run's sample indices) or positions in `values` (None and
    NaN skipped in the statistics but counted here, so they match the run's samples).
    """
    given = list(values)
    ids = ids if ids is not None else list(range(len(given)))
    kept = [(i, float(v)) for i, v in enumerate(given) if v is not None and not math.isnan(v)]
    if not kept:
        return []
    med = float(np.median([v for _, v in kept]))
    out = []
    for j in outlier_indices([v for _, v in kept]):
        i, v = kept[j]
        ratio = f"{v / med:.1f}x the median" if med else "off the median"
        out.append(f"sample {ids[i]}: {metric} {ratio} ({v:.4g} vs {med:.4g})")
    return out


#: p-value below which a rank test calls two sets of samples different
ALPHA = 0.05
#: an interval wholly this far beyond 1, with the two runs' samples apart, is a difference
#: whatever the rank test says (it cannot reach ALPHA with 3 samples a side)
CLEAR_MARGIN = 0.05
#: the fewest samples a side the clear-margin rule judges (2 a side is one sample's noise)
CLEAR_MIN_SAMPLES = 3
#: The fewest samples with which the rank tests can reach p < ALPHA at all (two-sided, exact):
#: Mann-Whitney needs 4 per group (3 vs 3 gives p >= 0.1), Wilcoxon's signed-rank 6 pairs
#: (5 give p >= 0.0625). `samples_to_resolve` never says less.
MIN_UNPAIRED = 4
MIN_PAIRED = 6


def compare_samples(
    baseline: Iterable[float | None], variant: Iterable[float | None], seed: int = 0
) -> dict[str, Any]:
    """Speedup of `variant` over `baseline` (ratio of medians, above 1: variant faster).

    Returns the ratio, its 95% bootstrap interval (both groups resampled, seeded), the
    Mann-Whitney U p-value, a verdict ("faster", "slower", "no detectable difference", or
    "too few samples to tell", with how many would), and `samples_to_resolve`: about how many
    samples per run would make a difference of the size seen detectable (the interval narrows
    as 1/sqrt(n)), when none was detected.
    """
    b = np.asarray([v for v in baseline if v is not None], dtype=float)
    v = np.asarray([x for x in variant if x is not None], dtype=float)
    b, v = b[~np.isnan(b)], v[~np.isnan(v)]
    out: dict[str, Any] = {"samples": [int(b.size), int(v.size)], "statistic": "ratio of medians"}
    mb, mv = (float(np.median(x)) if x.size else math.nan for x in (b, v))
    out["speedup"] = mb / mv if mv else None
    if b.size < 2 or v.size < 2 or not mv or not mb:
        return {
            **out,
            "ci95_low": None,
            "ci95_high": None,
            "p_value": None,
            "verdict": TOO_FEW,
            "samples_to_resolve": None,
        }
    rng = np.random.default_rng(seed)
    boot_b = np.median(rng.choice(b, size=(RESAMPLES, b.size)), axis=1)
    boot_v = np.median(rng.choice(v, size=(RESAMPLES, v.size)), axis=1)
    ratios = boot_b / np.where(boot_v == 0, np.nan, boot_v)
    lo, hi = (float(x) for x in np.nanpercentile(ratios, [2.5, 97.5]))
    from scipy.stats import mannwhitneyu  # only where a difference is judged: 1 s to import

    p = 1.0 if np.array_equal(np.sort(b), np.sort(v)) else float(mannwhitneyu(b, v).pvalue)
    apart = bool(b.min() > v.max() or v.min() > b.max())
    clear = apart and min(b.size, v.size) >= CLEAR_MIN_SAMPLES
    return _judgement(out, lo, hi, p, max(b.size, v.size), MIN_UNPAIRED, clear)


#: the verdict when the interval rules out a difference beyond CLEAR_MARGIN either way
NO_DIFFERENCE = "no detectable difference"
#: the verdict when the interval crosses 1 and reaches past the margin: undecided, not "same"
TOO_FEW = "too few samples to tell"


def within_margin(lo: float, hi: float) -> bool:
    """Whether a speedup interval lies inside 1 +- CLEAR_MARGIN (no difference worth one)."""
    return lo >= 1 / (1 + CLEAR_MARGIN) and hi <= 1 + CLEAR_MARGIN


def _judgement(
    out: dict[str, Any],
    lo: float,
    hi: float,
    p: float,
    n: int,
    fewest: int,
    clear: bool = False,
) -> dict[str, Any]:
    """`out` with the interval, p-value, verdict and the samples that would resolve it.

    Faster or slower when the interval excludes 1 and p < ALPHA, or when `clear` (the samples
    lie apart, enough of them) and the whole interval is beyond 1 by more than CLEAR_MARGIN.
    Otherwise "no detectable difference" only when the interval also rules out one beyond the
    margin; an interval reaching past it is "too few samples to tell; about N per side would"
    (a 3.8x slowdown at 2 samples a side was called "no detectable difference", issue 59):
    the interval narrows as 1/sqrt(n), and N is never fewer than the test needs (`fewest`).
    """
    beyond = lo > 1 + CLEAR_MARGIN or hi < 1 / (1 + CLEAR_MARGIN)
    detected = (p < ALPHA and (lo > 1 or hi < 1)) or (clear and beyond)
    speedup = out["speedup"]
    resolve = None
    if not detected and speedup != 1 and lo > 0:
        half_log = (math.log(hi) - math.log(lo)) / 2
        resolve = min(100_000, math.ceil(n * (half_log / abs(math.log(speedup))) ** 2))
        resolve = max(resolve, fewest)
    if detected:
        verdict = "faster" if speedup > 1 else "slower"
    elif within_margin(lo, hi) or speedup == 1:
        verdict = NO_DIFFERENCE  # the interval rules out a difference beyond the margin
    else:  # it reaches past the margin: a real difference is not ruled out, only unproven
        verdict = TOO_FEW + (f"; about {resolve} per side would" if resolve else "")
    return {
        **out,
        "ci95_low": lo,
        "ci95_high": hi,
        "p_value": p,
        "verdict": verdict,
        "samples_to_resolve": resolve,
    }


def compare_paired_samples(
    baseline: Iterable[float | None], variant: Iterable[float | None], seed: int = 0
) -> dict[str, Any]:
    """Speedup of `variant` over `baseline` from samples measured in pairs (same round).

    Pairs where either value is missing are dropped. Returns the same fields as
    `compare_samples`, with the speedup the median of the per-pair ratios baseline/variant,
    its 95% bootstrap interval over pairs, and the Wilcoxon signed-rank p-value of the log
    ratios; faster/slower only when the interval excludes 1 and p < 0.05.
    """
    pairs = [
        (float(b), float(v))
        for b, v in zip(baseline, variant, strict=False)
        if b is not None and v is not None and not math.isnan(b) and not math.isnan(v) and v > 0
    ]
    n = len(pairs)
    out: dict[str, Any] = {
        "samples": [n, n],
        "statistic": "median of per-round ratios (paired)",
        "paired": True,
    }
    ratios = np.asarray([b / v for b, v in pairs], dtype=float)
    out["speedup"] = float(np.median(ratios)) if n else None
    if n < 3 or not np.all(ratios > 0):
        return {
            **out,
            "ci95_low": None,
            "ci95_high": None,
            "p_value": None,
            "verdict": TOO_FEW,
            "samples_to_resolve": None,
        }
    rng = np.random.default_rng(seed)
    boot = np.median(rng.choice(ratios, size=(RESAMPLES, n)), axis=1)
    lo, hi = (float(x) for x in np.percentile(boot, [2.5, 97.5]))
    logs = np.log(ratios)
    from scipy.stats import wilcoxon  # only where a difference is judged

    p = 1.0 if not np.any(logs) else float(wilcoxon(logs).pvalue)
    clear = bool(np.all(ratios > 1) or np.all(ratios < 1)) and n >= CLEAR_MIN_SAMPLES
    return _judgement(out, lo, hi, p, n, MIN_PAIRED, clear)
