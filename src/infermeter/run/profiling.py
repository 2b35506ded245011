"""Profile one configuration: load, (compile), then warm-up and measured generations.

Phases: load (build or read the weights), to_device, compile (cold first call, when asked), and
per sample prefill (TTFT) and decode (every step). Results go to an optional `RunSink` (the
store): the run is registered as `running` before the first generation, so a killed process
leaves a trace, and all samples are written in one transaction at the end, also when
generation raises (status `failed`, error kept, samples so far kept).

The work is split in steps, also used by interleaved runs (run/interleave.py), which measure
several sessions sample by sample in turn: `set_up_session` (everything that can be refused,
before anything is stored), `register_session`, `start_clock`, `run_sample` per sample (with
hooks, energy sampler and compile attached), `samples_done` or `stopped`, `tear_down` (undo
all of it, also after a failure) and `close_session` (energy, store, raise the failure).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any, cast

from infermeter.errors import GenerationFailed, Terminated, UserError
from infermeter.instrument import Profiler, ProfilingConfig
from infermeter.instrument.cost import (
    estimate,
    probed_step_cost_us,
    profiler_event_cost_us,
    window_cost_us,
)
from infermeter.instrument.nvtx import NvtxRanges, cuda_nvtx
from infermeter.instrument.tables import LayerRowDoc
from infermeter.knobs.compile import compile_notes, generate_compiles, restart_graph_numbering
from infermeter.measure.clock import Clock, clock_for
from infermeter.measure.device import describe_device
from infermeter.measure.energy.base import Unavailable
from infermeter.measure.energy.sampler import PowerSampler
from infermeter.measure.energy.select import CompositeSource, open_source
from infermeter.measure.host import HostWatch
from infermeter.measure.memory import MemoryTracker, SampleMemoryDoc
from infermeter.measure.timer import Timer
from infermeter.models.flopcount import flop_check
from infermeter.models.info import ModelInfo
from infermeter.models.loader import LoadedModel, load_model
from infermeter.models.shape import Shape, shape_of
from infermeter.run.cache_probe import CacheProbe, build_quanto_kernels, check_cache_form
from infermeter.run.config import RunConfig
from infermeter.run.energy import attribute, unavailable_energy
from infermeter.run.environment import library_versions
from infermeter.run.generation import TimedGeneration, generation_config, timed_generate
from infermeter.run.live_steps import watching
from infermeter.run.progress import LiveProgress, ProgressFn
from infermeter.run.refusals import refuse_from_config
from infermeter.run.results import KnobValue, LayersDoc, RunResult, SampleResult
from infermeter.run.signals import stop_on_signals
from infermeter.run.sink import LiveSink, RunSink
from infermeter.run.speculation import Speculator, greedy_check, speculator_for
from infermeter.util.timestamps import now_iso
from infermeter.workloads.corpus import MAX_CHARS_PER_TOKEN, read_prompts_file, repetitive_texts
from infermeter.workloads.prompts import PromptBatch, VisionInput, WorkloadSpec, build_batches

__all__ = [
    "ProgressFn",
    "Session",
    "attach_instruments",
    "close_session",
    "profile",
    "register_session",
    "run_sample",
    "samples_done",
    "set_up_session",
    "start_clock",
    "stopped",
    "tear_down",
]


@dataclass
class Session:
    """Everything one run holds while it runs: set up once, attached, then torn down."""

    config: RunConfig
    loaded: LoadedModel
    batches: list[PromptBatch]
    gen_config: Any
    result: RunResult
    clock: Clock
    profiler: Profiler | None
    sources: CompositeSource | None
    missing: list[Unavailable]
    progress: LiveProgress
    sampler: PowerSampler | None = None
    memory: MemoryTracker | None = None
    origin: Any = None
    host_origin_ns: int = 0
    original_forward: Any = None
    nvtx: NvtxRanges | None = None
    #: user regions (`infermeter.session(...).section`), on the run's clock
    sections: Timer | None = None
    #: a speculative run's draft and what its speculation did (run/speculation.py)
    speculator: Speculator | None = None
    #: the KV cache object the model was given (run/cache_probe.py)
    cache_probe: CacheProbe | None = None
    #: what one timed window and one probed decode step's statistics cost on this host,
    #: measured before the run (instrument/cost.py)
    window_us: float | None = None
    probed_step_us: float = 0.0


def _vision_input(loaded: LoadedModel) -> VisionInput | None:
    v = loaded.info.vision
    if v is None:
        return None
    token_id = getattr(loaded.model.config, "image_token_id", None)
    if token_id is None:
        token_id = getattr(loaded.model.config, "image_token_index", None)
    if token_id is None:
        return None
    return VisionInput(v.image_size, int(token_id), v.tokens_per_image, pixel_dims=v.pixel_dims)


def _check_context(config: RunConfig, loaded: LoadedModel, longest_prompt: int) -> None:
    limit = loaded.info.max_positions
    if limit and longest_prompt + config.new_tokens > limit:
        raise UserError(
            f"prompt ({longest_prompt} tokens) + --new-tokens {config.new_tokens} exceed the "
            f"context of {loaded.info.spec} ({limit} positions)",
            f"keep prompt + new tokens <= {limit}",
        )


def _profiler_config(config: RunConfig, info: ModelInfo) -> ProfilingConfig:
    """The mode's instrumentation, narrowed by --sample-every and --layers (checked here)."""
    prof_config = ProfilingConfig.for_mode(config.mode)
    if config.sample_every > 1:
        prof_config = replace(prof_config, sample_every=config.sample_every)
    if config.layers is not None:
        bad = [i for i in config.layers if i >= info.layers]
        if bad:
            raise UserError(
                f"--layers {bad} out of range: {info.spec} has {info.layers} blocks",
                f"use indices 0..{info.layers - 1}",
            )
        prof_config = replace(prof_config, mode="custom", layers=tuple(config.layers))
    return prof_config


