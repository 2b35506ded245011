"""Parameter counts of the presets, so `infermeter models` answers without building a config.

Building every preset's config and counting its parameters took 8.8 s per call. The counts are
computed once (`computed_params`) and kept here; a test checks each against its built config,
so a preset change that forgets this table fails the suite. The shape presets' counts match
the published sizes (Llama-3.2-1B 1.24 B, Llama-3.1-8B 8.03 B, Mixtral-8x7B 46.7 B, ...).
"""

from __future__ import annotations

#: preset name -> parameters (tied embeddings counted once)
PRESET_PARAMS: dict[str, int] = {
    "tiny-llama": 3_950_848,
    "tiny-mistral": 3_950_848,
    "tiny-qwen3": 3_951_360,
    "tiny-gpt2": 3_945_984,
    "tiny-mixtral": 10_299_648,
    "tiny-qwen2-moe": 7_132_416,
    "tiny-qwen3-moe": 8_145_664,
    "tiny-llava": 4_348_160,
    "tiny-gemma3-vlm": 3_892_480,
    "tiny-smolvlm": 4_380_032,
    "llama-3.2-1b": 1_235_814_400,
    "llama-3.1-8b": 8_030_261_248,
    "llama-3.1-70b": 70_553_706_496,
    "qwen3-0.6b": 596_049_920,
    "qwen3-4b": 4_022_468_096,
    "mistral-7b": 7_241_732_096,
    "mixtral-8x7b": 46_702_792_704,
    "qwen3-30b-a3b": 30_532_122_624,
    "llava-1.5-7b": 7_063_427_072,
}


def computed_params() -> dict[str, int]:
    """Every preset's parameter count from its built config (slow: seconds)."""
    from infermeter.models.loader import estimate_params
    from infermeter.models.presets import PRESETS, build_config
    from infermeter.models.tokenizer import builtin_tokenizer

    tok = builtin_tokenizer()
    return {p.name: estimate_params(build_config(p, tok)) for p in PRESETS.values()}
