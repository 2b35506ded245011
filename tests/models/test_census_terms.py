"""Census terms beyond linear layers and plain attention, each held against torch's counter.

Each is found from what the model holds or is given, not from its name: experts given no
routing run every expert (Llama 4), a sparse-attention indexer scores every key (DeepSeek's
DSA), a block's cross-attention does not run in a causal LM's forward (TrOCR), and a model
whose own name says "Linear" still has softmax attention (Kimi Linear's MLA layers), and
bare mixing matrices that multiply the hidden states are matmuls (HY-V4's hyper-connections),
and a router's per-expert table is not one even when the expert count equals the hidden size
(Ernie 4.5's score-correction bias, [1, experts]), and experts stacked in children of the
MoE block or of the attention are experts (JetMoE's MLP and mixture of attention heads), and
Gemma 3n's AltUp mixes its copies of the hidden states by a per-token matrix.
"""

import pytest
import torch

from infermeter.experiments.coverage import tiny_config
from infermeter.models.census import census_of
from infermeter.models.flopcount import flop_check


def _tiny(model_type: str, **sizes):
    from transformers import AutoModelForCausalLM

    config, _ = tiny_config(model_type)
    for name, value in sizes.items():
        setattr(config, name, value)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config).eval()


@pytest.mark.parametrize(
    "model_type",
    [
        "llama4_text",
        "deepseek_v32",
        "glm_moe_dsa",
        "trocr",
        "kimi_linear",
        "hy_v4",
        "dbrx",
        "xlm",
        "ernie4_5_moe",
        "minimax",
        "jetmoe",
        "gemma3n_text",
    ],
)
def test_nothing_is_fitted_once_the_census_knows_the_term(model_type):
    check = flop_check(_tiny(model_type))
    assert check["fits"] == {} and check["approximate"] == []


def test_experts_given_no_routing_run_every_expert():
    census = census_of(_tiny("llama4_text"))
    moe = [lay for lay in census.layers if lay.experts]
    assert moe and all(lay.dense_experts for lay in moe)
    mixtral = census_of(_tiny("mixtral"))
    assert not any(lay.dense_experts for lay in mixtral.layers)


def test_an_indexer_adds_its_heads_to_the_score_dims():
    model = _tiny("deepseek_v32")
    indexer = next(m for m in model.modules() if hasattr(m, "index_topk"))
    config = model.config
    attention = config.num_attention_heads * (
        config.qk_nope_head_dim + config.qk_rope_head_dim + config.v_head_dim
    )
    layer = census_of(model).layers[0]
    assert layer.score_dims == attention + indexer.n_heads * (indexer.head_dim + 1)


def test_bare_mixing_matrices_count_and_position_tables_do_not():
    from infermeter.models.census import _bare_matrix_macs

    mixing = torch.nn.Module()
    mixing.fn = torch.nn.Parameter(torch.zeros(8, 4 * 64))
    assert _bare_matrix_macs(mixing, 64) == 8 * 4 * 64
    table = torch.nn.Module()
    table.positions = torch.nn.Parameter(torch.zeros(2048, 64))
    assert _bare_matrix_macs(table, 64) == 0
    assert _bare_matrix_macs(torch.nn.Embedding(32, 64), 64) == 0  # narrower than wide


def test_attention_inside_a_wrapper_of_norms_is_found_and_experts_stacked_flat_are_costed():
    """DBRX: `norm_attn_norm` holds norm, attention, norm; its experts stack every expert's rows
    in 2-D matrices [experts x width, hidden]."""
    from infermeter.models.architecture import discover

    model = _tiny("dbrx")
    parts = discover(model).blocks[0]
    assert parts.attention is model.transformer.blocks[0].norm_attn_norm.attn
    assert [n for n, _ in parts.norms] == ["norm_attn_norm.norm_1", "norm_attn_norm.norm_2"]
    layer = census_of(model).layers[0]
    experts = model.transformer.blocks[0].ffn.experts
    per_expert = sum(p.numel() for p in experts.parameters()) // experts.num_experts
    assert (layer.experts, layer.expert_macs) == (experts.num_experts, per_expert)


def test_a_per_expert_table_is_no_matmul_even_as_wide_as_the_hidden_states():
    model = _tiny("ernie4_5_moe", moe_num_experts=64)  # the tiny config's hidden size
    config = model.config
    assert config.moe_num_experts == config.hidden_size  # the coincidence that misled it
    moe = [lay for lay in census_of(model).layers if lay.experts]
    assert moe and all(lay.other_macs == 0 for lay in moe)


def test_experts_stacked_in_children_of_the_moe_block_and_of_the_attention_are_found():
    from infermeter.models.architecture import discover

    model = _tiny("jetmoe")
    config = model.config
    parts = discover(model).blocks[0]
    assert parts.router is model.model.layers[0].mlp.router
    assert {n for n, _ in parts.experts.named_children()} == {"input_linear", "output_linear"}
    layer = census_of(model).layers[0]
    assert layer.experts == config.num_local_experts
    mlp = model.model.layers[0].mlp
    one_expert = sum(w.numel() for w in (mlp.input_linear.weight, mlp.output_linear.weight))
    assert layer.expert_macs == one_expert // config.num_local_experts
    moa = model.model.layers[0].self_attention.experts
    routed = sum(w.numel() for w in (moa.input_linear.weight, moa.output_linear.weight))
    kv = model.model.layers[0].self_attention.kv_proj.weight.numel()
    router = moa.router.layer.weight.numel()
    k = config.num_experts_per_tok
    assert layer.attention_macs == kv + router + k * routed // config.num_local_experts
    assert len(layer.linear_shapes) == 3 + 2 * k  # kv, two routers, k experts' two matrices


def test_a_shared_block_runs_one_adapter_per_layer_of_its_list():
    """Zamba2's shared transformer block, tied across its layers, holds an adapter per layer
    and runs that layer's alone: one adapter's multiply-adds per layer, not the list's."""
    model = _tiny("zamba2")
    hybrid = [
        i for i, layer in enumerate(model.model.layers) if hasattr(layer, "shared_transformer")
    ]
    assert len(hybrid) >= 2
    adapters = model.model.layers[hybrid[0]].shared_transformer.feed_forward
    adapters = adapters.gate_up_proj_adapter_list
    assert len(adapters) == len(hybrid)
    one = sum(p.numel() for p in adapters[0].parameters())
    census = census_of(model)
    shared = model.model.layers[hybrid[0]].shared_transformer
    everything = sum(
        m.in_features * m.out_features for m in shared.modules() if isinstance(m, torch.nn.Linear)
    )
    for i in hybrid:
        assert census.layers[i].attention_macs == everything - (len(adapters) - 1) * one
