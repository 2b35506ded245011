"""experts_implementation (MoE): eager, grouped_mm or batched_mm, via transformers' setter.

Verified by the aten operations one forward executes: grouped experts show `_grouped_mm`,
batched experts `bmm`, eager experts neither. Restored on exit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from infermeter.errors import UserError
from infermeter.knobs.base import Knob, KnobNotApplied, parse_choice
from infermeter.knobs.calibration import calibration_ids, executed_ops
from infermeter.knobs.evidence import KnobCheckDoc
from infermeter.models.loader import LoadedModel

EXPERTS = ("eager", "grouped_mm", "batched_mm")


def _check_experts(value: str, loaded: LoadedModel) -> None:
    if not loaded.info.is_moe:
        raise UserError(
            f"experts_implementation applies to mixture-of-experts models; {loaded.info.spec} "
            "is dense",
            "use a MoE model (e.g. tiny-mixtral, tiny-qwen3-moe) or drop this knob",
        )


@contextlib.contextmanager
def _apply_experts(loaded: LoadedModel, value: str) -> Iterator[dict[str, Any]]:
    model = loaded.model
    before = getattr(model.config, "_experts_implementation", None) or "eager"
    model.set_experts_implementation(value)
    try:
        yield {"previous": before}
    finally:
        model.set_experts_implementation(before)


def _verify_experts(
    loaded: LoadedModel, value: str, result: Any, applied: Any = None
) -> KnobCheckDoc:
    ops = executed_ops(loaded.model, calibration_ids(loaded))
    grouped, bmm = ops.get("_grouped_mm", 0), ops.get("bmm", 0)
    ok = {"eager": grouped == 0 and bmm == 0, "grouped_mm": grouped > 0, "batched_mm": bmm > 0}
    if not ok[value]:
        raise KnobNotApplied(
            f"experts_implementation={value} but _grouped_mm ran {grouped}x and bmm {bmm}x"
        )
    return {"grouped_mm_calls": grouped, "bmm_calls": bmm}


EXPERTS_IMPLEMENTATION = Knob(
    "experts_implementation",
    "MoE experts kernel: eager, grouped_mm, batched_mm",
    "model",
    parse_choice("experts_implementation", EXPERTS),
    check=_check_experts,
    apply=_apply_experts,
    verify=_verify_experts,
)
