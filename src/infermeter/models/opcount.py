"""How many framework operations a forward dispatches: the fixed cost a small model pays.

A decode step of a tiny model on a CPU is almost all overhead: tiny-llama dispatches about 400
operations for 4 blocks, at a few microseconds each, and its GEMMs take less. The time model
(analysis/timemodel.py) charges each operation that is not a GEMM or an attention call the
measured cost of one (measure/curves.py `op_seconds`), so it needs the count: it is taken here
by running one prefill of 8 tokens and one decode step under a dispatch mode that counts every
aten operation, with the model's own kernels. It works on the meta device as well (a config, no
weights) for most architectures; where a forward cannot run there (an `.item()` on a meta tensor)
the count is None and the time model says its overhead is estimated.
"""

from __future__ import annotations

import sys
from typing import Any

#: the counted forwards: one prefill and the decode step after it
PHASES = ("prefill", "decode")

#: aten operations that are GEMMs (timed by the GEMM curve) or attention (the attention curve)
GEMM_OPS = ("aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten._grouped_mm")
ATTENTION_OPS = ("scaled_dot_product", "flash_attention", "efficient_attention")


def _kind(name: str) -> str:
    if any(name.startswith(g + ".") or name == g for g in GEMM_OPS):
        return "gemm"
    if any(a in name for a in ATTENTION_OPS):
        return "attention"
    return "other"


def _heads_handed(args: tuple[Any, ...]) -> tuple[int, int] | None:
    """(query heads, key heads) of an attention call's (batch, heads, tokens, dim) inputs.

    Equal counts in a grouped-query model mean the keys and values were copied out to every
    query head before the kernel (`repeat_kv` in transformers' SDPA path: counted under
    4.38.2-4.51.3, and an H100 measured it at about 2 ms a step for Llama-3.1-8B at batch 32);
    fewer key heads mean the kernel reads the grouped cache itself (`enable_gqa`, 5.x).
    """
    if len(args) < 2:
        return None
    q, k = args[0], args[1]
    if getattr(q, "ndim", 0) != 4 or getattr(k, "ndim", 0) != 4:
        return None
    return int(q.shape[1]), int(k.shape[1])


def _counter() -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpCounter(TorchDispatchMode):  # type: ignore[misc]  # torch is read as Any
        """Counts aten operations by kind (gemm, attention, other)."""

        def __init__(self) -> None:
            super().__init__()
            self.counts = {"gemm": 0, "attention": 0, "other": 0}
            #: (query heads, key heads) the first attention kernel was handed
            self.heads: tuple[int, int] | None = None

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kind = _kind(str(func))
            self.counts[kind] += 1
            if kind == "attention" and self.heads is None:
                self.heads = _heads_handed(args)
            return func(*args, **(kwargs or {}))

    return OpCounter()


def count_ops(model: Any, tokens: int = 8) -> dict[str, Any] | None:
    """Operations of one prefill of `tokens` tokens and of the decode step after it, by kind.

    Beside the counts (`"prefill"`, `"decode"`): the query and key heads the decode step's
    attention kernel was handed (`"attention_heads"`, absent when no kernel ran: eager) and the
    transformers release that ran (`"transformers"`), both read by the time model.

    None when the model cannot run a plain text forward here (a vision model that needs
    images, or a meta-device forward that reads a value).
    """
    import torch

    from infermeter.models.forward_args import cache_of, with_cache

    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    cfg = model.config
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg  # < 4.46 has none
    vocab = int(getattr(text, "vocab_size", 2) or 2)
    ids = (torch.arange(tokens, device=device) % max(vocab - 1, 1)).unsqueeze(0) + 1
    try:
        with torch.no_grad():
            prefill = _counter()
            with prefill:
                first = model(input_ids=ids, use_cache=True)
            decode = _counter()
            with decode:
                model(input_ids=ids[:, -1:], **with_cache(model, cache_of(first), use_cache=True))
    except Exception:  # any failure means "not counted", and is said so
        return None
    counted: dict[str, Any] = {"prefill": prefill.counts, "decode": decode.counts}
    if decode.heads is not None:
        counted["attention_heads"] = {"query": decode.heads[0], "key": decode.heads[1]}
    release = getattr(sys.modules.get("transformers"), "__version__", None)
    if release:
        counted["transformers"] = release
    return counted


#: the largest model `count_ops_of_config` materialises (uninitialised weights) to count
MAX_COUNT_BYTES = 2**30


def _materialised(config: Any, dtype: Any) -> Any | None:
    """The model of `config` with uninitialised weights on the CPU, or None when too large."""
    import torch

    from infermeter.models.shape import meta_model

    model = meta_model(config)
    size = sum(p.numel() for p in model.parameters()) * torch.empty(0, dtype=dtype).element_size()
    if size > MAX_COUNT_BYTES:
        return None
    model = model.to(dtype).to_empty(device="cpu").eval()
    for buf in model.buffers():  # rotary frequencies and the like: finite values
        buf.zero_()
    return model


#: config fields of MLP and expert widths, which a block's operation count does not depend on
_MLP_WIDTHS = (
    "intermediate_size",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "ffn_dim",
    "n_inner",
)


def _shrunk(config: Any, layers: int) -> Any:
    """A copy of `config` with `layers` decoder blocks, a 256-token vocabulary, narrow MLPs.

    None of these changes how many operations a block dispatches, and all shrink the weights a
    count must allocate (a 70B model's embedding alone is 4 GB in float32).
    """
    import copy

    out = copy.deepcopy(config)
    text = out.get_text_config() if hasattr(out, "get_text_config") else out
    text.num_hidden_layers = layers
    if isinstance(getattr(text, "layer_types", None), list):
        text.layer_types = text.layer_types[:layers]
    text.vocab_size = 256
    for name in _MLP_WIDTHS:
        if isinstance(getattr(text, name, None), int):
            setattr(text, name, min(getattr(text, name), 128))
    return out


def count_ops_of_config(config: Any, dtype: str = "float32") -> dict[str, Any] | None:
    """`count_ops` of the model a config describes, without its weights; None if it cannot run.

    A meta-device forward dispatches other operations than a real one (SDPA falls back to its
    math decomposition there), so the model is materialised with uninitialised weights. A model
    over `MAX_COUNT_BYTES` is counted with 1 and 2 blocks and a small vocabulary, and the
    count extrapolated to all its blocks (the result says `"extrapolated": True`).
    """
    import torch

    dt = getattr(torch, dtype, torch.float32)
    try:
        model = _materialised(config, dt)
        if model is not None:
            return count_ops(model)
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        layers = int(text.num_hidden_layers)
        one, two = (_materialised(_shrunk(config, n), dt) for n in (1, 2))
        if one is None or two is None:
            return None
        c1, c2 = count_ops(one), count_ops(two)
    except Exception:  # not countable: the time model estimates the count
        return None
    if c1 is None or c2 is None:
        return None
    out: dict[str, Any] = {
        phase: {
            kind: c1[phase][kind] + (layers - 1) * (c2[phase][kind] - c1[phase][kind])
            for kind in c1[phase]
        }
        for phase in PHASES
    }
    out.update({k: v for k, v in c2.items() if k not in PHASES})
    out["extrapolated"] = True
    return out
