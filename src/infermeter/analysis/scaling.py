"""How a per-token cost scales with length: constant, linear, or worse, with the evidence.

Given (length, per-token time) points, we fit log(time) = a + slope x log(length) (the log-log
slope: 0 means the per-token time is constant, 1 means it grows linearly with length, i.e. the
total is quadratic) and time = c0 + c1 x length + c2 x length^2 (least squares), and report
both with R^2. Verdicts: "constant" when the slope is below 0.1 and the per-token time changes
by less than 25% over the range; "poor" when the slope is above 0.5 (a finding with the
numbers); "falling" when the slope is below -0.1 (fixed per-call costs spread over more
tokens); "growing" in between.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

CONSTANT_SLOPE = 0.1
POOR_SLOPE = 0.5


@dataclass(frozen=True)
class ScalingFit:
    """The fits and the verdict for one metric against one length."""

    metric: str
    length: str
    points: int
    loglog_slope: float
    loglog_r2: float
    linear: float
    quadratic: float
    intercept: float
    poly_r2: float
    change: float
    verdict: str
    evidence: str

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    ss = float(((y - y.mean()) ** 2).sum())
    return 1.0 - float(((y - pred) ** 2).sum()) / ss if ss > 0 else 1.0


def fit_scaling(
    lengths: list[float], values: list[float], metric: str = "ms_per_token", length: str = "tokens"
) -> ScalingFit | None:
    """Fit per-token `values` against `lengths`; None with fewer than 3 distinct lengths."""
    pts = sorted(
        (float(x), float(y))
        for x, y in zip(lengths, values, strict=True)
        if x and x > 0 and y is not None and not math.isnan(y) and y > 0
    )
    if len({x for x, _ in pts}) < 3:
        return None
    x = np.array([p[0] for p in pts])
    y = np.array([p[1] for p in pts])
    slope, a = np.polyfit(np.log(x), np.log(y), 1)
    ll_r2 = _r2(np.log(y), a + slope * np.log(x))
    c2, c1, c0 = np.polyfit(x, y, 2)
    poly_r2 = _r2(y, c0 + c1 * x + c2 * x * x)
    change = float(y[-1] / y[0] - 1)
    if abs(slope) < CONSTANT_SLOPE and abs(change) < 0.25:
        verdict = "constant"
    elif slope <= -CONSTANT_SLOPE:
        verdict = "falling"  # fixed per-call costs amortised over more tokens
    elif slope > POOR_SLOPE:
        verdict = "poor"
    else:
        verdict = "growing"
    evidence = (
        f"{metric} goes from {y[0]:.3g} at {x[0]:g} {length} to {y[-1]:.3g} at {x[-1]:g} "
        f"({change:+.0%}); log-log slope {slope:.2f} (R^2 {ll_r2:.2f})"
    )
    return ScalingFit(
        metric,
        length,
        len(pts),
        float(slope),
        float(ll_r2),
        float(c1),
        float(c2),
        float(c0),
        float(poly_r2),
        change,
        verdict,
        evidence,
    )
