"""The KV cache's forms through `profile`: verified from the cache the model was given."""

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infermeter import RunConfig, UserError, load_model, profile
from infermeter.cli.app import app
from infermeter.knobs.evidence import KnobCheckDoc
from infermeter.knobs.registry import get_knob
from tests.helpers import assert_one_line_error, doc_keys


def _run(loaded, cache, prompt_tokens=400, **kw):
    config = RunConfig(
        model=loaded.info.spec, cache=cache, prompt_tokens=prompt_tokens, new_tokens=6,
        samples=1, warmup=0, energy="off", **kw,
    )  # fmt: skip
    return profile(config, loaded=loaded)


def test_dynamic_static_and_quantized_caches_are_what_the_model_was_given(tiny_llama):
    from optimum.quanto.library.extensions import get_extension

    # quanto compiles its CPU kernels on first use (a new environment: a fresh clone's venv);
    # the run does it before its clock, and says so only when it did
    version_file = Path(get_extension("quanto_cpp").build_directory) / "pytorch_version.txt"
    fresh = not version_file.exists()
    runs = {c: _run(tiny_llama, c) for c in ("dynamic", "static", "quantized")}
    assert runs["quantized"].phases["kv_kernels_ms"] > 0 and version_file.exists()
    said = [n for n in runs["quantized"].notes if "compiled its CPU kernels" in n]
    assert len(said) == fresh and "kv_kernels_ms" not in runs["dynamic"].phases
    seen = {c: r.checks["cache"] for c, r in runs.items()}
    assert set(seen["dynamic"]) == {"form", "class", "layer_classes", "kv_bytes", "kv_mib"}
    assert set(seen["dynamic"]) <= doc_keys(KnobCheckDoc)
    assert seen["dynamic"]["class"] == "DynamicCache"
    assert seen["static"]["class"] == "StaticCache"
    assert seen["quantized"]["layer_classes"] == ["QuantoQuantizedLayer"]
    # tiny-llama: 4 blocks x 2 KV heads x 64 dims x (400 + 6 - 1 positions) x K and V x 4 B
    assert seen["dynamic"]["kv_bytes"] == 4 * 2 * 64 * 405 * 2 * 4
    assert seen["static"]["kv_bytes"] >= seen["dynamic"]["kv_bytes"]  # room for every token
    # 4-bit codes with scales past the residual window (128 positions kept in float32)
    assert seen["quantized"]["kv_bytes"] < 0.3 * seen["dynamic"]["kv_bytes"]
    # predict's memory model (analysis/kvcache.py) holds what each form held, within 1%
    from infermeter.analysis.kvcache import kv_memory
    from infermeter.models.shape import shape_of

    shape = shape_of(tiny_llama.model.config)
    for form in ("dynamic", "static", "quantized"):
        predicted = kv_memory(shape, 4, 1, 400, 6, form).device_bytes
        assert predicted == pytest.approx(seen[form]["kv_bytes"], rel=0.01), form
    # static and dynamic hold the same numbers: the same greedy output
    assert runs["static"].samples[0].output_text == runs["dynamic"].samples[0].output_text
    knob = get_knob("cache")
    for form, run in runs.items():
        assert knob.verify(tiny_llama, form, run)["class"] == seen[form]["class"]
    with pytest.raises(Exception, match="was given DynamicCache"):
        knob.verify(tiny_llama, "static", runs["dynamic"])


def test_a_sliding_window_model_keeps_its_window():
    mistral = load_model("tiny-mistral", device="cpu")
    run = _run(mistral, "sliding_window", prompt_tokens=64)
    assert run.checks["cache"]["layer_classes"] == ["DynamicSlidingWindowLayer"]
    get_knob("cache").verify(mistral, "sliding_window", run)


def test_forms_that_cannot_run_here_are_refused_in_one_line(tmp_path, monkeypatch):
    runner = CliRunner()
    base = ["profile", "--new-tokens", "4", "--samples", "1", "--energy", "off"]
    db = ["--db", str(tmp_path / "r.db")]
    r = runner.invoke(app, [*base, "--cache", "offloaded", *db])
    assert_one_line_error(r, "from GPU to CPU memory", "on a GPU")
    r = runner.invoke(app, [*base, "--cache", "sliding_window", *db])
    assert_one_line_error(r, "has no sliding_window", "--cache dynamic")
    r = runner.invoke(app, [*base, "-m", "tiny-mistral", "--cache", "quantized", *db])
    # transformers' QuantizedCache refuses sliding layers: said before anything runs
    assert_one_line_error(r, "MistralForCausalLM has sliding_attention layers", "sliding_window")
    r = runner.invoke(app, [*base, "--cache", "paged", *db])
    assert r.exit_code != 0 and "unknown cache form" in r.output
    monkeypatch.setitem(sys.modules, "optimum.quanto", None)  # optimum-quanto not installed
    with pytest.raises(UserError, match="pip install optimum-quanto"):
        profile(RunConfig(cache="quantized", new_tokens=2, samples=1, energy="off"))


def test_an_interleaved_sweep_verifies_each_arms_cache_and_speculation(tiny_llama, tmp_path):
    """Arms measured in turn each attach their own watchers (a sweep once found no cache)."""
    from infermeter import Store
    from infermeter.run.sweep import SweepSpec, run_sweep

    base = RunConfig(new_tokens=3, samples=2, warmup=0, energy="off")
    grid = {"cache": ["dynamic", "static"], "decoding": ["greedy", "prompt_lookup:2"]}
    result = run_sweep(
        SweepSpec(base, grid, interleave=True), Store(tmp_path / "r.db"), loaded=tiny_llama
    )
    assert len(result.runs) == 4 and all(r.status == "finished" for r in result.runs)
    for run in result.runs:
        expected = {"dynamic": "DynamicCache", "static": "StaticCache"}[run.config["cache"]]
        assert run.checks["cache"]["class"] == expected
        speculative = run.config["decoding"] != "greedy"
        assert ("speculation" in run.checks) == speculative


def test_the_cache_watcher_leaves_the_forward_once_it_has_the_cache(tiny_llama):
    """After a sample's first forward the watcher costs nothing; the next sample re-arms it."""
    import torch

    from infermeter.run.cache_probe import CacheProbe

    model = tiny_llama.model
    before = len(model._forward_pre_hooks)
    probe = CacheProbe(model)
    probe.attach()
    assert len(model._forward_pre_hooks) == before + 1
    ids = tiny_llama.tokenizer(["one two three"], return_tensors="pt")
    with torch.inference_mode():
        model.generate(**ids, max_new_tokens=3, min_new_tokens=3, do_sample=False)
    assert len(model._forward_pre_hooks) == before  # gone after the first forward
    probe.sample_done()
    assert probe.seen["class"] == "DynamicCache"
    assert len(model._forward_pre_hooks) == before + 1  # armed for the next sample
    probe.detach()
    assert len(model._forward_pre_hooks) == before