def _shape(loaded: LoadedModel) -> Shape:
    """The model's cost shape and census, with torch's own FLOP count to check them against.

    The count is an 8- and a 16-token forward with eager kernels (more where a block needs a
    fit: models/flopcount.py; 0.4 s on tiny-qwen3-moe), made once per loaded model, outside
    every measured sample, and kept with the census it was made for:
    it checks the cost formulas on this architecture, whatever knobs later change. A model
    that cannot run it (a vision model that needs images) keeps None.
    """
    if loaded.flop_check is None:
        loaded.flop_check = flop_check(loaded.model)
    return shape_of(loaded.model, flop_check=loaded.flop_check)


def _load(config: RunConfig, loaded: LoadedModel | None, progress: ProgressFn) -> LoadedModel:
    progress("load", 0, 1)
    if loaded is None:
        loaded = load_model(
            config.model,
            dtype=config.dtype,
            device=config.device,
            attn_implementation=config.attn_implementation,
            seed=config.seed,
        )
    progress("load", 1, 1)
    return loaded


def _prompts(config: RunConfig, context: int | None, rows: int) -> tuple[str, ...] | None:
    """The user's prompts, read from their file only as far as `rows` rows need.

    Whole prompts: the first `rows` (each refused if it cannot fit the context). Exact-length
    prompts: text enough for every row's window, about 8 characters per token needed.
    """
    if config.prompts is None and not config.prompts_file and config.prompt_kind == "repetitive":
        enough = 8 * (config.prompt_tokens or 0) * rows
        return repetitive_texts(rows, enough)
    if config.prompts is not None or not config.prompts_file:
        return config.prompts
    if config.prompt_tokens is None:
        limit = MAX_CHARS_PER_TOKEN * context if context else None
        return tuple(
            read_prompts_file(config.prompts_file, max_prompts=rows, max_prompt_chars=limit)
        )
    enough = max(65_536, 8 * config.prompt_tokens * rows)
    return tuple(read_prompts_file(config.prompts_file, enough_chars=enough))


