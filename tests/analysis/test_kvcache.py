"""The KV cache's forms in predict: bytes held, where, and what a decode step moves."""

import pytest
from transformers import LlamaConfig
from typer.testing import CliRunner

from infermeter.analysis.kvcache import decode_context, decode_kv_bytes_each, kv_memory
from infermeter.cli.app import app
from infermeter.models.shape import shape_of
from tests.helpers import assert_one_line_error

MIB = 2**20


def _smollm2_shape():
    """SmolLM2-135M's shape from its published config (30 blocks, 3 KV heads of 64)."""
    config = LlamaConfig(
        hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
        num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True,
    )  # fmt: skip
    return shape_of(config)


def test_quantized_cache_bytes_match_what_smollm2_held():
    """The bytes a 4-bit quanto cache held on SmolLM2-135M in float32 (docs/analysis.md: 2.24
    and 8.39 MiB after 128 and 1,024 prompt tokens and 32 new ones; 6.99 and 46.36 dynamic)."""
    shape = _smollm2_shape()
    for prompt, quantized, dynamic in ((128, 2.24, 6.99), (1024, 8.39, 46.36)):
        q = kv_memory(shape, 4, 1, prompt, 32, "quantized")
        assert q.device_bytes / MIB == pytest.approx(quantized, rel=0.01)
        # one layer dequantized at a time, in full precision, while it attends
        assert q.transient_bytes == pytest.approx(dynamic * MIB / 30, rel=0.01)
        d = kv_memory(shape, 4, 1, prompt, 32, "dynamic").device_bytes / MIB
        assert d == pytest.approx(dynamic, rel=0.01)


def test_static_offloaded_and_windows():
    shape = _smollm2_shape()
    dyn = kv_memory(shape, 2, 1, 1000, 24, "dynamic")
    assert kv_memory(shape, 2, 1, 1000, 24, "static") == dyn  # the same bytes at the end
    off = kv_memory(shape, 2, 1, 1000, 24, "offloaded")
    assert off.host_bytes == dyn.device_bytes and off.device_bytes == pytest.approx(
        dyn.device_bytes * 2 / 30
    )  # the layer computing and the next one prefetched
    assert decode_context("static", 1000, 24) == 1024 > decode_context("dynamic", 1000, 24)
    assert decode_kv_bytes_each("dynamic", 2) is None
    assert decode_kv_bytes_each("quantized", 2) > 2 * 2  # reads more than a dynamic cache


def _predict(tmp_path, *args):
    return CliRunner().invoke(
        app,
        ["predict", "-m", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "8",
         "--prompt-tokens", "4096", "--new-tokens", "256", "--json", *args,
         "--db", str(tmp_path / "p.db")],
    )  # fmt: skip


def test_predict_knows_each_cache_form(tmp_path):
    import json

    docs = {}
    for form in ("dynamic", "static", "quantized", "offloaded"):
        r = _predict(tmp_path, "--cache", form)
        assert r.exit_code == 0, r.output
        docs[form] = json.loads(r.stdout)
        assert docs[form]["workload"]["cache"] == form
    kv = {f: d["rows"][0]["memory"]["kv_cache_bytes"] for f, d in docs.items()}
    # bfloat16: 4-bit codes are a quarter, plus scales and up to 127 positions unquantized
    assert kv["quantized"] < 0.35 * kv["dynamic"] and kv["offloaded"] < 0.1 * kv["dynamic"]
    assert docs["offloaded"]["rows"][0]["memory"]["kv_host_bytes"] == pytest.approx(kv["dynamic"])
    # static attends over its whole allocation, quantized copies its cache out every step:
    # more GPU work a step (the step itself is launch-bound here, the host's at 11 us an
    # operation, so its TPOT is the same for all three)
    work = {
        f: sum(d["rows"][0]["decode"][k] for k in ("gemm_s", "attention_s", "elementwise_s"))
        for f, d in docs.items()
    }
    assert work["static"] > work["dynamic"] and work["quantized"] > 1.3 * work["dynamic"]
    largest = {f: d["largest_batch"] for f, d in docs.items()}
    # more sequences fit (the prefill's activations, the same for all, limit them too)
    assert largest["offloaded"] > largest["quantized"] > largest["dynamic"] == largest["static"]


def test_predict_refuses_a_cache_form_that_cannot_be(tmp_path):
    r = _predict(tmp_path, "--cache", "static", "--stack", "vllm")
    assert_one_line_error(r, "keeps its own", "--stack hf")
    r = CliRunner().invoke(
        app, ["predict", "-m", "tiny-llama", "--cache", "offloaded", "--db", str(tmp_path / "p")]
    )
    assert_one_line_error(r, "a CPU has nothing to offload", "--hardware")
    r = CliRunner().invoke(
        app, ["predict", "-m", "tiny-mistral", "--hardware", "h100-sxm", "--cache", "quantized",
              "--db", str(tmp_path / "p")],
    )  # fmt: skip
    assert_one_line_error(r, "sliding-window layers", "--cache dynamic")
    r = _predict(tmp_path, "--cache", "paged")
    assert_one_line_error(r, "unknown cache form", "dynamic, static")
