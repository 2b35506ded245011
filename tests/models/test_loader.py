import json

import pytest
import torch

from infermeter import UserError, load_model
from infermeter.models import loader
from tests.helpers import assert_one_line_error, cli_here


def test_local_folder_checkpoint_round_trip(tmp_path, tiny_llama):
    folder = tmp_path / "ckpt"
    tiny_llama.model.save_pretrained(folder)
    tiny_llama.tokenizer.save_pretrained(folder)
    lm = load_model(str(folder), device="cpu")
    assert lm.info.source == "local" and lm.info.layers == 4
    assert lm.info.params == tiny_llama.info.params
    ids = tiny_llama.tokenizer("Good measurement starts", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert torch.allclose(lm.model(ids).logits, tiny_llama.model(ids).logits, atol=1e-5)


def test_local_folder_in_bfloat16_with_torch_dtype_name(tmp_path, tiny_llama):
    folder = tmp_path / "ckpt"
    tiny_llama.model.save_pretrained(folder)
    tiny_llama.tokenizer.save_pretrained(folder)
    lm = load_model(str(folder), device="cpu", dtype="bf16")
    assert lm.info.dtype == "bfloat16"


FALLBACK = "infermeter-bpe (no tokenizer in the checkpoint)"


def test_local_folder_without_tokenizer_falls_back_to_builtin(tmp_path, tiny_llama):
    folder = tmp_path / "ckpt"
    tiny_llama.model.save_pretrained(folder)
    lm = load_model(str(folder), device="cpu")
    assert lm.info.tokenizer == "infermeter-bpe (no tokenizer in the checkpoint)"


@pytest.mark.slow
def test_cli_profiles_a_folder_without_tokenizer_and_says_so(tmp_path, tiny_llama):
    folder = tmp_path / "ckpt"
    tiny_llama.model.save_pretrained(folder)
    args = ("profile", "--model", str(folder), "--prompt-tokens", "16", "--new-tokens", "3")
    common = ("--samples", "1", "--energy", "off", "--db", str(tmp_path / "r.db"))
    r = cli_here(*args, *common)
    assert r.returncode == 0, r.stderr
    assert f"tokenizer: {FALLBACK}" in r.stdout
    doc = json.loads(cli_here(*args, *common, "--json").stdout)
    assert doc["meta"]["model_info"]["tokenizer"] == FALLBACK
    assert any(n.startswith("the checkpoint has no tokenizer") for n in doc["meta"]["notes"])
    assert {s["prefill_tokens"] for s in doc["all_samples"]} == {16}


def test_cli_refuses_a_folder_without_tokenizer_whose_vocabulary_is_too_small(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=100,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    LlamaForCausalLM(config).save_pretrained(tmp_path / "small")
    r = cli_here("profile", "--model", str(tmp_path / "small"), "--db", str(tmp_path / "r.db"))
    assert_one_line_error(r, "has no tokenizer", "vocabulary (100 tokens)", "save_pretrained")


def test_a_tokenizer_that_yields_no_tokens_is_replaced_like_a_missing_one(tmp_path, tiny_llama):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    folder = tmp_path / "ckpt"
    tiny_llama.model.save_pretrained(folder)
    broken = Tokenizer(models.BPE(vocab={"<unk>": 0, "zz": 1}, merges=[]))
    broken.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=broken).save_pretrained(folder)
    r = cli_here(
        "profile",
        "--model",
        str(folder),
        "--prompt-tokens",
        "16",
        "--new-tokens",
        "3",
        "--samples",
        "1",
        "--energy",
        "off",
        "--db",
        str(tmp_path / "r.db"),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)["meta"]["model_info"]
    assert info["tokenizer"] == (
        "infermeter-bpe (a tokenizer that yields no tokens in the checkpoint)"
    )


def test_unknown_model_names_the_problem_and_fix():
    with pytest.raises(UserError) as e:
        load_model("no-such-org/no-such-model", device="cpu")
    assert "not a preset, not a folder" in e.value.problem
    assert "infermeter models" in e.value.fix


def test_missing_folder_and_non_checkpoint_folder(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_model(str(tmp_path / "nope"), device="cpu")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="not a transformers checkpoint"):
        load_model(str(tmp_path / "empty"), device="cpu")


def test_too_big_for_the_device_is_refused_before_building(monkeypatch):
    monkeypatch.setattr(loader, "available_memory_mib", lambda device: 1024.0)
    with pytest.raises(UserError) as e:
        load_model("llama-3.2-1b", device="cpu")
    assert "1.24 B parameters" in e.value.problem and "1.0 GiB free" in e.value.problem


def test_bad_attention_implementation():
    with pytest.raises(UserError, match="unknown attention implementation"):
        load_model("tiny-llama", device="cpu", attn_implementation="fast")


def test_attention_implementation_is_applied():
    lm = load_model("tiny-llama", device="cpu", attn_implementation="eager")
    assert lm.model.config._attn_implementation == "eager"
