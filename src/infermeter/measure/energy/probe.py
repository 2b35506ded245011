"""Which energy sources this machine has, and for each one that is missing, why.

Used by `infermeter energy probe`. Reasons are specific (library missing, no driver, not macOS,
counters root-only) so a user knows whether energy is impossible here or one step away.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from infermeter.measure.energy.base import Unavailable
from infermeter.measure.energy.rapl import POWERCAP, probe_rapl


@dataclass(frozen=True)
class ProbeResult:
    """One source: available or not, what it measures, or why not and what would fix it."""

    source: str
    available: bool
    detail: str
    fix: str = ""


def probe_nvml() -> ProbeResult:
    """NVIDIA GPUs through NVML (nvidia-ml-py); energy counter support is checked per device."""
    try:
        import pynvml
    except ImportError:
        return ProbeResult(
            "nvml", False, "nvidia-ml-py is not installed", "pip install nvidia-ml-py"
        )
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return ProbeResult(
            "nvml",
            False,
            f"NVML did not initialise ({exc}): no NVIDIA driver or GPU on this machine",
        )
    try:
        names = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else name
            try:
                pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
                method = "energy counter"
            except pynvml.NVMLError:
                method = "power polling (no energy counter)"
            names.append(f"GPU {i} {name}: {method}")
    finally:
        pynvml.nvmlShutdown()
    if not names:
        return ProbeResult("nvml", False, "NVML found no GPUs")
    return ProbeResult("nvml", True, "; ".join(names))


def probe_powermetrics() -> ProbeResult:
    """Apple silicon CPU/GPU/ANE power through `powermetrics` (macOS, needs sudo)."""
    if sys.platform != "darwin":
        return ProbeResult("powermetrics", False, f"macOS only (this is {sys.platform})")
    if shutil.which("powermetrics") is None:
        return ProbeResult("powermetrics", False, "the powermetrics tool is not on PATH")
    return ProbeResult(
        "powermetrics",
        True,
        "present; sampling it needs sudo",
        "run infermeter with sudo, or allow powermetrics in sudoers",
    )


def probe_all() -> list[ProbeResult]:
    """Every source this product knows, probed on this machine."""
    rapl = probe_rapl(Path(os.environ.get("INFERMETER_POWERCAP", POWERCAP)))
    if isinstance(rapl, Unavailable):
        rapl_result = ProbeResult("rapl", False, rapl.reason, rapl.fix)
    else:
        rapl_result = ProbeResult("rapl", True, "counters: " + ", ".join(rapl.domains()))
    return [rapl_result, probe_nvml(), probe_powermetrics()]
