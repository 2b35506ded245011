"""Performance models: the reference cost-table model, and a latency model fitted to a sweep.

1. `PerformanceModel` (the API of earlier MoE systems-analysis tools): a cost per token for
   each routing path (microseconds) plus costs every token pays; a distribution says what
   percent of tokens takes each path. `predict_latency`, `predict_speedup` (against every token
   on the baseline path), `find_breakeven_distribution` (the largest baseline share that still
   reaches a target speedup) and `analyze_bottleneck` (which path costs the most time, and why).

2. `LatencyModel`: per phase, latency = a x FLOPs + b x bytes + c, with FLOPs and bytes from the
   cost model at each configuration's shapes (so a, b are inverse attained rates and c the fixed
   per-call cost: launches, Python, generate's bookkeeping). The coefficients are fitted by
   non-negative least squares on some of a sweep's configurations; the model then predicts the
   others (other knob values, other lengths), and every prediction is reported beside the
   measurement with its error. A model whose held-out error is unknown is not offered.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from infermeter.analysis.costs import total
from infermeter.analysis.roofline import phase_costs, run_shapes

if TYPE_CHECKING:  # annotations only: the run's module imports numpy
    from infermeter.run.results import RunResult


def _matches(key: str, cost: str) -> bool:
    """'fast' uses 'fast_path_lookup'; 'cached' uses 'cache_lookup' (its first word)."""
    return cost.startswith(key) or key.startswith(cost.split("_")[0])


class LatencyPredictionDoc(TypedDict):
    """`PerformanceModel.predict_latency`'s answer: per-token and total time, per path."""

    per_token_us: float
    total_time_ms: float
    tokens_per_second: float
    #: microseconds per token on each path (its share times its cost) and each shared cost
    breakdown_us: dict[str, float]


