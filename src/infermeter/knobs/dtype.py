"""dtype: float32, bfloat16, float16 (GPU), int8 and int4 weights, fp8 weights (GPU); load time.

Verified from what the loaded weights really are: parameter dtypes for the float types, the
stored dtype of the quantized weights for int8, int4 and fp8 (`models/quantize.py`). Each point
also carries the quality proxy against full precision (top-1 agreement and KL of the logits on
the calibration prompt): for int8, int4 and fp8 against the same weights unquantized (measured
at load, in the dtype the scheme computes in: bfloat16 for int4),
for bfloat16 and float16 against the same weights computed in float32 (an upcast copy, made
only when it fits in memory), and float32 is the reference itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from infermeter.errors import UserError
from infermeter.knobs.base import Knob, KnobNotApplied, parse_choice
from infermeter.knobs.evidence import KnobCheckDoc, with_quality
from infermeter.models.loader import LoadedModel

if TYPE_CHECKING:
    from infermeter.models.info import QualityDoc

DTYPES = ("float32", "bfloat16", "float16", "int8", "int4", "int4-g64", "int4-g32", "fp8")
#: what a quantized weight is stored as, per scheme
STORED = {
    "int8": ("int8", "qint8"),
    "fp8": ("float8_e4m3fn",),
    **{k: ("int4",) for k in ("int4", "int4-g64", "int4-g32")},
}


def _check_dtype(value: str, loaded: LoadedModel) -> None:
    import torch

    from infermeter.models.quantize import check_scheme

    device = next(loaded.model.parameters()).device
    if value == "float16" and device.type == "cpu":
        # CPU float16 matmuls are emulated and many kernels are missing: not a real setting.
        raise UserError("dtype=float16 is not supported on CPU", "use float32 or bfloat16 on CPU")
    if value == "bfloat16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise UserError("this GPU does not support bfloat16", "use float16 or float32")
    if value in STORED:
        check_scheme(value, device)


def weight_mib(stored: dict[str, int]) -> float:
    """MiB of the weights at their stored width (int4's per-group scales and zeros not counted)."""
    sizes = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0, "int4": 0.5}
    return sum(n * sizes.get(d, 1) for d, n in stored.items()) / 2**20


class _Quality(TypedDict):
    quality: QualityDoc | None
    quality_reference: str


def _quality_vs_float32(loaded: LoadedModel) -> _Quality:
    """The same weights computed in float32 vs as loaded; skipped (with why) if it won't fit."""
    import copy

    from infermeter.measure.memory import available_memory_mib
    from infermeter.models.calibration import calibration_ids, logits, quality

    model = loaded.model
    need_mib = 2 * loaded.info.params * 4 / 2**20
    device = next(model.parameters()).device
    if need_mib > 0.8 * available_memory_mib(device):
        return {
            "quality": None,
            "quality_reference": f"skipped: a float32 copy needs {need_mib:,.0f} MiB",
        }
    ids = calibration_ids(model, loaded.tokenizer)
    reference = copy.deepcopy(model).float()
    try:
        q = quality(logits(reference, ids), logits(model, ids))
    finally:
        del reference
    return {"quality": q, "quality_reference": "the same weights computed in float32"}


def _verify_dtype(
    loaded: LoadedModel, value: str, result: Any, applied: Any = None
) -> KnobCheckDoc:
    from infermeter.models.quantize import stored_weight_dtypes

    stored = stored_weight_dtypes(loaded.model)
    evidence: KnobCheckDoc = {"stored_weight_dtypes": stored, "weight_mib": weight_mib(stored)}
    if value in STORED:
        if not set(STORED[value]) & set(stored):
            raise KnobNotApplied(f"dtype={value} but the weights are stored as {sorted(stored)}")
        record = loaded.info.quantization or {}
        evidence["method"] = record.get("method")
        evidence["quality_reference"] = record.get("quality_reference")
        return with_quality(evidence, record["quality"]) if "quality" in record else evidence
    dtypes = sorted({str(p.dtype).removeprefix("torch.") for p in loaded.model.parameters()})
    if value not in dtypes:
        raise KnobNotApplied(f"dtype={value} but the parameters are {dtypes}")
    evidence["parameter_dtypes"] = dtypes
    if value == "float32":
        evidence["quality_reference"] = "itself"
        return with_quality(evidence, {"top1_agreement": 1.0, "kl_nats": 0.0})
    measured = _quality_vs_float32(loaded)
    evidence["quality_reference"] = measured["quality_reference"]
    if measured["quality"] is not None:
        return with_quality(evidence, measured["quality"])
    return evidence


DTYPE = Knob(
    "dtype",
    "weights and activations: float32, bfloat16, float16 (GPU); weights only: int8, int4 "
    "(groups of 128, or int4-g64, int4-g32; computes in bfloat16), fp8 (GPU)",
    "load",
    parse_choice("dtype", DTYPES),
    check=_check_dtype,
    verify=_verify_dtype,
    field="dtype",
)
