"""The registry: every knob a sweep can turn, by name (`infermeter.knobs` re-exports it)."""

from __future__ import annotations

from infermeter.errors import UserError
from infermeter.knobs.active_layers import ACTIVE_LAYERS
from infermeter.knobs.attention import ATTN_IMPLEMENTATION
from infermeter.knobs.base import Knob
from infermeter.knobs.batch_size import BATCH_SIZE
from infermeter.knobs.cache import CACHE
from infermeter.knobs.compile import COMPILE
from infermeter.knobs.decoding import DECODING
from infermeter.knobs.dtype import DTYPE
from infermeter.knobs.experts import EXPERTS_IMPLEMENTATION
from infermeter.knobs.moe_topk import TOP_K
from infermeter.knobs.new_tokens import NEW_TOKENS
from infermeter.knobs.prompt_kind import PROMPT_KIND
from infermeter.knobs.prompt_tokens import PROMPT_TOKENS
from infermeter.knobs.routing import ROUTING
from infermeter.knobs.vision_tokens import VISION_TOKENS

KNOBS: dict[str, Knob] = {
    k.name: k
    for k in (
        PROMPT_TOKENS,
        NEW_TOKENS,
        BATCH_SIZE,
        TOP_K,
        ACTIVE_LAYERS,
        DTYPE,
        COMPILE,
        ATTN_IMPLEMENTATION,
        EXPERTS_IMPLEMENTATION,
        DECODING,
        PROMPT_KIND,
        CACHE,
        VISION_TOKENS,
        ROUTING,
    )
}


def get_knob(name: str) -> Knob:
    """The knob called `name`, or a UserError listing the known ones."""
    knob = KNOBS.get(name.strip())
    if knob is None:
        raise UserError(f"unknown knob {name!r}", f"use one of {', '.join(KNOBS)}")
    return knob
