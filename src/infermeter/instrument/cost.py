"""What a run's instruments cost that run: timed windows counted, their unit cost measured.

Why: the mode's cost was a canned line ("TPOT +3% on smollm2-135m, CPU") measured once on one
model and host; a user's run on another model, host or `--sample-every` costs something else.
A run knows how many windows its profiler timed in each phase (every wrapped module call, the
root forward and generate's own parts), and the cost of one window is measured on this host, at
start-up, with the profiler's own wrapper on a tiny module: plain calls and wrapped calls in
interleaved rounds, the median difference. Their product over the run's median TTFT and TPOT is
the estimate a run states. Standard mode's block-output statistics are priced the same way: one
probed decode step (every block's output staged, then reduced) timed at start-up with a probe
of the run's own shape, times the share of decode steps probed. Deep mode's attention and kill
probes and its eager attention are not priced, so its estimate is a lower bound and says so; so
is every prefill figure (a prefill reduces prompt-sized rows). `benchmarks/overhead.py` holds
the estimate against the measured ratio of instrumented to bare runs.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from infermeter.util.native import native_stderr_silenced

#: interleaved rounds of plain and wrapped calls, and calls a round: about 0.2 s on an idle CPU
COST_ROUNDS = 7
COST_CALLS = 800
#: measurements tried before a wrapper cost no larger than this host's noise is given as 0 (a
#: run under two test workers once read 0.0 us: the plain calls' fastest round was quieter)
COST_ATTEMPTS = 3

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
    #: unpriced instruments ran on top (deep mode's probes, eager attention): a lower bound
    probes: bool
    #: block-output statistics: microseconds one probed decode step costs, and the share of
    #: decode steps probed (both 0 without them); included in `us_per_decode_step`
    us_per_probed_step: float = 0.0
    probed_decode_share: float = 0.0
    #: what a window is: a timed module call, or (under torch.compile, whose kernels are read
    #: from torch.profiler: instrument/compiled.py) one profiler event
    unit: str = "timed windows"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the store's `instrument_cost` column)."""
        return asdict(self)

    def line(self) -> str:
        """What a run prints: 'instruments cost about 2.1% of decode (41 us a step) ...'."""
        bound = "at least " if self.probes else "about "
        stats = ""
        if self.probed_decode_share > 0:
            stats = (
                f" + statistics {self.us_per_probed_step:.0f} us on "
                f"{100 * self.probed_decode_share:.0f}% of steps"
            )
        text = (
            f"instruments cost {bound}{100 * self.decode_share:.1f}% of decode "
            f"({self.us_per_decode_step:.0f} us a step: {self.windows_per_decode_step:.0f} "
            f"{self.unit} x {self.us_per_window:.2f} us{stats}) and at least "
            f"{100 * self.prefill_share:.1f}% of prefill"
        )
        if self.probes:
            text += "; deep mode's attention probes and eager attention are not priced"
        return text


def _tiny_linear() -> tuple[Any, Callable[[], float]]:
    """A tiny Linear and a timer of its mean call (us over COST_CALLS calls).

    The unit both instrument prices (the wrapper's, torch.profiler's event) are measured on.
    """
    import torch

    lin = torch.nn.Linear(8, 8)
    x = torch.randn(1, 8)

    def per_call_us() -> float:
        t0 = time.perf_counter()
        with torch.inference_mode():
            for _ in range(COST_CALLS):
                lin(x)
        return (time.perf_counter() - t0) / COST_CALLS * 1e6

    return lin, per_call_us


