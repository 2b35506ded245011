import math
import time
from typing import Any

import pytest
import torch

from infermeter import PRESETS, load_model
from infermeter.instrument import Profiler, ProfilingConfig
from infermeter.instrument.probes import ActivationProbe, AttentionProbe, KillProbe

TINY = [n for n, p in PRESETS.items() if p.kind == "tiny"]


def _inputs(lm, text="The river had been rising for three days and the bridge was gone."):
    ids = lm.tokenizer([text], return_tensors="pt")
    kw = dict(ids)
    if lm.info.vision is not None:
        n = lm.info.vision.tokens_per_image
        image = torch.full((1, n), lm.model.config.image_token_id)
        kw["input_ids"] = torch.cat([image, ids["input_ids"]], 1)
        kw["attention_mask"] = torch.ones_like(kw["input_ids"])
        size = lm.info.vision.image_size
        pixels = torch.randn(1, 3, size, size)
        kw["pixel_values"] = pixels if lm.info.vision.pixel_dims == 4 else pixels.unsqueeze(1)
    return kw


def _generate(lm, kw, n=4):
    with torch.inference_mode():
        return lm.model.generate(**kw, max_new_tokens=n, min_new_tokens=n, do_sample=False)


def _hook_count(model):
    """Hooks plus wrapped forwards (instance attributes over the class's method)."""
    return sum(
        len(m._forward_hooks) + len(m._forward_pre_hooks) + ("forward" in m.__dict__)
        for m in model.modules()
    )


@pytest.mark.parametrize("name", TINY)
def test_hooks_fire_on_the_expected_modules(name):
    lm = load_model(name, device="cpu")
    kw = _inputs(lm)
    with Profiler(lm.model, ProfilingConfig.deep()) as prof:
        _generate(lm, kw, n=3)
    lp = prof.result()
    phases = [s.phase for s in lp.steps]
    assert phases[-3:] == ["prefill", "decode", "decode"]
    layers = lp.layers()
    for phase, calls in (("prefill", 1), ("decode", 2)):
        sub = layers[layers["phase"] == phase]
        for kind in ("block", "attention", "o_proj", "qk", "softmax", "av"):
            got = sub[sub["kind"] == kind]
            assert sorted(got["layer"]) == [0, 1, 2, 3], (kind, phase)
            assert (got["calls"] == calls).all(), (kind, phase)
        mlp_kind = "moe" if lm.info.is_moe else "mlp"
        assert len(sub[sub["kind"] == mlp_kind]) == 4
        # Gemma 3 norms before and after both attention and MLP: 4 per block, else 2
        assert len(sub[sub["kind"] == "norm"]) == 4 * (4 if "gemma3" in name else 2)
        for kind in ("embeddings", "final_norm", "lm_head"):
            assert len(sub[sub["kind"] == kind]) == 1
    tables = lp.tables()
    assert set(tables) >= {"layers", "parts", "activations", "attention", "mlp_kill"}
    assert ("moe_routing" in tables) == lm.info.is_moe
    if lm.info.is_moe:
        routing = tables["moe_routing"]
        per_layer = routing[routing["phase"] == "decode"].groupby("layer")["tokens"].sum()
        assert (per_layer == 2 * lm.info.top_k).all()  # 2 decode tokens x top-k experts each
    if lm.info.vision is not None:
        vision = layers[layers["phase"] == "vision"]
        assert set(vision["kind"]) == {"vision_tower", "projector"}


