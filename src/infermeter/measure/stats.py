"""Summary statistics over raw samples, with an honest word when the spread is large.

Results keep the raw samples; a `Summary` is always recomputed from them, never stored alone.
Percentiles use linear interpolation (numpy's default), the standard deviation is the sample
standard deviation (ddof=1) and the 95% confidence interval of the mean uses Student's t, since
profiling runs usually have few samples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np

# Two-sided 95% critical values of Student's t for 1..30 degrees of freedom (standard tables).
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip

#: Coefficient of variation above which a summary is flagged as noisy.
NOISY_CV = 0.10


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

    @property
    def cv(self) -> float:
        """Coefficient of variation (std / mean); nan when undefined."""
        if self.n < 2 or not self.mean:
            return math.nan
        return self.std / abs(self.mean)

    @property
    def noisy(self) -> bool:
        """True when the spread is large enough that the mean should not be trusted alone."""
        return self.n >= 3 and self.cv > NOISY_CV

    def to_dict(self) -> dict[str, float | None]:
        """Plain dict of the summary fields (mean, std, p50, p90, p99, ...); NaN as None."""
        out = asdict(self)
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


def summarize(values: Iterable[float]) -> Summary:
    """Summarise raw samples; NaNs are dropped, an empty input gives an all-NaN summary."""
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
    return Summary(
        n=n,
        mean=mean,
        std=std,
        min=float(arr.min()),
        max=float(arr.max()),
        p50=p50,
        p90=p90,
        p99=p99,
        ci95_low=mean - half,
        ci95_high=mean + half,
    )


def bootstrap_median_ci(
    values: Iterable[float], n: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """95% interval of the median by resampling (for ratios of interleaved benchmark runs)."""
    rng = np.random.default_rng(seed)
    arr = np.asarray(list(values), dtype=float)
    meds = np.median(rng.choice(arr, size=(n, arr.size), replace=True), axis=1)
    lo, hi = np.percentile(meds, [2.5, 97.5])
    return float(lo), float(hi)
