"""Per-part time of a torch.compile'd forward, read from the compiled program's own kernels.

Why: module hooks inside a compiled forward break its graph (dynamo stops at each clock read), so
a hooked run times many small graphs, not the program the user compiles, and the field's trace
tools see one opaque compiled region. Here nothing is hooked inside the forward. The forward is
compiled by inductor as `torch.compile(mode=...)` would, through a backend that first notes each
dynamo graph node's module (`nn_module_stack`). Inductor is asked to track which of those nodes
each kernel call of the generated program was made from (its provenance tracking, published on
torch's structured compile trace on a fresh compile and on a cache hit alike) and to name its C++
kernels in torch.profiler (`cpp.enable_kernel_profile`). During measured samples torch.profiler
records each forward's kernel calls; they are matched, in order, to the program's list, and each
call's time is charged to the module most of its operations come from. A kernel that fuses
operations of two parts (a residual add with the next block's norm) is charged to the part most
of its operations belong to, and the share of time in such kernels is stated. What matches no
kernel (buffer allocation, the wrapper's Python) and torch.compile's entry (guards, cache
look-up) stay unattributed: the tables' "other", each share stated.

CPU only in this version: CUDA kernels run asynchronously and would need the device activity's
kernel records.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: the profiler's name of the range each instrumented forward runs in (the step follows)
STEP_RANGE = "infermeter.step."
#: torch's structured compile trace (TORCH_TRACE's logger) and inductor's provenance artifact
TRACE_LOGGER = "torch.__trace"
PROVENANCE_ARTIFACT = "inductor_provenance_tracking_node_mappings"
_CALL_PREFIX = "## Call CompiledFxGraph"
_GRAPH_PREFIX = re.compile(r"^graph_\d+_")
_LOCAL_PREFIX = re.compile(r"^L\[[^\]]*\](\[[^\]]*\])*\.?")
_MODULES_KEY = re.compile(r"\._modules\['([^']*)'\]")


@dataclass(frozen=True)
class KernelCall:
    """One kernel call of a compiled program, in the order the program makes them.

    Attributes:
        name: as torch.profiler names the call ("cpp_fused_add_mean_0", "aten::mm").
        modules: the module path of each FX node the kernel was made from ("" for none).
    """

    name: str
    modules: tuple[str, ...]


@dataclass
class StepKernels:
    """The matched kernel calls of one forward: (kernel, start us from the forward, us)."""

    step: int
    start_us: float
    calls: list[tuple[KernelCall, float, float]] = field(default_factory=list)
    #: time inside the compiled program's calls (its kernels, allocations and wrapper code;
    #: not torch.compile's entry: guards, cache look-up)
    call_us: float = 0.0
    #: profiler events of the forward (each one cost the profiler a record)
    events: int = 0
    #: compiled calls whose kernels matched none of the captured programs
    unmatched: int = 0


@dataclass
class CompiledTally:
    """One phase's attribution under torch.compile, summed over its instrumented forwards."""

    steps: int = 0
    #: the forwards' wall time, the compiled program's calls in it, the time charged to
    #: top-level modules (their kernels and the work between a module's kernels), and the
    #: matched kernels' own time (all, and those fusing two parts' operations), in us
    forward_us: float = 0.0
    call_us: float = 0.0
    charged_us: float = 0.0
    kernel_us: float = 0.0
    fused_us: float = 0.0
    #: profiler events recorded (what the recording cost: instrument/cost.py prices one)
    events: int = 0
    #: compiled calls whose kernels matched no captured program
    unmatched: int = 0


def profiler_name(kernel: str) -> str:
    """The profiler's name of a provenance entry's kernel ("extern_kernels.mm": aten::mm)."""
    if kernel.startswith("extern_kernels."):
        return "aten::" + kernel.split(".", 1)[1]
    if kernel.startswith("torch.ops."):
        parts = kernel.split(".")
        if len(parts) >= 4:
            return f"{parts[2]}::{parts[3]}"
    return kernel