class PerformanceModel:
    """Cost-table latency model over routing paths (reference API).

    Distributions are shares of tokens per path, in percent (any positive numbers: they are
    normalised); costs are microseconds per token. The reference tool's spellings still work
    (`set_costs`, `predict_latency(dist)`, `find_breakeven_distribution(..., max_learned=15)`).

    Args:
        costs_us: microseconds per token, by cost name (see `set_costs`).
        baseline: the distribution key every token takes in the baseline (default "learned").
        reference_cost_us: the baseline path's cost when every token takes it, if not its cost
            in the table (the bare router, when the table's learned cost includes the shortcut
            dispatch).
    """

    def __init__(
        self,
        costs_us: dict[str, float] | None = None,
        baseline: str = "learned",
        reference_cost_us: float | None = None,
    ) -> None:
        self.costs_us: dict[str, float] = {}
        self.baseline = baseline
        self.reference_cost_us = reference_cost_us
        if costs_us:
            self.set_costs(costs_us)

    @property
    def costs(self) -> dict[str, float]:
        """The cost table, microseconds per token (the reference tool's name for it)."""
        return self.costs_us

    def _reference_us(self, keys: list[str]) -> float:
        """Per-token time with every token on the baseline path (the speedups' reference)."""
        base = self.predict_latency({**dict.fromkeys(keys, 0.0), self.baseline: 100.0})
        if self.reference_cost_us is None:
            return float(base["per_token_us"])
        cost = self._path_cost(self.baseline)[1]
        return float(base["per_token_us"] - cost + self.reference_cost_us)

    def set_costs(self, costs_us: dict[str, float]) -> None:
        """Set costs in microseconds per token.

        A distribution key ("fast") uses the cost whose name is that key, starts with it
        ("fast_path_lookup") or whose first word starts it ("cached" -> "cache_lookup"); costs
        no key uses are paid by every token ("expert_compute").
        """
        bad = {k: v for k, v in costs_us.items() if not (isinstance(v, int | float) and v >= 0)}
        if bad:
            raise ValueError(f"costs must be non-negative numbers: {bad}")
        self.costs_us.update({k: float(v) for k, v in costs_us.items()})

    def _path_cost(self, key: str) -> tuple[str, float]:
        if key in self.costs:
            return key, self.costs[key]
        matches = [k for k in self.costs_us if _matches(key, k)]
        if len(matches) != 1:
            raise ValueError(f"no single cost for path {key!r} among {sorted(self.costs)}")
        return matches[0], self.costs[matches[0]]

    def _shared(self, keys: list[str]) -> dict[str, float]:
        used = {self._path_cost(k)[0] for k in keys}
        return {k: v for k, v in self.costs.items() if k not in used}

    def _normalise(self, dist: dict[str, float]) -> dict[str, float]:
        s = sum(dist.values())
        if s <= 0 or any(v < 0 for v in dist.values()):
            raise ValueError(
                f"a distribution needs non-negative shares with a positive sum: {dist}"
            )
        return {k: v / s for k, v in dist.items()}

    def predict_latency(
        self, distribution_pct: dict[str, float], tokens: int = 1000
    ) -> LatencyPredictionDoc:
        """Per-token and total time, throughput and the breakdown per path."""
        share = self._normalise(distribution_pct)
        keys = list(share)
        if self.baseline not in keys:
            keys.append(self.baseline)
        shared = self._shared(keys)
        breakdown = {k: share[k] * self._path_cost(k)[1] for k in share}
        breakdown.update(shared)
        per_token_us = sum(breakdown.values())
        return {
            "per_token_us": per_token_us,
            "total_time_ms": per_token_us * tokens / 1e3,
            "tokens_per_second": 1e6 / per_token_us if per_token_us else math.inf,
            "breakdown_us": breakdown,
        }

    def predict_speedup(self, distribution_pct: dict[str, float]) -> float:
        """Baseline per-token time (every token on the baseline path) over this one's."""
        reference = self._reference_us(list(distribution_pct))
        return float(reference / self.predict_latency(distribution_pct)["per_token_us"])

    def find_breakeven_distribution(
        self,
        target_speedup: float,
        max_learned_pct: float | None = None,
        mix: dict[str, float] | None = None,
        *,
        max_learned: float | None = None,
    ) -> dict[str, float] | None:
        """The largest baseline share (%) that reaches `target_speedup`, up to `max_learned_pct`.

        (`max_learned` is the reference tool's name for that bound.) The other tokens split
        over the non-baseline paths in the proportions of `mix` (default: the paths of the cost
        table other than shared ones, equally). None when even 0% on the
        baseline cannot reach the target. Shares come back in percent.
        """
        if max_learned is not None:
            max_learned_pct = max_learned
        if mix is None:
            paths = [k for k in ("fast", "cached") if any(_matches(k, c) for c in self.costs)]
            mix = dict.fromkeys(paths or ["fast"], 1.0)
        mix = self._normalise(mix)
        keys = [*mix, self.baseline]
        shared = sum(self._shared(keys).values())
        c_base = self._path_cost(self.baseline)[1]
        c_mix = sum(w * self._path_cost(k)[1] for k, w in mix.items())
        goal = self._reference_us(keys) / target_speedup
        # time(x) = shared + x c_base + (1 - x) c_mix must reach the goal; the largest such
        # x is wanted. When the other paths cost no less than the baseline path, time only
        # grows as x falls, so x = 1 is the best there is, and it may not reach the goal.
        x = 1.0 if c_mix >= c_base else (goal - shared - c_mix) / (c_base - c_mix)
        x = min(x, 1.0, (max_learned_pct / 100) if max_learned_pct is not None else 1.0)
        if x < 0 or shared + x * c_base + (1 - x) * c_mix > goal * (1 + 1e-9):
            return None
        out = {k: round(100 * (1 - x) * w, 3) for k, w in mix.items()}
        out[self.baseline] = round(100 * x, 3)
        return out

    def analyze_bottleneck(self, distribution_pct: dict[str, float]) -> list[str]:
        """Plain-language findings: the dominant cost, and paths worth moving tokens off."""
        distribution = distribution_pct
        pred = self.predict_latency(distribution)
        total_us = pred["per_token_us"]
        items = sorted(pred["breakdown_us"].items(), key=lambda kv: -kv[1])
        out = []
        for name, us in items:
            share = us / total_us if total_us else 0
            if share >= 0.5:
                out.append(
                    f"{name} is {share:.0%} of per-token time ({us:.2f} of {total_us:.2f} us)"
                )
            elif share >= 0.2:
                out.append(f"{name} is a large share: {share:.0%} ({us:.2f} us)")
        if self.baseline in distribution and distribution[self.baseline] > 0:
            full = self.predict_speedup({**distribution, self.baseline: 0.0})
            out.append(
                f"moving every {self.baseline} token to the other paths would give {full:.2f}x"
            )
        return out


FEATURES = ("flop_count", "bytes", "calls")


@dataclass
class LatencyModel:
    """latency_ms = sum(coef[f] x feature f) for one phase ("prefill" or "decode")."""

    phase: str
    coef: dict[str, float]
    fitted_on: list[dict[str, Any]] = field(default_factory=list)

    def title(self) -> str:
        """The fitted formula, for a table title."""
        return f"{self.phase}: ms = " + " + ".join(f"{v:.3g} x {k}" for k, v in self.coef.items())

    def predict(self, feats: dict[str, float]) -> float:
        """Predicted milliseconds."""
        return sum(self.coef.get(f, 0.0) * feats[f] for f in FEATURES)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)


def features(run: RunResult) -> dict[str, dict[str, float]]:
    """FLOPs, bytes and 1 (the fixed per-call term) of a run's prefill and mean decode step."""
    shape, work = run_shapes(run)
    c = phase_costs(shape, work)
    out = {}
    for phase in ("prefill", "decode"):
        t = total(c[phase])
        out[phase] = {"flop_count": t.flop_count, "bytes": t.bytes, "calls": 1.0}
    return out


