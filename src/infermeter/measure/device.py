"""Device and dtype names as users type them, validated, and a description of the hardware."""

from __future__ import annotations

import os
import platform
from typing import Any, TypedDict

import psutil

from infermeter.errors import UserError

DTYPES = ("auto", "float32", "bfloat16", "float16")
_DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}


def resolve_device(name: str | None) -> Any:
    """Turn 'auto', 'cpu', 'cuda', 'cuda:1' or 'mps' into an available torch.device."""
    import torch

    name = (name or "auto").strip().lower()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(name)
    except (RuntimeError, ValueError):
        raise UserError(f"unknown device {name!r}", "use auto, cpu, cuda, cuda:N or mps") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise UserError(
                f"device {name!r} requested but CUDA is not available here",
                "use --device cpu (or auto), or install a CUDA build of torch",
            )
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        if index >= torch.cuda.device_count():
            raise UserError(
                f"device {name!r} does not exist ({torch.cuda.device_count()} CUDA devices)",
                f"use cuda:0..cuda:{torch.cuda.device_count() - 1}",
            )
        return torch.device("cuda", index)
    if dev.type == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise UserError("device 'mps' is not available here", "use --device cpu or auto")
        return dev
    if dev.type == "cpu":
        return dev
    raise UserError(f"unsupported device {name!r}", "use auto, cpu, cuda, cuda:N or mps")


def resolve_dtype(name: str | None, device: Any) -> Any:
    """Turn a dtype name into a torch.dtype the device supports; 'auto' picks the usual one.

    'auto' is float32 on CPU (bf16 matmuls are slow on most CPUs), bfloat16 on CUDA when the GPU
    supports it and float16 otherwise, float16 on MPS.
    """
    import torch

    raw = (name or "auto").strip().lower()
    key = _DTYPE_ALIASES.get(raw, raw)
    if key not in DTYPES:
        raise UserError(
            f"unknown dtype {name!r}",
            f"use one of {', '.join(DTYPES)} (or int8, int4, fp8 weights)",
        )
    dev = torch.device(device)
    if key == "auto":
        if dev.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float16 if dev.type == "mps" else torch.float32
    dtype = getattr(torch, key)
    if dev.type == "cuda" and dtype is torch.bfloat16 and not torch.cuda.is_bf16_supported():
        raise UserError(
            f"dtype bfloat16 is not supported on {torch.cuda.get_device_name(dev)}",
            "use --dtype float16 or float32",
        )
    if dev.type == "mps" and dtype is torch.bfloat16:
        raise UserError("dtype bfloat16 is not supported on mps here", "use --dtype float16")
    return dtype


def dtype_name(dtype: Any) -> str:
    """'torch.float32' -> 'float32'."""
    return str(dtype).removeprefix("torch.")


class DeviceDoc(TypedDict, total=False):
    """The stored record of a run's device (`RunResult.device`): what `describe_device` read.

    CUDA devices add name, memory, capability, multiprocessors and `identity` (which physical
    GPU: measure/gpu_identity.py); CPUs add the page-fault cost and malloc's mmap threshold.
    Older stored runs may lack any key but `type`, so every key is optional to a reader.
    """

    type: str
    #: "endpoint" for a load run against a server: no local device, its URL as the name
    kind: str
    index: int | None
    name: str
    total_memory_mib: float
    capability: str
    multiprocessors: int
    identity: dict[str, Any]
    cpu_count: int | None
    torch_threads: int
    host_memory_mib: float
    page_fault_us: float | None
    mmap_threshold_bytes: int | None
    #: what else the machine did while the samples ran (measure/host.py's watch), after a run
    host: dict[str, Any]


def describe_device(device: Any) -> DeviceDoc:
    """Name and size of the hardware behind a torch device, for every run's record."""
    import torch

    dev = torch.device(device)
    info: DeviceDoc = {"type": dev.type, "index": dev.index}
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        info["name"] = str(props.name)
        info["total_memory_mib"] = props.total_memory / 2**20
        info["capability"] = f"{props.major}.{props.minor}"
        info["multiprocessors"] = int(props.multi_processor_count)
        from infermeter.measure.gpu_identity import cuda_identity

        # which physical GPU this is: nvidia-smi's number, through CUDA_VISIBLE_DEVICES
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        info["identity"] = cuda_identity(props, index)
    else:
        info["name"] = _cpu_name() if dev.type == "cpu" else platform.processor() or dev.type
    info["cpu_count"] = os.cpu_count()
    info["torch_threads"] = torch.get_num_threads()
    # Kept with the run so that analysis on another machine judges memory against this one's.
    info["host_memory_mib"] = psutil.virtual_memory().total / 2**20
    if dev.type == "cpu":  # what a page fault costs here: the bottleneck rules put faults in ms
        from infermeter.measure.faults import fault_seconds_here, mmap_threshold_bytes

        fault_s = fault_seconds_here()
        info["page_fault_us"] = fault_s * 1e6 if fault_s is not None else None
        info["mmap_threshold_bytes"] = mmap_threshold_bytes()
    return info


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