def event_name(name: str) -> str:
    """A profiler event's kernel name without inductor's graph prefix ("graph_0_cpp_..." ...)."""
    return _GRAPH_PREFIX.sub("", name)


def module_path(stack: Any) -> str:
    """The innermost module of an FX node's `nn_module_stack` as a dotted path ("" for none).

    Dynamo names it from the compiled function's locals ("L['args'][0].model.layers.0.mlp",
    "L['self']._modules['model']..." in older releases); the local's part is dropped.
    """
    if not isinstance(stack, dict) or not stack:
        return ""
    value = list(stack.values())[-1]
    path = value[0] if isinstance(value, tuple) and value else value
    if not isinstance(path, str):
        return ""
    return _LOCAL_PREFIX.sub("", _MODULES_KEY.sub(r".\1", path)).strip(".")


def program_calls(
    mapping: Mapping[str, Sequence[str]], nodes: Mapping[str, Sequence[str]]
) -> list[KernelCall]:
    """A compiled program's kernel calls, in call order, from inductor's provenance mapping.

    `mapping` keys are "kernel:handle" (the handle counts the program's kernel calls in the
    order they were generated) and its values the post-grad nodes each was made from; `nodes`
    maps a post-grad node to the module paths of the graph nodes it came from.
    """
    keyed: list[tuple[int, KernelCall]] = []
    for key, names in mapping.items():
        kernel, _, handle = key.rpartition(":")
        if not kernel or not handle.isdigit():
            continue
        mods = tuple(m for n in names for m in (nodes.get(str(n)) or ("",)))
        keyed.append((int(handle), KernelCall(profiler_name(kernel), mods)))
    return [call for _, call in sorted(keyed, key=lambda pair: pair[0])]


def align(names: Sequence[str], program: Sequence[KernelCall]) -> list[int | None]:
    """For each profiled call name, the index of the program's call it is (None: not a kernel).

    In-order matching: the program's calls appear in the profile in the same order, between
    events that are not kernels (allocations, views).
    """
    out: list[int | None] = []
    j = 0
    for name in names:
        if j < len(program) and program[j].name == name:
            out.append(j)
            j += 1
        else:
            out.append(None)
    return out


class CompileCapture:
    """Asks inductor for kernel provenance while a forward compiles, and reads it back.

    `install()` before the first compiled call (it sets inductor's provenance tracking and C++
    kernel naming, and listens to torch's structured compile trace, where inductor publishes
    each program's provenance on a fresh compile and on a cache hit alike); compile the forward
    with `backend(mode)`, which records each dynamo graph's nodes' modules before handing the
    graph to inductor as `torch.compile(mode=...)` would; `remove()` after the run. Each
    compiled program's calls land in `programs`.
    """

    def __init__(self) -> None:
        self.programs: list[list[KernelCall]] = []
        self._nodes: dict[str, str] = {}
        self._patches: list[Any] = []
        self._handler: Any = None
        #: why the capture could not be installed ("" when it was)
        self.failed = ""

    def install(self) -> None:
        """Set inductor's provenance tracking and kernel naming; listen to the compile trace."""
        if self._handler is not None:
            return
        try:
            import torch._inductor.config as inductor_config
        except ImportError as exc:  # a torch without inductor: totals only
            self.failed = f"torch's inductor could not be imported ({exc})"
            return
        try:
            patch = inductor_config.patch(
                {"trace.provenance_tracking_level": 1, "cpp.enable_kernel_profile": True}
            )
            patch.__enter__()
            self._patches.append(patch)
        except (AttributeError, KeyError, TypeError) as exc:  # a torch that moved a setting
            self.failed = f"this torch lacks an inductor setting attribution needs ({exc})"
            return
        self._handler = _TraceListener(self)
        logger = logging.getLogger(TRACE_LOGGER)
        logger.addHandler(self._handler)
        self._level = logger.level
        logger.setLevel(logging.DEBUG)

    def remove(self) -> None:
        """Undo `install` (idempotent)."""
        while self._patches:
            self._patches.pop().__exit__(None, None, None)
        if self._handler is not None:
            logger = logging.getLogger(TRACE_LOGGER)
            logger.removeHandler(self._handler)
            logger.setLevel(self._level)
            self._handler = None

    def backend(self, mode: str | None) -> RecordingBackend | None:
        """torch.compile's inductor backend for `mode`, recording each graph's node modules.

        None where this torch has no such wrapper: then compile with `mode` as usual and the
        kernels stay unattributed (the run says so).
        """
        import torch

        wrapper = getattr(torch, "_TorchCompileInductorWrapper", None)
        if wrapper is None:
            self.failed = "this torch does not expose inductor's compile wrapper"
            return None
        return RecordingBackend(wrapper(mode, None, None), self)

    def add_program(self, mapping: Any) -> None:
        """One compiled program's provenance, as inductor publishes it."""
        if not isinstance(mapping, dict):
            return
        kernels = mapping.get("cppCodeToPost")
        post_to_pre = mapping.get("postToPre") or {}
        if not isinstance(kernels, dict) or not kernels or not isinstance(post_to_pre, dict):
            return
        nodes = {
            str(post): tuple(self._nodes.get(str(p), "") for p in pres)
            for post, pres in post_to_pre.items()
            if isinstance(pres, list)
        }
        self.programs.append(program_calls(kernels, nodes))