def measured(run: RunResult) -> dict[str, float]:
    """Measured prefill (TTFT) and decode step (TPOT) medians in ms.

    Medians, not means: on a shared machine one slow sample moves a mean by 10-20% and the
    model would chase it.
    """
    s = run.summary()
    return {"prefill": s["ttft_ms"].p50, "decode": s["tpot_ms"].p50}


#: a fitted point missed by more than this (in %) means the model's form does not fit the sweep
MISFIT_PCT = 25.0


def _nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Non-negative least squares by an active set: drop negative coefficients and refit."""
    active = list(range(a.shape[1]))
    x = np.zeros(a.shape[1])
    while active:
        sol, *_ = np.linalg.lstsq(a[:, active], b, rcond=None)
        if (sol >= 0).all():
            x[:] = 0
            x[active] = sol
            return x
        active.pop(int(np.argmin(sol)))
    return x


def fit(points: list[tuple[dict[str, float], float]], phase: str) -> LatencyModel:
    """Fit one phase's coefficients on (features, measured ms) points.

    Columns are scaled to unit norm first so FLOPs (1e9) and the constant (1) weigh alike, and
    errors are relative (each row divided by its measurement): a 10 ms and a 1 s point count
    the same.
    """
    a = np.array([[f[k] for k in FEATURES] for f, _ in points], dtype=float)
    y = np.array([m for _, m in points], dtype=float)
    scale = np.linalg.norm(a, axis=0)
    scale[scale == 0] = 1
    w = 1 / y
    coef = _nnls(a / scale * w[:, None], y * w) / scale
    return LatencyModel(phase, dict(zip(FEATURES, coef.tolist(), strict=True)))


@dataclass
class ModelCheck:
    """Fit on some runs, predict the rest: every point with its error, and the summary."""

    phase: str
    #: a LatencyModel, or predict.CurveModel (both have `title()` and `to_dict()`)
    model: Any
    points: list[dict[str, Any]]

    @property
    def held_out(self) -> list[dict[str, Any]]:
        """Points the model was not fitted on."""
        return [p for p in self.points if not p["fitted"]]

    def error_summary(self) -> dict[str, float | None]:
        """Median and max absolute % error on held-out points, and the worst on fitted ones."""
        errs = [abs(p["error_pct"]) for p in self.held_out]
        fitted = [abs(p["error_pct"]) for p in self.points if p["fitted"]]
        return {
            "held_out": len(errs),
            "median_abs_error_pct": statistics.median(errs) if errs else None,
            "max_abs_error_pct": max(errs) if errs else None,
            "max_fitted_abs_error_pct": max(fitted) if fitted else None,
        }

    def misfit_line(self) -> str | None:
        """A warning when the model misses the very points it was fitted on by over 25%.

        Then its form cannot express what the sweep varied (a knob its features do not see),
        and its held-out errors say little: `fit` had printed a fitted point 1,306% off
        beside a held-out summary, without a word (issue 59).
        """
        worst = max((p for p in self.points if p["fitted"]), key=lambda p: abs(p["error_pct"]))
        if abs(worst["error_pct"]) <= MISFIT_PCT:
            return None
        at = ", ".join(f"{k}={v}" for k, v in (worst["config"] or {}).items())
        return (
            f"the {self.phase} model misses a point it was fitted on by {worst['error_pct']:+.0f}%"
            f" ({at}): its features cannot express what this sweep varies, so its held-out "
            "errors say little"
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return {
            "phase": self.phase,
            "model": self.model.to_dict(),
            "points": self.points,
            **self.error_summary(),
        }


def check_on_sweep(runs: list[RunResult], train: list[bool]) -> dict[str, ModelCheck]:
    """Fit prefill and decode models on the runs marked True in `train`, predict all of them."""
    feats = [features(r) for r in runs]
    meas = [measured(r) for r in runs]
    out = {}
    for phase in ("prefill", "decode"):
        pts = [(f[phase], m[phase]) for f, m, t in zip(feats, meas, train, strict=True) if t]
        model = fit(pts, phase)
        rows = []
        for run, f, m, t in zip(runs, feats, meas, train, strict=True):
            pred = model.predict(f[phase])
            rows.append(
                {
                    "config": run.knobs,
                    "run_id": run.run_id,
                    "fitted": t,
                    "measured_ms": m[phase],
                    "predicted_ms": pred,
                    "error_pct": 100 * (pred - m[phase]) / m[phase],
                }
            )
        out[phase] = ModelCheck(phase, model, rows)
    return out


def alternate(n: int) -> list[bool]:
    """Fit on every other point (first and last included), hold out the rest."""
    train = [i % 2 == 0 for i in range(n)]
    if n > 1:
        train[-1] = True
    return train
