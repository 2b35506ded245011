"""What each KV-cache form holds, and what a decode step reads from it: for predict's memory fit.

The forms are transformers' (the `cache` knob runs them; workloads/decoding.py names them):
- dynamic: grows a position at a time; a sliding-window layer keeps its last `window`
  positions (transformers 5 gives such layers `DynamicSlidingWindowLayer` by default).
- static: allocated at the first forward for the whole generation (prompt + new tokens) and
  attended over in full at every step (masked), so decode costs what the final length costs
  from its first step; the same bytes as dynamic at the end.
- sliding_window: dynamic, with every layer that has a window capped at it (what the
  architecture's windows already give: the same figures as dynamic here).
- quantized: optimum-quanto through transformers' `QuantizedCache` (KIVI-like): the prompt is
  quantized at once to `nbits` in groups of `q_group_size` elements (a scale and a shift each,
  in the compute dtype); new positions stay in the compute dtype until `residual_length` of them
  gather, then the whole layer is quantized again. Each step dequantizes the layer's cache into
  a full-precision copy for attention, so a step reads the packed cache, writes that copy and
  reads it: more bytes than the dynamic cache, not fewer (the form saves memory, not time).
  Checked against the bytes held measured on SmolLM2-135M: 2.24 and 8.39 MiB after 128 and
  1,024 prompt tokens and 32 new ones; this model gives 2.24 and 8.38.
- offloaded: every layer's cache in host memory, the layer computing and the next one
  prefetched on the device (transformers' `OffloadedCache`): two layers' worth on the GPU.

State-space and linear-attention layers (models/mixers.py) keep a fixed state per sequence
instead, whatever the length: their convolution window and scan state, in every form, on
the device (`state_bytes`).
"""

from __future__ import annotations

from dataclasses import dataclass

from infermeter.models.mixers import MixerShape, state_elements
from infermeter.models.shape import Shape

#: the forms predict knows (the `cache` knob's values)
FORMS = ("dynamic", "static", "quantized", "offloaded", "sliding_window")
#: transformers' QuantizedLayer defaults, which the `cache` knob runs with (nbits set to 4)
QUANTO_NBITS = 4
QUANTO_GROUP = 64
QUANTO_RESIDUAL = 128


@dataclass(frozen=True)
class KVMemory:
    """One sequence's KV cache in bytes: on the device, in host memory, and transient per step."""

    device_bytes: float
    host_bytes: float = 0.0
    #: a quantized cache's full-precision copy of one layer while it attends
    transient_bytes: float = 0.0


def _per_layer_token(shape: Shape, elem_bytes: float, tp: int) -> float:
    kv_heads = -(-max(shape.kv_heads, 1) // tp)  # a KV head is never split
    return 2 * kv_heads * shape.head_dim * elem_bytes


def positions_per_layer(shape: Shape, length: int) -> list[int]:
    """Positions each attention layer holds at `length` (windows respected)."""
    layers = shape.census.layers if shape.census else []
    if not layers:
        return [min(length, shape.sliding_window or length)] * shape.layers
    return [min(length, lay.window or length) for lay in layers if lay.score_dims]


def quantized_split(prompt: int, new: int) -> tuple[int, int]:
    """(quantized positions, full-precision residual positions) after `new` generated tokens.

    The last token generated is never fed back, so the cache holds prompt + new - 1 positions:
    the prompt quantized at the first forward, then residuals of up to 128 re-quantized.
    """
    steps = max(new - 1, 0)
    residual = steps % QUANTO_RESIDUAL
    return prompt + steps - residual, residual


def state_bytes(shape: Shape, elem_bytes: float, tp: int = 1) -> float:
    """One sequence's state in its state-space and linear-attention layers, per GPU.

    Fixed whatever the context (split over tensor-parallel GPUs with the channels).
    """
    layers = shape.census.layers if shape.census else []
    elements = sum(state_elements(MixerShape(**m)) for lay in layers for m in lay.mixers)
    return elem_bytes * elements / max(tp, 1)


def kv_memory(
    shape: Shape, elem_bytes: float, tp: int, prompt: int, new: int, form: str = "dynamic"
) -> KVMemory:
    """One sequence's KV cache (and recurrent state) after `prompt` + `new` tokens, per GPU."""
    kv = _kv_memory(shape, elem_bytes, tp, prompt, new, form)
    state = state_bytes(shape, elem_bytes, tp)
    return KVMemory(kv.device_bytes + state, kv.host_bytes, kv.transient_bytes)


def _kv_memory(
    shape: Shape, elem_bytes: float, tp: int, prompt: int, new: int, form: str
) -> KVMemory:
    token = _per_layer_token(shape, elem_bytes, tp)
    length = prompt + new
    held = sum(positions_per_layer(shape, length))
    if form == "quantized":
        quantized, residual = quantized_split(prompt, new)
        packed = QUANTO_NBITS / 8 / elem_bytes + 2 / QUANTO_GROUP  # codes, scale and shift
        layers = len(positions_per_layer(shape, length))
        one_layer = token * (quantized + residual)
        return KVMemory(
            device_bytes=layers * token * (quantized * packed + residual),
            transient_bytes=one_layer,
        )
    if form == "offloaded":
        per_layer = positions_per_layer(shape, length)
        on_device = sum(sorted(per_layer, reverse=True)[:2])
        return KVMemory(device_bytes=token * on_device, host_bytes=token * held)
    return KVMemory(device_bytes=token * held)


def decode_context(form: str, prompt: int, new: int) -> int:
    """The context a mean decode step attends over: the mid length; static's whole allocation."""
    if form == "static":
        return prompt + new
    return prompt + max(0, new - 1) // 2


def decode_kv_bytes_each(form: str, elem_bytes: float) -> float | None:
    """Bytes a decode step moves per cached element, where the form changes it (None: as stored).

    quantized: the packed codes with their scales read, a full-precision copy written and read.
    """
    if form == "quantized":
        return 2 * elem_bytes + QUANTO_NBITS / 8 + 2 * elem_bytes / QUANTO_GROUP
    return None
