"""compile: torch.compile the forward; verified by a measured cold first call."""

from __future__ import annotations

from typing import Any

from infermeter.knobs.base import Knob, KnobNotApplied, parse_bool
from infermeter.models.loader import LoadedModel


def _verify_compile(
    loaded: LoadedModel, value: bool, result: Any, applied: Any = None
) -> dict[str, Any]:
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


COMPILE = Knob(
    "compile",
    "torch.compile the forward: off or on (cold first call and warm calls apart)",
    "config",
    parse_bool("compile"),
    verify=_verify_compile,
    field="compile",
)
