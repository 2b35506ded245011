"""Cost formulas for the state-space mixers the census finds by what they hold.

Why: a Mamba layer's convolution and scan are neither linear layers nor softmax attention, so
the census could only fit torch's counts of them (models/flopcount.py), which cannot be checked
against the same counter and says nothing about decode's recurrent form. These are written from
the algorithms (and transformers' torch paths, which run them on every device):

- **Mamba (selective scan)**, a module with a 2-D `A_log` [inner, state] (3-D [heads,
  head_dim, state] in Zamba's multi-head form) and a depthwise `conv1d`: the causal
  convolution over the padded prompt, 2 C K (n + K - 1), and the scan's output contraction
  C_t . h_t, 2 inner N per token; projections kept as bare per-head weights (Zamba's
  `x_proj_weight`, 3-D [heads, out, in]) are one multiply-add per element per token.
- **Gated delta rule (chunked)**, a module with a depthwise `conv1d`, value heads H with
  key and value head dims Dk, Dv (`num_v_heads`, `head_k_dim`, `head_v_dim`, or `num_heads`
  and `head_dim` for both) and a kernel with a `chunk_size` (Qwen3-Next, Qwen3.5, Kimi
  Linear): the convolution, then per chunk of Q and value head: K K^T and Q K^T
  (2 Q^2 Dk each), the intra-chunk attention applied to the new values (2 Q^2 Dv), and
  three products with the carried Dk x Dv state (2 Q Dk Dv each). The triangular solves
  are not matmuls and torch's counter skips them; they are not in the figure either.
- **Gated short convolution** (LFM2's `ShortConv`): a depthwise convolution between linear
  layers and nothing else, 2 C K (n + K - 1); with per-head gate matrices (Griffin's RG-LRU in
  RecurrentGemma, 3-D [heads, in, out]) one multiply-add per element per token besides, and
  an element-wise recurrence over a state as wide as the gates.
- **Mamba-2 (state-space duality, chunked)**, a 1-D `A_log` [heads] with `chunk_size`: the
  same convolution, then per chunk of Q positions (the prompt padded to m = ceil(n / Q)
  chunks): C B^T scores 2 Q^2 H N, applied to the values 2 Q^2 H P, each chunk's state
  2 Q H P N, its output from the carried state 2 Q H P N, and the chunk-to-chunk pass over
  m + 1 states, 2 (m + 1)^2 H P N.

- **Lightning attention (linear attention in blocks)**, MiniMax-01's: a module with a decay
  per head (`slope_rate`), heads H of dim d and `block_size` B, and no convolution. Per
  block of b positions (the prompt in full blocks of B, then the rest): Q K^T and its
  product with V inside the block (2 b^2 d each per head), the product of the decayed
  queries with the carried d x d state and the block's update of it (2 b d^2 each). A
  decode step: the update K^T V and the read-out Q S, 4 H d^2.

A decode step runs the recurrent form instead: the convolution over its window (2 C K) and
the state's update and read-out (2 inner N, or 2 H P N; the delta rule's read-out by the
key, update and read-out by the query, 6 H Dk Dv). The element-wise work of the
recurrence (exp, multiply, add per state element) is not in these figures, as softmax's is
not in attention's: they are the multiply-adds torch's counter also counts, so the census can
be checked against it (docs/architectures.md). A mixer the formulas do not recognise stays
uncosted and is fitted, and says so.

The state is what makes these layers cheap at long context: a fixed C K + inner N elements
per sequence (the convolution's window as transformers and mamba_ssm keep it, K positions,
and the scan state; Mamba-2: H P N), read and written once per decode step, where attention's
cache grows with every token (`state_elements`).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import asdict, dataclass
from typing import Any, TypedDict, cast


class MixerShapeDoc(TypedDict):
    """`MixerShape.to_dict()`: its fields by name (a test holds the two together)."""

    kind: str
    conv_channels: int
    conv_kernel: int
    state: int
    inner: int
    heads: int
    head_dim: int
    chunk: int
    key_dim: int
    bare_macs: int
    recurrent: int


@dataclass(frozen=True)
class MixerShape:
    """What a state-space mixer's cost depends on (one module)."""

    #: "mamba" (selective scan), "mamba2" (state-space duality), "delta" (gated delta rule),
    #: "conv" (a gated short convolution alone), "lightning" (linear attention in blocks)
    kind: str
    conv_channels: int
    conv_kernel: int
    state: int  # N
    inner: int  # channels the scan runs over (Mamba) or heads x head_dim (Mamba-2)
    heads: int = 0
    head_dim: int = 0
    chunk: int = 0
    #: the delta rule's key head dim (its state is key_dim x head_dim per head)
    key_dim: int = 0
    #: multiply-adds per token of weights the module holds bare (not in a linear layer)
    bare_macs: int = 0
    #: elements of an element-wise recurrent state beside the convolution (RG-LRU's h)
    recurrent: int = 0

    def to_dict(self) -> MixerShapeDoc:
        """Plain dict for JSON and the store."""
        return cast("MixerShapeDoc", asdict(self))


