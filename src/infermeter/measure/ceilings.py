"""Hardware ceilings: peak FLOP/s per dtype and memory bandwidth, from a spec table or measured.

Spec values are dense (no structured sparsity) peak FLOP/s per dtype and peak memory bandwidth,
each row citing the datasheet it comes from. Hardware not in the table is "unknown": we never
guess. `measure/calibrate.py` measures what this device attains and the store keeps it;
analysis prefers measured ceilings, because they are what the device can actually do with this
PyTorch.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

T = 1e12
G = 1e9


@dataclass(frozen=True)
class Ceilings:
    """Peak FLOP/s per dtype and memory bandwidth (bytes/s) of one device."""

    device: str
    flop_per_s: dict[str, float]
    bandwidth_bytes_per_s: float | None
    source: str
    measured: bool = False
    details: dict[str, Any] = field(default_factory=dict)
    #: memory the device holds (bytes): what a model, its KV cache and activations must fit in
    memory_bytes: float | None = None
    #: per-direction bandwidth of the link between two devices (bytes/s), for tensor parallelism
    interconnect_bytes_per_s: float | None = None
    #: "gpu" (host work overlaps device work) or "cpu" (one processor does both)
    kind: str = "gpu"

    def peak(self, dtype: str) -> float | None:
        """FLOP/s for `dtype` (float16 and bfloat16 share tensor cores where one is missing)."""
        if dtype in self.flop_per_s:
            return self.flop_per_s[dtype]
        if dtype in self.details.get("no_twin_rate", ()):
            return None  # its datasheet gives no rate for it, and none is assumed
        twin = {"bfloat16": "float16", "float16": "bfloat16"}.get(dtype)
        return self.flop_per_s.get(twin) if twin else None

    def ridge(self, dtype: str) -> float | None:
        """Operational intensity (FLOP/byte) where compute and bandwidth limits meet."""
        peak = self.peak(dtype)
        return peak / self.bandwidth_bytes_per_s if peak and self.bandwidth_bytes_per_s else None

    def attainable(self, dtype: str, intensity: float) -> float | None:
        """Roofline: min(peak, intensity x bandwidth)."""
        peak = self.peak(dtype)
        if not peak or not self.bandwidth_bytes_per_s:
            return None
        return min(peak, intensity * self.bandwidth_bytes_per_s)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON and the store."""
        return asdict(self)


GIB = 2**30
NVLINK4 = 450 * G  # per direction per GPU (900 GB/s total), NVIDIA H100 datasheet
NVLINK3 = 300 * G  # per direction per GPU (600 GB/s total), NVIDIA A100 datasheet
PCIE4 = 32 * G  # PCIe 4.0 x16, per direction
PCIE5 = 64 * G  # PCIe 5.0 x16, per direction

#: `details` key: the share of its datasheet bandwidth a device's copy kernels were measured to
#: sustain in a published microbenchmark (with `SUSTAINED_SOURCE_KEY` citing it). The time
#: model's bandwidth efficiencies were fitted on A100/H100-class memory, which sustains about
#: 91% (analysis/timemodel.py scales them by a device's share against that; the A100 40GB's
#: 90.5% is one of the two that set the 91%, so its row carries none)
SUSTAINED_KEY = "sustained_bandwidth_fraction"
SUSTAINED_SOURCE_KEY = "sustained_bandwidth_source"
#: `details` key: the class of machine the card sits in ("desktop" for GeForce cards), which
#: sets how fast its host CPU dispatches eager operations (analysis/timemodel.py)
HOST_CLASS_KEY = "host_class"
#: Luo et al., "Benchmarking and Dissecting the Nvidia Hopper GPU Architecture" (2024), Table V
#: "Throughput at different memory levels", global memory: A100 40GB 1,407.2 GB/s, H800
#: (HBM2e, 2,039 GB/s) 1,861.5, RTX 4090 929.8
_LUO_2024 = (
    "Luo et al. 2024 (Benchmarking and Dissecting the Nvidia Hopper GPU Architecture), Table V"
)

#: (key users type after --hardware, device-name pattern, ceilings). float32 is the
#: non-tensor-core FP32 rate; bfloat16/float16 dense tensor-core rates with FP32 accumulation;
#: fp8 (FP32 accumulation) and int8 the dense 8-bit tensor rates of the same datasheets (half
#: the "with sparsity" figure), only where the chip has them (no fp8 before Ada and Hopper).
#: Apple's M1 and M2 GPUs have no double-rate half precision: float16 runs at the float32 rate
_APPLE_F16 = (
    "; float16 at the float32 rate (philipturner/metal-benchmarks: GFLOPS F16 = F32 on M1 to M2"
    " Ultra)"
)

