"""Choosing the energy sources of a run: `--energy auto|nvml|rapl|powermetrics|off`.

`auto` combines every source this machine has (GPU through NVML, CPU package and DRAM through
RAPL, Apple silicon through powermetrics), since the energy of inference is all of them; the
domains keep them apart ("nvml:gpu-0", "rapl:package-0"). A source that is missing is then just
reported unavailable with its reason. A source the user names explicitly must be there: if it is
not, that is an error (exit 2) carrying the reason and the fix, before anything runs.
`INFERMETER_POWERCAP` points RAPL at another powercap folder (containers that mount sysfs
elsewhere, and tests).
"""

from __future__ import annotations

import os
from pathlib import Path

from infermeter.errors import UserError
from infermeter.measure.energy.base import EnergySource, Unavailable
from infermeter.measure.energy.powermetrics import probe_powermetrics_source
from infermeter.measure.energy.rapl import POWERCAP, probe_rapl

CHOICES = ("auto", "nvml", "rapl", "powermetrics", "off")


class CompositeSource:
    """Several sources read together; domains are prefixed with their source's name."""

    def __init__(self, sources: list[EnergySource]) -> None:
        self.sources = sources
        self.name = "+".join(s.name for s in sources)
        methods = {s.method for s in sources}
        self.method = methods.pop() if len(methods) == 1 else "mixed"
        self.update_period_s = max(s.update_period_s for s in sources)

    def domains(self) -> list[str]:
        """source:domain for every domain of every source."""
        return [f"{s.name}:{d}" for s in self.sources for d in s.domains()]

    def read_j(self) -> dict[str, float]:
        """Joules per prefixed domain."""
        out: dict[str, float] = {}
        for s in self.sources:
            out.update({f"{s.name}:{d}": j for d, j in s.read_j().items()})
        return out

    def methods(self) -> dict[str, str]:
        """Method per source (and per GPU for NVML)."""
        out = {}
        for s in self.sources:
            per = getattr(s, "methods", None)
            if per is not None:
                out.update({f"{s.name}:{d}": m for d, m in per().items()})
            else:
                out[s.name] = s.method
        return out

    def close(self) -> None:
        """Close every source that holds a process or library."""
        for s in self.sources:
            close = getattr(s, "close", None)
            if close is not None:
                close()


def _nvml() -> EnergySource | Unavailable:
    try:
        import pynvml
    except ImportError:
        return Unavailable("nvml", "nvidia-ml-py is not installed", "pip install nvidia-ml-py")
    from infermeter.measure.energy.nvml import NvmlSource, cuda_uuids

    try:
        source = NvmlSource(pynvml, uuids=cuda_uuids())
    except pynvml.NVMLError as exc:
        return Unavailable("nvml", f"NVML did not initialise ({exc}): no NVIDIA driver or GPU")
    if not source.domains():
        source.close()
        return Unavailable("nvml", "no NVIDIA GPU is visible to this process")
    return source


def open_source(
    choice: str, interval_ms: float = 100.0
) -> tuple[CompositeSource | None, list[Unavailable]]:
    """The sources for `choice`, and the ones that are unavailable (with reasons).

    Raises:
        UserError: unknown choice, or an explicitly named source that is not available.
    """
    if choice not in CHOICES:
        raise UserError(f"--energy {choice!r} is not a source", f"use one of {', '.join(CHOICES)}")
    if choice == "off":
        return None, [Unavailable("energy", "energy measurement is off (--energy off)")]
    wanted = ("nvml", "rapl", "powermetrics") if choice == "auto" else (choice,)
    found: list[EnergySource] = []
    missing: list[Unavailable] = []
    for name in wanted:
        if name == "nvml":
            got = _nvml()
        elif name == "rapl":
            got = probe_rapl(Path(os.environ.get("INFERMETER_POWERCAP", POWERCAP)))
        else:
            got = probe_powermetrics_source(int(interval_ms))
        if isinstance(got, Unavailable):
            if choice != "auto":
                raise UserError(
                    f"--energy {name}: {got.reason}",
                    got.fix or "use --energy auto (or off); `infermeter energy probe` explains",
                )
            missing.append(got)
        else:
            found.append(got)
    return (CompositeSource(found) if found else None), missing
