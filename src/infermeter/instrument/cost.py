"""What a run's instruments cost that run: timed windows counted, their unit cost measured.

Why: the mode's cost was a canned line ("TPOT +3% on smollm2-135m, CPU") measured once on one
model and host; a user's run on another model, host or `--sample-every` costs something else.
A run knows how many windows its profiler timed in each phase (every wrapped module call, the
root forward and generate's own parts), and the cost of one window is measured on this host, at
start-up, with the profiler's own wrapper on a tiny module: plain calls and wrapped calls in
interleaved rounds, the median difference. Their product over the run's median TTFT and TPOT is
the estimate a run states. It covers the timing windows; the statistics probes (standard and
deep modes) reduce tensors on probed steps on top, which the estimate names but does not price,
so it is a lower bound there. `benchmarks/overhead.py` holds the estimate against the measured
ratio of instrumented to bare runs.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

#: interleaved rounds of plain and wrapped calls, and calls a round: about 0.1 s on an idle CPU
COST_ROUNDS = 5
COST_CALLS = 1000

_CACHE: dict[str, float] = {}


@dataclass(frozen=True)
class InstrumentCost:
    """The estimate one run states: its timed windows and what they cost it."""

    #: the profiler's timing wrapper: microseconds it adds to one module call on this host
    us_per_window: float
    #: timed windows per forward call, averaged over every step of the phase (untimed steps
    #: of `--sample-every` count as 0)
    windows_per_prefill: float
    windows_per_decode_step: float
    #: their cost, in microseconds a step and as a share of the run's median TTFT and TPOT
    us_per_decode_step: float
    us_per_prefill: float
    decode_share: float
    prefill_share: float
    #: the statistics probes' reductions ran on top (standard, deep): a lower bound then
    probes: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the store's `instrument_cost` column)."""
        return asdict(self)

    def line(self) -> str:
        """What a run prints: 'instruments cost about 2.1% of decode (41 us a step) ...'."""
        bound = "at least " if self.probes else "about "
        text = (
            f"instruments cost {bound}{100 * self.decode_share:.1f}% of decode "
            f"({self.us_per_decode_step:.0f} us a step: {self.windows_per_decode_step:.0f} timed "
            f"windows x {self.us_per_window:.2f} us) and {100 * self.prefill_share:.1f}% of "
            "prefill"
        )
        if self.probes:
            text += "; activation statistics add their reductions on probed steps"
        return text


def window_cost_us(clock: Any) -> float:
    """Microseconds the profiler's timing wrapper adds to one module call, on this host.

    Measured once a process per clock kind with the profiler's own `_register` wrapper around a
    tiny Linear: plain and wrapped calls alternate for `COST_ROUNDS` rounds, and the median of
    the rounds' differences is kept (0 when noise makes it negative).
    """
    key = type(clock).__name__
    if key in _CACHE:
        return _CACHE[key]
    import torch

    from infermeter.instrument.config import ProfilingConfig
    from infermeter.instrument.profiler import Profiler

    lin = torch.nn.Linear(8, 8)
    x = torch.randn(1, 8)
    prof = Profiler(torch.nn.Sequential(lin), ProfilingConfig.custom(part_timing=False), clock)

    def per_call_us() -> float:
        t0 = time.perf_counter()
        with torch.inference_mode():
            for _ in range(COST_CALLS):
                lin(x)
        return (time.perf_counter() - t0) / COST_CALLS * 1e6

    per_call_us()  # warm
    diffs = []
    for _ in range(COST_ROUNDS):
        plain = per_call_us()
        prof._register(lin, "block", 0)  # one timing wrapper, as on every timed module
        prof.active, prof._step = True, 0
        wrapped = per_call_us()
        prof.detach()
        diffs.append(wrapped - plain)
    _CACHE[key] = max(0.0, statistics.median(diffs))
    return _CACHE[key]


def estimate(
    us_per_window: float,
    windows: dict[str, float],
    ttft_ms: float,
    tpot_ms: float,
    probes: bool,
) -> InstrumentCost:
    """The run's estimate from its windows per step (`Profiler.windows_per_step`)."""
    prefill = windows.get("prefill", 0.0)
    decode = windows.get("decode", 0.0)
    us_decode, us_prefill = decode * us_per_window, prefill * us_per_window

    def share(us: float, ms: float) -> float:
        return us / 1e3 / ms if ms > 0 else float("nan")

    return InstrumentCost(
        us_per_window=us_per_window,
        windows_per_prefill=prefill,
        windows_per_decode_step=decode,
        us_per_decode_step=us_decode,
        us_per_prefill=us_prefill,
        decode_share=share(us_decode, tpot_ms),
        prefill_share=share(us_prefill, ttft_ms),
        probes=probes,
    )