def window_cost_us(clock: Any) -> float:
    """Microseconds the profiler's timing wrapper adds to one module call, on this host.

    Measured once a process per clock kind with the profiler's own `_register` wrapper around a
    tiny Linear: plain and wrapped calls alternate for `COST_ROUNDS` rounds, and the difference
    of the two fastest rounds is kept. Another process's work only ever adds time to a round;
    the median of the rounds' differences read 0 on a host running two test workers. A
    difference that is not positive (the wrapper cannot cost nothing) is measured again, up to
    `COST_ATTEMPTS` times.
    """
    key = type(clock).__name__
    if key in _CACHE:
        return _CACHE[key]
    import torch

    from infermeter.instrument.config import ProfilingConfig
    from infermeter.instrument.profiler import Profiler

    lin, per_call_us = _tiny_linear()
    prof = Profiler(torch.nn.Sequential(lin), ProfilingConfig.custom(part_timing=False), clock)
    per_call_us()  # warm
    found = 0.0
    for _ in range(COST_ATTEMPTS):  # a busy spell can land in the plain calls' fastest round
        plain, wrapped = [], []
        for _ in range(COST_ROUNDS):
            plain.append(per_call_us())
            prof._register(lin, "block", 0)  # one timing wrapper, as on every timed module
            prof.active, prof._step = True, 0
            wrapped.append(per_call_us())
            prof.detach()
        found = min(wrapped) - min(plain)
        if found > 0:
            _CACHE[key] = found
            return found
    return max(0.0, found)  # not resolved on this host now: not cached, tried again next time


def profiler_event_cost_us() -> float:
    """Microseconds torch.profiler adds for each event it records (CPU activity), on this host.

    Under torch.compile the run reads its kernels from torch.profiler instead of wrapping
    modules: each kernel call, allocation and view it records is one event. A tiny Linear's
    calls run plain and under a running profiler in interleaved rounds; the difference of the
    fastest rounds over the events one call records. Measured once a process, like the wrapper.
    """
    key = "torch.profiler"
    if key in _CACHE:
        return _CACHE[key]
    import torch

    _, per_call_us = _tiny_linear()
    per_call_us()  # warm
    found = 0.0
    events = 0  # per call: the same each round, counted once (turning a profile's records
    # into Python events took 1 s a round, 7.5 s of a compiled run's 13 s in the suite)
    for _ in range(COST_ATTEMPTS):
        plain, profiled = [], []
        for _ in range(COST_ROUNDS):
            plain.append(per_call_us())
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
            with native_stderr_silenced():  # kineto's start line
                prof.__enter__()
            profiled.append(per_call_us())
            with native_stderr_silenced():
                prof.__exit__(None, None, None)
            if not events:
                events = max(1, round(len(prof.events()) / COST_CALLS))
        found = (min(profiled) - min(plain)) / events
        if found > 0:
            _CACHE[key] = found
            return found
    return max(0.0, found)


def probed_step_cost_us(profiler: Any, rows: int = 1) -> float:
    """Microseconds one probed decode step's block-output statistics cost (0 without them).

    A fresh probe of the run's shape (its blocks, hidden size, device and settings) stages a
    decode-sized output of every block and reduces them, as the profiler's own probe does at the
    end of a probed forward; the median of `COST_ROUNDS` such steps is kept.
    """
    if profiler.activations is None:
        return 0.0
    import torch

    from infermeter.instrument.probes import ActivationProbe

    cfg = profiler.config
    blocks = max(1, len(profiler.arch.blocks))
    probe = ActivationProbe(
        blocks,
        profiler.device,
        cfg.activation_eps,
        blocks * (COST_ROUNDS + 1),
        stage_width=profiler.hidden * cfg.stage_batch,
        stage_rows=cfg.stage_batch,
    )
    x = torch.randn(rows, 1, max(1, profiler.hidden), device=profiler.device)
    times = []
    for _ in range(COST_ROUNDS + 1):
        t0 = time.perf_counter()
        for layer in range(blocks):
            probe.record(1, layer, x)
        probe.flush()
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times[1:])  # the first is a warm-up


def estimate(
    us_per_window: float,
    windows: dict[str, float],
    ttft_ms: float,
    tpot_ms: float,
    probes: bool,
    us_per_probed_step: float = 0.0,
    probed_decode_share: float = 0.0,
    unit: str = "timed windows",
) -> InstrumentCost:
    """The run's estimate: its windows per step times their price, plus statistics.

    `windows` is `Profiler.windows_per_step()`; where statistics ran, one probed step's price
    and the share of decode steps probed add theirs.
    """
    prefill = windows.get("prefill", 0.0)
    decode = windows.get("decode", 0.0)
    us_decode = decode * us_per_window + us_per_probed_step * probed_decode_share
    us_prefill = prefill * us_per_window

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
        us_per_probed_step=us_per_probed_step,
        probed_decode_share=probed_decode_share,
        unit=unit,
    )
