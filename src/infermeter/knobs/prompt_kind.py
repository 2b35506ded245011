"""prompt_kind: natural or repetitive text; verified from the prompts the run was given."""

from __future__ import annotations

from typing import Any

from infermeter.knobs.base import Knob, KnobNotApplied, parse_choice
from infermeter.knobs.evidence import KnobCheckDoc
from infermeter.models.loader import LoadedModel
from infermeter.workloads.corpus import PROMPT_KINDS, REPEATS


def _verify(loaded: LoadedModel, value: str, result: Any, applied: Any = None) -> KnobCheckDoc:
    used = result.config.get("prompt_kind")
    if used != value:
        raise KnobNotApplied(f"prompt_kind={value} but the run used {used}")
    if value == "repetitive":
        # the prompt the model saw says its opening words again (after the first: a special
        # token or a word cut by the exact-length window)
        text = next((p for s in result.samples for p in s.prompt_text), "")
        head = " ".join(text.split()[1:5])
        if not head or text.count(head) < 2:
            raise KnobNotApplied("prompt_kind=repetitive but the prompt does not repeat itself")
    return {"prompt_kind": used, "repeats": REPEATS if value == "repetitive" else 1}


PROMPT_KIND = Knob(
    "prompt_kind",
    "natural (the built-in corpus) or repetitive (its passages repeated: prompt lookup's case)",
    "config",
    parse_choice("prompt_kind", PROMPT_KINDS),
    verify=_verify,
    field="prompt_kind",
)
