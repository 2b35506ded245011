"""Every knob takes effect, proven by measurement, and is undone; bad values fail first."""

import pytest
import torch

from infermeter import RunConfig, profile
from infermeter.errors import UserError
from infermeter.knobs import KNOBS, get_knob
from infermeter.knobs.moe_topk import experts_per_token, routers


def _applied(knob, loaded, text):
    value = knob.parse(text)
    knob.check(value, loaded)
    return value


@pytest.mark.parametrize("k", [1, 2, 8])
def test_top_k_changes_the_experts_each_token_uses_and_is_restored(tiny_moe, k):
    knob = KNOBS["top_k"]
    before = [r.top_k for r in routers(tiny_moe.model)]
    value = _applied(knob, tiny_moe, str(k))
    with knob.apply(tiny_moe, value) as applied:
        assert set(experts_per_token(tiny_moe)) == {k}
        assert knob.verify(tiny_moe, value, None, applied) == {"experts_per_token": k}
    assert [r.top_k for r in routers(tiny_moe.model)] == before
    assert set(experts_per_token(tiny_moe)) == {before[0]}


def test_top_k_changes_the_measured_cost(tiny_moe):
    """Interleaved, k=1 and k=8 in turn for 5 rounds, so a busy spell of the machine lands on
    both: measured one after the other, all of k=1's samples once took 10x (671 ms vs 74)."""
    knob = KNOBS["top_k"]
    ttft: dict[int, list[float]] = {1: [], 8: []}
    config = RunConfig(
        model="tiny-qwen3-moe", prompt_tokens=512, new_tokens=2, samples=1, energy="off"
    )
    for _ in range(5):
        for k in (1, 8):
            with knob.apply(tiny_moe, k):
                run = profile(config, loaded=tiny_moe)
            ttft[k].append(run.samples[-1].ttft_ms)
    assert min(ttft[8]) > min(ttft[1])  # the least disturbed sample of each


@pytest.mark.parametrize(
    "name,text,loaded_name,needle",
    [
        ("top_k", "17", "tiny_moe", "above the 16 experts"),
        ("top_k", "0", "tiny_moe", "below 1"),
        ("top_k", "2", "tiny_llama", "is dense"),
        ("active_layers", "0", "tiny_llama", "outside 1..4"),
        ("active_layers", "5", "tiny_llama", "outside 1..4"),
        ("active_layers", "2:random", "tiny_llama", "order 'random'"),
        ("experts_implementation", "grouped_mm", "tiny_llama", "is dense"),
        ("dtype", "float16", "tiny_llama", "not supported on CPU"),
        ("dtype", "int2", "tiny_llama", "not one of"),
        ("compile", "maybe", "tiny_llama", "not on, off or a torch.compile mode"),
        ("new_tokens", "abc", "tiny_llama", "not a whole number"),
    ],
)
def test_invalid_values_fail_before_running(request, name, text, loaded_name, needle):
    loaded = request.getfixturevalue(loaded_name)
    knob = KNOBS[name]
    with pytest.raises(UserError, match=needle):
        _applied(knob, loaded, text)


def test_compile_takes_off_on_and_torch_modes():
    parse = KNOBS["compile"].parse
    assert [parse(v) for v in ("off", "on", "Reduce-Overhead", "max-autotune")] == [
        False,
        True,
        "reduce-overhead",
        "max-autotune",
    ]


def test_unknown_knob_lists_the_known_ones():
    with pytest.raises(UserError, match="unknown knob 'topk'.*top_k"):
        get_knob("topk")


@pytest.mark.parametrize("text,kept", [("1", [0]), ("3", [0, 1, 2]), ("4", [0, 1, 2, 3])])
def test_active_layers_runs_n_blocks_and_changes_the_output(tiny_llama, text, kept):
    knob = KNOBS["active_layers"]
    value = _applied(knob, tiny_llama, text)
    model = tiny_llama.model
    with knob.apply(tiny_llama, value) as applied:
        evidence = knob.verify(tiny_llama, value, None, applied)
        run = profile(
            RunConfig(new_tokens=6, samples=1, energy="off", mode="standard"), loaded=tiny_llama
        )
    assert evidence["blocks_run"] == kept
    blocks = {r["layer"] for r in run.layers["layers"] if r["kind"] == "block"}
    assert len(blocks) == len(kept)
    assert run.samples[-1].new_tokens == 6  # prefill and decode ran with a consistent cache
    assert len(model.model.layers) == 4 and model.config.num_hidden_layers == 4
    if len(kept) == 4:
        assert evidence["top1_agreement"] == 1.0 and evidence["kl_nats"] == pytest.approx(0)
    else:
        assert evidence["kl_nats"] > 0


