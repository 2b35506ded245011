"""`Profiler`: hooks on any transformers model, per layer and per phase, removed on exit.

    with Profiler(model, ProfilingConfig.standard()) as prof:
        with prof.section("generate"):      # a user region, timed on the same clock
            model.generate(**inputs, max_new_tokens=32)
    tables = prof.result()          # per-layer DataFrames, and the sections

A forward pre-hook on the model itself starts each step: it reads the KV cache length to tell
prefill (empty cache) from decode, numbers the decode steps and decides whether this step is
instrumented (`sample_every`). Each chosen module's `forward` is wrapped (`models/forward_wrap.py`:
a seventh of a hook pair's cost) to mark the clock before and after every call, also one that
raises, into preallocated records; probes reduce statistics on the device. Nothing synchronises
the device until `result()`. Every wrapper and hook is removed and the attention implementation
restored on exit, also when the profiled code raises.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from infermeter.instrument import deep_attention
from infermeter.instrument.compiled import (
    STEP_RANGE,
    CompileCapture,
    CompiledTally,
    StepKernels,
    module_spans,
    step_kernels,
)
from infermeter.instrument.config import ProfilingConfig
from infermeter.instrument.probes import ActivationProbe, AttentionProbe, KillProbe, RoutingProbe
from infermeter.instrument.recorder import TimingRecorder
from infermeter.instrument.tables import LayerProfile, ModuleInfo, StepInfo
from infermeter.measure.clock import Clock, clock_for
from infermeter.measure.timer import Timer
from infermeter.models.architecture import Architecture, discover
from infermeter.models.forward_args import past_tokens
from infermeter.models.forward_wrap import ForwardWrap
from infermeter.util.native import native_stderr_silenced

if TYPE_CHECKING:
    import torch

    from infermeter.instrument.compiled import RecordingBackend
    from infermeter.measure.clock import Mark
    from infermeter.measure.timer import Section

_PHASE_INDEX = {"prefill": 0, "decode": 1}


class Profiler:
    """Per-layer and per-operation profiling of a transformers model.

    Args:
        model: any transformers model (decoder-only LM or vision-language model).
        config: what to instrument; `ProfilingConfig.standard()` by default.
        clock: the clock to mark with; the right one for the model's device by default.
        compiled: the forward is to run torch.compile'd (on a CPU): nothing is wrapped inside
            it; blocks and parts are timed from the compiled program's kernels
            (instrument/compiled.py), between `begin_sample` and `end_sample`.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        config: ProfilingConfig | None = None,
        clock: Clock | None = None,
        *,
        compiled: bool = False,
    ) -> None:
        self.model = model
        config = (config or ProfilingConfig.standard()).validate()
        self.compiled = compiled
        self._dropped = compiled and (config.capture_activations or config.deep_ops)
        if compiled:  # statistics probes and eager attention would break the compiled graph
            config = replace(config, capture_activations=False, deep_ops=False)
        self.config = config
        param = next(model.parameters())
        self.device = param.device
        self.clock = clock or clock_for(self.device)
        self.arch: Architecture = discover(model)
        self.enabled = True
        self.active = False
        self.probing = False  # statistics probes run on this step (probe_every)
        self.notes: list[str] = []
        self._handles: list[Any] = []
        self._attached = False
        self._cursor = 0  # next module id handed out by `_module_id` during an attach
        # generate's own work between forwards (standard mode): the forward's end mark, the
        # token mark that followed it, and the pseudo-modules their windows are recorded as
        self._fwd_end: Any = None
        self._token_mark: Any = None
        self._choose_mid: int | None = None
        self._prepare_mid: int | None = None
        self._saved_attn: tuple[Any, Any] | None = None
        self.modules: list[ModuleInfo] = []
        self.steps: list[StepInfo] = []
        #: forward calls whose statistics were probed, per phase (instrument/cost.py prices them)
        self.probed_steps: dict[str, int] = {}
        self._starts: list[Any] = []
        self._step = -1
        self._phase = 0
        self._decode_index = 0
        self._vision_step = False
        self._origin: Mark | None = None
        self._attn_layer: dict[int, int] = {}
        self.timing = TimingRecorder(self.clock, self.config.preallocate)
        self.hidden = _hidden_size(model)
        self._init_probes(len(self.arch.blocks))
        self._op_ids: dict[tuple[int, str], int] = {}
        self._sections: Timer | None = None  # made by the first `section` (no mark before)
        self._init_compiled(compiled)

    def _init_probes(self, n_layers: int) -> None:
        """The statistics probes the mode asks for.

        A decode step's tensors (at most `stage_batch` tokens, and up to `small` values a
        call) are kept until the forward ends and reduced all layers at once (see probes);
        a prefill's are reduced per call, as the forward writes them.
        """
        cfg, rows = self.config, self.config.stage_batch
        small = self.hidden * rows
        self.activations = (
            ActivationProbe(
                n_layers,
                self.device,
                cfg.activation_eps,
                cfg.preallocate // 8,
                stage_width=small,
                stage_rows=rows,
            )
            if cfg.capture_activations
            else None
        )
        deep = cfg.deep_ops
        self.attention = (
            AttentionProbe(
                n_layers,
                self.device,
                cfg.attention_threshold,
                stage_width=small * 4,
                stage_rows=rows,
            )
            if deep
            else None
        )
        self.kill = (
            KillProbe(n_layers, self.device, cfg.kill_eps, stage_width=small * 8, stage_rows=rows)
            if deep
            else None
        )
        experts = max((_num_experts(b) for b in self.arch.blocks), default=0)
        self.routing = RoutingProbe(n_layers, experts, self.device) if deep and experts else None

    def _init_compiled(self, compiled: bool) -> None:
        """State used under torch.compile only.

        The kernels' provenance, the running torch.profiler, each instrumented step's start
        mark and open range, module ids by name and their parents.
        """
        self._capture = CompileCapture() if compiled else None
        self._torch_profiler: Any = None
        self._step_marks: dict[int, Any] = {}
        self._step_range: Any = None
        self._by_name: dict[str, int] = {}
        self._parents: dict[int, list[int]] = {}
        #: under torch.compile, per phase: forward, matched-kernel and cross-part-kernel time
        #: (us), profiler events, compiled calls no program matched
        self.compiled_us: dict[str, CompiledTally] = {}

    def section(self, name: str) -> AbstractContextManager[Section]:
        """Time the body as a user region called `name`, on the profiler's clock.

        Regions nest and repeat (each call is a row); they are timed whether or not the hooks
        are attached, and come back from `result()` beside the layers, in the same timeline:
        `result().section_summary()` has per-name calls, median and spread.
        """
        if self._sections is None:
            self._sections = Timer(self.clock)
        return self._sections.section(name)

    # -- attach / detach -------------------------------------------------------------------

    def __enter__(self) -> Profiler:
        self.attach()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.detach()

    def _selected(self, index: int) -> bool:
        layers = self.config.layers
        return layers is None or index in layers

    def _module_id(self, name: str, kind: str, layer: int | None) -> int:
        """The next module's id: new on the first attach, the same one on every re-attach.

        Attach registers modules in a fixed order, so a profiler detached between samples (an
        interleaved sweep runs other configurations in between) and attached again keeps
        adding to the same rows instead of growing a second set.
        """
        mid = self._cursor
        self._cursor += 1
        if mid == len(self.modules):
            self.modules.append(ModuleInfo(mid, name, kind, layer))
            self._starts.append(None)
        return mid

    def _register(self, module: Any, kind: str, layer: int | None, probe: Any = None) -> int:
        """Time every call of `module` (a wrapped forward, not hooks: models/forward_wrap.py).

        Under torch.compile nothing is wrapped: the module gets its id, and its time comes from
        the kernels made from it (`end_sample`).
        """
        name = self.arch.name_of(module)
        mid = self._module_id(name, kind, layer)
        if self.compiled:
            self._by_name[name] = mid
            return mid
        clock, timing = self.clock, self.timing
        phase_probe = probe

        gated = probe is self.activations  # statistics on probed steps; routing on every step
        opens_step = kind in ("vision_tower", "projector")
        closes_step = kind == "projector"  # decided once here, not on every call

        def around(inner: Any, args: Any, kwargs: Any) -> Any:
            if opens_step and not self.active and self.enabled:
                self._begin_step("vision", None, True)  # generate encodes images before prefill
                self._vision_step = True
            if not self.active:
                return inner(*args, **kwargs)
            start = clock.mark()
            try:
                out = inner(*args, **kwargs)
            except BaseException:
                if self.active:  # a call that raised still took its time
                    timing.add(mid, self._step, start, clock.mark())
                raise
            if self.active:
                timing.add(mid, self._step, start, clock.mark())
                if phase_probe is not None and (self.probing or not gated):
                    phase_probe.record(self._phase, layer, out)
                if closes_step and self._vision_step:
                    self.active = self._vision_step = False
            return out

        self._handles.append(ForwardWrap(module, around))
        return mid

    def _register_probe(self, module: Any, probe: Any, layer: int) -> None:
        def around(inner: Any, args: Any, kwargs: Any) -> Any:
            out = inner(*args, **kwargs)
            if self.probing:
                probe.record(self._phase, layer, out)
            return out

        self._handles.append(ForwardWrap(module, around))

    def attach(self) -> None:
        """Register every hook the config asks for (idempotent; again after `detach`)."""
        if self._attached:
            return
        self._attached = True
        first = not self.modules
        self._cursor = 0
        cfg, arch = self.config, self.arch
        if arch.missing and first:
            self.notes.append("not found (not instrumented): " + ", ".join(arch.missing))
        root_mid = self._module_id("forward", "forward", None)
        self._handles.append(self.model.register_forward_pre_hook(self._root_pre, with_kwargs=True))
        self._handles.append(self.model.register_forward_hook(self._root_post, always_call=True))
        self._root_mid = root_mid
        if cfg.part_timing:  # no hooks: windows between the forward's marks and the token's
            self._choose_mid = self._module_id("generate.choose_token", "choose_token", None)
            self._prepare_mid = self._module_id("generate.prepare_step", "prepare_step", None)
        if cfg.layer_timing:
            for module, kind in (
                (arch.embeddings, "embeddings"),
                (arch.rotary, "rotary"),
                (arch.final_norm, "final_norm"),
                (arch.lm_head, "lm_head"),
                (arch.vision_tower, "vision_tower"),
                (arch.projector, "projector"),
            ):
                if module is not None:
                    self._register(module, kind, None)
        for b in arch.blocks:
            if not self._selected(b.index):
                continue
            if cfg.layer_timing or self.activations is not None:
                self._register(b.block, "block", b.index, probe=self.activations)
            if cfg.part_timing:
                if b.attention is not None:
                    self._register(b.attention, "attention", b.index)
                if b.mlp is not None:
                    self._register(b.mlp, "moe" if b.is_moe else "mlp", b.index)
                if b.mixer is not None:
                    self._register(b.mixer, "mixer", b.index)
                for _name, norm in b.norms:
                    self._register(norm, "norm", b.index)
            if cfg.deep_ops:
                if b.attention_out is not None:
                    self._register(b.attention_out, "o_proj", b.index)
                if b.attention is not None:
                    self._attn_layer[id(b.attention)] = b.index
                    base = self.arch.name_of(b.attention)
                    for op in ("qk", "softmax", "av"):
                        self._op_ids[(b.index, op)] = self._module_id(f"{base}.{op}", op, b.index)
                for act in b.mlp_act:
                    self._register_probe(act, self.kill, b.index)
                if b.router is not None and self.routing is not None:
                    self._register(b.router, "router", b.index, probe=self.routing)
        if cfg.deep_ops:
            self._install_deep_attention()
        if self._capture is not None:
            self._parents = _parents(self._by_name)
            self._capture.install()
        if first:
            self._origin = self.clock.mark()

    def _install_deep_attention(self) -> None:
        config = getattr(self.model, "config", None)
        if config is None or not hasattr(config, "get_text_config"):
            self.notes.append("deep mode: not a transformers model, attention left as it is")
            return
        deep_attention.register()
        text = config.get_text_config()
        before = getattr(text, "_attn_implementation", None)
        self._saved_attn = (text, before)
        text._attn_implementation = deep_attention.NAME
        deep_attention.attach(self.model.modules(), self)
        note = (
            f"deep mode: attention ran through infermeter's eager path (was {before}) so its "
            "operations could be timed; absolute attention times differ from the fused kernel"
        )
        if note not in self.notes:
            self.notes.append(note)

    def detach(self) -> None:
        """Remove every hook and restore the attention implementation (and inductor's settings)."""
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self.end_sample()
        if self._capture is not None:
            self._capture.remove()
        if self._saved_attn is not None:
            text, before = self._saved_attn
            text._attn_implementation = before
            self._saved_attn = None
        if hasattr(self.model, "modules"):
            deep_attention.detach(self.model.modules(), self)
        self.active = self.probing = False
        self._attached = False

    def probed_share(self, phase: str) -> float:
        """The share of the phase's forward calls whose statistics were probed."""
        steps = sum(1 for info in self.steps if info.phase == phase)
        return self.probed_steps.get(phase, 0) / steps if steps else 0.0

    def windows_per_step(self) -> dict[str, float]:
        """Timed windows (records) per forward call of each phase, over every step of it.

        Steps `sample_every` left untimed count as 0, so the figure is what an average step of
        the run paid (instrument/cost.py prices it).
        """
        steps: dict[str, int] = {}
        for info in self.steps:
            steps[info.phase] = steps.get(info.phase, 0) + 1
        if self.compiled:  # under torch.compile: torch.profiler's events (one priced each)
            return {
                phase: (t.events / steps[phase] if steps.get(phase) else 0.0)
                for phase, t in self.compiled_us.items()
            }
        windows: dict[str, int] = {}
        for index in self.timing.steps[: self.timing.count]:
            if 0 <= index < len(self.steps):
                phase = self.steps[index].phase
                windows[phase] = windows.get(phase, 0) + 1
        return {phase: windows.get(phase, 0) / n for phase, n in steps.items()}

    @property
    def origin(self) -> Mark | None:
        """The clock mark record start times are measured from (taken at the first attach)."""
        return self._origin

    # -- hot path ------------------------------------------------------------------------

    def _root_pre(self, module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        if not self.enabled:
            self.active = False
            return
        if past_tokens(kwargs):
            phase, decode_index = "decode", self._decode_index
            self._decode_index += 1
            active = decode_index % self.config.sample_every == 0
            probing = active and decode_index % self.config.probe_every == 0
        else:
            phase, decode_index, active, probing = "prefill", None, True, True
            self._decode_index = 0
        self._begin_step(phase, decode_index, active)
        self.probing = probing
        if probing:
            self.probed_steps[phase] = self.probed_steps.get(phase, 0) + 1
        if active and self.compiled and self._torch_profiler is not None:
            import torch

            self._step_range = torch.autograd.profiler.record_function(f"{STEP_RANGE}{self._step}")
            self._step_range.__enter__()
        if active:
            start = self._starts[self._root_mid] = self.clock.mark()
            if self.compiled:
                self._step_marks[self._step] = start
            if phase == "decode" and self._token_mark is not None and self._prepare_mid is not None:
                self.timing.add(self._prepare_mid, self._step, self._token_mark, start)
        self._token_mark = None

    def _begin_step(self, phase: str, decode_index: int | None, active: bool) -> None:
        self._vision_step = False
        self._step += 1
        self._phase = _PHASE_INDEX.get(phase, 0)
        self.steps.append(StepInfo(self._step, phase, decode_index, active))
        self.active = active

    def _root_post(self, module: Any, args: Any, out: Any) -> None:
        for probe in (self.activations, self.attention, self.kill):
            if probe is not None:
                probe.flush()
        self._fwd_end = None
        if self.active:
            end = self._fwd_end = self.clock.mark()
            self.timing.add(self._root_mid, self._step, self._starts[self._root_mid], end)
        if self._step_range is not None:
            self._step_range.__exit__(None, None, None)
            self._step_range = None
        self.active = self.probing = False

    # -- under torch.compile ---------------------------------------------------------------

    def compile_backend(self, mode: str | None) -> RecordingBackend | None:
        """The backend to torch.compile the forward with so its kernels can be attributed.

        None when the forward is not profiled compiled (or this torch cannot): compile with
        `mode` as usual.
        """
        if self._capture is None:
            return None
        return self._capture.backend(mode)

    def begin_sample(self) -> None:
        """Start recording the compiled program's kernels (outside the timed generation).

        A no-op unless the forward runs compiled and the profiler is enabled; `end_sample`
        stops the recording and turns each instrumented forward's kernels into records.
        """
        if not self.compiled or not self.enabled or self._torch_profiler is not None:
            return
        import torch

        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        with native_stderr_silenced():  # kineto's "profiler_start" line
            prof.__enter__()
        self._torch_profiler = prof

    def end_sample(self) -> None:
        """Stop the kernel recording and charge each matched kernel to its modules."""
        prof, self._torch_profiler = self._torch_profiler, None
        if prof is None:
            return
        if self._step_range is not None:  # a generation that raised mid-forward
            self._step_range.__exit__(None, None, None)
            self._step_range = None
        with native_stderr_silenced():
            prof.__exit__(None, None, None)
        programs = self._capture.programs if self._capture is not None else []
        self._charge(step_kernels(prof.events(), programs))
        self._step_marks.clear()

    def _charge(self, steps: list[StepKernels]) -> None:
        el = self.clock.elapsed_ms
        for sk in steps:
            mark = self._step_marks.get(sk.step)
            if mark is None or not 0 <= sk.step < len(self.steps):
                continue
            phase = self.steps[sk.step].phase
            tally = self.compiled_us.setdefault(phase, CompiledTally())
            tally.steps += 1
            tally.call_us += sk.call_us
            tally.events += sk.events
            tally.unmatched += sk.unmatched
            spans = module_spans(sk.calls, self._by_name, self._parents)
            tally.kernel_us += spans.kernel_us
            tally.fused_us += spans.fused_us
            for mid, (start_us, total_us) in spans.times.items():
                if not self._parents.get(mid):
                    tally.charged_us += total_us
                begin = mark + int(start_us * 1000)
                self.timing.add(mid, sk.step, begin, begin + int(total_us * 1000))
        # the forward's own time, from its root records (marks on this clock)
        n = self.timing.count
        for i in range(n):
            if self.timing.mids[i] == self._root_mid:
                step = self.timing.steps[i]
                if step in self._step_marks and 0 <= step < len(self.steps):
                    found = self.compiled_us.get(self.steps[step].phase)
                    if found is not None:
                        found.forward_us += 1e3 * el(self.timing.starts[i], self.timing.ends[i])

    def token_chosen(self, mark: Mark) -> None:
        """The token of the forward that just ended was chosen, at `mark`.

        Called by the run's token recorder (run/generation.py) with the mark it took, so the
        window from the forward's end to that mark is generate's logits processing and token
        choice, and from that mark to the next forward's start its step preparation (stopping
        checks, cache and input bookkeeping): both recorded in standard and deep modes.
        """
        if self._fwd_end is not None and self._choose_mid is not None:
            self.timing.add(self._choose_mid, self._step, self._fwd_end, mark)
        self._fwd_end = None
        self._token_mark = mark if self._attached and self.enabled else None

    def attention_ops(
        self,
        module: torch.nn.Module,
        weights: torch.Tensor | None,
        t0: Mark,
        t1: Mark,
        t2: Mark,
        t3: Mark,
    ) -> None:
        """Called by the deep attention path with its marks and softmax output."""
        layer = self._attn_layer.get(id(module))
        if layer is None:
            return
        add, step, ops = self.timing.add, self._step, self._op_ids
        add(ops[(layer, "qk")], step, t0, t1)
        add(ops[(layer, "softmax")], step, t1, t2)
        add(ops[(layer, "av")], step, t2, t3)
        if self.attention is not None and self.probing:
            self.attention.record(self._phase, layer, weights)

    def _compiled_notes(self) -> list[str]:
        """What the compiled forward's attribution covered, or why there is none."""
        notes = []
        if self._dropped:
            notes.append(
                "under torch.compile: block output statistics and deep mode's operations are "
                "off (reading them inside the compiled forward would break its graph)"
            )
        capture = self._capture
        if capture is not None and capture.failed:
            return [*notes, f"per-part time under torch.compile not measured: {capture.failed}"]
        if capture is not None and not capture.programs:
            return [
                *notes,
                "per-part time under torch.compile not measured: no compiled program's kernels "
                "were captured (the forward was not compiled by inductor in this run)",
            ]
        for phase, t in self.compiled_us.items():
            fwd = t.forward_us
            if fwd <= 0:
                continue
            charged, kernels, calls = t.charged_us / fwd, t.kernel_us / fwd, t.call_us / fwd
            line = (
                f"under torch.compile, {phase}: {100 * charged:.0f}% of the forward's time "
                f"charged to modules from the compiled program: their kernels "
                f"({100 * kernels:.0f}%) and the program's work between one module's kernels; "
                f"{100 * t.fused_us / fwd:.0f}% ran in kernels fusing two parts' operations "
                "(charged to the part most of them come from). 'other' holds the program's "
                f"work between modules ({100 * max(0.0, calls - charged):.0f}%) and "
                f"torch.compile's entry: guards, cache look-up ({100 * max(0.0, 1 - calls):.0f}%)"
            )
            if t.unmatched:
                line += f"; {t.unmatched} compiled calls matched no captured program"
            notes.append(line)
        return notes

    # -- results -------------------------------------------------------------------------

    def result(self) -> LayerProfile:
        """Resolve every record (one device sync) and build the per-layer tables."""
        mids, steps, starts, durs = self.timing.resolve(self._origin or self.clock.mark())
        notes = list(self.notes)
        if self.timing.overflowed:
            notes.append(
                f"{self.timing.overflowed} timing records past the preallocated "
                f"{self.config.preallocate}; raise preallocate to avoid growth in the hot path"
            )
        n = self.config.sample_every
        if n > 1:
            measured = sum(1 for s in self.steps if s.phase == "decode" and s.measured)
            total = sum(1 for s in self.steps if s.phase == "decode")
            notes.append(
                f"decode steps instrumented: 1 in {n} ({measured} of {total}); "
                "per-call means are over those steps, totals are not scaled"
            )
        p = self.config.probe_every
        probed = [
            what
            for what, probe in (
                ("block output statistics", self.activations),
                ("attention entropy/sparsity", self.attention),
                ("MLP kill ratios", self.kill),
            )
            if probe is not None
        ]
        if p > 1 and probed:
            notes.append(
                f"{', '.join(probed)} from 1 in {p} decode steps (and every prefill); "
                "timings and MoE routing from every instrumented step"
            )
        if self.compiled:
            notes.extend(self._compiled_notes())
        return LayerProfile(
            config=self.config,
            modules=list(self.modules),
            steps=list(self.steps),
            records=(mids, steps, starts, durs),
            activations=self.activations.collect() if self.activations else [],
            attention=self.attention.collect() if self.attention else [],
            attention_heads=self.attention.collect_heads() if self.attention else [],
            kill=self.kill.collect() if self.kill else [],
            routing=self.routing.collect() if self.routing else [],
            notes=notes,
            num_layers=len(self.arch.blocks),
            sections=self._sections.rows(self._origin) if self._sections is not None else [],
        )


def _parents(by_name: dict[str, int]) -> dict[int, list[int]]:
    """Each registered module's registered ancestors (a part's block), nearest first."""
    out: dict[int, list[int]] = {}
    for name, mid in by_name.items():
        chain, path = [], name.rpartition(".")[0]
        while path:
            if path in by_name:
                chain.append(by_name[path])
            path = path.rpartition(".")[0]
        out[mid] = chain
    return out


def _num_experts(block: Any) -> int:
    if block.router is None:
        return 0
    for attr in ("num_experts", "n_routed_experts"):
        n = getattr(block.router, attr, None) or getattr(block.experts, attr, None)
        if n:
            return int(n)
    weight = getattr(block.router, "weight", None)
    return int(weight.shape[0]) if weight is not None else 0


def _hidden_size(model: Any) -> int:
    """Hidden size of a transformers model; 0 for other modules (then nothing is deferred)."""
    config = getattr(model, "config", None)
    if config is None:
        return 0
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return int(getattr(text, "hidden_size", None) or getattr(text, "n_embd", 0) or 0)
