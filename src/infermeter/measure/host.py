"""What else the machine did while a run measured: the host is part of the measurement.

Why: a new user's profile read TTFT 525 ms and TPOT 31 ms beside other work on 2 cores, and
14.8 / 9.8 ms with torch on one thread; nothing was recorded and nothing warned (issue 59).
Times taken on a machine whose cores other processes hold are not the model's times.

How: `HostWatch` reads the system's CPU times (all cores) and this process's own (its threads
and children) when the measured samples start and when they end. What the machine spent beyond
this process is what other processes took, as busy cores on average over the window; Linux's
`steal` is what a hypervisor took from this virtual machine. The load average, the CPU
frequency where the kernel shows it, and torch's thread count are kept beside them.

A run is called busy when other processes held at least half a core and, with the run's own
use, every core was taken (the machine was saturated: some thread, often torch's, waited for a
core), or when a hypervisor took over 5% of the CPU time. Every time it reports is then
inflated by that wait. (Other processes on cores the run leaves free do not make it busy: a
64-core machine running other work beside a 32-thread run is not.)
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass

import psutil

#: other processes' busy cores below this never make a run busy (a shell, a daemon's tick)
QUIET_CORES = 0.5
#: a hypervisor's share of the CPU time above this makes a run busy
STEAL_SHARE = 0.05
#: cores left idle, at most, for the machine to count as saturated (scheduling leaves gaps)
SATURATED_SLACK = 0.25


@dataclass(frozen=True)
class HostLoad:
    """The machine while a run measured: what other processes took, and its settings."""

    window_s: float
    cpu_count: int
    torch_threads: int
    #: cores other processes kept busy, on average over the window
    other_busy_cores: float
    #: cores this process (its threads and children) kept busy, on average over the window
    own_busy_cores: float
    #: share of all CPU time a hypervisor took (Linux `steal`); None where not reported
    steal_share: float | None
    #: the 1-minute load average at the end (runnable processes); None where not reported
    load_avg_1m: float | None
    #: the CPU's current frequency at the end, where the kernel shows it
    cpu_mhz: float | None

    @property
    def saturated(self) -> bool:
        """Whether the run and the other processes together took (nearly) every core."""
        return self.own_busy_cores + self.other_busy_cores >= self.cpu_count - SATURATED_SLACK

    @property
    def busy(self) -> bool:
        """Whether other processes (or a hypervisor) competed with the run for cores."""
        held = self.other_busy_cores >= QUIET_CORES and self.saturated
        stolen = self.steal_share is not None and self.steal_share > STEAL_SHARE
        return held or stolen

    def verdict(self) -> str | None:
        """One sentence for a busy host, with its figures; None for a quiet one."""
        if not self.busy:
            return None
        parts = [
            f"other processes kept {self.other_busy_cores:.1f} of {self.cpu_count} cores busy "
            f"while it measured (torch used {self.torch_threads} thread"
            f"{'' if self.torch_threads == 1 else 's'})"
        ]
        if self.steal_share is not None and self.steal_share > STEAL_SHARE:
            parts.append(f"the hypervisor took {self.steal_share:.0%} of the CPU time")
        if self.load_avg_1m is not None:
            parts.append(f"load average {self.load_avg_1m:.1f}")
        return (
            "busy host: "
            + "; ".join(parts)
            + ". Its times are inflated by waiting for cores: measure on a quiet machine, or "
            "give torch only the free cores (--threads)"
        )

    def to_dict(self) -> dict[str, float | int | bool | None]:
        """The stored form (the run's device document, `host`), with the verdict's flag."""
        return {**asdict(self), "busy": self.busy}

    @classmethod
    def from_dict(cls, doc: dict[str, float | int | bool | None]) -> HostLoad:
        """Read back `to_dict`'s form (runs stored before this existed have none)."""

        def num(key: str) -> float | None:
            value = doc.get(key)
            return None if value is None else float(value)

        return cls(
            window_s=float(doc.get("window_s") or 0.0),
            cpu_count=int(doc.get("cpu_count") or 1),
            torch_threads=int(doc.get("torch_threads") or 1),
            other_busy_cores=float(doc.get("other_busy_cores") or 0.0),
            own_busy_cores=float(doc.get("own_busy_cores") or 0.0),
            steal_share=num("steal_share"),
            load_avg_1m=num("load_avg_1m"),
            cpu_mhz=num("cpu_mhz"),
        )


def _busy_s(times: psutil._common.scputimes) -> tuple[float, float]:
    """(busy seconds, steal seconds) of the whole machine's CPU times."""
    idle = times.idle + getattr(times, "iowait", 0.0)
    steal = getattr(times, "steal", 0.0)
    return sum(times) - idle - steal, steal


def _own_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system + t.children_user + t.children_system)


class HostWatch:
    """Started where the measured samples start; `stop()` gives the window's `HostLoad`."""

    def __init__(self) -> None:
        self._proc = psutil.Process()
        self._t0 = time.perf_counter()
        self._cpu0 = psutil.cpu_times()
        self._own0 = _own_s(self._proc)

    def stop(self, torch_threads: int) -> HostLoad:
        """What other processes took since the start (a window of 0 s reads as quiet)."""
        window_s = time.perf_counter() - self._t0
        cpu1 = psutil.cpu_times()
        busy0, steal0 = _busy_s(self._cpu0)
        busy1, steal1 = _busy_s(cpu1)
        own_s = _own_s(self._proc) - self._own0
        total_s = sum(cpu1) - sum(self._cpu0)
        other = max(0.0, (busy1 - busy0) - own_s) / window_s if window_s > 0 else 0.0
        own = own_s / window_s if window_s > 0 else 0.0
        has_steal = hasattr(cpu1, "steal")
        steal = (steal1 - steal0) / total_s if has_steal and total_s > 0 else None
        try:
            load: float | None = os.getloadavg()[0]
        except OSError:  # not on this platform
            load = None
        try:
            freq = psutil.cpu_freq()
            mhz = float(freq.current) if freq is not None and freq.current else None
        except (OSError, NotImplementedError, AttributeError):
            mhz = None
        return HostLoad(
            window_s=window_s,
            cpu_count=psutil.cpu_count() or 1,
            torch_threads=torch_threads,
            other_busy_cores=other,
            own_busy_cores=own,
            steal_share=steal,
            load_avg_1m=load,
            cpu_mhz=mhz,
        )