def _set_up_notes(loaded: LoadedModel, result: RunResult, batches: list[PromptBatch]) -> list[str]:
    """What the run must say about its own set-up: stand-in tokenizer, costs, text-only VLM."""
    notes = []
    fallback = getattr(loaded.tokenizer, "_infermeter_builtin", None)
    if fallback:
        notes.append(
            f"the checkpoint has {fallback}: prompts were cut by infermeter's built-in tokenizer "
            "(real token counts and ids within the model's vocabulary; output text is not "
            "meaningful)"
        )
    census = result.model_info["shape"].get("census")
    check = loaded.flop_check or {}
    approximate = check.get("approximate", census.get("uncosted", []) if census else [])
    notes += [f"cost model approximate: {what}" for what in approximate]
    if result.device.get("type") == "mps":
        from infermeter.measure.memory import MPS_PEAK_METHOD

        notes.append(f"peak allocated memory on MPS: {MPS_PEAK_METHOD}")
    if loaded.info.vision is not None and batches[0].vision_tokens == 0:
        notes.append("vision model profiled text-only: its image token id is unknown")
    return notes


def _quantized_cache_kernels(result: RunResult, device_type: str) -> None:
    """The quantized cache's kernels loaded (built once) before the clock: a phase, a note."""
    kernels = build_quanto_kernels(device_type)
    if kernels is None:
        return
    result.phases["kv_kernels_ms"], compiled = kernels
    if compiled:
        result.notes.append(
            f"optimum-quanto compiled its CPU kernels for the quantized cache in "
            f"{kernels[0] / 1e3:.0f} s before the run (once per environment; in no sample)"
        )


def set_up_session(
    config: RunConfig,
    loaded: LoadedModel | None,
    progress: LiveProgress,
    sweep_id: str | None,
    knobs: dict[str, Any] | None,
) -> Session:
    """Validate, load, build the prompts, the result and the instruments; nothing is stored.

    Every user error (bad configuration, prompts, --layers, a named energy source that is
    missing) is raised here, before the run is registered.
    """
    _refuse_before_loading(config, loaded)
    loaded = _load(config, loaded, progress)
    model, tokenizer, info = loaded.model, loaded.tokenizer, loaded.info
    device = next(model.parameters()).device
    n_batches = config.warmup_effective + config.samples
    spec = WorkloadSpec(
        batch_size=config.batch_size,
        prompt_tokens=config.prompt_tokens,
        prompts=_prompts(config, loaded.info.max_positions, n_batches * config.batch_size),
        chat=config.chat,
        seed=config.seed,
    )
    batches = build_batches(tokenizer, spec, n_batches, _vision_input(loaded))
    _check_context(config, loaded, max(b.input_ids.shape[1] for b in batches))
    gen_config = generation_config(
        tokenizer,
        config.new_tokens,
        decoding=config.decoding,
        temperature=config.temperature,
        top_p=config.top_p,
        top_k=config.sample_top_k,
        cache=config.cache,
        generate_compiles=generate_compiles(config.compile, config.cache, device.type),
    )
    check_cache_form(config.cache, model, device.type, config.compile)
    result = RunResult(
        run_id=None,
        config=config.to_dict(),
        knobs={**config.knob_values(), **(knobs or {})},
        model_info={**info.to_dict(), "shape": _shape(loaded).to_dict()},
        device=describe_device(device),
        versions=library_versions(),
        created=now_iso(),
        phases=dict(loaded.timings),
        sweep_id=sweep_id,
    )
    result.notes.extend(_set_up_notes(loaded, result, batches))
    prof_config = _profiler_config(config, info)
    result.notes.extend(
        compile_notes(config.compile, config.cache, device.type, prof_config.hooks_needed)
    )
    clock = clock_for(device)
    speculator = speculator_for(config.decoding, loaded, clock)
    if speculator is not None and config.decoding.startswith("assisted"):
        result.phases["draft_load_ms"] = speculator.load_draft()  # a bad draft stops here
    if config.cache == "quantized":
        _quantized_cache_kernels(result, device.type)
    profiler = _make_profiler(model, prof_config, clock, bool(config.compile), device.type)
    # An explicitly named source that is missing is a UserError here, before anything is stored.
    sources, missing = open_source(config.energy, config.power_interval_ms)
    sampler = PowerSampler(sources, config.power_interval_ms) if sources is not None else None
    return Session(
        config,
        loaded,
        batches,
        gen_config,
        result,
        clock,
        profiler,
        sources,
        missing,
        progress,
        sampler,
        nvtx=NvtxRanges(model, modules=not config.compile) if config.nvtx else None,
        speculator=speculator,
        cache_probe=CacheProbe(model),
        **_instrument_prices(profiler, clock, config.batch_size),
    )


