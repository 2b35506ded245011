"""Architecture coverage: every decoder-only causal LM in the installed transformers, built tiny.

For each architecture in transformers' causal-LM auto mapping: build it from its config class at
a tiny size (2-4 layers, hidden 64, a few experts, random seeded weights), then record whether it
builds, generates, whether standard mode finds every decoder block and its attention and MLP or
MoE, whether deep mode runs, and the analytic FLOPs of a 128-token forward against torch's
`FlopCounterMode` with eager attention and experts. Encoder-decoder and vision-language
architectures are listed as skipped, with the reason. `benchmarks/architectures.py` runs the
whole matrix and writes docs/architectures.md; the tests run a fast subset.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

#: Tiny sizes, applied to whichever of these names a config has.
TINY = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 128,
    "vocab_size": 512,
    "max_position_embeddings": 1024,
    "num_local_experts": 4,
    "num_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "num_experts_per_token": 2,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "n_embd": 64,
    "n_layer": 2,
    "n_head": 4,
    "n_positions": 512,
    "n_inner": 128,
    "num_layers": 2,
    "num_heads": 4,
    # multi-head latent attention
    "q_lora_rank": 32,
    "kv_lora_rank": 32,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
    "qk_head_dim": 24,
    # grouped routing (DeepSeek): one group of the tiny experts
    "n_group": 1,
    "num_expert_group": 1,
    "topk_group": 1,
    # partial rotary (GPT-J, CodeGen)
    "rotary_dim": 8,
    # encoder-decoder-style widths some causal LMs keep (TrOCR), and Gemma 3n's per-layer table
    "decoder_ffn_dim": 128,
    "vocab_size_per_layer_input": 512,
    # token ids must fit the tiny vocabulary
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
#: Per-architecture settings on top of TINY, where a layer pattern needs more layers to hold
#: an attention layer, or a size must agree with another.
OVERRIDES: dict[str, dict[str, Any]] = {
    "jamba": {
        "num_hidden_layers": 4,
        "attn_layer_period": 2,
        "attn_layer_offset": 1,
        "expert_layer_period": 2,
        "expert_layer_offset": 1,
    },
    "bamba": {"num_hidden_layers": 4, "attn_layer_indices": [1, 3]},
    # transformers 5.24 sizes the head by `unpadded_vocab_size` (200,058 by default): generated
    # ids beyond the tiny embedding's 512 rows broke the next step's lookup
    "inkling2_text": {"unpadded_vocab_size": 512},
    "granitemoehybrid": {
        "num_hidden_layers": 4,
        "layer_types": ["linear_attention", "full_attention"] * 2,
    },
    "xmod": {"default_language": "en_XX"},
    # the recurrent step expects query-key and value heads of one size
    "xlstm": {"qk_dim_factor": 1.0},
    "nemotron_h": {"num_hidden_layers": 4, "hybrid_override_pattern": "M*M-"},
    "zamba": {"num_hidden_layers": 4, "attn_layer_period": 2, "attn_layer_offset": 1},
    # sizes each validator or constructor needs that the defaults leave unset or too large
    "dots1": {"n_shared_experts": 1},
    "lfm2_moe": {"num_hidden_layers": 4, "layer_types": ["conv", "full_attention"] * 2},
    "qwen4_exp_text": {
        "indexer_budget": 16,
        "indexer_compress_ratio": 4,
        "indexer_kv_heads": 1,
        "indexer_head_dim": 16,
        "indexer_n_heads": 2,
    },
    "cohere_compass_text": {
        "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    },
    "dbrx": {  # its own names for the sizes, and sub-configs for attention and experts
        "n_layers": 2,
        "d_model": 64,
        "n_heads": 4,
        "attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0},
        "ffn_config": {"ffn_hidden_size": 128, "moe_num_experts": 4, "moe_top_k": 2},
    },
    "gemma3n_text": {"num_kv_shared_layers": 2},
    "mamba2": {"num_heads": 8, "head_dim": 16, "n_groups": 1},
    "gpt_neo": {"attention_types": [[["global", "local"], 1]]},
    "zaya": {"num_experts_per_tok": 1},
    "reformer": {"is_decoder": True, "axial_pos_embds_dim": [32, 32]},
    # its vision and audio adapters must map the tiny towers onto the tiny text width
    "dots3_note": {
        "vision_config": {"adapter_in_dim": 64, "adapter_out_dim": 64},
        "audio_config": {"adapter_input_size": 64, "adapter_out_dim": 64},
        "text_config": {"num_key_value_heads": 4, "n_shared_experts": 1},  # MLA, DeepSeek MoE
    },
    # a drafter for Gemma 4 whose layers all read the main model's shared cache
    "gemma4_assistant": {
        "text_config": {
            "hidden_size_per_layer_input": 0,
            "vocab_size_per_layer_input": 0,
            "enable_moe_block": False,
            "use_double_wide_mlp": False,
            "num_hidden_layers": 2,
            "num_kv_shared_layers": 2,
            "layer_types": ["sliding_attention", "full_attention"],
        }
    },
    # bytes in, four sub-models; the hash embeddings' 500,002 rows and the full-size sub-models
    # ran past the matrix's 90 s (and 15 GB)
    "blt": {
        "vocab_size": 260,
        "encoder_hash_byte_group_vocab": 512,
        **{
            name: {
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 4,
                "intermediate_size": 128,
                **(
                    {"hidden_size_global": 64}
                    if name in ("encoder_config", "decoder_config")
                    else {}
                ),
            }
            for name in ("patcher_config", "encoder_config", "decoder_config", "global_config")
        },
    },
}
#: An architecture that a fast test run covers, one of each kind the product must handle.
FAST_SUBSET = (
    "llama",  # dense, gated MLP, GQA
    "gpt2",  # Conv1D projections, plain MLP
    "gpt_neox",  # parallel attention + MLP, partial rotary
    "phi",  # parallel block, dense MLP
    "falcon",  # multi-query, parallel attention
    "mistral",  # sliding window
    "gemma2",  # alternating sliding / full attention
    "qwen2_moe",  # MoE with a shared expert
    "mixtral",  # MoE
    "deepseek_v2",  # multi-head latent attention, MoE
    "bloom",  # ALiBi, fused QKV
    "jamba",  # hybrid attention / state-space, MoE
    "starcoder2",  # plain MLP with biases
    "olmoe",  # MoE
)


#: Llama-2-7B's published config: calflops gives 1.700e12 FLOPs for a 128-token forward.
LLAMA2_7B = {
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "vocab_size": 32000,
}


@dataclass
class Coverage:
    """What works for one architecture (None: not tried because an earlier step failed)."""

    model_type: str
    model_class: str
    skipped: str | None = None
    builds: bool = False
    generates: bool | None = None
    blocks_found: bool | None = None
    deep_works: bool | None = None
    analytic_flop_count: float | None = None
    counted_flop_count: float | None = None
    approximate: list[str] | None = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def flop_ratio(self) -> float | None:
        """Analytic / counted FLOPs of a 128-token forward."""
        if not self.analytic_flop_count or not self.counted_flop_count:
            return None
        return self.analytic_flop_count / self.counted_flop_count

    def to_dict(self) -> dict[str, Any]:
        """Plain dict, with the ratio."""
        return {**asdict(self), "flop_ratio": self.flop_ratio}


def causal_lm_types() -> dict[str, str]:
    """Model type -> causal-LM class name, as the installed transformers maps them."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return dict(sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items()))


