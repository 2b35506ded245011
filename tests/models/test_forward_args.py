"""Phase detection from what a forward is given, under every name the cache argument has had.

transformers 5.24 renamed `past_key_values` to `cache`; the profiler read the old name and
labelled every decode step prefill. These tests call real models both ways, so the next rename
fails here rather than in a user's numbers.
"""

import functools
import warnings

import pytest
import torch
from transformers import DynamicCache

from infermeter.instrument import Profiler, ProfilingConfig
from infermeter.models.forward_args import (
    CACHE_ARG_NAMES,
    cache_arg_name,
    cache_of,
    forward_phase,
    past_tokens,
    with_cache,
)


def _prefilled(lm, tokens=5):
    """A real cache after a real prefill of `tokens` tokens, and the next token."""
    ids = torch.arange(1, tokens + 1).unsqueeze(0)
    with torch.inference_mode():
        out = lm.model(input_ids=ids, **with_cache(lm.model, DynamicCache(), use_cache=True))
    return cache_of(out), out.logits[:, -1:].argmax(-1)


@pytest.mark.parametrize("name", CACHE_ARG_NAMES)
def test_a_filled_cache_under_any_name_is_decode(tiny_llama, name):
    cache, _ = _prefilled(tiny_llama, tokens=5)
    assert past_tokens({name: cache}) == 5
    assert forward_phase({name: cache}) == "decode"
    assert forward_phase({name: DynamicCache()}) == "prefill"


def test_positions_decide_where_no_cache_is_given():
    assert forward_phase({}) == "prefill"
    assert forward_phase({"cache_position": torch.tensor([7])}) == "decode"
    assert past_tokens({"cache_position": torch.tensor([7])}) == 7
    assert forward_phase({"position_ids": torch.tensor([[0, 1, 2, 3]])}) == "prefill"
    # left padding: the padded row's positions start at 1, the longest row's at 0
    assert forward_phase({"position_ids": torch.tensor([[1, 1, 0, 1], [0, 1, 2, 3]])}) == "prefill"
    assert forward_phase({"position_ids": torch.tensor([[9], [12]])}) == "decode"


def test_a_cache_that_cannot_say_its_length_falls_back_to_positions():
    class Opaque:
        def get_seq_length(self):
            raise NotImplementedError

    kw = {"cache": Opaque(), "cache_position": torch.tensor([4])}
    assert forward_phase(kw) == "decode"
    assert forward_phase({"cache": Opaque()}) == "prefill"


def test_the_cache_name_is_read_from_the_forward_signature():
    def old(input_ids=None, past_key_values=None, **kwargs): ...

    def ssm(input_ids=None, cache_params=None, **kwargs): ...

    def new(input_ids=None, cache=None, **kwargs): ...

    @functools.wraps(new)
    def deprecated(*args, **kwargs):  # what transformers' deprecate_kwarg wraps forwards in
        return new(*args, **kwargs)

    assert cache_arg_name(old) == "past_key_values"
    assert cache_arg_name(ssm) == "cache_params"
    assert cache_arg_name(deprecated) == "cache"
    assert cache_arg_name(lambda **kw: None) == "cache"


def test_our_own_calls_use_the_installed_name_and_warn_nothing(tiny_llama):
    import inspect

    params = inspect.signature(tiny_llama.model.forward).parameters
    assert cache_arg_name(tiny_llama.model) in params
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a deprecated argument name would raise here
        cache, nxt = _prefilled(tiny_llama)
        with torch.inference_mode():
            tiny_llama.model(input_ids=nxt, **with_cache(tiny_llama.model, cache, use_cache=True))
    assert cache.get_seq_length() == 6


@pytest.mark.parametrize("name", ["cache", "past_key_values"])
def test_the_profiler_labels_decode_whichever_name_carries_the_cache(tiny_llama, name):
    """5.24's generate passes `cache=`, 5.23's `past_key_values=`: both are decode steps."""
    cache, nxt = _prefilled(tiny_llama)
    profiler = Profiler(tiny_llama.model, ProfilingConfig.standard())
    with profiler as prof, torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the old name, on a new release
        tiny_llama.model(input_ids=torch.arange(1, 6).unsqueeze(0), use_cache=True)
        for _ in range(3):
            out = tiny_llama.model(input_ids=nxt, use_cache=True, **{name: cache})
            nxt = out.logits[:, -1:].argmax(-1)
    steps = prof.result().steps
    assert [s.phase for s in steps] == ["prefill", "decode", "decode", "decode"]
    assert [s.decode_index for s in steps[1:]] == [0, 1, 2]


def test_generate_on_the_installed_release_has_decode_rows(tiny_llama):
    ids = torch.arange(1, 9).unsqueeze(0)
    profiler = Profiler(tiny_llama.model, ProfilingConfig.standard())
    with profiler as prof, torch.inference_mode():
        tiny_llama.model.generate(input_ids=ids, max_new_tokens=5, min_new_tokens=5)
    lp = prof.result()
    assert [s.phase for s in lp.steps] == ["prefill"] + ["decode"] * 4
    layers = lp.layers()
    blocks = layers[(layers["phase"] == "decode") & (layers["kind"] == "block")]
    assert len(blocks) == tiny_llama.model.config.num_hidden_layers
    assert (blocks["calls"] == 4).all()