def test_forward_time_agrees_with_an_outside_clock_and_parts_add_up(tiny_llama):
    model = tiny_llama.model
    ids = tiny_llama.tokenizer(
        ["A language model generates text one token at a time. " * 8], return_tensors="pt"
    )["input_ids"]
    with torch.inference_mode():
        model(ids)  # warm
    outside = []
    with Profiler(model, ProfilingConfig.standard()) as prof, torch.inference_mode():
        for _ in range(5):
            t0 = time.perf_counter()
            model(ids)
            outside.append((time.perf_counter() - t0) * 1e3)
    lp = prof.result()
    inside = lp.forward_ms()["prefill"]
    assert inside == pytest.approx(sum(outside), rel=0.05)
    parts = lp.parts().set_index("part")
    top = sum(
        parts.loc[k, "total_ms"] for k in ("embeddings", "rotary", "block", "final_norm", "lm_head")
    )
    assert top + parts.loc["other", "total_ms"] == pytest.approx(inside, rel=1e-9)
    assert parts.loc["other", "total_ms"] >= 0
    inner = sum(parts.loc[k, "total_ms"] for k in ("attention", "mlp", "norm"))
    assert inner <= parts.loc["block", "total_ms"]
    # nested: each level's shares of its parent add to 100%, the rest of the block included
    table = lp.parts()
    for parent in ("forward", "block"):
        shares = table[table["parent"] == parent]["pct_parent"]
        assert len(shares) >= 2 and shares.sum() == pytest.approx(100.0, rel=1e-9)
    assert parts.loc["rest of the block", "parent"] == "block"
    # each module's per-sample totals (here 5 forwards of one prompt: one "sample" each, as
    # every forward is a prefill) add up to its total
    layers = lp.layers()
    for _, row in layers.iterrows():
        assert len(row["sample_ms"]) == 5
        assert sum(row["sample_ms"]) == pytest.approx(row["total_ms"], rel=1e-5)
    assert parts.loc["attention", "pct_parent"] == pytest.approx(
        100 * parts.loc["attention", "total_ms"] / parts.loc["block", "total_ms"]
    )


def test_activation_statistics_equal_a_direct_computation(tiny_llama):
    model = tiny_llama.model
    ids = tiny_llama.tokenizer(
        ["Glaciers are rivers of ice that move slowly."], return_tensors="pt"
    )["input_ids"]
    outputs = {}
    handles = [
        block.register_forward_hook(lambda m, a, o, i=i: outputs.__setitem__(i, o.detach().clone()))
        for i, block in enumerate(model.model.layers)
    ]
    try:
        with Profiler(model, ProfilingConfig.standard()) as prof, torch.inference_mode():
            model(ids)
    finally:
        for h in handles:
            h.remove()
    rows = {r["layer"]: r for r in prof.result().activations if r["phase"] == "prefill"}
    for i, x in outputs.items():
        x = x.double().reshape(-1)
        r = rows[i]
        assert r["mean_abs"] == pytest.approx(x.abs().mean().item(), rel=1e-5)
        assert r["std"] == pytest.approx(x.std().item(), rel=1e-4)
        assert r["max_abs"] == pytest.approx(x.abs().max().item(), rel=1e-6)
        assert r["sparsity"] == pytest.approx((x == 0).double().mean().item(), abs=1e-9)
        assert r["calls"] == 1


def test_activation_probe_on_known_values():
    probe = ActivationProbe(layers=1, device="cpu", eps=0.5)
    probe.record(0, 0, torch.tensor([[-2.0, 0.0, 0.25, 4.0]]))
    probe.record(0, 0, (torch.tensor([1.0, -1.0, 0.0, 0.0]),))  # tuple outputs work too
    (row,) = probe.collect()
    x = torch.tensor([-2.0, 0.0, 0.25, 4.0, 1.0, -1.0, 0.0, 0.0], dtype=torch.float64)
    assert row["mean_abs"] == pytest.approx(x.abs().mean().item())
    assert row["std"] == pytest.approx(x.std().item())
    assert row["max_abs"] == 4.0
    assert row["sparsity"] == pytest.approx(4 / 8)  # |x| <= 0.5: 0, 0.25, 0, 0
    assert row["calls"] == 2


def test_staged_and_direct_activation_statistics_agree():
    data = [torch.randn(1, 1, 4) for _ in range(3)] + [torch.randn(1, 5, 4)]
    direct = ActivationProbe(layers=2, device="cpu", eps=0.0)
    staged = ActivationProbe(layers=2, device="cpu", eps=0.0, stage_width=8)
    for probe in (direct, staged):
        probe.record(1, 0, data[0])
        probe.record(1, 1, data[1])
        probe.flush()  # end of a forward
        probe.record(1, 0, data[2])
        probe.record(1, 1, data[3])  # 20 values: too big to stage, reduced directly
        probe.flush()
    # the direct row lands while layer 0's second output is still deferred; order is free
    assert sorted(staged.rows.meta) == [(1, 0, 4), (1, 0, 4), (1, 1, 4), (1, 1, 20)]
    for a, b in zip(direct.collect(), staged.collect(), strict=True):
        assert a.keys() == b.keys()
        for k in a:
            expected = b[k] if isinstance(b[k], str) else pytest.approx(b[k], rel=1e-5)
            assert a[k] == expected, k
    layer1 = torch.cat([data[1].reshape(-1), data[3].reshape(-1)]).double()
    row = staged.collect()[1]
    assert row["std"] == pytest.approx(layer1.std().item(), rel=1e-5) and row["calls"] == 2