SPECS: list[tuple[str, str, Ceilings]] = [
    (
        "h100-sxm",
        r"H100.*(SXM|HBM3)",
        Ceilings(
            "NVIDIA H100 SXM5 80GB",
            {
                "float32": 67 * T,
                "tf32": 494.7 * T,
                "bfloat16": 989.4 * T,
                "float16": 989.4 * T,
                "fp8": 1978.9 * T,
                "int8": 1978.9 * T,
            },
            3.35e12,
            "NVIDIA H100 Tensor Core GPU datasheet (dense; sparsity doubles tensor rates)",
            memory_bytes=80e9,
            interconnect_bytes_per_s=NVLINK4,
        ),
    ),
    (
        "h100-pcie",
        r"H100.*(PCIe|HBM2e)",
        Ceilings(
            "NVIDIA H100 PCIe 80GB",
            {
                "float32": 51 * T,
                "tf32": 378 * T,
                "bfloat16": 756 * T,
                "float16": 756 * T,
                "fp8": 1513 * T,
                "int8": 1513 * T,
            },
            2.0e12,
            "NVIDIA H100 Tensor Core GPU datasheet, PCIe column (dense)",
            memory_bytes=80e9,
            interconnect_bytes_per_s=PCIE5,
        ),
    ),
    (
        "h200",
        r"H200",
        Ceilings(
            "NVIDIA H200 SXM 141GB",
            {
                "float32": 67 * T,
                "tf32": 494.7 * T,
                "bfloat16": 989.4 * T,
                "float16": 989.4 * T,
                "fp8": 1978.9 * T,
                "int8": 1978.9 * T,
            },
            4.8e12,
            "NVIDIA H200 Tensor Core GPU datasheet (dense)",
            memory_bytes=141e9,
            interconnect_bytes_per_s=NVLINK4,
        ),
    ),
    (
        "a100-80gb-pcie",
        r"A100.*80GB PCIe",
        Ceilings(
            "NVIDIA A100 PCIe 80GB",
            {
                "float32": 19.5 * T,
                "tf32": 156 * T,
                "bfloat16": 312 * T,
                "float16": 312 * T,
                "int8": 624 * T,
            },
            1.935e12,
            "NVIDIA A100 Tensor Core GPU datasheet, 80GB PCIe column (dense)",
            memory_bytes=80e9,
            interconnect_bytes_per_s=PCIE4,
        ),
    ),
    (
        "a100-80gb",
        r"A100.*80",
        Ceilings(
            "NVIDIA A100 SXM 80GB",
            {
                "float32": 19.5 * T,
                "tf32": 156 * T,
                "bfloat16": 312 * T,
                "float16": 312 * T,
                "int8": 624 * T,
            },
            2.039e12,
            "NVIDIA A100 Tensor Core GPU datasheet (dense)",
            memory_bytes=80e9,
            interconnect_bytes_per_s=NVLINK3,
        ),
    ),
    (
        "a100-40gb",
        r"A100",
        Ceilings(
            "NVIDIA A100 40GB",
            {
                "float32": 19.5 * T,
                "tf32": 156 * T,
                "bfloat16": 312 * T,
                "float16": 312 * T,
                "int8": 624 * T,
            },
            1.555e12,
            "NVIDIA A100 Tensor Core GPU datasheet, 40GB (dense)",
            memory_bytes=40e9,
            interconnect_bytes_per_s=NVLINK3,
        ),
    ),
    (
        "l40s",
        r"L40S",
        Ceilings(
            "NVIDIA L40S",
            {
                "float32": 91.6 * T,
                "tf32": 183 * T,
                "bfloat16": 362.05 * T,
                "float16": 362.05 * T,
                "fp8": 733 * T,
                "int8": 733 * T,
            },
            864 * G,
            "NVIDIA L40S datasheet (dense)",
            memory_bytes=48e9,
            interconnect_bytes_per_s=PCIE4,
        ),
    ),
    (
        "l4",
        r"\bL4\b",
        Ceilings(
            "NVIDIA L4",
            {
                "float32": 30.3 * T,
                "tf32": 60 * T,
                "bfloat16": 121 * T,
                "float16": 121 * T,
                "fp8": 242.5 * T,
                "int8": 242.5 * T,
            },
            300 * G,
            "NVIDIA L4 datasheet (dense)",
            memory_bytes=24e9,
            interconnect_bytes_per_s=PCIE4,
        ),
    ),
    (
        "a10",
        r"A10G|\bA10\b",
        Ceilings(
            "NVIDIA A10 / A10G",
            {
                "float32": 31.2 * T,
                "tf32": 62.5 * T,
                "bfloat16": 125 * T,
                "float16": 125 * T,
                "int8": 250 * T,
            },
            600 * G,
            "NVIDIA A10 datasheet (dense); AWS's A10G is listed with the same memory bandwidth",
            memory_bytes=24e9,
            interconnect_bytes_per_s=PCIE4,
        ),
    ),
    (
        "t4",
        r"\bT4\b",
        Ceilings(
            "NVIDIA T4",
            {"float32": 8.1 * T, "float16": 65 * T, "int8": 130 * T},
            320 * G,
            "NVIDIA T4 datasheet (mixed-precision FP16/FP32; no bfloat16)",
            # a 70 W board: its GDDR6 sustains far less of the datasheet than HBM does
            details={
                SUSTAINED_KEY: 0.688,
                SUSTAINED_SOURCE_KEY: "68.8% of the datasheet measured by a global-memory "
                "copy kernel: Jia et al. 2019 (Dissecting the NVidia Turing T4 GPU via "
                "Microbenchmarking, arXiv:1903.07486), section 3.7",
            },
            memory_bytes=16e9,
            interconnect_bytes_per_s=16 * G,
        ),
    ),
    (
        "rtx-4090",
        r"4090",
        Ceilings(
            "NVIDIA GeForce RTX 4090",
            {
                "float32": 82.6 * T,
                "bfloat16": 165.2 * T,
                "float16": 165.2 * T,
                "fp8": 330.3 * T,
                "int8": 660.6 * T,
            },
            1008 * G,
            "NVIDIA Ada Lovelace architecture whitepaper (FP16/BF16 tensor, FP32 accumulate)",
            # GeForce halves the tensor rate with FP32 accumulation; FP16 accumulation (what
            # llama.cpp's cuBLAS path asks for) runs at the full rate, same whitepaper
            details={
                "float16_fp16_accumulate_flop_per_s": 330.3 * T,
                SUSTAINED_KEY: round(929.8 / 1008, 3),
                SUSTAINED_SOURCE_KEY: f"929.8 of 1,008 GB/s measured: {_LUO_2024}",
                HOST_CLASS_KEY: "desktop",
            },
            memory_bytes=24 * GIB,
            interconnect_bytes_per_s=PCIE4,
        ),
    ),
    (
        "rtx-3090-ti",
        r"3090 Ti",
        Ceilings(
            "NVIDIA GeForce RTX 3090 Ti",
            {"float32": 40 * T, "bfloat16": 80 * T, "float16": 80 * T},
            1008 * G,
            "NVIDIA's RTX 3090 Ti launch figures (CES 2022: 40 shader TFLOPS, 320 tensor "
            "TFLOPS with sparsity and FP16 accumulation, 24 GB GDDR6X at 1,008 GB/s); dense "
            "tensor rates half of that, halved again with FP32 accumulation on GeForce GA102 "
            "(NVIDIA Ampere GA102 whitepaper)",
            details={"float16_fp16_accumulate_flop_per_s": 160 * T, HOST_CLASS_KEY: "desktop"},
            memory_bytes=24 * GIB,
            interconnect_bytes_per_s=PCIE4,
        ),
    ),
    (
        "rtx-a6000",
        r"RTX A6000",
        Ceilings(
            "NVIDIA RTX A6000",
            {
                "float32": 38.7 * T,
                "tf32": 77.4 * T,
                "bfloat16": 154.8 * T,
                "float16": 154.8 * T,
                "int8": 309.7 * T,
            },
            768 * G,
            "NVIDIA RTX A6000 datasheet (tensor rates dense: half the 309.7 TFLOPS with "
            "sparsity; a professional card, full rate with FP32 accumulation)",
            memory_bytes=48e9,
            interconnect_bytes_per_s=PCIE4,
        ),
    ),
    (
        "m1-max",
        r"Apple M1 Max",
        Ceilings(
            "Apple M1 Max (GPU)",
            {"float32": 10.4 * T, "float16": 10.4 * T},
            400 * G,
            "Apple press release 2021; 64 GB, the largest unified memory offered" + _APPLE_F16,
            memory_bytes=64 * GIB,
        ),
    ),
    (
        "m1",
        r"Apple M1",
        Ceilings(
            "Apple M1 (GPU)",
            {"float32": 2.6 * T, "float16": 2.6 * T},
            68.25 * G,
            "Apple M1 press release; 16 GB unified memory" + _APPLE_F16,
            memory_bytes=16 * GIB,
        ),
    ),
    (
        "m2-ultra",
        r"Apple M2 Ultra",
        Ceilings(
            "Apple M2 Ultra (GPU)",
            {"float32": 27.2 * T, "float16": 27.2 * T},
            800 * G,
            "Apple press release; 192 GB unified memory" + _APPLE_F16,
            memory_bytes=192 * GIB,
        ),
    ),
    (
        "m2-max",
        r"Apple M2 Max",
        Ceilings(
            "Apple M2 Max (GPU)",
            {"float32": 13.6 * T, "float16": 13.6 * T},
            400 * G,
            "Apple press release 2023 (38-core GPU); 96 GB, the largest unified memory offered"
            + _APPLE_F16,
            memory_bytes=96 * GIB,
        ),
    ),
    (
        "m2",
        r"Apple M2",
        Ceilings(
            "Apple M2 (GPU)",
            {"float32": 3.6 * T, "float16": 3.6 * T},
            100 * G,
            "Apple M2 press release; 24 GB, the largest unified memory offered" + _APPLE_F16,
            memory_bytes=24 * GIB,
        ),
    ),
]

