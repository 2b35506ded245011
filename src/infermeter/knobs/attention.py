"""attn_implementation: eager, sdpa or flash_attention_2, switched with transformers' setter.

Verified by the aten operations one forward executes: SDPA shows
`scaled_dot_product_attention`, eager attention does not. Restored on exit.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from typing import Any

from infermeter.errors import UserError
from infermeter.knobs.base import Knob, KnobNotApplied, parse_choice
from infermeter.knobs.calibration import calibration_ids, executed_ops
from infermeter.knobs.evidence import KnobCheckDoc
from infermeter.models.loader import LoadedModel

ATTENTION = ("eager", "sdpa", "flash_attention_2")


def _check_attention(value: str, loaded: LoadedModel) -> None:
    if value == "flash_attention_2" and importlib.util.find_spec("flash_attn") is None:
        raise UserError(
            "attn_implementation=flash_attention_2 needs the flash-attn package",
            "pip install flash-attn (CUDA only), or use sdpa",
        )


@contextlib.contextmanager
def _apply_attention(loaded: LoadedModel, value: str) -> Iterator[dict[str, Any]]:
    model = loaded.model
    before = model.config._attn_implementation
    try:
        model.set_attn_implementation(value)
    except (ValueError, ImportError) as exc:
        raise UserError(f"attn_implementation={value}: {exc}", "use eager or sdpa") from None
    try:
        yield {"previous": before}
    finally:
        model.set_attn_implementation(before)


def _verify_attention(
    loaded: LoadedModel, value: str, result: Any, applied: Any = None
) -> KnobCheckDoc:
    ops = executed_ops(loaded.model, calibration_ids(loaded))
    sdpa = ops.get("scaled_dot_product_attention", 0) + sum(
        n for k, n in ops.items() if k.startswith("_scaled_dot_product")
    )
    flash = sum(n for k, n in ops.items() if "flash" in k and "for_cpu" not in k)
    ok = {"eager": sdpa == 0, "sdpa": sdpa > 0, "flash_attention_2": flash > 0}[value]
    if not ok:
        raise KnobNotApplied(f"attn_implementation={value} but sdpa ops ran {sdpa} times")
    return {"sdpa_calls": sdpa, "softmax_calls": ops.get("softmax", 0) + ops.get("_softmax", 0)}


ATTN_IMPLEMENTATION = Knob(
    "attn_implementation",
    "attention kernel: eager, sdpa, flash_attention_2 (when installed)",
    "model",
    parse_choice("attn_implementation", ATTENTION),
    check=_check_attention,
    apply=_apply_attention,
    verify=_verify_attention,
)
