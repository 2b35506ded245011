"""What each routing path costs per token, measured on the loaded model (issue 17, item 3).

The reference performance model (`analysis/perfmodel.PerformanceModel`) takes microseconds per
token for a fast-path lookup, a cache lookup, a learned routing call and expert compute. Here
they are measured, summed over every MoE layer, on the hidden states the routers really see
(one forward of corpus text captures them), at the number of tokens a call carries: a
prefill's (prompt x batch) and a decode step's (batch), since per-call overheads dominate the
second. Each path is timed through the same code the `routing` knob runs (`ShortcutRouting`),
with the table (fast) or the cache (cached) covering every token, or neither (learned, which
calls the router itself: `learned_routing` is the bare router, as the baseline runs it, and
`learned_via_shortcuts` the same router behind the shortcut dispatch, as the variant runs it,
cache insertion included); expert compute is the MoE block's time minus its router's.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from functools import partial
from typing import Any

from infermeter.knobs.routing import LayerRouting, RoutingShortcuts, ShortcutRouting, _Entry
from infermeter.models.architecture import discover
from infermeter.models.loader import LoadedModel

PATH_COSTS = (
    "fast_path_lookup",
    "cache_lookup",
    "learned_routing",
    "learned_via_shortcuts",
    "expert_compute",
)


def _median_us(fn: Callable[[], Any], repeats: int, device: Any) -> float:
    """Median microseconds of `fn`: the microbenchmarks' timer (device clock, one warm-up)."""
    from infermeter.bench.timing import time_calls

    return statistics.median(time_calls(fn, 1, repeats, device)) * 1e3


def _fresh_route(routing: ShortcutRouting, router: Any, flat: Any) -> Any:
    """Every token learned: an empty table and cache each call."""
    return routing._route(LayerRouting(), router, flat)


def _router_inputs(loaded: LoadedModel, ids: Any) -> list[Any]:
    """The hidden states each MoE block received in one forward of `ids` (block order)."""
    import torch

    blocks = [b for b in discover(loaded.model).blocks if b.router is not None]
    seen: list[Any] = [None] * len(blocks)
    handles = [
        b.mlp.register_forward_pre_hook(lambda _m, a, i=i: seen.__setitem__(i, a[0].detach()))
        for i, b in enumerate(blocks)
    ]
    try:
        with torch.inference_mode():
            loaded.model(input_ids=ids, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    return seen


def measure_path_costs(
    loaded: LoadedModel, cfg: RoutingShortcuts, tokens: int, repeats: int = 15
) -> dict[str, float]:
    """Microseconds per token of each path, summed over the MoE layers, at `tokens` per call."""
    import torch

    from infermeter.workloads.prompts import WorkloadSpec, build_batches

    spec = WorkloadSpec(batch_size=1, prompt_tokens=max(tokens, 2), chat=False, seed=777)
    (batch,) = build_batches(loaded.tokenizer, spec, 1)
    ids = batch.input_ids[:, -tokens:].to(next(loaded.model.parameters()).device)
    hidden = _router_inputs(loaded, ids)
    blocks = [b for b in discover(loaded.model).blocks if b.router is not None]
    routing = ShortcutRouting.__new__(ShortcutRouting)  # the knob's code, no calibration
    routing.cfg = cfg
    routing.ids = ids.reshape(-1).tolist()
    routing.prev = [-1, *routing.ids[:-1]]
    routing._ids_tensor = None
    out = dict.fromkeys(PATH_COSTS, 0.0)
    with torch.inference_mode():
        for block, h in zip(blocks, hidden, strict=True):
            flat = h.reshape(-1, h.shape[-1])
            router = block.router.forward
            learned_us = _median_us(partial(router, flat), repeats, flat.device)
            _, weights, experts = router(flat)
            entries = [_Entry(experts[i], weights[i]) for i in range(flat.shape[0])]
            fast = LayerRouting(table=dict(zip(routing.ids, entries, strict=True)))
            cached = LayerRouting()
            routing.cfg = RoutingShortcuts(
                **{**cfg.to_dict(), "cache_ttl": 10**9, "cache_size": 10**7}
            )
            routing._remember(cached, list(range(flat.shape[0])), experts, weights)
            out["fast_path_lookup"] += _median_us(
                partial(routing._route, fast, router, flat), repeats, flat.device
            )
            out["cache_lookup"] += _median_us(
                partial(routing._route, cached, router, flat), repeats, flat.device
            )
            routing.cfg = cfg  # a fresh state per call: nothing cached yet, insertion paid
            out["learned_via_shortcuts"] += _median_us(
                partial(_fresh_route, routing, router, flat), repeats, flat.device
            )
            out["learned_routing"] += learned_us
            block_us = _median_us(partial(block.mlp, h), repeats, flat.device)
            out["expert_compute"] += max(block_us - learned_us, 0.0)
    n = flat.shape[0]
    return {k: v / n for k, v in out.items()}
