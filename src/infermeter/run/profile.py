"""Profile one configuration: load, (compile), then warm-up and measured generations.

Phases: load (build or read the weights), to_device, compile (cold first call, when asked), and
per sample prefill (TTFT) and decode (every step). Results go to an optional `RunSink` (the
store): the run is registered as `running` before the first generation, so a killed process
leaves a trace, and all samples are written in one transaction at the end, also when
generation raises (status `failed`, error kept, samples so far kept).
"""

from __future__ import annotations

import datetime as dt
import gc
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from infermeter.errors import GenerationFailed, UserError
from infermeter.instrument import Profiler, ProfilingConfig
from infermeter.measure.clock import clock_for
from infermeter.measure.device import describe_device
from infermeter.measure.energy.sampler import PowerSampler
from infermeter.measure.energy.select import open_source
from infermeter.measure.memory import MemoryTracker
from infermeter.models.loader import LoadedModel, load_model
from infermeter.models.shape import shape_of
from infermeter.run.config import RunConfig
from infermeter.run.energy import attribute, unavailable_energy
from infermeter.run.environment import library_versions
from infermeter.run.generation import generation_config, timed_generate
from infermeter.run.results import RunResult, SampleResult
from infermeter.workloads.corpus import read_prompts_file
from infermeter.workloads.prompts import VisionInput, WorkloadSpec, build_batches

#: on_progress(stage, done, total): stage is "load", "compile", "warmup" or "sample".
ProgressFn = Callable[[str, int, int], None]


class RunSink(Protocol):
    """Where a run is kept while and after it runs (implemented by `infermeter.store.Store`)."""

    def begin_run(self, result: RunResult) -> str:
        """Register a running run; return its id."""
        ...

    def finish_run(self, result: RunResult) -> None:
        """Write status, phases and all samples in one transaction."""
        ...


def _vision_input(loaded: LoadedModel) -> VisionInput | None:
    v = loaded.info.vision
    if v is None:
        return None
    token_id = getattr(loaded.model.config, "image_token_id", None)
    if token_id is None:
        token_id = getattr(loaded.model.config, "image_token_index", None)
    if token_id is None:
        return None
    return VisionInput(v.image_size, int(token_id), v.tokens_per_image)


