"""compile: torch.compile the forward (off, on, or a mode); verified by a measured cold first call.

`reduce-overhead` is the CUDA-graphs value: torch records the decode step's kernels once and
replays them, removing the per-kernel launch cost that dominates small-batch decode on a GPU.
CUDA graphs exist only on CUDA devices; elsewhere torch compiles without them, and the record
says so.

On CUDA the graph modes need `--cache static` (`check_cuda_graphs`): a replay overwrites the
outputs a dynamic cache keeps, seen on an H100. Over the static cache they are handed to generate
as its `CompileConfig` (it compiles the decode step, prefill eager; wrapping the forward from
outside failed on an H100), and every other generate runs with `disable_compile=True`, since
transformers otherwise compiles a static-cache decode on a GPU by itself and "eager" would be
CUDA graphs.
"""

from __future__ import annotations

import itertools
from typing import Any

from infermeter.errors import UserError
from infermeter.knobs.base import Knob, KnobNotApplied, parse_bool
from infermeter.knobs.evidence import KnobCheckDoc
from infermeter.models.loader import LoadedModel

#: torch.compile's modes ("reduce-overhead" records CUDA graphs; on a CPU it runs without them)
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def parse_compile(text: str) -> bool | str:
    """off/on (torch's default mode) or a mode name: reduce-overhead, max-autotune, ..."""
    value = str(text).strip().lower()
    if value in COMPILE_MODES:
        return value
    try:
        return parse_bool("compile")(value)
    except UserError:
        raise UserError(
            f"compile={text!r} is not on, off or a torch.compile mode",
            f"use compile=off, on or one of {', '.join(COMPILE_MODES)}",
        ) from None


def cuda_graphs_note(mode: bool | str, device_type: str) -> str | None:
    """Why a CUDA-graphs mode ran without graphs, or None."""
    if mode in GRAPH_MODES and device_type != "cuda":
        return (
            f"torch.compile mode {mode} records CUDA graphs only on CUDA devices: on "
            f"{device_type} it compiled without them"
        )
    return None


def hooked_compile_note(mode: bool | str, hooks: bool, device_type: str) -> str | None:
    """What a compiled run's per-module times are worth where they come from hooks, or None.

    On a CPU the blocks and parts of a compiled forward are timed from its kernels, with
    nothing inside it (instrument/compiled.py). Elsewhere that path is not built: the
    profiler's hooks sit inside the forward, each one splits the compiled graph, and the run
    times many small graphs (and, in a CUDA-graphs mode, no graph replay) rather than the
    program the user compiles. The numbers are kept, with this said beside them.
    """
    if not mode or not hooks or device_type == "cpu":
        return None
    return (
        f"per-module times under torch.compile on {device_type} come from hooks inside the "
        "compiled forward, which split its graph: they describe a less fused program than "
        "the one compiled; the run's TTFT and TPOT need no hooks (--mode minimal)"
    )


#: the modes whose compiled forward replays CUDA graphs (on CUDA devices)
GRAPH_MODES = ("reduce-overhead", "max-autotune")


def check_cuda_graphs(mode: bool | str, cache: str, device_type: str) -> None:
    """Refuse, in one line with the fix, CUDA graphs over a KV cache that grows each step.

    A replayed graph writes its outputs into buffers it owns and overwrites them on the next
    replay. A dynamic cache keeps each step's keys and values as such outputs, so the next
    step reads overwritten memory: torch stops the run with "accessing tensor output of
    CUDAGraphs that has been overwritten" (seen on an H100, torch 2.11, transformers 5.24). A
    static cache is allocated once and written in place, which is what graphs need (and what
    transformers' own compiled generation uses).
    """
    if mode in GRAPH_MODES and device_type == "cuda" and cache != "static":
        raise UserError(
            f"--compile-mode {mode} replays CUDA graphs, which overwrite their outputs on each "
            f"replay: a {cache} KV cache keeps those outputs from step to step",
            "add --cache static (allocated once, written in place), or use --compile-mode "
            "default or max-autotune-no-cudagraphs",
        )


def generate_compiles(mode: bool | str, cache: str, device_type: str) -> str | None:
    """The torch.compile mode transformers' generate is to apply itself, or None.

    CUDA graphs work over a static cache only when generate compiles the decode step itself
    (prefill stays eager): wrapping the forward from outside, torch 2.11 stopped on an H100
    with "accessing tensor output of CUDAGraphs that has been overwritten" (the cache's
    `cumulative_length`, written in place between replays). Every other form is compiled by
    wrapping the forward, prefill included.
    """
    if mode in GRAPH_MODES and device_type == "cuda" and cache == "static":
        return str(mode)
    return None


def compile_note(mode: bool | str, cache: str, device_type: str) -> str | None:
    """What was compiled, where that differs from the whole forward."""
    handed = generate_compiles(mode, cache, device_type)
    if handed:
        return (
            f"torch.compile mode {handed}: transformers' generate compiled the decode step "
            "(CUDA graphs over the static cache); the prefill ran eager"
        )
    return None


def compile_notes(mode: bool | str, cache: str, device_type: str, hooks: bool = False) -> list[str]:
    """The run's notes on what compilation did.

    CUDA graphs absent off CUDA, generate's own compile, and per-module times that come from
    hooks inside the compiled forward (`hooks`: the run's mode times modules).
    """
    notes = (
        cuda_graphs_note(mode, device_type),
        compile_note(mode, cache, device_type),
        hooked_compile_note(mode, hooks, device_type),
    )
    return [n for n in notes if n]


def _verify_compile(
    loaded: LoadedModel, value: bool | str, result: Any, applied: Any = None
) -> KnobCheckDoc:
    if not value:
        return {"compiled": False}
    cold = result.phases.get("compile_first_call_ms")
    if cold is None:
        raise KnobNotApplied("compile=on but no cold first call was measured")
    warm = [s.total_ms for s in result.measured]
    return {
        "compiled": True,
        "mode": "default" if value is True else value,
        "cuda_graphs": value in GRAPH_MODES and result.device.get("type") == "cuda",
        "cold_first_call_ms": cold,
        "warm_call_ms": sum(warm) / len(warm) if warm else None,
        "cold_over_warm": cold / (sum(warm) / len(warm)) if warm else None,
    }


COMPILE = Knob(
    "compile",
    "torch.compile the forward: off, on, or a mode (reduce-overhead = CUDA graphs, "
    "max-autotune); cold first call and warm calls apart",
    "config",
    parse_compile,
    verify=_verify_compile,
    field="compile",
)


def restart_graph_numbering() -> None:
    """Number the next compiled run's inductor graphs from 0, as a fresh process would.

    Why: with kernel profiling on (a compiled run in standard or deep mode names each C++
    kernel `graph_N_...` for its per-block attribution), inductor's process-wide graph counter
    put N into the kernel's source. The same graph compiled after other graphs, later in a
    sweep or in another process, then missed inductor's code cache and went through the C++
    compiler again (37 kernels in one run of the test suite here). Call it after
    `torch._dynamo.reset()`, when no earlier graph is in use; a torch without the counter is
    left as it is.
    """
    try:
        from torch._inductor import compile_fx
    except ImportError:
        return
    if hasattr(compile_fx, "_graph_counter"):
        compile_fx._graph_counter = itertools.count(0)
