"""The eager attention path deep mode installs, with its operations timed apart.

Same maths as transformers' eager attention, with QK^T (scaled and masked), softmax and
attention x V timed apart and the weights probed.

It is registered under its own name in transformers' `AttentionInterface` (and the eager mask
builder in `AttentionMaskInterface`), so no model code is edited: deep mode sets the text
config's `_attn_implementation` to that name for its duration and restores it afterwards.
"""

from __future__ import annotations

import weakref
from typing import Any

NAME = "infermeter_deep"
_registered = False
#: Which profiler times each attention module: the function is global to transformers, so the
#: profiler is found from the module it is called with. A module-wide "active profiler" lost
#: every attention operation of one of two deep profiles run in two threads (issue 35).
PROFILERS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def attach(modules: Any, profiler: Any) -> None:
    """Time the attention calls of `modules` (a model's) for `profiler`."""
    for m in modules:
        PROFILERS[m] = profiler


def detach(modules: Any, profiler: Any) -> None:
    """Stop timing `modules` for `profiler` (another profiler's entries are left alone)."""
    for m in modules:
        if PROFILERS.get(m) is profiler:
            del PROFILERS[m]


def register() -> None:
    """Register the deep attention function and its mask builder with transformers (once)."""
    global _registered
    if _registered:
        return
    from transformers.masking_utils import AttentionMaskInterface, eager_mask
    from transformers.modeling_utils import AttentionInterface

    AttentionInterface.register(NAME, deep_attention_forward)
    AttentionMaskInterface.register(NAME, eager_mask)
    _registered = True


def deep_attention_forward(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """Eager attention, instrumented; shapes as transformers' `eager_attention_forward`."""
    import torch

    prof: Any = PROFILERS.get(module)
    b, heads, q_len, dim = query.shape
    kv_heads, k_len = key.shape[1], key.shape[-2]
    groups = heads // kv_heads
    if scaling is None:  # GPT-2 passes no scaling and keeps its own switches on the module
        scaling = dim**-0.5 if getattr(module, "scale_attn_weights", True) else 1.0
        if getattr(module, "scale_attn_by_inverse_layer_idx", False):
            scaling /= float(getattr(module, "layer_idx", 0) + 1)
    on = prof is not None and prof.active
    if on:
        t0 = prof.clock.mark()
    # Grouped-query attention without copying K and V per group (what repeat_kv does): query
    # head h uses kv head h // groups, so (b, heads, q, d) -> (b, kv_heads, groups * q, d).
    q = query.reshape(b, kv_heads, groups * q_len, dim)
    weights = torch.matmul(q, key.transpose(2, 3)).view(b, heads, q_len, k_len) * scaling
    if attention_mask is not None:
        mask = attention_mask[:, :, :, :k_len]
        if mask.dtype == torch.bool:
            weights = weights.masked_fill(~mask, float("-inf"))
        else:
            weights = weights + mask
    if on:
        t1 = prof.clock.mark()
    weights = torch.nn.functional.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    if on:
        t2 = prof.clock.mark()
    if dropout and module.training:
        weights = torch.nn.functional.dropout(weights, p=dropout)
    out = torch.matmul(weights.view(b, kv_heads, groups * q_len, k_len), value)
    out = out.view(b, heads, q_len, -1).transpose(1, 2).contiguous()
    if on:
        t3 = prof.clock.mark()
        prof.attention_ops(module, weights, t0, t1, t2, t3)
    return out, weights
