"""Built-in models: real transformers architectures built from their config classes.

Timing, memory and FLOPs depend on shapes, not on weight values, so a preset with the shape of a
published model profiles like it without any download. Tiny presets (a few million parameters)
keep the demo and the tests fast on a CPU. Shape presets copy the fields of the published
`config.json` named in `source`; fields that do not change cost (rope scaling details, token ids)
are left at the class defaults, and the vocabulary of the offline tokenizer is smaller than the
model's, which changes no shape.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Preset:
    """One built-in model.

    Attributes:
        name: what users type after --model.
        family: transformers `model_type` of the (text) config.
        kind: "tiny" (tests, demo) or "shape" (published shapes, random weights).
        config: keyword arguments for the config class.
        vision: keyword arguments of the vision config for vision-language presets.
        source: where the shape comes from (for shape presets).
    """

    name: str
    family: str
    kind: str
    description: str
    config: Mapping[str, Any]
    vision: Mapping[str, Any] | None = None
    vlm: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""
    text_family: str = ""
    #: model_type of the vision config (CLIP for LLaVA; SigLIP for Gemma 3; Idefics3's own)
    vision_family: str = "clip_vision_model"

    @property
    def text_model_type(self) -> str:
        """model_type of the language model (the family itself for text-only presets)."""
        return self.text_family or self.family

    @property
    def is_vlm(self) -> bool:
        """True for vision-language presets."""
        return self.vision is not None


_TINY_ATTN = dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=2)
_TINY = dict(**_TINY_ATTN, intermediate_size=688, num_hidden_layers=4, max_position_embeddings=4096)
#: a 2-layer vision tower over 64 x 64 images in 8 x 8 patches (64 patches)
_TINY_VISION = dict(
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    image_size=64,
    patch_size=8,
)
_TINY_MOE = dict(**_TINY_ATTN, num_hidden_layers=4, max_position_embeddings=4096)

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset("tiny-llama", "llama", "tiny", "Llama, 4 layers, GQA 4/2 heads", _TINY),
        Preset(
            "tiny-mistral",
            "mistral",
            "tiny",
            "Mistral, 4 layers, sliding window 512",
            dict(_TINY, sliding_window=512),
        ),
        Preset("tiny-qwen3", "qwen3", "tiny", "Qwen3, 4 layers, QK-norm", dict(_TINY, head_dim=64)),
        Preset(
            "tiny-gpt2",
            "gpt2",
            "tiny",
            "GPT-2, 4 layers, learned positions",
            dict(n_embd=256, n_layer=4, n_head=4, n_positions=1024),
        ),
        Preset(
            "tiny-mixtral",
            "mixtral",
            "tiny",
            "Mixtral MoE, 4 layers, 8 experts top-2",
            dict(_TINY_MOE, intermediate_size=344, num_local_experts=8, num_experts_per_tok=2),
        ),
        Preset(
            "tiny-qwen2-moe",
            "qwen2_moe",
            "tiny",
            "Qwen2-MoE, 8 experts top-2 + shared expert",
            dict(
                _TINY_MOE,
                intermediate_size=688,
                moe_intermediate_size=172,
                shared_expert_intermediate_size=344,
                num_experts=8,
                num_experts_per_tok=2,
            ),
        ),
        Preset(
            "tiny-qwen3-moe",
            "qwen3_moe",
            "tiny",
            "Qwen3-MoE, 16 experts top-4",
            dict(
                _TINY_MOE,
                intermediate_size=688,
                moe_intermediate_size=128,
                head_dim=64,
                num_experts=16,
                num_experts_per_tok=4,
            ),
        ),
        Preset(
            "tiny-llava",
            "llava",
            "tiny",
            "LLaVA: CLIP 2 layers (64 image tokens) + Llama 4 layers",
            dict(_TINY),
            vision=dict(_TINY_VISION, projection_dim=128),
            vlm=dict(vision_feature_layer=-2, vision_feature_select_strategy="default"),
            text_family="llama",
        ),
        Preset(
            "tiny-gemma3-vlm",
            "gemma3",
            "tiny",
            "Gemma 3 VLM: SigLIP 2 layers, 64 patches pooled to 16 image tokens + Gemma 3 text",
            dict(_TINY, head_dim=64, sliding_window=512),
            vision=_TINY_VISION,
            vlm=dict(mm_tokens_per_image=16),
            text_family="gemma3_text",
            vision_family="siglip_vision_model",
        ),
        Preset(
            "tiny-smolvlm",
            "idefics3",
            "tiny",
            "Idefics3 / SmolVLM: SigLIP-style 2 layers, pixel shuffle to 16 image tokens + Llama",
            dict(_TINY),
            vision=_TINY_VISION,
            vlm=dict(scale_factor=2),
            text_family="llama",
            vision_family="idefics3_vision",
        ),
        Preset(
            "llama-3.2-1b",
            "llama",
            "shape",
            "Llama 3.2 1B shape (16 layers, tied embeddings)",
            dict(
                vocab_size=128256,
                hidden_size=2048,
                intermediate_size=8192,
                num_hidden_layers=16,
                num_attention_heads=32,
                num_key_value_heads=8,
                head_dim=64,
                max_position_embeddings=131072,
                rope_theta=500000.0,
                tie_word_embeddings=True,
            ),
            source="meta-llama/Llama-3.2-1B config.json",
        ),
        Preset(
            "llama-3.1-8b",
            "llama",
            "shape",
            "Llama 3.1 8B shape (32 layers, GQA 32/8)",
            dict(
                vocab_size=128256,
                hidden_size=4096,
                intermediate_size=14336,
                num_hidden_layers=32,
                num_attention_heads=32,
                num_key_value_heads=8,
                max_position_embeddings=131072,
                rope_theta=500000.0,
                tie_word_embeddings=False,
            ),
            source="meta-llama/Llama-3.1-8B config.json",
        ),
        Preset(
            "llama-3.1-70b",
            "llama",
            "shape",
            "Llama 3.1 70B shape (80 layers, GQA 64/8)",
            dict(
                vocab_size=128256,
                hidden_size=8192,
                intermediate_size=28672,
                num_hidden_layers=80,
                num_attention_heads=64,
                num_key_value_heads=8,
                max_position_embeddings=131072,
                rope_theta=500000.0,
                tie_word_embeddings=False,
            ),
            source="meta-llama/Llama-3.1-70B config.json",
        ),
        Preset(
            "qwen3-0.6b",
            "qwen3",
            "shape",
            "Qwen3 0.6B shape (28 layers, head_dim 128)",
            dict(
                vocab_size=151936,
                hidden_size=1024,
                intermediate_size=3072,
                num_hidden_layers=28,
                num_attention_heads=16,
                num_key_value_heads=8,
                head_dim=128,
                max_position_embeddings=40960,
                rope_theta=1000000.0,
                tie_word_embeddings=True,
            ),
            source="Qwen/Qwen3-0.6B config.json",
        ),
        Preset(
            "qwen3-4b",
            "qwen3",
            "shape",
            "Qwen3 4B shape (36 layers, head_dim 128)",
            dict(
                vocab_size=151936,
                hidden_size=2560,
                intermediate_size=9728,
                num_hidden_layers=36,
                num_attention_heads=32,
                num_key_value_heads=8,
                head_dim=128,
                max_position_embeddings=40960,
                rope_theta=1000000.0,
                tie_word_embeddings=True,
            ),
            source="Qwen/Qwen3-4B config.json",
        ),
        Preset(
            "mistral-7b",
            "mistral",
            "shape",
            "Mistral 7B v0.1 shape (sliding window 4096)",
            dict(
                vocab_size=32000,
                hidden_size=4096,
                intermediate_size=14336,
                num_hidden_layers=32,
                num_attention_heads=32,
                num_key_value_heads=8,
                max_position_embeddings=32768,
                sliding_window=4096,
                rope_theta=10000.0,
            ),
            source="mistralai/Mistral-7B-v0.1 config.json",
        ),
        Preset(
            "mixtral-8x7b",
            "mixtral",
            "shape",
            "Mixtral 8x7B shape (8 experts, top-2)",
            dict(
                vocab_size=32000,
                hidden_size=4096,
                intermediate_size=14336,
                num_hidden_layers=32,
                num_attention_heads=32,
                num_key_value_heads=8,
                max_position_embeddings=32768,
                num_local_experts=8,
                num_experts_per_tok=2,
                rope_theta=1000000.0,
            ),
            source="mistralai/Mixtral-8x7B-v0.1 config.json",
        ),
        Preset(
            "qwen3-30b-a3b",
            "qwen3_moe",
            "shape",
            "Qwen3 30B-A3B shape (128 experts, top-8)",
            dict(
                vocab_size=151936,
                hidden_size=2048,
                intermediate_size=6144,
                moe_intermediate_size=768,
                num_hidden_layers=48,
                num_attention_heads=32,
                num_key_value_heads=4,
                head_dim=128,
                num_experts=128,
                num_experts_per_tok=8,
                max_position_embeddings=40960,
                rope_theta=1000000.0,
                norm_topk_prob=True,
            ),
            source="Qwen/Qwen3-30B-A3B config.json",
        ),
        Preset(
            "llava-1.5-7b",
            "llava",
            "shape",
            "LLaVA 1.5 7B shape (CLIP ViT-L/14-336 + Llama 2 7B)",
            dict(
                vocab_size=32064,
                hidden_size=4096,
                intermediate_size=11008,
                num_hidden_layers=32,
                num_attention_heads=32,
                num_key_value_heads=32,
                max_position_embeddings=4096,
            ),
            vision=dict(
                hidden_size=1024,
                intermediate_size=4096,
                num_hidden_layers=24,
                num_attention_heads=16,
                image_size=336,
                patch_size=14,
                projection_dim=768,
            ),
            vlm=dict(
                vision_feature_layer=-2,
                vision_feature_select_strategy="default",
                projector_hidden_act="gelu",
            ),
            source="llava-hf/llava-1.5-7b-hf config.json",
            text_family="llama",
        ),
    ]
}

#: The model `make demo` profiles.
DEFAULT_PRESET = "tiny-llama"


def get_preset(name: str) -> Preset | None:
    """The preset called `name` (case-insensitive), or None."""
    return PRESETS.get(name.strip().lower())


def build_config(preset: Preset, tokenizer: Any) -> Any:
    """The transformers config of a preset, sized to the tokenizer for tiny presets.

    Tiny presets take the tokenizer's vocabulary (rounded up to 64); shape presets keep their
    published vocabulary, which is larger than any id the offline tokenizer produces.
    """
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    kw = dict(preset.config)
    vocab = -(-len(tokenizer) // 64) * 64
    if preset.kind == "tiny":
        kw.setdefault("vocab_size", vocab)
    ids = dict(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    text_config = CONFIG_MAPPING[preset.text_model_type](**kw, **ids)
    if preset.vision is None:
        return text_config
    vision_config = CONFIG_MAPPING[preset.vision_family](**preset.vision)
    vlm_class: Any = CONFIG_MAPPING[preset.family]
    params = inspect.signature(vlm_class.__init__).parameters
    image_token_id = tokenizer.convert_tokens_to_ids("<image>")
    # the image token's keyword differs by layout: image_token_index (LLaVA, Gemma 3) or
    # image_token_id (Idefics3)
    token_key = "image_token_index" if "image_token_index" in params else "image_token_id"
    extra: dict[str, Any] = {token_key: image_token_id}
    if "image_seq_length" in params:
        side = preset.vision["image_size"] // preset.vision["patch_size"]
        extra["image_seq_length"] = side**2
    if "boi_token_index" in params:  # Gemma 3 frames images; any ids in the vocabulary do
        extra.update(boi_token_index=tokenizer.bos_token_id, eoi_token_index=tokenizer.eos_token_id)
    return vlm_class(
        vision_config=vision_config, text_config=text_config, **extra, **preset.vlm, **ids
    )
