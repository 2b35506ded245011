"""The cost model against torch's FlopCounterMode, family by family, and where torch undercounts."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from infermeter import load_model
from infermeter.analysis.costs import (
    forward_costs,
    generation_costs,
    shape_of,
    total,
    useful_attention_flop_count,
)
from infermeter.models.forward_args import cache_of, with_cache

FAMILIES = [
    "tiny-llama",
    "tiny-mistral",
    "tiny-qwen3",
    "tiny-gpt2",
    "tiny-mixtral",
    "tiny-qwen2-moe",
    "tiny-qwen3-moe",
    "tiny-llava",
]


def _counted(model, **kw):
    fc = FlopCounterMode(display=False)
    with torch.inference_mode(), fc:
        out = model(**kw)
    return fc.get_total_flops(), out


def _inputs(model, s, batch, tokens):
    ids = torch.randint(10, 200, (batch, tokens))
    kw, images = {}, 0
    if s.vision is not None:
        n = s.vision.patches
        ids = torch.cat([torch.full((batch, n), model.config.image_token_id), ids], 1)
        kw["pixel_values"] = torch.randn(batch, 3, s.vision.image_size, s.vision.image_size)
        images = batch
    return ids, kw, images


@pytest.mark.parametrize("name", FAMILIES)
def test_flops_match_the_counter_within_1_percent_prefill_and_decode(name):
    lm = load_model(name, device="cpu", attn_implementation="eager")
    model = lm.model
    if lm.info.is_moe:
        model.set_experts_implementation("eager")
    s = shape_of(model)
    ids, kw, images = _inputs(model, s, batch=2, tokens=24)
    counted, out = _counted(model, input_ids=ids, use_cache=True, **kw)
    mine = total(forward_costs(s, tokens=ids.shape[1], batch=2, images=images)).flop_count
    assert mine == pytest.approx(counted, rel=0.01)
    counted_step, _ = _counted(
        model, input_ids=ids[:, -1:], **with_cache(model, cache_of(out), use_cache=True)
    )
    step = total(forward_costs(s, tokens=1, context=ids.shape[1], batch=2)).flop_count
    assert step == pytest.approx(counted_step, rel=0.01)


def test_top_k_and_active_layers_enter_the_formulas():
    lm = load_model("tiny-qwen3-moe", device="cpu", attn_implementation="eager")
    s = shape_of(lm.model)
    k1 = total(forward_costs(s, tokens=16, top_k=1)).flop_count
    k8 = total(forward_costs(s, tokens=16, top_k=8)).flop_count
    expert = 3 * 2 * 16 * s.hidden * s.moe_intermediate * s.layers
    assert k8 - k1 == pytest.approx(7 * expert)
    half = total(forward_costs(s, tokens=16, active_layers=2)).flop_count
    assert half < total(forward_costs(s, tokens=16)).flop_count


def test_the_counter_undercounts_sdpa_and_grouped_experts():
    lm = load_model("tiny-qwen3-moe", device="cpu", attn_implementation="sdpa")
    model = lm.model
    s = shape_of(model)
    ids = torch.randint(10, 200, (1, 32))
    model.set_experts_implementation("grouped_mm")
    undercount, _ = _counted(model, input_ids=ids, use_cache=False)
    model.set_experts_implementation("eager")
    model.set_attn_implementation("eager")
    full, _ = _counted(model, input_ids=ids, use_cache=False)
    mine = total(forward_costs(s, tokens=32)).flop_count
    assert mine == pytest.approx(full, rel=0.01)
    assert undercount < 0.8 * full  # attention scores and experts are missing from the counter


def test_generation_costs_and_bytes_make_sense():
    lm = load_model("tiny-llama", device="cpu")
    s = shape_of(lm.model)
    g = generation_costs(s, prompt_tokens=64, new_tokens=9, dtype_bytes=4)
    assert len(g["decode_steps"]) == 8
    # decode reads every weight once per step (the embedding table only one row per token):
    # intensity below 1 FLOP/byte at batch 1 in fp32
    step = g["decode_steps"][0]
    read = (lm.info.params - s.vocab * s.hidden) * 4
    assert step.weight_bytes == pytest.approx(read, rel=0.01)
    assert step.intensity < 1.0
    assert g["prefill_total"].intensity > 10 * step.intensity
    assert g["decode_steps"][-1].kv_read_bytes > g["decode_steps"][0].kv_read_bytes
    # the causal mask leaves about half of the prefill's score FLOPs useful
    useful = useful_attention_flop_count(s, 1, 64, 0)
    executed = 2 * 2 * s.heads * s.head_dim * 64 * 64
    assert useful / executed == pytest.approx((64 + 1) / (2 * 64))