def _make_profiler(
    model: Any, prof_config: ProfilingConfig, clock: Clock, compile_on: bool, device_type: str
) -> Profiler | None:
    """The run's profiler, None in minimal mode.

    Compiled on a CPU, blocks and parts are timed from the compiled program's kernels, with
    nothing hooked inside the forward.
    """
    if not prof_config.hooks_needed:
        return None
    return Profiler(model, prof_config, clock=clock, compiled=compile_on and device_type == "cpu")


def _refuse_before_loading(config: RunConfig, loaded: LoadedModel | None) -> None:
    """Every refusal that needs no model, before it loads.

    A new user waited 30 s for `--energy nvml` on a machine without NVML to be refused after
    the weights loaded, and 121 s for a prompt longer than the context (the config says).
    """
    config.validate()
    if config.nvtx:
        cuda_nvtx()  # no CUDA, no NVTX
    if config.prompts is None and config.prompts_file:
        read_prompts_file(config.prompts_file, max_prompts=1)  # a bad file
    if config.energy not in ("auto", "off"):  # a named source that is missing
        probe, _ = open_source(config.energy, config.power_interval_ms)
        if probe is not None:
            probe.close()
    if loaded is None:  # last: it reads the model's config (an unknown model is named there)
        refuse_from_config(config)


def _instrument_prices(profiler: Profiler | None, clock: Clock, rows: int) -> dict[str, Any]:
    """What a timed window and a probed step cost on this host (instrument/cost.py), or none."""
    if profiler is None:
        return {}
    if profiler.compiled:  # its kernels come from torch.profiler: each event is the window
        return {"window_us": profiler_event_cost_us(), "probed_step_us": 0.0}
    return {
        "window_us": window_cost_us(clock),
        "probed_step_us": probed_step_cost_us(profiler, rows),
    }


def register_session(session: Session, sink: RunSink | None) -> None:
    """Register the run as `running` (only once every user error has been ruled out)."""
    if sink is None:
        return
    try:
        session.result.run_id = sink.begin_run(session.result)
        session.progress.registered(session.result.run_id)
    except BaseException:
        if session.sources is not None:
            session.sources.close()  # powermetrics runs a process: never leave it behind
        raise


def attach_instruments(session: Session) -> None:
    """Start the sampler, attach hooks and compile; `tear_down` undoes each of these."""
    import torch

    model, config = session.loaded.model, session.config
    if session.sampler is not None:
        session.sampler.start()
    if session.profiler is not None:
        session.profiler.attach()
    device_type = str(session.result.device.get("type", "cpu"))
    if config.compile and not generate_compiles(config.compile, config.cache, device_type):
        mode = None if config.compile is True else str(config.compile)
        # Each run compiles from a clean dynamo state: runs in one process (a sweep, the
        # Python API) otherwise add their graphs to the last run's until dynamo's recompile
        # limit (8) is hit and the forward silently runs eager (seen in a benchmark's rounds).
        # Inductor's on-disk cache still spares the code generation.
        torch._dynamo.reset()
        restart_graph_numbering()
        backend = session.profiler.compile_backend(mode) if session.profiler else None
        if backend is not None:  # the same inductor compile, its graphs' modules noted
            model.forward = torch.compile(model.forward, backend=backend)
        else:
            model.forward = torch.compile(model.forward, mode=mode)
    if session.nvtx is not None:  # outermost, over the compiled forward
        session.nvtx.attach()
    if session.speculator is not None:
        session.speculator.attach()
    if session.cache_probe is not None:
        session.cache_probe.attach()


