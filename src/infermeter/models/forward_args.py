"""What a model's forward is given: its cache and how many positions that cache already holds.

Why this exists: transformers 5.24 renamed the forward's cache argument from `past_key_values` to
`cache` (the old name is deprecated until 5.40), and the profiler, which read
`kwargs["past_key_values"]`, silently labelled every decode step "prefill". Names move between
releases (`cache_params` for state-space models, `past_key_values`, `cache`), so nothing here
trusts one name: the cache is found under any of them, and the phase is decided from what the
forward actually gets (the cache's length, else the first new position), not from which
keyword carried it. Calls we make ourselves use the name the installed model's forward takes,
read from its signature, so they never trip a deprecation warning either.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

#: The names a forward's cache has had, newest first (5.24+: `cache`; before: `past_key_values`;
#: state-space models: `cache_params`).
CACHE_ARG_NAMES: tuple[str, ...] = ("cache", "past_key_values", "cache_params")
#: Where a model output carries the updated cache, under the same names.
_OUTPUT_CACHE_NAMES = CACHE_ARG_NAMES


def cache_in(kwargs: Mapping[str, Any]) -> Any | None:
    """The cache object a forward was given, under whichever name carried it (None if none)."""
    for name in CACHE_ARG_NAMES:
        value = kwargs.get(name)
        if value is not None:
            return value
    return None


def _cache_length(cache: Any) -> int | None:
    """Positions already in `cache`, or None where the object does not say."""
    get = getattr(cache, "get_seq_length", None)
    if get is None:
        return None
    try:
        return int(get())
    except (TypeError, ValueError, AttributeError, IndexError, NotImplementedError):
        return None  # some caches (hybrid, paged) cannot answer for every layer


def _first_position(kwargs: Mapping[str, Any]) -> int | None:
    """The lowest first new position of this forward (`cache_position` or `position_ids`).

    Left-padded rows may start anywhere, so the batch's minimum is taken.
    """
    for name in ("cache_position", "position_ids"):
        value = kwargs.get(name)
        if value is None or not hasattr(value, "numel") or value.numel() == 0:
            continue
        first = value[0] if value.dim() == 1 else value[..., 0]
        return int(first.min())
    return None


def past_tokens(kwargs: Mapping[str, Any]) -> int:
    """How many positions this forward's sequence already had before it: 0 for a prefill.

    Evidence, in order: the cache's own length (under any argument name), then the first new
    position the forward is told to write. A forward with neither is a prefill.
    """
    cache = cache_in(kwargs)
    if cache is not None:
        length = _cache_length(cache)
        if length is not None:
            return length
    first = _first_position(kwargs)
    return first if first is not None and first > 0 else 0


def forward_phase(kwargs: Mapping[str, Any]) -> str:
    """The phase: "decode" when the forward extends a cached sequence, else "prefill"."""
    return "decode" if past_tokens(kwargs) > 0 else "prefill"


def cache_arg_name(model: Any) -> str:
    """The cache argument the installed transformers' forward of `model` takes by name.

    Read from the signature (deprecation wrappers keep it through `__wrapped__`); a forward that
    names none of the known names but takes `**kwargs` gets the newest name.
    """
    forward = getattr(model, "forward", model)
    try:
        params = inspect.signature(forward).parameters
    except (TypeError, ValueError):
        return CACHE_ARG_NAMES[0]
    for name in CACHE_ARG_NAMES:
        if name in params:
            return name
    return CACHE_ARG_NAMES[0]


def cache_of(output: Any) -> Any | None:
    """The updated cache a forward returned, under whichever name this release uses."""
    # A plain list of the keys: a 5.24 output's own `in` maps old names to new with a warning.
    keys = list(output.keys()) if hasattr(output, "keys") else []
    for name in _OUTPUT_CACHE_NAMES:
        if name in keys and output[name] is not None:
            return output[name]
    return None


def with_cache(model: Any, cache: Any, **kwargs: Any) -> dict[str, Any]:
    """`kwargs` plus `cache` under the name `model`'s forward takes, to call it with."""
    return {**kwargs, cache_arg_name(model): cache}