#: what --hardware accepts besides the spec keys: this machine, as `calibrate` measured it
LOCAL_HARDWARE = "cpu-this"


def hardware_keys() -> list[str]:
    """Every --hardware value: the spec table's keys, then the calibrated local machine."""
    return [key for key, _, _ in SPECS] + [LOCAL_HARDWARE]


#: `details` key: the memory technology of a spec row (each datasheet names it); the time
#: model reads its class (`memory_class`) where a stack's bandwidth efficiency was fitted per
#: class (llama.cpp reaches about the same absolute bandwidth on GDDR and HBM cards, so one
#: share of the datasheet was 17-24% slow on the first and 21-39% fast on the second)
MEMORY_TYPE_KEY = "memory_type"
MEMORY_TYPES = {
    "h100-sxm": "HBM3",
    "h100-pcie": "HBM2e",
    "h200": "HBM3e",
    "a100-80gb-pcie": "HBM2e",
    "a100-80gb": "HBM2e",
    "a100-40gb": "HBM2",
    "l40s": "GDDR6",
    "l4": "GDDR6",
    "a10": "GDDR6",
    "t4": "GDDR6",
    "rtx-4090": "GDDR6X",
    "rtx-3090-ti": "GDDR6X",
    "rtx-a6000": "GDDR6",
    "m1-max": "LPDDR5",
    "m1": "LPDDR4X",
    "m2-ultra": "LPDDR5",
    "m2-max": "LPDDR5",
    "m2": "LPDDR5",
}
for _key, _, _row in SPECS:
    _row.details.setdefault(MEMORY_TYPE_KEY, MEMORY_TYPES[_key])
    if _key.startswith("m"):  # Apple: float16 is given; no bfloat16 rate is published
        _row.details.setdefault("no_twin_rate", ("bfloat16",))


def memory_class(memory_type: str | None) -> str | None:
    """The class of a memory technology: hbm, gddr or unified (Apple's LPDDR); None if unknown."""
    t = (memory_type or "").upper()
    if t.startswith("HBM"):
        return "hbm"
    if t.startswith("GDDR"):
        return "gddr"
    if t.startswith("LPDDR"):
        return "unified"
    return None


def spec_by_key(key: str) -> Ceilings | None:
    """The spec row called `key` (case-insensitive), or None."""
    for k, _, ceil in SPECS:
        if k == key.strip().lower():
            return ceil
    return None


def spec_ceilings(device_name: str) -> Ceilings | None:
    """The spec row matching this device name, or None: unknown hardware is not guessed."""
    for _, pattern, ceil in SPECS:
        if re.search(pattern, device_name or "", flags=re.IGNORECASE):
            return ceil
    return None


def best_ceilings(device_name: str, measured: Ceilings | None) -> Ceilings | None:
    """Measured ceilings when there are some, else the spec row, else None."""
    return measured if measured is not None else spec_ceilings(device_name)
