"""Seconds of one continuous-batching step, from the time model: what `load --predict` simulates.

Why not a decode step of `generate` times the batch: a continuous batch mixes prefill chunks
and decode tokens in one forward, and transformers' implementation has costs of its own that a
profile of `generate` never sees. Measured here on smollm2-135m (`load --concurrency`, every
step recorded by serving/batch_state.py): a decode step of 8 requests at 2,150 keys takes 107 ms
against 70 ms at 400 keys, and a prefill of 8 x 256 tokens 3.0 s against 1.1 s for 4 x 256,
because the step's requests are packed into one sequence whose attention scores every query
against every key (a mask hides the other requests') and grouped-query keys are expanded
before the call. So a step is costed by parts:

- `linear`: every linear layer over the step's tokens (one GEMM of all their rows), the LM head
  over one row per request, the element-wise work (the time model's `forward_time`);
- `attention`: on a CPU one masked SDPA call of all queries over all keys per layer
  (`Curves.masked_attention_seconds`); on a GPU, where transformers and the serving engines use
  variable-length kernels, each request's own (prefill chunks as one sequence, decode tokens
  as a batch over their mean keys: approximate);
- `kv_copy` (CPU only): the keys and values the step reads, gathered from the paged cache and
  expanded to every query head;
- `host`: the framework's operations and the sampler, once per step;
- `requests`: per request in the step (the scheduler's and the batch's bookkeeping);
- `after_idle`: once, on the first step after the server waited for requests (measured here:
  a 64-token prefill of tiny-mixtral takes 7.0 ms back to back and 9.4 ms after a pause, as
  the thread pool and caches wake up);
- `between_s`: the scheduler's own time between two forwards;
- `admission_s`: from a request's arrival at an idle server to its first step (the server's
  wake-up and the batch's preparation: 0.7-1.5 ms on tiny-mixtral here, 17% of its TTFT).

Each part has a factor, 1 by default. `learn_step_factors` fits them (non-negative, on relative
error, with a soft-L1 loss so that a step a busy neighbour slowed weighs little) to the steps
of stored `load` runs, whose rows say how many tokens, keys and requests each step carried and
how long it took: the factors transfer to other rates, lengths and, less exactly, models on
the same device.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, TypedDict, cast

from infermeter.analysis.timemodel import DeviceModel, Work, forward_time
from infermeter.models.shape import Shape

if TYPE_CHECKING:
    from collections.abc import Sequence

    from infermeter.run.load_docs import StepRowDoc

#: the parts a step's seconds are the sum of (with `between_s`), in the order factors are fitted
PARTS = ("linear", "attention", "kv_copy", "host", "requests", "after_idle")
#: a pause longer than this between two recorded steps is the server waiting for requests,
#: not the scheduler's work
BUSY_GAP_S = 0.02
#: fewest recorded steps the factors are fitted on (fewer: the time model as is)
MIN_STEPS = 20
#: relative error beyond which a step counts less and less in the fit (soft L1): steps slowed
#: by a busy neighbour are outliers, not costs
ROBUST_SCALE = 0.1


@dataclass(frozen=True)
class StepLoad:
    """What one scheduler step carries."""

    #: query tokens of every request together (prefill chunks + one per decoding request)
    tokens: int
    #: keys the attention reads: each request's cached tokens plus its new ones
    context_tokens: int
    requests: int
    #: of `tokens`, those of prompts (the rest are decode tokens, one per request)
    prefill_tokens: int = 0
    #: the first step after the server waited for requests (its threads and caches went cold)
    after_idle: bool = False


class StepFactorsDoc(TypedDict):
    """`StepFactors` as stored: each factor, what it was learnt from, the fit's error."""

    linear: float
    attention: float
    kv_copy: float
    host: float
    requests: float
    after_idle: float
    between_s: float
    admission_s: float
    learnt_from: str
    steps: int
    fit_error_pct_p50: float | None
    fit_error_pct_p90: float | None