def _chunk_default(function: Any) -> int | None:
    """The default of a function's `chunk_size` parameter, if it has a positive int one."""
    try:
        default = inspect.signature(function).parameters["chunk_size"].default
    except (KeyError, TypeError, ValueError):
        return None
    return default if isinstance(default, int) and default > 0 else None


def chunk_size(block: Any, config: Any = None) -> int | None:
    """The chunk length of a chunked scan in `block`, or None.

    Looked for, in order, in each module: a `chunk_size` attribute (Mamba-2) or the config's
    (xLSTM), a kernel it holds with a `chunk_size` default, or a function its forward calls by
    name with one (the gated delta rule of Qwen3-Next).
    """
    for module in block.modules():
        value = getattr(module, "chunk_size", None) or getattr(config, "chunk_size", None)
        if isinstance(value, int) and value > 0:
            return value
        kernels = [a for a in vars(module).values() if callable(a) and not hasattr(a, "forward")]
        forward = inspect.unwrap(getattr(type(module), "forward", None) or (lambda: None))
        code, space = getattr(forward, "__code__", None), getattr(forward, "__globals__", {})
        if code is not None:
            kernels += [space[n] for n in code.co_names if callable(space.get(n))]
        for kernel in kernels:
            found = _chunk_default(kernel)
            if found:
                return found
    return None


def _depthwise(conv: Any) -> bool:
    import torch.nn as nn

    return isinstance(conv, nn.Conv1d) and conv.groups == conv.in_channels == conv.out_channels


def _depthwise_conv(module: Any) -> Any | None:
    """The module's depthwise causal convolution: `conv1d`, else its only depthwise child."""
    conv = getattr(module, "conv1d", None)
    if _depthwise(conv):
        return conv
    found = [c for c in module.children() if _depthwise(c)]
    return found[0] if len(found) == 1 else None


def _only_a_convolution(module: Any, conv: Any) -> bool:
    """Nothing but linear layers, the convolution and vectors: a gated short convolution.

    Anything holding heads, a state matrix or a decay (A_log) is some other recurrence, which
    no formula here may under-count.
    """
    import torch.nn as nn

    if any(hasattr(module, a) for a in ("A_log", "num_heads", "num_v_heads", "ssm_state_size")):
        return False
    for mod in module.modules():
        if mod is conv or isinstance(mod, nn.Linear):
            continue
        own = list(mod.parameters(recurse=False))
        gates = [w for w in own if w.dim() == 3]
        for w in own:
            bias = w.dim() == 2 and any(g.shape[0::2] == w.shape for g in gates)
            if w.dim() > 3 or (w.dim() == 2 and not bias):
                return False
    return True


def _gate_matrices(module: Any) -> tuple[int, int]:
    """(multiply-adds per token, recurrent state elements) of per-head gate matrices.

    Griffin's RG-LRU (RecurrentGemma) gates its recurrence with block-diagonal matrices kept
    as [heads, in, out] tensors: one multiply-add per element per token; the recurrence
    itself is element-wise, over a state as wide as the gates' output.
    """
    import torch.nn as nn

    gates = [
        w
        for mod in module.modules()
        if not isinstance(mod, nn.Conv1d)
        for w in mod.parameters(recurse=False)
        if w.dim() == 3
    ]
    if not gates:
        return 0, 0
    macs = sum(int(w.numel()) for w in gates)
    width = max(int(w.shape[0]) * int(w.shape[2]) for w in gates)
    return macs, width


def _lightning_shape(module: Any) -> MixerShape | None:
    """Lightning attention's heads, head dim and block, if the module holds a per-head decay.

    MiniMax-01's linear attention keeps a `slope_rate` decay per head and computes in blocks
    of `block_size` positions; it has no convolution.
    """
    import torch

    dims = _positive_ints(module, "num_attention_heads", "head_dim", "block_size")
    slope = getattr(module, "slope_rate", None)
    if dims is None or not isinstance(slope, torch.Tensor) or slope.numel() != dims[0]:
        return None
    heads, head_dim, block = dims
    return MixerShape(
        "lightning", 0, 0, head_dim, heads * head_dim, heads, head_dim, block, key_dim=head_dim
    )


