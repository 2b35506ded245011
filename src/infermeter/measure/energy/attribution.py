"""Energy of a time window from a trace of cumulative readings, with an honest label.

The trace is cumulative joules per domain at known times. The energy of a window [a, b] is the
piecewise-linear interpolation of the summed cumulative curve at b minus that at a: exact at
readings, and a constant-power assumption between two readings. That is a *measurement* when
the window is at least one sensor update period long (the counter moved during it). A shorter
window (a 3 ms decode step read by a counter updated every 100 ms) would give a meaningless
number, often 0; instead we take the mean power over a span of at least one update period (and
two reading intervals) centred on the window and multiply by its length, labelled "estimated".
A window outside the trace is None ("not covered"), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

#: A reading more than this many intervals after the previous one marks a gap.
GAP_FACTOR = 3.0


def power_spans(
    t_ms: Any, total_j: Any, update_period_ms: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """(midpoint times in ms, mean power in W) of a cumulative-energy trace, span by span.

    A span closes at the first reading at least one update period after it opened at which
    the counter has moved. Power between every two readings instead divides a counter that
    had not ticked by a few milliseconds: on an H100 (NVML's counter, polled at the edges of
    each sample) that drew 0 W beside 2,511 W on a 700 W card. The spans' energies add up to
    the trace's; the last span closes at the last reading.
    """
    t = np.asarray(t_ms, dtype=float)
    j = np.asarray(total_j, dtype=float)
    mids: list[float] = []
    watts: list[float] = []
    start = 0
    for i in range(1, len(t)):
        long_enough = t[i] - t[start] >= update_period_ms and t[i] > t[start]
        if (long_enough and j[i] != j[start]) or (i == len(t) - 1 and t[i] > t[start]):
            mids.append((t[start] + t[i]) / 2)
            watts.append((j[i] - j[start]) / ((t[i] - t[start]) / 1e3))
            start = i
    return np.array(mids), np.array(watts)


@dataclass(frozen=True)
class WindowEnergy:
    """Energy of one window: total and per domain (J), mean power (W), how it was obtained.

    `quality` is "measured" (interpolated counter difference over a window of at least one update
    period) or "estimated" (mean power around a too-short window x its length).
    """

    energy_j: float
    mean_power_w: float
    quality: str
    domains: dict[str, float]
    in_gap: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON and the store."""
        return {
            "energy_j": self.energy_j,
            "mean_power_w": self.mean_power_w,
            "quality": self.quality,
            "domains": self.domains,
            "in_gap": self.in_gap,
        }


class SampleEnergyDoc(TypedDict, total=False):
    """One sample's energy (run/energy.py `sample_energy`), as stored with the sample.

    Joules of the whole sample, its prefill and its decode, per token of each, the mean power,
    per domain, and how each window's figure was read (`quality`: "measured", or "estimated"
    from mean power where a window is shorter than the sensor's update period).
    """

    energy_j: float
    mean_power_w: float
    prefill_j: float | None
    decode_j: float | None
    j_per_token: float | None
    j_per_prompt_token: float | None
    j_per_decode_token: float | None
    quality: dict[str, str | None]
    domains_j: dict[str, float]
    in_gap: bool
    co2_g: float


class EnergyDoc(TypedDict, total=False):
    """A run's energy block (run/energy.py), as stored with it.

    Where its power came from and how it was read, the readings' gaps and errors, the
    totals, or why nothing measured it (`available` False, with `reason` and `fix`). Units
    are in the names.
    """

    available: bool
    reason: str
    fix: str
    source: str
    method: str
    #: per source, the method it measured with
    methods: dict[str, str]
    domains: list[str]
    interval_ms: float
    update_period_ms: float
    readings: int
    gaps: list[dict[str, float]]
    errors: list[str]
    #: the sources that were not there, each with its reason and fix
    unavailable: list[dict[str, str]]
    sampled_j: float | None
    sampled_s: float
    sampled_mean_power_w: float | None
    measured_samples_j: float | None
    grid_g_per_kwh: float | None
    co2_g: float


