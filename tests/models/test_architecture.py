import pytest

from infermeter import PRESETS, load_model
from infermeter.models.architecture import discover

TINY = [n for n, p in PRESETS.items() if p.kind == "tiny"]


@pytest.mark.parametrize("name", TINY)
def test_discovery_finds_every_part(name):
    model = load_model(name, device="cpu").model
    arch = discover(model)
    assert arch.missing == []
    assert len(arch.blocks) == 4
    for b in arch.blocks:
        assert b.attention is not None and b.mlp is not None and b.attention_out is not None
        assert len(b.norms) == (4 if "gemma3" in name else 2) and b.mlp_act
    moe = PRESETS[name].family in ("mixtral", "qwen2_moe", "qwen3_moe")
    assert all(b.is_moe == moe for b in arch.blocks)
    assert arch.embeddings is model.get_input_embeddings()
    assert arch.lm_head is model.get_output_embeddings()
    assert arch.final_norm is not None
    if PRESETS[name].is_vlm:
        assert arch.vision_tower is not None and arch.projector is not None
        assert len(arch.vision_blocks) == 2
        text = "text_model" if name == "tiny-smolvlm" else "language_model"
        assert arch.blocks_path == f"model.{text}.layers"


def test_generic_model_without_known_names_reports_what_is_missing():
    import torch.nn as nn

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 4)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stack = nn.ModuleList(Layer() for _ in range(3))

    arch = discover(Net())
    assert arch.blocks_path == "stack" and len(arch.blocks) == 3
    assert "attention of block 0" in arch.missing and "embeddings" in arch.missing


def test_profiler_works_on_a_plain_torch_module():
    import torch
    import torch.nn as nn

    from infermeter.instrument import Profiler, ProfilingConfig

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 4)

        def forward(self, x):
            return self.b(self.a(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stack = nn.ModuleList(Layer() for _ in range(3))

        def forward(self, x):
            for layer in self.stack:
                x = layer(x)
            return x

    net = Net()
    with Profiler(net, ProfilingConfig.deep()) as prof, torch.no_grad():
        net(torch.randn(2, 4))
    lp = prof.result()
    blocks = lp.layers()
    assert sorted(blocks[blocks["kind"] == "block"]["layer"]) == [0, 1, 2]
    assert any("not a transformers model" in n for n in lp.notes)
    assert len(lp.activations) == 3


def test_other_modalities_encoders_are_not_taken_for_the_decoder_blocks():
    """Phi-4-multimodal's audio conformer (24 layers in its default config, more than the
    tiny text model's) sits in `embed_tokens_extend`: the longest list of modules was taken
    for the decoder blocks before encoders of other modalities were set aside."""
    import torch
    from transformers import AutoModelForCausalLM

    from infermeter.experiments.coverage import tiny_config
    from infermeter.models.architecture import discover

    config, _ = tiny_config("phi4_multimodal")
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    arch = discover(model)
    assert arch.blocks_path == "model.layers"
    assert len(arch.blocks) == config.num_hidden_layers
    assert [type(m).__name__ for m in arch.other_encoders] == ["Phi4MultimodalFeatureEmbedding"]