def test_active_layers_skipping_block_zero_keeps_the_cache_consistent(tiny_llama):
    knob = KNOBS["active_layers"]
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    with knob.apply(tiny_llama, (2, "importance")) as applied:
        kept = applied["kept"]
        out = tiny_llama.model.generate(ids, max_new_tokens=5, min_new_tokens=5, do_sample=False)
        # the same tokens without a cache: the cache had to be consistent to agree
        full = ids
        for _ in range(5):
            logits = tiny_llama.model(input_ids=full, use_cache=False).logits
            full = torch.cat([full, logits[:, -1:].argmax(-1)], dim=1)
    assert len(kept) == 2
    assert out.tolist() == full.tolist()


def test_importance_order_ranks_blocks_by_how_much_they_change_the_state(tiny_llama):
    from infermeter.knobs.active_layers import block_importance, kept_blocks

    scores = block_importance(tiny_llama)
    assert len(scores) == 4 and all(s > 0 for s in scores)
    top2 = sorted(sorted(range(4), key=lambda i: -scores[i])[:2])
    assert kept_blocks(tiny_llama, 2, "importance") == top2


@pytest.mark.parametrize(
    "impl,op", [("eager", None), ("grouped_mm", "grouped_mm_calls"), ("batched_mm", "bmm_calls")]
)
def test_experts_implementation_runs_that_kernel(tiny_moe, impl, op):
    knob = KNOBS["experts_implementation"]
    before = tiny_moe.model.config._experts_implementation
    with knob.apply(tiny_moe, impl) as applied:
        evidence = knob.verify(tiny_moe, impl, None, applied)
    if op:
        assert evidence[op] > 0
    else:
        assert evidence == {"grouped_mm_calls": 0, "bmm_calls": 0}
    assert tiny_moe.model.config._experts_implementation == before


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_attention_implementation_runs_that_kernel(tiny_llama, impl):
    knob = KNOBS["attn_implementation"]
    before = tiny_llama.model.config._attn_implementation
    with knob.apply(tiny_llama, impl) as applied:
        evidence = knob.verify(tiny_llama, impl, None, applied)
    assert (evidence["sdpa_calls"] > 0) == (impl == "sdpa")
    assert tiny_llama.model.config._attn_implementation == before


def test_new_tokens_are_exact_and_verified(tiny_llama):
    run = profile(RunConfig(new_tokens=7, samples=2, energy="off"), loaded=tiny_llama)
    assert KNOBS["new_tokens"].verify(tiny_llama, 7, run)["new_tokens"] == 7
    from infermeter.knobs.base import KnobNotApplied

    with pytest.raises(KnobNotApplied):
        KNOBS["new_tokens"].verify(tiny_llama, 8, run)


def test_dtype_is_verified_from_the_parameters():
    from infermeter import load_model

    lm = load_model("tiny-llama", device="cpu", dtype="bfloat16")
    evidence = KNOBS["dtype"].verify(lm, "bfloat16", None)
    assert evidence["parameter_dtypes"] == ["bfloat16"]
    assert evidence["stored_weight_dtypes"] == {"bfloat16": lm.info.params}
    assert evidence["weight_mib"] == pytest.approx(lm.info.params * 2 / 2**20)
    # quality proxy against the same weights in float32: close, not identical
    assert evidence["quality_reference"] == "the same weights computed in float32"
    assert 0.5 <= evidence["top1_agreement"] <= 1 and 0 < evidence["kl_nats"] < 0.01
    from infermeter.knobs.base import KnobNotApplied

    with pytest.raises(KnobNotApplied, match="dtype=int8 but the weights are stored as"):
        KNOBS["dtype"].verify(lm, "int8", None)


@pytest.fixture(scope="module")
def tiny_llava():
    from infermeter import load_model

    return load_model("tiny-llava", device="cpu")


@pytest.mark.parametrize("tokens", [16, 144])
def test_vision_tokens_change_the_image_tokens_and_the_vision_time(tiny_llava, tokens):
    knob = KNOBS["vision_tokens"]
    knob.check(tokens, tiny_llava)
    before = tiny_llava.info.vision.tokens_per_image
    with knob.apply(tiny_llava, tokens) as applied:
        evidence = knob.verify(tiny_llava, tokens, None, applied)
        run = profile(
            RunConfig(
                model="tiny-llava",
                prompt_tokens=16,
                new_tokens=3,
                samples=1,
                energy="off",
                mode="standard",
            ),
            loaded=tiny_llava,
        )
    assert evidence == {"vision_tokens": tokens, "image_size": int(tokens**0.5) * 8}
    assert run.samples[-1].vision_tokens == tokens
    phases = {r["phase"] for r in run.layers["parts"]}
    assert {"vision", "prefill", "decode"} <= phases
    assert tiny_llava.info.vision.tokens_per_image == before  # restored


@pytest.mark.parametrize(
    "value,loaded_name,needle",
    [
        (15, "tiny_llava", "not a square number"),
        (16, "tiny_llama", "no vision tower"),
    ],
)
def test_vision_tokens_refuses_what_cannot_work(request, value, loaded_name, needle):
    with pytest.raises(UserError, match=needle):
        KNOBS["vision_tokens"].check(value, request.getfixturevalue(loaded_name))
