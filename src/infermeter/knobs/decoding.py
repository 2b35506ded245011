"""decoding: greedy, sampling or speculative; verified from what the run did.

A speculative value is applied when the run's own record says its tokens went through
speculation of that kind (`checks["speculation"]`, written by run/speculation.py), not only
when the configuration asked for it.
"""

from __future__ import annotations

from typing import Any

from infermeter.knobs.base import Knob, KnobNotApplied
from infermeter.knobs.evidence import KnobCheckDoc
from infermeter.models.loader import LoadedModel
from infermeter.workloads.decoding import parse_decoding


def _parse(text: str) -> str:
    parse_decoding(text)  # a UserError naming the fix for anything else
    return str(text).strip()


def _verify_decoding(
    loaded: LoadedModel, value: str, result: Any, applied: Any = None
) -> KnobCheckDoc:
    used = result.config.get("decoding")
    if used != value:
        raise KnobNotApplied(f"decoding={value} but the run used {used}")
    if not parse_decoding(value).speculative:
        return {"decoding": used}
    spec = (result.checks or {}).get("speculation") or {}
    if spec.get("kind") != parse_decoding(value).kind or not spec.get("target_forwards"):
        raise KnobNotApplied(f"decoding={value} but no speculative step was recorded")
    return {
        "decoding": used,
        "target_forwards": spec["target_forwards"],
        "tokens_per_target_forward": spec.get("tokens_per_target_forward"),
    }


DECODING = Knob(
    "decoding",
    "greedy, sampling, or speculative (prompt_lookup:N, assisted:DRAFT, early_exit:K)",
    "config",
    _parse,
    verify=_verify_decoding,
    field="decoding",
)
