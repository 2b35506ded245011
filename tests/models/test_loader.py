import pytest
import torch

from infermeter import UserError, load_model
from infermeter.models import loader


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


def test_local_folder_without_tokenizer_falls_back_to_builtin(tmp_path, tiny_llama):
    folder = tmp_path / "ckpt"
    tiny_llama.model.save_pretrained(folder)
    lm = load_model(str(folder), device="cpu")
    assert "checkpoint has no tokenizer" in lm.info.tokenizer


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
    monkeypatch.setattr(loader, "available_memory_mb", lambda device: 1024.0)
    with pytest.raises(UserError) as e:
        load_model("llama-3.2-1b", device="cpu")
    assert "1.24 B parameters" in e.value.problem and "1.0 GiB free" in e.value.problem


def test_bad_attention_implementation():
    with pytest.raises(UserError, match="unknown attention implementation"):
        load_model("tiny-llama", device="cpu", attn_implementation="fast")


def test_attention_implementation_is_applied():
    lm = load_model("tiny-llama", device="cpu", attn_implementation="eager")
    assert lm.model.config._attn_implementation == "eager"