class RecordingBackend:
    """Inductor's backend, after noting each dynamo graph node's module."""

    def __init__(self, inner: Any, capture: CompileCapture) -> None:
        self._inner = inner
        self._capture = capture

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        """Note the graph's node modules, then compile it as inductor does."""
        self._capture._nodes = {
            str(n.name): module_path(n.meta.get("nn_module_stack")) for n in gm.graph.nodes
        }
        return self._inner(gm, example_inputs)

    def __getattr__(self, name: str) -> Any:  # compiler_name, get_compiler_config, reset ...
        return getattr(self._inner, name)


class _TraceListener(logging.Handler):
    """Reads inductor's provenance artifacts off torch's structured compile trace."""

    def __init__(self, capture: CompileCapture) -> None:
        super().__init__(logging.DEBUG)
        self._capture = capture

    def emit(self, record: logging.LogRecord) -> None:
        try:
            meta = getattr(record, "metadata", None)
            artifact = meta.get("artifact") if isinstance(meta, dict) else None
            if isinstance(artifact, dict) and artifact.get("name") == PROVENANCE_ARTIFACT:
                self._capture.add_program(json.loads(str(getattr(record, "payload", ""))))
        except Exception:
            pass


def step_kernels(
    events: Iterable[Any], programs: Sequence[Sequence[KernelCall]]
) -> list[StepKernels]:
    """Each instrumented forward's kernel calls, matched to the compiled programs.

    `events` are torch.profiler FunctionEvents; a forward is the range named STEP_RANGE + its
    step. The compiled calls inside it are matched to whichever captured program accounts for
    most of their kernels (a prefill and a decode step run different programs).
    """
    out: list[StepKernels] = []
    cache: dict[tuple[str, ...], tuple[int, list[int | None]]] = {}
    for ev in events:
        name = str(ev.name)
        if not name.startswith(STEP_RANGE):
            continue
        step_start = float(ev.time_range.start)
        got = StepKernels(int(name[len(STEP_RANGE) :]), step_start)
        got.events = _count(ev)
        for call in _compiled_calls(ev):
            got.call_us += float(call.time_range.end) - float(call.time_range.start)
            children = sorted(call.cpu_children, key=lambda e: e.time_range.start)
            names = tuple(event_name(str(c.name)) for c in children)
            if names not in cache:
                cache[names] = _best(names, programs)
            which, matched = cache[names]
            if which < 0:
                got.unmatched += 1
                continue
            program = programs[which]
            for child, index in zip(children, matched, strict=True):
                if index is not None:
                    start = float(child.time_range.start) - step_start
                    dur = float(child.time_range.end) - float(child.time_range.start)
                    got.calls.append((program[index], start, dur))
        out.append(got)
    return out


