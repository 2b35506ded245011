"""Run-time knobs: dtype (a load argument), compile and decoding (RunConfig fields)."""

from __future__ import annotations

from typing import Any

from infermeter.errors import UserError
from infermeter.knobs.base import Knob, KnobNotApplied, parse_bool, parse_choice

DTYPES = ("float32", "bfloat16", "float16")


def _check_dtype(value: str, loaded: Any) -> None:
    import torch

    device = next(loaded.model.parameters()).device
    if value == "float16" and device.type == "cpu":
        # CPU float16 matmuls are emulated and many kernels are missing: not a real setting.
        raise UserError("dtype=float16 is not supported on CPU", "use float32 or bfloat16 on CPU")
    if value == "bfloat16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise UserError("this GPU does not support bfloat16", "use float16 or float32")


def _verify_dtype(loaded: Any, value: str, result: Any, applied: Any = None) -> dict[str, Any]:
    dtypes = sorted({str(p.dtype).removeprefix("torch.") for p in loaded.model.parameters()})
    if value not in dtypes:
        raise KnobNotApplied(f"dtype={value} but the parameters are {dtypes}")
    return {"parameter_dtypes": dtypes}


def _verify_compile(loaded: Any, value: bool, result: Any, applied: Any = None) -> dict[str, Any]:
    if not value:
        return {"compiled": False}
    cold = result.phases.get("compile_first_call_ms")
    if cold is None:
        raise KnobNotApplied("compile=on but no cold first call was measured")
    warm = [s.total_ms for s in result.measured]
    return {
        "compiled": True,
        "cold_first_call_ms": cold,
        "warm_call_ms": sum(warm) / len(warm) if warm else None,
        "cold_over_warm": cold / (sum(warm) / len(warm)) if warm else None,
    }


def _verify_decoding(loaded: Any, value: str, result: Any, applied: Any = None) -> dict[str, Any]:
    used = result.config.get("decoding")
    if used != value:
        raise KnobNotApplied(f"decoding={value} but the run used {used}")
    return {"decoding": used}


DTYPE = Knob(
    "dtype",
    "weights and activations: float32, bfloat16, float16 (GPU)",
    "load",
    parse_choice("dtype", DTYPES),
    check=_check_dtype,
    verify=_verify_dtype,
    field="dtype",
)
COMPILE = Knob(
    "compile",
    "torch.compile the forward: off or on (cold first call and warm calls apart)",
    "config",
    parse_bool("compile"),
    verify=_verify_compile,
    field="compile",
)
DECODING = Knob(
    "decoding",
    "greedy or sampling (temperature/top-p/top-k from the run's options)",
    "config",
    parse_choice("decoding", ("greedy", "sampling")),
    verify=_verify_decoding,
    field="decoding",
)
