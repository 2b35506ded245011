"""Peak memory per sample: CUDA allocator peaks and free memory, and the process's peak RSS.

On Linux the resident-set peak (VmHWM) can be reset by writing "5" to /proc/self/clear_refs
(kernel >= 4.0), which gives a true per-sample peak on CPU. Where that is refused, the peak is the
process-lifetime maximum and says so (`rss_peak_method`), rather than pretending to be per sample.
"""

from __future__ import annotations

import os
import resource
import sys
from dataclasses import asdict, dataclass
from typing import Any, TypedDict, cast

import psutil

MIB = 1024 * 1024
#: MPS has no peak counter: what its "peak" allocation is, said wherever it is shown
MPS_PEAK_METHOD = (
    "allocation at the sample's end (MPS keeps no peak counter: a lower bound of the peak)"
)
_CLEAR_REFS = "/proc/self/clear_refs"
_STATUS = "/proc/self/status"


class SampleMemoryDoc(TypedDict, total=False):
    """A sample's memory as stored (`MemoryReading.to_dict`, plus its page faults).

    Every key is optional: a load run's request has none, and a CPU no allocator counters.
    """

    peak_allocated_mib: float | None
    peak_reserved_mib: float | None
    device_free_mib: float | None
    device_total_mib: float | None
    rss_mib: float
    rss_peak_mib: float
    rss_peak_method: str
    device_peak_method: str | None
    #: minor page faults of the process in the sample's prefill and decode (measure/faults.py)
    page_faults_prefill: int
    page_faults_decode: int


@dataclass(frozen=True)
class MemoryReading:
    """Memory of one sample, in MiB; None where the device has no such counter."""

    peak_allocated_mib: float | None
    peak_reserved_mib: float | None
    device_free_mib: float | None
    device_total_mib: float | None
    rss_mib: float
    rss_peak_mib: float
    rss_peak_method: str
    #: what `peak_allocated_mib` is: the allocator's peak since the sample began (CUDA), or
    #: the allocation at the sample's end (MPS keeps no peak counter: a lower bound); None
    #: where the device has no allocator counters (CPU)
    device_peak_method: str | None = None

    def to_dict(self) -> SampleMemoryDoc:
        """Plain dict for JSON and the store."""
        return cast(SampleMemoryDoc, asdict(self))


def _read_vm_hwm_mib() -> float | None:
    try:
        with open(_STATUS) as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / MIB
    except OSError:
        return None
    return None


def _lifetime_peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # ru_maxrss is KiB on Linux and bytes on macOS.
    return peak / MIB if sys.platform == "darwin" else peak * 1024 / MIB


class MemoryTracker:
    """Resets peaks before a sample and reads them after it.

    Args:
        device: torch device (or its string) the model runs on.
    """

    def __init__(self, device: Any = "cpu") -> None:
        import torch

        self._torch = torch
        self.device = torch.device(device)
        self._process = psutil.Process(os.getpid())
        self._can_reset_rss = self._try_reset_rss()
        self.rss_peak_method = "per_sample_vmhwm" if self._can_reset_rss else "process_lifetime"

    @staticmethod
    def _try_reset_rss() -> bool:
        try:
            with open(_CLEAR_REFS, "w") as fh:
                fh.write("5")
        except OSError:
            return False
        return _read_vm_hwm_mib() is not None

    def reset(self) -> None:
        """Start a new peak window: CUDA peak stats and (where allowed) the RSS peak."""
        if self.device.type == "cuda":
            self._torch.cuda.reset_peak_memory_stats(self.device)
        if self._can_reset_rss:
            self._try_reset_rss()

    def read(self) -> MemoryReading:
        """Peaks since the last `reset`, plus current device free/total memory."""
        peak_alloc = peak_res = free = total = method = None
        if self.device.type == "cuda":
            method = "allocator peak since the sample began"
            cuda = self._torch.cuda
            peak_alloc = cuda.max_memory_allocated(self.device) / MIB
            peak_res = cuda.max_memory_reserved(self.device) / MIB
            free_b, total_b = cuda.mem_get_info(self.device)
            free, total = free_b / MIB, total_b / MIB
        elif self.device.type == "mps":
            method = MPS_PEAK_METHOD
            peak_alloc = self._torch.mps.current_allocated_memory() / MIB
            peak_res = self._torch.mps.driver_allocated_memory() / MIB
        rss = self._process.memory_info().rss / MIB
        if self._can_reset_rss:
            hwm = _read_vm_hwm_mib()
            rss_peak = max(hwm if hwm is not None else rss, rss)
        else:
            rss_peak = max(_lifetime_peak_rss_mib(), rss)
        return MemoryReading(
            peak_allocated_mib=peak_alloc,
            peak_reserved_mib=peak_res,
            device_free_mib=free,
            device_total_mib=total,
            rss_mib=rss,
            rss_peak_mib=rss_peak,
            rss_peak_method=self.rss_peak_method,
            device_peak_method=method,
        )


def available_memory_mib(device: Any) -> float:
    """Memory a new model could use on `device`: free CUDA memory, else available system RAM."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        free_b, _ = torch.cuda.mem_get_info(dev)
        return float(free_b) / MIB
    return float(psutil.virtual_memory().available) / MIB