def _step_watch(session: Session) -> Callable[[Any], Any] | None:
    """The live page's view of decode steps as they happen, when a store keeps progress."""
    if not session.progress.streaming:
        return None
    progress, clock = session.progress, session.clock
    return lambda recorder: watching(progress, clock, recorder)


def _measure_sample(session: Session, i: int, batch: PromptBatch) -> SampleResult:
    """One generation, timed token by token, with memory and sampler readings at its edges."""
    import torch

    config, clock, sampler = session.config, session.clock, session.sampler
    model, tokenizer = session.loaded.model, session.loaded.tokenizer
    param = next(model.parameters())
    warm = i < config.warmup_effective
    if session.profiler is not None:
        session.profiler.enabled = not warm  # warm-up samples are not instrumented
    if config.decoding == "sampling":
        torch.manual_seed(config.seed + i)
    assert session.memory is not None
    session.memory.reset()
    if sampler is not None:
        sampler.read_now()  # a reading at each sample's edges, outside the timed call
    # A cyclic-GC pass over this heap takes 50-250 ms: with the collector paused during the
    # call none can land inside a measured generation; it runs between samples. (A forced
    # gc.collect() per sample did the same job at 250 ms a sample.)
    spec = session.speculator
    inputs = batch.generate_kwargs(param.device, param.dtype)
    if session.profiler is not None and not warm:
        session.profiler.begin_sample()  # (compiled forwards: the kernel recording)
    gc.disable()
    try:
        ranges = session.nvtx.sample(i, warm) if session.nvtx is not None else nullcontext()
        if spec is not None:
            spec.begin()
        with ranges:
            timed = timed_generate(
                model,
                inputs,
                session.gen_config,
                clock,
                config.new_tokens,
                watch=_step_watch(session),
                on_token=session.profiler.token_chosen if session.profiler is not None else None,
                extra=spec.extra if spec is not None else None,
            )
    finally:
        gc.enable()
        if session.profiler is not None:
            session.profiler.end_sample()
    if session.cache_probe is not None:
        session.cache_probe.sample_done()
    if spec is not None:
        produced = timed.output_ids.shape[1] - timed.input_length
        spec.end(produced, timed.input_length, warm, timed.output_ids, inputs)
    if sampler is not None:
        sampler.read_now()
    ttft, steps = timed.durations(clock)
    new_ids = timed.output_ids[:, timed.input_length :]
    return SampleResult(
        index=i,
        warmup=warm,
        batch_size=batch.input_ids.shape[0],
        prompt_tokens=max(batch.prompt_tokens),
        new_tokens=len(timed.marks),
        vision_tokens=batch.vision_tokens,
        start_ms=clock.elapsed_ms(session.origin, timed.start) + _load_offset(session.result),
        ttft_ms=ttft,
        step_ms=tuple(steps),
        memory={**session.memory.read().to_dict(), **_faults(timed)},
        output_text=tuple(tokenizer.batch_decode(new_ids, skip_special_tokens=True)),
        prompt_text=tuple(batch.texts),
    )


def _faults(timed: TimedGeneration) -> SampleMemoryDoc:
    """The sample's minor page faults by phase, for its memory record (none where uncounted)."""
    if timed.faults is None:
        return {}
    return {"page_faults_prefill": timed.faults[0], "page_faults_decode": timed.faults[1]}


