"""Whether a calibration can be trusted: its rounds' spread, its drift, and fits clamped to zero.

Why: a calibration made while the machine was busy (another process, a test run, an install)
measured 140.7 GFLOP/s instead of 205 and 11.2 GB/s instead of 25.7, and was stored and used
without a word: `analyze` then placed runs at 133-147% of "attainable" and a decode step at 0.7x
its bandwidth bound. A calibration here is judged unstable, with every reason, when
- a figure's rounds spread: the best round is more than SPREAD_LIMIT above the median;
- a figure fell from the last stable calibration of the same device by more than DRIFT_LIMIT,
  the two medians' intervals apart (within the intervals, a change is noise), and the newest
  calibration does not confirm the fall (two in a row agreeing: the device did change). A
  figure that rose is no reason: noise only slows a round, so the earlier calibration was the
  busy one, and the note says so;
- a curve fit had to be clamped to zero (the framework's cost per operation, generate's own
  costs): the parts measured slower than the whole in every one of the interleaved rounds
  (bench/curves.py), so the overhead model does not hold for what was measured. A fit negative
  in some rounds only is 0 within the host's noise and is no reason: quick calibrations of an
  idle VM were called unstable for a 0.45 ms difference of two medians taken seconds apart.
An unstable calibration is stored with its reasons; analysis uses the newest stable one.
"""

from __future__ import annotations

import statistics
from typing import Any

from infermeter.measure.stats import median_ci

#: the best round this far above the median: the rounds ran at different speeds
SPREAD_LIMIT = 0.25
#: a move this large from the last stable calibration, outside both intervals, is not noise
DRIFT_LIMIT = 0.15


def figure_of(rounds: list[float]) -> dict[str, Any]:
    """One figure's rounds, best (the ceiling), median and the median's 95% interval."""
    mid = statistics.median(rounds)
    lo, hi = median_ci(rounds) if len(rounds) > 1 else (mid, mid)
    return {"rounds": list(rounds), "best": max(rounds), "median": mid, "ci95": [lo, hi]}


def _fmt(name: str, value: float) -> str:
    if name.startswith("matmul"):
        return f"{value / 1e9:.1f} GFLOP/s"
    return f"{value / 1e9:.1f} GB/s"


def _apart(new: dict[str, Any], old: dict[str, Any]) -> float | None:
    """The relative move of `new`'s best from `old`'s, or None when it is noise.

    A move counts beyond DRIFT_LIMIT and outside both intervals (old figures without an
    interval: beyond DRIFT_LIMIT alone).
    """
    if not old or not old.get("best"):
        return None
    moved = float(new["best"]) / float(old["best"]) - 1
    ci, oci = new.get("ci95"), old.get("ci95")
    outside = not ci or not oci or ci[1] < oci[0] or ci[0] > oci[1]
    return moved if abs(moved) > DRIFT_LIMIT and outside else None


def judge(
    figures: dict[str, dict[str, Any]],
    previous: dict[str, dict[str, Any]] | None,
    previous_when: str | None = None,
    clamped: list[str] | None = None,
    latest: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """{"stable", "reasons", "notes"} of a calibration's figures against the last stable one's.

    `figures`, `previous` (the last stable calibration) and `latest` (the newest, stable or not,
    when it is another one): name -> `figure_of`; figures stored before rounds were kept are
    compared on their best value alone.
    """
    reasons: list[str] = []
    notes: list[str] = []
    when = f" of {previous_when[:16].replace('T', ' ')}" if previous_when else ""
    for name, f in figures.items():
        if f["median"] and f["best"] / f["median"] - 1 > SPREAD_LIMIT:
            reasons.append(
                f"{name}: rounds spread {f['best'] / f['median'] - 1:.0%} (best "
                f"{_fmt(name, f['best'])}, median {_fmt(name, f['median'])}): the machine was busy"
            )
        old = (previous or {}).get(name) or {}
        moved = _apart(f, old)
        if moved is None:
            continue
        change = (
            f"{name}: {_fmt(name, f['best'])}, was {_fmt(name, old['best'])} in the "
            f"calibration{when} ({moved:+.0%}, outside both intervals)"
        )
        if moved > 0:
            notes.append(f"{change}: that one was measured on a busier machine; this replaces it")
        elif latest and latest.get(name) and _apart(f, latest[name]) is None:
            notes.append(f"{change}: confirmed by the newest calibration, the device changed")
        else:
            reasons.append(change)
    for name in clamped or []:
        reasons.append(
            f"{name} fit clamped to 0 (the parts measured slower than the whole in every "
            "interleaved round): the overhead model does not fit what was measured"
        )
    return {"stable": not reasons, "reasons": reasons, "notes": notes}


def figures_of(
    details: dict[str, Any], flop_per_s: dict[str, float], bandwidth: float | None
) -> dict[str, dict[str, Any]]:
    """A stored calibration's figures: its rounds where kept, else its best values alone."""
    if details.get("rounds"):
        return dict(details["rounds"])
    out: dict[str, dict[str, Any]] = {f"matmul {k}": {"best": v} for k, v in flop_per_s.items()}
    if bandwidth:
        out["copy bandwidth"] = {"best": bandwidth}
    return out
