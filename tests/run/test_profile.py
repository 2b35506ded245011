import json
import math
from pathlib import Path

import pytest
import torch

from infermeter import UserError
from infermeter.errors import GenerationFailed
from infermeter.measure.clock import MockClock
from infermeter.run import RunConfig, profile
from infermeter.run.generation import StepRecorder, TimedGeneration, token_marks
from infermeter.store import Store

ROOT = Path(__file__).resolve().parents[2]


def test_step_recorder_marks_each_token_and_never_stops():
    clock = MockClock(auto_advance_ms=2.0)
    rec = StepRecorder(clock, batch_size=2, device="cpu", capacity=3)
    for length in range(6, 10):  # a 5-token prompt, one token a call
        flags = rec(torch.zeros(2, length), None)
        assert flags.tolist() == [False, False]
    assert rec.count == 4 and rec.marks == [0.0, 2.0, 4.0]
    timed = TimedGeneration(start=-10.0, marks=rec.marks, output_ids=None, input_length=0)
    assert timed.durations(clock) == (10.0, [2.0, 2.0])
    assert token_marks(rec, 5, 3) == [0.0, 2.0, 4.0]


def test_a_speculative_forward_gives_each_of_its_tokens_its_mark():
    """Accepted tokens arrive together: their inter-token latency is 0 (bursty)."""
    clock = MockClock(auto_advance_ms=2.0)
    rec = StepRecorder(clock, batch_size=1, device="cpu", capacity=8)
    for length in (11, 14, 15, 18):  # a 10-token prompt; forwards accept 1, 3, 1, 3 tokens
        rec(torch.zeros(1, length), None)
    marks = token_marks(rec, 10, 7)  # 8 produced, 7 asked for
    assert marks == [0.0, 2.0, 2.0, 2.0, 4.0, 6.0, 6.0]
    timed = TimedGeneration(start=-1.0, marks=marks, output_ids=None, input_length=10)
    assert timed.durations(clock) == (1.0, [2.0, 0.0, 0.0, 2.0, 2.0, 0.0])


def test_profile_tiny_llama_measures_every_token(tiny_llama):
    cfg = RunConfig(prompt_tokens=32, new_tokens=6, samples=3, warmup=1, batch_size=2, device="cpu")
    run = profile(cfg, loaded=tiny_llama)
    assert run.status == "finished" and run.run_id is None
    assert [s.warmup for s in run.samples] == [True, False, False, False]
    for s in run.samples:
        assert s.new_tokens == 6 and len(s.step_ms) == 5
        assert s.prompt_tokens == 32 and s.batch_size == 2
        assert s.ttft_ms > 0 and all(x > 0 for x in s.step_ms)
        assert s.total_ms == pytest.approx(s.ttft_ms + sum(s.step_ms))
        assert s.tokens_per_s == pytest.approx(2 * 6 / (s.total_ms / 1000))
        assert s.memory["rss_peak_mib"] > 100
        # the process's page faults, by phase: counted (Linux and macOS), never negative
        assert s.memory["page_faults_prefill"] >= 0 and s.memory["page_faults_decode"] >= 0
        assert s.page_faults_per_step == s.memory["page_faults_decode"] / 5
        assert len(s.output_text) == 2
    # samples follow each other on the timeline
    starts = [s.start_ms for s in run.samples]
    assert starts == sorted(starts)
    summary = run.summary()
    assert summary["ttft_ms"].n == 3 and summary["itl_ms"].n == 15
    assert summary["page_faults_per_step"].n == 3
    assert run.device["page_fault_us"] > 0  # what one costs on this CPU, kept with the run
    doc = run.to_json()
    assert set(doc) == {"meta", "summary", "all_samples"}
    row = doc["summary"][0]
    assert row["config"]["prompt_tokens"] == 32 and row["samples"] == 3
    assert set(row["ttft_ms"]) >= {"mean", "std", "p50", "p90", "p99"}
    assert doc["all_samples"][1]["sample_id"] == 1 and doc["all_samples"][1]["prefill_tokens"] == 32


def test_single_new_token_has_no_tpot(tiny_llama):
    run = profile(RunConfig(prompt_tokens=8, new_tokens=1, samples=1, warmup=0), loaded=tiny_llama)
    s = run.samples[0]
    assert s.step_ms == () and math.isnan(s.tpot_ms) and s.total_ms == s.ttft_ms


