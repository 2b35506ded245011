import pytest
import torch

from infermeter import PRESETS, load_model
from infermeter.models.loader import estimate_params
from infermeter.models.presets import build_config
from infermeter.models.tokenizer import builtin_tokenizer

TINY = [n for n, p in PRESETS.items() if p.kind == "tiny"]

# name -> (layers, hidden, heads, kv_heads, experts, top_k)
EXPECTED = {
    "tiny-llama": (4, 256, 4, 2, None, None),
    "tiny-mistral": (4, 256, 4, 2, None, None),
    "tiny-qwen3": (4, 256, 4, 2, None, None),
    "tiny-gpt2": (4, 256, 4, 4, None, None),
    "tiny-mixtral": (4, 256, 4, 2, 8, 2),
    "tiny-qwen2-moe": (4, 256, 4, 2, 8, 2),
    "tiny-qwen3-moe": (4, 256, 4, 2, 16, 4),
    "tiny-llava": (4, 256, 4, 2, None, None),
    "tiny-gemma3-vlm": (4, 256, 4, 2, None, None),
    "tiny-smolvlm": (4, 256, 4, 2, None, None),
}
# name -> (vision layers, image size, patch size, image tokens, pixel_values dims)
VISION = {
    "tiny-llava": (2, 64, 8, 64, 4),  # every patch is a token
    "tiny-gemma3-vlm": (2, 64, 8, 16, 4),  # 64 patches pooled to 16 tokens
    "tiny-smolvlm": (2, 64, 8, 16, 5),  # pixel shuffle merges 2 x 2 patches
}


def test_every_tiny_preset_is_covered():
    assert set(TINY) == set(EXPECTED)


@pytest.mark.parametrize("name", TINY)
def test_tiny_preset_builds_generates_and_reports_its_shape(name):
    lm = load_model(name, device="cpu")
    info = lm.info
    layers, hidden, heads, kv, experts, top_k = EXPECTED[name]
    assert (info.layers, info.hidden, info.heads, info.kv_heads) == (layers, hidden, heads, kv)
    assert (info.experts, info.top_k) == (experts, top_k)
    assert info.source == "preset" and info.dtype == "float32" and info.device == "cpu"
    assert 1e6 < info.params < 2e7  # "a few million"
    assert info.params == sum(p.numel() for p in lm.model.parameters())
    ids = lm.tokenizer("The river had been rising", return_tensors="pt")
    kw = dict(ids)
    if name in VISION:
        v = info.vision
        got = (v.layers, v.image_size, v.patch_size, v.tokens_per_image, v.pixel_dims)
        assert got == VISION[name]
        assert v.params > 0 and v.projector_params > 0
        image_id = lm.model.config.image_token_id
        img = torch.full((1, v.tokens_per_image), image_id)
        pixels = torch.randn(1, 3, 64, 64)
        kw = {
            "input_ids": torch.cat([img, ids["input_ids"]], 1),
            "attention_mask": torch.ones(
                1, v.tokens_per_image + ids["input_ids"].shape[1], dtype=torch.long
            ),
            "pixel_values": pixels if v.pixel_dims == 4 else pixels.unsqueeze(1),
        }
    else:
        assert info.vision is None
    out = lm.model.generate(**kw, max_new_tokens=4, min_new_tokens=4, do_sample=False)
    assert out.shape[1] == kw["input_ids"].shape[1] + 4


def test_presets_are_seeded():
    a = load_model("tiny-llama", device="cpu", seed=3).model
    b = load_model("tiny-llama", device="cpu", seed=3).model
    c = load_model("tiny-llama", device="cpu", seed=4).model
    wa, wb, wc = (m.model.layers[0].mlp.up_proj.weight for m in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)


# Parameter counts of the published checkpoints these shapes copy.
PUBLISHED = {
    "llama-3.2-1b": 1.236e9,
    "llama-3.1-8b": 8.030e9,
    "llama-3.1-70b": 70.554e9,
    "qwen3-0.6b": 0.596e9,
    "qwen3-4b": 4.022e9,
    "mistral-7b": 7.242e9,
    "mixtral-8x7b": 46.70e9,
    "qwen3-30b-a3b": 30.53e9,
    "llava-1.5-7b": 7.063e9,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_shape_presets_have_published_parameter_counts(name):
    n = estimate_params(build_config(PRESETS[name], builtin_tokenizer()))
    assert n == pytest.approx(PUBLISHED[name], rel=0.002)


def test_shape_presets_cite_a_source():
    for p in PRESETS.values():
        assert (p.kind == "tiny") or p.source.endswith("config.json"), p.name


def test_the_parameter_table_matches_every_built_preset():
    """`infermeter models` reads counts from a table; each must be its config's real count."""
    from infermeter.models.preset_params import PRESET_PARAMS, computed_params

    assert computed_params() == PRESET_PARAMS
