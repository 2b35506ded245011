"""The shapes a cost model needs, read from a model's config (text part, plus a vision tower).

Kept with the models (not the analysis) so that every run can record its shape when it is
made, and a stored run can be analysed later without loading the model again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, TypedDict, cast

from infermeter.models.census import Census, CensusDoc, census_of
from infermeter.models.info import config_value

if TYPE_CHECKING:
    from infermeter.models.flopcount import FlopCheckDoc


class VisionShapeDoc(TypedDict):
    """`VisionShape` as stored: its fields by name."""

    layers: int
    hidden: int
    heads: int
    intermediate: int
    image_size: int
    patch_size: int
    channels: int
    projector_hidden: int
    text_hidden: int
    family: str


class _ShapeDoc(TypedDict):
    family: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    gated_mlp: bool
    vocab: int


class ShapeDoc(_ShapeDoc, total=False):
    """`Shape.to_dict()`: each field by name (a test holds the two together).

    A shape stored by an older release lacks the later ones (`from_dict` fills their defaults).
    """

    experts: int
    top_k: int
    moe_intermediate: int
    shared_intermediate: int
    sliding_window: int | None
    vision: VisionShapeDoc | None
    census: CensusDoc | None
    flop_check: FlopCheckDoc | None
    last_logits_only: bool


@dataclass(frozen=True)
class VisionShape:
    """A CLIP-style vision tower and LLaVA's projector."""

    layers: int
    hidden: int
    heads: int
    intermediate: int
    image_size: int
    patch_size: int
    channels: int
    projector_hidden: int
    text_hidden: int
    #: model_type of the vision config; the formulas are CLIP's and LLaVA's projector's
    family: str = "clip_vision_model"

    @property
    def patches(self) -> int:
        """Image tokens (patches) per image."""
        return (self.image_size // self.patch_size) ** 2


@dataclass(frozen=True)
class Shape:
    """What the cost formulas need from a model's config (text part, plus vision)."""

    family: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    gated_mlp: bool
    vocab: int
    experts: int = 0
    top_k: int = 0
    moe_intermediate: int = 0
    shared_intermediate: int = 0
    sliding_window: int | None = None
    vision: VisionShape | None = None
    #: What the model contains, counted module by module (models/census.py); None in runs
    #: stored before it existed, which the per-family formulas still cost.
    census: Census | None = None
    #: torch's FlopCounterMode count of an 8-token forward ("counted_8") and the census of the
    #: model when it was counted ("census"): the check of the cost formulas on this architecture
    flop_check: FlopCheckDoc | None = None
    #: whether the model's forward takes `logits_to_keep` (transformers 4.45 on: generate's
    #: prefill computes the last position's logits only); without it every prompt position's
    #: logits are computed (analysis/predict.py `logits_bytes`). Read from the model's forward.
    last_logits_only: bool = True

    def to_dict(self) -> ShapeDoc:
        """Plain dict for JSON and the store."""
        return cast("ShapeDoc", asdict(self))

    @classmethod
    def from_dict(cls, d: ShapeDoc) -> Shape:
        """Inverse of to_dict; keys this version does not know are ignored."""
        known = {f.name for f in fields(cls)}
        kept: dict[str, Any] = {k: v for k, v in d.items() if k in known}  # read, then typed
        vision, census = d.get("vision"), d.get("census")
        kept["vision"] = VisionShape(**vision) if vision else None
        kept["census"] = Census.from_dict(census) if census else None
        return cls(**kept)


def meta_model(config: Any) -> Any:
    """The model a config describes, built on the meta device: structure, no weights."""
    import torch
    import transformers

    auto = (
        transformers.AutoModelForImageTextToText
        if getattr(config, "vision_config", None) is not None
        else transformers.AutoModelForCausalLM
    )
    with torch.device("meta"):
        return auto.from_config(config)


def _widest(value: Any) -> int:
    """A size the config gives per layer (Gemma 3n's `intermediate_size` list): the widest.

    Only the family fallbacks read it; the census costs each layer's own width.
    """
    if isinstance(value, list | tuple):
        return max((int(v) for v in value), default=0)
    return int(value)


def shape_of(model_or_config: Any, flop_check: FlopCheckDoc | None = None) -> Shape:
    """The cost shape of a transformers model, or of a config (built on the meta device)."""
    is_model = hasattr(model_or_config, "config")
    model = model_or_config if is_model else meta_model(model_or_config)
    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    family = getattr(text, "model_type", "")
    hidden = int(config_value(text, "hidden_size", "n_embd", "d_model", default=0) or 0)
    heads = int(config_value(text, "num_attention_heads", "n_head", default=1) or 1)
    experts = int(config_value(text, "num_local_experts", "num_experts", default=0) or 0)
    vision = None
    vcfg = getattr(config, "vision_config", None)
    if vcfg is not None:
        v_hidden = int(config_value(vcfg, "hidden_size", default=0) or 0)
        vision = VisionShape(
            layers=int(config_value(vcfg, "num_hidden_layers", "depth", default=0) or 0),
            hidden=v_hidden,
            heads=int(config_value(vcfg, "num_attention_heads", "num_heads", default=1) or 1),
            # SAM-style towers (GOT-OCR2) name the MLP width `mlp_dim`
            intermediate=_widest(
                config_value(vcfg, "intermediate_size", "mlp_dim", default=4 * v_hidden)
                or 4 * v_hidden
            ),
            image_size=int(config_value(vcfg, "image_size", default=0) or 0),
            patch_size=int(config_value(vcfg, "patch_size", default=1) or 1),
            channels=int(getattr(vcfg, "num_channels", 3)),
            projector_hidden=hidden,
            text_hidden=hidden,
            family=str(getattr(vcfg, "model_type", "")),
        )
    census = census_of(model)
    return Shape(
        family=family,
        layers=int(config_value(text, "num_hidden_layers", "n_layer", default=0) or 0)
        or len(census.layers),
        hidden=hidden,
        heads=heads,
        kv_heads=int(config_value(text, "num_key_value_heads", default=heads) or heads),
        head_dim=int(config_value(text, "head_dim", default=hidden // heads) or hidden // heads),
        intermediate=_widest(
            config_value(text, "intermediate_size", "n_inner", default=4 * hidden) or 4 * hidden
        ),
        gated_mlp=family not in ("gpt2",),
        vocab=int(config_value(text, "vocab_size", default=0) or 0),
        experts=experts,
        top_k=int(config_value(text, "num_experts_per_tok", default=0) or 0) if experts else 0,
        moe_intermediate=_widest(
            config_value(text, "moe_intermediate_size", "intermediate_size", default=0) or 0
        )
        if experts
        else 0,
        shared_intermediate=int(
            config_value(text, "shared_expert_intermediate_size", default=0) or 0
        ),
        sliding_window=config_value(text, "sliding_window"),
        vision=vision,
        census=census,
        flop_check=flop_check,
        last_logits_only=takes_logits_to_keep(model),
    )


def takes_logits_to_keep(model: Any) -> bool:
    """Whether the model's forward can compute only the last positions' logits.

    transformers 4.45 added `num_logits_to_keep` (later `logits_to_keep`) to Llama, Mistral,
    Qwen2 and their kin, and generate asks for one position; a model without it (remote code,
    an older release) computes the logits of every prompt position in its prefill.
    """
    import inspect

    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return True
    return "logits_to_keep" in params or "num_logits_to_keep" in params