def test_a_prefill_is_reduced_as_it_comes_and_only_a_decode_step_is_staged():
    """Staging is for decode steps (at most `stage_rows` tokens a call): a 128-token smollm2
    prefill fitted the element cap, and stacking its 30 layers' tensors cost 77 ms of a
    194-ms deep prefill. Each probe: a call of 8 tokens is reduced when recorded, one of 1
    token waits for the forward's end, and both give the same figures as unstaged."""
    w = torch.softmax(torch.randn(1, 2, 8, 8), -1)
    y = torch.relu(torch.randn(1, 8, 16))
    cases = [
        (AttentionProbe, {"threshold": 1e-3}, w, w[:, :, -1:], 2),  # a row per head
        (KillProbe, {"eps": 1e-3}, y, y[:, -1:], 1),
        (ActivationProbe, {"eps": 0.0}, y, y[:, -1:], 1),
    ]
    for make, kw, prefill, decode, rows_per_call in cases:
        staged = make(layers=1, device="cpu", stage_width=10**6, stage_rows=4, **kw)
        direct = make(layers=1, device="cpu", **kw)
        for probe in (staged, direct):
            probe.record(0, 0, prefill)
            probe.record(1, 0, decode)
        assert staged.deferred.items and len(staged.deferred.items) == 1, make
        assert len(staged.rows.meta) == rows_per_call  # the prefill's, written at once
        staged.flush()
        assert not staged.deferred.items and len(staged.rows.meta) == 2 * rows_per_call
        for a, b in zip(staged.collect(), direct.collect(), strict=True):
            for k in a:
                assert a[k] == (b[k] if isinstance(b[k], str) else pytest.approx(b[k])), k


def test_entropy_of_uniform_attention_is_log_n_and_masked_keys_are_ignored():
    probe = AttentionProbe(layers=1, device="cpu", threshold=1e-3)
    n = 7
    probe.record(0, 0, torch.full((2, 3, 5, n), 1.0 / n))
    masked = torch.zeros(1, 1, 1, n + 3)
    masked[..., :n] = 1.0 / n  # three masked keys: weight exactly 0
    probe.record(1, 0, masked)
    pre, dec = probe.collect()
    assert pre["entropy"] == pytest.approx(math.log(n))
    assert dec["entropy"] == pytest.approx(math.log(n))
    assert pre["sparsity"] == 0.0 and dec["sparsity"] == 0.0


def test_attention_statistics_per_head_and_their_layer_staged_or_not():
    """Head 0 attends to one key (entropy 0, sparse), head 1 spreads evenly (log n, dense)."""
    n = 8
    w = torch.full((2, 2, 3, n), 1e-6)  # batch 2, heads 2, queries 3, keys 8; none masked
    w[:, 0, :, 0] = 1.0 - (n - 1) * 1e-6
    w[:, 1] = 1.0 / n
    for stage in (0, 10_000):  # reduced at once, or deferred to the forward's end
        probe = AttentionProbe(layers=1, device="cpu", threshold=1e-3, stage_width=stage)
        probe.record(1, 0, w)
        probe.record(1, 0, w[:1])  # a call of another shape: its rows count apart
        probe.flush()
        h0, h1 = probe.collect_heads()
        assert (h0["head"], h1["head"]) == (0, 1)
        assert h0["entropy"] == pytest.approx(0.0, abs=2e-4)
        assert h0["sparsity"] == pytest.approx(7 / 8)
        assert h1["entropy"] == pytest.approx(math.log(n)) and h1["sparsity"] == 0.0
        (layer,) = probe.collect()  # the layer: both heads' rows together
        assert layer["entropy"] == pytest.approx(math.log(n) / 2, abs=2e-4)
        assert layer["sparsity"] == pytest.approx(7 / 16)


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-gpt2", "tiny-qwen3-moe"])
def test_deep_attention_path_gives_the_same_logits_as_eager(name):
    lm = load_model(name, device="cpu", attn_implementation="eager")
    ids = lm.tokenizer(["The orchard bloomed early that spring."], return_tensors="pt")
    with torch.inference_mode():
        ref = lm.model(**ids).logits
        with Profiler(lm.model, ProfilingConfig.deep()):
            deep = lm.model(**ids).logits
    assert torch.allclose(deep, ref, atol=1e-5)


