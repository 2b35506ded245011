"""MoE top-k: how many experts each token is routed to.

In transformers 5.x the value that counts lives on each router module (`block.mlp.gate.top_k`
for Mixtral, Qwen2-MoE and Qwen3-MoE: the router calls `torch.topk(probs, self.top_k)`); the
config's `num_experts_per_tok` and Mixtral's `block.top_k` are read only at construction. So the
knob sets `top_k` on every router and restores it afterwards, and verification hooks the routers
during one forward and counts the distinct experts each token was sent to.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from infermeter.errors import UserError
from infermeter.knobs.base import Knob, KnobNotApplied, parse_int
from infermeter.knobs.calibration import calibration_ids
from infermeter.knobs.evidence import KnobCheckDoc
from infermeter.models.architecture import discover
from infermeter.models.loader import LoadedModel


def routers(model: Any) -> list[Any]:
    """Router modules that carry the top-k used at run time."""
    return [b.router for b in discover(model).blocks if b.router is not None]


def _check(value: int, loaded: LoadedModel) -> None:
    info = loaded.info
    if not info.is_moe or info.experts is None:
        raise UserError(
            f"top_k applies to mixture-of-experts models; {info.spec} is dense",
            "use a MoE model (e.g. tiny-mixtral, tiny-qwen3-moe) or drop this knob",
        )
    if value > info.experts:
        raise UserError(
            f"top_k={value} is above the {info.experts} experts of {info.spec}",
            f"use 1..{info.experts}",
        )
    if not any(hasattr(r, "top_k") for r in routers(loaded.model)):
        raise UserError(
            f"the routers of {info.spec} have no top_k attribute to set",
            "this MoE family is not supported by the top_k knob yet",
        )


@contextlib.contextmanager
def _apply(loaded: LoadedModel, value: int) -> Iterator[dict[str, Any]]:
    saved = [(r, r.top_k) for r in routers(loaded.model) if hasattr(r, "top_k")]
    try:
        for r, _ in saved:
            r.top_k = value
        yield {"routers": len(saved), "previous": saved[0][1] if saved else None}
    finally:
        for r, k in saved:
            r.top_k = k


def experts_per_token_by_router(loaded: LoadedModel) -> dict[str, list[int]]:
    """Per router: the distinct numbers of experts a token was routed to, in one forward."""
    import torch

    arch = discover(loaded.model)
    seen: dict[str, set[int]] = {}

    def hook_for(name: str) -> Any:
        def hook(_module: Any, _args: Any, output: Any) -> None:
            indices = output[-1] if isinstance(output, tuple) else None
            if indices is None or indices.dtype not in (torch.int64, torch.int32):
                return
            flat = indices.reshape(-1, indices.shape[-1])
            seen.setdefault(name, set()).update(len(set(row.tolist())) for row in flat)

        return hook

    handles = [r.register_forward_hook(hook_for(arch.name_of(r))) for r in routers(loaded.model)]
    try:
        with torch.inference_mode():
            loaded.model(input_ids=calibration_ids(loaded), use_cache=False)
    finally:
        for h in handles:
            h.remove()
    return {name: sorted(counts) for name, counts in seen.items()}


def experts_per_token(loaded: LoadedModel) -> list[int]:
    """Distinct experts each token was routed to, over every router, in one forward."""
    return sorted({n for counts in experts_per_token_by_router(loaded).values() for n in counts})


def _verify(loaded: LoadedModel, value: int, result: Any, applied: Any = None) -> KnobCheckDoc:
    counts = sorted(set(experts_per_token(loaded)))
    if counts != [value]:
        raise KnobNotApplied(f"top_k={value} but tokens were routed to {counts} experts")
    return {"experts_per_token": value}


TOP_K = Knob(
    "top_k",
    "MoE experts per token (1..number of experts)",
    "model",
    parse_int("top_k"),
    check=_check,
    apply=_apply,
    verify=_verify,
)
