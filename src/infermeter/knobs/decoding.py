"""decoding: greedy or sampling; verified from the configuration the run used."""

from __future__ import annotations

from typing import Any

from infermeter.knobs.base import Knob, KnobNotApplied, parse_choice
from infermeter.models.loader import LoadedModel


def _verify_decoding(
    loaded: LoadedModel, value: str, result: Any, applied: Any = None
) -> dict[str, Any]:
    used = result.config.get("decoding")
    if used != value:
        raise KnobNotApplied(f"decoding={value} but the run used {used}")
    return {"decoding": used}


DECODING = Knob(
    "decoding",
    "greedy or sampling (temperature/top-p/top-k from the run's options)",
    "config",
    parse_choice("decoding", ("greedy", "sampling")),
    verify=_verify_decoding,
    field="decoding",
)