def _best(
    names: Sequence[str], programs: Sequence[Sequence[KernelCall]]
) -> tuple[int, list[int | None]]:
    best, best_score = -1, 0
    best_matched: list[int | None] = [None] * len(names)
    for i, program in enumerate(programs):
        matched = align(names, program)
        score = sum(1 for m in matched if m is not None)
        if score > best_score and score == len(program):  # every kernel of it seen
            best, best_matched, best_score = i, matched, score
    return best, list(best_matched)


def _compiled_calls(event: Any) -> list[Any]:
    found: list[Any] = []
    stack = list(event.cpu_children)
    while stack:
        ev = stack.pop()
        if str(ev.name).startswith(_CALL_PREFIX):
            found.append(ev)
        else:
            stack.extend(ev.cpu_children)
    return sorted(found, key=lambda e: e.time_range.start)


def _count(event: Any) -> int:
    n, stack = 0, list(event.cpu_children)
    while stack:
        ev = stack.pop()
        n += 1
        stack.extend(ev.cpu_children)
    return n


def charge(
    modules: Sequence[str], registered: dict[str, int], parents: dict[int, list[int]]
) -> tuple[list[int], bool]:
    """The module ids a kernel's time is charged to, and whether it fuses two parts.

    Each node's module is the deepest registered module containing it; the kernel goes to the
    one most of its nodes have (ties: the first in the kernel's node order) and to that one's
    registered parents (its block).
    """
    owners: list[int] = []
    for path in modules:
        mid = _owner(path, registered)
        if mid is not None:
            owners.append(mid)
    if not owners:
        return [], False
    top = Counter(owners).most_common(1)[0][0]
    return [top, *parents.get(top, [])], len(set(owners)) > 1


@dataclass
class ModuleSpans:
    """One forward's time per module id: (first kernel's start us, us charged to it)."""

    times: dict[int, tuple[float, float]]
    #: matched kernels' own time, and that of those fusing two parts' operations (us)
    kernel_us: float
    fused_us: float


def module_spans(
    calls: Sequence[tuple[KernelCall, float, float]],
    registered: dict[str, int],
    parents: dict[int, list[int]],
) -> ModuleSpans:
    """Each module's time in one forward: the spans of its runs of consecutive kernels.

    A module's consecutive kernels (in the program's order) make one span, from the first's
    start to the last's end: the program's work between them (their outputs' allocation, its
    Python) is the module's, as a hooked eager module's time includes its own glue. Work
    between two modules' kernels is neither's: it stays in "other". A part's spans lie inside
    its block's, so the tables nest as they do for eager runs.
    """
    open_spans: dict[int, tuple[float, float]] = {}
    first: dict[int, float] = {}
    total: dict[int, float] = {}
    kernel_us = fused_us = 0.0

    def close(mid: int) -> None:
        start, end = open_spans.pop(mid)
        total[mid] = total.get(mid, 0.0) + (end - start)

    for call, start, dur in sorted(calls, key=lambda c: c[1]):
        mids, fused = charge(call.modules, registered, parents)
        end = start + dur
        if mids:
            kernel_us += dur
            fused_us += dur if fused else 0.0
        for mid in [m for m in open_spans if m not in mids]:
            close(mid)
        for mid in mids:
            began = open_spans[mid][0] if mid in open_spans else start
            open_spans[mid] = (began, end)
            first.setdefault(mid, start)
    for mid in list(open_spans):
        close(mid)
    return ModuleSpans({mid: (first[mid], total[mid]) for mid in total}, kernel_us, fused_us)


def _owner(path: str, registered: dict[str, int]) -> int | None:
    while path:
        if path in registered:
            return registered[path]
        path = path.rpartition(".")[0]
    return None
