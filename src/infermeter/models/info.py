"""What a loaded model is, in the numbers profiling needs: `ModelInfo`.

Read from the model's config (text part for vision-language models) and from its parameters,
through the names transformers uses across families (`hidden_size` or `n_embd`, ...).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, TypedDict, cast

from infermeter.measure.device import dtype_name

if TYPE_CHECKING:
    from infermeter.models.shape import ShapeDoc


@dataclass(frozen=True)
class VisionInfo:
    """The vision tower of a vision-language model."""

    family: str
    layers: int
    hidden: int
    heads: int
    image_size: int
    patch_size: int
    tokens_per_image: int
    params: int
    projector_params: int
    #: see workloads.prompts.VisionInput.pixel_dims
    pixel_dims: int = 4


class VisionInfoDoc(TypedDict):
    """`VisionInfo` as stored in `model_info["vision"]`: its fields by name."""

    family: str
    layers: int
    hidden: int
    heads: int
    image_size: int
    patch_size: int
    tokens_per_image: int
    params: int
    projector_params: int
    pixel_dims: int


class QualityDoc(TypedDict):
    """A quality proxy: top-1 agreement and mean KL (nats) of logits against a reference."""

    top1_agreement: float
    kl_nats: float


class QuantizationDoc(TypedDict, total=False):
    """Weight quantization by the dtype knob (models/quantize.py).

    What was converted and how, and the quality proxy against the same weights unquantized
    (added once measured).
    """

    scheme: str
    method: str
    converted_linear: int
    unconverted_params: int
    #: parameters by the dtype their weights are stored in
    stored_weight_dtypes: dict[str, int]
    #: top-1 agreement and mean KL (nats) of the logits against the unquantized weights
    quality: QualityDoc
    quality_reference: str


class ModelInfoDoc(TypedDict, total=False):
    """The stored record of a run's model (`RunResult.model_info`): `ModelInfo`'s fields.

    A profile run adds `shape` (its cost shape and census: models/shape.py); a load run against
    an endpoint has only `spec`, `name`, `endpoint` and `tokenizer`; a Ray sweep's placeholder only
    `spec`. Every key is optional to a reader.
    """

    spec: str
    source: str
    family: str
    architecture: str
    params: int
    weights_mib: float
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int | None
    vocab: int
    max_positions: int | None
    tie_word_embeddings: bool
    sliding_window: int | None
    experts: int | None
    top_k: int | None
    shared_experts: bool
    vision: VisionInfoDoc | None
    dtype: str
    device: str
    tokenizer: str
    quantization: QuantizationDoc | None
    attn_implementation: str | None
    shape: ShapeDoc
    endpoint: str
    #: the model as an endpoint or a peer's file named it
    name: str


@dataclass(frozen=True)
class ModelInfo:
    """Architecture facts of a loaded model.

    Attributes:
        spec: what the user asked for (preset name, hub id, folder).
        source: "preset", "pypi-gguf", "hub" or "local".
        family: transformers `model_type` of the text model.
        architecture: model class name.
        params: all parameters (tied weights counted once).
        weights_mib: bytes of all parameters and buffers, in MiB.
        experts, top_k, shared_experts: MoE routing (None for dense models).
        max_positions: longest sequence the model accepts (prompt + new tokens).
    """

    spec: str
    source: str
    family: str
    architecture: str
    params: int
    weights_mib: float
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int | None
    vocab: int
    max_positions: int | None
    tie_word_embeddings: bool
    sliding_window: int | None
    experts: int | None
    top_k: int | None
    shared_experts: bool
    vision: VisionInfo | None
    dtype: str
    device: str
    tokenizer: str
    #: weight quantization by the dtype knob (int8, fp8): scheme, method, converted layers,
    #: stored weight dtypes, quality proxy against the unquantized weights; None otherwise
    quantization: QuantizationDoc | None = None
    #: the attention kernel the model runs (transformers' `_attn_implementation`: eager, sdpa,
    #: flash_attention_2, ...): what a finding may advise depends on it
    attn_implementation: str | None = None

    @property
    def is_moe(self) -> bool:
        """True for mixture-of-experts models."""
        return bool(self.experts)

    def to_dict(self) -> ModelInfoDoc:
        """Plain dict (vision nested) for JSON and the store."""
        return cast(ModelInfoDoc, asdict(self))

    @classmethod
    def from_dict(cls, d: ModelInfoDoc) -> ModelInfo:
        """Inverse of `to_dict` (keys a run adds beside the fields, such as `shape`, dropped)."""
        known = {f.name for f in fields(cls)}
        kept: dict[str, Any] = {k: v for k, v in d.items() if k in known}  # read, then typed
        if kept.get("vision"):
            kept["vision"] = VisionInfo(**kept["vision"])
        return cls(**kept)


def config_value(cfg: Any, *names: str, default: Any = None) -> Any:
    """The first of `names` the config sets (families name the same field differently).

    A field that varies per layer (Gemma 4's head_dim) raises on a global read: it counts as
    not set here, and the census reads it from each layer's module instead.
    """
    for n in names:
        try:
            v = getattr(cfg, n, None)
        except Exception:  # transformers raises its own errors for such fields
            v = None
        if v is not None:
            return v
    return default


def count_params(module: Any) -> int:
    """Parameters of a module, shared (tied) tensors counted once."""
    seen: set[int] = set()
    total = 0
    for p in module.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


def _bytes(model: Any) -> int:
    seen: set[int] = set()
    total = 0
    for t in list(model.parameters()) + list(model.buffers()):
        if id(t) not in seen:
            seen.add(id(t))
            total += t.numel() * t.element_size()
    return total


def _vision_info(model: Any, config: Any) -> VisionInfo | None:
    vcfg = getattr(config, "vision_config", None)
    if vcfg is None:
        return None
    tower, projector = vision_modules(model)
    image = int(config_value(vcfg, "image_size", default=0) or 0)
    patch = int(config_value(vcfg, "patch_size", default=1) or 1)
    tokens = (image // patch) ** 2 if image else 0
    if getattr(config, "vision_feature_select_strategy", "default") == "full":
        tokens += 1
    if config_value(config, "mm_tokens_per_image"):  # Gemma 3 pools the patches to this many
        tokens = int(config_value(config, "mm_tokens_per_image"))
    scale = config_value(config, "scale_factor")
    if scale:  # Idefics3 / SmolVLM: pixel shuffle merges scale x scale patches into one token
        tokens //= int(scale) ** 2
    return VisionInfo(
        family=getattr(vcfg, "model_type", "vision"),
        layers=int(config_value(vcfg, "num_hidden_layers", default=0)),
        hidden=int(config_value(vcfg, "hidden_size", default=0)),
        heads=int(config_value(vcfg, "num_attention_heads", default=0)),
        image_size=image,
        patch_size=patch,
        tokens_per_image=tokens,
        params=count_params(tower) if tower is not None else 0,
        projector_params=count_params(projector) if projector is not None else 0,
        pixel_dims=5 if scale else 4,
    )


#: Where vision-language models keep their vision tower and projector, across layouts
#: (LLaVA and Gemma 3; Idefics3 and SmolVLM; Qwen2-VL; Fuyu, whose "tower" is one linear
#: layer projecting raw patches into the text model, run only when images are given).
VISION_TOWER_NAMES = (
    "vision_tower",
    "vision_model",
    "visual",
    "vision_embed_tokens",
    "image_encoder",  # GIT, under its base model `git`
)
PROJECTOR_NAMES = ("multi_modal_projector", "connector", "merger", "visual_projection")


#: Encoders of other modalities, which a text forward does not run: an audio tower (MOSS
#: Transcribe), or one module holding the image and audio embedders (Phi-4-multimodal).
OTHER_ENCODER_NAMES = ("audio_tower", "audio_model", "embed_tokens_extend")


def _holders(model: Any) -> list[Any]:
    return [
        h
        for h in (getattr(model, "model", None), getattr(model, "base_model", None), model)
        if h is not None
    ]


def _first(model: Any, names: tuple[str, ...]) -> Any:
    for holder in _holders(model):
        for n in names:
            module = getattr(holder, n, None)
            if module is not None:
                return module
    return None


def vision_modules(model: Any) -> tuple[Any, Any]:
    """(vision tower, projector) of a vision-language model, or None where absent."""
    return _first(model, VISION_TOWER_NAMES), _first(model, PROJECTOR_NAMES)


def other_encoders(model: Any) -> list[Any]:
    """Encoders of other modalities than text and vision (audio), each found once."""
    found: list[Any] = []
    for name in OTHER_ENCODER_NAMES:
        module = _first(model, (name,))
        if module is not None and all(module is not f for f in found):
            found.append(module)
    return found


def model_info(model: Any, *, spec: str, source: str, tokenizer: str) -> ModelInfo:
    """Read a `ModelInfo` from a loaded transformers model."""
    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    hidden = int(config_value(text, "hidden_size", "n_embd", "d_model"))
    heads = int(config_value(text, "num_attention_heads", "n_head"))
    kv_heads = int(config_value(text, "num_key_value_heads", default=heads) or heads)
    head_dim = int(config_value(text, "head_dim", default=hidden // heads) or hidden // heads)
    experts = config_value(text, "num_local_experts", "num_experts", "n_routed_experts")
    top_k = config_value(text, "num_experts_per_tok", "moe_topk") if experts else None
    shared = bool(
        config_value(text, "shared_expert_intermediate_size", "n_shared_experts", default=0)
    )
    param = next(model.parameters())
    return ModelInfo(
        spec=spec,
        source=source,
        family=getattr(text, "model_type", type(model).__name__),
        architecture=type(model).__name__,
        params=count_params(model),
        weights_mib=_bytes(model) / 2**20,
        layers=int(config_value(text, "num_hidden_layers", "n_layer")),
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate=config_value(text, "intermediate_size", "n_inner", default=4 * hidden),
        vocab=int(config_value(text, "vocab_size")),
        max_positions=config_value(text, "max_position_embeddings", "n_positions"),
        tie_word_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
        sliding_window=config_value(text, "sliding_window"),
        experts=int(experts) if experts else None,
        top_k=int(top_k) if top_k else None,
        attn_implementation=getattr(text, "_attn_implementation", None)
        or getattr(config, "_attn_implementation", None),
        shared_experts=shared,
        vision=_vision_info(model, config),
        dtype=dtype_name(param.dtype),
        device=str(param.device),
        tokenizer=tokenizer,
    )