def start_clock(session: Session) -> None:
    """The run's time origin (also the power sampler's) and its memory tracker."""
    session.memory = MemoryTracker(next(session.loaded.model.parameters()).device)
    session.original_forward = session.loaded.model.__dict__.get("forward")
    session.origin = session.clock.mark()
    session.sections = Timer(session.clock, origin=session.origin)  # no mark of its own
    session.host_origin_ns = time.perf_counter_ns()  # the power sampler's time base


def run_sample(session: Session, sink: RunSink | None, i: int) -> None:
    """Sample `i` (warm-up or measured): progress, the timed generation, the live write."""
    config, result = session.config, session.result
    n_warm = config.warmup_effective
    warm = i < n_warm
    if warm:
        session.progress("warmup", i + 1, n_warm)
    else:
        session.progress("sample", i - n_warm + 1, config.samples)
    result.samples.append(_measure_sample(session, i, session.batches[i]))
    smp = result.samples[-1]
    session.progress.generated(smp.new_tokens * smp.batch_size)
    if config.compile and i == 0:
        result.phases["compile_first_call_ms"] = result.samples[0].total_ms
    _publish(sink, result, session.profiler, warm)


def samples_done(session: Session) -> None:
    """Every sample measured: the compile cost, and the run is finished."""
    result = session.result
    if session.config.compile and result.measured:
        warm_mean = sum(s.total_ms for s in result.measured) / len(result.measured)
        cold = result.phases["compile_first_call_ms"]
        result.phases["compile_ms"] = max(0.0, cold - warm_mean)
    if session.cache_probe is not None and session.cache_probe.seen:
        seen = session.cache_probe.seen
        result.checks["cache"] = {
            "form": session.config.cache,
            "class": seen["class"],
            "layer_classes": seen["layer_classes"],
            "kv_bytes": seen["kv_bytes"],
            "kv_mib": seen["kv_bytes"] / 2**20,
        }
    if session.speculator is not None:
        check = greedy_check(session.speculator, session.config.new_tokens)
        result.checks["speculation"] = {**session.speculator.summary(), **check}
        if check["matches_greedy"] is False:
            result.notes.append(
                f"decoding {session.config.decoding} changed the output: it differs from plain "
                f"greedy decoding from token {check['first_difference_at_token']} of the first "
                "measured sample (speculation verified greedily must not change it)"
            )
    result.status = "finished"


def stopped(session: Session, exc: BaseException) -> BaseException:
    """The run ended early: terminated (Ctrl-C, SIGTERM, SIGHUP) or failed; returns `exc`."""
    result = session.result
    if isinstance(exc, KeyboardInterrupt):  # Ctrl-C, or SIGTERM/SIGHUP (run/signals.py)
        result.status = "terminated"
        result.error = (
            f"terminated by {exc.signal_name}"
            if isinstance(exc, Terminated)
            else "interrupted by the user (Ctrl-C)"
        )
    else:
        result.status, result.error = "failed", f"{type(exc).__name__}: {exc}"
    return exc


def _sample_loop(session: Session, sink: RunSink | None) -> BaseException | None:
    """Warm-up and measured samples; sets the run's status. Returns the failure, if any.

    Ctrl-C, SIGTERM and SIGHUP mark the run terminated, any other exception marks it failed;
    either is returned (not raised), so the partial data is stored first.
    """
    start_clock(session)
    try:
        attach_instruments(session)
        for i in range(len(session.batches)):
            run_sample(session, sink, i)
        samples_done(session)
    except (KeyboardInterrupt, Exception) as exc:  # SystemExit and the like pass through
        return stopped(session, exc)
    return None