def tiny_config(model_type: str) -> tuple[Any, str | None]:
    """(a tiny config, None) or (None, why this architecture is skipped)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    cls = CONFIG_MAPPING[model_type]
    try:
        defaults = cls()
    except Exception:  # defaults its own validator refuses (Gemma 4's assistant)
        defaults = cls(**OVERRIDES.get(model_type, {}))
    if getattr(defaults, "is_encoder_decoder", False):
        return None, "encoder-decoder"
    have = set(defaults.to_dict())
    wanted = {**TINY, **OVERRIDES.get(model_type, {})}
    kwargs = {k: v for k, v in wanted.items() if k in have or k in OVERRIDES.get(model_type, {})}
    # a config that keeps a size under its own name (XLM's emb_dim, TrOCR's d_model) maps the
    # common name to it: without this XLM's "tiny" model held 607M parameters
    for common, own in getattr(cls, "attribute_map", {}).items():
        if common in wanted and own in have and own not in kwargs:
            kwargs[own] = wanted[common]
    if not set(PATTERN_FIELDS) & set(OVERRIDES.get(model_type, {})):  # a pattern given wins
        kwargs.update(_short_patterns(defaults, kwargs))
    for name in SUB_MODELS:  # a composite config's sub-models, tiny too
        sub = getattr(defaults, name, None)
        if sub is not None and hasattr(sub, "to_dict"):
            kwargs[name] = {**_tiny_sub(sub), **kwargs.get(name, {})}
    if "kv_lora_rank" in have:  # latent attention: MHA, and RoPE over the rope part only
        if "num_key_value_heads" in kwargs:
            kwargs["num_key_value_heads"] = kwargs["num_attention_heads"]
        if "head_dim" in kwargs and model_type not in ("deepseek_v2",):
            kwargs["head_dim"] = kwargs["qk_rope_head_dim"]
    try:
        return cls(**kwargs), None
    except AttributeError:  # a pattern this config derives itself (a read-only property)
        return cls(**{k: v for k, v in kwargs.items() if k not in PATTERN_FIELDS}), None


#: Per-layer pattern fields, kept in step when the tiny model has fewer layers.
PATTERN_FIELDS = ("layer_types", "layers_block_type", "mlp_layer_types")


def _short_patterns(defaults: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Per-layer patterns cut to a few layers that still hold every kind of layer.

    A hybrid's default pattern (e.g. three linear-attention layers, then one full attention)
    cut to its first two layers would have no attention at all; instead each pattern keeps its
    kinds in turn, and the layer count grows to fit the pattern with the most kinds.
    """
    layers = getattr(defaults, "num_hidden_layers", None)
    patterns = {}
    for name in PATTERN_FIELDS:
        if isinstance(getattr(type(defaults), name, None), property):
            continue  # derived from other fields (Jamba): set through those
        value = getattr(defaults, name, None)
        if isinstance(value, list) and layers and len(value) == layers:
            patterns[name] = list(dict.fromkeys(value))  # its kinds, in order of appearance
    if not patterns:
        return {}
    n = max(kwargs.get("num_hidden_layers", 2), *(2 * len(k) for k in patterns.values()))
    out: dict[str, Any] = {"num_hidden_layers": n}
    for name, kinds in patterns.items():
        out[name] = [kinds[i % len(kinds)] for i in range(n)]
    return out


