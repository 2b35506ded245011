"""vision_tokens (vision-language models): image tokens per image, driven through image size.

A CLIP-style tower cuts an image of S x S pixels into (S / patch)^2 patches, and LLaVA feeds one
token per patch to the language model (the CLS token dropped by the "default" feature
strategy). So N tokens need a square N = k^2 and images of k x patch pixels. The knob sets the
workload's image size and token count for the run, and makes the tower's patch embedding
interpolate its position table to the new grid (`interpolate_pos_encoding`, which CLIP
supports), restoring both on exit. Verified by one forward: the projector must emit N tokens per
image and the language model must accept N image tokens.
The profiler (standard/deep) reports the vision encoder and projector apart from the LLM's
prefill and decode; run/components.py puts them in the prefill's breakdown.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator
from typing import Any

from infermeter.errors import UserError
from infermeter.knobs.base import Knob, KnobNotApplied, parse_int
from infermeter.knobs.evidence import KnobCheckDoc
from infermeter.models.architecture import discover
from infermeter.models.info import VisionInfo
from infermeter.models.loader import LoadedModel


def _vision(loaded: LoadedModel) -> VisionInfo:
    """The model's vision tower facts (`_check` has refused models without one)."""
    assert loaded.info.vision is not None
    return loaded.info.vision


def _grid(value: int, loaded: LoadedModel) -> int:
    side = math.isqrt(value)
    return side * _vision(loaded).patch_size


def _check(value: int, loaded: LoadedModel) -> None:
    v = loaded.info.vision
    if v is None:
        raise UserError(
            f"vision_tokens applies to vision-language models; {loaded.info.spec} has no "
            "vision tower",
            "use a VLM (e.g. tiny-llava) or drop this knob",
        )
    if v.family != "clip_vision_model" or v.pixel_dims != 4:
        raise UserError(
            f"vision_tokens resizes CLIP towers with interpolated position embeddings (LLaVA); "
            f"{loaded.info.spec} has a {v.family} tower with its own token count "
            f"({v.tokens_per_image} per image, set by its pooling or pixel shuffle)",
            "sweep vision_tokens on a LLaVA-style model (e.g. tiny-llava)",
        )
    if math.isqrt(value) ** 2 != value:
        lo, hi = math.isqrt(value) ** 2, (math.isqrt(value) + 1) ** 2
        raise UserError(
            f"vision_tokens={value} is not a square number of patches",
            f"use {max(lo, 1)} or {hi} (k x k patches of {v.patch_size} px)",
        )
    if discover(loaded.model).vision_tower is None:
        raise UserError("the model's vision tower was not found", "report this model")


def _embeddings(loaded: LoadedModel) -> Any:
    tower = discover(loaded.model).vision_tower
    for name, module in tower.named_modules():
        if name.endswith("embeddings") and hasattr(module, "interpolate_pos_encoding"):
            return module
    raise UserError(
        "the vision tower cannot interpolate its position embeddings",
        "vision_tokens works with CLIP/SigLIP-style towers",
    )


@contextlib.contextmanager
def _apply(loaded: LoadedModel, value: int) -> Iterator[dict[str, Any]]:
    emb = _embeddings(loaded)
    original = emb.forward
    saved_info = loaded.info
    size = _grid(value, loaded)

    def forward(pixel_values: Any, interpolate_pos_encoding: bool = False) -> Any:
        return original(pixel_values, interpolate_pos_encoding=True)

    emb.forward = forward
    vision = dataclasses.replace(_vision(loaded), image_size=size, tokens_per_image=value)
    loaded.info = dataclasses.replace(saved_info, vision=vision)
    try:
        yield {"image_size": size, "tokens_per_image": value}
    finally:
        emb.__dict__.pop("forward", None)
        loaded.info = saved_info


def _verify(loaded: LoadedModel, value: int, result: Any, applied: Any = None) -> KnobCheckDoc:
    import torch

    model = loaded.model
    arch = discover(model)
    param = next(model.parameters())
    token_id = getattr(model.config, "image_token_id", None)
    if token_id is None:
        token_id = model.config.image_token_index
    size = applied["image_size"]
    seen: list[int] = []
    handle = arch.projector.register_forward_hook(
        lambda _m, _a, out: seen.append(int(out.shape[-2]))
    )
    ids = torch.tensor([[1] + [token_id] * value + [5, 6, 7]], device=param.device)
    pixels = torch.randn(1, 3, size, size, device=param.device, dtype=param.dtype)
    try:
        with torch.inference_mode():
            model(input_ids=ids, pixel_values=pixels, use_cache=False)
    except ValueError as exc:
        raise KnobNotApplied(f"vision_tokens={value}: {exc}") from None
    finally:
        handle.remove()
    if seen != [value]:
        raise KnobNotApplied(f"vision_tokens={value} but the projector emitted {seen}")
    return {"vision_tokens": value, "image_size": size}


VISION_TOKENS = Knob(
    "vision_tokens",
    "image tokens per image (a square k*k; VLMs), through image size",
    "model",
    parse_int("vision_tokens"),
    check=_check,
    apply=_apply,
    verify=_verify,
)