def test_entropy_through_the_deep_attention_path_on_a_real_model():
    lm = load_model("tiny-llama", device="cpu", seed=1)
    model = lm.model
    for layer in model.model.layers:  # zero queries: every score is 0, attention is uniform
        torch.nn.init.zeros_(layer.self_attn.q_proj.weight)
    text = ["One two three four five six seven eight"]
    ids = lm.tokenizer(text, return_tensors="pt")["input_ids"]
    with Profiler(model, ProfilingConfig.deep()) as prof, torch.inference_mode():
        model(ids)
    length = ids.shape[1]
    expected = sum(math.log(i + 1) for i in range(length)) / length  # causal: row i sees i+1 keys
    for r in prof.result().attention:
        assert r["entropy"] == pytest.approx(expected, rel=1e-5)


def test_kill_ratio_of_relu_on_a_known_tensor():
    probe = KillProbe(layers=2, device="cpu", eps=1e-3)
    x = torch.tensor([-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 1e-4])
    probe.record(1, 1, torch.relu(x))
    (row,) = probe.collect()
    assert row["layer"] == 1 and row["phase"] == "decode"
    assert row["kill_ratio"] == pytest.approx(5 / 8)  # four negatives clamp to 0, and 1e-4


def test_hooks_and_attention_restored_after_an_exception(tiny_llama):
    model = tiny_llama.model
    kw = _inputs(tiny_llama)
    _generate(tiny_llama, kw, 2)  # transformers adds its own capture hooks on first use
    before = _hook_count(model)
    attn = model.config._attn_implementation
    with pytest.raises(RuntimeError, match="boom"), Profiler(model, ProfilingConfig.deep()):
        assert _hook_count(model) > before
        assert model.config._attn_implementation == "infermeter_deep"
        raise RuntimeError("boom")
    assert _hook_count(model) == before
    assert model.config._attn_implementation == attn


def test_sample_every_two_measures_every_second_decode_step(tiny_llama):
    kw = _inputs(tiny_llama)
    cfg = ProfilingConfig.custom(sample_every=2)
    with Profiler(tiny_llama.model, cfg) as prof:
        _generate(tiny_llama, kw, n=7)  # prefill + 6 decode steps
    lp = prof.result()
    decode = [s for s in lp.steps if s.phase == "decode"]
    assert [s.decode_index for s in decode if s.measured] == [0, 2, 4]
    layers = lp.layers()
    blocks = layers[(layers["phase"] == "decode") & (layers["kind"] == "block")]
    assert (blocks["calls"] == 3).all()
    assert any("1 in 2 (3 of 6)" in n for n in lp.notes)


def test_deep_probes_one_decode_step_in_four_and_says_so(tiny_llama):
    kw = _inputs(tiny_llama)
    with Profiler(tiny_llama.model, ProfilingConfig.deep()) as prof:
        _generate(tiny_llama, kw, n=9)  # prefill + 8 decode steps: probes on decode 0 and 4
    lp = prof.result()
    attn = {r["phase"]: r for r in lp.attention if r["layer"] == 0}
    prompt = kw["input_ids"].shape[1]
    # decode rows: one query each, at contexts prompt+1 and prompt+5
    assert attn["decode"]["entropy"] > 0
    assert sum(1 for r in lp.kill if r["phase"] == "decode") == 4
    kill_values = {r["phase"]: r["values"] for r in lp.kill if r["layer"] == 0}
    assert kill_values["decode"] * prompt == 2 * kill_values["prefill"]  # 2 of 8 decode steps
    layers = lp.layers()
    qk = layers[(layers["kind"] == "qk") & (layers["phase"] == "decode")]
    assert (qk["calls"] == 8).all()  # timings: every step
    assert any("1 in 4 decode steps" in n for n in lp.notes)


def test_minimal_mode_attaches_nothing(tiny_llama, monkeypatch):
    import sys

    from infermeter.run import RunConfig, profile

    run_profile = sys.modules["infermeter.run.profiling"]  # the module, not the function

    def no_profiler(*args, **kwargs):
        raise AssertionError("minimal mode built a Profiler")

    assert not ProfilingConfig.minimal().hooks_needed
    monkeypatch.setattr(run_profile, "Profiler", no_profiler)
    before = _hook_count(tiny_llama.model)
    run = profile(
        RunConfig(new_tokens=3, samples=1, mode="minimal", energy="off"), loaded=tiny_llama
    )
    assert run.status == "finished" and run.layers == {} and run.trace is None
    assert _hook_count(tiny_llama.model) == before


