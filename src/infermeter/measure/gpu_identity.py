"""Which physical GPU `cuda:N` is, for the run header: a number a user can match to nvidia-smi.

Inside a process, CUDA numbers the GPUs it may see from 0; `CUDA_VISIBLE_DEVICES=3,5` makes
physical GPU 3 `cuda:0`. nvidia-smi and NVML number GPUs by PCI bus, while CUDA orders them
fastest first unless `CUDA_DEVICE_ORDER=PCI_BUS_ID`, so on a machine with mixed GPUs position
alone can name the wrong one. The UUID is what both agree on: when NVML is present the physical
index is found by the UUID torch reports; without NVML it is read off `CUDA_VISIBLE_DEVICES` and
the record says which way it was found.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from infermeter.measure.energy.nvml import (
    nvml_uuid,
    physical_by_uuid,
    visible_physical_indices,
)


def gpu_identity(
    index: int,
    uuid: str | None = None,
    pci_bus_id: str | None = None,
    nvml: Any | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Where `cuda:index` sits among the machine's GPUs.

    Args:
        index: the CUDA index inside this process.
        uuid: torch's `props.uuid` as NVML writes it ("GPU-..."), when known.
        pci_bus_id: the bus id, when torch reports it.
        nvml: an initialised pynvml module, or None where NVML is missing.
        env: the environment to read (tests); the process's own by default.
    """
    env = dict(os.environ) if env is None else env
    visible = env.get("CUDA_VISIBLE_DEVICES")
    out: dict[str, Any] = {
        "cuda_index": index,
        "cuda_visible_devices": visible,
        "uuid": uuid,
        "pci_bus_id": pci_bus_id,
        "physical_index": None,
        "found_by": None,
    }
    if nvml is not None:
        out["machine_gpus"] = int(nvml.nvmlDeviceGetCount())
        found = physical_by_uuid(nvml, [uuid]) if uuid else None
        if found is not None:
            out.update(physical_index=found[0], found_by="NVML UUID")
            return out
        order = (
            list(range(out["machine_gpus"]))
            if visible is None
            else visible_physical_indices(nvml, visible)
        )
        if index < len(order):
            out.update(physical_index=order[index], found_by="NVML and CUDA_VISIBLE_DEVICES")
        if env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID" and out["machine_gpus"] > 1:
            out["note"] = "by position: on a machine with mixed GPUs CUDA's order may differ"
        return out
    entries = [e.strip() for e in (visible or "").split(",") if e.strip()]
    if visible is None:
        out.update(physical_index=index, found_by="no CUDA_VISIBLE_DEVICES")
    elif index < len(entries) and entries[index].isdigit():
        out.update(physical_index=int(entries[index]), found_by="CUDA_VISIBLE_DEVICES")
    elif index < len(entries):  # a UUID entry: the UUID is the identity
        out.update(uuid=out["uuid"] or entries[index], found_by="CUDA_VISIBLE_DEVICES (UUID)")
    if out["physical_index"] is not None and env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
        out["note"] = (
            "without NVML and CUDA_DEVICE_ORDER=PCI_BUS_ID, nvidia-smi's numbering may differ "
            "on a machine with mixed GPUs"
        )
    return out


def _pci_bus_id(props: Any) -> str | None:
    """NVML's spelling of the bus id ('00000000:65:00.0') from torch's properties, if given."""
    bus = getattr(props, "pci_bus_id", None)
    if bus is None:
        return None
    domain, dev = getattr(props, "pci_domain_id", 0), getattr(props, "pci_device_id", 0)
    return f"{domain:08x}:{bus:02x}:{dev:02x}.0".upper()


def cuda_identity(props: Any, index: int) -> dict[str, Any]:
    """`gpu_identity` for a torch device's properties, asking NVML where it is installed."""
    uuid_text = nvml_uuid(props)
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # NVML missing or no driver: CUDA_VISIBLE_DEVICES is all we have
        return gpu_identity(index, uuid_text, _pci_bus_id(props))
    try:
        return gpu_identity(index, uuid_text, _pci_bus_id(props), nvml=pynvml)
    finally:
        pynvml.nvmlShutdown()


def identity_label(device: Mapping[str, Any]) -> str:
    """'cuda:0 = GPU 3 of 8 (CUDA_VISIBLE_DEVICES=3,5)', or '' where nothing is known."""
    ident = device.get("identity") or {}
    if device.get("type") != "cuda" or not ident:
        return ""
    where = f"cuda:{ident.get('cuda_index')}"
    phys = ident.get("physical_index")
    if phys is not None:
        total = ident.get("machine_gpus")
        where += f" = GPU {phys}" + (f" of {total}" if total else "")
    elif ident.get("uuid"):
        where += f" = {ident['uuid']}"
    if ident.get("cuda_visible_devices") is not None:
        where += f" (CUDA_VISIBLE_DEVICES={ident['cuda_visible_devices']})"
    return where
