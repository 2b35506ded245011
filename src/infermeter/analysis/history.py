"""A model's performance over time: per configuration, run medians and confirmed changes.

Runs group by configuration (device, mode and knob values: `Store.history`'s `key`), so a
change of setting is never read as a change of speed. Each run is a point: the median of its
measured samples with the median's 95% interval (measure/stats.py). Change points are found by
`ruptures` (PELT on the runs' medians, a penalty scaled by the run-to-run noise, at least
`MIN_RUNS` runs on each side), and each is kept only when the samples on its two sides differ
by a rank test (p < `ALPHA`) and by at least `MIN_CHANGE` of the median: a single slow run, or a
shift within the noise, is not a change. `against_history` tells whether a new run lies outside
the spread of the recent runs of its configuration.
"""

from __future__ import annotations

import math
from typing import Any, TypedDict

import numpy as np

from infermeter.measure.stats import summarize

#: runs on each side of a change point (a single odd run is an outlier, not a change)
MIN_RUNS = 3
#: the rank test's level for a change point
ALPHA = 0.01
#: the smallest relative change of the median called a change
MIN_CHANGE = 0.03
#: a new run's modified z-score against the recent runs' medians beyond which it is "outside"
OUTSIDE_Z = 3.5
#: how many recent runs `against_history` compares with
RECENT_RUNS = 10
METRICS = ("ttft_ms", "tpot_ms", "tokens_per_s", "total_ms")


class HistoryRowDoc(TypedDict):
    """One `history` row: a finished run, the configuration it measured, its samples' values."""

    id: str
    created: str
    mode: str | None
    device: str | None
    #: JSON of device, mode, knobs and measured settings: runs with one key measured one thing
    key: str
    label: str
    versions: dict[str, Any]
    #: per metric, each measured sample's value
    values: dict[str, list[float]]


def history(rows: list[HistoryRowDoc], metric: str = "tpot_ms") -> dict[str, Any]:
    """Per configuration: its points over time and its change points (see the module)."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}")
    groups: dict[str, list[HistoryRowDoc]] = {}
    for r in rows:
        if r["values"].get(metric):
            groups.setdefault(r["key"], []).append(r)
    out = []
    for key, runs in groups.items():
        points = [_point(r, metric) for r in runs]
        values = [r["values"][metric] for r in runs]
        out.append(
            {
                "key": key,
                "label": runs[-1]["label"],
                "points": points,
                "change_points": change_points([p["median"] for p in points], values, points),
            }
        )
    out.sort(key=lambda g: -len(g["points"]))
    return {
        "metric": metric,
        "statistic": "median of each run's measured samples, 95% interval of the median",
        "configurations": out,
    }


def _point(run: HistoryRowDoc, metric: str) -> dict[str, Any]:
    s = summarize(run["values"][metric])
    git = (run.get("versions") or {}).get("git") or {}
    return {
        "run_id": run["id"],
        "created": run["created"],
        "median": s.median,
        "ci95_low": s.median_ci95_low,
        "ci95_high": s.median_ci95_high,
        "samples": s.n,
        "commit": git.get("commit"),
        "dirty": git.get("dirty"),
        "versions": {
            k: (run.get("versions") or {}).get(k) for k in ("infermeter", "torch", "transformers")
        },
    }


def _noise(medians: np.ndarray) -> float:
    """Run-to-run spread of the medians, robustly: MAD of successive differences / sqrt(2).

    Differences, not the values, so a step in the series does not count as noise.
    """
    diffs = np.diff(medians)
    mad = float(np.median(np.abs(diffs - np.median(diffs)))) if diffs.size else 0.0
    return 1.4826 * mad / math.sqrt(2)


def change_points(
    medians: list[float], values: list[list[float]], points: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Changes in a series of run medians that a rank test on the samples confirms."""
    import ruptures
    from scipy.stats import mannwhitneyu

    y = np.asarray(medians, dtype=float)
    n = y.size
    if n < 2 * MIN_RUNS:
        return []
    sigma = max(_noise(y), 1e-3 * float(np.median(np.abs(y))) or 1e-12)
    algo = ruptures.Pelt(model="l2", min_size=MIN_RUNS, jump=1).fit(y.reshape(-1, 1))
    ends = algo.predict(pen=3.0 * math.log(n) * sigma**2)  # segment ends; the last is n
    bounds = [0, *ends]
    found = []
    for i in range(1, len(bounds) - 1):
        lo, at, hi = bounds[i - 1], bounds[i], bounds[i + 1]
        before = [x for run in values[lo:at] for x in run]
        after = [x for run in values[at:hi] for x in run]
        m_before, m_after = float(np.median(before)), float(np.median(after))
        change = (m_after - m_before) / m_before if m_before else math.inf
        p = float(mannwhitneyu(before, after, alternative="two-sided").pvalue)
        if p < ALPHA and abs(change) >= MIN_CHANGE:
            found.append(
                {
                    "index": at,
                    "run_id": points[at]["run_id"],
                    "created": points[at]["created"],
                    "commit": points[at]["commit"],
                    "before_median": m_before,
                    "after_median": m_after,
                    "change_pct": 100.0 * change,
                    "p_value": p,
                    "runs_before": at - lo,
                    "runs_after": hi - at,
                }
            )
    return found


def against_history(
    previous: list[dict[str, Any]], new: dict[str, Any], metric: str = "tpot_ms"
) -> dict[str, Any]:
    """Is `new` outside the spread of the last `RECENT_RUNS` runs of its configuration?

    The spread is robust: the recent runs' medians' median and MAD (1.4826 x, floored at 1% of
    the median so a run of identical figures does not make every run "outside"); outside when
    the modified z-score exceeds `OUTSIDE_Z`, the rule that marks outlier samples.
    """
    same = [r for r in previous if r["key"] == new["key"] and r["id"] != new["id"]]
    same = [r for r in same if r["created"] <= new["created"] and r["values"].get(metric)]
    recent = same[-RECENT_RUNS:]
    mine = summarize(new["values"].get(metric) or [])
    doc: dict[str, Any] = {
        "metric": metric,
        "run_id": new["id"],
        "median": mine.median,
        "ci95_low": mine.median_ci95_low,
        "ci95_high": mine.median_ci95_high,
        "recent_runs": [r["id"] for r in recent],
    }
    if len(recent) < 3:
        return doc | {
            "verdict": "too few runs",
            "why": f"{len(recent)} earlier runs of this configuration; 3 are needed",
        }
    meds = np.asarray([summarize(r["values"][metric]).median for r in recent])
    center = float(np.median(meds))
    scale = max(1.4826 * float(np.median(np.abs(meds - center))), 0.01 * abs(center))
    z = (mine.median - center) / scale if scale else 0.0
    outside = abs(z) > OUTSIDE_Z
    worse = (z > 0) == (metric != "tokens_per_s")
    verdict = ("slower" if worse else "faster") + " than history" if outside else "within history"
    return doc | {
        "verdict": verdict,
        "recent_median": center,
        "recent_min": float(meds.min()),
        "recent_max": float(meds.max()),
        "z": z,
        "change_pct": 100.0 * (mine.median - center) / center if center else None,
    }