@dataclass
class StepFactors:
    """Factors on each part of a step's cost, and where they were learnt."""

    linear: float = 1.0
    attention: float = 1.0
    kv_copy: float = 1.0
    host: float = 1.0
    #: seconds per request in the step (0 until learnt: the time model has no such part)
    requests: float = 0.0
    #: seconds a step takes more after the server sat idle (0 until learnt)
    after_idle: float = 0.0
    between_s: float = 0.0
    #: from a request's arrival at an idle server to the start of its first step (the server's
    #: wake-up and the batch's preparation, outside any step's time)
    admission_s: float = 0.0
    learnt_from: str = "no stored load steps (the time model as is: approximate)"
    steps: int = 0
    #: median and 90th-percentile error of the fitted step times on the steps learnt from
    fit_error_pct_p50: float | None = None
    fit_error_pct_p90: float | None = None

    def to_dict(self) -> StepFactorsDoc:
        """As `load predict`'s document stores it (`step_model`): the fields by name."""
        return cast("StepFactorsDoc", asdict(self))


class StepCost:
    """Seconds of a step of a model on a device: `seconds(StepLoad)`, with `factors`."""

    def __init__(
        self,
        shape: Shape,
        dev: DeviceModel,
        dtype_bytes: int,
        op_counts: dict[str, Any] | None = None,
        factors: StepFactors | None = None,
        top_k: int | None = None,
        weight_bytes: float | None = None,
        weight_stream_share: float = 1.0,
    ) -> None:
        self.shape, self.dev, self.dtype_bytes = shape, dev, dtype_bytes
        self.op_counts, self.top_k = op_counts, top_k
        #: stored weights smaller than activations (weight-only, as `predict` prices them)
        self.weight_bytes, self.weight_stream_share = weight_bytes, weight_stream_share
        self.factors = factors or StepFactors()
        #: one packed, masked attention call per layer (transformers on a CPU)
        self.packed = dev.kind == "cpu"
        self.layers = shape.layers or (len(shape.census.layers) if shape.census else 0)
        self._linear: dict[tuple[int, int, bool], tuple[float, float, float]] = {}
        self._bound: dict[tuple[int, int, bool], float] = {}

    def _forward(self, tokens: int, requests: int, prefill: bool) -> tuple[float, float, float]:
        """(device work, host launches, the step's own serial time) of the linear part.

        Memoised: steps repeat shapes. The serial time (generate's or the engine's scheduler
        step, `generate_s`) is kept apart: `predict` adds it after host and device overlap,
        and so must a step here (issue 55: `load predict` hid it under the device work and
        said 2.5 ms where `predict` said 3.6 for the same request on a T4).
        """
        key = (tokens, requests, prefill)
        if key not in self._linear:
            w = Work(
                1,
                max(tokens, 1),
                0,
                max(requests, 1),
                self.dtype_bytes,
                self.top_k,
                weight_bytes=self.weight_bytes,
                weight_stream_share=self.weight_stream_share,
            )
            t = forward_time(
                self.shape, self.dev, w, "prefill" if prefill else "decode", self.op_counts
            )
            work = t.gemm_s + t.elementwise_s + t.comm_s
            self._linear[key] = (work, t.overhead_s, t.generate_s)
            self._bound[key] = max(t.compute_bound_s or 0.0, t.memory_bound_s or 0.0)
        return self._linear[key]

    def bound(self, s: StepLoad) -> float:
        """The step's roofline floor: its weights and GEMMs at the device's peaks (no factor)."""
        key = (s.tokens, s.requests, s.prefill_tokens > 0)
        self._forward(*key)
        return self._bound[key]

    def _attention(self, s: StepLoad) -> float:
        shape, dev = self.shape, self.dev
        layers = self._attention_layers()
        if self.packed and dev.curves is not None:
            one = dev.curves.masked_attention_seconds(
                shape.heads, shape.head_dim, s.tokens, s.context_tokens
            )
            if one is not None:
                return layers * one
        if self.packed:
            flops = 4.0 * shape.heads * shape.head_dim * s.tokens * s.context_tokens * layers
            return flops / max((dev.peak_flop_per_s or 0.0) * dev.attention_efficiency, 1.0)
        decode = s.tokens - s.prefill_tokens
        out = 0.0
        if s.prefill_tokens:
            w = Work(1, s.prefill_tokens, 0, 1, self.dtype_bytes)
            out += forward_time(shape, dev, w, "prefill", self.op_counts).attention_s
        if decode > 0:
            keys = max((s.context_tokens - s.prefill_tokens) / decode, 1.0)
            w = Work(decode, 1, int(keys), 1, self.dtype_bytes)
            out += forward_time(shape, dev, w, "decode", self.op_counts).attention_s
        return out

    def _attention_layers(self) -> int:
        census = self.shape.census.layers if self.shape.census else []
        if census:
            return sum(1 for lay in census if lay.score_dims)
        return self.layers

    def _kv_copy(self, s: StepLoad) -> float:
        if not self.packed:
            return 0.0
        shape = self.shape
        nbytes = (
            2.0
            * s.context_tokens
            * self._attention_layers()
            * shape.heads
            * shape.head_dim
            * self.dtype_bytes
        )
        if self.dev.curves is not None and self.dev.curves.copy:
            return self.dev.curves.copy_seconds(nbytes)
        bw = (self.dev.bandwidth_bytes_per_s or 0.0) * self.dev.bandwidth_efficiency
        return nbytes / bw if bw else 0.0

    def parts(self, s: StepLoad) -> dict[str, float]:
        """Unscaled seconds by part (`requests` is the count: its factor is seconds each)."""
        work, launches, serial = self._forward(s.tokens, s.requests, s.prefill_tokens > 0)
        return {
            "linear": work,
            "attention": self._attention(s),
            "kv_copy": self._kv_copy(s),
            "host": launches + serial,
            "requests": float(s.requests),
            "after_idle": float(s.after_idle),
        }

    def seconds(self, s: StepLoad) -> float:
        """The step's seconds from its start to the next step's (the scheduler's time included).

        Combined as `predict` combines a forward (`ForwardTime.combine`): host launches and
        device work overlap on a GPU, the step's serial time adds after them. Never below the
        step's roofline floor (`bound`), whatever factors were learnt: `predict` holds its
        forwards to the same floor (`predict.at_least_bounds`).
        """
        p = self.parts(s)
        f = self.factors
        _, _, serial = self._forward(s.tokens, s.requests, s.prefill_tokens > 0)
        work = f.linear * p["linear"] + f.attention * p["attention"] + f.kv_copy * p["kv_copy"]
        launches = f.host * (p["host"] - serial)
        host = launches + f.requests * p["requests"] + f.after_idle * p["after_idle"]
        overlap = (
            0.0
            if self.dev.kind == "cpu"
            else (1.0 if self.dev.overlap is None else self.dev.overlap)
        )
        step = work + host - overlap * min(work, host) + f.host * serial + f.between_s
        return max(step, self.bound(s))


