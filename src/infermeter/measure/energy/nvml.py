"""NVIDIA GPU energy through NVML (nvidia-ml-py), per GPU visible to this process.

Each GPU uses its total-energy counter (`nvmlDeviceGetTotalEnergyConsumption`, millijoules,
Volta and newer) when the driver supports it; otherwise its power draw
(`nvmlDeviceGetPowerUsage`, milliwatts) is polled and integrated with the trapezoid rule, and the
method says so. A query that raises NotSupported on one GPU changes the method of that GPU only.
NVML counts GPUs physically; `CUDA_VISIBLE_DEVICES` (indices or GPU-UUIDs) says which of them
this process sees. The order is CUDA's (fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID), so
where torch can tell each GPU's UUID the mapping goes by UUID; else by position.
Power readings update every ~20-100 ms depending on the GPU, so integration needs polling at
least that often (the sampler's default is 100 ms; shorter windows are labelled estimates).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any


def visible_physical_indices(nvml: Any, env: str | None = None) -> list[int]:
    """Physical NVML indices of the GPUs this process sees, in CUDA order."""
    count = nvml.nvmlDeviceGetCount()
    value = os.environ.get("CUDA_VISIBLE_DEVICES") if env is None else env
    if value is None:
        return list(range(count))
    uuids: dict[str, int] | None = None
    out = []
    for item in (x.strip() for x in value.split(",")):
        if not item:
            continue
        if item.lstrip("-").isdigit():
            idx = int(item)
            if idx < 0 or idx >= count:
                break  # CUDA stops at the first invalid entry
            out.append(idx)
            continue
        if uuids is None:
            uuids = {}
            for i in range(count):
                u = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i))
                uuids[u.decode() if isinstance(u, bytes) else u] = i
        match = [i for u, i in uuids.items() if u.startswith(item)]
        if len(match) != 1:
            break
        out.append(match[0])
    return out


def nvml_uuid(props: Any) -> str | None:
    """The UUID in torch's device properties as NVML spells it ("GPU-..."), or None."""
    uuid = getattr(props, "uuid", None)
    return None if uuid is None else "GPU-" + str(uuid).removeprefix("GPU-")


def cuda_uuids() -> list[str] | None:
    """The UUID of every GPU CUDA numbers in this process ("GPU-..."), or None without CUDA.

    CUDA orders GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID; NVML by PCI bus. The
    UUIDs say which physical GPU cuda:N is whatever the order.
    """
    import sys

    torch = sys.modules.get("torch")  # only where the run has torch loaded already
    if torch is None or not torch.cuda.is_available():
        return None
    try:
        uuids = [
            nvml_uuid(torch.cuda.get_device_properties(i)) for i in range(torch.cuda.device_count())
        ]
    except RuntimeError:
        return None
    return None if any(u is None for u in uuids) else [u for u in uuids if u is not None]


def physical_by_uuid(nvml: Any, uuids: list[str]) -> list[int] | None:
    """NVML indices of `uuids`, in their order; None when one of them is not found."""
    index = {}
    for i in range(nvml.nvmlDeviceGetCount()):
        u = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i))
        index[u.decode() if isinstance(u, bytes) else u] = i
    found = [index.get(u) for u in uuids]
    return None if any(i is None for i in found) else [int(i) for i in found if i is not None]


class _Gpu:
    def __init__(
        self, nvml: Any, physical: int, label: str, now: Callable[[], float], integrate: bool
    ) -> None:
        self.nvml = nvml
        self.label = label
        self.handle = nvml.nvmlDeviceGetHandleByIndex(physical)
        self.now = now
        self.method = "power-integration" if integrate else "counter"
        if not integrate:
            try:
                self.start_mj = float(nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
            except nvml.NVMLError:  # before Volta, or a driver without it
                self.method = "power-integration"
        if self.method == "power-integration":
            self.total_j = 0.0
            self.last = (now(), nvml.nvmlDeviceGetPowerUsage(self.handle) / 1e3)

    def read_j(self) -> float:
        if self.method == "counter":
            total_mj = float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
            return (total_mj - self.start_mj) / 1e3
        t, watts = self.now(), self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1e3
        t0, w0 = self.last
        self.total_j += (t - t0) * (watts + w0) / 2
        self.last = (t, watts)
        return self.total_j


class NvmlSource:
    """Energy of every visible GPU ("gpu-0" is cuda:0), by counter or integrated power.

    Args:
        nvml: the pynvml module (injected by tests); imported when None.
        now: seconds clock for power integration (injected by tests).
        visible: CUDA_VISIBLE_DEVICES value to use instead of the environment.
        integrate: integrate power even where the counter exists (to check one against the
            other: benchmarks/nvml_integration.py).
        uuids: the UUIDs of cuda:0, cuda:1, ... (`cuda_uuids()`): when given and all found,
            they decide the mapping, else CUDA_VISIBLE_DEVICES does (by position).
    """

    name = "nvml"
    update_period_s = 0.1

    def __init__(
        self,
        nvml: Any = None,
        now: Callable[[], float] = time.perf_counter,
        visible: str | None = None,
        integrate: bool = False,
        uuids: list[str] | None = None,
    ) -> None:
        if nvml is None:
            import pynvml

            nvml = pynvml
        self._nvml = nvml
        nvml.nvmlInit()
        by_uuid = physical_by_uuid(nvml, uuids) if uuids else None
        physical = by_uuid if by_uuid is not None else visible_physical_indices(nvml, visible)
        self._gpus = [_Gpu(nvml, p, f"gpu-{i}", now, integrate) for i, p in enumerate(physical)]
        self.physical = physical

    @property
    def method(self) -> str:
        """How all GPUs are measured: counter, power-integration, or mixed when they differ."""
        methods = {g.method for g in self._gpus}
        return methods.pop() if len(methods) == 1 else "mixed"

    def methods(self) -> dict[str, str]:
        """Method per GPU label."""
        return {g.label: g.method for g in self._gpus}

    def domains(self) -> list[str]:
        """gpu-0, gpu-1, ... in CUDA order."""
        return [g.label for g in self._gpus]

    def read_j(self) -> dict[str, float]:
        """Joules per GPU since this source was created."""
        return {g.label: g.read_j() for g in self._gpus}

    def close(self) -> None:
        """Release NVML."""
        self._nvml.nvmlShutdown()
