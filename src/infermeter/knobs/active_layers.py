"""active_layers: run only N of the decoder blocks, with a quality proxy beside the cost.

How: the model's block list is replaced, for the duration, by a list of the N kept blocks (in
their original order); the text config's `num_hidden_layers` (and `layer_types`) and each kept
block's `layer_idx` are renumbered 0..N-1. Skipped blocks are thereby identity maps on the
residual stream (the hidden state passes through), and the KV cache has exactly the N layers
that run, so prefill and decode stay consistent (a cache sized for all L layers with holes would
break `get_seq_length()` when block 0 is skipped). Everything is restored on exit.

Which N: `first` keeps blocks 0..N-1; `importance` keeps the N blocks that change the hidden
state most on a calibration prompt (1 - mean cosine similarity of a block's input and output),
measured on the full model.
Quality proxy, on the same calibration prompt: top-1 agreement of next-token predictions with
the full model and the mean KL(full || reduced) per position.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from infermeter.errors import UserError
from infermeter.knobs.base import Knob, KnobNotApplied
from infermeter.knobs.calibration import calibration_ids, logits, quality
from infermeter.knobs.evidence import KnobCheckDoc, with_quality
from infermeter.models.architecture import _blocks_holder, discover
from infermeter.models.loader import LoadedModel

ORDERS = ("first", "importance")


def parse(text: str) -> tuple[int, str]:
    """'4' -> (4, 'first'); '4:importance' -> (4, 'importance')."""
    head, _, order = str(text).strip().partition(":")
    order = order or "first"
    try:
        n = int(head)
    except ValueError:
        raise UserError(
            f"active_layers={text!r} is not N or N:importance", "use e.g. active_layers=2"
        ) from None
    if order not in ORDERS:
        raise UserError(f"active_layers order {order!r} is unknown", "use first or importance")
    return n, order


def _check(value: tuple[int, str], loaded: LoadedModel) -> None:
    n, total = value[0], loaded.info.layers
    if n < 1 or n > total:
        raise UserError(
            f"active_layers={n} is outside 1..{total} ({loaded.info.spec} has {total} blocks)",
            f"use 1..{total}",
        )


def block_importance(loaded: LoadedModel) -> list[float]:
    """Per block: 1 - mean cosine(input, output) on the calibration prompt (full model)."""
    import torch

    blocks = [b.block for b in discover(loaded.model).blocks]
    scores: list[float] = [0.0] * len(blocks)

    def hook(i: int) -> Any:
        def run(_m: Any, args: Any, kwargs: Any, output: Any) -> None:
            x = args[0] if args else kwargs.get("hidden_states")
            y = output[0] if isinstance(output, tuple) else output
            cos = torch.nn.functional.cosine_similarity(x.float(), y.float(), dim=-1)
            scores[i] = float(1 - cos.mean())

        return run

    handles = [b.register_forward_hook(hook(i), with_kwargs=True) for i, b in enumerate(blocks)]
    try:
        logits(loaded.model, calibration_ids(loaded))
    finally:
        for h in handles:
            h.remove()
    return scores


def kept_blocks(loaded: LoadedModel, n: int, order: str) -> list[int]:
    """Indices of the blocks to keep, ascending."""
    if order == "first":
        return list(range(n))
    scores = block_importance(loaded)
    ranked = sorted(range(len(scores)), key=lambda i: -scores[i])
    return sorted(ranked[:n])


@contextlib.contextmanager
def _apply(loaded: LoadedModel, value: tuple[int, str]) -> Iterator[dict[str, Any]]:
    import torch.nn as nn

    n, order = value
    model = loaded.model
    arch = discover(model)
    assert arch.blocks_path is not None  # `check` refused models without decoder blocks
    holder = _blocks_holder(model, arch.blocks_path)
    attr = arch.blocks_path.split(".")[-1]
    full = getattr(holder, attr)
    keep = kept_blocks(loaded, n, order)
    ids = calibration_ids(loaded)
    full_logits = logits(model, ids)
    cfg = model.config.get_text_config()
    saved_n, saved_types = cfg.num_hidden_layers, getattr(cfg, "layer_types", None)
    saved_idx = [
        (m, m.layer_idx) for i in keep for m in full[i].modules() if hasattr(m, "layer_idx")
    ]
    try:
        setattr(holder, attr, nn.ModuleList([full[i] for i in keep]))
        cfg.num_hidden_layers = n
        if saved_types is not None:
            cfg.layer_types = [saved_types[i] for i in keep]
        for new, i in enumerate(keep):
            for m in full[i].modules():
                if hasattr(m, "layer_idx"):
                    m.layer_idx = new
        yield {"kept": keep, "order": order, "full_logits": full_logits, "ids": ids, "all": full}
    finally:
        setattr(holder, attr, full)
        cfg.num_hidden_layers = saved_n
        if saved_types is not None:
            cfg.layer_types = saved_types
        for m, idx in saved_idx:
            m.layer_idx = idx


def _verify(
    loaded: LoadedModel, value: tuple[int, str], result: Any, applied: Any = None
) -> KnobCheckDoc:
    if not applied:
        raise KnobNotApplied("active_layers verification needs the applied state")
    ran: list[int] = []
    handles = [
        b.register_forward_pre_hook(lambda _m, _a, i=i: ran.append(i))
        for i, b in enumerate(applied["all"])
    ]
    try:
        reduced = logits(loaded.model, applied["ids"])
    finally:
        for h in handles:
            h.remove()
    if ran != applied["kept"]:
        raise KnobNotApplied(f"active_layers={value[0]} but blocks {ran} ran")
    evidence: KnobCheckDoc = {"blocks_run": ran, "order": applied["order"]}
    return with_quality(evidence, quality(applied["full_logits"], reduced))


ACTIVE_LAYERS = Knob(
    "active_layers",
    "run only N decoder blocks: N (first N) or N:importance",
    "model",
    parse,
    check=_check,
    apply=_apply,
    verify=_verify,
)