def test_sampling_is_seeded(tiny_llama):
    cfg = RunConfig(
        prompt_tokens=16,
        new_tokens=8,
        samples=1,
        warmup=0,
        decoding="sampling",
        temperature=1.5,
        seed=5,
    )
    a = profile(cfg, loaded=tiny_llama).samples[0].output_text
    b = profile(cfg, loaded=tiny_llama).samples[0].output_text
    assert a == b


def test_prompt_longer_than_context_is_refused(tiny_llama):
    with pytest.raises(UserError, match="exceed the context of tiny-llama"):
        profile(RunConfig(prompt_tokens=4090, new_tokens=16), loaded=tiny_llama)


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("batch_size", 0, "--batch-size 0 is out of range"),
        ("new_tokens", 0, "new-tokens 0"),
        ("samples", 0, "samples 0"),
        ("top_p", 1.5, "top-p"),
        ("mode", "fast", "unknown mode"),
    ],
)
def test_invalid_config_values(field, value, match):
    with pytest.raises(UserError, match=match):
        RunConfig(**{field: value}).validate()


def test_failure_mid_run_is_stored_as_failed_with_samples(tiny_llama, tmp_path):
    store = Store(tmp_path / "runs.db")
    calls = {"n": 0}

    def explode(module, args):
        calls["n"] += 1
        # let the set-up's FLOP-count forward and two generations of 4 tokens through
        if calls["n"] > 1 + 2 * 4:
            raise RuntimeError("simulated device fault")

    handle = tiny_llama.model.register_forward_pre_hook(explode)
    try:
        with pytest.raises(GenerationFailed) as e:
            profile(
                RunConfig(prompt_tokens=8, new_tokens=4, samples=3, warmup=0),
                loaded=tiny_llama,
                sink=store,
            )
    finally:
        handle.remove()
    run = store.get(e.value.run_id)
    assert run.status == "failed" and "simulated device fault" in run.error
    assert len(run.samples) == 2 and all(len(s.step_ms) == 3 for s in run.samples)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_cuda_graphs_over_a_growing_cache_are_refused_in_one_line(mode):
    """Recorded on an H100 (tests/bench/data/h100/compile.log): reduce-overhead over the dynamic
    cache stopped with torch's "accessing tensor output of CUDAGraphs that has been overwritten
    by a subsequent run" and a stored failed run; now refused before anything runs."""
    from infermeter.knobs.compile import check_cuda_graphs

    recorded = (ROOT / "tests/bench/data/h100/compile.log").read_text()
    assert "overwrit" in recorded and "reduce-overhead" in recorded
    for cache in ("dynamic", "quantized", "sliding_window", "offloaded"):
        with pytest.raises(UserError, match="CUDA graphs") as err:
            check_cuda_graphs(mode, cache, "cuda")
        assert "--cache static" in err.value.fix and "\n" not in str(err.value)
    check_cuda_graphs(mode, "static", "cuda")  # graphs over a cache written in place
    check_cuda_graphs(mode, "dynamic", "cpu")  # no graphs off CUDA: compiled without them
    check_cuda_graphs("default", "dynamic", "cuda")
    check_cuda_graphs(True, "dynamic", "cuda")