def test_custom_mode_instruments_only_the_chosen_blocks_and_detaches(tiny_llama):
    before = _hook_count(tiny_llama.model)
    with Profiler(tiny_llama.model, ProfilingConfig.custom(layers=[1])) as prof:
        only_layer_one = {m.layer for m in prof.modules if m.kind == "block"}
        assert _hook_count(tiny_llama.model) > before
    assert only_layer_one == {1}
    assert _hook_count(tiny_llama.model) == before


def test_reattach_keeps_one_set_of_rows_and_adds_the_calls():
    """Detached between samples and attached again (interleaved sweeps), the profiler keeps
    its module ids: the second generation's calls land on the same rows, no duplicates."""
    lm = load_model("tiny-llama", device="cpu")
    kw = _inputs(lm)
    prof = Profiler(lm.model, ProfilingConfig.deep())
    prof.attach()
    _generate(lm, kw, n=3)
    prof.detach()
    n_modules, origin, notes = len(prof.modules), prof.origin, list(prof.notes)
    assert _hook_count(lm.model) == 0
    _generate(lm, kw, n=3)  # not instrumented: detached
    prof.attach()
    _generate(lm, kw, n=3)
    prof.detach()
    assert len(prof.modules) == n_modules
    assert prof.origin is origin and prof.notes == notes
    layers = prof.result().layers()
    names = layers[layers["phase"] == "prefill"]["name"]
    assert not names.duplicated().any()
    blocks = layers[layers["kind"] == "block"]
    assert (blocks[blocks["phase"] == "prefill"]["calls"] == 2).all()
    assert (blocks[blocks["phase"] == "decode"]["calls"] == 4).all()
    qk = layers[(layers["kind"] == "qk") & (layers["phase"] == "decode")]
    assert len(qk) == 4 and (qk["calls"] == 4).all()


def test_two_deep_profiles_in_two_threads_each_time_their_own_attention():
    """Deep mode's attention function is global to transformers; which profiler a call belongs
    to comes from the module it is called with. With one module-wide "active profiler", one of
    two runs lost every attention operation and was stored as finished (issue 35)."""
    import threading

    models = [load_model("tiny-llama", device="cpu", seed=s) for s in (1, 2)]
    both_attached = threading.Barrier(2, timeout=60)
    results: dict[int, Any] = {}
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            lm = models[i]
            kw = _inputs(lm)
            with Profiler(lm.model, ProfilingConfig.deep()) as prof:
                both_attached.wait()  # both profilers installed before either model runs
                _generate(lm, kw, n=3)
                both_attached.wait()  # and neither detaches while the other still runs
            results[i] = prof.result()
        except BaseException as exc:  # re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    for i in (0, 1):
        layers = results[i].layers()
        for kind in ("qk", "softmax", "av"):
            got = layers[(layers["kind"] == kind) & (layers["phase"] == "decode")]
            assert sorted(got["layer"]) == [0, 1, 2, 3], (i, kind)
            assert (got["calls"] == 2).all(), (i, kind)


def test_user_sections_are_timed_on_the_profilers_clock_beside_the_layers(tiny_llama):
    kw = _inputs(tiny_llama)
    with (
        Profiler(tiny_llama.model, ProfilingConfig.standard()) as prof,
        prof.section("generate"),
    ):
        for _ in range(2):
            with prof.section("one call"):
                _generate(tiny_llama, kw)
    with prof.section("after detach"):  # regions do not need the hooks
        time.sleep(0.002)
    result = prof.result()
    frame = result.sections_frame()
    assert list(frame["name"]) == ["generate", "one call", "one call", "after detach"]
    assert list(frame["depth"]) == [0, 1, 1, 0]
    records = result.records_frame()
    forwards = records[records["kind"] == "forward"]
    outer = frame.iloc[0]
    # the same timeline as the records: every forward lies inside the outer region
    assert forwards["start_ms"].min() >= outer["start_ms"]
    assert (forwards["start_ms"] + forwards["ms"]).max() <= outer["start_ms"] + outer["ms"]
    assert frame.iloc[3]["ms"] >= 2.0
    summary = result.section_summary().set_index("name")
    assert summary.loc["one call", "calls"] == 2
    assert "sections" in result.tables() and "kind" not in result.sections_frame()
    assert repr(result).startswith("LayerProfile(") and "sections=3" in repr(result)
