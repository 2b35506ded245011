"""Service-level objectives: per-request pass or fail, attainment, goodput.

An SLO is an upper bound on one latency of a request: `ttft_ms`, `tpot_ms` or `e2e_ms` (the
generate call's total in `profile`, arrival to last token in `load`). Attainment is the share
of requests meeting it; goodput the requests per second meeting every SLO over the wall time
(DistServe's definition). Used by `load`, `profile`, `sweep` and `compare`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, cast

from infermeter.errors import UserError

SLO_METRICS = ("ttft_ms", "tpot_ms", "e2e_ms")


class _SLORowDoc(TypedDict):
    ttft_ms: float
    tpot_ms: float
    e2e_ms: float
    error: str | None


class SLORowDoc(_SLORowDoc, total=False):
    """A request as an SLO judges it: its latencies (NaN: not measured) and its error.

    `slo_report` writes each SLO's pass or fail into it (`slo_pass`). A load's request rows
    (serving/load.py: `RequestRowDoc`) are these and more.
    """

    slo_pass: dict[str, bool]


class SLOReportDoc(TypedDict, total=False):
    """SLO attainment and goodput ({} where no SLO was set)."""

    #: each SLO's bound, by metric
    slos: dict[str, float]
    attainment_pct: dict[str, float]
    all_met_pct: float
    #: requests per second that met every SLO, over the wall time
    goodput_rps: float
    #: the SLOs some request missed
    missed: list[str]


def parse_slos(items: list[str] | None) -> tuple[tuple[str, float], ...]:
    """`ttft_ms=500` items into (metric, bound) pairs; one line on a bad one."""
    out = []
    for text in items or []:
        name, sep, raw = text.partition("=")
        try:
            bound = float(raw)
        except ValueError:
            bound = math.nan
        if not sep or name.strip() not in SLO_METRICS or not (bound > 0 and math.isfinite(bound)):
            raise UserError(
                f"--slo {text!r} is not METRIC=BOUND",
                f"use {', '.join(SLO_METRICS)}, e.g. --slo ttft_ms=500",
            )
        out.append((name.strip(), bound))
    return tuple(out)


def slo_report(
    rows: Sequence[SLORowDoc], slos: tuple[tuple[str, float], ...], wall_s: float
) -> SLOReportDoc:
    """Per request pass/fail (written into `rows`), attainment per SLO and of all, goodput.

    A request with an error, or without the measured metric, fails that SLO.
    """
    if not slos:
        return {}
    met_all = 0
    attained = dict.fromkeys((n for n, _ in slos), 0)
    for row in rows:
        passed = {}
        for name, bound in slos:
            v = cast("Mapping[str, Any]", row).get(name)  # one of SLO_METRICS, checked on parse
            ok = row.get("error") is None and v is not None and not math.isnan(v) and v <= bound
            passed[name] = ok
            attained[name] += ok
        row["slo_pass"] = passed
        met_all += all(passed.values())
    n = len(rows)
    return {
        "slos": {name: bound for name, bound in slos},
        "attainment_pct": {name: 100.0 * c / n for name, c in attained.items()},
        "all_met_pct": 100.0 * met_all / n,
        "goodput_rps": met_all / wall_s if wall_s > 0 else math.nan,
        "missed": sorted(name for name, c in attained.items() if c < n),
    }


def check_slos(slos: tuple[tuple[str, float], ...]) -> None:
    """Every SLO names a known metric with a positive, finite bound."""
    for name, bound in slos:
        if name not in SLO_METRICS or not (bound > 0 and math.isfinite(bound)):
            raise UserError(
                f"--slo {name}={bound} is not an SLO",
                f"use {', '.join(SLO_METRICS)} with a positive bound, e.g. --slo ttft_ms=500",
            )
