"""The protocol every energy source follows, and the null object for "not here"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@runtime_checkable
class EnergySource(Protocol):
    """Cumulative energy per domain, in joules, monotonic for the life of the object.

    Attributes:
        name: "rapl", "nvml" or "powermetrics".
        method: "counter" (hardware energy counter) or "power-integration".
        update_period_s: how often the hardware updates the value; windows shorter than this
            must be labelled estimates, never reported as 0.
    """

    name: str
    update_period_s: float

    @property
    def method(self) -> str:
        """Either "counter" or "power-integration" (NVML decides per device)."""
        ...

    def domains(self) -> list[str]:
        """Names of the measured domains, e.g. ["package-0", "dram-0"]."""
        ...

    def read_j(self) -> dict[str, float]:
        """Joules per domain since this source was created (wrap-arounds already added)."""
        ...


@dataclass(frozen=True)
class Unavailable:
    """A source that is not there, and why (shown by `energy probe`, stored with runs)."""

    name: str
    reason: str
    fix: str = ""
