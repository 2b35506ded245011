"""Per-part time under torch.compile: kernels read from the compiled program, charged to modules.

The pure parts (names, module paths, call order, matching, charging) on hand-made inputs; one
real compiled run of tiny-llama in standard mode, with the compile checks that need one.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from infermeter.instrument.compiled import (
    STEP_RANGE,
    KernelCall,
    align,
    charge,
    event_name,
    module_path,
    module_spans,
    profiler_name,
    program_calls,
    step_kernels,
)


def test_module_paths_drop_dynamos_local_names():
    """Dynamo names a node's module from the compiled function's locals, in two spellings."""
    new = {"a": ("L['args'][0].model", object), "b": ("L['args'][0].model.layers.0.mlp", object)}
    assert module_path(new) == "model.layers.0.mlp"
    old = {"a": ("L['self']._modules['model']._modules['layers']._modules['1'].self_attn", 0)}
    assert module_path(old) == "model.layers.1.self_attn"
    assert module_path(None) == "" and module_path({}) == ""


def test_kernel_names_as_the_profiler_shows_them():
    assert profiler_name("extern_kernels.mm") == "aten::mm"
    assert profiler_name("extern_kernels.addmm") == "aten::addmm"
    sdpa = "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default"
    assert profiler_name(sdpa) == "aten::_scaled_dot_product_flash_attention_for_cpu"
    assert profiler_name("cpp_fused_add_mean_0") == "cpp_fused_add_mean_0"
    assert event_name("graph_12_cpp_fused_add_mean_0") == "cpp_fused_add_mean_0"
    assert event_name("aten::mm") == "aten::mm"


def test_program_calls_follow_the_call_handles_not_the_text_order():
    nodes = {
        "mm": ("model.layers.0.self_attn.q_proj",),
        "mean": ("model.layers.0.input_layernorm", "model.layers.0.input_layernorm"),
    }
    mapping = {
        "extern_kernels.mm:10": ["mm"],
        "cpp_fused_mean_0:9": ["mean", "unknown"],
        "extern_kernels.mm:2": ["mm"],
        "no handle": ["mm"],
    }
    calls = program_calls(mapping, nodes)
    assert [c.name for c in calls] == ["aten::mm", "cpp_fused_mean_0", "aten::mm"]
    assert calls[1].modules == ("model.layers.0.input_layernorm",) * 2 + ("",)


def test_profiled_calls_align_in_order_past_allocations():
    program = [KernelCall("k0", ()), KernelCall("aten::mm", ()), KernelCall("k0", ())]
    names = ["aten::empty", "k0", "aten::mm", "aten::as_strided", "k0", "aten::mm"]
    assert align(names, program) == [None, 0, 1, None, 2, None]


def test_a_kernel_goes_to_the_module_most_of_its_operations_come_from_and_its_block():
    registered = {
        "model.layers.0": 1,
        "model.layers.0.self_attn": 2,
        "model.layers.0.mlp": 3,
        "model.layers.1": 4,
        "model.layers.1.input_layernorm": 5,
        "lm_head": 6,
    }
    parents = {1: [], 2: [1], 3: [1], 4: [], 5: [4], 6: []}
    # a residual add of block 0 fused with block 1's norm: the norm has most operations
    fused = ("model.layers.0", "model.layers.1.input_layernorm", "model.layers.1.input_layernorm")
    assert charge(fused, registered, parents) == ([5, 4], True)
    proj = ("model.layers.0.self_attn.q_proj",)  # below a registered module: its owner
    assert charge(proj, registered, parents) == ([2, 1], False)
    assert charge(("lm_head",), registered, parents) == ([6], False)
    assert charge(("model", ""), registered, parents) == ([], False)  # the model's own glue


def test_a_modules_time_is_its_runs_of_kernels_and_parts_nest_in_their_block():
    """Work between one module's kernels is that module's; between two modules', neither's."""
    registered = {"b": 1, "b.attn": 2, "b.mlp": 3, "head": 4}
    parents = {1: [], 2: [1], 3: [1], 4: []}
    calls = [
        (KernelCall("q", ("b.attn",)), 0.0, 2.0),
        (KernelCall("sdpa", ("b.attn",)), 3.0, 4.0),  # 1 us of glue inside attention
        (KernelCall("up", ("b.mlp",)), 10.0, 5.0),  # 3 us between attention and the MLP
        (KernelCall("glue", ("",)), 15.0, 1.0),  # a kernel of no module: ends every run
        (KernelCall("down", ("b.mlp",)), 16.0, 2.0),
        (KernelCall("lm", ("head",)), 20.0, 3.0),
    ]
    spans = module_spans(calls, registered, parents)
    assert spans.times[2] == (0.0, 7.0)
    assert spans.times[3] == (10.0, 7.0)
    assert spans.times[1] == (0.0, 15.0 + 2.0)  # the block: 0-15, then 16-18
    assert spans.times[4] == (20.0, 3.0)
    assert spans.kernel_us == 2 + 4 + 5 + 2 + 3 and spans.fused_us == 0
    for part in (2, 3):  # a part's synthesized record ends inside its block's
        start, total = spans.times[part]
        assert start + total <= spans.times[1][0] + spans.times[1][1] + 1  # (block: 0 + 17)


def _ev(name, start, end, children=()):
    return SimpleNamespace(
        name=name, time_range=SimpleNamespace(start=start, end=end), cpu_children=list(children)
    )


def test_each_forward_is_matched_to_the_program_it_ran():
    """A prefill and a decode program; each step's compiled call picks the one whose every
    kernel it ran, and a call that matches none is counted, not guessed."""
    prefill = [KernelCall("k_big", ("model.layers.0.mlp",)), KernelCall("aten::mm", ("lm_head",))]
    decode = [KernelCall("k_small", ("model.layers.0.mlp",)), KernelCall("aten::mm", ("lm_head",))]

    def step(i, t0, kernel):
        call = _ev(
            "## Call CompiledFxGraph abc ##",
            t0 + 2,
            t0 + 30,
            [
                _ev(f"graph_0_{kernel}", t0 + 3, t0 + 13),
                _ev("aten::empty", t0 + 13, t0 + 14),
                _ev("aten::mm", t0 + 14, t0 + 29, [_ev("aten::resolve_conj", t0 + 15, t0 + 16)]),
            ],
        )
        region = _ev("Torch-Compiled Region: 0/0", t0 + 1, t0 + 31, [call])
        return _ev(f"{STEP_RANGE}{i}", t0, t0 + 32, [region])

    strange = _ev(
        f"{STEP_RANGE}2",
        100,
        120,
        [_ev("## Call CompiledFxGraph x ##", 101, 119, [_ev("graph_1_other", 102, 118)])],
    )
    events = [step(0, 0, "k_big"), step(1, 40, "k_small"), strange, _ev("aten::add", 0, 1)]
    got = step_kernels(events, [prefill, decode])
    assert [g.step for g in got] == [0, 1, 2]
    assert [(c.name, start, dur) for c, start, dur in got[0].calls] == [
        ("k_big", 3, 10),
        ("aten::mm", 14, 15),
    ]
    assert got[1].calls[0][0] is decode[0]
    assert got[0].call_us == 28 and got[0].events == 6 and got[0].unmatched == 0
    assert got[2].calls == [] and got[2].unmatched == 1


@pytest.mark.slow
def test_a_compiled_run_times_blocks_and_parts_from_its_kernels(tiny_llama):
    """One compiled run in standard mode (the CUDA-graphs mode: on a CPU the same compile as
    `True`, plus its note; compiling twice cost the suite 10-60 s for the same path).

    Nothing is wrapped inside the compiled forward; every block and its parts get their time
    from the kernels made from them, every compiled call is matched, the kernels' sum lies
    within the forwards' time and is most of it, and the run prices its profiler events."""
    from infermeter import RunConfig, profile
    from infermeter.knobs.compile import cuda_graphs_note

    cfg = RunConfig(
        prompt_tokens=8,
        new_tokens=4,
        samples=2,
        warmup=0,
        compile="reduce-overhead",
        mode="standard",
    )
    from torch._inductor import compile_fx

    earlier = [next(compile_fx._graph_counter) for _ in range(20)]  # graphs compiled before
    run = profile(cfg, loaded=tiny_llama)
    # numbered from 0 again, as in a fresh process: the kernels' names (graph_N_...) and so
    # inductor's code-cache keys do not depend on what the process compiled before
    assert next(compile_fx._graph_counter) < len(earlier)
    assert run.samples[0].warmup  # compile forces one warm-up: the cold call
    assert run.phases["compile_first_call_ms"] > run.summary()["total_ms"].mean
    assert run.phases["compile_ms"] > 0
    assert "forward" not in tiny_llama.model.__dict__  # undone after the run
    assert [n for n in run.notes if "CUDA graphs" in n] == [  # the CUDA-graphs mode, on a CPU
        "torch.compile mode reduce-overhead records CUDA graphs only on CUDA devices: on "
        "cpu it compiled without them"
    ]
    assert run.config["compile"] == "reduce-overhead"
    assert cuda_graphs_note(True, "cpu") is None
    assert cuda_graphs_note("reduce-overhead", "cuda") is None
    assert not [n for n in run.notes if "split its graph" in n]  # a CPU's kernels, no hooks

    rows = run.layers["layers"]
    decode_steps = sum(len(s.step_ms) for s in run.measured)
    for part in ("block", "attention", "mlp", "norm"):
        layers = {r["layer"] for r in rows if r["kind"] == part and r["phase"] == "decode"}
        assert layers == {0, 1, 2, 3}, part
    blocks = [r for r in rows if r["kind"] == "block" and r["phase"] == "decode"]
    assert all(r["calls"] == decode_steps for r in blocks)  # one record per block per step
    parts = run.layers["parts"]
    for phase in ("prefill", "decode"):
        mine = {r["part"]: r["total_ms"] for r in parts if r["phase"] == phase}
        charged = sum(
            mine.get(k, 0.0) for k in ("embeddings", "rotary", "block", "final_norm", "lm_head")
        )
        # the kernels lie inside the forwards; the rest is "other"
        assert 0 < charged < mine["forward"], phase
        assert charged + mine["other"] == pytest.approx(mine["forward"], rel=1e-6)
    notes = [n for n in run.notes if n.startswith("under torch.compile, decode:")]
    assert len(notes) == 1 and "matched no captured program" not in notes[0], run.notes
    # and they are most of the compiled program's own time, not of the whole forward: over
    # these few steps, charged was 56-62% of decode's forwards idle but 30% once in a whole
    # suite's run, and the forward also holds torch.compile's entry (guards, cache look-up)
    for phase in ("prefill", "decode"):
        (note,) = [n for n in run.notes if n.startswith(f"under torch.compile, {phase}:")]
        shares = re.search(
            r": (\d+)% of the forward's time charged.*between modules \((\d+)%\)", note
        )
        assert shares is not None, note
        charged_pct, between_pct = (int(x) for x in shares.groups())
        assert charged_pct >= 0.6 * (charged_pct + between_pct), note
    assert any("block output statistics" in n and "off" in n for n in run.notes)
    cost = run.instrument_cost
    assert cost is not None and cost.unit == "profiler events"
    assert cost.windows_per_decode_step > 4 * 7  # at least a projection a part of every block
    assert "profiler events" in cost.line()


def test_hooked_per_module_times_under_compile_off_the_cpu_are_said_to_be():
    """On CUDA (and any device but the CPU) the profiler's hooks still sit inside a compiled
    forward and split its graph: a run says so beside its per-module times (issue 57)."""
    from infermeter.knobs.compile import hooked_compile_note

    note = hooked_compile_note("reduce-overhead", True, "cuda")
    assert note is not None and "split its graph" in note and "on cuda" in note
    assert hooked_compile_note(True, True, "mps") is not None
    assert hooked_compile_note(True, True, "cpu") is None  # kernels, no hooks inside
    assert hooked_compile_note(True, False, "cuda") is None  # minimal mode: no hooks
    assert hooked_compile_note(False, True, "cuda") is None  # eager