def step_load_of_row(row: StepRowDoc, after_idle: bool = False) -> StepLoad | None:
    """A stored step row (serving/batch_state.py) as a StepLoad; None without the figures."""
    try:
        pre, dec = int(row["prefill_tokens"]), int(row["decode_tokens"])
        return StepLoad(
            pre + dec, int(row["context_tokens"]), int(row["batch_requests"]), pre, after_idle
        )
    except (KeyError, TypeError, ValueError):
        return None


def idle_before(rows: Sequence[StepRowDoc]) -> list[bool]:
    """Per step row: True when the server sat idle before it (the first, or after a pause)."""
    out = [True]
    for a, b in zip(rows, rows[1:], strict=False):
        out.append((b["t_ms"] - a["t_ms"] - a["step_ms"]) / 1e3 >= BUSY_GAP_S)
    return out[: len(rows)]


def between_steps_s(rows: Sequence[StepRowDoc]) -> float:
    """Median time from one step's end to the next step's start while the server is busy."""
    import statistics

    gaps = []
    for a, b in zip(rows, rows[1:], strict=False):
        gap = (b["t_ms"] - a["t_ms"] - a["step_ms"]) / 1e3
        if 0 <= gap < BUSY_GAP_S:
            gaps.append(gap)
    return statistics.median(gaps) if gaps else 0.0


