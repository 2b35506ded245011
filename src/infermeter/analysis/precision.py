"""What a `--dtype` means for a prediction: bytes per weight, per activation, and the GEMM rate.

Why a table and not one byte count: quantised serving stores weights in fewer bytes than it
computes in. Weight-only int8 or fp8 (what `profile --dtype int8` runs: models/quantize.py)
halves the bytes a decode step reads (int4 quarters them, plus a scale and zero per group) but
multiplies at the 16-bit rate after dequantising;
W8A8 (SmoothQuant int8, fp8 with dynamic activation scales: what vLLM and TensorRT-LLM call an
fp8 model) also runs the GEMMs at the 8-bit tensor-core rate. In both the KV cache and the
element-wise work stay in the 16-bit activation dtype, as the engines' defaults do, unless the
scheme says otherwise (`fp8-kv8`: TensorRT-LLM's FP8 recipe also stores the KV cache in fp8).

A weight-only GEMM on a GPU streams its fewer bytes at less than the 16-bit rate: torchao's own
A100 table (its quantization README; Llama-2-7B and Llama-3-8B at batch 1, torch.compile) gives
the bytes/s each scheme reaches, and their ratio to bfloat16's is `stream_share`: int8 weight-only
1131.18 / 1418.93 = 0.797 and 1150.80 / 1435.54 = 0.802 (0.80), int4 weight-only with groups of
64 751.42 / 1418.93 = 0.530 and 763.33 / 1435.54 = 0.532 (0.53, applied to every group size).
gpt-fast's README (the same kind of loop, another table) is held out to judge it. fp8
weight-only has no such figure here and keeps the 16-bit rate; llama.cpp's GGUF formats have
their own kernels and their stack's own bandwidth share.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

#: torchao's A100 table: int8 and int4 (groups of 64) weight-only bytes/s over bfloat16's
INT8_WEIGHT_ONLY_SHARE = 0.80
INT4_WEIGHT_ONLY_SHARE = 0.53


@dataclass(frozen=True)
class Precision:
    """Bytes per weight and per activation element, and whose peak the GEMMs run at."""

    name: str
    weight_bytes: float
    act_bytes: int
    #: the ceilings' dtype key of the GEMM rate ("int8", "fp8", or a 16/32-bit dtype)
    compute: str
    what: str
    #: bytes per KV-cache element (None: act_bytes, the engines' default)
    kv_bytes: int | None = None
    #: the share of the 16-bit weights' streaming rate a weight-only GEMM reaches on a GPU:
    #: it dequantises as it reads, so its bytes stream slower than bfloat16's (1: as fast)
    stream_share: float = 1.0

    @property
    def kv_bytes_each(self) -> int:
        """Bytes per KV-cache element."""
        return self.act_bytes if self.kv_bytes is None else self.kv_bytes

    @property
    def quantized(self) -> bool:
        """True when weights are stored in fewer bytes than activations."""
        return self.weight_bytes < self.act_bytes

    @property
    def needs_8bit_rate(self) -> bool:
        """W8A8: the device must have a tensor rate for the 8-bit type."""
        return self.compute in ("int8", "fp8")


PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("float32", 4, 4, "float32", "float32 weights and activations"),
        Precision("bfloat16", 2, 2, "bfloat16", "bfloat16 weights and activations"),
        Precision("float16", 2, 2, "float16", "float16 weights and activations"),
        Precision(
            "int8",
            1,
            2,
            "bfloat16",
            "int8 weights (weight-only), dequantised to bfloat16 for the GEMMs",
            stream_share=INT8_WEIGHT_ONLY_SHARE,
        ),
        Precision(
            "fp8",
            1,
            2,
            "bfloat16",
            "fp8 weights (weight-only), dequantised to bfloat16 for the GEMMs",
        ),
        *(
            Precision(
                name,
                0.5 + 4 / group,
                2,
                "bfloat16",
                f"int4 weights (weight-only, groups of {group} with a bfloat16 scale and zero), "
                "dequantised to bfloat16 for the GEMMs",
                stream_share=INT4_WEIGHT_ONLY_SHARE,
            )
            for name, group in (("int4", 128), ("int4-g64", 64), ("int4-g32", 32))
        ),
        # llama.cpp's GGUF block formats: per 32 weights a float16 scale (Q4_0: 16 bytes of
        # 4-bit values + 2 = 18 bytes; Q8_0: 32 + 2 = 34); Q4_K_M mixes Q4_K and Q6_K tensors,
        # 4.84 bits a weight over Llama-2-7B (llama.cpp's own size table: 3.80 GiB for
        # 6.74 B); the GEMMs of a prefill counted at the 16-bit rate (an approximation)
        Precision("q4_0", 18 / 32, 2, "float16", "GGUF Q4_0 weights (4.5 bits each)"),
        Precision("q8_0", 34 / 32, 2, "float16", "GGUF Q8_0 weights (8.5 bits each)"),
        Precision("q4_k_m", 4.84 / 8, 2, "float16", "GGUF Q4_K_M weights (about 4.84 bits each)"),
        Precision(
            "int8-w8a8",
            1,
            2,
            "int8",
            "int8 weights and activations (SmoothQuant W8A8): GEMMs at the int8 tensor rate",
        ),
        Precision(
            "fp8-w8a8",
            1,
            2,
            "fp8",
            "fp8 weights and activations (dynamic scales): GEMMs at the fp8 tensor rate",
        ),
        Precision(
            "fp8-kv8",
            1,
            2,
            "fp8",
            "fp8 weights, activations and KV cache (TensorRT-LLM's FP8 with an FP8 KV cache)",
            kv_bytes=1,
        ),
    )
}


#: GGUF's and llama.cpp's names for the float types (`llama-bench` prints "F16"), read as ours
DTYPE_ALIASES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "fp16": "float16"}


def dtype_name(dtype: str) -> str:
    """`dtype` as PRECISIONS names it: any case, GGUF's float names ("F16", "Q4_K_M") too."""
    name = dtype.strip().lower()
    return DTYPE_ALIASES.get(name, name)


def precision_of(dtype: str, cpu: bool = False) -> Precision:
    """The precision `dtype` names; weight-only schemes compute in float32 on CPU (int4: bfloat16).

    On CPU the GPU's weight-only streaming share does not apply (a CPU's weight-only GEMM is
    dequantise-then-multiply, priced by its own calibration). Raises KeyError for a name not in
    PRECISIONS (the CLI checks first).
    """
    p = PRECISIONS[dtype]
    if cpu and p.quantized and not p.needs_8bit_rate and not p.name.startswith("int4"):
        return Precision(
            p.name, p.weight_bytes, 4, "float32", p.what.replace("bfloat16", "float32"), p.kv_bytes
        )
    if cpu and p.stream_share != 1.0:
        return replace(p, stream_share=1.0)
    return p
