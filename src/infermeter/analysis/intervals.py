"""How far a prediction can be off: 90% intervals from held-out errors, and its scope.

Why: a bare predicted number is not trusted; the field's predictors publish their errors on a
handful of configurations and then miss by 4.6x on a new one. Every predicted TTFT, TPOT and
throughput here carries an interval, and a prediction outside what the constants were fitted
on says so and widens it.

How (split conformal on log errors): `benchmarks/predict_published.py --write-intervals`
predicts every *held-out* published figure (sources the constants were never fitted on) and
stores each one's log error, log(measured / predicted), with its id and source, per stack
group, in `analysis/data/prediction_errors.json`, with the scope of all published rows
(stacks, hardware, dtypes, model types, largest batch and lengths). A prediction's interval is
predicted x exp(q_low) .. predicted x exp(q_high), with q the group's conformal quantiles: the
ceil((n+1)(1-a/2))-th of the n errors from each side. Under 19 errors that rank is past the
largest, so the interval is the largest error either way, widened by `FEW_ROWS_WIDEN`, and
says so. Each out-of-scope reason widens the log interval by `OUT_OF_SCOPE_WIDEN`; a group
with no errors at all borrows the hf group's, widened. A CPU (`cpu-this`) is predicted as
transformers' generate (the hf group) and is out of scope by its hardware: no published
figure ran on one.

The benchmark reports coverage honestly, leaving one source out at a time: each held-out
source's rows judged by intervals built from the other sources' errors only.

Memory has its own band (`memory_band`): the held-out errors of published peak-memory
figures (`benchmarks/predict_memory.py --write-intervals`), judged by the same rule.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, TypedDict

#: the two-sided coverage the intervals aim at
CONFIDENCE = 0.90
#: under this many errors the conformal rank is past the largest: the largest, widened
FEW_ROWS_WIDEN = 1.5
#: each out-of-scope reason multiplies the log interval's half-widths by this
OUT_OF_SCOPE_WIDEN = 1.5
ENGINES = ("vllm", "sglang", "tensorrt-llm", "lmdeploy", "tgi", "llama.cpp")


def stack_group(stack: str) -> str:
    """The group whose held-out errors judge a stack (hf-fa2 and hf-compile are HF generate)."""
    return "serving engines" if stack in ENGINES else "hf"


class BandDoc(TypedDict):
    """A band as a prediction document keeps it (`Band.to_dict`)."""

    confidence: float
    low_factor: float
    high_factor: float
    rows: int
    sources: int
    group: str
    widened: list[str]


@dataclass(frozen=True)
class Band:
    """Multipliers on a predicted time: 90% of measured times fall within them."""

    low: float
    high: float
    #: held-out errors it was built from, and from how many sources
    rows: int
    sources: int
    group: str
    #: why it is wider than its group's errors alone (few rows, out of scope)
    widened: tuple[str, ...] = field(default_factory=tuple)

    def of(self, value: float | None) -> tuple[float, float] | None:
        """The interval of a predicted time (ms, s: any unit)."""
        if value is None or not math.isfinite(value):
            return None
        return value * self.low, value * self.high

    def of_rate(self, value: float | None) -> tuple[float, float] | None:
        """The interval of a predicted rate (tokens/s): a time's multipliers inverted."""
        if value is None or not math.isfinite(value):
            return None
        return value / self.high, value / self.low

    def to_dict(self) -> BandDoc:
        """The band as stored in a prediction document."""
        return {
            "confidence": CONFIDENCE,
            "low_factor": self.low,
            "high_factor": self.high,
            "rows": self.rows,
            "sources": self.sources,
            "group": self.group,
            "widened": list(self.widened),
        }


@cache
def calibration() -> dict[str, Any]:
    """The shipped held-out errors and scope (written by the published benchmark)."""
    text = resources.files("infermeter.analysis").joinpath("data/prediction_errors.json")
    data: dict[str, Any] = json.loads(text.read_text(encoding="utf-8"))
    return data


def conformal_band(
    log_errors: list[float], confidence: float = CONFIDENCE
) -> tuple[float, float, bool]:
    """(low, high) log-error quantiles of split conformal, and whether rows were too few.

    Each side takes the ceil((n+1)(1-a/2))-th most extreme error on that side; past n, the
    largest error either way, widened.
    """
    n = len(log_errors)
    if n == 0:
        raise ValueError("no errors to build an interval from")
    e = sorted(log_errors)
    rank = math.ceil((n + 1) * (1 - (1 - confidence) / 2))
    if rank > n:
        worst = max(abs(x) for x in e) * FEW_ROWS_WIDEN
        return -worst, worst, True
    return min(e[n - rank], 0.0), max(e[rank - 1], 0.0), False