def _check_context(config: RunConfig, loaded: LoadedModel, longest_prompt: int) -> None:
    limit = loaded.info.max_positions
    if limit and longest_prompt + config.new_tokens > limit:
        raise UserError(
            f"prompt ({longest_prompt} tokens) + --new-tokens {config.new_tokens} exceed the "
            f"context of {loaded.info.spec} ({limit} positions)",
            f"keep prompt + new tokens <= {limit}",
        )


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def profile(
    config: RunConfig,
    *,
    sink: RunSink | None = None,
    loaded: LoadedModel | None = None,
    on_progress: ProgressFn | None = None,
    sweep_id: str | None = None,
    knobs: dict[str, Any] | None = None,
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
    import torch

    config.validate()
    progress = on_progress or (lambda stage, done, total: None)
    prompts = config.prompts
    if prompts is None and config.prompts_file:
        prompts = tuple(read_prompts_file(config.prompts_file))
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
    model, tokenizer, info = loaded.model, loaded.tokenizer, loaded.info
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    n_warm, n_meas = config.warmup_effective, config.samples
    spec = WorkloadSpec(
        batch_size=config.batch_size,
        prompt_tokens=config.prompt_tokens,
        prompts=prompts,
        chat=config.chat,
        seed=config.seed,
    )
    batches = build_batches(tokenizer, spec, n_warm + n_meas, _vision_input(loaded))
    _check_context(config, loaded, max(b.input_ids.shape[1] for b in batches))
    gen_config = generation_config(
        tokenizer,
        config.new_tokens,
        decoding=config.decoding,
        temperature=config.temperature,
        top_p=config.top_p,
        top_k=config.sample_top_k,
    )
    result = RunResult(
        run_id=None,
        config=config.to_dict(),
        knobs={**config.knob_values(), **(knobs or {})},
        model_info={**info.to_dict(), "shape": shape_of(model).to_dict()},
        device=describe_device(device),
        versions=library_versions(),
        created=_now(),
        phases=dict(loaded.timings),
        sweep_id=sweep_id,
    )
    if info.vision is not None and batches[0].vision_tokens == 0:
        result.notes.append("vision model profiled text-only: its image token id is unknown")
    clock = clock_for(device)
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
    profiler = Profiler(model, prof_config, clock=clock) if prof_config.hooks_needed else None
    # An explicitly named source that is missing is a UserError here, before anything is stored.
    sources, missing = open_source(config.energy, config.power_interval_ms)
    sampler = PowerSampler(sources, config.power_interval_ms) if sources is not None else None
    if sink is not None:  # registered only once every user error has been ruled out
        try:
            result.run_id = sink.begin_run(result)
        except BaseException:
            if sources is not None:
                sources.close()  # powermetrics runs a process: never leave it behind
            raise
    memory = MemoryTracker(device)
    original_forward = model.__dict__.get("forward")
    origin = clock.mark()
    host_origin_ns = time.perf_counter_ns()  # the power sampler's time base, at `origin`
    failure: BaseException | None = None
    # Everything alive now (model, torch, transformers: ~10^6 objects) moves to the collector's
    # permanent generation for the run, so the collections that run between samples scan only
    # what the run itself allocates: a full pass over this heap takes 50-250 ms.
    gc.freeze()
    try:
        if sampler is not None:
            sampler.start()
        if profiler is not None:
            profiler.attach()
        if config.compile:
            model.forward = torch.compile(model.forward)
        for i, batch in enumerate(batches):
            warm = i < n_warm
            if warm:
                progress("warmup", i + 1, n_warm)
            else:
                progress("sample", i - n_warm + 1, n_meas)
            if profiler is not None:
                profiler.enabled = not warm  # warm-up samples are not instrumented
            if config.decoding == "sampling":
                torch.manual_seed(config.seed + i)
            memory.reset()
            if sampler is not None:
                sampler.read_now()  # a reading at each sample's edges, outside the timed call
            # A cyclic-GC pass over this heap takes 50-250 ms: with the collector paused during
            # the call none can land inside a measured generation; it runs between samples.
            # (A forced gc.collect() per sample did the same job at 250 ms a sample.)
            gc.disable()
            try:
                timed = timed_generate(
                    model,
                    batch.generate_kwargs(device, dtype),
                    gen_config,
                    clock,
                    config.new_tokens,
                )
            finally:
                gc.enable()
            if sampler is not None:
                sampler.read_now()
            ttft, steps = timed.durations(clock)
            new_ids = timed.output_ids[:, timed.input_length :]
            result.samples.append(
                SampleResult(
                    index=i,
                    warmup=warm,
                    batch_size=batch.input_ids.shape[0],
                    prompt_tokens=max(batch.prompt_tokens),
                    new_tokens=len(timed.marks),
                    vision_tokens=batch.vision_tokens,
                    start_ms=clock.elapsed_ms(origin, timed.start) + _load_offset(result),
                    ttft_ms=ttft,
                    step_ms=tuple(steps),
                    memory=memory.read().to_dict(),
                    output_text=tuple(tokenizer.batch_decode(new_ids, skip_special_tokens=True)),
                    prompt_text=tuple(batch.texts),
                )
            )
            if config.compile and i == 0:
                result.phases["compile_first_call_ms"] = result.samples[0].total_ms
            _publish(sink, result, profiler, warm)
        if config.compile and result.measured:
            warm_mean = sum(s.total_ms for s in result.measured) / len(result.measured)
            cold = result.phases["compile_first_call_ms"]
            result.phases["compile_ms"] = max(0.0, cold - warm_mean)
        result.status = "finished"
    except KeyboardInterrupt:
        result.status, result.error = "failed", "interrupted by the user (Ctrl-C)"
    except Exception as exc:
        result.status, result.error = "failed", f"{type(exc).__name__}: {exc}"
        failure = exc
    finally:
        if profiler is not None:
            profiler.detach()
            offset = clock.elapsed_ms(origin, profiler.origin) + _load_offset(result)
            _attach_layers(result, profiler, offset)
        if config.compile:
            if original_forward is None:
                model.__dict__.pop("forward", None)
            else:
                model.forward = original_forward
        if sampler is not None:
            sampler.stop()
            sources.close()
        gc.unfreeze()
    _attach_energy(result, sampler, host_origin_ns, missing, config.grid_g_per_kwh)
    if before_finish is not None and result.status == "finished":
        before_finish(result)
    _finish(sink, result)  # one transaction, also for failed runs (partial data kept)
    if result.status == "failed":
        if failure is None:
            raise KeyboardInterrupt
        raise GenerationFailed(result.run_id, failure) from failure
    return result


def _load_offset(result: RunResult) -> float:
    """Where the run's timeline resumes after load and move to device (ms)."""
    return sum(result.phases.get(k, 0.0) for k in ("load_ms", "to_device_ms"))


def _attach_layers(result: RunResult, profiler: Profiler, offset_ms: float) -> None:
    """Per-layer tables, packed records and the profiler's notes (also after a failure)."""
    layer_profile = profiler.result()
    result.trace = {**layer_profile.packed_trace(), "offset_ms": offset_ms}
    result.layers = {
        name: df.astype(object).where(df.notna(), None).to_dict("records")
        for name, df in layer_profile.tables().items()
    }
    result.notes.extend(layer_profile.notes)


def _attach_energy(
    result: RunResult,
    sampler: PowerSampler | None,
    host_origin_ns: int,
    missing: list,
    grid_g_per_kwh: float | None,
) -> None:
    """Energy per run, sample, phase and layer from the sampler's trace (or why there is none)."""
    if sampler is None:
        result.energy = unavailable_energy(missing)
        return
    trace = sampler.trace(origin_ns=host_origin_ns).shifted(_load_offset(result))
    attribute(
        result,
        trace,
        methods=sampler.source.methods(),
        missing=missing,
        grid_g_per_kwh=grid_g_per_kwh,
    )
    result.power = {
        "source": trace.source,
        "domains": trace.domains,
        "t_ms": trace.t_ms.tolist(),
        "joules": trace.joules.tolist(),
    }


def _publish(
    sink: RunSink | None, result: RunResult, profiler: Profiler | None, warm: bool
) -> None:
    """Keep the sample just measured (and the per-layer table so far) for live views.

    Outside the timed generation; sinks without these methods (tests, the Python API's None)
    simply keep everything at the end.
    """
    if sink is None or result.run_id is None:
        return
    try:
        add = getattr(sink, "add_sample", None)
        if add is not None:
            add(result.run_id, result.samples[-1])
        live = getattr(sink, "live_layers", None)
        if live is not None and profiler is not None and not warm:
            table = profiler.result().layers()
            rows = table[table["kind"] == "block"]
            live(result.run_id, rows.astype(object).where(rows.notna(), None).to_dict("records"))
    except UserError as exc:  # a busy database must not cost the measurement: all is kept at
        note = f"live updates paused: {exc.problem}"  # the end in one transaction anyway
        if note not in result.notes:
            result.notes.append(note)


def _finish(sink: RunSink | None, result: RunResult) -> None:
    if sink is not None:
        sink.finish_run(result)
