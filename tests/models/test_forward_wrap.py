"""Timing by a wrapped forward: undone exactly, safe when stacked, and what inspection sees."""

import inspect

import pytest
import torch

from infermeter.instrument import Profiler, ProfilingConfig
from infermeter.models.forward_wrap import ForwardWrap


def test_remove_restores_the_class_method_and_an_earlier_instance_forward():
    lin = torch.nn.Linear(4, 4)
    calls = []
    w = ForwardWrap(lin, lambda inner, a, k: calls.append(1) or inner(*a, **k))
    lin(torch.zeros(1, 4))
    assert calls == [1] and "forward" in lin.__dict__
    w.remove()
    assert "forward" not in lin.__dict__  # the class's method again
    earlier = lin.forward  # an instance forward set by somebody else (accelerate does this)
    lin.forward = lambda x: earlier(x) * 2
    mine = lin.forward
    w = ForwardWrap(lin, lambda inner, a, k: inner(*a, **k))
    w.remove()
    assert lin.__dict__["forward"] is mine


def test_wrapped_over_by_someone_else_ours_passes_calls_on():
    lin = torch.nn.Linear(4, 4)
    seen = []
    ours = ForwardWrap(lin, lambda inner, a, k: seen.append("ours") or inner(*a, **k))
    theirs_inner = lin.forward
    lin.forward = lambda x: seen.append("theirs") or theirs_inner(x)
    ours.remove()
    lin(torch.zeros(1, 4))
    assert seen == ["theirs"]  # theirs kept, ours silent


def test_signature_is_the_real_forwards():
    from infermeter import load_model

    lm = load_model("tiny-llama", device="cpu")
    block = lm.model.model.layers[0]
    before = inspect.signature(block.forward)
    with Profiler(lm.model, ProfilingConfig.standard()):
        assert inspect.signature(block.forward) == before
    assert "forward" not in block.__dict__


def test_a_call_that_raises_is_timed_and_the_model_left_clean():
    from infermeter import load_model

    lm = load_model("tiny-llama", device="cpu")
    mlp = lm.model.model.layers[0].mlp  # the class is patched: the first MLP raises
    original = type(mlp).forward

    def boom(self, *a, **k):
        raise RuntimeError("boom")

    type(mlp).forward = boom  # before attach: the wrapper wraps the raising forward
    try:
        prof = Profiler(lm.model, ProfilingConfig.standard())
        with prof, pytest.raises(RuntimeError, match="boom"):
            lm.model(input_ids=torch.randint(0, lm.info.vocab, (1, 8)))
    finally:
        type(mlp).forward = original
    mid = next(m.mid for m in prof.modules if m.name == "model.layers.0.mlp")
    timed = [prof.timing.mids[i] for i in range(prof.timing.count)]
    assert mid in timed  # the call that raised still has its record
    assert not any("forward" in m.__dict__ for m in lm.model.modules())
