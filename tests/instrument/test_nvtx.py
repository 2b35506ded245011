"""NVTX ranges: nested as samples > phases > blocks > parts, named as the tables name them."""

from __future__ import annotations

import pytest

from infermeter import RunConfig, profile
from infermeter.errors import UserError
from infermeter.instrument import nvtx as nvtx_module
from infermeter.instrument.nvtx import NvtxRanges
from infermeter.run import profiling


class Recorder:
    """torch.cuda.nvtx's push/pop, kept as (depth, name) with every pop checked."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.opened: list[tuple[int, str]] = []

    def range_push(self, msg: str) -> int:
        self.opened.append((len(self.stack), msg))
        self.stack.append(msg)
        return len(self.stack) - 1

    def range_pop(self) -> int:
        assert self.stack, "pop without a push"
        self.stack.pop()
        return len(self.stack)


def test_a_profile_nests_its_ranges_and_names_them_as_its_tables(tiny_llama, monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(profiling, "cuda_nvtx", lambda: rec)
    monkeypatch.setattr(nvtx_module, "cuda_nvtx", lambda: rec)
    cfg = RunConfig(prompt_tokens=8, new_tokens=3, samples=2, warmup=1, mode="standard", nvtx=True)
    run = profile(cfg, loaded=tiny_llama)
    assert rec.stack == []  # every range closed
    tops = [name for depth, name in rec.opened if depth == 0]
    assert tops == ["warmup 0", "sample 1", "sample 2"]  # the samples table's indices
    phases = [name for depth, name in rec.opened if depth == 1]
    assert phases == ["prefill", "decode", "decode"] * 3
    named = {name for depth, name in rec.opened if depth >= 2}
    table = {r["name"] for r in run.layers["layers"] if r["kind"] not in ("forward",)}
    table = {n for n in table if not n.startswith("generate.")}  # windows, not modules
    assert table and table <= named
    blocks = [name for depth, name in rec.opened if depth == 2 and name.endswith(".3")]
    assert blocks == ["model.layers.3"] * 9  # one per forward, at the block level
    assert "forward" not in tiny_llama.model.__dict__  # every wrapper removed
    assert all("forward" not in b.__dict__ for b in tiny_llama.model.model.layers)


def test_under_compile_only_samples_and_phases_are_marked(tiny_llama):
    rec = Recorder()
    ranges = NvtxRanges(tiny_llama.model, backend=rec, modules=False)
    ranges.attach()
    try:
        import torch

        ids = torch.tensor([[1, 2, 3, 4]])
        tiny_llama.model.generate(
            input_ids=ids, max_new_tokens=2, min_new_tokens=2, do_sample=False
        )
    finally:
        ranges.detach()
    assert [name for _depth, name in rec.opened] == ["prefill", "decode"]


def test_nvtx_without_cuda_is_refused_before_the_model_loads():
    cfg = RunConfig(model="no-such-model-anywhere", nvtx=True)
    with pytest.raises(UserError, match="--nvtx needs a CUDA device"):
        profile(cfg)
