"""cache: the KV cache's form; verified from the cache object the model was given."""

from __future__ import annotations

from typing import Any

from infermeter.knobs.base import Knob, KnobNotApplied, parse_choice
from infermeter.knobs.evidence import KnobCheckDoc
from infermeter.models.loader import LoadedModel
from infermeter.workloads.decoding import CACHE_FORMS, EXPECTED_CACHE


def _verify(loaded: LoadedModel, value: str, result: Any, applied: Any = None) -> KnobCheckDoc:
    seen = (result.checks or {}).get("cache") or {}
    classes, layer_word = EXPECTED_CACHE[value]
    if seen.get("class") not in classes:
        raise KnobNotApplied(f"cache={value} but the model was given {seen.get('class')}")
    layers = seen.get("layer_classes") or []
    if layer_word and not any(layer_word in c for c in layers):
        raise KnobNotApplied(f"cache={value} but the cache's layers are {layers}")
    return {
        "class": seen.get("class"),
        "layer_classes": seen.get("layer_classes"),
        "kv_bytes": seen.get("kv_bytes"),
    }


CACHE = Knob(
    "cache",
    "the KV cache's form: dynamic, static, quantized, offloaded (GPU), sliding_window",
    "config",
    parse_choice("cache", CACHE_FORMS),
    verify=_verify,
    field="cache",
)
