"""State-space mixers costed by formula (models/mixers.py), held against torch and the cache.

Prompt FLOPs are checked against torch's FlopCounterMode on the tiny builds of the coverage
matrix at lengths that cross Mamba-2's chunk boundaries (the formula's chunk terms show only
there), and the state a decode step carries against the tensors transformers' cache holds.
"""

import pytest
import torch

from infermeter.analysis.costs import forward_costs, shape_of
from infermeter.experiments.coverage import tiny_config
from infermeter.models.architecture import discover
from infermeter.models.census import census_of, prefill_flop_count
from infermeter.models.flopcount import count_module_flops, eager_kernels, flop_check
from infermeter.models.mixers import MixerShape, state_elements


def _tiny(model_type: str):
    from transformers import AutoModelForCausalLM

    config, _ = tiny_config(model_type)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config).eval()


@pytest.mark.parametrize(
    ("model_type", "kind", "lengths"),
    [
        ("mamba", "mamba", (8, 37)),
        ("mamba2", "mamba2", (8, 256, 300, 520)),
        ("qwen3_next", "delta", (8, 64, 100, 130)),
        ("minimax", "lightning", (8, 256, 300)),
    ],
)
def test_prompt_flops_match_torchs_count_block_by_block(model_type, kind, lengths):
    model = _tiny(model_type)
    census = census_of(model)
    assert census.uncosted == []  # nothing left to fit
    names = {id(m): n for n, m in model.named_modules()}
    blocks = [names[id(b.block)] for b in discover(model).blocks]
    layer = next(lay for lay in census.layers if lay.mixers)
    assert [m["kind"] for m in layer.mixers] == [kind]
    with eager_kernels(model):
        for n in lengths:
            counted = count_module_flops(model, n)
            for name, lay in zip(blocks, census.layers, strict=True):
                assert counted[name] == prefill_flop_count(lay, n, census.top_k), (name, n)


@pytest.mark.parametrize(
    "model_type",
    [
        "mamba",
        "mamba2",
        "zamba",
        "bamba",
        "qwen3_5_text",
        "olmo_hybrid",
        "lfm2_moe",
        "recurrent_gemma",
        "minimax",
        "zamba2",
    ],
)
def test_no_fit_is_needed_and_nothing_is_labelled_fitted(model_type):
    model = _tiny(model_type)
    check = flop_check(model)
    assert check["fits"] == {} and check["approximate"] == []
    assert any(lay["mixers"] for lay in check["census"]["layers"])


@pytest.mark.parametrize("model_type", ["mamba", "mamba2", "qwen3_next"])
def test_the_decode_state_is_what_the_cache_holds_and_does_not_grow(model_type):
    model = _tiny(model_type)
    layer = next(i for i, lay in enumerate(census_of(model).layers) if lay.mixers)
    shape = MixerShape(**census_of(model).layers[layer].mixers[0])
    out = model(input_ids=torch.arange(3, 13).unsqueeze(0), use_cache=True)
    cache = out.cache
    held = cache.get_conv_state(layer).numel() + cache.get_recurrent_state(layer).numel()
    assert state_elements(shape) == held
    s = shape_of(model, flop_check=flop_check(model))
    scans = [
        [c for c in forward_costs(s, tokens=1, context=t, dtype_bytes=2) if c.name.endswith("scan")]
        for t in (16, 4096)
    ]
    short, long = scans
    assert len(short) == sum(1 for lay in census_of(model).layers if lay.mixers)
    assert (
        [c.kv_read_bytes for c in short]
        == [c.kv_read_bytes for c in long]
        == [2 * held] * len(short)
    )
    assert [c.flop_count for c in short] == [c.flop_count for c in long]


def test_differential_attention_counts_both_attention_calls():
    """transformers 5.24 runs differential attention as two calls over the same Q and K."""
    model = _tiny("diffllama")
    check = flop_check(model)
    assert check["fits"] == {} and check["approximate"] == []
    layer = census_of(model).layers[0]
    config = model.config
    head_dim = config.hidden_size // config.num_attention_heads
    assert layer.score_dims == 2 * config.num_attention_heads * 2 * head_dim


def test_predicts_memory_holds_the_fixed_state_beside_the_attention_cache():
    from infermeter.analysis.kvcache import kv_memory, state_bytes

    mamba = shape_of(_tiny("mamba"))
    state = state_bytes(mamba, 2)
    census = census_of(_tiny("mamba"))
    per_layer = state_elements(MixerShape(**census.layers[0].mixers[0]))
    assert state == 2 * per_layer * len(census.layers)
    short, long = (kv_memory(mamba, 2, 1, n, 16).device_bytes for n in (16, 8192))
    assert short == long == state  # no attention: nothing grows with the context
    jamba = shape_of(_tiny("jamba"))
    short, long = (kv_memory(jamba, 2, 1, n, 16).device_bytes for n in (16, 8192))
    assert long > short > state_bytes(jamba, 2) > 0  # its attention layers grow, the state not


def test_lightning_attention_decodes_over_a_fixed_state_not_a_growing_cache():
    """MiniMax-01's lightning layers: a decode step is 4 H d^2 FLOPs on a d x d state per
    head whatever the context, checked against torch's count of a real cached step; its
    softmax layers keep their growing cache."""
    from torch.utils.flop_counter import FlopCounterMode

    from infermeter.models.mixers import step_flop_count

    model = _tiny("minimax")
    census = census_of(model)
    lightning = [i for i, lay in enumerate(census.layers) if lay.mixers]
    softmax = [i for i, lay in enumerate(census.layers) if lay.score_dims]
    assert lightning and softmax and not set(lightning) & set(softmax)
    shape = MixerShape(**census.layers[lightning[0]].mixers[0])
    assert shape.kind == "lightning" and shape.chunk == model.config.block_size
    names = {id(m): n for n, m in model.named_modules()}
    block = names[id(discover(model).blocks[lightning[0]].block)]
    with torch.inference_mode(), eager_kernels(model):
        cache = model(input_ids=torch.arange(3, 13).unsqueeze(0), use_cache=True).cache
        assert cache.get_linear_cache(lightning[0]).numel() == state_elements(shape)
        counter = FlopCounterMode(display=False)
        with counter:
            model(input_ids=torch.tensor([[7]]), cache=cache, use_cache=True)
    counted = sum(
        sum(ops.values())
        for key, ops in counter.get_flop_counts().items()
        if key == f"{type(model).__name__}.{block}"
    )
    lay = census.layers[lightning[0]]
    linear = lay.attention_macs + lay.mlp_macs + lay.other_macs + census.top_k * lay.expert_macs
    assert counted == 2 * linear + step_flop_count(shape)
    s = shape_of(model, flop_check=flop_check(model))
    scans = [
        [c for c in forward_costs(s, tokens=1, context=t, dtype_bytes=2) if c.name.endswith("scan")]
        for t in (16, 4096)
    ]
    assert len(scans[0]) == len(lightning)
    assert [c.flop_count for c in scans[0]] == [c.flop_count for c in scans[1]]
