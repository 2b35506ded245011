"""dtype: weights and activations in float32, bfloat16 or float16 (GPU); a load-time knob.

Verified from the loaded parameters' dtypes.
"""

from __future__ import annotations

from typing import Any

from infermeter.errors import UserError
from infermeter.knobs.base import Knob, KnobNotApplied, parse_choice
from infermeter.models.loader import LoadedModel

DTYPES = ("float32", "bfloat16", "float16")


def _check_dtype(value: str, loaded: LoadedModel) -> None:
    import torch

    device = next(loaded.model.parameters()).device
    if value == "float16" and device.type == "cpu":
        # CPU float16 matmuls are emulated and many kernels are missing: not a real setting.
        raise UserError("dtype=float16 is not supported on CPU", "use float32 or bfloat16 on CPU")
    if value == "bfloat16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise UserError("this GPU does not support bfloat16", "use float16 or float32")


def _verify_dtype(
    loaded: LoadedModel, value: str, result: Any, applied: Any = None
) -> dict[str, Any]:
    dtypes = sorted({str(p.dtype).removeprefix("torch.") for p in loaded.model.parameters()})
    if value not in dtypes:
        raise KnobNotApplied(f"dtype={value} but the parameters are {dtypes}")
    return {"parameter_dtypes": dtypes}


DTYPE = Knob(
    "dtype",
    "weights and activations: float32, bfloat16, float16 (GPU)",
    "load",
    parse_choice("dtype", DTYPES),
    check=_check_dtype,
    verify=_verify_dtype,
    field="dtype",
)