def admission_delays_s(rows: Sequence[StepRowDoc], arrivals_ms: list[float]) -> list[float]:
    """Per request that arrived at an idle server: seconds until the next step started.

    Idle as `idle_before` reads it: the next step came after a pause. A closed loop's next
    request arrives as the step before it ends, the server still awake: not counted.

    `arrivals_ms` and the rows' `t_ms` share the run's origin (its first arrival).
    """
    import bisect

    starts = [r["t_ms"] for r in rows]
    idle = idle_before(rows)
    out = []
    for a in arrivals_ms:
        i = bisect.bisect_left(starts, a)
        if i >= len(rows) or not idle[i]:
            continue  # the server was busy (or had just finished a step): not a wake-up
        if i > 0 and rows[i - 1]["t_ms"] + rows[i - 1]["step_ms"] > a:
            continue  # a step was running: the request waited for it, not for the server
        delay = (starts[i] - a) / 1e3
        if delay < BUSY_GAP_S * 10:
            out.append(delay)
    return out


def learn_step_factors(
    cost: StepCost,
    runs: Sequence[Sequence[StepRowDoc]],
    source: str,
    arrivals_ms: list[list[float]] | None = None,
) -> StepFactors:
    """Factors fitted to the recorded steps of `runs` (each a run's step rows), or the defaults.

    Prefill-carrying steps are few and long, decode steps many and short: each kind weighs half
    of the fit, so neither is fitted at the other's expense. With each run's request arrivals,
    the admission delay too (the median over requests that found the server idle).
    """
    import numpy as np
    from scipy.optimize import least_squares, nnls

    feats, measured, prefill = [], [], []
    gaps: list[float] = []
    for rows in runs:
        gaps.append(between_steps_s(rows))
        for row, idle in zip(rows, idle_before(rows), strict=True):
            s = step_load_of_row(row, idle)
            if s is None or not row.get("step_ms") or s.tokens <= 0:
                continue
            p = cost.parts(s)
            feats.append([p[k] for k in PARTS])
            measured.append(row["step_ms"] / 1e3)
            prefill.append(s.prefill_tokens > 0)
    if len(measured) < MIN_STEPS:
        return StepFactors(
            learnt_from=f"{len(measured)} stored load steps (too few to fit: "
            "the time model as is, approximate)"
        )
    a, y, pre = np.array(feats), np.array(measured), np.array(prefill)
    n_pre = max(int(pre.sum()), 1)
    n_dec = max(len(pre) - int(pre.sum()), 1)
    weight = np.where(pre, 0.5 / n_pre, 0.5 / n_dec) ** 0.5
    lhs = a / y[:, None] * weight[:, None]
    start, _ = nnls(lhs, weight)
    # robust: a step slowed 2x by a neighbour on a shared machine is an outlier, not a cost
    fit = least_squares(
        lambda c: (lhs @ c - weight) / weight,
        start,
        bounds=(0.0, np.inf),
        loss="soft_l1",
        f_scale=ROBUST_SCALE,
    )
    coef = fit.x
    err = np.abs(a @ coef - y) / y * 100
    delays = [
        d
        for rows, arr in zip(runs, arrivals_ms or [], strict=False)
        for d in admission_delays_s(rows, arr)
    ]
    return StepFactors(
        **{k: float(v) for k, v in zip(PARTS, coef, strict=True)},
        between_s=float(np.median(gaps)) if gaps else 0.0,
        admission_s=float(np.median(delays)) if delays else 0.0,
        learnt_from=source,
        steps=len(measured),
        fit_error_pct_p50=float(np.median(err)),
        fit_error_pct_p90=float(np.percentile(err, 90)),
    )