def out_of_scope(
    stack: str,
    hardware: str,
    dtype: str,
    model_type: str | None,
    batch: int,
    prompt_tokens: int,
    new_tokens: int,
    scope: dict[str, Any] | None = None,
) -> list[str]:
    """Why this prediction lies outside the published rows' scope (empty: inside)."""
    s = scope if scope is not None else calibration()["scope"]
    out = []
    if stack not in s["stacks"]:
        out.append(f"stack {stack} has no published figure")
    if hardware not in s["hardware"]:
        out.append(f"hardware {hardware} has no published figure")
    if dtype not in s["dtypes"]:
        out.append(f"dtype {dtype} has no published figure")
    if model_type and model_type not in s["model_types"]:
        out.append(f"model type {model_type} has no published figure")
    for what, value, most in (
        ("batch", batch, s["max_batch"]),
        ("prompt", prompt_tokens, s["max_prompt_tokens"]),
        ("new tokens", new_tokens, s["max_new_tokens"]),
    ):
        if value > most:
            out.append(f"{what} {value} is beyond the largest published ({most})")
    return out


def band_for(group: str, reasons: list[str], data: dict[str, Any] | None = None) -> Band:
    """The interval multipliers for a prediction in `group`, widened for each reason given."""
    d = data if data is not None else calibration()
    widened = list(reasons)
    rows = d["groups"].get(group) or []
    if not rows:
        rows = d["groups"]["hf"]
        widened.append(f"no held-out errors for {group}: the hf group's, widened")
    scale = OUT_OF_SCOPE_WIDEN ** len(widened)
    errors = [float(r["log_error"]) for r in rows]
    low, high, few = conformal_band(errors)
    if few:
        widened.append(f"only {len(errors)} held-out errors: the largest, widened")
    # measured = predicted x exp(e): the time's interval is predicted x exp(low .. high)
    return Band(
        math.exp(low * scale),
        math.exp(high * scale),
        len(errors),
        len({r["source"] for r in rows}),
        group,
        tuple(widened),
    )


def memory_out_of_scope(
    stack: str,
    device_kind: str,
    dtype: str,
    model_type: str | None,
    batch: int,
    prompt_tokens: int,
    new_tokens: int,
    data: dict[str, Any] | None = None,
) -> list[str]:
    """Why a predicted memory lies outside the published memory figures' scope.

    Memory does not depend on the GPU's speed, so its hardware is judged by kind only; an
    engine that preallocates its cache (vLLM's gpu_memory_utilization) publishes no peak.
    """
    d = data if data is not None else calibration()
    s = d["memory"]["scope"]
    out = (
        []
        if device_kind in s["device_kinds"]
        else [f"no published memory figure on a {device_kind}"]
    )
    for reason in out_of_scope(
        stack, "", dtype, model_type, batch, prompt_tokens, new_tokens, {**s, "hardware": [""]}
    ):
        out.append(reason.replace("has no published figure", "has no published memory figure"))
    return out


def memory_band(reasons: list[str], data: dict[str, Any] | None = None) -> Band:
    """The interval multipliers of a predicted memory: the held-out memory errors, widened."""
    d = data if data is not None else calibration()
    return band_for("memory", reasons, {"groups": {"memory": d["memory"]["errors"]}})


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def interval_text(
    value: float | None, interval: tuple[float, float] | None, level: bool = True
) -> str:
    """`12.3 (10.1-14.9, 90%)`: a predicted figure with its interval.

    `level=False` drops the `, 90%` where a table's header says it.
    """
    if value is None:
        return "-"
    if interval is None:
        return _num(value)
    said = f", {CONFIDENCE:.0%}" if level else ""
    return f"{_num(value)} ({_num(interval[0])}-{_num(interval[1])}{said})"


def leave_one_source_out(rows: list[dict[str, Any]]) -> tuple[int, int]:
    """(rows inside their interval, rows judged), one source left out at a time.

    Each source's rows are judged by the band of the other sources' errors only, so no row is
    judged by an interval built from itself (or from its own source's kindred rows).
    """
    inside = judged = 0
    for source in {r["source"] for r in rows}:
        others = [float(r["log_error"]) for r in rows if r["source"] != source]
        if not others:
            continue
        low, high, _ = conformal_band(others)
        for r in rows:
            if r["source"] == source:
                judged += 1
                inside += low <= float(r["log_error"]) <= high
    return inside, judged