class PowerDoc(TypedDict):
    """A run's power readings as kept with it.

    Cumulative joules per domain (one row per reading, in `domains` order) at `t_ms` on the
    run's timeline.
    """

    source: str
    domains: list[str]
    t_ms: list[float]
    joules: list[list[float]]


@dataclass
class PowerTrace:
    """Cumulative joules per domain at times `t_ms` (one row per reading)."""

    source: str
    method: str
    domains: list[str]
    t_ms: np.ndarray
    joules: np.ndarray
    interval_ms: float
    update_period_ms: float
    errors: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.t_ms)

    def to_doc(self) -> PowerDoc:
        """The readings as the run keeps them (plain lists, for JSON and the store)."""
        return {
            "source": self.source,
            "domains": list(self.domains),
            "t_ms": self.t_ms.tolist(),
            "joules": self.joules.tolist(),
        }

    @property
    def total_j(self) -> np.ndarray:
        """Cumulative joules summed over domains, per reading."""
        return self.joules.sum(axis=1) if self.joules.size else np.zeros(len(self.t_ms))

    def shifted(self, offset_ms: float) -> PowerTrace:
        """The same trace with `offset_ms` added to every time (to join a run's timeline)."""
        return PowerTrace(
            self.source,
            self.method,
            self.domains,
            self.t_ms + offset_ms,
            self.joules,
            self.interval_ms,
            self.update_period_ms,
            self.errors,
        )

    def gaps(self) -> list[dict[str, float]]:
        """Stretches between readings longer than GAP_FACTOR intervals (start and length, ms)."""
        if len(self.t_ms) < 2:
            return []
        dt = np.diff(self.t_ms)
        idx = np.nonzero(dt > GAP_FACTOR * self.interval_ms)[0]
        return [{"start_ms": float(self.t_ms[i]), "duration_ms": float(dt[i])} for i in idx]

    def power_w(self) -> tuple[np.ndarray, np.ndarray]:
        """(midpoint times in ms, mean total power in W), over spans the counter can resolve."""
        return power_spans(self.t_ms, self.total_j, self.update_period_ms)

    def _at(self, t: float) -> np.ndarray:
        return np.array(
            [np.interp(t, self.t_ms, self.joules[:, k]) for k in range(len(self.domains))]
        )

    def covers(self, a_ms: float, b_ms: float) -> bool:
        """Whether [a, b] lies within the first and last reading."""
        return len(self.t_ms) >= 2 and self.t_ms[0] <= a_ms and b_ms <= self.t_ms[-1]

    def window(self, a_ms: float, b_ms: float) -> WindowEnergy | None:
        """Energy from a_ms to b_ms; None when the trace does not cover the window."""
        if b_ms < a_ms or not self.covers(a_ms, b_ms):
            return None
        length = b_ms - a_ms
        in_gap = any(
            g["start_ms"] < b_ms and a_ms < g["start_ms"] + g["duration_ms"] for g in self.gaps()
        )
        span = max(self.update_period_ms, 2 * self.interval_ms)
        if length >= self.update_period_ms and length > 0:
            per_domain = self._at(b_ms) - self._at(a_ms)
            energy = float(per_domain.sum())
            return WindowEnergy(
                energy,
                energy / (length / 1e3),
                "measured",
                dict(zip(self.domains, per_domain.tolist(), strict=True)),
                in_gap,
            )
        mid = (a_ms + b_ms) / 2
        lo = max(self.t_ms[0], mid - span / 2)
        hi = min(self.t_ms[-1], mid + span / 2)
        if hi - lo < span:  # near an end of the trace: shift the span inside it
            lo, hi = (self.t_ms[0], min(self.t_ms[-1], self.t_ms[0] + span))
            if mid > (self.t_ms[0] + self.t_ms[-1]) / 2:
                lo, hi = max(self.t_ms[0], self.t_ms[-1] - span), self.t_ms[-1]
        if hi <= lo:
            return None
        per_domain_w = (self._at(hi) - self._at(lo)) / ((hi - lo) / 1e3)
        per_domain = per_domain_w * (length / 1e3)
        return WindowEnergy(
            float(per_domain.sum()),
            float(per_domain_w.sum()),
            "estimated",
            dict(zip(self.domains, per_domain.tolist(), strict=True)),
            in_gap,
        )