def mixer_shape(module: Any) -> MixerShape | None:
    """The formula's inputs for `module`, or None where no formula here describes it."""
    conv = _depthwise_conv(module)
    if conv is None:
        return _lightning_shape(module)
    a_log = getattr(module, "A_log", None)
    if a_log is None or not hasattr(a_log, "dim"):
        found = _delta_shape(module, conv)
        if found is None and _only_a_convolution(module, conv):
            channels, kernel = int(conv.in_channels), int(conv.kernel_size[0])
            gates, width = _gate_matrices(module)
            return MixerShape("conv", channels, kernel, 0, 0, bare_macs=gates, recurrent=width)
        return found
    channels, kernel = int(conv.in_channels), int(conv.kernel_size[0])
    bare = sum(
        int(w.numel()) for w in module.parameters(recurse=False) if w.dim() >= 3 and w is not a_log
    )  # per-head matrices; 2-D bare tensors here are per-channel biases and skips
    if a_log.dim() in (2, 3):
        inner = math.prod(int(x) for x in a_log.shape[:-1])
        return MixerShape("mamba", channels, kernel, int(a_log.shape[-1]), inner, bare_macs=bare)
    names = ("num_heads", "head_dim", "ssm_state_size", "chunk_size")
    values = tuple(getattr(module, name, None) for name in names)
    if a_log.dim() == 1 and all(isinstance(v, int) and v > 0 for v in values):
        h, p, n, q = (int(v) for v in values)  # type: ignore[arg-type]
        if h == int(a_log.shape[0]):
            return MixerShape("mamba2", channels, kernel, n, h * p, h, p, q, bare_macs=bare)
    return _delta_shape(module, conv) if a_log.dim() == 1 else None


def _positive_ints(module: Any, *names: str) -> tuple[int, ...] | None:
    values = tuple(getattr(module, name, None) for name in names)
    if all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
        return values  # type: ignore[return-value]
    return None


def _delta_shape(module: Any, conv: Any) -> MixerShape | None:
    """A gated delta rule's heads and dims, if the module names them and its kernel chunks."""
    if getattr(module, "ssm_state_size", None) is not None:
        return None  # a state-space mixer this file does not describe
    dims = _positive_ints(module, "num_v_heads", "head_k_dim", "head_v_dim")
    if dims is None:
        both = _positive_ints(module, "num_heads", "head_dim")
        dims = (both[0], both[1], both[1]) if both else None
    chunk = chunk_size(module)
    if dims is None or chunk is None:
        return None
    heads, dk, dv = dims
    channels, kernel = int(conv.in_channels), int(conv.kernel_size[0])
    return MixerShape("delta", channels, kernel, dk, heads * dv, heads, dv, chunk, key_dim=dk)


def prefill_flop_count(m: MixerShape, tokens: int) -> int:
    """Multiply-add FLOPs of a prompt of `tokens` tokens (batch 1, nothing cached)."""
    n = tokens
    conv = 2 * m.conv_channels * m.conv_kernel * (n + m.conv_kernel - 1) + 2 * m.bare_macs * n
    if m.kind in ("mamba", "conv"):
        return conv + 2 * m.inner * m.state * n
    q, h, p, s = m.chunk, m.heads, m.head_dim, m.state
    if m.kind == "lightning":  # full blocks of q, then the rest
        blocks = [q] * (n // q) + ([n % q] if n % q else [])
        return sum(4 * h * b * (b * s + s * p) for b in blocks)
    if m.kind == "delta":
        chunks = math.ceil(n / q)
        return conv + chunks * h * (4 * q * q * s + 2 * q * q * p + 6 * q * s * p)
    chunks = math.ceil(n / q)
    within = 2 * chunks * q * q * h * (s + p) + 4 * chunks * q * h * p * s
    return conv + within + 2 * (chunks + 1) ** 2 * h * p * s


def step_flop_count(m: MixerShape, tokens: int = 1) -> int:
    """Multiply-add FLOPs of `tokens` decode steps' recurrent form (batch 1)."""
    products = {"delta": 3, "lightning": 2}.get(m.kind, 1)
    state = products * m.inner * m.state
    per_token = m.conv_channels * m.conv_kernel + state + m.bare_macs
    return 2 * tokens * per_token


def state_elements(m: MixerShape) -> int:
    """Elements a sequence keeps between steps: the convolution's window and the scan state."""
    return m.conv_channels * m.conv_kernel + m.inner * m.state + m.recurrent