def _blocks_found(model: Any, config: Any) -> bool:
    from infermeter.models.architecture import discover

    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    arch = discover(model)
    # LongCat-Flash counts two sub-layers per decoder layer in `num_hidden_layers` and the
    # decoder layers in `num_layers`: either count of the config may be the blocks'
    counts = {
        getattr(text, name, None) for name in ("num_hidden_layers", "n_layer", "num_layers")
    } - {None}
    if not arch.blocks or (counts and len(arch.blocks) not in counts):
        return False
    return all(
        b.mlp is not None or b.attention is not None or b.mixer is not None for b in arch.blocks
    )


def _deep_works(model: Any, ids: Any) -> bool:
    from infermeter.instrument import Profiler, ProfilingConfig

    with Profiler(model, ProfilingConfig.deep()) as prof:
        model.generate(ids, max_new_tokens=2, min_new_tokens=2, do_sample=False)
    return not prof.result().layers().empty


#: the sub-configs of a composite model (a VLM, Emu3, Fuyu, Gemma 4) made tiny with it
SUB_MODELS = ("text_config", "vision_config", "audio_config")


def _tiny_sub(sub: Any) -> dict[str, Any]:
    """A composite config's sub-model (text, vision or audio) made tiny too.

    Left at its defaults it is the full-size model (Emu3's 8B language model: the build ran
    past the matrix's 90 s), while only the outer config was made tiny. A vision or audio
    tower is built small, and the matrix's forwards are text only: the towers do not run.
    """
    wanted = {**TINY, **OVERRIDES.get(sub.model_type, {})}
    have = set(sub.to_dict())
    kwargs = {k: v for k, v in wanted.items() if k in have}
    kwargs.update(_short_patterns(sub, kwargs))
    return {**kwargs, "model_type": sub.model_type}


def _first_line(exc: BaseException) -> str:
    """The exception's type and first line (an ImportError may say nothing)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {(lines or [''])[0][:160]}".rstrip(": ")


def check_architecture(model_type: str, tokens: int = 128) -> Coverage:
    """Build, generate, find blocks, run deep mode and compare FLOPs for one architecture."""
    import torch

    from infermeter.analysis.costs import approximate, forward_costs, total
    from infermeter.models.flopcount import count_forward_flops, flop_check
    from infermeter.models.shape import shape_of

    cov = Coverage(model_type, causal_lm_types()[model_type])
    t0 = time.perf_counter()
    step = "config"
    try:
        config, cov.skipped = tiny_config(model_type)
        if config is None:
            return cov
        step = "build"
        from transformers import AutoModelForCausalLM

        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config).eval()
        cov.builds = True
        cov.blocks_found = _blocks_found(model, config)  # discovery needs no forward
        ids = torch.arange(3, 3 + 12).unsqueeze(0) % 500 + 3
        try:  # a generate that fails in transformers' own code leaves the rest to check
            out = model.generate(ids, max_new_tokens=3, min_new_tokens=3, do_sample=False)
            cov.generates = out.shape[1] == ids.shape[1] + 3
        except Exception as exc:
            cov.generates = False
            cov.error = f"generate: {_first_line(exc)}"
        step = "flops"
        shape = shape_of(model, flop_check=flop_check(model))
        cov.approximate = approximate(shape)
        cov.analytic_flop_count = total(forward_costs(shape, tokens=tokens)).flop_count
        cov.counted_flop_count = count_forward_flops(model, tokens=tokens)
        step = "deep"
        cov.deep_works = _deep_works(model, ids)
    except Exception as exc:  # the matrix records every failure and goes on
        first = f"{cov.error}; " if cov.error else ""
        cov.error = f"{first}{step}: {_first_line(exc)}"
    finally:
        cov.seconds = time.perf_counter() - t0
    return cov