def tear_down(session: Session) -> None:
    """Detach hooks (keeping their tables), restore the forward, stop the energy sampler."""
    result, profiler = session.result, session.profiler
    if session.speculator is not None:
        session.speculator.detach()
    if session.cache_probe is not None:
        session.cache_probe.detach()
    if session.nvtx is not None:
        session.nvtx.detach()
    if profiler is not None:
        profiler.detach()
        offset = session.clock.elapsed_ms(session.origin, profiler.origin) + _load_offset(result)
        _attach_layers(result, profiler, offset, session.window_us, session.probed_step_us)
    if session.sections is not None and session.sections.sections:
        rows = session.sections.rows(session.origin, _load_offset(result))
        result.layers["sections"] = rows  # beside the layers; the trace shows them too
    if session.config.compile:
        model = session.loaded.model
        if session.original_forward is None:
            model.__dict__.pop("forward", None)
        else:
            model.forward = session.original_forward
    if session.sampler is not None:
        session.sampler.stop()
    if session.sources is not None:
        session.sources.close()


def profile(
    config: RunConfig,
    *,
    sink: RunSink | None = None,
    loaded: LoadedModel | None = None,
    on_progress: ProgressFn | None = None,
    sweep_id: str | None = None,
    knobs: dict[str, KnobValue] | None = None,
    before_finish: Callable[[RunResult], None] | None = None,
) -> RunResult:
    """Run and measure one configuration.

    Args:
        config: what to run; validated first.
        sink: keeps the run (usually a `Store`); None keeps it only in the returned result.
        loaded: an already loaded model (its load time is then not part of this run).
        on_progress: called as work advances, for progress bars.
        sweep_id: the sweep this run belongs to (stored with it).
        knobs: values of model knobs applied by the caller (top_k, active_layers, ...),
            recorded beside the configuration's own knob values.
        before_finish: called with the result of a finished run just before it is stored
            (a sweep verifies its knobs there, so the evidence goes in the same transaction).

    Raises:
        UserError: bad configuration, model or prompts (nothing stored).
        GenerationFailed: generation raised; the run is stored as failed first.
    """
    progress = LiveProgress(sink, config.model, on_progress)
    try:
        with stop_on_signals():  # SIGTERM/SIGHUP store the run as terminated, like Ctrl-C
            return _profile(config, sink, loaded, progress, sweep_id, knobs, before_finish)
    finally:
        progress.end()  # finished, failed, interrupted or refused: the live line goes


def _profile(
    config: RunConfig,
    sink: RunSink | None,
    loaded: LoadedModel | None,
    progress: LiveProgress,
    sweep_id: str | None,
    knobs: dict[str, Any] | None,
    before_finish: Callable[[RunResult], None] | None,
) -> RunResult:
    """`profile` inside its progress line."""
    if sink is not None:  # a locked database: refused now, not after the model loads
        sink.probe_write()
    session = set_up_session(config, loaded, progress, sweep_id, knobs)
    register_session(session, sink)
    threads_before = _set_threads(session)
    # Everything alive now (model, torch, transformers: ~10^6 objects) moves to the collector's
    # permanent generation for the run, so the collections that run between samples scan only
    # what the run itself allocates: a full pass over this heap takes 50-250 ms.
    gc.freeze()
    host = HostWatch()
    try:
        failure = _sample_loop(session, sink)
    finally:
        try:
            _note_host(session, host)
            tear_down(session)
        finally:
            gc.unfreeze()
            _restore_threads(threads_before)
    return close_session(session, sink, failure, before_finish)


def _set_threads(session: Session) -> int:
    """Give torch `--threads` threads for the run (recorded as the run's); the count before.

    Process-wide in torch, so it is put back after the run (a notebook's next cell, the next
    point of a sweep) by `_restore_threads`.
    """
    import torch

    before = int(torch.get_num_threads())
    if session.config.threads is not None:
        torch.set_num_threads(session.config.threads)
        session.result.device["torch_threads"] = session.config.threads
    return before


def _restore_threads(count: int) -> None:
    import torch

    if torch.get_num_threads() != count:
        torch.set_num_threads(count)