def test_generate_never_compiles_behind_the_knob(tiny_llama):
    """transformers' generate compiles the decode step itself (CUDA graphs) whenever the cache is
    static on a GPU: recorded on an H100, "eager with a static cache" decoded at 3.2 ms a token
    against 12.9 eager, and our own reduce-overhead wrap over it stopped on the overwritten
    `cumulative_length`. Compilation is off unless the compile knob hands generate a mode."""
    from transformers import StaticCache

    from infermeter.knobs.compile import compile_note, generate_compiles
    from infermeter.run.generation import generation_config

    recorded = json.loads((ROOT / "tests/bench/data/h100/variants/gpu_check.json").read_text())
    tpot = {r["check"]: r["value"] for r in recorded["rows"] if r["check"].endswith("TPOT")}
    static, eager = (
        tpot["llama-3.2-1b b1 eager static cache TPOT"],
        tpot["llama-3.2-1b b1 eager TPOT"],
    )
    assert eager / static > 3
    # after the fix, same H100: eager with a static cache is eager; graphs go through generate
    fixed = json.loads((ROOT / "tests/bench/data/h100/graphs/gpu_check.json").read_text())
    after = {r["check"]: r["value"] for r in fixed["rows"] if r["check"].endswith("TPOT")}
    eager_static = after["llama-3.2-1b b1 eager static cache TPOT"]
    assert 0.8 < eager_static / after["llama-3.2-1b b1 eager TPOT"] < 1.25
    assert eager_static / after["llama-3.2-1b b1 graphs static cache TPOT"] > 3
    model, tok = tiny_llama.model, tiny_llama.tokenizer
    cache = StaticCache(config=model.config, max_cache_len=16)
    kept_eager = generation_config(tok, 4, cache="static")
    assert not model._valid_auto_compile_criteria({"cache": cache}, kept_eager)
    mode = generate_compiles("reduce-overhead", "static", "cuda")
    assert mode == "reduce-overhead"
    handed = generation_config(tok, 4, cache="static", generate_compiles=mode)
    handed.compile_config._compile_all_devices = True  # what a GPU device gives
    assert model._valid_auto_compile_criteria({"cache": cache}, handed)
    assert "decode step" in compile_note("reduce-overhead", "static", "cuda")
    for args in (("reduce-overhead", "static", "cpu"), (True, "static", "cuda")):
        assert generate_compiles(*args) is None and compile_note(*args) is None


def test_an_unknown_compile_mode_is_refused():
    with pytest.raises(UserError, match="unknown torch.compile mode 'fast'"):
        RunConfig(compile="fast").validate()


@pytest.mark.parametrize("mode", ["standard", "deep"])
def test_modes_store_per_layer_tables(tiny_llama, tmp_path, mode):
    store = Store(tmp_path / "runs.db")
    cfg = RunConfig(prompt_tokens=16, new_tokens=4, samples=2, warmup=1, mode=mode)
    run = profile(cfg, loaded=tiny_llama, sink=store)
    assert {"layers", "parts", "activations"} <= set(run.layers)
    assert ("attention" in run.layers) == (mode == "deep")
    blocks = [r for r in run.layers["layers"] if r["kind"] == "block" and r["phase"] == "decode"]
    assert len(blocks) == 4 and all(r["calls"] == 2 * 3 for r in blocks)  # warm-up not counted
    back = store.get(run.run_id)
    assert back.layers == run.layers
    assert back.to_json()["layers"]["parts"] == run.layers["parts"]
    assert tiny_llama.model.config._attn_implementation != "infermeter_deep"


def test_failed_instrumented_run_keeps_partial_layers(tiny_llama, tmp_path):
    store = Store(tmp_path / "runs.db")
    calls = {"n": 0}

    def explode(module, args):
        calls["n"] += 1
        if calls["n"] > 5:
            raise RuntimeError("fault in block")

    handle = tiny_llama.model.model.layers[2].register_forward_pre_hook(explode)
    try:
        with pytest.raises(GenerationFailed):
            profile(
                RunConfig(prompt_tokens=8, new_tokens=4, samples=2, warmup=0, mode="standard"),
                loaded=tiny_llama,
                sink=store,
            )
    finally:
        handle.remove()
    (row,) = store.list_runs()
    run = store.get(row["id"])
    assert run.status == "failed" and len(run.samples) == 1
    assert run.layers["layers"]  # the first sample's per-layer times survived


def test_a_busy_store_pauses_live_updates_but_keeps_the_measurement(tiny_llama, tmp_path):
    from infermeter import Store
    from infermeter.errors import UserError

    class BusyLive(Store):
        def add_sample(self, run_id, smp):
            raise UserError("database is locked by another process (write to)", "wait")

    store = BusyLive(tmp_path / "r.db")
    run = profile(RunConfig(new_tokens=3, samples=2, energy="off"), loaded=tiny_llama, sink=store)
    assert run.status == "finished"
    assert any(n.startswith("live updates paused: database is locked") for n in run.notes)
    assert len(store.get(run.run_id).samples) == 3  # all kept at the end
