"""Capacity under SLOs (`infermeter load --find-max-rate`): the highest rate meeting a target.

The highest request rate whose SLO attainment stays above a target.

Why: a rate sweep shows a curve; the question a platform team asks is one number, "how many
requests per second does this serve within our SLOs?", with how sure that number is. The
serving tools (vLLM's `--goodput` sweeps, GuideLLM's and AIPerf's sweeps) search for it; this
does so with the statistics said beside every step:

- **A step** is a load run at one offered rate. Its requests that met every SLO, `k` of `n`,
  give an exact (Clopper-Pearson) interval on the attainment at `confidence`. The step passes
  when the whole interval is at or above the target, fails when it is wholly below, and is run
  again at the same rate (the counts pooled) while it straddles the target, up to
  `max_requests`; still undecided then, it is judged by its point estimate and marked so.
  (All `n` met: the interval's low end reaches 99% only from about 370 requests at 95%
  confidence; a 99% target takes that long to claim.)
- **Saturation**: a step whose requests' TTFT is still growing at its end (the median of its
  last quarter of arrivals over twice that of its first quarter, and 20 ms more; or TTFT
  rising with arrival time, the slope's interval above 0.1) is queueing without bound: it
  fails whatever its attainment over a finite run, and says so.
- **The search**: from `start` the rate doubles while steps pass (halves while they fail),
  then `bisect` geometric bisections between the highest pass and the lowest fail. The answer
  is the highest passing rate, with the lowest failing one beside it; a search that never
  failed (or never passed) says so instead of guessing past its range. A step that fails with
  its requests hardly overlapping (under 1.1 in flight on average, by Little's law: the sum of
  their end-to-end times over the wall time) stops the search: a lower rate cannot help, the
  SLO is missed by a request alone.

`measure(rate, n)` does the running (a `load` in-process or at an endpoint), so the search is
tested on a queue model with a known capacity as well as on a real model.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from infermeter.errors import UserError
from infermeter.util.settings import Range, check_ranges, setting

#: a step's TTFT growth that counts as a queue growing without bound
SATURATION_RATIO = 2.0
SATURATION_MIN_MS = 20.0
#: TTFT growing by this many ms for each ms of arrivals (its interval wholly above) is a queue
#: growing without bound: a server at 1/(1 - 0.1) of its capacity or more
SATURATION_SLOPE = 0.1
#: requests a step needs before saturation is judged
SATURATION_MIN_REQUESTS = 6
#: requests in flight on average below which a failing step's requests were served alone
ALONE_IN_FLIGHT = 1.1


@dataclass(frozen=True)
class CapacitySpec:
    """How the search runs; each field's help, option and range are the CLI's."""

    target: float = setting(
        0.99,
        option="--slo-target",
        help="The capacity search: the share of requests that must meet every SLO.",
        within=Range(0, 1, open_low=True, open_high=True),
    )
    confidence: float = 0.95
    start_rate: float = setting(
        1.0,
        option="--start-rate",
        help="The search's first rate (requests/s).",
        within=Range(0, 1e6, open_low=True),
    )
    requests: int = setting(
        32,
        option="--requests-per-rate",
        help="Requests run at each rate (more while it is undecided).",
        within=Range(1, 100_000),
    )
    max_requests: int = setting(
        512,
        option="--most-requests-per-rate",
        help="A rate is run again (counts pooled) while its attainment straddles the target, "
        "up to this many requests.",
        within=Range(1, 100_000),
    )
    bisect: int = setting(
        4,
        option="--bisect",
        help="The capacity search: bisections after the ramp.",
        within=Range(0, 20),
    )
    #: most doublings (or halvings) before the search gives up on finding the other side
    max_ramp: int = 8

    def validate(self, spelled: dict[str, str] | None = None) -> CapacitySpec:
        """Every setting in range, before anything runs (`spelled`: the command's own names)."""
        check_ranges(self, spelled)
        if not 0.5 <= self.confidence < 1:
            raise UserError("the confidence must be within 0.5..1", "see `infermeter load --help`")
        return self


class CapacityStepDoc(TypedDict):
    """One step of a capacity search as its table and figure keep it (`Step.row`)."""

    rate: float
    requests: int
    met: int
    #: share of requests meeting every SLO, with its exact interval
    attainment: float
    ci_low: float
    ci_high: float
    goodput_rps: float
    throughput_rps: float
    saturated: bool
    in_flight_mean: float
    verdict: str
    decided: bool
    #: the server's own median decode time per token (NaN where it reports none)
    server_decode_ms_p50: float


class _CapacityDoc(TypedDict):
    target: float
    confidence: float
    #: the highest rate that passed; the lowest that failed
    max_rate: float | None
    first_failing_rate: float | None
    #: the lowest rate whose queue grew without bound
    saturation_rate: float | None
    #: even requests served alone missed the SLOs: no rate can meet them
    missed_alone: bool
    found: bool
    steps: list[CapacityStepDoc]


class CapacityDoc(_CapacityDoc, total=False):
    """A capacity search (`find_capacity`): its answer, bounds and every step.

    `runs` (each step's load documents) is there as the search returns; `load capacity` keeps
    their ids instead (`run_ids`) with the search's `meta` and `server_line`, and `load predict`
    its `answer` line.
    """

    runs: list[dict[str, Any]]
    run_ids: list[str | None]
    meta: dict[str, Any]
    server_line: str | None
    answer: str


@dataclass
class Step:
    """One offered rate: its requests' SLO outcomes and the verdict."""

    rate: float
    met: int = 0
    requests: int = 0
    runs: list[Any] = field(default_factory=list)
    goodput_rps: float = math.nan
    throughput_rps: float = math.nan
    saturated: bool = False
    #: requests in flight on average (Little's law: their summed e2e over the wall time)
    in_flight_mean: float = math.nan
    low: float = 0.0
    high: float = 1.0
    verdict: str = "undecided"
    decided: bool = False
    #: the server's own median decode time per token during the step (llama.cpp's
    #: `timings`), NaN where the server reports none
    server_decode_ms_p50: float = math.nan

    def row(self) -> CapacityStepDoc:
        """The step as a table row (the figure's CSV)."""
        return {
            "rate": self.rate,
            "requests": self.requests,
            "met": self.met,
            "attainment": self.met / self.requests if self.requests else math.nan,
            "ci_low": self.low,
            "ci_high": self.high,
            "goodput_rps": self.goodput_rps,
            "throughput_rps": self.throughput_rps,
            "saturated": self.saturated,
            "in_flight_mean": self.in_flight_mean,
            "verdict": self.verdict,
            "decided": self.decided,
            "server_decode_ms_p50": self.server_decode_ms_p50,
        }


def attainment_interval(met: int, n: int, confidence: float) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval on the share of requests meeting every SLO."""
    from scipy.stats import binomtest

    ci = binomtest(met, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


def saturated(rows: list[dict[str, Any]]) -> bool:
    """True when TTFT is still growing at the end of the step (a queue without bound).

    Two signs, either enough: the last quarter's median TTFT over `SATURATION_RATIO` times
    the first's (a queue that built up during the step), or TTFT rising with arrival time at
    a slope whose 95% interval (Theil-Sen) is wholly above `SATURATION_SLOPE`. The second
    catches a step overloaded from its first quarter on: its first TTFTs are already long, so
    the ratio stays under 2 while the queue still grows by the second (issue 54: the search's
    most overloaded step, 0.4 req/s with its queue full in its first quarter, was not flagged
    while milder steps were).
    """
    import numpy as np
    from scipy.stats import theilslopes

    served = sorted(
        (r for r in rows if r.get("error") is None and math.isfinite(r["ttft_ms"])),
        key=lambda r: r["arrival_ms"],
    )
    if len(served) < SATURATION_MIN_REQUESTS:
        return False
    ttft = np.array([r["ttft_ms"] for r in served])
    at = np.array([r["arrival_ms"] for r in served])
    q = max(1, len(served) // 4)
    first, last = float(np.median(ttft[:q])), float(np.median(ttft[-q:]))
    if last > SATURATION_RATIO * first and last - first > SATURATION_MIN_MS:
        return True
    if float(np.ptp(at)) <= 0:
        return False
    slope, _, low, _ = theilslopes(ttft, at, alpha=0.95)
    grew = float(slope) * float(np.ptp(at))
    return bool(float(low) > SATURATION_SLOPE and grew > SATURATION_MIN_MS)


def _met(row: dict[str, Any]) -> bool:
    return row.get("error") is None and all((row.get("slo_pass") or {"": False}).values())


def run_step(
    rate: float, spec: CapacitySpec, measure: Callable[[float, int], dict[str, Any]]
) -> Step:
    """Run one rate until its attainment interval is clear of the target (or the cap)."""
    step = Step(rate)
    n = spec.requests
    good = wall = busy = 0.0
    while True:
        doc = measure(rate, n)
        rows = doc["all_samples"]
        step.runs.append(doc)
        step.met += sum(_met(r) for r in rows)
        step.requests += len(rows)
        good += doc["summary"]["slo"].get("goodput_rps", 0.0) * doc["summary"]["wall_s"]
        wall += doc["summary"]["wall_s"]
        busy += sum(r["e2e_ms"] for r in rows if math.isfinite(r["e2e_ms"])) / 1e3
        step.saturated = step.saturated or saturated(rows)
        step.low, step.high = attainment_interval(step.met, step.requests, spec.confidence)
        if step.saturated or step.high < spec.target:
            step.verdict, step.decided = "fail", True
        elif step.low >= spec.target:
            step.verdict, step.decided = "pass", True
        if step.decided or step.requests + n > spec.max_requests:
            break
    if not step.decided:
        step.verdict = "pass" if step.met / step.requests >= spec.target else "fail"
    step.goodput_rps = good / wall if wall > 0 else math.nan
    step.in_flight_mean = busy / wall if wall > 0 else math.nan
    step.throughput_rps = sum(len(d["all_samples"]) for d in step.runs) / wall if wall else 0
    own = [
        float(r["server_decode_ms_per_token"])
        for d in step.runs
        for r in d["all_samples"]
        if r.get("error") is None
        and r.get("server_decode_ms_per_token") is not None
        and math.isfinite(r["server_decode_ms_per_token"])
    ]
    if own:
        import numpy as np

        step.server_decode_ms_p50 = float(np.median(own))
    return step


#: the server's own speed may differ this much between steps before the answer says so
SERVER_MOVE = 0.10


def server_line(result: CapacityDoc) -> str | None:
    """The server's own decode time per token across the steps; None where it reports none.

    Why: two capacity searches on one llama.cpp server disagreed because the server was 1.6x
    slower during one tool's step than the other's (issue 54). Service time per token is the
    server's speed at one token, whatever the load; it grows with batching but not with
    queueing. Where the boundary steps (the highest pass, the lowest fail) ran the server
    over 10% slower per token than the fastest step, the answer may be the server's speed, not
    the rate: the line says so, with each step's ratio in the table.
    """
    rows = [r for r in result["steps"] if math.isfinite(r.get("server_decode_ms_p50", math.nan))]
    if len(rows) < 2:
        return None
    fastest = min(r["server_decode_ms_p50"] for r in rows)
    slowest = max(r["server_decode_ms_p50"] for r in rows)
    head = f"server's own decode time per token across the steps: {fastest:.3g}-{slowest:.3g} ms"
    worst = result["first_failing_rate"]
    failing = next((r for r in rows if r["rate"] == worst), None)
    if failing is not None and failing["server_decode_ms_p50"] > (1 + SERVER_MOVE) * fastest:
        ratio = failing["server_decode_ms_p50"] / fastest
        return (
            head + f"; at {worst:.3g} req/s, the first failing rate, it ran x{ratio:.2f} the "
            "fastest step's time per token: the server was slower there, which queueing alone "
            "does not do to one token; run that step again before trusting the bound"
        )
    if slowest > (1 + SERVER_MOVE) * fastest:
        return (
            head + f" (x{slowest / fastest:.2f}; the boundary steps are within 10% of the fastest)"
        )
    return head + " (steady)"


def find_capacity(
    spec: CapacitySpec,
    measure: Callable[[float, int], dict[str, Any]],
    on_step: Callable[[Step], None] | None = None,
) -> CapacityDoc:
    """Ramp, then bisect: the highest passing rate, the lowest failing one, every step."""
    steps: list[Step] = []

    def at(rate: float) -> Step:
        s = run_step(rate, spec, measure)
        steps.append(s)
        if on_step is not None:
            on_step(s)
        return s

    best = worst = None
    rate = spec.start_rate
    first = at(rate)
    factor = 2.0 if first.verdict == "pass" else 0.5
    if first.verdict == "pass":
        best = rate
    else:
        worst = rate
    for _ in range(spec.max_ramp):
        if best is not None and worst is not None:
            break
        if worst is not None and steps[-1].in_flight_mean < ALONE_IN_FLIGHT:
            break  # missed with requests alone: a lower rate cannot help
        rate *= factor
        s = at(rate)
        if s.verdict == "pass":
            best = rate
        else:
            worst = rate
    if best is not None and worst is not None:
        for _ in range(spec.bisect):
            mid = math.sqrt(best * worst)
            if at(mid).verdict == "pass":
                best = mid
            else:
                worst = mid
    saturation = next((s.rate for s in sorted(steps, key=lambda s: s.rate) if s.saturated), None)
    alone = best is None and steps[-1].in_flight_mean < ALONE_IN_FLIGHT
    return {
        "target": spec.target,
        "confidence": spec.confidence,
        "max_rate": best,
        "first_failing_rate": worst,
        "saturation_rate": saturation,
        "missed_alone": alone,
        "found": best is not None and worst is not None,
        "steps": [s.row() for s in steps],
        "runs": [d for s in steps for d in s.runs],
    }


def answer_line(result: CapacityDoc) -> str:
    """One line: the capacity found, how sure, and the bound it was found within."""
    target = f"{result['target']:.3g}".rstrip("0")
    rows = {r["rate"]: r for r in result["steps"]}
    best, worst = result["max_rate"], result["first_failing_rate"]
    sat = result["saturation_rate"]
    said = f"; queueing without bound from {sat:.3g} req/s" if sat is not None else ""
    if best is None:
        alone = (
            ": requests miss it served alone (under 1.1 in flight), so no rate can"
            if result["missed_alone"]
            else ""
        )
        return (
            f"capacity: no rate tried meets every SLO for {float(target):.1%} of requests "
            f"(down to {worst:.3g} req/s){alone}{said}"
        )
    b = rows[best]
    sure = (
        ""
        if b["decided"]
        else ", undecided: its interval straddles the target, judged by its point estimate"
    )
    head = (
        f"capacity: {best:.3g} req/s meets every SLO for {b['attainment']:.1%} of "
        f"{b['requests']} requests ({result['confidence']:.0%} interval "
        f"{b['ci_low']:.1%}-{b['ci_high']:.1%}, target {float(target):.1%}{sure})"
    )
    if worst is None:
        return head + f"; no rate tried failed (up to {best:.3g} req/s): the capacity is higher"
    return head + f"; {worst:.3g} req/s does not{said}"