def _note_host(session: Session, watch: HostWatch) -> None:
    """What else the machine did while the samples ran, kept on the run's device document."""
    import torch

    session.result.device["host"] = watch.stop(int(torch.get_num_threads())).to_dict()


def close_session(
    session: Session,
    sink: RunSink | None,
    failure: BaseException | None,
    before_finish: Callable[[RunResult], None] | None = None,
) -> RunResult:
    """After `tear_down`: energy, the finish hook, one transaction; then raise the failure."""
    result = session.result
    _attach_energy(session)
    if before_finish is not None and result.status == "finished":
        before_finish(result)
    if sink is not None:
        sink.finish_run(result)  # one transaction, also for failed runs (partial data kept)
    if isinstance(failure, KeyboardInterrupt):
        raise failure
    if failure is not None:
        raise GenerationFailed(result.run_id, failure) from failure
    return result


def _load_offset(result: RunResult) -> float:
    """Where the run's timeline resumes after load and move to device (ms)."""
    return sum(result.phases.get(k, 0.0) for k in ("load_ms", "to_device_ms"))


def _records(table: Any) -> list[dict[str, Any]]:
    """A DataFrame as JSON-ready rows (NaN as None)."""
    rows: list[dict[str, Any]] = table.astype(object).where(table.notna(), None).to_dict("records")
    return rows


def _attach_layers(
    result: RunResult,
    profiler: Profiler,
    offset_ms: float,
    window_us: float | None = None,
    probed_step_us: float = 0.0,
) -> None:
    """Per-layer tables, packed records, notes and the timed windows' cost (after a failure too)."""
    layer_profile = profiler.result()
    result.trace = {**layer_profile.packed_trace(), "offset_ms": offset_ms}
    # the frames' columns are the row documents' keys (tests/run/test_documents.py holds them)
    result.layers = cast("LayersDoc", {n: _records(df) for n, df in layer_profile.tables().items()})
    result.notes.extend(layer_profile.notes)
    if window_us is not None and result.measured:
        summary = result.summary()
        cfg = profiler.config
        result.instrument_cost = estimate(
            window_us,
            profiler.windows_per_step(),
            summary["ttft_ms"].p50,
            summary["tpot_ms"].p50,
            probes=cfg.deep_ops,
            us_per_probed_step=probed_step_us,
            probed_decode_share=profiler.probed_share("decode") if cfg.capture_activations else 0,
            unit="profiler events" if profiler.compiled else "timed windows",
        )


def _attach_energy(session: Session) -> None:
    """Energy per run, sample, phase and layer from the sampler's trace (or why there is none)."""
    result, sampler = session.result, session.sampler
    if sampler is None:
        result.energy = unavailable_energy(session.missing)
        return
    trace = sampler.trace(origin_ns=session.host_origin_ns).shifted(_load_offset(result))
    attribute(
        result,
        trace,
        methods=session.sources.methods() if session.sources is not None else {},
        missing=session.missing,
        grid_g_per_kwh=session.config.grid_g_per_kwh,
    )
    result.power = trace.to_doc()


def _publish(
    sink: RunSink | None, result: RunResult, profiler: Profiler | None, warm: bool
) -> None:
    """Keep the sample just measured (and the per-layer table so far) for live views.

    Outside the timed generation; sinks without live writes (tests, the Python API's None)
    simply keep everything at the end.
    """
    if not isinstance(sink, LiveSink) or result.run_id is None:
        return
    try:
        sink.add_sample(result.run_id, result.samples[-1])
        if profiler is not None and not warm:
            table = profiler.result().layers()
            blocks = _records(table[table["kind"] == "block"])  # the `layers` frame's columns
            sink.live_layers(result.run_id, cast("list[LayerRowDoc]", blocks))
    except UserError as exc:  # a busy database must not cost the measurement: all is kept at
        note = f"live updates paused: {exc.problem}"  # the end in one transaction anyway
        if note not in result.notes:
            result.notes.append(note)
